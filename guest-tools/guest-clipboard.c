/* clipboard get / set.  "set" forks a detached server, because X selections are served by
 * their owner for as long as it lives; the foreground returns once ownership is confirmed. */
#include <errno.h>
#include <fcntl.h>
#include <glib-unix.h>
#include <poll.h>
#include <sys/wait.h>
#include <unistd.h>
#include <X11/Xatom.h>

#include "guest-clipboard.h"
#include "guest-x11.h"

#define STATUS_MAX 1024

typedef struct {
    Window window;
    Atom selection;
} NotifyWanted;

static gboolean
is_selection_notify(CarrelGuestX11 *x, const XEvent *event, gpointer data)
{
    const NotifyWanted *wanted = data;

    return event->type == SelectionNotify && event->xselection.requestor == wanted->window &&
           event->xselection.selection == wanted->selection;
}

static gboolean
is_new_chunk(CarrelGuestX11 *x, const XEvent *event, gpointer data)
{
    return event->type == PropertyNotify && event->xproperty.window == *(Window *)data &&
           event->xproperty.atom == x->atoms[CARREL_GUEST_ATOM_CARREL_SELECTION] &&
           event->xproperty.state == PropertyNewValue;
}

static void
append_capped(GByteArray *buffer, const guchar *data, gsize len, gboolean *truncated)
{
    gsize room = CARREL_GUEST_LIMIT_CLIPBOARD_BYTES - buffer->len;

    if (len > room)
        *truncated = TRUE;
    g_byte_array_append(buffer, data, (guint)MIN(len, room));
}

/* INCR: the owner sends the data in chunks, each after we delete the previous one (reading with
 * remove deletes it); a zero-length chunk ends the transfer. */
static gboolean
receive_incr(CarrelGuestX11 *x, Window window, gint64 deadline, GByteArray *buffer, Atom *ret_type,
             gboolean *truncated, GError **error)
{
    Atom property = x->atoms[CARREL_GUEST_ATOM_CARREL_SELECTION];

    while (!*truncated) {
        CarrelGuestProperty chunk = {0};
        XEvent event;
        gsize n;

        if (!carrel_guest_x11_wait_event(x, deadline, is_new_chunk, &window, &event)) {
            g_set_error(error, CARREL_GUEST_ERROR, CARREL_GUEST_ERROR_TIMEOUT,
                        "the clipboard owner stopped sending after %u bytes", buffer->len);
            return FALSE;
        }
        if (!carrel_guest_x11_get_property(x, window, property, None,
                                           CARREL_GUEST_LIMIT_CLIPBOARD_BYTES, TRUE, &chunk))
            continue;
        n = chunk.format == 8 ? chunk.n_bytes : 0;
        *ret_type = chunk.type;
        append_capped(buffer, chunk.data, n, truncated);
        *truncated = *truncated || chunk.truncated;
        carrel_guest_property_clear(&chunk);
        if (n == 0)
            break;
    }
    return TRUE;
}

static char *
to_utf8(CarrelGuestX11 *x, Atom type, GByteArray *buffer, gboolean truncated)
{
    CarrelGuestProperty p = {.type = type, .format = 8};
    gsize len = buffer->len;
    const char *end = NULL;

    /* Drop a character split by the size limit rather than turning it into U+FFFD. */
    if (truncated && type != XA_STRING &&
        !g_utf8_validate((const char *)buffer->data, (gssize)len, &end) &&
        len - (gsize)(end - (const char *)buffer->data) < 4)
        len = (gsize)(end - (const char *)buffer->data);
    g_byte_array_set_size(buffer, (guint)len);
    g_byte_array_append(buffer, (const guchar *)"", 1);
    p.data = buffer->data;
    p.n_bytes = p.n_items = len;
    return carrel_guest_x11_text_to_utf8(x, &p);
}

/* Asks the owner to convert CLIPBOARD to target; NULL text with no error if it refuses. */
static gboolean
convert(CarrelGuestX11 *x, Window window, Atom target, gint64 deadline, char **ret_text,
        gboolean *ret_truncated, GError **error)
{
    Atom property = x->atoms[CARREL_GUEST_ATOM_CARREL_SELECTION];
    NotifyWanted wanted = {window, x->atoms[CARREL_GUEST_ATOM_CLIPBOARD]};
    g_autoptr(GByteArray) buffer = g_byte_array_new();
    CarrelGuestProperty p = {0};
    gboolean truncated = FALSE;
    Atom type;
    XEvent event;

    *ret_text = NULL;
    XConvertSelection(x->dpy, wanted.selection, target, property, window, CurrentTime);
    if (!carrel_guest_x11_wait_event(x, deadline, is_selection_notify, &wanted, &event)) {
        g_set_error(error, CARREL_GUEST_ERROR, CARREL_GUEST_ERROR_TIMEOUT,
                    "the clipboard owner did not answer in time");
        return FALSE;
    }
    if (event.xselection.property == None ||
        !carrel_guest_x11_get_property(x, window, property, None,
                                       CARREL_GUEST_LIMIT_CLIPBOARD_BYTES, TRUE, &p))
        return TRUE;
    type = p.type;
    if (type == x->atoms[CARREL_GUEST_ATOM_INCR]) {
        carrel_guest_property_clear(&p);
        if (!receive_incr(x, window, deadline, buffer, &type, &truncated, error))
            return FALSE;
    } else {
        append_capped(buffer, p.data, p.format == 8 ? p.n_bytes : 0, &truncated);
        truncated = truncated || p.truncated;
        carrel_guest_property_clear(&p);
    }
    *ret_text = to_utf8(x, type, buffer, truncated);
    *ret_truncated = truncated;
    return TRUE;
}

static JsonNode *
text_json(const char *text, gboolean truncated)
{
    g_autoptr(JsonBuilder) builder = carrel_guest_json_begin();

    json_builder_set_member_name(builder, "text");
    json_builder_add_string_value(builder, text);
    json_builder_set_member_name(builder, "truncated");
    json_builder_add_boolean_value(builder, truncated);
    return carrel_guest_json_end(builder);
}

JsonNode *
carrel_guest_cmd_clipboard_get(const CarrelGuestOptions *options, GError **error)
{
    g_autoptr(CarrelGuestX11) x = carrel_guest_x11_open(options, error);
    gint64 deadline = g_get_monotonic_time() + options->timeout_ms * 1000;
    g_autofree char *text = NULL;
    gboolean truncated = FALSE;
    Atom targets[2];
    Window window;

    if (!x)
        return NULL;
    if (XGetSelectionOwner(x->dpy, x->atoms[CARREL_GUEST_ATOM_CLIPBOARD]) == None)
        return text_json("", FALSE);
    window = carrel_guest_x11_create_window(x);
    targets[0] = x->atoms[CARREL_GUEST_ATOM_UTF8_STRING];
    targets[1] = XA_STRING;
    for (guint i = 0; i < G_N_ELEMENTS(targets) && !text; i++) {
        if (!convert(x, window, targets[i], deadline, &text, &truncated, error))
            return NULL;
    }
    return text_json(text ? text : "", truncated);
}

char *
carrel_guest_read_stdin(gsize max, gsize *ret_len, GError **error)
{
    GString *text = g_string_new(NULL);
    char chunk[65536];

    for (;;) {
        ssize_t n = read(STDIN_FILENO, chunk, sizeof(chunk));

        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0) {
            int saved = errno;

            g_string_free(text, TRUE);
            g_set_error(error, CARREL_GUEST_ERROR, CARREL_GUEST_ERROR_FAILED,
                        "cannot read standard input: %s", g_strerror(saved));
            return NULL;
        }
        if (n == 0) {
            *ret_len = text->len;
            return g_string_free(text, FALSE);
        }
        if (text->len + (gsize)n > max) {
            g_string_free(text, TRUE);
            g_set_error(error, CARREL_GUEST_ERROR, CARREL_GUEST_ERROR_LIMIT,
                        "standard input is larger than %" G_GSIZE_FORMAT " bytes", max);
            return NULL;
        }
        g_string_append_len(text, chunk, n);
    }
}

/* Waits for the server's one status line: "ok" or "error CODE MESSAGE". */
static gboolean
read_status(int fd, gint64 timeout_ms, GError **error)
{
    char status[STATUS_MAX + 1];
    gsize len = 0;
    gint64 deadline = g_get_monotonic_time() + timeout_ms * 1000;
    char *space;

    while (len < STATUS_MAX && !memchr(status, '\n', len)) {
        struct pollfd pfd = {.fd = fd, .events = POLLIN};
        gint64 remaining = (deadline - g_get_monotonic_time()) / 1000;
        ssize_t n;

        if (remaining <= 0 || poll(&pfd, 1, (int)remaining) == 0)
            break;
        n = read(fd, status + len, STATUS_MAX - len);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            break;
        len += (gsize)n;
    }
    status[len] = '\0';
    g_strchomp(status);
    if (g_str_equal(status, "ok"))
        return TRUE;
    if (!g_str_has_prefix(status, "error ") || !(space = strchr(status + 6, ' '))) {
        g_set_error(error, CARREL_GUEST_ERROR, CARREL_GUEST_ERROR_TIMEOUT,
                    "the clipboard server did not confirm ownership in time");
        return FALSE;
    }
    *space = '\0';
    g_set_error_literal(error, CARREL_GUEST_ERROR,
                        (int)carrel_guest_error_code_from_string(status + 6), space + 1);
    return FALSE;
}

/* Double fork: the server is not our child (nothing waits for it), has its own session, and
 * holds none of the caller's descriptors (the guest agent waits for stdout to close). */
static gboolean
spawn_server(const CarrelGuestOptions *options, const char *text, GError **error)
{
    int fds[2];
    pid_t pid;
    gboolean ok;

    if (!g_unix_open_pipe(fds, FD_CLOEXEC, error))
        return FALSE;
    pid = fork();
    if (pid < 0) {
        int saved = errno;

        close(fds[0]);
        close(fds[1]);
        g_set_error(error, CARREL_GUEST_ERROR, CARREL_GUEST_ERROR_FAILED, "fork failed: %s",
                    g_strerror(saved));
        return FALSE;
    }
    if (pid == 0) {
        close(fds[0]);
        setsid();
        if (fork() != 0)
            _exit(0);
        carrel_guest_clipboard_serve(options, text, fds[1]);
    }
    close(fds[1]);
    while (waitpid(pid, NULL, 0) < 0 && errno == EINTR)
        ;
    ok = read_status(fds[0], options->timeout_ms + 2000, error);
    close(fds[0]);
    return ok;
}

JsonNode *
carrel_guest_cmd_clipboard_set(const CarrelGuestOptions *options, GError **error)
{
    g_autoptr(JsonBuilder) builder = NULL;
    g_autofree char *input = NULL;
    const char *text = options->text;
    gsize len = text ? strlen(text) : 0;

    if (options->use_stdin) {
        input = carrel_guest_read_stdin(CARREL_GUEST_LIMIT_CLIPBOARD_BYTES, &len, error);
        if (!input)
            return NULL;
        text = input;
    }
    /* With an explicit length, NUL bytes count as invalid: the clipboard holds text. */
    if (!g_utf8_validate(text, (gssize)len, NULL)) {
        g_set_error(error, CARREL_GUEST_ERROR, CARREL_GUEST_ERROR_INVALID_ARG,
                    "clipboard text is not valid UTF-8 (or holds NUL bytes)");
        return NULL;
    }
    if (!spawn_server(options, text, error))
        return NULL;
    builder = carrel_guest_json_begin();
    json_builder_set_member_name(builder, "ok");
    json_builder_add_boolean_value(builder, TRUE);
    return carrel_guest_json_end(builder);
}
