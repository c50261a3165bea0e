/*
 * MCP messages (JSON-RPC 2.0), protocol versions, the Origin rule and tool results: what the
 * API's /mcp route and `carrel mcp` share, without I/O.
 */
#include <string.h>

#include "conf/conf.h"
#include "conf/conf-priv.h"

static const char *const supported_versions[] = {
    CARREL_MCP_PROTOCOL_VERSION, /* the latest first */
    "2025-03-26",
    "2024-11-05",
    NULL,
};

void
carrel_mcp_message_free(CarrelMcpMessage *msg)
{
    if (!msg)
        return;
    g_clear_pointer(&msg->id, json_node_unref);
    g_free(msg->method);
    g_clear_pointer(&msg->params, json_node_unref);
    g_free(msg);
}

/* JSON-RPC ids are strings or numbers; MCP forbids null. */
static gboolean
id_is_valid(JsonNode *id)
{
    GType type;

    if (!id || !JSON_NODE_HOLDS_VALUE(id))
        return FALSE;
    type = json_node_get_value_type(id);
    return type == G_TYPE_STRING || type == G_TYPE_INT64 || type == G_TYPE_DOUBLE;
}

static gboolean
invalid(GError **error, const char *message)
{
    g_set_error_literal(error, CARREL_ERROR, CARREL_ERROR_INVALID_ARG, message);
    return FALSE;
}

static gboolean
check_envelope(JsonObject *obj, GError **error)
{
    const char *version = carrel_conf_peek_string(obj, "jsonrpc");
    JsonNode *method = json_object_get_member(obj, "method");
    JsonNode *params = json_object_get_member(obj, "params");
    JsonNode *id = json_object_get_member(obj, "id");

    if (!version || !g_str_equal(version, "2.0"))
        return invalid(error, "'jsonrpc' must be \"2.0\"");
    if (method && (!carrel_conf_node_holds(method, G_TYPE_STRING) ||
                   !carrel_util_is_clean_text(json_node_get_string(method))))
        return invalid(error, "'method' must be a string");
    if (method && params && !JSON_NODE_HOLDS_OBJECT(params) && !JSON_NODE_HOLDS_NULL(params))
        return invalid(error, "'params' must be an object");
    if (method && id && !id_is_valid(id))
        return invalid(error, "'id' must be a string or a number");
    if (!method && !json_object_has_member(obj, "result") && !json_object_has_member(obj, "error"))
        return invalid(error, "a message needs 'method' (request, notification) or 'result' / "
                              "'error' (response)");
    return TRUE;
}

CarrelMcpMessage *
carrel_mcp_message_from_json(JsonNode *node, GError **error)
{
    g_autoptr(CarrelMcpMessage) msg = NULL;
    JsonObject *obj;
    JsonNode *id;

    if (node && JSON_NODE_HOLDS_ARRAY(node)) {
        invalid(error, "batches are not supported: send one message per request");
        return NULL;
    }
    if (!node || !JSON_NODE_HOLDS_OBJECT(node)) {
        invalid(error, "a JSON-RPC message must be an object");
        return NULL;
    }
    obj = json_node_get_object(node);
    if (!check_envelope(obj, error))
        return NULL;
    msg = g_new0(CarrelMcpMessage, 1);
    id = json_object_get_member(obj, "id");
    if (!json_object_has_member(obj, "method")) {
        msg->kind = CARREL_MCP_MESSAGE_RESPONSE;
        msg->id = id ? json_node_copy(id) : NULL;
        return g_steal_pointer(&msg);
    }
    msg->kind = id ? CARREL_MCP_MESSAGE_REQUEST : CARREL_MCP_MESSAGE_NOTIFICATION;
    msg->id = id ? json_node_copy(id) : NULL;
    msg->method = g_strdup(carrel_conf_peek_string(obj, "method"));
    if (json_object_has_member(obj, "params") &&
        JSON_NODE_HOLDS_OBJECT(json_object_get_member(obj, "params")))
        msg->params = json_object_dup_member(obj, "params");
    return g_steal_pointer(&msg);
}

JsonNode *
carrel_mcp_message_id(JsonNode *node)
{
    JsonNode *id = NULL;

    if (node && JSON_NODE_HOLDS_OBJECT(node))
        id = json_object_get_member(json_node_get_object(node), "id");
    return id_is_valid(id) ? json_node_copy(id) : json_node_new(JSON_NODE_NULL);
}

static JsonNode *
reply_new(JsonNode *id, const char *member, JsonNode *value)
{
    JsonObject *obj = json_object_new();
    JsonNode *node = json_node_init_object(json_node_alloc(), obj);

    json_object_set_string_member(obj, "jsonrpc", "2.0");
    json_object_set_member(obj, "id", id ? json_node_copy(id) : json_node_new(JSON_NODE_NULL));
    json_object_set_member(obj, member, value);
    json_object_unref(obj);
    return node;
}

JsonNode *
carrel_mcp_result_reply(JsonNode *id, JsonNode *result)
{
    return reply_new(id, "result", result);
}

JsonNode *
carrel_mcp_error_reply(JsonNode *id, CarrelMcpErrorCode code, const char *message)
{
    JsonObject *err = json_object_new();
    JsonNode *node = json_node_init_object(json_node_alloc(), err);

    json_object_set_int_member(err, "code", code);
    json_object_set_string_member(err, "message", message);
    json_object_unref(err);
    return reply_new(id, "error", node);
}

gboolean
carrel_mcp_version_supported(const char *version)
{
    return version && g_strv_contains(supported_versions, version);
}

const char *
carrel_mcp_version_negotiate(const char *requested)
{
    for (guint i = 0; requested && supported_versions[i]; i++) {
        if (g_str_equal(requested, supported_versions[i]))
            return supported_versions[i];
    }
    return CARREL_MCP_PROTOCOL_VERSION;
}

gboolean
carrel_mcp_origin_is_local(const char *origin)
{
    g_autoptr(GUri) uri = origin ? g_uri_parse(origin, G_URI_FLAGS_NONE, NULL) : NULL;
    const char *host = uri ? g_uri_get_host(uri) : NULL;

    if (!host)
        return FALSE; /* "null", a file: page or garbage: not a local web page */
    return g_str_equal(host, "127.0.0.1") || g_str_equal(host, "::1") ||
           g_str_equal(host, "[::1]") || g_ascii_strcasecmp(host, "localhost") == 0;
}

/* Tool results. */

static JsonNode *
text_content(const char *text)
{
    JsonObject *obj = json_object_new();
    JsonNode *node = json_node_init_object(json_node_alloc(), obj);

    json_object_set_string_member(obj, "type", "text");
    json_object_set_string_member(obj, "text", text);
    json_object_unref(obj);
    return node;
}

JsonNode *
carrel_mcp_tool_result(JsonArray *content, JsonNode *structured, gboolean is_error)
{
    JsonObject *obj = json_object_new();
    JsonNode *node = json_node_init_object(json_node_alloc(), obj);

    json_object_set_array_member(obj, "content", content);
    if (structured)
        json_object_set_member(obj, "structuredContent", structured);
    json_object_set_boolean_member(obj, "isError", is_error);
    json_object_unref(obj);
    return node;
}

JsonNode *
carrel_mcp_text_result(const char *text, JsonNode *structured, gboolean is_error)
{
    JsonArray *content = json_array_new();

    json_array_add_element(content, text_content(text));
    return carrel_mcp_tool_result(content, structured, is_error);
}

JsonNode *
carrel_mcp_json_result(JsonNode *value)
{
    g_autofree char *text = json_to_string(value, FALSE);

    return carrel_mcp_text_result(text, json_node_copy(value), FALSE);
}

JsonNode *
carrel_mcp_error_result(const GError *error)
{
    const char *code =
        error->domain == CARREL_ERROR ? carrel_error_code_to_string(error->code) : "failed";
    g_autofree char *text = g_strdup_printf("%s: %s", code, error->message);
    JsonObject *detail = json_object_new();
    JsonObject *wrap = json_object_new();
    JsonNode *node = json_node_init_object(json_node_alloc(), wrap);

    json_object_set_string_member(detail, "code", code);
    json_object_set_string_member(detail, "message", error->message);
    json_object_set_object_member(wrap, "error", detail);
    json_object_unref(wrap);
    return carrel_mcp_text_result(text, node, TRUE);
}

JsonNode *
carrel_mcp_image_content(GBytes *image, const char *mime_type)
{
    gsize len = 0;
    const guchar *data = g_bytes_get_data(image, &len);
    g_autofree char *b64 = g_base64_encode(data, len);
    JsonObject *obj = json_object_new();
    JsonNode *node = json_node_init_object(json_node_alloc(), obj);

    json_object_set_string_member(obj, "type", "image");
    json_object_set_string_member(obj, "data", b64);
    json_object_set_string_member(obj, "mimeType", mime_type);
    json_object_unref(obj);
    return node;
}

JsonNode *
carrel_mcp_file_result(const char *uri, const char *path, GBytes *data)
{
    gsize len = 0;
    const char *bytes = g_bytes_get_data(data, &len);
    /* g_utf8_validate refuses NUL bytes within len: such files go as base64. */
    gboolean text = len == 0 || g_utf8_validate(bytes, (gssize)len, NULL);
    JsonArray *content = json_array_new();
    JsonObject *info = json_object_new();
    JsonNode *structured = json_node_init_object(json_node_alloc(), info);

    json_object_set_string_member(info, "path", path);
    json_object_set_int_member(info, "bytes", (gint64)len);
    json_object_set_string_member(info, "encoding", text ? "utf-8" : "base64");
    json_object_unref(info);
    if (text) {
        g_autofree char *copy = g_strndup(bytes ? bytes : "", len);
        json_array_add_element(content, text_content(copy));
    } else {
        g_autofree char *b64 = g_base64_encode((const guchar *)bytes, len);
        JsonObject *res = json_object_new();
        JsonObject *wrap = json_object_new();

        json_object_set_string_member(res, "uri", uri);
        json_object_set_string_member(res, "mimeType", "application/octet-stream");
        json_object_set_string_member(res, "blob", b64);
        json_object_set_string_member(wrap, "type", "resource");
        json_object_set_object_member(wrap, "resource", res);
        json_array_add_element(content, json_node_init_object(json_node_alloc(), wrap));
        json_object_unref(wrap);
    }
    return carrel_mcp_tool_result(content, structured, FALSE);
}

/* A copy of obj's members but one (json_node_copy shares objects: never edit a copy). */
static JsonObject *
object_without(JsonObject *obj, const char *skip)
{
    JsonObject *out = json_object_new();
    g_autoptr(GList) members = json_object_get_members(obj);

    for (GList *l = members; l; l = l->next) {
        if (!g_str_equal(l->data, skip))
            json_object_set_member(out, l->data, json_object_dup_member(obj, l->data));
    }
    return out;
}

/*
 * An observation ({media_type, data, width, ...}): its image goes to content, and the result is
 * a copy without the data. Anything else is copied as it is.
 */
static JsonNode *
take_image(JsonNode *node, JsonArray *content)
{
    JsonObject *obj = node && JSON_NODE_HOLDS_OBJECT(node) ? json_node_get_object(node) : NULL;
    const char *data = obj ? carrel_conf_peek_string(obj, "data") : NULL;
    const char *type = obj ? carrel_conf_peek_string(obj, "media_type") : NULL;
    JsonObject *image;
    JsonNode *rest;

    if (!data)
        return json_node_copy(node);
    image = json_object_new();
    json_object_set_string_member(image, "type", "image");
    json_object_set_string_member(image, "data", data);
    json_object_set_string_member(image, "mimeType", type ? type : "image/png");
    json_array_add_element(content, json_node_init_object(json_node_alloc(), image));
    json_object_unref(image);
    rest = json_node_new(JSON_NODE_OBJECT);
    json_node_take_object(rest, object_without(obj, "data"));
    return rest;
}

/* One entry of a computer reply's results, its images moved to content. */
static JsonNode *
take_entry_images(JsonNode *entry, JsonArray *content)
{
    JsonObject *e = JSON_NODE_HOLDS_OBJECT(entry) ? json_node_get_object(entry) : NULL;
    JsonObject *out;
    JsonNode *node;

    if (!e)
        return json_node_copy(entry);
    out = object_without(e, "");
    if (json_object_has_member(e, "output"))
        json_object_set_member(out, "output",
                               take_image(json_object_get_member(e, "output"), content));
    if (json_object_has_member(e, "screenshot"))
        json_object_set_member(out, "screenshot",
                               take_image(json_object_get_member(e, "screenshot"), content));
    node = json_node_init_object(json_node_alloc(), out);
    json_object_unref(out);
    return node;
}

JsonNode *
carrel_mcp_computer_result(JsonNode *reply)
{
    JsonObject *obj = JSON_NODE_HOLDS_OBJECT(reply) ? json_node_get_object(reply) : NULL;
    JsonNode *results = obj ? json_object_get_member(obj, "results") : NULL;
    JsonArray *content = json_array_new();
    JsonObject *rest = obj ? object_without(obj, "") : json_object_new();
    JsonNode *rest_node;
    g_autofree char *text = NULL;

    if (results && JSON_NODE_HOLDS_ARRAY(results)) {
        JsonArray *list = json_node_get_array(results);
        JsonArray *copy = json_array_new();

        for (guint i = 0; i < json_array_get_length(list); i++)
            json_array_add_element(copy,
                                   take_entry_images(json_array_get_element(list, i), content));
        json_object_set_array_member(rest, "results", copy);
    }
    if (obj && json_object_has_member(obj, "screenshot"))
        json_object_set_member(rest, "screenshot",
                               take_image(json_object_get_member(obj, "screenshot"), content));
    rest_node = json_node_init_object(json_node_alloc(), rest);
    json_object_unref(rest);
    text = json_to_string(rest_node, FALSE);
    json_array_add_element(content, text_content(text));
    return carrel_mcp_tool_result(content, rest_node, FALSE);
}

static void
append_output(GString *text, const char *name, GBytes *bytes)
{
    gsize len = 0;
    const char *data = bytes ? g_bytes_get_data(bytes, &len) : NULL;
    g_autofree char *valid = g_utf8_make_valid(data ? data : "", data ? (gssize)len : 0);

    g_string_append_printf(text, "--- %s ---\n%s", name, valid);
    if (len > 0 && data[len - 1] != '\n')
        g_string_append_c(text, '\n');
}

JsonNode *
carrel_mcp_exec_result(const CarrelExecResult *result)
{
    g_autoptr(GString) text = g_string_new(NULL);

    g_string_append_printf(text, "exit code: %d", result->exit_code);
    if (result->timed_out)
        g_string_append(text, " (timed out: killed)");
    if (result->truncated)
        g_string_append(text, " (output truncated)");
    g_string_append_c(text, '\n');
    append_output(text, "stdout", result->stdout_bytes);
    append_output(text, "stderr", result->stderr_bytes);
    return carrel_mcp_text_result(text->str, carrel_exec_result_to_json(result), FALSE);
}
