/* conf: helpers shared by the module's own files; not for other modules. */
#pragma once

#include "conf/conf.h"

/* Adds member with value, or null when value is NULL. */
void carrel_conf_add_optional_string(JsonBuilder *b, const char *member, const char *value);
/* Adds member as an RFC 3339 time, or null when unix_seconds is 0 (never). */
void carrel_conf_add_optional_time(JsonBuilder *b, const char *member, gint64 unix_seconds);

/*
 * The member readers (conf-json.c). Absent and null members are the same; errors are
 * INVALID_ARG naming the member (LIMIT for a list that is too long).
 */

/* A member's node; NULL when obj is NULL or the member is absent or null. */
JsonNode *carrel_conf_get_node(JsonObject *obj, const char *member);
/* TRUE when node is a value of type (G_TYPE_STRING, G_TYPE_INT64...); FALSE for NULL. */
gboolean carrel_conf_node_holds(JsonNode *node, GType type);
/* A string member, borrowed; NULL when absent or of another type (records carrel wrote). */
const char *carrel_conf_peek_string(JsonObject *obj, const char *member);

/* Reads an optional or required string member; NULL stays NULL. */
gboolean carrel_conf_get_string(JsonObject *obj, const char *member, gboolean required,
                                char **ret_value, GError **error);
/* Like carrel_conf_get_string, and the text is valid UTF-8 of at most max_bytes bytes. */
gboolean carrel_conf_get_text(JsonObject *obj, const char *member, gboolean required,
                              gsize max_bytes, char **ret_value, GError **error);

/* Optional members; absent or null leaves *ret_value as it is. */
gboolean carrel_conf_get_int(JsonObject *obj, const char *member, gint64 min, gint64 max,
                             gint64 *ret_value, GError **error);
gboolean carrel_conf_get_uint(JsonObject *obj, const char *member, guint min, guint max,
                              guint *ret_value, GError **error);
gboolean carrel_conf_get_bool(JsonObject *obj, const char *member, gboolean *ret_value,
                              GError **error);
/* An array of at most max strings (CARREL_ERROR_LIMIT beyond). */
gboolean carrel_conf_get_string_array(JsonObject *obj, const char *member, guint max,
                                      GStrv *ret_value, GError **error);

/*
 * Entry index of the keymap's table of key names, for tests that check every entry: FALSE past
 * the end.
 */
gboolean carrel_keymap_table_entry(guint index, const char **ret_name, const char **ret_qcode);
