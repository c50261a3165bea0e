/*
 * carrel extract ID GUEST_PATH... -o DIR: asks carreld to take paths out of a session, then
 * downloads every file it wrote into DIR, laid out by guest path (DIR/home/user/out/...). The
 * names come from a guest, so DIR is written through the same archive sink as on the daemon:
 * links are recorded in DIR/.carrel-manifest.json, never created; nothing lands outside DIR.
 */
#include <fcntl.h>
#include <glib/gstdio.h>
#include <stdio.h>
#include <unistd.h>

#include "archive/archive.h"
#include "cli/cli.h"

static gint64
member_int(JsonObject *obj, const char *name)
{
    return json_object_get_int_member_with_default(obj, name, 0);
}

static guint32
member_mode(JsonObject *obj)
{
    const char *text = json_object_get_string_member_with_default(obj, "mode", "0600");

    return (guint32)(g_ascii_strtoull(text, NULL, 8) & 07777);
}

/* Downloads one artifact into a private temporary file, then hands it to the sink. */
static gboolean
fetch_file(CarrelCli *cli, CarrelArchiveSink *sink, JsonObject *a, GError **error)
{
    const char *id = json_object_get_string_member_with_default(a, "id", "");
    const char *guest = json_object_get_string_member_with_default(a, "guest_path", "");
    g_autofree char *path = carrel_cli_item_path("artifacts", id, NULL);
    g_autofree char *tmp = NULL;
    g_autoptr(GBytes) data = NULL;
    gboolean ok;
    int fd;

    if (!path) {
        g_set_error(error, CARREL_ERROR, CARREL_ERROR_INVALID_ARG, "bad artifact id in the reply");
        return FALSE;
    }
    if (!carrel_client_call_bytes(cli->client, "GET", path, NULL, NULL, &data, error))
        return FALSE;
    fd = g_file_open_tmp("carrel-extract-XXXXXX", &tmp, error);
    if (fd < 0)
        return FALSE;
    close(fd);
    ok = g_file_set_contents_full(tmp, g_bytes_get_data(data, NULL), (gssize)g_bytes_get_size(data),
                                  G_FILE_SET_CONTENTS_NONE, 0600, error) &&
         carrel_archive_sink_add_file(sink, guest, tmp, member_mode(a), member_int(a, "uid"),
                                      member_int(a, "gid"), member_int(a, "mtime"), error);
    (void)g_unlink(tmp);
    return ok;
}

static gboolean
place(CarrelCli *cli, CarrelArchiveSink *sink, JsonObject *a, GError **error)
{
    const char *type = json_object_get_string_member_with_default(a, "type", "other");
    const char *guest = json_object_get_string_member_with_default(a, "guest_path", "");
    const char *target = json_object_get_string_member_with_default(a, "link_target", NULL);
    CarrelArchiveType kind = carrel_archive_type_from_string(type);
    gboolean written = !JSON_NODE_HOLDS_NULL(json_object_get_member(a, "path"));

    if (kind == CARREL_ARCHIVE_TYPE_FILE && written)
        return fetch_file(cli, sink, a, error);
    if (kind == CARREL_ARCHIVE_TYPE_LAST || kind == CARREL_ARCHIVE_TYPE_FILE)
        kind = CARREL_ARCHIVE_TYPE_OTHER;
    return carrel_archive_sink_add_record(sink, guest, kind, target, member_mode(a),
                                          member_int(a, "uid"), member_int(a, "gid"),
                                          member_int(a, "mtime"), error);
}

/* The daemon's manifest, kept next to the files: links and skipped entries live only here. */
static void
write_manifest(const char *dir, JsonNode *reply)
{
    g_autofree char *path = g_build_filename(dir, ".carrel-manifest.json", NULL);
    g_autofree char *text = json_to_string(reply, TRUE);
    int fd = g_open(path, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);

    if (fd < 0 || write(fd, text, strlen(text)) != (gssize)strlen(text))
        g_printerr("carrel: warning: could not write %s\n", path);
    if (fd >= 0)
        close(fd);
}

static JsonNode *
request_body(char **paths, int n, gint max_mib, gint max_files)
{
    g_autoptr(JsonBuilder) b = json_builder_new();

    json_builder_begin_object(b);
    json_builder_set_member_name(b, "paths");
    json_builder_begin_array(b);
    for (int i = 0; i < n; i++)
        json_builder_add_string_value(b, paths[i]);
    json_builder_end_array(b);
    if (max_mib > 0) {
        json_builder_set_member_name(b, "max_bytes_mib");
        json_builder_add_int_value(b, max_mib);
    }
    if (max_files > 0) {
        json_builder_set_member_name(b, "max_files");
        json_builder_add_int_value(b, max_files);
    }
    json_builder_end_object(b);
    return json_builder_get_root(b);
}

static void
print_summary(JsonObject *x, const char *dir)
{
    JsonArray *missing = json_object_get_array_member(x, "missing");
    const char *err = json_object_get_string_member_with_default(x, "error", NULL);
    g_autofree char *shown = carrel_cli_clean_text(dir);

    g_printerr("extracted %" G_GINT64_FORMAT " entries, %" G_GINT64_FORMAT
               " bytes (via %s, %" G_GINT64_FORMAT " ms) into %s\n",
               member_int(x, "count"), member_int(x, "bytes"),
               json_object_get_string_member_with_default(x, "source", "?"),
               member_int(x, "duration_ms"), shown);
    for (guint i = 0; missing && i < json_array_get_length(missing); i++) {
        JsonObject *m = json_array_get_object_element(missing, i);
        g_autofree char *p =
            carrel_cli_clean_text(json_object_get_string_member_with_default(m, "path", ""));
        g_autofree char *e =
            carrel_cli_clean_text(json_object_get_string_member_with_default(m, "error", ""));
        g_printerr("  not extracted: %s: %s\n", p, e);
    }
    if (err) {
        g_autofree char *e = carrel_cli_clean_text(err);
        g_printerr("  stopped early: %s\n", e);
    }
}

/* Places every artifact, showing which one and how many are left on a terminal. */
static gboolean
place_all(CarrelCli *cli, CarrelArchiveSink *sink, JsonArray *artifacts, GError **error)
{
    guint n = artifacts ? json_array_get_length(artifacts) : 0;
    gboolean ok = TRUE;

    for (guint i = 0; ok && i < n; i++) {
        JsonNode *item = json_array_get_element(artifacts, i);
        JsonObject *obj = JSON_NODE_HOLDS_OBJECT(item) ? json_node_get_object(item) : NULL;
        CarrelCliProgress progress = {
            .text = obj ? json_object_get_string_member_with_default(obj, "guest_path", "") : "",
            .done = i,
            .total = n};

        if (cli->stderr_tty && !cli->json)
            carrel_cli_progress_show(cli, &progress);
        if (!obj)
            g_set_error(error, CARREL_ERROR, CARREL_ERROR_FAILED,
                        "carreld sent an artifact that is not an object");
        ok = obj && place(cli, sink, obj, error);
    }
    if (cli->stderr_tty && !cli->json)
        carrel_cli_progress_show(cli, NULL);
    return ok;
}

int
carrel_cli_extract(CarrelCli *cli, int argc, char **argv)
{
    g_autofree char *out = NULL;
    gint max_mib = 0, max_files = 0;
    const GOptionEntry entries[] = {
        {"output", 'o', 0, G_OPTION_ARG_FILENAME, &out, "Folder to write into (created)", "DIR"},
        {"max-mib", 0, 0, G_OPTION_ARG_INT, &max_mib, "Stop after this many MiB (default 1024)",
         "N"},
        {"max-files", 0, 0, G_OPTION_ARG_INT, &max_files, "Stop after this many entries", "N"},
        {NULL},
    };
    g_autofree char *path = NULL;
    g_autoptr(JsonNode) body = NULL;
    g_autoptr(JsonNode) reply = NULL;
    g_autoptr(CarrelArchiveSink) sink = NULL;
    g_autoptr(GError) error = NULL;
    /* carreld enforced the request's limits; these only bound what a reply could make us write. */
    CarrelArchiveLimits limits = {(guint64)CARREL_LIMIT_EXTRACT_MAX_MIB * 1024 * 1024,
                                  CARREL_LIMIT_EXTRACT_MAX_FILES};
    JsonArray *artifacts;

    if (!carrel_cli_parse_options(
            cli, "ID GUEST_PATH...",
            "Takes files and folders out of a session (running: through its agent; stopped, "
            "crashed or paused: from its disk with libguestfs) into DIR, laid out by guest path. "
            "Links, devices and refused names are recorded in DIR/.carrel-manifest.json, never "
            "created.",
            entries, 2, G_MAXUINT, &argc, &argv))
        return CARREL_CLI_EXIT_USAGE;
    if (!out)
        return carrel_cli_usage(cli, "extract needs -o DIR");
    path = carrel_cli_item_path("sessions", argv[1], "artifacts");
    if (!path)
        return carrel_cli_usage(cli, "invalid session '%s'", argv[1]);
    if (g_mkdir_with_parents(out, 0755) != 0)
        return carrel_cli_usage(cli, "cannot create '%s'", out);
    body = request_body(argv + 2, argc - 2, max_mib, max_files);
    if (!cli->json)
        g_printerr("extracting from %s...\n", argv[1]);
    if (!carrel_cli_call(cli, "POST", path, body, &reply, &error) ||
        !(sink = carrel_archive_sink_new(out, &limits, &error)))
        return carrel_cli_fail(cli, error);
    artifacts = json_object_get_array_member(json_node_get_object(reply), "artifacts");
    if (!place_all(cli, sink, artifacts, &error))
        return carrel_cli_fail(cli, error);
    write_manifest(out, reply);
    if (cli->json)
        carrel_cli_print_json(cli, reply);
    else
        print_summary(json_node_get_object(reply), out);
    return CARREL_CLI_EXIT_OK;
}
