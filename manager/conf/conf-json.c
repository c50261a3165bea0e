/*
 * The JSON helpers of the module: parsing a document, the member readers every parser of conf
 * (and the API's bodies) shares, and the writers of optional members. A reader names the member
 * in its error, and treats a null member like an absent one (JSON encoders write null for unset
 * options).
 */
#include <string.h>

#include "conf/conf-priv.h"

JsonNode *
carrel_conf_new_object_node(void)
{
    JsonNode *node = json_node_alloc();

    /* json_node_init_object takes a reference of its own: json_object_new()'s must go. */
    json_node_take_object(json_node_init(node, JSON_NODE_OBJECT), json_object_new());
    return node;
}

JsonNode *
carrel_conf_parse_json(const char *data, gsize len, GError **error)
{
    g_autoptr(JsonParser) parser = json_parser_new_immutable();
    g_autoptr(GError) local = NULL;

    if (!carrel_util_json_structure_ok(data, len, CARREL_LIMIT_JSON_DEPTH)) {
        g_set_error(error, CARREL_ERROR, CARREL_ERROR_INVALID_ARG,
                    "malformed JSON: not one well-formed JSON value, nested deeper than %d "
                    "levels or with \\u0000",
                    CARREL_LIMIT_JSON_DEPTH);
        return NULL;
    }
    if (!json_parser_load_from_data(parser, data, (gssize)len, &local)) {
        g_set_error(error, CARREL_ERROR, CARREL_ERROR_INVALID_ARG, "malformed JSON: %s",
                    local->message);
        return NULL;
    }
    if (!json_parser_get_root(parser)) {
        g_set_error(error, CARREL_ERROR, CARREL_ERROR_INVALID_ARG, "empty JSON document");
        return NULL;
    }
    return json_node_copy(json_parser_get_root(parser));
}

gboolean
carrel_conf_check_members(JsonObject *obj, const char *const *allowed, GError **error)
{
    g_autoptr(GList) members = json_object_get_members(obj);

    for (GList *l = members; l; l = l->next) {
        if (!g_strv_contains(allowed, l->data)) {
            g_autofree char *shown = g_strescape(l->data, NULL);
            g_set_error(error, CARREL_ERROR, CARREL_ERROR_INVALID_ARG, "unknown member '%.64s'",
                        shown);
            return FALSE;
        }
    }
    return TRUE;
}

JsonNode *
carrel_conf_get_node(JsonObject *obj, const char *member)
{
    JsonNode *node = obj ? json_object_get_member(obj, member) : NULL;

    return (node && !JSON_NODE_HOLDS_NULL(node)) ? node : NULL;
}

gboolean
carrel_conf_node_holds(JsonNode *node, GType type)
{
    return node && JSON_NODE_HOLDS_VALUE(node) && json_node_get_value_type(node) == type;
}

const char *
carrel_conf_peek_string(JsonObject *obj, const char *member)
{
    JsonNode *node = carrel_conf_get_node(obj, member);

    return carrel_conf_node_holds(node, G_TYPE_STRING) ? json_node_get_string(node) : NULL;
}

gboolean
carrel_conf_get_string_ref(JsonObject *obj, const char *member, gboolean required,
                           const char **ret_value, GError **error)
{
    JsonNode *node = carrel_conf_get_node(obj, member);

    if (!node) {
        if (required) {
            g_set_error(error, CARREL_ERROR, CARREL_ERROR_INVALID_ARG, "'%s' is required", member);
            return FALSE;
        }
        *ret_value = NULL;
        return TRUE;
    }
    if (!carrel_conf_node_holds(node, G_TYPE_STRING)) {
        g_set_error(error, CARREL_ERROR, CARREL_ERROR_INVALID_ARG, "'%s' must be a string", member);
        return FALSE;
    }
    *ret_value = json_node_get_string(node);
    return TRUE;
}

gboolean
carrel_conf_get_string(JsonObject *obj, const char *member, gboolean required, char **ret_value,
                       GError **error)
{
    const char *value;

    if (!carrel_conf_get_string_ref(obj, member, required, &value, error))
        return FALSE;
    *ret_value = g_strdup(value);
    return TRUE;
}

gboolean
carrel_conf_get_text(JsonObject *obj, const char *member, gboolean required, gsize max_bytes,
                     char **ret_value, GError **error)
{
    const char *text;

    if (!carrel_conf_get_string_ref(obj, member, required, &text, error))
        return FALSE;
    if (text && strlen(text) > max_bytes) {
        g_set_error(error, CARREL_ERROR, CARREL_ERROR_INVALID_ARG,
                    "'%s' is longer than %" G_GSIZE_FORMAT " bytes", member, max_bytes);
        return FALSE;
    }
    if (text && !g_utf8_validate(text, -1, NULL)) {
        g_set_error(error, CARREL_ERROR, CARREL_ERROR_INVALID_ARG, "'%s' is not valid UTF-8",
                    member);
        return FALSE;
    }
    *ret_value = g_strdup(text);
    return TRUE;
}

gboolean
carrel_conf_get_int(JsonObject *obj, const char *member, gint64 min, gint64 max, gint64 *ret_value,
                    GError **error)
{
    JsonNode *node = carrel_conf_get_node(obj, member);

    if (!node)
        return TRUE;
    if (!carrel_conf_node_holds(node, G_TYPE_INT64) || json_node_get_int(node) < min ||
        json_node_get_int(node) > max) {
        g_set_error(error, CARREL_ERROR, CARREL_ERROR_INVALID_ARG,
                    "'%s' must be an integer between %" G_GINT64_FORMAT " and %" G_GINT64_FORMAT,
                    member, min, max);
        return FALSE;
    }
    *ret_value = json_node_get_int(node);
    return TRUE;
}

gboolean
carrel_conf_get_uint(JsonObject *obj, const char *member, guint min, guint max, guint *ret_value,
                     GError **error)
{
    JsonNode *node = carrel_conf_get_node(obj, member);
    gint64 value;

    if (!node)
        return TRUE;
    if (!carrel_conf_node_holds(node, G_TYPE_INT64)) {
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

gboolean
carrel_conf_get_bool(JsonObject *obj, const char *member, gboolean *ret_value, GError **error)
{
    JsonNode *node = carrel_conf_get_node(obj, member);

    if (!node)
        return TRUE;
    if (!carrel_conf_node_holds(node, G_TYPE_BOOLEAN)) {
        g_set_error(error, CARREL_ERROR, CARREL_ERROR_INVALID_ARG, "'%s' must be true or false",
                    member);
        return FALSE;
    }
    *ret_value = json_node_get_boolean(node);
    return TRUE;
}

gboolean
carrel_conf_get_string_array(JsonObject *obj, const char *member, guint max, GStrv *ret_value,
                             GError **error)
{
    JsonNode *node = carrel_conf_get_node(obj, member);
    g_autoptr(GStrvBuilder) builder = g_strv_builder_new();
    JsonArray *array;

    if (!node)
        return TRUE;
    if (!JSON_NODE_HOLDS_ARRAY(node)) {
        g_set_error(error, CARREL_ERROR, CARREL_ERROR_INVALID_ARG, "'%s' must be an array", member);
        return FALSE;
    }
    array = json_node_get_array(node);
    if (json_array_get_length(array) > max) {
        g_set_error(error, CARREL_ERROR, CARREL_ERROR_LIMIT, "'%s' has more than %u items", member,
                    max);
        return FALSE;
    }
    for (guint i = 0; i < json_array_get_length(array); i++) {
        JsonNode *item = json_array_get_element(array, i);
        if (!carrel_conf_node_holds(item, G_TYPE_STRING)) {
            g_set_error(error, CARREL_ERROR, CARREL_ERROR_INVALID_ARG,
                        "'%s' must be an array of strings", member);
            return FALSE;
        }
        g_strv_builder_add(builder, json_node_get_string(item));
    }
    *ret_value = g_strv_builder_end(builder);
    return TRUE;
}

void
carrel_conf_add_optional_string(JsonBuilder *b, const char *member, const char *value)
{
    json_builder_set_member_name(b, member);
    if (value)
        json_builder_add_string_value(b, value);
    else
        json_builder_add_null_value(b);
}

void
carrel_conf_add_optional_time(JsonBuilder *b, const char *member, gint64 unix_seconds)
{
    g_autofree char *text = unix_seconds ? carrel_util_format_time(unix_seconds) : NULL;

    carrel_conf_add_optional_string(b, member, text);
}
