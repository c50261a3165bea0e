#define CARREL_STORE_PRIV_H_ALLOW
#include "store/store-priv.h"

#define WARM_COLUMNS                                                                               \
    "template_name, template_version, memory_path, disk_path, vcpus, memory_mib, memory_bytes, "   \
    "created_at, machine_revision, memory_file"

gboolean
carrel_store_warm_put(CarrelStore *store, const CarrelWarmState *warm, GError **error)
{
    g_autoptr(GMutexLocker) locker G_GNUC_UNUSED = g_mutex_locker_new(&store->lock);
    g_autoptr(sqlite3_stmt) stmt = NULL;

    /* One warm state per template version: a new one replaces the old row. */
    stmt = carrel_store_prepare(store,
                                "INSERT OR REPLACE INTO warm_states (" WARM_COLUMNS ") "
                                "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                                error);
    return stmt && carrel_store_bind_text(store, stmt, 1, warm->template_name, error) &&
           carrel_store_bind_int64(store, stmt, 2, warm->template_version, error) &&
           carrel_store_bind_text(store, stmt, 3, warm->memory_path, error) &&
           carrel_store_bind_text(store, stmt, 4, warm->disk_path, error) &&
           carrel_store_bind_int64(store, stmt, 5, warm->vcpus, error) &&
           carrel_store_bind_int64(store, stmt, 6, warm->memory_mib, error) &&
           carrel_store_bind_int64(store, stmt, 7, (gint64)warm->memory_bytes, error) &&
           carrel_store_bind_int64(store, stmt, 8, warm->created_at, error) &&
           carrel_store_bind_int64(store, stmt, 9, warm->machine_revision, error) &&
           carrel_store_bind_text(store, stmt, 10, warm->memory_file, error) &&
           carrel_store_step_done(store, stmt, NULL, "storing a warm state", error);
}

static CarrelWarmState *
warm_from_row(sqlite3_stmt *stmt)
{
    CarrelWarmState *warm = carrel_warm_state_new();

    warm->template_name = carrel_store_column_dup(stmt, 0);
    warm->template_version = (guint)sqlite3_column_int64(stmt, 1);
    warm->memory_path = carrel_store_column_dup(stmt, 2);
    warm->disk_path = carrel_store_column_dup(stmt, 3);
    warm->vcpus = (guint)sqlite3_column_int64(stmt, 4);
    warm->memory_mib = (guint)sqlite3_column_int64(stmt, 5);
    warm->memory_bytes = (guint64)sqlite3_column_int64(stmt, 6);
    warm->created_at = sqlite3_column_int64(stmt, 7);
    warm->machine_revision = (guint)sqlite3_column_int64(stmt, 8);
    warm->memory_file = carrel_store_column_dup(stmt, 9);
    return warm;
}

CarrelWarmState *
carrel_store_warm_get(CarrelStore *store, const char *name, guint version, GError **error)
{
    g_autoptr(GMutexLocker) locker G_GNUC_UNUSED = g_mutex_locker_new(&store->lock);
    g_autoptr(sqlite3_stmt) stmt = NULL;
    gboolean row = FALSE;

    stmt = carrel_store_prepare(store,
                                "SELECT " WARM_COLUMNS " FROM warm_states "
                                "WHERE template_name = ?1 AND template_version = ?2",
                                error);
    if (!stmt || !carrel_store_bind_text(store, stmt, 1, name, error) ||
        !carrel_store_bind_int64(store, stmt, 2, version, error) ||
        !carrel_store_step_row(store, stmt, "reading a warm state", &row, error))
        return NULL;
    if (!row) {
        g_set_error(error, CARREL_ERROR, CARREL_ERROR_NOT_FOUND, "template '%s@%u' is not warm",
                    name, version);
        return NULL;
    }
    return warm_from_row(stmt);
}

gboolean
carrel_store_warm_delete(CarrelStore *store, const char *name, guint version, GError **error)
{
    g_autoptr(GMutexLocker) locker G_GNUC_UNUSED = g_mutex_locker_new(&store->lock);
    g_autoptr(sqlite3_stmt) stmt = NULL;

    stmt = carrel_store_prepare(store,
                                "DELETE FROM warm_states "
                                "WHERE template_name = ?1 AND template_version = ?2",
                                error);
    return stmt && carrel_store_bind_text(store, stmt, 1, name, error) &&
           carrel_store_bind_int64(store, stmt, 2, version, error) &&
           carrel_store_step_done(store, stmt, NULL, "deleting a warm state", error);
}
