/* carrel artifacts ID: what was taken out of a session; carrel artifact AID -o FILE: one file. */
#include <stdio.h>

#include "cli/cli.h"

static void
print_extraction(JsonObject *x)
{
    JsonArray *arts = json_object_get_array_member(x, "artifacts");
    g_autofree char *head = g_strdup_printf(
        "%s  %s via %s  %s  %" G_GINT64_FORMAT " entries, %" G_GINT64_FORMAT " bytes%s\n",
        json_object_get_string_member_with_default(x, "id", "?"),
        json_object_get_string_member_with_default(x, "reason", "?"),
        json_object_get_string_member_with_default(x, "source", "?"),
        json_object_get_string_member_with_default(x, "created_at", "?"),
        json_object_get_int_member_with_default(x, "count", 0),
        json_object_get_int_member_with_default(x, "bytes", 0),
        json_object_get_string_member_with_default(x, "error", NULL) ? "  (stopped early)" : "");

    carrel_cli_print_text(head);
    for (guint i = 0; arts && i < json_array_get_length(arts); i++) {
        JsonObject *a = json_array_get_object_element(arts, i);
        const char *target = json_object_get_string_member_with_default(a, "link_target", NULL);
        g_autofree char *guest =
            carrel_cli_clean_text(json_object_get_string_member_with_default(a, "guest_path", ""));
        g_autofree char *shown_target = target ? carrel_cli_clean_text(target) : NULL;
        g_autofree char *line =
            g_strdup_printf("  %s  %-8s %s %10" G_GINT64_FORMAT "  %s%s%s\n",
                            json_object_get_string_member_with_default(a, "id", "?"),
                            json_object_get_string_member_with_default(a, "type", "?"),
                            json_object_get_string_member_with_default(a, "mode", "?"),
                            json_object_get_int_member_with_default(a, "size", 0), guest,
                            shown_target ? " -> " : "", shown_target ? shown_target : "");
        carrel_cli_print_text(line);
    }
}

int
carrel_cli_artifacts(CarrelCli *cli, int argc, char **argv)
{
    g_autoptr(JsonNode) reply = NULL;
    JsonArray *list;
    int exit_code;

    if (!carrel_cli_parse_options(cli, "ID",
                                  "Lists a session's extractions (asked for, or collected when it "
                                  "stopped, crashed or was destroyed) and their artifacts.",
                                  NULL, 1, 1, &argc, &argv))
        return CARREL_CLI_EXIT_USAGE;
    list =
        carrel_cli_get_session_list(cli, argv[1], "artifacts", "extractions", &reply, &exit_code);
    for (guint i = 0; list && i < json_array_get_length(list); i++)
        print_extraction(json_array_get_object_element(list, i));
    return exit_code;
}

int
carrel_cli_artifact(CarrelCli *cli, int argc, char **argv)
{
    g_autofree char *out = NULL;
    const GOptionEntry entries[] = {
        {"output", 'o', 0, G_OPTION_ARG_FILENAME, &out, "File to write ('-': stdout)", "FILE"},
        G_OPTION_ENTRY_NULL,
    };
    g_autofree char *path = NULL;
    g_autoptr(GBytes) data = NULL;
    g_autoptr(GError) error = NULL;
    gsize len = 0;
    const char *bytes;

    if (!carrel_cli_parse_options(cli, "AID", "Downloads one artifact's bytes (a regular file).",
                                  entries, 1, 1, &argc, &argv))
        return CARREL_CLI_EXIT_USAGE;
    if (!out)
        return carrel_cli_usage(cli, "artifact needs -o FILE");
    path = carrel_cli_item_path("artifacts", argv[1], NULL);
    if (!path)
        return carrel_cli_usage(cli, "invalid artifact '%s'", argv[1]);
    if (!carrel_client_call_bytes(cli->client, "GET", path, NULL, NULL, &data, &error))
        return carrel_cli_fail(cli, error);
    bytes = g_bytes_get_data(data, &len);
    if (g_str_equal(out, "-")) {
        if (fwrite(bytes, 1, len, stdout) != len || fflush(stdout) != 0)
            return carrel_cli_usage(cli, "writing to stdout failed");
    } else if (!g_file_set_contents(out, bytes, (gssize)len, &error)) {
        return carrel_cli_fail(cli, error);
    }
    return CARREL_CLI_EXIT_OK;
}
