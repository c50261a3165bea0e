/*
 * set-net, the pure half: what the arguments mean and what the guest should end up with, so the
 * unit tests cover every rule without root or a VM. guest-net-set.c applies the result.
 */
#include <net/route.h>
#include <string.h>

#include "guest.h"

#define IPV4_TEXT_MAX 15 /* "255.255.255.255" */
#define PREFIX_MIN 8
/* /31 and /32 leave no host in the subnet for a gateway beside the address itself. */
#define PREFIX_MAX 30

/* Columns of /proc/net/route: Iface Destination Gateway Flags RefCnt Use Metric Mask MTU ... */
enum {
    ROUTE_IFACE,
    ROUTE_DESTINATION,
    ROUTE_GATEWAY,
    ROUTE_FLAGS,
    ROUTE_METRIC = 6,
    ROUTE_MASK,
    ROUTE_COLUMNS
};

/* A decimal of 1 to max_digits digits, no sign, no leading zero (so "010" cannot mean 8). */
static gboolean
parse_decimal(const char *text, gsize len, gsize max_digits, guint *ret_value)
{
    guint value = 0;

    if (len == 0 || len > max_digits || (len > 1 && text[0] == '0'))
        return FALSE;
    for (gsize i = 0; i < len; i++) {
        if (!g_ascii_isdigit(text[i]))
            return FALSE;
        value = value * 10 + (guint)(text[i] - '0');
    }
    *ret_value = value;
    return TRUE;
}

/* Exactly four dotted decimal octets: no shorthand ("10.1"), hex or octal that inet_aton takes. */
static gboolean
parse_ipv4(const char *text, gsize len, guint32 *ret_address)
{
    guint32 address = 0;
    gsize start = 0;

    if (len > IPV4_TEXT_MAX)
        return FALSE;
    for (int octet = 0; octet < 4; octet++) {
        const char *dot = memchr(text + start, '.', len - start);
        gsize end = dot ? (gsize)(dot - text) : len;
        guint value;

        if ((octet < 3) != (dot != NULL) || !parse_decimal(text + start, end - start, 3, &value) ||
            value > 255)
            return FALSE;
        address = address << 8 | value;
        start = end + 1;
    }
    *ret_address = address;
    return TRUE;
}

gboolean
carrel_guest_ipv4_parse(const char *text, guint32 *ret_address, GError **error)
{
    if (!text || !parse_ipv4(text, strlen(text), ret_address)) {
        g_set_error(error, CARREL_GUEST_ERROR, CARREL_GUEST_ERROR_INVALID_ARG,
                    "'%s' is not an IPv4 address (a.b.c.d)", text ? text : "");
        return FALSE;
    }
    return TRUE;
}

char *
carrel_guest_ipv4_to_string(guint32 address)
{
    return g_strdup_printf("%u.%u.%u.%u", address >> 24, (address >> 16) & 0xff,
                           (address >> 8) & 0xff, address & 0xff);
}

guint32
carrel_guest_ipv4_netmask(guint prefix)
{
    return prefix == 0 ? 0 : prefix >= 32 ? 0xffffffffu : ~(0xffffffffu >> prefix);
}

/* Not 0/8 ("this network"), 127/8 (loopback), 224/4 (multicast), 240/4 (reserved, broadcast). */
static gboolean
is_unicast(guint32 address)
{
    guint first = address >> 24;

    return first != 0 && first != 127 && first < 224;
}

/* A unicast address that is neither the subnet's network nor its broadcast address. */
static gboolean
is_host_in(guint32 address, guint32 subnet, guint prefix)
{
    guint32 mask = carrel_guest_ipv4_netmask(prefix);

    return is_unicast(address) && (address & mask) == (subnet & mask) && (address & ~mask) != 0 &&
           (address & ~mask) != ~mask;
}

static gboolean
parse_cidr(const char *text, CarrelGuestNetConfig *config, GError **error)
{
    const char *slash = strchr(text, '/');

    if (!slash || !parse_ipv4(text, (gsize)(slash - text), &config->address) ||
        !parse_decimal(slash + 1, strlen(slash + 1), 2, &config->prefix) ||
        config->prefix < PREFIX_MIN || config->prefix > PREFIX_MAX) {
        g_set_error(error, CARREL_GUEST_ERROR, CARREL_GUEST_ERROR_INVALID_ARG,
                    "'%s' is not ADDRESS/PREFIX (an IPv4 address, a prefix from %d to %d)", text,
                    PREFIX_MIN, PREFIX_MAX);
        return FALSE;
    }
    if (!is_host_in(config->address, config->address, config->prefix)) {
        g_set_error(error, CARREL_GUEST_ERROR, CARREL_GUEST_ERROR_INVALID_ARG,
                    "'%s' is not a host address (network, broadcast, loopback, multicast or "
                    "reserved)",
                    text);
        return FALSE;
    }
    return TRUE;
}

static gboolean
check_gateway(const char *text, CarrelGuestNetConfig *config, GError **error)
{
    g_autofree char *subnet = NULL;

    if (!carrel_guest_ipv4_parse(text, &config->gateway, error)) {
        g_prefix_error(error, "gateway: ");
        return FALSE;
    }
    /* The kernel only takes a gateway it can reach on the link: one inside the subnet. */
    if (config->gateway != config->address &&
        is_host_in(config->gateway, config->address, config->prefix))
        return TRUE;
    if (config->gateway == config->address) {
        g_set_error(error, CARREL_GUEST_ERROR, CARREL_GUEST_ERROR_INVALID_ARG,
                    "gateway '%s' is the address itself", text);
        return FALSE;
    }
    subnet =
        carrel_guest_ipv4_to_string(config->address & carrel_guest_ipv4_netmask(config->prefix));
    g_set_error(error, CARREL_GUEST_ERROR, CARREL_GUEST_ERROR_INVALID_ARG,
                "gateway '%s' is not a host of the subnet %s/%u", text, subnet, config->prefix);
    return FALSE;
}

static gboolean
check_dns(const char *text, CarrelGuestNetConfig *config, GError **error)
{
    guint first;

    if (!carrel_guest_ipv4_parse(text, &config->dns, error)) {
        g_prefix_error(error, "name server: ");
        return FALSE;
    }
    /* Any unicast address, in the subnet or not; loopback too (a resolver inside the guest). */
    first = config->dns >> 24;
    if (first == 0 || first >= 224) {
        g_set_error(error, CARREL_GUEST_ERROR, CARREL_GUEST_ERROR_INVALID_ARG,
                    "name server '%s' is not a unicast address", text);
        return FALSE;
    }
    return TRUE;
}

gboolean
carrel_guest_net_config_parse(const char *const *argv, CarrelGuestNetConfig *ret_config,
                              GError **error)
{
    CarrelGuestNetConfig config = {0};
    guint argc = argv ? g_strv_length((char **)argv) : 0;

    if (argc == 1 && g_str_equal(argv[0], "none")) {
        config.none = TRUE;
        *ret_config = config;
        return TRUE;
    }
    if (argc != 3) {
        g_set_error(error, CARREL_GUEST_ERROR, CARREL_GUEST_ERROR_INVALID_ARG,
                    "expected 'ADDRESS/PREFIX GATEWAY DNS' or 'none'");
        return FALSE;
    }
    if (!parse_cidr(argv[0], &config, error) || !check_gateway(argv[1], &config, error) ||
        !check_dns(argv[2], &config, error))
        return FALSE;
    *ret_config = config;
    return TRUE;
}

static gboolean
route_column(char **columns, int index, guint base, guint64 *ret_value)
{
    return g_ascii_string_to_unsigned(g_strstrip(columns[index]), base, 0, G_MAXUINT32, ret_value,
                                      NULL);
}

gboolean
carrel_guest_net_default_route_is(const char *table, const char *nic, guint32 gateway)
{
    g_auto(GStrv) lines = g_strsplit(table, "\n", -1);
    guint defaults = 0;
    gboolean ours = FALSE;

    /* The header and any line that does not parse are not routes. */
    for (guint i = 0; lines[i]; i++) {
        g_auto(GStrv) columns = g_strsplit(lines[i], "\t", -1);
        guint64 destination, via, flags, metric, mask;

        if (g_strv_length(columns) < ROUTE_COLUMNS ||
            !route_column(columns, ROUTE_DESTINATION, 16, &destination) ||
            !route_column(columns, ROUTE_GATEWAY, 16, &via) ||
            !route_column(columns, ROUTE_FLAGS, 16, &flags) ||
            !route_column(columns, ROUTE_METRIC, 10, &metric) ||
            !route_column(columns, ROUTE_MASK, 16, &mask) || destination != 0 || mask != 0)
            continue;
        defaults++;
        /* Addresses are the raw network-order words, printed as native integers. */
        ours = g_str_equal(g_strstrip(columns[ROUTE_IFACE]), nic) &&
               GUINT32_FROM_BE((guint32)via) == gateway && metric == 0 &&
               (flags & (RTF_UP | RTF_GATEWAY | RTF_REJECT)) == (RTF_UP | RTF_GATEWAY);
    }
    return defaults == 1 && ours;
}

char *
carrel_guest_net_resolv_conf(const CarrelGuestNetConfig *config)
{
    g_autofree char *dns = NULL;

    if (config->none)
        return g_strdup("");
    dns = carrel_guest_ipv4_to_string(config->dns);
    return g_strdup_printf("nameserver %s\n", dns);
}

static void
add_member(JsonBuilder *builder, const char *name, const char *value)
{
    json_builder_set_member_name(builder, name);
    if (value)
        json_builder_add_string_value(builder, value);
    else
        json_builder_add_null_value(builder);
}

JsonNode *
carrel_guest_net_config_to_json(const char *nic, const CarrelGuestNetConfig *config)
{
    g_autoptr(JsonBuilder) builder = carrel_guest_json_begin();
    g_autofree char *address = NULL;
    g_autofree char *cidr = NULL;
    g_autofree char *gateway = NULL;
    g_autofree char *dns = NULL;

    if (!config->none) {
        address = carrel_guest_ipv4_to_string(config->address);
        cidr = g_strdup_printf("%s/%u", address, config->prefix);
        gateway = carrel_guest_ipv4_to_string(config->gateway);
        dns = carrel_guest_ipv4_to_string(config->dns);
    }
    add_member(builder, "nic", nic);
    add_member(builder, "address", cidr);
    add_member(builder, "gateway", gateway);
    add_member(builder, "dns", dns);
    return carrel_guest_json_end(builder);
}
