/*
 * The change signal of a domain's screen: its VNC display, on a unix socket that libvirt
 * places in its own per-domain folder (root's only; nothing listens on a port). carreld
 * connects as an RFB client (hypervisor-rfb.c) only to hear when the screen changed. The XML
 * scan is pure.
 */
#include <string.h>

#define CARREL_HYPERVISOR_PRIV_H_ALLOW
#include "hypervisor/hypervisor-priv.h"
#define CARREL_HYPERVISOR_RFB_H_ALLOW
#include "hypervisor/hypervisor-rfb.h"

/* How long the RFB handshake may take: QEMU answers at once, even under TCG. */
#define VNC_CONNECT_TIMEOUT_MS 5000

typedef struct {
    guint depth;
    gboolean in_devices;
    gboolean in_vnc;
    char *path;
} VncScan;

static void
take_path(VncScan *scan, const char *path)
{
    if (path && path[0] == '/' && !scan->path)
        scan->path = g_strdup(path);
}

static void
scan_start(GMarkupParseContext *ctx, const char *element, const char **names, const char **values,
           gpointer user_data, GError **error)
{
    VncScan *scan = user_data;

    scan->depth++;
    if (scan->depth == 2 && g_str_equal(element, "devices")) {
        scan->in_devices = TRUE;
    } else if (scan->depth == 3 && scan->in_devices && g_str_equal(element, "graphics") &&
               g_strcmp0(carrel_hypervisor_markup_attr(names, values, "type"), "vnc") == 0) {
        scan->in_vnc = TRUE;
        take_path(scan, carrel_hypervisor_markup_attr(names, values, "socket"));
    } else if (scan->depth == 4 && scan->in_vnc && g_str_equal(element, "listen") &&
               g_strcmp0(carrel_hypervisor_markup_attr(names, values, "type"), "socket") == 0) {
        take_path(scan, carrel_hypervisor_markup_attr(names, values, "socket"));
    }
}

static void
scan_end(GMarkupParseContext *ctx, const char *element, gpointer user_data, GError **error)
{
    VncScan *scan = user_data;

    if (scan->depth == 3)
        scan->in_vnc = FALSE;
    if (scan->depth == 2)
        scan->in_devices = FALSE;
    scan->depth--;
}

gboolean
carrel_hypervisor_vnc_scan(const char *xml, char **ret_path, GError **error)
{
    static const GMarkupParser parser = {scan_start, scan_end, NULL, NULL, NULL};
    g_autoptr(GMarkupParseContext) ctx = NULL;
    VncScan scan = {0};
    gboolean ok;

    if (strlen(xml) > CARREL_HYPERVISOR_SCAN_MAX_BYTES) {
        g_set_error(error, CARREL_ERROR, CARREL_ERROR_LIMIT, "domain xml is too large");
        return FALSE;
    }
    ctx = g_markup_parse_context_new(&parser, 0, &scan, NULL);
    ok = g_markup_parse_context_parse(ctx, xml, -1, error) &&
         g_markup_parse_context_end_parse(ctx, error);
    if (!ok) {
        g_free(scan.path);
        g_prefix_error(error, "reading domain xml: ");
        return FALSE;
    }
    if (!scan.path) {
        g_set_error(error, CARREL_ERROR, CARREL_ERROR_UNSUPPORTED,
                    "domain has no VNC display on a unix socket");
        return FALSE;
    }
    *ret_path = scan.path;
    return TRUE;
}

CarrelRfbWatch *
carrel_hypervisor_display_watch(CarrelHypervisor *hv, const char *name, GError **error)
{
    g_autofree char *path = NULL;
    CarrelRfbWatch *watch;

    g_return_val_if_fail(hv != NULL && name != NULL, NULL);
    if (!hv->ops->vnc_socket) {
        g_set_error(error, CARREL_ERROR, CARREL_ERROR_UNSUPPORTED,
                    "domain '%s': this hypervisor has no VNC display", name);
        return NULL;
    }
    if (!hv->ops->vnc_socket(hv, name, &path, error) ||
        !(watch = carrel_rfb_watch_connect(path, VNC_CONNECT_TIMEOUT_MS, error))) {
        g_prefix_error(error, "domain '%s': watching its screen: ", name);
        return NULL;
    }
    return watch;
}
