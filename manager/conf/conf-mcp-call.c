/*
 * An MCP tools/call (and initialize) read into a typed record: the tool named, its arguments
 * checked against the tool's schema (conf-mcp-tools.c) and then typed, so the API runs tools on
 * records and never reads JSON members itself.
 */
#include "conf/conf-priv.h"

void
carrel_mcp_call_free(CarrelMcpCall *call)
{
    if (!call)
        return;
    g_free(call->session);
    g_free(call->name);
    g_free(call->path);
    g_free(call->to);
    g_free(call->snapshot);
    g_free(call->handle);
    g_free(call->a11y_app);
    carrel_session_request_free(call->create);
    carrel_exec_request_free(call->exec);
    g_clear_pointer(&call->content, g_bytes_unref);
    g_clear_pointer(&call->action, json_node_unref);
    g_free(call);
}

static JsonObject *
params_object(JsonNode *params)
{
    return params && JSON_NODE_HOLDS_OBJECT(params) ? json_node_get_object(params) : NULL;
}

const char *
carrel_mcp_initialize_version(JsonNode *params, GError **error)
{
    const char *version = carrel_conf_peek_string(params_object(params), "protocolVersion");

    if (!version) {
        g_set_error(error, CARREL_ERROR, CARREL_ERROR_INVALID_ARG,
                    "initialize needs 'protocolVersion', a string");
        return NULL;
    }
    return carrel_mcp_version_negotiate(version);
}

gboolean
carrel_mcp_call_tool(JsonNode *params, CarrelMcpTool *ret_tool, GError **error)
{
    const char *name = carrel_conf_peek_string(params_object(params), "name");
    CarrelMcpTool tool;

    if (!name) {
        g_set_error(error, CARREL_ERROR, CARREL_ERROR_INVALID_ARG,
                    "tools/call needs the tool's 'name', a string");
        return FALSE;
    }
    tool = carrel_mcp_tool_from_string(name);
    if (tool == CARREL_MCP_TOOL_LAST) {
        g_set_error(error, CARREL_ERROR, CARREL_ERROR_INVALID_ARG,
                    "unknown tool '%s' (see tools/list)", name);
        return FALSE;
    }
    *ret_tool = tool;
    return TRUE;
}

/* The computer tool's action: its arguments but the session, as the action parsers take it. */
static JsonNode *
computer_action(JsonObject *args)
{
    g_autoptr(JsonObject) action = json_object_new();
    g_autoptr(GList) members = json_object_get_members(args);

    for (GList *l = members; l; l = l->next) {
        if (!g_str_equal(l->data, "session"))
            json_object_set_member(action, l->data, json_object_dup_member(args, l->data));
    }
    return json_node_init_object(json_node_alloc(), action);
}

/* process_read's and process_kill's handle, offsets and signal (the schema checked them). */
static gboolean
process_members(CarrelMcpCall *call, JsonObject *args, GError **error)
{
    const char *sig = carrel_conf_peek_string(args, "signal");

    call->handle = g_strdup(carrel_conf_peek_string(args, "handle"));
    call->signal = sig ? carrel_proc_signal_parse(sig) : 15;
    return carrel_conf_get_int(args, "stdout_offset", 0, CARREL_PROC_OUTPUT_MAX,
                               &call->stdout_offset, error) &&
           carrel_conf_get_int(args, "stderr_offset", 0, CARREL_PROC_OUTPUT_MAX,
                               &call->stderr_offset, error);
}

/* accessibility_tree's scope, app, depth and max_nodes (the schema checked their types). */
static gboolean
a11y_members(CarrelMcpCall *call, JsonObject *args, GError **error)
{
    const char *scope = carrel_conf_peek_string(args, "scope");
    gint64 depth = CARREL_A11Y_DEFAULT_DEPTH;
    gint64 nodes = CARREL_A11Y_DEFAULT_NODES;

    if (!carrel_conf_get_int(args, "depth", 0, CARREL_A11Y_MAX_DEPTH, &depth, error) ||
        !carrel_conf_get_int(args, "max_nodes", 1, CARREL_A11Y_MAX_NODES, &nodes, error))
        return FALSE;
    call->a11y_app = g_strdup(carrel_conf_peek_string(args, "app"));
    if (call->a11y_app && !carrel_a11y_check_app(call->a11y_app, error))
        return FALSE;
    if (call->a11y_app && scope && g_str_equal(scope, "focused")) {
        g_set_error(error, CARREL_ERROR, CARREL_ERROR_INVALID_ARG,
                    "'app' walks the desktop's applications: not with scope focused");
        return FALSE;
    }
    call->a11y_desktop = call->a11y_app || (scope && g_str_equal(scope, "desktop"));
    call->a11y_depth = (guint)depth;
    call->a11y_max_nodes = (guint)nodes;
    return TRUE;
}

/* The members that need more than a copy: a session request, an exec request, file content. */
static gboolean
typed_members(CarrelMcpCall *call, JsonObject *args, GError **error)
{
    g_autoptr(JsonNode) node = NULL;

    switch (call->tool) {
    case CARREL_MCP_TOOL_SANDBOX_CREATE:
        node = json_node_init_object(json_node_alloc(), args);
        call->create = carrel_session_request_from_json(node, error);
        return call->create != NULL;
    case CARREL_MCP_TOOL_COMMAND_RUN:
    case CARREL_MCP_TOOL_PROCESS_START:
        call->exec = carrel_mcp_exec_request_from_arguments(args, error);
        return call->exec != NULL;
    case CARREL_MCP_TOOL_FILE_WRITE:
        call->content = carrel_mcp_file_content_from_arguments(args, error);
        return call->content != NULL;
    case CARREL_MCP_TOOL_COMPUTER:
        call->action = computer_action(args);
        return TRUE;
    case CARREL_MCP_TOOL_ACCESSIBILITY:
        return a11y_members(call, args, error);
    case CARREL_MCP_TOOL_SANDBOX_LIST:
    case CARREL_MCP_TOOL_SANDBOX_DESTROY:
    case CARREL_MCP_TOOL_SANDBOX_PAUSE:
    case CARREL_MCP_TOOL_SANDBOX_RESUME:
    case CARREL_MCP_TOOL_SNAPSHOT_CREATE:
    case CARREL_MCP_TOOL_SNAPSHOT_REVERT:
    case CARREL_MCP_TOOL_SCREENSHOT:
    case CARREL_MCP_TOOL_FILE_READ:
    case CARREL_MCP_TOOL_SANDBOX_HIBERNATE:
    case CARREL_MCP_TOOL_SANDBOX_FORK:
    case CARREL_MCP_TOOL_SNAPSHOT_LIST:
    case CARREL_MCP_TOOL_FILE_LIST:
    case CARREL_MCP_TOOL_FILE_STAT:
    case CARREL_MCP_TOOL_FILE_MKDIR:
    case CARREL_MCP_TOOL_FILE_REMOVE:
    case CARREL_MCP_TOOL_FILE_MOVE:
    case CARREL_MCP_TOOL_PROCESS_LIST:
    case CARREL_MCP_TOOL_LAST:
        return TRUE;
    case CARREL_MCP_TOOL_PROCESS_READ:
    case CARREL_MCP_TOOL_PROCESS_KILL:
        return process_members(call, args, error);
    }
    g_assert_not_reached();
}

CarrelMcpCall *
carrel_mcp_call_from_params(CarrelMcpTool tool, JsonNode *params, GError **error)
{
    g_autoptr(JsonObject) args = NULL;
    g_autoptr(CarrelMcpCall) call = g_new0(CarrelMcpCall, 1);
    gint64 count = 1;

    g_return_val_if_fail(tool < CARREL_MCP_TOOL_LAST, NULL);
    args = carrel_mcp_tool_arguments(tool, carrel_conf_get_node(params_object(params), "arguments"),
                                     error);
    if (!args)
        return NULL;
    /* The schema checked each member's type and range; here they are only copied. */
    call->tool = tool;
    call->session = g_strdup(carrel_conf_peek_string(args, "session"));
    call->path = g_strdup(carrel_conf_peek_string(args, "path"));
    call->to = g_strdup(carrel_conf_peek_string(args, "to"));
    call->flag = json_object_get_boolean_member_with_default(
        args, tool == CARREL_MCP_TOOL_FILE_MKDIR ? "parents" : "recursive", FALSE);
    if (tool == CARREL_MCP_TOOL_SNAPSHOT_CREATE || tool == CARREL_MCP_TOOL_SNAPSHOT_REVERT)
        call->name = g_strdup(carrel_conf_peek_string(args, "name"));
    if (tool == CARREL_MCP_TOOL_SANDBOX_FORK) {
        call->snapshot = g_strdup(carrel_conf_peek_string(args, "snapshot"));
        if (!carrel_conf_get_int(args, "count", 1, CARREL_LIMIT_FORKS, &count, error))
            return NULL;
    }
    call->count = (guint)count;
    if (!typed_members(call, args, error))
        return NULL;
    return g_steal_pointer(&call);
}
