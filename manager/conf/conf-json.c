/* JSON member readers shared by the parsers of this module. */
#include "conf/conf-priv.h"

gboolean
carrel_conf_get_uint(JsonObject *obj, const char *member, guint min, guint max, guint *ret_value,
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

gboolean
carrel_conf_get_bool(JsonObject *obj, const char *member, gboolean *ret_value, GError **error)
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

gboolean
carrel_conf_get_string_array(JsonObject *obj, const char *member, guint max, GStrv *ret_value,
                             GError **error)
{
    JsonNode *node = json_object_get_member(obj, member);
    g_autoptr(GStrvBuilder) builder = g_strv_builder_new();
    JsonArray *array;

    if (!node || JSON_NODE_HOLDS_NULL(node))
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
        if (!JSON_NODE_HOLDS_VALUE(item) || json_node_get_value_type(item) != G_TYPE_STRING) {
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
carrel_conf_add_optional_time(JsonBuilder *b, const char *member, gint64 unix_seconds)
{
    g_autofree char *text = unix_seconds ? carrel_util_format_time(unix_seconds) : NULL;

    carrel_conf_add_optional_string(b, member, text);
}
