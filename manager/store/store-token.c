#define CARREL_STORE_PRIV_H_ALLOW
#include "store/store-priv.h"

#define TOKEN_COLUMNS "id, label, role, created_at, last_used_at, expires_at, revoked_at, policies"

/*
 * Token secrets are never part of an error message: messages reach logs and API clients, and
 * a hash that leaks there could be matched against a stolen secret.
 */
#define TOKEN_SECRET_CLASH "this token secret is already registered"

static gboolean
check_token(const CarrelToken *token, const char *token_hash, GError **error)
{
    if (!token->id || !token->label || !token_hash || !*token_hash) {
        g_set_error(error, CARREL_ERROR, CARREL_ERROR_INVALID_ARG,
                    "a token needs an id, a name and a secret");
        return FALSE;
    }
    /* carreld is a principal but never a token: no credential may pass for the daemon. */
    if ((int)token->role < 0 || token->role >= CARREL_ROLE_LAST ||
        token->role == CARREL_ROLE_SYSTEM) {
        g_set_error(error, CARREL_ERROR, CARREL_ERROR_INVALID_ARG,
                    "token '%s' has an invalid role %d", token->label, (int)token->role);
        return FALSE;
    }
    return TRUE;
}

static CarrelToken *
token_from_row(sqlite3_stmt *stmt, GError **error)
{
    g_autoptr(CarrelToken) token = carrel_token_new();
    const char *role = (const char *)sqlite3_column_text(stmt, 2);

    token->id = carrel_store_column_dup(stmt, 0);
    token->label = carrel_store_column_dup(stmt, 1);
    token->role = carrel_role_from_string(role);
    token->created_at = sqlite3_column_int64(stmt, 3);
    token->last_used_at = sqlite3_column_int64(stmt, 4);
    token->expires_at = sqlite3_column_int64(stmt, 5);
    token->revoked_at = sqlite3_column_int64(stmt, 6);
    if (sqlite3_column_type(stmt, 7) != SQLITE_NULL)
        token->policies = g_strsplit((const char *)sqlite3_column_text(stmt, 7), ",", -1);
    /* Fail closed: a row whose role this build does not know grants nothing. */
    if (token->role == CARREL_ROLE_LAST || token->role == CARREL_ROLE_SYSTEM) {
        g_set_error(error, CARREL_ERROR, CARREL_ERROR_STORE, "token '%s' has an unknown role '%s'",
                    token->id, role ? role : "");
        return NULL;
    }
    return g_steal_pointer(&token);
}

static gboolean
label_taken(CarrelStore *store, const char *label, GError **error)
{
    g_autoptr(sqlite3_stmt) stmt = NULL;
    gint64 found = 0;

    stmt = carrel_store_prepare(store, "SELECT count(*) FROM tokens WHERE label = ?1", error);
    if (!stmt || !carrel_store_bind_text(store, stmt, 1, label, error) ||
        !carrel_store_query_int64(store, stmt, "looking up a token's name", &found, error))
        return FALSE;
    if (found) {
        g_set_error(error, CARREL_ERROR, CARREL_ERROR_EXISTS, "a token named '%s' already exists",
                    label);
        return FALSE;
    }
    return TRUE;
}

static gboolean
insert_token(CarrelStore *store, const CarrelToken *token, const char *token_hash, GError **error)
{
    g_autofree char *id_used = g_strdup_printf("token '%s' already exists", token->id);
    /* The label is checked first, so the only UNIQUE left to break is the secret's. */
    const CarrelStoreConflict conflict = {.unique = TOKEN_SECRET_CLASH, .primary_key = id_used};
    g_autoptr(sqlite3_stmt) stmt = NULL;
    g_autofree char *policies = token->policies ? g_strjoinv(",", token->policies) : NULL;

    if (!label_taken(store, token->label, error))
        return FALSE;
    stmt = carrel_store_prepare(store,
                                "INSERT INTO tokens (" TOKEN_COLUMNS ", hash) "
                                "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
                                error);
    return stmt && carrel_store_bind_text(store, stmt, 1, token->id, error) &&
           carrel_store_bind_text(store, stmt, 2, token->label, error) &&
           carrel_store_bind_text(store, stmt, 3, carrel_role_to_string(token->role), error) &&
           carrel_store_bind_int64(
               store, stmt, 4, token->created_at ? token->created_at : carrel_util_now(), error) &&
           carrel_store_bind_int64(store, stmt, 5, token->last_used_at, error) &&
           carrel_store_bind_int64(store, stmt, 6, token->expires_at, error) &&
           carrel_store_bind_int64(store, stmt, 7, token->revoked_at, error) &&
           carrel_store_bind_text(store, stmt, 8, policies, error) &&
           carrel_store_bind_text(store, stmt, 9, token_hash, error) &&
           carrel_store_step_done(store, stmt, &conflict, "storing a token", error);
}

gboolean
carrel_store_token_insert(CarrelStore *store, const CarrelToken *token, const char *token_hash,
                          GError **error)
{
    g_autoptr(GMutexLocker) locker G_GNUC_UNUSED = g_mutex_locker_new(&store->lock);

    if (!check_token(token, token_hash, error))
        return FALSE;
    /* One transaction: the name's check and the insert see the same table. */
    if (!carrel_store_begin(store, error))
        return FALSE;
    if (!insert_token(store, token, token_hash, error)) {
        carrel_store_rollback(store);
        return FALSE;
    }
    return carrel_store_commit(store, error);
}

CarrelToken *
carrel_store_token_by_hash(CarrelStore *store, const char *token_hash, GError **error)
{
    g_autoptr(GMutexLocker) locker G_GNUC_UNUSED = g_mutex_locker_new(&store->lock);
    g_autoptr(sqlite3_stmt) stmt = NULL;
    gboolean row = FALSE;

    stmt =
        carrel_store_prepare(store, "SELECT " TOKEN_COLUMNS " FROM tokens WHERE hash = ?1", error);
    if (!stmt || !carrel_store_bind_text(store, stmt, 1, token_hash, error) ||
        !carrel_store_step_row(store, stmt, "looking up a token", &row, error) || !row)
        return NULL;
    return token_from_row(stmt, error);
}

CarrelToken *
carrel_store_token_get(CarrelStore *store, const char *id_or_label, GError **error)
{
    g_autoptr(GMutexLocker) locker G_GNUC_UNUSED = g_mutex_locker_new(&store->lock);
    g_autoptr(sqlite3_stmt) stmt = NULL;
    gboolean row = FALSE;

    /* An id wins over a label, so a token named like another's id cannot shadow it. */
    stmt = carrel_store_prepare(store,
                                "SELECT " TOKEN_COLUMNS " FROM tokens WHERE id = ?1 OR label = ?1 "
                                "ORDER BY id = ?1 DESC LIMIT 1",
                                error);
    if (!stmt || !carrel_store_bind_text(store, stmt, 1, id_or_label, error) ||
        !carrel_store_step_row(store, stmt, "reading a token", &row, error))
        return NULL;
    if (!row) {
        g_set_error(error, CARREL_ERROR, CARREL_ERROR_NOT_FOUND, "token '%s' does not exist",
                    id_or_label);
        return NULL;
    }
    return token_from_row(stmt, error);
}

GPtrArray *
carrel_store_token_list(CarrelStore *store, GError **error)
{
    g_autoptr(GMutexLocker) locker G_GNUC_UNUSED = g_mutex_locker_new(&store->lock);
    g_autoptr(GPtrArray) list = g_ptr_array_new_with_free_func((GDestroyNotify)carrel_token_free);
    g_autoptr(sqlite3_stmt) stmt = NULL;

    stmt = carrel_store_prepare(
        store, "SELECT " TOKEN_COLUMNS " FROM tokens ORDER BY created_at, rowid", error);
    if (!stmt)
        return NULL;
    for (;;) {
        gboolean row = FALSE;
        CarrelToken *token;

        if (!carrel_store_step_row(store, stmt, "listing tokens", &row, error))
            return NULL;
        if (!row)
            break;
        if (!(token = token_from_row(stmt, error)))
            return NULL;
        g_ptr_array_add(list, token);
    }
    return g_steal_pointer(&list);
}

/* For an UPDATE that changed nothing: NOT_FOUND unless the token exists. */
static gboolean
token_exists(CarrelStore *store, const char *id, GError **error)
{
    g_autoptr(sqlite3_stmt) stmt = NULL;
    gboolean row = FALSE;

    stmt = carrel_store_prepare(store, "SELECT 1 FROM tokens WHERE id = ?1", error);
    if (!stmt || !carrel_store_bind_text(store, stmt, 1, id, error) ||
        !carrel_store_step_row(store, stmt, "reading a token", &row, error))
        return FALSE;
    if (!row) {
        g_set_error(error, CARREL_ERROR, CARREL_ERROR_NOT_FOUND, "token '%s' does not exist", id);
        return FALSE;
    }
    return TRUE;
}

gboolean
carrel_store_token_touch(CarrelStore *store, const char *id, gint64 now, GError **error)
{
    g_autoptr(GMutexLocker) locker G_GNUC_UNUSED = g_mutex_locker_new(&store->lock);
    g_autoptr(sqlite3_stmt) stmt = NULL;

    stmt = carrel_store_prepare(store,
                                "UPDATE tokens SET last_used_at = ?2 "
                                "WHERE id = ?1 AND last_used_at < ?2 - ?3",
                                error);
    if (!stmt || !carrel_store_bind_text(store, stmt, 1, id, error) ||
        !carrel_store_bind_int64(store, stmt, 2, now, error) ||
        !carrel_store_bind_int64(store, stmt, 3, CARREL_STORE_TOKEN_TOUCH_S, error) ||
        !carrel_store_step_done(store, stmt, NULL, "recording a token's use", error))
        return FALSE;
    return sqlite3_changes(store->db) > 0 || token_exists(store, id, error);
}

gboolean
carrel_store_token_revoke(CarrelStore *store, const char *id, gint64 now, GError **error)
{
    g_autoptr(GMutexLocker) locker G_GNUC_UNUSED = g_mutex_locker_new(&store->lock);
    g_autoptr(sqlite3_stmt) stmt = NULL;

    /* revoked_at 0 means live: a revocation at time 0 would silently revoke nothing. */
    if (now <= 0) {
        g_set_error(error, CARREL_ERROR, CARREL_ERROR_INVALID_ARG,
                    "revoking token '%s' at an invalid time", id);
        return FALSE;
    }
    stmt = carrel_store_prepare(
        store, "UPDATE tokens SET revoked_at = ?2 WHERE id = ?1 AND revoked_at = 0", error);
    if (!stmt || !carrel_store_bind_text(store, stmt, 1, id, error) ||
        !carrel_store_bind_int64(store, stmt, 2, now, error) ||
        !carrel_store_step_done(store, stmt, NULL, "revoking a token", error))
        return FALSE;
    if (sqlite3_changes(store->db) > 0)
        return TRUE;
    /* It exists, so revoked_at was set already. */
    if (!token_exists(store, id, error))
        return FALSE;
    g_set_error(error, CARREL_ERROR, CARREL_ERROR_WRONG_STATE, "token '%s' is revoked already", id);
    return FALSE;
}

gboolean
carrel_store_token_set_hash(CarrelStore *store, const char *id, const char *token_hash,
                            GError **error)
{
    g_autoptr(GMutexLocker) locker G_GNUC_UNUSED = g_mutex_locker_new(&store->lock);
    g_autoptr(sqlite3_stmt) stmt = NULL;
    const CarrelStoreConflict conflict = {.unique = TOKEN_SECRET_CLASH};

    if (!token_hash || !*token_hash) {
        g_set_error(error, CARREL_ERROR, CARREL_ERROR_INVALID_ARG, "token '%s' needs a secret", id);
        return FALSE;
    }
    stmt = carrel_store_prepare(store, "UPDATE tokens SET hash = ?2 WHERE id = ?1", error);
    if (!stmt || !carrel_store_bind_text(store, stmt, 1, id, error) ||
        !carrel_store_bind_text(store, stmt, 2, token_hash, error) ||
        !carrel_store_step_done(store, stmt, &conflict, "replacing a token's secret", error))
        return FALSE;
    if (sqlite3_changes(store->db) == 0) {
        g_set_error(error, CARREL_ERROR, CARREL_ERROR_NOT_FOUND, "token '%s' does not exist", id);
        return FALSE;
    }
    return TRUE;
}
