/*
 * Golden test of the input plans: every tests/data/input-plan/<case>.json, an object
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

#include "hypervisor/hypervisor.h"

typedef struct {
    char *json_path;
    char *txt_path;
    char *err_path;
} GoldenCase;

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
            carrel_hypervisor_input_plan(action, width, height, pointer, &pointer, error);
        g_autofree char *text = NULL;

        if (!plan)
            return NULL;
        text = carrel_hypervisor_input_plan_to_text(plan);
        g_string_append_printf(out, "# actions[%u] %s\n%s", i,
                               carrel_action_kind_to_string(action->kind), text);
    }
    g_string_append_printf(out, "# pointer %u,%u\n", pointer.x, pointer.y);
    return g_strdup(out->str);
}

static void
write_or_die(const char *path, const char *contents)
{
    g_autoptr(GError) error = NULL;

    g_file_set_contents(path, contents, -1, &error);
    g_assert_no_error(error);
}

static char *
error_text(const GError *error)
{
    return g_strdup_printf("%s: %s\n", carrel_error_code_to_string(error->code), error->message);
}

static void
regenerate(const GoldenCase *gc, const char *text, const GError *plan_error)
{
    if (plan_error) {
        g_autofree char *err = error_text(plan_error);
        write_or_die(gc->err_path, err);
        unlink(gc->txt_path);
    } else {
        write_or_die(gc->txt_path, text);
        unlink(gc->err_path);
    }
}

/* Reports the first line where actual and expected differ, then marks the test failed. */
static void
report_difference(const char *path, const char *actual, const char *expected)
{
    g_auto(GStrv) got = g_strsplit(actual, "\n", -1);
    g_auto(GStrv) want = g_strsplit(expected, "\n", -1);
    guint i = 0;

    while (got[i] && want[i] && g_str_equal(got[i], want[i]))
        i++;
    g_test_message("%s differs at line %u (CARREL_TEST_REGENERATE=1 rewrites it; review the diff)",
                   path, i + 1);
    g_test_message("  expected: %s", want[i] ? want[i] : "<end of file>");
    g_test_message("  actual:   %s", got[i] ? got[i] : "<end of output>");
    g_test_fail();
}

static void
check_expected(const GoldenCase *gc, const char *text, const GError *plan_error)
{
    g_autofree char *expected = NULL;
    g_autofree char *actual = NULL;
    g_autoptr(GError) error = NULL;
    gboolean want_error = g_file_test(gc->err_path, G_FILE_TEST_EXISTS);
    const char *path = want_error ? gc->err_path : gc->txt_path;

    if (want_error != (plan_error != NULL)) {
        g_test_message("%s: %s", gc->json_path,
                       plan_error ? plan_error->message : "expected an error, got a plan");
        g_test_fail();
        return;
    }
    if (!g_file_get_contents(path, &expected, NULL, &error)) {
        g_test_message("%s (CARREL_TEST_REGENERATE=1 writes it)", error->message);
        g_test_fail();
        return;
    }
    if (plan_error) {
        g_assert_true(plan_error->domain == CARREL_ERROR);
        actual = error_text(plan_error);
    } else {
        actual = g_strdup(text);
    }
    if (!g_str_equal(actual, expected))
        report_difference(path, actual, expected);
}

static void
test_case(gconstpointer data)
{
    const GoldenCase *gc = data;
    g_autoptr(JsonParser) parser = json_parser_new();
    g_autoptr(GError) error = NULL;
    g_autoptr(GError) plan_error = NULL;
    g_autofree char *text = NULL;
    g_autoptr(GList) members = NULL;
    JsonNode *root;

    json_parser_load_from_file(parser, gc->json_path, &error);
    g_assert_no_error(error);
    root = json_parser_get_root(parser);
    g_assert_true(root && JSON_NODE_HOLDS_OBJECT(root));
    /* A typo in a case file must not silently test something else. */
    members = json_object_get_members(json_node_get_object(root));
    for (GList *l = members; l; l = l->next) {
        if (!g_strv_contains(case_members, l->data))
            g_error("unknown member '%s' in %s", (const char *)l->data, gc->json_path);
    }
    text = run_case(json_node_get_object(root), &plan_error);
    g_assert_true((text == NULL) == (plan_error != NULL));
    if (g_strcmp0(g_getenv("CARREL_TEST_REGENERATE"), "1") == 0)
        regenerate(gc, text, plan_error);
    else
        check_expected(gc, text, plan_error);
}

static void
golden_case_free(gpointer data)
{
    GoldenCase *gc = data;

    g_free(gc->json_path);
    g_free(gc->txt_path);
    g_free(gc->err_path);
    g_free(gc);
}

static gint
compare_names(gconstpointer a, gconstpointer b)
{
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

/* Registers one test per <case>.json, sorted so the order is stable. */
static GPtrArray *
add_cases(const char *dir_path)
{
    g_autoptr(GError) error = NULL;
    g_autoptr(GDir) dir = g_dir_open(dir_path, 0, &error);
    g_autoptr(GPtrArray) names = g_ptr_array_new_with_free_func(g_free);
    GPtrArray *cases = g_ptr_array_new_with_free_func(golden_case_free);
    const char *entry;

    g_assert_no_error(error);
    while ((entry = g_dir_read_name(dir))) {
        if (g_str_has_suffix(entry, ".json"))
            g_ptr_array_add(names, g_strndup(entry, strlen(entry) - strlen(".json")));
    }
    g_ptr_array_sort(names, compare_names);
    for (guint i = 0; i < names->len; i++) {
        const char *name = g_ptr_array_index(names, i);
        GoldenCase *gc = g_new0(GoldenCase, 1);
        g_autofree char *base = g_build_filename(dir_path, name, NULL);
        g_autofree char *test_path = g_strdup_printf("/input-plan/%s", name);

        gc->json_path = g_strconcat(base, ".json", NULL);
        gc->txt_path = g_strconcat(base, ".txt", NULL);
        gc->err_path = g_strconcat(base, ".err", NULL);
        g_ptr_array_add(cases, gc);
        g_test_add_data_func(test_path, gc, test_case);
    }
    return cases;
}

int
main(int argc, char **argv)
{
    const char *data_dir = g_getenv("CARREL_TEST_DATA");
    g_autofree char *dir_path = NULL;
    g_autoptr(GPtrArray) cases = NULL;

    g_test_init(&argc, &argv, NULL);
    if (!data_dir)
        g_error("CARREL_TEST_DATA is not set");
    dir_path = g_build_filename(data_dir, "input-plan", NULL);
    cases = add_cases(dir_path);
    if (cases->len == 0)
        g_error("no cases in '%s'", dir_path);
    return g_test_run();
}
