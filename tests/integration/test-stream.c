/*
 * Integration: the event stream's bounds on a real carreld (libvirt's test driver, TCP on
 * loopback, --max-streams 2): a token holds at most that many streams (429 with Retry-After
 * beyond, a slot freed when a client goes away), and a stream that carries many megabytes of
 * timeline does not grow carreld's memory with them (VmHWM from /proc, a bound, not a time).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <gio/gio.h>
#include <signal.h>
#include <string.h>
#include <unistd.h>

#include "util/util.h"
#include "daemon-url.h"

#define MAX_STREAMS 2
/* Timeline carried by the long stream, and how much of it carreld's peak memory may grow by:
 * a stream that kept its chunks would grow by all of it (and more: the JSON of each tick). */
#define GROWTH_MAX_KIB (48 * 1024)
#define ARG_BYTES (32 * 1024)
/* AddressSanitizer keeps freed memory in quarantine: peak memory says nothing there. */
#if defined(__SANITIZE_ADDRESS__)
#define CHECK_MEMORY FALSE
#define FLOW_BYTES (16 * 1024 * 1024)
#else
#define CHECK_MEMORY TRUE
#define FLOW_BYTES (96 * 1024 * 1024)
#endif

typedef struct {
    char *dir;
    char *token;
    guint port;
    GSubprocess *daemon;
} Fixture;

static Fixture fx;

static GSocketConnection *
connect_daemon(void)
{
    g_autoptr(GSocketClient) client = g_socket_client_new();
    g_autoptr(GError) error = NULL;
    GSocketConnection *conn;

    g_socket_client_set_timeout(client, 30);
    conn = g_socket_client_connect_to_host(client, "127.0.0.1", (guint16)fx.port, NULL, &error);
    if (!conn)
        fail_msg("connecting: %s", error->message);
    return conn;
}

static void
send_request(GSocketConnection *conn, const char *method, const char *path, const char *body,
             gboolean close)
{
    g_autoptr(GError) error = NULL;
    g_autofree char *request =
        g_strdup_printf("%s %s HTTP/1.1\r\nHost: 127.0.0.1:%u\r\nAuthorization: Bearer %s\r\n"
                        "Content-Type: application/json\r\nContent-Length: %zu\r\n%s\r\n",
                        method, path, fx.port, fx.token, body ? strlen(body) : 0,
                        close ? "Connection: close\r\n" : "");

    if (!g_output_stream_write_all(g_io_stream_get_output_stream(G_IO_STREAM(conn)), request,
                                   strlen(request), NULL, NULL, &error) ||
        (body && !g_output_stream_write_all(g_io_stream_get_output_stream(G_IO_STREAM(conn)), body,
                                            strlen(body), NULL, NULL, &error)))
        fail_msg("writing: %s", error->message);
}

/* One request on its own connection; the status, the whole reply in *ret_reply. */
static guint
http(const char *method, const char *path, const char *body, char **ret_reply)
{
    g_autoptr(GSocketConnection) conn = connect_daemon();
    g_autoptr(GString) reply = g_string_new(NULL);
    char buf[16384];
    gssize n;

    send_request(conn, method, path, body, TRUE);
    while ((n = g_input_stream_read(g_io_stream_get_input_stream(G_IO_STREAM(conn)), buf,
                                    sizeof buf, NULL, NULL)) > 0)
        g_string_append_len(reply, buf, n);
    if (ret_reply)
        *ret_reply = g_strdup(reply->str);
    return g_str_has_prefix(reply->str, "HTTP/1.1 ")
               ? (guint)g_ascii_strtoull(reply->str + 9, NULL, 10)
               : 0;
}

/* Opens GET path and reads until its status line and headers are in; the open connection. */
static GSocketConnection *
open_stream(const char *path, guint *ret_status, char **ret_head)
{
    GSocketConnection *conn = connect_daemon();
    g_autoptr(GString) head = g_string_new(NULL);
    char c;

    send_request(conn, "GET", path, NULL, FALSE);
    while (!strstr(head->str, "\r\n\r\n")) {
        if (g_input_stream_read(g_io_stream_get_input_stream(G_IO_STREAM(conn)), &c, 1, NULL,
                                NULL) != 1)
            break;
        g_string_append_c(head, c);
    }
    *ret_status = g_str_has_prefix(head->str, "HTTP/1.1 ")
                      ? (guint)g_ascii_strtoull(head->str + 9, NULL, 10)
                      : 0;
    if (ret_head)
        *ret_head = g_strdup(head->str);
    return conn;
}

/* The same, waiting (up to 10 s) while the token's streams are all taken: a client that just
 * left frees its slot once carreld sees it gone (within a tick). */
static GSocketConnection *
open_stream_waiting(const char *path)
{
    guint status = 0;

    for (int i = 0; i < 100; i++) {
        g_autoptr(GSocketConnection) conn = open_stream(path, &status, NULL);

        if (status == 200)
            return g_steal_pointer(&conn);
        assert_int_equal(status, 429);
        g_usleep(100 * 1000);
    }
    fail_msg("no stream slot came free for %s", path);
    return NULL;
}

/* The daemon's peak resident memory (VmHWM) in KiB. */
static guint64
daemon_hwm_kib(void)
{
    g_autofree char *path =
        g_strdup_printf("/proc/%s/status", g_subprocess_get_identifier(fx.daemon));
    g_autofree char *text = NULL;
    const char *at;

    assert_true(g_file_get_contents(path, &text, NULL, NULL));
    at = strstr(text, "VmHWM:");
    assert_non_null(at);
    return g_ascii_strtoull(at + 6, NULL, 10);
}

static gboolean
daemon_up(void)
{
    g_autoptr(GSocketClient) client = g_socket_client_new();
    g_autoptr(GSocketConnection) conn =
        g_socket_client_connect_to_host(client, "127.0.0.1", (guint16)fx.port, NULL, NULL);

    return conn != NULL;
}

static int
setup(void **state)
{
    g_autofree char *state_dir = NULL;
    g_autofree char *token_path = NULL;
    g_autofree char *url = NULL;
    g_autofree char *max = g_strdup_printf("%d", MAX_STREAMS);

    fx.dir = g_dir_make_tmp("carrel-stream-XXXXXX", NULL);
    state_dir = g_build_filename(fx.dir, "state", NULL);
    token_path = g_build_filename(state_dir, "admin.token", NULL);
    fx.daemon = g_subprocess_new(G_SUBPROCESS_FLAGS_STDERR_SILENCE, NULL, g_getenv("CARREL_DAEMON"),
                                 "--state-dir", state_dir, "--socket", "", "--libvirt-uri",
                                 "test:///default", "--accel", "tcg", "--listen", "127.0.0.1:0",
                                 "--max-streams", max, NULL);
    assert_non_null(fx.daemon);
    url = test_daemon_url(state_dir, 60, NULL);
    assert_non_null(url);
    fx.port = test_url_port(url);
    for (int i = 0; i < 200 && !daemon_up(); i++)
        g_usleep(50 * 1000);
    assert_true(g_file_get_contents(token_path, &fx.token, NULL, NULL));
    g_strstrip(fx.token);
    *state = &fx;
    return 0;
}

static int
teardown(void **state)
{
    if (fx.daemon && g_subprocess_get_identifier(fx.daemon)) {
        g_subprocess_send_signal(fx.daemon, SIGTERM);
        g_subprocess_wait(fx.daemon, NULL, NULL);
    }
    g_clear_object(&fx.daemon);
    if (!g_getenv("CARREL_TEST_KEEP"))
        carrel_util_remove_tree(fx.dir, NULL);
    g_free(fx.dir);
    g_free(fx.token);
    return 0;
}

/* Two streams per token; the third is 429 with Retry-After and says why; one closed frees its
 * slot (carreld notices the client went away). */
static void
test_stream_cap(void **state)
{
    GSocketConnection *open[MAX_STREAMS] = {0};
    g_autofree char *body = NULL;
    guint status = 0;

    for (int i = 0; i < MAX_STREAMS; i++) {
        open[i] = open_stream("/v1/stream", &status, NULL);
        assert_int_equal(status, 200);
    }
    assert_int_equal(http("GET", "/v1/stream", NULL, &body), 429);
    assert_non_null(strstr(body, "Retry-After: "));
    assert_non_null(strstr(body, "too many open event streams"));
    assert_non_null(strstr(body, "\"code\":\"limit_exceeded\""));
    /* Everything else still answers. */
    assert_int_equal(http("GET", "/v1/sessions", NULL, NULL), 200);
    g_io_stream_close(G_IO_STREAM(open[0]), NULL, NULL);
    g_clear_object(&open[0]);
    /* carreld sees the client gone at its next tick (once a second): wait for that. */
    for (int i = 0; i < 50; i++) {
        g_autoptr(GSocketConnection) again = open_stream("/v1/stream", &status, NULL);
        if (status == 200) {
            open[0] = g_steal_pointer(&again);
            break;
        }
        assert_int_equal(status, 429);
        g_usleep(100 * 1000);
    }
    assert_non_null(open[0]);
    for (int i = 0; i < MAX_STREAMS; i++)
        g_clear_object(&open[i]);
}

typedef struct {
    GSocketConnection *conn;
    gssize received;
    gint stop;
} Reader;

static gpointer
reader_thread(gpointer data)
{
    Reader *r = data;
    GInputStream *in = g_io_stream_get_input_stream(G_IO_STREAM(r->conn));
    g_autofree char *buf = g_malloc(65536);
    gssize n;

    while (!g_atomic_int_get(&r->stop) && (n = g_input_stream_read(in, buf, 65536, NULL, NULL)) > 0)
        g_atomic_pointer_add(&r->received, n);
    return NULL;
}

/* A stream over a session's timeline while about FLOW_BYTES of events flow (failed commands
 * with long arguments, recorded as they are): the client reads it all, and carreld's peak
 * resident memory grows by far less than what went through. */
static void
test_long_stream_memory(void **state)
{
    g_autofree char *disk = g_build_filename(fx.dir, "disk.qcow2", NULL);
    const char *create[] = {"qemu-img", "create", "-q", "-f", "qcow2", disk, "64M", NULL};
    g_autofree char *tmpl =
        g_strdup_printf("{\"name\":\"t\",\"disk\":\"%s\",\"format\":\"qcow2\"}", disk);
    g_autofree char *arg = g_strnfill(ARG_BYTES, 'x');
    g_autofree char *exec = g_strdup_printf("{\"argv\":[\"/bin/true\",\"%s\"]}", arg);
    Reader reader = {0};
    GThread *thread;
    guint64 before, after;
    int sent = 0;

    assert_true(carrel_util_run(create, 60, NULL, NULL, NULL));
    assert_int_equal(http("POST", "/v1/templates", tmpl, NULL), 201);
    assert_int_equal(http("POST", "/v1/sessions", "{\"template\":\"t\",\"name\":\"m1\"}", NULL),
                     201);
    reader.conn = open_stream_waiting("/v1/stream?session=m1");
    thread = g_thread_new("reader", reader_thread, &reader);
    /* Warm up (the store's cache, the first chunks), then measure from there. */
    for (int i = 0; i < 16; i++)
        assert_true(http("POST", "/v1/sessions/m1/exec", exec, NULL) >= 400);
    g_usleep(2500 * 1000);
    before = daemon_hwm_kib();
    for (gint64 flowed = 0; flowed < FLOW_BYTES; flowed += ARG_BYTES, sent++)
        assert_true(http("POST", "/v1/sessions/m1/exec", exec, NULL) >= 400);
    /* The stream carries it all (the timeline repeats each argument, so >= what was sent). */
    for (int i = 0; i < 600 && (gssize)g_atomic_pointer_get(&reader.received) < FLOW_BYTES; i++)
        g_usleep(100 * 1000);
    after = daemon_hwm_kib();
    /* The reader stops before anything is asserted: it uses this frame. */
    g_atomic_int_set(&reader.stop, 1);
    g_io_stream_close(G_IO_STREAM(reader.conn), NULL, NULL);
    g_thread_join(thread);
    g_object_unref(reader.conn);
    print_message("# %d events, %" G_GINT64_FORMAT " bytes streamed, VmHWM %" G_GUINT64_FORMAT
                  " -> %" G_GUINT64_FORMAT " KiB%s\n",
                  sent, (gint64)reader.received, before, after,
                  CHECK_MEMORY ? "" : " (not checked under AddressSanitizer)");
    assert_true(reader.received >= FLOW_BYTES);
    if (CHECK_MEMORY)
        assert_true(after - before < GROWTH_MAX_KIB);
}

/* A client that opens a stream and reads nothing: carreld cuts it off once it leaves 8 MiB
 * unread (the slot is free again), and its memory does not grow with what the stream missed. */
static void
test_stream_not_read(void **state)
{
    g_autofree char *arg = g_strnfill(ARG_BYTES, 'y');
    g_autofree char *exec = g_strdup_printf("{\"argv\":[\"/bin/true\",\"%s\"]}", arg);
    GSocketConnection *streams[MAX_STREAMS] = {0};
    g_autoptr(GSocketConnection) again = NULL;
    guint64 before, after;
    guint status = 0;
    gboolean freed = FALSE;

    /* test_long_stream_memory made session m1. A small receive buffer, so little hides in
     * the kernel; then neither stream is read. */
    for (int i = 0; i < MAX_STREAMS; i++)
        streams[i] = open_stream_waiting("/v1/stream?session=m1");
    before = daemon_hwm_kib();
    for (gint64 flowed = 0; flowed < FLOW_BYTES / 2 && !freed; flowed += ARG_BYTES) {
        assert_true(http("POST", "/v1/sessions/m1/exec", exec, NULL) >= 400);
        /* Now and then: has a slot come free? */
        if (flowed % (4 * 1024 * 1024) == 0) {
            g_clear_object(&again);
            again = open_stream("/v1/stream", &status, NULL);
            freed = status == 200;
        }
    }
    for (int i = 0; i < 100 && !freed; i++) {
        g_usleep(100 * 1000);
        g_clear_object(&again);
        again = open_stream("/v1/stream", &status, NULL);
        freed = status == 200;
    }
    after = daemon_hwm_kib();
    print_message("# unread streams: VmHWM %" G_GUINT64_FORMAT " -> %" G_GUINT64_FORMAT " KiB\n",
                  before, after);
    assert_true(freed);
    if (CHECK_MEMORY)
        assert_true(after - before < GROWTH_MAX_KIB);
    for (int i = 0; i < MAX_STREAMS; i++)
        g_clear_object(&streams[i]);
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_stream_cap),
        cmocka_unit_test(test_long_stream_memory),
        cmocka_unit_test(test_stream_not_read),
    };

    return cmocka_run_group_tests(tests, setup, teardown);
}
