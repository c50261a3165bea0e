/*
 * Golden test of the egress path's configuration: every tests/data/egress/<case>.json names a
 * generator ("kind": network, nft, nft-session, squid, dnsmasq) and its inputs; the output must
 * match <case>.conf exactly (or its error <case>.err). CARREL_TEST_REGENERATE=1 rewrites the
 * expected files: review that diff.
 */
#include "net/net.h"
#include "tests/golden/golden.h"

static const char *const case_members[] = {
    "kind",       "name",       "bridge",     "gateway",   "prefix",      "tap_prefix", "http_port",
    "https_port", "dns_first",  "dns_last",   "tls_ports", "add",         "address",    "dns_port",
    "tap",        "subnet",     "upstream",   "helper",    "socket",      "ca",         "ssl_db",
    "certgen",    "access_log", "cache_log",  "pid_file",  "user",        "port",       "open",
    "resolve",    "refuse",     "local_port", "headers",   "upstream_ca", NULL};

static const char *
str(JsonObject *root, const char *name)
{
    return json_object_get_string_member_with_default(root, name, NULL);
}

static guint
num(JsonObject *root, const char *name)
{
    return (guint)json_object_get_int_member_with_default(root, name, 0);
}

/* A member holding an array of strings, as a NULL-terminated vector (NULL when absent). */
static GStrv
strv(JsonObject *root, const char *name)
{
    JsonArray *array =
        json_object_has_member(root, name) ? json_object_get_array_member(root, name) : NULL;
    g_autoptr(GStrvBuilder) b = g_strv_builder_new();

    if (!array)
        return NULL;
    for (guint i = 0; i < json_array_get_length(array); i++)
        g_strv_builder_add(b, json_array_get_string_element(array, i));
    return g_strv_builder_end(b);
}

static char *
nft(JsonObject *root, GError **error)
{
    JsonArray *ports = json_object_get_array_member(root, "tls_ports");
    g_autofree guint *tls = g_new0(guint, json_array_get_length(ports) + 1);
    CarrelNetEgressFirewall fw = {
        .bridge = str(root, "bridge"),
        .gateway = str(root, "gateway"),
        .tap_prefix = str(root, "tap_prefix"),
        .http_port = num(root, "http_port"),
        .https_port = num(root, "https_port"),
        .dns_port_first = num(root, "dns_first"),
        .dns_port_last = num(root, "dns_last"),
        .tls_ports = tls,
        .n_tls_ports = json_array_get_length(ports),
    };

    for (guint i = 0; i < fw.n_tls_ports; i++)
        tls[i] = (guint)json_array_get_int_element(ports, i);
    return carrel_net_egress_nft(&fw, error);
}

static char *
squid(JsonObject *root, GError **error)
{
    g_auto(GStrv) headers = strv(root, "headers");
    CarrelNetSquidSpec spec = {
        .gateway = str(root, "gateway"),
        .http_port = num(root, "http_port"),
        .https_port = num(root, "https_port"),
        .local_port = num(root, "local_port"),
        .subnet = str(root, "subnet"),
        .upstream_dns = str(root, "upstream"),
        .helper = str(root, "helper"),
        .helper_socket = str(root, "socket"),
        .ca_pem = str(root, "ca"),
        .ssl_db = str(root, "ssl_db"),
        .certgen = str(root, "certgen"),
        .access_log = str(root, "access_log"),
        .cache_log = str(root, "cache_log"),
        .pid_file = str(root, "pid_file"),
        .user = str(root, "user"),
        .headers = headers,
        .upstream_ca = str(root, "upstream_ca"),
    };

    return carrel_net_squid_conf(&spec, error);
}

static char *
dnsmasq(JsonObject *root, GError **error)
{
    g_auto(GStrv) resolve = strv(root, "resolve");
    g_auto(GStrv) refuse = strv(root, "refuse");
    CarrelNetDnsSpec spec = {
        .gateway = str(root, "gateway"),
        .port = num(root, "port"),
        .upstream = str(root, "upstream"),
        .open = json_object_get_boolean_member_with_default(root, "open", FALSE),
        .resolve = resolve,
        .refuse = refuse,
    };

    return carrel_net_dnsmasq_conf(&spec, error);
}

static char *
generate(JsonObject *root, GError **error)
{
    const char *kind = str(root, "kind");

    golden_check_members(root, case_members, "an egress case");
    if (g_strcmp0(kind, "network") == 0)
        return carrel_net_egress_network_xml(str(root, "name"), str(root, "bridge"),
                                             str(root, "gateway"), num(root, "prefix"), error);
    if (g_strcmp0(kind, "nft") == 0)
        return nft(root, error);
    if (g_strcmp0(kind, "nft-session") == 0)
        return carrel_net_egress_nft_session(
            json_object_get_boolean_member_with_default(root, "add", FALSE), str(root, "address"),
            num(root, "dns_port"), str(root, "tap"), error);
    if (g_strcmp0(kind, "squid") == 0)
        return squid(root, error);
    if (g_strcmp0(kind, "dnsmasq") == 0)
        return dnsmasq(root, error);
    g_error("unknown kind '%s'", kind ? kind : "");
    return NULL;
}

int
main(int argc, char **argv)
{
    return golden_main(argc, argv, "egress", ".conf", generate);
}
