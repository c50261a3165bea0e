#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

#include <errno.h>
#include <fcntl.h>
#include <gio/gunixinputstream.h>
#include <gio/gunixoutputstream.h>

#include "cli/cli.h"

/* "ID:/PATH" names a file in a session; anything else is local. */
static gboolean
split_remote(const char *arg, char **ret_id, char **ret_path)
{
    const char *colon = strchr(arg, ':');

    if (!colon || colon == arg || colon[1] != '/' || memchr(arg, '/', colon - arg))
        return FALSE;
    *ret_id = g_strndup(arg, colon - arg);
    *ret_path = g_strdup(colon + 1);
    return TRUE;
}

static char *
files_path(const char *id, const char *guest_path)
{
    g_autofree char *base = carrel_cli_item_path("sessions", id, "files");
    g_autofree char *query = g_uri_escape_string(guest_path, NULL, FALSE);

    return base ? g_strdup_printf("%s?path=%s", base, query) : NULL;
}

/* --json: {"from","to","bytes","sha256"}; sha256 is what carreld computed as the bytes passed
 * and checked against the one computed here. */
static int
report(CarrelCli *cli, const char *from, const char *to, guint64 bytes, const char *sha)
{
    g_autoptr(JsonBuilder) b = json_builder_new();
    g_autoptr(JsonNode) node = NULL;

    if (!cli->json) {
        g_autofree char *shown = carrel_cli_clean_text(to);
        if (!g_str_equal(to, "-"))
            g_printerr("copied %" G_GUINT64_FORMAT " bytes to %s (sha256 %s)\n", bytes, shown, sha);
        return CARREL_CLI_EXIT_OK;
    }
    json_builder_begin_object(b);
    json_builder_set_member_name(b, "from");
    json_builder_add_string_value(b, from);
    json_builder_set_member_name(b, "to");
    json_builder_add_string_value(b, to);
    json_builder_set_member_name(b, "bytes");
    json_builder_add_int_value(b, (gint64)bytes);
    json_builder_set_member_name(b, "sha256");
    json_builder_add_string_value(b, sha);
    json_builder_end_object(b);
    node = json_builder_get_root(b);
    carrel_cli_print_json(cli, node);
    return CARREL_CLI_EXIT_OK;
}

/* stdin copied to an unlinked temporary file: carreld wants a Content-Length, which a pipe
 * cannot tell in advance. */
static GInputStream *
spool_stdin(goffset *ret_length, GError **error)
{
    g_autoptr(GInputStream) in = g_unix_input_stream_new(0, FALSE);
    g_autoptr(GFileIOStream) io = NULL;
    g_autoptr(GFile) tmp = g_file_new_tmp("carrel-cp-XXXXXX", &io, error);
    g_autofree char *path = tmp ? g_file_get_path(tmp) : NULL;
    GOutputStream *out;
    gssize n;
    int fd;

    if (!tmp)
        return NULL;
    out = g_io_stream_get_output_stream(G_IO_STREAM(io));
    n = g_output_stream_splice(out, in, G_OUTPUT_STREAM_SPLICE_CLOSE_TARGET, NULL, error);
    fd = n >= 0 ? open(path, O_RDONLY | O_CLOEXEC) : -1;
    (void)g_file_delete(tmp, NULL, NULL);
    if (n < 0)
        return NULL;
    if (fd < 0) {
        int saved = errno;
        g_set_error(error, CARREL_ERROR, CARREL_ERROR_FAILED, "reading back stdin: %s",
                    g_strerror(saved));
        return NULL;
    }
    *ret_length = n;
    return g_unix_input_stream_new(fd, TRUE);
}

/* A local file (or stdin for "-") as a stream, with its size. */
static GInputStream *
open_local(const char *path, goffset *ret_length, GError **error)
{
    g_autoptr(GFile) file = NULL;
    g_autoptr(GFileInfo) info = NULL;
    GFileInputStream *in;

    *ret_length = -1;
    if (g_str_equal(path, "-"))
        return spool_stdin(ret_length, error);
    file = g_file_new_for_path(path);
    if (!(in = g_file_read(file, NULL, error)))
        return NULL;
    info = g_file_input_stream_query_info(in, G_FILE_ATTRIBUTE_STANDARD_SIZE, NULL, NULL);
    if (info)
        *ret_length = g_file_info_get_size(info);
    return G_INPUT_STREAM(in);
}

static int
copy_in(CarrelCli *cli, const char *local, const char *id, const char *guest, const char *dest)
{
    g_autofree char *path = files_path(id, guest);
    g_autoptr(GInputStream) in = NULL;
    g_autoptr(JsonNode) reply = NULL;
    g_autoptr(GError) error = NULL;
    JsonObject *o;
    goffset length = -1;
    gboolean ok;

    if (!path)
        return carrel_cli_usage(cli, "invalid session '%s'", id);
    if (!(in = open_local(local, &length, &error)))
        return carrel_cli_fail(cli, error);
    carrel_cli_transfer_begin(cli, dest);
    ok = carrel_client_upload(cli->client, path, in, length, &reply, &error);
    carrel_cli_transfer_end(cli);
    if (!ok)
        return carrel_cli_fail(cli, error);
    o = carrel_cli_json_object(reply, NULL);
    return report(cli, local, dest, (guint64)json_object_get_int_member_with_default(o, "bytes", 0),
                  carrel_cli_json_string(o, "sha256"));
}

/* Where a download goes: stdout, or a temporary file beside local renamed over it at the end,
 * so a failed copy never leaves half a file under the name asked for. */
static GOutputStream *
open_out(const char *local, GFile **ret_tmp_file, GError **error)
{
    g_autofree char *dir_path = NULL;
    g_autofree char *tmpl = NULL;

    if (g_str_equal(local, "-"))
        return g_unix_output_stream_new(1, FALSE);
    dir_path = g_path_get_dirname(local);
    tmpl = g_build_filename(dir_path, ".carrel-cp-XXXXXX", NULL);
    {
        int fd = g_mkstemp_full(tmpl, O_RDWR | O_CLOEXEC, 0644);
        if (fd < 0) {
            int saved = errno;
            g_set_error(error, CARREL_ERROR, CARREL_ERROR_FAILED, "creating a file in '%s': %s",
                        dir_path, g_strerror(saved));
            return NULL;
        }
        *ret_tmp_file = g_file_new_for_path(tmpl);
        return g_unix_output_stream_new(fd, TRUE);
    }
}

static int
copy_out(CarrelCli *cli, const char *id, const char *guest, const char *src, const char *local)
{
    g_autofree char *path = files_path(id, guest);
    g_autoptr(GOutputStream) out = NULL;
    g_autoptr(GFile) tmp_file = NULL;
    g_autoptr(GFile) target = NULL;
    g_auto(CarrelClientDownload) info = {0};
    g_autoptr(GError) error = NULL;
    gboolean ok;

    if (!path)
        return carrel_cli_usage(cli, "invalid session '%s'", id);
    if (cli->json && g_str_equal(local, "-"))
        return carrel_cli_usage(cli, "--json and '-' both want stdout");
    if (!(out = open_out(local, &tmp_file, &error)))
        return carrel_cli_fail(cli, error);
    carrel_cli_transfer_begin(cli, src);
    ok = carrel_client_download(cli->client, path, out, &info, &error) &&
         g_output_stream_close(out, NULL, &error);
    carrel_cli_transfer_end(cli);
    /* What arrived must be what carreld read from the guest. */
    if (ok && (!info.reply_sha256 || !g_str_equal(info.sha256, info.reply_sha256))) {
        g_set_error(&error, CARREL_ERROR, CARREL_ERROR_FAILED,
                    "the copy's sha256 %s differs from carreld's %s", info.sha256,
                    info.reply_sha256 ? info.reply_sha256 : "(none)");
        ok = FALSE;
    }
    if (ok && tmp_file) {
        target = g_file_new_for_path(local);
        ok = g_file_move(tmp_file, target, G_FILE_COPY_OVERWRITE, NULL, NULL, NULL, &error);
    }
    if (!ok) {
        if (tmp_file)
            (void)g_file_delete(tmp_file, NULL, NULL);
        return carrel_cli_fail(cli, error);
    }
    return report(cli, src, local, info.bytes, info.sha256);
}

int
carrel_cli_cp(CarrelCli *cli, int argc, char **argv)
{
    g_autofree char *src_id = NULL, *src_path = NULL, *dst_id = NULL, *dst_path = NULL;
    gboolean src_remote, dst_remote;

    if (!carrel_cli_parse_options(cli, "cp SRC DEST",
                                  "Copies a file into or out of a running session through its "
                                  "guest agent. One side is ID:/PATH, the other a local file or "
                                  "'-' for stdin/stdout. Binary-safe, streamed (up to 1 GiB); "
                                  "--json prints the sha256 carreld computed.",
                                  NULL, 2, 2, &argc, &argv))
        return CARREL_CLI_EXIT_USAGE;
    src_remote = split_remote(argv[1], &src_id, &src_path);
    dst_remote = split_remote(argv[2], &dst_id, &dst_path);
    if (src_remote == dst_remote)
        return carrel_cli_usage(cli, "exactly one of SRC and DEST must be ID:/PATH");
    if (dst_remote)
        return copy_in(cli, argv[1], dst_id, dst_path, argv[2]);
    return copy_out(cli, src_id, src_path, argv[1], argv[2]);
}
