/* carrel-guest's X connection: finding the display's cookie, trapping X errors (windows vanish
 * between two calls), bounded property reads and waits. */
#pragma once

#include <X11/Xlib.h>

#include "guest.h"

G_BEGIN_DECLS

typedef enum {
    CARREL_GUEST_ATOM_WM_STATE,
    CARREL_GUEST_ATOM_UTF8_STRING,
    CARREL_GUEST_ATOM_COMPOUND_TEXT,
    CARREL_GUEST_ATOM_NET_WM_NAME,
    CARREL_GUEST_ATOM_NET_WM_PID,
    CARREL_GUEST_ATOM_NET_WM_STATE,
    CARREL_GUEST_ATOM_NET_WM_STATE_HIDDEN,
    CARREL_GUEST_ATOM_NET_WM_WINDOW_TYPE,
    CARREL_GUEST_ATOM_NET_WM_WINDOW_TYPE_DESKTOP,
    CARREL_GUEST_ATOM_NET_WM_WINDOW_TYPE_DOCK,
    CARREL_GUEST_ATOM_NET_CLIENT_LIST,
    CARREL_GUEST_ATOM_NET_CLIENT_LIST_STACKING,
    CARREL_GUEST_ATOM_NET_ACTIVE_WINDOW,
    CARREL_GUEST_ATOM_NET_SUPPORTING_WM_CHECK,
    CARREL_GUEST_ATOM_CLIPBOARD,
    CARREL_GUEST_ATOM_TARGETS,
    CARREL_GUEST_ATOM_TIMESTAMP,
    CARREL_GUEST_ATOM_INCR,
    CARREL_GUEST_ATOM_TEXT,
    CARREL_GUEST_ATOM_MULTIPLE,
    CARREL_GUEST_ATOM_TEXT_PLAIN_UTF8,
    CARREL_GUEST_ATOM_TEXT_PLAIN,
    CARREL_GUEST_ATOM_CARREL_SELECTION,
    CARREL_GUEST_ATOM_LAST
} CarrelGuestAtom;

typedef struct {
    Display *dpy;
    Window root;
    int screen;
    char *display_name;
    char *xauthority; /* the cookie file that let us in; NULL when none was needed */
    Atom atoms[CARREL_GUEST_ATOM_LAST];
} CarrelGuestX11;

/* Connects to options->display with options->xauthority, or with the first cookie that works
 * among the session's candidates (see carrel_guest_x11_auth_candidates); tries a few times over
 * 0.4 s, since a resetting server refuses connections for a moment. */
CarrelGuestX11 *carrel_guest_x11_open(const CarrelGuestOptions *options, GError **error);
/* The same with a single attempt, for callers that poll (ready). */
CarrelGuestX11 *carrel_guest_x11_try_open(const CarrelGuestOptions *options, GError **error);
void carrel_guest_x11_close(CarrelGuestX11 *x);
G_DEFINE_AUTOPTR_CLEANUP_FUNC(CarrelGuestX11, carrel_guest_x11_close)

/* Cookie files to try for display number `number`, most likely first, existing files only;
 * the last element is "" (no cookie: servers run with -ac or an xhost rule for root). */
GPtrArray *carrel_guest_x11_auth_candidates(int number);

/* Brackets X calls whose errors must not abort the program; trap_end returns the first X error
 * code seen in between (BadWindow, BadAccess, ...) or 0. */
void carrel_guest_x11_trap_begin(CarrelGuestX11 *x);
int carrel_guest_x11_trap_end(CarrelGuestX11 *x);

/* Type accepted for window ids (EWMH says WINDOW; a few clients and xprop write CARDINAL). */
#define CARREL_GUEST_WINDOW_TYPE None

typedef struct {
    Atom type;
    int format;
    gulong n_items;
    guchar *data; /* from Xlib: format-32 items are longs; NUL-terminated */
    gsize n_bytes;
    gboolean truncated;
} CarrelGuestProperty;

void carrel_guest_property_clear(CarrelGuestProperty *property);

/* Reads at most max_bytes of a property (AnyPropertyType when type is None); FALSE if the window
 * or the property is missing.  With remove, the property is deleted after reading. */
gboolean carrel_guest_x11_get_property(CarrelGuestX11 *x, Window window, Atom property, Atom type,
                                       gsize max_bytes, gboolean remove,
                                       CarrelGuestProperty *ret_property);

/* A format-32 property's items as unsigned longs (windows, cardinals); NULL if missing. */
gulong *carrel_guest_x11_get_longs(CarrelGuestX11 *x, Window window, Atom property, Atom type,
                                   gsize max_items, gsize *ret_n_items);

/* First item of a format-32 property; FALSE if missing. */
gboolean carrel_guest_x11_get_long(CarrelGuestX11 *x, Window window, Atom property, Atom type,
                                   gulong *ret_value);

/* A text property (UTF8_STRING, STRING or COMPOUND_TEXT) as valid UTF-8 of at most max_chars
 * characters; NULL if missing. */
char *carrel_guest_x11_get_text(CarrelGuestX11 *x, Window window, Atom property, gsize max_chars);

/* Converts property bytes of a text type to UTF-8 (no length limit beyond the data's). */
char *carrel_guest_x11_text_to_utf8(CarrelGuestX11 *x, const CarrelGuestProperty *property);

typedef gboolean (*CarrelGuestEventFilter)(CarrelGuestX11 *x, const XEvent *event, gpointer data);

/* Reads events until filter accepts one (copied to ret_event) or the monotonic deadline (in
 * microseconds) passes; other events are dropped. */
gboolean carrel_guest_x11_wait_event(CarrelGuestX11 *x, gint64 deadline_us,
                                     CarrelGuestEventFilter filter, gpointer data,
                                     XEvent *ret_event);

/* An unmapped 1x1 window listening for property changes (clipboard transfers, timestamps). */
Window carrel_guest_x11_create_window(CarrelGuestX11 *x);

/* A server timestamp, obtained by a zero-length property append on window. */
gboolean carrel_guest_x11_server_time(CarrelGuestX11 *x, Window window, gint64 deadline_us,
                                      Time *ret_time);

/* Parent of a window, or None (on error or at the root). */
Window carrel_guest_x11_parent(CarrelGuestX11 *x, Window window);

/* TRUE if an EWMH window manager runs (a valid _NET_SUPPORTING_WM_CHECK); its name, possibly
 * NULL, goes to ret_name when not NULL. */
gboolean carrel_guest_x11_ewmh_wm(CarrelGuestX11 *x, char **ret_name);

G_END_DECLS
