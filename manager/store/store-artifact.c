#define CARREL_STORE_PRIV_H_ALLOW
#include "store/store-priv.h"

#define ARTIFACT_COLUMNS                                                                           \
    "id, extraction_id, session_id, guest_path, path, type, size, mode, uid, gid, mtime, "         \
    "sha256, link_target, skipped, created_at"

static gboolean
insert_artifact(CarrelStore *store, const CarrelArtifact *a, guint seq, GError **error)
{
    g_autoptr(sqlite3_stmt) stmt = NULL;

    stmt = carrel_store_prepare(store,
                                "INSERT INTO artifacts (" ARTIFACT_COLUMNS ", seq) "
                                "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                                error);
    return stmt && carrel_store_bind_text(store, stmt, 1, a->id, error) &&
           carrel_store_bind_text(store, stmt, 2, a->extraction_id, error) &&
           carrel_store_bind_text(store, stmt, 3, a->session_id, error) &&
           carrel_store_bind_text(store, stmt, 4, a->guest_path, error) &&
           carrel_store_bind_text(store, stmt, 5, a->path, error) &&
           carrel_store_bind_text(store, stmt, 6, carrel_file_type_to_string(a->type), error) &&
           carrel_store_bind_int64(store, stmt, 7, (gint64)a->size, error) &&
           carrel_store_bind_int64(store, stmt, 8, a->mode, error) &&
           carrel_store_bind_int64(store, stmt, 9, a->uid, error) &&
           carrel_store_bind_int64(store, stmt, 10, a->gid, error) &&
           carrel_store_bind_int64(store, stmt, 11, a->mtime, error) &&
           carrel_store_bind_text(store, stmt, 12, a->sha256, error) &&
           carrel_store_bind_text(store, stmt, 13, a->link_target, error) &&
           carrel_store_bind_text(store, stmt, 14, a->skipped, error) &&
           carrel_store_bind_int64(store, stmt, 15, a->created_at, error) &&
           carrel_store_bind_int64(store, stmt, 16, seq, error) &&
           carrel_store_step_done(store, stmt, NULL, "storing an artifact", error);
}

static gboolean
insert_extraction_row(CarrelStore *store, const CarrelExtraction *x, GError **error)
{
    g_autoptr(sqlite3_stmt) stmt = NULL;
    g_autofree char *detail = carrel_extraction_detail_to_text(x);

    stmt = carrel_store_prepare(store,
                                "INSERT INTO extractions (id, session_id, reason, source, dir, "
                                "detail, created_at) VALUES (?, ?, ?, ?, ?, ?, ?)",
                                error);
    return stmt && carrel_store_bind_text(store, stmt, 1, x->id, error) &&
           carrel_store_bind_text(store, stmt, 2, x->session_id, error) &&
           carrel_store_bind_text(store, stmt, 3, x->reason, error) &&
           carrel_store_bind_text(store, stmt, 4, x->source, error) &&
           carrel_store_bind_text(store, stmt, 5, x->dir, error) &&
           carrel_store_bind_text(store, stmt, 6, detail, error) &&
           carrel_store_bind_int64(store, stmt, 7, x->created_at, error) &&
           carrel_store_step_done(store, stmt, NULL, "storing an extraction", error);
}

gboolean
carrel_store_extraction_insert(CarrelStore *store, const CarrelExtraction *x, GError **error)
{
    g_autoptr(GMutexLocker) locker G_GNUC_UNUSED = g_mutex_locker_new(&store->lock);
    gboolean ok;

    /* All or nothing: an extraction is never listed without its artifacts. */
    if (!carrel_store_begin(store, error))
        return FALSE;
    ok = insert_extraction_row(store, x, error);
    for (guint i = 0; ok && i < x->artifacts->len; i++)
        ok = insert_artifact(store, g_ptr_array_index(x->artifacts, i), i, error);
    if (!ok) {
        carrel_store_rollback(store);
        return FALSE;
    }
    return carrel_store_commit(store, error);
}

static CarrelArtifact *
artifact_from_row(sqlite3_stmt *stmt)
{
    CarrelArtifact *a = carrel_artifact_new();
    const char *type = (const char *)sqlite3_column_text(stmt, 5);

    a->id = carrel_store_column_dup(stmt, 0);
    a->extraction_id = carrel_store_column_dup(stmt, 1);
    a->session_id = carrel_store_column_dup(stmt, 2);
    a->guest_path = carrel_store_column_dup(stmt, 3);
    a->path = carrel_store_column_dup(stmt, 4);
    a->type = carrel_file_type_from_string(type);
    if (a->type == CARREL_FILE_LAST)
        a->type = CARREL_FILE_OTHER;
    a->size = (guint64)sqlite3_column_int64(stmt, 6);
    a->mode = (guint32)sqlite3_column_int64(stmt, 7);
    a->uid = sqlite3_column_int64(stmt, 8);
    a->gid = sqlite3_column_int64(stmt, 9);
    a->mtime = sqlite3_column_int64(stmt, 10);
    a->sha256 = carrel_store_column_dup(stmt, 11);
    a->link_target = carrel_store_column_dup(stmt, 12);
    a->skipped = carrel_store_column_dup(stmt, 13);
    a->created_at = sqlite3_column_int64(stmt, 14);
    return a;
}

/* Rows of a prepared artifacts query, bound already. */
static gboolean
collect_artifacts(CarrelStore *store, sqlite3_stmt *stmt, GPtrArray *into, GError **error)
{
    for (;;) {
        gboolean row = FALSE;
        if (!carrel_store_step_row(store, stmt, "reading artifacts", &row, error))
            return FALSE;
        if (!row)
            return TRUE;
        g_ptr_array_add(into, artifact_from_row(stmt));
    }
}

CarrelArtifact *
carrel_store_artifact_get(CarrelStore *store, const char *id, GError **error)
{
    g_autoptr(GMutexLocker) locker G_GNUC_UNUSED = g_mutex_locker_new(&store->lock);
    g_autoptr(sqlite3_stmt) stmt = NULL;
    gboolean row = FALSE;

    stmt = carrel_store_prepare(store, "SELECT " ARTIFACT_COLUMNS " FROM artifacts WHERE id = ?",
                                error);
    if (!stmt || !carrel_store_bind_text(store, stmt, 1, id, error) ||
        !carrel_store_step_row(store, stmt, "reading an artifact", &row, error))
        return NULL;
    if (!row) {
        g_set_error(error, CARREL_ERROR, CARREL_ERROR_NOT_FOUND, "no artifact '%s'", id);
        return NULL;
    }
    return artifact_from_row(stmt);
}

static CarrelExtraction *
extraction_from_row(CarrelStore *store, sqlite3_stmt *stmt, GError **error)
{
    g_autoptr(CarrelExtraction) x = carrel_extraction_new();
    g_autoptr(sqlite3_stmt) arts = NULL;

    x->id = carrel_store_column_dup(stmt, 0);
    x->session_id = carrel_store_column_dup(stmt, 1);
    x->reason = carrel_store_column_dup(stmt, 2);
    x->source = carrel_store_column_dup(stmt, 3);
    x->dir = carrel_store_column_dup(stmt, 4);
    x->created_at = sqlite3_column_int64(stmt, 6);
    if (!carrel_extraction_detail_from_text(x, (const char *)sqlite3_column_text(stmt, 5), error))
        return NULL;
    arts = carrel_store_prepare(store,
                                "SELECT " ARTIFACT_COLUMNS " FROM artifacts "
                                "WHERE extraction_id = ? ORDER BY seq",
                                error);
    if (!arts || !carrel_store_bind_text(store, arts, 1, x->id, error) ||
        !collect_artifacts(store, arts, x->artifacts, error))
        return NULL;
    return g_steal_pointer(&x);
}

GPtrArray *
carrel_store_extraction_list(CarrelStore *store, const char *session_id, GError **error)
{
    g_autoptr(GMutexLocker) locker G_GNUC_UNUSED = g_mutex_locker_new(&store->lock);
    g_autoptr(sqlite3_stmt) stmt = NULL;
    g_autoptr(GPtrArray) list =
        g_ptr_array_new_with_free_func((GDestroyNotify)carrel_extraction_free);

    stmt = carrel_store_prepare(store,
                                "SELECT id, session_id, reason, source, dir, detail, created_at "
                                "FROM extractions WHERE session_id = ? ORDER BY created_at, rowid",
                                error);
    if (!stmt || !carrel_store_bind_text(store, stmt, 1, session_id, error))
        return NULL;
    for (;;) {
        gboolean row = FALSE;
        CarrelExtraction *x;
        if (!carrel_store_step_row(store, stmt, "reading extractions", &row, error))
            return NULL;
        if (!row)
            break;
        if (!(x = extraction_from_row(store, stmt, error)))
            return NULL;
        g_ptr_array_add(list, x);
    }
    return g_steal_pointer(&list);
}

gboolean
carrel_store_extraction_exists(CarrelStore *store, const char *id, gboolean *ret_exists,
                               GError **error)
{
    g_autoptr(GMutexLocker) locker G_GNUC_UNUSED = g_mutex_locker_new(&store->lock);
    g_autoptr(sqlite3_stmt) sel = NULL;
    gint64 n = 0;

    sel = carrel_store_prepare(store, "SELECT COUNT(*) FROM extractions WHERE id = ?", error);
    if (!sel || !carrel_store_bind_text(store, sel, 1, id, error) ||
        !carrel_store_query_int64(store, sel, "looking up an extraction", &n, error))
        return FALSE;
    *ret_exists = n > 0;
    return TRUE;
}
