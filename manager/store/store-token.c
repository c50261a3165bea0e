#define CARREL_STORE_PRIV_H_ALLOW
#include "store/store-priv.h"

gboolean
carrel_store_token_insert(CarrelStore *store, const char *token_hash, const char *role,
                          const char *label, GError **error)
{
    g_autoptr(GMutexLocker) locker G_GNUC_UNUSED = g_mutex_locker_new(&store->lock);
    g_autoptr(sqlite3_stmt) stmt = NULL;
    /* Never echo the hash back: error messages travel to logs and API clients. */
    const CarrelStoreConflict conflict = {.primary_key = "this token is already registered"};

    stmt = carrel_store_prepare(
        store, "INSERT INTO tokens (hash, role, label, created_at) VALUES (?1, ?2, ?3, ?4)", error);
    return stmt && carrel_store_bind_text(store, stmt, 1, token_hash, error) &&
           carrel_store_bind_text(store, stmt, 2, role, error) &&
           carrel_store_bind_text(store, stmt, 3, label, error) &&
           carrel_store_bind_int64(store, stmt, 4, carrel_util_now(), error) &&
           carrel_store_step_done(store, stmt, &conflict, "inserting token", error);
}

char *
carrel_store_token_lookup(CarrelStore *store, const char *token_hash, char **ret_label,
                          GError **error)
{
    g_autoptr(GMutexLocker) locker G_GNUC_UNUSED = g_mutex_locker_new(&store->lock);
    g_autoptr(sqlite3_stmt) stmt = NULL;
    gboolean row = FALSE;

    stmt = carrel_store_prepare(store, "SELECT role, label FROM tokens WHERE hash = ?1", error);
    if (!stmt || !carrel_store_bind_text(store, stmt, 1, token_hash, error) ||
        !carrel_store_step_row(store, stmt, "looking up token", &row, error) || !row)
        return NULL;
    if (ret_label)
        *ret_label = carrel_store_column_dup(stmt, 1);
    return carrel_store_column_dup(stmt, 0);
}
