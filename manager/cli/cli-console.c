/* carrel console: the web console's URL for a session, or a .vv file for remote-viewer. */
#include <errno.h>
#include <fcntl.h>
#include <glib/gstdio.h>
#include <string.h>
#include <unistd.h>

#include "cli/cli.h"

typedef struct {
    char *vv;
    gboolean viewer;
} ConsoleArgs;

/* The session's id (the page takes ids), checking that it exists. */
static char *
session_id(CarrelCli *cli, const char *id, GError **error)
{
    g_autofree char *path = carrel_cli_item_path("sessions", id, NULL);
    g_autoptr(JsonNode) reply = NULL;
    const char *sid;

    if (!path) {
        g_set_error(error, CARREL_ERROR, CARREL_ERROR_INVALID_ARG, "invalid session '%s'", id);
        return NULL;
    }
    if (!carrel_cli_call(cli, "GET", path, NULL, &reply, error))
        return NULL;
    sid = json_object_get_string_member_with_default(json_node_get_object(reply), "id", NULL);
    if (!sid) {
        g_set_error(error, CARREL_ERROR, CARREL_ERROR_FAILED, "carreld sent no session id");
        return NULL;
    }
    return g_strdup(sid);
}

/* Where carreld serves the web console (its --listen), or NULL. */
static char *
daemon_web_url(CarrelCli *cli)
{
    g_autoptr(JsonNode) reply = NULL;
    const char *url;

    if (!carrel_cli_call(cli, "GET", "/v1/version", NULL, &reply, NULL) ||
        !JSON_NODE_HOLDS_OBJECT(reply))
        return NULL;
    url = json_object_get_string_member_with_default(json_node_get_object(reply), "web_url", NULL);
    return url ? g_strdup(url) : NULL;
}

static int
print_url(CarrelCli *cli, const char *id)
{
    g_autoptr(GError) error = NULL;
    g_autofree char *sid = session_id(cli, id, &error);
    g_autofree char *base = NULL;
    g_autofree char *url = NULL;
    g_autoptr(JsonBuilder) b = json_builder_new();
    g_autoptr(JsonNode) node = NULL;

    if (!sid)
        return carrel_cli_fail(cli, error);
    base = cli->url ? g_strdup(cli->url) : daemon_web_url(cli);
    if (!base) {
        g_set_error(&error, CARREL_ERROR, CARREL_ERROR_UNSUPPORTED,
                    "the web console needs carreld on TCP: start it with --listen "
                    "127.0.0.1:PORT; --vv FILE and --viewer work without");
        return carrel_cli_fail(cli, error);
    }
    while (g_str_has_suffix(base, "/"))
        base[strlen(base) - 1] = '\0';
    url = g_strdup_printf("%s/session.html?id=%s", base, sid);
    if (!cli->json) {
        carrel_cli_print_text(url);
        carrel_cli_print_text("\n");
        return CARREL_CLI_EXIT_OK;
    }
    json_builder_begin_object(b);
    json_builder_set_member_name(b, "id");
    json_builder_add_string_value(b, sid);
    json_builder_set_member_name(b, "url");
    json_builder_add_string_value(b, url);
    json_builder_end_object(b);
    node = json_builder_get_root(b);
    carrel_cli_print_json(cli, node);
    return CARREL_CLI_EXIT_OK;
}

/* Writes data to a new file only we may read (it holds a password). */
static gboolean
write_private(const char *path, GBytes *data, GError **error)
{
    gsize len = 0;
    const char *bytes = g_bytes_get_data(data, &len);
    int fd;

    if (g_unlink(path) < 0 && errno != ENOENT) {
        g_set_error(error, CARREL_ERROR, CARREL_ERROR_FAILED, "replacing '%s': %s", path,
                    g_strerror(errno));
        return FALSE;
    }
    fd = g_open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0600);
    if (fd < 0) {
        g_set_error(error, CARREL_ERROR, CARREL_ERROR_FAILED, "creating '%s': %s", path,
                    g_strerror(errno));
        return FALSE;
    }
    if (write(fd, bytes, len) != (gssize)len) {
        g_set_error(error, CARREL_ERROR, CARREL_ERROR_FAILED, "writing '%s': %s", path,
                    g_strerror(errno));
        close(fd);
        return FALSE;
    }
    return g_close(fd, error);
}

/* GET console.vv into path. */
static gboolean
fetch_vv(CarrelCli *cli, const char *id, const char *path, GError **error)
{
    g_autofree char *route = carrel_cli_item_path("sessions", id, "console.vv");
    g_autoptr(GBytes) vv = NULL;

    if (!route) {
        g_set_error(error, CARREL_ERROR, CARREL_ERROR_INVALID_ARG, "invalid session '%s'", id);
        return FALSE;
    }
    return carrel_client_call_bytes(cli->client, "GET", route, NULL, NULL, &vv, error) &&
           write_private(path, vv, error);
}

static int
save_vv(CarrelCli *cli, const char *id, const char *path)
{
    g_autoptr(GError) error = NULL;
    g_autoptr(JsonBuilder) b = json_builder_new();
    g_autoptr(JsonNode) node = NULL;

    if (!fetch_vv(cli, id, path, &error))
        return carrel_cli_fail(cli, error);
    if (!cli->json) {
        g_autofree char *shown = carrel_cli_clean_text(path);
        g_printerr("saved %s: open it with remote-viewer within %d s (its password expires)\n",
                   shown, 30);
        return CARREL_CLI_EXIT_OK;
    }
    json_builder_begin_object(b);
    json_builder_set_member_name(b, "file");
    json_builder_add_string_value(b, path);
    json_builder_end_object(b);
    node = json_builder_get_root(b);
    carrel_cli_print_json(cli, node);
    return CARREL_CLI_EXIT_OK;
}

static int
run_viewer(CarrelCli *cli, const char *id)
{
    g_autoptr(GError) error = NULL;
    g_autofree char *dir = g_dir_make_tmp("carrel-vv-XXXXXX", &error);
    g_autofree char *path = dir ? g_build_filename(dir, "console.vv", NULL) : NULL;
    g_autofree char *program = g_find_program_in_path("remote-viewer");
    g_autoptr(GSubprocess) viewer = NULL;
    int status = CARREL_CLI_EXIT_OK;

    if (!dir || !fetch_vv(cli, id, path, &error))
        return carrel_cli_fail(cli, error);
    if (!program) {
        g_set_error(&error, CARREL_ERROR, CARREL_ERROR_UNSUPPORTED,
                    "remote-viewer is not installed (Debian: apt-get install virt-viewer)");
        status = carrel_cli_fail(cli, error);
    } else {
        /* remote-viewer deletes the file once read (delete-this-file=1). */
        viewer = g_subprocess_new(G_SUBPROCESS_FLAGS_NONE, &error, program, path, NULL);
        if (!viewer || !g_subprocess_wait_check(viewer, NULL, &error))
            status = carrel_cli_fail(cli, error);
    }
    g_unlink(path);
    g_rmdir(dir);
    return status;
}

int
carrel_cli_console(CarrelCli *cli, int argc, char **argv)
{
    ConsoleArgs args = {0};
    const GOptionEntry entries[] = {
        {"vv", 0, 0, G_OPTION_ARG_FILENAME, &args.vv,
         "Write a remote-viewer file (needs the control lease)", "FILE"},
        {"viewer", 0, 0, G_OPTION_ARG_NONE, &args.viewer,
         "Open the console in remote-viewer (needs the control lease)", NULL},
        G_OPTION_ENTRY_NULL,
    };
    int exit_code = CARREL_CLI_EXIT_USAGE;

    if (carrel_cli_parse_options(cli, "console ID",
                                 "Prints the web console's URL for the session; --vv and --viewer "
                                 "use remote-viewer instead.",
                                 entries, 1, 1, &argc, &argv)) {
        if (args.vv && args.viewer)
            exit_code = carrel_cli_usage(cli, "use either --vv or --viewer");
        else if (args.vv)
            exit_code = save_vv(cli, argv[1], args.vv);
        else if (args.viewer)
            exit_code = run_viewer(cli, argv[1]);
        else
            exit_code = print_url(cli, argv[1]);
    }
    g_free(args.vv);
    return exit_code;
}
