/*
 * The isolated network every session is attached to, and the MAC addresses of session NICs.
 * Pure: the libvirt side (define, start, fetch) lives in hypervisor, core combines the two.
 */
#include <string.h>

#include "net/net.h"

char *
carrel_net_mac_from_bytes(const guint8 bytes[5])
{
    /* 0x02: locally administered, unicast, so never an address a vendor burnt into hardware. */
    return g_strdup_printf("02:%02x:%02x:%02x:%02x:%02x", bytes[0], bytes[1], bytes[2], bytes[3],
                           bytes[4]);
}

char *
carrel_net_new_mac(void)
{
    guint8 bytes[5];

    carrel_util_random_bytes(bytes, sizeof(bytes));
    return carrel_net_mac_from_bytes(bytes);
}

char *
carrel_net_isolated_network_xml(const char *name, const char *bridge, GError **error)
{
    /* Linux bridge names hold at most 15 bytes (IFNAMSIZ - 1). */
    if (!carrel_util_is_valid_name(name) || !carrel_util_is_valid_name(bridge) ||
        strlen(bridge) > 15) {
        g_set_error(error, CARREL_ERROR, CARREL_ERROR_INVALID_ARG,
                    "network name or bridge name is not valid");
        return NULL;
    }
    /*
     * No <forward>: libvirt neither routes nor NATs, so egress is none by default. No <ip>: the
     * host has no address on the bridge and runs no dnsmasq, so a guest reaches nothing on the
     * host either (the egress proxy will add the one address it listens on). isolated ports:
     * the bridge does not forward between guests, so sessions cannot reach each other.
     */
    return g_markup_printf_escaped("<network>\n"
                                   "  <name>%s</name>\n"
                                   "  <bridge name='%s' stp='off' delay='0'/>\n"
                                   "  <port isolated='yes'/>\n"
                                   "</network>\n",
                                   name, bridge);
}

typedef struct {
    gboolean forward;
    gboolean isolated_ports;
    int depth;
} NetworkScan;

static void
scan_start(GMarkupParseContext *ctx, const char *element, const char **names, const char **values,
           gpointer data, GError **error)
{
    NetworkScan *scan = data;

    scan->depth++;
    /* Only <network><forward> and <network><port> count; nested ones belong to other parts. */
    if (scan->depth != 2)
        return;
    if (g_str_equal(element, "forward"))
        scan->forward = TRUE;
    if (g_str_equal(element, "port")) {
        for (int i = 0; names[i]; i++)
            if (g_str_equal(names[i], "isolated") && g_str_equal(values[i], "yes"))
                scan->isolated_ports = TRUE;
    }
}

static void
scan_end(GMarkupParseContext *ctx, const char *element, gpointer data, GError **error)
{
    ((NetworkScan *)data)->depth--;
}

gboolean
carrel_net_check_isolated(const char *xml, GError **error)
{
    static const GMarkupParser parser = {.start_element = scan_start, .end_element = scan_end};
    NetworkScan scan = {0};
    g_autoptr(GMarkupParseContext) ctx = NULL;

    if (!xml) {
        g_set_error(error, CARREL_ERROR, CARREL_ERROR_INVALID_ARG, "network xml is required");
        return FALSE;
    }
    ctx = g_markup_parse_context_new(&parser, 0, &scan, NULL);
    if (!g_markup_parse_context_parse(ctx, xml, -1, error) ||
        !g_markup_parse_context_end_parse(ctx, error)) {
        g_prefix_error(error, "parsing network xml: ");
        return FALSE;
    }
    /* Someone else's network of the same name must never give a sandbox a way out. */
    if (scan.forward) {
        g_set_error(error, CARREL_ERROR, CARREL_ERROR_POLICY_DENIED,
                    "network has a <forward> element: guests could reach beyond the host");
        return FALSE;
    }
    if (!scan.isolated_ports) {
        g_set_error(error, CARREL_ERROR, CARREL_ERROR_POLICY_DENIED,
                    "network ports are not isolated: sessions could reach each other");
        return FALSE;
    }
    return TRUE;
}
