#include <string.h>

#define CARREL_STORE_PRIV_H_ALLOW
#include "store/store-priv.h"

#define APPROVAL_COLUMNS                                                                           \
    "id, session_id, action, detail, requested_by, requested_at, state, decided_by, decided_at, "  \
    "reason"

gboolean
carrel_store_approval_insert(CarrelStore *store, const CarrelApproval *a, GError **error)
{
    g_autoptr(GMutexLocker) locker G_GNUC_UNUSED = g_mutex_locker_new(&store->lock);
    g_autoptr(sqlite3_stmt) stmt = NULL;
    g_autofree char *detail = json_to_string(a->detail, FALSE);
    const CarrelStoreConflict conflict = {.primary_key = "this approval exists already"};

    stmt = carrel_store_prepare(store,
                                "INSERT INTO approvals (id, session_id, action, detail, "
                                "requested_by, requested_at) VALUES (?, ?, ?, ?, ?, ?)",
                                error);
    return stmt && carrel_store_bind_text(store, stmt, 1, a->id, error) &&
           carrel_store_bind_text(store, stmt, 2, a->session_id, error) &&
           carrel_store_bind_text(store, stmt, 3, a->action, error) &&
           carrel_store_bind_text(store, stmt, 4, detail, error) &&
           carrel_store_bind_text(store, stmt, 5, a->requested_by, error) &&
           carrel_store_bind_int64(store, stmt, 6, a->requested_at, error) &&
           carrel_store_step_done(store, stmt, &conflict, "storing an approval", error);
}

static CarrelApproval *
approval_from_row(sqlite3_stmt *stmt)
{
    CarrelApproval *a = carrel_approval_new();
    const char *detail = (const char *)sqlite3_column_text(stmt, 3);

    a->id = carrel_store_column_dup(stmt, 0);
    a->session_id = carrel_store_column_dup(stmt, 1);
    a->action = carrel_store_column_dup(stmt, 2);
    /* Written by this module from a parsed object; a broken row reads as no detail. */
    a->detail = detail ? json_from_string(detail, NULL) : NULL;
    a->requested_by = carrel_store_column_dup(stmt, 4);
    a->requested_at = sqlite3_column_int64(stmt, 5);
    a->state = carrel_store_column_dup(stmt, 6);
    a->decided_by = carrel_store_column_dup(stmt, 7);
    a->decided_at = sqlite3_column_int64(stmt, 8);
    a->reason = carrel_store_column_dup(stmt, 9);
    return a;
}

CarrelApproval *
carrel_store_approval_get(CarrelStore *store, const char *id, GError **error)
{
    g_autoptr(GMutexLocker) locker G_GNUC_UNUSED = g_mutex_locker_new(&store->lock);
    g_autoptr(sqlite3_stmt) stmt = NULL;
    gboolean row = FALSE;

    stmt = carrel_store_prepare(store, "SELECT " APPROVAL_COLUMNS " FROM approvals WHERE id = ?",
                                error);
    if (!stmt || !carrel_store_bind_text(store, stmt, 1, id, error) ||
        !carrel_store_step_row(store, stmt, "reading an approval", &row, error))
        return NULL;
    if (!row) {
        g_set_error(error, CARREL_ERROR, CARREL_ERROR_NOT_FOUND, "no approval '%s'", id);
        return NULL;
    }
    return approval_from_row(stmt);
}

GPtrArray *
carrel_store_approval_list(CarrelStore *store, gboolean pending_only, GError **error)
{
    g_autoptr(GMutexLocker) locker G_GNUC_UNUSED = g_mutex_locker_new(&store->lock);
    g_autoptr(sqlite3_stmt) stmt = NULL;
    g_autoptr(GPtrArray) out = g_ptr_array_new_with_free_func((GDestroyNotify)carrel_approval_free);
    gboolean row = FALSE;

    /* Pending ones oldest first (a queue); with decided ones, the newest 200 decisions too. */
    stmt = carrel_store_prepare(store,
                                pending_only ? "SELECT " APPROVAL_COLUMNS " FROM approvals "
                                               "WHERE state = 'pending' ORDER BY requested_at, id"
                                             : "SELECT " APPROVAL_COLUMNS " FROM approvals "
                                               "WHERE state = 'pending' OR id IN (SELECT id FROM "
                                               "approvals WHERE state != 'pending' ORDER BY "
                                               "decided_at DESC LIMIT 200) "
                                               "ORDER BY state != 'pending', requested_at, id",
                                error);
    if (!stmt)
        return NULL;
    while (TRUE) {
        if (!carrel_store_step_row(store, stmt, "listing approvals", &row, error))
            return NULL;
        if (!row)
            break;
        g_ptr_array_add(out, approval_from_row(stmt));
    }
    return g_steal_pointer(&out);
}

gboolean
carrel_store_approval_decide(CarrelStore *store, const char *id, gboolean approve,
                             const char *decided_by, const char *reason, GError **error)
{
    g_autoptr(GMutexLocker) locker G_GNUC_UNUSED = g_mutex_locker_new(&store->lock);
    g_autoptr(sqlite3_stmt) stmt = NULL;

    /* Only a pending row changes: a decision is made once. */
    stmt =
        carrel_store_prepare(store,
                             "UPDATE approvals SET state = ?2, decided_by = ?3, decided_at = ?4, "
                             "reason = ?5 WHERE id = ?1 AND state = 'pending'",
                             error);
    if (!stmt || !carrel_store_bind_text(store, stmt, 1, id, error) ||
        !carrel_store_bind_text(store, stmt, 2, approve ? "approved" : "denied", error) ||
        !carrel_store_bind_text(store, stmt, 3, decided_by, error) ||
        !carrel_store_bind_int64(store, stmt, 4, carrel_util_now(), error) ||
        !carrel_store_bind_text(store, stmt, 5, reason, error) ||
        !carrel_store_step_done(store, stmt, NULL, "deciding an approval", error))
        return FALSE;
    if (sqlite3_changes(store->db) == 0) {
        g_set_error(error, CARREL_ERROR, CARREL_ERROR_WRONG_STATE,
                    "approval '%s' does not exist or was decided already", id);
        return FALSE;
    }
    return TRUE;
}

/* The lease of session_id, if any; the ret_* may be NULL, and are written only on success. */
static gboolean
read_lease(CarrelStore *store, const char *session_id, char **ret_holder_id,
           char **ret_holder_label, gint64 *ret_since, GError **error)
{
    g_autoptr(sqlite3_stmt) sel = NULL;
    gboolean row = FALSE;

    sel = carrel_store_prepare(
        store, "SELECT holder_id, holder, since FROM leases WHERE session_id = ?", error);
    if (!sel || !carrel_store_bind_text(store, sel, 1, session_id, error) ||
        !carrel_store_step_row(store, sel, "reading a control lease", &row, error))
        return FALSE;
    if (ret_holder_id)
        *ret_holder_id = row ? carrel_store_column_dup(sel, 0) : NULL;
    if (ret_holder_label)
        *ret_holder_label = row ? carrel_store_column_dup(sel, 1) : NULL;
    if (ret_since)
        *ret_since = row ? sqlite3_column_int64(sel, 2) : 0;
    return TRUE;
}

gboolean
carrel_store_lease_take(CarrelStore *store, const char *session_id, const char *holder_id,
                        const char *holder_label, char **ret_holder_id, char **ret_holder_label,
                        gint64 *ret_since, GError **error)
{
    g_autoptr(GMutexLocker) locker G_GNUC_UNUSED = g_mutex_locker_new(&store->lock);
    g_autoptr(sqlite3_stmt) ins = NULL;

    /* OR IGNORE would also skip a row with a NULL holder, and report nobody as the holder. */
    if (!holder_id || !holder_label) {
        g_set_error(error, CARREL_ERROR, CARREL_ERROR_INVALID_ARG,
                    "a control lease needs a holder's id and name");
        return FALSE;
    }
    /* First come holds it: an existing holder is kept and returned. */
    ins = carrel_store_prepare(store,
                               "INSERT OR IGNORE INTO leases (session_id, holder_id, holder, "
                               "since) VALUES (?, ?, ?, ?)",
                               error);
    if (!ins || !carrel_store_bind_text(store, ins, 1, session_id, error) ||
        !carrel_store_bind_text(store, ins, 2, holder_id, error) ||
        !carrel_store_bind_text(store, ins, 3, holder_label, error) ||
        !carrel_store_bind_int64(store, ins, 4, carrel_util_now(), error) ||
        !carrel_store_step_done(store, ins, NULL, "taking a control lease", error))
        return FALSE;
    return read_lease(store, session_id, ret_holder_id, ret_holder_label, ret_since, error);
}

gboolean
carrel_store_lease_get(CarrelStore *store, const char *session_id, char **ret_holder_id,
                       char **ret_holder_label, gint64 *ret_since, GError **error)
{
    g_autoptr(GMutexLocker) locker G_GNUC_UNUSED = g_mutex_locker_new(&store->lock);

    return read_lease(store, session_id, ret_holder_id, ret_holder_label, ret_since, error);
}

void
carrel_store_lease_free(CarrelStoreLease *lease)
{
    if (!lease)
        return;
    g_free(lease->holder_id);
    g_free(lease->holder_label);
    g_free(lease);
}

GHashTable *
carrel_store_lease_all(CarrelStore *store, GError **error)
{
    g_autoptr(GMutexLocker) locker G_GNUC_UNUSED = g_mutex_locker_new(&store->lock);
    g_autoptr(sqlite3_stmt) sel = NULL;
    g_autoptr(GHashTable) all = g_hash_table_new_full(g_str_hash, g_str_equal, g_free,
                                                      (GDestroyNotify)carrel_store_lease_free);
    gboolean row = FALSE;

    sel = carrel_store_prepare(store, "SELECT session_id, holder_id, holder, since FROM leases",
                               error);
    if (!sel)
        return NULL;
    while (TRUE) {
        CarrelStoreLease *lease;
        if (!carrel_store_step_row(store, sel, "reading the control leases", &row, error))
            return NULL;
        if (!row)
            break;
        lease = g_new0(CarrelStoreLease, 1);
        lease->holder_id = carrel_store_column_dup(sel, 1);
        lease->holder_label = carrel_store_column_dup(sel, 2);
        lease->since = sqlite3_column_int64(sel, 3);
        g_hash_table_insert(all, carrel_store_column_dup(sel, 0), lease);
    }
    return g_steal_pointer(&all);
}

gboolean
carrel_store_lease_release(CarrelStore *store, const char *session_id, GError **error)
{
    g_autoptr(GMutexLocker) locker G_GNUC_UNUSED = g_mutex_locker_new(&store->lock);
    g_autoptr(sqlite3_stmt) stmt = NULL;

    stmt = carrel_store_prepare(store, "DELETE FROM leases WHERE session_id = ?", error);
    return stmt && carrel_store_bind_text(store, stmt, 1, session_id, error) &&
           carrel_store_step_done(store, stmt, NULL, "releasing a control lease", error);
}
