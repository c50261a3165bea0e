/* carrel audit ls|verify|export: who did what, whether the log's hash chain holds, a SIEM feed. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <unistd.h>

#include <glib/gstdio.h>

#include "cli/cli.h"

/* One page of an export; a shorter page is the last. */
#define AUDIT_EXPORT_PAGE 1000
#define AUDIT_LIMIT_MAX 10000

static const char audit_usage[] =
    "Usage: carrel audit COMMAND\n"
    "\n"
    "  ls [--session S] [--principal P] [--operation O] [--result ok|denied|failed]\n"
    "     [--since T] [--after SEQ] [--limit N]\n"
    "                              entries of the audit log, oldest first (1000 by default)\n"
    "  verify                      check the hash chain; exit 9 when a row breaks it\n"
    "  export [--since T] [-o FILE]\n"
    "                              every entry as one JSON line, for a SIEM\n"
    "\n"
    "T is a time such as 2026-12-01T10:00:00Z, or Unix seconds.\n";

static int
audit_ls(CarrelCli *cli, int argc, char **argv)
{
    CarrelCliAuditFilter filter = {0};
    g_autofree char *session = NULL;
    g_autofree char *principal = NULL;
    g_autofree char *operation = NULL;
    g_autofree char *result = NULL;
    g_autofree char *since = NULL;
    gint64 after = 0;
    gint limit = -1; /* not given: carreld's default */
    const GOptionEntry entries[] = {
        {"session", 0, 0, G_OPTION_ARG_STRING, &session, "Only this session's entries", "ID"},
        {"principal", 0, 0, G_OPTION_ARG_STRING, &principal, "Only this token's (id or name)", "P"},
        {"operation", 0, 0, G_OPTION_ARG_STRING, &operation, "Only this operation", "OP"},
        {"result", 0, 0, G_OPTION_ARG_STRING, &result, "ok, denied or failed", "R"},
        {"since", 0, 0, G_OPTION_ARG_STRING, &since, "From this time on", "T"},
        {"after", 0, 0, G_OPTION_ARG_INT64, &after, "Entries after this seq", "SEQ"},
        {"limit", 0, 0, G_OPTION_ARG_INT, &limit, "At most N entries (1-10000, default 1000)", "N"},
        G_OPTION_ENTRY_NULL,
    };
    g_autofree char *path = NULL;
    g_autoptr(JsonNode) reply = NULL;
    g_autoptr(GError) error = NULL;
    g_autoptr(CarrelCliTable) table = NULL;
    g_autofree char *text = NULL;
    JsonArray *list;

    if (!carrel_cli_parse_options(cli, "audit ls [--session S] [--principal P] ...",
                                  "Lists entries of the audit log, oldest first.", entries, 0, 0,
                                  &argc, &argv))
        return CARREL_CLI_EXIT_USAGE;
    if (after < 0 || (limit != -1 && (limit < 1 || limit > AUDIT_LIMIT_MAX)))
        return carrel_cli_usage(cli, "--after must be >= 0 and --limit between 1 and %d",
                                AUDIT_LIMIT_MAX);
    filter = (CarrelCliAuditFilter){.since = since,
                                    .session = session,
                                    .principal = principal,
                                    .operation = operation,
                                    .result = result};
    path = carrel_cli_audit_path(&filter, after, limit > 0 ? (guint)limit : 0);
    if (!carrel_cli_call(cli, "GET", path, NULL, &reply, &error))
        return carrel_cli_fail(cli, error);
    if (cli->json) {
        carrel_cli_print_json(cli, reply);
        return CARREL_CLI_EXIT_OK;
    }
    list = carrel_cli_json_array(reply, "entries");
    table = carrel_cli_table_new_audit();
    for (guint i = 0; list && i < json_array_get_length(list); i++) {
        JsonObject *entry = carrel_cli_json_object(json_array_get_element(list, i), NULL);

        if (entry)
            carrel_cli_table_add_audit(table, entry);
    }
    text = carrel_cli_table_render(table);
    carrel_cli_print_text(text);
    return CARREL_CLI_EXIT_OK;
}

static int
audit_verify(CarrelCli *cli, int argc, char **argv)
{
    g_autoptr(JsonNode) reply = NULL;
    g_autoptr(GError) error = NULL;
    g_autofree char *line = NULL;
    gboolean intact = FALSE;

    if (!carrel_cli_parse_options(cli, "audit verify",
                                  "Checks the audit log's hash chain, every row. Exits 9 when a "
                                  "row was edited, removed or reordered.",
                                  NULL, 0, 0, &argc, &argv))
        return CARREL_CLI_EXIT_USAGE;
    if (!carrel_cli_call(cli, "GET", "/v1/audit/verify", NULL, &reply, &error))
        return carrel_cli_fail(cli, error);
    line = carrel_cli_format_audit_verdict(carrel_cli_json_object(reply, NULL), &intact);
    if (cli->json)
        carrel_cli_print_json(cli, reply);
    else if (intact)
        g_print("%s\n", line);
    else
        g_printerr("%s\n", line);
    return intact ? CARREL_CLI_EXIT_OK : CARREL_CLI_EXIT_AUDIT_BROKEN;
}

/* Where an export goes: stdout, or FILE.tmp renamed to FILE once complete. */
typedef struct {
    FILE *out;
    char *path; /* NULL: stdout */
    char *tmp;
} ExportSink;

static void
export_sink_clear(ExportSink *sink)
{
    /* Still open here means the export failed: no half file under FILE's name. */
    if (sink->out && sink->path) {
        fclose(sink->out);
        (void)g_unlink(sink->tmp);
    }
    g_free(sink->path);
    g_free(sink->tmp);
}

G_DEFINE_AUTO_CLEANUP_CLEAR_FUNC(ExportSink, export_sink_clear)

static gboolean
export_sink_open(ExportSink *sink, const char *path, GError **error)
{
    int fd;

    if (!path || g_str_equal(path, "-")) {
        sink->out = stdout;
        return TRUE;
    }
    sink->path = g_strdup(path);
    sink->tmp = g_strconcat(path, ".tmp", NULL);
    /* A fresh file, never one planted at FILE.tmp: the log is for admins and reviewers only. */
    if (g_unlink(sink->tmp) < 0 && errno != ENOENT) {
        g_set_error(error, CARREL_ERROR, CARREL_ERROR_FAILED, "replacing '%s': %s", sink->tmp,
                    g_strerror(errno));
        return FALSE;
    }
    fd = g_open(sink->tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
    sink->out = fd >= 0 ? fdopen(fd, "w") : NULL;
    if (!sink->out) {
        g_set_error(error, CARREL_ERROR, CARREL_ERROR_FAILED, "creating '%s': %s", sink->tmp,
                    g_strerror(errno));
        if (fd >= 0)
            close(fd);
        return FALSE;
    }
    return TRUE;
}

static gboolean
export_sink_finish(ExportSink *sink, GError **error)
{
    FILE *out = sink->out;
    gboolean ok = fflush(out) == 0 && !ferror(out);

    if (!sink->path) {
        if (!ok)
            g_set_error(error, CARREL_ERROR, CARREL_ERROR_FAILED, "writing to stdout failed");
        return ok;
    }
    /* Durable before the rename, so FILE is the whole export or the previous one. */
    ok = ok && fsync(fileno(out)) == 0;
    sink->out = NULL;
    ok = fclose(out) == 0 && ok;
    if (ok && g_rename(sink->tmp, sink->path) == 0)
        return TRUE;
    g_set_error(error, CARREL_ERROR, CARREL_ERROR_FAILED, "writing '%s': %s", sink->path,
                g_strerror(errno));
    (void)g_unlink(sink->tmp);
    return FALSE;
}

/* Writes one page's entries; *after is the last seq written, *ret_count how many there were. */
static gboolean
export_page(ExportSink *sink, JsonNode *reply, gint64 *after, guint *ret_count, GError **error)
{
    JsonArray *list = carrel_cli_json_array(reply, "entries");
    guint n = list ? json_array_get_length(list) : 0;

    for (guint i = 0; i < n; i++) {
        JsonNode *entry = json_array_get_element(list, i);
        gint64 seq = carrel_cli_json_int(carrel_cli_json_object(entry, NULL), "seq", -1);
        g_autofree char *line = json_to_string(entry, FALSE);

        /* Paging stands on seq growing: anything else would loop or skip rows. */
        if (seq <= *after) {
            g_set_error(error, CARREL_ERROR, CARREL_ERROR_FAILED,
                        "carreld sent audit entries out of order (seq %" G_GINT64_FORMAT
                        " after %" G_GINT64_FORMAT ")",
                        seq, *after);
            return FALSE;
        }
        fputs(line, sink->out);
        fputc('\n', sink->out);
        *after = seq;
    }
    *ret_count = n;
    return TRUE;
}

/* Pages through GET /v1/audit with after= until a short page; *ret_total entries written. */
static gboolean
export_all(CarrelCli *cli, const char *since, ExportSink *sink, guint64 *ret_total, GError **error)
{
    CarrelCliAuditFilter filter = {.since = since};
    gint64 after = 0;
    guint64 total = 0;
    guint n = AUDIT_EXPORT_PAGE;

    while (n == AUDIT_EXPORT_PAGE) {
        g_autofree char *path = carrel_cli_audit_path(&filter, after, AUDIT_EXPORT_PAGE);
        g_autoptr(JsonNode) reply = NULL;

        if (!carrel_cli_call(cli, "GET", path, NULL, &reply, error) ||
            !export_page(sink, reply, &after, &n, error))
            return FALSE;
        total += n;
    }
    *ret_total = total;
    return TRUE;
}

static void
export_report(CarrelCli *cli, const char *path, guint64 total)
{
    g_autoptr(JsonNode) node = NULL;

    if (!cli->json) {
        g_print("wrote %" G_GUINT64_FORMAT " entries to %s\n", total, path);
        return;
    }
    node = carrel_cli_json_new_object();
    json_object_set_string_member(json_node_get_object(node), "output", path);
    json_object_set_int_member(json_node_get_object(node), "entries", (gint64)total);
    carrel_cli_print_json(cli, node);
}

static int
audit_export(CarrelCli *cli, int argc, char **argv)
{
    g_autofree char *since = NULL;
    g_autofree char *output = NULL;
    const GOptionEntry entries[] = {
        {"since", 0, 0, G_OPTION_ARG_STRING, &since, "From this time on", "T"},
        {"output", 'o', 0, G_OPTION_ARG_FILENAME, &output, "File to write (default stdout)",
         "FILE"},
        G_OPTION_ENTRY_NULL,
    };
    g_auto(ExportSink) sink = {0};
    g_autoptr(GError) error = NULL;
    guint64 total = 0;

    if (!carrel_cli_parse_options(cli, "audit export [--since T] [-o FILE]",
                                  "Writes every entry of the audit log (or those since T) as "
                                  "JSON lines, oldest first, for a SIEM. A FILE is written to "
                                  "FILE.tmp, then renamed.",
                                  entries, 0, 0, &argc, &argv))
        return CARREL_CLI_EXIT_USAGE;
    if (!export_sink_open(&sink, output, &error) ||
        !export_all(cli, since, &sink, &total, &error) || !export_sink_finish(&sink, &error))
        return carrel_cli_fail(cli, error);
    if (sink.path)
        export_report(cli, sink.path, total);
    return CARREL_CLI_EXIT_OK;
}

int
carrel_cli_audit(CarrelCli *cli, int argc, char **argv)
{
    static const struct {
        const char *name;
        CarrelCliVerbFunc func;
    } commands[] = {
        {"ls", audit_ls},
        {"verify", audit_verify},
        {"export", audit_export},
    };
    const char *name = argc > 1 ? argv[1] : NULL;

    if (name && (g_str_equal(name, "-h") || g_str_equal(name, "--help"))) {
        g_print("%s", audit_usage);
        return CARREL_CLI_EXIT_OK;
    }
    if (!name)
        return carrel_cli_usage(cli, "an audit command is required: ls, verify or export");
    for (gsize i = 0; i < G_N_ELEMENTS(commands); i++) {
        if (g_str_equal(commands[i].name, name))
            return commands[i].func(cli, argc - 1, argv + 1);
    }
    return carrel_cli_usage(cli, "unknown audit command '%s' (see 'carrel audit --help')", name);
}
