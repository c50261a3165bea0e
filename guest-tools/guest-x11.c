/* X connection, cookie discovery and error trapping. */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>
#include <X11/Xatom.h>
#include <X11/Xutil.h>

#include "guest-x11.h"

static const char *const atom_names[CARREL_GUEST_ATOM_LAST] = {
    [CARREL_GUEST_ATOM_WM_STATE] = "WM_STATE",
    [CARREL_GUEST_ATOM_UTF8_STRING] = "UTF8_STRING",
    [CARREL_GUEST_ATOM_COMPOUND_TEXT] = "COMPOUND_TEXT",
    [CARREL_GUEST_ATOM_NET_WM_NAME] = "_NET_WM_NAME",
    [CARREL_GUEST_ATOM_NET_WM_PID] = "_NET_WM_PID",
    [CARREL_GUEST_ATOM_NET_WM_STATE] = "_NET_WM_STATE",
    [CARREL_GUEST_ATOM_NET_WM_STATE_HIDDEN] = "_NET_WM_STATE_HIDDEN",
    [CARREL_GUEST_ATOM_NET_WM_WINDOW_TYPE] = "_NET_WM_WINDOW_TYPE",
    [CARREL_GUEST_ATOM_NET_WM_WINDOW_TYPE_DESKTOP] = "_NET_WM_WINDOW_TYPE_DESKTOP",
    [CARREL_GUEST_ATOM_NET_WM_WINDOW_TYPE_DOCK] = "_NET_WM_WINDOW_TYPE_DOCK",
    [CARREL_GUEST_ATOM_NET_CLIENT_LIST] = "_NET_CLIENT_LIST",
    [CARREL_GUEST_ATOM_NET_CLIENT_LIST_STACKING] = "_NET_CLIENT_LIST_STACKING",
    [CARREL_GUEST_ATOM_NET_ACTIVE_WINDOW] = "_NET_ACTIVE_WINDOW",
    [CARREL_GUEST_ATOM_NET_SUPPORTING_WM_CHECK] = "_NET_SUPPORTING_WM_CHECK",
    [CARREL_GUEST_ATOM_CLIPBOARD] = "CLIPBOARD",
    [CARREL_GUEST_ATOM_TARGETS] = "TARGETS",
    [CARREL_GUEST_ATOM_TIMESTAMP] = "TIMESTAMP",
    [CARREL_GUEST_ATOM_INCR] = "INCR",
    [CARREL_GUEST_ATOM_TEXT] = "TEXT",
    [CARREL_GUEST_ATOM_MULTIPLE] = "MULTIPLE",
    [CARREL_GUEST_ATOM_TEXT_PLAIN_UTF8] = "text/plain;charset=utf-8",
    [CARREL_GUEST_ATOM_TEXT_PLAIN] = "text/plain",
    [CARREL_GUEST_ATOM_CARREL_SELECTION] = "CARREL_SELECTION",
};

#define OPEN_ATTEMPTS 3
#define OPEN_RETRY_US (200 * 1000)

/* Xlib reports errors through one process-wide handler; we hold one connection at a time. */
static int first_trapped_error;

static int
on_x_error(Display *dpy, XErrorEvent *event)
{
    if (first_trapped_error == 0)
        first_trapped_error = event->error_code;
    return 0;
}

/* Xlib exits after this handler returns, so say why in the one JSON line we owe the caller. */
static int
on_x_io_error(Display *dpy)
{
    static const char message[] =
        "{\"error\":{\"code\":\"display_unavailable\",\"message\":\"lost the X connection\"}}\n";

    if (write(STDOUT_FILENO, message, sizeof(message) - 1) < 0) {
        /* nothing left to report to */
    }
    _exit(1);
}

void
carrel_guest_x11_trap_begin(CarrelGuestX11 *x)
{
    XSync(x->dpy, False);
    first_trapped_error = 0;
}

int
carrel_guest_x11_trap_end(CarrelGuestX11 *x)
{
    int code;

    XSync(x->dpy, False);
    code = first_trapped_error;
    first_trapped_error = 0;
    return code;
}

static void
add_candidate(GPtrArray *list, const char *path)
{
    if (!path || !g_path_is_absolute(path) || !g_file_test(path, G_FILE_TEST_IS_REGULAR))
        return;
    for (guint i = 0; i < list->len; i++) {
        if (g_str_equal(g_ptr_array_index(list, i), path))
            return;
    }
    g_ptr_array_add(list, g_strdup(path));
}

static void
add_run_user_candidates(GPtrArray *list)
{
    g_autoptr(GDir) dir = g_dir_open("/run/user", 0, NULL);
    const char *name;
    guint n = 0;

    while (dir && (name = g_dir_read_name(dir)) && n++ < 64) {
        g_autofree char *path = g_build_filename("/run/user", name, "Xauthority", NULL);

        add_candidate(list, path);
    }
}

/* The caller's XAUTHORITY, read before open_quietly() first overwrites it. */
static const char *
caller_xauthority(void)
{
    static gsize once;
    static char *value;

    if (g_once_init_enter(&once)) {
        value = g_strdup(g_getenv("XAUTHORITY"));
        g_once_init_leave(&once, 1);
    }
    return value;
}

GPtrArray *
carrel_guest_x11_auth_candidates(int number)
{
    GPtrArray *list = g_ptr_array_new_with_free_func(g_free);
    g_autofree char *server_auth = carrel_guest_proc_find_server_auth(number);
    g_autoptr(CarrelGuestSession) session = carrel_guest_proc_find_session(number);
    g_autofree char *lightdm = g_strdup_printf("/var/run/lightdm/root/:%d", number);
    g_autofree char *lightdm_run = g_strdup_printf("/run/lightdm/root/:%d", number);

    /* The server's own cookie file first: it is exactly the one the server checks. */
    add_candidate(list, server_auth);
    add_candidate(list, caller_xauthority());
    add_candidate(list, session ? session->xauthority : NULL);
    add_candidate(list, "/home/agent/.Xauthority");
    add_candidate(list, "/home/user/.Xauthority");
    add_run_user_candidates(list);
    add_candidate(list, lightdm);
    add_candidate(list, lightdm_run);
    add_candidate(list, "/root/.Xauthority");
    g_ptr_array_add(list, g_strdup(""));
    return list;
}

/* Xlib prints authorization failures on stderr by itself; each failed candidate would add a
 * line to the caller's captured stderr, so it is silenced while connecting. */
static Display *
open_quietly(const char *display, const char *xauthority)
{
    int saved = dup(STDERR_FILENO);
    int null_fd = open("/dev/null", O_WRONLY | O_CLOEXEC);
    Display *dpy;

    if (saved >= 0 && null_fd >= 0)
        dup2(null_fd, STDERR_FILENO);
    caller_xauthority();
    /* An empty XAUTHORITY file means: connect without a cookie. */
    g_setenv("XAUTHORITY", xauthority[0] ? xauthority : "/dev/null", TRUE);
    dpy = XOpenDisplay(display);
    if (saved >= 0 && null_fd >= 0)
        dup2(saved, STDERR_FILENO);
    if (saved >= 0)
        close(saved);
    if (null_fd >= 0)
        close(null_fd);
    return dpy;
}

static CarrelGuestX11 *
x11_new(Display *dpy, const char *display, const char *xauthority)
{
    CarrelGuestX11 *x = g_new0(CarrelGuestX11, 1);

    x->dpy = dpy;
    x->screen = DefaultScreen(dpy);
    x->root = RootWindow(dpy, x->screen);
    x->display_name = g_strdup(display);
    x->xauthority = xauthority[0] ? g_strdup(xauthority) : NULL;
    fcntl(ConnectionNumber(dpy), F_SETFD, FD_CLOEXEC);
    XSetErrorHandler(on_x_error);
    XSetIOErrorHandler(on_x_io_error);
    XInternAtoms(dpy, (char **)atom_names, CARREL_GUEST_ATOM_LAST, False, x->atoms);
    return x;
}

static CarrelGuestX11 *
x11_open(const CarrelGuestOptions *options, guint attempts, GError **error)
{
    g_autoptr(GPtrArray) candidates = NULL;
    int number = 0;

    if (options->xauthority) {
        candidates = g_ptr_array_new_with_free_func(g_free);
        g_ptr_array_add(candidates, g_strdup(options->xauthority));
    } else {
        carrel_guest_display_number(options->display, &number);
        candidates = carrel_guest_x11_auth_candidates(number);
    }
    /* A server resetting after its last client left (Xorg without -noreset, between sessions)
     * refuses connections for a moment: retry a few times before giving up. */
    for (guint attempt = 0; attempt < attempts; attempt++) {
        for (guint i = 0; i < candidates->len; i++) {
            const char *xauthority = g_ptr_array_index(candidates, i);
            Display *dpy = open_quietly(options->display, xauthority);

            if (dpy)
                return x11_new(dpy, options->display, xauthority);
        }
        if (attempt + 1 < attempts)
            g_usleep(OPEN_RETRY_US);
    }
    if (options->xauthority)
        g_set_error(error, CARREL_GUEST_ERROR, CARREL_GUEST_ERROR_DISPLAY,
                    "cannot open display '%s' with cookie file '%s'", options->display,
                    options->xauthority);
    else
        g_set_error(error, CARREL_GUEST_ERROR, CARREL_GUEST_ERROR_DISPLAY,
                    "cannot open display '%s' (tried %u cookie files and none)", options->display,
                    candidates->len - 1);
    return NULL;
}

CarrelGuestX11 *
carrel_guest_x11_open(const CarrelGuestOptions *options, GError **error)
{
    return x11_open(options, OPEN_ATTEMPTS, error);
}

CarrelGuestX11 *
carrel_guest_x11_try_open(const CarrelGuestOptions *options, GError **error)
{
    return x11_open(options, 1, error);
}

void
carrel_guest_x11_close(CarrelGuestX11 *x)
{
    if (!x)
        return;
    if (x->dpy)
        XCloseDisplay(x->dpy);
    g_free(x->display_name);
    g_free(x->xauthority);
    g_free(x);
}

void
carrel_guest_property_clear(CarrelGuestProperty *property)
{
    if (property->data)
        XFree(property->data);
    memset(property, 0, sizeof(*property));
}

static gsize
item_size(int format)
{
    if (format == 32)
        return sizeof(long);
    return format == 16 ? sizeof(short) : 1;
}

gboolean
carrel_guest_x11_get_property(CarrelGuestX11 *x, Window window, Atom property, Atom type,
                              gsize max_bytes, gboolean remove, CarrelGuestProperty *ret_property)
{
    CarrelGuestProperty p = {0};
    unsigned long bytes_after = 0;
    int status;

    carrel_guest_x11_trap_begin(x);
    status = XGetWindowProperty(x->dpy, window, property, 0, (long)((max_bytes + 3) / 4), remove,
                                type == None ? AnyPropertyType : type, &p.type, &p.format,
                                &p.n_items, &bytes_after, &p.data);
    if (carrel_guest_x11_trap_end(x) != 0 || status != Success || p.type == None || !p.data ||
        (type != None && p.type != type)) {
        carrel_guest_property_clear(&p);
        return FALSE;
    }
    p.n_bytes = p.n_items * item_size(p.format);
    p.truncated = bytes_after > 0;
    /* The server deletes only fully read properties. */
    if (remove && p.truncated)
        XDeleteProperty(x->dpy, window, property);
    *ret_property = p;
    return TRUE;
}

gulong *
carrel_guest_x11_get_longs(CarrelGuestX11 *x, Window window, Atom property, Atom type,
                           gsize max_items, gsize *ret_n_items)
{
    CarrelGuestProperty p = {0};
    gulong *items;

    if (!carrel_guest_x11_get_property(x, window, property, type, max_items * 4, FALSE, &p))
        return NULL;
    if (p.format != 32 || p.n_items == 0) {
        carrel_guest_property_clear(&p);
        return NULL;
    }
    items = g_new(gulong, p.n_items);
    memcpy(items, p.data, p.n_items * sizeof(gulong));
    *ret_n_items = MIN(p.n_items, max_items);
    carrel_guest_property_clear(&p);
    return items;
}

gboolean
carrel_guest_x11_get_long(CarrelGuestX11 *x, Window window, Atom property, Atom type,
                          gulong *ret_value)
{
    gsize n = 0;
    g_autofree gulong *items = carrel_guest_x11_get_longs(x, window, property, type, 1, &n);

    if (!items)
        return FALSE;
    *ret_value = items[0];
    return TRUE;
}

static char *
compound_text_to_utf8(CarrelGuestX11 *x, const CarrelGuestProperty *property)
{
    XTextProperty text = {
        .value = property->data,
        .encoding = property->type,
        .format = property->format,
        .nitems = property->n_items,
    };
    char **list = NULL;
    int count = 0;
    GString *out;

    if (Xutf8TextPropertyToTextList(x->dpy, &text, &list, &count) < Success || !list)
        return carrel_guest_text_from_latin1((const char *)property->data, property->n_bytes);
    out = g_string_new(NULL);
    for (int i = 0; i < count; i++)
        g_string_append(out, list[i]);
    XFreeStringList(list);
    return g_string_free(out, FALSE);
}

char *
carrel_guest_x11_text_to_utf8(CarrelGuestX11 *x, const CarrelGuestProperty *property)
{
    const char *data = (const char *)property->data;

    if (property->format != 8)
        return g_strdup("");
    if (property->type == XA_STRING)
        return carrel_guest_text_from_latin1(data, property->n_bytes);
    if (property->type == x->atoms[CARREL_GUEST_ATOM_COMPOUND_TEXT])
        return compound_text_to_utf8(x, property);
    return g_utf8_make_valid(data, (gssize)property->n_bytes);
}

char *
carrel_guest_x11_get_text(CarrelGuestX11 *x, Window window, Atom property, gsize max_chars)
{
    CarrelGuestProperty p = {0};
    g_autofree char *utf8 = NULL;

    if (!carrel_guest_x11_get_property(x, window, property, None, max_chars * 4 + 4, FALSE, &p))
        return NULL;
    utf8 = carrel_guest_x11_text_to_utf8(x, &p);
    carrel_guest_property_clear(&p);
    return carrel_guest_text_clip(utf8, -1, max_chars);
}

gboolean
carrel_guest_x11_wait_event(CarrelGuestX11 *x, gint64 deadline_us, CarrelGuestEventFilter filter,
                            gpointer data, XEvent *ret_event)
{
    for (;;) {
        struct pollfd pfd = {.fd = ConnectionNumber(x->dpy), .events = POLLIN};
        gint64 remaining;

        while (XPending(x->dpy) > 0) {
            XNextEvent(x->dpy, ret_event);
            if (filter(x, ret_event, data))
                return TRUE;
        }
        remaining = deadline_us - g_get_monotonic_time();
        if (remaining <= 0)
            return FALSE;
        if (poll(&pfd, 1, (int)MIN((remaining + 999) / 1000, G_MAXINT)) < 0 && errno != EINTR)
            return FALSE;
    }
}

Window
carrel_guest_x11_create_window(CarrelGuestX11 *x)
{
    XSetWindowAttributes attributes = {.event_mask = PropertyChangeMask, .override_redirect = True};

    return XCreateWindow(x->dpy, x->root, -10, -10, 1, 1, 0, CopyFromParent, InputOnly,
                         CopyFromParent, CWEventMask | CWOverrideRedirect, &attributes);
}

static gboolean
is_time_notify(CarrelGuestX11 *x, const XEvent *event, gpointer data)
{
    return event->type == PropertyNotify && event->xproperty.window == *(Window *)data &&
           event->xproperty.atom == x->atoms[CARREL_GUEST_ATOM_CARREL_SELECTION];
}

gboolean
carrel_guest_x11_server_time(CarrelGuestX11 *x, Window window, gint64 deadline_us, Time *ret_time)
{
    XEvent event;

    XChangeProperty(x->dpy, window, x->atoms[CARREL_GUEST_ATOM_CARREL_SELECTION], XA_STRING, 8,
                    PropModeAppend, (const unsigned char *)"", 0);
    if (!carrel_guest_x11_wait_event(x, deadline_us, is_time_notify, &window, &event))
        return FALSE;
    *ret_time = event.xproperty.time;
    return TRUE;
}

Window
carrel_guest_x11_parent(CarrelGuestX11 *x, Window window)
{
    Window root = None;
    Window parent = None;
    Window *children = NULL;
    unsigned int n = 0;
    int status;

    carrel_guest_x11_trap_begin(x);
    status = XQueryTree(x->dpy, window, &root, &parent, &children, &n);
    if (children)
        XFree(children);
    if (carrel_guest_x11_trap_end(x) != 0 || !status)
        return None;
    return parent;
}

gboolean
carrel_guest_x11_ewmh_wm(CarrelGuestX11 *x, char **ret_name)
{
    Atom check = x->atoms[CARREL_GUEST_ATOM_NET_SUPPORTING_WM_CHECK];
    gulong window = None;
    gulong self = None;

    /* The window must point to itself, or the property is stale (its window manager died). */
    if (!carrel_guest_x11_get_long(x, x->root, check, CARREL_GUEST_WINDOW_TYPE, &window) ||
        window == None ||
        !carrel_guest_x11_get_long(x, window, check, CARREL_GUEST_WINDOW_TYPE, &self) ||
        self != window)
        return FALSE;
    if (!ret_name)
        return TRUE;
    *ret_name = carrel_guest_x11_get_text(x, window, x->atoms[CARREL_GUEST_ATOM_NET_WM_NAME],
                                          CARREL_GUEST_LIMIT_CLASS_CHARS);
    if (!*ret_name)
        *ret_name =
            carrel_guest_x11_get_text(x, window, XA_WM_NAME, CARREL_GUEST_LIMIT_CLASS_CHARS);
    return TRUE;
}
