/* carrel egress ID: what a session tried to reach, and what its policy said. */
#include <string.h>

#include "cli/cli.h"

/* A record's time to the second, like the audit table's. */
static char *
short_time(const char *stamp)
{
    return stamp && strlen(stamp) >= 19 ? g_strndup(stamp, 19) : g_strdup(stamp ? stamp : "-");
}

static void
add_row(CarrelCliTable *table, JsonObject *rec)
{
    g_autofree char *time = short_time(carrel_cli_json_string(rec, "time"));
    g_autofree char *port = g_strdup_printf(
        "%" G_GINT64_FORMAT, json_object_get_int_member_with_default(rec, "port", 0));
    g_autofree char *out = g_strdup_printf(
        "%" G_GINT64_FORMAT, json_object_get_int_member_with_default(rec, "bytes_out", 0));
    g_autofree char *in = g_strdup_printf(
        "%" G_GINT64_FORMAT, json_object_get_int_member_with_default(rec, "bytes_in", 0));
    g_autofree char *ms = g_strdup_printf(
        "%" G_GINT64_FORMAT, json_object_get_int_member_with_default(rec, "duration_ms", 0));
    const char *cells[] = {time,
                           carrel_cli_json_string(rec, "name"),
                           carrel_cli_json_string(rec, "address"),
                           port,
                           carrel_cli_json_string(rec, "protocol"),
                           carrel_cli_json_string(rec, "decision"),
                           out,
                           in,
                           ms,
                           NULL};

    carrel_cli_table_add(table, cells);
}

int
carrel_cli_egress(CarrelCli *cli, int argc, char **argv)
{
    static const char *const columns[] = {"TIME",     "NAME", "ADDRESS", "PORT", "PROTO",
                                          "DECISION", "OUT",  "IN",      "MS",   NULL};
    gint64 after = 0;
    const GOptionEntry entries[] = {
        {"after", 0, 0, G_OPTION_ARG_INT64, &after, "Only records after this seq", "SEQ"},
        G_OPTION_ENTRY_NULL,
    };
    g_autofree char *base = NULL;
    g_autofree char *path = NULL;
    g_autoptr(JsonNode) reply = NULL;
    g_autoptr(GError) error = NULL;
    g_autoptr(CarrelCliTable) table = NULL;
    g_autofree char *text = NULL;
    JsonArray *records;

    if (!carrel_cli_parse_options(cli, "egress ID [--after SEQ]",
                                  "What a session tried to reach (DNS names, HTTP, TLS) and what "
                                  "its policy decided, oldest first.",
                                  entries, 1, 1, &argc, &argv))
        return CARREL_CLI_EXIT_USAGE;
    base = carrel_cli_item_path("sessions", argv[1], "egress");
    if (!base)
        return carrel_cli_usage(cli, "invalid session '%s'", argv[1]);
    path = g_strdup_printf("%s?after=%" G_GINT64_FORMAT, base, after);
    if (!carrel_cli_call(cli, "GET", path, NULL, &reply, &error))
        return carrel_cli_fail(cli, error);
    if (cli->json) {
        carrel_cli_print_json(cli, reply);
        return CARREL_CLI_EXIT_OK;
    }
    records = carrel_cli_json_array(reply, "egress");
    table = carrel_cli_table_new(columns);
    for (guint i = 0; records && i < json_array_get_length(records); i++) {
        JsonObject *rec = carrel_cli_json_object(json_array_get_element(records, i), NULL);

        if (rec)
            add_row(table, rec);
    }
    text = carrel_cli_table_render(table);
    carrel_cli_print_text(text);
    return CARREL_CLI_EXIT_OK;
}
