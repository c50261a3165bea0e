/*
 * api: who the caller is. Login trades a token for the web console's cookie (under the limit on
 * failed credentials), logout ends it; whoami, the role matrix, and the named tokens an admin
 * makes, lists, revokes and rotates.
 */
#include "api/api-priv.h"

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

CarrelApiReply *
carrel_api_post_login(CarrelApiRequest *req, GError **error)
{
    const CarrelLoginRequest *body = req->typed;
    g_autoptr(CarrelPrincipal) who = NULL;
    g_autofree char *cookie = NULL;
    CarrelApiReply *reply;

    if ((reply = carrel_api_login_limit_reply(req->api, req->source)))
        return reply;
    who = carrel_manager_authenticate(req->mgr, body->token, error);
    if (!who) {
        carrel_api_count_failed_login(req->api, req->source);
        return NULL;
    }
    cookie = carrel_api_cookie_login(req->api, who);
    reply = carrel_api_reply_ok(principal_json(who));
    carrel_api_reply_add_header(reply, "Set-Cookie", cookie);
    return reply;
}

CarrelApiReply *
carrel_api_post_logout(CarrelApiRequest *req, GError **error)
{
    g_autofree char *cookie = carrel_api_cookie_logout(req->api, req->cookie);
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
carrel_api_get_roles(CarrelApiRequest *req, GError **error)
{
    return carrel_api_reply_ok(carrel_manager_role_matrix(req->mgr, req->who, error));
}

CarrelApiReply *
carrel_api_post_tokens(CarrelApiRequest *req, GError **error)
{
    const CarrelTokenRequest *body = req->typed;
    g_autoptr(CarrelToken) made = NULL;
    g_autofree char *token = carrel_manager_token_create(req->mgr, req->who, body->role, body->name,
                                                         body->ttl_s, body->policies, &made, error);
    JsonNode *node;

    if (!token)
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
        carrel_manager_token_revoke(req->mgr, req->who, carrel_api_param(req, 0), error);

    return t ? carrel_api_reply_ok(carrel_token_to_json(t, carrel_util_now())) : NULL;
}

CarrelApiReply *
carrel_api_post_admin_rotate(CarrelApiRequest *req, GError **error)
{
    g_autofree char *token = carrel_manager_token_rotate_admin(req->mgr, req->who, error);
    JsonNode *node;

    if (!token)
        return NULL;
    node = carrel_conf_new_object_node();
    json_object_set_string_member(json_node_get_object(node), "name", "admin");
    json_object_set_string_member(json_node_get_object(node), "token", token);
    return carrel_api_reply_ok(node);
}
