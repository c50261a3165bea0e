/*
 * carrel mcp: MCP over stdio, for clients that start a local program (Claude Desktop and the
 * like). Every line on stdin is one JSON-RPC message, posted as is to carreld's POST /mcp; the
 * reply, when there is one, goes to stdout as one line. Messages are relayed one at a time, in
 * order. stdout carries protocol only; diagnostics go to stderr.
 */
#include <stdio.h>
#include <string.h>

#include "cli/cli.h"
#include "conf/conf.h"

/* Longest message read from stdin; longer lines are refused (and skipped to their end). */
#define MCP_MAX_LINE (1024 * 1024)
#define MCP_HTTP_ACCEPTED 202

/* Writes one message and its newline, then flushes: the client waits for the whole line. */
static gboolean
write_line(const char *data, gsize len)
{
    return fwrite(data, 1, len, stdout) == len && fputc('\n', stdout) != EOF && fflush(stdout) == 0;
}

static gboolean
write_node(JsonNode *node)
{
    g_autofree char *text = json_to_string(node, FALSE);

    return write_line(text, strlen(text));
}

/*
 * Answers the message in line with a JSON-RPC error when it is a request (the client waits for
 * it); notifications and responses get nothing. Always said on stderr too.
 */
static gboolean
answer_error(GBytes *line, CarrelMcpErrorCode code, const char *message)
{
    gsize len = 0;
    const char *data = line ? g_bytes_get_data(line, &len) : NULL;
    g_autoptr(JsonNode) root = data ? carrel_conf_parse_json(data, len, NULL) : NULL;
    g_autoptr(CarrelMcpMessage) msg = root ? carrel_mcp_message_from_json(root, NULL) : NULL;
    g_autoptr(JsonNode) reply = NULL;

    g_printerr("carrel mcp: %s\n", message);
    if (msg && msg->kind != CARREL_MCP_MESSAGE_REQUEST)
        return TRUE;
    reply = carrel_mcp_error_reply(msg ? msg->id : NULL, code, message);
    return write_node(reply);
}

/* carreld's answer to a message: a JSON-RPC message is passed on, an error envelope becomes a
 * JSON-RPC error. */
static gboolean
pass_reply(GBytes *line, guint status, GBytes *reply)
{
    gsize len = 0;
    const char *data = g_bytes_get_data(reply, &len);
    g_autoptr(JsonNode) root = NULL;
    JsonObject *err;
    g_autofree char *message = NULL;

    /* The common case, and the large one (screenshots): already one line of JSON. */
    if (status == 200 && len > 0 && !memchr(data, '\n', len))
        return write_line(data, len);
    root = len ? carrel_conf_parse_json(data, len, NULL) : NULL;
    if (root && JSON_NODE_HOLDS_OBJECT(root) &&
        json_object_has_member(json_node_get_object(root), "jsonrpc"))
        return write_node(root);
    err = carrel_cli_json_object(root, "error");
    message = g_strdup_printf("carreld refused the message (HTTP %u): %s: %s", status,
                              err ? carrel_cli_json_string(err, "code") : "failed",
                              err ? carrel_cli_json_string(err, "message") : "no error message");
    return answer_error(line, CARREL_MCP_SERVER_ERROR, message);
}

static gboolean
relay(CarrelCli *cli, GBytes *line)
{
    g_autoptr(GBytes) reply = NULL;
    g_autoptr(GError) error = NULL;
    guint status = 0;

    if (!carrel_client_request_raw(cli->client, "POST", "/mcp", "application/json", line, &status,
                                   &reply, NULL, &error))
        return answer_error(line, CARREL_MCP_SERVER_ERROR, error->message);
    if (status == MCP_HTTP_ACCEPTED)
        return TRUE;
    return pass_reply(line, status, reply);
}

typedef enum {
    LINE_OK,
    LINE_TOO_LONG, /* read to its end, content dropped */
    LINE_EOF,
} LineStatus;

/* Reads one line without its '\n' into buf, keeping at most max bytes of it. */
static LineStatus
read_line(FILE *in, GByteArray *buf, gsize max)
{
    gboolean any = FALSE, too_long = FALSE;
    int c;

    g_byte_array_set_size(buf, 0);
    while ((c = getc(in)) != EOF) {
        guint8 byte = (guint8)c;

        any = TRUE;
        if (c == '\n')
            break;
        if (buf->len < max)
            g_byte_array_append(buf, &byte, 1);
        else
            too_long = TRUE;
    }
    if (!any)
        return LINE_EOF;
    return too_long ? LINE_TOO_LONG : LINE_OK;
}

static gboolean
is_blank(const guint8 *data, gsize len)
{
    for (gsize i = 0; i < len; i++) {
        if (!g_ascii_isspace(data[i]))
            return FALSE;
    }
    return TRUE;
}

static int
serve(CarrelCli *cli)
{
    g_autoptr(GByteArray) buf = g_byte_array_sized_new(64 * 1024);
    LineStatus st;

    if (!cli->has_token)
        g_printerr("carrel mcp: no API token (CARREL_TOKEN or --token-file): carreld will "
                   "refuse every message\n");
    while ((st = read_line(stdin, buf, MCP_MAX_LINE)) != LINE_EOF) {
        g_autoptr(GBytes) line = NULL;
        gboolean ok;

        if (st == LINE_TOO_LONG) {
            ok = answer_error(NULL, CARREL_MCP_INVALID_REQUEST,
                              "message refused: longer than 1 MiB");
        } else if (is_blank(buf->data, buf->len)) {
            continue;
        } else {
            if (buf->data[buf->len - 1] == '\r')
                g_byte_array_set_size(buf, buf->len - 1);
            line = g_bytes_new(buf->data, buf->len);
            ok = relay(cli, line);
        }
        if (!ok) {
            g_printerr("carrel mcp: cannot write to stdout: stopping\n");
            return CARREL_CLI_EXIT_FAILED;
        }
    }
    if (ferror(stdin)) {
        g_printerr("carrel mcp: cannot read stdin: stopping\n");
        return CARREL_CLI_EXIT_FAILED;
    }
    return CARREL_CLI_EXIT_OK;
}

int
carrel_cli_mcp(CarrelCli *cli, int argc, char **argv)
{
    if (!carrel_cli_parse_options(cli, "mcp",
                                  "Serves MCP (Model Context Protocol) on stdin and stdout for "
                                  "local clients such as Claude Desktop:\none JSON-RPC message "
                                  "per line (at most 1 MiB), each relayed to carreld's POST /mcp. "
                                  "Ends at the end of stdin.",
                                  NULL, 0, 0, &argc, &argv))
        return CARREL_CLI_EXIT_USAGE;
    return serve(cli);
}
