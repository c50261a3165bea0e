/*
 * Integration: uploads against the real carreld (test:///default, a temporary state dir, a short
 * --upload-ttl). A body over the limit is refused before it is read and leaves no file; a large
 * upload is written to disk as it arrives, so the daemon's peak memory does not grow by its
 * size; an upload no create used is swept (and audited), after which a create naming it gets
 * NOT_FOUND.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <gio/gunixsocketaddress.h>
#include <glib/gstdio.h>
#include <signal.h>
#include <string.h>

#include "client/client.h"
#include "conf/conf.h"

#define UPLOAD_TTL_S "3"
#define BIG_UPLOAD_BYTES (200 * 1024 * 1024)
/* Held in memory (as libsoup's accumulated body, then a copy), the peak grows by twice that. */
#define PEAK_SLACK_BYTES (48 * 1024 * 1024)

typedef struct {
    char *dir;
    char *state;
    char *socket;
    char *log;
    char *disk;
    GSubprocess *daemon;
    CarrelClient *client;
    CarrelClient *anonymous;
} Fixture;

static Fixture fx;

static gboolean
wait_for_socket(void)
{
    for (int i = 0; i < 300; i++) {
        if (g_file_test(fx.socket, G_FILE_TEST_EXISTS))
            return TRUE;
        if (!g_subprocess_get_identifier(fx.daemon))
            return FALSE;
        g_usleep(50 * 1000);
    }
    return FALSE;
}

static int
setup(void **state)
{
    g_autoptr(GSubprocessLauncher) launcher = g_subprocess_launcher_new(G_SUBPROCESS_FLAGS_NONE);
    g_autoptr(GError) error = NULL;
    g_autofree char *token_path = NULL;
    g_autofree char *token = NULL;
    g_autofree char *asan = NULL;
    const char *create[] = {"qemu-img", "create", "-q", "-f", "qcow2", NULL, "64M", NULL};

    fx.dir = g_dir_make_tmp("carrel-files-XXXXXX", NULL);
    fx.state = g_build_filename(fx.dir, "state", NULL);
    fx.socket = g_build_filename(fx.dir, "carreld.sock", NULL);
    fx.log = g_build_filename(fx.dir, "carreld.log", NULL);
    fx.disk = g_build_filename(fx.dir, "disk.qcow2", NULL);
    create[5] = fx.disk;
    if (!carrel_util_run(create, 60, NULL, NULL, &error))
        fail_msg("%s", error->message);
    g_subprocess_launcher_set_stderr_file_path(launcher, fx.log);
    /* A sanitizer build's quarantine of freed blocks (256 MiB) would read as a held body. */
    asan = g_strconcat(g_getenv("ASAN_OPTIONS") ? g_getenv("ASAN_OPTIONS") : "",
                       g_getenv("ASAN_OPTIONS") ? ":" : "", "quarantine_size_mb=1", NULL);
    g_subprocess_launcher_setenv(launcher, "ASAN_OPTIONS", asan, TRUE);
    fx.daemon = g_subprocess_launcher_spawn(
        launcher, &error, g_getenv("CARREL_DAEMON"), "--state-dir", fx.state, "--socket", fx.socket,
        "--libvirt-uri", "test:///default", "--accel", "auto", "--upload-ttl", UPLOAD_TTL_S, NULL);
    assert_non_null(fx.daemon);
    assert_true(wait_for_socket());
    token_path = g_build_filename(fx.state, "admin.token", NULL);
    assert_true(g_file_get_contents(token_path, &token, NULL, NULL));
    fx.client = carrel_client_new(fx.socket, NULL, g_strstrip(token), 120, &error);
    fx.anonymous = carrel_client_new(fx.socket, NULL, NULL, 60, &error);
    assert_non_null(fx.client);
    return 0;
}

static int
teardown(void **state)
{
    if (fx.daemon && g_subprocess_get_identifier(fx.daemon))
        g_subprocess_force_exit(fx.daemon);
    g_clear_object(&fx.daemon);
    g_clear_pointer(&fx.client, carrel_client_free);
    g_clear_pointer(&fx.anonymous, carrel_client_free);
    if (!g_getenv("CARREL_TEST_KEEP"))
        carrel_util_remove_tree(fx.dir, NULL);
    return 0;
}

/* A request with a body of bytes; the status, and the parsed reply in *ret_body (may be NULL). */
static guint
call(CarrelClient *client, const char *method, const char *path, GBytes *in, JsonNode **ret_body)
{
    g_autoptr(GBytes) out = NULL;
    g_autoptr(GError) error = NULL;
    guint status = 0;
    gsize len = 0;
    const char *data;

    if (!carrel_client_request_raw(client, method, path, in ? "application/x-tar" : NULL, in,
                                   &status, &out, NULL, &error))
        fail_msg("%s %s: %s", method, path, error->message);
    data = out ? g_bytes_get_data(out, &len) : NULL;
    if (ret_body)
        *ret_body = len ? carrel_conf_parse_json(data, len, NULL) : NULL;
    return status;
}

static guint
call_json(const char *method, const char *path, const char *json, JsonNode **ret_body)
{
    g_autoptr(GBytes) in = json ? g_bytes_new(json, strlen(json)) : NULL;
    g_autoptr(GBytes) out = NULL;
    g_autoptr(GError) error = NULL;
    guint status = 0;
    gsize len = 0;
    const char *data;

    if (!carrel_client_request_raw(fx.client, method, path, json ? "application/json" : NULL, in,
                                   &status, &out, NULL, &error))
        fail_msg("%s %s: %s", method, path, error->message);
    data = out ? g_bytes_get_data(out, &len) : NULL;
    if (ret_body)
        *ret_body = len ? carrel_conf_parse_json(data, len, NULL) : NULL;
    return status;
}

/* Names of the files in the state dir's uploads/ (stored uploads and spool files alike). */
static guint
uploads_count(void)
{
    g_autofree char *dir = g_build_filename(fx.state, "uploads", NULL);
    g_autoptr(GDir) d = g_dir_open(dir, 0, NULL);
    guint n = 0;

    while (d && g_dir_read_name(d))
        n++;
    return n;
}

/* VmHWM of the daemon, in bytes. */
static guint64
daemon_peak_rss(void)
{
    g_autofree char *path =
        g_strdup_printf("/proc/%s/status", g_subprocess_get_identifier(fx.daemon));
    g_autofree char *status = NULL;
    const char *at;

    assert_true(g_file_get_contents(path, &status, NULL, NULL));
    at = strstr(status, "VmHWM:");
    assert_non_null(at);
    return g_ascii_strtoull(at + strlen("VmHWM:"), NULL, 10) * 1024;
}

/* Sends raw text on the daemon's socket and returns what came back until `until` shows up (or
 * the connection ends, or 4 KiB came): the daemon may keep the connection open. */
static char *
raw_exchange(const char *request, const char *until)
{
    g_autoptr(GSocketClient) sc = g_socket_client_new();
    g_autoptr(GSocketAddress) addr = g_unix_socket_address_new(fx.socket);
    g_autoptr(GSocketConnection) conn = NULL;
    g_autoptr(GError) error = NULL;
    char buf[4096];
    gsize got = 0;

    conn = g_socket_client_connect(sc, G_SOCKET_CONNECTABLE(addr), NULL, &error);
    assert_non_null(conn);
    assert_true(g_output_stream_write_all(g_io_stream_get_output_stream(G_IO_STREAM(conn)), request,
                                          strlen(request), NULL, NULL, &error));
    g_socket_set_timeout(g_socket_connection_get_socket(conn), 60);
    while (got < sizeof(buf) - 1) {
        gssize n = g_input_stream_read(g_io_stream_get_input_stream(G_IO_STREAM(conn)), buf + got,
                                       sizeof(buf) - 1 - got, NULL, NULL);
        if (n <= 0)
            break;
        got += (gsize)n;
        buf[got] = '\0';
        if (strstr(buf, until))
            break;
    }
    buf[got] = '\0';
    return g_strdup(buf);
}

/* (a) Over the limit: 413 from the headers alone, and nothing in uploads/; refused callers
 * leave nothing either. */
static void
test_upload_over_limit(void **state)
{
    g_autofree char *token_path = g_build_filename(fx.state, "admin.token", NULL);
    g_autofree char *token = NULL;
    g_autofree char *request = NULL;
    g_autofree char *reply = NULL;
    g_autoptr(GBytes) small = g_bytes_new_static("not a tar", 9);
    guint before = uploads_count();

    assert_true(g_file_get_contents(token_path, &token, NULL, NULL));
    request = g_strdup_printf("POST /v1/uploads HTTP/1.1\r\nHost: localhost\r\n"
                              "Authorization: Bearer %s\r\nContent-Type: application/x-tar\r\n"
                              "Expect: 100-continue\r\n"
                              "Content-Length: %" G_GUINT64_FORMAT "\r\n\r\n",
                              g_strstrip(token), (guint64)CARREL_LIMIT_UPLOAD_BYTES + 1);
    reply = raw_exchange(request, "larger than");
    assert_true(g_str_has_prefix(reply, "HTTP/1.1 413"));
    assert_non_null(strstr(reply, "larger than"));
    assert_int_equal(uploads_count(), before);
    /* Without credentials the body was spooled, then removed with the request. */
    assert_int_equal(call(fx.anonymous, "POST", "/v1/uploads", small, NULL), 401);
    assert_int_equal(uploads_count(), before);
}

/* (b) 200 MiB in: stored whole (same size and sha256), the daemon's peak grows far less. */
static void
test_upload_streams_to_disk(void **state)
{
    g_autofree guint8 *data = g_malloc(BIG_UPLOAD_BYTES);
    g_autoptr(GBytes) body = NULL;
    g_autoptr(JsonNode) reply = NULL;
    g_autofree char *stored = NULL;
    g_autofree char *name = NULL;
    g_autofree char *sent_sha = NULL;
    g_autoptr(GMappedFile) map = NULL;
    g_autoptr(GBytes) kept = NULL;
    g_autofree char *kept_sha = NULL;
    guint64 before, after;

    for (gsize i = 0; i < BIG_UPLOAD_BYTES; i++)
        data[i] = (guint8)((i >> 12) ^ (i * 13));
    body = g_bytes_new_take(g_steal_pointer(&data), BIG_UPLOAD_BYTES);
    sent_sha = g_compute_checksum_for_bytes(G_CHECKSUM_SHA256, body);
    before = daemon_peak_rss();
    assert_int_equal(call(fx.client, "POST", "/v1/uploads", body, &reply), 201);
    after = daemon_peak_rss();
    assert_int_equal(json_object_get_int_member(json_node_get_object(reply), "bytes"),
                     BIG_UPLOAD_BYTES);
    name =
        g_strconcat(json_object_get_string_member(json_node_get_object(reply), "id"), ".tar", NULL);
    stored = g_build_filename(fx.state, "uploads", name, NULL);
    map = g_mapped_file_new(stored, FALSE, NULL);
    assert_non_null(map);
    kept = g_mapped_file_get_bytes(map);
    kept_sha = g_compute_checksum_for_bytes(G_CHECKSUM_SHA256, kept);
    assert_string_equal(kept_sha, sent_sha);
    if (after - before >= PEAK_SLACK_BYTES)
        fail_msg("carreld's peak memory grew by %" G_GUINT64_FORMAT " MiB for a %d MiB upload",
                 (after - before) >> 20, BIG_UPLOAD_BYTES >> 20);
}

/* (c) Unused past the TTL: swept with an audit row; a create naming it gets NOT_FOUND. */
static void
test_upload_expires(void **state)
{
    g_autoptr(GBytes) small = g_bytes_new_static("not a tar", 9);
    g_autoptr(JsonNode) reply = NULL;
    g_autofree char *id = NULL;
    g_autofree char *path = NULL;
    g_autofree char *name = NULL;
    g_autofree char *tmpl = g_strdup_printf("{\"name\":\"tiny\",\"disk\":\"%s\","
                                            "\"format\":\"qcow2\"}",
                                            fx.disk);
    g_autofree char *create = NULL;
    g_autofree char *text = NULL;
    gboolean audited = FALSE;
    JsonArray *entries;

    assert_int_equal(call_json("POST", "/v1/templates", tmpl, NULL), 201);
    assert_int_equal(call(fx.client, "POST", "/v1/uploads", small, &reply), 201);
    id = g_strdup(json_object_get_string_member(json_node_get_object(reply), "id"));
    g_clear_pointer(&reply, json_node_unref);
    name = g_strconcat(id, ".tar", NULL);
    path = g_build_filename(fx.state, "uploads", name, NULL);
    /* The watcher sweeps every 2 s; the bound only keeps a broken sweep from hanging. */
    for (int i = 0; i < 600 && g_file_test(path, G_FILE_TEST_EXISTS); i++)
        g_usleep(100 * 1000);
    assert_false(g_file_test(path, G_FILE_TEST_EXISTS));

    create = g_strdup_printf("{\"template\":\"tiny\",\"name\":\"late\",\"cold\":true,"
                             "\"inputs\":[{\"path\":\"/x\",\"upload\":\"%s\"}]}",
                             id);
    assert_int_equal(call_json("POST", "/v1/sessions", create, &reply), 404);
    text = json_to_string(reply, FALSE);
    assert_non_null(strstr(text, "not_found"));
    assert_non_null(strstr(text, id));
    g_clear_pointer(&reply, json_node_unref);

    assert_int_equal(call_json("GET", "/v1/audit?limit=1000", NULL, &reply), 200);
    entries = json_object_get_array_member(json_node_get_object(reply), "entries");
    for (guint i = 0; entries && i < json_array_get_length(entries); i++) {
        JsonObject *e = json_array_get_object_element(entries, i);
        if (g_strcmp0(json_object_get_string_member_with_default(e, "operation", ""),
                      "upload.expire") == 0)
            audited = TRUE;
    }
    assert_true(audited);
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_upload_over_limit),
        cmocka_unit_test(test_upload_streams_to_disk),
        cmocka_unit_test(test_upload_expires),
    };

    return cmocka_run_group_tests(tests, setup, teardown);
}
