#include "cli/cli.h"

int
carrel_cli_show(CarrelCli *cli, int argc, char **argv)
{
    g_autoptr(JsonNode) reply = NULL;
    g_autoptr(GError) error = NULL;
    g_autofree char *path = NULL;

    if (!carrel_cli_parse_options(cli, "show ID", "Shows a session (ID or name).", NULL, 1, 1,
                                  &argc, &argv))
        return CARREL_CLI_EXIT_USAGE;
    path = carrel_cli_item_path("sessions", argv[1], NULL);
    if (!path)
        return carrel_cli_usage(cli, "invalid session '%s'", argv[1]);
    if (!carrel_cli_call(cli, "GET", path, NULL, &reply, &error))
        return carrel_cli_fail(cli, error);
    carrel_cli_print_fields(cli, reply);
    return CARREL_CLI_EXIT_OK;
}
