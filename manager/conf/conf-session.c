#include <stdlib.h>
#include <string.h>

#include "conf/conf.h"
#include "conf/conf-priv.h"

CarrelSession *
carrel_session_new(void)
{
    return g_new0(CarrelSession, 1);
}

void
carrel_session_free(CarrelSession *session)
{
    if (!session)
        return;
    g_free(session->id);
    g_free(session->name);
    g_free(session->template_name);
    g_free(session->state_reason);
    g_free(session->dir);
    g_free(session->overlay_path);
    g_free(session->mac);
    g_free(session);
}

char *
carrel_session_domain_name(const char *session_id)
{
    return g_strconcat("carrel-", session_id, NULL);
}

JsonNode *
carrel_session_to_json(const CarrelSession *session)
{
    g_autoptr(JsonBuilder) b = json_builder_new();
    g_autofree char *created = carrel_util_format_time(session->created_at);
    g_autofree char *updated = carrel_util_format_time(session->updated_at);
    g_autofree char *domain = carrel_session_domain_name(session->id);

    json_builder_begin_object(b);
    json_builder_set_member_name(b, "id");
    json_builder_add_string_value(b, session->id);
    json_builder_set_member_name(b, "name");
    json_builder_add_string_value(b, session->name);
    json_builder_set_member_name(b, "template");
    json_builder_add_string_value(b, session->template_name);
    json_builder_set_member_name(b, "template_version");
    json_builder_add_int_value(b, session->template_version);
    json_builder_set_member_name(b, "state");
    json_builder_add_string_value(b, carrel_session_state_to_string(session->state));
    carrel_conf_add_optional_string(b, "state_reason", session->state_reason);
    json_builder_set_member_name(b, "vcpus");
    json_builder_add_int_value(b, session->vcpus);
    json_builder_set_member_name(b, "memory_mib");
    json_builder_add_int_value(b, session->memory_mib);
    json_builder_set_member_name(b, "origin");
    json_builder_add_string_value(b, session->from_warm ? "warm" : "cold");
    carrel_conf_add_optional_string(b, "mac", session->mac);
    json_builder_set_member_name(b, "domain");
    json_builder_add_string_value(b, domain);
    json_builder_set_member_name(b, "created_at");
    json_builder_add_string_value(b, created);
    json_builder_set_member_name(b, "updated_at");
    json_builder_add_string_value(b, updated);
    json_builder_end_object(b);
    return json_builder_get_root(b);
}

void
carrel_session_request_free(CarrelSessionRequest *req)
{
    if (!req)
        return;
    g_free(req->template_name);
    g_free(req->name);
    g_free(req);
}

static gboolean
get_uint_member(JsonObject *obj, const char *member, guint min, guint max, guint *ret_value,
                GError **error)
{
    JsonNode *node = json_object_get_member(obj, member);
    gint64 value;

    if (!node || JSON_NODE_HOLDS_NULL(node))
        return TRUE;
    if (!JSON_NODE_HOLDS_VALUE(node) || json_node_get_value_type(node) != G_TYPE_INT64) {
        g_set_error(error, CARREL_ERROR, CARREL_ERROR_INVALID_ARG, "'%s' must be an integer",
                    member);
        return FALSE;
    }
    value = json_node_get_int(node);
    if (value < min || value > max) {
        g_set_error(error, CARREL_ERROR, CARREL_ERROR_INVALID_ARG, "'%s' must be between %u and %u",
                    member, min, max);
        return FALSE;
    }
    *ret_value = (guint)value;
    return TRUE;
}

static gboolean
get_bool_member(JsonObject *obj, const char *member, gboolean *ret_value, GError **error)
{
    JsonNode *node = json_object_get_member(obj, member);

    if (!node || JSON_NODE_HOLDS_NULL(node))
        return TRUE;
    if (!JSON_NODE_HOLDS_VALUE(node) || json_node_get_value_type(node) != G_TYPE_BOOLEAN) {
        g_set_error(error, CARREL_ERROR, CARREL_ERROR_INVALID_ARG, "'%s' must be true or false",
                    member);
        return FALSE;
    }
    *ret_value = json_node_get_boolean(node);
    return TRUE;
}

static gboolean
split_template_ref(CarrelSessionRequest *req, GError **error)
{
    char *at = strchr(req->template_name, '@');
    char *end = NULL;
    guint64 version;

    if (at) {
        *at = '\0';
        if (!g_ascii_isdigit(at[1]) || (version = g_ascii_strtoull(at + 1, &end, 10)) == 0 ||
            *end != '\0' || version > G_MAXUINT) {
            g_set_error(error, CARREL_ERROR, CARREL_ERROR_INVALID_ARG,
                        "template version must be a positive number, as in 'tiny@2'");
            return FALSE;
        }
        req->template_version = (guint)version;
    }
    if (!carrel_util_is_valid_name(req->template_name)) {
        g_set_error(error, CARREL_ERROR, CARREL_ERROR_INVALID_ARG, "invalid template name");
        return FALSE;
    }
    return TRUE;
}

CarrelSessionRequest *
carrel_session_request_from_json(JsonNode *node, GError **error)
{
    static const char *const allowed[] = {"template", "name", "vcpus", "memory_mib", "cold", NULL};
    g_autoptr(CarrelSessionRequest) req = g_new0(CarrelSessionRequest, 1);
    JsonObject *obj;

    if (!node || !JSON_NODE_HOLDS_OBJECT(node)) {
        g_set_error(error, CARREL_ERROR, CARREL_ERROR_INVALID_ARG, "expected a JSON object");
        return NULL;
    }
    obj = json_node_get_object(node);
    if (!carrel_conf_check_members(obj, allowed, error) ||
        !carrel_conf_get_string(obj, "template", TRUE, &req->template_name, error) ||
        !carrel_conf_get_string(obj, "name", FALSE, &req->name, error) ||
        !get_uint_member(obj, "vcpus", 1, CARREL_LIMIT_VCPUS, &req->vcpus, error) ||
        !get_uint_member(obj, "memory_mib", CARREL_LIMIT_MIN_MEMORY_MIB, CARREL_LIMIT_MEMORY_MIB,
                         &req->memory_mib, error) ||
        !get_bool_member(obj, "cold", &req->cold, error))
        return NULL;
    if (!split_template_ref(req, error))
        return NULL;
    /* Names share the id namespace for lookups, so an id-shaped name would be ambiguous. */
    if (req->name && (!carrel_util_is_valid_name(req->name) || g_str_has_prefix(req->name, "s-"))) {
        g_set_error(error, CARREL_ERROR, CARREL_ERROR_INVALID_ARG,
                    "invalid session name: use 1-63 of [a-z0-9._-], not starting with 's-'");
        return NULL;
    }
    return g_steal_pointer(&req);
}
