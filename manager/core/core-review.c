/*
 * core: what people reviewing sessions hold and decide: the control lease (a human has the
 * session's input, agents wait) and approvals (actions waiting for a reviewer).
 */
#include <string.h>

#include "core/core-priv.h"

void
carrel_manager_note(CarrelManager *mgr, const char *session_id, const CarrelPrincipal *who,
                    const char *kind, const char *action, JsonNode *params, JsonNode *result,
                    const GError *failure, gint64 started_us)
{
    carrel_manager_record(mgr, session_id, who, kind, action, params, result, failure, started_us,
                          NULL);
}

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
    carrel_manager_note(mgr, door.session->id, who, "control", "take", NULL, NULL, local, 0);
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
        carrel_manager_note(mgr, id, who, "control", "release", params, NULL, NULL, 0);
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

static CarrelApproval *
request(CarrelManager *mgr, const CarrelPrincipal *who, const char *session_id, const char *action,
        JsonNode *detail, GError **error)
{
    g_autoptr(CarrelApproval) a = NULL;
    g_autoptr(JsonNode) params = NULL;

    if (!carrel_approval_check_action(action, error))
        return NULL;
    if (detail && !JSON_NODE_HOLDS_OBJECT(detail)) {
        g_set_error(error, CARREL_ERROR, CARREL_ERROR_INVALID_ARG,
                    "an approval's detail must be an object");
        return NULL;
    }
    a = carrel_approval_new();
    a->id = carrel_util_new_id("ap-");
    a->session_id = g_strdup(session_id);
    a->action = g_strdup(action);
    a->detail = detail ? json_node_copy(detail)
                       : json_node_init_object(json_node_alloc(), json_object_new());
    a->requested_by = g_strdup(who->label);
    a->requested_at = carrel_util_now();
    a->state = g_strdup("pending");
    if (!carrel_store_approval_insert(mgr->store, a, error))
        return NULL;
    params = carrel_approval_to_json(a);
    carrel_manager_note(mgr, session_id, who, "approval", "request", params, NULL, NULL, 0);
    return g_steal_pointer(&a);
}

CarrelApproval *
carrel_manager_approval_request(CarrelManager *mgr, const CarrelPrincipal *who,
                                const char *id_or_name, const char *action, JsonNode *detail,
                                GError **error)
{
    g_auto(CarrelDoor) door = {0};
    g_autoptr(GError) local = NULL;
    CarrelApproval *a;

    if (!carrel_door_enter(&door, mgr, who, CARREL_OP_APPROVAL_REQUEST, id_or_name, NULL, error))
        return NULL;
    a = request(mgr, who, door.session->id, action, detail, &local);
    return carrel_door_finish(&door, a, &local, error);
}

/* The owner of an approval's session, for filtering (NULL: nobody's, or gone). */
static char *
approval_owner(CarrelManager *mgr, const CarrelApproval *a)
{
    g_autoptr(CarrelSession) s = carrel_store_session_get(mgr->store, a->session_id, NULL);

    return s ? g_strdup(s->owner_id) : NULL;
}

GPtrArray *
carrel_manager_approval_list(CarrelManager *mgr, const CarrelPrincipal *who, gboolean pending_only,
                             GError **error)
{
    g_auto(CarrelDoor) door = {0};
    GPtrArray *all;

    if (!carrel_door_enter(&door, mgr, who, CARREL_OP_APPROVAL_LIST, NULL, NULL, error) ||
        !(all = carrel_store_approval_list(mgr->store, pending_only, error)))
        return NULL;
    for (guint i = all->len; i > 0; i--) {
        g_autofree char *owner = approval_owner(mgr, g_ptr_array_index(all, i - 1));
        if (!carrel_policy_may_see(mgr->policy, who, CARREL_OP_APPROVAL_LIST, owner))
            g_ptr_array_remove_index(all, i - 1);
    }
    return all;
}

static CarrelApproval *
decide(CarrelManager *mgr, const CarrelPrincipal *who, const char *id, gboolean approve,
       const char *reason, GError **error)
{
    g_autoptr(CarrelApproval) a = NULL;
    g_autoptr(JsonNode) params = NULL;

    if (!carrel_approval_check_reason(reason, error) ||
        !carrel_store_approval_decide(mgr->store, id, approve, who->label, reason, error) ||
        !(a = carrel_store_approval_get(mgr->store, id, error)))
        return NULL;
    params = carrel_approval_to_json(a);
    carrel_manager_note(mgr, a->session_id, who, "approval", approve ? "approve" : "deny", params,
                        NULL, NULL, 0);
    return g_steal_pointer(&a);
}

CarrelApproval *
carrel_manager_approval_decide(CarrelManager *mgr, const CarrelPrincipal *who, const char *id,
                               gboolean approve, const char *reason, GError **error)
{
    g_auto(CarrelDoor) door = {0};
    g_autoptr(GError) local = NULL;
    g_autoptr(CarrelApproval) known = carrel_store_approval_get(mgr->store, id, error);
    JsonNode *params;
    CarrelApproval *a;

    if (!known)
        return NULL;
    params = json_node_init_object(json_node_alloc(), json_object_new());
    json_object_set_string_member(json_node_get_object(params), "approval", id);
    json_object_set_boolean_member(json_node_get_object(params), "approve", approve);
    /* Decided on its session: the reviewer must be able to see that session. */
    if (!carrel_door_enter(&door, mgr, who, CARREL_OP_APPROVAL_DECIDE, known->session_id, params,
                           error))
        return NULL;
    a = decide(mgr, who, id, approve, reason, &local);
    return carrel_door_finish(&door, a, &local, error);
}
