/* set-mac's pure parts: MAC parsing and the choice of interface. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>
#include <string.h>

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

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_mac_parse),
        cmocka_unit_test(test_pick_nic),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
