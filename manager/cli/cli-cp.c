#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

#include <gio/gunixinputstream.h>

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

static GBytes *
read_stdin(GError **error)
{
    g_autoptr(GInputStream) in = g_unix_input_stream_new(0, FALSE);
    g_autoptr(GByteArray) data = g_byte_array_new();

    for (;;) {
        g_autoptr(GBytes) chunk = g_input_stream_read_bytes(in, 64 * 1024, NULL, error);

        if (!chunk)
            return NULL;
        if (g_bytes_get_size(chunk) == 0)
            break;
        if (data->len + g_bytes_get_size(chunk) > CARREL_LIMIT_FILE_BYTES) {
            g_set_error(error, CARREL_ERROR, CARREL_ERROR_LIMIT, "stdin holds more than %d bytes",
                        CARREL_LIMIT_FILE_BYTES);
            return NULL;
        }
        g_byte_array_append(data, g_bytes_get_data(chunk, NULL), g_bytes_get_size(chunk));
    }
    return g_byte_array_free_to_bytes(g_steal_pointer(&data));
}

static GBytes *
read_local(const char *path, GError **error)
{
    g_autofree char *data = NULL;
    gsize len = 0;
    struct stat st;

    if (g_str_equal(path, "-"))
        return read_stdin(error);
    /* Refuse early what carreld would refuse, without reading it all. */
    if (stat(path, &st) == 0 && st.st_size > CARREL_LIMIT_FILE_BYTES) {
        g_set_error(error, CARREL_ERROR, CARREL_ERROR_LIMIT, "'%s' is larger than %d bytes", path,
                    CARREL_LIMIT_FILE_BYTES);
        return NULL;
    }
    if (!g_file_get_contents(path, &data, &len, error))
        return NULL;
    return g_bytes_new_take(g_steal_pointer(&data), len);
}

static gboolean
write_local(const char *path, GBytes *data, GError **error)
{
    gsize len = 0;
    const char *bytes = g_bytes_get_data(data, &len);

    if (g_str_equal(path, "-")) {
        if (fwrite(bytes, 1, len, stdout) != len || fflush(stdout) != 0) {
            g_set_error(error, CARREL_ERROR, CARREL_ERROR_FAILED, "writing to stdout failed");
            return FALSE;
        }
        return TRUE;
    }
    return g_file_set_contents(path, bytes, (gssize)len, error);
}

static int
report(CarrelCli *cli, const char *from, const char *to, GBytes *data)
{
    g_autofree char *sha = g_compute_checksum_for_bytes(G_CHECKSUM_SHA256, data);
    g_autoptr(JsonBuilder) b = json_builder_new();
    g_autoptr(JsonNode) node = NULL;

    if (!cli->json) {
        g_autofree char *shown = carrel_cli_clean_text(to);
        if (!g_str_equal(to, "-"))
            g_printerr("copied %" G_GSIZE_FORMAT " bytes to %s\n", g_bytes_get_size(data), shown);
        return CARREL_CLI_EXIT_OK;
    }
    json_builder_begin_object(b);
    json_builder_set_member_name(b, "from");
    json_builder_add_string_value(b, from);
    json_builder_set_member_name(b, "to");
    json_builder_add_string_value(b, to);
    json_builder_set_member_name(b, "bytes");
    json_builder_add_int_value(b, (gint64)g_bytes_get_size(data));
    json_builder_set_member_name(b, "sha256");
    json_builder_add_string_value(b, sha);
    json_builder_end_object(b);
    node = json_builder_get_root(b);
    carrel_cli_print_json(cli, node);
    return CARREL_CLI_EXIT_OK;
}

static int
copy_in(CarrelCli *cli, const char *local, const char *id, const char *guest, const char *dest)
{
    g_autofree char *path = files_path(id, guest);
    g_autoptr(GBytes) data = NULL;
    g_autoptr(GError) error = NULL;
    gboolean ok;

    if (!path)
        return carrel_cli_usage(cli, "invalid session '%s'", id);
    if (!(data = read_local(local, &error)))
        return carrel_cli_fail(cli, error);
    carrel_cli_transfer_begin(cli, dest);
    ok = carrel_client_call_bytes(cli->client, "PUT", path, "application/octet-stream", data, NULL,
                                  &error);
    carrel_cli_transfer_end(cli);
    if (!ok)
        return carrel_cli_fail(cli, error);
    return report(cli, local, dest, data);
}

static int
copy_out(CarrelCli *cli, const char *id, const char *guest, const char *src, const char *local)
{
    g_autofree char *path = files_path(id, guest);
    g_autoptr(GBytes) data = NULL;
    g_autoptr(GError) error = NULL;
    gboolean ok;

    if (!path)
        return carrel_cli_usage(cli, "invalid session '%s'", id);
    if (cli->json && g_str_equal(local, "-"))
        return carrel_cli_usage(cli, "--json and '-' both want stdout");
    carrel_cli_transfer_begin(cli, src);
    ok = carrel_client_call_bytes(cli->client, "GET", path, NULL, NULL, &data, &error);
    carrel_cli_transfer_end(cli);
    if (!ok || !write_local(local, data, &error))
        return carrel_cli_fail(cli, error);
    return report(cli, src, local, data);
}

int
carrel_cli_cp(CarrelCli *cli, int argc, char **argv)
{
    g_autofree char *src_id = NULL, *src_path = NULL, *dst_id = NULL, *dst_path = NULL;
    gboolean src_remote, dst_remote;

    if (!carrel_cli_parse_options(cli, "cp SRC DEST",
                                  "Copies a file into or out of a running session through its "
                                  "guest agent. One side is ID:/PATH, the other a local file or "
                                  "'-' for stdin/stdout. Binary-safe, up to 32 MiB.",
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
