/*
 * The bodies of the API's requests that are not records of their own (conf-requests.h): login,
 * tokens, the control lease, approvals, a template's warm clones and pool, snapshots, forks and
 * stop. Each reads the body (an object, or NULL when none was sent) with the module's member
 * readers; the error texts are the ones the API has always answered.
 */
#include "conf/conf-priv.h"

/* The body's object, or NULL (no body: every member absent). */
static JsonObject *
body_object(JsonNode *body)
{
    return body && JSON_NODE_HOLDS_OBJECT(body) ? json_node_get_object(body) : NULL;
}

/* obj has no members but allowed (no body has none). */
static gboolean
check_members(JsonObject *obj, const char *const *allowed, GError **error)
{
    return !obj || carrel_conf_check_members(obj, allowed, error);
}

void
carrel_login_request_free(CarrelLoginRequest *req)
{
    if (!req)
        return;
    g_free(req->token);
    g_free(req);
}

CarrelLoginRequest *
carrel_login_request_from_json(JsonNode *body, GError **error)
{
    static const char *const allowed[] = {"token", NULL};
    JsonObject *obj = body_object(body);
    g_autoptr(CarrelLoginRequest) req = g_new0(CarrelLoginRequest, 1);

    if (!check_members(obj, allowed, error) ||
        !carrel_conf_get_string(obj, "token", TRUE, &req->token, error))
        return NULL;
    return g_steal_pointer(&req);
}

void
carrel_token_request_free(CarrelTokenRequest *req)
{
    if (!req)
        return;
    g_free(req->role);
    g_free(req->name);
    g_strfreev(req->policies);
    g_free(req);
}

CarrelTokenRequest *
carrel_token_request_from_json(JsonNode *body, GError **error)
{
    static const char *const allowed[] = {"role", "name", "expires", "policies", NULL};
    JsonObject *obj = body_object(body);
    g_autoptr(CarrelTokenRequest) req = g_new0(CarrelTokenRequest, 1);
    const char *expires = NULL;

    if (!check_members(obj, allowed, error) ||
        !carrel_conf_get_string(obj, "role", TRUE, &req->role, error) ||
        !carrel_conf_get_string(obj, "name", TRUE, &req->name, error) ||
        !carrel_conf_get_string_ref(obj, "expires", FALSE, &expires, error) ||
        (expires && !carrel_token_parse_ttl(expires, &req->ttl_s, error)) ||
        !carrel_token_policies_from_json(body, &req->policies, error))
        return NULL;
    return g_steal_pointer(&req);
}

void
carrel_control_request_free(CarrelControlRequest *req)
{
    g_free(req);
}

CarrelControlRequest *
carrel_control_request_from_json(JsonNode *body, GError **error)
{
    static const char *const allowed[] = {"action", NULL};
    JsonObject *obj = body_object(body);
    g_autoptr(CarrelControlRequest) req = g_new0(CarrelControlRequest, 1);
    const char *action = NULL;

    if (!check_members(obj, allowed, error) ||
        !carrel_conf_get_string_ref(obj, "action", TRUE, &action, error))
        return NULL;
    if (!g_str_equal(action, "take") && !g_str_equal(action, "release")) {
        g_set_error(error, CARREL_ERROR, CARREL_ERROR_INVALID_ARG,
                    "'action' must be \"take\" or \"release\"");
        return NULL;
    }
    req->take = g_str_equal(action, "take");
    return g_steal_pointer(&req);
}

void
carrel_decision_request_free(CarrelDecisionRequest *req)
{
    if (!req)
        return;
    g_free(req->reason);
    g_free(req);
}

CarrelDecisionRequest *
carrel_decision_request_from_json(JsonNode *body, GError **error)
{
    static const char *const allowed[] = {"reason", NULL};
    JsonObject *obj = body_object(body);
    g_autoptr(CarrelDecisionRequest) req = g_new0(CarrelDecisionRequest, 1);

    if (!check_members(obj, allowed, error) ||
        !carrel_conf_get_string(obj, "reason", FALSE, &req->reason, error))
        return NULL;
    return g_steal_pointer(&req);
}

void
carrel_approval_ask_free(CarrelApprovalAsk *req)
{
    if (!req)
        return;
    g_free(req->session_id);
    g_free(req->action);
    g_clear_pointer(&req->detail, json_node_unref);
    g_free(req);
}

CarrelApprovalAsk *
carrel_approval_ask_from_json(JsonNode *body, GError **error)
{
    static const char *const allowed[] = {"session_id", "action", "detail", NULL};
    JsonObject *obj = body_object(body);
    g_autoptr(CarrelApprovalAsk) req = g_new0(CarrelApprovalAsk, 1);
    JsonNode *detail;

    if (!check_members(obj, allowed, error) ||
        !carrel_conf_get_string(obj, "session_id", TRUE, &req->session_id, error) ||
        !carrel_conf_get_string(obj, "action", TRUE, &req->action, error))
        return NULL;
    detail = carrel_conf_get_node(obj, "detail");
    req->detail = detail ? json_node_copy(detail) : NULL;
    return g_steal_pointer(&req);
}

void
carrel_warm_request_free(CarrelWarmRequest *req)
{
    g_free(req);
}

CarrelWarmRequest *
carrel_warm_request_from_json(JsonNode *body, GError **error)
{
    static const char *const allowed[] = {"version", NULL};
    JsonObject *obj = body_object(body);
    JsonNode *node = carrel_conf_get_node(obj, "version");
    g_autoptr(CarrelWarmRequest) req = g_new0(CarrelWarmRequest, 1);

    if (!check_members(obj, allowed, error))
        return NULL;
    if (node && (!carrel_conf_node_holds(node, G_TYPE_INT64) || json_node_get_int(node) < 1 ||
                 json_node_get_int(node) > G_MAXUINT)) {
        g_set_error(error, CARREL_ERROR, CARREL_ERROR_INVALID_ARG,
                    "'version' must be a positive integer");
        return NULL;
    }
    req->version = node ? (guint)json_node_get_int(node) : 0;
    return g_steal_pointer(&req);
}

void
carrel_pool_request_free(CarrelPoolRequest *req)
{
    g_free(req);
}

CarrelPoolRequest *
carrel_pool_request_from_json(JsonNode *body, GError **error)
{
    static const char *const allowed[] = {"size", NULL};
    JsonObject *obj = body_object(body);
    JsonNode *node = carrel_conf_get_node(obj, "size");
    g_autoptr(CarrelPoolRequest) req = g_new0(CarrelPoolRequest, 1);

    if (!check_members(obj, allowed, error))
        return NULL;
    /* Required: a pool's size is never implied. */
    if (!carrel_conf_node_holds(node, G_TYPE_INT64) || json_node_get_int(node) < 0 ||
        json_node_get_int(node) > CARREL_LIMIT_POOL) {
        g_set_error(error, CARREL_ERROR, CARREL_ERROR_INVALID_ARG,
                    "'size' must be between 0 and %d", CARREL_LIMIT_POOL);
        return NULL;
    }
    req->size = (guint)json_node_get_int(node);
    return g_steal_pointer(&req);
}

void
carrel_snapshot_request_free(CarrelSnapshotRequest *req)
{
    if (!req)
        return;
    g_free(req->name);
    g_free(req);
}

/* One required string member; a value of another type counts as absent, as it always did. */
static CarrelSnapshotRequest *
snapshot_request(JsonNode *body, const char *member, GError **error)
{
    const char *value = carrel_conf_peek_string(body_object(body), member);
    CarrelSnapshotRequest *req;

    if (!value) {
        g_set_error(error, CARREL_ERROR, CARREL_ERROR_INVALID_ARG, "'%s' is required", member);
        return NULL;
    }
    req = g_new0(CarrelSnapshotRequest, 1);
    req->name = g_strdup(value);
    return req;
}

CarrelSnapshotRequest *
carrel_snapshot_request_from_json(JsonNode *body, GError **error)
{
    return snapshot_request(body, "name", error);
}

CarrelSnapshotRequest *
carrel_revert_request_from_json(JsonNode *body, GError **error)
{
    return snapshot_request(body, "snapshot", error);
}

void
carrel_fork_request_free(CarrelForkRequest *req)
{
    if (!req)
        return;
    g_free(req->snapshot);
    g_free(req);
}

CarrelForkRequest *
carrel_fork_request_from_json(JsonNode *body, GError **error)
{
    static const char *const allowed[] = {"snapshot", "count", NULL};
    JsonObject *obj = body_object(body);
    JsonNode *count = carrel_conf_get_node(obj, "count");
    g_autoptr(CarrelForkRequest) req = g_new0(CarrelForkRequest, 1);

    if (!check_members(obj, allowed, error) ||
        !carrel_conf_get_string(obj, "snapshot", FALSE, &req->snapshot, error))
        return NULL;
    if (count && (!carrel_conf_node_holds(count, G_TYPE_INT64) || json_node_get_int(count) < 1 ||
                  json_node_get_int(count) > CARREL_LIMIT_FORKS)) {
        g_set_error(error, CARREL_ERROR, CARREL_ERROR_INVALID_ARG,
                    "'count' must be between 1 and %d", CARREL_LIMIT_FORKS);
        return NULL;
    }
    req->count = count ? (guint)json_node_get_int(count) : 1;
    return g_steal_pointer(&req);
}

void
carrel_stop_request_free(CarrelStopRequest *req)
{
    g_free(req);
}

CarrelStopRequest *
carrel_stop_request_from_json(JsonNode *body, GError **error)
{
    static const char *const allowed[] = {"timeout_s", NULL};
    JsonObject *obj = body_object(body);
    g_autoptr(CarrelStopRequest) req = g_new0(CarrelStopRequest, 1);
    gint64 timeout_s = 30;

    if (!check_members(obj, allowed, error) ||
        !carrel_conf_get_int(obj, "timeout_s", 0, 600, &timeout_s, error))
        return NULL;
    req->timeout_s = (guint)timeout_s;
    return g_steal_pointer(&req);
}
