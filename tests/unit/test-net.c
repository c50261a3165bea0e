#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>
#include <string.h>

#include "net/net.h"

typedef struct {
    const char *text;
    const char *address; /* the address it parses to, NULL when malformed */
    guint16 port;
    gboolean needs_tls;       /* not loopback: refused (POLICY_DENIED) unless with TLS */
    const char *message_part; /* for malformed input (INVALID_ARG, with or without TLS) */
} ListenCase;

static const ListenCase cases[] = {
    {"127.0.0.1:8080", "127.0.0.1", 8080, FALSE, NULL},
    {"127.0.0.1:1", "127.0.0.1", 1, FALSE, NULL},
    {"127.0.0.1:65535", "127.0.0.1", 65535, FALSE, NULL},
    {"127.1.2.3:9000", "127.1.2.3", 9000, FALSE, NULL},
    {"127.255.255.254:443", "127.255.255.254", 443, FALSE, NULL},
    {"[::1]:8080", "::1", 8080, FALSE, NULL},
    {"[0:0:0:0:0:0:0:1]:8080", "::1", 8080, FALSE, NULL},
    {"localhost:8080", "127.0.0.1", 8080, FALSE, NULL},
    {"LOCALHOST:8080", "127.0.0.1", 8080, FALSE, NULL},
    /* not loopback: plain HTTP never, TLS yes (wildcards included) */
    {"0.0.0.0:8443", "0.0.0.0", 8443, TRUE, NULL},
    {"[::]:8443", "::", 8443, TRUE, NULL},
    {"192.0.2.1:8443", "192.0.2.1", 8443, TRUE, NULL},
    {"192.168.1.10:8080", "192.168.1.10", 8080, TRUE, NULL},
    {"10.0.0.1:8080", "10.0.0.1", 8080, TRUE, NULL},
    {"172.16.0.1:8080", "172.16.0.1", 8080, TRUE, NULL},
    {"8.8.8.8:53", "8.8.8.8", 53, TRUE, NULL},
    {"128.0.0.1:8080", "128.0.0.1", 8080, TRUE, NULL},
    {"126.255.255.255:8080", "126.255.255.255", 8080, TRUE, NULL},
    {"[fe80::1]:8080", "fe80::1", 8080, TRUE, NULL},
    {"[2001:db8::1]:8443", "2001:db8::1", 8443, TRUE, NULL},
    {"[::ffff:127.0.0.1]:8080", "::ffff:127.0.0.1", 8080, TRUE, NULL},
    /* ports */
    {"127.0.0.1", NULL, 0, FALSE, "must be HOST:PORT"},
    {"0.0.0.0", NULL, 0, FALSE, "must be HOST:PORT"},
    {"127.0.0.1:", NULL, 0, FALSE, "must be a number from 0 to 65535"},
    /* port 0: any free port, the one bound is in web.url */
    {"127.0.0.1:0", "127.0.0.1", 0, FALSE, NULL},
    {"0.0.0.0:0", "0.0.0.0", 0, TRUE, NULL},
    {"[::]:0", "::", 0, TRUE, NULL},
    {"127.0.0.1:00000", "127.0.0.1", 0, FALSE, NULL},
    {"127.0.0.1:000000", NULL, 0, FALSE, "must be a number from 0 to 65535"},
    {"127.0.0.1:70000", NULL, 0, FALSE, "must be a number from 0 to 65535"},
    {"127.0.0.1:65536", NULL, 0, FALSE, "must be a number from 0 to 65535"},
    {"192.0.2.1:65536", NULL, 0, FALSE, "must be a number from 0 to 65535"},
    {"127.0.0.1:-1", NULL, 0, FALSE, "must be a number from 0 to 65535"},
    {"127.0.0.1:+80", NULL, 0, FALSE, "must be a number from 0 to 65535"},
    {"127.0.0.1: 80", NULL, 0, FALSE, "must be a number from 0 to 65535"},
    {"127.0.0.1:80 ", NULL, 0, FALSE, "must be a number from 0 to 65535"},
    {"127.0.0.1:0x50", NULL, 0, FALSE, "must be a number from 0 to 65535"},
    {"127.0.0.1:http", NULL, 0, FALSE, "must be a number from 0 to 65535"},
    {"0.0.0.0:https", NULL, 0, FALSE, "must be a number from 0 to 65535"},
    {"127.0.0.1:8080:9090", NULL, 0, FALSE, "must be HOST:PORT"},
    /* hosts */
    {":8080", NULL, 0, FALSE, "must be a numeric IP address"},
    {"[]:8080", NULL, 0, FALSE, "must be a numeric IP address"},
    {"::1:8080", NULL, 0, FALSE, "must be HOST:PORT"},
    {":::8443", NULL, 0, FALSE, "must be HOST:PORT"},
    {"[::1]8080", NULL, 0, FALSE, "must be HOST:PORT"},
    {"[::1:8080", NULL, 0, FALSE, "must be HOST:PORT"},
    {"[127.0.0.1]:8080", NULL, 0, FALSE, "must be a numeric IP address"},
    {"[0.0.0.0]:8443", NULL, 0, FALSE, "must be a numeric IP address"},
    {"[localhost]:8080", NULL, 0, FALSE, "must be a numeric IP address"},
    {"127.1:8080", NULL, 0, FALSE, "must be a numeric IP address"},
    {"0177.0.0.1:8080", NULL, 0, FALSE, "must be a numeric IP address"},
    {"2130706433:8080", NULL, 0, FALSE, "must be a numeric IP address"},
    {"127.0.0.1.:8080", NULL, 0, FALSE, "must be a numeric IP address"},
    {" 127.0.0.1:8080", NULL, 0, FALSE, "must be a numeric IP address"},
    {"example.com:8080", NULL, 0, FALSE, "must be a numeric IP address"},
    {"carrel.example:8443", NULL, 0, FALSE, "must be a numeric IP address"},
    {"*:8443", NULL, 0, FALSE, "must be a numeric IP address"},
    {"localhost.:8080", NULL, 0, FALSE, "must be a numeric IP address"},
    {"[::1%lo]:8080", NULL, 0, FALSE, "must be a numeric IP address"},
    {"[fe80::1%eth0]:8080", NULL, 0, FALSE, "must be a numeric IP address"},
    {"256.0.0.1:8443", NULL, 0, FALSE, "must be a numeric IP address"},
    /* junk */
    {"", NULL, 0, FALSE, "must be HOST:PORT"},
    {"junk", NULL, 0, FALSE, "must be HOST:PORT"},
    {"127.0.0.1:80\n", NULL, 0, FALSE, "printable"},
    {"127.0.0.1:8080/evil", NULL, 0, FALSE, "must be a number from 0 to 65535"},
    {"http://127.0.0.1:8080", NULL, 0, FALSE, "must be HOST:PORT"},
    {"https://0.0.0.0:8443", NULL, 0, FALSE, "must be HOST:PORT"},
    {"127.0.0.1:000000000000000000000000000000000000000000000000000000000000000080", NULL, 0, FALSE,
     "printable"},
};

static void
check_accepted(const ListenCase *c, gboolean tls)
{
    g_autoptr(GError) error = NULL;
    g_autoptr(GSocketAddress) addr = carrel_net_parse_listen(c->text, tls, &error);
    GInetSocketAddress *inet;
    g_autofree char *text = NULL;

    if (!addr)
        fail_msg("'%s' (tls %d) refused: %s", c->text, tls, error->message);
    assert_null(error);
    inet = G_INET_SOCKET_ADDRESS(addr);
    text = g_inet_address_to_string(g_inet_socket_address_get_address(inet));
    assert_string_equal(text, c->address);
    assert_int_equal(g_inet_socket_address_get_port(inet), c->port);
}

static void
check_refused(const ListenCase *c, gboolean tls, int code, const char *part)
{
    g_autoptr(GError) error = NULL;
    g_autoptr(GSocketAddress) addr = carrel_net_parse_listen(c->text, tls, &error);

    if (addr)
        fail_msg("'%s' (tls %d) accepted", c->text, tls);
    assert_non_null(error);
    if (!g_error_matches(error, CARREL_ERROR, code))
        fail_msg("'%s' (tls %d): code %d, not %d", c->text, tls, error->code, code);
    if (!strstr(error->message, part))
        fail_msg("'%s' (tls %d): '%s' not in '%s'", c->text, tls, part, error->message);
}

static void
test_cases(void **state)
{
    for (gsize i = 0; i < G_N_ELEMENTS(cases); i++) {
        const ListenCase *c = &cases[i];

        if (!c->address) {
            check_refused(c, FALSE, CARREL_ERROR_INVALID_ARG, c->message_part);
            check_refused(c, TRUE, CARREL_ERROR_INVALID_ARG, c->message_part);
            continue;
        }
        if (c->needs_tls)
            check_refused(c, FALSE, CARREL_ERROR_POLICY_DENIED, "is not a loopback address");
        else
            check_accepted(c, FALSE);
        check_accepted(c, TRUE);
    }
}

static void
test_null_refused(void **state)
{
    g_autoptr(GError) error = NULL;

    assert_null(carrel_net_parse_listen(NULL, FALSE, &error));
    assert_true(g_error_matches(error, CARREL_ERROR, CARREL_ERROR_INVALID_ARG));
    g_clear_error(&error);
    assert_null(carrel_net_parse_listen(NULL, TRUE, &error));
    assert_true(g_error_matches(error, CARREL_ERROR, CARREL_ERROR_INVALID_ARG));
}

static void
test_message_names_input(void **state)
{
    g_autoptr(GError) error = NULL;

    assert_null(carrel_net_parse_listen("0.0.0.0:8080", FALSE, &error));
    assert_string_equal(error->message,
                        "listen address '0.0.0.0:8080' is not a loopback address: without TLS "
                        "only 127.0.0.0/8 and [::1] are allowed, so the API is never reachable "
                        "in the clear from another host");
}

static void
test_mac_from_bytes(void **state)
{
    const guint8 bytes[5] = {0x00, 0xab, 0x10, 0xff, 0x7e};
    g_autofree char *mac = carrel_net_mac_from_bytes(bytes);

    assert_string_equal(mac, "02:00:ab:10:ff:7e");
    assert_true(carrel_util_is_mac(mac));
}

static void
test_new_mac(void **state)
{
    g_autoptr(GHashTable) seen = g_hash_table_new_full(g_str_hash, g_str_equal, g_free, NULL);

    for (int i = 0; i < 1000; i++) {
        char *mac = carrel_net_new_mac();

        assert_true(carrel_util_is_mac(mac));
        assert_true(g_str_has_prefix(mac, "02:"));
        assert_false(g_hash_table_contains(seen, mac));
        g_hash_table_add(seen, mac);
    }
}

static void
test_network_xml(void **state)
{
    g_autoptr(GError) error = NULL;
    g_autofree char *xml =
        carrel_net_isolated_network_xml("carrel-isolated", "carrel-iso0", &error);

    assert_non_null(xml);
    assert_string_equal(xml, "<network>\n"
                             "  <name>carrel-isolated</name>\n"
                             "  <bridge name='carrel-iso0' stp='off' delay='0'/>\n"
                             "  <port isolated='yes'/>\n"
                             "</network>\n");
    assert_true(carrel_net_check_isolated(xml, &error));
    assert_null(carrel_net_isolated_network_xml("n", "a-bridge-name-too-long", &error));
    assert_int_equal(error->code, CARREL_ERROR_INVALID_ARG);
    g_clear_error(&error);
    assert_null(carrel_net_isolated_network_xml("bad name", "br0", &error));
}

typedef struct {
    const char *xml;
    int code; /* -1: accepted */
} IsolatedCase;

static const IsolatedCase isolated_cases[] = {
    /* what libvirt reports for carrel's network */
    {"<network><name>carrel-isolated</name><uuid>ad514279-4bc2-428b-b31b-d8a23eea4fb1</uuid>"
     "<bridge name='carrel-iso0' stp='off' delay='0'/><mac address='52:54:00:6c:27:12'/>"
     "<port isolated='yes'/></network>",
     -1},
    /* a host-only address is still isolated */
    {"<network><name>n</name><port isolated='yes'/><ip address='10.9.0.1' prefix='24'/>"
     "</network>",
     -1},
    {"<network><name>n</name><forward mode='nat'/><port isolated='yes'/></network>",
     CARREL_ERROR_POLICY_DENIED},
    {"<network><name>n</name><forward mode='bridge'/><bridge name='br0'/></network>",
     CARREL_ERROR_POLICY_DENIED},
    {"<network><name>n</name><bridge name='b'/></network>", CARREL_ERROR_POLICY_DENIED},
    {"<network><name>n</name><port isolated='no'/></network>", CARREL_ERROR_POLICY_DENIED},
    /* a <port> or <forward> nested elsewhere is not the network's */
    {"<network><name>n</name><portgroup name='p'><port isolated='yes'/></portgroup></network>",
     CARREL_ERROR_POLICY_DENIED},
    {"<network><name>n</name><port isolated='yes'/><x><forward/></x></network>", -1},
    {"<network><name>n</name>", G_MARKUP_ERROR_PARSE},
    {"<network", G_MARKUP_ERROR_PARSE},
};

static void
test_check_isolated(void **state)
{
    for (gsize i = 0; i < G_N_ELEMENTS(isolated_cases); i++) {
        g_autoptr(GError) error = NULL;
        gboolean ok = carrel_net_check_isolated(isolated_cases[i].xml, &error);

        if (isolated_cases[i].code < 0) {
            assert_true(ok);
            continue;
        }
        assert_false(ok);
        assert_non_null(error);
        if (isolated_cases[i].code == G_MARKUP_ERROR_PARSE)
            assert_true(g_str_has_prefix(error->message, "parsing network xml: "));
        else
            assert_int_equal(error->code, isolated_cases[i].code);
    }
}

/* Addresses no session may reach, and some it may (documentation ranges: the stand-in). */
static void
test_internal_addresses(void **state)
{
    static const struct {
        const char *text;
        gboolean internal;
    } addrs[] = {
        {"10.1.2.3", TRUE},
        {"172.16.0.1", TRUE},
        {"172.31.255.255", TRUE},
        {"172.32.0.1", FALSE},
        {"192.168.1.1", TRUE},
        {"127.0.0.1", TRUE},
        {"127.8.9.10", TRUE},
        {"169.254.169.254", TRUE},
        {"100.64.0.1", TRUE},
        {"100.127.255.255", TRUE},
        {"100.128.0.1", FALSE},
        {"0.0.0.0", TRUE},
        {"224.0.0.251", TRUE},
        {"255.255.255.255", TRUE},
        {"198.18.0.1", TRUE},
        {"8.8.8.8", FALSE},
        {"1.1.1.1", FALSE},
        {"203.0.113.10", FALSE},
        {"198.51.100.1", FALSE},
        {"192.0.2.1", FALSE},
        {"::1", TRUE},
        {"::", TRUE},
        {"fd00::1", TRUE},
        {"fc12::1", TRUE},
        {"fe80::1", TRUE},
        {"ff02::1", TRUE},
        {"::ffff:8.8.8.8", TRUE},
        {"64:ff9b::808:808", TRUE},
        {"2002:a00:1::1", TRUE},
        {"2001:4860:4860::8888", FALSE},
        {"2001:db8::1", FALSE},
        {"10.0.0.0/8", TRUE},
        {"192.168.0.0/16", TRUE},
        {"8.8.8.0/24", FALSE},
        {"not-an-address", FALSE},
        {"", FALSE},
    };

    for (gsize i = 0; i < G_N_ELEMENTS(addrs); i++) {
        if (carrel_net_text_is_internal(addrs[i].text) != addrs[i].internal)
            fail_msg("%s: internal should be %d", addrs[i].text, addrs[i].internal);
    }
    assert_false(carrel_net_text_is_internal(NULL));
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_internal_addresses), cmocka_unit_test(test_cases),
        cmocka_unit_test(test_null_refused),       cmocka_unit_test(test_message_names_input),
        cmocka_unit_test(test_mac_from_bytes),     cmocka_unit_test(test_new_mac),
        cmocka_unit_test(test_network_xml),        cmocka_unit_test(test_check_isolated),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
