/*
 * carrel recording ID: a session's screen recording (segments and the events index);
 * carrel recording ID NAME -o FILE: downloads one finished segment (WebM), checked against the
 * sha256 carreld lists.
 */
#include <errno.h>
#include <fcntl.h>

#include <gio/gunixoutputstream.h>
#include <glib/gstdio.h>

#include "cli/cli.h"
#include "conf/conf.h"

static void
print_segment(JsonObject *seg)
{
    gboolean open = json_object_get_boolean_member_with_default(seg, "open", FALSE);
    g_autofree char *name =
        carrel_cli_clean_text(json_object_get_string_member_with_default(seg, "name", "?"));
    g_autofree char *line = g_strdup_printf(
        "%s  %8.1f s  %6" G_GINT64_FORMAT " frames  %10" G_GINT64_FORMAT " bytes  %s\n", name,
        (double)json_object_get_int_member_with_default(seg, "duration_ms", 0) / 1000.0,
        json_object_get_int_member_with_default(seg, "frames", 0),
        json_object_get_int_member_with_default(seg, "bytes", 0),
        open ? "(being written)"
             : json_object_get_string_member_with_default(seg, "sha256", "") ?: "");

    carrel_cli_print_text(line);
}

static int
list_recording(CarrelCli *cli, const char *id)
{
    g_autoptr(JsonNode) reply = NULL;
    JsonArray *segs;
    JsonObject *o;
    int exit_code;

    segs = carrel_cli_get_session_list(cli, id, "recording", "segments", &reply, &exit_code);
    if (!segs)
        return exit_code;
    o = json_node_get_object(reply);
    if (!json_object_get_boolean_member_with_default(o, "enabled", FALSE) &&
        json_array_get_length(segs) == 0) {
        carrel_cli_print_text("not recorded (its policy has no [recording] enabled=true)\n");
        return CARREL_CLI_EXIT_OK;
    }
    for (guint i = 0; i < json_array_get_length(segs); i++)
        print_segment(json_array_get_object_element(segs, i));
    if (json_object_get_int_member_with_default(o, "dropped", 0) > 0) {
        g_autofree char *line =
            g_strdup_printf("%" G_GINT64_FORMAT " older segments dropped (max_mib)\n",
                            json_object_get_int_member_with_default(o, "dropped", 0));
        carrel_cli_print_text(line);
    }
    return CARREL_CLI_EXIT_OK;
}

/* Written beside out and renamed over it once whole and checked: never half a video. */
static int
download_segment(CarrelCli *cli, const char *id, const char *name, const char *out)
{
    g_autofree char *base = carrel_cli_item_path("sessions", id, "recording");
    g_autofree char *escaped = g_uri_escape_string(name, NULL, FALSE);
    g_autofree char *path = NULL;
    g_autofree char *dir = g_path_get_dirname(out);
    g_autofree char *tmp = g_build_filename(dir, ".carrel-recording-XXXXXX", NULL);
    g_autoptr(GOutputStream) stream = NULL;
    g_auto(CarrelClientDownload) info = {0};
    g_autoptr(GError) error = NULL;
    int fd;

    if (!base)
        return carrel_cli_usage(cli, "invalid session '%s'", id);
    path = g_strconcat(base, "/", escaped, NULL);
    fd = g_mkstemp_full(tmp, O_RDWR | O_CLOEXEC, 0600);
    if (fd < 0) {
        g_set_error(&error, CARREL_ERROR, CARREL_ERROR_FAILED, "creating a file in '%s': %s", dir,
                    g_strerror(errno));
        return carrel_cli_fail(cli, error);
    }
    stream = g_unix_output_stream_new(fd, TRUE);
    carrel_cli_transfer_begin(cli, "recording");
    if (!carrel_client_download(cli->client, path, stream, &info, &error) ||
        !g_output_stream_close(stream, NULL, &error)) {
        carrel_cli_transfer_end(cli);
        (void)g_unlink(tmp);
        return carrel_cli_fail(cli, error);
    }
    carrel_cli_transfer_end(cli);
    if (!info.reply_sha256 || g_strcmp0(info.sha256, info.reply_sha256) != 0) {
        (void)g_unlink(tmp);
        g_set_error(&error, CARREL_ERROR, CARREL_ERROR_FAILED,
                    "segment '%s' arrived with sha256 %s, carreld listed %s", name, info.sha256,
                    info.reply_sha256 ? info.reply_sha256 : "none");
        return carrel_cli_fail(cli, error);
    }
    if (g_rename(tmp, out) != 0) {
        (void)g_unlink(tmp);
        g_set_error(&error, CARREL_ERROR, CARREL_ERROR_FAILED, "writing '%s': %s", out,
                    g_strerror(errno));
        return carrel_cli_fail(cli, error);
    }
    if (cli->json) {
        g_autoptr(JsonNode) node = carrel_conf_new_object_node();
        JsonObject *o = json_node_get_object(node);
        json_object_set_string_member(o, "segment", name);
        json_object_set_string_member(o, "file", out);
        json_object_set_int_member(o, "bytes", (gint64)info.bytes);
        json_object_set_string_member(o, "sha256", info.sha256);
        carrel_cli_print_json(cli, node);
    }
    return CARREL_CLI_EXIT_OK;
}

int
carrel_cli_recording(CarrelCli *cli, int argc, char **argv)
{
    g_autofree char *out = NULL;
    const GOptionEntry entries[] = {
        {"output", 'o', 0, G_OPTION_ARG_FILENAME, &out, "File to write the segment to", "FILE"},
        G_OPTION_ENTRY_NULL,
    };

    if (!carrel_cli_parse_options(cli, "ID [NAME -o FILE]",
                                  "Lists a session's screen recording (WebM segments, recorded "
                                  "when its policy has [recording] enabled=true), or downloads "
                                  "one finished segment.",
                                  entries, 1, 2, &argc, &argv))
        return CARREL_CLI_EXIT_USAGE;
    if (argc == 2) {
        if (out)
            return carrel_cli_usage(cli, "-o goes with a segment's NAME");
        return list_recording(cli, argv[1]);
    }
    if (!out || g_str_equal(out, "-"))
        return carrel_cli_usage(cli, "recording ID NAME needs -o FILE");
    return download_segment(cli, argv[1], argv[2], out);
}
