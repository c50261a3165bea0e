/*
 * Intents: what a long operation is about to do, written in one transaction before it acts and
 * deleted once it is done. A carreld that dies in between leaves the row, and the next one reads
 * it to finish or undo the operation (core-recover.c). One intent per key (a session id or
 * "warm:<template>"), as one verb at a time holds a key.
 */
#define CARREL_STORE_PRIV_H_ALLOW
#include "store/store-priv.h"

gboolean
carrel_store_intent_put(CarrelStore *store, const char *key, const char *op, const char *data,
                        GError **error)
{
    g_autoptr(GMutexLocker) locker G_GNUC_UNUSED = g_mutex_locker_new(&store->lock);
    g_autoptr(sqlite3_stmt) ins = NULL;

    ins = carrel_store_prepare(store,
                               "INSERT OR REPLACE INTO intents (key, op, data, created_at) "
                               "VALUES (?, ?, ?, ?)",
                               error);
    return ins && carrel_store_bind_text(store, ins, 1, key, error) &&
           carrel_store_bind_text(store, ins, 2, op, error) &&
           carrel_store_bind_text(store, ins, 3, data ? data : "{}", error) &&
           carrel_store_bind_int64(store, ins, 4, carrel_util_now(), error) &&
           carrel_store_step_done(store, ins, NULL, "recording an intent", error);
}

gboolean
carrel_store_intent_delete(CarrelStore *store, const char *key, GError **error)
{
    g_autoptr(GMutexLocker) locker G_GNUC_UNUSED = g_mutex_locker_new(&store->lock);
    g_autoptr(sqlite3_stmt) del = NULL;

    del = carrel_store_prepare(store, "DELETE FROM intents WHERE key = ?", error);
    return del && carrel_store_bind_text(store, del, 1, key, error) &&
           carrel_store_step_done(store, del, NULL, "removing an intent", error);
}

GPtrArray *
carrel_store_intent_list(CarrelStore *store, GError **error)
{
    g_autoptr(GMutexLocker) locker G_GNUC_UNUSED = g_mutex_locker_new(&store->lock);
    g_autoptr(sqlite3_stmt) sel = NULL;
    g_autoptr(GPtrArray) list = g_ptr_array_new_with_free_func((GDestroyNotify)carrel_intent_free);
    gboolean row = TRUE;

    sel =
        carrel_store_prepare(store, "SELECT key, op, data FROM intents ORDER BY created_at", error);
    if (!sel)
        return NULL;
    while (row) {
        CarrelIntent *intent;
        if (!carrel_store_step_row(store, sel, "listing intents", &row, error))
            return NULL;
        if (!row)
            break;
        intent = g_new0(CarrelIntent, 1);
        intent->key = carrel_store_column_dup(sel, 0);
        intent->op = carrel_store_column_dup(sel, 1);
        intent->data = carrel_store_column_dup(sel, 2);
        g_ptr_array_add(list, intent);
    }
    return g_steal_pointer(&list);
}

void
carrel_intent_free(CarrelIntent *intent)
{
    if (!intent)
        return;
    g_free(intent->key);
    g_free(intent->op);
    g_free(intent->data);
    g_free(intent);
}
