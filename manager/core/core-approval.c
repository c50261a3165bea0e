/*
 * core: approvals, actions that wait for a reviewer: requested on a session, listed as the caller
 * may see them, approved or denied once, each step on the session's timeline.
 */
#include "core/core-priv.h"

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
    a->detail = detail ? json_node_copy(detail) : carrel_conf_new_object_node();
    a->requested_by = g_strdup(who->label);
    a->requested_at = carrel_util_now();
    a->state = g_strdup("pending");
    if (!carrel_store_approval_insert(mgr->store, a, error))
        return NULL;
    params = carrel_approval_to_json(a);
    if (!carrel_manager_note(mgr, session_id, who, "approval", "request", params, NULL, NULL, 0,
                             error))
        return NULL;
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
    if (!carrel_manager_note(mgr, a->session_id, who, "approval", approve ? "approve" : "deny",
                             params, NULL, NULL, 0, error))
        return NULL;
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
    params = carrel_conf_new_object_node();
    json_object_set_string_member(json_node_get_object(params), "approval", id);
    json_object_set_boolean_member(json_node_get_object(params), "approve", approve);
    /* Decided on its session: the reviewer must be able to see that session. */
    if (!carrel_door_enter(&door, mgr, who, CARREL_OP_APPROVAL_DECIDE, known->session_id, params,
                           error))
        return NULL;
    a = decide(mgr, who, id, approve, reason, &local);
    return carrel_door_finish(&door, a, &local, error);
}
