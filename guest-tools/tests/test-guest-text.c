/* carrel-guest: JSON output, text clipping, /proc parsing. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <glib/gstdio.h>

#include "guest.h"

static JsonObject *
parse_json(const char *text, JsonParser *parser)
{
    g_autoptr(GError) error = NULL;

    if (!json_parser_load_from_data(parser, text, -1, &error))
        fail_msg("invalid JSON '%s': %s", text, error->message);
    assert_true(JSON_NODE_HOLDS_OBJECT(json_parser_get_root(parser)));
    return json_node_get_object(json_parser_get_root(parser));
}

static void
test_windows_json(void **state)
{
    g_autoptr(GPtrArray) windows =
        g_ptr_array_new_with_free_func((GDestroyNotify)carrel_guest_window_free);
    g_autoptr(JsonParser) parser = json_parser_new();
    g_autoptr(JsonNode) node = NULL;
    g_autofree char *text = NULL;
    CarrelGuestWindow *a = carrel_guest_window_new(0x1a00003);
    CarrelGuestWindow *b = carrel_guest_window_new(0x42);
    JsonObject *root;
    JsonArray *list;
    JsonObject *first;
    JsonObject *second;

    a->title = g_strdup("a \"quoted\" \\ title\n\twith\x01 control ✓");
    a->wm_class = g_strdup("XTerm");
    a->instance = g_strdup("xterm");
    a->pid = 1234;
    a->x = -5;
    a->y = 10;
    a->width = 640;
    a->height = 480;
    a->focused = TRUE;
    a->visible = TRUE;
    g_ptr_array_add(windows, a);
    g_ptr_array_add(windows, b);
    node = carrel_guest_windows_to_json(windows, TRUE);
    text = carrel_guest_json_to_string(node);
    assert_true(g_str_has_suffix(text, "}\n"));
    assert_ptr_equal(strchr(text, '\n'), text + strlen(text) - 1);
    root = parse_json(text, parser);
    assert_true(json_object_get_boolean_member(root, "truncated"));
    list = json_object_get_array_member(root, "windows");
    assert_int_equal(json_array_get_length(list), 2);
    first = json_array_get_object_element(list, 0);
    assert_string_equal(json_object_get_string_member(first, "id"), "0x1a00003");
    assert_string_equal(json_object_get_string_member(first, "title"), a->title);
    assert_string_equal(json_object_get_string_member(first, "class"), "XTerm");
    assert_string_equal(json_object_get_string_member(first, "instance"), "xterm");
    assert_int_equal(json_object_get_int_member(first, "pid"), 1234);
    assert_int_equal(json_object_get_int_member(first, "x"), -5);
    assert_int_equal(json_object_get_int_member(first, "height"), 480);
    assert_true(json_object_get_boolean_member(first, "focused"));
    assert_true(json_object_get_boolean_member(first, "visible"));
    second = json_array_get_object_element(list, 1);
    assert_string_equal(json_object_get_string_member(second, "id"), "0x42");
    assert_string_equal(json_object_get_string_member(second, "title"), "");
    assert_true(json_object_get_null_member(second, "class"));
    assert_true(json_object_get_null_member(second, "pid"));
    assert_false(json_object_get_boolean_member(second, "focused"));
}

static void
test_empty_windows_json(void **state)
{
    g_autoptr(JsonNode) node = carrel_guest_windows_to_json(NULL, FALSE);
    g_autofree char *text = carrel_guest_json_to_string(node);

    assert_string_equal(text, "{\"windows\":[],\"truncated\":false}\n");
}

static void
test_error_json(void **state)
{
    g_autoptr(GError) error = g_error_new(CARREL_GUEST_ERROR, CARREL_GUEST_ERROR_NOT_FOUND,
                                          "no user '%s'", "bad\xff\"name");
    g_autoptr(GError) foreign = g_error_new_literal(G_IO_ERROR, 3, "io");
    g_autoptr(JsonNode) node = carrel_guest_error_to_json(error);
    g_autoptr(JsonNode) foreign_node = carrel_guest_error_to_json(foreign);
    g_autoptr(JsonNode) null_node = carrel_guest_error_to_json(NULL);
    g_autoptr(JsonParser) parser = json_parser_new();
    g_autofree char *text = carrel_guest_json_to_string(node);
    g_autofree char *foreign_text = carrel_guest_json_to_string(foreign_node);
    g_autofree char *null_text = carrel_guest_json_to_string(null_node);
    JsonObject *inner = json_object_get_object_member(parse_json(text, parser), "error");

    assert_string_equal(json_object_get_string_member(inner, "code"), "not_found");
    assert_true(g_utf8_validate(json_object_get_string_member(inner, "message"), -1, NULL));
    assert_non_null(strstr(json_object_get_string_member(inner, "message"), "\"name"));
    assert_string_equal(foreign_text, "{\"error\":{\"code\":\"internal\",\"message\":\"io\"}}\n");
    assert_non_null(strstr(null_text, "\"internal\""));
}

static void
test_error_names(void **state)
{
    for (int i = 0; i < CARREL_GUEST_ERROR_LAST; i++) {
        const char *name = carrel_guest_error_code_to_string((CarrelGuestErrorCode)i);

        assert_non_null(name);
        assert_int_equal(carrel_guest_error_code_from_string(name), i);
    }
    assert_string_equal(carrel_guest_error_code_to_string(CARREL_GUEST_ERROR_LAST), "failed");
    assert_string_equal(carrel_guest_error_code_to_string(CARREL_GUEST_ERROR_DISPLAY),
                        "display_unavailable");
    assert_int_equal(carrel_guest_error_code_from_string("nope"), CARREL_GUEST_ERROR_FAILED);
    assert_int_equal(carrel_guest_error_code_from_string(NULL), CARREL_GUEST_ERROR_FAILED);
    assert_int_equal(carrel_guest_error_exit_status(NULL), 1);
}

static void
test_text_clip(void **state)
{
    g_autofree char *long_text = g_strnfill(10000, 'x');
    g_autofree char *clipped = carrel_guest_text_clip(long_text, -1, 512);
    g_autofree char *wide = carrel_guest_text_clip("✓✓✓✓", -1, 2);
    g_autofree char *invalid = carrel_guest_text_clip("a\xff\xfe"
                                                      "b",
                                                      -1, 10);
    g_autofree char *null = carrel_guest_text_clip(NULL, -1, 10);
    g_autofree char *split = carrel_guest_text_clip("é", 1, 10);
    g_autofree char *exact = carrel_guest_text_clip("abc", 3, 3);

    assert_int_equal(strlen(clipped), 512);
    assert_string_equal(wide, "✓✓");
    assert_true(g_utf8_validate(invalid, -1, NULL));
    assert_true(g_str_has_prefix(invalid, "a"));
    assert_true(g_str_has_suffix(invalid, "b"));
    assert_string_equal(null, "");
    assert_true(g_utf8_validate(split, -1, NULL));
    assert_string_equal(exact, "abc");
}

static void
test_latin1(void **state)
{
    g_autofree char *utf8 = carrel_guest_text_from_latin1("caf\xe9 \xff", 6);
    gsize len = 0;
    g_autofree char *latin1 = carrel_guest_text_to_latin1("café ✓", &len);

    assert_string_equal(utf8, "café ÿ");
    assert_int_equal(len, 6);
    assert_memory_equal(latin1, "caf\xe9 ?", 6);
}

static void
test_utf8_boundary(void **state)
{
    const char *text = "a✓b"; /* a, 3 bytes, b */

    assert_int_equal(carrel_guest_text_utf8_boundary(text, 5, 10), 5);
    assert_int_equal(carrel_guest_text_utf8_boundary(text, 5, 5), 5);
    assert_int_equal(carrel_guest_text_utf8_boundary(text, 5, 4), 4);
    assert_int_equal(carrel_guest_text_utf8_boundary(text, 5, 3), 1);
    assert_int_equal(carrel_guest_text_utf8_boundary(text, 5, 2), 1);
    assert_int_equal(carrel_guest_text_utf8_boundary(text, 5, 1), 1);
    assert_int_equal(carrel_guest_text_utf8_boundary(text, 5, 0), 0);
}

static void
test_display_number(void **state)
{
    int n = -1;

    assert_true(carrel_guest_display_number(":0", &n));
    assert_int_equal(n, 0);
    assert_true(carrel_guest_display_number(":12.1", &n));
    assert_int_equal(n, 12);
    assert_true(carrel_guest_display_number("unix:3", &n));
    assert_int_equal(n, 3);
    assert_true(carrel_guest_display_number("localhost:10.0", &n));
    assert_int_equal(n, 10);
    assert_false(carrel_guest_display_number("0", NULL));
    assert_false(carrel_guest_display_number(":", NULL));
    assert_false(carrel_guest_display_number(":a", NULL));
    assert_false(carrel_guest_display_number(":1.", NULL));
    assert_false(carrel_guest_display_number(":1x", NULL));
    assert_false(carrel_guest_display_number(":99999999", NULL));
    assert_false(carrel_guest_display_number(NULL, NULL));
}

static void
test_is_url(void **state)
{
    assert_true(carrel_guest_is_url("https://example.com"));
    assert_true(carrel_guest_is_url("file:///tmp/x"));
    assert_true(carrel_guest_is_url("mailto:a@b"));
    assert_false(carrel_guest_is_url("/tmp/x:y"));
    assert_false(carrel_guest_is_url("notes.txt"));
    assert_false(carrel_guest_is_url("C:foo"));
    assert_false(carrel_guest_is_url("1http://x"));
    assert_false(carrel_guest_is_url(""));
    assert_false(carrel_guest_is_url(NULL));
}

static void
test_environ(void **state)
{
    static const char block[] = "A=1\0DISPLAY=:0\0XAUTHORITY=/home/agent/.Xauthority\0EMPTY=\0"
                                "DISPLAYX=no\0TAIL=unterminated";
    gsize len = sizeof(block) - 1;
    g_autofree char *display = carrel_guest_environ_lookup(block, len, "DISPLAY");
    g_autofree char *xauth = carrel_guest_environ_lookup(block, len, "XAUTHORITY");
    g_autofree char *empty = carrel_guest_environ_lookup(block, len, "EMPTY");
    g_autofree char *tail = carrel_guest_environ_lookup(block, len, "TAIL");
    g_autofree char *missing = carrel_guest_environ_lookup(block, len, "DISP");
    g_autofree char *huge_value = g_strnfill(CARREL_GUEST_LIMIT_ENV_VALUE + 1, 'v');
    g_autofree char *huge = g_strconcat("BIG=", huge_value, NULL);
    g_autofree char *big = carrel_guest_environ_lookup(huge, strlen(huge), "BIG");

    assert_string_equal(display, ":0");
    assert_string_equal(xauth, "/home/agent/.Xauthority");
    assert_string_equal(empty, "");
    assert_string_equal(tail, "unterminated");
    assert_null(missing);
    assert_null(big);
}

static void
test_split_and_server_auth(void **state)
{
    static const char cmdline[] = "/usr/lib/xorg/Xorg\0:0\0-seat\0seat0\0-auth\0"
                                  "/var/run/lightdm/root/:0\0-nolisten\0tcp\0";
    g_auto(GStrv) argv = carrel_guest_split_nul(cmdline, sizeof(cmdline) - 1, 256);
    g_auto(GStrv) two = carrel_guest_split_nul(cmdline, sizeof(cmdline) - 1, 2);
    const char *xvfb[] = {"Xvfb", ":99", "-screen", "0", "1x1x24", "-auth", "/tmp/a", NULL};
    const char *implicit[] = {"/usr/bin/X", "-auth", "/run/x", NULL};
    const char *relative[] = {"Xorg", ":0", "-auth", "rel", NULL};
    const char *not_x[] = {"xterm", ":0", "-auth", "/tmp/a", NULL};
    g_autofree char *lightdm = NULL;
    g_autofree char *wrong = NULL;
    g_autofree char *vfb = NULL;
    g_autofree char *imp = NULL;
    g_autofree char *imp1 = NULL;

    assert_int_equal(g_strv_length(argv), 8);
    assert_int_equal(g_strv_length(two), 2);
    lightdm = carrel_guest_server_auth_from_argv((const char *const *)argv, 0);
    wrong = carrel_guest_server_auth_from_argv((const char *const *)argv, 1);
    vfb = carrel_guest_server_auth_from_argv(xvfb, 99);
    imp = carrel_guest_server_auth_from_argv(implicit, 0);
    imp1 = carrel_guest_server_auth_from_argv(implicit, 1);
    assert_string_equal(lightdm, "/var/run/lightdm/root/:0");
    assert_null(wrong);
    assert_string_equal(vfb, "/tmp/a");
    assert_string_equal(imp, "/run/x");
    assert_null(imp1);
    assert_null(carrel_guest_server_auth_from_argv(relative, 0));
    assert_null(carrel_guest_server_auth_from_argv(not_x, 0));
    assert_null(carrel_guest_server_auth_from_argv(NULL, 0));
}

static void
test_read_bounded(void **state)
{
    g_autofree char *dir = g_dir_make_tmp("carrel-guest-XXXXXX", NULL);
    g_autofree char *path = g_build_filename(dir, "f", NULL);
    g_autofree char *data = NULL;
    g_autoptr(GError) error = NULL;
    gsize len = 0;

    assert_true(g_file_set_contents(path, "0123456789", 10, NULL));
    assert_true(carrel_guest_read_bounded(path, 4, &data, &len, &error));
    assert_int_equal(len, 4);
    assert_string_equal(data, "0123");
    g_clear_pointer(&data, g_free);
    assert_true(carrel_guest_read_bounded(path, 100, &data, &len, &error));
    assert_int_equal(len, 10);
    g_unlink(path);
    g_clear_pointer(&data, g_free);
    assert_false(carrel_guest_read_bounded(path, 4, &data, &len, &error));
    assert_true(g_error_matches(error, CARREL_GUEST_ERROR, CARREL_GUEST_ERROR_NOT_FOUND));
    g_rmdir(dir);
}

static void
test_type_keysyms(void **state)
{
    (void)state;
    assert_int_equal(carrel_guest_type_keysym('a'), 0x61);
    assert_int_equal(carrel_guest_type_keysym('~'), 0x7e);
    assert_int_equal(carrel_guest_type_keysym(' '), 0x20);
    assert_int_equal(carrel_guest_type_keysym('\n'), 0xff0d);
    assert_int_equal(carrel_guest_type_keysym('\t'), 0xff09);
    assert_int_equal(carrel_guest_type_keysym(0xe9), 0xe9);          /* é: Latin-1 keysym */
    assert_int_equal(carrel_guest_type_keysym(0xa0), 0xa0);          /* no-break space */
    assert_int_equal(carrel_guest_type_keysym(0x4e2d), 0x01004e2d);  /* 中 */
    assert_int_equal(carrel_guest_type_keysym(0x1f600), 0x0101f600); /* 😀 */
    assert_int_equal(carrel_guest_type_keysym(0x20ac), 0x010020ac);  /* € */
    assert_int_equal(carrel_guest_type_keysym('\r'), 0);
    assert_int_equal(carrel_guest_type_keysym(0x1b), 0);
    assert_int_equal(carrel_guest_type_keysym(0x7f), 0);
    assert_int_equal(carrel_guest_type_keysym(0x9b), 0);
    assert_int_equal(carrel_guest_type_keysym(0x110000), 0);
}

static void
test_type_check(void **state)
{
    g_autoptr(GError) error = NULL;
    const char ok[] = "na\xc3\xafve \xe4\xb8\xad\xf0\x9f\x98\x80\n\t";
    g_autofree char *big = g_strnfill(CARREL_GUEST_LIMIT_TYPE_BYTES + 1, 'a');

    (void)state;
    assert_true(carrel_guest_type_check(ok, strlen(ok), NULL));
    assert_true(carrel_guest_type_check("", 0, NULL));
    assert_false(carrel_guest_type_check("a\x1b", 2, &error));
    assert_true(g_error_matches(error, CARREL_GUEST_ERROR, CARREL_GUEST_ERROR_INVALID_ARG));
    assert_non_null(strstr(error->message, "character 2 of the text (U+001B)"));
    g_clear_error(&error);
    assert_false(carrel_guest_type_check("a\0b", 3, &error)); /* NUL inside */
    assert_non_null(strstr(error->message, "not valid UTF-8"));
    g_clear_error(&error);
    assert_false(carrel_guest_type_check("\xc3", 1, &error)); /* cut character */
    g_clear_error(&error);
    assert_false(carrel_guest_type_check("\xc2\x85", 2, &error)); /* C1 NEL */
    g_clear_error(&error);
    assert_false(carrel_guest_type_check(big, strlen(big), &error));
    assert_true(g_error_matches(error, CARREL_GUEST_ERROR, CARREL_GUEST_ERROR_LIMIT));
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_windows_json),
        cmocka_unit_test(test_empty_windows_json),
        cmocka_unit_test(test_error_json),
        cmocka_unit_test(test_error_names),
        cmocka_unit_test(test_text_clip),
        cmocka_unit_test(test_latin1),
        cmocka_unit_test(test_utf8_boundary),
        cmocka_unit_test(test_display_number),
        cmocka_unit_test(test_type_keysyms),
        cmocka_unit_test(test_type_check),
        cmocka_unit_test(test_is_url),
        cmocka_unit_test(test_environ),
        cmocka_unit_test(test_split_and_server_auth),
        cmocka_unit_test(test_read_bounded),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
