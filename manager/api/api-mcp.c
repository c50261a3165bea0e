/*
 * POST /mcp: the Model Context Protocol (2025-06-18, also 2025-03-26 and 2024-11-05) over
 * streamable HTTP, one JSON-RPC message per request, always answered with application/json (no
 * SSE streams, no Mcp-Session-Id: every request stands alone). Tools map onto the manager calls
 * the v1 routes use, with the caller's principal: core decides and records, as for REST.
 */
#include "api/api-priv.h"

#define MCP_INSTRUCTIONS                                                                           \
    "carrel runs sandboxes: full desktop virtual machines. Create one with sandbox_create, see "   \
    "and drive its desktop with computer (or screenshot), run commands with command_run, move "    \
    "files with file_read, file_write, file_list and the other file_* tools, and destroy it with " \
    "sandbox_destroy when done."

typedef JsonNode *(*ToolFunc)(CarrelApiRequest *req, const CarrelMcpCall *call, GError **error);

/*
 * Tools return a tool result; a failure of the manager is a result with isError set (the model
 * reads it and may try again). NULL and error only for arguments that cannot be used at all.
 */

/* A node holding obj, taking the caller's reference. */
static JsonNode *
object_node(JsonObject *obj)
{
    JsonNode *node = json_node_init_object(json_node_alloc(), obj);

    json_object_unref(obj);
    return node;
}

/* A session (taken) in the API's one shape, or the error of the call that gave none. */
static JsonNode *
session_result(CarrelApiRequest *req, CarrelSession *session, const GError *error)
{
    g_autoptr(CarrelSession) owned = session;
    g_autoptr(JsonNode) node = NULL;

    if (!owned)
        return carrel_mcp_error_result(error);
    node = carrel_api_session_json(req->mgr, req->who, owned);
    return carrel_mcp_json_result(node);
}

/* {member: [...]} of items (NULL: the error of the call that gave none). */
static JsonNode *
list_result(const char *member, GPtrArray *items, CarrelApiItemJson to_json, gpointer data,
            const GError *error)
{
    g_autoptr(JsonNode) node = NULL;

    if (!items)
        return carrel_mcp_error_result(error);
    node = carrel_api_list_of(member, items, to_json, data);
    return carrel_mcp_json_result(node);
}

static JsonNode *
tool_sandbox_create(CarrelApiRequest *req, const CarrelMcpCall *call, GError **error)
{
    g_autoptr(GError) local = NULL;
    CarrelSession *session =
        carrel_manager_session_create(req->mgr, req->who, call->create, &local);

    return session_result(req, session, local);
}

static JsonNode *
tool_sandbox_list(CarrelApiRequest *req, const CarrelMcpCall *call, GError **error)
{
    g_autoptr(GError) local = NULL;
    g_autoptr(GPtrArray) sessions = carrel_manager_session_list(req->mgr, req->who, FALSE, &local);
    CarrelApiView view = {req->mgr, req->who};

    return list_result("sessions", sessions, carrel_api_session_item, &view, local);
}

static JsonNode *
tool_sandbox_destroy(CarrelApiRequest *req, const CarrelMcpCall *call, GError **error)
{
    g_autoptr(GError) local = NULL;
    CarrelSession *session =
        carrel_manager_session_destroy(req->mgr, req->who, call->session, &local);

    return session_result(req, session, local);
}

static JsonNode *
tool_sandbox_pause(CarrelApiRequest *req, const CarrelMcpCall *call, GError **error)
{
    g_autoptr(GError) local = NULL;
    CarrelSession *session =
        carrel_manager_session_pause(req->mgr, req->who, call->session, &local);

    return session_result(req, session, local);
}

static JsonNode *
tool_sandbox_resume(CarrelApiRequest *req, const CarrelMcpCall *call, GError **error)
{
    g_autoptr(GError) local = NULL;
    CarrelSession *session =
        carrel_manager_session_resume(req->mgr, req->who, call->session, &local);

    return session_result(req, session, local);
}

static JsonNode *
tool_sandbox_hibernate(CarrelApiRequest *req, const CarrelMcpCall *call, GError **error)
{
    g_autoptr(GError) local = NULL;
    CarrelSession *session =
        carrel_manager_session_hibernate(req->mgr, req->who, call->session, &local);

    return session_result(req, session, local);
}

static JsonNode *
tool_sandbox_fork(CarrelApiRequest *req, const CarrelMcpCall *call, GError **error)
{
    g_autoptr(GError) local = NULL;
    g_autoptr(GPtrArray) forks = carrel_manager_session_fork(req->mgr, req->who, call->session,
                                                             call->snapshot, call->count, &local);
    CarrelApiView view = {req->mgr, req->who};

    return list_result("sessions", forks, carrel_api_session_item, &view, local);
}

static JsonNode *
tool_snapshot_list(CarrelApiRequest *req, const CarrelMcpCall *call, GError **error)
{
    g_autoptr(GError) local = NULL;
    g_autoptr(GPtrArray) snaps =
        carrel_manager_snapshot_list(req->mgr, req->who, call->session, &local);

    return list_result("snapshots", snaps, carrel_api_snapshot_item, NULL, local);
}

static JsonNode *
tool_snapshot_create(CarrelApiRequest *req, const CarrelMcpCall *call, GError **error)
{
    g_autoptr(GError) local = NULL;
    g_autoptr(CarrelSnapshot) snap =
        carrel_manager_snapshot_create(req->mgr, req->who, call->session, call->name, &local);
    g_autoptr(JsonNode) node = snap ? carrel_snapshot_to_json(snap) : NULL;

    return node ? carrel_mcp_json_result(node) : carrel_mcp_error_result(local);
}

static JsonNode *
tool_snapshot_revert(CarrelApiRequest *req, const CarrelMcpCall *call, GError **error)
{
    g_autoptr(GError) local = NULL;
    CarrelSession *session =
        carrel_manager_snapshot_revert(req->mgr, req->who, call->session, call->name, &local);

    return session_result(req, session, local);
}

static JsonNode *
tool_computer(CarrelApiRequest *req, const CarrelMcpCall *call, GError **error)
{
    g_autoptr(GError) local = NULL;
    /* The action as Anthropic's computer tool (or another format) gives it. */
    g_autoptr(JsonNode) reply =
        carrel_manager_session_computer(req->mgr, req->who, call->session, call->action, &local);

    return reply ? carrel_mcp_computer_result(reply) : carrel_mcp_error_result(local);
}

static JsonNode *
tool_screenshot(CarrelApiRequest *req, const CarrelMcpCall *call, GError **error)
{
    CarrelScreenshotRequest shot;
    g_autoptr(GBytes) png = NULL;
    g_autoptr(GError) local = NULL;
    JsonArray *content;

    if (!carrel_screenshot_request_parse(NULL, &shot, error))
        return NULL;
    png = carrel_manager_session_screenshot(req->mgr, req->who, call->session, &shot, &local);
    if (!png)
        return carrel_mcp_error_result(local);
    content = json_array_new();
    json_array_add_element(content, carrel_mcp_image_content(png, "image/png"));
    return carrel_mcp_tool_result(content, NULL, FALSE);
}

static JsonNode *
tool_accessibility(CarrelApiRequest *req, const CarrelMcpCall *call, GError **error)
{
    g_autoptr(GError) local = NULL;
    CarrelA11yRequest a11y = {.desktop = call->a11y_desktop,
                              .app = call->a11y_app,
                              .depth = call->a11y_depth,
                              .max_nodes = call->a11y_max_nodes};
    g_autoptr(JsonNode) tree =
        carrel_manager_session_accessibility(req->mgr, req->who, call->session, &a11y, &local);

    return tree ? carrel_mcp_json_result(tree) : carrel_mcp_error_result(local);
}

static JsonNode *
tool_command_run(CarrelApiRequest *req, const CarrelMcpCall *call, GError **error)
{
    g_autoptr(GError) local = NULL;
    CarrelExecResult result = {0};
    JsonNode *node;

    if (!carrel_manager_session_exec(req->mgr, req->who, call->session, call->exec, &result,
                                     &local))
        return carrel_mcp_error_result(local);
    node = carrel_mcp_exec_result(&result);
    carrel_exec_result_clear(&result);
    return node;
}

static JsonNode *
tool_file_read(CarrelApiRequest *req, const CarrelMcpCall *call, GError **error)
{
    const char *session = call->session;
    const char *path = call->path;
    g_autoptr(GError) local = NULL;
    g_autoptr(GBytes) data =
        carrel_manager_session_file_read(req->mgr, req->who, session, path, &local);
    g_autofree char *s = NULL;
    g_autofree char *p = NULL;
    g_autofree char *uri = NULL;

    if (!data)
        return carrel_mcp_error_result(local);
    s = g_uri_escape_string(session, NULL, FALSE);
    p = g_uri_escape_string(path, "/", FALSE);
    uri = g_strdup_printf("carrel://sessions/%s/files%s", s, p);
    return carrel_mcp_file_result(uri, path, data);
}

static JsonNode *
tool_file_write(CarrelApiRequest *req, const CarrelMcpCall *call, GError **error)
{
    g_autoptr(GError) local = NULL;
    g_autoptr(JsonObject) obj = json_object_new();
    g_autoptr(JsonNode) node = NULL;

    if (!carrel_manager_session_file_write(req->mgr, req->who, call->session, call->path,
                                           call->content, &local))
        return carrel_mcp_error_result(local);
    json_object_set_string_member(obj, "path", call->path);
    json_object_set_int_member(obj, "bytes", (gint64)g_bytes_get_size(call->content));
    node = json_node_init_object(json_node_alloc(), obj);
    return carrel_mcp_json_result(node);
}

/* The fs tools: core's reply (already clean of anything the guest made up) as the result. */
static JsonNode *
tool_fs(CarrelApiRequest *req, const CarrelMcpCall *call, GError **error)
{
    g_autoptr(GError) local = NULL;
    g_autoptr(JsonNode) node = NULL;
    CarrelManager *mgr = req->mgr;

    if (call->tool == CARREL_MCP_TOOL_FILE_LIST)
        node = carrel_manager_session_fs_list(mgr, req->who, call->session, call->path, &local);
    else if (call->tool == CARREL_MCP_TOOL_FILE_STAT)
        node = carrel_manager_session_fs_stat(mgr, req->who, call->session, call->path, &local);
    else if (call->tool == CARREL_MCP_TOOL_FILE_MKDIR)
        node = carrel_manager_session_fs_mkdir(mgr, req->who, call->session, call->path, call->flag,
                                               &local);
    else if (call->tool == CARREL_MCP_TOOL_FILE_REMOVE)
        node = carrel_manager_session_fs_remove(mgr, req->who, call->session, call->path,
                                                call->flag, &local);
    else
        node = carrel_manager_session_fs_move(mgr, req->who, call->session, call->path, call->to,
                                              &local);
    if (!node)
        return carrel_mcp_error_result(local);
    return carrel_mcp_json_result(node);
}

static JsonNode *
tool_process_start(CarrelApiRequest *req, const CarrelMcpCall *call, GError **error)
{
    g_autoptr(GError) local = NULL;
    g_autoptr(CarrelProcInfo) info =
        carrel_manager_proc_start(req->mgr, req->who, call->session, call->exec, &local);
    g_autoptr(JsonNode) node = info ? carrel_proc_info_to_json(info) : NULL;

    return node ? carrel_mcp_json_result(node) : carrel_mcp_error_result(local);
}

static JsonNode *
tool_process_list(CarrelApiRequest *req, const CarrelMcpCall *call, GError **error)
{
    g_autoptr(GError) local = NULL;
    g_autoptr(GPtrArray) list = carrel_manager_proc_list(req->mgr, req->who, call->session, &local);
    g_autoptr(JsonArray) items = json_array_new();
    g_autoptr(JsonObject) obj = json_object_new();
    g_autoptr(JsonNode) node = NULL;

    if (!list)
        return carrel_mcp_error_result(local);
    for (guint i = 0; i < list->len; i++)
        json_array_add_element(items, carrel_proc_info_to_json(g_ptr_array_index(list, i)));
    json_object_set_array_member(obj, "processes", json_array_ref(items));
    node = json_node_init_object(json_node_alloc(), obj);
    return carrel_mcp_json_result(node);
}

static JsonNode *
tool_process_read(CarrelApiRequest *req, const CarrelMcpCall *call, GError **error)
{
    g_autoptr(GError) local = NULL;
    g_autoptr(CarrelProcRead) read =
        carrel_manager_proc_read(req->mgr, req->who, call->session, call->handle,
                                 call->stdout_offset, call->stderr_offset, &local);
    g_autoptr(JsonNode) node = read ? carrel_proc_read_to_json(read) : NULL;

    return node ? carrel_mcp_json_result(node) : carrel_mcp_error_result(local);
}

static JsonNode *
tool_process_kill(CarrelApiRequest *req, const CarrelMcpCall *call, GError **error)
{
    g_autoptr(GError) local = NULL;
    g_autoptr(JsonNode) node = NULL;

    if (!carrel_manager_proc_signal(req->mgr, req->who, call->session, call->handle, call->signal,
                                    &local))
        return carrel_mcp_error_result(local);
    node = json_from_string("{\"signalled\":true}", NULL);
    return carrel_mcp_json_result(node);
}

/* Each tool and the core operation it reaches (the role matrix test reads the operations). */
typedef struct {
    ToolFunc func;
    CarrelOp op;
} Tool;

static const Tool tool_table[CARREL_MCP_TOOL_LAST] = {
    [CARREL_MCP_TOOL_SANDBOX_CREATE] = {tool_sandbox_create, CARREL_OP_SESSION_CREATE},
    [CARREL_MCP_TOOL_SANDBOX_LIST] = {tool_sandbox_list, CARREL_OP_SESSION_LIST},
    [CARREL_MCP_TOOL_SANDBOX_DESTROY] = {tool_sandbox_destroy, CARREL_OP_SESSION_DESTROY},
    [CARREL_MCP_TOOL_SANDBOX_PAUSE] = {tool_sandbox_pause, CARREL_OP_SESSION_PAUSE},
    [CARREL_MCP_TOOL_SANDBOX_RESUME] = {tool_sandbox_resume, CARREL_OP_SESSION_RESUME},
    [CARREL_MCP_TOOL_SNAPSHOT_CREATE] = {tool_snapshot_create, CARREL_OP_SNAPSHOT_CREATE},
    [CARREL_MCP_TOOL_SNAPSHOT_REVERT] = {tool_snapshot_revert, CARREL_OP_SNAPSHOT_REVERT},
    [CARREL_MCP_TOOL_SANDBOX_HIBERNATE] = {tool_sandbox_hibernate, CARREL_OP_SESSION_HIBERNATE},
    [CARREL_MCP_TOOL_SANDBOX_FORK] = {tool_sandbox_fork, CARREL_OP_SESSION_FORK},
    [CARREL_MCP_TOOL_SNAPSHOT_LIST] = {tool_snapshot_list, CARREL_OP_SESSION_READ},
    [CARREL_MCP_TOOL_COMPUTER] = {tool_computer, CARREL_OP_SESSION_INPUT},
    [CARREL_MCP_TOOL_SCREENSHOT] = {tool_screenshot, CARREL_OP_SESSION_SCREENSHOT},
    [CARREL_MCP_TOOL_ACCESSIBILITY] = {tool_accessibility, CARREL_OP_SESSION_SCREENSHOT},
    [CARREL_MCP_TOOL_COMMAND_RUN] = {tool_command_run, CARREL_OP_SESSION_EXEC},
    [CARREL_MCP_TOOL_FILE_READ] = {tool_file_read, CARREL_OP_SESSION_FILE_READ},
    [CARREL_MCP_TOOL_FILE_WRITE] = {tool_file_write, CARREL_OP_SESSION_FILE_WRITE},
    [CARREL_MCP_TOOL_FILE_LIST] = {tool_fs, CARREL_OP_SESSION_FILE_READ},
    [CARREL_MCP_TOOL_FILE_STAT] = {tool_fs, CARREL_OP_SESSION_FILE_READ},
    [CARREL_MCP_TOOL_FILE_MKDIR] = {tool_fs, CARREL_OP_SESSION_FILE_WRITE},
    [CARREL_MCP_TOOL_FILE_REMOVE] = {tool_fs, CARREL_OP_SESSION_FILE_WRITE},
    [CARREL_MCP_TOOL_FILE_MOVE] = {tool_fs, CARREL_OP_SESSION_FILE_WRITE},
    [CARREL_MCP_TOOL_PROCESS_START] = {tool_process_start, CARREL_OP_SESSION_EXEC},
    [CARREL_MCP_TOOL_PROCESS_LIST] = {tool_process_list, CARREL_OP_SESSION_EXEC},
    [CARREL_MCP_TOOL_PROCESS_READ] = {tool_process_read, CARREL_OP_SESSION_EXEC},
    [CARREL_MCP_TOOL_PROCESS_KILL] = {tool_process_kill, CARREL_OP_SESSION_EXEC},
};

CarrelOp
carrel_api_mcp_tool_op(CarrelMcpTool tool)
{
    return (int)tool >= 0 && tool < CARREL_MCP_TOOL_LAST ? tool_table[tool].op : CARREL_OP_LAST;
}

/* Methods: each returns the JSON-RPC reply to msg. */

static JsonNode *invalid_params(CarrelMcpMessage *msg, const char *format, ...) G_GNUC_PRINTF(2, 3);

static JsonNode *
invalid_params(CarrelMcpMessage *msg, const char *format, ...)
{
    g_autofree char *message = NULL;
    va_list args;

    va_start(args, format);
    message = g_strdup_vprintf(format, args);
    va_end(args);
    return carrel_mcp_error_reply(msg->id, CARREL_MCP_INVALID_PARAMS, message);
}

static JsonNode *
method_initialize(CarrelApiRequest *req, CarrelMcpMessage *msg)
{
    g_autoptr(GError) error = NULL;
    const char *version = carrel_mcp_initialize_version(msg->params, &error);
    JsonObject *result, *caps, *tools, *info;

    if (!version)
        return invalid_params(msg, "%s", error->message);
    result = json_object_new();
    json_object_set_string_member(result, "protocolVersion", version);
    caps = json_object_new();
    tools = json_object_new();
    json_object_set_boolean_member(tools, "listChanged", FALSE);
    json_object_set_object_member(caps, "tools", tools);
    json_object_set_object_member(result, "capabilities", caps);
    info = json_object_new();
    json_object_set_string_member(info, "name", "carrel");
    json_object_set_string_member(info, "title", "carrel sandboxes");
    json_object_set_string_member(info, "version", req->version_info);
    json_object_set_object_member(result, "serverInfo", info);
    json_object_set_string_member(result, "instructions", MCP_INSTRUCTIONS);
    return carrel_mcp_result_reply(msg->id, object_node(result));
}

static JsonNode *
method_tools_call(CarrelApiRequest *req, CarrelMcpMessage *msg)
{
    g_autoptr(CarrelMcpCall) call = NULL;
    g_autoptr(GError) error = NULL;
    CarrelMcpTool tool;
    JsonNode *result = NULL;

    if (!carrel_mcp_call_tool(msg->params, &tool, &error))
        return invalid_params(msg, "%s", error->message);
    call = carrel_mcp_call_from_params(tool, msg->params, &error);
    g_message("request %s: mcp tool '%s'", req->request_id, carrel_mcp_tool_to_string(tool));
    if (call)
        result = tool_table[tool].func(req, call, &error);
    if (!call || !result)
        return invalid_params(msg, "invalid arguments for '%s': %s",
                              carrel_mcp_tool_to_string(tool), error->message);
    return carrel_mcp_result_reply(msg->id, result);
}

static JsonNode *
dispatch(CarrelApiRequest *req, CarrelMcpMessage *msg)
{
    g_autofree char *message = NULL;

    if (g_str_equal(msg->method, "initialize"))
        return method_initialize(req, msg);
    if (g_str_equal(msg->method, "ping"))
        return carrel_mcp_result_reply(msg->id, object_node(json_object_new()));
    if (g_str_equal(msg->method, "tools/list"))
        return carrel_mcp_result_reply(msg->id, carrel_mcp_tools_list());
    if (g_str_equal(msg->method, "tools/call"))
        return method_tools_call(req, msg);
    message = g_strdup_printf("method '%s' not found (carrel serves initialize, ping, "
                              "tools/list and tools/call)",
                              msg->method);
    return carrel_mcp_error_reply(msg->id, CARREL_MCP_METHOD_NOT_FOUND, message);
}

/* HTTP-level refusals, in carrel's error envelope: they come before any JSON-RPC. */
static gboolean
check_headers(CarrelApiRequest *req, GError **error)
{
    /* A web page the user visits may post to a local port (DNS rebinding): only local pages. */
    if (req->origin && !carrel_mcp_origin_is_local(req->origin)) {
        g_set_error(error, CARREL_ERROR, CARREL_ERROR_FORBIDDEN,
                    "origin not allowed: /mcp answers pages of 127.0.0.1, ::1 and localhost only");
        return FALSE;
    }
    if (req->mcp_protocol_version && !carrel_mcp_version_supported(req->mcp_protocol_version)) {
        g_set_error(error, CARREL_ERROR, CARREL_ERROR_INVALID_ARG,
                    "unsupported MCP-Protocol-Version: carrel speaks 2025-06-18, 2025-03-26 "
                    "and 2024-11-05");
        return FALSE;
    }
    return TRUE;
}

CarrelApiReply *
carrel_api_mcp_post(CarrelApiRequest *req, GError **error)
{
    gsize len = 0;
    const char *data = req->raw_body ? g_bytes_get_data(req->raw_body, &len) : NULL;
    g_autoptr(JsonNode) root = NULL;
    g_autoptr(JsonNode) id = NULL;
    g_autoptr(CarrelMcpMessage) msg = NULL;
    g_autoptr(GError) local = NULL;

    if (!check_headers(req, error))
        return NULL;
    /* Messages that cannot be read are a 400, with the JSON-RPC error as the body. */
    if (len == 0)
        return carrel_api_reply_new_json(
            SOUP_STATUS_BAD_REQUEST,
            carrel_mcp_error_reply(NULL, CARREL_MCP_PARSE_ERROR,
                                   "empty body: send one JSON-RPC message"));
    root = carrel_conf_parse_json(data, len, &local);
    if (!root)
        return carrel_api_reply_new_json(
            SOUP_STATUS_BAD_REQUEST,
            carrel_mcp_error_reply(NULL, CARREL_MCP_PARSE_ERROR, local->message));
    msg = carrel_mcp_message_from_json(root, &local);
    if (!msg) {
        id = carrel_mcp_message_id(root);
        return carrel_api_reply_new_json(
            SOUP_STATUS_BAD_REQUEST,
            carrel_mcp_error_reply(id, CARREL_MCP_INVALID_REQUEST, local->message));
    }
    /* Notifications (initialized, cancelled...) and responses need nothing from carrel. */
    if (msg->kind != CARREL_MCP_MESSAGE_REQUEST)
        return carrel_api_reply_new_empty(SOUP_STATUS_ACCEPTED);
    return carrel_api_reply_ok(dispatch(req, msg));
}
