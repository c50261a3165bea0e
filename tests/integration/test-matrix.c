/*
 * Integration: the role matrix, route by route and tool by tool, on a real carreld (libvirt's
 * test driver, over TCP). The routes and MCP tools are read from carreld's own tables, so a
 * route or tool added without a row here fails this test. Each row says what admin, the owning
 * agent, another agent, a reviewer and a caller without credentials get:
 *   OK  allowed (any answer but a refusal: 2xx, or 400/409/501 from the act itself),
 *   NF  404 "session ... does not exist" (someone else's session does not exist for an agent),
 *   FB  403, UA 401.
 * Every request acts on a fresh session created by the owning agent.
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

#include "api/api-priv.h"
#include "daemon-url.h"

typedef enum { OK, NF, FB, UA } Outcome;
enum { P_ADMIN, P_OWNER, P_OTHER, P_REVIEWER, P_NONE, P_LAST };
static const char *const who_names[P_LAST] = {"admin", "owning agent", "other agent", "reviewer",
                                              "no token"};
static const char *const outcome_names[] = {"OK", "NF", "FB", "UA"};

typedef struct {
    const char *method;
    const char *pattern;
    const char *body; /* "$S" is the session's id, "$T" a fresh token name */
    Outcome expect[P_LAST];
} Row;

#define SESSION_READ                                                                               \
    {                                                                                              \
        OK, OK, NF, OK, UA                                                                         \
    }
#define SESSION_OWN                                                                                \
    {                                                                                              \
        OK, OK, NF, FB, UA                                                                         \
    }
#define EVERYONE                                                                                   \
    {                                                                                              \
        OK, OK, OK, OK, UA                                                                         \
    }
#define ADMIN_ONLY                                                                                 \
    {                                                                                              \
        OK, FB, FB, FB, UA                                                                         \
    }

static const Row rows[] = {
    {"GET", "/v1/healthz", NULL, {OK, OK, OK, OK, OK}},
    {"POST", "/v1/login", "$L", EVERYONE},
    {"POST", "/v1/logout", NULL, EVERYONE},
    {"GET", "/v1/whoami", NULL, EVERYONE},
    {"GET", "/v1/openapi.json", NULL, EVERYONE},
    {"GET", "/v1/roles", NULL, EVERYONE},
    {"GET", "/v1/tokens", NULL, ADMIN_ONLY},
    {"POST", "/v1/tokens", "{\"role\":\"agent\",\"name\":\"$T\"}", ADMIN_ONLY},
    {"POST", "/v1/tokens/admin/rotate", NULL, ADMIN_ONLY},
    {"DELETE", "/v1/tokens/*", NULL, ADMIN_ONLY},
    {"GET", "/v1/audit", NULL, {OK, FB, FB, OK, UA}},
    {"GET", "/v1/audit/verify", NULL, {OK, FB, FB, OK, UA}},
    {"GET", "/v1/stream", NULL, EVERYONE},
    {"GET", "/v1/approvals", NULL, EVERYONE},
    {"POST", "/v1/approvals/*/approve", "{\"reason\":\"r\"}", {OK, FB, FB, OK, UA}},
    {"POST", "/v1/approvals/*/deny", "{\"reason\":\"r\"}", {OK, FB, FB, OK, UA}},
    {"POST",
     "/v1/test/approvals",
     "{\"session_id\":\"$S\",\"action\":\"a.test\"}",
     {OK, OK, NF, FB, UA}},
    {"POST", "/v1/test/hold", NULL, EVERYONE},
    {"POST", "/v1/test/gate", "{}", EVERYONE},
    {"GET", "/v1/sessions/*/control", NULL, SESSION_READ},
    {"POST", "/v1/sessions/*/control", "{\"action\":\"take\"}", {OK, FB, FB, OK, UA}},
    {"GET", "/v1/sessions/*/screenshots/*", NULL, SESSION_READ},
    {"GET", "/v1/version", NULL, EVERYONE},
    {"GET", "/metrics", NULL, {OK, FB, FB, OK, UA}},
    {"GET", "/v1/templates", NULL, EVERYONE},
    {"POST", "/v1/templates", "$I", ADMIN_ONLY},
    {"GET", "/v1/templates/*", NULL, EVERYONE},
    {"DELETE", "/v1/templates/*", NULL, ADMIN_ONLY},
    {"POST", "/v1/templates/*/build", NULL, ADMIN_ONLY},
    {"POST", "/v1/templates/*/warm", "{}", ADMIN_ONLY},
    {"PUT", "/v1/templates/*/pool", "{\"size\":0}", ADMIN_ONLY},
    {"GET", "/v1/pools", NULL, EVERYONE},
    {"GET", "/v1/policies", NULL, EVERYONE},
    {"GET", "/v1/policies/*", NULL, EVERYONE},
    {"GET", "/v1/jobs/*", NULL, EVERYONE},
    {"GET", "/v1/sessions", NULL, EVERYONE},
    {"POST", "/v1/sessions", "{\"template\":\"tiny\"}", {OK, OK, OK, FB, UA}},
    {"GET", "/v1/sessions/*", NULL, SESSION_READ},
    {"DELETE", "/v1/sessions/*", NULL, SESSION_OWN},
    {"POST", "/v1/sessions/*/start", NULL, SESSION_READ},
    {"POST", "/v1/sessions/*/pause", NULL, SESSION_READ},
    {"POST", "/v1/sessions/*/resume", NULL, SESSION_READ},
    {"POST", "/v1/sessions/*/hibernate", NULL, SESSION_READ},
    {"POST", "/v1/sessions/*/snapshots", "{\"name\":\"s1\"}", SESSION_READ},
    {"GET", "/v1/sessions/*/snapshots", NULL, SESSION_READ},
    {"DELETE", "/v1/sessions/*/snapshots/*", NULL, SESSION_OWN},
    {"POST", "/v1/sessions/*/revert", "{\"snapshot\":\"nope\"}", SESSION_OWN},
    {"POST", "/v1/sessions/*/fork", "{\"count\":1}", SESSION_OWN},
    {"POST", "/v1/sessions/*/stop", "{\"timeout_s\":0}", SESSION_READ},
    {"POST", "/v1/sessions/*/exec", "{\"argv\":[\"true\"]}", SESSION_OWN},
    {"GET", "/v1/sessions/*/processes", NULL, SESSION_OWN},
    {"GET", "/v1/sessions/*/processes/*", NULL, SESSION_OWN},
    {"POST", "/v1/sessions/*/processes/*/kill", "{\"signal\":\"TERM\"}", SESSION_OWN},
    {"POST", "/v1/sessions/*/processes/*/stdin", "{\"close\":true}", SESSION_OWN},
    {"GET", "/v1/sessions/*/files", NULL, SESSION_READ},
    {"PUT", "/v1/sessions/*/files", "bytes", SESSION_OWN},
    {"GET", "/v1/sessions/*/fs", NULL, SESSION_READ},
    {"GET", "/v1/sessions/*/fs/stat", NULL, SESSION_READ},
    {"POST", "/v1/sessions/*/fs/mkdir", "{\"path\":\"/tmp/d\"}", SESSION_OWN},
    {"POST", "/v1/sessions/*/fs/remove", "{\"path\":\"/tmp/d\"}", SESSION_OWN},
    {"POST", "/v1/sessions/*/fs/move", "{\"from\":\"/tmp/d\",\"to\":\"/tmp/e\"}", SESSION_OWN},
    /* A shell needs the control lease (reviewers here hold none) or an admin; agents never. */
    {"GET", "/v1/sessions/*/shell", NULL, {OK, FB, FB, FB, UA}},
    {"GET", "/v1/sessions/*/events", NULL, SESSION_READ},
    {"GET", "/v1/sessions/*/recording", NULL, SESSION_READ},
    {"GET", "/v1/sessions/*/recording/*", NULL, SESSION_READ},
    {"GET", "/v1/sessions/*/egress", NULL, SESSION_READ},
    {"GET", "/v1/sessions/*/screenshot", NULL, SESSION_READ},
    {"GET", "/v1/sessions/*/accessibility", NULL, SESSION_READ},
    {"POST", "/v1/sessions/*/computer", "{\"action\":\"left_click\",\"coordinate\":[1,1]}",
     SESSION_OWN},
    {"POST", "/v1/uploads", "not a tar", {OK, OK, OK, FB, UA}},
    {"POST", "/v1/sessions/*/artifacts", "{\"paths\":[\"/tmp\"]}", SESSION_READ},
    {"GET", "/v1/sessions/*/artifacts", NULL, SESSION_READ},
    {"GET", "/v1/artifacts/*", NULL, EVERYONE},
    {"GET", "/v1/sessions/*/diff", NULL, SESSION_READ},
    {"GET", "/v1/sessions/*/export", NULL, SESSION_READ},
    {"POST", "/mcp", "$M", EVERYONE},
    {"POST", "/v1/sessions/*/console", NULL, SESSION_READ},
    {"GET", "/v1/sessions/*/console.vv", NULL, SESSION_READ},
};

typedef struct {
    const char *name;
    const char *arguments; /* "$S" is the session's id */
    Outcome expect[P_LAST];
} ToolRow;

static const ToolRow tool_rows[] = {
    {"sandbox_create", "{\"template\":\"tiny\"}", {OK, OK, OK, FB, UA}},
    {"sandbox_list", "{}", EVERYONE},
    {"sandbox_destroy", "{\"session\":\"$S\"}", SESSION_OWN},
    {"sandbox_pause", "{\"session\":\"$S\"}", SESSION_READ},
    {"sandbox_resume", "{\"session\":\"$S\"}", SESSION_READ},
    {"sandbox_hibernate", "{\"session\":\"$S\"}", SESSION_READ},
    {"sandbox_fork", "{\"session\":\"$S\"}", SESSION_OWN},
    {"snapshot_create", "{\"session\":\"$S\",\"name\":\"s1\"}", SESSION_READ},
    {"snapshot_revert", "{\"session\":\"$S\",\"name\":\"nope\"}", SESSION_OWN},
    {"snapshot_list", "{\"session\":\"$S\"}", SESSION_READ},
    {"computer", "{\"session\":\"$S\",\"action\":\"left_click\",\"coordinate\":[1,1]}",
     SESSION_OWN},
    {"screenshot", "{\"session\":\"$S\"}", SESSION_READ},
    {"accessibility_tree", "{\"session\":\"$S\"}", SESSION_READ},
    {"command_run", "{\"session\":\"$S\",\"argv\":[\"true\"]}", SESSION_OWN},
    {"process_start", "{\"session\":\"$S\",\"argv\":[\"true\"]}", SESSION_OWN},
    {"process_list", "{\"session\":\"$S\"}", SESSION_OWN},
    {"process_read", "{\"session\":\"$S\",\"handle\":\"p1\"}", SESSION_OWN},
    {"process_kill", "{\"session\":\"$S\",\"handle\":\"p1\",\"signal\":\"KILL\"}", SESSION_OWN},
    {"file_read", "{\"session\":\"$S\",\"path\":\"/tmp/x\"}", SESSION_READ},
    {"file_write", "{\"session\":\"$S\",\"path\":\"/tmp/x\",\"content\":\"x\"}", SESSION_OWN},
    {"file_list", "{\"session\":\"$S\",\"path\":\"/tmp\"}", SESSION_READ},
    {"file_stat", "{\"session\":\"$S\",\"path\":\"/tmp\"}", SESSION_READ},
    {"file_mkdir", "{\"session\":\"$S\",\"path\":\"/tmp/d\",\"parents\":true}", SESSION_OWN},
    {"file_remove", "{\"session\":\"$S\",\"path\":\"/tmp/d\",\"recursive\":true}", SESSION_OWN},
    {"file_move", "{\"session\":\"$S\",\"path\":\"/tmp/d\",\"to\":\"/tmp/e\"}", SESSION_OWN},
};

typedef struct {
    char *dir;
    char *url;
    char *disk;
    GSubprocess *daemon;
    SoupSession *http;
    char *tokens[P_LAST]; /* P_NONE: NULL */
    guint serial;
} Fixture;

static Fixture fx;

typedef struct {
    guint status;
    JsonNode *body;
    char *text;
} Reply;

static void
reply_clear(Reply *r)
{
    g_clear_pointer(&r->body, json_node_unref);
    g_clear_pointer(&r->text, g_free);
}

G_DEFINE_AUTO_CLEANUP_CLEAR_FUNC(Reply, reply_clear)

static SoupMessage *
new_message(const char *method, const char *path, const char *body, const char *token)
{
    g_autofree char *uri = g_strconcat(fx.url, path, NULL);
    SoupMessage *msg = soup_message_new(method, uri);
    SoupMessageHeaders *h = soup_message_get_request_headers(msg);

    assert_non_null(msg);
    if (body) {
        g_autoptr(GBytes) in = g_bytes_new(body, strlen(body));
        soup_message_set_request_body_from_bytes(msg, "application/json", in);
    }
    if (token) {
        g_autofree char *v = g_strconcat("Bearer ", token, NULL);
        soup_message_headers_replace(h, "Authorization", v);
    }
    return msg;
}

static void
request(Reply *r, const char *method, const char *path, const char *body, const char *token)
{
    g_autoptr(SoupMessage) msg = new_message(method, path, body, token);
    g_autoptr(GError) error = NULL;
    g_autoptr(GBytes) out = soup_session_send_and_read(fx.http, msg, NULL, &error);
    gsize len = 0;
    const char *data;

    if (!out)
        fail_msg("%s %s: %s", method, path, error->message);
    r->status = soup_message_get_status(msg);
    data = g_bytes_get_data(out, &len);
    r->text = g_strndup(data ? data : "", len);
    r->body = len ? carrel_conf_parse_json(data, len, NULL) : NULL;
}

/* The stream never ends: its status, and its first event's text. */
static void
request_stream(Reply *r, const char *token)
{
    g_autoptr(SoupMessage) msg = new_message("GET", "/v1/stream", NULL, token);
    g_autoptr(GInputStream) in = soup_session_send(fx.http, msg, NULL, NULL);
    char buf[65536];
    gsize got = 0;

    assert_non_null(in);
    r->status = soup_message_get_status(msg);
    /* The first event ends with a blank line; what a read brings is enough to look at. */
    while (r->status == 200 && got < sizeof buf - 1 && !g_strstr_len(buf, got, "\n\n")) {
        gssize n = g_input_stream_read(in, buf + got, sizeof buf - 1 - got, NULL, NULL);
        if (n <= 0)
            break;
        got += (gsize)n;
    }
    r->text = g_strndup(buf, got);
    (void)g_input_stream_close(in, NULL, NULL);
}

static const char *
str(JsonNode *node, const char *name)
{
    assert_non_null(node);
    return json_object_get_string_member_with_default(json_node_get_object(node), name, NULL);
}

static char *
new_token(const char *role, const char *name)
{
    g_auto(Reply) r = {0};
    g_autofree char *body = g_strdup_printf("{\"role\":\"%s\",\"name\":\"%s\"}", role, name);

    request(&r, "POST", "/v1/tokens", body, fx.tokens[P_ADMIN]);
    assert_int_equal(r.status, 201);
    return g_strdup(str(r.body, "token"));
}

/* A fresh session of the owning agent, so that no request sees another's leftovers. */
static char *
new_session(void)
{
    g_auto(Reply) r = {0};

    request(&r, "POST", "/v1/sessions", "{\"template\":\"tiny\"}", fx.tokens[P_OWNER]);
    if (r.status != 201)
        fail_msg("creating the fixture session: %u %s", r.status, r.text);
    return g_strdup(str(r.body, "id"));
}

static char *
new_approval(const char *session)
{
    g_auto(Reply) r = {0};
    g_autofree char *body =
        g_strdup_printf("{\"session_id\":\"%s\",\"action\":\"a.test\"}", session);

    request(&r, "POST", "/v1/test/approvals", body, fx.tokens[P_ADMIN]);
    assert_int_equal(r.status, 201);
    return g_strdup(str(r.body, "id"));
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
    g_autofree char *recipes = NULL;
    g_autofree char *cache = NULL;
    g_autofree char *policy = NULL;
    g_autofree char *sdir = NULL;
    g_autofree char *token_path = NULL;
    g_autofree char *import = NULL;
    g_auto(Reply) r = {0};
    const char *create[] = {"qemu-img", "create", "-q", "-f", "qcow2", NULL, "64M", NULL};

    fx.dir = g_dir_make_tmp("carrel-matrix-XXXXXX", NULL);
    fx.disk = g_build_filename(fx.dir, "disk.qcow2", NULL);
    create[5] = fx.disk;
    assert_true(carrel_util_run(create, 60, NULL, NULL, NULL));
    sdir = g_build_filename(fx.dir, "state", NULL);
    recipes = g_build_filename(fx.dir, "recipes", NULL);
    cache = g_build_filename(fx.dir, "cache", NULL);
    assert_int_equal(g_mkdir_with_parents(recipes, 0755), 0);
    /* Every row makes a session of the owning agent, at full speed: [limits] out of the way
     * (test-limits.c tests them). */
    policy = g_build_filename(fx.dir, "default.policy", NULL);
    assert_true(g_file_set_contents(policy,
                                    "[limits]\nsessions=100000\ncreates=100000\n"
                                    "rate=1000000\nburst=1000000\n",
                                    -1, NULL));
    /* No recipes and a cache of its own: the admin's build request must not start a real
     * template build in the host's shared cache (the e2e tier builds there). Both streams
     * silenced and a process group of its own: what carreld starts (a libguestfs appliance for
     * a diff) is killed with it and never holds the test's output open. */
    launcher = g_subprocess_launcher_new(G_SUBPROCESS_FLAGS_STDOUT_SILENCE |
                                         G_SUBPROCESS_FLAGS_STDERR_SILENCE);
    g_subprocess_launcher_set_child_setup(launcher, own_group, NULL, NULL);
    fx.daemon = g_subprocess_launcher_spawn(
        launcher, NULL, g_getenv("CARREL_DAEMON"), "--state-dir", sdir, "--socket", "",
        "--libvirt-uri", "test:///default", "--listen", "127.0.0.1:0", "--test-hooks",
        "--recipes-dir", recipes, "--cache-dir", cache, "--policy", policy, NULL);
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
    import = g_strdup_printf("{\"name\":\"tiny\",\"disk\":\"%s\",\"format\":\"qcow2\"}", fx.disk);
    reply_clear(&r);
    request(&r, "POST", "/v1/templates", import, fx.tokens[P_ADMIN]);
    assert_int_equal(r.status, 201);
    fx.tokens[P_OWNER] = new_token("agent", "agent-a");
    fx.tokens[P_OTHER] = new_token("agent", "agent-b");
    fx.tokens[P_REVIEWER] = new_token("reviewer", "rita");
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
    if (!g_getenv("CARREL_TEST_KEEP"))
        carrel_util_remove_tree(fx.dir, NULL);
    return 0;
}

/* A reply's outcome class; session is the fixture that an agent must not learn of. */
static Outcome
classify(const Reply *r, const char *session)
{
    g_autofree char *hidden = g_strdup_printf("session '%s' does not exist", session);

    if (r->status == 401)
        return UA;
    if (r->status == 403)
        return FB;
    if (r->status == 404 && strstr(r->text, hidden))
        return NF;
    return OK;
}

static const Row *
row_for(const CarrelApiRoute *route)
{
    for (guint i = 0; i < G_N_ELEMENTS(rows); i++) {
        if (g_str_equal(rows[i].method, route->method) &&
            g_str_equal(rows[i].pattern, route->pattern))
            return &rows[i];
    }
    return NULL;
}

/* Fills the pattern's '*' segments with the fixture the route names. */
static char *
fill_path(const char *pattern, const char *session, const char *approval, const char *token_name)
{
    g_auto(GStrv) parts = g_strsplit(pattern, "/", -1);
    const char *prev = NULL;

    for (guint i = 0; parts[i]; i++) {
        if (g_str_equal(parts[i], "*")) {
            const char *v = g_str_equal(prev, "sessions")      ? session
                            : g_str_equal(prev, "approvals")   ? approval
                            : g_str_equal(prev, "templates")   ? "tiny"
                            : g_str_equal(prev, "tokens")      ? token_name
                            : g_str_equal(prev, "snapshots")   ? "nope"
                            : g_str_equal(prev, "screenshots") ? "shot-000000000000.png"
                            : g_str_equal(prev, "recording")   ? "seg-000001.webm"
                            : g_str_equal(prev, "jobs")        ? "j-nope"
                            : g_str_equal(prev, "processes")   ? "p1"
                            : g_str_equal(prev, "policies")    ? "default"
                                                               : "a-nope";
            g_free(parts[i]);
            parts[i] = g_strdup(v);
        }
        prev = parts[i];
    }
    {
        g_autofree char *path = g_strjoinv("/", parts);
        if (g_str_has_suffix(path, "/files") || g_str_has_suffix(path, "/fs") ||
            g_str_has_suffix(path, "/fs/stat"))
            return g_strconcat(path, "?path=/tmp/x", NULL);
        return g_steal_pointer(&path);
    }
}

static char *
fill_body(const char *body, int p, const char *session, const char *token_name)
{
    g_autoptr(GString) s = NULL;

    if (!body)
        return NULL;
    if (g_str_equal(body, "$L"))
        return g_strdup_printf("{\"token\":\"%s\"}", fx.tokens[p] ? fx.tokens[p] : "wrong");
    if (g_str_equal(body, "$I"))
        return g_strdup_printf("{\"name\":\"imp\",\"disk\":\"%s\",\"format\":\"qcow2\"}", fx.disk);
    if (g_str_equal(body, "$M"))
        return g_strdup("{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"tools/list\"}");
    s = g_string_new(body);
    g_string_replace(s, "$S", session, 0);
    g_string_replace(s, "$T", token_name, 0);
    return g_string_free(g_steal_pointer(&s), FALSE);
}

/* Principals in this order: refusals first, so an allowed destroy comes after them. */
static const int order[P_LAST] = {P_NONE, P_OTHER, P_REVIEWER, P_OWNER, P_ADMIN};

static void
check_route(const CarrelApiRoute *route, const Row *row, GString *failures)
{
    g_autofree char *session = new_session();
    g_autofree char *approval = new_approval(session);

    for (int k = 0; k < P_LAST; k++) {
        int p = order[k];
        g_autofree char *token_name = g_strdup_printf("tmp-%u", ++fx.serial);
        g_autofree char *throwaway = NULL;
        g_autofree char *path = NULL;
        g_autofree char *body = NULL;
        g_auto(Reply) r = {0};
        Outcome got;

        if (strstr(route->pattern, "/v1/tokens/*"))
            throwaway = new_token("agent", token_name);
        path = fill_path(route->pattern, session, approval, token_name);
        body = fill_body(row->body, p, session, token_name);
        if (g_str_equal(route->pattern, "/v1/stream"))
            request_stream(&r, fx.tokens[p]);
        else
            request(&r, route->method, path, body, fx.tokens[p]);
        got = classify(&r, session);
        if (got != row->expect[p])
            g_string_append_printf(failures, "%s %s as %s: expected %s, got %s (%u %s)\n",
                                   route->method, route->pattern, who_names[p],
                                   outcome_names[row->expect[p]], outcome_names[got], r.status,
                                   r.text);
        /* The stream shows an agent its own sessions only. */
        if (g_str_equal(route->pattern, "/v1/stream") && p == P_OTHER && strstr(r.text, session))
            g_string_append_printf(failures, "the stream shows agent-b agent-a's session\n");
        /* Rotation replaced the admin token: go on with the new one. */
        if (g_str_has_suffix(route->pattern, "/rotate") && p == P_ADMIN && r.status == 200) {
            g_free(fx.tokens[P_ADMIN]);
            fx.tokens[P_ADMIN] = g_strdup(str(r.body, "token"));
        }
    }
}

static void
test_routes(void **state)
{
    g_autoptr(GString) failures = g_string_new(NULL);
    guint checked = 0;

    for (const CarrelApiRoute *route = carrel_api_routes; route->method; route++) {
        const Row *row = row_for(route);
        if (!row) {
            g_string_append_printf(failures, "%s %s has no row in the role matrix test\n",
                                   route->method, route->pattern);
            continue;
        }
        check_route(route, row, failures);
        checked++;
    }
    if (failures->len)
        fail_msg("%s", failures->str);
    assert_int_equal(checked, G_N_ELEMENTS(rows));
}

/* A tools/call's outcome: HTTP 401, else the tool result's refusal, if any. */
static Outcome
call_tool(const char *name, const char *arguments, const char *token, const char *session,
          char **ret_text)
{
    g_autofree char *body = g_strdup_printf(
        "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"tools/call\",\"params\":{\"name\":\"%s\","
        "\"arguments\":%s}}",
        name, arguments);
    g_autofree char *hidden = g_strdup_printf("session '%s' does not exist", session);
    g_auto(Reply) r = {0};

    request(&r, "POST", "/mcp", body, token);
    *ret_text = g_strdup(r.text);
    if (r.status == 401)
        return UA;
    if (strstr(r.text, hidden))
        return NF;
    if (strstr(r.text, "may not do"))
        return FB;
    return OK;
}

static const ToolRow *
tool_row_for(const char *name)
{
    for (guint i = 0; i < G_N_ELEMENTS(tool_rows); i++) {
        if (g_str_equal(tool_rows[i].name, name))
            return &tool_rows[i];
    }
    return NULL;
}

static void
test_mcp_tools(void **state)
{
    g_autoptr(GString) failures = g_string_new(NULL);

    for (int t = 0; t < CARREL_MCP_TOOL_LAST; t++) {
        const char *name = carrel_mcp_tool_to_string((CarrelMcpTool)t);
        const ToolRow *row = tool_row_for(name);
        g_autofree char *session = NULL;

        assert_int_not_equal(carrel_api_mcp_tool_op((CarrelMcpTool)t), CARREL_OP_LAST);
        if (!row) {
            g_string_append_printf(failures, "MCP tool %s has no row in the role matrix test\n",
                                   name);
            continue;
        }
        session = new_session();
        for (int k = 0; k < P_LAST; k++) {
            int p = order[k];
            g_autoptr(GString) args = g_string_new(row->arguments);
            g_autofree char *text = NULL;
            Outcome got;

            g_string_replace(args, "$S", session, 0);
            got = call_tool(name, args->str, fx.tokens[p], session, &text);
            if (got != row->expect[p])
                g_string_append_printf(failures, "tool %s as %s: expected %s, got %s (%s)\n", name,
                                       who_names[p], outcome_names[row->expect[p]],
                                       outcome_names[got], text);
        }
    }
    if (failures->len)
        fail_msg("%s", failures->str);
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_routes),
        cmocka_unit_test(test_mcp_tools),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
