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
principal_json(const CarrelPrincipal *who)
{
    g_autoptr(JsonBuilder) b = json_builder_new();

    json_builder_begin_object(b);
    json_builder_set_member_name(b, "id");
    json_builder_add_string_value(b, who->token_id);
    json_builder_set_member_name(b, "name");
    json_builder_add_string_value(b, who->label);
    json_builder_set_member_name(b, "role");
    json_builder_add_string_value(b, carrel_role_to_string(who->role));
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

CarrelApiReply *
carrel_api_post_login(CarrelApiRequest *req, GError **error)
{
    static const char *const allowed[] = {"token", NULL};
    const char *token = NULL;
    g_autoptr(CarrelPrincipal) who = NULL;
    g_autofree char *cookie = NULL;
    CarrelApiReply *reply;

    if (!body_strings(req, allowed, "token", TRUE, &token, error))
        return NULL;
    if ((reply = carrel_api_login_limit_reply(req->api, req->source)))
        return reply;
    who = carrel_manager_authenticate(req->mgr, token, error);
    if (!who) {
        carrel_api_count_failed_login(req->api, req->source);
        return NULL;
    }
    cookie = carrel_api_web_login(req->api, who);
    reply = carrel_api_reply_ok(principal_json(who));
    carrel_api_reply_add_header(reply, "Set-Cookie", cookie);
    return reply;
}

CarrelApiReply *
carrel_api_post_logout(CarrelApiRequest *req, GError **error)
{
    g_autofree char *cookie = carrel_api_web_logout(req->api, req->cookie);
    CarrelApiReply *reply = carrel_api_reply_new_empty(SOUP_STATUS_NO_CONTENT);

    carrel_api_reply_add_header(reply, "Set-Cookie", cookie);
    return reply;
}

CarrelApiReply *
carrel_api_get_whoami(CarrelApiRequest *req, GError **error)
{
    return carrel_api_reply_ok(principal_json(req->who));
}

CarrelApiReply *
carrel_api_get_control(CarrelApiRequest *req, GError **error)
{
    return carrel_api_reply_ok(carrel_manager_lease_get(req->mgr, req->who, param(req, 0), error));
}

CarrelApiReply *
carrel_api_post_control(CarrelApiRequest *req, GError **error)
{
    static const char *const allowed[] = {"action", NULL};
    const char *action = NULL;

    if (!body_strings(req, allowed, "action", TRUE, &action, error))
        return NULL;
    if (g_str_equal(action, "take"))
        return carrel_api_reply_ok(
            carrel_manager_lease_take(req->mgr, req->who, param(req, 0), error));
    if (g_str_equal(action, "release"))
        return carrel_api_reply_ok(
            carrel_manager_lease_release(req->mgr, req->who, param(req, 0), error));
    g_set_error(error, CARREL_ERROR, CARREL_ERROR_INVALID_ARG,
                "'action' must be \"take\" or \"release\"");
    return NULL;
}

CarrelApiReply *
carrel_api_get_approvals(CarrelApiRequest *req, GError **error)
{
    const char *state = carrel_api_query(req, "state");
    g_autoptr(GPtrArray) list = NULL;

    if (state && !g_str_equal(state, "pending") && !g_str_equal(state, "all")) {
        g_set_error(error, CARREL_ERROR, CARREL_ERROR_INVALID_ARG,
                    "'state' must be \"pending\" or \"all\"");
        return NULL;
    }
    list = carrel_manager_approval_list(req->mgr, req->who, !state || g_str_equal(state, "pending"),
                                        error);
    return list ? carrel_api_reply_ok(
                      carrel_api_list_of("approvals", list, carrel_api_approval_item, NULL))
                : NULL;
}

static CarrelApiReply *
decide(CarrelApiRequest *req, gboolean approve, GError **error)
{
    static const char *const allowed[] = {"reason", NULL};
    const char *reason = NULL;
    g_autoptr(CarrelApproval) a = NULL;

    if (!body_strings(req, allowed, "reason", FALSE, &reason, error))
        return NULL;
    a = carrel_manager_approval_decide(req->mgr, req->who, param(req, 0), approve, reason, error);
    return a ? carrel_api_reply_ok(carrel_approval_to_json(a)) : NULL;
}

CarrelApiReply *
carrel_api_post_approval_approve(CarrelApiRequest *req, GError **error)
{
    return decide(req, TRUE, error);
}

CarrelApiReply *
carrel_api_post_approval_deny(CarrelApiRequest *req, GError **error)
{
    return decide(req, FALSE, error);
}

CarrelApiReply *
carrel_api_post_test_approval(CarrelApiRequest *req, GError **error)
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
    a = carrel_manager_approval_request(req->mgr, req->who, session, action, detail, error);
    if (!a)
        return NULL;
    return carrel_api_reply_new_json(SOUP_STATUS_CREATED, carrel_approval_to_json(a));
}

CarrelApiReply *
carrel_api_post_tokens(CarrelApiRequest *req, GError **error)
{
    static const char *const allowed[] = {"role", "name", "expires", "policies", NULL};
    g_auto(GStrv) policies = NULL;
    const char *role = NULL;
    const char *name = NULL;
    const char *expires = NULL;
    gint64 ttl_s = 0;
    g_autofree char *token = NULL;
    g_autoptr(CarrelToken) made = NULL;
    JsonNode *node;

    if (!body_strings(req, allowed, "role", TRUE, &role, error) ||
        !body_strings(req, allowed, "name", TRUE, &name, error) ||
        !body_strings(req, allowed, "expires", FALSE, &expires, error) ||
        (expires && !carrel_token_parse_ttl(expires, &ttl_s, error)) ||
        !carrel_token_policies_from_json(req->body, &policies, error) ||
        !(token = carrel_manager_token_create(req->mgr, req->who, role, name, ttl_s, policies,
                                              &made, error)))
        return NULL;
    node = carrel_token_to_json(made, carrel_util_now());
    /* The only time the token is shown: it is kept as a hash. */
    json_object_set_string_member(json_node_get_object(node), "token", token);
    return carrel_api_reply_new_json(SOUP_STATUS_CREATED, node);
}

static JsonNode *
token_item(gpointer token, gpointer unused)
{
    return carrel_token_to_json(token, carrel_util_now());
}

CarrelApiReply *
carrel_api_get_tokens(CarrelApiRequest *req, GError **error)
{
    g_autoptr(GPtrArray) list = carrel_manager_token_list(req->mgr, req->who, error);

    return list ? carrel_api_reply_ok(carrel_api_list_of("tokens", list, token_item, NULL)) : NULL;
}

CarrelApiReply *
carrel_api_delete_token(CarrelApiRequest *req, GError **error)
{
    g_autoptr(CarrelToken) t =
        carrel_manager_token_revoke(req->mgr, req->who, param(req, 0), error);

    return t ? carrel_api_reply_ok(carrel_token_to_json(t, carrel_util_now())) : NULL;
}

CarrelApiReply *
carrel_api_post_admin_rotate(CarrelApiRequest *req, GError **error)
{
    g_autofree char *token = carrel_manager_token_rotate_admin(req->mgr, req->who, error);
    JsonNode *node;

    if (!token)
        return NULL;
    node = json_node_init_object(json_node_alloc(), json_object_new());
    json_object_set_string_member(json_node_get_object(node), "name", "admin");
    json_object_set_string_member(json_node_get_object(node), "token", token);
    return carrel_api_reply_ok(node);
}

/* An integer query parameter in [min, max], absent = *ret_value unchanged. */
static gboolean
query_int(CarrelApiRequest *req, const char *key, gint64 min, gint64 max, gint64 *ret_value,
          GError **error)
{
    const char *text = carrel_api_query(req, key);
    gint64 value;

    if (!text)
        return TRUE;
    if (!g_ascii_string_to_signed(text, 10, min, max, &value, NULL)) {
        g_set_error(error, CARREL_ERROR, CARREL_ERROR_INVALID_ARG,
                    "'%s' must be an integer between %" G_GINT64_FORMAT " and %" G_GINT64_FORMAT,
                    key, min, max);
        return FALSE;
    }
    *ret_value = value;
    return TRUE;
}

/* since: RFC 3339 ("2026-12-01T10:00:00Z") or Unix seconds. */
static gboolean
query_since(CarrelApiRequest *req, gint64 *ret_us, GError **error)
{
    const char *text = carrel_api_query(req, "since");
    g_autoptr(GDateTime) when = NULL;
    gint64 seconds;

    if (!text)
        return TRUE;
    if (g_ascii_string_to_signed(text, 10, 0, G_MAXINT64 / G_USEC_PER_SEC, &seconds, NULL)) {
        *ret_us = seconds * G_USEC_PER_SEC;
        return TRUE;
    }
    when = g_date_time_new_from_iso8601(text, NULL);
    if (!when) {
        g_set_error(error, CARREL_ERROR, CARREL_ERROR_INVALID_ARG,
                    "'since' must be a time such as 2026-12-01T10:00:00Z, or Unix seconds");
        return FALSE;
    }
    *ret_us = g_date_time_to_unix(when) * G_USEC_PER_SEC + g_date_time_get_microsecond(when);
    return TRUE;
}

CarrelApiReply *
carrel_api_get_audit(CarrelApiRequest *req, GError **error)
{
    CarrelAuditQuery q = {
        .session_id = carrel_api_query(req, "session"),
        .principal = carrel_api_query(req, "principal"),
        .operation = carrel_api_query(req, "operation"),
        .result = carrel_api_query(req, "result"),
    };
    gint64 limit = 0;

    if (!query_int(req, "after", 0, G_MAXINT64, &q.after_seq, error) ||
        !query_int(req, "limit", 1, 10000, &limit, error) || !query_since(req, &q.since_us, error))
        return NULL;
    q.limit = (guint)limit;
    return carrel_api_reply_ok(carrel_manager_audit_list(req->mgr, req->who, &q, error));
}

CarrelApiReply *
carrel_api_get_audit_verify(CarrelApiRequest *req, GError **error)
{
    return carrel_api_reply_ok(carrel_manager_audit_verify(req->mgr, req->who, error));
}

CarrelApiReply *
carrel_api_get_roles(CarrelApiRequest *req, GError **error)
{
    return carrel_api_reply_ok(carrel_manager_role_matrix(req->mgr, req->who, error));
}

CarrelApiReply *
carrel_api_get_session_shot(CarrelApiRequest *req, GError **error)
{
    const char *type = NULL;
    GBytes *bytes = carrel_manager_session_kept_screenshot(req->mgr, req->who, param(req, 0),
                                                           param(req, 1), &type, error);

    return carrel_api_reply_new_bytes(SOUP_STATUS_OK, bytes, type);
}
