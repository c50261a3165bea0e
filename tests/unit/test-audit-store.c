/* store: tokens, the v7 (principals) migration and the audit log's hash chain. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#define CARREL_STORE_PRIV_H_ALLOW
#include "store/store-priv.h"

static CarrelStore *
open_memory(void)
{
    g_autoptr(GError) error = NULL;
    CarrelStore *store = carrel_store_open(":memory:", &error);

    assert_non_null(store);
    assert_null(error);
    return store;
}

static void
assert_error(GError *error, CarrelErrorCode code, const char *message)
{
    assert_non_null(error);
    if (error->domain != CARREL_ERROR || error->code != (int)code)
        fail_msg("wrong error %d: %s", error->code, error->message);
    if (message)
        assert_string_equal(error->message, message);
}

/* Raw SQL on the store's own connection: what someone with sqlite3 and the file can do. */
static void
raw_exec(CarrelStore *store, const char *sql)
{
    char *msg = NULL;

    if (sqlite3_exec(store->db, sql, NULL, NULL, &msg) != SQLITE_OK)
        fail_msg("'%s' failed: %s", sql, msg);
}

static gint64
raw_count(CarrelStore *store, const char *table)
{
    g_autofree char *sql = g_strdup_printf("SELECT count(*) FROM %s", table);
    sqlite3_stmt *stmt = NULL;
    gint64 n;

    assert_int_equal(sqlite3_prepare_v2(store->db, sql, -1, &stmt, NULL), SQLITE_OK);
    assert_int_equal(sqlite3_step(stmt), SQLITE_ROW);
    n = sqlite3_column_int64(stmt, 0);
    sqlite3_finalize(stmt);
    return n;
}

static void
insert_template(CarrelStore *store, const char *name, guint version)
{
    g_autoptr(CarrelTemplate) t = carrel_template_new();
    g_autoptr(GError) error = NULL;

    t->name = g_strdup(name);
    t->version = version;
    t->sha256 = g_strdup("0123456789abcdef");
    t->format = g_strdup("qcow2");
    t->boot = CARREL_BOOT_DIRECT;
    t->dir = g_strdup("templates/x");
    t->disk_path = g_strdup("templates/x/base.qcow2");
    t->created_at = 1700000000;
    assert_true(carrel_store_template_insert(store, t, &error));
}

static void
insert_token(CarrelStore *store, const char *id, const char *label, CarrelRole role,
             gint64 created_at, const char *hash)
{
    g_autoptr(CarrelToken) token = carrel_token_new();
    g_autoptr(GError) error = NULL;

    token->id = g_strdup(id);
    token->label = g_strdup(label);
    token->role = role;
    token->created_at = created_at;
    assert_true(carrel_store_token_insert(store, token, hash, &error));
    assert_null(error);
}

/* A token's policies come back as they went in; none is NULL (any). */
static void
test_token_policies(void **state)
{
    g_autoptr(CarrelStore) store = open_memory();
    g_autoptr(CarrelToken) token = carrel_token_new();
    g_autoptr(CarrelToken) back = NULL;
    g_autoptr(CarrelToken) any = NULL;
    g_autoptr(GError) error = NULL;
    char *policies[] = {(char *)"small", (char *)"web.v2", NULL};

    token->id = g_strdup("t-000000000001");
    token->label = g_strdup("limited");
    token->role = CARREL_ROLE_AGENT;
    token->policies = g_strdupv(policies);
    assert_true(carrel_store_token_insert(store, token, "hash-1", &error));
    insert_token(store, "t-000000000002", "free", CARREL_ROLE_AGENT, 1, "hash-2");
    back = carrel_store_token_by_hash(store, "hash-1", &error);
    assert_non_null(back);
    assert_int_equal(g_strv_length(back->policies), 2);
    assert_string_equal(back->policies[0], "small");
    assert_string_equal(back->policies[1], "web.v2");
    any = carrel_store_token_get(store, "free", &error);
    assert_non_null(any);
    assert_null(any->policies);
}

/* A token's secret (its hash) never appears in an error: messages reach logs and clients. */
static void
assert_no_secret(GError *error, const char *hash)
{
    assert_non_null(error);
    assert_null(strstr(error->message, hash));
}

static void
test_token_insert_and_find(void **state)
{
    g_autoptr(CarrelStore) store = open_memory();
    g_autoptr(GError) error = NULL;
    g_autoptr(CarrelToken) clash = carrel_token_new();
    g_autoptr(CarrelToken) found = NULL;
    g_autoptr(GPtrArray) list = NULL;

    insert_token(store, "t-000000000001", "ci", CARREL_ROLE_ADMIN, 100, "aaaa1111");
    insert_token(store, "t-000000000002", "bot", CARREL_ROLE_AGENT, 200, "bbbb2222");
    clash->id = g_strdup("t-000000000003");
    clash->label = g_strdup("ci");
    clash->role = CARREL_ROLE_REVIEWER;
    assert_false(carrel_store_token_insert(store, clash, "cccc3333", &error));
    assert_error(error, CARREL_ERROR_EXISTS, "a token named 'ci' already exists");
    assert_no_secret(error, "cccc3333");
    g_clear_error(&error);
    g_free(clash->label);
    clash->label = g_strdup("other");
    assert_false(carrel_store_token_insert(store, clash, "aaaa1111", &error));
    assert_error(error, CARREL_ERROR_EXISTS, NULL);
    assert_no_secret(error, "aaaa1111");
    g_clear_error(&error);
    /* No credential may be the daemon. */
    clash->role = CARREL_ROLE_SYSTEM;
    assert_false(carrel_store_token_insert(store, clash, "cccc3333", &error));
    assert_error(error, CARREL_ERROR_INVALID_ARG, NULL);
    g_clear_error(&error);

    found = carrel_store_token_by_hash(store, "aaaa1111", &error);
    assert_non_null(found);
    assert_string_equal(found->id, "t-000000000001");
    assert_string_equal(found->label, "ci");
    assert_int_equal(found->role, CARREL_ROLE_ADMIN);
    assert_int_equal(found->created_at, 100);
    assert_int_equal(found->last_used_at + found->expires_at + found->revoked_at, 0);
    assert_null(carrel_store_token_by_hash(store, "zzzz", &error));
    assert_null(error);
    g_clear_pointer(&found, carrel_token_free);
    found = carrel_store_token_get(store, "bot", &error);
    assert_string_equal(found->id, "t-000000000002");
    g_clear_pointer(&found, carrel_token_free);
    found = carrel_store_token_get(store, "t-000000000001", &error);
    assert_string_equal(found->label, "ci");
    assert_null(carrel_store_token_get(store, "nope", &error));
    assert_error(error, CARREL_ERROR_NOT_FOUND, "token 'nope' does not exist");
    g_clear_error(&error);

    /* Oldest first, whatever the insertion order. */
    insert_token(store, "t-000000000004", "early", CARREL_ROLE_REVIEWER, 50, "dddd4444");
    list = carrel_store_token_list(store, &error);
    assert_int_equal(list->len, 3);
    assert_string_equal(((CarrelToken *)list->pdata[0])->label, "early");
    assert_string_equal(((CarrelToken *)list->pdata[1])->label, "ci");
    assert_string_equal(((CarrelToken *)list->pdata[2])->label, "bot");

    /* A row whose role this build does not know is an error, never some default role. */
    assert_int_equal(sqlite3_exec(store->db, "UPDATE tokens SET role = 'root' WHERE label = 'bot'",
                                  NULL, NULL, NULL),
                     SQLITE_OK);
    assert_null(carrel_store_token_by_hash(store, "bbbb2222", &error));
    assert_error(error, CARREL_ERROR_STORE, NULL);
}

static gint64
token_field(CarrelStore *store, const char *id, gboolean revoked)
{
    g_autoptr(CarrelToken) token = carrel_store_token_get(store, id, NULL);

    assert_non_null(token);
    return revoked ? token->revoked_at : token->last_used_at;
}

static void
test_token_touch_revoke_rotate(void **state)
{
    g_autoptr(CarrelStore) store = open_memory();
    g_autoptr(GError) error = NULL;
    g_autoptr(CarrelToken) again = carrel_token_new();
    g_autoptr(CarrelToken) found = NULL;
    const char *id = "t-000000000001";

    insert_token(store, id, "ci", CARREL_ROLE_AGENT, 100, "aaaa1111");
    insert_token(store, "t-000000000002", "bot", CARREL_ROLE_AGENT, 100, "bbbb2222");
    assert_true(carrel_store_token_touch(store, id, 1000, &error));
    assert_int_equal(token_field(store, id, FALSE), 1000);
    /* Written only when the stored time is over a minute older. */
    assert_true(carrel_store_token_touch(store, id, 1060, &error));
    assert_int_equal(token_field(store, id, FALSE), 1000);
    assert_true(carrel_store_token_touch(store, id, 1061, &error));
    assert_int_equal(token_field(store, id, FALSE), 1061);
    assert_false(carrel_store_token_touch(store, "t-nope", 2000, &error));
    assert_error(error, CARREL_ERROR_NOT_FOUND, "token 't-nope' does not exist");
    g_clear_error(&error);

    assert_true(carrel_store_token_revoke(store, id, 3000, &error));
    assert_int_equal(token_field(store, id, TRUE), 3000);
    assert_false(carrel_store_token_revoke(store, id, 3001, &error));
    assert_error(error, CARREL_ERROR_WRONG_STATE, "token 't-000000000001' is revoked already");
    g_clear_error(&error);
    assert_int_equal(token_field(store, id, TRUE), 3000);
    assert_false(carrel_store_token_revoke(store, "t-nope", 3000, &error));
    assert_error(error, CARREL_ERROR_NOT_FOUND, "token 't-nope' does not exist");
    g_clear_error(&error);
    /* A revoked token is still found by its secret (to say why it fails) and keeps its name. */
    found = carrel_store_token_by_hash(store, "aaaa1111", &error);
    assert_int_equal(found->revoked_at, 3000);
    again->id = g_strdup("t-000000000003");
    again->label = g_strdup("ci");
    assert_false(carrel_store_token_insert(store, again, "cccc3333", &error));
    assert_error(error, CARREL_ERROR_EXISTS, "a token named 'ci' already exists");
    g_clear_error(&error);

    assert_true(carrel_store_token_set_hash(store, "t-000000000002", "eeee5555", &error));
    assert_null(carrel_store_token_by_hash(store, "bbbb2222", &error));
    g_clear_pointer(&found, carrel_token_free);
    found = carrel_store_token_by_hash(store, "eeee5555", &error);
    assert_string_equal(found->id, "t-000000000002");
    assert_false(carrel_store_token_set_hash(store, "t-000000000002", "aaaa1111", &error));
    assert_error(error, CARREL_ERROR_EXISTS, NULL);
    assert_no_secret(error, "aaaa1111");
    g_clear_error(&error);
    assert_false(carrel_store_token_set_hash(store, "t-nope", "ffff6666", &error));
    assert_error(error, CARREL_ERROR_NOT_FOUND, "token 't-nope' does not exist");
}

typedef struct {
    char *dir;
    char *db;
} TmpDb;

static int
tmp_setup(void **state)
{
    TmpDb *t = g_new0(TmpDb, 1);

    t->dir = g_dir_make_tmp("carrel-audit-XXXXXX", NULL);
    assert_non_null(t->dir);
    t->db = g_build_filename(t->dir, "state.db", NULL);
    *state = t;
    return 0;
}

static int
tmp_teardown(void **state)
{
    TmpDb *t = *state;

    carrel_util_remove_tree(t->dir, NULL);
    g_free(t->dir);
    g_free(t->db);
    g_free(t);
    return 0;
}

/* A v6 database as carreld left it: labels optional and shared, leases and events by label. */
static void
make_v6(const char *path)
{
    g_autoptr(GError) error = NULL;
    g_autoptr(CarrelStore) store = carrel_store_open_full(path, 6, &error);

    assert_non_null(store);
    assert_int_equal(carrel_store_schema_version(store), 6);
    /* Rows as the v6 schema has them: today's inserts write columns it does not have yet. */
    raw_exec(store, "INSERT INTO templates (name, version, sha256, format, size_bytes,"
                    " virtual_size_bytes, boot, dir, disk_path, created_at) VALUES"
                    " ('tiny', 1, '0123456789abcdef', 'qcow2', 0, 0, 'direct', 'templates/x',"
                    " 'templates/x/base.qcow2', 1700000000);"
                    "INSERT INTO template_versions (name, last_version) VALUES ('tiny', 1);");
    raw_exec(store, "INSERT INTO tokens (hash, role, label, created_at) VALUES"
                    " ('h1', 'admin', 'ci', 100), ('h2', 'agent', 'ci', 200),"
                    " ('h3', 'agent', 'ci', 300), ('h4', 'reviewer', 'ci-2', 50),"
                    " ('h5', 'agent', NULL, 400), ('h6', 'agent', NULL, 500);"
                    "INSERT INTO sessions (id, name, template_name, template_version, state,"
                    " vcpus, memory_mib, dir, overlay_path, created_at, updated_at) VALUES"
                    " ('s-000000000001', 'one', 'tiny', 1, 'running', 1, 1024, 'd', 'o', 1, 1);"
                    "INSERT INTO leases (session_id, holder, since)"
                    " VALUES ('s-000000000001', 'alice', 7);"
                    "INSERT INTO events (session_id, ts, actor, kind)"
                    " VALUES ('s-000000000001', 9, 'admin', 'lifecycle');");
}

/* Old tokens keep their secrets and roles, and get ids and unique names, oldest first. */
static void
test_migrate_v6_tokens(void **state)
{
    TmpDb *t = *state;
    g_autoptr(GError) error = NULL;
    g_autoptr(CarrelStore) store = NULL;
    g_autoptr(GPtrArray) tokens = NULL;
    g_autoptr(GHashTable) ids = g_hash_table_new(g_str_hash, g_str_equal);
    g_autoptr(CarrelToken) by_hash = NULL;
    /* ci-2 was some token's own name: the second 'ci' skips it. */
    const char *labels[] = {"ci-2", "ci", "ci-3", "ci-4", "agent", "agent-2"};
    const CarrelRole roles[] = {CARREL_ROLE_REVIEWER, CARREL_ROLE_ADMIN, CARREL_ROLE_AGENT,
                                CARREL_ROLE_AGENT,    CARREL_ROLE_AGENT, CARREL_ROLE_AGENT};

    make_v6(t->db);
    store = carrel_store_open(t->db, &error);
    assert_non_null(store);
    assert_int_equal(carrel_store_schema_version(store), carrel_store_latest_schema_version());
    tokens = carrel_store_token_list(store, &error);
    assert_non_null(tokens);
    assert_int_equal(tokens->len, G_N_ELEMENTS(labels));
    for (guint i = 0; i < tokens->len; i++) {
        CarrelToken *token = tokens->pdata[i];

        assert_string_equal(token->label, labels[i]);
        assert_int_equal(token->role, roles[i]);
        assert_true(g_regex_match_simple("^t-[0-9a-f]{12}$", token->id, 0, 0));
        assert_true(g_hash_table_add(ids, token->id));
        assert_int_equal(token->last_used_at + token->expires_at + token->revoked_at, 0);
        /* Tokens older than named policies may use any. */
        assert_null(token->policies);
    }
    by_hash = carrel_store_token_by_hash(store, "h2", &error);
    assert_non_null(by_hash);
    assert_string_equal(by_hash->label, "ci-3");
    assert_int_equal(by_hash->created_at, 200);
}

/* Sessions have no owner, leases name their holder by label, events have no actor id. */
static void
test_migrate_v6_rest(void **state)
{
    TmpDb *t = *state;
    g_autoptr(GError) error = NULL;
    g_autoptr(CarrelStore) store = NULL;
    g_autoptr(CarrelSession) session = NULL;
    g_autoptr(GPtrArray) events = NULL;
    g_autofree char *holder_id = NULL;
    g_autofree char *holder = NULL;
    gint64 since = 0;
    CarrelAuditVerdict verdict = {0};
    g_autoptr(CarrelAuditRecord) rec = carrel_audit_record_new();

    make_v6(t->db);
    store = carrel_store_open(t->db, &error);
    assert_non_null(store);
    session = carrel_store_session_get(store, "one", &error);
    assert_non_null(session);
    assert_null(session->owner_id);
    assert_null(session->owner_label);
    /* Sessions older than named policies ran under the one policy there was. */
    assert_string_equal(session->policy, "default");
    assert_true(carrel_store_lease_get(store, session->id, &holder_id, &holder, &since, &error));
    assert_string_equal(holder_id, "alice");
    assert_string_equal(holder, "alice");
    assert_int_equal(since, 7);
    events = carrel_store_event_list(store, session->id, 0, 10, &error);
    assert_int_equal(events->len, 1);
    assert_string_equal(((CarrelEvent *)events->pdata[0])->actor, "admin");
    assert_null(((CarrelEvent *)events->pdata[0])->actor_id);

    /* The new audit table, empty, chained and append-only. */
    assert_true(carrel_store_audit_verify(store, &verdict, &error));
    assert_true(verdict.intact);
    assert_int_equal(verdict.rows, 0);
    rec->principal_id = g_strdup("carreld");
    rec->principal_label = g_strdup("carreld");
    rec->role = g_strdup("carreld");
    rec->operation = g_strdup("session.stop");
    rec->params_digest = carrel_audit_digest(NULL);
    rec->result = g_strdup("ok");
    assert_true(carrel_store_audit_append(store, rec, &error));
    assert_int_equal(rec->seq, 1);
    assert_int_not_equal(sqlite3_exec(store->db, "DELETE FROM audit", NULL, NULL, NULL), SQLITE_OK);
}

static CarrelAuditRecord *
make_record(const char *principal_id, const char *label, const char *operation,
            const char *session_id, const char *result, gint64 ts_us)
{
    CarrelAuditRecord *rec = carrel_audit_record_new();
    g_autoptr(JsonNode) params = json_from_string("{\"a\":1}", NULL);

    rec->ts_us = ts_us;
    rec->principal_id = g_strdup(principal_id);
    rec->principal_label = g_strdup(label);
    rec->role = g_strdup("agent");
    rec->operation = g_strdup(operation);
    rec->session_id = g_strdup(session_id);
    rec->params_digest = carrel_audit_digest(params);
    rec->result = g_strdup(result);
    rec->error_code = g_str_equal(result, "ok") ? NULL : g_strdup("POLICY_DENIED");
    return rec;
}

static void
append(CarrelStore *store, CarrelAuditRecord *rec, gint64 expected_seq)
{
    g_autoptr(GError) error = NULL;

    assert_true(carrel_store_audit_append(store, rec, &error));
    assert_null(error);
    assert_int_equal(rec->seq, expected_seq);
}

static void
append_three(CarrelStore *store)
{
    for (gint64 i = 1; i <= 3; i++) {
        g_autoptr(CarrelAuditRecord) rec =
            make_record("t-00000000000a", "alice", "session.exec", "s-000000000001", "ok", i);
        append(store, rec, i);
    }
}

static void
assert_verdict(CarrelStore *store, gboolean intact, gint64 rows, gint64 bad_seq, const char *why)
{
    g_autoptr(GError) error = NULL;
    CarrelAuditVerdict verdict = {0};

    assert_true(carrel_store_audit_verify(store, &verdict, &error));
    assert_int_equal(verdict.intact, intact);
    assert_int_equal(verdict.rows, rows);
    assert_int_equal(verdict.bad_seq, bad_seq);
    if (why)
        assert_string_equal(verdict.why, why);
    else
        assert_null(verdict.why);
    carrel_audit_verdict_clear(&verdict);
}

/* What an attacker with sqlite3 does first: the triggers only stop honest mistakes. */
static void
drop_triggers(CarrelStore *store)
{
    raw_exec(store, "DROP TRIGGER audit_no_update; DROP TRIGGER audit_no_delete");
}

static CarrelAuditRecord *
read_row(CarrelStore *store, gint64 seq)
{
    g_autoptr(GError) error = NULL;
    CarrelAuditFilter filter = {.after_seq = seq - 1, .limit = 1};
    g_autoptr(GPtrArray) rows = carrel_store_audit_list(store, &filter, &error);

    assert_non_null(rows);
    assert_int_equal(rows->len, 1);
    return g_ptr_array_steal_index(rows, 0);
}

/* Rewrites a row's label, prev_hash and hash, as a forger who knows the hash function would. */
static void
rewrite_row(CarrelStore *store, const CarrelAuditRecord *rec)
{
    sqlite3_stmt *stmt = NULL;

    assert_int_equal(sqlite3_prepare_v2(store->db,
                                        "UPDATE audit SET principal_label = ?2, prev_hash = ?3, "
                                        "hash = ?4 WHERE seq = ?1",
                                        -1, &stmt, NULL),
                     SQLITE_OK);
    sqlite3_bind_int64(stmt, 1, rec->seq);
    sqlite3_bind_text(stmt, 2, rec->principal_label, -1, SQLITE_TRANSIENT);
    sqlite3_bind_text(stmt, 3, rec->prev_hash, -1, SQLITE_TRANSIENT);
    sqlite3_bind_text(stmt, 4, rec->hash, -1, SQLITE_TRANSIENT);
    assert_int_equal(sqlite3_step(stmt), SQLITE_DONE);
    sqlite3_finalize(stmt);
}

static void
test_audit_append_chain(void **state)
{
    g_autoptr(CarrelStore) store = open_memory();
    g_autoptr(GError) error = NULL;
    g_autoptr(CarrelAuditRecord) first = make_record("t-a", "alice", "x.y", NULL, "ok", 1);
    g_autoptr(CarrelAuditRecord) second = make_record("t-b", "bob", "x.y", NULL, "denied", 2);
    g_autoptr(CarrelAuditRecord) bad = make_record("t-b", "bob", "x.y", NULL, "maybe", 3);
    g_autoptr(CarrelAuditRecord) third = make_record("t-b", "bob", "x.y", NULL, "failed", 4);
    g_autofree char *rehash = NULL;

    assert_verdict(store, TRUE, 0, 0, NULL);
    append(store, first, 1);
    assert_string_equal(first->prev_hash, CARREL_AUDIT_GENESIS);
    rehash = carrel_audit_record_hash(first);
    assert_string_equal(first->hash, rehash);
    append(store, second, 2);
    assert_string_equal(second->prev_hash, first->hash);
    /* A refused record leaves no row and no trace in rec; the chain goes on without it. */
    assert_false(carrel_store_audit_append(store, bad, &error));
    assert_error(error, CARREL_ERROR_INVALID_ARG, NULL);
    assert_int_equal(bad->seq, 0);
    assert_null(bad->hash);
    assert_null(bad->prev_hash);
    append(store, third, 3);
    assert_string_equal(third->prev_hash, second->hash);
    assert_verdict(store, TRUE, 3, 0, NULL);
    assert_int_not_equal(
        sqlite3_exec(store->db, "UPDATE audit SET result = 'ok'", NULL, NULL, NULL), SQLITE_OK);
    assert_int_not_equal(
        sqlite3_exec(store->db, "DELETE FROM audit WHERE seq = 3", NULL, NULL, NULL), SQLITE_OK);
    assert_int_equal(raw_count(store, "audit"), 3);
}

static void
test_audit_edited_row(void **state)
{
    g_autoptr(CarrelStore) store = open_memory();
    g_autoptr(CarrelAuditRecord) row = NULL;

    append_three(store);
    drop_triggers(store);
    raw_exec(store, "UPDATE audit SET principal_label = 'mallory' WHERE seq = 2");
    assert_verdict(store, FALSE, 2, 2, "row 2: hash does not match its contents");

    /* Rehashing the edited row moves the break to the next one, which names it. */
    row = read_row(store, 2);
    g_free(row->hash);
    row->hash = carrel_audit_record_hash(row);
    rewrite_row(store, row);
    assert_verdict(store, FALSE, 3, 3, "row 3: prev_hash does not match row 2");
}

static void
test_audit_first_row_forged(void **state)
{
    g_autoptr(CarrelStore) store = open_memory();
    g_autoptr(CarrelAuditRecord) row = NULL;

    append_three(store);
    drop_triggers(store);
    row = read_row(store, 1);
    g_free(row->prev_hash);
    row->prev_hash = g_strdup(row->hash);
    g_free(row->hash);
    row->hash = carrel_audit_record_hash(row);
    rewrite_row(store, row);
    assert_verdict(store, FALSE, 1, 1, "row 1: prev_hash is not the genesis hash");
}

static void
test_audit_deleted_rows(void **state)
{
    g_autoptr(CarrelStore) store = open_memory();
    g_autoptr(CarrelStore) other = open_memory();

    append_three(store);
    drop_triggers(store);
    raw_exec(store, "DELETE FROM audit WHERE seq = 2");
    assert_verdict(store, FALSE, 2, 3, "row 3 follows row 1: a row is missing");
    /* Renumbering to close the gap breaks the hash instead: seq is hashed too. */
    raw_exec(store, "UPDATE audit SET seq = 2 WHERE seq = 3");
    assert_verdict(store, FALSE, 2, 2, "row 2: hash does not match its contents");

    append_three(other);
    drop_triggers(other);
    raw_exec(other, "DELETE FROM audit WHERE seq = 1");
    assert_verdict(other, FALSE, 1, 2, "row 2 is the first: rows before it are missing");
}

static void
test_audit_swapped_rows(void **state)
{
    g_autoptr(CarrelStore) store = open_memory();

    append_three(store);
    drop_triggers(store);
    raw_exec(store, "UPDATE audit SET seq = 100 WHERE seq = 2;"
                    "UPDATE audit SET seq = 2 WHERE seq = 3;"
                    "UPDATE audit SET seq = 3 WHERE seq = 100");
    assert_verdict(store, FALSE, 2, 2, "row 2: hash does not match its contents");
}

static void
assert_seqs(CarrelStore *store, const CarrelAuditFilter *filter, const char *expected)
{
    g_autoptr(GError) error = NULL;
    g_autoptr(GPtrArray) rows = carrel_store_audit_list(store, filter, &error);
    g_autoptr(GString) seqs = g_string_new(NULL);

    assert_non_null(rows);
    for (guint i = 0; i < rows->len; i++)
        g_string_append_printf(seqs, "%s%" G_GINT64_FORMAT, i ? "," : "",
                               ((CarrelAuditRecord *)rows->pdata[i])->seq);
    assert_string_equal(seqs->str, expected);
}

static void
append_mixed(CarrelStore *store)
{
    CarrelAuditRecord *recs[] = {
        make_record("t-a", "alice", "session.exec", "s-1", "ok", 1000),
        make_record("t-b", "bob", "session.exec", "s-2", "denied", 2000),
        make_record("t-a", "alice", "session.stop", "s-1", "failed", 3000),
        make_record("t-b", "bob", "token.create", NULL, "ok", 4000),
    };

    for (guint i = 0; i < G_N_ELEMENTS(recs); i++) {
        append(store, recs[i], i + 1);
        carrel_audit_record_free(recs[i]);
    }
}

static void
test_audit_list_filters(void **state)
{
    g_autoptr(CarrelStore) store = open_memory();
    g_autoptr(GError) error = NULL;
    g_autoptr(CarrelAuditRecord) two = NULL;
    CarrelAuditFilter filter = {0};

    append_mixed(store);
    assert_seqs(store, &(CarrelAuditFilter){0}, "1,2,3,4");
    assert_seqs(store, &(CarrelAuditFilter){.after_seq = 2}, "3,4");
    assert_seqs(store, &(CarrelAuditFilter){.since_us = 2500}, "3,4");
    assert_seqs(store, &(CarrelAuditFilter){.session_id = "s-1"}, "1,3");
    assert_seqs(store, &(CarrelAuditFilter){.principal = "bob"}, "2,4");
    assert_seqs(store, &(CarrelAuditFilter){.principal = "t-a"}, "1,3");
    assert_seqs(store, &(CarrelAuditFilter){.operation = "session.exec"}, "1,2");
    assert_seqs(store, &(CarrelAuditFilter){.result = "denied"}, "2");
    assert_seqs(store, &(CarrelAuditFilter){.session_id = "s-1", .result = "failed"}, "3");
    assert_seqs(store, &(CarrelAuditFilter){.limit = 2, .after_seq = 1}, "2,3");
    assert_seqs(store, &(CarrelAuditFilter){.limit = 10000, .principal = "nobody"}, "");

    two = read_row(store, 2);
    assert_string_equal(two->principal_id, "t-b");
    assert_string_equal(two->principal_label, "bob");
    assert_string_equal(two->role, "agent");
    assert_string_equal(two->session_id, "s-2");
    assert_string_equal(two->error_code, "POLICY_DENIED");
    assert_int_equal(two->ts_us, 2000);

    filter.limit = 10001;
    assert_null(carrel_store_audit_list(store, &filter, &error));
    assert_error(error, CARREL_ERROR_INVALID_ARG, NULL);
    g_clear_error(&error);
    filter = (CarrelAuditFilter){.result = "maybe"};
    assert_null(carrel_store_audit_list(store, &filter, &error));
    assert_error(error, CARREL_ERROR_INVALID_ARG, NULL);
}

static void
test_audit_list_default_limit(void **state)
{
    g_autoptr(CarrelStore) store = open_memory();
    g_autoptr(GError) error = NULL;
    g_autoptr(GPtrArray) rows = NULL;
    CarrelAuditFilter filter = {0};

    for (gint64 i = 1; i <= 1001; i++) {
        g_autoptr(CarrelAuditRecord) rec = make_record("t-a", "alice", "x.y", NULL, "ok", i);
        append(store, rec, i);
    }
    rows = carrel_store_audit_list(store, &filter, &error);
    assert_int_equal(rows->len, 1000);
    assert_verdict(store, TRUE, 1001, 0, NULL);
}

static CarrelSessionState
session_state(CarrelStore *store, const char *id)
{
    g_autoptr(CarrelSession) s = carrel_store_session_get(store, id, NULL);

    assert_non_null(s);
    return s->state;
}

/* The state change and its audit row land together or not at all. */
static void
test_set_state_audited(void **state)
{
    g_autoptr(CarrelStore) store = open_memory();
    g_autoptr(GError) error = NULL;
    g_autoptr(CarrelSession) s = carrel_session_new();
    g_autoptr(CarrelAuditRecord) start =
        make_record("t-a", "alice", "session.start", "s-000000000001", "ok", 1);
    g_autoptr(CarrelAuditRecord) ghost =
        make_record("t-a", "alice", "session.stop", "s-nope", "ok", 2);
    g_autoptr(CarrelAuditRecord) broken =
        make_record("t-a", "alice", "session.stop", "s-000000000001", "ok", 3);

    insert_template(store, "tiny", 1);
    s->id = g_strdup("s-000000000001");
    s->name = g_strdup("one");
    s->template_name = g_strdup("tiny");
    s->template_version = 1;
    s->vcpus = 1;
    s->memory_mib = 1024;
    s->dir = g_strdup("d");
    s->overlay_path = g_strdup("o");
    assert_true(carrel_store_session_insert(store, s, &error));

    assert_true(carrel_store_session_set_state_audited(store, s->id, CARREL_SESSION_RUNNING, NULL,
                                                       start, &error));
    assert_int_equal(session_state(store, s->id), CARREL_SESSION_RUNNING);
    assert_int_equal(start->seq, 1);
    assert_string_equal(start->prev_hash, CARREL_AUDIT_GENESIS);
    assert_int_equal(raw_count(store, "audit"), 1);

    assert_false(carrel_store_session_set_state_audited(store, "s-nope", CARREL_SESSION_STOPPED,
                                                        NULL, ghost, &error));
    assert_error(error, CARREL_ERROR_NOT_FOUND, "session 's-nope' does not exist");
    g_clear_error(&error);
    assert_int_equal(raw_count(store, "audit"), 1);
    assert_int_equal(ghost->seq, 0);
    assert_null(ghost->hash);

    /* A record the log refuses undoes the state change too. */
    g_clear_pointer(&broken->result, g_free);
    assert_false(carrel_store_session_set_state_audited(store, s->id, CARREL_SESSION_STOPPED, NULL,
                                                        broken, &error));
    assert_error(error, CARREL_ERROR_INVALID_ARG, NULL);
    assert_int_equal(session_state(store, s->id), CARREL_SESSION_RUNNING);
    assert_int_equal(raw_count(store, "audit"), 1);
    assert_verdict(store, TRUE, 1, 0, NULL);
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_token_insert_and_find),
        cmocka_unit_test(test_token_policies),
        cmocka_unit_test(test_token_touch_revoke_rotate),
        cmocka_unit_test_setup_teardown(test_migrate_v6_tokens, tmp_setup, tmp_teardown),
        cmocka_unit_test_setup_teardown(test_migrate_v6_rest, tmp_setup, tmp_teardown),
        cmocka_unit_test(test_audit_append_chain),
        cmocka_unit_test(test_audit_edited_row),
        cmocka_unit_test(test_audit_first_row_forged),
        cmocka_unit_test(test_audit_deleted_rows),
        cmocka_unit_test(test_audit_swapped_rows),
        cmocka_unit_test(test_audit_list_filters),
        cmocka_unit_test(test_audit_list_default_limit),
        cmocka_unit_test(test_set_state_audited),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
