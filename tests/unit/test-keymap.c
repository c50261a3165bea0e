/*
 * The keymap of the conf module: characters typed key by key, key names and combinations, and its
 * table of names (every entry a QKeyCode).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <string.h>

#include "conf/conf.h"
#include "conf/conf-priv.h"

/* US layout: the characters typed with shift held. */
static const char shifted[] = "~!@#$%^&*()_+{}|:\"<>?ABCDEFGHIJKLMNOPQRSTUVWXYZ";

static const struct {
    char c;
    const char *qcode;
    gboolean shift;
} char_samples[] = {
    {'a', "a", FALSE},
    {'A', "a", TRUE},
    {'0', "0", FALSE},
    {'!', "1", TRUE},
    {' ', "spc", FALSE},
    {'"', "apostrophe", TRUE},
    {'\'', "apostrophe", FALSE},
    {'`', "grave_accent", FALSE},
    {'~', "grave_accent", TRUE},
    {'<', "comma", TRUE},
    {'>', "dot", TRUE},
    {'\\', "backslash", FALSE},
    {'|', "backslash", TRUE},
    {'_', "minus", TRUE},
    {'+', "equal", TRUE},
    {'{', "bracket_left", TRUE},
    {']', "bracket_right", FALSE},
    {':', "semicolon", TRUE},
    {'?', "slash", TRUE},
    {'*', "8", TRUE},
};

static void
test_keymap_characters(void **state)
{
    const char *qcode;
    gboolean shift;
    guint count = 0;

    for (int c = 0x20; c <= 0x7e; c++) {
        qcode = NULL;
        if (!carrel_keymap_from_char((char)c, &qcode, &shift))
            fail_msg("no key for '%c'", c);
        assert_true(carrel_keymap_is_qcode(qcode));
        if (shift != (strchr(shifted, c) != NULL))
            fail_msg("'%c': shift is %d", c, shift);
        count++;
    }
    assert_int_equal(count, 95);
    assert_true(carrel_keymap_from_char('\n', &qcode, &shift));
    assert_string_equal(qcode, "ret");
    assert_false(shift);
    assert_true(carrel_keymap_from_char('\t', &qcode, &shift));
    assert_string_equal(qcode, "tab");
    assert_false(carrel_keymap_from_char('\r', &qcode, &shift));
    assert_false(carrel_keymap_from_char(0x7f, &qcode, &shift));
    assert_false(carrel_keymap_from_char((char)0xc3, &qcode, &shift));

    for (gsize i = 0; i < G_N_ELEMENTS(char_samples); i++) {
        assert_true(carrel_keymap_from_char(char_samples[i].c, &qcode, &shift));
        assert_string_equal(qcode, char_samples[i].qcode);
        assert_int_equal(shift, char_samples[i].shift);
    }
}

static void
test_keymap_check_text(void **state)
{
    g_autoptr(GError) error = NULL;

    assert_true(carrel_keymap_check_text("", NULL));
    assert_true(carrel_keymap_check_text("ls -la | grep '~' && echo \"$HOME\"\n\tdone", NULL));
    assert_false(carrel_keymap_check_text("h\xc3\xa9llo", &error));
    assert_true(g_error_matches(error, CARREL_ERROR, CARREL_ERROR_INVALID_ARG));
    assert_non_null(strstr(error->message, "character 2 of the text (U+00E9) cannot be typed"));
    assert_non_null(strstr(error->message, "guest_keysyms"));
    g_clear_error(&error);
    assert_false(carrel_keymap_check_text("ab\xff", &error));
    assert_string_equal(error->message, "text is not valid UTF-8");
}

static void
assert_combo(const char *combo, const char *expected)
{
    g_autoptr(GError) error = NULL;
    g_auto(GStrv) keys = carrel_keymap_parse_combo(combo, &error);
    g_autofree char *joined = NULL;

    if (!keys)
        fail_msg("'%s': %s", combo, error->message);
    joined = g_strjoinv("+", keys);
    if (!g_str_equal(joined, expected))
        fail_msg("'%s' gave '%s', expected '%s'", combo, joined, expected);
    for (gsize i = 0; keys[i]; i++)
        assert_true(carrel_keymap_is_qcode(keys[i]));
}

static void
assert_key(const char *name, gboolean caseless, const char *qcode, gboolean shift)
{
    g_autoptr(GError) error = NULL;
    const char *got = NULL;
    gboolean got_shift = !shift;

    if (!carrel_keymap_lookup(name, caseless, &got, &got_shift, &error))
        fail_msg("'%s': %s", name, error->message);
    if (!g_str_equal(got, qcode) || got_shift != shift)
        fail_msg("'%s' gave '%s' shift %d, expected '%s' shift %d", name, got, got_shift, qcode,
                 shift);
}

static void
test_keymap_combos(void **state)
{
    assert_combo("ctrl+shift+t", "ctrl+shift+t");
    assert_combo("Return", "ret");
    assert_combo("super", "meta_l");
    assert_combo("F5", "f5");
    assert_combo("ctrl+alt+Delete", "ctrl+alt+delete");
    assert_combo("KP_Enter", "kp_enter");
    assert_combo("Page_Up", "pgup");
    assert_combo("BackSpace", "backspace");
    assert_combo("a", "a");
    assert_combo("A", "shift+a");
    assert_combo("!", "shift+1");
    assert_combo("+", "shift+equal");
    assert_combo("ctrl++", "ctrl+shift+equal");
    assert_combo("ctrl+plus", "ctrl+shift+equal");
    assert_combo("ctrl+minus", "ctrl+minus");
    assert_combo("shift+A", "shift+a");
    assert_combo("ctrl+A", "ctrl+shift+a");
    assert_combo("alt+Tab", "alt+tab");
    assert_combo("KP_0", "kp_0");
    assert_combo("Up", "up");
    assert_combo("control+c", "ctrl+c");
    assert_combo("Control_L+Escape", "ctrl+esc");
    assert_combo("Super_L", "meta_l");
    assert_combo("Shift_R+Alt_R", "shift_r+alt_r");
    assert_combo("shift_r+A", "shift_r+a");
    assert_combo("ISO_Left_Tab", "shift+tab");
    assert_combo("XF86AudioRaiseVolume", "volumeup");
    assert_combo("less", "shift+comma");
    assert_combo("comma", "comma");
    assert_combo("period", "dot");
    assert_combo("slash", "slash");
    assert_combo("bracketleft", "bracket_left");
    assert_combo("bracket_left", "bracket_left");
    assert_combo("semicolon", "semicolon");
    assert_combo("apostrophe", "apostrophe");
    assert_combo("grave", "grave_accent");
    assert_combo("backslash", "backslash");
    assert_combo("space", "spc");
    assert_combo("ctrl+ctrl+c", "ctrl+c");
}

static void
test_keymap_synonyms(void **state)
{
    static const char *const groups[][6] = {
        {"ctrl", "control", "CTRL", "ctrlleft", "Control_L", NULL},
        {"meta_l", "cmd", "meta", "super", "win", "command"},
        {"ret", "enter", "return", "ENTER", "Return", NULL},
        {"esc", "escape", "ESC", "Escape", NULL, NULL},
        {"delete", "del", "DELETE", "Delete", NULL, NULL},
        {"pgup", "page_up", "prior", "PAGEUP", "pageup", "Prior"},
        {"pgdn", "page_down", "next", "PAGEDOWN", "pagedown", NULL},
        {"up", "arrowup", "ARROWUP", "Up", NULL, NULL},
        {"left", "arrowleft", "ARROWLEFT", "Left", NULL, NULL},
        {"alt", "ALT", "OPTION", "altleft", "Alt_L", NULL},
        {"shift", "SHIFT", "shiftleft", "Shift_L", NULL, NULL},
        {"spc", "SPACE", "space", NULL, NULL, NULL},
        {"backspace", "BACKSPACE", "BackSpace", NULL, NULL, NULL},
        {"tab", "TAB", "Tab", NULL, NULL, NULL},
        {"print", "printscreen", "prtsc", "Print", "sysrq", NULL},
        {"kp_0", "num0", "KP_0", NULL, NULL, NULL},
        {"volumeup", "VolumeUp", NULL, NULL, NULL, NULL},
        {"home", "HOME", "Home", NULL, NULL, NULL},
        {"end", "END", "End", NULL, NULL, NULL},
        {"caps_lock", "capslock", "Caps_Lock", NULL, NULL, NULL},
        {"menu", "apps", "Menu", NULL, NULL, NULL},
    };

    for (gsize g = 0; g < G_N_ELEMENTS(groups); g++) {
        for (gsize i = 1; i < 6 && groups[g][i]; i++)
            assert_key(groups[g][i], FALSE, groups[g][0], FALSE);
    }
    for (int i = 1; i <= 12; i++) {
        g_autofree char *upper = g_strdup_printf("F%d", i);
        g_autofree char *lower = g_strdup_printf("f%d", i);
        assert_key(upper, TRUE, lower, FALSE);
    }
    /* OpenAI's letters are keys, not characters; xdotool's are characters. */
    assert_key("T", TRUE, "t", FALSE);
    assert_key("T", FALSE, "t", TRUE);
    assert_key("/", TRUE, "slash", FALSE);
    assert_key("?", TRUE, "slash", TRUE);
}

static void
test_keymap_sequences(void **state)
{
    g_autoptr(GError) error = NULL;
    g_autoptr(GPtrArray) combos = carrel_keymap_parse_combos(" ctrl+a  BackSpace\tx ", 8, &error);
    g_autoptr(GPtrArray) none = NULL;
    g_autoptr(GPtrArray) too_many = NULL;

    assert_non_null(combos);
    assert_int_equal(combos->len, 3);
    assert_string_equal(((char **)g_ptr_array_index(combos, 0))[1], "a");
    assert_string_equal(((char **)g_ptr_array_index(combos, 1))[0], "backspace");
    too_many = carrel_keymap_parse_combos("a b c", 2, &error);
    assert_null(too_many);
    assert_string_equal(error->message, "more than 2 key combinations");
    g_clear_error(&error);
    none = carrel_keymap_parse_combos("", 2, &error);
    assert_null(none);
    assert_string_equal(error->message, "no key given");
}

static void
assert_combo_refused(const char *combo, const char *message)
{
    g_autoptr(GError) error = NULL;
    g_auto(GStrv) keys = carrel_keymap_parse_combo(combo, &error);

    assert_null(keys);
    assert_true(g_error_matches(error, CARREL_ERROR, CARREL_ERROR_INVALID_ARG));
    if (!g_str_equal(error->message, message))
        fail_msg("'%s': message '%s', expected '%s'", combo, error->message, message);
}

static void
test_keymap_refusals(void **state)
{
    g_autoptr(GError) error = NULL;
    const char *qcode;
    gboolean shift;

    assert_combo_refused("xyz", "unknown key 'xyz'");
    assert_combo_refused("ctrl+xyz", "unknown key 'xyz'");
    assert_combo_refused("", "no key given");
    assert_combo_refused("ctrl+", "malformed key combination: keys are joined by single '+' (the "
                                  "plus key is 'plus')");
    assert_combo_refused("a++b", "malformed key combination: keys are joined by single '+' (the "
                                 "plus key is 'plus')");
    assert_combo_refused("a+b+c+d+e+f+g+h+i", "a key combination has more than 8 keys");
    assert_combo_refused("unmapped", "unknown key 'unmapped'");
    assert_combo_refused("f13", "unknown key 'f13'");
    assert_combo_refused("\xc3\xa9", "unknown key '\\303\\251'");
    assert_combo_refused("a\nb", "unknown key 'a\\nb'");
    assert_combo_refused("abcdefghijklmnopqrstuvwxyz0123456789",
                         "unknown key 'abcdefghijklmnopqrstuvwxyz0123456789'");
    assert_false(carrel_keymap_lookup(NULL, FALSE, &qcode, &shift, &error));
    assert_string_equal(error->message, "unknown key ''");
    g_clear_error(&error);
    assert_null(carrel_keymap_resolve_keys((const char *const[]){NULL}, FALSE, &error));
    assert_string_equal(error->message, "no key given");
}

static void
test_keymap_table(void **state)
{
    const char *name, *qcode, *found;
    gboolean shift;
    guint i;

    for (i = 0; carrel_keymap_table_entry(i, &name, &qcode); i++) {
        if (!carrel_keymap_is_qcode(qcode))
            fail_msg("'%s' maps to '%s', not a QKeyCode of QEMU 7.2", name, qcode);
        assert_true(carrel_keymap_lookup(name, FALSE, &found, &shift, NULL));
        assert_string_equal(found, qcode);
        for (const char *p = name; *p; p++)
            assert_false(g_ascii_isupper(*p));
    }
    assert_true(i > 100);
    assert_true(carrel_keymap_is_qcode("kp_enter"));
    assert_true(carrel_keymap_is_qcode("lang2"));
    assert_false(carrel_keymap_is_qcode("unmapped"));
    assert_false(carrel_keymap_is_qcode("shift shift_r"));
    assert_false(carrel_keymap_is_qcode(""));
    assert_false(carrel_keymap_is_qcode(NULL));
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_keymap_characters), cmocka_unit_test(test_keymap_check_text),
        cmocka_unit_test(test_keymap_combos),     cmocka_unit_test(test_keymap_synonyms),
        cmocka_unit_test(test_keymap_sequences),  cmocka_unit_test(test_keymap_refusals),
        cmocka_unit_test(test_keymap_table),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
