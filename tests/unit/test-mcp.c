/*
 * MCP in conf: JSON-RPC message checks, version negotiation, the Origin rule, the tool table
 * (generated schemas and the argument checks driven by the same table) and tool results.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <string.h>

#include "conf/conf.h"

static JsonNode *
parse(const char *text)
{
    g_autoptr(GError) error = NULL;
    JsonNode *node = carrel_conf_parse_json(text, strlen(text), &error);

    if (!node)
        fail_msg("'%s': %s", text, error->message);
    return node;
}

static CarrelMcpMessage *
message(const char *text)
{
    g_autoptr(JsonNode) node = parse(text);
    g_autoptr(GError) error = NULL;
    CarrelMcpMessage *msg = carrel_mcp_message_from_json(node, &error);

    if (!msg)
        fail_msg("'%s': %s", text, error->message);
    return msg;
}

static void
assert_message_refused(const char *text, const char *fragment)
{
    g_autoptr(JsonNode) node = parse(text);
    g_autoptr(GError) error = NULL;
    g_autoptr(CarrelMcpMessage) msg = carrel_mcp_message_from_json(node, &error);

    if (msg)
        fail_msg("'%s' was accepted", text);
    assert_true(g_error_matches(error, CARREL_ERROR, CARREL_ERROR_INVALID_ARG));
    if (!strstr(error->message, fragment))
        fail_msg("'%s': message '%s' lacks '%s'", text, error->message, fragment);
}

static void
test_messages(void **state)
{
    g_autoptr(CarrelMcpMessage) req =
        message("{\"jsonrpc\":\"2.0\",\"id\":7,\"method\":\"tools/list\",\"params\":{}}");
    g_autoptr(CarrelMcpMessage) str_id =
        message("{\"jsonrpc\":\"2.0\",\"id\":\"a\",\"method\":\"x\"}");
    g_autoptr(CarrelMcpMessage) note =
        message("{\"jsonrpc\":\"2.0\",\"method\":\"notifications/initialized\"}");
    g_autoptr(CarrelMcpMessage) resp = message("{\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{}}");
    g_autoptr(CarrelMcpMessage) null_params =
        message("{\"jsonrpc\":\"2.0\",\"id\":1.5,\"method\":\"ping\",\"params\":null}");

    assert_int_equal(req->kind, CARREL_MCP_MESSAGE_REQUEST);
    assert_int_equal(json_node_get_int(req->id), 7);
    assert_string_equal(req->method, "tools/list");
    assert_true(JSON_NODE_HOLDS_OBJECT(req->params));
    assert_string_equal(json_node_get_string(str_id->id), "a");
    assert_null(str_id->params);
    assert_int_equal(note->kind, CARREL_MCP_MESSAGE_NOTIFICATION);
    assert_null(note->id);
    assert_int_equal(resp->kind, CARREL_MCP_MESSAGE_RESPONSE);
    assert_null(resp->method);
    assert_null(null_params->params);
    assert_true(json_node_get_double(null_params->id) == 1.5);

    assert_message_refused("{\"id\":1,\"method\":\"ping\"}", "'jsonrpc'");
    assert_message_refused("{\"jsonrpc\":\"1.0\",\"id\":1,\"method\":\"ping\"}", "'jsonrpc'");
    assert_message_refused("{\"jsonrpc\":2,\"id\":1,\"method\":\"ping\"}", "'jsonrpc'");
    assert_message_refused("{\"jsonrpc\":\"2.0\",\"id\":true,\"method\":\"ping\"}", "'id'");
    assert_message_refused("{\"jsonrpc\":\"2.0\",\"id\":null,\"method\":\"ping\"}", "'id'");
    assert_message_refused("{\"jsonrpc\":\"2.0\",\"id\":[1],\"method\":\"ping\"}", "'id'");
    assert_message_refused("{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":5}", "'method'");
    assert_message_refused("{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"a\\nb\"}", "'method'");
    assert_message_refused("{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"x\",\"params\":[1]}",
                           "'params'");
    assert_message_refused("{\"jsonrpc\":\"2.0\",\"id\":1}", "needs 'method'");
    assert_message_refused("[{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"ping\"}]", "batches");
    assert_message_refused("\"ping\"", "object");
}

static void
test_message_id_and_replies(void **state)
{
    g_autoptr(JsonNode) good = parse("{\"id\":\"r1\",\"method\":\"ping\"}");
    g_autoptr(JsonNode) bad = parse("{\"id\":{},\"method\":\"ping\"}");
    g_autoptr(JsonNode) id = carrel_mcp_message_id(good);
    g_autoptr(JsonNode) none = carrel_mcp_message_id(bad);
    g_autoptr(JsonNode) err = carrel_mcp_error_reply(id, CARREL_MCP_METHOD_NOT_FOUND, "nope");
    g_autoptr(JsonNode) ok = carrel_mcp_result_reply(NULL, json_node_new(JSON_NODE_NULL));
    g_autofree char *err_text = json_to_string(err, FALSE);
    g_autofree char *ok_text = json_to_string(ok, FALSE);

    assert_string_equal(json_node_get_string(id), "r1");
    assert_true(JSON_NODE_HOLDS_NULL(none));
    assert_string_equal(err_text, "{\"jsonrpc\":\"2.0\",\"id\":\"r1\",\"error\":{\"code\":-32601,"
                                  "\"message\":\"nope\"}}");
    assert_string_equal(ok_text, "{\"jsonrpc\":\"2.0\",\"id\":null,\"result\":null}");
}

static void
test_versions(void **state)
{
    assert_true(carrel_mcp_version_supported("2025-06-18"));
    assert_true(carrel_mcp_version_supported("2025-03-26"));
    assert_true(carrel_mcp_version_supported("2024-11-05"));
    assert_false(carrel_mcp_version_supported("2024-10-07"));
    assert_false(carrel_mcp_version_supported(NULL));
    assert_string_equal(carrel_mcp_version_negotiate("2025-03-26"), "2025-03-26");
    assert_string_equal(carrel_mcp_version_negotiate("2024-11-05"), "2024-11-05");
    assert_string_equal(carrel_mcp_version_negotiate("2099-01-01"), "2025-06-18");
    assert_string_equal(carrel_mcp_version_negotiate(NULL), "2025-06-18");
}

static void
test_origin(void **state)
{
    static const char *const local[] = {
        "http://127.0.0.1:1234", "http://localhost", "https://LOCALHOST:8443",
        "http://[::1]:3000",     "http://127.0.0.1", NULL,
    };
    static const char *const foreign[] = {
        "http://evil.example",
        "http://localhost.evil.example",
        "http://127.0.0.1.nip.io",
        "http://127.0.0.2",
        "null",
        "",
        "file:///home/user/a.html",
        "http://[::2]",
        "http://localhost@evil.example",
        "http://evil.example#local",
        NULL,
    };

    for (guint i = 0; local[i]; i++) {
        if (!carrel_mcp_origin_is_local(local[i]))
            fail_msg("'%s' should be local", local[i]);
    }
    for (guint i = 0; foreign[i]; i++) {
        if (carrel_mcp_origin_is_local(foreign[i]))
            fail_msg("'%s' should be refused", foreign[i]);
    }
    assert_false(carrel_mcp_origin_is_local(NULL));
}

static const char *const tool_names[] = {
    "sandbox_create",     "sandbox_list",
    "sandbox_destroy",    "sandbox_pause",
    "sandbox_resume",     "snapshot_create",
    "snapshot_revert",    "computer",
    "screenshot",         "command_run",
    "file_read",          "file_write",
    "sandbox_hibernate",  "sandbox_fork",
    "snapshot_list",      "file_list",
    "file_stat",          "file_mkdir",
    "file_remove",        "file_move",
    "process_start",      "process_list",
    "process_read",       "process_kill",
    "accessibility_tree", NULL,
};

static void
check_schema(JsonObject *tool)
{
    const char *name = json_object_get_string_member(tool, "name");
    JsonObject *schema = json_object_get_object_member(tool, "inputSchema");
    JsonObject *props = json_object_get_object_member(schema, "properties");
    JsonArray *required = json_object_get_array_member(schema, "required");
    g_autoptr(GList) members = json_object_get_members(props);

    assert_true(strlen(json_object_get_string_member(tool, "description")) > 20);
    assert_string_equal(json_object_get_string_member(schema, "type"), "object");
    for (guint i = 0; i < json_array_get_length(required); i++) {
        const char *req = json_array_get_string_element(required, i);
        if (!json_object_has_member(props, req))
            fail_msg("%s: required '%s' is not a property", name, req);
    }
    for (GList *l = members; l; l = l->next) {
        JsonObject *p = json_object_get_object_member(props, l->data);
        const char *type = json_object_get_string_member(p, "type");
        if (!g_strv_contains(
                (const char *const[]){"string", "integer", "number", "array", "boolean", NULL},
                type))
            fail_msg("%s.%s: type '%s'", name, (const char *)l->data, type);
        assert_non_null(json_object_get_string_member(p, "description"));
        if (g_str_equal(type, "array"))
            assert_non_null(json_object_get_object_member(p, "items"));
    }
    /* Only the computer tool passes unknown members on (to the action parser). */
    assert_int_equal(json_object_get_boolean_member(schema, "additionalProperties"),
                     g_str_equal(name, "computer"));
}

static void
test_tools_list(void **state)
{
    g_autoptr(JsonNode) root = carrel_mcp_tools_list();
    JsonArray *list = json_object_get_array_member(json_node_get_object(root), "tools");

    assert_int_equal(json_array_get_length(list), g_strv_length((char **)tool_names));
    assert_int_equal(json_array_get_length(list), CARREL_MCP_TOOL_LAST);
    for (guint i = 0; i < json_array_get_length(list); i++) {
        JsonObject *tool = json_array_get_object_element(list, i);
        const char *name = json_object_get_string_member(tool, "name");

        assert_string_equal(name, tool_names[i]);
        assert_int_equal(carrel_mcp_tool_from_string(name), i);
        assert_string_equal(carrel_mcp_tool_to_string(i), name);
        check_schema(tool);
    }
    assert_int_equal(carrel_mcp_tool_from_string("rm_rf"), CARREL_MCP_TOOL_LAST);
    assert_int_equal(carrel_mcp_tool_from_string(NULL), CARREL_MCP_TOOL_LAST);
}

static JsonObject *
arguments(CarrelMcpTool tool, const char *text, GError **error)
{
    g_autoptr(JsonNode) node = text ? parse(text) : NULL;

    return carrel_mcp_tool_arguments(tool, node, error);
}

static void
assert_arguments_refused(CarrelMcpTool tool, const char *text, const char *fragment)
{
    g_autoptr(GError) error = NULL;
    g_autoptr(JsonObject) args = arguments(tool, text, &error);

    if (args)
        fail_msg("%s: '%s' was accepted", carrel_mcp_tool_to_string(tool), text);
    assert_true(g_error_matches(error, CARREL_ERROR, CARREL_ERROR_INVALID_ARG));
    if (!strstr(error->message, fragment))
        fail_msg("'%s': message '%s' lacks '%s'", text, error->message, fragment);
}

static void
test_arguments(void **state)
{
    g_autoptr(GError) error = NULL;
    g_autoptr(JsonObject) create =
        arguments(CARREL_MCP_TOOL_SANDBOX_CREATE,
                  "{\"template\":\"tiny\",\"name\":null,\"vcpus\":2}", &error);
    g_autoptr(JsonObject) list = arguments(CARREL_MCP_TOOL_SANDBOX_LIST, NULL, &error);
    g_autoptr(JsonObject) computer =
        arguments(CARREL_MCP_TOOL_COMPUTER,
                  "{\"session\":\"s\",\"action\":\"left_click\",\"coordinate\":[1,2],"
                  "\"observe\":\"none\",\"duration\":0.5}",
                  &error);

    assert_non_null(create);
    assert_false(json_object_has_member(create, "name")); /* null is absent */
    assert_int_equal(json_object_get_int_member(create, "vcpus"), 2);
    assert_non_null(list);
    assert_int_equal(json_object_get_size(list), 0);
    assert_non_null(computer);
    assert_string_equal(json_object_get_string_member(computer, "observe"), "none");

    assert_arguments_refused(CARREL_MCP_TOOL_SANDBOX_CREATE, "{}", "'template' is required");
    assert_arguments_refused(CARREL_MCP_TOOL_SANDBOX_CREATE, "{\"template\":null}",
                             "'template' is required");
    assert_arguments_refused(CARREL_MCP_TOOL_SANDBOX_CREATE, "{\"template\":1}", "string");
    assert_arguments_refused(CARREL_MCP_TOOL_SANDBOX_CREATE, "{\"template\":\"t\",\"cpus\":1}",
                             "unknown argument 'cpus'");
    assert_arguments_refused(CARREL_MCP_TOOL_SANDBOX_CREATE, "{\"template\":\"t\",\"vcpus\":17}",
                             "from 1 to 16");
    assert_arguments_refused(CARREL_MCP_TOOL_SANDBOX_CREATE, "{\"template\":\"t\",\"vcpus\":1.5}",
                             "integer");
    assert_arguments_refused(CARREL_MCP_TOOL_SANDBOX_LIST, "[]", "'arguments' must be an object");
    assert_arguments_refused(CARREL_MCP_TOOL_SANDBOX_LIST, "{\"all\":true}", "unknown argument");
    assert_arguments_refused(CARREL_MCP_TOOL_COMPUTER, "{\"session\":\"s\"}",
                             "'action' is required");
    assert_arguments_refused(CARREL_MCP_TOOL_COMPUTER,
                             "{\"session\":\"s\",\"action\":\"x\",\"coordinate\":[1]}",
                             "number of items");
    assert_arguments_refused(CARREL_MCP_TOOL_COMPUTER,
                             "{\"session\":\"s\",\"action\":\"x\",\"coordinate\":[1,\"2\"]}",
                             "array of integers");
    assert_arguments_refused(
        CARREL_MCP_TOOL_COMPUTER,
        "{\"session\":\"s\",\"action\":\"scroll\",\"scroll_direction\":\"in\"}",
        "one of: up, down, left, right");
    /* type's method is one of the four names; any text passes to the action parser. */
    assert_arguments_refused(CARREL_MCP_TOOL_COMPUTER,
                             "{\"session\":\"s\",\"action\":\"type\",\"text\":\"\\u00e9\","
                             "\"method\":\"xdotool\"}",
                             "one of: auto, keys, guest_keysyms, clipboard");
    {
        g_autoptr(JsonObject) typed =
            arguments(CARREL_MCP_TOOL_COMPUTER,
                      "{\"session\":\"s\",\"action\":\"type\",\"text\":\"\\u4e2d \\ud83d\\ude00\","
                      "\"method\":\"clipboard\",\"paste_keys\":\"ctrl+v\"}",
                      NULL);
        assert_non_null(typed);
        assert_string_equal(json_object_get_string_member(typed, "method"), "clipboard");
        assert_string_equal(json_object_get_string_member(typed, "text"),
                            "\xe4\xb8\xad \xf0\x9f\x98\x80");
    }
    assert_arguments_refused(CARREL_MCP_TOOL_COMMAND_RUN, "{\"session\":\"s\",\"argv\":[]}",
                             "number of items");
    assert_arguments_refused(CARREL_MCP_TOOL_FILE_WRITE,
                             "{\"session\":\"s\",\"path\":\"/a\",\"content\":\"\","
                             "\"encoding\":\"latin1\"}",
                             "one of: utf-8, base64");
    assert_arguments_refused(CARREL_MCP_TOOL_FILE_REMOVE,
                             "{\"session\":\"s\",\"path\":\"/a\",\"recursive\":\"yes\"}",
                             "'recursive' must be a boolean");
    assert_arguments_refused(CARREL_MCP_TOOL_FILE_MOVE, "{\"session\":\"s\",\"path\":\"/a\"}",
                             "'to' is required");
}

static CarrelExecRequest *
exec_request(const char *text, GError **error)
{
    g_autoptr(JsonObject) args = arguments(CARREL_MCP_TOOL_COMMAND_RUN, text, NULL);

    assert_non_null(args);
    return carrel_mcp_exec_request_from_arguments(args, error);
}

static void
test_exec_arguments(void **state)
{
    g_autoptr(GError) error = NULL;
    g_autoptr(CarrelExecRequest) shell = exec_request(
        "{\"session\":\"s\",\"command\":\"echo hi | wc -c\",\"timeout_s\":5,\"cwd\":\"/tmp\"}",
        &error);
    g_autoptr(CarrelExecRequest) direct =
        exec_request("{\"session\":\"s\",\"argv\":[\"ls\",\"-l\"]}", &error);
    g_autoptr(CarrelExecRequest) both =
        exec_request("{\"session\":\"s\",\"command\":\"ls\",\"argv\":[\"ls\"]}", NULL);
    g_autoptr(CarrelExecRequest) neither = exec_request("{\"session\":\"s\"}", NULL);
    g_autoptr(CarrelExecRequest) relative =
        exec_request("{\"session\":\"s\",\"command\":\"ls\",\"cwd\":\"tmp\"}", NULL);

    assert_non_null(shell);
    assert_int_equal(g_strv_length(shell->argv), 3);
    assert_string_equal(shell->argv[0], "/bin/sh");
    assert_string_equal(shell->argv[1], "-c");
    assert_string_equal(shell->argv[2], "echo hi | wc -c");
    assert_int_equal(shell->timeout_s, 5);
    assert_string_equal(shell->cwd, "/tmp");
    assert_non_null(direct);
    assert_string_equal(direct->argv[1], "-l");
    assert_int_equal(direct->timeout_s, CARREL_EXEC_DEFAULT_TIMEOUT_S);
    assert_null(both);
    assert_null(neither);
    assert_null(relative);
}

static GBytes *
file_content(const char *text, GError **error)
{
    g_autoptr(JsonObject) args = arguments(CARREL_MCP_TOOL_FILE_WRITE, text, NULL);

    assert_non_null(args);
    return carrel_mcp_file_content_from_arguments(args, error);
}

static void
assert_content(const char *text, const char *expect, gsize expect_len)
{
    g_autoptr(GError) error = NULL;
    g_autoptr(GBytes) data = file_content(text, &error);

    if (!data)
        fail_msg("'%s': %s", text, error->message);
    assert_int_equal(g_bytes_get_size(data), expect_len);
    assert_memory_equal(g_bytes_get_data(data, NULL), expect, expect_len);
}

static void
test_file_content(void **state)
{
    static const char *const bad[] = {"aGVsbG8", "aGV$bG8=", "aGVsbG8=aGVs", "a===", "====", NULL};

    assert_content("{\"session\":\"s\",\"path\":\"/a\",\"content\":\"h\\u00e9\"}", "h\xc3\xa9", 3);
    assert_content("{\"session\":\"s\",\"path\":\"/a\",\"content\":\"aGVs\\nbG8=\","
                   "\"encoding\":\"base64\"}",
                   "hello", 5);
    assert_content(
        "{\"session\":\"s\",\"path\":\"/a\",\"content\":\"AP8=\",\"encoding\":\"base64\"}",
        "\x00\xff", 2);
    assert_content("{\"session\":\"s\",\"path\":\"/a\",\"content\":\"\",\"encoding\":\"base64\"}",
                   "", 0);
    for (guint i = 0; bad[i]; i++) {
        g_autofree char *text = g_strdup_printf(
            "{\"session\":\"s\",\"path\":\"/a\",\"content\":\"%s\",\"encoding\":\"base64\"}",
            bad[i]);
        g_autoptr(GError) error = NULL;
        g_autoptr(GBytes) data = file_content(text, &error);

        if (data)
            fail_msg("'%s' was decoded", bad[i]);
        assert_non_null(strstr(error->message, "base64"));
    }
}

static JsonObject *
result_object(JsonNode *node)
{
    assert_non_null(node);
    assert_true(JSON_NODE_HOLDS_OBJECT(node));
    return json_node_get_object(node);
}

static void
test_file_result(void **state)
{
    g_autoptr(GBytes) text = g_bytes_new("caf\xc3\xa9\n", 6);
    g_autoptr(GBytes) nul = g_bytes_new("a\0b", 3);
    g_autoptr(GBytes) latin = g_bytes_new("caf\xe9", 4);
    g_autoptr(JsonNode) r1 = carrel_mcp_file_result("carrel://x", "/t", text);
    g_autoptr(JsonNode) r2 = carrel_mcp_file_result("carrel://x", "/n", nul);
    g_autoptr(JsonNode) r3 = carrel_mcp_file_result("carrel://x", "/l", latin);
    JsonObject *c1 = json_array_get_object_element(
        json_object_get_array_member(result_object(r1), "content"), 0);
    JsonObject *c2 = json_array_get_object_element(
        json_object_get_array_member(result_object(r2), "content"), 0);
    JsonObject *c3 = json_array_get_object_element(
        json_object_get_array_member(result_object(r3), "content"), 0);
    JsonObject *res = json_object_get_object_member(c2, "resource");
    gsize len = 0;
    g_autofree guchar *decoded = g_base64_decode(json_object_get_string_member(res, "blob"), &len);

    assert_false(json_object_get_boolean_member(result_object(r1), "isError"));
    assert_string_equal(json_object_get_string_member(c1, "type"), "text");
    assert_string_equal(json_object_get_string_member(c1, "text"), "caf\xc3\xa9\n");
    assert_string_equal(
        json_object_get_string_member(
            json_object_get_object_member(result_object(r1), "structuredContent"), "encoding"),
        "utf-8");
    assert_string_equal(json_object_get_string_member(c2, "type"), "resource");
    assert_string_equal(json_object_get_string_member(res, "uri"), "carrel://x");
    assert_string_equal(json_object_get_string_member(res, "mimeType"), "application/octet-stream");
    assert_int_equal(len, 3);
    assert_memory_equal(decoded, "a\0b", 3);
    assert_string_equal(json_object_get_string_member(c3, "type"), "resource");
    assert_string_equal(
        json_object_get_string_member(
            json_object_get_object_member(result_object(r3), "structuredContent"), "encoding"),
        "base64");
}

static void
test_computer_result(void **state)
{
    g_autoptr(JsonNode) reply = parse(
        "{\"results\":[{\"index\":0,\"action\":\"zoom\",\"output\":{\"media_type\":\"image/png\","
        "\"width\":2,\"height\":2,\"data\":\"Wk9PTQ==\"}},{\"index\":1,\"action\":\"click\"}],"
        "\"screenshot\":{\"media_type\":\"image/png\",\"width\":8,\"height\":6,\"ref\":\"r\","
        "\"data\":\"RklOQUw=\"},\"screen\":{\"width\":8,\"height\":6},\"pointer\":{\"x\":1,"
        "\"y\":2},\"duration_ms\":3}");
    g_autoptr(JsonNode) none = parse("{\"results\":[{\"index\":0,\"action\":\"wait\"}],"
                                     "\"screenshot\":null}");
    g_autoptr(JsonNode) result = carrel_mcp_computer_result(reply);
    g_autoptr(JsonNode) plain = carrel_mcp_computer_result(none);
    JsonObject *obj = result_object(result);
    JsonArray *content = json_object_get_array_member(obj, "content");
    JsonObject *text = json_array_get_object_element(content, 2);
    g_autofree char *structured =
        json_to_string(json_object_get_member(obj, "structuredContent"), FALSE);
    g_autofree char *untouched = NULL;

    assert_int_equal(json_array_get_length(content), 3);
    assert_string_equal(
        json_object_get_string_member(json_array_get_object_element(content, 0), "data"),
        "Wk9PTQ==");
    assert_string_equal(
        json_object_get_string_member(json_array_get_object_element(content, 1), "data"),
        "RklOQUw=");
    assert_string_equal(
        json_object_get_string_member(json_array_get_object_element(content, 1), "mimeType"),
        "image/png");
    assert_string_equal(json_object_get_string_member(text, "type"), "text");
    /* The text and the structured content keep everything but the image data. */
    assert_null(strstr(json_object_get_string_member(text, "text"), "RklOQUw="));
    assert_non_null(strstr(json_object_get_string_member(text, "text"), "\"pointer\""));
    assert_null(strstr(structured, "Wk9PTQ=="));
    assert_non_null(strstr(structured, "\"ref\":\"r\""));
    assert_false(json_object_get_boolean_member(obj, "isError"));
    /* The reply given is left as it was. */
    untouched = json_to_string(reply, FALSE);
    assert_non_null(strstr(untouched, "RklOQUw="));
    assert_int_equal(
        json_array_get_length(json_object_get_array_member(result_object(plain), "content")), 1);
}

static void
test_exec_and_error_results(void **state)
{
    CarrelExecResult run = {
        .exit_code = 3,
        .stdout_bytes = g_bytes_new_static("out\n", 4),
        .stderr_bytes = g_bytes_new_static("bad", 3),
        .timed_out = TRUE,
    };
    g_autoptr(JsonNode) result = carrel_mcp_exec_result(&run);
    JsonObject *obj = result_object(result);
    const char *text = json_object_get_string_member(
        json_array_get_object_element(json_object_get_array_member(obj, "content"), 0), "text");
    g_autoptr(GError) error =
        g_error_new(CARREL_ERROR, CARREL_ERROR_WRONG_STATE, "session 's-1' is stopped");
    g_autoptr(JsonNode) failed = carrel_mcp_error_result(error);
    JsonObject *fobj = result_object(failed);

    /* A command that ran is a result whatever its exit code. */
    assert_false(json_object_get_boolean_member(obj, "isError"));
    assert_string_equal(text, "exit code: 3 (timed out: killed)\n--- stdout ---\nout\n"
                              "--- stderr ---\nbad\n");
    assert_int_equal(json_object_get_int_member(
                         json_object_get_object_member(obj, "structuredContent"), "exit_code"),
                     3);
    carrel_exec_result_clear(&run);

    assert_true(json_object_get_boolean_member(fobj, "isError"));
    assert_string_equal(
        json_object_get_string_member(
            json_array_get_object_element(json_object_get_array_member(fobj, "content"), 0),
            "text"),
        "wrong_state: session 's-1' is stopped");
}

/* tools/call's params read into a call: the tool, then its arguments typed. */
static CarrelMcpCall *
call_of(const char *params, GError **error)
{
    g_autoptr(JsonNode) node = parse(params);
    CarrelMcpTool tool;

    if (!carrel_mcp_call_tool(node, &tool, error))
        return NULL;
    return carrel_mcp_call_from_params(tool, node, error);
}

static void
assert_call_refused(const char *params, const char *message)
{
    g_autoptr(GError) error = NULL;
    g_autoptr(CarrelMcpCall) call = call_of(params, &error);

    if (call)
        fail_msg("'%s' was accepted", params);
    assert_true(g_error_matches(error, CARREL_ERROR, CARREL_ERROR_INVALID_ARG));
    if (!g_str_equal(error->message, message))
        fail_msg("'%s': message '%s', want '%s'", params, error->message, message);
}

static void
test_call_typed(void **state)
{
    g_autoptr(GError) error = NULL;
    g_autoptr(CarrelMcpCall) fork = call_of(
        "{\"name\":\"sandbox_fork\",\"arguments\":{\"session\":\"s-1\",\"count\":3}}", &error);
    g_autoptr(CarrelMcpCall) snap = call_of(
        "{\"name\":\"snapshot_create\",\"arguments\":{\"session\":\"a\",\"name\":\"n\"}}", &error);
    g_autoptr(CarrelMcpCall) create =
        call_of("{\"name\":\"sandbox_create\",\"arguments\":{\"template\":\"tiny\"}}", &error);
    g_autoptr(CarrelMcpCall) run =
        call_of("{\"name\":\"command_run\",\"arguments\":{\"session\":\"a\",\"command\":\"true\"}}",
                &error);
    g_autoptr(CarrelMcpCall) write =
        call_of("{\"name\":\"file_write\",\"arguments\":{\"session\":\"a\",\"path\":\"/f\","
                "\"content\":\"aGk=\",\"encoding\":\"base64\"}}",
                &error);
    g_autoptr(CarrelMcpCall) computer =
        call_of("{\"name\":\"computer\",\"arguments\":{\"session\":\"a\",\"action\":\"left_click\","
                "\"coordinate\":[1,2]}}",
                &error);
    JsonObject *action;

    assert_null(error);
    assert_int_equal(fork->tool, CARREL_MCP_TOOL_SANDBOX_FORK);
    assert_string_equal(fork->session, "s-1");
    assert_null(fork->snapshot);
    assert_int_equal(fork->count, 3);
    assert_string_equal(snap->name, "n");
    assert_null(create->session);
    assert_string_equal(create->create->template_name, "tiny");
    assert_string_equal(run->exec->argv[0], "/bin/sh");
    assert_int_equal(g_bytes_get_size(write->content), 2);
    assert_string_equal(write->path, "/f");
    action = json_node_get_object(computer->action);
    assert_false(json_object_has_member(action, "session"));
    assert_string_equal(json_object_get_string_member(action, "action"), "left_click");
}

static void
test_call_refused(void **state)
{
    g_autoptr(GError) error = NULL;
    g_autoptr(JsonNode) init = parse("{\"protocolVersion\":\"2024-11-05\"}");

    assert_string_equal(carrel_mcp_initialize_version(init, &error), "2024-11-05");
    assert_null(carrel_mcp_initialize_version(NULL, &error));
    assert_string_equal(error->message, "initialize needs 'protocolVersion', a string");
    assert_call_refused("{}", "tools/call needs the tool's 'name', a string");
    assert_call_refused("{\"name\":7}", "tools/call needs the tool's 'name', a string");
    assert_call_refused("{\"name\":\"rm_rf\"}", "unknown tool 'rm_rf' (see tools/list)");
    assert_call_refused("{\"name\":\"sandbox_pause\",\"arguments\":{}}", "'session' is required");
    assert_call_refused("{\"name\":\"sandbox_fork\",\"arguments\":{\"session\":1}}",
                        "'session' must be a string");
    assert_call_refused("{\"name\":\"sandbox_pause\",\"arguments\":{\"session\":\"a\",\"x\":1}}",
                        "unknown argument 'x'");
    assert_call_refused("{\"name\":\"command_run\",\"arguments\":{\"session\":\"a\"}}",
                        "give either 'command' (a shell line) or 'argv', not both nor neither");
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_messages),
        cmocka_unit_test(test_message_id_and_replies),
        cmocka_unit_test(test_versions),
        cmocka_unit_test(test_origin),
        cmocka_unit_test(test_tools_list),
        cmocka_unit_test(test_arguments),
        cmocka_unit_test(test_exec_arguments),
        cmocka_unit_test(test_file_content),
        cmocka_unit_test(test_file_result),
        cmocka_unit_test(test_computer_result),
        cmocka_unit_test(test_exec_and_error_results),
        cmocka_unit_test(test_call_typed),
        cmocka_unit_test(test_call_refused),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
