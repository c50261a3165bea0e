#include <errno.h>
#include <fcntl.h>
#include <sys/statvfs.h>
#include <unistd.h>

#define CARREL_STORE_PRIV_H_ALLOW
#include "store/store-priv.h"

#define STORE_BUSY_TIMEOUT_MS 5000
/* Below this much free in the database's folder a transaction first asks for room (see
 * carrel_store_begin): far more than the WAL frames of any one transaction. */
#define STORE_MIN_FREE_BYTES (2 * 1024 * 1024)

void
carrel_store_set_error(CarrelStore *store, int rc, const CarrelStoreConflict *conflict,
                       const char *context, GError **error)
{
    const char *msg = store && store->db ? sqlite3_errmsg(store->db) : sqlite3_errstr(rc);

    switch (rc) {
    case SQLITE_CONSTRAINT_UNIQUE:
        if (conflict && conflict->unique) {
            g_set_error_literal(error, CARREL_ERROR, CARREL_ERROR_EXISTS, conflict->unique);
            return;
        }
        g_set_error(error, CARREL_ERROR, CARREL_ERROR_EXISTS, "%s: %s", context, msg);
        return;
    case SQLITE_CONSTRAINT_PRIMARYKEY:
        if (conflict && conflict->primary_key) {
            g_set_error_literal(error, CARREL_ERROR, CARREL_ERROR_EXISTS, conflict->primary_key);
            return;
        }
        g_set_error(error, CARREL_ERROR, CARREL_ERROR_EXISTS, "%s: %s", context, msg);
        return;
    case SQLITE_FULL:
        /* The caller may free room (carreld's reserve) and try again. */
        g_set_error(error, CARREL_ERROR, CARREL_ERROR_NO_SPACE, "%s: the host's disk is full: %s",
                    context, msg);
        return;
    case SQLITE_CONSTRAINT_TRIGGER:
        g_set_error(error, CARREL_ERROR, CARREL_ERROR_WRONG_STATE, "%s: %s", context, msg);
        return;
    default:
        g_set_error(error, CARREL_ERROR, CARREL_ERROR_STORE, "%s: %s (sqlite code %d)", context,
                    msg, rc);
        return;
    }
}

/* Idle statements kept per SQL text: enough for the threads that run the same query at once. */
#define STMT_KEEP_PER_SQL 4

/* The stores by connection, so that a statement finds its store's cache when released. */
static GMutex stores_lock;
static GHashTable *stores_by_db; /* sqlite3 * -> CarrelStore * */

static void
stmts_register(CarrelStore *store)
{
    g_mutex_init(&store->stmt_lock);
    store->stmts =
        g_hash_table_new_full(g_str_hash, g_str_equal, g_free, (GDestroyNotify)g_ptr_array_unref);
    g_mutex_lock(&stores_lock);
    if (!stores_by_db)
        stores_by_db = g_hash_table_new(g_direct_hash, g_direct_equal);
    g_hash_table_insert(stores_by_db, store->db, store);
    g_mutex_unlock(&stores_lock);
}

/* Forgets store's connection and finalizes its idle statements (before the close). */
static void
stmts_unregister(CarrelStore *store)
{
    if (!store->stmts)
        return;
    g_mutex_lock(&stores_lock);
    g_hash_table_remove(stores_by_db, store->db);
    g_mutex_unlock(&stores_lock);
    g_clear_pointer(&store->stmts, g_hash_table_unref);
    g_mutex_clear(&store->stmt_lock);
}

static sqlite3_stmt *
stmt_take(CarrelStore *store, const char *sql)
{
    GPtrArray *idle;
    sqlite3_stmt *stmt = NULL;

    if (!store->stmts)
        return NULL;
    g_mutex_lock(&store->stmt_lock);
    idle = g_hash_table_lookup(store->stmts, sql);
    if (idle && idle->len > 0)
        stmt = g_ptr_array_steal_index_fast(idle, idle->len - 1);
    g_mutex_unlock(&store->stmt_lock);
    return stmt;
}

static void
stmt_finalize(gpointer stmt)
{
    sqlite3_finalize(stmt);
}

void
carrel_store_stmt_release(sqlite3_stmt *stmt)
{
    CarrelStore *store;
    GPtrArray *idle;

    if (!stmt)
        return;
    /* Reset ends its read transaction at once: a kept statement holds nothing open. */
    sqlite3_reset(stmt);
    sqlite3_clear_bindings(stmt);
    g_mutex_lock(&stores_lock);
    store = stores_by_db ? g_hash_table_lookup(stores_by_db, sqlite3_db_handle(stmt)) : NULL;
    if (store)
        g_mutex_lock(&store->stmt_lock);
    g_mutex_unlock(&stores_lock);
    if (!store) {
        sqlite3_finalize(stmt);
        return;
    }
    idle = g_hash_table_lookup(store->stmts, sqlite3_sql(stmt));
    if (!idle) {
        idle = g_ptr_array_new_with_free_func(stmt_finalize);
        g_hash_table_insert(store->stmts, g_strdup(sqlite3_sql(stmt)), idle);
    }
    if (idle->len < STMT_KEEP_PER_SQL) {
        g_ptr_array_add(idle, stmt);
        stmt = NULL;
    }
    g_mutex_unlock(&store->stmt_lock);
    sqlite3_finalize(stmt);
}

sqlite3_stmt *
carrel_store_prepare(CarrelStore *store, const char *sql, GError **error)
{
    sqlite3_stmt *stmt = stmt_take(store, sql);
    int rc;

    if (stmt)
        return stmt;
    rc = sqlite3_prepare_v3(store->db, sql, -1, SQLITE_PREPARE_PERSISTENT, &stmt, NULL);
    if (rc != SQLITE_OK) {
        carrel_store_set_error(store, rc, NULL, "preparing a statement", error);
        sqlite3_finalize(stmt);
        return NULL;
    }
    return stmt;
}

gboolean
carrel_store_bind_text(CarrelStore *store, sqlite3_stmt *stmt, int index, const char *value,
                       GError **error)
{
    /* A NULL pointer binds SQL NULL. */
    int rc = sqlite3_bind_text(stmt, index, value, -1, SQLITE_TRANSIENT);

    if (rc != SQLITE_OK) {
        carrel_store_set_error(store, rc, NULL, "binding a value", error);
        return FALSE;
    }
    return TRUE;
}

gboolean
carrel_store_bind_int_or_null(CarrelStore *store, sqlite3_stmt *stmt, int index, gint64 value,
                              GError **error)
{
    if (value)
        return carrel_store_bind_int64(store, stmt, index, value, error);
    if (sqlite3_bind_null(stmt, index) != SQLITE_OK) {
        g_set_error(error, CARREL_ERROR, CARREL_ERROR_STORE, "binding a null value");
        return FALSE;
    }
    return TRUE;
}

gboolean
carrel_store_bind_int64(CarrelStore *store, sqlite3_stmt *stmt, int index, gint64 value,
                        GError **error)
{
    int rc = sqlite3_bind_int64(stmt, index, value);

    if (rc != SQLITE_OK) {
        carrel_store_set_error(store, rc, NULL, "binding a value", error);
        return FALSE;
    }
    return TRUE;
}

void
carrel_store_set_full_func(CarrelStore *store, CarrelStoreFullFunc func, gpointer data)
{
    g_autoptr(GMutexLocker) locker G_GNUC_UNUSED = g_mutex_locker_new(&store->lock);

    store->full_func = func;
    store->full_data = data;
}

/*
 * A full disk: let the owner make room; TRUE when the statement may be run again. That is a
 * statement of its own (outside a transaction), or a COMMIT whose transaction is still open:
 * SQLite may roll a transaction back on SQLITE_FULL, and then there is nothing to repeat.
 */
static gboolean
made_room(CarrelStore *store, int rc, gboolean commit)
{
    gboolean room;

    if ((rc & 0xff) != SQLITE_FULL || !store->full_func)
        return FALSE;
    room = store->full_func(store->full_data);
    return room &&
           (commit ? !sqlite3_get_autocommit(store->db) : sqlite3_get_autocommit(store->db));
}

gboolean
carrel_store_step_done(CarrelStore *store, sqlite3_stmt *stmt, const CarrelStoreConflict *conflict,
                       const char *context, GError **error)
{
    int rc = sqlite3_step(stmt);

    if (made_room(store, rc, FALSE)) {
        sqlite3_reset(stmt);
        rc = sqlite3_step(stmt);
    }

    if (rc != SQLITE_DONE) {
        carrel_store_set_error(store, rc, conflict, context, error);
        return FALSE;
    }
    return TRUE;
}

gboolean
carrel_store_step_row(CarrelStore *store, sqlite3_stmt *stmt, const char *context,
                      gboolean *ret_row, GError **error)
{
    int rc = sqlite3_step(stmt);

    if (rc != SQLITE_ROW && rc != SQLITE_DONE) {
        carrel_store_set_error(store, rc, NULL, context, error);
        return FALSE;
    }
    *ret_row = rc == SQLITE_ROW;
    return TRUE;
}

gboolean
carrel_store_query_int64(CarrelStore *store, sqlite3_stmt *stmt, const char *context,
                         gint64 *ret_value, GError **error)
{
    gboolean row = FALSE;

    if (!carrel_store_step_row(store, stmt, context, &row, error))
        return FALSE;
    *ret_value = row ? sqlite3_column_int64(stmt, 0) : 0;
    return TRUE;
}

gboolean
carrel_store_exec(CarrelStore *store, const char *sql, GError **error)
{
    int rc = sqlite3_exec(store->db, sql, NULL, NULL, NULL);

    if (made_room(store, rc, g_str_equal(sql, "COMMIT")))
        rc = sqlite3_exec(store->db, sql, NULL, NULL, NULL);
    if (rc != SQLITE_OK) {
        carrel_store_set_error(store, rc, NULL, "running sql", error);
        return FALSE;
    }
    return TRUE;
}

/* Whether the database's folder has less than STORE_MIN_FREE_BYTES free (FALSE when unknown). */
static gboolean
low_on_room(CarrelStore *store)
{
    struct statvfs vfs;

    if (!store->dir || statvfs(store->dir, &vfs) < 0)
        return FALSE;
    return (guint64)vfs.f_bavail * vfs.f_frsize < STORE_MIN_FREE_BYTES;
}

gboolean
carrel_store_begin(CarrelStore *store, GError **error)
{
    /* A COMMIT that finds the disk full rolls the whole transaction back, which cannot be
     * replayed from here: room is made before one starts instead. */
    if (store->full_func && low_on_room(store))
        (void)store->full_func(store->full_data);
    /* IMMEDIATE takes the write lock now, so a read-then-write never hits SQLITE_BUSY midway. */
    return carrel_store_exec(store, "BEGIN IMMEDIATE", error);
}

gboolean
carrel_store_commit(CarrelStore *store, GError **error)
{
    if (!carrel_store_exec(store, "COMMIT", error)) {
        carrel_store_rollback(store);
        return FALSE;
    }
    return TRUE;
}

void
carrel_store_rollback(CarrelStore *store)
{
    if (!sqlite3_get_autocommit(store->db))
        (void)sqlite3_exec(store->db, "ROLLBACK", NULL, NULL, NULL);
}

char *
carrel_store_column_dup(sqlite3_stmt *stmt, int column)
{
    return g_strdup((const char *)sqlite3_column_text(stmt, column));
}

static char *
query_text(CarrelStore *store, const char *sql, GError **error)
{
    g_autoptr(sqlite3_stmt) stmt = carrel_store_prepare(store, sql, error);
    gboolean row = FALSE;

    if (!stmt || !carrel_store_step_row(store, stmt, "reading a pragma", &row, error))
        return NULL;
    if (!row) {
        g_set_error(error, CARREL_ERROR, CARREL_ERROR_STORE, "'%s' gave no value", sql);
        return NULL;
    }
    return carrel_store_column_dup(stmt, 0);
}

char *
carrel_store_pragma_text(CarrelStore *store, const char *pragma, GError **error)
{
    g_autoptr(GMutexLocker) locker G_GNUC_UNUSED = g_mutex_locker_new(&store->lock);
    g_autofree char *sql = NULL;

    /* Pragma names cannot be bound; only plain identifiers are accepted here. */
    for (const char *p = pragma; *p; p++) {
        if (!g_ascii_islower(*p) && *p != '_') {
            g_set_error(error, CARREL_ERROR, CARREL_ERROR_INVALID_ARG, "bad pragma name '%s'",
                        pragma);
            return NULL;
        }
    }
    sql = g_strdup_printf("PRAGMA %s", pragma);
    return query_text(store, sql, error);
}

static gboolean
set_pragmas(CarrelStore *store, const char *path, GError **error)
{
    g_autofree char *mode = NULL;
    g_autofree char *sync = NULL;

    if (!carrel_store_exec(store, "PRAGMA foreign_keys = ON", error) ||
        !carrel_store_exec(store, "PRAGMA trusted_schema = OFF", error) ||
        !carrel_store_exec(store, "PRAGMA synchronous = FULL", error) ||
        /* For a full disk: sorts and temporary tables never need a file, and the WAL keeps
         * (reuses) up to 8 MiB after a checkpoint instead of shrinking to nothing and having
         * to grow again when there may be no room left. */
        !carrel_store_exec(store, "PRAGMA temp_store = MEMORY", error) ||
        !carrel_store_exec(store, "PRAGMA journal_size_limit = 8388608", error))
        return FALSE;
    mode = query_text(store, "PRAGMA journal_mode = WAL", error);
    if (!mode)
        return FALSE;
    /* An in-memory database answers "memory"; a file that cannot do WAL must not run silently. */
    if (!g_str_equal(path, ":memory:") && g_ascii_strcasecmp(mode, "wal") != 0) {
        g_set_error(error, CARREL_ERROR, CARREL_ERROR_STORE,
                    "the database refused WAL journal mode (got '%s')", mode);
        return FALSE;
    }
    sync = query_text(store, "PRAGMA synchronous", error);
    if (!sync)
        return FALSE;
    if (!g_str_equal(sync, "2")) {
        g_set_error(error, CARREL_ERROR, CARREL_ERROR_STORE,
                    "the database refused synchronous=FULL (got '%s')", sync);
        return FALSE;
    }
    return TRUE;
}

gboolean
carrel_store_read_version(CarrelStore *store, int *ret_version, GError **error)
{
    g_autoptr(sqlite3_stmt) stmt = carrel_store_prepare(store, "PRAGMA user_version", error);
    gint64 version = 0;

    if (!stmt || !carrel_store_query_int64(store, stmt, "reading schema version", &version, error))
        return FALSE;
    *ret_version = (int)version;
    return TRUE;
}

static gboolean
check_identity(CarrelStore *store, GError **error)
{
    g_autoptr(sqlite3_stmt) stmt = carrel_store_prepare(store, "PRAGMA application_id", error);
    gint64 app_id = 0;

    if (!stmt || !carrel_store_query_int64(store, stmt, "reading application id", &app_id, error))
        return FALSE;
    if (!carrel_store_read_version(store, &store->version, error))
        return FALSE;
    if ((app_id != 0 || store->version != 0) && app_id != CARREL_STORE_APPLICATION_ID) {
        g_set_error(error, CARREL_ERROR, CARREL_ERROR_STORE,
                    "the database belongs to another program (application id %" G_GINT64_FORMAT ")",
                    app_id);
        return FALSE;
    }
    if (store->version > carrel_store_latest_schema_version()) {
        g_set_error(error, CARREL_ERROR, CARREL_ERROR_UNSUPPORTED,
                    "the database is at schema version %d but this build knows only up to %d: "
                    "run a newer carrel",
                    store->version, carrel_store_latest_schema_version());
        return FALSE;
    }
    return TRUE;
}

static gboolean
precreate_private(const char *path, GError **error)
{
    /* The database holds token hashes: create it 0600 (sqlite gives -wal/-shm the same mode). */
    int fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);

    if (fd < 0) {
        int saved = errno;
        g_set_error(error, CARREL_ERROR, CARREL_ERROR_STORE, "opening database '%s': %s", path,
                    g_strerror(saved));
        return FALSE;
    }
    close(fd);
    return TRUE;
}

static CarrelStore *
store_new(const char *path, GError **error)
{
    g_autoptr(CarrelStore) store = g_new0(CarrelStore, 1);
    int flags = SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_FULLMUTEX;
    int rc;

    g_mutex_init(&store->lock);
    if (!g_str_equal(path, ":memory:") && !precreate_private(path, error))
        return NULL;
    rc = sqlite3_open_v2(path, &store->db, flags, NULL);
    if (rc != SQLITE_OK) {
        g_autofree char *context = g_strdup_printf("opening database '%s'", path);
        carrel_store_set_error(store, rc, NULL, context, error);
        return NULL;
    }
    if (!g_str_equal(path, ":memory:"))
        store->dir = g_path_get_dirname(path);
    sqlite3_extended_result_codes(store->db, 1);
    sqlite3_busy_timeout(store->db, STORE_BUSY_TIMEOUT_MS);
    stmts_register(store);
    return g_steal_pointer(&store);
}

CarrelStore *
carrel_store_open_full(const char *path, int target_version, GError **error)
{
    g_autoptr(CarrelStore) store = store_new(path, error);

    if (!store)
        return NULL;
    if (target_version < 0)
        target_version = carrel_store_latest_schema_version();
    if (!check_identity(store, error) || !set_pragmas(store, path, error) ||
        !carrel_store_migrate(store, target_version, error)) {
        g_prefix_error(error, "opening store '%s': ", path);
        return NULL;
    }
    return g_steal_pointer(&store);
}

CarrelStore *
carrel_store_open(const char *path, GError **error)
{
    return carrel_store_open_full(path, -1, error);
}

void
carrel_store_free(CarrelStore *store)
{
    if (!store)
        return;
    /* close_v2 defers the close until unfinalized statements go, instead of failing BUSY. */
    if (store->db) {
        stmts_unregister(store);
        sqlite3_close_v2(store->db);
    }
    g_mutex_clear(&store->lock);
    g_free(store->dir);
    g_free(store);
}

guint64
carrel_store_generation(CarrelStore *store)
{
    /* Not under store->lock: the connection is serialized by sqlite itself (FULLMUTEX), and a
     * reader that sees a count a write is about to raise only wastes what it then reads. */
    return (guint64)sqlite3_total_changes64(store->db);
}

int
carrel_store_schema_version(CarrelStore *store)
{
    g_autoptr(GMutexLocker) locker G_GNUC_UNUSED = g_mutex_locker_new(&store->lock);

    return store->version;
}
