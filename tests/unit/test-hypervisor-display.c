/* hypervisor: screenshots, HID plans and the SPICE display, on the fake and on libvirt's
 * test driver. */
#include <png.h>

#include "hypervisor-fixture.h"

static GBytes *
make_png(guint width, guint height, guint32 format, guint8 fill)
{
    png_image image;
    gsize channels = PNG_IMAGE_SAMPLE_CHANNELS(format);
    g_autofree guint8 *pixels = g_malloc((gsize)width * height * channels);
    png_alloc_size_t size = 0;
    guint8 *out;

    memset(pixels, fill, (gsize)width * height * channels);
    pixels[0] = (guint8)(fill + 1); /* not blank */
    memset(&image, 0, sizeof(image));
    image.version = PNG_IMAGE_VERSION;
    image.width = width;
    image.height = height;
    image.format = format;
    assert_true(png_image_write_to_memory(&image, NULL, &size, 0, pixels, 0, NULL));
    out = g_malloc(size);
    assert_true(png_image_write_to_memory(&image, out, &size, 0, pixels, 0, NULL));
    return g_bytes_new_take(out, size);
}

static void
test_fake_screenshot(void **state)
{
    g_autoptr(CarrelHypervisor) hv = carrel_hypervisor_new_fake();
    g_autofree char *xml = make_xml("carrel-s-0000000000e6", "s-0000000000e6");
    const char *name = "carrel-s-0000000000e6";
    g_autoptr(GBytes) shot = NULL;
    g_autoptr(GBytes) png = make_png(7, 5, PNG_FORMAT_RGB, 0x20);
    g_autoptr(GBytes) hostile = g_bytes_new_static("P6\n99999 1\n255\n", 15);
    g_autoptr(GError) error = NULL;
    guint width = 0, height = 0;

    assert_false(carrel_hypervisor_screenshot(hv, name, &shot, NULL, NULL, &error));
    assert_error(error, CARREL_ERROR_NOT_FOUND, NULL);
    g_clear_error(&error);
    assert_true(carrel_hypervisor_define_start(hv, xml, NULL));
    assert_true(carrel_hypervisor_screenshot(hv, name, &shot, &width, &height, NULL));
    assert_int_equal(width, 4);
    assert_int_equal(height, 3);
    assert_true(carrel_image_ppm_is_blank(shot));
    g_clear_pointer(&shot, g_bytes_unref);
    /* PNG, as libvirt hands it over, comes back as PPM. */
    carrel_hypervisor_fake_set_screen(hv, png);
    assert_true(carrel_hypervisor_screenshot(hv, name, &shot, &width, &height, NULL));
    assert_int_equal(width * 10 + height, 75);
    assert_true(carrel_image_ppm_parse(shot, NULL, NULL, NULL, NULL));
    assert_false(carrel_image_ppm_is_blank(shot));
    carrel_hypervisor_fake_set_screen(hv, hostile);
    width = 1;
    assert_false(carrel_hypervisor_screenshot(hv, name, NULL, &width, NULL, &error));
    assert_error(error, CARREL_ERROR_INVALID_ARG, "domain 'carrel-s-0000000000e6': screenshot");
    assert_int_equal(width, 1);
    carrel_hypervisor_fake_set_screen(hv, NULL);
    assert_true(carrel_hypervisor_screenshot(hv, name, NULL, NULL, NULL, NULL));
}

static CarrelAction *
action_new(CarrelActionKind kind)
{
    CarrelAction *action = g_new0(CarrelAction, 1);

    action->kind = kind;
    return action;
}

static void
assert_plan_refused(const CarrelAction *action, guint width, guint height, const char *fragment)
{
    g_autoptr(GError) error = NULL;
    g_autoptr(GPtrArray) plan =
        carrel_hypervisor_hid_plan(action, width, height, (CarrelPoint){0, 0}, NULL, &error);

    assert_null(plan);
    assert_true(g_error_matches(error, CARREL_ERROR, CARREL_ERROR_INVALID_ARG));
    if (!strstr(error->message, fragment))
        fail_msg("message '%s' lacks '%s'", error->message, fragment);
}

static char *
plan_text(const CarrelAction *action, guint width, guint height, CarrelPoint pointer,
          CarrelPoint *ret_pointer)
{
    g_autoptr(GError) error = NULL;
    g_autoptr(GPtrArray) plan =
        carrel_hypervisor_hid_plan(action, width, height, pointer, ret_pointer, &error);

    if (!plan)
        fail_msg("plan: %s", error->message);
    return carrel_hypervisor_hid_plan_to_text(plan);
}

static void
test_hid_plan_abs(void **state)
{
    g_autoptr(CarrelAction) move = action_new(CARREL_ACTION_MOUSE_MOVE);
    CarrelPoint pointer = {0, 0};
    g_autofree char *text = NULL;
    g_autofree char *last = NULL;

    move->has_point = TRUE;
    move->point = (CarrelPoint){1, 2};
    text = plan_text(move, 3, 5, pointer, &pointer);
    /* round(1 * 32767 / 2) = 16384 (16383.5 rounds up), round(2 * 32767 / 4) = 16384 */
    assert_string_equal(text, "{\"events\":[{\"type\":\"abs\",\"data\":{\"axis\":\"x\",\"value\":"
                              "16384}},{\"type\":\"abs\",\"data\":{\"axis\":\"y\",\"value\":"
                              "16384}}]}\n");
    assert_int_equal(pointer.x, 1);
    assert_int_equal(pointer.y, 2);
    move->point = (CarrelPoint){16383, 16383};
    last = plan_text(move, CARREL_HYPERVISOR_SCREEN_MAX_SIDE, CARREL_HYPERVISOR_SCREEN_MAX_SIDE,
                     pointer, NULL);
    assert_non_null(strstr(last, "\"value\":32767}},{\"type\":\"abs\",\"data\":{\"axis\":\"y\","
                                 "\"value\":32767}}"));
}

static void
test_hid_plan_steps(void **state)
{
    g_autoptr(CarrelAction) wait = action_new(CARREL_ACTION_WAIT);
    g_autoptr(CarrelAction) shot = action_new(CARREL_ACTION_SCREENSHOT);
    g_autoptr(CarrelAction) click = action_new(CARREL_ACTION_CLICK);
    g_autoptr(GPtrArray) plan = NULL;
    g_autoptr(GPtrArray) empty = NULL;
    g_autofree char *command = NULL;
    g_autofree char *text = NULL;
    CarrelPoint pointer = {0, 0};

    wait->duration_ms = 250;
    plan = carrel_hypervisor_hid_plan(wait, 1280, 800, pointer, NULL, NULL);
    assert_int_equal(plan->len, 1);
    assert_null(((CarrelHidStep *)g_ptr_array_index(plan, 0))->arguments);
    assert_int_equal(((CarrelHidStep *)g_ptr_array_index(plan, 0))->delay_ms, 250);
    assert_null(carrel_hypervisor_hid_command(g_ptr_array_index(plan, 0)));
    empty = carrel_hypervisor_hid_plan(shot, 1280, 800, pointer, NULL, NULL);
    assert_int_equal(empty->len, 0);

    /* A click where the pointer is: no move; the pointer stays, clamped to a smaller screen. */
    click->count = 1;
    text = plan_text(click, 100, 100, (CarrelPoint){500, 50}, &pointer);
    assert_null(strstr(text, "abs"));
    assert_int_equal(pointer.x, 99);
    assert_int_equal(pointer.y, 50);
    g_clear_pointer(&plan, g_ptr_array_unref);
    plan = carrel_hypervisor_hid_plan(click, 100, 100, pointer, NULL, NULL);
    command = carrel_hypervisor_hid_command(g_ptr_array_index(plan, 0));
    assert_string_equal(command, "{\"execute\":\"input-send-event\",\"arguments\":{\"events\":"
                                 "[{\"type\":\"btn\",\"data\":{\"down\":true,\"button\":"
                                 "\"left\"}}]}}");
}

static void
test_hid_plan_refusals(void **state)
{
    g_autoptr(CarrelAction) click = action_new(CARREL_ACTION_CLICK);
    g_autoptr(CarrelAction) key = action_new(CARREL_ACTION_KEY);
    g_autoptr(CarrelAction) type = action_new(CARREL_ACTION_TYPE);
    g_autoptr(CarrelAction) drag = action_new(CARREL_ACTION_DRAG);
    g_autoptr(CarrelAction) scroll = action_new(CARREL_ACTION_SCROLL);
    g_autoptr(CarrelAction) move = action_new(CARREL_ACTION_MOUSE_MOVE);
    g_autoptr(CarrelAction) bogus = action_new(CARREL_ACTION_LAST);
    CarrelPoint one = {1, 1};

    click->count = 1;
    assert_plan_refused(click, 0, 800, "screen size 0x800 is not valid");
    assert_plan_refused(click, 1280, CARREL_HYPERVISOR_SCREEN_MAX_SIDE + 1, "is not valid");
    click->has_point = TRUE;
    click->point = (CarrelPoint){1280, 0};
    assert_plan_refused(click, 1280, 800, "point (1280, 0) is off the screen (1280x800)");
    click->point = (CarrelPoint){0, 0};
    click->count = 4;
    assert_plan_refused(click, 1280, 800, "click action is not valid");
    click->count = 1;
    click->modifiers = g_strsplit("ctrl x\"}]}", " ", -1);
    assert_plan_refused(click, 1280, 800, "key 'x\\\"}]}' is not a QKeyCode");

    assert_plan_refused(key, 1280, 800, "key action is not valid");
    key->combos = g_ptr_array_new_with_free_func((GDestroyNotify)g_strfreev);
    g_ptr_array_add(key->combos, g_strdupv((char *[]){NULL}));
    assert_plan_refused(key, 1280, 800, "a key combination must have 1 to 8 keys");
    assert_plan_refused(type, 1280, 800, "type action is not valid");
    type->text = g_strdup("\xc3\xa9");
    assert_plan_refused(type, 1280, 800, "cannot be typed");

    assert_plan_refused(drag, 1280, 800, "drag action is not valid");
    drag->path = g_array_new(FALSE, TRUE, sizeof(CarrelPoint));
    g_array_append_val(drag->path, one);
    assert_plan_refused(drag, 1280, 800, "drag action is not valid");
    drag->path_from_pointer = TRUE;
    g_array_index(drag->path, CarrelPoint, 0).y = 800;
    assert_plan_refused(drag, 1280, 800, "point (1, 800) is off the screen");

    assert_plan_refused(scroll, 1280, 800, "scroll action is not valid");
    scroll->dy = CARREL_ACTION_MAX_SCROLL + 1;
    assert_plan_refused(scroll, 1280, 800, "scroll action is not valid");
    assert_plan_refused(move, 1280, 800, "mouse_move action is not valid");
    assert_plan_refused(bogus, 1280, 800, "unknown action kind");
}

/* A live domain XML as libvirt 9.0 shows a running carrel domain (shortened). */
static const char live_spice_xml[] =
    "<domain type='qemu' id='7'>\n"
    "  <name>carrel-s-0000000000a1</name>\n"
    "  <devices>\n"
    "    <graphics type='vnc' port='5901'/>\n"
    "    <graphics type='spice' port='5903' autoport='yes' listen='127.0.0.1' passwd='old'>\n"
    "      <listen type='address' address='127.0.0.1'/>\n"
    "      <image compression='off'/>\n"
    "      <filetransfer enable='no'/>\n"
    "    </graphics>\n"
    "  </devices>\n"
    "</domain>\n";

static void
test_spice_scan(void **state)
{
    CarrelSpiceInfo info = {0};
    g_autofree char *graphics = NULL;
    g_autoptr(GError) error = NULL;

    assert_true(carrel_hypervisor_spice_scan(live_spice_xml, "pw<&'", 1893456000, &info, &graphics,
                                             &error));
    assert_null(error);
    assert_int_equal(info.port, 5903);
    assert_int_equal(info.run_id, 7);
    assert_string_equal(graphics,
                        "<graphics type='spice' port='5903' autoport='yes' listen='127.0.0.1' "
                        "passwd='pw&lt;&amp;&apos;' passwdValidTo='2030-01-01T00:00:00' "
                        "connected='keep'><listen type='address' address='127.0.0.1'></listen>"
                        "<image compression='off'></image><filetransfer enable='no'>"
                        "</filetransfer></graphics>");
    /* Inactive: no id, port -1. */
    assert_true(carrel_hypervisor_spice_scan(
        "<domain><devices><graphics type='spice' port='-1' autoport='yes'/></devices></domain>",
        NULL, 0, &info, NULL, NULL));
    assert_int_equal(info.port, 0);
    assert_int_equal(info.run_id, -1);
    /* No SPICE (a <graphics> outside <devices> does not count), two, malformed. */
    assert_false(carrel_hypervisor_spice_scan(
        "<domain id='1'><graphics type='spice' port='5900'/><devices/></domain>", NULL, 0, &info,
        NULL, &error));
    assert_error(error, CARREL_ERROR_UNSUPPORTED, NULL);
    g_clear_error(&error);
    assert_false(carrel_hypervisor_spice_scan("<domain id='1'><devices><graphics type='spice'/>"
                                              "<graphics type='spice'/></devices></domain>",
                                              NULL, 0, &info, NULL, &error));
    assert_error(error, CARREL_ERROR_HYPERVISOR, NULL);
    g_clear_error(&error);
    assert_false(carrel_hypervisor_spice_scan("<domain><devices>", NULL, 0, NULL, NULL, &error));
    assert_non_null(error);
}

/* The VNC display's socket, as libvirt shows it: in <listen>, or the older socket attribute. */
static void
test_vnc_scan(void **state)
{
    g_autofree char *path = NULL;
    g_autofree char *old = NULL;
    g_autoptr(GError) error = NULL;

    assert_true(carrel_hypervisor_vnc_scan(
        "<domain id='3'><devices><graphics type='spice' port='5900'/>"
        "<graphics type='vnc'><listen type='socket' "
        "socket='/var/lib/libvirt/qemu/domain-3-carrel-s-1/vnc.sock'/></graphics>"
        "</devices></domain>",
        &path, &error));
    assert_string_equal(path, "/var/lib/libvirt/qemu/domain-3-carrel-s-1/vnc.sock");
    assert_true(carrel_hypervisor_vnc_scan(
        "<domain><devices><graphics type='vnc' socket='/run/v.sock'/></devices></domain>", &old,
        NULL));
    assert_string_equal(old, "/run/v.sock");
    /* A port-only VNC, a relative path, a socket outside <devices>, malformed XML. */
    assert_false(carrel_hypervisor_vnc_scan(live_spice_xml, &path, &error));
    assert_error(error, CARREL_ERROR_UNSUPPORTED, "no VNC display");
    g_clear_error(&error);
    assert_false(carrel_hypervisor_vnc_scan(
        "<domain><devices><graphics type='vnc' socket='v.sock'/></devices></domain>", &path,
        &error));
    assert_error(error, CARREL_ERROR_UNSUPPORTED, NULL);
    g_clear_error(&error);
    assert_false(carrel_hypervisor_vnc_scan(
        "<domain><graphics type='vnc' socket='/v.sock'/><devices/></domain>", &path, &error));
    assert_error(error, CARREL_ERROR_UNSUPPORTED, NULL);
    g_clear_error(&error);
    assert_false(carrel_hypervisor_vnc_scan("<domain><devices>", &path, &error));
    assert_non_null(error);
}

static void
test_fake_spice(void **state)
{
    g_autoptr(CarrelHypervisor) hv = carrel_hypervisor_new_fake();
    g_autofree char *xml = make_xml("carrel-s-0000000000f5", "s-0000000000f5");
    g_autofree char *pw = NULL;
    g_autoptr(GError) error = NULL;
    const char *name = "carrel-s-0000000000f5";
    CarrelSpiceInfo first = {0}, second = {0};
    gint64 until = 0;

    assert_true(carrel_hypervisor_define_start(hv, xml, NULL));
    assert_true(carrel_hypervisor_spice_info(hv, name, &first, NULL));
    assert_true(first.port > 0);
    assert_true(carrel_hypervisor_spice_password(hv, name, "secret", 1234, NULL));
    pw = carrel_hypervisor_fake_get_spice_password(hv, name, &until);
    assert_string_equal(pw, "secret");
    assert_int_equal(until, 1234);
    assert_false(carrel_hypervisor_spice_password(hv, name, "", 1234, &error));
    assert_error(error, CARREL_ERROR_INVALID_ARG, NULL);
    g_clear_error(&error);
    /* A new QEMU: a new run id and no password. */
    assert_true(carrel_hypervisor_destroy(hv, name, NULL));
    assert_false(carrel_hypervisor_spice_info(hv, name, &second, &error));
    assert_error(error, CARREL_ERROR_WRONG_STATE, "domain 'carrel-s-0000000000f5': ");
    g_clear_error(&error);
    assert_true(carrel_hypervisor_start(hv, name, NULL));
    assert_true(carrel_hypervisor_spice_info(hv, name, &second, NULL));
    assert_true(second.run_id != first.run_id);
    assert_null(carrel_hypervisor_fake_get_spice_password(hv, name, NULL));
}

static void
test_libvirt_spice_on_test_driver(void **state)
{
    g_autoptr(GError) error = NULL;
    g_autoptr(CarrelHypervisor) hv = carrel_hypervisor_open_libvirt(TEST_URI, &error);
    g_autofree char *xml = make_xml("carrel-s-0000000000f6", "s-0000000000f6");
    CarrelSpiceInfo info = {0};

    assert_non_null(hv);
    assert_true(carrel_hypervisor_define_start(hv, xml, NULL));
    /* The test driver runs no QEMU: SPICE never listens and passwords cannot be set. */
    assert_false(carrel_hypervisor_spice_info(hv, "carrel-s-0000000000f6", &info, &error));
    assert_error(error, CARREL_ERROR_WRONG_STATE, NULL);
    g_clear_error(&error);
    assert_false(carrel_hypervisor_spice_password(hv, "carrel-s-0000000000f6", "pw", 1, &error));
    assert_error(error, CARREL_ERROR_UNSUPPORTED, NULL);
    assert_true(carrel_hypervisor_destroy(hv, "carrel-s-0000000000f6", NULL));
    assert_true(carrel_hypervisor_undefine(hv, "carrel-s-0000000000f6", NULL));
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_fake_screenshot), cmocka_unit_test(test_hid_plan_abs),
        cmocka_unit_test(test_hid_plan_steps),  cmocka_unit_test(test_hid_plan_refusals),
        cmocka_unit_test(test_spice_scan),      cmocka_unit_test(test_vnc_scan),
        cmocka_unit_test(test_fake_spice),      cmocka_unit_test(test_libvirt_spice_on_test_driver),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
