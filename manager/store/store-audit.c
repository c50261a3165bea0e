/* store: the audit log, a hash chain of what principals did and were refused. */
#define CARREL_STORE_PRIV_H_ALLOW
#include "store/store-priv.h"

#define AUDIT_COLUMNS                                                                              \
    "seq, ts_us, principal_id, principal_label, role, operation, session_id, params_digest, "      \
    "result, error_code, prev_hash, hash"

#define AUDIT_LIST_DEFAULT 1000
#define AUDIT_LIST_MAX 10000

static gboolean
is_result(const char *result)
{
    return g_strcmp0(result, "ok") == 0 || g_strcmp0(result, "denied") == 0 ||
           g_strcmp0(result, "failed") == 0;
}

static gboolean
check_record(const CarrelAuditRecord *rec, GError **error)
{
    if (!rec->principal_id || !rec->principal_label || !rec->role || !rec->operation ||
        !rec->params_digest) {
        g_set_error(error, CARREL_ERROR, CARREL_ERROR_INVALID_ARG,
                    "an audit record needs a principal, a role, an operation and a digest");
        return FALSE;
    }
    if (!is_result(rec->result)) {
        g_set_error(error, CARREL_ERROR, CARREL_ERROR_INVALID_ARG,
                    "an audit record's result is 'ok', 'denied' or 'failed', not '%s'",
                    rec->result ? rec->result : "");
        return FALSE;
    }
    return TRUE;
}

void
carrel_audit_link_clear(CarrelAuditLink *link)
{
    link->seq = 0;
    g_clear_pointer(&link->prev_hash, g_free);
    g_clear_pointer(&link->hash, g_free);
}

void
carrel_audit_link_settle(CarrelAuditLink *link, CarrelAuditRecord *rec)
{
    rec->seq = link->seq;
    g_free(rec->prev_hash);
    rec->prev_hash = g_steal_pointer(&link->prev_hash);
    g_free(rec->hash);
    rec->hash = g_steal_pointer(&link->hash);
}

/* The chain's end: the last row's seq and hash, or 0 and CARREL_AUDIT_GENESIS when empty. */
static gboolean
read_last(CarrelStore *store, gint64 *ret_seq, char **ret_hash, GError **error)
{
    g_autoptr(sqlite3_stmt) stmt = NULL;
    gboolean row = FALSE;

    stmt =
        carrel_store_prepare(store, "SELECT seq, hash FROM audit ORDER BY seq DESC LIMIT 1", error);
    if (!stmt || !carrel_store_step_row(store, stmt, "reading the audit log's end", &row, error))
        return FALSE;
    *ret_seq = row ? sqlite3_column_int64(stmt, 0) : 0;
    *ret_hash = row ? carrel_store_column_dup(stmt, 1) : g_strdup(CARREL_AUDIT_GENESIS);
    return TRUE;
}

static gboolean
insert_row(CarrelStore *store, const CarrelAuditRecord *rec, GError **error)
{
    g_autoptr(sqlite3_stmt) stmt = NULL;

    stmt = carrel_store_prepare(store,
                                "INSERT INTO audit (" AUDIT_COLUMNS ") "
                                "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                                error);
    return stmt && carrel_store_bind_int64(store, stmt, 1, rec->seq, error) &&
           carrel_store_bind_int64(store, stmt, 2, rec->ts_us, error) &&
           carrel_store_bind_text(store, stmt, 3, rec->principal_id, error) &&
           carrel_store_bind_text(store, stmt, 4, rec->principal_label, error) &&
           carrel_store_bind_text(store, stmt, 5, rec->role, error) &&
           carrel_store_bind_text(store, stmt, 6, rec->operation, error) &&
           carrel_store_bind_text(store, stmt, 7, rec->session_id, error) &&
           carrel_store_bind_text(store, stmt, 8, rec->params_digest, error) &&
           carrel_store_bind_text(store, stmt, 9, rec->result, error) &&
           carrel_store_bind_text(store, stmt, 10, rec->error_code, error) &&
           carrel_store_bind_text(store, stmt, 11, rec->prev_hash, error) &&
           carrel_store_bind_text(store, stmt, 12, rec->hash, error) &&
           carrel_store_step_done(store, stmt, NULL, "appending to the audit log", error);
}

gboolean
carrel_store_audit_insert(CarrelStore *store, const CarrelAuditRecord *rec,
                          CarrelAuditLink *ret_link, GError **error)
{
    /* A shallow copy carries the chain fields, so rec stays as it was if the commit fails. */
    CarrelAuditRecord chained = *rec;
    g_autofree char *prev_hash = NULL;
    g_autofree char *hash = NULL;
    gint64 last_seq = 0;

    if (!check_record(rec, error) || !read_last(store, &last_seq, &prev_hash, error))
        return FALSE;
    chained.seq = last_seq + 1;
    chained.prev_hash = prev_hash;
    chained.hash = hash = carrel_audit_record_hash(&chained);
    if (!insert_row(store, &chained, error))
        return FALSE;
    ret_link->seq = chained.seq;
    ret_link->prev_hash = g_steal_pointer(&prev_hash);
    ret_link->hash = g_steal_pointer(&hash);
    return TRUE;
}

gboolean
carrel_store_audit_append(CarrelStore *store, CarrelAuditRecord *rec, GError **error)
{
    g_autoptr(GMutexLocker) locker G_GNUC_UNUSED = g_mutex_locker_new(&store->lock);
    g_auto(CarrelAuditLink) link = {0};

    /* IMMEDIATE: reading the chain's end and appending after it is one step for every writer,
     * other processes on the file included. */
    if (!carrel_store_begin(store, error))
        return FALSE;
    if (!carrel_store_audit_insert(store, rec, &link, error)) {
        carrel_store_rollback(store);
        return FALSE;
    }
    if (!carrel_store_commit(store, error))
        return FALSE;
    carrel_audit_link_settle(&link, rec);
    return TRUE;
}

static CarrelAuditRecord *
record_from_row(sqlite3_stmt *stmt)
{
    CarrelAuditRecord *rec = carrel_audit_record_new();

    rec->seq = sqlite3_column_int64(stmt, 0);
    rec->ts_us = sqlite3_column_int64(stmt, 1);
    rec->principal_id = carrel_store_column_dup(stmt, 2);
    rec->principal_label = carrel_store_column_dup(stmt, 3);
    rec->role = carrel_store_column_dup(stmt, 4);
    rec->operation = carrel_store_column_dup(stmt, 5);
    rec->session_id = carrel_store_column_dup(stmt, 6);
    rec->params_digest = carrel_store_column_dup(stmt, 7);
    rec->result = carrel_store_column_dup(stmt, 8);
    rec->error_code = carrel_store_column_dup(stmt, 9);
    rec->prev_hash = carrel_store_column_dup(stmt, 10);
    rec->hash = carrel_store_column_dup(stmt, 11);
    return rec;
}

static gboolean
check_filter(const CarrelAuditFilter *filter, GError **error)
{
    if (filter->limit > AUDIT_LIST_MAX) {
        g_set_error(error, CARREL_ERROR, CARREL_ERROR_INVALID_ARG,
                    "an audit listing has at most %d rows, not %u", AUDIT_LIST_MAX, filter->limit);
        return FALSE;
    }
    if (filter->result && !is_result(filter->result)) {
        g_set_error(error, CARREL_ERROR, CARREL_ERROR_INVALID_ARG,
                    "an audit result is 'ok', 'denied' or 'failed', not '%s'", filter->result);
        return FALSE;
    }
    return TRUE;
}

/*
 * The query for filter, from fixed fragments only (every value is bound): a condition appears
 * only when its filter is set, so sqlite can use the session and time indexes.
 */
static char *
list_sql(const CarrelAuditFilter *filter)
{
    GString *sql = g_string_new("SELECT " AUDIT_COLUMNS " FROM audit WHERE seq > ?1");

    if (filter->since_us)
        g_string_append(sql, " AND ts_us >= ?2");
    if (filter->session_id)
        g_string_append(sql, " AND session_id = ?3");
    if (filter->principal)
        g_string_append(sql, " AND (principal_id = ?4 OR principal_label = ?4)");
    if (filter->operation)
        g_string_append(sql, " AND operation = ?5");
    if (filter->result)
        g_string_append(sql, " AND result = ?6");
    g_string_append(sql, " ORDER BY seq LIMIT ?7");
    return g_string_free(sql, FALSE);
}

static gboolean
bind_filter(CarrelStore *store, sqlite3_stmt *stmt, const CarrelAuditFilter *filter, GError **error)
{
    /* ?7 is always in the query, so every index up to it can be bound, used or not. */
    return carrel_store_bind_int64(store, stmt, 1, filter->after_seq, error) &&
           carrel_store_bind_int64(store, stmt, 2, filter->since_us, error) &&
           carrel_store_bind_text(store, stmt, 3, filter->session_id, error) &&
           carrel_store_bind_text(store, stmt, 4, filter->principal, error) &&
           carrel_store_bind_text(store, stmt, 5, filter->operation, error) &&
           carrel_store_bind_text(store, stmt, 6, filter->result, error) &&
           carrel_store_bind_int64(store, stmt, 7,
                                   filter->limit ? filter->limit : AUDIT_LIST_DEFAULT, error);
}

GPtrArray *
carrel_store_audit_list(CarrelStore *store, const CarrelAuditFilter *filter, GError **error)
{
    g_autoptr(GMutexLocker) locker G_GNUC_UNUSED = g_mutex_locker_new(&store->lock);
    g_autoptr(GPtrArray) list =
        g_ptr_array_new_with_free_func((GDestroyNotify)carrel_audit_record_free);
    g_autoptr(sqlite3_stmt) stmt = NULL;
    g_autofree char *sql = NULL;

    if (!check_filter(filter, error))
        return NULL;
    sql = list_sql(filter);
    stmt = carrel_store_prepare(store, sql, error);
    if (!stmt || !bind_filter(store, stmt, filter, error))
        return NULL;
    for (;;) {
        gboolean row = FALSE;

        if (!carrel_store_step_row(store, stmt, "reading the audit log", &row, error))
            return NULL;
        if (!row)
            break;
        g_ptr_array_add(list, record_from_row(stmt));
    }
    return g_steal_pointer(&list);
}

void
carrel_audit_verdict_clear(CarrelAuditVerdict *v)
{
    if (!v)
        return;
    g_free(v->why);
    *v = (CarrelAuditVerdict){0};
}

/*
 * What breaks the chain at rec, given the row before it (prev_seq 0 and CARREL_AUDIT_GENESIS
 * for the first), or NULL when rec holds. A gap is named first: it explains the prev_hash
 * mismatch that always comes with it.
 */
static char *
check_link(const CarrelAuditRecord *rec, gint64 prev_seq, const char *prev_hash)
{
    g_autofree char *hash = NULL;

    if (rec->seq != prev_seq + 1 && prev_seq == 0)
        return g_strdup_printf("row %" G_GINT64_FORMAT " is the first: rows before it are missing",
                               rec->seq);
    if (rec->seq != prev_seq + 1)
        return g_strdup_printf("row %" G_GINT64_FORMAT " follows row %" G_GINT64_FORMAT
                               ": a row is missing",
                               rec->seq, prev_seq);
    hash = carrel_audit_record_hash(rec);
    if (g_strcmp0(hash, rec->hash) != 0)
        return g_strdup_printf("row %" G_GINT64_FORMAT ": hash does not match its contents",
                               rec->seq);
    if (g_strcmp0(rec->prev_hash, prev_hash) != 0 && prev_seq == 0)
        return g_strdup_printf("row %" G_GINT64_FORMAT ": prev_hash is not the genesis hash",
                               rec->seq);
    if (g_strcmp0(rec->prev_hash, prev_hash) != 0)
        return g_strdup_printf("row %" G_GINT64_FORMAT
                               ": prev_hash does not match row %" G_GINT64_FORMAT,
                               rec->seq, prev_seq);
    return NULL;
}

/* Walks stmt's rows (the whole log in seq order) into verdict, stopping at the first break. */
static gboolean
walk_chain(CarrelStore *store, sqlite3_stmt *stmt, CarrelAuditVerdict *verdict, GError **error)
{
    g_autofree char *prev_hash = g_strdup(CARREL_AUDIT_GENESIS);
    gint64 prev_seq = 0;

    verdict->intact = TRUE;
    for (;;) {
        g_autoptr(CarrelAuditRecord) rec = NULL;
        gboolean row = FALSE;

        if (!carrel_store_step_row(store, stmt, "verifying the audit log", &row, error))
            return FALSE;
        if (!row)
            return TRUE;
        rec = record_from_row(stmt);
        verdict->rows++;
        verdict->why = check_link(rec, prev_seq, prev_hash);
        if (verdict->why) {
            verdict->intact = FALSE;
            verdict->bad_seq = rec->seq;
            return TRUE;
        }
        prev_seq = rec->seq;
        g_free(prev_hash);
        prev_hash = g_steal_pointer(&rec->hash);
    }
}

gboolean
carrel_store_audit_verify(CarrelStore *store, CarrelAuditVerdict *ret_verdict, GError **error)
{
    g_autoptr(GMutexLocker) locker G_GNUC_UNUSED = g_mutex_locker_new(&store->lock);
    g_autoptr(sqlite3_stmt) stmt = NULL;
    CarrelAuditVerdict verdict = {0};

    /* One statement reads one snapshot of the file, even while another process appends. */
    stmt = carrel_store_prepare(store, "SELECT " AUDIT_COLUMNS " FROM audit ORDER BY seq", error);
    if (!stmt)
        return FALSE;
    if (!walk_chain(store, stmt, &verdict, error)) {
        carrel_audit_verdict_clear(&verdict);
        return FALSE;
    }
    *ret_verdict = verdict;
    return TRUE;
}
