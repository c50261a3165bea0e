#include "cli/cli.h"

#define CLI_MAX_STOP_TIMEOUT_S 3600

/* POSTs body (or {}) to /v1/sessions/ID/action and prints the session it returns. */
static int
lifecycle_post(CarrelCli *cli, const char *id, const char *action, JsonNode *body)
{
    g_autoptr(JsonNode) empty = carrel_cli_json_new_object();
    g_autoptr(JsonNode) reply = NULL;
    g_autoptr(GError) error = NULL;
    g_autofree char *path = carrel_cli_item_path("sessions", id, action);

    if (!path)
        return carrel_cli_usage(cli, "invalid session '%s'", id);
    if (!carrel_cli_call(cli, "POST", path, body ? body : empty, &reply, &error))
        return carrel_cli_fail(cli, error);
    carrel_cli_print_session(cli, reply);
    return CARREL_CLI_EXIT_OK;
}

int
carrel_cli_start(CarrelCli *cli, int argc, char **argv)
{
    if (!carrel_cli_parse_options(cli, "start ID",
                                  "Starts a stopped session and waits for its guest agent.", NULL,
                                  1, 1, &argc, &argv))
        return CARREL_CLI_EXIT_USAGE;
    return lifecycle_post(cli, argv[1], "start", NULL);
}

int
carrel_cli_stop(CarrelCli *cli, int argc, char **argv)
{
    int timeout_s = -1;
    const GOptionEntry entries[] = {
        {"timeout", 't', 0, G_OPTION_ARG_INT, &timeout_s,
         "Seconds to wait for a clean shutdown before forcing the VM off (default 30)", "S"},
        G_OPTION_ENTRY_NULL,
    };
    g_autoptr(JsonNode) body = NULL;
    JsonObject *obj;

    if (!carrel_cli_parse_options(cli, "stop ID", "Stops a session.", entries, 1, 1, &argc, &argv))
        return CARREL_CLI_EXIT_USAGE;
    obj = json_object_new();
    body = json_node_init_object(json_node_alloc(), obj);
    json_object_unref(obj);
    if (timeout_s != -1) {
        if (timeout_s < 0 || timeout_s > CLI_MAX_STOP_TIMEOUT_S)
            return carrel_cli_usage(cli, "--timeout must be between 0 and %d seconds",
                                    CLI_MAX_STOP_TIMEOUT_S);
        json_object_set_int_member(obj, "timeout_s", timeout_s);
    }
    return lifecycle_post(cli, argv[1], "stop", body);
}

/* A verb that takes only the session: pause, resume, hibernate. */
static int
simple_verb(CarrelCli *cli, int argc, char **argv, const char *verb, const char *summary)
{
    g_autofree char *params = g_strconcat(verb, " ID", NULL);

    if (!carrel_cli_parse_options(cli, params, summary, NULL, 1, 1, &argc, &argv))
        return CARREL_CLI_EXIT_USAGE;
    return lifecycle_post(cli, argv[1], verb, NULL);
}

int
carrel_cli_pause(CarrelCli *cli, int argc, char **argv)
{
    return simple_verb(cli, argc, argv, "pause",
                       "Pauses a running session: its vCPUs stop, its memory stays in QEMU.");
}

int
carrel_cli_resume(CarrelCli *cli, int argc, char **argv)
{
    return simple_verb(cli, argc, argv, "resume",
                       "Resumes a paused session, or restores a hibernated one (clock set).");
}

int
carrel_cli_hibernate(CarrelCli *cli, int argc, char **argv)
{
    return simple_verb(cli, argc, argv, "hibernate",
                       "Saves a session's memory to disk and ends its QEMU: no CPU or RAM held, "
                       "survives daemon restarts and host reboots. 'resume' restores it.");
}
