#define CARREL_STORE_PRIV_H_ALLOW
#include "store/store-priv.h"

gboolean
carrel_store_event_add(CarrelStore *store, CarrelEvent *event, GError **error)
{
    g_autoptr(GMutexLocker) locker G_GNUC_UNUSED = g_mutex_locker_new(&store->lock);
    g_autoptr(sqlite3_stmt) stmt = NULL;
    g_autofree char *detail = carrel_event_detail_to_text(event);

    stmt =
        carrel_store_prepare(store,
                             "INSERT INTO events (session_id, ts, actor, kind, detail, actor_id) "
                             "VALUES (?, ?, ?, ?, ?, ?)",
                             error);
    if (!stmt || !carrel_store_bind_text(store, stmt, 1, event->session_id, error) ||
        !carrel_store_bind_int64(store, stmt, 2, event->ts_us, error) ||
        !carrel_store_bind_text(store, stmt, 3, event->actor, error) ||
        !carrel_store_bind_text(store, stmt, 4, event->kind, error) ||
        !carrel_store_bind_text(store, stmt, 5, detail, error) ||
        !carrel_store_bind_text(store, stmt, 6, event->actor_id, error) ||
        !carrel_store_step_done(store, stmt, NULL, "storing an event", error))
        return FALSE;
    event->seq = sqlite3_last_insert_rowid(store->db);
    return TRUE;
}

static CarrelEvent *
event_from_row(sqlite3_stmt *stmt, GError **error)
{
    g_autoptr(CarrelEvent) event = carrel_event_new();
    const char *detail = (const char *)sqlite3_column_text(stmt, 5);

    event->seq = sqlite3_column_int64(stmt, 0);
    event->session_id = carrel_store_column_dup(stmt, 1);
    event->ts_us = sqlite3_column_int64(stmt, 2);
    event->actor = carrel_store_column_dup(stmt, 3);
    event->kind = carrel_store_column_dup(stmt, 4);
    event->actor_id = carrel_store_column_dup(stmt, 6);
    if (detail && !carrel_event_detail_from_text(event, detail, error))
        return NULL;
    return g_steal_pointer(&event);
}

GPtrArray *
carrel_store_event_list(CarrelStore *store, const char *session_id, gint64 after_seq, guint limit,
                        GError **error)
{
    g_autoptr(GMutexLocker) locker G_GNUC_UNUSED = g_mutex_locker_new(&store->lock);
    g_autoptr(sqlite3_stmt) stmt = NULL;
    g_autoptr(GPtrArray) events = g_ptr_array_new_with_free_func((GDestroyNotify)carrel_event_free);

    stmt = carrel_store_prepare(
        store,
        "SELECT seq, session_id, ts, actor, kind, detail, actor_id FROM events "
        "WHERE session_id = ?1 AND seq > ?2 ORDER BY seq LIMIT ?3",
        error);
    if (!stmt || !carrel_store_bind_text(store, stmt, 1, session_id, error) ||
        !carrel_store_bind_int64(store, stmt, 2, after_seq, error) ||
        !carrel_store_bind_int64(store, stmt, 3, limit, error))
        return NULL;
    for (;;) {
        gboolean row = FALSE;
        CarrelEvent *event;

        if (!carrel_store_step_row(store, stmt, "reading events", &row, error))
            return NULL;
        if (!row)
            break;
        if (!(event = event_from_row(stmt, error))) {
            g_prefix_error(error, "reading events: ");
            return NULL;
        }
        g_ptr_array_add(events, event);
    }
    return g_steal_pointer(&events);
}

gint64
carrel_store_event_last_ts(CarrelStore *store, const char *session_id, GError **error)
{
    g_autoptr(GMutexLocker) locker G_GNUC_UNUSED = g_mutex_locker_new(&store->lock);
    g_autoptr(sqlite3_stmt) stmt = NULL;
    gint64 ts = 0;

    /* By id where there is one: a token may be named "carreld", but no token's id is that. */
    stmt = carrel_store_prepare(store,
                                "SELECT coalesce(max(ts), 0) FROM events WHERE session_id = ?1 "
                                "AND coalesce(actor_id, actor) != 'carreld'",
                                error);
    if (!stmt || !carrel_store_bind_text(store, stmt, 1, session_id, error) ||
        !carrel_store_query_int64(store, stmt, "reading the last event", &ts, error))
        return -1;
    return ts;
}

gboolean
carrel_store_event_names_screenshot(CarrelStore *store, const char *session_id, const char *name,
                                    gboolean *ret_named, GError **error)
{
    g_autoptr(GMutexLocker) locker G_GNUC_UNUSED = g_mutex_locker_new(&store->lock);
    g_autoptr(sqlite3_stmt) stmt = NULL;
    gint64 count = 0;

    stmt = carrel_store_prepare(store,
                                "SELECT count(*) FROM events WHERE session_id = ?1 "
                                "AND json_extract(detail, '$.screenshot') = ?2",
                                error);
    if (!stmt || !carrel_store_bind_text(store, stmt, 1, session_id, error) ||
        !carrel_store_bind_text(store, stmt, 2, name, error) ||
        !carrel_store_query_int64(store, stmt, "looking for a screenshot's event", &count, error))
        return FALSE;
    *ret_named = count > 0;
    return TRUE;
}
