/*
 * core: the control lease. A human who takes it has the session's keyboard and pointer; agents' HID
 * events wait (WRONG_STATE "session under human control") until its holder, or an admin, releases
 * it.
 */
#include "core/core-priv.h"

static JsonNode *
lease_json(const char *holder_id, const char *holder, gint64 since)
{
    g_autoptr(JsonBuilder) b = json_builder_new();
    g_autofree char *when = holder ? carrel_util_format_time(since) : NULL;

    json_builder_begin_object(b);
    json_builder_set_member_name(b, "holder");
    if (holder)
        json_builder_add_string_value(b, holder);
    else
        json_builder_add_null_value(b);
    json_builder_set_member_name(b, "holder_id");
    if (holder_id)
        json_builder_add_string_value(b, holder_id);
    else
        json_builder_add_null_value(b);
    json_builder_set_member_name(b, "since");
    if (when)
        json_builder_add_string_value(b, when);
    else
        json_builder_add_null_value(b);
    json_builder_end_object(b);
    return json_builder_get_root(b);
}

JsonNode *
carrel_manager_lease_get(CarrelManager *mgr, const CarrelPrincipal *who, const char *id_or_name,
                         GError **error)
{
    g_auto(CarrelDoor) door = {0};
    g_autofree char *holder_id = NULL;
    g_autofree char *holder = NULL;
    gint64 since = 0;

    if (!carrel_door_enter(&door, mgr, who, CARREL_OP_SESSION_READ, id_or_name, NULL, error) ||
        !carrel_store_lease_get(mgr->store, door.session->id, &holder_id, &holder, &since, error))
        return NULL;
    return lease_json(holder_id, holder, since);
}

JsonNode *
carrel_manager_lease_of(CarrelManager *mgr, const CarrelSession *session)
{
    g_autofree char *holder_id = NULL;
    g_autofree char *holder = NULL;
    gint64 since = 0;

    if (!carrel_store_lease_get(mgr->store, session->id, &holder_id, &holder, &since, NULL))
        return NULL;
    return lease_json(holder_id, holder, since);
}

GHashTable *
carrel_manager_leases(CarrelManager *mgr)
{
    g_autoptr(GHashTable) held = carrel_store_lease_all(mgr->store, NULL);
    GHashTable *out;
    GHashTableIter iter;
    gpointer id, value;

    if (!held)
        return NULL;
    out = g_hash_table_new_full(g_str_hash, g_str_equal, g_free, (GDestroyNotify)json_node_unref);
    g_hash_table_iter_init(&iter, held);
    while (g_hash_table_iter_next(&iter, &id, &value)) {
        const CarrelStoreLease *l = value;
        g_hash_table_insert(out, g_strdup(id), lease_json(l->holder_id, l->holder_label, l->since));
    }
    return out;
}

void
carrel_manager_lease_holder(CarrelManager *mgr, const char *session_id, char **ret_holder_id,
                            char **ret_holder_label)
{
    *ret_holder_id = NULL;
    *ret_holder_label = NULL;
    (void)carrel_store_lease_get(mgr->store, session_id, ret_holder_id, ret_holder_label, NULL,
                                 NULL);
}

static JsonNode *
take(CarrelManager *mgr, const CarrelPrincipal *who, const char *id, GError **error)
{
    g_autofree char *holder_id = NULL;
    g_autofree char *holder = NULL;
    gint64 since = 0;

    if (!carrel_store_lease_take(mgr->store, id, who->token_id, who->label, &holder_id, &holder,
                                 &since, error))
        return NULL;
    if (g_strcmp0(holder_id, who->token_id) != 0) {
        g_set_error(error, CARREL_ERROR, CARREL_ERROR_WRONG_STATE,
                    "session '%s' is under human control: '%s' holds the control lease", id,
                    holder);
        return NULL;
    }
    return lease_json(holder_id, holder, since);
}

JsonNode *
carrel_manager_lease_take(CarrelManager *mgr, const CarrelPrincipal *who, const char *id_or_name,
                          GError **error)
{
    g_auto(CarrelDoor) door = {0};
    g_autoptr(GError) local = NULL;
    JsonNode *lease;

    if (!carrel_door_enter(&door, mgr, who, CARREL_OP_CONTROL_TAKE, id_or_name, NULL, error))
        return NULL;
    lease = take(mgr, who, door.session->id, &local);
    if (!carrel_manager_record_outcome(mgr, door.session->id, who, "control", "take", NULL, NULL,
                                       &local, 0, NULL, lease != NULL))
        g_clear_pointer(&lease, json_node_unref);
    return carrel_door_finish(&door, lease, &local, error);
}

static JsonNode *
release(CarrelManager *mgr, const CarrelPrincipal *who, const char *id, GError **error)
{
    g_autofree char *holder_id = NULL;
    g_autofree char *holder = NULL;
    gint64 since = 0;
    g_autoptr(JsonNode) params = NULL;

    if (!carrel_store_lease_get(mgr->store, id, &holder_id, &holder, &since, error))
        return NULL;
    if (holder_id && g_strcmp0(holder_id, who->token_id) != 0 && who->role != CARREL_ROLE_ADMIN) {
        g_set_error(error, CARREL_ERROR, CARREL_ERROR_FORBIDDEN,
                    "'%s' holds the control lease of session '%s'; only they (or an admin) can "
                    "release it",
                    holder, id);
        return NULL;
    }
    if (holder_id) {
        /* The lease that ends, as it was: who held it and since when. */
        params = lease_json(holder_id, holder, since);
        if (!carrel_store_lease_release(mgr->store, id, error))
            return NULL;
        if (!carrel_manager_note(mgr, id, who, "control", "release", params, NULL, NULL, 0, error))
            return NULL;
    }
    return lease_json(NULL, NULL, 0);
}

JsonNode *
carrel_manager_lease_release(CarrelManager *mgr, const CarrelPrincipal *who, const char *id_or_name,
                             GError **error)
{
    g_auto(CarrelDoor) door = {0};
    g_autoptr(GError) local = NULL;
    JsonNode *lease;

    if (!carrel_door_enter(&door, mgr, who, CARREL_OP_CONTROL_RELEASE, id_or_name, NULL, error))
        return NULL;
    lease = release(mgr, who, door.session->id, &local);
    return carrel_door_finish(&door, lease, &local, error);
}
