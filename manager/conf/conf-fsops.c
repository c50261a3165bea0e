/*
 * carrel-guest fs replies are untrusted: the guest may be hostile and print anything. Every
 * member is checked for its type and range; names are bounded and must be single path segments;
 * names that an honest guest may still have (control characters, not UTF-8) reach clients
 * escaped and marked, never raw, so a terminal or a path join downstream cannot be fooled.
 */
#include <string.h>

#include "conf/conf.h"

static const char *const fs_types[] = {"file", "dir", "symlink", "other", NULL};

gboolean
carrel_fs_check_path(const char *path, GError **error)
{
    gsize len;

    if (!path || !*path) {
        g_set_error(error, CARREL_ERROR, CARREL_ERROR_INVALID_ARG,
                    "a guest path is required ('path', or 'from' and 'to')");
        return FALSE;
    }
    if (path[0] != '/') {
        g_set_error(error, CARREL_ERROR, CARREL_ERROR_INVALID_ARG,
                    "guest path '%s' is not absolute",
                    carrel_util_is_clean_text(path) ? path : "?");
        return FALSE;
    }
    if (!carrel_util_check_guest_path(path, error))
        return FALSE;
    len = strlen(path);
    if (strstr(path, "//") || (len > 1 && path[len - 1] == '/')) {
        g_set_error(error, CARREL_ERROR, CARREL_ERROR_INVALID_ARG,
                    "guest path '%s' is not normalised (no '//', no trailing '/')", path);
        return FALSE;
    }
    return TRUE;
}

char *
carrel_fs_escape_name(const guint8 *bytes, gsize len)
{
    GString *out = g_string_sized_new(len + 8);

    for (gsize i = 0; i < len; i++) {
        if (bytes[i] == '\\')
            g_string_append(out, "\\\\");
        else if (bytes[i] >= 0x20 && bytes[i] < 0x7f)
            g_string_append_c(out, (char)bytes[i]);
        else
            g_string_append_printf(out, "\\x%02x", bytes[i]);
    }
    return g_string_free(out, FALSE);
}

static gboolean
refuse(gint index, GError **error, const char *reason)
{
    if (index >= 0)
        g_set_error(error, CARREL_ERROR, CARREL_ERROR_HYPERVISOR,
                    "guest file listing is malformed: entry %d: %s", index, reason);
    else
        g_set_error(error, CARREL_ERROR, CARREL_ERROR_HYPERVISOR,
                    "guest file reply is malformed: %s", reason);
    return FALSE;
}

static gboolean
get_string(JsonObject *o, const char *key, const char **ret)
{
    JsonNode *n = json_object_get_member(o, key);

    *ret = NULL;
    if (!n || JSON_NODE_HOLDS_NULL(n))
        return TRUE;
    if (!JSON_NODE_HOLDS_VALUE(n) || json_node_get_value_type(n) != G_TYPE_STRING)
        return FALSE;
    *ret = json_node_get_string(n);
    return TRUE;
}

/* The raw bytes of key or key_b64 (exactly one present when required). */
static GBytes *
get_bytes(JsonObject *o, const char *key, gsize max, gboolean required, gint index, GError **error)
{
    g_autofree char *key_b64 = g_strconcat(key, "_b64", NULL);
    g_autofree char *why = NULL;
    const char *text = NULL, *b64 = NULL;
    guchar *raw;
    gsize len = 0;

    if (!get_string(o, key, &text) || !get_string(o, key_b64, &b64)) {
        why = g_strdup_printf("'%s' is not a string", key);
        refuse(index, error, why);
        return NULL;
    }
    if ((text && b64) || (!text && !b64)) {
        if (!text && !b64 && !required)
            return g_bytes_new(NULL, 0);
        why = g_strdup_printf("needs exactly one of '%s' and '%s'", key, key_b64);
        refuse(index, error, why);
        return NULL;
    }
    if (text) {
        len = strlen(text);
        if (len > max) {
            why = g_strdup_printf("'%s' is longer than %" G_GSIZE_FORMAT " bytes", key, max);
            refuse(index, error, why);
            return NULL;
        }
        return g_bytes_new(text, len);
    }
    /* Base64 of at most max bytes is at most this long; checked before decoding. */
    if (strlen(b64) > (max + 2) / 3 * 4 || !carrel_util_is_base64(b64, strlen(b64))) {
        why = g_strdup_printf("'%s' is not base64 of at most %" G_GSIZE_FORMAT " bytes", key_b64,
                              max);
        refuse(index, error, why);
        return NULL;
    }
    raw = g_base64_decode(b64, &len);
    if (len > max) {
        g_free(raw);
        why = g_strdup_printf("'%s' is longer than %" G_GSIZE_FORMAT " bytes", key, max);
        refuse(index, error, why);
        return NULL;
    }
    return g_bytes_new_take(raw, len);
}

/* Why bytes cannot go to a client as they are, or NULL. */
static const char *
text_problem(const guint8 *data, gsize len)
{
    if (!g_utf8_validate((const char *)data, (gssize)len, NULL))
        return "not valid UTF-8";
    for (gsize i = 0; i < len; i++) {
        if (data[i] < 0x20 || data[i] == 0x7f)
            return "contains control characters";
    }
    return NULL;
}

/* key (clean) or key: null, key_escaped, key_error. */
static void
add_text(JsonBuilder *b, const char *key, GBytes *bytes)
{
    gsize len = 0;
    const guint8 *data = g_bytes_get_data(bytes, &len);
    const char *problem = text_problem(data, len);
    g_autofree char *escaped_key = g_strconcat(key, "_escaped", NULL);
    g_autofree char *error_key = g_strconcat(key, "_error", NULL);
    g_autofree char *escaped = NULL;
    g_autofree char *why = NULL;

    json_builder_set_member_name(b, key);
    if (!problem) {
        g_autofree char *text = g_strndup((const char *)data, len);
        json_builder_add_string_value(b, text);
        return;
    }
    json_builder_add_null_value(b);
    escaped = carrel_fs_escape_name(data, len);
    json_builder_set_member_name(b, escaped_key);
    json_builder_add_string_value(b, escaped);
    why = g_strdup_printf("%s %s; shown escaped", key, problem);
    json_builder_set_member_name(b, error_key);
    json_builder_add_string_value(b, why);
}

static gboolean
check_name(GBytes *name, gint index, GError **error)
{
    gsize len = 0;
    const char *data = g_bytes_get_data(name, &len);

    if (len == 0)
        return refuse(index, error, "the name is empty");
    if (memchr(data, '/', len) || memchr(data, '\0', len))
        return refuse(index, error, "the name contains '/' or NUL");
    if ((len == 1 && data[0] == '.') || (len == 2 && data[0] == '.' && data[1] == '.'))
        return refuse(index, error, "the name is '.' or '..'");
    return TRUE;
}

static gboolean
get_int(JsonObject *o, const char *key, gint64 min, gint64 max, gint64 *ret, gint index,
        GError **error)
{
    JsonNode *n = json_object_get_member(o, key);
    g_autofree char *why = NULL;

    if (!n || !JSON_NODE_HOLDS_VALUE(n) || json_node_get_value_type(n) != G_TYPE_INT64 ||
        json_node_get_int(n) < min || json_node_get_int(n) > max) {
        why = g_strdup_printf(
            "'%s' is not an integer from %" G_GINT64_FORMAT " to %" G_GINT64_FORMAT, key, min, max);
        return refuse(index, error, why);
    }
    *ret = json_node_get_int(n);
    return TRUE;
}

JsonNode *
carrel_fs_entry_from_guest(JsonNode *node, gint index, GError **error)
{
    g_autoptr(JsonBuilder) b = json_builder_new();
    g_autoptr(GBytes) name = NULL;
    g_autoptr(GBytes) target = NULL;
    const char *type = NULL;
    gint64 size = 0, mode = 0, mtime = 0;
    g_autofree char *mode_text = NULL;
    JsonObject *o;

    if (!node || !JSON_NODE_HOLDS_OBJECT(node)) {
        refuse(index, error, "not an object");
        return NULL;
    }
    o = json_node_get_object(node);
    if (!(name = get_bytes(o, "name", CARREL_FS_MAX_NAME_BYTES, TRUE, index, error)) ||
        !check_name(name, index, error))
        return NULL;
    if (!get_string(o, "type", &type) || !type || !g_strv_contains(fs_types, type)) {
        refuse(index, error, "'type' is not file, dir, symlink or other");
        return NULL;
    }
    if (!get_int(o, "size", 0, G_MAXINT64, &size, index, error) ||
        !get_int(o, "mode", 0, 07777, &mode, index, error) ||
        !get_int(o, "mtime", G_MININT64, G_MAXINT64, &mtime, index, error) ||
        !(target = get_bytes(o, "target", CARREL_FS_MAX_TARGET_BYTES, FALSE, index, error)))
        return NULL;
    if (g_bytes_get_size(target) > 0 && !g_str_equal(type, "symlink")) {
        refuse(index, error, "only a symlink has a target");
        return NULL;
    }
    mode_text = g_strdup_printf("%04o", (guint)mode);
    json_builder_begin_object(b);
    add_text(b, "name", name);
    json_builder_set_member_name(b, "type");
    json_builder_add_string_value(b, type);
    json_builder_set_member_name(b, "size");
    json_builder_add_int_value(b, size);
    json_builder_set_member_name(b, "mode");
    json_builder_add_string_value(b, mode_text);
    json_builder_set_member_name(b, "mtime");
    json_builder_add_int_value(b, mtime);
    if (g_str_equal(type, "symlink"))
        add_text(b, "target", target);
    json_builder_end_object(b);
    return json_builder_get_root(b);
}

JsonNode *
carrel_fs_listing_from_guest(JsonNode *node, const char *path, GError **error)
{
    g_autoptr(JsonBuilder) b = json_builder_new();
    JsonNode *entries, *truncated;
    JsonArray *list;
    guint n;

    if (!node || !JSON_NODE_HOLDS_OBJECT(node)) {
        refuse(-1, error, "not an object");
        return NULL;
    }
    entries = json_object_get_member(json_node_get_object(node), "entries");
    truncated = json_object_get_member(json_node_get_object(node), "truncated");
    if (!entries || !JSON_NODE_HOLDS_ARRAY(entries)) {
        refuse(-1, error, "'entries' is not an array");
        return NULL;
    }
    if (!truncated || !JSON_NODE_HOLDS_VALUE(truncated) ||
        json_node_get_value_type(truncated) != G_TYPE_BOOLEAN) {
        refuse(-1, error, "'truncated' is not a boolean");
        return NULL;
    }
    list = json_node_get_array(entries);
    n = json_array_get_length(list);
    if (n > CARREL_FS_MAX_ENTRIES) {
        g_set_error(error, CARREL_ERROR, CARREL_ERROR_HYPERVISOR,
                    "guest file listing is malformed: more than %d entries", CARREL_FS_MAX_ENTRIES);
        return NULL;
    }
    json_builder_begin_object(b);
    json_builder_set_member_name(b, "path");
    json_builder_add_string_value(b, path);
    json_builder_set_member_name(b, "entries");
    json_builder_begin_array(b);
    for (guint i = 0; i < n; i++) {
        JsonNode *entry =
            carrel_fs_entry_from_guest(json_array_get_element(list, i), (gint)i, error);
        if (!entry)
            return NULL;
        json_builder_add_value(b, entry);
    }
    json_builder_end_array(b);
    json_builder_set_member_name(b, "truncated");
    json_builder_add_boolean_value(b, json_node_get_boolean(truncated));
    json_builder_end_object(b);
    return json_builder_get_root(b);
}
