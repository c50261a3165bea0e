/*
 * The fake backend's terminal: when turned on, it answers carrel-guest's "proc" commands for
 * one --pty process the way the guest would, so that the shell's websocket can be tested end to
 * end without a VM. The "program" is a tiny shell: the terminal echoes what is typed (newline as
 * CR LF), a line "echo TEXT" prints TEXT, "exit N" ends it with N, the end of input (proc
 * close) with 0 and a signal with 128 + it. Test code only.
 */
#include <string.h>

#define CARREL_HYPERVISOR_BACKEND_H_ALLOW
#include "hypervisor/hypervisor-backend.h"
#include "tests/fake/hypervisor-fake-priv.h"

#define TERMINAL_HANDLE "p7e1"

struct _FakeTerminal {
    gboolean started;
    gboolean exited;
    int exit_code;
    guint rows, cols;
    GString *output;
    GString *line;
    guint starts;
};

void
fake_terminal_free(FakeTerminal *t)
{
    if (!t)
        return;
    g_string_free(t->output, TRUE);
    g_string_free(t->line, TRUE);
    g_free(t);
}

static void
reply_text(CarrelExecResult *r, int code, char *text)
{
    r->exit_code = code;
    r->stdout_bytes = g_bytes_new_take(text, strlen(text));
    r->stderr_bytes = g_bytes_new(NULL, 0);
}

static void
reply_state(FakeTerminal *t, CarrelExecResult *r)
{
    if (t->exited)
        reply_text(r, 0,
                   g_strdup_printf("{\"handle\":\"" TERMINAL_HANDLE
                                   "\",\"pid\":4242,\"state\":\"exited\",\"exit_code\":%d}",
                                   t->exit_code));
    else
        reply_text(r, 0,
                   g_strdup("{\"handle\":\"" TERMINAL_HANDLE
                            "\",\"pid\":4242,\"state\":\"running\",\"exit_code\":null}"));
}

static void
reply_error(CarrelExecResult *r, const char *code, const char *message)
{
    reply_text(r, 1,
               g_strdup_printf("{\"error\":{\"code\":\"%s\",\"message\":\"%s\"}}", code, message));
}

static void
run_line(FakeTerminal *t, const char *line)
{
    guint64 code = 0;

    if (g_str_has_prefix(line, "echo ")) {
        g_string_append(t->output, line + 5);
        g_string_append(t->output, "\r\n");
    } else if (g_str_has_prefix(line, "exit ") &&
               g_ascii_string_to_unsigned(line + 5, 10, 0, 255, &code, NULL)) {
        t->exited = TRUE;
        t->exit_code = (int)code;
    }
}

static void
type_bytes(FakeTerminal *t, GBytes *in)
{
    gsize len = 0;
    const char *data = in ? g_bytes_get_data(in, &len) : NULL;

    for (gsize i = 0; i < len && !t->exited; i++) {
        if (data[i] == '\n') {
            g_string_append(t->output, "\r\n");
            run_line(t, t->line->str);
            g_string_truncate(t->line, 0);
        } else {
            g_string_append_c(t->output, data[i]);
            g_string_append_c(t->line, data[i]);
        }
    }
}

static void
reply_read(FakeTerminal *t, const char *offset_text, CarrelExecResult *r)
{
    guint64 offset = 0;
    g_autofree char *b64 = NULL;
    g_autofree char *state = NULL;

    if (offset_text &&
        (!g_ascii_string_to_unsigned(offset_text, 10, 0, t->output->len, &offset, NULL))) {
        reply_error(r, "invalid_argument", "offset past the end");
        return;
    }
    b64 = g_base64_encode((const guchar *)t->output->str + offset, t->output->len - offset);
    state = t->exited ? g_strdup_printf("\"exited\",\"exit_code\":%d", t->exit_code)
                      : g_strdup("\"running\",\"exit_code\":null");
    reply_text(r, 0,
               g_strdup_printf("{\"handle\":\"" TERMINAL_HANDLE "\",\"pid\":4242,\"state\":%s,"
                               "\"stdout\":{\"offset\":%" G_GUINT64_FORMAT
                               ",\"data\":\"%s\",\"size\":%" G_GSIZE_FORMAT "},"
                               "\"stderr\":{\"offset\":0,\"data\":\"\",\"size\":0}}",
                               state, offset, b64, t->output->len));
}

static gboolean
start(FakeTerminal *t, const char *const *args, CarrelExecResult *r)
{
    guint64 rows = 24, cols = 80;
    gboolean pty = FALSE;

    for (guint i = 0; args[i] && !g_str_equal(args[i], "--"); i++) {
        pty = pty || g_str_equal(args[i], "--pty");
        if (g_str_equal(args[i], "--rows") && args[i + 1])
            g_ascii_string_to_unsigned(args[i + 1], 10, 1, 1000, &rows, NULL);
        if (g_str_equal(args[i], "--cols") && args[i + 1])
            g_ascii_string_to_unsigned(args[i + 1], 10, 1, 1000, &cols, NULL);
    }
    if (!pty)
        return FALSE;
    g_string_truncate(t->output, 0);
    g_string_truncate(t->line, 0);
    t->started = TRUE;
    t->exited = FALSE;
    t->rows = (guint)rows;
    t->cols = (guint)cols;
    t->starts++;
    reply_text(r, 0, g_strdup("{\"handle\":\"" TERMINAL_HANDLE "\",\"pid\":4242}"));
    return TRUE;
}

/* args: what follows "carrel-guest proc". */
static void
answer(FakeTerminal *t, const char *const *args, GBytes *in, CarrelExecResult *r)
{
    const char *verb = args[0];
    guint64 sig = 15;

    if (!args[1] || !g_str_equal(args[1], TERMINAL_HANDLE) || !t->started) {
        reply_error(r, "not_found", "no such process");
    } else if (g_str_equal(verb, "read")) {
        reply_read(t, args[2], r);
    } else if (t->exited) {
        reply_error(r, "wrong_state", "the process has exited");
    } else if (g_str_equal(verb, "write")) {
        type_bytes(t, in);
        reply_state(t, r);
    } else if (g_str_equal(verb, "close")) {
        t->exited = TRUE;
        t->exit_code = 0;
        reply_state(t, r);
    } else if (g_str_equal(verb, "kill")) {
        if (args[2])
            g_ascii_string_to_unsigned(args[2], 10, 1, 64, &sig, NULL);
        t->exited = TRUE;
        t->exit_code = 128 + (int)sig;
        reply_state(t, r);
    } else if (g_str_equal(verb, "resize") && args[2] && args[3]) {
        t->rows = (guint)g_ascii_strtoull(args[2], NULL, 10);
        t->cols = (guint)g_ascii_strtoull(args[3], NULL, 10);
        reply_state(t, r);
    } else {
        reply_error(r, "invalid_argument", "unknown proc command");
    }
}

gboolean
fake_terminal_exec(FakeBackend *be, const CarrelGuestExec *run, CarrelExecResult *ret_result)
{
    const char *const *argv = run->argv;

    if (!be->terminal || !argv[0] || !argv[1] || !g_str_equal(argv[1], "proc") || !argv[2])
        return FALSE;
    if (g_str_equal(argv[2], "start"))
        return start(be->terminal, argv + 3, ret_result);
    if (g_str_equal(argv[2], "list"))
        return FALSE;
    answer(be->terminal, argv + 2, run->stdin_bytes, ret_result);
    return TRUE;
}

void
carrel_hypervisor_fake_set_terminal(CarrelHypervisor *hv, gboolean on)
{
    FakeBackend *be = hv->backend_data;
    g_autoptr(GMutexLocker) locker G_GNUC_UNUSED = g_mutex_locker_new(&be->lock);

    g_clear_pointer(&be->terminal, fake_terminal_free);
    if (!on)
        return;
    be->terminal = g_new0(FakeTerminal, 1);
    be->terminal->output = g_string_new(NULL);
    be->terminal->line = g_string_new(NULL);
}

gboolean
carrel_hypervisor_fake_get_terminal(CarrelHypervisor *hv, gboolean *ret_running, int *ret_exit_code,
                                    guint *ret_rows, guint *ret_cols)
{
    FakeBackend *be = hv->backend_data;
    g_autoptr(GMutexLocker) locker G_GNUC_UNUSED = g_mutex_locker_new(&be->lock);
    FakeTerminal *t = be->terminal;

    if (!t || !t->started)
        return FALSE;
    *ret_running = !t->exited;
    *ret_exit_code = t->exit_code;
    *ret_rows = t->rows;
    *ret_cols = t->cols;
    return TRUE;
}
