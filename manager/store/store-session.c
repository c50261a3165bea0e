#define CARREL_STORE_PRIV_H_ALLOW
#include "store/store-priv.h"

#define SESSION_COLUMNS                                                                            \
    "id, name, template_name, template_version, state, state_reason, vcpus, memory_mib, dir, "     \
    "overlay_path, created_at, updated_at, origin, exit_paths, head_snapshot, origin_session, "    \
    "expires_at, idle_timeout_s, expiry_action, mac, pool, from_pool, owner_id, owner_label, "     \
    "policy, egress_ip, screen_width, screen_height, memory_file"

/* exit_paths as a JSON array of strings (NULL when there are none). */
static char *
paths_to_text(char **paths)
{
    g_autoptr(JsonBuilder) b = json_builder_new();
    g_autoptr(JsonNode) root = NULL;

    if (!paths || !paths[0])
        return NULL;
    json_builder_begin_array(b);
    for (guint i = 0; paths[i]; i++)
        json_builder_add_string_value(b, paths[i]);
    json_builder_end_array(b);
    root = json_builder_get_root(b);
    return json_to_string(root, FALSE);
}

static GStrv
paths_from_text(const char *text)
{
    g_autoptr(JsonNode) root = text ? json_from_string(text, NULL) : NULL;
    g_autoptr(GStrvBuilder) builder = g_strv_builder_new();
    JsonArray *array;

    if (!root || !JSON_NODE_HOLDS_ARRAY(root))
        return NULL;
    array = json_node_get_array(root);
    for (guint i = 0; i < json_array_get_length(array); i++) {
        const char *path = json_array_get_string_element(array, i);
        if (path)
            g_strv_builder_add(builder, path);
    }
    return g_strv_builder_end(builder);
}

static gboolean
bind_session(CarrelStore *store, sqlite3_stmt *stmt, const CarrelSession *s, GError **error)
{
    g_autofree char *exit_paths = paths_to_text(s->exit_paths);

    return carrel_store_bind_text(store, stmt, 1, s->id, error) &&
           carrel_store_bind_text(store, stmt, 2, s->name, error) &&
           carrel_store_bind_text(store, stmt, 3, s->template_name, error) &&
           carrel_store_bind_int64(store, stmt, 4, s->template_version, error) &&
           carrel_store_bind_text(store, stmt, 5, carrel_session_state_to_string(s->state),
                                  error) &&
           carrel_store_bind_text(store, stmt, 6, s->state_reason, error) &&
           carrel_store_bind_int64(store, stmt, 7, s->vcpus, error) &&
           carrel_store_bind_int64(store, stmt, 8, s->memory_mib, error) &&
           carrel_store_bind_text(store, stmt, 9, s->dir, error) &&
           carrel_store_bind_text(store, stmt, 10, s->overlay_path, error) &&
           carrel_store_bind_int64(store, stmt, 11, s->created_at, error) &&
           carrel_store_bind_int64(store, stmt, 12, s->updated_at, error) &&
           carrel_store_bind_text(store, stmt, 13, s->from_warm ? "warm" : "cold", error) &&
           carrel_store_bind_text(store, stmt, 14, exit_paths, error) &&
           carrel_store_bind_text(store, stmt, 15, s->head_snapshot, error) &&
           carrel_store_bind_text(store, stmt, 16, s->origin_session, error) &&
           carrel_store_bind_int_or_null(store, stmt, 17, s->expires_at, error) &&
           carrel_store_bind_int_or_null(store, stmt, 18, s->idle_timeout_s, error) &&
           carrel_store_bind_text(store, stmt, 19, s->expiry_action, error) &&
           carrel_store_bind_text(store, stmt, 20, s->mac, error) &&
           carrel_store_bind_text(store, stmt, 21, s->pool, error) &&
           carrel_store_bind_int64(store, stmt, 22, s->from_pool, error) &&
           carrel_store_bind_text(store, stmt, 23, s->owner_id, error) &&
           carrel_store_bind_text(store, stmt, 24, s->owner_label, error) &&
           carrel_store_bind_text(store, stmt, 25, s->policy ? s->policy : "default", error) &&
           carrel_store_bind_text(store, stmt, 26, s->egress_ip, error) &&
           carrel_store_bind_int_or_null(store, stmt, 27, s->screen_width, error) &&
           carrel_store_bind_int_or_null(store, stmt, 28, s->screen_height, error) &&
           carrel_store_bind_text(store, stmt, 29, s->memory_file, error);
}

static CarrelSession *
session_from_row(sqlite3_stmt *stmt, GError **error)
{
    g_autoptr(CarrelSession) s = carrel_session_new();
    const char *state = (const char *)sqlite3_column_text(stmt, 4);

    s->id = carrel_store_column_dup(stmt, 0);
    s->name = carrel_store_column_dup(stmt, 1);
    s->template_name = carrel_store_column_dup(stmt, 2);
    s->template_version = (guint)sqlite3_column_int64(stmt, 3);
    s->state = carrel_session_state_from_string(state);
    s->state_reason = carrel_store_column_dup(stmt, 5);
    s->vcpus = (guint)sqlite3_column_int64(stmt, 6);
    s->memory_mib = (guint)sqlite3_column_int64(stmt, 7);
    s->dir = carrel_store_column_dup(stmt, 8);
    s->overlay_path = carrel_store_column_dup(stmt, 9);
    s->created_at = sqlite3_column_int64(stmt, 10);
    s->updated_at = sqlite3_column_int64(stmt, 11);
    s->from_warm = g_strcmp0((const char *)sqlite3_column_text(stmt, 12), "warm") == 0;
    s->exit_paths = paths_from_text((const char *)sqlite3_column_text(stmt, 13));
    s->head_snapshot = carrel_store_column_dup(stmt, 14);
    s->origin_session = carrel_store_column_dup(stmt, 15);
    s->expires_at = sqlite3_column_int64(stmt, 16);
    s->idle_timeout_s = (guint)sqlite3_column_int64(stmt, 17);
    s->expiry_action = carrel_store_column_dup(stmt, 18);
    s->mac = carrel_store_column_dup(stmt, 19);
    s->pool = carrel_store_column_dup(stmt, 20);
    s->from_pool = sqlite3_column_int64(stmt, 21) != 0;
    s->owner_id = carrel_store_column_dup(stmt, 22);
    s->owner_label = carrel_store_column_dup(stmt, 23);
    s->policy = carrel_store_column_dup(stmt, 24);
    s->egress_ip = carrel_store_column_dup(stmt, 25);
    s->screen_width = (guint)sqlite3_column_int64(stmt, 26);
    s->screen_height = (guint)sqlite3_column_int64(stmt, 27);
    s->memory_file = carrel_store_column_dup(stmt, 28);
    if (s->state == CARREL_SESSION_LAST) {
        g_set_error(error, CARREL_ERROR, CARREL_ERROR_STORE,
                    "session '%s' has an unknown state '%s'", s->id, state ? state : "");
        return NULL;
    }
    return g_steal_pointer(&s);
}

static gboolean
template_exists(CarrelStore *store, const char *name, guint version, GError **error)
{
    g_autoptr(sqlite3_stmt) stmt = NULL;
    gint64 found = 0;

    stmt = carrel_store_prepare(
        store, "SELECT count(*) FROM templates WHERE name = ?1 AND version = ?2", error);
    if (!stmt || !carrel_store_bind_text(store, stmt, 1, name, error) ||
        !carrel_store_bind_int64(store, stmt, 2, version, error) ||
        !carrel_store_query_int64(store, stmt, "looking up template", &found, error))
        return FALSE;
    if (found == 0) {
        g_set_error(error, CARREL_ERROR, CARREL_ERROR_NOT_FOUND, "template '%s@%u' does not exist",
                    name, version);
        return FALSE;
    }
    return TRUE;
}

static gboolean
insert_session(CarrelStore *store, const CarrelSession *session, GError **error)
{
    g_autofree char *name_used =
        g_strdup_printf("session name '%s' is already used", session->name);
    g_autofree char *id_used = g_strdup_printf("session '%s' already exists", session->id);
    const CarrelStoreConflict conflict = {.unique = name_used, .primary_key = id_used};
    g_autoptr(sqlite3_stmt) stmt = NULL;

    if (session->state != CARREL_SESSION_DESTROYED &&
        !template_exists(store, session->template_name, session->template_version, error))
        return FALSE;
    stmt = carrel_store_prepare(store,
                                "INSERT INTO sessions (" SESSION_COLUMNS ") "
                                "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, "
                                "?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                                error);
    return stmt && bind_session(store, stmt, session, error) &&
           carrel_store_step_done(store, stmt, &conflict, "inserting session", error);
}

gboolean
carrel_store_session_insert(CarrelStore *store, const CarrelSession *session, GError **error)
{
    g_autoptr(GMutexLocker) locker G_GNUC_UNUSED = g_mutex_locker_new(&store->lock);

    if (!session->id || !session->name || !session->template_name || (int)session->state < 0 ||
        session->state >= CARREL_SESSION_LAST) {
        g_set_error(error, CARREL_ERROR, CARREL_ERROR_INVALID_ARG,
                    "a session needs an id, a name, a template and a state");
        return FALSE;
    }
    if (!carrel_store_begin(store, error))
        return FALSE;
    if (!insert_session(store, session, error)) {
        carrel_store_rollback(store);
        return FALSE;
    }
    return carrel_store_commit(store, error);
}

CarrelSession *
carrel_store_session_get(CarrelStore *store, const char *id_or_name, GError **error)
{
    g_autoptr(GMutexLocker) locker G_GNUC_UNUSED = g_mutex_locker_new(&store->lock);
    g_autoptr(sqlite3_stmt) stmt = NULL;
    gboolean row = FALSE;

    /* An id wins over a name, so a session named like another's id cannot shadow it. */
    stmt = carrel_store_prepare(store,
                                "SELECT " SESSION_COLUMNS " FROM sessions WHERE id = ?1 "
                                "OR (name = ?1 AND state != 'destroyed') "
                                "ORDER BY id = ?1 DESC LIMIT 1",
                                error);
    if (!stmt || !carrel_store_bind_text(store, stmt, 1, id_or_name, error) ||
        !carrel_store_step_row(store, stmt, "reading session", &row, error))
        return NULL;
    if (!row) {
        g_set_error(error, CARREL_ERROR, CARREL_ERROR_NOT_FOUND, "session '%s' does not exist",
                    id_or_name);
        return NULL;
    }
    return session_from_row(stmt, error);
}

GPtrArray *
carrel_store_session_list(CarrelStore *store, gboolean include_destroyed, GError **error)
{
    g_autoptr(GMutexLocker) locker G_GNUC_UNUSED = g_mutex_locker_new(&store->lock);
    g_autoptr(GPtrArray) list = g_ptr_array_new_with_free_func((GDestroyNotify)carrel_session_free);
    g_autoptr(sqlite3_stmt) stmt = NULL;
    gboolean row = FALSE;

    stmt = carrel_store_prepare(store,
                                "SELECT " SESSION_COLUMNS " FROM sessions "
                                "WHERE ?1 OR state != 'destroyed' ORDER BY created_at, rowid",
                                error);
    if (!stmt || !carrel_store_bind_int64(store, stmt, 1, include_destroyed ? 1 : 0, error))
        return NULL;
    for (;;) {
        CarrelSession *s;

        if (!carrel_store_step_row(store, stmt, "listing sessions", &row, error))
            return NULL;
        if (!row)
            break;
        s = session_from_row(stmt, error);
        if (!s)
            return NULL;
        g_ptr_array_add(list, s);
    }
    return g_steal_pointer(&list);
}

static gboolean
update_state(CarrelStore *store, const char *id, CarrelSessionState state, const char *reason,
             GError **error)
{
    g_autoptr(sqlite3_stmt) stmt = NULL;
    g_autofree char *clash = g_strdup_printf(
        "session '%s' cannot leave state 'destroyed': its name is used by another session", id);
    const CarrelStoreConflict conflict = {.unique = clash};

    stmt = carrel_store_prepare(store,
                                "UPDATE sessions SET state = ?2, state_reason = ?3, "
                                "updated_at = max(updated_at, ?4) WHERE id = ?1",
                                error);
    if (!stmt || !carrel_store_bind_text(store, stmt, 1, id, error) ||
        !carrel_store_bind_text(store, stmt, 2, carrel_session_state_to_string(state), error) ||
        !carrel_store_bind_text(store, stmt, 3, reason, error) ||
        !carrel_store_bind_int64(store, stmt, 4, carrel_util_now(), error) ||
        !carrel_store_step_done(store, stmt, &conflict, "updating session state", error))
        return FALSE;
    if (sqlite3_changes(store->db) == 0) {
        g_set_error(error, CARREL_ERROR, CARREL_ERROR_NOT_FOUND, "session '%s' does not exist", id);
        return FALSE;
    }
    return TRUE;
}

static gboolean
check_state(CarrelSessionState state, GError **error)
{
    if ((int)state < 0 || state >= CARREL_SESSION_LAST) {
        g_set_error(error, CARREL_ERROR, CARREL_ERROR_INVALID_ARG, "invalid session state %d",
                    (int)state);
        return FALSE;
    }
    return TRUE;
}

gboolean
carrel_store_session_set_state(CarrelStore *store, const char *id, CarrelSessionState state,
                               const char *reason, GError **error)
{
    g_autoptr(GMutexLocker) locker G_GNUC_UNUSED = g_mutex_locker_new(&store->lock);

    return check_state(state, error) && update_state(store, id, state, reason, error);
}

gboolean
carrel_store_session_set_state_audited(CarrelStore *store, const char *id, CarrelSessionState state,
                                       const char *reason, CarrelAuditRecord *audit, GError **error)
{
    g_autoptr(GMutexLocker) locker G_GNUC_UNUSED = g_mutex_locker_new(&store->lock);
    g_auto(CarrelAuditLink) link = {0};

    if (!check_state(state, error) || !carrel_store_begin(store, error))
        return FALSE;
    /* Both or neither: a state change nobody can account for, or a record of one that did not
     * happen, would make the log lie. */
    if (!update_state(store, id, state, reason, error) ||
        !carrel_store_audit_insert(store, audit, &link, error)) {
        carrel_store_rollback(store);
        return FALSE;
    }
    if (!carrel_store_commit(store, error))
        return FALSE;
    carrel_audit_link_settle(&link, audit);
    return TRUE;
}

gboolean
carrel_store_session_delete(CarrelStore *store, const char *id, GError **error)
{
    g_autoptr(GMutexLocker) locker G_GNUC_UNUSED = g_mutex_locker_new(&store->lock);
    g_autoptr(sqlite3_stmt) stmt = NULL;

    stmt = carrel_store_prepare(store, "DELETE FROM sessions WHERE id = ?1", error);
    if (!stmt || !carrel_store_bind_text(store, stmt, 1, id, error) ||
        !carrel_store_step_done(store, stmt, NULL, "deleting session", error))
        return FALSE;
    if (sqlite3_changes(store->db) == 0) {
        g_set_error(error, CARREL_ERROR, CARREL_ERROR_NOT_FOUND, "session '%s' does not exist", id);
        return FALSE;
    }
    return TRUE;
}

gboolean
carrel_store_session_set_disk(CarrelStore *store, const char *id, const char *overlay_path,
                              const char *head_snapshot, GError **error)
{
    g_autoptr(GMutexLocker) locker G_GNUC_UNUSED = g_mutex_locker_new(&store->lock);
    g_autoptr(sqlite3_stmt) stmt = NULL;

    stmt = carrel_store_prepare(store,
                                "UPDATE sessions SET overlay_path = ?2, head_snapshot = ?3, "
                                "updated_at = ?4 WHERE id = ?1",
                                error);
    return stmt && carrel_store_bind_text(store, stmt, 1, id, error) &&
           carrel_store_bind_text(store, stmt, 2, overlay_path, error) &&
           carrel_store_bind_text(store, stmt, 3, head_snapshot, error) &&
           carrel_store_bind_int64(store, stmt, 4, carrel_util_now(), error) &&
           carrel_store_step_done(store, stmt, NULL, "updating a session's disk", error);
}

gboolean
carrel_store_session_set_memory_file(CarrelStore *store, const char *id, const char *memory_file,
                                     GError **error)
{
    g_autoptr(GMutexLocker) locker G_GNUC_UNUSED = g_mutex_locker_new(&store->lock);
    g_autoptr(sqlite3_stmt) stmt = NULL;

    stmt = carrel_store_prepare(
        store, "UPDATE sessions SET memory_file = ?2, updated_at = ?3 WHERE id = ?1", error);
    return stmt && carrel_store_bind_text(store, stmt, 1, id, error) &&
           carrel_store_bind_text(store, stmt, 2, memory_file, error) &&
           carrel_store_bind_int64(store, stmt, 3, carrel_util_now(), error) &&
           carrel_store_step_done(store, stmt, NULL, "updating a session's RAM file", error);
}

/* Sessions not destroyed whose column equals value (0 on error, which is set). */
static guint
count_live_sessions(CarrelStore *store, const char *sql, const char *value, const char *what,
                    GError **error)
{
    g_autoptr(GMutexLocker) locker G_GNUC_UNUSED = g_mutex_locker_new(&store->lock);
    g_autoptr(sqlite3_stmt) stmt = carrel_store_prepare(store, sql, error);
    gint64 count = 0;

    if (!stmt || !carrel_store_bind_text(store, stmt, 1, value, error) ||
        !carrel_store_query_int64(store, stmt, what, &count, error))
        return 0;
    return (guint)count;
}

guint
carrel_store_session_count_memory_users(CarrelStore *store, const char *memory_file, GError **error)
{
    return count_live_sessions(store,
                               "SELECT count(*) FROM sessions WHERE memory_file = ?1 "
                               "AND state != 'destroyed'",
                               memory_file, "counting a RAM file's sessions", error);
}

guint
carrel_store_session_count_forks(CarrelStore *store, const char *id, GError **error)
{
    return count_live_sessions(store,
                               "SELECT count(*) FROM sessions WHERE origin_session = ?1 "
                               "AND state != 'destroyed'",
                               id, "counting forks", error);
}

gboolean
carrel_store_session_clear_limits(CarrelStore *store, const char *id, GError **error)
{
    g_autoptr(GMutexLocker) locker G_GNUC_UNUSED = g_mutex_locker_new(&store->lock);
    g_autoptr(sqlite3_stmt) stmt = NULL;

    stmt = carrel_store_prepare(store,
                                "UPDATE sessions SET expires_at = NULL, idle_timeout_s = NULL "
                                "WHERE id = ?1",
                                error);
    return stmt && carrel_store_bind_text(store, stmt, 1, id, error) &&
           carrel_store_step_done(store, stmt, NULL, "clearing a session's time limits", error);
}

gboolean
carrel_store_pool_set(CarrelStore *store, const char *template_name, guint size, GError **error)
{
    g_autoptr(GMutexLocker) locker G_GNUC_UNUSED = g_mutex_locker_new(&store->lock);
    g_autoptr(sqlite3_stmt) stmt = NULL;

    stmt = carrel_store_prepare(
        store, "INSERT OR REPLACE INTO pools (template_name, size) VALUES (?1, ?2)", error);
    return stmt && carrel_store_bind_text(store, stmt, 1, template_name, error) &&
           carrel_store_bind_int64(store, stmt, 2, size, error) &&
           carrel_store_step_done(store, stmt, NULL, "storing a pool", error);
}

GHashTable *
carrel_store_pool_list(CarrelStore *store, GError **error)
{
    g_autoptr(GMutexLocker) locker G_GNUC_UNUSED = g_mutex_locker_new(&store->lock);
    g_autoptr(sqlite3_stmt) stmt = NULL;
    g_autoptr(GHashTable) pools = g_hash_table_new_full(g_str_hash, g_str_equal, g_free, NULL);

    stmt = carrel_store_prepare(store, "SELECT template_name, size FROM pools", error);
    if (!stmt)
        return NULL;
    for (;;) {
        gboolean row = FALSE;
        if (!carrel_store_step_row(store, stmt, "reading pools", &row, error))
            return NULL;
        if (!row)
            break;
        g_hash_table_insert(pools, carrel_store_column_dup(stmt, 0),
                            GUINT_TO_POINTER((guint)sqlite3_column_int64(stmt, 1)));
    }
    return g_steal_pointer(&pools);
}

GPtrArray *
carrel_store_pool_members(CarrelStore *store, const char *template_name, GError **error)
{
    g_autoptr(GMutexLocker) locker G_GNUC_UNUSED = g_mutex_locker_new(&store->lock);
    g_autoptr(sqlite3_stmt) stmt = NULL;
    g_autoptr(GPtrArray) list = g_ptr_array_new_with_free_func((GDestroyNotify)carrel_session_free);

    stmt = carrel_store_prepare(store,
                                "SELECT " SESSION_COLUMNS " FROM sessions WHERE pool = ?1 "
                                "AND state != 'destroyed' ORDER BY created_at, rowid",
                                error);
    if (!stmt || !carrel_store_bind_text(store, stmt, 1, template_name, error))
        return NULL;
    for (;;) {
        gboolean row = FALSE;
        CarrelSession *s;
        if (!carrel_store_step_row(store, stmt, "reading pool members", &row, error))
            return NULL;
        if (!row)
            break;
        if (!(s = session_from_row(stmt, error)))
            return NULL;
        g_ptr_array_add(list, s);
    }
    return g_steal_pointer(&list);
}

gboolean
carrel_store_session_adopt_member(CarrelStore *store, const CarrelSession *s, GError **error)
{
    g_autoptr(GMutexLocker) locker G_GNUC_UNUSED = g_mutex_locker_new(&store->lock);
    g_autofree char *exit_paths = paths_to_text(s->exit_paths);
    g_autofree char *name_used = g_strdup_printf("session name '%s' is already used", s->name);
    const CarrelStoreConflict conflict = {.unique = name_used};
    g_autoptr(sqlite3_stmt) stmt = NULL;

    stmt = carrel_store_prepare(
        store,
        "UPDATE sessions SET pool = NULL, from_pool = 1, name = ?2, exit_paths = ?3, "
        "expires_at = ?4, idle_timeout_s = ?5, expiry_action = ?6, updated_at = ?7, "
        "owner_id = ?8, owner_label = ?9, policy = ?10, screen_width = ?11, screen_height = ?12 "
        "WHERE id = ?1 AND pool IS NOT NULL",
        error);
    if (!stmt || !carrel_store_bind_text(store, stmt, 1, s->id, error) ||
        !carrel_store_bind_text(store, stmt, 2, s->name, error) ||
        !carrel_store_bind_text(store, stmt, 3, exit_paths, error) ||
        !carrel_store_bind_int_or_null(store, stmt, 4, s->expires_at, error) ||
        !carrel_store_bind_int_or_null(store, stmt, 5, s->idle_timeout_s, error) ||
        !carrel_store_bind_text(store, stmt, 6, s->expiry_action, error) ||
        !carrel_store_bind_int64(store, stmt, 7, carrel_util_now(), error) ||
        !carrel_store_bind_text(store, stmt, 8, s->owner_id, error) ||
        !carrel_store_bind_text(store, stmt, 9, s->owner_label, error) ||
        !carrel_store_bind_text(store, stmt, 10, s->policy ? s->policy : "default", error) ||
        !carrel_store_bind_int_or_null(store, stmt, 11, s->screen_width, error) ||
        !carrel_store_bind_int_or_null(store, stmt, 12, s->screen_height, error) ||
        !carrel_store_step_done(store, stmt, &conflict, "adopting a pool member", error))
        return FALSE;
    if (sqlite3_changes(store->db) == 0) {
        g_set_error(error, CARREL_ERROR, CARREL_ERROR_NOT_FOUND, "pool member '%s' is gone", s->id);
        return FALSE;
    }
    return TRUE;
}
