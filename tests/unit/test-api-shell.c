/*
 * GET /v1/sessions/{id}/shell through the real API in this process (over core and the fake
 * hypervisor, whose terminal answers carrel-guest's proc commands as a tiny shell) and
 * libsoup's client websocket: what is typed comes back, the exit code arrives before a normal
 * close, a resize reaches the terminal; a closed socket, a malformed control message and an
 * oversized frame each end with the process killed in the guest; refusals for a request that
 * is no handshake, an unknown session, and a reviewer without the control lease (who may open
 * it once they hold the lease).
 */
#include "core-fixture.h"
#include "api/api-priv.h"

#define TOKEN "shell-test-token-0123456789"

typedef struct {
    SoupSession *http;
    SoupWebsocketConnection *ws;
    GError *error;
    GString *output;
    GPtrArray *texts; /* text frames, in order */
    gushort close_code;
    gboolean connected;
    gboolean closed;
    gboolean started; /* a "started" message came */
} Client;

static void
on_message(SoupWebsocketConnection *ws, gint type, GBytes *message, gpointer data)
{
    Client *c = data;
    gsize len = 0;
    const char *bytes = g_bytes_get_data(message, &len);

    if (type == SOUP_WEBSOCKET_DATA_BINARY) {
        g_string_append_len(c->output, bytes, (gssize)len);
        return;
    }
    g_ptr_array_add(c->texts, g_strndup(bytes, len));
    if (g_str_has_prefix(g_ptr_array_index(c->texts, c->texts->len - 1), "{\"type\":\"started\""))
        c->started = TRUE;
}

static void
on_closed(SoupWebsocketConnection *ws, gpointer data)
{
    Client *c = data;

    c->close_code = soup_websocket_connection_get_close_code(ws);
    c->closed = TRUE;
}

static void
on_connected(GObject *source, GAsyncResult *result, gpointer data)
{
    Client *c = data;

    c->ws = soup_session_websocket_connect_finish(SOUP_SESSION(source), result, &c->error);
    c->connected = TRUE;
    if (!c->ws)
        return;
    g_signal_connect(c->ws, "message", G_CALLBACK(on_message), c);
    g_signal_connect(c->ws, "closed", G_CALLBACK(on_closed), c);
}

/* Iterates the main loop until *flag (a bounded number of rounds, no clock). */
static void
spin_until(const gboolean *flag)
{
    for (guint i = 0; !*flag && i < 20000; i++)
        g_main_context_iteration(NULL, TRUE);
    assert_true(*flag);
}

static char *
url_of(CarrelApi *api, const char *path)
{
    const char *base = carrel_api_web_url(api);

    return g_strconcat(base, g_str_has_suffix(base, "/") ? path + 1 : path, NULL);
}

static void
client_connect(Client *c, CarrelApi *api, const char *token, const char *path)
{
    g_autofree char *url = url_of(api, path);
    g_autoptr(SoupMessage) msg = soup_message_new("GET", url);
    g_autofree char *auth = g_strconcat("Bearer ", token, NULL);

    c->http = soup_session_new();
    c->output = g_string_new(NULL);
    c->texts = g_ptr_array_new_with_free_func(g_free);
    soup_message_headers_replace(soup_message_get_request_headers(msg), "Authorization", auth);
    soup_session_websocket_connect_async(c->http, msg, NULL, NULL, G_PRIORITY_DEFAULT, NULL,
                                         on_connected, c);
    spin_until(&c->connected);
}

static void
client_clear(Client *c)
{
    /* libsoup may still hold the connection and say "closed" later: not to this Client, which
     * lives on a test's stack (a late handler wrote its close code into the next test's). */
    if (c->ws)
        g_signal_handlers_disconnect_by_data(c->ws, c);
    g_clear_object(&c->ws);
    g_clear_object(&c->http);
    g_clear_error(&c->error);
    g_string_free(c->output, TRUE);
    g_ptr_array_unref(c->texts);
}

static CarrelApi *
api_up(Fixture *fx, CarrelSession **ret_session)
{
    g_autoptr(GError) error = NULL;
    g_autoptr(GInetAddress) lo = g_inet_address_new_loopback(G_SOCKET_FAMILY_IPV4);
    g_autoptr(GSocketAddress) any = g_inet_socket_address_new(lo, 0);
    g_autoptr(CarrelTemplate) tmpl G_GNUC_UNUSED = import(fx, "tiny");
    CarrelApi *api;

    assert_true(carrel_manager_ensure_admin_token(fx->mgr, TOKEN, &error));
    *ret_session = create(fx, "shelled", &error);
    assert_non_null(*ret_session);
    api = carrel_api_new(fx->mgr, "test", &error);
    assert_non_null(api);
    assert_true(carrel_api_listen_tcp(api, any, NULL, &error));
    carrel_hypervisor_fake_set_terminal(fx->hv, TRUE);
    return api;
}

static char *
shell_path(const CarrelSession *s, const char *query)
{
    return g_strdup_printf("/v1/sessions/%s/shell%s", s->id, query ? query : "");
}

/* The fake's terminal was killed (SIGKILL: 137), within bounded rounds of the main loop. */
static void
assert_killed(Fixture *fx)
{
    gboolean running = TRUE;
    int code = 0;
    guint rows, cols;

    for (guint i = 0; i < 2000; i++) {
        assert_true(carrel_hypervisor_fake_get_terminal(fx->hv, &running, &code, &rows, &cols));
        if (!running)
            break;
        /* The kill comes from the shell's thread: nothing need wake the main loop. */
        if (!g_main_context_iteration(NULL, FALSE))
            g_usleep(5000);
    }
    assert_false(running);
    assert_int_equal(code, 137);
}

static void
test_shell_types_and_exits(void **state)
{
    Fixture *fx = *state;
    g_autoptr(CarrelSession) s = NULL;
    g_autoptr(CarrelApi) api = api_up(fx, &s);
    g_autofree char *path = shell_path(s, "?rows=30&cols=100");
    static const char typed[] = "echo hello-42\nexit 3\n";
    Client c = {0};
    gboolean running = TRUE;
    int code = -1;
    guint rows = 0, cols = 0;

    client_connect(&c, api, TOKEN, path);
    assert_null(c.error);
    spin_until(&c.started);
    assert_true(carrel_hypervisor_fake_get_terminal(fx->hv, &running, &code, &rows, &cols));
    assert_int_equal(rows, 30);
    assert_int_equal(cols, 100);
    soup_websocket_connection_send_text(c.ws, "{\"type\":\"resize\",\"rows\":40,\"cols\":120}");
    soup_websocket_connection_send_binary(c.ws, typed, sizeof(typed) - 1);
    spin_until(&c.closed);
    assert_int_equal(c.close_code, SOUP_WEBSOCKET_CLOSE_NORMAL);
    assert_non_null(strstr(c.output->str, "echo hello-42\r\nhello-42\r\n"));
    assert_string_equal(g_ptr_array_index(c.texts, c.texts->len - 1),
                        "{\"type\":\"exit\",\"exit_code\":3}");
    assert_true(carrel_hypervisor_fake_get_terminal(fx->hv, &running, &code, &rows, &cols));
    assert_false(running);
    assert_int_equal(code, 3);
    assert_int_equal(rows, 40);
    assert_int_equal(cols, 120);
    client_clear(&c);
}

/* The client goes away: nothing is left running. */
static void
test_close_kills(void **state)
{
    Fixture *fx = *state;
    g_autoptr(CarrelSession) s = NULL;
    g_autoptr(CarrelApi) api = api_up(fx, &s);
    g_autofree char *path = shell_path(s, NULL);
    Client c = {0};

    client_connect(&c, api, TOKEN, path);
    spin_until(&c.started);
    soup_websocket_connection_close(c.ws, SOUP_WEBSOCKET_CLOSE_GOING_AWAY, NULL);
    assert_killed(fx);
    client_clear(&c);
}

static void
test_bad_control_message(void **state)
{
    Fixture *fx = *state;
    g_autoptr(CarrelSession) s = NULL;
    g_autoptr(CarrelApi) api = api_up(fx, &s);
    g_autofree char *path = shell_path(s, NULL);
    Client c = {0};

    client_connect(&c, api, TOKEN, path);
    spin_until(&c.started);
    soup_websocket_connection_send_text(c.ws, "{\"type\":\"resize\",\"rows\":0,\"cols\":80}");
    spin_until(&c.closed);
    /* 1007; libsoup 3.2's client now and then reports its own dirty close (1001) instead. */
    assert_true(c.close_code == SOUP_WEBSOCKET_CLOSE_BAD_DATA ||
                c.close_code == SOUP_WEBSOCKET_CLOSE_GOING_AWAY);
    assert_killed(fx);
    client_clear(&c);
}

static void
test_oversized_frame(void **state)
{
    Fixture *fx = *state;
    g_autoptr(CarrelSession) s = NULL;
    g_autoptr(CarrelApi) api = api_up(fx, &s);
    g_autofree char *path = shell_path(s, NULL);
    gsize big = 128 * 1024;
    g_autofree char *flood = g_malloc0(big);
    Client c = {0};

    client_connect(&c, api, TOKEN, path);
    spin_until(&c.started);
    memset(flood, 'x', big);
    soup_websocket_connection_send_binary(c.ws, flood, big);
    spin_until(&c.closed);
    /* 1009, unless carreld's close came while the client still wrote its frame (the socket
     * then ends without a close frame the client could read). */
    assert_true(c.close_code == SOUP_WEBSOCKET_CLOSE_TOO_BIG || c.close_code == 0);
    assert_killed(fx);
    client_clear(&c);
}

/* A plain GET, as the role matrix makes: the status of the refusal. */
static guint
plain_get(CarrelApi *api, const char *token, const char *path)
{
    g_autofree char *url = url_of(api, path);
    g_autoptr(SoupSession) http = soup_session_new();
    g_autoptr(SoupMessage) msg = soup_message_new("GET", url);
    g_autofree char *auth = g_strconcat("Bearer ", token, NULL);
    g_autoptr(GBytes) body = NULL;

    soup_message_headers_replace(soup_message_get_request_headers(msg), "Authorization", auth);
    body = soup_session_send_and_read(http, msg, NULL, NULL);
    return soup_message_get_status(msg);
}

typedef struct {
    CarrelApi *api;
    char *token;
    char *path;
    guint status;
    gint done;
} PlainGet;

static gpointer
plain_get_thread(gpointer data)
{
    PlainGet *g = data;

    g->status = plain_get(g->api, g->token, g->path);
    g_atomic_int_set(&g->done, 1);
    return NULL;
}

/* The API runs on this thread's main loop: a blocking request goes from another thread. */
static guint
status_of(CarrelApi *api, const char *token, const char *path)
{
    PlainGet g = {.api = api, .token = (char *)token, .path = (char *)path};
    GThread *t = g_thread_new("get", plain_get_thread, &g);

    while (!g_atomic_int_get(&g.done))
        g_main_context_iteration(NULL, TRUE);
    g_thread_join(t);
    return g.status;
}

static void
test_refusals(void **state)
{
    Fixture *fx = *state;
    g_autoptr(CarrelSession) s = NULL;
    g_autoptr(CarrelApi) api = api_up(fx, &s);
    g_autofree char *path = shell_path(s, NULL);
    g_autofree char *big = shell_path(s, "?rows=1001");
    g_autoptr(GError) error = NULL;
    g_autofree char *reviewer =
        carrel_manager_token_create(fx->mgr, ADMIN, "reviewer", "rev", 0, NULL, NULL, &error);
    g_autoptr(CarrelPrincipal) who = carrel_manager_authenticate(fx->mgr, reviewer, &error);
    g_autoptr(JsonNode) lease = NULL;
    gboolean running = FALSE;
    int code;
    guint rows, cols;
    Client c = {0};

    assert_non_null(who);
    assert_int_equal(status_of(api, TOKEN, path), SOUP_STATUS_BAD_REQUEST);
    assert_int_equal(status_of(api, TOKEN, big), SOUP_STATUS_BAD_REQUEST);
    assert_int_equal(status_of(api, TOKEN, "/v1/sessions/s-000000000000/shell"),
                     SOUP_STATUS_NOT_FOUND);
    assert_int_equal(status_of(api, reviewer, path), SOUP_STATUS_FORBIDDEN);
    /* None of these started anything in the guest. */
    assert_false(carrel_hypervisor_fake_get_terminal(fx->hv, &running, &code, &rows, &cols));
    /* A reviewer without the lease cannot open it; once they hold the lease, they can. */
    client_connect(&c, api, reviewer, path);
    assert_null(c.ws);
    assert_non_null(c.error);
    client_clear(&c);
    memset(&c, 0, sizeof(c));
    lease = carrel_manager_lease_take(fx->mgr, who, s->id, &error);
    assert_non_null(lease);
    client_connect(&c, api, reviewer, path);
    assert_null(c.error);
    spin_until(&c.started);
    soup_websocket_connection_close(c.ws, SOUP_WEBSOCKET_CLOSE_NORMAL, NULL);
    assert_killed(fx);
    client_clear(&c);
}

typedef struct {
    gboolean done;
    GError *error;
} Run;

static void
on_cli_done(GObject *source, GAsyncResult *result, gpointer data)
{
    Run *r = data;

    g_subprocess_wait_finish(G_SUBPROCESS(source), result, &r->error);
    r->done = TRUE;
}

/* carrel shell reading a file, as from a pipe in the e2e test: what it reads is typed in, the
 * shell's output comes out, and carrel exits with the shell's code. */
static void
test_cli_shell(void **state)
{
    Fixture *fx = *state;
    g_autoptr(CarrelSession) s = NULL;
    g_autoptr(CarrelApi) api = api_up(fx, &s);
    const char *cli = g_getenv("CARREL_CLI");
    g_autoptr(GSubprocessLauncher) launcher = g_subprocess_launcher_new(G_SUBPROCESS_FLAGS_NONE);
    g_autoptr(GSubprocess) proc = NULL;
    g_autoptr(GError) error = NULL;
    g_autofree char *in = g_build_filename(fx->dir, "typed", NULL);
    g_autofree char *out_path = g_build_filename(fx->dir, "out", NULL);
    g_autofree char *err_path = g_build_filename(fx->dir, "err", NULL);
    g_autofree char *out = NULL;
    g_autofree char *err = NULL;
    Run r = {0};

    assert_non_null(cli);
    assert_true(g_file_set_contents(in, "echo hello-42\nexit 3\n", -1, NULL));
    g_subprocess_launcher_setenv(launcher, "CARREL_TOKEN", TOKEN, TRUE);
    g_subprocess_launcher_set_stdin_file_path(launcher, in);
    g_subprocess_launcher_set_stdout_file_path(launcher, out_path);
    g_subprocess_launcher_set_stderr_file_path(launcher, err_path);
    proc = g_subprocess_launcher_spawn(launcher, &error, cli, "--url", carrel_api_web_url(api),
                                       "shell", s->id, NULL);
    assert_non_null(proc);
    g_subprocess_wait_async(proc, NULL, on_cli_done, &r);
    spin_until(&r.done);
    if (r.error)
        fail_msg("waiting for carrel shell: %s", r.error->message);
    assert_true(g_file_get_contents(out_path, &out, NULL, NULL));
    assert_true(g_file_get_contents(err_path, &err, NULL, NULL));
    if (!strstr(out, "hello-42\r\n"))
        fail_msg("carrel shell printed '%s', and on stderr: %s", out, err);
    assert_true(g_subprocess_get_if_exited(proc));
    assert_int_equal(g_subprocess_get_exit_status(proc), 3);
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_shell_types_and_exits, setup, teardown),
        cmocka_unit_test_setup_teardown(test_close_kills, setup, teardown),
        cmocka_unit_test_setup_teardown(test_bad_control_message, setup, teardown),
        cmocka_unit_test_setup_teardown(test_oversized_frame, setup, teardown),
        cmocka_unit_test_setup_teardown(test_refusals, setup, teardown),
        cmocka_unit_test_setup_teardown(test_cli_shell, setup, teardown),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
