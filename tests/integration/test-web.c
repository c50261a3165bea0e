/*
 * Integration: the web console's side of carreld (a real daemon on libvirt's test driver, over
 * TCP with libsoup): login cookie, same-origin rule, static files and their hostile paths, the
 * event stream, named tokens, the control lease against agent HID events, approvals through the
 * test hook, and the timeline naming who acted.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <libsoup/soup.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "conf/conf.h"
#include "daemon-url.h"

typedef struct {
    char *dir;
    char *url;
    char *origin;
    char *token;
    char *disk;
    GSubprocess *daemon;
    SoupSession *http;
    char *cookie; /* "carrel_session=..." after login */
    char *session_id;
} Fixture;

static Fixture fx;

typedef struct {
    guint status;
    JsonNode *body;
    char *text;
    char *set_cookie;
    char *csp;
    char *disposition;
    char *retry_after;
} Reply;

static void
reply_clear(Reply *r)
{
    g_clear_pointer(&r->body, json_node_unref);
    g_clear_pointer(&r->text, g_free);
    g_clear_pointer(&r->set_cookie, g_free);
    g_clear_pointer(&r->csp, g_free);
    g_clear_pointer(&r->disposition, g_free);
    g_clear_pointer(&r->retry_after, g_free);
}

G_DEFINE_AUTO_CLEANUP_CLEAR_FUNC(Reply, reply_clear)

/* One request: auth is "cookie", "bearer:TOKEN" or NULL; origin NULL sends none. */
static void
request(Reply *r, const char *method, const char *path, const char *body, const char *auth,
        const char *origin)
{
    g_autofree char *uri = g_strconcat(fx.url, path, NULL);
    g_autoptr(SoupMessage) msg = soup_message_new(method, uri);
    g_autoptr(GError) error = NULL;
    g_autoptr(GBytes) out = NULL;
    SoupMessageHeaders *h;
    gsize len = 0;
    const char *data;

    assert_non_null(msg);
    h = soup_message_get_request_headers(msg);
    if (body) {
        g_autoptr(GBytes) in = g_bytes_new(body, strlen(body));
        soup_message_set_request_body_from_bytes(msg, "application/json", in);
    }
    if (g_strcmp0(auth, "cookie") == 0 && fx.cookie)
        soup_message_headers_replace(h, "Cookie", fx.cookie);
    else if (auth && g_str_has_prefix(auth, "bearer:")) {
        g_autofree char *v = g_strconcat("Bearer ", auth + 7, NULL);
        soup_message_headers_replace(h, "Authorization", v);
    }
    if (origin)
        soup_message_headers_replace(h, "Origin", origin);
    out = soup_session_send_and_read(fx.http, msg, NULL, &error);
    if (!out)
        fail_msg("%s %s: %s", method, path, error->message);
    r->status = soup_message_get_status(msg);
    data = g_bytes_get_data(out, &len);
    r->text = g_strndup(data ? data : "", len);
    r->body = len ? carrel_conf_parse_json(data, len, NULL) : NULL;
    h = soup_message_get_response_headers(msg);
    r->set_cookie = g_strdup(soup_message_headers_get_one(h, "Set-Cookie"));
    r->csp = g_strdup(soup_message_headers_get_one(h, "Content-Security-Policy"));
    r->disposition = g_strdup(soup_message_headers_get_one(h, "Content-Disposition"));
    r->retry_after = g_strdup(soup_message_headers_get_one(h, "Retry-After"));
}

static const char *
str(JsonNode *node, const char *name)
{
    assert_non_null(node);
    return json_object_get_string_member_with_default(json_node_get_object(node), name, NULL);
}

static const char *
error_message(JsonNode *node)
{
    assert_non_null(node);
    return json_object_get_string_member(
        json_object_get_object_member(json_node_get_object(node), "error"), "message");
}

static char *
bearer(const char *token)
{
    return g_strconcat("bearer:", token, NULL);
}

static void
write_web_files(const char *web)
{
    g_autofree char *index = g_build_filename(web, "index.html", NULL);
    g_autofree char *hidden = g_build_filename(web, ".secret.html", NULL);
    g_autofree char *link = g_build_filename(web, "passwd.html", NULL);
    g_autofree char *noext = g_build_filename(web, "README", NULL);

    assert_int_equal(g_mkdir_with_parents(web, 0755), 0);
    assert_true(
        carrel_util_write_file(index, "<!doctype html><title>carrel</title>", -1, 0644, NULL));
    assert_true(carrel_util_write_file(hidden, "hidden", -1, 0644, NULL));
    assert_true(carrel_util_write_file(noext, "no type", -1, 0644, NULL));
    assert_int_equal(symlink("/etc/passwd", link), 0);
}

static int
setup(void **state)
{
    g_autofree char *web = NULL;
    g_autofree char *spice = NULL;
    g_autofree char *spice_js = NULL;
    g_autofree char *sdir = NULL;
    g_autofree char *token_path = NULL;
    const char *create[] = {"qemu-img", "create", "-q", "-f", "qcow2", NULL, "64M", NULL};

    fx.dir = g_dir_make_tmp("carrel-web-XXXXXX", NULL);
    fx.disk = g_build_filename(fx.dir, "disk.qcow2", NULL);
    create[5] = fx.disk;
    assert_true(carrel_util_run(create, 60, NULL, NULL, NULL));
    web = g_build_filename(fx.dir, "web", NULL);
    spice = g_build_filename(fx.dir, "spice", NULL);
    spice_js = g_build_filename(spice, "main.js", NULL);
    write_web_files(web);
    assert_int_equal(g_mkdir_with_parents(spice, 0755), 0);
    assert_true(carrel_util_write_file(spice_js, "export {};", -1, 0644, NULL));
    sdir = g_build_filename(fx.dir, "state", NULL);
    fx.daemon = g_subprocess_new(G_SUBPROCESS_FLAGS_STDERR_SILENCE, NULL, g_getenv("CARREL_DAEMON"),
                                 "--state-dir", sdir, "--socket", "", "--libvirt-uri",
                                 "test:///default", "--listen", "127.0.0.1:0", "--web-dir", web,
                                 "--spice-html5-dir", spice, "--test-hooks", NULL);
    assert_non_null(fx.daemon);
    fx.url = test_daemon_url(sdir, 60, NULL);
    assert_non_null(fx.url);
    fx.origin = g_strdup(fx.url);
    fx.http = soup_session_new_with_options("timeout", 30, NULL);
    token_path = g_build_filename(sdir, "admin.token", NULL);
    for (int i = 0; i < 200 && !g_file_get_contents(token_path, &fx.token, NULL, NULL); i++)
        g_usleep(50 * 1000);
    assert_non_null(fx.token);
    g_strstrip(fx.token);
    for (int i = 0; i < 200; i++) {
        g_autofree char *uri = g_strconcat(fx.url, "/v1/healthz", NULL);
        g_autoptr(SoupMessage) msg = soup_message_new("GET", uri);
        g_autoptr(GBytes) out = soup_session_send_and_read(fx.http, msg, NULL, NULL);
        if (out && soup_message_get_status(msg) == 200)
            break;
        g_usleep(50 * 1000);
    }
    return 0;
}

static int
teardown(void **state)
{
    if (fx.daemon && g_subprocess_get_identifier(fx.daemon))
        g_subprocess_force_exit(fx.daemon);
    g_clear_object(&fx.daemon);
    g_clear_object(&fx.http);
    if (!g_getenv("CARREL_TEST_KEEP"))
        carrel_util_remove_tree(fx.dir, NULL);
    return 0;
}

/* The status of a GET sent byte for byte: no client normalises the path first. */
static guint
raw_get_status(const char *path, char **ret_text)
{
    g_autoptr(GSocketClient) client = g_socket_client_new();
    g_autoptr(GSocketConnection) conn = NULL;
    g_autofree char *host = g_strdup(fx.url + strlen("http://"));
    g_autofree char *req =
        g_strdup_printf("GET %s HTTP/1.1\r\nHost: %s\r\nConnection: close\r\n\r\n", path, host);
    g_autoptr(GString) got = g_string_new(NULL);
    char buf[4096];
    gssize n;
    guint status = 0;

    conn = g_socket_client_connect_to_host(client, host, 0, NULL, NULL);
    assert_non_null(conn);
    assert_true(g_output_stream_write_all(g_io_stream_get_output_stream(G_IO_STREAM(conn)), req,
                                          strlen(req), NULL, NULL, NULL));
    while ((n = g_input_stream_read(g_io_stream_get_input_stream(G_IO_STREAM(conn)), buf,
                                    sizeof buf, NULL, NULL)) > 0)
        g_string_append_len(got, buf, n);
    assert_int_equal(sscanf(got->str, "HTTP/1.1 %u", &status), 1);
    *ret_text = g_string_free(g_steal_pointer(&got), FALSE);
    return status;
}

static void
test_static_files(void **state)
{
    const char *refused[] = {"/passwd.html", "/.secret.html", "/README", "/nothing.html"};
    /* Dot segments are resolved by the HTTP parser before carreld sees them: never above the
     * served folder. */
    const char *climbing[] = {"/%2e%2e/%2e%2e/etc/passwd", "/spice-html5/../../../etc/passwd",
                              "/spice-html5/%2e%2e/%2e%2e/%2e%2e/etc/passwd"};
    g_auto(Reply) r = {0};

    request(&r, "GET", "/", NULL, NULL, NULL);
    assert_int_equal(r.status, 200);
    assert_non_null(strstr(r.text, "<title>carrel</title>"));
    /* No inline scripts, sockets only back home. */
    assert_non_null(r.csp);
    assert_non_null(strstr(r.csp, "script-src 'self'"));
    assert_null(strstr(r.csp, "unsafe-inline"));
    reply_clear(&r);
    request(&r, "GET", "/spice-html5/main.js", NULL, NULL, NULL);
    assert_int_equal(r.status, 200);
    assert_string_equal(r.text, "export {};");
    reply_clear(&r);
    for (gsize i = 0; i < G_N_ELEMENTS(refused); i++) {
        g_autofree char *text = NULL;
        guint status = raw_get_status(refused[i], &text);
        if (status != 404 && status != 400)
            fail_msg("%s answered %u", refused[i], status);
        assert_null(strstr(text, "root:"));
    }
    for (gsize i = 0; i < G_N_ELEMENTS(climbing); i++) {
        g_autofree char *text = NULL;
        guint status = raw_get_status(climbing[i], &text);
        if (status != 404 && status != 400)
            fail_msg("%s answered %u", climbing[i], status);
        assert_null(strstr(text, "root:"));
    }
    request(&r, "POST", "/index.html", "{}", NULL, NULL);
    assert_int_equal(r.status, 405);
}

static void
test_login_and_cookie(void **state)
{
    g_auto(Reply) r = {0};
    g_autofree char *login = g_strdup_printf("{\"token\":\"%s\"}", fx.token);
    char *end;

    request(&r, "GET", "/v1/sessions", NULL, "cookie", NULL);
    assert_int_equal(r.status, 401);
    reply_clear(&r);
    request(&r, "POST", "/v1/login", "{\"token\":\"wrong\"}", NULL, fx.origin);
    assert_int_equal(r.status, 401);
    assert_null(r.set_cookie);
    reply_clear(&r);
    request(&r, "POST", "/v1/login", "{\"token\":\"x\",\"extra\":1}", NULL, fx.origin);
    assert_int_equal(r.status, 400);
    reply_clear(&r);
    request(&r, "POST", "/v1/login", login, NULL, fx.origin);
    assert_int_equal(r.status, 200);
    assert_string_equal(str(r.body, "role"), "admin");
    assert_non_null(r.set_cookie);
    assert_non_null(strstr(r.set_cookie, "HttpOnly"));
    assert_non_null(strstr(r.set_cookie, "SameSite=Strict"));
    /* The cookie is an opaque value, never the token. */
    assert_null(strstr(r.set_cookie, fx.token));
    fx.cookie = g_strdup(r.set_cookie);
    end = strchr(fx.cookie, ';');
    *end = '\0';
    reply_clear(&r);
    request(&r, "GET", "/v1/whoami", NULL, "cookie", NULL);
    assert_int_equal(r.status, 200);
    assert_string_equal(str(r.body, "name"), "admin");
    reply_clear(&r);
    /* A change by cookie must come from the console's origin: none or another is refused. */
    request(&r, "POST", "/v1/tokens", "{\"role\":\"reviewer\",\"name\":\"mallory\"}", "cookie",
            NULL);
    assert_int_equal(r.status, 403);
    reply_clear(&r);
    request(&r, "POST", "/v1/tokens", "{\"role\":\"reviewer\",\"name\":\"mallory\"}", "cookie",
            "http://evil.example");
    assert_int_equal(r.status, 403);
}

static char *
login_as(const char *token)
{
    g_auto(Reply) r = {0};
    g_autofree char *login = g_strdup_printf("{\"token\":\"%s\"}", token);
    char *cookie;

    request(&r, "POST", "/v1/login", login, NULL, fx.origin);
    assert_int_equal(r.status, 200);
    cookie = g_strdup(r.set_cookie);
    *strchr(cookie, ';') = '\0';
    return cookie;
}

static char *
new_token(const char *role, const char *name)
{
    g_auto(Reply) r = {0};
    g_autofree char *body = g_strdup_printf("{\"role\":\"%s\",\"name\":\"%s\"}", role, name);

    request(&r, "POST", "/v1/tokens", body, "cookie", fx.origin);
    assert_int_equal(r.status, 201);
    assert_string_equal(str(r.body, "name"), name);
    return g_strdup(str(r.body, "token"));
}

/* The template (as admin) and a session "web" created by owner (an Authorization value). */
static void
make_session_as(const char *owner)
{
    g_auto(Reply) r = {0};
    g_autofree char *auth = bearer(fx.token);
    g_autofree char *tmpl =
        g_strdup_printf("{\"name\":\"tiny\",\"disk\":\"%s\",\"format\":\"qcow2\"}", fx.disk);

    request(&r, "POST", "/v1/templates", tmpl, auth, NULL);
    assert_int_equal(r.status, 201);
    reply_clear(&r);
    request(&r, "POST", "/v1/sessions", "{\"template\":\"tiny\",\"name\":\"web\"}",
            owner ? owner : auth, NULL);
    assert_int_equal(r.status, 201);
    fx.session_id = g_strdup(str(r.body, "id"));
}

/* Every event of the session, as one JSON text. */
static char *
timeline_text(void)
{
    g_auto(Reply) r = {0};
    g_autofree char *path = g_strdup_printf("/v1/sessions/%s/events", fx.session_id);
    g_autofree char *auth = bearer(fx.token);

    request(&r, "GET", path, NULL, auth, NULL);
    assert_int_equal(r.status, 200);
    return g_strdup(r.text);
}

static void
test_lease_and_agent_hid(void **state)
{
    g_autofree char *alice_token = new_token("reviewer", "alice");
    g_autofree char *agent_token = new_token("agent", "bot-7");
    g_autofree char *alice = login_as(alice_token);
    g_autofree char *agent = bearer(agent_token);
    g_autofree char *admin = bearer(fx.token);
    g_autofree char *control = NULL;
    g_autofree char *computer = NULL;
    g_autofree char *exec = NULL;
    g_autofree char *pause = NULL;
    g_autofree char *events = NULL;
    g_auto(Reply) r = {0};
    char *admin_cookie = fx.cookie;

    /* The agent's own session: the lease, not ownership, is what stops it. */
    make_session_as(agent);
    control = g_strdup_printf("/v1/sessions/%s/control", fx.session_id);
    computer = g_strdup_printf("/v1/sessions/%s/computer", fx.session_id);
    exec = g_strdup_printf("/v1/sessions/%s/exec", fx.session_id);
    pause = g_strdup_printf("/v1/sessions/%s/pause", fx.session_id);

    fx.cookie = alice;
    request(&r, "POST", control, "{\"action\":\"take\"}", "cookie", fx.origin);
    assert_int_equal(r.status, 200);
    assert_string_equal(str(r.body, "holder"), "alice");
    reply_clear(&r);
    /* The list shows who holds it. */
    request(&r, "GET", "/v1/sessions", NULL, "cookie", NULL);
    assert_non_null(strstr(r.text, "\"holder\":\"alice\""));
    reply_clear(&r);
    /* Agent HID events, through any caller, wait for the human. */
    request(&r, "POST", computer, "{\"action\":\"left_click\",\"coordinate\":[5,5]}", agent, NULL);
    assert_int_equal(r.status, 409);
    assert_non_null(strstr(error_message(r.body), "session under human control"));
    assert_non_null(strstr(error_message(r.body), "alice"));
    reply_clear(&r);
    request(&r, "POST", computer, "{\"action\":\"type\",\"text\":\"x\"}", admin, NULL);
    assert_int_equal(r.status, 409);
    reply_clear(&r);
    request(&r, "POST", exec, "{\"argv\":[\"true\"]}", agent, NULL);
    assert_int_equal(r.status, 409);
    assert_non_null(strstr(error_message(r.body), "session under human control"));
    reply_clear(&r);
    /* Agents cannot take it, nor can a second reviewer; nobody else releases it but an admin. */
    request(&r, "POST", control, "{\"action\":\"take\"}", agent, NULL);
    assert_int_equal(r.status, 403);
    reply_clear(&r);
    request(&r, "POST", control, "{\"action\":\"steal\"}", "cookie", fx.origin);
    assert_int_equal(r.status, 400);
    reply_clear(&r);
    /* A pause from the console is recorded with the reviewer's name. */
    request(&r, "POST", pause, "{}", "cookie", fx.origin);
    assert_int_equal(r.status, 200);
    assert_string_equal(str(r.body, "state"), "paused");
    reply_clear(&r);
    request(&r, "POST", control, "{\"action\":\"release\"}", "cookie", fx.origin);
    assert_int_equal(r.status, 200);
    assert_true(json_object_get_null_member(json_node_get_object(r.body), "holder"));
    reply_clear(&r);
    /* Released: the agent's HID events are no longer refused for the lease (the paused state says
     * why now). */
    request(&r, "POST", computer, "{\"action\":\"type\",\"text\":\"x\"}", agent, NULL);
    assert_int_equal(r.status, 409);
    assert_null(strstr(error_message(r.body), "human control"));
    reply_clear(&r);
    events = timeline_text();
    assert_non_null(strstr(events, "\"actor\":\"alice\",\"kind\":\"control\",\"action\":\"take\""));
    assert_non_null(
        strstr(events, "\"actor\":\"alice\",\"kind\":\"lifecycle\",\"action\":\"pause\""));
    assert_non_null(
        strstr(events, "\"actor\":\"alice\",\"kind\":\"control\",\"action\":\"release\""));
    /* The release names the lease that ended with its real start, not the epoch. */
    assert_null(strstr(events, "1970-01-01"));
    fx.cookie = admin_cookie;
}

static void
test_approvals(void **state)
{
    g_autofree char *admin = bearer(fx.token);
    g_autofree char *req = g_strdup_printf(
        "{\"session_id\":\"%s\",\"action\":\"network.egress\",\"detail\":{\"host\":\"a.test\"}}",
        fx.session_id);
    g_autofree char *approve = NULL;
    g_autofree char *deny = NULL;
    g_autofree char *events = NULL;
    g_auto(Reply) r = {0};
    g_autofree char *id = NULL;

    request(&r, "POST", "/v1/test/approvals", req, admin, NULL);
    assert_int_equal(r.status, 201);
    assert_string_equal(str(r.body, "state"), "pending");
    id = g_strdup(str(r.body, "id"));
    reply_clear(&r);
    request(&r, "POST", "/v1/test/approvals", "{\"session_id\":\"nope\",\"action\":\"x\"}", admin,
            NULL);
    assert_int_equal(r.status, 404);
    reply_clear(&r);
    request(&r, "GET", "/v1/approvals", NULL, "cookie", NULL);
    assert_non_null(strstr(r.text, id));
    assert_non_null(strstr(r.text, "a.test"));
    reply_clear(&r);
    approve = g_strdup_printf("/v1/approvals/%s/approve", id);
    deny = g_strdup_printf("/v1/approvals/%s/deny", id);
    request(&r, "POST", approve, "{\"reason\":\"needed for the task\"}", "cookie", fx.origin);
    assert_int_equal(r.status, 200);
    assert_string_equal(str(r.body, "state"), "approved");
    assert_string_equal(str(r.body, "decided_by"), "admin");
    assert_string_equal(str(r.body, "reason"), "needed for the task");
    reply_clear(&r);
    /* Decided once. */
    request(&r, "POST", deny, "{}", "cookie", fx.origin);
    assert_int_equal(r.status, 409);
    reply_clear(&r);
    request(&r, "GET", "/v1/approvals", NULL, "cookie", NULL);
    assert_null(strstr(r.text, id));
    reply_clear(&r);
    request(&r, "GET", "/v1/approvals?state=all", NULL, "cookie", NULL);
    assert_non_null(strstr(r.text, id));
    reply_clear(&r);
    request(&r, "GET", "/v1/approvals?state=bogus", NULL, "cookie", NULL);
    assert_int_equal(r.status, 400);
    events = timeline_text();
    assert_non_null(strstr(events, "\"kind\":\"approval\",\"action\":\"approve\""));
}

/* The stream opens with the current list and needs credentials. */
static void
test_stream(void **state)
{
    g_autofree char *uri = g_strconcat(fx.url, "/v1/stream", NULL);
    g_autoptr(SoupMessage) msg = soup_message_new("GET", uri);
    g_autoptr(GInputStream) in = NULL;
    g_autoptr(GString) got = g_string_new(NULL);
    char buf[4096];
    g_auto(Reply) r = {0};

    request(&r, "GET", "/v1/stream", NULL, NULL, NULL);
    assert_int_equal(r.status, 401);
    soup_message_headers_replace(soup_message_get_request_headers(msg), "Cookie", fx.cookie);
    in = soup_session_send(fx.http, msg, NULL, NULL);
    assert_non_null(in);
    assert_int_equal(soup_message_get_status(msg), 200);
    while (!strstr(got->str, "event: approvals")) {
        gssize n = g_input_stream_read(in, buf, sizeof buf, NULL, NULL);
        assert_true(n > 0);
        g_string_append_len(got, buf, n);
    }
    assert_non_null(strstr(got->str, "event: sessions\ndata: {\"sessions\":["));
    assert_non_null(strstr(got->str, fx.session_id));
    g_input_stream_close(in, NULL, NULL);
}

static void
test_logout(void **state)
{
    g_auto(Reply) r = {0};

    request(&r, "POST", "/v1/logout", "{}", "cookie", fx.origin);
    assert_int_equal(r.status, 204);
    assert_non_null(strstr(r.set_cookie, "Max-Age=0"));
    reply_clear(&r);
    request(&r, "GET", "/v1/whoami", NULL, "cookie", NULL);
    assert_int_equal(r.status, 401);
}

/* Failed credentials from one address: after ten in a minute it waits (429, Retry-After), valid
 * credentials included, so guessing and flooding the audit log go nowhere. Runs last: the
 * test's address waits afterwards. */
static void
test_login_limit(void **state)
{
    g_autofree char *auth = bearer(fx.token);
    g_auto(Reply) r = {0};
    guint refused = 0, limited = 0;
    gint64 wait_s;

    for (int i = 0; i < 12; i++) {
        reply_clear(&r);
        request(&r, "POST", "/v1/login", "{\"token\":\"guess\"}", NULL, fx.origin);
        refused += r.status == 401;
        limited += r.status == 429;
    }
    assert_true(refused >= 1 && refused <= 10);
    assert_true(limited >= 2);
    reply_clear(&r);
    request(&r, "GET", "/v1/sessions", NULL, auth, NULL);
    assert_int_equal(r.status, 429);
    assert_non_null(r.retry_after);
    wait_s = g_ascii_strtoll(r.retry_after, NULL, 10);
    assert_true(wait_s >= 1 && wait_s <= 60);
    assert_non_null(strstr(r.text, "too many failed logins"));
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_static_files),
        cmocka_unit_test(test_login_and_cookie),
        cmocka_unit_test(test_lease_and_agent_hid),
        cmocka_unit_test(test_approvals),
        cmocka_unit_test(test_stream),
        cmocka_unit_test(test_logout),
        cmocka_unit_test(test_login_limit),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
