#include "cli/cli.h"

#include <stdio.h>
#include <sys/ioctl.h>
#include <unistd.h>

gboolean
carrel_cli_parse_options(CarrelCli *cli, const char *params, const char *summary,
                         const GOptionEntry *entries, guint n_min, guint n_max, int *argc,
                         char ***argv)
{
    g_autoptr(GOptionContext) context = g_option_context_new(params);
    g_autoptr(GError) error = NULL;
    guint n_args;

    g_option_context_set_summary(context, summary);
    if (entries)
        g_option_context_add_main_entries(context, entries, NULL);
    if (!g_option_context_parse(context, argc, argv, &error)) {
        carrel_cli_usage(cli, "%s", error->message);
        return FALSE;
    }
    n_args = *argc > 0 ? (guint)*argc - 1 : 0;
    if (n_args < n_min || n_args > n_max) {
        carrel_cli_usage(cli, "usage: carrel %s", params);
        return FALSE;
    }
    for (int i = 1; i < *argc; i++) {
        if (!*(*argv)[i]) {
            carrel_cli_usage(cli, "empty argument to '%s'", (*argv)[0]);
            return FALSE;
        }
    }
    return TRUE;
}

static JsonNode *
build_envelope(const char *code, const char *message, const char *hint)
{
    g_autoptr(JsonBuilder) builder = json_builder_new();

    json_builder_begin_object(builder);
    json_builder_set_member_name(builder, "error");
    json_builder_begin_object(builder);
    json_builder_set_member_name(builder, "code");
    json_builder_add_string_value(builder, code);
    json_builder_set_member_name(builder, "message");
    json_builder_add_string_value(builder, message);
    if (hint) {
        json_builder_set_member_name(builder, "hint");
        json_builder_add_string_value(builder, hint);
    }
    json_builder_end_object(builder);
    json_builder_end_object(builder);
    return json_builder_get_root(builder);
}

/* An error as a JSON envelope on stdout (--json), else as text and its hint on stderr. */
static void
print_error(CarrelCli *cli, const char *code, const char *message, const char *hint)
{
    if (cli && cli->json) {
        g_autoptr(JsonNode) envelope = build_envelope(code, message, hint);

        carrel_cli_print_json_line(envelope);
    } else {
        g_autofree char *text = carrel_cli_format_error(message, hint);

        fputs(text, stderr);
    }
}

int
carrel_cli_usage(CarrelCli *cli, const char *format, ...)
{
    g_autofree char *message = NULL;
    va_list args;

    va_start(args, format);
    message = g_strdup_vprintf(format, args);
    va_end(args);
    print_error(cli, "usage", message, carrel_cli_error_hint("usage", TRUE));
    return CARREL_CLI_EXIT_USAGE;
}

static const char *
error_code_name(CarrelCli *cli, const GError *error)
{
    if (carrel_client_last_unreachable(cli->client))
        return "unreachable";
    if (error->domain == CARREL_ERROR)
        return carrel_error_code_to_string((CarrelErrorCode)error->code);
    return "failed";
}

JsonNode *
carrel_cli_error_envelope(CarrelCli *cli, const GError *error)
{
    const char *code = error_code_name(cli, error);

    return build_envelope(code, error->message, carrel_cli_error_hint(code, cli->has_token));
}

int
carrel_cli_fail_hint(CarrelCli *cli, const GError *error, const char *hint)
{
    const char *code = error_code_name(cli, error);
    g_autofree char *message = NULL;

    if (!hint)
        hint = carrel_cli_error_hint(code, cli->has_token);
    /* The old suffix stays: scripts may match it. */
    if (!cli->json && !cli->has_token &&
        g_error_matches(error, CARREL_ERROR, CARREL_ERROR_UNAUTHORIZED))
        message =
            g_strdup_printf("%s (no token: use --token-file FILE or CARREL_TOKEN)", error->message);
    print_error(cli, code, message ? message : error->message, hint);
    if (carrel_client_last_unreachable(cli->client))
        return CARREL_CLI_EXIT_UNREACHABLE;
    return carrel_cli_exit_code(error);
}

int
carrel_cli_fail(CarrelCli *cli, const GError *error)
{
    return carrel_cli_fail_hint(cli, error, NULL);
}

static void
print_json_node(JsonNode *node, gboolean pretty)
{
    g_autoptr(JsonGenerator) generator = json_generator_new();
    g_autofree char *text = NULL;

    json_generator_set_root(generator, node);
    json_generator_set_pretty(generator, pretty);
    json_generator_set_indent(generator, 2);
    text = json_generator_to_data(generator, NULL);
    /* stdio, not g_print: JSON stays UTF-8 whatever the locale's charset. */
    fputs(text, stdout);
    fputc('\n', stdout);
    fflush(stdout);
}

void
carrel_cli_print_json(CarrelCli *cli, JsonNode *node)
{
    print_json_node(node, cli->stdout_tty);
}

void
carrel_cli_print_json_line(JsonNode *node)
{
    print_json_node(node, FALSE);
}

void
carrel_cli_print_text(const char *text)
{
    fputs(text, stdout);
}

gboolean
carrel_cli_call(CarrelCli *cli, const char *method, const char *path, JsonNode *body,
                JsonNode **ret_reply, GError **error)
{
    g_autoptr(JsonNode) reply = NULL;

    if (!carrel_client_call(cli->client, method, path, body, &reply, error))
        return FALSE;
    if (ret_reply && (!reply || !JSON_NODE_HOLDS_OBJECT(reply))) {
        g_set_error(error, CARREL_ERROR, CARREL_ERROR_FAILED,
                    "carreld sent an unexpected reply to %s '%s'", method, path);
        return FALSE;
    }
    if (ret_reply)
        *ret_reply = g_steal_pointer(&reply);
    return TRUE;
}

char *
carrel_cli_item_path(const char *collection, const char *item, const char *action)
{
    g_autofree char *segment = carrel_cli_escape_segment(item);

    if (!segment)
        return NULL;
    if (action)
        return g_strdup_printf("/v1/%s/%s/%s", collection, segment, action);
    return g_strdup_printf("/v1/%s/%s", collection, segment);
}

void
carrel_cli_print_session(CarrelCli *cli, JsonNode *session)
{
    g_autoptr(CarrelCliTable) table = NULL;
    g_autofree char *text = NULL;
    g_autofree char *took = NULL;

    if (cli->json) {
        carrel_cli_print_json(cli, session);
        return;
    }
    table = carrel_cli_table_new_sessions();
    carrel_cli_table_add_session(table, carrel_cli_json_object(session, NULL),
                                 g_get_real_time() / G_USEC_PER_SEC);
    text = carrel_cli_table_render(table);
    carrel_cli_print_text(text);
    /* Where the verb's time went (create, revert, fork), beside the table, not in it. */
    took = carrel_cli_format_timings(carrel_cli_json_object(session, "timings"));
    if (took)
        g_printerr("%s\n", took);
}

void
carrel_cli_print_fields(CarrelCli *cli, JsonNode *node)
{
    g_autofree char *text = NULL;

    if (cli->json) {
        carrel_cli_print_json(cli, node);
        return;
    }
    if (!carrel_cli_json_object(node, NULL))
        return;
    text = carrel_cli_format_fields(carrel_cli_json_object(node, NULL));
    carrel_cli_print_text(text);
}

JsonArray *
carrel_cli_get_session_list(CarrelCli *cli, const char *id, const char *action, const char *member,
                            JsonNode **ret_reply, int *ret_exit)
{
    g_autofree char *path = carrel_cli_item_path("sessions", id, action);
    g_autoptr(GError) error = NULL;

    *ret_exit = CARREL_CLI_EXIT_OK;
    if (!path) {
        *ret_exit = carrel_cli_usage(cli, "invalid session '%s'", id);
        return NULL;
    }
    if (!carrel_cli_call(cli, "GET", path, NULL, ret_reply, &error)) {
        *ret_exit = carrel_cli_fail(cli, error);
        return NULL;
    }
    if (cli->json) {
        carrel_cli_print_json(cli, *ret_reply);
        return NULL;
    }
    return json_object_get_array_member(json_node_get_object(*ret_reply), member);
}

/* Columns of the terminal on stderr, less one so the line never wraps; 80 when unknown. */
static guint
stderr_columns(void)
{
    struct winsize size = {0};

    if (ioctl(STDERR_FILENO, TIOCGWINSZ, &size) == 0 && size.ws_col > 1)
        return size.ws_col - 1u;
    return 79;
}

void
carrel_cli_progress_show(CarrelCli *cli, const CarrelCliProgress *progress)
{
    g_autofree char *line = NULL;

    if (!cli->stderr_tty || cli->json)
        return;
    /* The line is rendered from cleaned text: the only control characters are ours. */
    if (progress)
        line = carrel_cli_progress_render(progress, stderr_columns());
    fprintf(stderr, "\r\033[K%s", line ? line : "");
    fflush(stderr);
}

#define TRANSFER_REDRAW_USEC (G_USEC_PER_SEC / 10)

static void
transfer_progress(gboolean upload, gint64 done, gint64 total, gpointer user_data)
{
    CarrelCli *cli = user_data;
    gint64 now = g_get_monotonic_time();
    CarrelCliProgress progress = {
        .text = cli->transfer_text, .done = done, .total = total, .bytes = TRUE};

    (void)upload;
    /* A redraw per chunk would cost more than the copy: ten a second, and the last one. */
    if (now - cli->transfer_shown_at < TRANSFER_REDRAW_USEC && (total <= 0 || done < total))
        return;
    cli->transfer_shown_at = now;
    carrel_cli_progress_show(cli, &progress);
}

void
carrel_cli_transfer_begin(CarrelCli *cli, const char *text)
{
    if (!cli->stderr_tty || cli->json)
        return;
    g_free(cli->transfer_text);
    cli->transfer_text = g_strdup(text);
    cli->transfer_shown_at = 0;
    carrel_client_set_progress(cli->client, transfer_progress, cli);
}

void
carrel_cli_transfer_end(CarrelCli *cli)
{
    if (!cli->transfer_text)
        return;
    carrel_client_set_progress(cli->client, NULL, NULL);
    g_clear_pointer(&cli->transfer_text, g_free);
    carrel_cli_progress_show(cli, NULL);
}
