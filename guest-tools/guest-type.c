/*
 * type: UTF-8 text typed into the focused window with XTest, so that any character arrives as
 * its keysym whatever the keyboard layout. A character the current keymap has at its first or
 * second (shift) level is pressed on its own key; any other goes through a spare keycode (one
 * without symbols) remapped to its keysym for the press (0x01000000 + U beyond Latin-1), and the
 * spare keycodes are emptied again at the end.
 *
 * A client decodes a key press with the mapping it fetches when it handles the press, not the
 * one that was current when it was sent: a keycode is therefore never remapped within
 * REUSE_GAP_US of its last press (nor emptied within RESTORE_GAP_US), and spare keycodes are
 * used in turn so that the gap rarely costs a wait. This narrows the race, it cannot close it: a
 * client that lags more than the gap behind while a spare is reused decodes a press with the
 * keysym that followed on that keycode.
 */
#include <X11/XKBlib.h>
#include <X11/extensions/XTest.h>
#include <X11/keysym.h>
#include <unistd.h>

#include "guest-x11.h"

#define POOL_MAX 64
#define REUSE_GAP_US (150 * 1000)
/* The last presses are decoded with the mapping too: the spares are emptied this long after
 * (300 ms lost the last characters of a Cyrillic line in an xterm on a busy TCG host). */
#define RESTORE_GAP_US (1500 * 1000)
/* Before the spares are reused from the first again, the client gets this long to catch up: a
 * terminal drawing glyphs it has no font for reads slower than XTest sends. */
#define CYCLE_PAUSE_US (400 * 1000)

typedef struct {
    KeyCode code;
    KeySym sym; /* what it is mapped to now; NoSymbol = as found */
    gint64 pressed_us;
} Spare;

typedef struct {
    CarrelGuestX11 *x;
    GHashTable *keys; /* KeySym -> keycode | SHIFTED, from the keymap as found */
    Spare spares[POOL_MAX];
    guint n_spares;
    guint next;
    KeyCode shift;
    guint remapped;
} Typer;

#define SHIFTED 0x100u

static void
typer_clear(Typer *t)
{
    g_clear_pointer(&t->keys, g_hash_table_unref);
}

/* The keymap as found: the key (level 1 before level 2, lowest keycode first) of every keysym,
 * and the keycodes without any symbol. Read once: Xlib's own cache does not see our changes. */
static gboolean
read_keymap(Typer *t, GError **error)
{
    int min = 0, max = 0, per = 0;
    KeySym *map;

    XDisplayKeycodes(t->x->dpy, &min, &max);
    map = XGetKeyboardMapping(t->x->dpy, (KeyCode)min, max - min + 1, &per);
    if (!map || per < 1) {
        g_set_error(error, CARREL_GUEST_ERROR, CARREL_GUEST_ERROR_X11,
                    "cannot read the keyboard mapping");
        return FALSE;
    }
    t->keys = g_hash_table_new(g_direct_hash, g_direct_equal);
    for (int level = MIN(per, 2) - 1; level >= 0; level--) {
        for (int code = max; code >= min; code--) {
            KeySym sym = map[(code - min) * per + level];
            if (sym != NoSymbol)
                g_hash_table_insert(t->keys, GSIZE_TO_POINTER(sym),
                                    GUINT_TO_POINTER((guint)code | (level ? SHIFTED : 0)));
        }
    }
    for (int code = min; code <= max && t->n_spares < POOL_MAX; code++) {
        gboolean empty = TRUE;
        for (int i = 0; i < per && empty; i++)
            empty = map[(code - min) * per + i] == NoSymbol;
        if (empty)
            t->spares[t->n_spares++] = (Spare){.code = (KeyCode)code};
    }
    XFree(map);
    t->shift = XKeysymToKeycode(t->x->dpy, XK_Shift_L);
    return TRUE;
}

static void
press(Typer *t, KeyCode code, gboolean shift)
{
    Display *dpy = t->x->dpy;

    if (shift)
        XTestFakeKeyEvent(dpy, t->shift, True, CurrentTime);
    XTestFakeKeyEvent(dpy, code, True, CurrentTime);
    XTestFakeKeyEvent(dpy, code, False, CurrentTime);
    if (shift)
        XTestFakeKeyEvent(dpy, t->shift, False, CurrentTime);
    XSync(dpy, False);
}

/* Waits until the spare's last press is gap_us old, then maps it to sym (NoSymbol: empty
 * again). */
static gboolean
remap(Typer *t, Spare *spare, KeySym sym, gint64 gap_us)
{
    KeySym syms[2] = {sym, sym};
    gint64 age = g_get_monotonic_time() - spare->pressed_us;

    if (spare->pressed_us && age < gap_us)
        g_usleep((gulong)(gap_us - age));
    carrel_guest_x11_trap_begin(t->x);
    XChangeKeyboardMapping(t->x->dpy, spare->code, 2, syms, 1);
    if (carrel_guest_x11_trap_end(t->x) != 0)
        return FALSE;
    spare->sym = sym;
    return TRUE;
}

static gboolean
type_sym(Typer *t, KeySym sym, GError **error)
{
    gpointer found = g_hash_table_lookup(t->keys, GSIZE_TO_POINTER(sym));
    Spare *spare = NULL;

    if (found && (!(GPOINTER_TO_UINT(found) & SHIFTED) || t->shift)) {
        press(t, (KeyCode)(GPOINTER_TO_UINT(found) & 0xff), GPOINTER_TO_UINT(found) & SHIFTED);
        return TRUE;
    }
    for (guint i = 0; i < t->n_spares && !spare; i++) {
        if (t->spares[i].sym == sym)
            spare = &t->spares[i];
    }
    if (!spare) {
        if (t->n_spares == 0) {
            g_set_error(error, CARREL_GUEST_ERROR, CARREL_GUEST_ERROR_X11,
                        "the keymap has no spare keycode to map keysym 0x%lx to", sym);
            return FALSE;
        }
        spare = &t->spares[t->next];
        if (t->next == 0 && spare->pressed_us)
            g_usleep(CYCLE_PAUSE_US);
        t->next = (t->next + 1) % t->n_spares;
        if (!remap(t, spare, sym, REUSE_GAP_US)) {
            g_set_error(error, CARREL_GUEST_ERROR, CARREL_GUEST_ERROR_X11,
                        "the X server refused to map keycode %u", spare->code);
            return FALSE;
        }
        t->remapped++;
    }
    press(t, spare->code, FALSE);
    spare->pressed_us = g_get_monotonic_time();
    return TRUE;
}

/* Empties the spare keycodes again, each once its last press is old enough. */
static void
restore(Typer *t)
{
    for (guint i = 0; i < t->n_spares; i++) {
        if (t->spares[i].sym != NoSymbol)
            remap(t, &t->spares[i], NoSymbol, RESTORE_GAP_US);
    }
    XSync(t->x->dpy, False);
}

static gboolean
type_text(Typer *t, const char *text, gsize len, gint64 deadline, guint *ret_typed, GError **error)
{
    gboolean ok = TRUE;
    guint typed = 0;

    for (const char *p = text; ok && p < text + len; p = g_utf8_next_char(p)) {
        if (g_get_monotonic_time() > deadline) {
            g_set_error(error, CARREL_GUEST_ERROR, CARREL_GUEST_ERROR_TIMEOUT,
                        "typing timed out after %u characters", typed);
            ok = FALSE;
            break;
        }
        ok = type_sym(t, (KeySym)carrel_guest_type_keysym(g_utf8_get_char(p)), error);
        typed += ok;
    }
    restore(t);
    *ret_typed = typed;
    return ok;
}

JsonNode *
carrel_guest_cmd_type(const CarrelGuestOptions *options, GError **error)
{
    g_autoptr(CarrelGuestX11) x = NULL;
    g_autofree char *input = NULL;
    g_autoptr(JsonBuilder) builder = NULL;
    const char *text = options->text;
    gsize len = text ? strlen(text) : 0;
    gint64 deadline = g_get_monotonic_time() + options->timeout_ms * 1000;
    Typer t = {0};
    int event_base, error_base, major, minor;
    guint typed = 0;
    gboolean ok;

    if (options->use_stdin) {
        if (!(input = carrel_guest_read_stdin(CARREL_GUEST_LIMIT_TYPE_BYTES, &len, error)))
            return NULL;
        text = input;
    }
    if (!carrel_guest_type_check(text, len, error) || !(x = carrel_guest_x11_open(options, error)))
        return NULL;
    if (!XTestQueryExtension(x->dpy, &event_base, &error_base, &major, &minor)) {
        g_set_error(error, CARREL_GUEST_ERROR, CARREL_GUEST_ERROR_X11,
                    "the X server has no XTEST extension");
        return NULL;
    }
    t.x = x;
    ok = read_keymap(&t, error) && type_text(&t, text, len, deadline, &typed, error);
    typer_clear(&t);
    if (!ok)
        return NULL;
    builder = carrel_guest_json_begin();
    json_builder_set_member_name(builder, "typed");
    json_builder_add_int_value(builder, typed);
    json_builder_set_member_name(builder, "remapped");
    json_builder_add_int_value(builder, t.remapped);
    json_builder_set_member_name(builder, "spares");
    json_builder_add_int_value(builder, t.n_spares);
    return carrel_guest_json_end(builder);
}
