/*
 * The fake backend's input: the QMP input-send-event commands it was sent, in order, and a
 * guest input queue with a given room, so that pacing (hypervisor-hid-run.c) can be tested and
 * what QEMU would have dropped is counted.
 */
#define CARREL_HYPERVISOR_BACKEND_H_ALLOW
#include "hypervisor/hypervisor-backend.h"
#include "tests/fake/hypervisor-fake-priv.h"

/* Events of an input-send-event command plus the frame's SYN, as the guest's queue takes them. */
static guint
frame_events(const char *command)
{
    g_autoptr(JsonNode) root = json_from_string(command, NULL);
    JsonObject *args = root && JSON_NODE_HOLDS_OBJECT(root)
                           ? json_object_get_object_member(json_node_get_object(root), "arguments")
                           : NULL;
    JsonArray *events = args ? json_object_get_array_member(args, "events") : NULL;

    return events ? json_array_get_length(events) + 1 : 0;
}

gboolean
fake_hid_send(CarrelHypervisor *hv, const char *name, const char *command, GError **error)
{
    FakeBackend *be = hv->backend_data;
    g_autoptr(GMutexLocker) locker G_GNUC_UNUSED = g_mutex_locker_new(&be->lock);
    FakeDomain *dom;

    if (fake_take_failure(be, "hid_send", error) || !(dom = fake_find_domain(be, name, error)))
        return FALSE;
    if (dom->state != CARREL_DOMAIN_RUNNING) {
        g_set_error(error, CARREL_ERROR, CARREL_ERROR_WRONG_STATE, "domain is not running");
        return FALSE;
    }
    g_ptr_array_add(be->hid_sent, g_strdup(command));
    fake_drawing_hid(be);
    if (be->hid_room >= 0 && frame_events(command) > (guint)be->hid_room)
        be->hid_dropped++;
    else if (be->hid_room >= 0)
        be->hid_room -= (gint)frame_events(command);
    return TRUE;
}

gboolean
fake_hid_room(CarrelHypervisor *hv, const char *name, CarrelHidDevice device, char **where,
              guint *ret_free, GError **error)
{
    FakeBackend *be = hv->backend_data;
    g_autoptr(GMutexLocker) locker G_GNUC_UNUSED = g_mutex_locker_new(&be->lock);

    if (be->hid_room < 0) {
        g_set_error(error, CARREL_ERROR, CARREL_ERROR_UNSUPPORTED, "the fake cannot tell");
        return FALSE;
    }
    if (!*where)
        *where = g_strdup(device == CARREL_HID_KEYBOARD ? "keyboard" : "tablet");
    *ret_free = (guint)be->hid_room;
    be->hid_room = MIN(be->hid_room + (gint)be->hid_room_grow, 64);
    be->hid_room_calls++;
    return TRUE;
}

void
carrel_hypervisor_fake_set_hid_room(CarrelHypervisor *hv, gint room, guint grow, guint wait_ms)
{
    FakeBackend *be = hv->backend_data;
    g_autoptr(GMutexLocker) locker G_GNUC_UNUSED = g_mutex_locker_new(&be->lock);

    be->hid_room = room;
    be->hid_room_grow = grow;
    hv->hid_wait_ms = wait_ms;
}

guint
carrel_hypervisor_fake_get_hid_dropped(CarrelHypervisor *hv, guint *ret_room_calls)
{
    FakeBackend *be = hv->backend_data;
    g_autoptr(GMutexLocker) locker G_GNUC_UNUSED = g_mutex_locker_new(&be->lock);

    if (ret_room_calls)
        *ret_room_calls = be->hid_room_calls;
    return be->hid_dropped;
}

GPtrArray *
carrel_hypervisor_fake_get_hid(CarrelHypervisor *hv)
{
    FakeBackend *be = hv->backend_data;
    g_autoptr(GMutexLocker) locker G_GNUC_UNUSED = g_mutex_locker_new(&be->lock);
    GPtrArray *copy = g_ptr_array_new_with_free_func(g_free);

    for (guint i = 0; i < be->hid_sent->len; i++)
        g_ptr_array_add(copy, g_strdup(g_ptr_array_index(be->hid_sent, i)));
    return copy;
}
