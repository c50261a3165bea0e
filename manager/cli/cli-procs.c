/* Background processes and streamed commands: exec --stream / --background, ps, logs, kill,
 * stdin. */
#include <stdio.h>
#include <unistd.h>

#include "cli/cli.h"

#define LOGS_POLL_MS 500
#define STDIN_MAX (256 * 1024)

typedef struct {
    CarrelCli *cli;
    gint64 exit_code; /* -1 until the exit event */
    gboolean timed_out;
    gboolean truncated;
    GError *error; /* an error event */
} StreamState;

/* Writes the bytes of a chunk event ({data, data_base64}) as they were. */
static void
write_chunk(JsonNode *data, FILE *to)
{
    JsonObject *obj = carrel_cli_json_object(data, NULL);
    const char *b64 = obj ? carrel_cli_json_string(obj, "data_base64") : NULL;
    gsize len = 0;
    g_autofree guchar *bytes = b64 ? g_base64_decode(b64, &len) : NULL;

    if (len)
        fwrite(bytes, 1, len, to);
    fflush(to);
}

static gboolean
on_event(const char *event, JsonNode *data, gpointer user_data)
{
    StreamState *st = user_data;
    JsonObject *obj = carrel_cli_json_object(data, NULL);

    if (st->cli->json) {
        g_autoptr(JsonNode) line = json_node_copy(data);

        if (JSON_NODE_HOLDS_OBJECT(line))
            json_object_set_string_member(json_node_get_object(line), "event", event);
        carrel_cli_print_json_line(line);
    } else if (g_str_equal(event, "stdout")) {
        write_chunk(data, stdout);
    } else if (g_str_equal(event, "stderr")) {
        write_chunk(data, stderr);
    }
    if (g_str_equal(event, "exit") && obj) {
        st->exit_code = carrel_cli_json_int(obj, "exit_code", 1);
        st->timed_out = json_object_get_boolean_member_with_default(obj, "timed_out", FALSE);
        st->truncated = json_object_get_boolean_member_with_default(obj, "truncated", FALSE);
        return FALSE;
    }
    if (g_str_equal(event, "error")) {
        JsonObject *err = obj ? carrel_cli_json_object(data, "error") : NULL;
        const char *msg = err ? carrel_cli_json_string(err, "message") : NULL;

        g_set_error(&st->error, CARREL_ERROR, CARREL_ERROR_FAILED, "%s",
                    msg ? msg : "the stream failed");
        return FALSE;
    }
    return TRUE;
}

int
carrel_cli_exec_stream(CarrelCli *cli, const char *path, JsonNode *body)
{
    StreamState st = {.cli = cli, .exit_code = -1};
    g_autoptr(GError) error = NULL;

    if (!carrel_client_call_events(cli->client, "POST", path, body, on_event, &st, &error))
        return carrel_cli_fail(cli, error);
    if (st.error) {
        int code = carrel_cli_fail(cli, st.error);

        g_error_free(st.error);
        return code;
    }
    if (st.exit_code < 0) {
        g_set_error(&error, CARREL_ERROR, CARREL_ERROR_FAILED,
                    "the stream ended before the command did");
        return carrel_cli_fail(cli, error);
    }
    if (!cli->json && st.timed_out)
        g_printerr("carrel: the command timed out and was killed\n");
    if (!cli->json && st.truncated)
        g_printerr("carrel: the output passed its bound; the command was killed\n");
    return st.exit_code <= 255 ? (int)st.exit_code : 1;
}

int
carrel_cli_exec_background(CarrelCli *cli, const char *path, JsonNode *body)
{
    g_autoptr(JsonNode) reply = NULL;
    g_autoptr(GError) error = NULL;
    JsonObject *obj;

    if (!carrel_cli_call(cli, "POST", path, body, &reply, &error))
        return carrel_cli_fail(cli, error);
    if (cli->json) {
        carrel_cli_print_json(cli, reply);
        return CARREL_CLI_EXIT_OK;
    }
    obj = carrel_cli_json_object(reply, NULL);
    g_print("%s\n", carrel_cli_json_string(obj, "handle"));
    return CARREL_CLI_EXIT_OK;
}

static char *
process_path(const char *id, const char *handle, const char *action)
{
    g_autofree char *session = carrel_cli_escape_segment(id);
    g_autofree char *proc = handle ? carrel_cli_escape_segment(handle) : NULL;

    if (!session || (handle && !proc))
        return NULL;
    if (!handle)
        return g_strdup_printf("/v1/sessions/%s/processes", session);
    return g_strdup_printf("/v1/sessions/%s/processes/%s%s%s", session, proc, action ? "/" : "",
                           action ? action : "");
}

static void
print_process_row(JsonObject *p)
{
    JsonArray *argv = json_object_get_array_member(p, "argv");
    g_autoptr(GString) cmd = g_string_new(NULL);
    g_autofree char *clean = NULL;
    g_autofree char *exit_text = NULL;
    const char *state = carrel_cli_json_string(p, "state");

    for (guint i = 0; argv && i < json_array_get_length(argv); i++) {
        JsonNode *n = json_array_get_element(argv, i);

        if (JSON_NODE_HOLDS_VALUE(n) && json_node_get_value_type(n) == G_TYPE_STRING)
            g_string_append_printf(cmd, "%s%s", i ? " " : "", json_node_get_string(n));
    }
    clean = carrel_cli_clean_text(cmd->str);
    exit_text = g_strcmp0(state, "exited") == 0
                    ? g_strdup_printf("%" G_GINT64_FORMAT, carrel_cli_json_int(p, "exit_code", -1))
                    : g_strdup("-");
    g_print("%-18s %-8" G_GINT64_FORMAT " %-8s %-5s %-20s %s\n",
            carrel_cli_json_string(p, "handle"), carrel_cli_json_int(p, "pid", -1),
            state ? state : "?", exit_text,
            carrel_cli_json_string(p, "started_at") ? carrel_cli_json_string(p, "started_at") : "-",
            clean);
}

int
carrel_cli_ps(CarrelCli *cli, int argc, char **argv)
{
    g_autoptr(JsonNode) reply = NULL;
    g_autoptr(GError) error = NULL;
    g_autofree char *path = NULL;
    JsonArray *list;

    if (!carrel_cli_parse_options(cli, "ps ID",
                                  "Lists a session's background processes (exec --background), "
                                  "oldest first.",
                                  NULL, 1, 1, &argc, &argv))
        return CARREL_CLI_EXIT_USAGE;
    path = process_path(argv[1], NULL, NULL);
    if (!path)
        return carrel_cli_usage(cli, "usage: carrel ps ID");
    if (!carrel_cli_call(cli, "GET", path, NULL, &reply, &error))
        return carrel_cli_fail(cli, error);
    if (cli->json) {
        carrel_cli_print_json(cli, reply);
        return CARREL_CLI_EXIT_OK;
    }
    list = carrel_cli_json_array(reply, "processes");
    g_print("%-18s %-8s %-8s %-5s %-20s %s\n", "HANDLE", "PID", "STATE", "EXIT", "STARTED",
            "COMMAND");
    for (guint i = 0; list && i < json_array_get_length(list); i++) {
        JsonNode *n = json_array_get_element(list, i);

        if (JSON_NODE_HOLDS_OBJECT(n))
            print_process_row(json_node_get_object(n));
    }
    return CARREL_CLI_EXIT_OK;
}

int
carrel_cli_kill(CarrelCli *cli, int argc, char **argv)
{
    g_autofree char *sig = NULL;
    const GOptionEntry entries[] = {
        {"signal", 's', 0, G_OPTION_ARG_STRING, &sig,
         "TERM (default), KILL, INT, HUP, QUIT, USR1, USR2, STOP, CONT or a number", "SIG"},
        G_OPTION_ENTRY_NULL,
    };
    g_autoptr(JsonNode) body = json_node_new(JSON_NODE_OBJECT);
    g_autoptr(JsonObject) obj = json_object_new();
    g_autoptr(GError) error = NULL;
    g_autofree char *path = NULL;

    if (!carrel_cli_parse_options(cli, "kill ID HANDLE",
                                  "Signals a background process and what it started.", entries, 2,
                                  2, &argc, &argv))
        return CARREL_CLI_EXIT_USAGE;
    path = process_path(argv[1], argv[2], "kill");
    if (!path)
        return carrel_cli_usage(cli, "usage: carrel kill ID HANDLE");
    if (sig)
        json_object_set_string_member(obj, "signal", sig);
    json_node_set_object(body, obj);
    if (!carrel_cli_call(cli, "POST", path, body, NULL, &error))
        return carrel_cli_fail(cli, error);
    if (cli->json) {
        g_autoptr(JsonNode) ok = json_from_string("{\"signalled\":true}", NULL);

        carrel_cli_print_json(cli, ok);
    }
    return CARREL_CLI_EXIT_OK;
}

/* Reads from the offsets until nothing more is there (and, following, until it exited). */
static int
logs_loop(CarrelCli *cli, const char *path, gboolean follow, JsonNode **ret_last, GString *out_text,
          GString *err_text)
{
    gint64 out = 0, err = 0;

    for (;;) {
        g_autofree char *url =
            g_strdup_printf("%s?stdout_offset=%" G_GINT64_FORMAT "&stderr_offset=%" G_GINT64_FORMAT,
                            path, out, err);
        g_autoptr(JsonNode) reply = NULL;
        g_autoptr(GError) error = NULL;
        JsonObject *obj;
        gboolean exited;

        if (!carrel_cli_call(cli, "GET", url, NULL, &reply, &error))
            return carrel_cli_fail(cli, error);
        obj = carrel_cli_json_object(reply, NULL);
        out = carrel_cli_json_int(obj, "stdout_next", out);
        err = carrel_cli_json_int(obj, "stderr_next", err);
        exited = g_strcmp0(carrel_cli_json_string(obj, "state"), "exited") == 0;
        if (cli->json) {
            g_string_append(out_text, carrel_cli_json_string(obj, "stdout"));
            g_string_append(err_text, carrel_cli_json_string(obj, "stderr"));
        } else {
            JsonNode *o = json_object_get_member(obj, "stdout_base64");
            JsonNode *e = json_object_get_member(obj, "stderr_base64");
            g_autoptr(JsonNode) wo = json_node_new(JSON_NODE_OBJECT);
            g_autoptr(JsonNode) we = json_node_new(JSON_NODE_OBJECT);
            JsonObject *oo = json_object_new(), *eo = json_object_new();

            json_object_set_member(oo, "data_base64",
                                   o ? json_node_copy(o) : json_node_new(JSON_NODE_NULL));
            json_object_set_member(eo, "data_base64",
                                   e ? json_node_copy(e) : json_node_new(JSON_NODE_NULL));
            json_node_take_object(wo, oo);
            json_node_take_object(we, eo);
            write_chunk(wo, stdout);
            write_chunk(we, stderr);
        }
        if (!json_object_get_boolean_member_with_default(obj, "more", FALSE)) {
            if (!follow || exited) {
                *ret_last = g_steal_pointer(&reply);
                return CARREL_CLI_EXIT_OK;
            }
            g_usleep(LOGS_POLL_MS * 1000);
        }
    }
}

int
carrel_cli_logs(CarrelCli *cli, int argc, char **argv)
{
    gboolean follow = FALSE;
    const GOptionEntry entries[] = {
        {"follow", 'f', 0, G_OPTION_ARG_NONE, &follow, "Keep printing until the process ends",
         NULL},
        G_OPTION_ENTRY_NULL,
    };
    g_autoptr(JsonNode) last = NULL;
    g_autoptr(GString) out = g_string_new(NULL);
    g_autoptr(GString) err = g_string_new(NULL);
    g_autofree char *path = NULL;
    JsonObject *obj;
    int code;

    if (!carrel_cli_parse_options(cli, "logs ID HANDLE",
                                  "Prints a background process's output so far (--json: with "
                                  "its state and exit code).",
                                  entries, 2, 2, &argc, &argv))
        return CARREL_CLI_EXIT_USAGE;
    path = process_path(argv[1], argv[2], NULL);
    if (!path)
        return carrel_cli_usage(cli, "usage: carrel logs ID HANDLE");
    code = logs_loop(cli, path, follow, &last, out, err);
    if (code != CARREL_CLI_EXIT_OK || !cli->json)
        return code;
    obj = carrel_cli_json_object(last, NULL);
    json_object_set_string_member(obj, "stdout", out->str);
    json_object_set_string_member(obj, "stderr", err->str);
    json_object_remove_member(obj, "stdout_base64");
    json_object_remove_member(obj, "stderr_base64");
    json_object_remove_member(obj, "more");
    carrel_cli_print_json(cli, last);
    return CARREL_CLI_EXIT_OK;
}

int
carrel_cli_stdin(CarrelCli *cli, int argc, char **argv)
{
    gboolean close_input = FALSE;
    const GOptionEntry entries[] = {
        {"close", 'c', 0, G_OPTION_ARG_NONE, &close_input,
         "End its input (after what our standard input gave, if anything)", NULL},
        G_OPTION_ENTRY_NULL,
    };
    g_autoptr(JsonNode) body = json_node_new(JSON_NODE_OBJECT);
    JsonObject *obj = json_object_new();
    g_autoptr(GByteArray) data = g_byte_array_new();
    g_autoptr(GError) error = NULL;
    g_autofree char *path = NULL;
    guint8 buf[8192];
    gssize n;

    json_node_take_object(body, obj);
    if (!carrel_cli_parse_options(cli, "stdin ID HANDLE",
                                  "Sends our standard input (up to 256 KiB; none when it is a "
                                  "terminal) to a background process.",
                                  entries, 2, 2, &argc, &argv))
        return CARREL_CLI_EXIT_USAGE;
    path = process_path(argv[1], argv[2], "stdin");
    if (!path)
        return carrel_cli_usage(cli, "usage: carrel stdin ID HANDLE [--close]");
    while (!isatty(STDIN_FILENO) && (n = read(STDIN_FILENO, buf, sizeof(buf))) > 0) {
        if (data->len + (gsize)n > STDIN_MAX)
            return carrel_cli_usage(cli, "standard input is over %d bytes", STDIN_MAX);
        g_byte_array_append(data, buf, (guint)n);
    }
    if (data->len) {
        g_autofree char *b64 = g_base64_encode(data->data, data->len);

        json_object_set_string_member(obj, "data_base64", b64);
    }
    if (close_input)
        json_object_set_boolean_member(obj, "close", TRUE);
    if (!data->len && !close_input)
        return carrel_cli_usage(cli, "nothing to send: pipe something in, or give --close");
    if (!carrel_cli_call(cli, "POST", path, body, NULL, &error))
        return carrel_cli_fail(cli, error);
    if (cli->json) {
        g_autoptr(JsonNode) ok = json_from_string("{\"sent\":true}", NULL);

        carrel_cli_print_json(cli, ok);
    }
    return CARREL_CLI_EXIT_OK;
}
