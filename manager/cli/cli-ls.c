#include "cli/cli.h"

int
carrel_cli_ls(CarrelCli *cli, int argc, char **argv)
{
    gboolean all = FALSE;
    const GOptionEntry entries[] = {
        {"all", 'a', 0, G_OPTION_ARG_NONE, &all, "Include destroyed sessions", NULL},
        G_OPTION_ENTRY_NULL,
    };
    g_autoptr(JsonNode) reply = NULL;
    g_autoptr(GError) error = NULL;
    g_autoptr(CarrelCliTable) table = NULL;
    g_autofree char *text = NULL;
    JsonArray *sessions;
    gint64 now = g_get_real_time() / G_USEC_PER_SEC;

    if (!carrel_cli_parse_options(cli, "ls", "Lists sessions.", entries, 0, 0, &argc, &argv))
        return CARREL_CLI_EXIT_USAGE;
    if (!carrel_cli_call(cli, "GET", all ? "/v1/sessions?all=1" : "/v1/sessions", NULL, &reply,
                         &error))
        return carrel_cli_fail(cli, error);
    if (cli->json) {
        carrel_cli_print_json(cli, reply);
        return CARREL_CLI_EXIT_OK;
    }
    sessions = carrel_cli_json_array(reply, "sessions");
    table = carrel_cli_table_new_sessions();
    for (guint i = 0; sessions && i < json_array_get_length(sessions); i++) {
        JsonObject *session = carrel_cli_json_object(json_array_get_element(sessions, i), NULL);

        if (session)
            carrel_cli_table_add_session(table, session, now);
    }
    text = carrel_cli_table_render(table);
    carrel_cli_print_text(text);
    return CARREL_CLI_EXIT_OK;
}
