/* The clipboard server: owns CLIPBOARD and PRIMARY and answers conversion requests (ICCCM),
 * with INCR transfers for data larger than one X request. */
#define _GNU_SOURCE /* close_range */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdlib.h>
#include <unistd.h>
#include <X11/Xatom.h>

#include "guest-clipboard.h"
#include "guest-x11.h"

#define MAX_TRANSFERS 16
#define TRANSFER_IDLE_US (30 * G_USEC_PER_SEC)
#define MAX_CHUNK_BYTES (256 * 1024)
#define STATUS_MESSAGE_MAX 900

typedef struct {
    Window requestor;
    Atom property;
    Atom type;
    const char *data;
    gsize len;
    gsize offset;
    gint64 deadline;
} Transfer;

typedef struct {
    CarrelGuestX11 *x;
    Window window;
    Time time;
    const char *utf8;
    gsize utf8_len;
    char *latin1;
    gsize latin1_len;
    gsize chunk;
    gboolean owns_clipboard;
    gboolean owns_primary;
    GArray *transfers;
} Server;

static void
report(int fd, const GError *error)
{
    g_autofree char *line = NULL;

    if (fd < 0)
        return;
    if (error) {
        g_autofree char *message = g_strndup(error->message, STATUS_MESSAGE_MAX);

        g_strdelimit(message, "\n", ' ');
        line = g_strdup_printf("error %s %s\n",
                               carrel_guest_error_code_to_string((CarrelGuestErrorCode)error->code),
                               message);
    } else {
        line = g_strdup("ok\n");
    }
    if (write(fd, line, strlen(line)) < 0) {
        /* the foreground gave up waiting: nothing to tell */
    }
    close(fd);
}

/* The server outlives the command: it must hold none of the caller's descriptors (the guest
 * agent reads our stdout until every copy is closed) and no working directory. */
static void
detach(int keep_fd)
{
    int null_fd = open("/dev/null", O_RDWR);

    if (null_fd >= 0) {
        dup2(null_fd, STDIN_FILENO);
        dup2(null_fd, STDOUT_FILENO);
        dup2(null_fd, STDERR_FILENO);
        if (null_fd > STDERR_FILENO && null_fd != keep_fd)
            close(null_fd);
    }
    if (keep_fd > 3)
        close_range(3, (unsigned int)keep_fd - 1, 0);
    close_range((unsigned int)MAX(keep_fd, 2) + 1, ~0U, 0);
    if (chdir("/") != 0) {
        /* "/" always exists */
    }
    /* The foreground's watchdog does not apply; the serving time limit does. */
    alarm(0);
    signal(SIGALRM, SIG_DFL);
    signal(SIGPIPE, SIG_IGN);
    alarm(CARREL_GUEST_CLIPBOARD_SERVE_SECONDS + 60);
}

static gsize
chunk_size(CarrelGuestX11 *x)
{
    const char *test_bytes = g_getenv("CARREL_GUEST_TEST_INCR_BYTES");
    long units = XExtendedMaxRequestSize(x->dpy);
    guint64 forced = 0;

    /* Lets the tests exercise INCR without megabytes of text. */
    if (test_bytes &&
        g_ascii_string_to_unsigned(test_bytes, 10, 16, MAX_CHUNK_BYTES, &forced, NULL))
        return (gsize)forced;
    if (units <= 0)
        units = XMaxRequestSize(x->dpy);
    return (gsize)MAX(units * 4 - 1024, 4096);
}

static gboolean
send_data(Server *server, Window requestor, Atom property, Atom type, const char *data, gsize len)
{
    Display *dpy = server->x->dpy;
    Transfer transfer = {requestor, property, type, data, len, 0, 0};
    long size = (long)len;

    if (len <= server->chunk) {
        XChangeProperty(dpy, requestor, property, type, 8, PropModeReplace,
                        (const unsigned char *)data, (int)len);
        return TRUE;
    }
    if (server->transfers->len >= MAX_TRANSFERS)
        return FALSE;
    XSelectInput(dpy, requestor, PropertyChangeMask);
    XChangeProperty(dpy, requestor, property, server->x->atoms[CARREL_GUEST_ATOM_INCR], 32,
                    PropModeReplace, (const unsigned char *)&size, 1);
    transfer.deadline = g_get_monotonic_time() + TRANSFER_IDLE_US;
    g_array_append_val(server->transfers, transfer);
    return TRUE;
}

static gboolean
convert_to(Server *server, Window requestor, Atom target, Atom property)
{
    const Atom *atoms = server->x->atoms;
    Display *dpy = server->x->dpy;

    if (target == atoms[CARREL_GUEST_ATOM_TARGETS]) {
        long targets[] = {
            (long)atoms[CARREL_GUEST_ATOM_TARGETS],
            (long)atoms[CARREL_GUEST_ATOM_TIMESTAMP],
            (long)atoms[CARREL_GUEST_ATOM_UTF8_STRING],
            (long)atoms[CARREL_GUEST_ATOM_TEXT_PLAIN_UTF8],
            (long)atoms[CARREL_GUEST_ATOM_TEXT],
            (long)XA_STRING,
            (long)atoms[CARREL_GUEST_ATOM_TEXT_PLAIN],
        };

        XChangeProperty(dpy, requestor, property, XA_ATOM, 32, PropModeReplace,
                        (const unsigned char *)targets, G_N_ELEMENTS(targets));
        return TRUE;
    }
    if (target == atoms[CARREL_GUEST_ATOM_TIMESTAMP]) {
        long time = (long)server->time;

        XChangeProperty(dpy, requestor, property, XA_INTEGER, 32, PropModeReplace,
                        (const unsigned char *)&time, 1);
        return TRUE;
    }
    if (target == atoms[CARREL_GUEST_ATOM_UTF8_STRING] || target == atoms[CARREL_GUEST_ATOM_TEXT])
        return send_data(server, requestor, property, atoms[CARREL_GUEST_ATOM_UTF8_STRING],
                         server->utf8, server->utf8_len);
    if (target == atoms[CARREL_GUEST_ATOM_TEXT_PLAIN_UTF8])
        return send_data(server, requestor, property, target, server->utf8, server->utf8_len);
    if (target == XA_STRING || target == atoms[CARREL_GUEST_ATOM_TEXT_PLAIN])
        return send_data(server, requestor, property, target, server->latin1, server->latin1_len);
    return FALSE;
}

static gboolean
owns(const Server *server, Atom selection)
{
    if (selection == server->x->atoms[CARREL_GUEST_ATOM_CLIPBOARD])
        return server->owns_clipboard;
    return selection == XA_PRIMARY && server->owns_primary;
}

static void
answer(Server *server, const XSelectionRequestEvent *request)
{
    XEvent reply = {.xselection = {
                        .type = SelectionNotify,
                        .display = request->display,
                        .requestor = request->requestor,
                        .selection = request->selection,
                        .target = request->target,
                        .property = None,
                        .time = request->time,
                    }};
    /* Obsolete clients name no property: the target's name is used then (ICCCM 2.2). */
    Atom property = request->property != None ? request->property : request->target;
    gboolean ok;

    carrel_guest_x11_trap_begin(server->x);
    ok = owns(server, request->selection) &&
         (request->time == CurrentTime || request->time >= server->time) &&
         request->target != server->x->atoms[CARREL_GUEST_ATOM_MULTIPLE] &&
         convert_to(server, request->requestor, request->target, property);
    if (carrel_guest_x11_trap_end(server->x) == 0 && ok)
        reply.xselection.property = property;
    carrel_guest_x11_trap_begin(server->x);
    XSendEvent(server->x->dpy, request->requestor, False, NoEventMask, &reply);
    carrel_guest_x11_trap_end(server->x);
}

static void
end_transfer(Server *server, guint index)
{
    Window requestor = g_array_index(server->transfers, Transfer, index).requestor;

    g_array_remove_index_fast(server->transfers, index);
    for (guint i = 0; i < server->transfers->len; i++) {
        if (g_array_index(server->transfers, Transfer, i).requestor == requestor)
            return;
    }
    carrel_guest_x11_trap_begin(server->x);
    XSelectInput(server->x->dpy, requestor, NoEventMask);
    carrel_guest_x11_trap_end(server->x);
}

/* The requestor deleted the last chunk: send the next one; a zero-length chunk ends it. */
static void
continue_transfer(Server *server, const XPropertyEvent *event)
{
    for (guint i = 0; i < server->transfers->len; i++) {
        Transfer *t = &g_array_index(server->transfers, Transfer, i);
        gsize n;
        int code;

        if (t->requestor != event->window || t->property != event->atom)
            continue;
        n = MIN(server->chunk, t->len - t->offset);
        carrel_guest_x11_trap_begin(server->x);
        XChangeProperty(server->x->dpy, t->requestor, t->property, t->type, 8, PropModeReplace,
                        (const unsigned char *)t->data + t->offset, (int)n);
        code = carrel_guest_x11_trap_end(server->x);
        t->offset += n;
        t->deadline = g_get_monotonic_time() + TRANSFER_IDLE_US;
        if (n == 0 || code != 0)
            end_transfer(server, i);
        return;
    }
}

static void
handle_event(Server *server, const XEvent *event)
{
    switch (event->type) {
    case SelectionRequest:
        answer(server, &event->xselectionrequest);
        break;
    case SelectionClear:
        if (event->xselectionclear.selection == server->x->atoms[CARREL_GUEST_ATOM_CLIPBOARD])
            server->owns_clipboard = FALSE;
        else if (event->xselectionclear.selection == XA_PRIMARY)
            server->owns_primary = FALSE;
        break;
    case PropertyNotify:
        if (event->xproperty.state == PropertyDelete)
            continue_transfer(server, &event->xproperty);
        break;
    default:
        break;
    }
}

static void
expire_transfers(Server *server)
{
    gint64 now = g_get_monotonic_time();

    for (guint i = server->transfers->len; i-- > 0;) {
        if (g_array_index(server->transfers, Transfer, i).deadline <= now)
            end_transfer(server, i);
    }
}

/* Serves until CLIPBOARD goes to another client (transfers under way are finished first) or
 * the time limit passes. */
static void
serve(Server *server)
{
    gint64 end =
        g_get_monotonic_time() + (gint64)CARREL_GUEST_CLIPBOARD_SERVE_SECONDS * G_USEC_PER_SEC;

    while (server->owns_clipboard || server->transfers->len > 0) {
        struct pollfd pfd = {.fd = ConnectionNumber(server->x->dpy), .events = POLLIN};
        gint64 now = g_get_monotonic_time();

        if (now >= end)
            return;
        while (XPending(server->x->dpy) > 0) {
            XEvent event;

            XNextEvent(server->x->dpy, &event);
            handle_event(server, &event);
        }
        expire_transfers(server);
        if (!server->owns_clipboard && server->transfers->len == 0)
            return;
        if (poll(&pfd, 1, 1000) < 0 && errno != EINTR)
            return;
    }
}

static gboolean
take_ownership(Server *server, const CarrelGuestOptions *options, GError **error)
{
    CarrelGuestX11 *x = server->x;
    Atom clipboard = x->atoms[CARREL_GUEST_ATOM_CLIPBOARD];
    gint64 deadline = g_get_monotonic_time() + options->timeout_ms * 1000;

    server->window = carrel_guest_x11_create_window(x);
    /* ICCCM: ownership is taken with a real server time, never CurrentTime. */
    if (!carrel_guest_x11_server_time(x, server->window, deadline, &server->time)) {
        g_set_error(error, CARREL_GUEST_ERROR, CARREL_GUEST_ERROR_TIMEOUT,
                    "no timestamp from display '%s'", x->display_name);
        return FALSE;
    }
    XSetSelectionOwner(x->dpy, clipboard, server->window, server->time);
    XSetSelectionOwner(x->dpy, XA_PRIMARY, server->window, server->time);
    server->owns_clipboard = XGetSelectionOwner(x->dpy, clipboard) == server->window;
    server->owns_primary = XGetSelectionOwner(x->dpy, XA_PRIMARY) == server->window;
    if (!server->owns_clipboard) {
        g_set_error(error, CARREL_GUEST_ERROR, CARREL_GUEST_ERROR_X11,
                    "could not take the CLIPBOARD selection on display '%s'", x->display_name);
        return FALSE;
    }
    return TRUE;
}

void
carrel_guest_clipboard_serve(const CarrelGuestOptions *options, const char *text, int status_fd)
{
    g_autoptr(GError) error = NULL;
    Server server = {.utf8 = text, .utf8_len = strlen(text)};

    detach(status_fd);
    server.x = carrel_guest_x11_open(options, &error);
    if (!server.x || !take_ownership(&server, options, &error)) {
        report(status_fd, error);
        _exit(1);
    }
    server.latin1 = carrel_guest_text_to_latin1(text, &server.latin1_len);
    server.chunk = chunk_size(server.x);
    server.transfers = g_array_new(FALSE, FALSE, sizeof(Transfer));
    report(status_fd, NULL);
    serve(&server);
    _exit(0);
}
