/* carrel shell ID: an interactive terminal in the guest (GET /v1/sessions/{id}/shell, a
 * websocket). On a terminal, ours goes raw for the session (restored on every way out) and
 * follows our window's size; from a pipe, what we read is typed into the guest's terminal and
 * its end is the terminal's end of file. Exits with the remote shell's exit code. */
#include <errno.h>
#include <stdio.h>
#include <sys/ioctl.h>
#include <termios.h>
#include <unistd.h>

#include <glib-unix.h>

#include "cli/cli.h"

#define READ_CHUNK (16 * 1024)

typedef struct {
    CarrelCli *cli;
    GMainLoop *loop;
    SoupWebsocketConnection *ws;
    gboolean raw;
    struct termios saved;
    guint stdin_source;
    gint64 exit_code; /* -1 until the exit message */
    GError *error;    /* an error message from carreld */
} Shell;

static void
window_size(guint *ret_rows, guint *ret_cols)
{
    struct winsize ws = {0};

    *ret_rows = 24;
    *ret_cols = 80;
    if ((ioctl(STDOUT_FILENO, TIOCGWINSZ, &ws) == 0 || ioctl(STDIN_FILENO, TIOCGWINSZ, &ws) == 0) &&
        ws.ws_row > 0 && ws.ws_col > 0) {
        *ret_rows = MIN(ws.ws_row, 1000);
        *ret_cols = MIN(ws.ws_col, 1000);
    }
}

static void
send_control(Shell *sh, const char *text)
{
    if (sh->ws && soup_websocket_connection_get_state(sh->ws) == SOUP_WEBSOCKET_STATE_OPEN)
        soup_websocket_connection_send_text(sh->ws, text);
}

static gboolean
on_winch(gpointer data)
{
    Shell *sh = data;
    guint rows, cols;
    g_autofree char *text = NULL;

    window_size(&rows, &cols);
    text = g_strdup_printf("{\"type\":\"resize\",\"rows\":%u,\"cols\":%u}", rows, cols);
    send_control(sh, text);
    return G_SOURCE_CONTINUE;
}

static gboolean
on_stop(gpointer data)
{
    Shell *sh = data;

    if (sh->ws && soup_websocket_connection_get_state(sh->ws) == SOUP_WEBSOCKET_STATE_OPEN)
        soup_websocket_connection_close(sh->ws, SOUP_WEBSOCKET_CLOSE_GOING_AWAY, NULL);
    else
        g_main_loop_quit(sh->loop);
    return G_SOURCE_CONTINUE;
}

static gboolean
on_stdin(gint fd, GIOCondition condition, gpointer data)
{
    Shell *sh = data;
    char buf[READ_CHUNK];
    gssize n = read(fd, buf, sizeof(buf));

    if (n < 0 && (errno == EINTR || errno == EAGAIN))
        return G_SOURCE_CONTINUE;
    if (n > 0) {
        if (sh->ws && soup_websocket_connection_get_state(sh->ws) == SOUP_WEBSOCKET_STATE_OPEN)
            soup_websocket_connection_send_binary(sh->ws, buf, (gsize)n);
        return G_SOURCE_CONTINUE;
    }
    /* The end of our input: the guest's terminal reads its end of file after what we sent. */
    send_control(sh, "{\"type\":\"eof\"}");
    sh->stdin_source = 0;
    return G_SOURCE_REMOVE;
}

static void
write_all(const char *data, gsize len)
{
    while (len > 0) {
        gssize n = write(STDOUT_FILENO, data, len);

        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            return;
        data += n;
        len -= (gsize)n;
    }
}

static void
on_text(Shell *sh, const char *text, gsize len)
{
    g_autoptr(JsonNode) node = json_from_string(text, NULL);
    JsonObject *o = node && JSON_NODE_HOLDS_OBJECT(node) ? json_node_get_object(node) : NULL;
    const char *type = o ? json_object_get_string_member_with_default(o, "type", "") : "";
    JsonObject *err = NULL;

    if (g_str_equal(type, "exit")) {
        sh->exit_code = json_object_get_int_member_with_default(o, "exit_code", 1);
    } else if (g_str_equal(type, "error") && !sh->error) {
        err = json_object_get_object_member(o, "error");
        g_set_error(&sh->error, CARREL_ERROR,
                    carrel_error_code_from_string(
                        err ? json_object_get_string_member_with_default(err, "code", "") : ""),
                    "%s",
                    err ? json_object_get_string_member_with_default(err, "message", "failed")
                        : "failed");
    }
}

static void
on_message(SoupWebsocketConnection *ws, gint type, GBytes *message, gpointer data)
{
    Shell *sh = data;
    gsize len = 0;
    const char *bytes = g_bytes_get_data(message, &len);

    if (type == SOUP_WEBSOCKET_DATA_BINARY)
        write_all(bytes, len);
    else
        on_text(sh, bytes, len);
}

static void
on_closed(SoupWebsocketConnection *ws, gpointer data)
{
    Shell *sh = data;

    g_main_loop_quit(sh->loop);
}

static void
raw_mode(Shell *sh)
{
    struct termios raw;

    if (!isatty(STDIN_FILENO) || tcgetattr(STDIN_FILENO, &sh->saved) < 0)
        return;
    raw = sh->saved;
    cfmakeraw(&raw);
    if (tcsetattr(STDIN_FILENO, TCSANOW, &raw) == 0)
        sh->raw = TRUE;
}

static void
restore_mode(Shell *sh)
{
    if (sh->raw)
        tcsetattr(STDIN_FILENO, TCSANOW, &sh->saved);
    sh->raw = FALSE;
}

static int
run(CarrelCli *cli, const char *id)
{
    Shell sh = {.cli = cli, .exit_code = -1};
    g_autofree char *base = carrel_cli_item_path("sessions", id, "shell");
    g_autofree char *path = NULL;
    g_autoptr(GError) error = NULL;
    guint rows, cols, sources[4];
    int code;

    if (!base)
        return carrel_cli_usage(cli, "usage: carrel shell ID");
    window_size(&rows, &cols);
    path = g_strdup_printf("%s?rows=%u&cols=%u", base, rows, cols);
    sh.ws = carrel_client_websocket(cli->client, path, &error);
    if (!sh.ws)
        return carrel_cli_fail(cli, error);
    sh.loop = g_main_loop_new(NULL, FALSE);
    g_signal_connect(sh.ws, "message", G_CALLBACK(on_message), &sh);
    g_signal_connect(sh.ws, "closed", G_CALLBACK(on_closed), &sh);
    sources[0] = g_unix_signal_add(SIGWINCH, on_winch, &sh);
    sources[1] = g_unix_signal_add(SIGINT, on_stop, &sh);
    sources[2] = g_unix_signal_add(SIGTERM, on_stop, &sh);
    sources[3] = g_unix_signal_add(SIGHUP, on_stop, &sh);
    raw_mode(&sh);
    sh.stdin_source = g_unix_fd_add(STDIN_FILENO, G_IO_IN | G_IO_HUP | G_IO_ERR, on_stdin, &sh);
    g_main_loop_run(sh.loop);
    restore_mode(&sh);
    for (guint i = 0; i < G_N_ELEMENTS(sources); i++)
        g_source_remove(sources[i]);
    if (sh.stdin_source)
        g_source_remove(sh.stdin_source);
    g_clear_object(&sh.ws);
    g_main_loop_unref(sh.loop);
    if (sh.error) {
        code = carrel_cli_fail(cli, sh.error);
        g_error_free(sh.error);
        return code;
    }
    if (sh.exit_code < 0) {
        g_set_error(&error, CARREL_ERROR, CARREL_ERROR_FAILED,
                    "the connection ended before the shell did");
        return carrel_cli_fail(cli, error);
    }
    return sh.exit_code <= 255 ? (int)sh.exit_code : 1;
}

int
carrel_cli_shell(CarrelCli *cli, int argc, char **argv)
{
    const GOptionEntry entries[] = {G_OPTION_ENTRY_NULL};

    if (!carrel_cli_parse_options(cli, "shell ID",
                                  "Opens a terminal in the guest (a login shell as its user) for "
                                  "the control lease's holder or an admin; exits with its code.",
                                  entries, 1, 1, &argc, &argv))
        return CARREL_CLI_EXIT_USAGE;
    return run(cli, argv[1]);
}
