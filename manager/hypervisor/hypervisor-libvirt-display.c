/*
 * The libvirt backend: the screen (screenshots, the SPICE display and its password) and HID
 * events (QMP input-send-event through libvirt's QEMU monitor passthrough).
 */
#include <stdlib.h>

#define CARREL_HYPERVISOR_PRIV_H_ALLOW
#include "hypervisor/hypervisor-libvirt-priv.h"

/* The live XML of a domain (without secrets). */
static char *
live_xml(virDomainPtr dom, GError **error)
{
    char *desc = virDomainGetXMLDesc(dom, 0);
    char *copy;

    if (!desc) {
        carrel_hypervisor_libvirt_set_error(error, "reading domain xml");
        return NULL;
    }
    copy = g_strdup(desc);
    free(desc);
    return copy;
}

gboolean
carrel_hypervisor_libvirt_spice_info(CarrelHypervisor *hv, const char *name,
                                     CarrelSpiceInfo *ret_info, GError **error)
{
    CarrelLibvirtBackend *be = hv->backend_data;
    g_autoptr(virDomain) dom = carrel_hypervisor_libvirt_lookup(be, name, error);
    g_autofree char *xml = dom ? live_xml(dom, error) : NULL;

    return xml && carrel_hypervisor_spice_scan(xml, NULL, 0, ret_info, NULL, error);
}

gboolean
carrel_hypervisor_libvirt_vnc_socket(CarrelHypervisor *hv, const char *name, char **ret_path,
                                     GError **error)
{
    CarrelLibvirtBackend *be = hv->backend_data;
    g_autoptr(virDomain) dom = carrel_hypervisor_libvirt_lookup(be, name, error);
    g_autofree char *xml = dom ? live_xml(dom, error) : NULL;

    return xml && carrel_hypervisor_vnc_scan(xml, ret_path, error);
}

gboolean
carrel_hypervisor_libvirt_spice_password(CarrelHypervisor *hv, const char *name,
                                         const char *password, gint64 valid_until, GError **error)
{
    CarrelLibvirtBackend *be = hv->backend_data;
    g_autoptr(virDomain) dom = NULL;
    g_autofree char *xml = NULL;
    g_autofree char *graphics = NULL;

    if (carrel_hypervisor_libvirt_refuse_on_test(be, "setting a SPICE password", error) ||
        !(dom = carrel_hypervisor_libvirt_lookup(be, name, error)) ||
        !(xml = live_xml(dom, error)) ||
        !carrel_hypervisor_spice_scan(xml, password, valid_until, NULL, &graphics, error))
        return FALSE;
    /* The live element as it is (libvirt refuses changes of listen or port), plus the password. */
    if (virDomainUpdateDeviceFlags(dom, graphics, VIR_DOMAIN_AFFECT_LIVE) < 0) {
        carrel_hypervisor_libvirt_set_error(error, "updating the graphics device");
        return FALSE;
    }
    return TRUE;
}

typedef struct {
    GByteArray *data;
    gboolean overflow;
} ScreenSink;

/* Must return the bytes it consumed: anything else makes virStreamRecvAll spin or abort. */
static int
screen_sink(virStreamPtr st, const char *data, size_t nbytes, void *opaque)
{
    ScreenSink *sink = opaque;

    if (nbytes > CARREL_HYPERVISOR_SCREENSHOT_MAX - sink->data->len) {
        sink->overflow = TRUE;
        return -1;
    }
    g_byte_array_append(sink->data, (const guint8 *)data, (guint)nbytes);
    return (int)nbytes;
}

static gboolean
receive_screen(virStreamPtr st, ScreenSink *sink, GError **error)
{
    /* On failure virStreamRecvAll has already aborted the stream. */
    if (virStreamRecvAll(st, screen_sink, sink) < 0) {
        if (sink->overflow) {
            virResetLastError();
            g_set_error(error, CARREL_ERROR, CARREL_ERROR_LIMIT, "screenshot exceeds %d bytes",
                        CARREL_HYPERVISOR_SCREENSHOT_MAX);
        } else {
            carrel_hypervisor_libvirt_set_error(error, "receiving screenshot");
        }
        return FALSE;
    }
    if (virStreamFinish(st) < 0) {
        carrel_hypervisor_libvirt_set_error(error, "finishing screenshot");
        return FALSE;
    }
    return TRUE;
}

/* Fast screenshots stop being tried after this many misses in a row (a QEMU or a confinement
 * that refuses fd sets): each miss costs three monitor round trips before the fallback. */
#define SCREENDUMP_MISSES_MAX 3

/* virDomainScreenshot: QEMU encodes PNG (7.1 and later) or PPM, streamed through libvirtd. */
static gboolean
libvirt_screenshot(CarrelLibvirtBackend *be, virDomainPtr dom, GBytes **ret_image, GError **error)
{
    g_autoptr(virStream) st = NULL;
    g_autoptr(GByteArray) data = NULL;
    ScreenSink sink = {0};
    char *mime;
    gboolean known;

    st = virStreamNew(carrel_hypervisor_libvirt_conn(be), 0);
    if (!st) {
        carrel_hypervisor_libvirt_set_error(error, "creating screenshot stream");
        return FALSE;
    }
    mime = virDomainScreenshot(dom, st, 0, 0);
    if (!mime) {
        carrel_hypervisor_libvirt_set_error(error, "taking screenshot");
        return FALSE;
    }
    /* QEMU >= 7.1 gives PNG, older ones PPM; the dispatcher tells them apart by content. */
    known = g_str_equal(mime, "image/png") || g_str_equal(mime, "image/x-portable-pixmap");
    if (!known) {
        g_set_error(error, CARREL_ERROR, CARREL_ERROR_UNSUPPORTED,
                    "screenshot type '%s' is not png or ppm",
                    carrel_util_is_clean_text(mime) ? mime : "?");
        free(mime);
        if (virStreamAbort(st) < 0)
            virResetLastError();
        return FALSE;
    }
    free(mime);
    data = g_byte_array_new();
    sink.data = data;
    if (!receive_screen(st, &sink, error))
        return FALSE;
    *ret_image = g_byte_array_free_to_bytes(g_steal_pointer(&data));
    return TRUE;
}

gboolean
carrel_hypervisor_libvirt_screenshot(CarrelHypervisor *hv, const char *name, GBytes **ret_image,
                                     GError **error)
{
    CarrelLibvirtBackend *be = hv->backend_data;
    g_autoptr(virDomain) dom = carrel_hypervisor_libvirt_lookup(be, name, error);
    g_autoptr(GError) fast = NULL;

    if (!dom)
        return FALSE;
    if (!be->is_test && g_atomic_int_get(&be->screendump_misses) < SCREENDUMP_MISSES_MAX) {
        if (carrel_hypervisor_libvirt_screendump(dom, ret_image, &fast)) {
            g_atomic_int_set(&be->screendump_misses, 0);
            return TRUE;
        }
        /* Too large is the guest's doing, not the fast path's: the slow one says the same. */
        if (g_error_matches(fast, CARREL_ERROR, CARREL_ERROR_LIMIT)) {
            g_propagate_error(error, g_steal_pointer(&fast));
            return FALSE;
        }
        g_debug("domain '%s': fast screenshot: %s", name, fast->message);
    }
    if (!libvirt_screenshot(be, dom, ret_image, error))
        return FALSE;
    if (fast)
        g_atomic_int_inc(&be->screendump_misses);
    return TRUE;
}

/* QEMU's own reply: {"return": {}} or {"error": {"class", "desc"}}. */
static gboolean
check_qmp_reply(const char *reply, GError **error)
{
    g_autoptr(JsonNode) root = json_from_string(reply, NULL);
    JsonObject *obj = root && JSON_NODE_HOLDS_OBJECT(root) ? json_node_get_object(root) : NULL;
    JsonObject *err = obj && json_object_has_member(obj, "error")
                          ? json_object_get_object_member(obj, "error")
                          : NULL;

    if (obj && !err && json_object_has_member(obj, "return"))
        return TRUE;
    g_set_error(error, CARREL_ERROR, CARREL_ERROR_HYPERVISOR, "QEMU refused input: %s",
                err ? json_object_get_string_member_with_default(err, "desc", "?")
                    : "unreadable reply");
    return FALSE;
}

gboolean
carrel_hypervisor_libvirt_hid_send(CarrelHypervisor *hv, const char *name, const char *command,
                                   GError **error)
{
    CarrelLibvirtBackend *be = hv->backend_data;
    g_autoptr(virDomain) dom = NULL;
    char *reply = NULL;
    gboolean ok;

    if (carrel_hypervisor_libvirt_refuse_on_test(be, "input-send-event", error) ||
        !(dom = carrel_hypervisor_libvirt_lookup(be, name, error)))
        return FALSE;
    if (virDomainQemuMonitorCommand(dom, command, &reply, 0) < 0) {
        carrel_hypervisor_libvirt_set_error(error, "input-send-event");
        return FALSE;
    }
    ok = check_qmp_reply(reply, error);
    free(reply);
    return ok;
}
