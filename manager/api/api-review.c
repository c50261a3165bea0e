/*
 * api: the routes people reviewing sessions use: login (a cookie for the web console), the
 * control lease, approvals, tokens with names, the screenshots of a timeline, and the record of
 * who did what to a session.
 */
#include <string.h>

#include "api/api-priv.h"

static const char *
param(CarrelApiRequest *req, guint i)
{
    return g_ptr_array_index(req->params, i);
}

static JsonNode *
principal_json(const char *name, const char *role)
{
    g_autoptr(JsonBuilder) b = json_builder_new();

    json_builder_begin_object(b);
    json_builder_set_member_name(b, "name");
    json_builder_add_string_value(b, name);
    json_builder_set_member_name(b, "role");
    json_builder_add_string_value(b, role);
    json_builder_end_object(b);
    return json_builder_get_root(b);
}

/* A string member of the body: required or not; other members refused. */
static gboolean
body_strings(CarrelApiRequest *req, const char *const *allowed, const char *name, gboolean required,
             const char **ret_value, GError **error)
{
    JsonObject *obj = req->body ? json_node_get_object(req->body) : NULL;
    JsonNode *node = obj ? json_object_get_member(obj, name) : NULL;

    *ret_value = NULL;
    if (obj && !carrel_conf_check_members(obj, allowed, error))
        return FALSE;
    if (node && !JSON_NODE_HOLDS_NULL(node)) {
        if (!JSON_NODE_HOLDS_VALUE(node) || json_node_get_value_type(node) != G_TYPE_STRING) {
            g_set_error(error, CARREL_ERROR, CARREL_ERROR_INVALID_ARG, "'%s' must be a string",
                        name);
            return FALSE;
        }
        *ret_value = json_node_get_string(node);
    }
    if (required && !*ret_value) {
        g_set_error(error, CARREL_ERROR, CARREL_ERROR_INVALID_ARG, "'%s' is required", name);
        return FALSE;
    }
    return TRUE;
}

JsonNode *
carrel_api_post_login(CarrelApiRequest *req, guint *ret_status, GError **error)
{
    static const char *const allowed[] = {"token", NULL};
    const char *token = NULL;
    g_autofree char *name = NULL;
    g_autofree char *role = NULL;

    if (!body_strings(req, allowed, "token", TRUE, &token, error))
        return NULL;
    role = carrel_manager_authenticate(req->mgr, token, &name);
    if (!role) {
        g_set_error(error, CARREL_ERROR, CARREL_ERROR_UNAUTHORIZED, "invalid token");
        return NULL;
    }
    req->set_cookie = carrel_api_web_login(req->api, name, role);
    return principal_json(name, role);
}

JsonNode *
carrel_api_post_logout(CarrelApiRequest *req, guint *ret_status, GError **error)
{
    *ret_status = SOUP_STATUS_NO_CONTENT;
    return NULL;
}

JsonNode *
carrel_api_get_whoami(CarrelApiRequest *req, guint *ret_status, GError **error)
{
    return principal_json(req->principal, req->role);
}

JsonNode *
carrel_api_get_control(CarrelApiRequest *req, guint *ret_status, GError **error)
{
    return carrel_manager_lease_get(req->mgr, param(req, 0), error);
}

JsonNode *
carrel_api_post_control(CarrelApiRequest *req, guint *ret_status, GError **error)
{
    static const char *const allowed[] = {"action", NULL};
    const char *action = NULL;

    if (!body_strings(req, allowed, "action", TRUE, &action, error))
        return NULL;
    if (g_str_equal(action, "take")) {
        /* An agent taking the lease would lock out the people who review it. */
        if (g_strcmp0(req->role, "agent") == 0) {
            g_set_error(error, CARREL_ERROR, CARREL_ERROR_FORBIDDEN,
                        "agents cannot take control of a session");
            return NULL;
        }
        return carrel_manager_lease_take(req->mgr, param(req, 0), req->principal, error);
    }
    if (g_str_equal(action, "release"))
        return carrel_manager_lease_release(req->mgr, param(req, 0), req->principal,
                                            g_strcmp0(req->role, "admin") == 0, error);
    g_set_error(error, CARREL_ERROR, CARREL_ERROR_INVALID_ARG,
                "'action' must be \"take\" or \"release\"");
    return NULL;
}

gboolean
carrel_api_check_agent_access(CarrelApiRequest *req, const char *id_or_name, GError **error)
{
    g_autoptr(CarrelSession) s = NULL;

    if (g_strcmp0(req->role, "agent") != 0)
        return TRUE;
    s = carrel_manager_session_get(req->mgr, id_or_name, error);
    return s && carrel_manager_check_agent_input(req->mgr, s, error);
}

JsonNode *
carrel_api_get_approvals(CarrelApiRequest *req, guint *ret_status, GError **error)
{
    const char *state = carrel_api_query(req, "state");
    g_autoptr(GPtrArray) list = NULL;

    if (state && !g_str_equal(state, "pending") && !g_str_equal(state, "all")) {
        g_set_error(error, CARREL_ERROR, CARREL_ERROR_INVALID_ARG,
                    "'state' must be \"pending\" or \"all\"");
        return NULL;
    }
    list = carrel_manager_approval_list(req->mgr, !state || g_str_equal(state, "pending"), error);
    return list ? carrel_api_list_of("approvals", list, carrel_api_approval_item, NULL) : NULL;
}

static JsonNode *
decide(CarrelApiRequest *req, gboolean approve, GError **error)
{
    static const char *const allowed[] = {"reason", NULL};
    const char *reason = NULL;
    g_autoptr(CarrelApproval) a = NULL;

    if (!body_strings(req, allowed, "reason", FALSE, &reason, error))
        return NULL;
    a = carrel_manager_approval_decide(req->mgr, param(req, 0), approve, req->principal, reason,
                                       error);
    return a ? carrel_approval_to_json(a) : NULL;
}

JsonNode *
carrel_api_post_approval_approve(CarrelApiRequest *req, guint *ret_status, GError **error)
{
    return decide(req, TRUE, error);
}

JsonNode *
carrel_api_post_approval_deny(CarrelApiRequest *req, guint *ret_status, GError **error)
{
    return decide(req, FALSE, error);
}

JsonNode *
carrel_api_post_test_approval(CarrelApiRequest *req, guint *ret_status, GError **error)
{
    static const char *const allowed[] = {"session_id", "action", "detail", NULL};
    JsonObject *obj = req->body ? json_node_get_object(req->body) : NULL;
    const char *session = NULL;
    const char *action = NULL;
    JsonNode *detail;
    g_autoptr(CarrelApproval) a = NULL;

    if (!body_strings(req, allowed, "session_id", TRUE, &session, error) ||
        !body_strings(req, allowed, "action", TRUE, &action, error))
        return NULL;
    detail = json_object_get_member(obj, "detail");
    a = carrel_manager_approval_request(req->mgr, session, action, detail, "test-hook", error);
    if (!a)
        return NULL;
    *ret_status = SOUP_STATUS_CREATED;
    return carrel_approval_to_json(a);
}

JsonNode *
carrel_api_post_tokens(CarrelApiRequest *req, guint *ret_status, GError **error)
{
    static const char *const allowed[] = {"role", "name", NULL};
    const char *role = NULL;
    const char *name = NULL;
    g_autofree char *token = NULL;
    g_autoptr(JsonNode) node = NULL;

    if (!body_strings(req, allowed, "role", TRUE, &role, error) ||
        !body_strings(req, allowed, "name", TRUE, &name, error) ||
        !(token = carrel_manager_create_token(req->mgr, role, name, error)))
        return NULL;
    node = principal_json(name, role);
    /* The only time the token is shown: it is kept as a hash. */
    json_object_set_string_member(json_node_get_object(node), "token", token);
    *ret_status = SOUP_STATUS_CREATED;
    return g_steal_pointer(&node);
}

JsonNode *
carrel_api_get_session_shot(CarrelApiRequest *req, guint *ret_status, GError **error)
{
    const char *type = NULL;
    GBytes *bytes = carrel_manager_session_kept_screenshot(req->mgr, param(req, 0), param(req, 1),
                                                           &type, error);

    if (!bytes)
        return NULL;
    req->reply_bytes = bytes;
    req->reply_type = type;
    return NULL;
}

/* The verb a lifecycle route stands for: the last path segment, or destroy / snapshot_delete. */
static char *
lifecycle_action(CarrelApiRequest *req)
{
    const char *last = strrchr(req->path, '/') + 1;

    if (g_str_equal(req->method, "DELETE"))
        return g_strdup(req->params->len > 1 ? "snapshot_delete" : "destroy");
    if (g_str_equal(last, "snapshots"))
        return g_strdup("snapshot");
    return g_strdup(last);
}

void
carrel_api_record_lifecycle(CarrelApiRequest *req, const char *session_id, const GError *failure,
                            gint64 started_us)
{
    g_autofree char *action = lifecycle_action(req);
    g_autoptr(JsonNode) params = NULL;

    if (!session_id)
        return;
    if (req->params->len > 1) {
        params = json_node_init_object(json_node_alloc(), json_object_new());
        json_object_set_string_member(json_node_get_object(params), "snapshot", param(req, 1));
    } else if (req->body) {
        params = json_node_copy(req->body);
    }
    carrel_manager_note(req->mgr, session_id, req->principal, "lifecycle", action, params, NULL,
                        failure, started_us);
}
