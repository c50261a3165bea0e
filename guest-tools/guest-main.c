/* carrel-guest: runs in a template's guest, started by the host through the guest agent. */
#include <locale.h>
#include <signal.h>
#include <stdio.h>
#include <unistd.h>

#include "guest.h"

/* Slack beyond a command's own timeout before the watchdog ends a hung call (an X server that
 * accepts the connection and never answers, a stuck NSS lookup). */
#define WATCHDOG_SLACK_SECONDS 30

static void
on_watchdog(int sig)
{
    static const char message[] =
        "{\"error\":{\"code\":\"timeout\",\"message\":\"carrel-guest watchdog expired\"}}\n";

    if (write(STDOUT_FILENO, message, sizeof(message) - 1) < 0) {
        /* nothing left to report to */
    }
    _exit(1);
}

static void
arm_watchdog(const CarrelGuestOptions *options)
{
    struct sigaction action = {.sa_handler = on_watchdog};
    guint seconds = (guint)(options->timeout_ms / 1000) + WATCHDOG_SLACK_SECONDS;

    sigemptyset(&action.sa_mask);
    sigaction(SIGALRM, &action, NULL);
    alarm(seconds);
}

static JsonNode *
version_json(void)
{
    g_autoptr(JsonBuilder) builder = carrel_guest_json_begin();

    json_builder_set_member_name(builder, "version");
    json_builder_add_string_value(builder, CARREL_GUEST_VERSION);
    return carrel_guest_json_end(builder);
}

static JsonNode *
run(const CarrelGuestOptions *options, GError **error)
{
    switch (options->command) {
    case CARREL_GUEST_COMMAND_READY:
        return carrel_guest_cmd_ready(options, error);
    case CARREL_GUEST_COMMAND_WINDOWS:
        return carrel_guest_cmd_windows(options, error);
    case CARREL_GUEST_COMMAND_CLIPBOARD_GET:
        return carrel_guest_cmd_clipboard_get(options, error);
    case CARREL_GUEST_COMMAND_CLIPBOARD_SET:
        return carrel_guest_cmd_clipboard_set(options, error);
    case CARREL_GUEST_COMMAND_TYPE:
        return carrel_guest_cmd_type(options, error);
    case CARREL_GUEST_COMMAND_LAUNCH:
        return carrel_guest_cmd_launch(options, error);
    case CARREL_GUEST_COMMAND_OPEN:
        return carrel_guest_cmd_open(options, error);
    case CARREL_GUEST_COMMAND_SET_MAC:
        return carrel_guest_cmd_set_mac(options, error);
    case CARREL_GUEST_COMMAND_SET_NET:
        return carrel_guest_cmd_set_net(options, error);
    case CARREL_GUEST_COMMAND_SCREEN:
        return carrel_guest_cmd_screen(options, error);
    case CARREL_GUEST_COMMAND_FS_LIST:
    case CARREL_GUEST_COMMAND_FS_STAT:
    case CARREL_GUEST_COMMAND_FS_MKDIR:
    case CARREL_GUEST_COMMAND_FS_REMOVE:
    case CARREL_GUEST_COMMAND_FS_MOVE:
        return carrel_guest_cmd_fs(options, error);
    case CARREL_GUEST_COMMAND_PROC_START:
        return carrel_guest_cmd_proc_start(options, error);
    case CARREL_GUEST_COMMAND_PROC_READ:
        return carrel_guest_cmd_proc_read(options, error);
    case CARREL_GUEST_COMMAND_PROC_WRITE:
        return carrel_guest_cmd_proc_write(options, error);
    case CARREL_GUEST_COMMAND_PROC_CLOSE:
        return carrel_guest_cmd_proc_close(options, error);
    case CARREL_GUEST_COMMAND_PROC_KILL:
        return carrel_guest_cmd_proc_kill(options, error);
    case CARREL_GUEST_COMMAND_PROC_LIST:
        return carrel_guest_cmd_proc_list(options, error);
    case CARREL_GUEST_COMMAND_A11Y_TREE:
    case CARREL_GUEST_COMMAND_A11Y_NODE:
    case CARREL_GUEST_COMMAND_A11Y_ACTION:
        return carrel_guest_cmd_a11y(options, error);
    case CARREL_GUEST_COMMAND_PROC_RESIZE:
        return carrel_guest_cmd_proc_resize(options, error);
    case CARREL_GUEST_COMMAND_VERSION:
        return version_json();
    case CARREL_GUEST_COMMAND_HELP:
    case CARREL_GUEST_COMMAND_LAST:
        break;
    }
    g_set_error(error, CARREL_GUEST_ERROR, CARREL_GUEST_ERROR_INTERNAL, "unhandled command");
    return NULL;
}

int
main(int argc, char **argv)
{
    g_autoptr(CarrelGuestOptions) options = NULL;
    g_autoptr(GError) error = NULL;
    g_autoptr(JsonNode) result = NULL;

    /* Text from X (COMPOUND_TEXT titles) converts to UTF-8 only under a UTF-8 locale. */
    if (!setlocale(LC_CTYPE, "C.UTF-8"))
        setlocale(LC_CTYPE, "");
    options = carrel_guest_options_parse(argc, argv, &error);
    if (options && options->command == CARREL_GUEST_COMMAND_HELP) {
        fputs(carrel_guest_usage(), stdout);
        return 0;
    }
    if (options) {
        arm_watchdog(options);
        result = run(options, &error);
    }
    if (!result) {
        g_autoptr(JsonNode) failure = carrel_guest_error_to_json(error);

        carrel_guest_json_print(failure);
        return carrel_guest_error_exit_status(error);
    }
    return carrel_guest_json_print(result) ? 0 : 1;
}
