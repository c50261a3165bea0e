/* carrel diff ID [--path P]: what a session changed on its disk against its template. */
#include "cli/cli.h"

static void
print_change(const char *sign, JsonArray *list)
{
    for (guint i = 0; list && i < json_array_get_length(list); i++) {
        JsonObject *e = json_array_get_object_element(list, i);
        g_autofree char *path =
            carrel_cli_clean_text(json_object_get_string_member_with_default(e, "path", ""));
        const char *type = json_object_get_string_member_with_default(e, "type", "?");
        const char *sha = json_object_get_string_member_with_default(e, "sha256", NULL);
        g_autofree char *line =
            g_strdup_printf("%s %-7s %s %10" G_GINT64_FORMAT "  %s%s%.12s\n", sign, type,
                            json_object_get_string_member_with_default(e, "mode", "?"),
                            json_object_get_int_member_with_default(e, "size", 0), path,
                            sha ? "  sha256:" : "", sha ? sha : "");
        carrel_cli_print_text(line);
    }
}

int
carrel_cli_diff(CarrelCli *cli, int argc, char **argv)
{
    g_autofree char *under = NULL;
    const GOptionEntry entries[] = {
        {"path", 'p', 0, G_OPTION_ARG_STRING, &under, "Only this guest folder", "GUEST_PATH"},
        G_OPTION_ENTRY_NULL,
    };
    g_autofree char *path = NULL;
    g_autoptr(JsonNode) reply = NULL;
    g_autoptr(GError) error = NULL;
    JsonObject *obj;

    if (!carrel_cli_parse_options(cli, "ID",
                                  "Lists files added (+), changed (~) and removed (-) in a "
                                  "session's disk against its template, for review. Reads the "
                                  "disks with libguestfs (about half a minute under TCG).",
                                  entries, 1, 1, &argc, &argv))
        return CARREL_CLI_EXIT_USAGE;
    path = carrel_cli_item_path("sessions", argv[1], "diff");
    if (!path)
        return carrel_cli_usage(cli, "invalid session '%s'", argv[1]);
    if (under) {
        g_autofree char *q = g_uri_escape_string(under, NULL, FALSE);
        g_autofree char *with = g_strdup_printf("%s?path=%s", path, q);
        g_free(path);
        path = g_steal_pointer(&with);
    }
    if (!cli->json && cli->stderr_tty)
        g_printerr("comparing %s with its template...\n", argv[1]);
    if (!carrel_cli_call(cli, "GET", path, NULL, &reply, &error))
        return carrel_cli_fail(cli, error);
    if (cli->json) {
        carrel_cli_print_json(cli, reply);
        return CARREL_CLI_EXIT_OK;
    }
    obj = json_node_get_object(reply);
    print_change("+", json_object_get_array_member(obj, "added"));
    print_change("~", json_object_get_array_member(obj, "changed"));
    print_change("-", json_object_get_array_member(obj, "removed"));
    return CARREL_CLI_EXIT_OK;
}
