/*
 * Integration: the real carreld binary against libvirt's test driver and a temporary state
 * dir, driven over HTTP on its Unix socket through the client library.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <glib/gstdio.h>
#include <signal.h>
#include <unistd.h>
#include <string.h>

#include "client/client.h"
#include "conf/conf.h"
#include "daemon-url.h"

typedef struct {
    char *dir;
    char *socket;
    char *token;
    char *log;
    GSubprocess *daemon;
    CarrelClient *client;
    CarrelClient *anonymous;
    char *disk;
    char *kernel;
} Fixture;

static Fixture fx;

static void
run_or_fail(const char *const *argv)
{
    g_autoptr(GError) error = NULL;

    if (!carrel_util_run(argv, 60, NULL, NULL, &error))
        fail_msg("%s", error->message);
}

static void
make_images(void)
{
    g_autofree char *backed = g_build_filename(fx.dir, "backed.qcow2", NULL);
    const char *create[] = {"qemu-img", "create", "-q", "-f", "qcow2", fx.disk, "64M", NULL};
    const char *overlay[] = {"qemu-img", "create", "-q",    "-f",   "qcow2", "-F",
                             "qcow2",    "-b",     fx.disk, backed, NULL};

    g_autofree char *huge = g_build_filename(fx.dir, "huge.qcow2", NULL);
    g_autofree char *cut = g_build_filename(fx.dir, "cut.qcow2", NULL);
    const char *make_huge[] = {"qemu-img", "create", "-q", "-f", "qcow2", huge, "3T", NULL};
    const char *make_cut[] = {"qemu-img", "create", "-q", "-f", "qcow2", cut, "64M", NULL};
    const char *fill_cut[] = {"qemu-io", "-f", "qcow2", "-c", "write -P 0x5a 0 8M", cut, NULL};

    run_or_fail(create);
    run_or_fail(overlay);
    run_or_fail(make_huge);
    run_or_fail(make_cut);
    run_or_fail(fill_cut);
    /* A copy cut short: the header promises clusters the file no longer has. */
    assert_int_equal(truncate(cut, 2 * 1024 * 1024), 0);
    assert_true(carrel_util_write_file(fx.kernel, "not a kernel", -1, 0644, NULL));
}

static gboolean
wait_for_socket(void)
{
    for (int i = 0; i < 300; i++) {
        if (g_file_test(fx.socket, G_FILE_TEST_EXISTS))
            return TRUE;
        if (!g_subprocess_get_identifier(fx.daemon))
            return FALSE; /* exited */
        g_usleep(50 * 1000);
    }
    return FALSE;
}

static void
start_daemon(void)
{
    g_autofree char *state = g_build_filename(fx.dir, "state", NULL);
    g_autofree char *token_path = g_build_filename(state, "admin.token", NULL);
    const char *daemon = g_getenv("CARREL_DAEMON");
    g_autoptr(GSubprocessLauncher) launcher = g_subprocess_launcher_new(G_SUBPROCESS_FLAGS_NONE);
    g_autoptr(GError) error = NULL;

    assert_non_null(daemon);
    g_subprocess_launcher_set_stderr_file_path(launcher, fx.log);
    fx.daemon = g_subprocess_launcher_spawn(launcher, &error, daemon, "--state-dir", state,
                                            "--socket", fx.socket, "--libvirt-uri",
                                            "test:///default", "--accel", "auto", NULL);
    assert_non_null(fx.daemon);
    assert_true(wait_for_socket());
    assert_true(g_file_get_contents(token_path, &fx.token, NULL, NULL));
    g_strstrip(fx.token);
    fx.client = carrel_client_new(fx.socket, NULL, fx.token, 60, &error);
    fx.anonymous = carrel_client_new(fx.socket, NULL, NULL, 60, &error);
    assert_non_null(fx.client);
}

static int
setup(void **state)
{
    fx.dir = g_dir_make_tmp("carrel-it-XXXXXX", NULL);
    fx.socket = g_build_filename(fx.dir, "carreld.sock", NULL);
    fx.log = g_build_filename(fx.dir, "carreld.log", NULL);
    fx.disk = g_build_filename(fx.dir, "disk.qcow2", NULL);
    fx.kernel = g_build_filename(fx.dir, "vmlinuz", NULL);
    make_images();
    start_daemon();
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

/* A raw request; returns the status and leaves the parsed body in *ret_body (may be NULL). */
static guint
raw(CarrelClient *client, const char *method, const char *path, const char *body,
    JsonNode **ret_body, char **ret_request_id)
{
    g_autoptr(GBytes) in = body ? g_bytes_new(body, strlen(body)) : NULL;
    g_autoptr(GBytes) out = NULL;
    g_autoptr(GError) error = NULL;
    g_autofree char *rid = NULL;
    guint status = 0;
    gsize len = 0;
    const char *data;

    if (!carrel_client_request_raw(client, method, path, body ? "application/json" : NULL, in,
                                   &status, &out, &rid, &error))
        fail_msg("%s %s: %s", method, path, error->message);
    assert_non_null(rid);
    data = out ? g_bytes_get_data(out, &len) : NULL;
    if (ret_body)
        *ret_body = len ? carrel_conf_parse_json(data, len, NULL) : NULL;
    if (ret_request_id)
        *ret_request_id = g_steal_pointer(&rid);
    return status;
}

/* Status of a GET, 0 when the daemon cannot be reached yet. */
static guint
raw_try_status(CarrelClient *client, const char *path)
{
    guint status = 0;

    if (!carrel_client_request_raw(client, "GET", path, NULL, NULL, &status, NULL, NULL, NULL))
        return 0;
    return status;
}

static const char *
member(JsonNode *node, const char *name)
{
    assert_non_null(node);
    return json_object_get_string_member(json_node_get_object(node), name);
}

static const char *
error_code(JsonNode *node)
{
    JsonObject *err;

    assert_non_null(node);
    err = json_object_get_object_member(json_node_get_object(node), "error");
    assert_non_null(err);
    assert_non_null(json_object_get_string_member(err, "message"));
    return json_object_get_string_member(err, "code");
}

static const char *
error_message(JsonNode *node)
{
    JsonObject *err;

    assert_non_null(node);
    err = json_object_get_object_member(json_node_get_object(node), "error");
    assert_non_null(err);
    return json_object_get_string_member(err, "message");
}

/* `carrel ARGS...` with the daemon's admin token: its exit status; its stderr in *ret_err. */
static int
run_cli(const char *const *args, char **ret_err)
{
    g_autofree char *token_file = g_build_filename(fx.dir, "state", "admin.token", NULL);
    g_autoptr(GSubprocessLauncher) launcher = g_subprocess_launcher_new(
        G_SUBPROCESS_FLAGS_STDOUT_SILENCE | G_SUBPROCESS_FLAGS_STDERR_PIPE);
    g_autoptr(GPtrArray) argv = g_ptr_array_new();
    g_autoptr(GSubprocess) child = NULL;
    g_autoptr(GError) error = NULL;

    assert_non_null(g_getenv("CARREL_CLI"));
    g_ptr_array_add(argv, (gpointer)g_getenv("CARREL_CLI"));
    g_ptr_array_add(argv, (gpointer) "--socket");
    g_ptr_array_add(argv, fx.socket);
    g_ptr_array_add(argv, (gpointer) "--token-file");
    g_ptr_array_add(argv, token_file);
    for (guint i = 0; args[i]; i++)
        g_ptr_array_add(argv, (gpointer)args[i]);
    g_ptr_array_add(argv, NULL);
    g_subprocess_launcher_unsetenv(launcher, "CARREL_TOKEN");
    g_subprocess_launcher_unsetenv(launcher, "CARREL_URL");
    child = g_subprocess_launcher_spawnv(launcher, (const char *const *)argv->pdata, &error);
    if (!child)
        fail_msg("spawning carrel: %s", error->message);
    if (!g_subprocess_communicate_utf8(child, NULL, NULL, NULL, ret_err, &error))
        fail_msg("running carrel: %s", error->message);
    assert_true(g_subprocess_get_if_exited(child));
    return g_subprocess_get_exit_status(child);
}

static void
test_auth(void **state)
{
    g_autoptr(JsonNode) body = NULL;
    g_autoptr(CarrelClient) wrong = carrel_client_new(fx.socket, NULL, "wrong-token", 10, NULL);

    assert_int_equal(raw(fx.anonymous, "GET", "/v1/healthz", NULL, &body, NULL), 200);
    assert_string_equal(member(body, "status"), "ok");
    g_clear_pointer(&body, json_node_unref);
    assert_int_equal(raw(fx.anonymous, "GET", "/v1/version", NULL, &body, NULL), 401);
    assert_string_equal(error_code(body), "unauthorized");
    g_clear_pointer(&body, json_node_unref);
    assert_int_equal(raw(wrong, "GET", "/v1/sessions", NULL, &body, NULL), 401);
    assert_string_equal(error_code(body), "unauthorized");
    g_clear_pointer(&body, json_node_unref);
    /* Unknown routes need a token too: nothing is learnt without one. */
    assert_int_equal(raw(fx.anonymous, "GET", "/v1/nothing", NULL, &body, NULL), 401);
    g_clear_pointer(&body, json_node_unref);
    assert_int_equal(raw(fx.client, "GET", "/v1/version", NULL, &body, NULL), 200);
    assert_string_equal(member(body, "accel"), "tcg");
    assert_string_equal(member(body, "libvirt_uri"), "test:///default");
}

static void
test_request_ids(void **state)
{
    g_autofree char *rid = NULL;
    g_autofree char *rid2 = NULL;

    raw(fx.client, "GET", "/v1/sessions", NULL, NULL, &rid);
    raw(fx.client, "GET", "/v1/sessions", NULL, NULL, &rid2);
    assert_true(g_str_has_prefix(rid, "r-"));
    assert_string_not_equal(rid, rid2);
}

static void
test_routes_and_bodies(void **state)
{
    g_autoptr(JsonNode) body = NULL;
    g_autofree char *big = NULL;

    assert_int_equal(raw(fx.client, "GET", "/v1/nothing", NULL, &body, NULL), 404);
    assert_string_equal(error_code(body), "not_found");
    g_clear_pointer(&body, json_node_unref);
    assert_int_equal(raw(fx.client, "PUT", "/v1/sessions", "{}", &body, NULL), 405);
    g_clear_pointer(&body, json_node_unref);
    assert_int_equal(raw(fx.client, "POST", "/v1/sessions", "{\"template\":", &body, NULL), 400);
    assert_string_equal(error_code(body), "invalid_argument");
    g_clear_pointer(&body, json_node_unref);
    assert_int_equal(raw(fx.client, "POST", "/v1/sessions", "[1,2]", &body, NULL), 400);
    g_clear_pointer(&body, json_node_unref);
    big = g_strnfill(2 * 1024 * 1024, ' ');
    big[0] = '{';
    big[2 * 1024 * 1024 - 1] = '}';
    assert_int_equal(raw(fx.client, "POST", "/v1/sessions", big, &body, NULL), 413);
    assert_string_equal(error_code(body), "limit_exceeded");
    g_clear_pointer(&body, json_node_unref);
    /* The daemon still answers after refusing a large body. */
    assert_int_equal(raw(fx.client, "GET", "/v1/healthz", NULL, NULL, NULL), 200);
    assert_int_equal(raw(fx.client, "GET", "/v1/sessions/s-000000000000", NULL, &body, NULL), 404);
    assert_string_equal(error_code(body), "not_found");
    g_clear_pointer(&body, json_node_unref);
    /* Dot segments never reach a route: refused as a bad request. */
    assert_int_equal(raw(fx.client, "GET", "/v1/sessions/..%2F..%2Fetc", NULL, &body, NULL), 400);
}

/* A typed body is refused by its parser before the route's handler runs: 400 with the parser's
 * text even for a session or template that does not exist (the handler would have said 404). */
static void
test_typed_bodies(void **state)
{
    static const struct {
        const char *method, *path, *body, *message;
    } cases[] = {
        {"PUT", "/v1/templates/nope/pool", NULL, "'size' must be between 0 and 8"},
        {"PUT", "/v1/templates/nope/pool", "{\"size\":\"2\"}", "'size' must be between 0 and 8"},
        {"POST", "/v1/templates/nope/warm", "{\"version\":0}",
         "'version' must be a positive integer"},
        {"POST", "/v1/sessions/s-000000000000/fork", "{\"count\":17}",
         "'count' must be between 1 and 16"},
        {"POST", "/v1/sessions/s-000000000000/fork", "{\"snapshot\":1}",
         "'snapshot' must be a string"},
        {"POST", "/v1/sessions/s-000000000000/stop", "{\"force\":true}", "unknown member 'force'"},
        {"POST", "/v1/sessions/s-000000000000/revert", "{}", "'snapshot' is required"},
        {"POST", "/v1/sessions/s-000000000000/snapshots", "{\"name\":1}", "'name' is required"},
        {"POST", "/v1/sessions/s-000000000000/control", "{\"action\":\"grab\"}",
         "'action' must be \"take\" or \"release\""},
        {"POST", "/v1/approvals/a-000000000000/deny", "{\"reason\":1}",
         "'reason' must be a string"},
        {"POST", "/v1/tokens", "{\"role\":\"agent\"}", "'name' is required"},
        {"POST", "/v1/login", "{}", "'token' is required"},
    };

    for (guint i = 0; i < G_N_ELEMENTS(cases); i++) {
        g_autoptr(JsonNode) body = NULL;
        guint status = raw(fx.client, cases[i].method, cases[i].path, cases[i].body, &body, NULL);

        if (status != 400 || !g_str_equal(error_code(body), "invalid_argument") ||
            !g_str_equal(error_message(body), cases[i].message))
            fail_msg("%s %s %s: %u %s, want 400 '%s'", cases[i].method, cases[i].path,
                     cases[i].body ? cases[i].body : "(no body)", status,
                     body ? error_message(body) : "(no body)", cases[i].message);
    }
}

static void
test_template_import(void **state)
{
    g_autofree char *ok = g_strdup_printf("{\"name\":\"tiny\",\"disk\":\"%s\",\"format\":\"qcow2\","
                                          "\"kernel\":\"%s\",\"cmdline\":\"root=/dev/vda\"}",
                                          fx.disk, fx.kernel);
    g_autofree char *backed = g_strdup_printf("{\"name\":\"bad\",\"disk\":\"%s/backed.qcow2\","
                                              "\"format\":\"qcow2\"}",
                                              fx.dir);
    g_autofree char *wrongfmt =
        g_strdup_printf("{\"name\":\"bad\",\"disk\":\"%s\",\"format\":\"raw\"}", fx.disk);
    g_autoptr(JsonNode) body = NULL;

    assert_int_equal(raw(fx.client, "POST", "/v1/templates", ok, &body, NULL), 201);
    assert_string_equal(member(body, "ref"), "tiny@1");
    assert_string_equal(member(body, "boot"), "direct");
    assert_int_equal(strlen(member(body, "sha256")), 64);
    g_clear_pointer(&body, json_node_unref);
    assert_int_equal(raw(fx.client, "POST", "/v1/templates", backed, &body, NULL), 400);
    assert_non_null(
        strstr(json_object_get_string_member(
                   json_object_get_object_member(json_node_get_object(body), "error"), "message"),
               "backing"));
    g_clear_pointer(&body, json_node_unref);
    assert_int_equal(raw(fx.client, "POST", "/v1/templates", wrongfmt, &body, NULL), 400);
    g_clear_pointer(&body, json_node_unref);
    {
        g_autofree char *huge = g_strdup_printf(
            "{\"name\":\"bad\",\"disk\":\"%s/huge.qcow2\",\"format\":\"qcow2\"}", fx.dir);
        g_autofree char *cut = g_strdup_printf(
            "{\"name\":\"bad\",\"disk\":\"%s/cut.qcow2\",\"format\":\"qcow2\"}", fx.dir);
        g_autofree char *missing = g_strdup_printf(
            "{\"name\":\"bad\",\"disk\":\"%s/none.qcow2\",\"format\":\"qcow2\"}", fx.dir);

        assert_int_equal(raw(fx.client, "POST", "/v1/templates", huge, &body, NULL), 400);
        assert_non_null(strstr(
            json_object_get_string_member(
                json_object_get_object_member(json_node_get_object(body), "error"), "message"),
            "virtual size"));
        g_clear_pointer(&body, json_node_unref);
        assert_int_equal(raw(fx.client, "POST", "/v1/templates", cut, &body, NULL), 400);
        g_clear_pointer(&body, json_node_unref);
        assert_int_equal(raw(fx.client, "POST", "/v1/templates", missing, &body, NULL), 400);
        g_clear_pointer(&body, json_node_unref);
        /* Nothing of the refused imports is left behind. */
        assert_int_equal(raw(fx.client, "GET", "/v1/templates/bad", NULL, &body, NULL), 404);
        g_clear_pointer(&body, json_node_unref);
    }
    assert_int_equal(raw(fx.client, "GET", "/v1/templates/tiny", NULL, &body, NULL), 200);
    assert_string_equal(member(body, "name"), "tiny");
    g_clear_pointer(&body, json_node_unref);
    assert_int_equal(raw(fx.client, "GET", "/v1/templates/bad", NULL, &body, NULL), 404);
}

static char *
create_session(const char *name)
{
    g_autofree char *req = g_strdup_printf("{\"template\":\"tiny\",\"name\":\"%s\"}", name);
    g_autoptr(JsonNode) body = NULL;

    assert_int_equal(raw(fx.client, "POST", "/v1/sessions", req, &body, NULL), 201);
    assert_string_equal(member(body, "state"), "running");
    assert_string_equal(member(body, "name"), name);
    /* Its own NIC address, as carrel_net_new_mac makes them. */
    assert_true(g_str_has_prefix(member(body, "mac"), "02:"));
    assert_int_equal(strlen(member(body, "mac")), 17);
    return g_strdup(member(body, "id"));
}

static guint
session_verb(const char *id, const char *verb, const char *expect_state, const char *expect_code)
{
    g_autofree char *path = g_strdup_printf("/v1/sessions/%s/%s", id, verb);
    g_autoptr(JsonNode) body = NULL;
    guint status = raw(fx.client, "POST", path, "{\"timeout_s\":5}", &body, NULL);

    if (expect_state)
        assert_string_equal(member(body, "state"), expect_state);
    if (expect_code)
        assert_string_equal(error_code(body), expect_code);
    return status;
}

static void
test_session_lifecycle(void **state)
{
    g_autofree char *id = create_session("one");
    g_autofree char *path = g_strdup_printf("/v1/sessions/%s", id);
    g_autoptr(JsonNode) body = NULL;
    JsonArray *list;

    assert_true(g_str_has_prefix(id, "s-"));
    assert_int_equal(raw(fx.client, "GET", "/v1/sessions/one", NULL, &body, NULL), 200);
    assert_string_equal(member(body, "id"), id);
    g_clear_pointer(&body, json_node_unref);
    assert_int_equal(raw(fx.client, "GET", "/v1/sessions", NULL, &body, NULL), 200);
    list = json_object_get_array_member(json_node_get_object(body), "sessions");
    assert_int_equal(json_array_get_length(list), 1);
    g_clear_pointer(&body, json_node_unref);

    assert_int_equal(session_verb(id, "start", NULL, "wrong_state"), 409);
    assert_int_equal(session_verb(id, "stop", "stopped", NULL), 200);
    assert_int_equal(session_verb(id, "stop", NULL, "wrong_state"), 409);
    assert_int_equal(session_verb(id, "start", "running", NULL), 200);

    /* A name is unique among live sessions. */
    assert_int_equal(raw(fx.client, "POST", "/v1/sessions",
                         "{\"template\":\"tiny\",\"name\":\"one\"}", &body, NULL),
                     409);
    assert_string_equal(error_code(body), "exists");
    g_clear_pointer(&body, json_node_unref);
    /* The template cannot go while a session uses it. */
    assert_int_equal(raw(fx.client, "DELETE", "/v1/templates/tiny", NULL, &body, NULL), 409);
    g_clear_pointer(&body, json_node_unref);

    assert_int_equal(raw(fx.client, "DELETE", path, NULL, &body, NULL), 200);
    assert_string_equal(member(body, "state"), "destroyed");
    g_clear_pointer(&body, json_node_unref);
    assert_int_equal(raw(fx.client, "DELETE", path, NULL, &body, NULL), 409);
    assert_string_equal(error_code(body), "wrong_state");
    g_clear_pointer(&body, json_node_unref);
    assert_int_equal(raw(fx.client, "GET", "/v1/sessions", NULL, &body, NULL), 200);
    list = json_object_get_array_member(json_node_get_object(body), "sessions");
    assert_int_equal(json_array_get_length(list), 0);
    g_clear_pointer(&body, json_node_unref);
    assert_int_equal(raw(fx.client, "GET", "/v1/sessions?all=1", NULL, &body, NULL), 200);
    list = json_object_get_array_member(json_node_get_object(body), "sessions");
    assert_int_equal(json_array_get_length(list), 1);
}

/* File routes: bodies are bytes with their own limit; paths are checked before the guest. */
/* Bad input to the fs routes is refused before anything reaches the guest; good input reaches
 * the test driver, which has no agent. */
static void
test_fs_routes_refuse(const char *id)
{
    static const struct {
        const char *method, *suffix, *body, *code, *fragment;
        guint status;
    } cases[] = {
        {"GET", "fs", NULL, "invalid_argument", "guest path is required", 400},
        {"GET", "fs?path=tmp", NULL, "invalid_argument", "not absolute", 400},
        {"GET", "fs?path=/tmp//x", NULL, "invalid_argument", "not normalised", 400},
        {"GET", "fs?path=/tmp/", NULL, "invalid_argument", "not normalised", 400},
        {"GET", "fs/stat?path=/tmp/../etc", NULL, "invalid_argument", "'..' segment", 400},
        {"POST", "fs/mkdir", "{}", "invalid_argument", "guest path is required", 400},
        {"POST", "fs/mkdir", "{\"path\":\"/a\",\"parents\":\"yes\"}", "invalid_argument", "boolean",
         400},
        {"POST", "fs/remove", "{\"path\":\"/\",\"recursive\":true}", "invalid_argument",
         "root folder", 400},
        {"POST", "fs/move", "{\"from\":\"/a\"}", "invalid_argument", "guest path is required", 400},
        {"POST", "fs/move", "{\"from\":\"/a\",\"to\":\"b\"}", "invalid_argument", "not absolute",
         400},
        {"GET", "fs?path=/tmp", NULL, "unsupported", "test driver", 501},
        {"POST", "fs/remove", "{\"path\":\"/tmp/x\"}", "unsupported", "test driver", 501},
    };

    for (guint i = 0; i < G_N_ELEMENTS(cases); i++) {
        g_autofree char *path = g_strdup_printf("/v1/sessions/%s/%s", id, cases[i].suffix);
        g_autoptr(JsonNode) body = NULL;
        g_autofree char *text = NULL;

        assert_int_equal(raw(fx.client, cases[i].method, path, cases[i].body, &body, NULL),
                         cases[i].status);
        assert_string_equal(error_code(body), cases[i].code);
        text = json_to_string(body, FALSE);
        if (!strstr(text, cases[i].fragment))
            fail_msg("case %u: '%s' not in %s", i, cases[i].fragment, text);
    }
}

static void
test_file_routes(void **state)
{
    g_autofree char *id = create_session("files");
    g_autofree char *files = g_strdup_printf("/v1/sessions/%s/files", id);
    g_autofree char *events = g_strdup_printf("/v1/sessions/%s/events", id);
    g_autofree char *traversal = g_strdup_printf("%s?path=/tmp/../etc/shadow", files);
    g_autofree char *ok_path = g_strdup_printf("%s?path=/tmp/x", files);
    g_autofree char *exec = g_strdup_printf("/v1/sessions/%s/exec", id);
    g_autofree char *big = g_strnfill(2 * 1024 * 1024, 'x');
    g_autofree char *huge = g_strnfill(CARREL_LIMIT_FILE_BYTES + 1, 'x');
    g_autoptr(JsonNode) body = NULL;

    assert_int_equal(raw(fx.client, "GET", files, NULL, &body, NULL), 400);
    {
        g_autofree char *text = json_to_string(body, FALSE);
        assert_non_null(strstr(text, "'path' is required"));
    }
    g_clear_pointer(&body, json_node_unref);
    assert_int_equal(raw(fx.client, "GET", traversal, NULL, &body, NULL), 400);
    assert_string_equal(error_code(body), "invalid_argument");
    g_clear_pointer(&body, json_node_unref);
    assert_int_equal(
        raw(fx.client, "POST", exec, "{\"argv\":[\"cat\"],\"stdin_base64\":\"%%%\"}", &body, NULL),
        400);
    assert_string_equal(error_code(body), "invalid_argument");
    g_clear_pointer(&body, json_node_unref);
    /* Over the JSON limit but within the file limit: accepted as bytes, then the test driver
     * (no guest agent) answers "unsupported". */
    assert_int_equal(raw(fx.client, "PUT", ok_path, big, &body, NULL), 501);
    g_clear_pointer(&body, json_node_unref);
    /* Past the old 32 MiB cap: streamed to a spool file, then on to the (absent) agent. */
    assert_int_equal(raw(fx.client, "PUT", ok_path, huge, &body, NULL), 501);
    assert_string_equal(error_code(body), "unsupported");
    g_clear_pointer(&body, json_node_unref);
    /* The failed write is on the timeline, with who did it and why it failed. */
    assert_int_equal(raw(fx.client, "GET", events, NULL, &body, NULL), 200);
    {
        JsonArray *list = json_object_get_array_member(json_node_get_object(body), "events");
        JsonObject *ev;

        /* The create (by admin), then the two writes. */
        assert_int_equal(json_array_get_length(list), 3);
        ev = json_array_get_object_element(list, 0);
        assert_string_equal(json_object_get_string_member(ev, "action"), "create");
        assert_string_equal(json_object_get_string_member(ev, "actor"), "admin");
        ev = json_array_get_object_element(list, 1);
        assert_string_equal(json_object_get_string_member(ev, "action"), "file_write");
        assert_string_equal(json_object_get_string_member(ev, "actor"), "admin");
        assert_false(json_object_get_boolean_member(ev, "ok"));
    }
    g_clear_pointer(&body, json_node_unref);
    assert_int_equal(raw(fx.client, "GET", "/v1/sessions/nope/events", NULL, &body, NULL), 404);
    g_clear_pointer(&body, json_node_unref);
    test_fs_routes_refuse(id);
    g_clear_pointer(&body, json_node_unref);
    {
        g_autofree char *bad = g_strdup_printf("%s?limit=abc", events);
        g_autofree char *path = g_strdup_printf("/v1/sessions/%s", id);
        assert_int_equal(raw(fx.client, "GET", bad, NULL, NULL, NULL), 400);
        assert_int_equal(raw(fx.client, "DELETE", path, NULL, NULL, NULL), 200);
    }
}

static guint
count_sessions(void)
{
    g_autoptr(JsonNode) body = NULL;

    assert_int_equal(raw(fx.client, "GET", "/v1/sessions", NULL, &body, NULL), 200);
    return json_array_get_length(
        json_object_get_array_member(json_node_get_object(body), "sessions"));
}

/* A screen size out of range (or not WxH) is invalid_argument before anything is made. */
static void
refuse_screens(void)
{
    static const char *const bad[] = {"10x10", "100000x100", "1280x", "1281x800", "big"};
    static const char *const cli_bad[] = {"create", "tiny", "--screen", "100000x100", NULL};
    g_autofree char *err = NULL;
    guint before = count_sessions();

    for (gsize i = 0; i < G_N_ELEMENTS(bad); i++) {
        g_autofree char *req = g_strdup_printf("{\"template\":\"tiny\",\"screen\":\"%s\"}", bad[i]);
        g_autoptr(JsonNode) body = NULL;

        assert_int_equal(raw(fx.client, "POST", "/v1/sessions", req, &body, NULL), 400);
        assert_string_equal(error_code(body), "invalid_argument");
        assert_non_null(strstr(error_message(body), "screen"));
    }
    assert_int_equal(count_sessions(), before);
    /* The CLI sends the text as given: carreld's one check, exit 8 (invalid argument). */
    assert_int_equal(run_cli(cli_bad, &err), 8);
    assert_non_null(strstr(err, "out of range"));
    assert_int_equal(count_sessions(), before);
}

static void
test_create_refusals(void **state)
{
    g_autoptr(JsonNode) body = NULL;

    assert_int_equal(raw(fx.client, "POST", "/v1/sessions", "{\"template\":\"nope\"}", &body, NULL),
                     404);
    g_clear_pointer(&body, json_node_unref);
    assert_int_equal(
        raw(fx.client, "POST", "/v1/sessions", "{\"template\":\"tiny\",\"vcpus\":16}", &body, NULL),
        403);
    assert_string_equal(error_code(body), "policy_denied");
    g_clear_pointer(&body, json_node_unref);
    assert_int_equal(
        raw(fx.client, "POST", "/v1/sessions", "{\"template\":\"tiny\",\"cpus\":1}", &body, NULL),
        400);
    g_clear_pointer(&body, json_node_unref);
    refuse_screens();
}

/* NAME@VERSION is read by one parser: the CLI and every API route refuse "a@b@3" alike. */
static void
test_template_ref_same_error(void **state)
{
    static const char *const message =
        "a template reference has one '@' at most: NAME or NAME@VERSION";
    static const char *const show[] = {"template", "show", "a@b@3", NULL};
    static const char *const create[] = {"create", "--template", "a@b@3", NULL};
    g_autofree char *cli_line = g_strdup_printf("carrel: %s\n", message);
    g_autoptr(JsonNode) body = NULL;
    g_autofree char *err = NULL;

    assert_int_equal(raw(fx.client, "GET", "/v1/templates/a%40b%403", NULL, &body, NULL), 400);
    assert_string_equal(error_message(body), message);
    g_clear_pointer(&body, json_node_unref);
    assert_int_equal(raw(fx.client, "DELETE", "/v1/templates/a%40b%403", NULL, &body, NULL), 400);
    assert_string_equal(error_message(body), message);
    g_clear_pointer(&body, json_node_unref);
    assert_int_equal(
        raw(fx.client, "POST", "/v1/sessions", "{\"template\":\"a@b@3\"}", &body, NULL), 400);
    assert_string_equal(error_message(body), message);

    /* The message's line, then the hint's. */
    assert_int_not_equal(run_cli(show, &err), 0);
    assert_true(g_str_has_prefix(err, cli_line));
    assert_non_null(strstr(err, "\ncarrel: hint: "));
    g_clear_pointer(&err, g_free);
    assert_int_not_equal(run_cli(create, &err), 0);
    assert_true(g_str_has_prefix(err, cli_line));
    assert_non_null(strstr(err, "\ncarrel: hint: "));
}

/* Artifact, upload and diff routes: bad requests are clear errors; a failed extraction is
 * still recorded (the test driver has no guest agent). */
static void
test_artifact_routes(void **state)
{
    g_autofree char *id = create_session("art");
    g_autofree char *arts = g_strdup_printf("/v1/sessions/%s/artifacts", id);
    g_autofree char *diff_rel = g_strdup_printf("/v1/sessions/%s/diff?path=home", id);
    g_autofree char *path = g_strdup_printf("/v1/sessions/%s", id);
    g_autofree char *upload_id = NULL;
    g_autofree char *create = NULL;
    g_autoptr(JsonNode) body = NULL;
    static const char *const bad[] = {"{}",
                                      "{\"paths\":\"/x\"}",
                                      "{\"paths\":[\"/a/../x\"]}",
                                      "{\"paths\":[\"/\"]}",
                                      "[1]",
                                      "{\"paths\":[\"/x\"],\"max_files\":0}"};

    for (guint i = 0; i < G_N_ELEMENTS(bad); i++) {
        assert_int_equal(raw(fx.client, "POST", arts, bad[i], &body, NULL), 400);
        g_clear_pointer(&body, json_node_unref);
    }
    assert_int_equal(raw(fx.client, "POST", arts, "{\"paths\":[\"/out\"]}", &body, NULL), 201);
    assert_non_null(member(body, "error"));
    assert_string_equal(member(body, "source"), "agent");
    g_clear_pointer(&body, json_node_unref);
    assert_int_equal(raw(fx.client, "GET", arts, NULL, &body, NULL), 200);
    assert_int_equal(json_array_get_length(
                         json_object_get_array_member(json_node_get_object(body), "extractions")),
                     1);
    g_clear_pointer(&body, json_node_unref);
    assert_int_equal(raw(fx.client, "GET", "/v1/artifacts/a-000000000000", NULL, &body, NULL), 404);
    g_clear_pointer(&body, json_node_unref);
    assert_int_equal(raw(fx.client, "GET", diff_rel, NULL, &body, NULL), 400);
    g_clear_pointer(&body, json_node_unref);
    assert_int_equal(raw(fx.client, "GET", "/v1/sessions/nope/diff", NULL, &body, NULL), 404);
    g_clear_pointer(&body, json_node_unref);

    /* Uploads: stored with an id; a create naming an unknown one is refused before anything. */
    assert_int_equal(raw(fx.client, "POST", "/v1/uploads", "not really a tar", &body, NULL), 201);
    upload_id = g_strdup(member(body, "id"));
    assert_true(g_str_has_prefix(upload_id, "u-"));
    g_clear_pointer(&body, json_node_unref);
    assert_int_equal(raw(fx.client, "POST", "/v1/sessions",
                         "{\"template\":\"tiny\",\"inputs\":[{\"path\":\"/x\","
                         "\"upload\":\"u-000000000000\"}]}",
                         &body, NULL),
                     404);
    g_clear_pointer(&body, json_node_unref);
    /* A broken upload is refused before any disk or VM work; nothing is left behind. */
    create = g_strdup_printf("{\"template\":\"tiny\",\"name\":\"bad-in\",\"cold\":true,"
                             "\"inputs\":[{\"path\":\"/x\",\"upload\":\"%s\"}]}",
                             upload_id);
    assert_int_equal(raw(fx.client, "POST", "/v1/sessions", create, &body, NULL), 400);
    {
        g_autofree char *text = json_to_string(body, FALSE);
        assert_non_null(strstr(text, upload_id));
    }
    g_clear_pointer(&body, json_node_unref);
    assert_int_equal(raw(fx.client, "GET", "/v1/sessions/bad-in", NULL, &body, NULL), 404);
    g_clear_pointer(&body, json_node_unref);

    assert_int_equal(raw(fx.client, "DELETE", path, NULL, NULL, NULL), 200);
    assert_int_equal(raw(fx.client, "POST", arts, "{\"paths\":[\"/out\"]}", &body, NULL), 409);
    assert_string_equal(error_code(body), "wrong_state");
}

static void
test_template_remove_after_sessions(void **state)
{
    g_autoptr(JsonNode) body = NULL;

    if (raw(fx.client, "DELETE", "/v1/templates/tiny", NULL, &body, NULL) != 200) {
        g_autofree char *text = json_to_string(body, FALSE);
        fail_msg("template rm: %s", text);
    }
    g_clear_pointer(&body, json_node_unref);
    assert_int_equal(raw(fx.client, "GET", "/v1/templates", NULL, &body, NULL), 200);
    assert_int_equal(json_array_get_length(
                         json_object_get_array_member(json_node_get_object(body), "templates")),
                     0);
}

static void
test_token_not_logged_and_clean_exit(void **state)
{
    g_autofree char *log = NULL;
    g_autoptr(GError) error = NULL;

    kill(atoi(g_subprocess_get_identifier(fx.daemon)), SIGTERM);
    assert_true(g_subprocess_wait(fx.daemon, NULL, &error));
    assert_true(g_subprocess_get_if_exited(fx.daemon));
    assert_int_equal(g_subprocess_get_exit_status(fx.daemon), 0);
    assert_false(g_file_test(fx.socket, G_FILE_TEST_EXISTS));
    assert_true(g_file_get_contents(fx.log, &log, NULL, NULL));
    assert_non_null(strstr(log, "ready"));
    assert_null(strstr(log, fx.token));
}

/* Runs carreld with extra options to completion (it must refuse to start) and returns its log. */
static char *
refused_start(const char *opt, const char *value)
{
    g_autofree char *state = g_build_filename(fx.dir, "state-refused", NULL);
    g_autofree char *sock = g_build_filename(fx.dir, "refused.sock", NULL);
    const char *argv[] = {g_getenv("CARREL_DAEMON"), "--state-dir",     state, "--socket", sock,
                          "--libvirt-uri",           "test:///default", opt,   value,      NULL};
    g_autofree char *err = NULL;
    int status = 0;

    assert_true(carrel_util_run_status(argv, 30, &status, NULL, &err, NULL));
    assert_int_not_equal(status, 0);
    return g_steal_pointer(&err);
}

static void
test_listen_and_policy_options(void **state)
{
    g_autofree char *state_dir = g_build_filename(fx.dir, "state-tcp", NULL);
    g_autofree char *sock = g_build_filename(fx.dir, "tcp.sock", NULL);
    g_autofree char *policy = g_build_filename(fx.dir, "small.policy", NULL);
    g_autofree char *url = NULL;
    g_autofree char *err = NULL;
    g_autoptr(GSubprocess) daemon = NULL;
    g_autoptr(CarrelClient) tcp = NULL;
    g_autoptr(JsonNode) body = NULL;

    /* Never beyond loopback; a bad policy stops the daemon instead of being ignored. */
    err = refused_start("--listen", "0.0.0.0:8080");
    assert_non_null(strstr(err, "loopback"));
    g_free(err);
    err = refused_start("--screen-grace", "3601");
    assert_non_null(strstr(err, "--screen-grace must be between 0 (its default) and 3600"));
    g_free(err);
    assert_true(carrel_util_write_file(policy, "[resources]\nmax_vcpus=0\n", -1, 0644, NULL));
    err = refused_start("--policy", policy);
    assert_non_null(strstr(err, "max_vcpus"));
    assert_true(
        carrel_util_write_file(policy, "[resources]\nmax_memory_mib=512\n", -1, 0644, NULL));
    daemon =
        g_subprocess_new(G_SUBPROCESS_FLAGS_STDERR_SILENCE, NULL, g_getenv("CARREL_DAEMON"),
                         "--state-dir", state_dir, "--socket", sock, "--libvirt-uri",
                         "test:///default", "--listen", "127.0.0.1:0", "--policy", policy, NULL);
    assert_non_null(daemon);
    url = test_daemon_url(state_dir, 60, NULL);
    assert_non_null(url);
    assert_true(g_str_has_prefix(url, "http://127.0.0.1:"));
    assert_int_not_equal(test_url_port(url), 0);
    tcp = carrel_client_new(NULL, url, "no-token", 10, NULL);
    for (int i = 0; i < 100 && raw_try_status(tcp, "/v1/healthz") != 200; i++)
        g_usleep(50 * 1000);
    assert_int_equal(raw(tcp, "GET", "/v1/healthz", NULL, NULL, NULL), 200);
    assert_int_equal(raw(tcp, "GET", "/v1/sessions", NULL, NULL, NULL), 401);
    {
        g_autofree char *token_path = g_build_filename(state_dir, "admin.token", NULL);
        g_autofree char *token = NULL;
        g_autoptr(CarrelClient) admin = NULL;
        g_autofree char *req = g_strdup_printf("{\"name\":\"t\",\"disk\":\"%s\","
                                               "\"format\":\"qcow2\"}",
                                               fx.disk);
        assert_true(g_file_get_contents(token_path, &token, NULL, NULL));
        admin = carrel_client_new(NULL, url, g_strstrip(token), 10, NULL);
        assert_int_equal(raw(admin, "POST", "/v1/templates", req, NULL, NULL), 201);
        assert_int_equal(raw(admin, "POST", "/v1/sessions",
                             "{\"template\":\"t\",\"memory_mib\":1024}", &body, NULL),
                         403);
        assert_non_null(strstr(
            json_object_get_string_member(
                json_object_get_object_member(json_node_get_object(body), "error"), "message"),
            "at most 512"));
    }
    g_subprocess_send_signal(daemon, SIGTERM);
    assert_true(g_subprocess_wait(daemon, NULL, NULL));
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_auth),
        cmocka_unit_test(test_request_ids),
        cmocka_unit_test(test_routes_and_bodies),
        cmocka_unit_test(test_typed_bodies),
        cmocka_unit_test(test_template_import),
        cmocka_unit_test(test_session_lifecycle),
        cmocka_unit_test(test_file_routes),
        cmocka_unit_test(test_create_refusals),
        cmocka_unit_test(test_template_ref_same_error),
        cmocka_unit_test(test_artifact_routes),
        cmocka_unit_test(test_template_remove_after_sessions),
        cmocka_unit_test(test_listen_and_policy_options),
        cmocka_unit_test(test_token_not_logged_and_clean_exit),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
