#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>
#include <glib/gstdio.h>
#include <sys/stat.h>

#define CARREL_STORE_PRIV_H_ALLOW
#include "store/store-priv.h"

static CarrelTemplate *
make_template(const char *name, guint version)
{
    CarrelTemplate *t = carrel_template_new();

    t->name = g_strdup(name);
    t->version = version;
    t->sha256 = g_strdup("0123456789abcdef");
    t->format = g_strdup("qcow2");
    t->size_bytes = 1000;
    t->virtual_size_bytes = 4096;
    t->boot = CARREL_BOOT_DIRECT;
    t->dir = g_strdup_printf("templates/%s/%u", name, version);
    t->disk_path = g_strdup_printf("templates/%s/%u/base.qcow2", name, version);
    t->kernel_path = g_strdup("vmlinuz");
    t->created_at = 1700000000 + version;
    return t;
}

static CarrelSession *
make_session(const char *id, const char *name, const char *tmpl, guint version)
{
    CarrelSession *s = carrel_session_new();

    s->id = g_strdup(id);
    s->name = g_strdup(name);
    s->template_name = g_strdup(tmpl);
    s->template_version = version;
    s->state = CARREL_SESSION_CREATING;
    s->vcpus = 1;
    s->memory_mib = 1024;
    s->dir = g_strdup_printf("sessions/%s", id);
    s->overlay_path = g_strdup_printf("sessions/%s/disk.qcow2", id);
    s->created_at = 1700000000;
    s->updated_at = 1700000000;
    return s;
}

static void
insert_template(CarrelStore *store, const char *name, guint version)
{
    g_autoptr(CarrelTemplate) t = make_template(name, version);
    g_autoptr(GError) error = NULL;

    assert_true(carrel_store_template_insert(store, t, &error));
    assert_null(error);
}

static void
insert_session(CarrelStore *store, const char *id, const char *name, const char *tmpl,
               guint version)
{
    g_autoptr(CarrelSession) s = make_session(id, name, tmpl, version);
    g_autoptr(GError) error = NULL;

    assert_true(carrel_store_session_insert(store, s, &error));
    assert_null(error);
}

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

typedef struct {
    char *dir;
    char *db;
} TmpDb;

static int
tmp_setup(void **state)
{
    TmpDb *t = g_new0(TmpDb, 1);

    t->dir = g_dir_make_tmp("carrel-store-XXXXXX", NULL);
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

/* Raw sqlite access to a file, for what a store must refuse or what it must have written. */
static void
raw_exec(const char *path, const char *sql)
{
    sqlite3 *db = NULL;

    assert_int_equal(sqlite3_open(path, &db), SQLITE_OK);
    assert_int_equal(sqlite3_exec(db, sql, NULL, NULL, NULL), SQLITE_OK);
    sqlite3_close(db);
}

static char *
raw_text(const char *path, const char *sql)
{
    sqlite3 *db = NULL;
    sqlite3_stmt *stmt = NULL;
    char *text;

    assert_int_equal(sqlite3_open(path, &db), SQLITE_OK);
    assert_int_equal(sqlite3_prepare_v2(db, sql, -1, &stmt, NULL), SQLITE_OK);
    assert_int_equal(sqlite3_step(stmt), SQLITE_ROW);
    text = g_strdup((const char *)sqlite3_column_text(stmt, 0));
    sqlite3_finalize(stmt);
    sqlite3_close(db);
    return text;
}

static void
test_fresh_memory_is_latest(void **state)
{
    g_autoptr(CarrelStore) store = open_memory();

    assert_true(carrel_store_latest_schema_version() >= 1);
    assert_int_equal(carrel_store_schema_version(store), carrel_store_latest_schema_version());
}

static void
test_migrate_v0_to_latest(void **state)
{
    TmpDb *t = *state;
    g_autoptr(GError) error = NULL;
    g_autofree char *user_version = NULL;
    g_autofree char *expected = NULL;
    CarrelStore *store;

    store = carrel_store_open_full(t->db, 0, &error);
    assert_non_null(store);
    assert_int_equal(carrel_store_schema_version(store), 0);
    carrel_store_free(store);

    store = carrel_store_open(t->db, &error);
    assert_non_null(store);
    assert_int_equal(carrel_store_schema_version(store), carrel_store_latest_schema_version());
    insert_template(store, "tiny", 1);
    carrel_store_free(store);

    user_version = raw_text(t->db, "PRAGMA user_version");
    expected = g_strdup_printf("%d", carrel_store_latest_schema_version());
    assert_string_equal(user_version, expected);

    /* Reopening is idempotent: nothing re-applied, data kept. */
    for (int i = 0; i < 2; i++) {
        g_autoptr(CarrelTemplate) tmpl = NULL;
        store = carrel_store_open(t->db, &error);
        assert_non_null(store);
        assert_int_equal(carrel_store_schema_version(store), carrel_store_latest_schema_version());
        tmpl = carrel_store_template_get(store, "tiny", 1, &error);
        assert_non_null(tmpl);
        carrel_store_free(store);
    }
}

static void
test_future_version_refused(void **state)
{
    TmpDb *t = *state;
    g_autoptr(GError) error = NULL;
    g_autoptr(CarrelStore) store = carrel_store_open(t->db, &error);
    g_autofree char *sql = NULL;

    assert_non_null(store);
    g_clear_pointer(&store, carrel_store_free);
    sql = g_strdup_printf("PRAGMA user_version = %d", carrel_store_latest_schema_version() + 1);
    raw_exec(t->db, sql);

    store = carrel_store_open(t->db, &error);
    assert_null(store);
    assert_error(error, CARREL_ERROR_UNSUPPORTED, NULL);
    assert_non_null(strstr(error->message, "run a newer carrel"));
}

static void
test_foreign_database_refused(void **state)
{
    TmpDb *t = *state;
    g_autoptr(GError) error = NULL;
    g_autoptr(CarrelStore) store = NULL;
    g_autofree char *junk = g_build_filename(t->dir, "junk.db", NULL);

    raw_exec(t->db, "PRAGMA application_id = 1234; CREATE TABLE other (x)");
    store = carrel_store_open(t->db, &error);
    assert_null(store);
    assert_error(error, CARREL_ERROR_STORE, NULL);
    g_clear_error(&error);

    assert_true(g_file_set_contents(junk,
                                    "this is not a database, just text that is long enough "
                                    "to fill a header of one hundred bytes or so.........",
                                    -1, NULL));
    store = carrel_store_open(junk, &error);
    assert_null(store);
    assert_error(error, CARREL_ERROR_STORE, NULL);
}

static void
test_file_pragmas(void **state)
{
    TmpDb *t = *state;
    g_autoptr(GError) error = NULL;
    g_autoptr(CarrelStore) store = carrel_store_open(t->db, &error);
    g_autofree char *journal = NULL;
    g_autofree char *sync = NULL;
    g_autofree char *fk = NULL;
    g_autofree char *raw_journal = NULL;
    GStatBuf st;

    assert_non_null(store);
    journal = carrel_store_pragma_text(store, "journal_mode", &error);
    sync = carrel_store_pragma_text(store, "synchronous", &error);
    fk = carrel_store_pragma_text(store, "foreign_keys", &error);
    assert_string_equal(journal, "wal");
    assert_string_equal(sync, "2"); /* FULL */
    assert_string_equal(fk, "1");
    /* WAL is recorded in the file itself: another connection sees it. */
    raw_journal = raw_text(t->db, "PRAGMA journal_mode");
    assert_string_equal(raw_journal, "wal");
    assert_int_equal(g_stat(t->db, &st), 0);
    assert_int_equal(st.st_mode & 0777, 0600);
    assert_null(carrel_store_pragma_text(store, "user_version; DROP TABLE sessions", &error));
    assert_error(error, CARREL_ERROR_INVALID_ARG, NULL);
}

static void
test_template_crud(void **state)
{
    g_autoptr(CarrelStore) store = open_memory();
    g_autoptr(GError) error = NULL;
    g_autoptr(CarrelTemplate) latest = NULL;
    g_autoptr(CarrelTemplate) first = NULL;
    g_autoptr(CarrelTemplate) dup = make_template("tiny", 1);
    g_autoptr(GPtrArray) list = NULL;

    assert_int_equal(carrel_store_template_next_version(store, "tiny", &error), 1);
    insert_template(store, "tiny", 1);
    insert_template(store, "tiny", 2);
    insert_template(store, "alpha", 1);
    assert_int_equal(carrel_store_template_next_version(store, "tiny", &error), 3);

    latest = carrel_store_template_get(store, "tiny", 0, &error);
    assert_non_null(latest);
    assert_int_equal(latest->version, 2);
    assert_string_equal(latest->disk_path, "templates/tiny/2/base.qcow2");
    assert_int_equal(latest->boot, CARREL_BOOT_DIRECT);
    assert_null(latest->initrd_path);
    first = carrel_store_template_get(store, "tiny", 1, &error);
    assert_non_null(first);
    assert_int_equal(first->created_at, 1700000001);
    assert_int_equal(first->virtual_size_bytes, 4096);

    list = carrel_store_template_list(store, &error);
    assert_int_equal(list->len, 3);
    assert_string_equal(((CarrelTemplate *)list->pdata[0])->name, "alpha");
    assert_int_equal(((CarrelTemplate *)list->pdata[1])->version, 1);
    assert_int_equal(((CarrelTemplate *)list->pdata[2])->version, 2);

    assert_false(carrel_store_template_insert(store, dup, &error));
    assert_error(error, CARREL_ERROR_EXISTS, "template 'tiny@1' already exists");
    g_clear_error(&error);
    assert_null(carrel_store_template_get(store, "nope", 0, &error));
    assert_error(error, CARREL_ERROR_NOT_FOUND, "template 'nope' does not exist");
    g_clear_error(&error);
    assert_null(carrel_store_template_get(store, "tiny", 3, &error));
    assert_error(error, CARREL_ERROR_NOT_FOUND, "template 'tiny@3' does not exist");
    g_clear_error(&error);

    /* A deleted version number is never handed out again. */
    assert_true(carrel_store_template_delete(store, "tiny", 2, &error));
    assert_int_equal(carrel_store_template_next_version(store, "tiny", &error), 3);
    assert_false(carrel_store_template_delete(store, "tiny", 2, &error));
    assert_error(error, CARREL_ERROR_NOT_FOUND, "template 'tiny@2' does not exist");
    g_clear_error(&error);
    insert_template(store, "tiny", 3);
    /* Version 0 deletes every version of the name. */
    assert_true(carrel_store_template_delete(store, "tiny", 0, &error));
    assert_null(carrel_store_template_get(store, "tiny", 0, &error));
    g_clear_error(&error);
    assert_false(carrel_store_template_delete(store, "tiny", 0, &error));
    assert_error(error, CARREL_ERROR_NOT_FOUND, "template 'tiny' does not exist");
}

static void
test_template_in_use(void **state)
{
    g_autoptr(CarrelStore) store = open_memory();
    g_autoptr(GError) error = NULL;
    g_autoptr(CarrelSession) kept = NULL;

    insert_template(store, "tiny", 1);
    insert_template(store, "tiny", 2);
    insert_session(store, "s-000000000001", "one", "tiny", 1);
    assert_int_equal(carrel_store_template_count_sessions(store, "tiny", 0, &error), 1);
    assert_int_equal(carrel_store_template_count_sessions(store, "tiny", 1, &error), 1);
    assert_int_equal(carrel_store_template_count_sessions(store, "tiny", 2, &error), 0);

    assert_false(carrel_store_template_delete(store, "tiny", 1, &error));
    assert_error(error, CARREL_ERROR_WRONG_STATE,
                 "template 'tiny@1' is used by 1 session(s) that are not destroyed");
    g_clear_error(&error);
    assert_false(carrel_store_template_delete(store, "tiny", 0, &error));
    assert_error(error, CARREL_ERROR_WRONG_STATE, NULL);
    g_clear_error(&error);
    assert_true(carrel_store_template_delete(store, "tiny", 2, &error));

    /* A destroyed session does not pin its template, and keeps its history. */
    assert_true(carrel_store_session_set_state(store, "s-000000000001", CARREL_SESSION_DESTROYED,
                                               NULL, &error));
    assert_int_equal(carrel_store_template_count_sessions(store, "tiny", 0, &error), 0);
    assert_true(carrel_store_template_delete(store, "tiny", 1, &error));
    kept = carrel_store_session_get(store, "s-000000000001", &error);
    assert_non_null(kept);
    assert_string_equal(kept->template_name, "tiny");
    assert_int_equal(kept->template_version, 1);
    assert_int_equal(carrel_store_template_next_version(store, "tiny", &error), 3);

    /* ...but it cannot come back to life on a template that is gone. */
    assert_false(carrel_store_session_set_state(store, "s-000000000001", CARREL_SESSION_STOPPED,
                                                NULL, &error));
    assert_error(error, CARREL_ERROR_WRONG_STATE, NULL);
}

static void
test_session_crud(void **state)
{
    g_autoptr(CarrelStore) store = open_memory();
    g_autoptr(GError) error = NULL;
    g_autoptr(CarrelSession) by_id = NULL;
    g_autoptr(CarrelSession) by_name = NULL;
    g_autoptr(CarrelSession) after = NULL;
    g_autoptr(CarrelSession) orphan = make_session("s-00000000000f", "orphan", "nope", 1);

    insert_template(store, "tiny", 1);
    insert_session(store, "s-000000000001", "one", "tiny", 1);
    insert_session(store, "s-000000000002", "two", "tiny", 1);

    by_id = carrel_store_session_get(store, "s-000000000001", &error);
    assert_non_null(by_id);
    assert_string_equal(by_id->name, "one");
    assert_int_equal(by_id->state, CARREL_SESSION_CREATING);
    assert_null(by_id->state_reason);
    assert_int_equal(by_id->memory_mib, 1024);
    assert_string_equal(by_id->overlay_path, "sessions/s-000000000001/disk.qcow2");
    by_name = carrel_store_session_get(store, "two", &error);
    assert_non_null(by_name);
    assert_string_equal(by_name->id, "s-000000000002");

    assert_true(carrel_store_session_set_state(store, "s-000000000001", CARREL_SESSION_CRASHED,
                                               "qemu died", &error));
    after = carrel_store_session_get(store, "one", &error);
    assert_int_equal(after->state, CARREL_SESSION_CRASHED);
    assert_string_equal(after->state_reason, "qemu died");
    assert_true(after->updated_at >= by_id->updated_at);
    g_clear_pointer(&after, carrel_session_free);
    assert_true(carrel_store_session_set_state(store, "s-000000000001", CARREL_SESSION_STOPPED,
                                               NULL, &error));
    after = carrel_store_session_get(store, "one", &error);
    assert_null(after->state_reason);

    assert_true(carrel_store_session_delete(store, "s-000000000002", &error));
    assert_null(carrel_store_session_get(store, "s-000000000002", &error));
    assert_error(error, CARREL_ERROR_NOT_FOUND, "session 's-000000000002' does not exist");
    g_clear_error(&error);
    assert_false(carrel_store_session_delete(store, "s-000000000002", &error));
    assert_error(error, CARREL_ERROR_NOT_FOUND, "session 's-000000000002' does not exist");
    g_clear_error(&error);
    assert_false(
        carrel_store_session_set_state(store, "s-12", CARREL_SESSION_RUNNING, NULL, &error));
    assert_error(error, CARREL_ERROR_NOT_FOUND, "session 's-12' does not exist");
    g_clear_error(&error);
    assert_false(carrel_store_session_insert(store, orphan, &error));
    assert_error(error, CARREL_ERROR_NOT_FOUND, "template 'nope@1' does not exist");
}

static void
test_session_names(void **state)
{
    g_autoptr(CarrelStore) store = open_memory();
    g_autoptr(GError) error = NULL;
    g_autoptr(CarrelSession) clash = make_session("s-000000000002", "box", "tiny", 1);
    g_autoptr(CarrelSession) same_id = make_session("s-000000000001", "other", "tiny", 1);
    g_autoptr(CarrelSession) found = NULL;
    g_autoptr(GPtrArray) live = NULL;
    g_autoptr(GPtrArray) all = NULL;

    insert_template(store, "tiny", 1);
    insert_session(store, "s-000000000001", "box", "tiny", 1);
    assert_false(carrel_store_session_insert(store, clash, &error));
    assert_error(error, CARREL_ERROR_EXISTS, "session name 'box' is already used");
    g_clear_error(&error);
    assert_false(carrel_store_session_insert(store, same_id, &error));
    assert_error(error, CARREL_ERROR_EXISTS, "session 's-000000000001' already exists");
    g_clear_error(&error);

    /* Names are unique only among sessions that are not destroyed. */
    assert_true(carrel_store_session_set_state(store, "s-000000000001", CARREL_SESSION_DESTROYED,
                                               NULL, &error));
    assert_true(carrel_store_session_insert(store, clash, &error));
    found = carrel_store_session_get(store, "box", &error);
    assert_string_equal(found->id, "s-000000000002");
    g_clear_pointer(&found, carrel_session_free);
    found = carrel_store_session_get(store, "s-000000000001", &error);
    assert_int_equal(found->state, CARREL_SESSION_DESTROYED);

    live = carrel_store_session_list(store, FALSE, &error);
    assert_int_equal(live->len, 1);
    all = carrel_store_session_list(store, TRUE, &error);
    assert_int_equal(all->len, 2);
    assert_string_equal(((CarrelSession *)all->pdata[0])->id, "s-000000000001");

    /* The destroyed one cannot come back while its name is taken. */
    assert_false(carrel_store_session_set_state(store, "s-000000000001", CARREL_SESSION_STOPPED,
                                                NULL, &error));
    assert_error(error, CARREL_ERROR_EXISTS, NULL);
}

static void
test_session_id_beats_name(void **state)
{
    g_autoptr(CarrelStore) store = open_memory();
    g_autoptr(GError) error = NULL;
    g_autoptr(CarrelSession) found = NULL;

    insert_template(store, "tiny", 1);
    insert_session(store, "s-000000000001", "first", "tiny", 1);
    insert_session(store, "s-000000000002", "s-000000000001", "tiny", 1);
    found = carrel_store_session_get(store, "s-000000000001", &error);
    assert_string_equal(found->name, "first");
}

static void
test_session_owner(void **state)
{
    g_autoptr(CarrelStore) store = open_memory();
    g_autoptr(GError) error = NULL;
    g_autoptr(CarrelSession) owned = make_session("s-000000000001", "mine", "tiny", 1);
    g_autoptr(CarrelSession) back = NULL;
    g_autoptr(CarrelSession) ownerless = NULL;
    g_autoptr(GPtrArray) list = NULL;

    insert_template(store, "tiny", 1);
    owned->owner_id = g_strdup("t-00000000000a");
    owned->owner_label = g_strdup("alice");
    assert_true(carrel_store_session_insert(store, owned, &error));
    insert_session(store, "s-000000000002", "nobodys", "tiny", 1);

    back = carrel_store_session_get(store, "mine", &error);
    assert_string_equal(back->owner_id, "t-00000000000a");
    assert_string_equal(back->owner_label, "alice");
    ownerless = carrel_store_session_get(store, "nobodys", &error);
    assert_null(ownerless->owner_id);
    assert_null(ownerless->owner_label);
    list = carrel_store_session_list(store, FALSE, &error);
    assert_int_equal(list->len, 2);
    assert_string_equal(((CarrelSession *)list->pdata[0])->owner_label, "alice");
    /* A state change leaves the owner alone. */
    assert_true(carrel_store_session_set_state(store, "s-000000000001", CARREL_SESSION_RUNNING,
                                               NULL, &error));
    g_clear_pointer(&back, carrel_session_free);
    back = carrel_store_session_get(store, "mine", &error);
    assert_string_equal(back->owner_id, "t-00000000000a");
}

/* A pool member is made by carreld and owned by nobody until a create adopts it. */
static void
test_pool_adopt_owner(void **state)
{
    g_autoptr(CarrelStore) store = open_memory();
    g_autoptr(GError) error = NULL;
    g_autoptr(CarrelSession) member = make_session("s-000000000001", "pool-1", "tiny", 1);
    g_autoptr(CarrelSession) adopted = make_session("s-000000000001", "work", "tiny", 1);
    g_autoptr(CarrelSession) back = NULL;

    insert_template(store, "tiny", 1);
    member->pool = g_strdup("tiny");
    assert_true(carrel_store_session_insert(store, member, &error));
    adopted->owner_id = g_strdup("t-00000000000b");
    adopted->owner_label = g_strdup("bob");
    assert_true(carrel_store_session_adopt_member(store, adopted, &error));
    back = carrel_store_session_get(store, "s-000000000001", &error);
    assert_string_equal(back->name, "work");
    assert_null(back->pool);
    assert_true(back->from_pool);
    assert_string_equal(back->owner_id, "t-00000000000b");
    assert_string_equal(back->owner_label, "bob");
    /* Adopted once only: a second create cannot take it from its owner. */
    g_free(adopted->owner_id);
    adopted->owner_id = g_strdup("t-00000000000c");
    assert_false(carrel_store_session_adopt_member(store, adopted, &error));
    assert_error(error, CARREL_ERROR_NOT_FOUND, NULL);
    g_clear_pointer(&back, carrel_session_free);
    back = carrel_store_session_get(store, "s-000000000001", &error);
    assert_string_equal(back->owner_id, "t-00000000000b");
}

static void
add_event(CarrelStore *store, const char *actor, const char *actor_id, gint64 ts_us)
{
    g_autoptr(CarrelEvent) event = carrel_event_new();
    g_autoptr(GError) error = NULL;

    event->session_id = g_strdup("s-000000000001");
    event->ts_us = ts_us;
    event->actor = g_strdup(actor);
    event->actor_id = g_strdup(actor_id);
    event->kind = g_strdup("action");
    event->action = g_strdup("left_click");
    assert_true(carrel_store_event_add(store, event, &error));
    assert_true(event->seq > 0);
}

static void
test_event_actor_id(void **state)
{
    g_autoptr(CarrelStore) store = open_memory();
    g_autoptr(GError) error = NULL;
    g_autoptr(GPtrArray) events = NULL;

    insert_template(store, "tiny", 1);
    insert_session(store, "s-000000000001", "one", "tiny", 1);
    add_event(store, "alice", "t-00000000000a", 100);
    add_event(store, "carreld", "carreld", 200);
    add_event(store, "old", NULL, 300);
    events = carrel_store_event_list(store, "s-000000000001", 0, 10, &error);
    assert_int_equal(events->len, 3);
    assert_string_equal(((CarrelEvent *)events->pdata[0])->actor, "alice");
    assert_string_equal(((CarrelEvent *)events->pdata[0])->actor_id, "t-00000000000a");
    assert_string_equal(((CarrelEvent *)events->pdata[1])->actor_id, "carreld");
    assert_null(((CarrelEvent *)events->pdata[2])->actor_id);
    /* carreld's own events are not activity; a token that is merely named so is. */
    add_event(store, "carreld", "carreld", 400);
    assert_int_equal(carrel_store_event_last_ts(store, "s-000000000001", &error), 300);
    add_event(store, "carreld", "t-00000000000c", 500);
    assert_int_equal(carrel_store_event_last_ts(store, "s-000000000001", &error), 500);
}

/* What the store's full handler was asked, and whether it makes room (by lifting SQLite's page
 * limit, which stands in for the disk here). */
typedef struct {
    CarrelStore *store;
    guint calls;
    gboolean room;
} FullProbe;

static gboolean
probe_make_room(gpointer data)
{
    FullProbe *p = data;

    p->calls++;
    if (p->room)
        assert_int_equal(
            sqlite3_exec(p->store->db, "PRAGMA max_page_count = 1000000", NULL, NULL, NULL),
            SQLITE_OK);
    return p->room;
}

/* A write that finds the disk full is NO_SPACE; with room made by the handler it is tried
 * again and lands. */
static void
test_full_disk_retry(void **state)
{
    g_autoptr(CarrelStore) store = open_memory();
    g_autoptr(CarrelEvent) event = carrel_event_new();
    g_autoptr(GError) error = NULL;
    FullProbe probe = {.store = store};
    sqlite3_stmt *stmt = NULL;
    g_autofree char *cap = NULL;

    insert_template(store, "tiny", 1);
    insert_session(store, "s-000000000001", "one", "tiny", 1);
    assert_int_equal(sqlite3_prepare_v2(store->db, "PRAGMA page_count", -1, &stmt, NULL),
                     SQLITE_OK);
    assert_int_equal(sqlite3_step(stmt), SQLITE_ROW);
    cap = g_strdup_printf("PRAGMA max_page_count = %lld", sqlite3_column_int64(stmt, 0));
    sqlite3_finalize(stmt);
    assert_int_equal(sqlite3_exec(store->db, cap, NULL, NULL, NULL), SQLITE_OK);
    /* Every page full, down to small rows. */
    for (guint size = 4096; size >= 4; size /= 2)
        for (guint i = 0; i < 400; i++) {
            g_autofree char *pad =
                g_strdup_printf("INSERT INTO events (session_id, ts, actor, kind, detail) "
                                "VALUES ('s-000000000001', 0, 'pad', 'pad', hex(randomblob(%u)))",
                                size);
            if (sqlite3_exec(store->db, pad, NULL, NULL, NULL) != SQLITE_OK)
                break;
        }
    carrel_store_set_full_func(store, probe_make_room, &probe);
    event->session_id = g_strdup("s-000000000001");
    event->actor = g_strdup("carreld");
    event->kind = g_strdup("lifecycle");
    event->action = g_strdup("paused");
    assert_false(carrel_store_event_add(store, event, &error));
    assert_error(error, CARREL_ERROR_NO_SPACE, NULL);
    assert_non_null(strstr(error->message, "disk is full"));
    assert_int_equal(probe.calls, 1);
    g_clear_error(&error);
    probe.room = TRUE;
    assert_true(carrel_store_event_add(store, event, &error));
    assert_int_equal(probe.calls, 2);
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

/* Approvals are decided once; leases keep their first holder; both go with their session. */
static void
test_approvals_and_leases(void **state)
{
    g_autoptr(CarrelStore) store = open_memory();
    g_autoptr(GError) error = NULL;
    g_autoptr(CarrelTemplate) t = make_template("tiny", 1);
    g_autoptr(CarrelSession) s = make_session("s-000000000001", "one", "tiny", 1);
    g_autoptr(CarrelApproval) a = carrel_approval_new();
    g_autoptr(CarrelApproval) back = NULL;
    g_autoptr(GPtrArray) pending = NULL;
    g_autoptr(GPtrArray) all = NULL;
    g_autofree char *holder_id = NULL;
    g_autofree char *holder = NULL;
    g_autofree char *holder2_id = NULL;
    g_autofree char *holder2 = NULL;
    g_autofree char *held_id = NULL;
    g_autofree char *held = NULL;
    g_autofree char *none_id = NULL;
    g_autofree char *none = NULL;
    gint64 since = 0;
    gint64 since2 = 0;

    assert_true(carrel_store_template_insert(store, t, &error));
    assert_true(carrel_store_session_insert(store, s, &error));
    a->id = g_strdup("ap-1");
    a->session_id = g_strdup(s->id);
    a->action = g_strdup("network.egress");
    a->detail = json_from_string("{\"host\":\"a.test\"}", NULL);
    a->requested_by = g_strdup("policy");
    a->requested_at = 100;
    assert_true(carrel_store_approval_insert(store, a, &error));
    pending = carrel_store_approval_list(store, TRUE, &error);
    assert_int_equal(pending->len, 1);
    assert_true(carrel_store_approval_decide(store, "ap-1", FALSE, "alice", "not now", &error));
    assert_false(carrel_store_approval_decide(store, "ap-1", TRUE, "bob", NULL, &error));
    assert_error(error, CARREL_ERROR_WRONG_STATE, NULL);
    g_clear_error(&error);
    assert_false(carrel_store_approval_decide(store, "ap-none", TRUE, "bob", NULL, &error));
    g_clear_error(&error);
    back = carrel_store_approval_get(store, "ap-1", &error);
    assert_string_equal(back->state, "denied");
    assert_string_equal(back->decided_by, "alice");
    assert_string_equal(back->reason, "not now");
    assert_string_equal(json_object_get_string_member(json_node_get_object(back->detail), "host"),
                        "a.test");
    g_clear_pointer(&pending, g_ptr_array_unref);
    pending = carrel_store_approval_list(store, TRUE, &error);
    assert_int_equal(pending->len, 0);
    all = carrel_store_approval_list(store, FALSE, &error);
    assert_int_equal(all->len, 1);

    assert_true(carrel_store_lease_take(store, s->id, "t-00000000000a", "alice", &holder_id,
                                        &holder, &since, &error));
    assert_string_equal(holder_id, "t-00000000000a");
    assert_string_equal(holder, "alice");
    assert_true(since > 0);
    assert_true(carrel_store_lease_take(store, s->id, "t-00000000000b", "bob", &holder2_id,
                                        &holder2, &since2, &error));
    assert_string_equal(holder2_id, "t-00000000000a");
    assert_string_equal(holder2, "alice");
    assert_int_equal(since2, since);
    assert_true(carrel_store_lease_get(store, s->id, &held_id, &held, NULL, &error));
    assert_string_equal(held_id, "t-00000000000a");
    assert_string_equal(held, "alice");
    assert_false(carrel_store_lease_take(store, s->id, NULL, "bob", NULL, NULL, NULL, &error));
    assert_error(error, CARREL_ERROR_INVALID_ARG, NULL);
    g_clear_error(&error);
    {
        g_autoptr(GHashTable) leases = carrel_store_lease_all(store, &error);
        const CarrelStoreLease *l;

        assert_non_null(leases);
        assert_int_equal(g_hash_table_size(leases), 1);
        l = g_hash_table_lookup(leases, s->id);
        if (!l)
            fail_msg("no lease for '%s'", s->id);
        assert_string_equal(l->holder_id, "t-00000000000a");
        assert_string_equal(l->holder_label, "alice");
        assert_int_equal(l->since, since);
    }
    assert_true(carrel_store_lease_release(store, s->id, &error));
    {
        g_autoptr(GHashTable) leases = carrel_store_lease_all(store, &error);

        assert_non_null(leases);
        assert_int_equal(g_hash_table_size(leases), 0);
    }
    assert_true(carrel_store_lease_get(store, s->id, &none_id, &none, NULL, &error));
    assert_null(none_id);
    assert_null(none);
}

static const char *const hostile[] = {
    "it's \"quoted\"",
    "'; DROP TABLE sessions; --",
    "Robert'); DELETE FROM templates WHERE ('1'='1",
    "%s%n%x %% \\ \\0",
    "\xc3\xa9t\xc3\xa9 \xe2\x9c\x93 \xf0\x9f\x92\xa3 \xe4\xb8\xad\xe6\x96\x87",
};

static void
test_hostile_strings(void **state)
{
    g_autoptr(CarrelStore) store = open_memory();
    g_autoptr(GError) error = NULL;

    for (gsize i = 0; i < G_N_ELEMENTS(hostile); i++) {
        g_autoptr(CarrelTemplate) t = make_template(hostile[i], 1);
        g_autoptr(CarrelTemplate) back = NULL;
        g_autofree char *id = g_strdup_printf("s-%012zu", i);
        g_autoptr(CarrelSession) s = make_session(id, hostile[i], hostile[i], 1);
        g_autoptr(CarrelSession) sback = NULL;
        g_autofree char *token_id = g_strdup_printf("t-%012zu", i);
        g_autoptr(CarrelToken) tback = NULL;

        g_free(t->cmdline);
        t->cmdline = g_strdup(hostile[i]);
        assert_true(carrel_store_template_insert(store, t, &error));
        back = carrel_store_template_get(store, hostile[i], 0, &error);
        assert_non_null(back);
        assert_string_equal(back->name, hostile[i]);
        assert_string_equal(back->cmdline, hostile[i]);

        assert_true(carrel_store_session_insert(store, s, &error));
        assert_true(
            carrel_store_session_set_state(store, id, CARREL_SESSION_CRASHED, hostile[i], &error));
        sback = carrel_store_session_get(store, hostile[i], &error);
        assert_non_null(sback);
        assert_string_equal(sback->id, id);
        assert_string_equal(sback->template_name, hostile[i]);
        assert_string_equal(sback->state_reason, hostile[i]);

        insert_token(store, token_id, hostile[i], CARREL_ROLE_AGENT, 1, hostile[i]);
        tback = carrel_store_token_by_hash(store, hostile[i], &error);
        assert_non_null(tback);
        assert_string_equal(tback->label, hostile[i]);
        g_clear_pointer(&tback, carrel_token_free);
        tback = carrel_store_token_get(store, hostile[i], &error);
        assert_non_null(tback);
        assert_string_equal(tback->id, token_id);
    }
    /* Every table is still there and complete. */
    {
        g_autoptr(GPtrArray) templates = carrel_store_template_list(store, &error);
        g_autoptr(GPtrArray) sessions = carrel_store_session_list(store, TRUE, &error);
        assert_int_equal(templates->len, G_N_ELEMENTS(hostile));
        assert_int_equal(sessions->len, G_N_ELEMENTS(hostile));
    }
}

static void
test_unknown_state_in_db(void **state)
{
    g_autoptr(CarrelStore) store = open_memory();
    g_autoptr(GError) error = NULL;

    insert_template(store, "tiny", 1);
    insert_session(store, "s-000000000001", "one", "tiny", 1);
    assert_int_equal(
        sqlite3_exec(store->db, "UPDATE sessions SET state = 'zombie'", NULL, NULL, NULL),
        SQLITE_OK);
    assert_null(carrel_store_session_get(store, "s-000000000001", &error));
    assert_error(error, CARREL_ERROR_STORE,
                 "session 's-000000000001' has an unknown state 'zombie'");
}

#define THREADS 4
#define PER_THREAD 50

typedef struct {
    CarrelStore *store;
    int index;
    int failures;
} Worker;

static gpointer
insert_many(gpointer data)
{
    Worker *w = data;

    for (int i = 0; i < PER_THREAD; i++) {
        g_autofree char *id = g_strdup_printf("s-%06d%06d", w->index, i);
        g_autofree char *name = g_strdup_printf("w%d-%d", w->index, i);
        g_autoptr(CarrelSession) s = make_session(id, name, "tiny", 1);
        g_autoptr(GError) error = NULL;
        g_autoptr(CarrelSession) back = NULL;

        if (!carrel_store_session_insert(w->store, s, &error))
            w->failures++;
        back = carrel_store_session_get(w->store, name, NULL);
        if (!back || !g_str_equal(back->id, id))
            w->failures++;
    }
    return NULL;
}

static void
test_warm_states(void **state)
{
    g_autoptr(CarrelStore) store = open_memory();
    g_autoptr(GError) error = NULL;
    g_autoptr(CarrelWarmState) warm = carrel_warm_state_new();
    g_autoptr(CarrelWarmState) got = NULL;
    g_autoptr(CarrelSession) s = make_session("s-0000000000a1", "w", "tiny", 1);
    g_autoptr(CarrelSession) back = NULL;

    insert_template(store, "tiny", 1);
    warm->template_name = g_strdup("tiny");
    warm->template_version = 1;
    warm->memory_path = g_strdup("/x/warm/memory.save");
    warm->disk_path = g_strdup("/x/warm/disk.qcow2");
    warm->vcpus = 1;
    warm->memory_mib = 1024;
    warm->memory_bytes = 300000000;
    warm->created_at = 1700000001;
    assert_null(carrel_store_warm_get(store, "tiny", 1, &error));
    assert_error(error, CARREL_ERROR_NOT_FOUND, "template 'tiny@1' is not warm");
    g_clear_error(&error);
    assert_true(carrel_store_warm_put(store, warm, &error));
    warm->memory_bytes = 42; /* a new warm state replaces the old one */
    assert_true(carrel_store_warm_put(store, warm, &error));
    got = carrel_store_warm_get(store, "tiny", 1, &error);
    assert_non_null(got);
    assert_string_equal(got->disk_path, "/x/warm/disk.qcow2");
    assert_int_equal(got->memory_bytes, 42);
    assert_int_equal(got->memory_mib, 1024);
    /* A warm state for a template that does not exist is refused. */
    g_free(warm->template_name);
    warm->template_name = g_strdup("nope");
    assert_false(carrel_store_warm_put(store, warm, &error));
    g_clear_error(&error);
    /* Sessions remember whether they were restored from it. */
    s->from_warm = TRUE;
    assert_true(carrel_store_session_insert(store, s, &error));
    back = carrel_store_session_get(store, "s-0000000000a1", &error);
    assert_true(back->from_warm);
    assert_true(
        carrel_store_session_set_state(store, s->id, CARREL_SESSION_DESTROYED, NULL, &error));
    /* Deleting the template version deletes its warm state. */
    assert_true(carrel_store_template_delete(store, "tiny", 1, &error));
    g_clear_pointer(&got, carrel_warm_state_free);
    assert_null(carrel_store_warm_get(store, "tiny", 1, &error));
    assert_error(error, CARREL_ERROR_NOT_FOUND, NULL);
}

static void
test_concurrent_inserts(void **state)
{
    TmpDb *t = *state;
    g_autoptr(GError) error = NULL;
    g_autoptr(CarrelStore) store = carrel_store_open(t->db, &error);
    g_autoptr(GPtrArray) all = NULL;
    Worker workers[THREADS];
    GThread *threads[THREADS];

    assert_non_null(store);
    insert_template(store, "tiny", 1);
    for (int i = 0; i < THREADS; i++) {
        workers[i] = (Worker){.store = store, .index = i};
        threads[i] = g_thread_new("insert", insert_many, &workers[i]);
    }
    for (int i = 0; i < THREADS; i++) {
        g_thread_join(threads[i]);
        assert_int_equal(workers[i].failures, 0);
    }
    all = carrel_store_session_list(store, TRUE, &error);
    assert_int_equal(all->len, THREADS * PER_THREAD);
}

/* The generation grows with every write that changes a row (sessions, leases, tokens) and stays
 * put across reads and writes that change nothing: kept texts rely on both. */
static void
test_generation(void **state)
{
    g_autoptr(CarrelStore) store = open_memory();
    g_autoptr(GError) error = NULL;
    g_autoptr(GPtrArray) list = NULL;
    g_autoptr(CarrelSession) got = NULL;
    g_autofree char *holder_id = NULL;
    g_autofree char *holder = NULL;
    gint64 since = 0;
    guint64 g0, g1, g2, g3;

    insert_template(store, "base", 1);
    g0 = carrel_store_generation(store);
    insert_session(store, "s-1", "one", "base", 1);
    g1 = carrel_store_generation(store);
    assert_true(g1 > g0);
    list = carrel_store_session_list(store, FALSE, &error);
    got = carrel_store_session_get(store, "s-1", &error);
    assert_non_null(got);
    assert_int_equal(carrel_store_generation(store), g1);
    /* An update that matches no row is no change. */
    assert_false(
        carrel_store_session_set_state(store, "s-none", CARREL_SESSION_RUNNING, NULL, &error));
    g_clear_error(&error);
    assert_int_equal(carrel_store_generation(store), g1);
    assert_true(carrel_store_session_set_state(store, "s-1", CARREL_SESSION_RUNNING, NULL, &error));
    g2 = carrel_store_generation(store);
    assert_true(g2 > g1);
    insert_token(store, "t-1", "agent", CARREL_ROLE_AGENT, 1, "hash-1");
    assert_true(
        carrel_store_lease_take(store, "s-1", "t-1", "agent", &holder_id, &holder, &since, &error));
    g3 = carrel_store_generation(store);
    assert_true(g3 > g2);
    assert_true(carrel_store_lease_release(store, "s-1", &error));
    assert_true(carrel_store_generation(store) > g3);
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_fresh_memory_is_latest),
        cmocka_unit_test(test_generation),
        cmocka_unit_test_setup_teardown(test_migrate_v0_to_latest, tmp_setup, tmp_teardown),
        cmocka_unit_test_setup_teardown(test_future_version_refused, tmp_setup, tmp_teardown),
        cmocka_unit_test_setup_teardown(test_foreign_database_refused, tmp_setup, tmp_teardown),
        cmocka_unit_test_setup_teardown(test_file_pragmas, tmp_setup, tmp_teardown),
        cmocka_unit_test(test_template_crud),
        cmocka_unit_test(test_template_in_use),
        cmocka_unit_test(test_session_crud),
        cmocka_unit_test(test_session_names),
        cmocka_unit_test(test_session_id_beats_name),
        cmocka_unit_test(test_session_owner),
        cmocka_unit_test(test_pool_adopt_owner),
        cmocka_unit_test(test_event_actor_id),
        cmocka_unit_test(test_full_disk_retry),
        cmocka_unit_test(test_approvals_and_leases),
        cmocka_unit_test(test_hostile_strings),
        cmocka_unit_test(test_unknown_state_in_db),
        cmocka_unit_test(test_warm_states),
        cmocka_unit_test_setup_teardown(test_concurrent_inserts, tmp_setup, tmp_teardown),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
