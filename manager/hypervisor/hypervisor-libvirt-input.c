/*
 * How much room the guest's virtio input queue has. QEMU drops a whole input frame, silently,
 * when the guest has not handed back enough buffers (a guest whose vCPU the host has not run for
 * a while under TCG), so a plan that types 40 characters could lose some. QEMU's own view of the
 * queue (x-query-virtio-queue-status) is only refreshed when it runs out, so the index the guest
 * writes is read from guest memory itself (HMP xp): a fresh count, read-only, and only trusted
 * for pacing this guest's own input.
 */
#define CARREL_HYPERVISOR_PRIV_H_ALLOW
#include "hypervisor/hypervisor-libvirt-priv.h"

#include <libvirt/libvirt-qemu.h>

/* The QOM types of the two devices carrel's domains have (hypervisor-xml.c). */
static const char *
device_type(CarrelHidDevice device)
{
    return device == CARREL_HID_KEYBOARD ? "virtio-keyboard-pci" : "virtio-tablet-pci";
}

/* One QMP command's "return" member (a new reference), or NULL with the error set. */
static JsonNode *
qmp(virDomain *dom, const char *command, GError **error)
{
    char *reply = NULL;
    g_autoptr(JsonNode) root = NULL;
    JsonObject *obj;

    if (virDomainQemuMonitorCommand(dom, command, &reply, 0) < 0) {
        carrel_hypervisor_libvirt_set_error(error, "qemu-monitor-command");
        return NULL;
    }
    root = json_from_string(reply, NULL);
    free(reply);
    obj = root && JSON_NODE_HOLDS_OBJECT(root) ? json_node_get_object(root) : NULL;
    if (!obj || !json_object_has_member(obj, "return")) {
        g_set_error(error, CARREL_ERROR, CARREL_ERROR_UNSUPPORTED,
                    "QEMU cannot tell its input queue's state");
        return NULL;
    }
    return json_node_copy(json_object_get_member(obj, "return"));
}

/* "/machine/peripheral/<id>" of the device's virtio backend parent, or NULL. */
static char *
find_device(virDomain *dom, CarrelHidDevice device, GError **error)
{
    g_autoptr(JsonNode) list = qmp(dom, "{\"execute\":\"x-query-virtio\"}", error);
    JsonArray *items = list && JSON_NODE_HOLDS_ARRAY(list) ? json_node_get_array(list) : NULL;

    for (guint i = 0; items && i < json_array_get_length(items); i++) {
        JsonObject *item = json_array_get_object_element(items, i);
        const char *path = item ? json_object_get_string_member_with_default(item, "path", "") : "";
        g_autofree char *parent = NULL;
        g_autofree char *command = NULL;
        g_autoptr(JsonNode) type = NULL;

        if (!g_str_has_suffix(path, "/virtio-backend") ||
            !g_str_equal(json_object_get_string_member_with_default(item, "name", ""),
                         "virtio-input"))
            continue;
        parent = g_strndup(path, strlen(path) - strlen("/virtio-backend"));
        command = g_strdup_printf("{\"execute\":\"qom-get\",\"arguments\":{\"path\":\"%s\","
                                  "\"property\":\"type\"}}",
                                  parent);
        type = qmp(dom, command, NULL);
        if (type && JSON_NODE_HOLDS_VALUE(type) &&
            g_strcmp0(json_node_get_string(type), device_type(device)) == 0)
            return g_strdup(path);
    }
    if (error && !*error)
        g_set_error(error, CARREL_ERROR, CARREL_ERROR_UNSUPPORTED, "the domain has no %s",
                    device_type(device));
    return NULL;
}

/* The avail ring's index as the guest last wrote it: a 16-bit word after the ring's flags. */
static gboolean
read_avail_index(virDomain *dom, gint64 ring, guint *ret_index, GError **error)
{
    g_autofree char *command =
        g_strdup_printf("{\"execute\":\"human-monitor-command\",\"arguments\":{\"command-line\":"
                        "\"xp /1hu %" G_GINT64_FORMAT "\"}}",
                        ring + 2);
    g_autoptr(JsonNode) out = qmp(dom, command, error);
    const char *text = out && JSON_NODE_HOLDS_VALUE(out) ? json_node_get_string(out) : NULL;
    const char *colon = text ? strchr(text, ':') : NULL;
    g_autofree char *word = colon ? g_strstrip(g_strdup(colon + 1)) : NULL;
    guint64 index = 0;

    if (!out)
        return FALSE;
    if (!word || !g_ascii_string_to_unsigned(word, 10, 0, G_MAXUINT16, &index, NULL)) {
        g_set_error(error, CARREL_ERROR, CARREL_ERROR_UNSUPPORTED,
                    "QEMU's memory dump is unreadable");
        return FALSE;
    }
    *ret_index = (guint)index;
    return TRUE;
}

/* Buffers the guest has handed to the device and the device has not used yet. */
static gboolean
queue_room(virDomain *dom, const char *path, guint *ret_free, GError **error)
{
    g_autofree char *command = g_strdup_printf(
        "{\"execute\":\"x-query-virtio-queue-status\",\"arguments\":{\"path\":\"%s\","
        "\"queue\":0}}",
        path);
    g_autoptr(JsonNode) status = qmp(dom, command, error);
    JsonObject *obj =
        status && JSON_NODE_HOLDS_OBJECT(status) ? json_node_get_object(status) : NULL;
    gint64 ring, used, size;
    guint avail = 0;

    if (!status)
        return FALSE;
    ring = obj ? json_object_get_int_member_with_default(obj, "vring-avail", 0) : 0;
    used = obj ? json_object_get_int_member_with_default(obj, "last-avail-idx", -1) : -1;
    size = obj ? json_object_get_int_member_with_default(obj, "vring-num", 0) : 0;
    if (ring <= 0 || used < 0 || size <= 0) {
        g_set_error(error, CARREL_ERROR, CARREL_ERROR_UNSUPPORTED,
                    "the input queue is not set up (no driver in the guest yet)");
        return FALSE;
    }
    if (!read_avail_index(dom, ring, &avail, error))
        return FALSE;
    /* Indexes wrap at 16 bits; a guest writing nonsense gets at most a full ring. */
    *ret_free = MIN((guint)((avail - (guint)used) & 0xffff), (guint)size);
    return TRUE;
}

gboolean
carrel_hypervisor_libvirt_hid_room(CarrelHypervisor *hv, const char *name, CarrelHidDevice device,
                                   char **where, guint *ret_free, GError **error)
{
    CarrelLibvirtBackend *be = hv->backend_data;
    g_autoptr(virDomain) dom = NULL;

    if (carrel_hypervisor_libvirt_refuse_on_test(be, "x-query-virtio", error) ||
        !(dom = carrel_hypervisor_libvirt_lookup(be, name, error)))
        return FALSE;
    if (!*where && !(*where = find_device(dom, device, error)))
        return FALSE;
    return queue_room(dom, *where, ret_free, error);
}
