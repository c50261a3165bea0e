/*
 * The type_secret computer action: {"action": "type_secret", "name": N} types the secret N of
 * the session's policy. The action parser sees an ordinary type action holding the value; the
 * timeline, the audit digest and the reply keep the name alone (they are made from the body as
 * the caller sent it). Its value never appears in an error either.
 */
#include <string.h>

#include "core/core-priv.h"

static gboolean
is_type_secret(JsonNode *node)
{
    JsonObject *obj = node && JSON_NODE_HOLDS_OBJECT(node) ? json_node_get_object(node) : NULL;

    return obj && g_strcmp0(json_object_get_string_member_with_default(obj, "action", NULL),
                            "type_secret") == 0;
}

/* The type action standing in for one type_secret, and the secret's name. */
static JsonNode *
expand_one(CarrelManager *mgr, const CarrelPolicy *policy, JsonNode *node, char **ret_name,
           GError **error)
{
    JsonObject *obj = json_node_get_object(node);
    const char *name = json_object_get_string_member_with_default(obj, "name", NULL);
    const CarrelPolicySecret *secret = name ? carrel_policy_secret_named(policy, name) : NULL;
    const char *value = secret ? carrel_manager_secret_value(mgr, policy, secret) : NULL;
    JsonNode *typed;

    if (json_object_get_size(obj) != 2 || !name) {
        g_set_error(error, CARREL_ERROR, CARREL_ERROR_INVALID_ARG,
                    "type_secret takes 'name' (a secret of the session's policy) and nothing else");
        return NULL;
    }
    if (!value) {
        g_set_error(error, CARREL_ERROR, CARREL_ERROR_NOT_FOUND,
                    "the session's policy '%s' has no secret '%s'", carrel_policy_get_name(policy),
                    carrel_util_is_clean_text(name) ? name : "?");
        return NULL;
    }
    /* The parser's own message could quote the character: this one says nothing of it. The
     * action carries no method: a secret is typed (keys or guest keysyms), never left on the
     * clipboard for any program to read. */
    if (strlen(value) > CARREL_ACTION_MAX_TEXT || !carrel_action_check_typed_text(value, NULL)) {
        g_set_error(error, CARREL_ERROR, CARREL_ERROR_INVALID_ARG,
                    "secret '%s' holds characters that cannot be typed", name);
        return NULL;
    }
    typed = carrel_conf_new_object_node();
    json_object_set_string_member(json_node_get_object(typed), "action", "type");
    json_object_set_string_member(json_node_get_object(typed), "text", value);
    *ret_name = g_strdup(name);
    return typed;
}

JsonNode *
carrel_manager_expand_type_secret(CarrelManager *mgr, const CarrelSession *session, JsonNode *body,
                                  GPtrArray *names, GError **error)
{
    JsonObject *obj = body && JSON_NODE_HOLDS_OBJECT(body) ? json_node_get_object(body) : NULL;
    JsonArray *list = obj && json_object_has_member(obj, "actions") &&
                              JSON_NODE_HOLDS_ARRAY(json_object_get_member(obj, "actions"))
                          ? json_object_get_array_member(obj, "actions")
                          : NULL;
    const CarrelPolicy *policy;
    g_autoptr(JsonNode) copy = NULL;
    JsonArray *out;

    if (!list) {
        g_ptr_array_add(names, NULL);
        if (!is_type_secret(body))
            return body ? json_node_copy(body) : NULL;
        if (!(policy = carrel_manager_session_policy(mgr, session, error)))
            return NULL;
        {
            char *name = NULL;
            JsonNode *typed = expand_one(mgr, policy, body, &name, error);
            g_ptr_array_index(names, 0) = name;
            return typed;
        }
    }
    copy = json_node_copy(body);
    out = json_array_new();
    policy = carrel_manager_session_policy(mgr, session, NULL);
    for (guint i = 0; i < json_array_get_length(list); i++) {
        JsonNode *item = json_array_get_element(list, i);
        char *name = NULL;

        if (is_type_secret(item)) {
            JsonNode *typed = policy ? expand_one(mgr, policy, item, &name, error) : NULL;
            if (!typed) {
                if (!policy)
                    (void)carrel_manager_session_policy(mgr, session, error);
                json_array_unref(out);
                g_prefix_error(error, "actions[%u]: ", i);
                return NULL;
            }
            json_array_add_element(out, typed);
        } else {
            json_array_add_element(out, json_node_copy(item));
        }
        g_ptr_array_add(names, name);
    }
    json_object_set_array_member(json_node_get_object(copy), "actions", out);
    return g_steal_pointer(&copy);
}

void
carrel_manager_wipe_json(JsonNode *node)
{
    /* Best effort: json-glib keeps its own copies; at least the tree we built is cleared. */
    JsonObject *obj = node && JSON_NODE_HOLDS_OBJECT(node) ? json_node_get_object(node) : NULL;
    JsonArray *list = obj && json_object_has_member(obj, "actions") &&
                              JSON_NODE_HOLDS_ARRAY(json_object_get_member(obj, "actions"))
                          ? json_object_get_array_member(obj, "actions")
                          : NULL;

    for (guint i = 0; list && i < json_array_get_length(list); i++)
        carrel_manager_wipe_json(json_array_get_element(list, i));
    if (obj && json_object_has_member(obj, "text"))
        json_object_set_string_member(obj, "text", "");
}
