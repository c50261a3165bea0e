/*
 * Integration: `carrel token` and `carrel audit` as child processes against the real carreld
 * (libvirt's test driver, a temporary state dir). The tests run in order on one daemon: tokens
 * made and revoked first, then the audit rows they left, then the log tampered with.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <signal.h>
#include <string.h>

#include <sqlite3.h>

#include "client/client.h"
#include "conf/conf.h"

/* More rows than one page of `audit export`, so it has to page. */
#define BULK_ROWS 1005

typedef struct {
    char *dir;
    char *socket;
    char *state;
    char *admin_file; /* carreld's own admin.token */
    char *log;
    char *policies; /* the daemon's policy folder: small.policy */
    GSubprocess *daemon;
} Fixture;

static Fixture fx;

typedef struct {
    int status;
    char *out;
    char *err;
} CliRun;

static void
cli_run_clear(CliRun *r)
{
    g_clear_pointer(&r->out, g_free);
    g_clear_pointer(&r->err, g_free);
}

G_DEFINE_AUTO_CLEANUP_CLEAR_FUNC(CliRun, cli_run_clear)

/* `carrel --socket SOCKET --token-file TOKEN_FILE ARGS...`; the environment cannot add a token. */
static void
cli_at(const char *socket, const char *token_file, const char *const *args, CliRun *ret)
{
    static const char *const cleared_env[] = {"CARREL_TOKEN", "CARREL_URL", "CARREL_SOCKET",
                                              "CARREL_STATE_DIR", NULL};
    g_autoptr(GSubprocessLauncher) launcher =
        g_subprocess_launcher_new(G_SUBPROCESS_FLAGS_STDOUT_PIPE | G_SUBPROCESS_FLAGS_STDERR_PIPE);
    g_autoptr(GPtrArray) argv = g_ptr_array_new();
    g_autoptr(GSubprocess) child = NULL;
    g_autoptr(GError) error = NULL;

    assert_non_null(g_getenv("CARREL_CLI"));
    g_ptr_array_add(argv, (gpointer)g_getenv("CARREL_CLI"));
    g_ptr_array_add(argv, (gpointer) "--socket");
    g_ptr_array_add(argv, (gpointer)socket);
    g_ptr_array_add(argv, (gpointer) "--token-file");
    g_ptr_array_add(argv, (gpointer)token_file);
    for (guint i = 0; args[i]; i++)
        g_ptr_array_add(argv, (gpointer)args[i]);
    g_ptr_array_add(argv, NULL);
    for (guint i = 0; cleared_env[i]; i++)
        g_subprocess_launcher_unsetenv(launcher, cleared_env[i]);
    child = g_subprocess_launcher_spawnv(launcher, (const char *const *)argv->pdata, &error);
    if (!child)
        fail_msg("spawning carrel: %s", error->message);
    if (!g_subprocess_communicate_utf8(child, NULL, NULL, &ret->out, &ret->err, &error))
        fail_msg("running carrel: %s", error->message);
    assert_true(g_subprocess_get_if_exited(child));
    ret->status = g_subprocess_get_exit_status(child);
}

/* cli_at on carreld's socket. */
static void
cli(const char *token_file, const char *const *args, CliRun *ret)
{
    cli_at(fx.socket, token_file, args, ret);
}

/* Like cli with the admin token file; fails the test unless carrel exits with want. */
static void
admin_expect(int want, const char *const *args, CliRun *ret)
{
    cli(fx.admin_file, args, ret);
    if (ret->status != want)
        fail_msg("carrel %s %s: exit %d, not %d; stdout: %s; stderr: %s", args[0],
                 args[1] ? args[1] : "", ret->status, want, ret->out, ret->err);
}

static JsonNode *
parse(const char *text)
{
    g_autoptr(GError) error = NULL;
    JsonNode *node = carrel_conf_parse_json(text, strlen(text), &error);

    if (!node)
        fail_msg("not JSON (%s): %s", error->message, text);
    return node;
}

static char *
read_token(const char *path)
{
    char *text = NULL;

    assert_true(g_file_get_contents(path, &text, NULL, NULL));
    return g_strstrip(text);
}

/* The value of the "key:" line of `carrel` fields output. */
static char *
field(const char *text, const char *key)
{
    g_auto(GStrv) lines = g_strsplit(text, "\n", -1);
    g_autofree char *prefix = g_strconcat(key, ":", NULL);

    for (guint i = 0; lines[i]; i++) {
        if (g_str_has_prefix(lines[i], prefix))
            return g_strstrip(g_strdup(lines[i] + strlen(prefix)));
    }
    fail_msg("no '%s' in: %s", key, text);
    return NULL;
}

/* The token object named name in a `--json token ls` reply. */
static JsonObject *
find_token(JsonNode *reply, const char *name)
{
    JsonArray *tokens = json_object_get_array_member(json_node_get_object(reply), "tokens");

    for (guint i = 0; i < json_array_get_length(tokens); i++) {
        JsonObject *t = json_array_get_object_element(tokens, i);

        if (g_str_equal(json_object_get_string_member(t, "name"), name))
            return t;
    }
    fail_msg("no token '%s'", name);
    return NULL;
}

static int
setup(void **state)
{
    g_autoptr(GSubprocessLauncher) launcher = g_subprocess_launcher_new(G_SUBPROCESS_FLAGS_NONE);
    g_autoptr(GError) error = NULL;
    g_autofree char *small = NULL;

    fx.dir = g_dir_make_tmp("carrel-cli-trust-XXXXXX", NULL);
    fx.socket = g_build_filename(fx.dir, "carreld.sock", NULL);
    fx.state = g_build_filename(fx.dir, "state", NULL);
    fx.admin_file = g_build_filename(fx.state, "admin.token", NULL);
    fx.log = g_build_filename(fx.dir, "carreld.log", NULL);
    fx.policies = g_build_filename(fx.dir, "policies", NULL);
    small = g_build_filename(fx.policies, "small.policy", NULL);
    assert_int_equal(g_mkdir_with_parents(fx.policies, 0755), 0);
    assert_true(carrel_util_write_file(small, "[resources]\nmax_vcpus=1\n", -1, 0644, NULL));
    assert_non_null(g_getenv("CARREL_DAEMON"));
    g_subprocess_launcher_set_stderr_file_path(launcher, fx.log);
    fx.daemon = g_subprocess_launcher_spawn(
        launcher, &error, g_getenv("CARREL_DAEMON"), "--state-dir", fx.state, "--socket", fx.socket,
        "--libvirt-uri", "test:///default", "--policy-dir", fx.policies, NULL);
    assert_non_null(fx.daemon);
    for (int i = 0; i < 300 && !g_file_test(fx.socket, G_FILE_TEST_EXISTS); i++)
        g_usleep(50 * 1000);
    assert_true(g_file_test(fx.admin_file, G_FILE_TEST_EXISTS));
    return 0;
}

static int
teardown(void **state)
{
    if (fx.daemon && g_subprocess_get_identifier(fx.daemon))
        g_subprocess_send_signal(fx.daemon, SIGTERM);
    if (fx.daemon)
        g_subprocess_wait(fx.daemon, NULL, NULL);
    g_clear_object(&fx.daemon);
    if (!g_getenv("CARREL_TEST_KEEP"))
        carrel_util_remove_tree(fx.dir, NULL);
    g_clear_pointer(&fx.dir, g_free);
    g_clear_pointer(&fx.socket, g_free);
    g_clear_pointer(&fx.state, g_free);
    g_clear_pointer(&fx.admin_file, g_free);
    g_clear_pointer(&fx.log, g_free);
    g_clear_pointer(&fx.policies, g_free);
    return 0;
}

/* `token add NAME` with more arguments; returns the secret, after checking it was shown once. */
static char *
token_add(const char *name, const char *role, const char *expires)
{
    g_auto(CliRun) r = {0};
    g_autoptr(JsonNode) reply = NULL;
    JsonObject *obj;

    admin_expect(0,
                 (const char *const[]){"--json", "token", "add", name, "--role", role,
                                       expires ? "--expires" : NULL, expires, NULL},
                 &r);
    reply = parse(r.out);
    obj = json_node_get_object(reply);
    assert_string_equal(json_object_get_string_member(obj, "name"), name);
    assert_string_equal(json_object_get_string_member(obj, "role"), role);
    assert_string_equal(json_object_get_string_member(obj, "state"), "live");
    assert_true(g_str_has_prefix(json_object_get_string_member(obj, "id"), "t-"));
    assert_int_equal(JSON_NODE_HOLDS_NULL(json_object_get_member(obj, "expires_at")), !expires);
    return g_strdup(json_object_get_string_member(obj, "token"));
}

static void
test_token_add_ls(void **state)
{
    g_autofree char *alice = token_add("alice", "reviewer", "12h");
    g_autofree char *alice_file = g_build_filename(fx.dir, "alice.token", NULL);
    g_autofree char *bob_secret = NULL;
    g_autofree char *bob_role = NULL;
    g_auto(CliRun) bob = {0};
    g_auto(CliRun) ls = {0};
    g_auto(CliRun) as_alice = {0};
    g_auto(CliRun) forbidden = {0};

    assert_true(carrel_util_write_file(alice_file, alice, -1, 0600, NULL));
    /* Text output as before the token verb moved: fields, the token among them. */
    admin_expect(0, (const char *const[]){"token", "add", "bob", "--role", "agent", NULL}, &bob);
    bob_secret = field(bob.out, "token");
    assert_int_equal(strlen(bob_secret), 64);
    bob_role = field(bob.out, "role");
    assert_string_equal(bob_role, "agent");

    admin_expect(0, (const char *const[]){"token", "ls", NULL}, &ls);
    assert_true(g_str_has_prefix(ls.out, "NAME "));
    assert_non_null(strstr(ls.out, "ROLE"));
    assert_non_null(strstr(ls.out, "LAST-USED"));
    assert_non_null(strstr(ls.out, "EXPIRES"));
    assert_true(
        g_regex_match_simple("^alice +t-[0-9a-f]+ +reviewer +live ", ls.out, G_REGEX_MULTILINE, 0));
    assert_true(
        g_regex_match_simple("^bob +t-[0-9a-f]+ +agent +live ", ls.out, G_REGEX_MULTILINE, 0));
    assert_null(strstr(ls.out, alice)); /* secrets are never listed */

    /* Alice's token works for what a reviewer may do, and only that. */
    cli(alice_file, (const char *const[]){"audit", "ls", NULL}, &as_alice);
    assert_int_equal(as_alice.status, 0);
    cli(alice_file, (const char *const[]){"token", "ls", NULL}, &forbidden);
    assert_int_equal(forbidden.status, 5);
    assert_non_null(strstr(forbidden.err, "\ncarrel: hint: this token's role may not do this"));
}

/* The names in a `--json policy ls` reply, comma-separated. */
static char *
policy_names(const char *out)
{
    g_autoptr(JsonNode) reply = parse(out);
    JsonArray *list = json_object_get_array_member(json_node_get_object(reply), "policies");
    g_autoptr(GString) names = g_string_new(NULL);

    for (guint i = 0; i < json_array_get_length(list); i++)
        g_string_append_printf(
            names, "%s%s", i ? "," : "",
            json_object_get_string_member(json_array_get_object_element(list, i), "name"));
    return g_string_free(g_steal_pointer(&names), FALSE);
}

/* Named policies: listed, shown, and an agent token limited to some of them. */
static void
test_policies(void **state)
{
    g_autofree char *pat_file = g_build_filename(fx.dir, "pat.token", NULL);
    g_autofree char *all = NULL;
    g_autofree char *mine = NULL;
    g_autoptr(JsonNode) shown = NULL;
    g_autoptr(JsonNode) made = NULL;
    g_auto(CliRun) ls = {0}, show = {0}, unknown = {0}, bad_token = {0}, reviewer = {0};
    g_auto(CliRun) pat = {0}, tokens = {0}, pat_ls = {0}, pat_show = {0}, pat_create = {0};
    g_auto(CliRun) pat_unknown = {0};
    JsonArray *limits;

    admin_expect(0, (const char *const[]){"--json", "policy", "ls", NULL}, &ls);
    all = policy_names(ls.out);
    assert_string_equal(all, "default,small");
    admin_expect(0, (const char *const[]){"policy", "show", "small", NULL}, &show);
    shown = parse(show.out);
    assert_int_equal(
        json_object_get_int_member(
            json_object_get_object_member(json_node_get_object(shown), "resources"), "max_vcpus"),
        1);
    admin_expect(3, (const char *const[]){"policy", "show", "nope", NULL}, &unknown);
    assert_non_null(strstr(unknown.err, "no policy named 'nope'"));

    /* A token limited to a policy that does not exist, or a reviewer's: refused. */
    admin_expect(3,
                 (const char *const[]){"token", "add", "pat", "--role", "agent", "--policy",
                                       "small", "--policy", "nope", NULL},
                 &bad_token);
    admin_expect(8,
                 (const char *const[]){"token", "add", "rita2", "--role", "reviewer", "--policy",
                                       "small", NULL},
                 &reviewer);
    admin_expect(0,
                 (const char *const[]){"--json", "token", "add", "pat", "--role", "agent",
                                       "--policy", "small", NULL},
                 &pat);
    made = parse(pat.out);
    limits = json_object_get_array_member(json_node_get_object(made), "policies");
    assert_int_equal(json_array_get_length(limits), 1);
    assert_string_equal(json_array_get_string_element(limits, 0), "small");
    admin_expect(0, (const char *const[]){"token", "ls", NULL}, &tokens);
    assert_true(g_regex_match_simple("^pat +t-[0-9a-f]+ +agent +live .* small$", tokens.out,
                                     G_REGEX_MULTILINE, 0));
    assert_true(g_regex_match_simple("^bob +t-[0-9a-f]+ +agent +live .* any$", tokens.out,
                                     G_REGEX_MULTILINE, 0));

    /* Pat sees small alone, and may not create under another policy. */
    assert_true(carrel_util_write_file(
        pat_file, json_object_get_string_member(json_node_get_object(made), "token"), -1, 0600,
        NULL));
    cli(pat_file, (const char *const[]){"--json", "policy", "ls", NULL}, &pat_ls);
    assert_int_equal(pat_ls.status, 0);
    mine = policy_names(pat_ls.out);
    assert_string_equal(mine, "small");
    cli(pat_file, (const char *const[]){"policy", "show", "default", NULL}, &pat_show);
    assert_int_equal(pat_show.status, 3);
    cli(pat_file, (const char *const[]){"create", "tiny", "--policy", "default", NULL},
        &pat_create);
    assert_int_equal(pat_create.status, 5);
    assert_non_null(strstr(pat_create.err, "only under the policies small"));
    cli(pat_file, (const char *const[]){"create", "tiny", "--policy", "nope", NULL}, &pat_unknown);
    assert_int_equal(pat_unknown.status, 3);
}

static void
test_token_revoke(void **state)
{
    g_autofree char *alice_file = g_build_filename(fx.dir, "alice.token", NULL);
    g_autofree char *revoked_state = NULL;
    g_autoptr(JsonNode) listed = NULL;
    g_auto(CliRun) revoke = {0};
    g_auto(CliRun) again = {0};
    g_auto(CliRun) unknown = {0};
    g_auto(CliRun) refused = {0};
    g_auto(CliRun) json_ls = {0};

    admin_expect(0, (const char *const[]){"token", "revoke", "alice", NULL}, &revoke);
    revoked_state = field(revoke.out, "state");
    assert_string_equal(revoked_state, "revoked");
    admin_expect(4, (const char *const[]){"token", "revoke", "alice", NULL}, &again);
    admin_expect(3, (const char *const[]){"token", "revoke", "nobody", NULL}, &unknown);

    /* The same request that worked before the revoke is now denied. */
    cli(alice_file, (const char *const[]){"audit", "ls", NULL}, &refused);
    assert_int_equal(refused.status, 5);
    assert_non_null(strstr(refused.err, "revoked"));

    admin_expect(0, (const char *const[]){"--json", "token", "ls", NULL}, &json_ls);
    listed = parse(json_ls.out);
    assert_string_equal(json_object_get_string_member(find_token(listed, "alice"), "state"),
                        "revoked");
    assert_false(
        JSON_NODE_HOLDS_NULL(json_object_get_member(find_token(listed, "alice"), "revoked_at")));
    assert_string_equal(json_object_get_string_member(find_token(listed, "bob"), "state"), "live");
}

static void
test_rotate_admin(void **state)
{
    g_autofree char *original = read_token(fx.admin_file);
    g_autofree char *copy_file = g_build_filename(fx.dir, "copy.token", NULL);
    g_autofree char *from_copy = NULL;
    g_autofree char *from_own = NULL;
    g_autofree char *now = NULL;
    g_auto(CliRun) first = {0};
    g_auto(CliRun) second = {0};
    g_auto(CliRun) stale = {0};
    g_auto(CliRun) fresh = {0};

    assert_true(carrel_util_write_file(copy_file, original, -1, 0600, NULL));
    /* Through a copy: carreld cannot have rewritten it, and carrel must not say it did. */
    cli(copy_file, (const char *const[]){"token", "rotate-admin", NULL}, &first);
    assert_int_equal(first.status, 0);
    from_copy = field(first.out, "token");
    assert_string_not_equal(from_copy, original);
    assert_non_null(strstr(first.err, "still holds the old token"));

    /* Through carreld's own file: rewritten, and said so. */
    admin_expect(0, (const char *const[]){"token", "rotate-admin", NULL}, &second);
    from_own = field(second.out, "token");
    now = read_token(fx.admin_file);
    assert_string_equal(now, from_own);
    assert_string_not_equal(from_own, from_copy);
    assert_non_null(strstr(second.err, "now holds the new token"));

    cli(copy_file, (const char *const[]){"token", "ls", NULL}, &stale);
    assert_int_equal(stale.status, 5);
    admin_expect(0, (const char *const[]){"token", "ls", NULL}, &fresh);
    assert_non_null(strstr(fresh.out, "admin"));
}

/* The entries of `--json audit ls ARGS...`. */
static JsonNode *
audit_json(const char *const *args)
{
    g_autoptr(GPtrArray) argv = g_ptr_array_new();
    g_auto(CliRun) r = {0};

    g_ptr_array_add(argv, (gpointer) "--json");
    g_ptr_array_add(argv, (gpointer) "audit");
    g_ptr_array_add(argv, (gpointer) "ls");
    for (guint i = 0; args[i]; i++)
        g_ptr_array_add(argv, (gpointer)args[i]);
    g_ptr_array_add(argv, NULL);
    admin_expect(0, (const char *const *)argv->pdata, &r);
    return parse(r.out);
}

/* "OPERATION RESULT ERROR_CODE" of entries[i]. */
static char *
audit_outcome(JsonArray *entries, guint i)
{
    JsonObject *e = json_array_get_object_element(entries, i);

    return g_strdup_printf("%s %s %s", json_object_get_string_member(e, "operation"),
                           json_object_get_string_member(e, "result"),
                           json_object_get_string_member(e, "error_code"));
}

static void
test_audit_ls(void **state)
{
    g_autoptr(JsonNode) revokes =
        audit_json((const char *const[]){"--operation", "token.revoke", NULL});
    g_autoptr(JsonNode) by_alice = audit_json((const char *const[]){"--principal", "alice", NULL});
    JsonArray *rows = json_object_get_array_member(json_node_get_object(revokes), "entries");
    JsonArray *alice_rows = json_object_get_array_member(json_node_get_object(by_alice), "entries");
    JsonObject *first;
    JsonObject *last;
    g_autofree char *forbidden = NULL;
    g_autofree char *unauthorized = NULL;
    g_auto(CliRun) table = {0};
    g_auto(CliRun) bad_limit = {0};

    admin_expect(0, (const char *const[]){"audit", "ls", NULL}, &table);
    assert_true(g_str_has_prefix(table.out, "SEQ "));
    assert_non_null(strstr(table.out, "PRINCIPAL"));
    assert_true(g_regex_match_simple("^1 +[0-9T:-]+Z +admin +admin +token\\.create +- +ok$",
                                     table.out, G_REGEX_MULTILINE, 0));
    assert_true(g_regex_match_simple("^[0-9]+ +[0-9T:-]+Z +admin +admin +token\\.revoke +- "
                                     "+ok$",
                                     table.out, G_REGEX_MULTILINE, 0));
    assert_true(g_regex_match_simple("token\\.revoke +- +failed \\(wrong_state\\)$", table.out,
                                     G_REGEX_MULTILINE, 0));

    /* Three revokes: alice's, alice's again (409), nobody's (404). */
    assert_int_equal(json_array_get_length(rows), 3);
    first = json_array_get_object_element(rows, 0);
    last = json_array_get_object_element(rows, 2);
    assert_string_equal(
        json_object_get_string_member(json_object_get_object_member(first, "principal"), "label"),
        "admin");
    assert_string_equal(json_object_get_string_member(first, "result"), "ok");
    assert_string_equal(json_object_get_string_member(last, "result"), "failed");
    assert_string_equal(json_object_get_string_member(last, "error_code"), "not_found");
    /* Alice's refusals name her: forbidden while live, unauthorized once revoked. */
    assert_int_equal(json_array_get_length(alice_rows), 2);
    forbidden = audit_outcome(alice_rows, 0);
    assert_string_equal(forbidden, "token.list denied forbidden");
    unauthorized = audit_outcome(alice_rows, 1);
    assert_string_equal(unauthorized, "auth.login denied unauthorized");

    admin_expect(2, (const char *const[]){"audit", "ls", "--limit", "0", NULL}, &bad_limit);
}

/* Adds BULK_ROWS refusals to the log (a reviewer listing tokens), straight through the API. */
static void
add_bulk_rows(void)
{
    g_autofree char *carol = token_add("carol", "reviewer", NULL);
    g_autoptr(CarrelClient) client = carrel_client_new(fx.socket, NULL, carol, 60, NULL);

    assert_non_null(client);
    for (int i = 0; i < BULK_ROWS; i++) {
        guint status = 0;

        assert_true(carrel_client_request_raw(client, "GET", "/v1/tokens", NULL, NULL, &status,
                                              NULL, NULL, NULL));
        assert_int_equal(status, 403);
    }
}

/* Checks an export: one compact JSON object per line, seq 1, 2, ... n. */
static void
check_export(const char *text, gint64 n)
{
    g_auto(GStrv) lines = g_strsplit(text, "\n", -1);

    assert_int_equal(g_strv_length(lines), n + 1);
    assert_string_equal(lines[n], ""); /* the last line ends too */
    for (gint64 i = 0; i < n; i++) {
        g_autoptr(JsonNode) entry = parse(lines[i]);

        assert_int_equal(json_object_get_int_member(json_node_get_object(entry), "seq"), i + 1);
        assert_non_null(json_object_get_string_member(json_node_get_object(entry), "hash"));
    }
}

static void
test_audit_verify_and_export(void **state)
{
    g_autofree char *out_file = g_build_filename(fx.dir, "audit.jsonl", NULL);
    g_autofree char *tmp_file = g_strconcat(out_file, ".tmp", NULL);
    g_autofree char *written = NULL;
    g_autoptr(JsonNode) verdict = NULL;
    g_autoptr(GMatchInfo) match = NULL;
    g_autoptr(GRegex) intact = g_regex_new("^audit log intact: ([0-9]+) rows\n$", 0, 0, NULL);
    g_auto(CliRun) verify = {0};
    g_auto(CliRun) verify_json = {0};
    g_auto(CliRun) to_file = {0};
    g_auto(CliRun) to_stdout = {0};
    g_autofree char *rows_text = NULL;
    gint64 rows;

    add_bulk_rows();
    admin_expect(0, (const char *const[]){"audit", "verify", NULL}, &verify);
    assert_true(g_regex_match(intact, verify.out, 0, &match));
    rows_text = g_match_info_fetch(match, 1);
    rows = g_ascii_strtoll(rows_text, NULL, 10);
    assert_true(rows > BULK_ROWS);
    admin_expect(0, (const char *const[]){"--json", "audit", "verify", NULL}, &verify_json);
    verdict = parse(verify_json.out);
    assert_true(json_object_get_boolean_member(json_node_get_object(verdict), "intact"));

    /* Two pages and more: every row once, in order. */
    admin_expect(0, (const char *const[]){"audit", "export", "-o", out_file, NULL}, &to_file);
    assert_non_null(strstr(to_file.out, "entries to"));
    assert_false(g_file_test(tmp_file, G_FILE_TEST_EXISTS));
    assert_true(g_file_get_contents(out_file, &written, NULL, NULL));
    check_export(written, rows);
    admin_expect(0, (const char *const[]){"audit", "export", NULL}, &to_stdout);
    /* Reading the log is not recorded, so both exports see the same rows. */
    check_export(to_stdout.out, rows);
}

static void
tamper(const char *sql)
{
    g_autofree char *db_path = g_build_filename(fx.state, "state.db", NULL);
    sqlite3 *db = NULL;
    char *message = NULL;

    assert_int_equal(sqlite3_open_v2(db_path, &db, SQLITE_OPEN_READWRITE, NULL), SQLITE_OK);
    sqlite3_busy_timeout(db, 10000);
    if (sqlite3_exec(db, sql, NULL, NULL, &message) != SQLITE_OK)
        fail_msg("tampering: %s", message);
    assert_int_equal(sqlite3_changes(db), 1);
    sqlite3_close(db);
}

static void
test_audit_tampered(void **state)
{
    g_autoptr(JsonNode) verdict = NULL;
    g_auto(CliRun) verify = {0};
    g_auto(CliRun) verify_json = {0};
    JsonObject *obj;

    /* Someone with the file can drop the trigger; the hash chain still tells. */
    tamper("DROP TRIGGER audit_no_update; UPDATE audit SET operation = 'x' WHERE seq = 2;");
    admin_expect(9, (const char *const[]){"audit", "verify", NULL}, &verify);
    assert_string_equal(verify.out, "");
    assert_true(g_str_has_prefix(verify.err, "audit log broken at seq 2: "));
    admin_expect(9, (const char *const[]){"--json", "audit", "verify", NULL}, &verify_json);
    verdict = parse(verify_json.out);
    obj = json_node_get_object(verdict);
    assert_false(json_object_get_boolean_member(obj, "intact"));
    assert_int_equal(json_object_get_int_member(obj, "bad_seq"), 2);
}

/* Every failure says what to do next: on stderr after the message, in "hint" with --json. */
static void
test_error_hints(void **state)
{
    g_autofree char *alice_file = g_build_filename(fx.dir, "alice.token", NULL);
    g_autofree char *nowhere = g_build_filename(fx.dir, "nobody-listens.sock", NULL);
    g_autoptr(JsonNode) envelope = NULL;
    g_auto(CliRun) unknown = {0}, unknown_json = {0}, revoked = {0}, down = {0}, usage = {0};
    JsonObject *error;

    admin_expect(3, (const char *const[]){"show", "nope", NULL}, &unknown);
    assert_true(g_str_has_prefix(unknown.err, "carrel: "));
    assert_non_null(strstr(unknown.err, "\ncarrel: hint: 'carrel ls' lists sessions"));
    admin_expect(3, (const char *const[]){"--json", "show", "nope", NULL}, &unknown_json);
    assert_string_equal(unknown_json.err, "");
    envelope = parse(unknown_json.out);
    error = json_object_get_object_member(json_node_get_object(envelope), "error");
    assert_string_equal(json_object_get_string_member(error, "code"), "not_found");
    assert_non_null(strstr(json_object_get_string_member(error, "hint"), "'carrel ls'"));

    /* Alice's token was revoked (test_token_revoke). */
    cli(alice_file, (const char *const[]){"ls", NULL}, &revoked);
    assert_int_equal(revoked.status, 5);
    assert_non_null(strstr(revoked.err, "\ncarrel: hint: the token was refused"));

    cli_at(nowhere, fx.admin_file, (const char *const[]){"ls", NULL}, &down);
    assert_int_equal(down.status, 6);
    assert_non_null(strstr(down.err, "is carreld running?"));
    assert_non_null(strstr(down.err, "\ncarrel: hint: start carreld with scripts/quickstart"));

    admin_expect(2, (const char *const[]){"frobnicate", NULL}, &usage);
    assert_non_null(strstr(usage.err, "\ncarrel: hint: 'carrel --help' lists commands"));
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_token_add_ls),   cmocka_unit_test(test_policies),
        cmocka_unit_test(test_token_revoke),   cmocka_unit_test(test_rotate_admin),
        cmocka_unit_test(test_audit_ls),       cmocka_unit_test(test_audit_verify_and_export),
        cmocka_unit_test(test_audit_tampered), cmocka_unit_test(test_error_hints),
    };

    return cmocka_run_group_tests(tests, setup, teardown);
}
