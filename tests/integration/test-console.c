/*
 * Integration: the console's refusals, on the real carreld (libvirt's test driver, TCP on
 * loopback). Raw HTTP on a socket, so every header (Origin, Cookie, Upgrade) is ours to choose.
 * What needs a running guest (a SPICE reply through the proxy) is in tests/e2e/console.sh.
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

typedef struct {
    char *dir;
    char *token;
    guint port;
    GSubprocess *daemon;
    char *cookie; /* "carrel_session=..." */
} Fixture;

static Fixture fx;

/* One request on a new connection; returns the status, the whole reply in *ret_reply. */
static guint
http(const char *method, const char *path, const char *headers, const char *body, char **ret_reply)
{
    g_autoptr(GSocketClient) client = g_socket_client_new();
    g_autoptr(GSocketConnection) conn = NULL;
    g_autoptr(GError) error = NULL;
    g_autoptr(GString) reply = g_string_new(NULL);
    g_autofree char *request = NULL;
    char buf[4096];
    gssize n;
    guint status = 0;

    g_socket_client_set_timeout(client, 10);
    conn = g_socket_client_connect_to_host(client, "127.0.0.1", (guint16)fx.port, NULL, &error);
    if (!conn)
        fail_msg("connecting: %s", error->message);
    request = g_strdup_printf("%s %s HTTP/1.1\r\nHost: 127.0.0.1:%u\r\n%sContent-Length: %zu\r\n"
                              "Connection: close\r\n\r\n%s",
                              method, path, fx.port, headers ? headers : "",
                              body ? strlen(body) : 0, body ? body : "");
    if (!g_output_stream_write_all(g_io_stream_get_output_stream(G_IO_STREAM(conn)), request,
                                   strlen(request), NULL, NULL, &error))
        fail_msg("writing: %s", error->message);
    /* A refusal is a complete reply and the server closes; an upgrade would stay open. */
    while ((n = g_input_stream_read(g_io_stream_get_input_stream(G_IO_STREAM(conn)), buf,
                                    sizeof(buf), NULL, NULL)) > 0)
        g_string_append_len(reply, buf, n);
    if (g_str_has_prefix(reply->str, "HTTP/1.1 "))
        status = (guint)g_ascii_strtoull(reply->str + 9, NULL, 10);
    if (ret_reply)
        *ret_reply = g_strdup(reply->str);
    return status;
}

static guint
http_status(const char *method, const char *path, const char *headers, const char *body)
{
    return http(method, path, headers, body, NULL);
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
    g_autofree char *sock = NULL;
    g_autofree char *url = NULL;
    g_autofree char *token_path = NULL;
    g_autofree char *reply = NULL;
    g_autofree char *login = NULL;
    const char *at;

    fx.dir = g_dir_make_tmp("carrel-console-XXXXXX", NULL);
    state_dir = g_build_filename(fx.dir, "state", NULL);
    sock = g_build_filename(fx.dir, "carreld.sock", NULL);
    token_path = g_build_filename(state_dir, "admin.token", NULL);
    fx.daemon =
        g_subprocess_new(G_SUBPROCESS_FLAGS_STDERR_SILENCE, NULL, g_getenv("CARREL_DAEMON"),
                         "--state-dir", state_dir, "--socket", sock, "--libvirt-uri",
                         "test:///default", "--accel", "tcg", "--listen", "127.0.0.1:0", NULL);
    assert_non_null(fx.daemon);
    url = test_daemon_url(state_dir, 60, NULL);
    assert_non_null(url);
    fx.port = test_url_port(url);
    assert_int_not_equal(fx.port, 0);
    for (int i = 0; i < 200 && !daemon_up(); i++)
        g_usleep(50 * 1000);
    assert_true(g_file_get_contents(token_path, &fx.token, NULL, NULL));
    g_strstrip(fx.token);
    login = g_strdup_printf("{\"token\":\"%s\"}", fx.token);
    assert_int_equal(http("POST", "/v1/login", "Content-Type: application/json\r\n", login, &reply),
                     200);
    at = strstr(reply, "carrel_session=");
    assert_non_null(at);
    fx.cookie = g_strndup(at, strcspn(at, ";\r\n"));
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
    g_free(fx.cookie);
    return 0;
}

#define UPGRADE                                                                                    \
    "Connection: Upgrade\r\nUpgrade: websocket\r\nSec-WebSocket-Version: 13\r\n"                   \
    "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Protocol: binary\r\n"

/* The websocket handshake with an Origin (NULL: none) and the cookie or not. */
static guint
upgrade(const char *path, const char *origin, gboolean cookie, char **ret_reply)
{
    g_autofree char *headers =
        g_strdup_printf(UPGRADE "%s%s%s%s%s%s", origin ? "Origin: " : "", origin ? origin : "",
                        origin ? "\r\n" : "", cookie ? "Cookie: " : "", cookie ? fx.cookie : "",
                        cookie ? "\r\n" : "");

    return http("GET", path, headers, NULL, ret_reply);
}

static void
test_refused_before_upgrade(void **state)
{
    g_autofree char *self = g_strdup_printf("http://127.0.0.1:%u", fx.port);
    g_autofree char *reply = NULL;
    const char *ticket =
        "/v1/console/0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef";

    /* No Origin, a foreign one, or one on another port: 403, cookie or not. */
    assert_int_equal(upgrade(ticket, NULL, TRUE, NULL), 403);
    assert_int_equal(upgrade(ticket, "http://evil.example", TRUE, NULL), 403);
    assert_int_equal(upgrade(ticket, "http://127.0.0.1:1", TRUE, NULL), 403);
    assert_int_equal(upgrade(ticket, "null", TRUE, NULL), 403);
    /* Same origin without the cookie: 401. */
    assert_int_equal(upgrade(ticket, self, FALSE, NULL), 401);
    /* Cookie and origin, but an unknown ticket: 404 and the error envelope, no upgrade. */
    assert_int_equal(upgrade(ticket, self, TRUE, &reply), 404);
    assert_non_null(strstr(reply, "\"code\":\"not_found\""));
    assert_null(strstr(reply, "Sec-WebSocket-Accept"));
    assert_int_equal(upgrade("/v1/console/", self, TRUE, NULL), 404);
    assert_int_equal(upgrade("/v1/console/a/b", self, TRUE, NULL), 404);
    /* A bearer token is no cookie. */
    {
        g_autofree char *headers =
            g_strdup_printf(UPGRADE "Origin: %s\r\nAuthorization: Bearer %s\r\n", self, fx.token);
        assert_int_equal(http_status("GET", ticket, headers, NULL), 401);
    }
    /* Only GET, and without a body. */
    assert_int_equal(http_status("POST", ticket, NULL, "{}"), 400);
    assert_int_equal(http_status("PUT", ticket, NULL, NULL), 405);
}

static guint
admin(const char *method, const char *path, const char *body, char **ret_reply)
{
    g_autofree char *headers =
        g_strdup_printf("Authorization: Bearer %s\r\nContent-Type: application/json\r\n", fx.token);

    return http(method, path, headers, body, ret_reply);
}

static void
test_console_routes(void **state)
{
    g_autofree char *disk = g_build_filename(fx.dir, "disk.qcow2", NULL);
    const char *create[] = {"qemu-img", "create", "-q", "-f", "qcow2", disk, "64M", NULL};
    g_autofree char *tmpl =
        g_strdup_printf("{\"name\":\"t\",\"disk\":\"%s\",\"format\":\"qcow2\"}", disk);
    g_autofree char *reply = NULL;

    assert_true(carrel_util_run(create, 60, NULL, NULL, NULL));
    assert_int_equal(admin("POST", "/v1/templates", tmpl, NULL), 201);
    assert_int_equal(admin("POST", "/v1/sessions", "{\"template\":\"t\",\"name\":\"c1\"}", NULL),
                     201);
    assert_int_equal(admin("POST", "/v1/sessions/nope/console", NULL, NULL), 404);
    /* The test driver runs no QEMU: no SPICE port to hand out. */
    assert_int_equal(admin("POST", "/v1/sessions/c1/console", NULL, &reply), 409);
    assert_non_null(strstr(reply, "not listening"));
    g_clear_pointer(&reply, g_free);
    /* remote-viewer bypasses the view-only proxy: the lease first. */
    assert_int_equal(admin("GET", "/v1/sessions/c1/console.vv", NULL, &reply), 409);
    assert_non_null(strstr(reply, "control lease"));
    g_clear_pointer(&reply, g_free);
    assert_int_equal(admin("POST", "/v1/sessions/c1/control", "{\"action\":\"take\"}", NULL), 200);
    assert_int_equal(admin("GET", "/v1/sessions/c1/console.vv", NULL, &reply), 409);
    assert_non_null(strstr(reply, "not listening"));
    g_clear_pointer(&reply, g_free);
    assert_int_equal(admin("POST", "/v1/sessions/c1/stop", NULL, NULL), 200);
    assert_int_equal(admin("POST", "/v1/sessions/c1/console", NULL, &reply), 409);
    assert_non_null(strstr(reply, "stopped"));
    assert_int_equal(http_status("POST", "/v1/sessions/c1/console", NULL, NULL), 401);
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_refused_before_upgrade),
        cmocka_unit_test(test_console_routes),
    };

    return cmocka_run_group_tests(tests, setup, teardown);
}
