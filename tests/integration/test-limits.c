/*
 * Integration: fair concurrency and per-token limits on a real carreld (libvirt's test driver,
 * over TCP). The long pool filled by test-hook holds (2 threads, a queue of 1): health and
 * session lists still answer, and the next long request gets 503 with Retry-After. A policy
 * with small [limits]: a token over its sessions or its request rate gets 429 with Retry-After
 * and a message naming the limit, while other tokens go on. Outcomes only, never durations.
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

#define LONG_THREADS "2"
#define LONG_QUEUE "1"
/* How many times a test looks again for a state it waits for (50 ms apart). */
#define POLL_TRIES 1200

typedef struct {
    char *dir;
    char *url;
    char *admin;
    GSubprocess *daemon;
    SoupSession *http;
} Fixture;

static Fixture fx;

typedef struct {
    guint status;
    JsonNode *body;
    char *text;
    char *retry_after;
} Reply;

static void
reply_clear(Reply *r)
{
    g_clear_pointer(&r->body, json_node_unref);
    g_clear_pointer(&r->text, g_free);
    g_clear_pointer(&r->retry_after, g_free);
}

G_DEFINE_AUTO_CLEANUP_CLEAR_FUNC(Reply, reply_clear)

/* One request on http (each thread has its own session). */
static void
request_on(SoupSession *http, Reply *r, const char *method, const char *path, const char *body,
           const char *token)
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
    out = soup_session_send_and_read(http, msg, NULL, &error);
    if (!out)
        fail_msg("%s %s: %s", method, path, error->message);
    r->status = soup_message_get_status(msg);
    r->retry_after = g_strdup(
        soup_message_headers_get_one(soup_message_get_response_headers(msg), "Retry-After"));
    data = g_bytes_get_data(out, &len);
    r->text = g_strndup(data ? data : "", len);
    r->body = len ? carrel_conf_parse_json(data, len, NULL) : NULL;
}

static void
request(Reply *r, const char *method, const char *path, const char *body, const char *token)
{
    request_on(fx.http, r, method, path, body, token);
}

static const char *
error_code(const Reply *r)
{
    JsonObject *err;

    assert_non_null(r->body);
    err = json_object_get_object_member(json_node_get_object(r->body), "error");
    assert_non_null(err);
    return json_object_get_string_member(err, "code");
}

static const char *
error_message(const Reply *r)
{
    return json_object_get_string_member(
        json_object_get_object_member(json_node_get_object(r->body), "error"), "message");
}

/* A refusal to retry later: status, code, a Retry-After of at least 1 s, and words. */
static void
assert_retry_later(const Reply *r, guint status, const char *code, const char *words)
{
    if (r->status != status)
        fail_msg("expected %u, got %u: %s", status, r->status, r->text);
    assert_string_equal(error_code(r), code);
    assert_non_null(r->retry_after);
    assert_true(g_ascii_strtoull(r->retry_after, NULL, 10) >= 1);
    if (!strstr(error_message(r), words))
        fail_msg("message '%s' does not say '%s'", error_message(r), words);
}

static char *
new_token(const char *name)
{
    g_auto(Reply) r = {0};
    g_autofree char *body = g_strdup_printf("{\"role\":\"agent\",\"name\":\"%s\"}", name);

    request(&r, "POST", "/v1/tokens", body, fx.admin);
    assert_int_equal(r.status, 201);
    return g_strdup(json_object_get_string_member(json_node_get_object(r.body), "token"));
}

static gint64
gate(const char *body, const char *member)
{
    g_auto(Reply) r = {0};

    request(&r, "POST", "/v1/test/gate", body, fx.admin);
    assert_int_equal(r.status, 200);
    return json_object_get_int_member(json_node_get_object(r.body), member);
}

/* Waits (without a deadline of its own to assert) until the gate reports member == want. */
static void
wait_gate(const char *member, gint64 want)
{
    for (int i = 0; i < POLL_TRIES; i++) {
        if (gate("{}", member) == want)
            return;
        g_usleep(50 * 1000);
    }
    fail_msg("the gate never reported %s = %" G_GINT64_FORMAT, member, want);
}

/* A hold in a thread of its own (its own HTTP session): the status it got. */
static gpointer
hold_thread(gpointer unused)
{
    g_autoptr(SoupSession) http = soup_session_new_with_options("timeout", 600, NULL);
    g_auto(Reply) r = {0};

    request_on(http, &r, "POST", "/v1/test/hold", NULL, fx.admin);
    return GUINT_TO_POINTER(r.status);
}

/* The long pool full (2 holds running, 1 queued): the others answer, a 4th long one is 503. */
static void
test_long_pool_full(void **state)
{
    GThread *holds[3];
    g_auto(Reply) r = {0};

    assert_true(gate("{\"closed\":true}", "closed"));
    holds[0] = g_thread_new("hold", hold_thread, NULL);
    holds[1] = g_thread_new("hold", hold_thread, NULL);
    wait_gate("holding", 2);
    holds[2] = g_thread_new("hold", hold_thread, NULL);
    wait_gate("long_queued", 1);

    request(&r, "GET", "/v1/healthz", NULL, NULL);
    assert_int_equal(r.status, 200);
    reply_clear(&r);
    request(&r, "GET", "/v1/sessions", NULL, fx.admin);
    assert_int_equal(r.status, 200);
    reply_clear(&r);
    request(&r, "GET", "/v1/version", NULL, fx.admin);
    assert_int_equal(r.status, 200);
    reply_clear(&r);
    request(&r, "POST", "/v1/test/hold", NULL, fx.admin);
    assert_retry_later(&r, 503, "overloaded", "long requests");
    /* The class comes from the operation: a create is long too. */
    reply_clear(&r);
    request(&r, "POST", "/v1/sessions", "{\"template\":\"tiny\"}", fx.admin);
    assert_retry_later(&r, 503, "overloaded", "long requests");

    assert_false(gate("{\"closed\":false}", "closed"));
    for (guint i = 0; i < G_N_ELEMENTS(holds); i++)
        assert_int_equal(GPOINTER_TO_UINT(g_thread_join(holds[i])), 200);
    wait_gate("holding", 0);
    reply_clear(&r);
    request(&r, "POST", "/v1/test/hold", NULL, fx.admin);
    assert_int_equal(r.status, 200);
}

/* [limits] sessions=2: a third session is refused to that token alone, forks count too. */
static void
test_sessions_limit(void **state)
{
    g_autofree char *a = new_token("limit-a");
    g_autofree char *b = new_token("limit-b");
    g_autofree char *fork = NULL;
    g_auto(Reply) r = {0};

    for (int i = 0; i < 2; i++) {
        reply_clear(&r);
        request(&r, "POST", "/v1/sessions", "{\"template\":\"tiny\"}", a);
        assert_int_equal(r.status, 201);
    }
    fork = g_strdup_printf("/v1/sessions/%s/fork",
                           json_object_get_string_member(json_node_get_object(r.body), "id"));
    reply_clear(&r);
    request(&r, "POST", "/v1/sessions", "{\"template\":\"tiny\"}", a);
    assert_retry_later(&r, 429, "rate_limited", "[limits] sessions allows 2");
    reply_clear(&r);
    request(&r, "POST", fork, "{\"count\":1}", a);
    assert_retry_later(&r, 429, "rate_limited", "[limits] sessions allows 2");
    /* Another token, and the admin, are not affected. */
    reply_clear(&r);
    request(&r, "POST", "/v1/sessions", "{\"template\":\"tiny\"}", b);
    assert_int_equal(r.status, 201);
    reply_clear(&r);
    request(&r, "POST", "/v1/sessions", "{\"template\":\"tiny\"}", fx.admin);
    assert_int_equal(r.status, 201);
    reply_clear(&r);
    request(&r, "GET", "/v1/audit?operation=session.create", NULL, fx.admin);
    assert_int_equal(r.status, 200);
    assert_non_null(strstr(r.text, "rate_limited"));
}

/* [limits] rate=1 burst=8: the bucket's 8 go at once; past them, 429; others go on. */
static void
test_rate_limit(void **state)
{
    g_autofree char *c = new_token("rate-c");
    g_autofree char *d = new_token("rate-d");
    g_auto(Reply) r = {0};
    gboolean limited = FALSE;

    for (int i = 0; i < 8; i++) {
        reply_clear(&r);
        request(&r, "GET", "/v1/sessions", NULL, c);
        assert_int_equal(r.status, 200);
    }
    /* One request a second comes back: at full speed, one of these meets an empty bucket. */
    for (int i = 0; i < 200 && !limited; i++) {
        reply_clear(&r);
        request(&r, "GET", "/v1/sessions", NULL, c);
        limited = r.status != 200;
    }
    assert_retry_later(&r, 429, "rate_limited", "[limits] rate 1 requests per second");
    reply_clear(&r);
    request(&r, "GET", "/v1/sessions", NULL, d);
    assert_int_equal(r.status, 200);
    reply_clear(&r);
    request(&r, "GET", "/v1/sessions", NULL, fx.admin);
    assert_int_equal(r.status, 200);
    /* Health is nobody's: never limited. */
    reply_clear(&r);
    request(&r, "GET", "/v1/healthz", NULL, NULL);
    assert_int_equal(r.status, 200);
}

static void
own_group(gpointer unused)
{
    (void)setpgid(0, 0);
}

static int
setup(void **state)
{
    g_autoptr(GSubprocessLauncher) launcher = NULL;
    g_autofree char *sdir = NULL;
    g_autofree char *policy = NULL;
    g_autofree char *disk = NULL;
    g_autofree char *token_path = NULL;
    g_autofree char *import = NULL;
    g_auto(Reply) r = {0};
    const char *create[] = {"qemu-img", "create", "-q", "-f", "qcow2", NULL, "64M", NULL};

    fx.dir = g_dir_make_tmp("carrel-limits-XXXXXX", NULL);
    disk = g_build_filename(fx.dir, "disk.qcow2", NULL);
    create[5] = disk;
    assert_true(carrel_util_run(create, 60, NULL, NULL, NULL));
    policy = g_build_filename(fx.dir, "default.policy", NULL);
    assert_true(g_file_set_contents(policy, "[limits]\nsessions=2\ncreates=1\nrate=1\nburst=8\n",
                                    -1, NULL));
    sdir = g_build_filename(fx.dir, "state", NULL);
    launcher = g_subprocess_launcher_new(G_SUBPROCESS_FLAGS_STDOUT_SILENCE |
                                         G_SUBPROCESS_FLAGS_STDERR_SILENCE);
    g_subprocess_launcher_set_child_setup(launcher, own_group, NULL, NULL);
    fx.daemon = g_subprocess_launcher_spawn(
        launcher, NULL, g_getenv("CARREL_DAEMON"), "--state-dir", sdir, "--socket", "",
        "--libvirt-uri", "test:///default", "--listen", "127.0.0.1:0", "--test-hooks", "--policy",
        policy, "--api-long-threads", LONG_THREADS, "--api-queue", LONG_QUEUE, NULL);
    assert_non_null(fx.daemon);
    fx.url = test_daemon_url(sdir, 60, NULL);
    assert_non_null(fx.url);
    fx.http = soup_session_new_with_options("timeout", 60, NULL);
    token_path = g_build_filename(sdir, "admin.token", NULL);
    for (int i = 0; i < 200 && !g_file_get_contents(token_path, &fx.admin, NULL, NULL); i++)
        g_usleep(50 * 1000);
    assert_non_null(fx.admin);
    g_strstrip(fx.admin);
    import = g_strdup_printf("{\"name\":\"tiny\",\"disk\":\"%s\",\"format\":\"qcow2\"}", disk);
    request(&r, "POST", "/v1/templates", import, fx.admin);
    assert_int_equal(r.status, 201);
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
    g_free(fx.admin);
    g_free(fx.url);
    if (!g_getenv("CARREL_TEST_KEEP"))
        carrel_util_remove_tree(fx.dir, NULL);
    g_free(fx.dir);
    return 0;
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_long_pool_full),
        cmocka_unit_test(test_sessions_limit),
        cmocka_unit_test(test_rate_limit),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
