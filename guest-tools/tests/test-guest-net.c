/* set-mac's and set-net's pure parts: MAC and address parsing, the choice of interface, the
 * output, and resolv.conf (written in a temporary folder). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>
#include <glib/gstdio.h>
#include <string.h>
#include <sys/stat.h>

#include "guest.h"

static void
test_mac_parse(void **state)
{
    static const char *const bad[] = {
        "",
        "02:1a:2b:3c:4d",
        "02:1a:2b:3c:4d:5e:",
        "02-1a-2b-3c-4d-5e",
        "02:1a:2b:3c:4d:5g",
        "021a:2b:3c:4d:5e:",
        "01:00:5e:00:00:01", /* multicast */
        "ff:ff:ff:ff:ff:ff", /* broadcast */
        "00:00:00:00:00:00",
        " 2:1a:2b:3c:4d:5e",
    };
    guint8 mac[6] = {0};
    g_autoptr(GError) error = NULL;

    assert_true(carrel_guest_mac_parse("02:1a:2B:3c:4d:5E", mac, &error));
    assert_memory_equal(mac, ((guint8[]){0x02, 0x1a, 0x2b, 0x3c, 0x4d, 0x5e}), 6);
    assert_true(carrel_guest_mac_parse("52:54:00:12:34:56", mac, &error));
    for (gsize i = 0; i < G_N_ELEMENTS(bad); i++) {
        g_clear_error(&error);
        memset(mac, 0xaa, sizeof(mac));
        assert_false(carrel_guest_mac_parse(bad[i], mac, &error));
        assert_int_equal(error->code, CARREL_GUEST_ERROR_INVALID_ARG);
        /* Written only on success. */
        assert_int_equal(mac[0], 0xaa);
    }
    g_clear_error(&error);
    assert_false(carrel_guest_mac_parse(NULL, mac, &error));
}

static void
add_nic(GPtrArray *nics, const char *name, int type, gboolean has_device)
{
    CarrelGuestNic *nic = g_new0(CarrelGuestNic, 1);

    nic->name = g_strdup(name);
    nic->type = type;
    nic->has_device = has_device;
    g_ptr_array_add(nics, nic);
}

static void
test_pick_nic(void **state)
{
    g_autoptr(GPtrArray) nics =
        g_ptr_array_new_with_free_func((GDestroyNotify)carrel_guest_nic_free);
    g_autoptr(GError) error = NULL;

    /* None: lo (type 772), a bridge and a veth (Ethernet without a device). */
    add_nic(nics, "lo", 772, FALSE);
    add_nic(nics, "br0", 1, FALSE);
    add_nic(nics, "veth1", 1, FALSE);
    assert_null(carrel_guest_pick_nic(nics, &error));
    assert_int_equal(error->code, CARREL_GUEST_ERROR_NOT_FOUND);
    g_clear_error(&error);
    add_nic(nics, "sit0", 776, TRUE);
    add_nic(nics, "enp0s3", 1, TRUE);
    assert_string_equal(carrel_guest_pick_nic(nics, &error), "enp0s3");
    add_nic(nics, "enp0s4", 1, TRUE);
    assert_null(carrel_guest_pick_nic(nics, &error));
    assert_int_equal(error->code, CARREL_GUEST_ERROR_INVALID_ARG);
}

static void
test_ipv4_parse(void **state)
{
    static const char *const bad[] = {
        "",          "10.0.0",      "10.0.0.1.",   "10.0.0.1.2", "10.0.0.256", "010.0.0.1",
        "10.0.0.01", "0x0a.0.0.1",  "10.0.0.-1",   " 10.0.0.1",  "10.0.0.1 ",  "10..0.1",
        ".10.0.0",   "10.0.0.1/24", "::1",         "1e1.0.0.1",  "+1.0.0.1",   "255.255.255.2555",
        "a.b.c.d",   "10.0.0.1\n",  "10.0.0.0001",
    };
    g_autofree char *text = NULL;
    g_autoptr(GError) error = NULL;
    guint32 address = 0;

    assert_true(carrel_guest_ipv4_parse("10.77.0.5", &address, &error));
    assert_int_equal(address, 0x0a4d0005);
    assert_true(carrel_guest_ipv4_parse("255.255.255.255", &address, &error));
    assert_int_equal(address, 0xffffffff);
    assert_true(carrel_guest_ipv4_parse("0.0.0.0", &address, &error));
    assert_int_equal(address, 0);
    for (gsize i = 0; i < G_N_ELEMENTS(bad); i++) {
        address = 42;
        g_clear_error(&error);
        if (carrel_guest_ipv4_parse(bad[i], &address, &error))
            fail_msg("'%s' parsed", bad[i]);
        assert_int_equal(error->code, CARREL_GUEST_ERROR_INVALID_ARG);
        assert_int_equal(address, 42);
    }
    text = carrel_guest_ipv4_to_string(0xc0a80101);
    assert_string_equal(text, "192.168.1.1");
    assert_int_equal(carrel_guest_ipv4_netmask(8), 0xff000000);
    assert_int_equal(carrel_guest_ipv4_netmask(16), 0xffff0000);
    assert_int_equal(carrel_guest_ipv4_netmask(30), 0xfffffffc);
    assert_int_equal(carrel_guest_ipv4_netmask(0), 0);
    assert_int_equal(carrel_guest_ipv4_netmask(32), 0xffffffff);
}

static gboolean
config_parse(const char *a, const char *b, const char *c, CarrelGuestNetConfig *config,
             GError **error)
{
    const char *argv[] = {a, b, c, NULL};

    return carrel_guest_net_config_parse(argv, config, error);
}

static void
test_net_config_parse(void **state)
{
    const char *none[] = {"none", NULL};
    CarrelGuestNetConfig config = {0};
    g_autoptr(GError) error = NULL;

    assert_true(config_parse("10.77.0.5/16", "10.77.0.1", "10.77.0.1", &config, &error));
    assert_false(config.none);
    assert_int_equal(config.address, 0x0a4d0005);
    assert_int_equal(config.prefix, 16);
    assert_int_equal(config.gateway, 0x0a4d0001);
    assert_int_equal(config.dns, 0x0a4d0001);
    /* The edges: /8 and /30, the subnet's last host, a name server elsewhere or on loopback. */
    assert_true(config_parse("10.0.0.1/8", "10.255.255.254", "9.9.9.9", &config, &error));
    assert_true(config_parse("192.168.7.1/30", "192.168.7.2", "127.0.0.53", &config, &error));
    assert_int_equal(config.prefix, 30);
    assert_true(carrel_guest_net_config_parse(none, &config, &error));
    assert_true(config.none);
}

static void
test_net_config_errors(void **state)
{
    static const struct {
        const char *args[5];
        const char *fragment;
    } cases[] = {
        {{NULL}, "expected 'ADDRESS/PREFIX GATEWAY DNS' or 'none'"},
        {{"None", NULL}, "expected"},
        {{"none", "x", NULL}, "expected"},
        {{"10.77.0.5/16", "10.77.0.1", NULL}, "expected"},
        {{"10.77.0.5/16", "10.77.0.1", "10.77.0.1", "x", NULL}, "expected"},
        {{"10.77.0.5", "10.77.0.1", "10.77.0.1", NULL}, "'10.77.0.5' is not ADDRESS/PREFIX"},
        {{"10.77.0.5/", "10.77.0.1", "10.77.0.1", NULL}, "is not ADDRESS/PREFIX"},
        {{"10.77.0.5/7", "10.0.0.1", "10.77.0.1", NULL}, "a prefix from 8 to 30"},
        {{"10.77.0.5/31", "10.77.0.4", "10.77.0.1", NULL}, "is not ADDRESS/PREFIX"},
        {{"10.77.0.5/016", "10.77.0.1", "10.77.0.1", NULL}, "is not ADDRESS/PREFIX"},
        {{"10.77.0.5/16/2", "10.77.0.1", "10.77.0.1", NULL}, "is not ADDRESS/PREFIX"},
        {{"10.77.0.5/+16", "10.77.0.1", "10.77.0.1", NULL}, "is not ADDRESS/PREFIX"},
        {{"fd00::5/64", "fd00::1", "fd00::1", NULL}, "is not ADDRESS/PREFIX"},
        {{"10.77.0.0/16", "10.77.0.1", "10.77.0.1", NULL}, "'10.77.0.0/16' is not a host"},
        {{"10.77.255.255/16", "10.77.0.1", "10.77.0.1", NULL}, "is not a host"},
        {{"127.0.0.5/8", "127.0.0.1", "10.77.0.1", NULL}, "is not a host"},
        {{"0.0.0.5/8", "0.0.0.1", "10.77.0.1", NULL}, "is not a host"},
        {{"224.0.0.5/8", "224.0.0.1", "10.77.0.1", NULL}, "is not a host"},
        {{"240.0.0.5/8", "240.0.0.1", "10.77.0.1", NULL}, "is not a host"},
        {{"10.77.0.5/16", "10.77.0", "10.77.0.1", NULL}, "gateway: '10.77.0' is not an IPv4"},
        {{"10.77.0.5/16", "10.78.0.1", "10.77.0.1", NULL},
         "gateway '10.78.0.1' is not a host of the subnet 10.77.0.0/16"},
        {{"10.77.0.5/16", "10.77.0.0", "10.77.0.1", NULL}, "not a host of the subnet"},
        {{"10.77.0.5/16", "10.77.255.255", "10.77.0.1", NULL}, "not a host of the subnet"},
        {{"10.77.0.5/16", "10.77.0.5", "10.77.0.1", NULL}, "is the address itself"},
        {{"10.77.0.5/16", "10.77.0.1", "", NULL}, "name server: '' is not an IPv4"},
        {{"10.77.0.5/16", "10.77.0.1", "0.0.0.0", NULL},
         "name server '0.0.0.0' is not a unicast address"},
        {{"10.77.0.5/16", "10.77.0.1", "224.0.0.251", NULL}, "is not a unicast"},
        {{"10.77.0.5/16", "10.77.0.1", "255.255.255.255", NULL}, "is not a unicast"},
    };

    for (gsize i = 0; i < G_N_ELEMENTS(cases); i++) {
        CarrelGuestNetConfig config = {.prefix = 42};
        g_autoptr(GError) error = NULL;

        if (carrel_guest_net_config_parse(cases[i].args, &config, &error))
            fail_msg("case %zu parsed", i);
        assert_true(g_error_matches(error, CARREL_GUEST_ERROR, CARREL_GUEST_ERROR_INVALID_ARG));
        if (!strstr(error->message, cases[i].fragment))
            fail_msg("'%s' not in '%s'", cases[i].fragment, error->message);
        /* Written only on success. */
        assert_int_equal(config.prefix, 42);
    }
}

static void
assert_json(JsonNode *node, const char *expected)
{
    g_autofree char *text = carrel_guest_json_to_string(node);

    assert_string_equal(text, expected);
}

static void
test_net_output(void **state)
{
    CarrelGuestNetConfig config = {0};
    CarrelGuestNetConfig none = {.none = TRUE};
    g_autoptr(JsonNode) json = NULL;
    g_autoptr(JsonNode) json_none = NULL;
    g_autofree char *resolv = NULL;
    g_autofree char *resolv_none = NULL;
    g_autoptr(GError) error = NULL;

    /* Normalised from the parsed values, not echoed. */
    assert_true(config_parse("10.77.0.5/16", "10.77.0.1", "192.0.2.53", &config, &error));
    json = carrel_guest_net_config_to_json("enp0s3", &config);
    assert_json(json, "{\"nic\":\"enp0s3\",\"address\":\"10.77.0.5/16\",\"gateway\":\"10.77.0.1\","
                      "\"dns\":\"192.0.2.53\"}\n");
    json_none = carrel_guest_net_config_to_json("enp0s3", &none);
    assert_json(json_none, "{\"nic\":\"enp0s3\",\"address\":null,\"gateway\":null,\"dns\":null}\n");
    resolv = carrel_guest_net_resolv_conf(&config);
    assert_string_equal(resolv, "nameserver 192.0.2.53\n");
    resolv_none = carrel_guest_net_resolv_conf(&none);
    assert_string_equal(resolv_none, "");
}

/* A line of /proc/net/route: addresses are network-order words printed as native integers. */
static char *
route_line(const char *iface, guint32 destination, guint32 gateway, guint flags, guint metric,
           guint32 mask)
{
    return g_strdup_printf("%s\t%08X\t%08X\t%04X\t0\t0\t%u\t%08X\t0\t0\t0%*s\n", iface,
                           GUINT32_TO_BE(destination), GUINT32_TO_BE(gateway), flags, metric,
                           GUINT32_TO_BE(mask), 60, "");
}

static gboolean
routes_are(const char *nic, guint32 gateway, ...)
{
    g_autoptr(GString) table = g_string_new("Iface\tDestination\tGateway \tFlags\tRefCnt\tUse\t"
                                            "Metric\tMask\t\tMTU\tWindow\tIRTT     \n");
    const char *line;
    va_list ap;

    va_start(ap, gateway);
    while ((line = va_arg(ap, const char *)))
        g_string_append(table, line);
    va_end(ap);
    return carrel_guest_net_default_route_is(table->str, nic, gateway);
}

static void
test_default_route_is(void **state)
{
    const guint32 gw = 0x0a4d0001;
    g_autofree char *ours = route_line("v0", 0, gw, 0x3, 0, 0);
    g_autofree char *subnet = route_line("v0", 0x0a4d0000, 0, 0x1, 0, 0xffff0000);
    g_autofree char *other_gw = route_line("v0", 0, 0x0a4d0002, 0x3, 0, 0);
    g_autofree char *other_nic = route_line("v1", 0, gw, 0x3, 0, 0);
    g_autofree char *metric = route_line("v0", 0, gw, 0x3, 50, 0);
    g_autofree char *reject = route_line("v0", 0, gw, 0x203, 0, 0);
    /* As the kernel printed it on x86-64 (little-endian) after a set-net. */
    const char *real = "v0\t00000000\t01004D0A\t0003\t0\t0\t0\t00000000\t0\t0\t0      \n"
                       "v0\t00004D0A\t00000000\t0001\t0\t0\t0\t0000FFFF\t0\t0\t0      \n";

    assert_true(routes_are("v0", gw, ours, NULL));
    assert_true(routes_are("v0", gw, subnet, ours, NULL));
    assert_false(routes_are("v0", gw, NULL));
    assert_false(routes_are("v0", gw, subnet, NULL));
    assert_false(routes_are("v0", gw, other_gw, NULL));
    assert_false(routes_are("v0", gw, other_nic, NULL));
    assert_false(routes_are("v0", gw, metric, NULL));
    assert_false(routes_are("v0", gw, reject, NULL));
    /* Two defaults: set-net replaces them with its one. */
    assert_false(routes_are("v0", gw, ours, metric, NULL));
    assert_false(routes_are("v0", gw, other_gw, ours, NULL));
    assert_false(carrel_guest_net_default_route_is("", "v0", gw));
    assert_false(carrel_guest_net_default_route_is("v0\t00000000\tzz\n", "v0", gw));
    if (G_BYTE_ORDER == G_LITTLE_ENDIAN)
        assert_true(carrel_guest_net_default_route_is(real, "v0", gw));
}

static void
assert_contents(const char *path, const char *expected)
{
    g_autofree char *text = NULL;

    assert_true(g_file_get_contents(path, &text, NULL, NULL));
    assert_string_equal(text, expected);
}

/* A regular file that every user can read, whatever umask the writer had. */
static void
assert_file(const char *path, const char *expected)
{
    GStatBuf st;

    assert_contents(path, expected);
    assert_int_equal(g_lstat(path, &st), 0);
    assert_true(S_ISREG(st.st_mode));
    assert_int_equal(st.st_mode & 07777, 0644);
}

static void
test_write_resolv_conf(void **state)
{
    g_autofree char *dir = g_dir_make_tmp("carrel-guest-net-XXXXXX", NULL);
    g_autofree char *path = g_build_filename(dir, "resolv.conf", NULL);
    g_autofree char *target = g_build_filename(dir, "stub-resolv.conf", NULL);
    g_autofree char *missing = g_build_filename(dir, "no", "resolv.conf", NULL);
    CarrelGuestNetConfig config = {.address = 0x0a4d0005, .prefix = 16, .dns = 0x0a4d0001};
    CarrelGuestNetConfig none = {.none = TRUE};
    g_autoptr(GError) error = NULL;
    mode_t mask = umask(077);

    assert_non_null(dir);
    /* A symlink (systemd-resolved's) is replaced; its target is left as it was. */
    assert_true(g_file_set_contents(target, "nameserver 127.0.0.53\n", -1, NULL));
    assert_int_equal(symlink(target, path), 0);
    assert_true(carrel_guest_net_write_resolv_conf(path, &config, &error));
    assert_file(path, "nameserver 10.77.0.1\n");
    assert_contents(target, "nameserver 127.0.0.53\n");
    /* Twice is fine; then none empties it. */
    assert_true(carrel_guest_net_write_resolv_conf(path, &config, &error));
    assert_file(path, "nameserver 10.77.0.1\n");
    assert_true(carrel_guest_net_write_resolv_conf(path, &none, &error));
    assert_file(path, "");
    assert_true(carrel_guest_net_write_resolv_conf(path, &none, &error));
    assert_file(path, "");
    assert_false(carrel_guest_net_write_resolv_conf(missing, &config, &error));
    assert_true(g_error_matches(error, CARREL_GUEST_ERROR, CARREL_GUEST_ERROR_FAILED));
    /* No temporary file left behind. */
    g_unlink(path);
    g_unlink(target);
    assert_int_equal(g_rmdir(dir), 0);
    umask(mask);
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_mac_parse),         cmocka_unit_test(test_pick_nic),
        cmocka_unit_test(test_ipv4_parse),        cmocka_unit_test(test_net_config_parse),
        cmocka_unit_test(test_net_config_errors), cmocka_unit_test(test_net_output),
        cmocka_unit_test(test_default_route_is),  cmocka_unit_test(test_write_resolv_conf),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
