/*
 * Integration: carreld keeps the text of session lists (api-cache.c) and serves it again while
 * the store is unchanged. These tests prove it is never stale and never another scope's: every
 * write (create, state change, control lease, destroy) shows in the very next list, agents see
 * only their own sessions however the lists of others were kept, and a revoked token is refused
 * at once. On a real carreld (libvirt's test driver, over TCP).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <libsoup/soup.h>
#include <signal.h>
#include <string.h>
#include <unistd.h>

#include "conf/conf.h"
#include "daemon-url.h"

enum { P_ADMIN, P_A, P_B, P_LAST };

typedef struct {
    char *dir;
    char *url;
    GSubprocess *daemon;
    SoupSession *http;
    char *tokens[P_LAST];
} Fixture;

static Fixture fx;

typedef struct {
    guint status;
    JsonNode *body;
} Reply;

static void
reply_clear(Reply *r)
{
    g_clear_pointer(&r->body, json_node_unref);
}

G_DEFINE_AUTO_CLEANUP_CLEAR_FUNC(Reply, reply_clear)

static void
request(Reply *r, const char *method, const char *path, const char *body, const char *token)
{
    g_autofree char *uri = g_strconcat(fx.url, path, NULL);
    g_autoptr(SoupMessage) msg = soup_message_new(method, uri);
    g_autoptr(GError) error = NULL;
    g_autoptr(GBytes) out = NULL;
    gsize len = 0;
    const char *data;

    if (body) {
        g_autoptr(GBytes) in = g_bytes_new(body, strlen(body));
        soup_message_set_request_body_from_bytes(msg, "application/json", in);
    }
    if (token) {
        g_autofree char *v = g_strconcat("Bearer ", token, NULL);
        soup_message_headers_replace(soup_message_get_request_headers(msg), "Authorization", v);
    }
    out = soup_session_send_and_read(fx.http, msg, NULL, &error);
    if (!out)
        fail_msg("%s %s: %s", method, path, error->message);
    r->status = soup_message_get_status(msg);
    data = g_bytes_get_data(out, &len);
    r->body = len ? carrel_conf_parse_json(data, len, NULL) : NULL;
}

static const char *
str(JsonNode *node, const char *name)
{
    assert_non_null(node);
    return json_object_get_string_member_with_default(json_node_get_object(node), name, NULL);
}

/* The session of id in who's list (path: "/v1/sessions" or with ?all=1), or NULL; the list is
 * asked for twice, so that the second answer is the kept text when nothing changed. */
static JsonObject *
listed(Reply *r, const char *path, int who, const char *id)
{
    JsonArray *list;

    for (int round = 0; round < 2; round++) {
        reply_clear(r);
        request(r, "GET", path, NULL, fx.tokens[who]);
        assert_int_equal(r->status, 200);
    }
    list = json_object_get_array_member(json_node_get_object(r->body), "sessions");
    for (guint i = 0; i < json_array_get_length(list); i++) {
        JsonObject *s = json_array_get_object_element(list, i);
        if (g_str_equal(json_object_get_string_member(s, "id"), id))
            return s;
    }
    return NULL;
}

static guint
count(Reply *r, int who)
{
    reply_clear(r);
    request(r, "GET", "/v1/sessions", NULL, fx.tokens[who]);
    assert_int_equal(r->status, 200);
    return json_array_get_length(
        json_object_get_array_member(json_node_get_object(r->body), "sessions"));
}

static char *
new_session(int who)
{
    g_auto(Reply) r = {0};

    request(&r, "POST", "/v1/sessions", "{\"template\":\"tiny\"}", fx.tokens[who]);
    if (r.status != 201)
        fail_msg("creating a session: %u", r.status);
    return g_strdup(str(r.body, "id"));
}

static char *
new_token(const char *name)
{
    g_auto(Reply) r = {0};
    g_autofree char *body = g_strdup_printf("{\"role\":\"agent\",\"name\":\"%s\"}", name);

    request(&r, "POST", "/v1/tokens", body, fx.tokens[P_ADMIN]);
    assert_int_equal(r.status, 201);
    return g_strdup(str(r.body, "token"));
}

static void
expect_state(const char *id, const char *state)
{
    g_auto(Reply) r = {0};
    JsonObject *s = listed(&r, "/v1/sessions", P_ADMIN, id);

    if (!s)
        fail_msg("session '%s' is not listed", id);
    assert_string_equal(json_object_get_string_member(s, "state"), state);
}

/* Create, pause, resume, control take and release, destroy: each shows in the next list. */
static void
test_list_follows_writes(void **state)
{
    g_auto(Reply) r = {0};
    g_autofree char *id = NULL;
    g_autofree char *path = NULL;
    JsonObject *s;

    assert_null(listed(&r, "/v1/sessions", P_ADMIN, "s-none"));
    id = new_session(P_A);
    expect_state(id, "running");

    path = g_strdup_printf("/v1/sessions/%s/pause", id);
    reply_clear(&r);
    request(&r, "POST", path, NULL, fx.tokens[P_A]);
    assert_int_equal(r.status, 200);
    expect_state(id, "paused");
    g_free(path);
    path = g_strdup_printf("/v1/sessions/%s/resume", id);
    reply_clear(&r);
    request(&r, "POST", path, NULL, fx.tokens[P_A]);
    assert_int_equal(r.status, 200);
    expect_state(id, "running");

    /* The control lease is a table of its own: it shows too. */
    g_free(path);
    path = g_strdup_printf("/v1/sessions/%s/control", id);
    reply_clear(&r);
    request(&r, "POST", path, "{\"action\":\"take\"}", fx.tokens[P_ADMIN]);
    assert_int_equal(r.status, 200);
    s = listed(&r, "/v1/sessions", P_ADMIN, id);
    assert_non_null(s);
    assert_false(json_object_get_null_member(s, "control"));
    reply_clear(&r);
    request(&r, "POST", path, "{\"action\":\"release\"}", fx.tokens[P_ADMIN]);
    assert_int_equal(r.status, 200);
    s = listed(&r, "/v1/sessions", P_ADMIN, id);
    assert_non_null(s);
    assert_true(json_object_get_null_member(s, "control"));

    g_free(path);
    path = g_strdup_printf("/v1/sessions/%s", id);
    reply_clear(&r);
    request(&r, "DELETE", path, NULL, fx.tokens[P_A]);
    assert_int_equal(r.status, 200);
    assert_null(listed(&r, "/v1/sessions", P_ADMIN, id));
    assert_null(listed(&r, "/v1/sessions", P_A, id));
    /* ?all=1 is kept apart from the live list: the destroyed session is there. */
    s = listed(&r, "/v1/sessions?all=1", P_ADMIN, id);
    assert_non_null(s);
    assert_string_equal(json_object_get_string_member(s, "state"), "destroyed");
}

/* Agents see their own sessions only, whatever was listed (and kept) for the others before. */
static void
test_list_scopes(void **state)
{
    g_auto(Reply) r = {0};
    g_autofree char *a = new_session(P_A);
    g_autofree char *b = NULL;
    guint admin_before;

    /* Everyone lists first, so each scope has a kept text before the next write. */
    assert_non_null(listed(&r, "/v1/sessions", P_A, a));
    assert_null(listed(&r, "/v1/sessions", P_B, a));
    assert_non_null(listed(&r, "/v1/sessions", P_ADMIN, a));
    admin_before = count(&r, P_ADMIN);
    b = new_session(P_B);
    for (int round = 0; round < 3; round++) {
        assert_non_null(listed(&r, "/v1/sessions", P_A, a));
        assert_null(listed(&r, "/v1/sessions", P_A, b));
        assert_non_null(listed(&r, "/v1/sessions", P_B, b));
        assert_null(listed(&r, "/v1/sessions", P_B, a));
        assert_non_null(listed(&r, "/v1/sessions", P_ADMIN, b));
        assert_int_equal(count(&r, P_ADMIN), admin_before + 1);
    }
}

/* A revoked token is refused by the next request, however often it listed before. */
static void
test_list_after_revoke(void **state)
{
    g_auto(Reply) r = {0};
    g_autofree char *token = new_token("short-lived");

    for (int i = 0; i < 3; i++) {
        reply_clear(&r);
        request(&r, "GET", "/v1/sessions", NULL, token);
        assert_int_equal(r.status, 200);
    }
    reply_clear(&r);
    request(&r, "DELETE", "/v1/tokens/short-lived", NULL, fx.tokens[P_ADMIN]);
    assert_int_equal(r.status, 200);
    reply_clear(&r);
    request(&r, "GET", "/v1/sessions", NULL, token);
    assert_int_equal(r.status, 401);
}

/* A rotated admin token: the old secret is refused at once, the new one works, and a token's
 * first use is recorded (last_used_at) although its row is kept between requests. */
static void
test_rotate_and_last_use(void **state)
{
    g_auto(Reply) r = {0};
    g_autofree char *old = g_strdup(fx.tokens[P_ADMIN]);
    g_autofree char *fresh = new_token("used-once");
    JsonArray *list;
    gboolean seen = FALSE;

    for (int i = 0; i < 3; i++) {
        reply_clear(&r);
        request(&r, "GET", "/v1/sessions", NULL, fresh);
        assert_int_equal(r.status, 200);
    }
    reply_clear(&r);
    request(&r, "GET", "/v1/tokens", NULL, old);
    assert_int_equal(r.status, 200);
    list = json_object_get_array_member(json_node_get_object(r.body), "tokens");
    for (guint i = 0; i < json_array_get_length(list); i++) {
        JsonObject *t = json_array_get_object_element(list, i);
        if (g_str_equal(json_object_get_string_member(t, "name"), "used-once")) {
            assert_true(json_object_has_member(t, "last_used_at"));
            assert_false(json_object_get_null_member(t, "last_used_at"));
            seen = TRUE;
        }
    }
    assert_true(seen);

    reply_clear(&r);
    request(&r, "POST", "/v1/tokens/admin/rotate", NULL, old);
    assert_int_equal(r.status, 200);
    g_free(fx.tokens[P_ADMIN]);
    fx.tokens[P_ADMIN] = g_strdup(str(r.body, "token"));
    assert_non_null(fx.tokens[P_ADMIN]);
    reply_clear(&r);
    request(&r, "GET", "/v1/sessions", NULL, old);
    assert_int_equal(r.status, 401);
    reply_clear(&r);
    request(&r, "GET", "/v1/sessions", NULL, fx.tokens[P_ADMIN]);
    assert_int_equal(r.status, 200);
}

/* In the child: a process group of its own, so that teardown kills all it started. */
static void
own_group(gpointer unused)
{
    (void)setpgid(0, 0);
}

static int
setup(void **state)
{
    g_autoptr(GSubprocessLauncher) launcher = NULL;
    g_autofree char *disk = NULL;
    g_autofree char *sdir = NULL;
    g_autofree char *token_path = NULL;
    g_autofree char *import = NULL;
    g_auto(Reply) r = {0};
    const char *create[] = {"qemu-img", "create", "-q", "-f", "qcow2", NULL, "64M", NULL};

    fx.dir = g_dir_make_tmp("carrel-lists-XXXXXX", NULL);
    disk = g_build_filename(fx.dir, "disk.qcow2", NULL);
    create[5] = disk;
    assert_true(carrel_util_run(create, 60, NULL, NULL, NULL));
    sdir = g_build_filename(fx.dir, "state", NULL);
    launcher = g_subprocess_launcher_new(G_SUBPROCESS_FLAGS_STDOUT_SILENCE |
                                         G_SUBPROCESS_FLAGS_STDERR_SILENCE);
    g_subprocess_launcher_set_child_setup(launcher, own_group, NULL, NULL);
    fx.daemon = g_subprocess_launcher_spawn(launcher, NULL, g_getenv("CARREL_DAEMON"),
                                            "--state-dir", sdir, "--socket", "", "--libvirt-uri",
                                            "test:///default", "--listen", "127.0.0.1:0", NULL);
    assert_non_null(fx.daemon);
    fx.url = test_daemon_url(sdir, 60, NULL);
    assert_non_null(fx.url);
    fx.http = soup_session_new_with_options("timeout", 30, NULL);
    token_path = g_build_filename(sdir, "admin.token", NULL);
    for (int i = 0; i < 200 && !g_file_get_contents(token_path, &fx.tokens[P_ADMIN], NULL, NULL);
         i++)
        g_usleep(50 * 1000);
    assert_non_null(fx.tokens[P_ADMIN]);
    g_strstrip(fx.tokens[P_ADMIN]);
    for (int i = 0; i < 200; i++) {
        reply_clear(&r);
        request(&r, "GET", "/v1/healthz", NULL, NULL);
        if (r.status == 200)
            break;
        g_usleep(50 * 1000);
    }
    import = g_strdup_printf("{\"name\":\"tiny\",\"disk\":\"%s\",\"format\":\"qcow2\"}", disk);
    reply_clear(&r);
    request(&r, "POST", "/v1/templates", import, fx.tokens[P_ADMIN]);
    assert_int_equal(r.status, 201);
    fx.tokens[P_A] = new_token("agent-a");
    fx.tokens[P_B] = new_token("agent-b");
    return 0;
}

static int
teardown(void **state)
{
    const char *pid = fx.daemon ? g_subprocess_get_identifier(fx.daemon) : NULL;

    if (pid)
        (void)kill(-(pid_t)g_ascii_strtoll(pid, NULL, 10), SIGKILL);
    g_clear_object(&fx.daemon);
    g_clear_object(&fx.http);
    for (int i = 0; i < P_LAST; i++)
        g_clear_pointer(&fx.tokens[i], g_free);
    g_clear_pointer(&fx.url, g_free);
    if (!g_getenv("CARREL_TEST_KEEP"))
        carrel_util_remove_tree(fx.dir, NULL);
    g_clear_pointer(&fx.dir, g_free);
    return 0;
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_list_follows_writes),
        cmocka_unit_test(test_list_scopes),
        cmocka_unit_test(test_list_after_revoke),
        cmocka_unit_test(test_rotate_and_last_use),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
