#define CARREL_STORE_PRIV_H_ALLOW
#include "store/store-priv.h"

#define TEMPLATE_COLUMNS                                                                           \
    "name, version, sha256, format, size_bytes, virtual_size_bytes, boot, dir, disk_path, "        \
    "kernel_path, initrd_path, cmdline, recipe_hash, created_at, default_vcpus, "                  \
    "default_memory_mib, default_screen_width, default_screen_height"

/* "tiny" for version 0 (any or latest), else "tiny@3": the form users type. */
static char *
template_ref(const char *name, guint version)
{
    if (version == 0)
        return g_strdup(name);
    return g_strdup_printf("%s@%u", name, version);
}

static gboolean
bind_template(CarrelStore *store, sqlite3_stmt *stmt, const CarrelTemplate *t, GError **error)
{
    return carrel_store_bind_text(store, stmt, 1, t->name, error) &&
           carrel_store_bind_int64(store, stmt, 2, t->version, error) &&
           carrel_store_bind_text(store, stmt, 3, t->sha256, error) &&
           carrel_store_bind_text(store, stmt, 4, t->format, error) &&
           carrel_store_bind_int64(store, stmt, 5, (gint64)t->size_bytes, error) &&
           carrel_store_bind_int64(store, stmt, 6, (gint64)t->virtual_size_bytes, error) &&
           carrel_store_bind_text(store, stmt, 7, carrel_boot_to_string(t->boot), error) &&
           carrel_store_bind_text(store, stmt, 8, t->dir, error) &&
           carrel_store_bind_text(store, stmt, 9, t->disk_path, error) &&
           carrel_store_bind_text(store, stmt, 10, t->kernel_path, error) &&
           carrel_store_bind_text(store, stmt, 11, t->initrd_path, error) &&
           carrel_store_bind_text(store, stmt, 12, t->cmdline, error) &&
           carrel_store_bind_text(store, stmt, 13, t->recipe_hash, error) &&
           carrel_store_bind_int64(store, stmt, 14, t->created_at, error) &&
           carrel_store_bind_int_or_null(store, stmt, 15, t->default_vcpus, error) &&
           carrel_store_bind_int_or_null(store, stmt, 16, t->default_memory_mib, error) &&
           carrel_store_bind_int_or_null(store, stmt, 17, t->default_screen_width, error) &&
           carrel_store_bind_int_or_null(store, stmt, 18, t->default_screen_height, error);
}

static CarrelTemplate *
template_from_row(sqlite3_stmt *stmt, GError **error)
{
    g_autoptr(CarrelTemplate) t = carrel_template_new();
    const char *boot = (const char *)sqlite3_column_text(stmt, 6);

    t->name = carrel_store_column_dup(stmt, 0);
    t->version = (guint)sqlite3_column_int64(stmt, 1);
    t->sha256 = carrel_store_column_dup(stmt, 2);
    t->format = carrel_store_column_dup(stmt, 3);
    t->size_bytes = (guint64)sqlite3_column_int64(stmt, 4);
    t->virtual_size_bytes = (guint64)sqlite3_column_int64(stmt, 5);
    t->boot = carrel_boot_from_string(boot);
    t->dir = carrel_store_column_dup(stmt, 7);
    t->disk_path = carrel_store_column_dup(stmt, 8);
    t->kernel_path = carrel_store_column_dup(stmt, 9);
    t->initrd_path = carrel_store_column_dup(stmt, 10);
    t->cmdline = carrel_store_column_dup(stmt, 11);
    t->recipe_hash = carrel_store_column_dup(stmt, 12);
    t->created_at = sqlite3_column_int64(stmt, 13);
    t->default_vcpus = (guint)sqlite3_column_int64(stmt, 14);
    t->default_memory_mib = (guint)sqlite3_column_int64(stmt, 15);
    t->default_screen_width = (guint)sqlite3_column_int64(stmt, 16);
    t->default_screen_height = (guint)sqlite3_column_int64(stmt, 17);
    if (t->boot == CARREL_BOOT_LAST) {
        g_set_error(error, CARREL_ERROR, CARREL_ERROR_STORE,
                    "template '%s@%u' has an unknown boot mode '%s'", t->name, t->version,
                    boot ? boot : "");
        return NULL;
    }
    return g_steal_pointer(&t);
}

static gboolean
insert_rows(CarrelStore *store, const CarrelTemplate *tmpl, GError **error)
{
    g_autofree char *ref = template_ref(tmpl->name, tmpl->version);
    g_autofree char *clash = g_strdup_printf("template '%s' already exists", ref);
    const CarrelStoreConflict conflict = {.primary_key = clash};
    g_autoptr(sqlite3_stmt) ins = NULL;
    g_autoptr(sqlite3_stmt) counter = NULL;

    ins = carrel_store_prepare(store,
                               "INSERT INTO templates (" TEMPLATE_COLUMNS
                               ") VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                               error);
    if (!ins || !bind_template(store, ins, tmpl, error) ||
        !carrel_store_step_done(store, ins, &conflict, "inserting template", error))
        return FALSE;
    counter =
        carrel_store_prepare(store,
                             "INSERT INTO template_versions (name, last_version) VALUES (?1, ?2) "
                             "ON CONFLICT (name) DO UPDATE SET "
                             "last_version = max(last_version, excluded.last_version)",
                             error);
    return counter && carrel_store_bind_text(store, counter, 1, tmpl->name, error) &&
           carrel_store_bind_int64(store, counter, 2, tmpl->version, error) &&
           carrel_store_step_done(store, counter, NULL, "recording template version", error);
}

gboolean
carrel_store_template_insert(CarrelStore *store, const CarrelTemplate *tmpl, GError **error)
{
    g_autoptr(GMutexLocker) locker G_GNUC_UNUSED = g_mutex_locker_new(&store->lock);

    if (!tmpl->name || tmpl->version == 0 || (int)tmpl->boot < 0 ||
        tmpl->boot >= CARREL_BOOT_LAST) {
        g_set_error(error, CARREL_ERROR, CARREL_ERROR_INVALID_ARG,
                    "a template needs a name, a version and a boot mode");
        return FALSE;
    }
    if (!carrel_store_begin(store, error))
        return FALSE;
    if (!insert_rows(store, tmpl, error)) {
        carrel_store_rollback(store);
        return FALSE;
    }
    return carrel_store_commit(store, error);
}

guint
carrel_store_template_next_version(CarrelStore *store, const char *name, GError **error)
{
    g_autoptr(GMutexLocker) locker G_GNUC_UNUSED = g_mutex_locker_new(&store->lock);
    g_autoptr(sqlite3_stmt) stmt = NULL;
    gint64 last = 0;

    /* Never hand out a number used before, even if that version was deleted since. */
    stmt = carrel_store_prepare(store,
                                "SELECT max(coalesce((SELECT last_version FROM template_versions "
                                "WHERE name = ?1), 0), coalesce((SELECT max(version) FROM "
                                "templates WHERE name = ?1), 0))",
                                error);
    if (!stmt || !carrel_store_bind_text(store, stmt, 1, name, error) ||
        !carrel_store_query_int64(store, stmt, "finding the next template version", &last, error))
        return 0;
    if (last >= G_MAXUINT) {
        g_set_error(error, CARREL_ERROR, CARREL_ERROR_LIMIT, "template '%s' has no version left",
                    name);
        return 0;
    }
    return (guint)last + 1;
}

CarrelTemplate *
carrel_store_template_get(CarrelStore *store, const char *name, guint version, GError **error)
{
    g_autoptr(GMutexLocker) locker G_GNUC_UNUSED = g_mutex_locker_new(&store->lock);
    g_autoptr(sqlite3_stmt) stmt = NULL;
    gboolean row = FALSE;

    stmt = carrel_store_prepare(store,
                                "SELECT " TEMPLATE_COLUMNS " FROM templates WHERE name = ?1 "
                                "AND (?2 = 0 OR version = ?2) ORDER BY version DESC LIMIT 1",
                                error);
    if (!stmt || !carrel_store_bind_text(store, stmt, 1, name, error) ||
        !carrel_store_bind_int64(store, stmt, 2, version, error) ||
        !carrel_store_step_row(store, stmt, "reading template", &row, error))
        return NULL;
    if (!row) {
        g_autofree char *ref = template_ref(name, version);
        g_set_error(error, CARREL_ERROR, CARREL_ERROR_NOT_FOUND, "template '%s' does not exist",
                    ref);
        return NULL;
    }
    return template_from_row(stmt, error);
}

GPtrArray *
carrel_store_template_list(CarrelStore *store, GError **error)
{
    g_autoptr(GMutexLocker) locker G_GNUC_UNUSED = g_mutex_locker_new(&store->lock);
    g_autoptr(GPtrArray) list =
        g_ptr_array_new_with_free_func((GDestroyNotify)carrel_template_free);
    g_autoptr(sqlite3_stmt) stmt = NULL;
    gboolean row = FALSE;

    stmt = carrel_store_prepare(
        store, "SELECT " TEMPLATE_COLUMNS " FROM templates ORDER BY name, version", error);
    if (!stmt)
        return NULL;
    for (;;) {
        CarrelTemplate *t;

        if (!carrel_store_step_row(store, stmt, "listing templates", &row, error))
            return NULL;
        if (!row)
            break;
        t = template_from_row(stmt, error);
        if (!t)
            return NULL;
        g_ptr_array_add(list, t);
    }
    return g_steal_pointer(&list);
}

static gboolean
count_sessions_locked(CarrelStore *store, const char *name, guint version, guint *ret_count,
                      GError **error)
{
    g_autoptr(sqlite3_stmt) stmt = NULL;
    gint64 count = 0;

    stmt = carrel_store_prepare(store,
                                "SELECT count(*) FROM sessions WHERE template_name = ?1 "
                                "AND (?2 = 0 OR template_version = ?2) AND state != 'destroyed'",
                                error);
    if (!stmt || !carrel_store_bind_text(store, stmt, 1, name, error) ||
        !carrel_store_bind_int64(store, stmt, 2, version, error) ||
        !carrel_store_query_int64(store, stmt, "counting sessions", &count, error))
        return FALSE;
    *ret_count = (guint)count;
    return TRUE;
}

guint
carrel_store_template_count_sessions(CarrelStore *store, const char *name, guint version,
                                     GError **error)
{
    g_autoptr(GMutexLocker) locker G_GNUC_UNUSED = g_mutex_locker_new(&store->lock);
    guint count = 0;

    if (!count_sessions_locked(store, name, version, &count, error))
        return 0;
    return count;
}

static gboolean
delete_rows(CarrelStore *store, const char *name, guint version, GError **error)
{
    g_autofree char *ref = template_ref(name, version);
    g_autoptr(sqlite3_stmt) stmt = NULL;
    guint users = 0;

    if (!count_sessions_locked(store, name, version, &users, error))
        return FALSE;
    if (users > 0) {
        g_set_error(error, CARREL_ERROR, CARREL_ERROR_WRONG_STATE,
                    "template '%s' is used by %u session(s) that are not destroyed", ref, users);
        return FALSE;
    }
    stmt = carrel_store_prepare(
        store, "DELETE FROM templates WHERE name = ?1 AND (?2 = 0 OR version = ?2)", error);
    if (!stmt || !carrel_store_bind_text(store, stmt, 1, name, error) ||
        !carrel_store_bind_int64(store, stmt, 2, version, error) ||
        !carrel_store_step_done(store, stmt, NULL, "deleting template", error))
        return FALSE;
    if (sqlite3_changes(store->db) == 0) {
        g_set_error(error, CARREL_ERROR, CARREL_ERROR_NOT_FOUND, "template '%s' does not exist",
                    ref);
        return FALSE;
    }
    return TRUE;
}

gboolean
carrel_store_template_delete(CarrelStore *store, const char *name, guint version, GError **error)
{
    g_autoptr(GMutexLocker) locker G_GNUC_UNUSED = g_mutex_locker_new(&store->lock);

    if (!carrel_store_begin(store, error))
        return FALSE;
    if (!delete_rows(store, name, version, error)) {
        carrel_store_rollback(store);
        return FALSE;
    }
    return carrel_store_commit(store, error);
}
