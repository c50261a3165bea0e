/*
 * The type action: any Unicode text in every format, the refusals (invalid UTF-8, control
 * characters, length), and the method chosen for it (keys, guest_keysyms, clipboard).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <string.h>

#include "conf/conf.h"

static CarrelAction *
parse_action(const char *text, GError **error)
{
    g_autoptr(JsonNode) node = carrel_conf_parse_json(text, strlen(text), NULL);

    if (!node)
        fail_msg("'%s' is not JSON", text);
    return carrel_action_from_json(node, error);
}

/* The action parses, types text exactly and uses method. */
static void
assert_typed(const char *json, const char *text, CarrelTypeMethod method)
{
    g_autoptr(GError) error = NULL;
    g_autoptr(CarrelAction) action = parse_action(json, &error);

    if (!action)
        fail_msg("'%s': %s", json, error->message);
    assert_int_equal(action->kind, CARREL_ACTION_TYPE);
    assert_string_equal(action->text, text);
    if (action->method != method)
        fail_msg("'%s': method %s, expected %s", json, carrel_type_method_to_string(action->method),
                 carrel_type_method_to_string(method));
}

static void
assert_refused(const char *json, const char *fragment)
{
    g_autoptr(GError) error = NULL;
    g_autoptr(CarrelAction) action = parse_action(json, &error);

    if (action)
        fail_msg("'%s' was accepted", json);
    assert_true(g_error_matches(error, CARREL_ERROR, CARREL_ERROR_INVALID_ARG));
    if (!strstr(error->message, fragment))
        fail_msg("'%s': message '%s' lacks '%s'", json, error->message, fragment);
}

static void
test_method_names(void **state)
{
    (void)state;
    for (int m = 0; m < CARREL_TYPE_METHOD_LAST; m++)
        assert_int_equal(carrel_type_method_from_string(carrel_type_method_to_string(m)), m);
    assert_string_equal(carrel_type_method_to_string(CARREL_TYPE_METHOD_GUEST_KEYSYMS),
                        "guest_keysyms");
    assert_int_equal(carrel_type_method_from_string("xdotool"), CARREL_TYPE_METHOD_LAST);
}

/* Every format reaches the same action; the keymap's text keeps the hypervisor's keys. */
static void
test_formats_and_auto(void **state)
{
    static const char *const unicode = "na\xc3\xafve caf\xc3\xa9 \xe4\xb8\xad\xe6\x96\x87 "
                                       "\xf0\x9f\x98\x80 ok";

    (void)state;
    assert_typed("{\"action\":\"type\",\"text\":\"ls -la\\n\\tx\"}", "ls -la\n\tx",
                 CARREL_TYPE_METHOD_KEYS);
    assert_typed("{\"action\":\"type\",\"text\":\"na\xc3\xafve caf\xc3\xa9 \xe4\xb8\xad\xe6\x96"
                 "\x87 \\ud83d\\ude00 ok\"}",
                 unicode, CARREL_TYPE_METHOD_GUEST_KEYSYMS);
    assert_typed("{\"type\":\"type\",\"text\":\"\\u00df\"}", "\xc3\x9f",
                 CARREL_TYPE_METHOD_GUEST_KEYSYMS);
    assert_typed("{\"action_type\":\"TYPING\",\"parameters\":{\"text\":\"\\u4e2d\\u6587\"}}",
                 "\xe4\xb8\xad\xe6\x96\x87", CARREL_TYPE_METHOD_GUEST_KEYSYMS);
    assert_typed("{\"action_type\":\"TYPING\",\"parameters\":{\"text\":\"abc\"}}", "abc",
                 CARREL_TYPE_METHOD_KEYS);
    /* Combining marks, joiners and variation selectors are text, not control characters. */
    assert_typed("{\"action\":\"type\",\"text\":\"e\\u0301 \\ud83d\\udc69\\u200d\\ud83d\\udcbb "
                 "\\u2764\\ufe0f\"}",
                 "e\xcc\x81 \xf0\x9f\x91\xa9\xe2\x80\x8d\xf0\x9f\x92\xbb \xe2\x9d\xa4\xef\xb8\x8f",
                 CARREL_TYPE_METHOD_GUEST_KEYSYMS);
    assert_typed("{\"action\":\"type\",\"text\":\"\"}", "", CARREL_TYPE_METHOD_KEYS);
}

static void
test_methods_asked(void **state)
{
    g_autoptr(GError) error = NULL;
    g_autoptr(CarrelAction) clip = NULL;
    char **keys;

    (void)state;
    assert_typed("{\"action\":\"type\",\"text\":\"abc\",\"method\":\"guest_keysyms\"}", "abc",
                 CARREL_TYPE_METHOD_GUEST_KEYSYMS);
    assert_typed("{\"action\":\"type\",\"text\":\"abc\",\"method\":\"auto\"}", "abc",
                 CARREL_TYPE_METHOD_KEYS);
    assert_typed("{\"type\":\"type\",\"text\":\"\\u00e9\",\"method\":\"clipboard\"}", "\xc3\xa9",
                 CARREL_TYPE_METHOD_CLIPBOARD);
    assert_typed("{\"action_type\":\"TYPING\",\"parameters\":{\"text\":\"a\",\"method\":\"keys\"}}",
                 "a", CARREL_TYPE_METHOD_KEYS);

    /* Clipboard presses shift+Insert unless told otherwise; the keys are resolved like key's. */
    clip = parse_action("{\"action\":\"type\",\"text\":\"x\",\"method\":\"clipboard\"}", &error);
    assert_non_null(clip);
    assert_int_equal(clip->combos->len, 1);
    keys = g_ptr_array_index(clip->combos, 0);
    assert_string_equal(keys[0], "shift");
    assert_string_equal(keys[1], "insert");
    assert_null(keys[2]);
    g_clear_pointer(&clip, carrel_action_free);
    clip = parse_action(
        "{\"action\":\"type\",\"text\":\"x\",\"method\":\"clipboard\",\"paste_keys\":\"ctrl+v\"}",
        &error);
    assert_non_null(clip);
    keys = g_ptr_array_index(clip->combos, 0);
    assert_string_equal(keys[0], "ctrl");
    assert_string_equal(keys[1], "v");
    assert_null(keys[2]);
    g_clear_pointer(&clip, carrel_action_free);
    /* Other methods carry no keys. */
    clip = parse_action("{\"action\":\"type\",\"text\":\"\\u00e9\"}", &error);
    assert_non_null(clip);
    assert_null(clip->combos);
}

static void
test_refusals(void **state)
{
    g_autofree char *long_text = g_strnfill(CARREL_ACTION_MAX_TEXT / 3 + 1, 'x');
    g_autoptr(GString) wide = g_string_new("{\"action\":\"type\",\"text\":\"");
    g_autoptr(GError) error = NULL;

    (void)state;
    /* 4096 bytes at most, counted in bytes: 1366 three-byte characters are too many. */
    for (gsize i = 0; i < strlen(long_text); i++)
        g_string_append(wide, "\xe4\xb8\xad");
    g_string_append(wide, "\"}");
    assert_refused(wide->str, "'text' is longer than 4096 bytes");

    assert_refused("{\"action\":\"type\",\"text\":\"a\\u001bb\"}",
                   "'text': character 2 of the text (U+001B) is a control character");
    assert_refused("{\"action\":\"type\",\"text\":\"\\u00e9\\r\"}",
                   "character 2 of the text (U+000D) is a control character");
    assert_refused("{\"action\":\"type\",\"text\":\"a\\u007f\"}", "(U+007F) is a control");
    assert_refused("{\"action\":\"type\",\"text\":\"\\u0085\"}", "(U+0085) is a control");
    assert_refused("{\"type\":\"type\",\"text\":\"\\u0007\"}", "(U+0007) is a control");
    assert_refused("{\"action_type\":\"TYPING\",\"parameters\":{\"text\":\"\\u009b\"}}",
                   "(U+009B) is a control");
    assert_refused("{\"action\":\"type\",\"text\":\"\\u4e2d\",\"method\":\"keys\"}",
                   "character 1 of the text (U+4E2D) cannot be typed with method 'keys'");
    assert_refused("{\"action\":\"type\",\"text\":\"a\",\"method\":\"xdotool\"}",
                   "'method' must be one of auto, keys, guest_keysyms, clipboard");
    assert_refused("{\"action\":\"type\",\"text\":\"a\",\"method\":1}",
                   "'method' must be a string");
    assert_refused("{\"action\":\"type\",\"text\":\"a\",\"paste_keys\":\"ctrl+v\"}",
                   "'paste_keys' needs method 'clipboard'");
    assert_refused("{\"action\":\"type\",\"text\":\"a\",\"method\":\"clipboard\",\"paste_keys\":"
                   "\"ctrl+nope\"}",
                   "'paste_keys': unknown key 'nope'");
    assert_refused("{\"action\":\"type\",\"text\":\"a\",\"speed\":1}", "unknown member 'speed'");

    /* Invalid UTF-8 is refused, by the member reader and by the check itself. */
    assert_false(carrel_action_check_typed_text("ab\xff", &error));
    assert_true(g_error_matches(error, CARREL_ERROR, CARREL_ERROR_INVALID_ARG));
    assert_non_null(strstr(error->message, "not valid UTF-8"));
    g_clear_error(&error);
    assert_false(carrel_action_check_typed_text("\xed\xa0\x80", &error)); /* a surrogate */
    g_clear_error(&error);
    assert_true(carrel_action_check_typed_text("tab\there\nnext \xf0\x9f\x98\x80", NULL));
}

static void
test_choose(void **state)
{
    CarrelTypeMethod method = CARREL_TYPE_METHOD_LAST;
    g_autoptr(GError) error = NULL;

    (void)state;
    assert_true(carrel_action_choose_type_method("echo hi\n", CARREL_TYPE_METHOD_AUTO, &method,
                                                 NULL, NULL));
    assert_int_equal(method, CARREL_TYPE_METHOD_KEYS);
    assert_true(
        carrel_action_choose_type_method("\xc3\xa9", CARREL_TYPE_METHOD_AUTO, &method, NULL, NULL));
    assert_int_equal(method, CARREL_TYPE_METHOD_GUEST_KEYSYMS);
    /* Typable text past CARREL_TYPE_KEYS_AUTO_MAX characters goes through the guest (the guest's
     * input buffer could overflow), with keys as the way back; at the bound, keys. */
    {
        gboolean fallback = FALSE;

        assert_true(carrel_action_choose_type_method("0123456789", CARREL_TYPE_METHOD_AUTO, &method,
                                                     &fallback, NULL));
        assert_int_equal(method, CARREL_TYPE_METHOD_KEYS);
        assert_false(fallback);
        assert_true(carrel_action_choose_type_method(
            "echo hello > /tmp/x\n", CARREL_TYPE_METHOD_AUTO, &method, &fallback, NULL));
        assert_int_equal(method, CARREL_TYPE_METHOD_GUEST_KEYSYMS);
        assert_true(fallback);
        assert_true(carrel_action_choose_type_method("\xc3\xa9", CARREL_TYPE_METHOD_AUTO, &method,
                                                     &fallback, NULL));
        assert_false(fallback);
    }
    /* Long text stays with keysyms: clipboard is only ever asked for. */
    {
        g_autofree char *many = g_strnfill(4000, 'a');
        g_autofree char *mixed = g_strconcat(many, "\xc3\xa9", NULL);
        assert_true(
            carrel_action_choose_type_method(mixed, CARREL_TYPE_METHOD_AUTO, &method, NULL, NULL));
        assert_int_equal(method, CARREL_TYPE_METHOD_GUEST_KEYSYMS);
    }
    assert_true(
        carrel_action_choose_type_method("abc", CARREL_TYPE_METHOD_CLIPBOARD, &method, NULL, NULL));
    assert_int_equal(method, CARREL_TYPE_METHOD_CLIPBOARD);
    method = CARREL_TYPE_METHOD_LAST;
    assert_false(carrel_action_choose_type_method("\xc3\xa9", CARREL_TYPE_METHOD_KEYS, &method,
                                                  NULL, &error));
    assert_true(g_error_matches(error, CARREL_ERROR, CARREL_ERROR_INVALID_ARG));
    assert_int_equal(method, CARREL_TYPE_METHOD_LAST);
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_method_names),  cmocka_unit_test(test_formats_and_auto),
        cmocka_unit_test(test_methods_asked), cmocka_unit_test(test_refusals),
        cmocka_unit_test(test_choose),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
