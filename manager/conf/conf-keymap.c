/*
 * Key names of the action formats carrel accepts, mapped to QEMU's QKeyCode names (QEMU 7.2,
 * qapi/ui.json), and typed characters mapped through the US keyboard layout. Pure tables.
 */
#include <string.h>

#include "conf/conf.h"
#include "conf/conf-priv.h"

/*
 * QEMU 7.2's QKeyCode enum in its order, without "unmapped" (f13..f24 came with 8.0), each name
 * between spaces.
 */
static const char qcode_list[] =
    " shift shift_r alt alt_r ctrl ctrl_r menu esc 1 2 3 4 5 6 7 8 9 0 minus equal "
    "backspace tab q w e r t y u i o p bracket_left bracket_right ret a s d f g h j k l "
    "semicolon apostrophe grave_accent backslash z x c v b n m comma dot slash asterisk spc "
    "caps_lock f1 f2 f3 f4 f5 f6 f7 f8 f9 f10 num_lock scroll_lock kp_divide kp_multiply "
    "kp_subtract kp_add kp_enter kp_decimal sysrq kp_0 kp_1 kp_2 kp_3 kp_4 kp_5 kp_6 kp_7 "
    "kp_8 kp_9 less f11 f12 print home pgup pgdn end left up down right insert delete stop "
    "again props undo front copy open paste find cut lf help meta_l meta_r compose pause ro "
    "hiragana henkan yen muhenkan katakanahiragana kp_comma kp_equals power sleep wake "
    "audionext audioprev audiostop audioplay audiomute volumeup volumedown mediaselect mail "
    "calculator computer ac_home ac_back ac_forward ac_refresh ac_bookmarks lang1 lang2 ";

typedef struct {
    const char *name;
    const char *qcode;
    gboolean shift;
} KeyName;

/*
 * Names with more than one character, lowercase (looked up case-insensitively). They win over
 * QKeyCode names, so X keysym names keep their X meaning: "less" is '<' (shift+comma), not the
 * extra key of ISO keyboards, and "asterisk" is shift+8.
 */
static const KeyName key_names[] = {
    /* modifiers: xdotool, OpenAI, pyautogui */
    {"shift", "shift", FALSE},
    {"shift_l", "shift", FALSE},
    {"shiftleft", "shift", FALSE},
    {"lshift", "shift", FALSE},
    {"shiftright", "shift_r", FALSE},
    {"rshift", "shift_r", FALSE},
    {"control", "ctrl", FALSE},
    {"control_l", "ctrl", FALSE},
    {"ctrl_l", "ctrl", FALSE},
    {"ctrlleft", "ctrl", FALSE},
    {"lctrl", "ctrl", FALSE},
    {"control_r", "ctrl_r", FALSE},
    {"ctrlright", "ctrl_r", FALSE},
    {"rctrl", "ctrl_r", FALSE},
    {"alt_l", "alt", FALSE},
    {"altleft", "alt", FALSE},
    {"option", "alt", FALSE},
    {"optionleft", "alt", FALSE},
    {"altright", "alt_r", FALSE},
    {"optionright", "alt_r", FALSE},
    {"altgr", "alt_r", FALSE},
    {"iso_level3_shift", "alt_r", FALSE},
    {"meta", "meta_l", FALSE},
    {"super", "meta_l", FALSE},
    {"super_l", "meta_l", FALSE},
    {"win", "meta_l", FALSE},
    {"winleft", "meta_l", FALSE},
    {"cmd", "meta_l", FALSE},
    {"command", "meta_l", FALSE},
    {"super_r", "meta_r", FALSE},
    {"winright", "meta_r", FALSE},
    {"apps", "menu", FALSE},
    /* editing and navigation */
    {"return", "ret", FALSE},
    {"enter", "ret", FALSE},
    {"escape", "esc", FALSE},
    {"iso_left_tab", "tab", TRUE},
    {"space", "spc", FALSE},
    {"back_space", "backspace", FALSE},
    {"del", "delete", FALSE},
    {"ins", "insert", FALSE},
    {"page_up", "pgup", FALSE},
    {"pageup", "pgup", FALSE},
    {"prior", "pgup", FALSE},
    {"page_down", "pgdn", FALSE},
    {"pagedown", "pgdn", FALSE},
    {"next", "pgdn", FALSE},
    {"arrowup", "up", FALSE},
    {"arrowdown", "down", FALSE},
    {"arrowleft", "left", FALSE},
    {"arrowright", "right", FALSE},
    {"capslock", "caps_lock", FALSE},
    {"numlock", "num_lock", FALSE},
    {"scrolllock", "scroll_lock", FALSE},
    {"printscreen", "print", FALSE},
    {"print_screen", "print", FALSE},
    {"prtsc", "print", FALSE},
    {"prtscr", "print", FALSE},
    {"prntscrn", "print", FALSE},
    {"sys_req", "print", FALSE},
    {"sysrq", "print", FALSE}, /* QEMU turns sysrq into print anyway */
    {"break", "pause", FALSE},
    /* keypad: xdotool KP_*, pyautogui num0..num9, add... */
    {"num0", "kp_0", FALSE},
    {"num1", "kp_1", FALSE},
    {"num2", "kp_2", FALSE},
    {"num3", "kp_3", FALSE},
    {"num4", "kp_4", FALSE},
    {"num5", "kp_5", FALSE},
    {"num6", "kp_6", FALSE},
    {"num7", "kp_7", FALSE},
    {"num8", "kp_8", FALSE},
    {"num9", "kp_9", FALSE},
    {"add", "kp_add", FALSE},
    {"subtract", "kp_subtract", FALSE},
    {"multiply", "kp_multiply", FALSE},
    {"divide", "kp_divide", FALSE},
    {"decimal", "kp_decimal", FALSE},
    {"separator", "kp_comma", FALSE},
    {"kp_separator", "kp_comma", FALSE},
    {"kp_equal", "kp_equals", FALSE},
    /* media and browser keys: pyautogui and XF86 keysyms */
    {"volumemute", "audiomute", FALSE},
    {"playpause", "audioplay", FALSE},
    {"nexttrack", "audionext", FALSE},
    {"prevtrack", "audioprev", FALSE},
    {"xf86audioraisevolume", "volumeup", FALSE},
    {"xf86audiolowervolume", "volumedown", FALSE},
    {"xf86audiomute", "audiomute", FALSE},
    {"xf86audioplay", "audioplay", FALSE},
    {"xf86audiostop", "audiostop", FALSE},
    {"xf86audionext", "audionext", FALSE},
    {"xf86audioprev", "audioprev", FALSE},
    {"browserback", "ac_back", FALSE},
    {"browserforward", "ac_forward", FALSE},
    {"browserrefresh", "ac_refresh", FALSE},
    {"browserhome", "ac_home", FALSE},
    {"browserfavorites", "ac_bookmarks", FALSE},
    {"launchmail", "mail", FALSE},
    {"xf86back", "ac_back", FALSE},
    {"xf86forward", "ac_forward", FALSE},
    {"xf86reload", "ac_refresh", FALSE},
    {"xf86homepage", "ac_home", FALSE},
    {"xf86mail", "mail", FALSE},
    {"xf86calculator", "calculator", FALSE},
    {"xf86poweroff", "power", FALSE},
    {"xf86sleep", "sleep", FALSE},
    {"xf86wakeup", "wake", FALSE},
    /* X keysym names of the US layout's symbols */
    {"period", "dot", FALSE},
    {"grave", "grave_accent", FALSE},
    {"quoteleft", "grave_accent", FALSE},
    {"quoteright", "apostrophe", FALSE},
    {"bracketleft", "bracket_left", FALSE},
    {"bracketright", "bracket_right", FALSE},
    {"exclam", "1", TRUE},
    {"at", "2", TRUE},
    {"numbersign", "3", TRUE},
    {"dollar", "4", TRUE},
    {"percent", "5", TRUE},
    {"asciicircum", "6", TRUE},
    {"ampersand", "7", TRUE},
    {"asterisk", "8", TRUE},
    {"parenleft", "9", TRUE},
    {"parenright", "0", TRUE},
    {"underscore", "minus", TRUE},
    {"plus", "equal", TRUE},
    {"braceleft", "bracket_left", TRUE},
    {"braceright", "bracket_right", TRUE},
    {"bar", "backslash", TRUE},
    {"colon", "semicolon", TRUE},
    {"quotedbl", "apostrophe", TRUE},
    {"less", "comma", TRUE},
    {"greater", "dot", TRUE},
    {"question", "slash", TRUE},
    {"asciitilde", "grave_accent", TRUE},
};

static const char *const letters[26] = {
    "a", "b", "c", "d", "e", "f", "g", "h", "i", "j", "k", "l", "m",
    "n", "o", "p", "q", "r", "s", "t", "u", "v", "w", "x", "y", "z",
};

static const char *const digits[10] = {"0", "1", "2", "3", "4", "5", "6", "7", "8", "9"};

/* The US layout's symbols (letters and digits are computed). */
static const struct {
    char c;
    const char *qcode;
    gboolean shift;
} symbols[] = {
    {' ', "spc", FALSE},
    {'!', "1", TRUE},
    {'"', "apostrophe", TRUE},
    {'#', "3", TRUE},
    {'$', "4", TRUE},
    {'%', "5", TRUE},
    {'&', "7", TRUE},
    {'\'', "apostrophe", FALSE},
    {'(', "9", TRUE},
    {')', "0", TRUE},
    {'*', "8", TRUE},
    {'+', "equal", TRUE},
    {',', "comma", FALSE},
    {'-', "minus", FALSE},
    {'.', "dot", FALSE},
    {'/', "slash", FALSE},
    {':', "semicolon", TRUE},
    {';', "semicolon", FALSE},
    {'<', "comma", TRUE},
    {'=', "equal", FALSE},
    {'>', "dot", TRUE},
    {'?', "slash", TRUE},
    {'@', "2", TRUE},
    {'[', "bracket_left", FALSE},
    {'\\', "backslash", FALSE},
    {']', "bracket_right", FALSE},
    {'^', "6", TRUE},
    {'_', "minus", TRUE},
    {'`', "grave_accent", FALSE},
    {'{', "bracket_left", TRUE},
    {'|', "backslash", TRUE},
    {'}', "bracket_right", TRUE},
    {'~', "grave_accent", TRUE},
    {'\n', "ret", FALSE},
    {'\t', "tab", FALSE},
};

gboolean
carrel_keymap_is_qcode(const char *name)
{
    g_autofree char *needle = NULL;

    if (!name || !*name || strchr(name, ' ') || strlen(name) > CARREL_KEYMAP_MAX_NAME)
        return FALSE;
    needle = g_strconcat(" ", name, " ", NULL);
    return strstr(qcode_list, needle) != NULL;
}

gboolean
carrel_keymap_from_char(char c, const char **ret_qcode, gboolean *ret_shift)
{
    if (c >= 'a' && c <= 'z') {
        *ret_qcode = letters[c - 'a'];
        *ret_shift = FALSE;
        return TRUE;
    }
    if (c >= 'A' && c <= 'Z') {
        *ret_qcode = letters[c - 'A'];
        *ret_shift = TRUE;
        return TRUE;
    }
    if (c >= '0' && c <= '9') {
        *ret_qcode = digits[c - '0'];
        *ret_shift = FALSE;
        return TRUE;
    }
    for (gsize i = 0; i < G_N_ELEMENTS(symbols); i++) {
        if (symbols[i].c == c) {
            *ret_qcode = symbols[i].qcode;
            *ret_shift = symbols[i].shift;
            return TRUE;
        }
    }
    return FALSE;
}

gboolean
carrel_keymap_check_text(const char *text, GError **error)
{
    const char *qcode;
    gboolean shift;
    guint position = 1;

    if (!g_utf8_validate(text, -1, NULL)) {
        g_set_error(error, CARREL_ERROR, CARREL_ERROR_INVALID_ARG, "text is not valid UTF-8");
        return FALSE;
    }
    for (const char *p = text; *p; p = g_utf8_next_char(p), position++) {
        if (!carrel_keymap_from_char(*p, &qcode, &shift)) {
            g_set_error(error, CARREL_ERROR, CARREL_ERROR_INVALID_ARG,
                        "character %u of the text (U+%04X) cannot be typed with method 'keys': "
                        "only printable ASCII, newline and tab can ('guest_keysyms' or "
                        "'clipboard' type any text)",
                        position, g_utf8_get_char(p));
            return FALSE;
        }
    }
    return TRUE;
}

static void
set_unknown_key(GError **error, const char *name)
{
    /* The name is untrusted: escaped and cut, so it cannot forge a log line. */
    g_autofree char *shown = g_strescape(name, NULL);

    g_set_error(error, CARREL_ERROR, CARREL_ERROR_INVALID_ARG, "unknown key '%.40s'", shown);
}

static gboolean
lookup_name(const char *name, const char **ret_qcode, gboolean *ret_shift)
{
    g_autofree char *lower = g_ascii_strdown(name, -1);

    for (gsize i = 0; i < G_N_ELEMENTS(key_names); i++) {
        if (g_str_equal(key_names[i].name, lower)) {
            *ret_qcode = key_names[i].qcode;
            *ret_shift = key_names[i].shift;
            return TRUE;
        }
    }
    if (carrel_keymap_is_qcode(lower)) {
        /* Interned: a static string like the tables', for the life of the process. */
        *ret_qcode = g_intern_string(lower);
        *ret_shift = FALSE;
        return TRUE;
    }
    return FALSE;
}

gboolean
carrel_keymap_lookup(const char *name, gboolean caseless_letters, const char **ret_qcode,
                     gboolean *ret_shift, GError **error)
{
    const char *qcode = NULL;
    gboolean shift = FALSE;
    gboolean found;

    if (!name || !*name || strlen(name) > CARREL_KEYMAP_MAX_NAME) {
        set_unknown_key(error, name ? name : "");
        return FALSE;
    }
    if (name[1] == '\0') {
        char c = caseless_letters ? g_ascii_tolower(name[0]) : name[0];
        found = carrel_keymap_from_char(c, &qcode, &shift);
    } else {
        found = lookup_name(name, &qcode, &shift);
    }
    if (!found) {
        set_unknown_key(error, name);
        return FALSE;
    }
    *ret_qcode = qcode;
    *ret_shift = shift;
    return TRUE;
}

static gboolean
contains(GPtrArray *keys, const char *qcode)
{
    for (guint i = 0; i < keys->len; i++) {
        if (g_str_equal(g_ptr_array_index(keys, i), qcode))
            return TRUE;
    }
    return FALSE;
}

static gboolean
add_key(GPtrArray *keys, const char *name, gboolean caseless_letters, GError **error)
{
    const char *qcode;
    gboolean shift;

    if (!carrel_keymap_lookup(name, caseless_letters, &qcode, &shift, error))
        return FALSE;
    if (shift && !contains(keys, "shift") && !contains(keys, "shift_r"))
        g_ptr_array_add(keys, (gpointer) "shift");
    if (!contains(keys, qcode))
        g_ptr_array_add(keys, (gpointer)qcode);
    if (keys->len > CARREL_KEYMAP_MAX_COMBO_KEYS) {
        g_set_error(error, CARREL_ERROR, CARREL_ERROR_INVALID_ARG,
                    "a key combination has more than %d keys", CARREL_KEYMAP_MAX_COMBO_KEYS);
        return FALSE;
    }
    return TRUE;
}

static GStrv
keys_to_strv(GPtrArray *keys)
{
    GStrv result = g_new0(char *, keys->len + 1);

    for (guint i = 0; i < keys->len; i++)
        result[i] = g_strdup(g_ptr_array_index(keys, i));
    return result;
}

GStrv
carrel_keymap_resolve_keys(const char *const *names, gboolean caseless_letters, GError **error)
{
    g_autoptr(GPtrArray) keys = g_ptr_array_new();

    if (!names || !names[0]) {
        g_set_error(error, CARREL_ERROR, CARREL_ERROR_INVALID_ARG, "no key given");
        return NULL;
    }
    for (gsize i = 0; names[i]; i++) {
        if (!add_key(keys, names[i], caseless_letters, error))
            return NULL;
    }
    return keys_to_strv(keys);
}

GStrv
carrel_keymap_parse_combo(const char *combo, GError **error)
{
    g_autoptr(GPtrArray) keys = g_ptr_array_new();
    const char *p = combo;

    /* A token runs up to the next '+'; where a token is due, a '+' is the plus key. */
    while (*p) {
        const char *end = (*p == '+') ? p + 1 : strchr(p, '+');
        g_autofree char *name = NULL;

        if (!end)
            end = p + strlen(p);
        name = g_strndup(p, (gsize)(end - p));
        if (!add_key(keys, name, FALSE, error))
            return NULL;
        p = end;
        if (*p == '\0')
            break;
        if (*p != '+' || *++p == '\0') {
            g_set_error(error, CARREL_ERROR, CARREL_ERROR_INVALID_ARG,
                        "malformed key combination: keys are joined by single '+' (the plus "
                        "key is 'plus')");
            return NULL;
        }
    }
    if (keys->len == 0) {
        g_set_error(error, CARREL_ERROR, CARREL_ERROR_INVALID_ARG, "no key given");
        return NULL;
    }
    return keys_to_strv(keys);
}

GPtrArray *
carrel_keymap_parse_combos(const char *text, guint max_combos, GError **error)
{
    g_autoptr(GPtrArray) combos = g_ptr_array_new_with_free_func((GDestroyNotify)g_strfreev);
    g_auto(GStrv) words = g_strsplit_set(text, " \t\n\r", -1);

    for (gsize i = 0; words[i]; i++) {
        GStrv combo;

        if (!*words[i])
            continue;
        if (combos->len == max_combos) {
            g_set_error(error, CARREL_ERROR, CARREL_ERROR_INVALID_ARG,
                        "more than %u key combinations", max_combos);
            return NULL;
        }
        if (!(combo = carrel_keymap_parse_combo(words[i], error)))
            return NULL;
        g_ptr_array_add(combos, combo);
    }
    if (combos->len == 0) {
        g_set_error(error, CARREL_ERROR, CARREL_ERROR_INVALID_ARG, "no key given");
        return NULL;
    }
    return g_steal_pointer(&combos);
}

gboolean
carrel_keymap_table_entry(guint index, const char **ret_name, const char **ret_qcode)
{
    if (index >= G_N_ELEMENTS(key_names))
        return FALSE;
    *ret_name = key_names[index].name;
    *ret_qcode = key_names[index].qcode;
    return TRUE;
}
