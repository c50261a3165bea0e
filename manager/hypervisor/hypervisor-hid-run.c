/*
 * Running a HID plan: one QMP command per step, with the keys and buttons held down tracked
 * so that a plan failing part-way never leaves one pressed in the guest.
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

gboolean
carrel_hypervisor_hid_run(CarrelHypervisor *hv, const char *name, GPtrArray *plan, GError **error)
{
    g_autoptr(GHashTable) held = g_hash_table_new_full(g_str_hash, g_str_equal, g_free, NULL);

    g_return_val_if_fail(hv != NULL && name != NULL && plan != NULL, FALSE);
    for (guint i = 0; i < plan->len; i++) {
        const CarrelHidStep *step = g_ptr_array_index(plan, i);
        g_autofree char *command = carrel_hypervisor_hid_command(step);

        if (!command) {
            g_usleep((gulong)step->delay_ms * 1000);
            continue;
        }
        if (!hv->ops->hid_send(hv, name, command, error)) {
            release_held(hv, name, held);
            g_prefix_error(error, "domain '%s': sending input (step %u of %u): ", name, i + 1,
                           plan->len);
            return FALSE;
        }
        track_step(held, step->arguments);
    }
    return TRUE;
}
