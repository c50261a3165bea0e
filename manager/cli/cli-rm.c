#include "cli/cli.h"

/* Destroys one session; returns its exit code (errors printed). */
static int
rm_one(CarrelCli *cli, const char *id)
{
    g_autoptr(JsonNode) reply = NULL;
    g_autoptr(GError) error = NULL;
    g_autofree char *path = carrel_cli_item_path("sessions", id, NULL);
    g_autofree char *shown = NULL;

    if (!path)
        return carrel_cli_usage(cli, "invalid session '%s'", id);
    if (!carrel_cli_call(cli, "DELETE", path, NULL, &reply, &error))
        return carrel_cli_fail(cli, error);
    if (cli->json) {
        carrel_cli_print_json(cli, reply);
        return CARREL_CLI_EXIT_OK;
    }
    shown =
        carrel_cli_clean_text(carrel_cli_json_string(carrel_cli_json_object(reply, NULL), "id"));
    g_print("%s destroyed\n", shown);
    return CARREL_CLI_EXIT_OK;
}

int
carrel_cli_rm(CarrelCli *cli, int argc, char **argv)
{
    int exit_code = CARREL_CLI_EXIT_OK;

    if (!carrel_cli_parse_options(cli, "rm ID...",
                                  "Destroys sessions: their VMs, disks and saved states.", NULL, 1,
                                  G_MAXUINT, &argc, &argv))
        return CARREL_CLI_EXIT_USAGE;
    /* Every id is tried (unless carreld is down); the exit code is the first failure's. */
    for (int i = 1; i < argc; i++) {
        int code = rm_one(cli, argv[i]);

        if (exit_code == CARREL_CLI_EXIT_OK)
            exit_code = code;
        if (code == CARREL_CLI_EXIT_UNREACHABLE)
            break;
    }
    return exit_code;
}
