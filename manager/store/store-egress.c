#define CARREL_STORE_PRIV_H_ALLOW
#include "store/store-priv.h"

#define EGRESS_COLUMNS                                                                             \
    "seq, session_id, ts_us, name, address, port, protocol, decision, bytes_out, bytes_in, "       \
    "duration_ms"

gboolean
carrel_store_egress_add(CarrelStore *store, CarrelEgressRecord *rec, GError **error)
{
    g_autoptr(GMutexLocker) locker G_GNUC_UNUSED = g_mutex_locker_new(&store->lock);
    g_autoptr(sqlite3_stmt) stmt = NULL;

    stmt = carrel_store_prepare(store,
                                "INSERT INTO egress (session_id, ts_us, name, address, port, "
                                "protocol, decision, bytes_out, bytes_in, duration_ms) "
                                "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                                error);
    if (!stmt || !carrel_store_bind_text(store, stmt, 1, rec->session_id, error) ||
        !carrel_store_bind_int64(store, stmt, 2, rec->ts_us, error) ||
        !carrel_store_bind_text(store, stmt, 3, rec->name ? rec->name : "", error) ||
        !carrel_store_bind_text(store, stmt, 4, rec->address, error) ||
        !carrel_store_bind_int64(store, stmt, 5, rec->port, error) ||
        !carrel_store_bind_text(store, stmt, 6, rec->protocol, error) ||
        !carrel_store_bind_text(store, stmt, 7, rec->decision, error) ||
        !carrel_store_bind_int64(store, stmt, 8, rec->bytes_out, error) ||
        !carrel_store_bind_int64(store, stmt, 9, rec->bytes_in, error) ||
        !carrel_store_bind_int64(store, stmt, 10, rec->duration_ms, error) ||
        !carrel_store_step_done(store, stmt, NULL, "storing an egress record", error))
        return FALSE;
    rec->seq = sqlite3_last_insert_rowid(store->db);
    return TRUE;
}

static CarrelEgressRecord *
record_from_row(sqlite3_stmt *stmt)
{
    CarrelEgressRecord *rec = carrel_egress_record_new();

    rec->seq = sqlite3_column_int64(stmt, 0);
    rec->session_id = carrel_store_column_dup(stmt, 1);
    rec->ts_us = sqlite3_column_int64(stmt, 2);
    rec->name = carrel_store_column_dup(stmt, 3);
    rec->address = carrel_store_column_dup(stmt, 4);
    rec->port = (guint)sqlite3_column_int64(stmt, 5);
    rec->protocol = carrel_store_column_dup(stmt, 6);
    rec->decision = carrel_store_column_dup(stmt, 7);
    rec->bytes_out = sqlite3_column_int64(stmt, 8);
    rec->bytes_in = sqlite3_column_int64(stmt, 9);
    rec->duration_ms = sqlite3_column_int64(stmt, 10);
    return rec;
}

GPtrArray *
carrel_store_egress_list(CarrelStore *store, const char *session_id, gint64 after_seq, guint limit,
                         GError **error)
{
    g_autoptr(GMutexLocker) locker G_GNUC_UNUSED = g_mutex_locker_new(&store->lock);
    g_autoptr(sqlite3_stmt) stmt = NULL;
    g_autoptr(GPtrArray) list =
        g_ptr_array_new_with_free_func((GDestroyNotify)carrel_egress_record_free);

    stmt = carrel_store_prepare(store,
                                "SELECT " EGRESS_COLUMNS " FROM egress WHERE session_id = ?1 "
                                "AND seq > ?2 ORDER BY seq LIMIT ?3",
                                error);
    if (!stmt || !carrel_store_bind_text(store, stmt, 1, session_id, error) ||
        !carrel_store_bind_int64(store, stmt, 2, after_seq, error) ||
        !carrel_store_bind_int64(store, stmt, 3, limit, error))
        return NULL;
    for (;;) {
        gboolean row = FALSE;

        if (!carrel_store_step_row(store, stmt, "reading the egress log", &row, error))
            return NULL;
        if (!row)
            break;
        g_ptr_array_add(list, record_from_row(stmt));
    }
    return g_steal_pointer(&list);
}

GHashTable *
carrel_store_egress_addresses(CarrelStore *store, GError **error)
{
    g_autoptr(GMutexLocker) locker G_GNUC_UNUSED = g_mutex_locker_new(&store->lock);
    g_autoptr(sqlite3_stmt) stmt = NULL;
    g_autoptr(GHashTable) used = g_hash_table_new_full(g_str_hash, g_str_equal, g_free, g_free);

    stmt = carrel_store_prepare(store,
                                "SELECT egress_ip, id FROM sessions WHERE egress_ip IS NOT NULL "
                                "AND state != 'destroyed'",
                                error);
    if (!stmt)
        return NULL;
    for (;;) {
        gboolean row = FALSE;

        if (!carrel_store_step_row(store, stmt, "reading session addresses", &row, error))
            return NULL;
        if (!row)
            break;
        g_hash_table_replace(used, carrel_store_column_dup(stmt, 0),
                             carrel_store_column_dup(stmt, 1));
    }
    return g_steal_pointer(&used);
}

CarrelApproval *
carrel_store_approval_find(CarrelStore *store, const char *session_id, const char *action,
                           const char *key, GError **error)
{
    g_autofree char *id = NULL;

    {
        g_autoptr(GMutexLocker) locker G_GNUC_UNUSED = g_mutex_locker_new(&store->lock);
        g_autoptr(sqlite3_stmt) stmt = carrel_store_prepare(
            store,
            "SELECT id FROM approvals WHERE session_id = ?1 AND action = ?2 "
            "AND json_extract(detail, '$.destination') = ?3 ORDER BY rowid DESC LIMIT 1",
            error);
        gboolean row = FALSE;

        if (!stmt || !carrel_store_bind_text(store, stmt, 1, session_id, error) ||
            !carrel_store_bind_text(store, stmt, 2, action, error) ||
            !carrel_store_bind_text(store, stmt, 3, key, error) ||
            !carrel_store_step_row(store, stmt, "finding an approval", &row, error))
            return NULL;
        if (!row) {
            g_set_error(error, CARREL_ERROR, CARREL_ERROR_NOT_FOUND, "no such approval");
            return NULL;
        }
        id = carrel_store_column_dup(stmt, 0);
    }
    return carrel_store_approval_get(store, id, error);
}
