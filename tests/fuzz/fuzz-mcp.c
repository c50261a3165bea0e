/*
 * libFuzzer harness for MCP messages (untrusted client input of POST /mcp and `carrel mcp`):
 * the JSON-RPC envelope, then the input as every tool's arguments and, where they pass, the
 * command and file content parsers, and the message's params as initialize's and tools/call's
 * (the typed call of every tool).
 * Built with -Dfuzz=true and clang (see tests/fuzz/meson.build), then:
 *   ./build-fuzz/tests/fuzz/fuzz-mcp -max_len=65536 CORPUS_DIR
 */
#include <stddef.h>
#include <stdint.h>

#include "conf/conf.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void
try_tools(JsonNode *arguments)
{
    for (int t = 0; t < CARREL_MCP_TOOL_LAST; t++) {
        g_autoptr(JsonObject) args = carrel_mcp_tool_arguments(t, arguments, NULL);

        /* Explicit frees: clang warns about cleanup variables that are never read. */
        if (args && t == CARREL_MCP_TOOL_COMMAND_RUN)
            carrel_exec_request_free(carrel_mcp_exec_request_from_arguments(args, NULL));
        else if (args && t == CARREL_MCP_TOOL_FILE_WRITE)
            g_bytes_unref(carrel_mcp_file_content_from_arguments(args, NULL));
    }
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    g_autoptr(JsonNode) node = carrel_conf_parse_json((const char *)data, size, NULL);
    g_autoptr(CarrelMcpMessage) msg = node ? carrel_mcp_message_from_json(node, NULL) : NULL;

    if (node) {
        json_node_unref(carrel_mcp_message_id(node));
        json_node_unref(carrel_mcp_computer_result(node));
        try_tools(node);
    }
    if (msg && msg->params) {
        JsonObject *params = json_node_get_object(msg->params);
        CarrelMcpTool tool;

        try_tools(json_object_get_member(params, "arguments"));
        carrel_mcp_initialize_version(msg->params, NULL);
        if (carrel_mcp_call_tool(msg->params, &tool, NULL))
            carrel_mcp_call_free(carrel_mcp_call_from_params(tool, msg->params, NULL));
        for (int t = 0; t < CARREL_MCP_TOOL_LAST; t++)
            carrel_mcp_call_free(carrel_mcp_call_from_params(t, msg->params, NULL));
    }
    return 0;
}
