/*
 * A person's input on the console, as timeline events: clicks where the pointer was, key
 * combinations, and typed text gathered into one event per burst of typing. Pure: the caller
 * says what time it is. Keys are PC AT scancodes (set 1) read through the US layout, which is
 * what spice-html5 and remote-viewer send whatever the viewer's own layout.
 */
#include <string.h>

#include "api/api-console-priv.h"

#define SCAN_MAX 0x59
#define SCAN_RELEASE 0x80
#define SCAN_EXTENDED 0xe0

/* What each held modifier key adds (left and right apart: releasing one keeps the other). */
enum {
    MOD_CTRL_L = 1 << 0,
    MOD_CTRL_R = 1 << 1,
    MOD_ALT_L = 1 << 2,
    MOD_ALT_R = 1 << 3,
    MOD_SHIFT_L = 1 << 4,
    MOD_SHIFT_R = 1 << 5,
    MOD_SUPER_L = 1 << 6,
    MOD_SUPER_R = 1 << 7,
};
#define MOD_CTRL (MOD_CTRL_L | MOD_CTRL_R)
#define MOD_ALT (MOD_ALT_L | MOD_ALT_R)
#define MOD_SHIFT (MOD_SHIFT_L | MOD_SHIFT_R)
#define MOD_SUPER (MOD_SUPER_L | MOD_SUPER_R)

#define LOCK_CAPS (1 << 2) /* SPICE_KEYBOARD_MODIFIER_FLAGS_CAPS_LOCK */

/* Set 1 scancodes 0x00-0x58: the character typed, without and with shift (0: none). */
static const char plain_chars[SCAN_MAX] = "\0\0"
                                          "1234567890-=\0\0"
                                          "qwertyuiop[]\0\0"
                                          "asdfghjkl;'`\0\\"
                                          "zxcvbnm,./\0*\0 \0"
                                          "\0\0\0\0\0\0\0\0\0\0\0\0"
                                          "789-456+1230.";
static const char shift_chars[SCAN_MAX] = "\0\0"
                                          "!@#$%^&*()_+\0\0"
                                          "QWERTYUIOP{}\0\0"
                                          "ASDFGHJKL:\"~\0|"
                                          "ZXCVBNM<>?\0*\0 \0"
                                          "\0\0\0\0\0\0\0\0\0\0\0\0"
                                          "789-456+1230.";

/* Keys that type nothing, by scancode (names as the key action takes them). */
typedef struct {
    guint8 scan;
    const char *name;
} KeyName;

static const KeyName plain_names[] = {
    {0x01, "escape"}, {0x0e, "backspace"}, {0x0f, "tab"}, {0x1c, "enter"}, {0x3b, "f1"},
    {0x3c, "f2"},     {0x3d, "f3"},        {0x3e, "f4"},  {0x3f, "f5"},    {0x40, "f6"},
    {0x41, "f7"},     {0x42, "f8"},        {0x43, "f9"},  {0x44, "f10"},   {0x54, "sysrq"},
    {0x56, "less"},   {0x57, "f11"},       {0x58, "f12"}, {0x39, "space"},
};

static const KeyName extended_names[] = {
    {0x1c, "enter"},    {0x35, "/"},      {0x37, "print"},  {0x47, "home"}, {0x48, "up"},
    {0x49, "pageup"},   {0x4b, "left"},   {0x4d, "right"},  {0x4f, "end"},  {0x50, "down"},
    {0x51, "pagedown"}, {0x52, "insert"}, {0x53, "delete"}, {0x5d, "menu"},
};

struct _CarrelSpiceRecorder {
    guint mods;
    gboolean caps;
    gboolean have_position;
    gint64 x, y;
    GString *typed;
    gint64 typed_first_us;
    gint64 typed_last_us;
    double tokens;
    gint64 refilled_us;
    guint64 suppressed;
};

void
carrel_person_event_free(CarrelPersonEvent *event)
{
    if (!event)
        return;
    g_free(event->action);
    g_clear_pointer(&event->params, json_node_unref);
    g_free(event);
}

CarrelSpiceRecorder *
carrel_spice_recorder_new(void)
{
    CarrelSpiceRecorder *rec = g_new0(CarrelSpiceRecorder, 1);

    rec->typed = g_string_new(NULL);
    rec->tokens = CARREL_PERSON_EVENT_BURST;
    rec->refilled_us = -1;
    return rec;
}

void
carrel_spice_recorder_free(CarrelSpiceRecorder *rec)
{
    if (!rec)
        return;
    g_string_free(rec->typed, TRUE);
    g_free(rec);
}

gboolean
carrel_spice_recorder_pending(const CarrelSpiceRecorder *rec)
{
    return rec->typed->len > 0;
}

guint64
carrel_spice_recorder_get_suppressed(const CarrelSpiceRecorder *rec)
{
    return rec->suppressed;
}

/* One more event at now_us under the rate bound? */
static gboolean
take_token(CarrelSpiceRecorder *rec, gint64 now_us)
{
    if (rec->refilled_us >= 0 && now_us > rec->refilled_us)
        rec->tokens = MIN((double)CARREL_PERSON_EVENT_BURST,
                          rec->tokens + (double)(now_us - rec->refilled_us) *
                                            CARREL_PERSON_EVENT_RATE / G_USEC_PER_SEC);
    rec->refilled_us = MAX(rec->refilled_us, now_us);
    if (rec->tokens < 1) {
        rec->suppressed++;
        return FALSE;
    }
    rec->tokens -= 1;
    return TRUE;
}

static void
add_event(CarrelSpiceRecorder *rec, const char *action, JsonBuilder *b, gint64 started_us,
          gint64 now_us, GPtrArray *ret_events)
{
    CarrelPersonEvent *event;

    if (!take_token(rec, now_us))
        return;
    event = g_new0(CarrelPersonEvent, 1);
    event->action = g_strdup(action);
    event->params = json_builder_get_root(b);
    event->started_us = started_us;
    g_ptr_array_add(ret_events, event);
}

static void
flush_typed(CarrelSpiceRecorder *rec, gint64 now_us, GPtrArray *ret_events)
{
    g_autoptr(JsonBuilder) b = NULL;

    if (rec->typed->len == 0)
        return;
    b = json_builder_new();
    json_builder_begin_object(b);
    json_builder_set_member_name(b, "text");
    json_builder_add_string_value(b, rec->typed->str);
    json_builder_end_object(b);
    add_event(rec, "type", b, rec->typed_first_us, now_us, ret_events);
    g_string_truncate(rec->typed, 0);
}

static void
add_modifier_names(JsonBuilder *b, guint mods)
{
    if (mods & MOD_CTRL)
        json_builder_add_string_value(b, "ctrl");
    if (mods & MOD_ALT)
        json_builder_add_string_value(b, "alt");
    if (mods & MOD_SHIFT)
        json_builder_add_string_value(b, "shift");
    if (mods & MOD_SUPER)
        json_builder_add_string_value(b, "super");
}

static void
add_combo(CarrelSpiceRecorder *rec, const char *key, gint64 now_us, GPtrArray *ret_events)
{
    g_autoptr(JsonBuilder) b = json_builder_new();
    g_autoptr(GString) combo = g_string_new(NULL);
    const char *names[] = {"ctrl+", "alt+", "shift+", "super+"};
    const guint masks[] = {MOD_CTRL, MOD_ALT, MOD_SHIFT, MOD_SUPER};

    flush_typed(rec, now_us, ret_events);
    for (guint i = 0; i < G_N_ELEMENTS(masks); i++)
        if (rec->mods & masks[i])
            g_string_append(combo, names[i]);
    g_string_append(combo, key);
    json_builder_begin_object(b);
    json_builder_set_member_name(b, "combo");
    json_builder_add_string_value(b, combo->str);
    json_builder_end_object(b);
    add_event(rec, "keys", b, now_us, now_us, ret_events);
}

static const char *
find_name(const KeyName *table, gsize n, guint8 scan)
{
    for (gsize i = 0; i < n; i++)
        if (table[i].scan == scan)
            return table[i].name;
    return NULL;
}

/* The modifier bit of a key, or 0. */
static guint
modifier_of(guint8 scan, gboolean extended)
{
    switch (scan) {
    case 0x1d:
        return extended ? MOD_CTRL_R : MOD_CTRL_L;
    case 0x38:
        return extended ? MOD_ALT_R : MOD_ALT_L;
    case 0x2a:
        return extended ? 0 : MOD_SHIFT_L; /* E0 2A is a fake shift some keys send */
    case 0x36:
        return extended ? 0 : MOD_SHIFT_R;
    case 0x5b:
        return extended ? MOD_SUPER_L : 0;
    case 0x5c:
        return extended ? MOD_SUPER_R : 0;
    default:
        return 0;
    }
}

static void
append_char(CarrelSpiceRecorder *rec, char c, gint64 now_us, GPtrArray *ret_events)
{
    if (rec->typed->len >= CARREL_PERSON_TYPE_MAX)
        flush_typed(rec, now_us, ret_events);
    if (rec->typed->len == 0)
        rec->typed_first_us = now_us;
    g_string_append_c(rec->typed, c);
    rec->typed_last_us = now_us;
}

/* A key pressed that is not a modifier. */
static void
key_pressed(CarrelSpiceRecorder *rec, guint8 scan, gboolean extended, gint64 now_us,
            GPtrArray *ret_events)
{
    gboolean shift = (rec->mods & MOD_SHIFT) != 0;
    gboolean combo = (rec->mods & (MOD_CTRL | MOD_ALT | MOD_SUPER)) != 0;
    char c = 0, name[2] = {0};
    const char *key;

    if (!extended && scan < SCAN_MAX && plain_chars[scan]) {
        c = plain_chars[scan];
        if (g_ascii_isalpha(c) ? shift != rec->caps : shift)
            c = shift_chars[scan];
    }
    if (c && !combo) {
        append_char(rec, c, now_us, ret_events);
        return;
    }
    if (!extended && scan == 0x0e && !combo && rec->typed->len > 0) {
        g_string_truncate(rec->typed, rec->typed->len - 1);
        rec->typed_last_us = now_us;
        return;
    }
    key = extended ? find_name(extended_names, G_N_ELEMENTS(extended_names), scan)
                   : find_name(plain_names, G_N_ELEMENTS(plain_names), scan);
    if (!key && !extended && scan < SCAN_MAX && plain_chars[scan]) {
        /* A character key with ctrl, alt or super: named by its unshifted character. */
        name[0] = plain_chars[scan];
        key = name;
    }
    if (key)
        add_combo(rec, key, now_us, ret_events);
}

static void
key_event(CarrelSpiceRecorder *rec, guint32 code, gboolean down, gint64 now_us,
          GPtrArray *ret_events)
{
    guint8 b0 = code & 0xff;
    gboolean extended = b0 == SCAN_EXTENDED;
    guint8 scan = (extended ? (code >> 8) & 0xff : b0) & ~SCAN_RELEASE;
    guint mod = modifier_of(scan, extended);

    /* E1 (Pause) and empty codes name no key the timeline shows. */
    if (b0 == 0 || b0 == 0xe1)
        return;
    if (mod) {
        rec->mods = down ? rec->mods | mod : rec->mods & ~mod;
        return;
    }
    if (!down)
        return;
    if (!extended && scan == 0x3a) {
        rec->caps = !rec->caps;
        return;
    }
    if (!extended && (scan == 0x45 || scan == 0x46))
        return; /* num and scroll lock */
    key_pressed(rec, scan, extended, now_us, ret_events);
}

static void
click(CarrelSpiceRecorder *rec, guint8 button, gint64 now_us, GPtrArray *ret_events)
{
    static const char *const buttons[] = {NULL, "left", "middle", "right"};
    g_autoptr(JsonBuilder) b = NULL;

    /* The wheel (4, 5) and unknown buttons are not clicks. */
    if (button == 0 || button >= G_N_ELEMENTS(buttons))
        return;
    flush_typed(rec, now_us, ret_events);
    b = json_builder_new();
    json_builder_begin_object(b);
    json_builder_set_member_name(b, "x");
    if (rec->have_position)
        json_builder_add_int_value(b, rec->x);
    else
        json_builder_add_null_value(b);
    json_builder_set_member_name(b, "y");
    if (rec->have_position)
        json_builder_add_int_value(b, rec->y);
    else
        json_builder_add_null_value(b);
    json_builder_set_member_name(b, "button");
    json_builder_add_string_value(b, buttons[button]);
    if (rec->mods) {
        json_builder_set_member_name(b, "modifiers");
        json_builder_begin_array(b);
        add_modifier_names(b, rec->mods);
        json_builder_end_array(b);
    }
    json_builder_end_object(b);
    add_event(rec, "click", b, now_us, now_us, ret_events);
}

void
carrel_spice_recorder_feed(CarrelSpiceRecorder *rec, const CarrelSpiceInput *input, gint64 now_us,
                           GPtrArray *ret_events)
{
    switch (input->type) {
    case CARREL_SPICE_INPUT_KEY_DOWN:
    case CARREL_SPICE_INPUT_KEY_UP:
        key_event(rec, input->code, input->type == CARREL_SPICE_INPUT_KEY_DOWN, now_us, ret_events);
        break;
    case CARREL_SPICE_INPUT_KEY_MODIFIERS:
        rec->caps = (input->modifiers & LOCK_CAPS) != 0;
        break;
    case CARREL_SPICE_INPUT_MOUSE_POSITION:
        rec->have_position = TRUE;
        rec->x = input->x;
        rec->y = input->y;
        break;
    case CARREL_SPICE_INPUT_MOUSE_MOTION:
        /* Relative moves (server mouse mode) leave the position unknown. */
        rec->have_position = FALSE;
        break;
    case CARREL_SPICE_INPUT_MOUSE_PRESS:
        click(rec, input->button, now_us, ret_events);
        break;
    case CARREL_SPICE_INPUT_MOUSE_RELEASE:
    case CARREL_SPICE_INPUT_LAST:
    default:
        break;
    }
}

void
carrel_spice_recorder_tick(CarrelSpiceRecorder *rec, gint64 now_us, GPtrArray *ret_events)
{
    if (rec->typed->len > 0 && now_us - rec->typed_last_us >= CARREL_PERSON_TYPE_IDLE_US)
        flush_typed(rec, now_us, ret_events);
}

void
carrel_spice_recorder_flush(CarrelSpiceRecorder *rec, GPtrArray *ret_events)
{
    flush_typed(rec, MAX(rec->typed_last_us, rec->refilled_us), ret_events);
}
