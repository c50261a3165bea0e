#include <stdio.h>
#include <unistd.h>

#include "cli/cli.h"

typedef struct {
    gboolean stream;     /* output as it comes */
    gboolean background; /* print the handle, do not wait */
    int timeout_s;       /* -1: not given */
    char *cwd;
    char **env; /* NAME=VALUE, repeatable */
} ExecArgs;

static gboolean
add_env(JsonObject *env, char **entries, CarrelCli *cli)
{
    for (guint i = 0; entries && entries[i]; i++) {
        const char *eq = strchr(entries[i], '=');
        g_autofree char *name = eq ? g_strndup(entries[i], eq - entries[i]) : NULL;

        if (!name || !*name) {
            carrel_cli_usage(cli, "--env takes NAME=VALUE, not '%s'", entries[i]);
            return FALSE;
        }
        json_object_set_string_member(env, name, eq + 1);
    }
    return TRUE;
}

static JsonNode *
exec_body(CarrelCli *cli, const ExecArgs *args, int argc, char **argv)
{
    JsonObject *obj = json_object_new();
    JsonArray *cmd = json_array_new();
    JsonNode *body = json_node_init_object(json_node_alloc(), obj);

    for (int i = 0; i < argc; i++)
        json_array_add_string_element(cmd, argv[i]);
    json_object_set_array_member(obj, "argv", cmd);
    if (args->timeout_s > 0)
        json_object_set_int_member(obj, "timeout_s", args->timeout_s);
    if (args->cwd)
        json_object_set_string_member(obj, "cwd", args->cwd);
    if (args->stream)
        json_object_set_boolean_member(obj, "stream", TRUE);
    if (args->background)
        json_object_set_boolean_member(obj, "background", TRUE);
    if (args->env) {
        JsonObject *env = json_object_new();
        json_object_set_object_member(obj, "env", env);
        if (!add_env(env, args->env, cli)) {
            json_object_unref(obj);
            json_node_unref(body);
            return NULL;
        }
    }
    json_object_unref(obj);
    return body;
}

/* Without --json: the command's own output on our stdout/stderr, its exit code as ours. */
static int
print_result(CarrelCli *cli, JsonNode *reply)
{
    JsonObject *obj = carrel_cli_json_object(reply, NULL);
    const char *out = obj ? carrel_cli_json_string(obj, "stdout") : NULL;
    const char *err = obj ? carrel_cli_json_string(obj, "stderr") : NULL;
    gint64 code = obj ? carrel_cli_json_int(obj, "exit_code", 1) : 1;

    if (cli->json) {
        carrel_cli_print_json(cli, reply);
        return CARREL_CLI_EXIT_OK;
    }
    if (out)
        fputs(out, stdout);
    if (err)
        fputs(err, stderr);
    fflush(stdout);
    if (obj && json_object_get_boolean_member_with_default(obj, "timed_out", FALSE))
        g_printerr("carrel: the command timed out and was killed\n");
    if (obj && json_object_get_boolean_member_with_default(obj, "truncated", FALSE))
        g_printerr("carrel: output was truncated\n");
    return code >= 0 && code <= 255 ? (int)code : 1;
}

int
carrel_cli_exec(CarrelCli *cli, int argc, char **argv)
{
    ExecArgs args = {.timeout_s = -1};
    const GOptionEntry entries[] = {
        {"timeout", 't', 0, G_OPTION_ARG_INT, &args.timeout_s,
         "Seconds before the command is killed (default 60)", "S"},
        {"cwd", 'C', 0, G_OPTION_ARG_STRING, &args.cwd, "Working directory in the guest", "DIR"},
        {"env", 'e', 0, G_OPTION_ARG_STRING_ARRAY, &args.env, "Environment entry (repeatable)",
         "NAME=VALUE"},
        {"stream", 's', 0, G_OPTION_ARG_NONE, &args.stream,
         "Print the output as it comes (--json: one JSON line per event)", NULL},
        {"background", 'b', 0, G_OPTION_ARG_NONE, &args.background,
         "Start it and print its handle (see ps, logs, kill, stdin)", NULL},
        G_OPTION_ENTRY_NULL,
    };
    g_autoptr(JsonNode) body = NULL;
    g_autoptr(JsonNode) reply = NULL;
    g_autoptr(GError) error = NULL;
    g_autofree char *path = NULL;
    int first = 2, exit_code = CARREL_CLI_EXIT_USAGE;

    if (carrel_cli_parse_options(cli, "exec ID [--] COMMAND [ARG...]",
                                 "Runs a command in a session through its guest agent and "
                                 "exits with its exit code.",
                                 entries, 2, G_MAXUINT, &argc, &argv)) {
        if (g_str_equal(argv[first], "--"))
            first++;
        path = carrel_cli_item_path("sessions", argv[1], "exec");
        if (first >= argc || !path)
            exit_code = carrel_cli_usage(cli, "usage: carrel exec ID -- COMMAND [ARG...]");
        else if (args.stream && args.background)
            exit_code = carrel_cli_usage(cli, "give --stream or --background, not both");
        else if ((body = exec_body(cli, &args, argc - first, argv + first)) == NULL)
            exit_code = CARREL_CLI_EXIT_USAGE;
        else if (args.stream)
            exit_code = carrel_cli_exec_stream(cli, path, body);
        else if (args.background)
            exit_code = carrel_cli_exec_background(cli, path, body);
        else if (!carrel_cli_call(cli, "POST", path, body, &reply, &error))
            exit_code = carrel_cli_fail(cli, error);
        else
            exit_code = print_result(cli, reply);
    }
    g_free(args.cwd);
    g_strfreev(args.env);
    return exit_code;
}
