#include "cli/cli-format.h"
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

/* DELETE /v1/sessions/ID/snapshots/NAME. */
static int
delete_snapshot(CarrelCli *cli, const char *id, const char *name)
{
    g_autofree char *base = carrel_cli_item_path("sessions", id, "snapshots");
    g_autofree char *escaped = g_uri_escape_string(name, NULL, FALSE);
    g_autofree char *path = base ? g_strdup_printf("%s/%s", base, escaped) : NULL;
    g_autoptr(JsonNode) reply = NULL;
    g_autoptr(GError) error = NULL;

    if (!path)
        return carrel_cli_usage(cli, "invalid session '%s'", id);
    if (!carrel_cli_call(cli, "DELETE", path, NULL, &reply, &error))
        return carrel_cli_fail(cli, error);
    carrel_cli_print_fields(cli, reply);
    return CARREL_CLI_EXIT_OK;
}

int
carrel_cli_snapshot(CarrelCli *cli, int argc, char **argv)
{
    gboolean delete = FALSE;
    const GOptionEntry entries[] = {
        {"delete", 0, 0, G_OPTION_ARG_NONE, &delete,
         "Delete the snapshot NAME instead (its disk layer stays while others stand on it)", NULL},
        G_OPTION_ENTRY_NULL,
    };
    g_autoptr(JsonNode) body = NULL;
    g_autoptr(JsonNode) reply = NULL;
    g_autoptr(GError) error = NULL;
    g_autofree char *path = NULL;
    JsonObject *obj;

    if (!carrel_cli_parse_options(cli, "snapshot ID NAME",
                                  "Snapshots a session: a running one with its memory (it pauses "
                                  "for a few seconds, then runs on), a stopped one disk only.",
                                  entries, 2, 2, &argc, &argv))
        return CARREL_CLI_EXIT_USAGE;
    if (delete)
        return delete_snapshot(cli, argv[1], argv[2]);
    path = carrel_cli_item_path("sessions", argv[1], "snapshots");
    if (!path)
        return carrel_cli_usage(cli, "invalid session '%s'", argv[1]);
    obj = json_object_new();
    json_object_set_string_member(obj, "name", argv[2]);
    body = json_node_init_object(json_node_alloc(), obj);
    json_object_unref(obj);
    if (!carrel_cli_call(cli, "POST", path, body, &reply, &error))
        return carrel_cli_fail(cli, error);
    carrel_cli_print_fields(cli, reply);
    return CARREL_CLI_EXIT_OK;
}

int
carrel_cli_snapshots(CarrelCli *cli, int argc, char **argv)
{
    g_autoptr(JsonNode) reply = NULL;
    JsonArray *list;
    int exit_code;

    if (!carrel_cli_parse_options(cli, "snapshots ID", "Lists a session's snapshots.", NULL, 1, 1,
                                  &argc, &argv))
        return CARREL_CLI_EXIT_USAGE;
    list = carrel_cli_get_session_list(cli, argv[1], "snapshots", "snapshots", &reply, &exit_code);
    if (!list)
        return exit_code;
    carrel_cli_print_text(
        "ID              NAME              PARENT          MEMORY  SIZE  CREATED\n");
    for (guint i = 0; list && i < json_array_get_length(list); i++) {
        JsonObject *s = json_array_get_object_element(list, i);
        g_autofree char *size = carrel_cli_format_size(
            (guint64)json_object_get_int_member_with_default(s, "size_bytes", 0));
        g_autofree char *line = g_strdup_printf(
            "%-15s %-17s %-15s %-7s %5s  %s\n",
            json_object_get_string_member_with_default(s, "id", "?"),
            json_object_get_string_member_with_default(s, "name", "?"),
            json_object_get_string_member_with_default(s, "parent", NULL)
                ? json_object_get_string_member(s, "parent")
                : "-",
            json_object_get_boolean_member_with_default(s, "memory", FALSE) ? "yes" : "no", size,
            json_object_get_string_member_with_default(s, "created_at", "?"));
        carrel_cli_print_text(line);
    }
    return CARREL_CLI_EXIT_OK;
}

int
carrel_cli_revert(CarrelCli *cli, int argc, char **argv)
{
    g_autoptr(JsonNode) body = NULL;
    JsonObject *obj;

    if (!carrel_cli_parse_options(cli, "revert ID SNAPSHOT",
                                  "Puts a session back to a snapshot (disk, and memory when it has "
                                  "one), dropping what happened since.",
                                  NULL, 2, 2, &argc, &argv))
        return CARREL_CLI_EXIT_USAGE;
    obj = json_object_new();
    json_object_set_string_member(obj, "snapshot", argv[2]);
    body = json_node_init_object(json_node_alloc(), obj);
    json_object_unref(obj);
    return lifecycle_post(cli, argv[1], "revert", body);
}

int
carrel_cli_fork(CarrelCli *cli, int argc, char **argv)
{
    g_autofree char *snapshot = NULL;
    int count = 1;
    const GOptionEntry entries[] = {
        {"snapshot", 's', 0, G_OPTION_ARG_STRING, &snapshot,
         "Snapshot to fork from (default: one taken now)", "NAME"},
        {"count", 'c', 0, G_OPTION_ARG_INT, &count, "How many sessions (default 1)", "N"},
        G_OPTION_ENTRY_NULL,
    };
    g_autoptr(JsonNode) body = NULL;
    g_autoptr(JsonNode) reply = NULL;
    g_autoptr(GError) error = NULL;
    g_autofree char *path = NULL;
    JsonObject *obj;
    JsonArray *list;

    if (!carrel_cli_parse_options(cli, "fork ID",
                                  "Starts new sessions from a snapshot's memory, each on its own "
                                  "disk, side by side.",
                                  entries, 1, 1, &argc, &argv))
        return CARREL_CLI_EXIT_USAGE;
    path = carrel_cli_item_path("sessions", argv[1], "fork");
    if (!path)
        return carrel_cli_usage(cli, "invalid session '%s'", argv[1]);
    obj = json_object_new();
    if (snapshot)
        json_object_set_string_member(obj, "snapshot", snapshot);
    json_object_set_int_member(obj, "count", count);
    body = json_node_init_object(json_node_alloc(), obj);
    json_object_unref(obj);
    if (!carrel_cli_call(cli, "POST", path, body, &reply, &error))
        return carrel_cli_fail(cli, error);
    if (cli->json) {
        carrel_cli_print_json(cli, reply);
        return CARREL_CLI_EXIT_OK;
    }
    list = json_object_get_array_member(json_node_get_object(reply), "sessions");
    for (guint i = 0; list && i < json_array_get_length(list); i++)
        carrel_cli_print_session(cli, json_array_get_element(list, i));
    return CARREL_CLI_EXIT_OK;
}
