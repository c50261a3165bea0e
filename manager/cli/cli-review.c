/* cli: what people reviewing sessions use from a terminal: the control lease, approvals (named
 * tokens are cli-token.c's). */
#include "cli/cli.h"

static JsonNode *
object_with(const char *k1, const char *v1, const char *k2, const char *v2)
{
    JsonObject *obj = json_object_new();

    if (k1 && v1)
        json_object_set_string_member(obj, k1, v1);
    if (k2 && v2)
        json_object_set_string_member(obj, k2, v2);
    return json_node_init_object(json_node_alloc(), obj);
}

static int
post_and_print(CarrelCli *cli, const char *path, JsonNode *body)
{
    g_autoptr(JsonNode) reply = NULL;
    g_autoptr(GError) error = NULL;

    if (!carrel_cli_call(cli, "POST", path, body, &reply, &error))
        return carrel_cli_fail(cli, error);
    carrel_cli_print_fields(cli, reply);
    return CARREL_CLI_EXIT_OK;
}

int
carrel_cli_control(CarrelCli *cli, int argc, char **argv)
{
    g_autofree char *path = NULL;
    g_autoptr(JsonNode) body = NULL;

    if (!carrel_cli_parse_options(cli, "ID take|release",
                                  "Takes a session's control lease (agent input is refused with "
                                  "409 until release) or releases it.",
                                  NULL, 2, 2, &argc, &argv))
        return CARREL_CLI_EXIT_USAGE;
    if (g_strcmp0(argv[2], "take") != 0 && g_strcmp0(argv[2], "release") != 0)
        return carrel_cli_usage(cli, "control takes 'take' or 'release', not '%s'", argv[2]);
    path = carrel_cli_item_path("sessions", argv[1], "control");
    if (!path)
        return carrel_cli_usage(cli, "invalid session '%s'", argv[1]);
    body = object_with("action", argv[2], NULL, NULL);
    return post_and_print(cli, path, body);
}

int
carrel_cli_approvals(CarrelCli *cli, int argc, char **argv)
{
    gboolean all = FALSE;
    const GOptionEntry entries[] = {
        {"all", 0, 0, G_OPTION_ARG_NONE, &all, "Decided ones too (the latest 200)", NULL},
        G_OPTION_ENTRY_NULL,
    };
    g_autoptr(JsonNode) reply = NULL;
    g_autoptr(GError) error = NULL;
    JsonArray *list;

    if (!carrel_cli_parse_options(cli, "", "Lists actions waiting for a reviewer.", entries, 0, 0,
                                  &argc, &argv))
        return CARREL_CLI_EXIT_USAGE;
    if (!carrel_cli_call(cli, "GET", all ? "/v1/approvals?state=all" : "/v1/approvals", NULL,
                         &reply, &error))
        return carrel_cli_fail(cli, error);
    if (cli->json) {
        carrel_cli_print_json(cli, reply);
        return CARREL_CLI_EXIT_OK;
    }
    list = json_object_get_array_member(json_node_get_object(reply), "approvals");
    carrel_cli_print_text("ID                SESSION           ACTION              STATE     "
                          "REQUESTED\n");
    for (guint i = 0; list && i < json_array_get_length(list); i++) {
        JsonObject *a = json_array_get_object_element(list, i);
        g_autofree char *line = g_strdup_printf(
            "%-17s %-17s %-19s %-9s %s\n", json_object_get_string_member(a, "id"),
            json_object_get_string_member(a, "session_id"),
            json_object_get_string_member(a, "action"), json_object_get_string_member(a, "state"),
            json_object_get_string_member(a, "requested_at"));
        carrel_cli_print_text(line);
    }
    return CARREL_CLI_EXIT_OK;
}

/* approve / deny AID [--reason TEXT] */
int
carrel_cli_decide(CarrelCli *cli, int argc, char **argv)
{
    g_autofree char *reason = NULL;
    const GOptionEntry entries[] = {
        {"reason", 'r', 0, G_OPTION_ARG_STRING, &reason, "Why (kept with the decision)", "TEXT"},
        G_OPTION_ENTRY_NULL,
    };
    g_autofree char *verb = g_strdup(argv[0]);
    g_autofree char *path = NULL;
    g_autoptr(JsonNode) body = NULL;

    if (!carrel_cli_parse_options(cli, "AID [--reason TEXT]",
                                  "Decides an approval (once): approve or deny it.", entries, 1, 1,
                                  &argc, &argv))
        return CARREL_CLI_EXIT_USAGE;
    path = carrel_cli_item_path("approvals", argv[1], verb);
    if (!path)
        return carrel_cli_usage(cli, "invalid approval '%s'", argv[1]);
    body = object_with("reason", reason, NULL, NULL);
    return post_and_print(cli, path, body);
}
