#include <stdio.h>

#include "cli/cli.h"

typedef struct {
    char *output;
    char *format;
    char *scale;
    int max_edge;
    int quality;
    char *region;
} ShotArgs;

static char *
shot_path(const char *id, const ShotArgs *args)
{
    g_autofree char *base = carrel_cli_item_path("sessions", id, "screenshot");
    GString *path;
    char sep = '?';

    if (!base)
        return NULL;
    path = g_string_new(base);
    if (args->format) {
        g_autofree char *v = g_uri_escape_string(args->format, NULL, FALSE);
        g_string_append_printf(path, "%cformat=%s", sep, v);
        sep = '&';
    }
    if (args->scale) {
        g_autofree char *v = g_uri_escape_string(args->scale, NULL, FALSE);
        g_string_append_printf(path, "%cscale=%s", sep, v);
        sep = '&';
    }
    if (args->region) {
        g_autofree char *v = g_uri_escape_string(args->region, ",", FALSE);
        g_string_append_printf(path, "%cregion=%s", sep, v);
        sep = '&';
    }
    if (args->max_edge > 0) {
        g_string_append_printf(path, "%cmax_edge=%d", sep, args->max_edge);
        sep = '&';
    }
    if (args->quality > 0)
        g_string_append_printf(path, "%cquality=%d", sep, args->quality);
    return g_string_free(path, FALSE);
}

static int
save(CarrelCli *cli, const ShotArgs *args, GBytes *image)
{
    g_autoptr(GError) error = NULL;
    g_autoptr(JsonBuilder) b = json_builder_new();
    g_autoptr(JsonNode) node = NULL;
    gsize len = 0;
    const char *data = g_bytes_get_data(image, &len);

    if (g_str_equal(args->output, "-")) {
        if (fwrite(data, 1, len, stdout) != len || fflush(stdout) != 0) {
            g_set_error(&error, CARREL_ERROR, CARREL_ERROR_FAILED, "writing to stdout failed");
            return carrel_cli_fail(cli, error);
        }
        return CARREL_CLI_EXIT_OK;
    }
    if (!g_file_set_contents(args->output, data, (gssize)len, &error))
        return carrel_cli_fail(cli, error);
    if (!cli->json) {
        g_autofree char *shown = carrel_cli_clean_text(args->output);
        g_printerr("saved %" G_GSIZE_FORMAT " bytes to %s\n", len, shown);
        return CARREL_CLI_EXIT_OK;
    }
    json_builder_begin_object(b);
    json_builder_set_member_name(b, "file");
    json_builder_add_string_value(b, args->output);
    json_builder_set_member_name(b, "bytes");
    json_builder_add_int_value(b, (gint64)len);
    json_builder_end_object(b);
    node = json_builder_get_root(b);
    carrel_cli_print_json(cli, node);
    return CARREL_CLI_EXIT_OK;
}

int
carrel_cli_screenshot(CarrelCli *cli, int argc, char **argv)
{
    ShotArgs args = {0};
    const GOptionEntry entries[] = {
        {"output", 'o', 0, G_OPTION_ARG_FILENAME, &args.output, "File to write ('-': stdout)",
         "FILE"},
        {"format", 'f', 0, G_OPTION_ARG_STRING, &args.format, "png (default) or jpeg", "FMT"},
        {"quality", 'q', 0, G_OPTION_ARG_INT, &args.quality, "JPEG quality 1..100 (default 80)",
         "Q"},
        {"scale", 0, 0, G_OPTION_ARG_STRING, &args.scale, "Scale factor 0.01..4", "F"},
        {"max-edge", 0, 0, G_OPTION_ARG_INT, &args.max_edge, "Longest side at most N pixels", "N"},
        {"region", 0, 0, G_OPTION_ARG_STRING, &args.region, "Crop to X,Y,W,H first", "X,Y,W,H"},
        G_OPTION_ENTRY_NULL,
    };
    g_autoptr(GBytes) image = NULL;
    g_autoptr(GError) error = NULL;
    g_autofree char *path = NULL;
    int exit_code = CARREL_CLI_EXIT_USAGE;

    if (carrel_cli_parse_options(cli, "screenshot ID -o FILE",
                                 "Saves the session's screen, taken by the hypervisor.", entries, 1,
                                 1, &argc, &argv)) {
        path = shot_path(argv[1], &args);
        if (!args.output)
            exit_code = carrel_cli_usage(cli, "screenshot needs -o FILE (or -o - for stdout)");
        else if (!path)
            exit_code = carrel_cli_usage(cli, "invalid session '%s'", argv[1]);
        else if (cli->json && g_str_equal(args.output, "-"))
            exit_code = carrel_cli_usage(cli, "--json and '-o -' both want stdout");
        else if (!carrel_client_call_bytes(cli->client, "GET", path, NULL, NULL, &image, &error))
            exit_code = carrel_cli_fail(cli, error);
        else
            exit_code = save(cli, &args, image);
    }
    g_free(args.output);
    g_free(args.format);
    g_free(args.scale);
    g_free(args.region);
    return exit_code;
}
