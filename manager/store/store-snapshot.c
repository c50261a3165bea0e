#define CARREL_STORE_PRIV_H_ALLOW
#include "store/store-priv.h"

#define SNAPSHOT_COLUMNS                                                                           \
    "id, session_id, name, parent, overlay_path, memory_path, created_at, memory_file"

gboolean
carrel_store_snapshot_insert(CarrelStore *store, const CarrelSnapshot *snap, GError **error)
{
    g_autoptr(GMutexLocker) locker G_GNUC_UNUSED = g_mutex_locker_new(&store->lock);
    g_autofree char *used = g_strdup_printf("the session has a snapshot '%s' already", snap->name);
    const CarrelStoreConflict conflict = {.unique = used, .primary_key = used};
    g_autoptr(sqlite3_stmt) stmt = NULL;

    stmt = carrel_store_prepare(store,
                                "INSERT INTO snapshots (" SNAPSHOT_COLUMNS ") "
                                "VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                                error);
    return stmt && carrel_store_bind_text(store, stmt, 1, snap->id, error) &&
           carrel_store_bind_text(store, stmt, 2, snap->session_id, error) &&
           carrel_store_bind_text(store, stmt, 3, snap->name, error) &&
           carrel_store_bind_text(store, stmt, 4, snap->parent, error) &&
           carrel_store_bind_text(store, stmt, 5, snap->layer_path, error) &&
           carrel_store_bind_text(store, stmt, 6, snap->memory_path, error) &&
           carrel_store_bind_int64(store, stmt, 7, snap->created_at, error) &&
           carrel_store_bind_text(store, stmt, 8, snap->memory_file, error) &&
           carrel_store_step_done(store, stmt, &conflict, "storing a snapshot", error);
}

static CarrelSnapshot *
snapshot_from_row(sqlite3_stmt *stmt)
{
    CarrelSnapshot *snap = carrel_snapshot_new();

    snap->id = carrel_store_column_dup(stmt, 0);
    snap->session_id = carrel_store_column_dup(stmt, 1);
    snap->name = carrel_store_column_dup(stmt, 2);
    snap->parent = carrel_store_column_dup(stmt, 3);
    snap->layer_path = carrel_store_column_dup(stmt, 4);
    snap->memory_path = carrel_store_column_dup(stmt, 5);
    snap->created_at = sqlite3_column_int64(stmt, 6);
    snap->memory_file = carrel_store_column_dup(stmt, 7);
    return snap;
}

CarrelSnapshot *
carrel_store_snapshot_get(CarrelStore *store, const char *session_id, const char *id_or_name,
                          GError **error)
{
    g_autoptr(GMutexLocker) locker G_GNUC_UNUSED = g_mutex_locker_new(&store->lock);
    g_autoptr(sqlite3_stmt) stmt = NULL;
    gboolean row = FALSE;

    stmt = carrel_store_prepare(store,
                                "SELECT " SNAPSHOT_COLUMNS " FROM snapshots "
                                "WHERE session_id = ?1 AND (id = ?2 OR name = ?2)",
                                error);
    if (!stmt || !carrel_store_bind_text(store, stmt, 1, session_id, error) ||
        !carrel_store_bind_text(store, stmt, 2, id_or_name, error) ||
        !carrel_store_step_row(store, stmt, "reading a snapshot", &row, error))
        return NULL;
    if (!row) {
        g_set_error(error, CARREL_ERROR, CARREL_ERROR_NOT_FOUND, "no snapshot '%s'", id_or_name);
        return NULL;
    }
    return snapshot_from_row(stmt);
}

GPtrArray *
carrel_store_snapshot_list(CarrelStore *store, const char *session_id, GError **error)
{
    g_autoptr(GMutexLocker) locker G_GNUC_UNUSED = g_mutex_locker_new(&store->lock);
    g_autoptr(sqlite3_stmt) stmt = NULL;
    g_autoptr(GPtrArray) list =
        g_ptr_array_new_with_free_func((GDestroyNotify)carrel_snapshot_free);

    stmt = carrel_store_prepare(store,
                                "SELECT " SNAPSHOT_COLUMNS " FROM snapshots WHERE session_id = ?1 "
                                "ORDER BY created_at, rowid",
                                error);
    if (!stmt || !carrel_store_bind_text(store, stmt, 1, session_id, error))
        return NULL;
    for (;;) {
        gboolean row = FALSE;
        if (!carrel_store_step_row(store, stmt, "reading snapshots", &row, error))
            return NULL;
        if (!row)
            break;
        g_ptr_array_add(list, snapshot_from_row(stmt));
    }
    return g_steal_pointer(&list);
}

gboolean
carrel_store_snapshot_delete(CarrelStore *store, const CarrelSnapshot *snap, GError **error)
{
    g_autoptr(GMutexLocker) locker G_GNUC_UNUSED = g_mutex_locker_new(&store->lock);
    g_autoptr(sqlite3_stmt) children = NULL, head = NULL, del = NULL;
    gboolean ok;

    /* Its children and a session descending from it now descend from its parent. */
    if (!carrel_store_begin(store, error))
        return FALSE;
    children =
        carrel_store_prepare(store, "UPDATE snapshots SET parent = ?2 WHERE parent = ?1", error);
    head = carrel_store_prepare(
        store, "UPDATE sessions SET head_snapshot = ?2 WHERE head_snapshot = ?1", error);
    del = carrel_store_prepare(store, "DELETE FROM snapshots WHERE id = ?1", error);
    ok = children && head && del && carrel_store_bind_text(store, children, 1, snap->id, error) &&
         carrel_store_bind_text(store, children, 2, snap->parent, error) &&
         carrel_store_step_done(store, children, NULL, "re-linking snapshots", error) &&
         carrel_store_bind_text(store, head, 1, snap->id, error) &&
         carrel_store_bind_text(store, head, 2, snap->parent, error) &&
         carrel_store_step_done(store, head, NULL, "re-linking sessions", error) &&
         carrel_store_bind_text(store, del, 1, snap->id, error) &&
         carrel_store_step_done(store, del, NULL, "deleting a snapshot", error);
    if (!ok) {
        carrel_store_rollback(store);
        return FALSE;
    }
    return carrel_store_commit(store, error);
}
