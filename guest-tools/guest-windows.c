/* windows: the top-level application windows, from _NET_CLIENT_LIST under an EWMH window
 * manager, else from the window tree (clients are the windows carrying WM_STATE, which a
 * reparenting window manager such as twm puts inside its frames). */
#include <X11/Xatom.h>
#include <X11/Xutil.h>

#include "guest-x11.h"

#define WM_CLASS_MAX_BYTES 1024
#define NET_WM_STATE_MAX_ITEMS 64
#define PARENT_WALK_MAX 64

typedef struct {
    CarrelGuestX11 *x;
    gboolean has_active; /* an EWMH window manager publishes _NET_ACTIVE_WINDOW */
    Window active;
    Window focus_top; /* otherwise: the top-level window (child of the root) with the focus */
} Listing;

/* The root's child that contains window, or None. */
static Window
top_level_of(CarrelGuestX11 *x, Window window)
{
    for (guint i = 0; window != None && i < PARENT_WALK_MAX; i++) {
        Window parent = carrel_guest_x11_parent(x, window);

        if (parent == x->root)
            return window;
        window = parent;
    }
    return None;
}

static Window
focused_top_level(CarrelGuestX11 *x)
{
    Window focus = None;
    int revert = 0;

    XGetInputFocus(x->dpy, &focus, &revert);
    /* Focus follows the pointer (twm's default): the focus is the window under the pointer. */
    if (focus == PointerRoot) {
        Window root = None;
        Window child = None;
        int root_x, root_y, win_x, win_y;
        unsigned int mask;

        if (!XQueryPointer(x->dpy, x->root, &root, &child, &root_x, &root_y, &win_x, &win_y, &mask))
            return None;
        return child;
    }
    if (focus == None || focus == x->root)
        return None;
    return top_level_of(x, focus);
}

static gboolean
has_wm_state(CarrelGuestX11 *x, Window window)
{
    CarrelGuestProperty p = {0};
    Atom wm_state = x->atoms[CARREL_GUEST_ATOM_WM_STATE];

    if (!carrel_guest_x11_get_property(x, window, wm_state, wm_state, 8, FALSE, &p))
        return FALSE;
    carrel_guest_property_clear(&p);
    return TRUE;
}

/* Breadth-first search below a top-level window for the client window, bounded in depth and
 * in the number of windows looked at (budget, shared by the whole listing). */
static Window
find_client(CarrelGuestX11 *x, Window top, guint *budget)
{
    g_autoptr(GArray) level = g_array_new(FALSE, FALSE, sizeof(Window));

    g_array_append_val(level, top);
    for (guint depth = 0; depth <= CARREL_GUEST_LIMIT_TREE_DEPTH && level->len > 0; depth++) {
        g_autoptr(GArray) next = g_array_new(FALSE, FALSE, sizeof(Window));

        for (guint i = 0; i<level->len && * budget> 0; i++) {
            Window window = g_array_index(level, Window, i);
            Window root, parent, *children = NULL;
            unsigned int n = 0;
            int status;

            (*budget)--;
            if (has_wm_state(x, window))
                return window;
            carrel_guest_x11_trap_begin(x);
            status = XQueryTree(x->dpy, window, &root, &parent, &children, &n);
            if (carrel_guest_x11_trap_end(x) == 0 && status && children)
                g_array_append_vals(next, children, MIN(n, *budget));
            if (children)
                XFree(children);
        }
        g_array_unref(level);
        level = g_steal_pointer(&next);
    }
    return None;
}

static void
read_class(CarrelGuestX11 *x, CarrelGuestWindow *window)
{
    CarrelGuestProperty p = {0};
    const char *data;
    gsize first_len;

    if (!carrel_guest_x11_get_property(x, window->id, XA_WM_CLASS, XA_STRING, WM_CLASS_MAX_BYTES,
                                       FALSE, &p))
        return;
    /* Two NUL-terminated Latin-1 strings: instance, then class. */
    data = (const char *)p.data;
    first_len = strnlen(data, p.n_bytes);
    if (p.format == 8) {
        g_autofree char *instance = carrel_guest_text_from_latin1(data, first_len);
        g_autofree char *klass = NULL;

        if (first_len + 1 < p.n_bytes)
            klass = carrel_guest_text_from_latin1(data + first_len + 1, p.n_bytes - first_len - 1);
        window->instance = carrel_guest_text_clip(instance, -1, CARREL_GUEST_LIMIT_CLASS_CHARS);
        if (klass)
            window->wm_class = carrel_guest_text_clip(klass, -1, CARREL_GUEST_LIMIT_CLASS_CHARS);
    }
    carrel_guest_property_clear(&p);
}

static gboolean
has_atom(CarrelGuestX11 *x, Window window, CarrelGuestAtom property, CarrelGuestAtom wanted)
{
    gsize n = 0;
    g_autofree gulong *atoms = carrel_guest_x11_get_longs(x, window, x->atoms[property], XA_ATOM,
                                                          NET_WM_STATE_MAX_ITEMS, &n);

    for (gsize i = 0; atoms && i < n; i++) {
        if (atoms[i] == x->atoms[wanted])
            return TRUE;
    }
    return FALSE;
}

/* Desktop backgrounds and panels are managed windows but not applications. */
static gboolean
is_desktop_or_dock(CarrelGuestX11 *x, Window window)
{
    return has_atom(x, window, CARREL_GUEST_ATOM_NET_WM_WINDOW_TYPE,
                    CARREL_GUEST_ATOM_NET_WM_WINDOW_TYPE_DESKTOP) ||
           has_atom(x, window, CARREL_GUEST_ATOM_NET_WM_WINDOW_TYPE,
                    CARREL_GUEST_ATOM_NET_WM_WINDOW_TYPE_DOCK);
}

static gboolean
read_geometry(CarrelGuestX11 *x, CarrelGuestWindow *window, XWindowAttributes *ret_attributes)
{
    Window child = None;
    int status;
    int code;

    carrel_guest_x11_trap_begin(x);
    status = XGetWindowAttributes(x->dpy, window->id, ret_attributes);
    if (status)
        status = XTranslateCoordinates(x->dpy, window->id, x->root, 0, 0, &window->x, &window->y,
                                       &child);
    code = carrel_guest_x11_trap_end(x);
    window->width = ret_attributes->width;
    window->height = ret_attributes->height;
    return status && code == 0;
}

/* ICCCM WM_STATE: Normal, Iconic, or Withdrawn (not managed: twm's own icon manager, a
 * window its client withdrew); Normal when the window manager does not set it. */
static gulong
wm_state_of(CarrelGuestX11 *x, Window id)
{
    Atom wm_state = x->atoms[CARREL_GUEST_ATOM_WM_STATE];
    gulong state = NormalState;

    if (!carrel_guest_x11_get_long(x, id, wm_state, wm_state, &state))
        return NormalState;
    return state;
}

static gboolean
is_visible(CarrelGuestX11 *x, Window id, const XWindowAttributes *attributes, gulong state)
{
    if (attributes->map_state != IsViewable || state == IconicState)
        return FALSE;
    return !has_atom(x, id, CARREL_GUEST_ATOM_NET_WM_STATE, CARREL_GUEST_ATOM_NET_WM_STATE_HIDDEN);
}

/* Everything about one client; NULL when it vanished meanwhile or is not an application. */
static CarrelGuestWindow *
describe(Listing *listing, Window id, Window top)
{
    CarrelGuestX11 *x = listing->x;
    g_autoptr(CarrelGuestWindow) window = carrel_guest_window_new(id);
    XWindowAttributes attributes = {0};
    gulong pid = 0;
    gulong state;

    if (!read_geometry(x, window, &attributes) || attributes.override_redirect)
        return NULL;
    state = wm_state_of(x, id);
    if (state == WithdrawnState || is_desktop_or_dock(x, id))
        return NULL;
    window->title = carrel_guest_x11_get_text(x, id, x->atoms[CARREL_GUEST_ATOM_NET_WM_NAME],
                                              CARREL_GUEST_LIMIT_TITLE_CHARS);
    if (!window->title)
        window->title =
            carrel_guest_x11_get_text(x, id, XA_WM_NAME, CARREL_GUEST_LIMIT_TITLE_CHARS);
    read_class(x, window);
    if (carrel_guest_x11_get_long(x, id, x->atoms[CARREL_GUEST_ATOM_NET_WM_PID], XA_CARDINAL,
                                  &pid) &&
        pid > 0 && pid <= G_MAXINT32)
        window->pid = (gint64)pid;
    window->visible = is_visible(x, id, &attributes, state);
    if (listing->has_active)
        window->focused = listing->active != None && id == listing->active;
    else
        window->focused = listing->focus_top != None && top == listing->focus_top;
    return g_steal_pointer(&window);
}

typedef struct {
    Window client;
    Window top; /* None: not known yet */
} Candidate;

/* Candidate clients, bottom to top. */
static GArray *
ewmh_clients(CarrelGuestX11 *x)
{
    GArray *candidates = g_array_new(FALSE, FALSE, sizeof(Candidate));
    gsize n = 0;
    g_autofree gulong *ids =
        carrel_guest_x11_get_longs(x, x->root, x->atoms[CARREL_GUEST_ATOM_NET_CLIENT_LIST_STACKING],
                                   CARREL_GUEST_WINDOW_TYPE, CARREL_GUEST_LIMIT_CLIENT_LIST, &n);

    if (!ids)
        ids = carrel_guest_x11_get_longs(x, x->root, x->atoms[CARREL_GUEST_ATOM_NET_CLIENT_LIST],
                                         CARREL_GUEST_WINDOW_TYPE, CARREL_GUEST_LIMIT_CLIENT_LIST,
                                         &n);
    for (gsize i = 0; ids && i < n; i++) {
        Candidate candidate = {.client = ids[i], .top = None};

        g_array_append_val(candidates, candidate);
    }
    return candidates;
}

static GArray *
tree_clients(CarrelGuestX11 *x)
{
    GArray *candidates = g_array_new(FALSE, FALSE, sizeof(Candidate));
    Window root, parent, *children = NULL;
    unsigned int n = 0;
    guint budget = CARREL_GUEST_LIMIT_TREE_NODES;

    if (!XQueryTree(x->dpy, x->root, &root, &parent, &children, &n))
        return candidates;
    for (unsigned int i = 0; i < n && budget > 0; i++) {
        Candidate candidate = {.client = find_client(x, children[i], &budget), .top = children[i]};

        if (candidate.client != None)
            g_array_append_val(candidates, candidate);
    }
    if (children)
        XFree(children);
    return candidates;
}

static void
init_focus(Listing *listing, gboolean ewmh)
{
    CarrelGuestX11 *x = listing->x;
    gulong active = None;

    listing->has_active =
        ewmh && carrel_guest_x11_get_long(x, x->root, x->atoms[CARREL_GUEST_ATOM_NET_ACTIVE_WINDOW],
                                          CARREL_GUEST_WINDOW_TYPE, &active);
    listing->active = active;
    if (!listing->has_active)
        listing->focus_top = focused_top_level(x);
}

/* Walks the candidates from the top of the stack down, so that the cap keeps the windows a
 * user can see; returns them bottom to top. */
static GPtrArray *
describe_all(Listing *listing, GArray *candidates, gboolean *ret_truncated)
{
    GPtrArray *windows = g_ptr_array_new_with_free_func((GDestroyNotify)carrel_guest_window_free);

    *ret_truncated = FALSE;
    for (guint i = candidates->len; i-- > 0;) {
        Candidate *candidate = &g_array_index(candidates, Candidate, i);
        CarrelGuestWindow *window;

        if (windows->len >= CARREL_GUEST_LIMIT_WINDOWS) {
            *ret_truncated = TRUE;
            break;
        }
        if (!listing->has_active && candidate->top == None)
            candidate->top = top_level_of(listing->x, candidate->client);
        window = describe(listing, candidate->client, candidate->top);
        if (window)
            g_ptr_array_insert(windows, 0, window);
    }
    return windows;
}

JsonNode *
carrel_guest_cmd_windows(const CarrelGuestOptions *options, GError **error)
{
    g_autoptr(CarrelGuestX11) x = carrel_guest_x11_open(options, error);
    g_autoptr(GPtrArray) windows = NULL;
    g_autoptr(GArray) candidates = NULL;
    Listing listing = {.x = x};
    gboolean ewmh;
    gboolean truncated = FALSE;

    if (!x)
        return NULL;
    ewmh = carrel_guest_x11_ewmh_wm(x, NULL);
    init_focus(&listing, ewmh);
    candidates = ewmh ? ewmh_clients(x) : NULL;
    if (!candidates || candidates->len == 0) {
        g_clear_pointer(&candidates, g_array_unref);
        candidates = tree_clients(x);
    }
    windows = describe_all(&listing, candidates, &truncated);
    return carrel_guest_windows_to_json(windows, truncated);
}
