/*
 * Running a HID plan: one QMP command per step, with the keys and buttons held down tracked
 * so that a plan failing part-way never leaves one pressed in the guest, and each step sent only
 * once the guest's input queue has room for it: QEMU drops a frame the guest has no buffers for,
 * silently, and a guest under TCG on a busy host can fall behind a typed line.
 */
#define CARREL_HYPERVISOR_PRIV_H_ALLOW
#include "hypervisor/hypervisor-priv.h"

/* "key:<qcode>" or "btn:<button>" -> TRUE while down. The steps are ours, so parsing is safe. */
static void
track_step(GHashTable *held, const char *arguments)
{
    g_autoptr(JsonNode) root = json_from_string(arguments, NULL);
    JsonArray *events;

    if (!root || !JSON_NODE_HOLDS_OBJECT(root))
        return;
    events = json_object_get_array_member(json_node_get_object(root), "events");
    for (guint i = 0; events && i < json_array_get_length(events); i++) {
        JsonObject *ev = json_array_get_object_element(events, i);
        const char *type = json_object_get_string_member_with_default(ev, "type", "");
        JsonObject *data = json_object_get_object_member(ev, "data");
        const char *what = NULL;
        g_autofree char *key = NULL;

        if (!data)
            continue;
        if (g_str_equal(type, "key") && json_object_has_member(data, "key"))
            what = json_object_get_string_member_with_default(
                json_object_get_object_member(data, "key"), "data", NULL);
        else if (g_str_equal(type, "btn"))
            what = json_object_get_string_member_with_default(data, "button", NULL);
        if (!what)
            continue;
        key = g_strdup_printf("%s:%s", type, what);
        if (json_object_get_boolean_member_with_default(data, "down", FALSE))
            g_hash_table_add(held, g_steal_pointer(&key));
        else
            g_hash_table_remove(held, key);
    }
}

/* Releases whatever is still held, ignoring errors (the guest may be gone). */
static void
release_held(CarrelHypervisor *hv, const char *name, GHashTable *held)
{
    GHashTableIter iter;
    gpointer key;

    g_hash_table_iter_init(&iter, held);
    while (g_hash_table_iter_next(&iter, &key, NULL)) {
        const char *item = key;
        g_autofree char *command = NULL;

        if (g_str_has_prefix(item, "key:"))
            command = g_strdup_printf("{\"execute\":\"input-send-event\",\"arguments\":{\"events\":"
                                      "[{\"type\":\"key\",\"data\":{\"down\":false,\"key\":{"
                                      "\"type\":\"qcode\",\"data\":\"%s\"}}}]}}",
                                      item + 4);
        else
            command = g_strdup_printf("{\"execute\":\"input-send-event\",\"arguments\":{\"events\":"
                                      "[{\"type\":\"btn\",\"data\":{\"down\":false,\"button\":"
                                      "\"%s\"}}]}}",
                                      item + 4);
        (void)hv->ops->hid_send(hv, name, command, NULL);
    }
}

/* What is known of one device's queue during a plan. */
typedef struct {
    char *where;    /* the backend's note of the device */
    guint room;     /* buffers known to be free */
    gboolean blind; /* the backend cannot tell: send unpaced */
} Queue;

/* Events per device in a step, each device's frame ending with a SYN event of its own. */
static void
count_events(const char *arguments, guint need[2])
{
    g_autoptr(JsonNode) root = json_from_string(arguments, NULL);
    JsonArray *events = root && JSON_NODE_HOLDS_OBJECT(root)
                            ? json_object_get_array_member(json_node_get_object(root), "events")
                            : NULL;

    need[CARREL_HID_KEYBOARD] = need[CARREL_HID_TABLET] = 0;
    for (guint i = 0; events && i < json_array_get_length(events); i++) {
        JsonObject *ev = json_array_get_object_element(events, i);
        const char *type = ev ? json_object_get_string_member_with_default(ev, "type", "") : "";

        need[g_str_equal(type, "key") ? CARREL_HID_KEYBOARD : CARREL_HID_TABLET]++;
    }
    for (guint d = 0; d < 2; d++)
        need[d] += need[d] ? 1 : 0;
}

/* Waits until device's queue has room for need events, and counts them as used. */
static gboolean
wait_room(CarrelHypervisor *hv, const char *name, CarrelHidDevice device, Queue *q, guint need,
          GError **error)
{
    gint64 end = g_get_monotonic_time() + (gint64)hv->hid_wait_ms * 1000;

    if (need == 0 || q->blind)
        return TRUE;
    while (q->room < need) {
        /* A backend that cannot tell (or fails to) sends as it did before pacing: the send
         * itself reports a domain that is gone. */
        if (!hv->ops->hid_room || !hv->ops->hid_room(hv, name, device, &q->where, &q->room, NULL)) {
            q->blind = TRUE;
            return TRUE;
        }
        if (q->room >= need)
            break;
        if (g_get_monotonic_time() >= end) {
            g_set_error(error, CARREL_ERROR, CARREL_ERROR_TIMEOUT,
                        "the guest took none of its %s input for %.1f s (its %u free buffers are "
                        "fewer than the %u the next step needs): it may be hung or starved",
                        device == CARREL_HID_KEYBOARD ? "keyboard" : "pointer",
                        hv->hid_wait_ms / 1000.0, q->room, need);
            return FALSE;
        }
        g_usleep(CARREL_HID_ROOM_POLL_MS * 1000);
    }
    q->room -= need;
    return TRUE;
}

/* Room for every device step's events, or the error that says why not. */
static gboolean
make_room(CarrelHypervisor *hv, const char *name, Queue queues[2], const char *arguments,
          GError **error)
{
    guint need[2];

    count_events(arguments, need);
    return wait_room(hv, name, CARREL_HID_KEYBOARD, &queues[CARREL_HID_KEYBOARD],
                     need[CARREL_HID_KEYBOARD], error) &&
           wait_room(hv, name, CARREL_HID_TABLET, &queues[CARREL_HID_TABLET],
                     need[CARREL_HID_TABLET], error);
}

gboolean
carrel_hypervisor_hid_run(CarrelHypervisor *hv, const char *name, GPtrArray *plan, GError **error)
{
    g_autoptr(GHashTable) held = g_hash_table_new_full(g_str_hash, g_str_equal, g_free, NULL);
    Queue queues[2] = {{0}};
    gboolean ok = FALSE;

    g_return_val_if_fail(hv != NULL && name != NULL && plan != NULL, FALSE);
    for (guint i = 0; i < plan->len; i++) {
        const CarrelHidStep *step = g_ptr_array_index(plan, i);
        g_autofree char *command = carrel_hypervisor_hid_command(step);

        if (!command) {
            g_usleep((gulong)step->delay_ms * 1000);
            continue;
        }
        if (!make_room(hv, name, queues, step->arguments, error) ||
            !hv->ops->hid_send(hv, name, command, error)) {
            release_held(hv, name, held);
            g_prefix_error(error, "domain '%s': sending input (step %u of %u): ", name, i + 1,
                           plan->len);
            goto out;
        }
        track_step(held, step->arguments);
    }
    ok = TRUE;
out:
    g_free(queues[CARREL_HID_KEYBOARD].where);
    g_free(queues[CARREL_HID_TABLET].where);
    return ok;
}
