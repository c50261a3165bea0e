/*
 * Unit tests of the hypervisor module's RFB client (hypervisor-rfb.c) against a scripted VNC
 * server over a socketpair: the server's bytes are written before or between the client's
 * calls, and what the client sends is checked byte for byte.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <errno.h>
#include <poll.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#define CARREL_HYPERVISOR_RFB_H_ALLOW
#include "hypervisor/hypervisor-rfb.h"

#define TIMEOUT_MS 2000
#define WIDTH 1024
#define HEIGHT 768
#define NAME "carrel-s-0123456789ab"

typedef struct {
    int server;
    int client; /* handed to the watch, which owns it from then on */
} Fixture;

/* What carrel sends after a 3.8 handshake of a WIDTH x HEIGHT screen, spelled out by hand. */
static const char client_hello_text[] =
    "RFB 003.008\n"                             /* version */
    "\x01"                                      /* security type None */
    "\x01"                                      /* ClientInit: shared */
    "\x00\x00\x00\x00"                          /* SetPixelFormat, padding */
    "\x08\x08\x00\x01"                          /* 8 bpp, depth 8, little-endian, true colour */
    "\x00\x07\x00\x07\x00\x03"                  /* red, green, blue max */
    "\x00\x03\x06\x00\x00\x00"                  /* red, green, blue shift, padding */
    "\x02\x00\x00\x02"                          /* SetEncodings, padding, 2 */
    "\x00\x00\x00\x00"                          /* Raw */
    "\xff\xff\xff\x21"                          /* DesktopSize (-223) */
    "\x03\x01\x00\x00\x00\x00\x04\x00\x03\x00"; /* incremental request, 0,0 1024x768 */
#define CLIENT_HELLO ((const guint8 *)client_hello_text)
#define HELLO_LEN (sizeof client_hello_text - 1)

static int
setup(void **state)
{
    Fixture *fx = g_new0(Fixture, 1);
    int fds[2];

    assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, fds), 0);
    fx->server = fds[0];
    fx->client = fds[1];
    *state = fx;
    return 0;
}

static int
teardown(void **state)
{
    Fixture *fx = *state;

    if (fx->server >= 0)
        close(fx->server);
    g_free(fx);
    return 0;
}

static void
assert_error(const GError *error, int code, const char *fragment)
{
    assert_non_null(error);
    if (error->domain != CARREL_ERROR || error->code != code || !strstr(error->message, fragment))
        fail_msg("expected code %d with '%s', got %d: %s", code, fragment, error->code,
                 error->message);
}

static void
srv_write(Fixture *fx, const void *data, gsize len)
{
    const guint8 *p = data;

    while (len > 0) {
        ssize_t n = send(fx->server, p, len, MSG_NOSIGNAL);
        assert_true(n > 0);
        p += n;
        len -= (gsize)n;
    }
}

static void
srv_write_bytes(Fixture *fx, GByteArray *bytes)
{
    srv_write(fx, bytes->data, bytes->len);
}

/* The client sent exactly these bytes next. */
static void
srv_expect(Fixture *fx, const guint8 *want, gsize len)
{
    g_autofree guint8 *got = g_malloc0(len);
    gsize done = 0;

    while (done < len) {
        struct pollfd pfd = {.fd = fx->server, .events = POLLIN};
        ssize_t n;

        assert_int_equal(poll(&pfd, 1, TIMEOUT_MS), 1);
        n = recv(fx->server, got + done, len - done, 0);
        assert_true(n > 0);
        done += (gsize)n;
    }
    assert_memory_equal(got, want, len);
}

/* The client sent nothing (more). */
static void
srv_expect_nothing(Fixture *fx)
{
    guint8 byte;

    assert_int_equal(recv(fx->server, &byte, 1, MSG_DONTWAIT), -1);
    assert_true(errno == EAGAIN || errno == EWOULDBLOCK);
}

/* The client sent nothing more and closed its end (a failed handshake frees the watch). */
static void
srv_expect_closed(Fixture *fx)
{
    guint8 byte;

    assert_int_equal(recv(fx->server, &byte, 1, MSG_DONTWAIT), 0);
}

static void
append16(GByteArray *bytes, guint value)
{
    guint8 be[2] = {(guint8)(value >> 8), (guint8)value};
    g_byte_array_append(bytes, be, 2);
}

static void
append32(GByteArray *bytes, guint32 value)
{
    guint8 be[4] = {(guint8)(value >> 24), (guint8)(value >> 16), (guint8)(value >> 8),
                    (guint8)value};
    g_byte_array_append(bytes, be, 4);
}

static void
append_text(GByteArray *bytes, const char *text)
{
    g_byte_array_append(bytes, (const guint8 *)text, strlen(text));
}

/* ServerInit: size, QEMU's usual 32 bpp pixel format, name. */
static void
append_server_init(GByteArray *bytes, guint width, guint height, guint32 name_len, const char *name)
{
    static const guint8 format[16] = {32, 24, 0, 1, 0, 255, 0, 255, 0, 255, 16, 8, 0};

    append16(bytes, width);
    append16(bytes, height);
    g_byte_array_append(bytes, format, sizeof format);
    append32(bytes, name_len);
    append_text(bytes, name);
}

/* A well-behaved 3.8 server's whole side of the handshake. */
static GByteArray *
server_hello(guint width, guint height)
{
    GByteArray *bytes = g_byte_array_new();
    static const guint8 security[] = {2, 2, 1}; /* VNC auth and None offered */

    append_text(bytes, "RFB 003.008\n");
    g_byte_array_append(bytes, security, sizeof security);
    append32(bytes, 0); /* SecurityResult OK */
    append_server_init(bytes, width, height, strlen(NAME), NAME);
    return bytes;
}

/* A handshaken watch over the fixture; the client's handshake bytes are checked and consumed. */
static CarrelRfbWatch *
connected(Fixture *fx)
{
    g_autoptr(GByteArray) hello = server_hello(WIDTH, HEIGHT);
    g_autoptr(GError) error = NULL;
    CarrelRfbWatch *w;

    srv_write_bytes(fx, hello);
    w = carrel_rfb_watch_new_fd(fx->client, TIMEOUT_MS, &error);
    assert_null(error);
    assert_non_null(w);
    srv_expect(fx, CLIENT_HELLO, HELLO_LEN);
    srv_expect_nothing(fx);
    return w;
}

/* A handshake that must fail; returns the error. */
static GError *
handshake_fails(Fixture *fx, GByteArray *script, guint timeout_ms)
{
    GError *error = NULL;

    srv_write_bytes(fx, script);
    assert_null(carrel_rfb_watch_new_fd(fx->client, timeout_ms, &error));
    assert_non_null(error);
    return error;
}

static gboolean
poll_changed(CarrelRfbWatch *w)
{
    g_autoptr(GError) error = NULL;
    gboolean changed = 99;

    assert_true(carrel_rfb_watch_poll(w, &changed, &error));
    assert_null(error);
    assert_true(changed == TRUE || changed == FALSE);
    assert_true(carrel_rfb_watch_held_bytes(w) <= CARREL_RFB_HEAD_MAX);
    return changed;
}

/* FramebufferUpdate header with count rectangles. */
static void
append_update(GByteArray *bytes, guint count)
{
    g_byte_array_append(bytes, (const guint8[]){0, 0}, 2);
    append16(bytes, count);
}

static void
append_rect(GByteArray *bytes, guint x, guint y, guint width, guint height, gint32 encoding)
{
    append16(bytes, x);
    append16(bytes, y);
    append16(bytes, width);
    append16(bytes, height);
    append32(bytes, (guint32)encoding);
}

/* One raw rectangle with its pixels (one byte each). */
static void
append_raw_rect(GByteArray *bytes, guint x, guint y, guint width, guint height)
{
    append_rect(bytes, x, y, width, height, 0);
    for (guint i = 0; i < width * height; i++)
        g_byte_array_append(bytes, (const guint8[]){(guint8)i}, 1);
}

static void
test_handshake(void **state)
{
    Fixture *fx = *state;
    g_autoptr(CarrelRfbWatch) w = connected(fx);

    assert_int_equal(carrel_rfb_watch_width(w), WIDTH);
    assert_int_equal(carrel_rfb_watch_height(w), HEIGHT);
    assert_int_equal(carrel_rfb_watch_fd(w), fx->client);
    /* The first request is outstanding: asking again sends nothing. */
    assert_true(carrel_rfb_watch_request(w, NULL));
    srv_expect_nothing(fx);
}

static void
test_handshake_37(void **state)
{
    Fixture *fx = *state;
    g_autoptr(GByteArray) script = g_byte_array_new();
    g_autoptr(GError) error = NULL;
    g_autoptr(CarrelRfbWatch) w = NULL;

    /* 3.7: no SecurityResult after None; carrel answers 3.7, never more than offered. */
    append_text(script, "RFB 003.007\n");
    g_byte_array_append(script, (const guint8[]){1, 1}, 2);
    append_server_init(script, 800, 600, 0, "");
    srv_write_bytes(fx, script);
    w = carrel_rfb_watch_new_fd(fx->client, TIMEOUT_MS, &error);
    assert_null(error);
    assert_non_null(w);
    srv_expect(fx, (const guint8 *)"RFB 003.007\n\1\1", 14);
    assert_int_equal(carrel_rfb_watch_width(w), 800);
    assert_int_equal(carrel_rfb_watch_height(w), 600);
}

static void
test_poll_nothing(void **state)
{
    Fixture *fx = *state;
    g_autoptr(CarrelRfbWatch) w = connected(fx);

    assert_false(poll_changed(w));
    assert_false(poll_changed(w));
    assert_int_equal(carrel_rfb_watch_held_bytes(w), 0);
}

static void
test_update_bytewise(void **state)
{
    Fixture *fx = *state;
    g_autoptr(CarrelRfbWatch) w = connected(fx);
    g_autoptr(GByteArray) update = g_byte_array_new();
    static const guint8 request[] = {3, 1, 0, 0, 0, 0, 4, 0, 3, 0};

    append_update(update, 2);
    append_raw_rect(update, 10, 20, 3, 2);
    append_raw_rect(update, WIDTH - 4, HEIGHT - 5, 4, 5); /* touches the corner */
    /* Every split point: the change shows only once the last byte is in. */
    for (guint i = 0; i < update->len; i++) {
        srv_write(fx, update->data + i, 1);
        assert_int_equal(poll_changed(w), i == update->len - 1);
    }
    assert_false(poll_changed(w));
    /* The update answered the request: the next one goes out, once. */
    assert_true(carrel_rfb_watch_request(w, NULL));
    srv_expect(fx, request, sizeof request);
    assert_true(carrel_rfb_watch_request(w, NULL));
    srv_expect_nothing(fx);
    /* Two updates in one read count as one change. */
    g_byte_array_set_size(update, 0);
    append_update(update, 1);
    append_raw_rect(update, 0, 0, 1, 1);
    append_update(update, 1);
    append_raw_rect(update, 0, 0, 0, 0); /* an empty rectangle is still a rectangle */
    srv_write_bytes(fx, update);
    assert_true(poll_changed(w));
    assert_false(poll_changed(w));
}

static void
test_empty_update(void **state)
{
    Fixture *fx = *state;
    g_autoptr(CarrelRfbWatch) w = connected(fx);
    g_autoptr(GByteArray) update = g_byte_array_new();
    static const guint8 request[] = {3, 1, 0, 0, 0, 0, 4, 0, 3, 0};

    /* No rectangle: no change, but the request is answered. */
    append_update(update, 0);
    srv_write_bytes(fx, update);
    assert_false(poll_changed(w));
    assert_true(carrel_rfb_watch_request(w, NULL));
    srv_expect(fx, request, sizeof request);
}

static void
test_desktop_size(void **state)
{
    Fixture *fx = *state;
    g_autoptr(CarrelRfbWatch) w = connected(fx);
    g_autoptr(GByteArray) update = g_byte_array_new();
    static const guint8 request[] = {3, 1, 0, 0, 0, 0, 5, 0, 3, 0x20}; /* 1280x800 */

    append_update(update, 2);
    append_rect(update, 0, 0, 1280, 800, -223);
    /* Already in the new size: outside the old 1024x768. */
    append_raw_rect(update, 1270, 790, 10, 10);
    srv_write_bytes(fx, update);
    assert_true(poll_changed(w));
    assert_int_equal(carrel_rfb_watch_width(w), 1280);
    assert_int_equal(carrel_rfb_watch_height(w), 800);
    assert_true(carrel_rfb_watch_request(w, NULL));
    srv_expect(fx, request, sizeof request);
}

static void
test_other_messages(void **state)
{
    Fixture *fx = *state;
    g_autoptr(CarrelRfbWatch) w = connected(fx);
    g_autoptr(GByteArray) msgs = g_byte_array_new();
    g_autofree guint8 *chunk = g_malloc(64 * 1024);
    const guint32 cut_len = 1024 * 1024;

    /* Bell, a colour map of 3 entries, the head of 1 MiB of cut text split inside its length. */
    g_byte_array_append(msgs, (const guint8[]){2, 1, 0}, 3);
    append16(msgs, 0);
    append16(msgs, 3);
    for (guint i = 0; i < 18; i++)
        g_byte_array_append(msgs, (const guint8[]){0xee}, 1);
    g_byte_array_append(msgs, (const guint8[]){3, 0, 0, 0}, 4);
    append32(msgs, cut_len);
    srv_write(fx, msgs->data, msgs->len - 2);
    assert_false(poll_changed(w));
    assert_int_equal(carrel_rfb_watch_held_bytes(w), 5); /* the cut text's head so far */
    srv_write(fx, msgs->data + msgs->len - 2, 2);
    assert_false(poll_changed(w));
    /* The text itself in chunks: skipped, never kept (parsed, an x is an unknown type). */
    memset(chunk, 'x', 64 * 1024);
    for (guint32 sent = 0; sent < cut_len; sent += 64 * 1024) {
        srv_write(fx, chunk, 64 * 1024);
        assert_false(poll_changed(w));
        assert_int_equal(carrel_rfb_watch_held_bytes(w), 0);
    }
    /* Still in step: an update after all that is seen. */
    g_byte_array_set_size(msgs, 0);
    append_update(msgs, 1);
    append_raw_rect(msgs, 1, 1, 2, 2);
    srv_write_bytes(fx, msgs);
    assert_true(poll_changed(w));
}

static void
test_refuses_version(void **state)
{
    Fixture *fx = *state;
    g_autoptr(GByteArray) script = g_byte_array_new();
    g_autoptr(GError) error = NULL;

    append_text(script, "RFB 004.000\n");
    error = handshake_fails(fx, script, TIMEOUT_MS);
    assert_error(error, CARREL_ERROR_UNSUPPORTED, "offers protocol 'RFB 004.000'");
    /* Nothing is answered to a version carrel does not speak. */
    srv_expect_closed(fx);
}

static void
test_refuses_old_and_garbage(void **state)
{
    Fixture *fx = *state;
    g_autoptr(GByteArray) script = g_byte_array_new();
    g_autoptr(GError) error = NULL;
    int fds[2];

    append_text(script, "RFB 003.003\n");
    error = handshake_fails(fx, script, TIMEOUT_MS);
    assert_error(error, CARREL_ERROR_UNSUPPORTED, "'RFB 003.003', carrel needs RFB 3.7");
    g_clear_error(&error);
    /* Not RFB at all, with a control character shown as '?'. */
    close(fx->server);
    assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, fds), 0);
    fx->server = fds[0];
    fx->client = fds[1];
    g_byte_array_set_size(script, 0);
    append_text(script, "HTTP/1.1\x1b 200");
    error = handshake_fails(fx, script, TIMEOUT_MS);
    assert_error(error, CARREL_ERROR_HYPERVISOR,
                 "did not start with an RFB version: 'HTTP/1.1? 20'");
}

static void
test_refuses_no_security_types(void **state)
{
    Fixture *fx = *state;
    g_autoptr(GByteArray) script = g_byte_array_new();
    g_autoptr(GError) error = NULL;

    append_text(script, "RFB 003.008\n");
    g_byte_array_append(script, (const guint8[]){0}, 1);
    append32(script, 16);
    append_text(script, "too many\tclients");
    error = handshake_fails(fx, script, TIMEOUT_MS);
    assert_error(error, CARREL_ERROR_HYPERVISOR,
                 "the VNC server refused the connection: 'too many?clients'");
}

static void
test_refuses_long_reason(void **state)
{
    Fixture *fx = *state;
    g_autoptr(GByteArray) script = g_byte_array_new();
    g_autoptr(GError) error = NULL;

    append_text(script, "RFB 003.008\n");
    g_byte_array_append(script, (const guint8[]){0}, 1);
    append32(script, 0xffffffff);
    for (guint i = 0; i < 4000; i++)
        append_text(script, "x");
    error = handshake_fails(fx, script, TIMEOUT_MS);
    assert_error(error, CARREL_ERROR_HYPERVISOR, "xxx...'");
    assert_true(strlen(error->message) < 400);
}

static void
test_refuses_vnc_auth(void **state)
{
    Fixture *fx = *state;
    g_autoptr(GByteArray) script = g_byte_array_new();
    g_autoptr(GError) error = NULL;

    append_text(script, "RFB 003.008\n");
    g_byte_array_append(script, (const guint8[]){1, 2}, 2);
    error = handshake_fails(fx, script, TIMEOUT_MS);
    assert_error(error, CARREL_ERROR_UNSUPPORTED,
                 "the VNC server asks for authentication carrel does not do");
    /* The version, and no choice of security type. */
    srv_expect(fx, CLIENT_HELLO, 12);
    srv_expect_closed(fx);
}

static void
test_refuses_security_result(void **state)
{
    Fixture *fx = *state;
    g_autoptr(GByteArray) script = g_byte_array_new();
    g_autoptr(GError) error = NULL;

    append_text(script, "RFB 003.008\n");
    g_byte_array_append(script, (const guint8[]){1, 1}, 2);
    append32(script, 1);
    append32(script, 13);
    append_text(script, "access denied");
    error = handshake_fails(fx, script, TIMEOUT_MS);
    assert_error(error, CARREL_ERROR_HYPERVISOR,
                 "refused the connection after the security handshake: 'access denied'");
}

static void
test_refuses_long_name(void **state)
{
    Fixture *fx = *state;
    g_autoptr(GByteArray) script = g_byte_array_new();
    g_autoptr(GError) error = NULL;

    append_text(script, "RFB 003.008\n");
    g_byte_array_append(script, (const guint8[]){1, 1}, 2);
    append32(script, 0);
    append_server_init(script, WIDTH, HEIGHT, 0x80000000, "");
    error = handshake_fails(fx, script, TIMEOUT_MS);
    assert_error(error, CARREL_ERROR_HYPERVISOR, "desktop name is too long (2147483648 bytes");
}

static void
test_handshake_timeout_and_eof(void **state)
{
    Fixture *fx = *state;
    g_autoptr(GByteArray) script = g_byte_array_new();
    g_autoptr(GError) error = NULL;
    gint64 start = g_get_monotonic_time();
    int fds[2];

    /* The version, then silence: the timeout bounds the wait. */
    append_text(script, "RFB 003.008\n");
    error = handshake_fails(fx, script, 200);
    assert_error(error, CARREL_ERROR_TIMEOUT, "did not answer in time");
    assert_true(g_get_monotonic_time() - start >= 190 * 1000);
    assert_true(g_get_monotonic_time() - start < 1500 * 1000);
    g_clear_error(&error);
    /* The version, then the server leaves. */
    close(fx->server);
    assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, fds), 0);
    fx->server = fds[0];
    fx->client = fds[1];
    srv_write_bytes(fx, script);
    shutdown(fx->server, SHUT_WR);
    assert_null(carrel_rfb_watch_new_fd(fx->client, TIMEOUT_MS, &error));
    assert_error(error, CARREL_ERROR_HYPERVISOR, "closed the connection during the handshake");
}

/* Sends bytes after a good handshake and expects the next poll to fail with fragment; later
 * calls fail too. */
static void
poll_fails(Fixture *fx, GByteArray *bytes, const char *fragment)
{
    g_autoptr(CarrelRfbWatch) w = connected(fx);
    g_autoptr(GError) error = NULL;
    gboolean changed = 99;

    srv_write_bytes(fx, bytes);
    assert_false(carrel_rfb_watch_poll(w, &changed, &error));
    assert_int_equal(changed, 99); /* not written on failure */
    assert_error(error, CARREL_ERROR_HYPERVISOR, fragment);
    g_clear_error(&error);
    assert_false(carrel_rfb_watch_poll(w, &changed, &error));
    assert_error(error, CARREL_ERROR_HYPERVISOR, "failed earlier");
    g_clear_error(&error);
    assert_false(carrel_rfb_watch_request(w, &error));
    assert_error(error, CARREL_ERROR_HYPERVISOR, "failed earlier");
}

static void
test_poll_unknown_type(void **state)
{
    g_autoptr(GByteArray) bytes = g_byte_array_new();

    g_byte_array_append(bytes, (const guint8[]){2, 9}, 2); /* a bell first */
    poll_fails(*state, bytes, "the VNC server sent an unknown message type 9");
}

static void
test_poll_unknown_encoding(void **state)
{
    g_autoptr(GByteArray) bytes = g_byte_array_new();

    append_update(bytes, 1);
    append_rect(bytes, 0, 0, 1, 1, 7);
    poll_fails(*state, bytes, "sent a rectangle in encoding 7, which carrel did not ask for");
}

static void
test_poll_rect_outside(void **state)
{
    g_autoptr(GByteArray) bytes = g_byte_array_new();

    append_update(bytes, 2);
    append_raw_rect(bytes, 0, 0, 1, 1);
    append_rect(bytes, 1000, 0, 25, 1, 0);
    poll_fails(*state, bytes, "sent a rectangle 25x1 at 1000,0 outside its 1024x768 screen");
}

static void
test_poll_huge_rect(void **state)
{
    g_autoptr(GByteArray) bytes = g_byte_array_new();

    /* 65535 + 65535 must not wrap into the screen. */
    append_update(bytes, 1);
    append_rect(bytes, 0xffff, 0xffff, 0xffff, 0xffff, 0);
    poll_fails(*state, bytes, "outside its 1024x768 screen");
}

static void
test_poll_eof_after_update(void **state)
{
    Fixture *fx = *state;
    g_autoptr(CarrelRfbWatch) w = connected(fx);
    g_autoptr(GByteArray) bytes = g_byte_array_new();
    g_autoptr(GError) error = NULL;
    gboolean changed = FALSE;

    append_update(bytes, 1);
    append_rect(bytes, 0, 0, 8, 8, 0);
    g_byte_array_append(bytes, (const guint8[]){1, 2, 3}, 3);
    srv_write_bytes(fx, bytes);
    assert_false(poll_changed(w));
    close(fx->server);
    fx->server = -1;
    assert_false(carrel_rfb_watch_poll(w, &changed, &error));
    assert_error(error, CARREL_ERROR_HYPERVISOR, "the VNC server closed the connection");
    g_clear_error(&error);
    /* A request to a closed peer fails, without a SIGPIPE. */
    assert_false(carrel_rfb_watch_request(w, &error));
    assert_non_null(error);
}

static void
test_connect_missing(void **state)
{
    g_autofree char *dir = g_dir_make_tmp("carrel-rfb-XXXXXX", NULL);
    g_autofree char *path = g_build_filename(dir, "missing.sock", NULL);
    g_autoptr(GError) error = NULL;

    (void)state;
    assert_null(carrel_rfb_watch_connect(path, TIMEOUT_MS, &error));
    assert_error(error, CARREL_ERROR_NOT_FOUND, path);
    assert_error(error, CARREL_ERROR_NOT_FOUND, "connecting to the VNC socket");
    rmdir(dir);
}

/* A listening server in a thread: accepts once, plays the hello, returns what the client sent. */
static gpointer
listening_server(gpointer data)
{
    int listener = GPOINTER_TO_INT(data);
    g_autoptr(GByteArray) hello = server_hello(640, 480);
    Fixture fx = {.server = accept(listener, NULL, NULL), .client = -1};
    guint8 *got = g_malloc0(HELLO_LEN);
    gsize done = 0;

    if (fx.server < 0)
        return got;
    srv_write_bytes(&fx, hello);
    while (done < HELLO_LEN) {
        ssize_t n = recv(fx.server, got + done, HELLO_LEN - done, 0);
        if (n <= 0)
            break;
        done += (gsize)n;
    }
    close(fx.server);
    return got;
}

static void
test_connect(void **state)
{
    g_autofree char *dir = g_dir_make_tmp("carrel-rfb-XXXXXX", NULL);
    g_autofree char *path = g_build_filename(dir, "vnc.sock", NULL);
    struct sockaddr_un addr = {.sun_family = AF_UNIX};
    int listener = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    g_autoptr(GError) error = NULL;
    g_autoptr(CarrelRfbWatch) w = NULL;
    g_autofree guint8 *got = NULL;
    guint8 want[HELLO_LEN];
    GThread *thread;
    gboolean changed = FALSE;

    (void)state;
    g_strlcpy(addr.sun_path, path, sizeof addr.sun_path);
    assert_int_equal(bind(listener, (struct sockaddr *)&addr, sizeof addr), 0);
    assert_int_equal(listen(listener, 1), 0);
    thread = g_thread_new("rfb-server", listening_server, GINT_TO_POINTER(listener));
    w = carrel_rfb_watch_connect(path, TIMEOUT_MS, &error);
    assert_null(error);
    assert_non_null(w);
    assert_int_equal(carrel_rfb_watch_width(w), 640);
    assert_int_equal(carrel_rfb_watch_height(w), 480);
    got = g_thread_join(thread);
    memcpy(want, CLIENT_HELLO, sizeof want);
    want[sizeof want - 4] = 640 >> 8;
    want[sizeof want - 3] = 640 & 0xff;
    want[sizeof want - 2] = 480 >> 8;
    want[sizeof want - 1] = 480 & 0xff;
    assert_memory_equal(got, want, sizeof want);
    /* The server is gone. */
    assert_false(carrel_rfb_watch_poll(w, &changed, &error));
    assert_error(error, CARREL_ERROR_HYPERVISOR, "closed the connection");
    close(listener);
    unlink(path);
    rmdir(dir);
}

int
main(void)
{
#define T(name) cmocka_unit_test_setup_teardown(name, setup, teardown)
    const struct CMUnitTest tests[] = {
        T(test_handshake),
        T(test_handshake_37),
        T(test_poll_nothing),
        T(test_update_bytewise),
        T(test_empty_update),
        T(test_desktop_size),
        T(test_other_messages),
        T(test_refuses_version),
        T(test_refuses_old_and_garbage),
        T(test_refuses_no_security_types),
        T(test_refuses_long_reason),
        T(test_refuses_vnc_auth),
        T(test_refuses_security_result),
        T(test_refuses_long_name),
        T(test_handshake_timeout_and_eof),
        T(test_poll_unknown_type),
        T(test_poll_unknown_encoding),
        T(test_poll_rect_outside),
        T(test_poll_huge_rect),
        T(test_poll_eof_after_update),
        cmocka_unit_test(test_connect_missing),
        cmocka_unit_test(test_connect),
    };
#undef T

    return cmocka_run_group_tests(tests, NULL, NULL);
}
