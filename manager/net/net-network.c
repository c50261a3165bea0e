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
    gboolean dns_off;
    gboolean dhcp;
    char *address; /* <ip address=...> */
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
    for (int i = 0; names[i]; i++) {
        if (g_str_equal(element, "port") && g_str_equal(names[i], "isolated") &&
            g_str_equal(values[i], "yes"))
            scan->isolated_ports = TRUE;
        if (g_str_equal(element, "dns") && g_str_equal(names[i], "enable") &&
            g_str_equal(values[i], "no"))
            scan->dns_off = TRUE;
        if (g_str_equal(element, "ip") && g_str_equal(names[i], "address") && !scan->address)
            scan->address = g_strdup(values[i]);
    }
}

/* <dhcp> sits inside <ip>: any depth counts. */
static void
scan_dhcp(GMarkupParseContext *ctx, const char *element, const char **names, const char **values,
          gpointer data, GError **error)
{
    NetworkScan *scan = data;

    if (g_str_equal(element, "dhcp"))
        scan->dhcp = TRUE;
    scan_start(ctx, element, names, values, data, error);
}

static void
scan_end(GMarkupParseContext *ctx, const char *element, gpointer data, GError **error)
{
    ((NetworkScan *)data)->depth--;
}

static gboolean
scan_network(const char *xml, NetworkScan *scan, GError **error)
{
    static const GMarkupParser parser = {.start_element = scan_dhcp, .end_element = scan_end};
    g_autoptr(GMarkupParseContext) ctx = NULL;

    if (!xml) {
        g_set_error(error, CARREL_ERROR, CARREL_ERROR_INVALID_ARG, "network xml is required");
        return FALSE;
    }
    ctx = g_markup_parse_context_new(&parser, 0, scan, NULL);
    if (!g_markup_parse_context_parse(ctx, xml, -1, error) ||
        !g_markup_parse_context_end_parse(ctx, error)) {
        g_prefix_error(error, "parsing network xml: ");
        return FALSE;
    }
    /* Someone else's network of the same name must never give a sandbox a way out. */
    if (scan->forward) {
        g_set_error(error, CARREL_ERROR, CARREL_ERROR_POLICY_DENIED,
                    "network has a <forward> element: guests could reach beyond the host");
        return FALSE;
    }
    if (!scan->isolated_ports) {
        g_set_error(error, CARREL_ERROR, CARREL_ERROR_POLICY_DENIED,
                    "network ports are not isolated: sessions could reach each other");
        return FALSE;
    }
    return TRUE;
}

gboolean
carrel_net_check_isolated(const char *xml, GError **error)
{
    NetworkScan scan = {0};
    gboolean ok = scan_network(xml, &scan, error);

    g_free(scan.address);
    return ok;
}

gboolean
carrel_net_check_egress(const char *xml, const char *gateway, GError **error)
{
    NetworkScan scan = {0};
    g_autofree char *address = NULL;
    gboolean ok = scan_network(xml, &scan, error);

    address = g_steal_pointer(&scan.address);
    if (!ok)
        return FALSE;
    /* libvirt's own dnsmasq would answer any name: the sessions' resolvers are carreld's. */
    if (!scan.dns_off || scan.dhcp) {
        g_set_error(error, CARREL_ERROR, CARREL_ERROR_POLICY_DENIED,
                    "network runs libvirt's DNS or DHCP: names would resolve past the policy");
        return FALSE;
    }
    if (g_strcmp0(address, gateway) != 0) {
        g_set_error(error, CARREL_ERROR, CARREL_ERROR_POLICY_DENIED,
                    "network's host address is %s, not %s", address ? address : "none", gateway);
        return FALSE;
    }
    return TRUE;
}
