/*
 * Golden test of the HID plans: every tests/data/hid-plan/<case>.json, an object
 * {"screen": [W, H], "pointer": [X, Y], "request": BODY} where BODY is a request body of
 * POST /v1/sessions/{id}/computer in any format, is parsed (carrel_action_batch_from_json),
 * mapped to the screen (carrel_action_batch_check_bounds) and planned action after action, the
 * pointer carried from one to the next. The plans must match <case>.txt exactly: a "# actions[i]
 * KIND" line before each action's steps, one step per line, and the final pointer. When
 * <case>.err exists, the request must fail with exactly the error it holds ("code: message").
 * CARREL_TEST_REGENERATE=1 rewrites the expected files: review that diff.
 */
#include <string.h>
#include <unistd.h>

#define CARREL_HYPERVISOR_PRIV_H_ALLOW
#include "hypervisor/hypervisor-priv.h"
#include "tests/golden/golden.h"

static const char *const case_members[] = {"screen", "pointer", "request", NULL};

static void
get_pair(JsonObject *obj, const char *member, guint *ret_a, guint *ret_b)
{
    JsonArray *arr = json_object_get_array_member(obj, member);

    if (!arr || json_array_get_length(arr) != 2)
        g_error("'%s' must be a pair of integers in the case file", member);
    *ret_a = (guint)json_array_get_int_element(arr, 0);
    *ret_b = (guint)json_array_get_int_element(arr, 1);
}

/* Plans every action of the request; NULL+error when the request or a plan fails. */
static char *
run_case(JsonObject *obj, GError **error)
{
    g_autoptr(CarrelActionBatch) batch = NULL;
    g_autoptr(GString) out = g_string_new(NULL);
    guint width, height;
    CarrelPoint pointer;

    get_pair(obj, "screen", &width, &height);
    get_pair(obj, "pointer", &pointer.x, &pointer.y);
    batch = carrel_action_batch_from_json(json_object_get_member(obj, "request"), error);
    if (!batch || !carrel_action_batch_check_bounds(batch, width, height, error))
        return NULL;
    for (guint i = 0; i < batch->actions->len; i++) {
        const CarrelAction *action = g_ptr_array_index(batch->actions, i);
        g_autoptr(GPtrArray) plan =
            carrel_hypervisor_hid_plan(action, width, height, pointer, &pointer, error);
        g_autofree char *text = NULL;

        if (!plan)
            return NULL;
        text = carrel_hypervisor_hid_plan_to_text(plan);
        g_string_append_printf(out, "# actions[%u] %s\n%s", i,
                               carrel_action_kind_to_string(action->kind), text);
    }
    g_string_append_printf(out, "# pointer %u,%u\n", pointer.x, pointer.y);
    return g_strdup(out->str);
}

static char *
generate(JsonObject *root, GError **error)
{
    golden_check_members(root, case_members, "a hid-plan case");
    return run_case(root, error);
}

int
main(int argc, char **argv)
{
    return golden_main(argc, argv, "hid-plan", ".txt", generate);
}
