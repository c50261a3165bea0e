#include <string.h>

#include "conf/conf.h"
#include "conf/conf-priv.h"

void
carrel_exec_request_free(CarrelExecRequest *req)
{
    if (!req)
        return;
    g_strfreev(req->argv);
    g_strfreev(req->env);
    g_free(req->cwd);
    g_clear_pointer(&req->stdin_bytes, g_bytes_unref);
    g_free(req);
}

static gboolean
is_env_name(const char *name, gsize len)
{
    if (len == 0 || !(g_ascii_isalpha(name[0]) || name[0] == '_'))
        return FALSE;
    for (gsize i = 1; i < len; i++) {
        if (!g_ascii_isalnum(name[i]) && name[i] != '_')
            return FALSE;
    }
    return TRUE;
}

static gboolean
parse_argv(JsonObject *obj, CarrelExecRequest *req, GError **error)
{
    JsonNode *node = carrel_conf_get_node(obj, "argv");
    g_autoptr(GStrvBuilder) b = g_strv_builder_new();
    gsize total = 0;
    JsonArray *arr;

    if (!node || !JSON_NODE_HOLDS_ARRAY(node) ||
        json_array_get_length(arr = json_node_get_array(node)) == 0) {
        g_set_error(error, CARREL_ERROR, CARREL_ERROR_INVALID_ARG,
                    "'argv' must be a non-empty array of strings");
        return FALSE;
    }
    if (json_array_get_length(arr) > CARREL_EXEC_MAX_ARGS) {
        g_set_error(error, CARREL_ERROR, CARREL_ERROR_LIMIT, "'argv' has more than %d entries",
                    CARREL_EXEC_MAX_ARGS);
        return FALSE;
    }
    for (guint i = 0; i < json_array_get_length(arr); i++) {
        JsonNode *item = json_array_get_element(arr, i);
        if (!carrel_conf_node_holds(item, G_TYPE_STRING)) {
            g_set_error(error, CARREL_ERROR, CARREL_ERROR_INVALID_ARG,
                        "'argv' must be a non-empty array of strings");
            return FALSE;
        }
        total += strlen(json_node_get_string(item)) + 1;
        g_strv_builder_add(b, json_node_get_string(item));
    }
    if (total > CARREL_EXEC_MAX_ARGV_BYTES || !*json_array_get_string_element(arr, 0)) {
        g_set_error(error, CARREL_ERROR, CARREL_ERROR_INVALID_ARG,
                    "'argv' must name a program and stay under %d bytes",
                    CARREL_EXEC_MAX_ARGV_BYTES);
        return FALSE;
    }
    req->argv = g_strv_builder_end(b);
    return TRUE;
}

static gboolean
parse_env(JsonObject *obj, CarrelExecRequest *req, GError **error)
{
    JsonNode *node = carrel_conf_get_node(obj, "env");
    g_autoptr(GStrvBuilder) b = g_strv_builder_new();
    g_autoptr(GList) names = NULL;

    if (!node)
        return TRUE;
    if (!JSON_NODE_HOLDS_OBJECT(node)) {
        g_set_error(error, CARREL_ERROR, CARREL_ERROR_INVALID_ARG,
                    "'env' must be an object of strings");
        return FALSE;
    }
    names = json_object_get_members(json_node_get_object(node));
    for (GList *l = names; l; l = l->next) {
        JsonNode *v = json_object_get_member(json_node_get_object(node), l->data);
        g_autofree char *entry = NULL;
        if (!is_env_name(l->data, strlen(l->data)) || !carrel_conf_node_holds(v, G_TYPE_STRING)) {
            g_set_error(error, CARREL_ERROR, CARREL_ERROR_INVALID_ARG,
                        "'env' names must match [A-Za-z_][A-Za-z0-9_]* with string values");
            return FALSE;
        }
        entry = g_strconcat(l->data, "=", json_node_get_string(v), NULL);
        g_strv_builder_add(b, entry);
    }
    req->env = g_strv_builder_end(b);
    return TRUE;
}

/* stdin_base64: binary standard input. */
static gboolean
parse_stdin_base64(JsonObject *obj, char **text, gsize *len, GError **error)
{
    g_autofree char *b64 = NULL;
    gsize out_len = 0;

    if (!carrel_conf_get_string(obj, "stdin_base64", FALSE, &b64, error))
        return FALSE;
    if (!b64)
        return TRUE;
    if (*text) {
        g_set_error(error, CARREL_ERROR, CARREL_ERROR_INVALID_ARG,
                    "give 'stdin' or 'stdin_base64', not both");
        return FALSE;
    }
    if (!carrel_util_is_base64(b64, strlen(b64))) {
        g_set_error(error, CARREL_ERROR, CARREL_ERROR_INVALID_ARG,
                    "'stdin_base64' is not valid padded base64");
        return FALSE;
    }
    *text = (char *)g_base64_decode(b64, &out_len);
    *len = out_len;
    return TRUE;
}

static gboolean
parse_stdin_timeout(JsonObject *obj, CarrelExecRequest *req, GError **error)
{
    gint64 timeout_s = CARREL_EXEC_DEFAULT_TIMEOUT_S;
    g_autofree char *text = NULL;
    gsize len = 0;

    if (!carrel_conf_get_string(obj, "stdin", FALSE, &text, error))
        return FALSE;
    len = text ? strlen(text) : 0;
    if (!parse_stdin_base64(obj, &text, &len, error))
        return FALSE;
    if (text && len > CARREL_EXEC_MAX_STDIN) {
        g_set_error(error, CARREL_ERROR, CARREL_ERROR_LIMIT, "standard input is over %d bytes",
                    CARREL_EXEC_MAX_STDIN);
        return FALSE;
    }
    if (text)
        req->stdin_bytes = g_bytes_new_take(g_steal_pointer(&text), len);
    if (!carrel_conf_get_int(obj, "timeout_s", 1, CARREL_EXEC_MAX_TIMEOUT_S, &timeout_s, error))
        return FALSE;
    req->timeout_s = (guint)timeout_s;
    return TRUE;
}

CarrelExecRequest *
carrel_exec_request_from_json(JsonNode *node, GError **error)
{
    static const char *const allowed[] = {
        "argv", "env", "cwd", "stdin", "stdin_base64", "timeout_s", "stream", "background", NULL};
    g_autoptr(CarrelExecRequest) req = g_new0(CarrelExecRequest, 1);
    JsonObject *obj;

    if (!node || !JSON_NODE_HOLDS_OBJECT(node)) {
        g_set_error(error, CARREL_ERROR, CARREL_ERROR_INVALID_ARG, "expected a JSON object");
        return NULL;
    }
    obj = json_node_get_object(node);
    if (!carrel_conf_check_members(obj, allowed, error) || !parse_argv(obj, req, error) ||
        !parse_env(obj, req, error) || !parse_stdin_timeout(obj, req, error) ||
        !carrel_conf_get_string(obj, "cwd", FALSE, &req->cwd, error) ||
        !carrel_conf_get_bool(obj, "stream", &req->stream, error) ||
        !carrel_conf_get_bool(obj, "background", &req->background, error))
        return NULL;
    if (req->stream && req->background) {
        g_set_error(error, CARREL_ERROR, CARREL_ERROR_INVALID_ARG,
                    "give 'stream' or 'background', not both");
        return NULL;
    }
    if (req->cwd && (!g_path_is_absolute(req->cwd) || !carrel_util_is_clean_text(req->cwd))) {
        g_set_error(error, CARREL_ERROR, CARREL_ERROR_INVALID_ARG,
                    "'cwd' must be an absolute path without control characters");
        return NULL;
    }
    return g_steal_pointer(&req);
}

void
carrel_exec_result_clear(CarrelExecResult *result)
{
    g_clear_pointer(&result->stdout_bytes, g_bytes_unref);
    g_clear_pointer(&result->stderr_bytes, g_bytes_unref);
}

static void
add_text(JsonBuilder *b, const char *member, GBytes *bytes)
{
    gsize len = 0;
    const char *data = bytes ? g_bytes_get_data(bytes, &len) : NULL;
    g_autofree char *text = g_utf8_make_valid(data ? data : "", data ? (gssize)len : 0);

    json_builder_set_member_name(b, member);
    json_builder_add_string_value(b, text);
}

JsonNode *
carrel_exec_result_to_json(const CarrelExecResult *result)
{
    g_autoptr(JsonBuilder) b = json_builder_new();

    json_builder_begin_object(b);
    json_builder_set_member_name(b, "exit_code");
    json_builder_add_int_value(b, result->exit_code);
    add_text(b, "stdout", result->stdout_bytes);
    add_text(b, "stderr", result->stderr_bytes);
    json_builder_set_member_name(b, "truncated");
    json_builder_add_boolean_value(b, result->truncated);
    json_builder_set_member_name(b, "timed_out");
    json_builder_add_boolean_value(b, result->timed_out);
    json_builder_set_member_name(b, "duration_ms");
    json_builder_add_int_value(b, result->duration_ms);
    json_builder_end_object(b);
    return json_builder_get_root(b);
}
