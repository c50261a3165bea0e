/*
 * egress: the processes carreld runs for the path (squid, dnsmasq) and the tools it calls (nft).
 * Each child gets a pid file, so that a carreld that died leaves nothing a new one cannot stop.
 */
#include <signal.h>
#include <glib/gstdio.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "egress/egress-priv.h"

#define LINE_MAX_BYTES 8192

struct _CarrelEgressChild {
    GSubprocess *proc;
    char *pid_file;
    GDataInputStream *err;
    CarrelEgressLineFunc on_line;
    gpointer data;
    GDestroyNotify data_free;
    gboolean stopping;
    int refs; /* the child and its pending read */
};

static void
child_unref(CarrelEgressChild *child)
{
    if (--child->refs > 0)
        return;
    g_clear_object(&child->err);
    g_clear_object(&child->proc);
    if (child->data_free)
        child->data_free(child->data);
    g_free(child->pid_file);
    g_free(child);
}

static void read_line(CarrelEgressChild *child);

static void
on_err_line(GObject *source, GAsyncResult *res, gpointer data)
{
    CarrelEgressChild *child = data;
    gsize len = 0;
    g_autofree char *line =
        g_data_input_stream_read_line_finish(G_DATA_INPUT_STREAM(source), res, &len, NULL);

    if (!line || child->stopping) {
        child_unref(child);
        return;
    }
    if (len <= LINE_MAX_BYTES && child->on_line)
        child->on_line(line, child->data);
    read_line(child);
}

static void
read_line(CarrelEgressChild *child)
{
    g_data_input_stream_read_line_async(child->err, G_PRIORITY_DEFAULT, NULL, on_err_line, child);
}

CarrelEgressChild *
carrel_egress_child_spawn(const char *const *argv, const char *pid_file,
                          CarrelEgressLineFunc on_line, gpointer data, GDestroyNotify data_free,
                          GError **error)
{
    CarrelEgressChild *child;
    g_autoptr(GSubprocess) proc = NULL;
    g_autofree char *pid_text = NULL;
    g_autofree char *program = g_path_get_basename(argv[0]);

    carrel_egress_kill_stale(pid_file, program);
    proc = g_subprocess_newv(
        argv, G_SUBPROCESS_FLAGS_STDOUT_SILENCE | G_SUBPROCESS_FLAGS_STDERR_PIPE, error);
    if (!proc) {
        g_prefix_error(error, "starting %s: ", argv[0]);
        if (data_free)
            data_free(data);
        return NULL;
    }
    pid_text = g_strdup_printf("%s\n", g_subprocess_get_identifier(proc));
    if (!g_file_set_contents(pid_file, pid_text, -1, error)) {
        g_subprocess_force_exit(proc);
        if (data_free)
            data_free(data);
        return NULL;
    }
    child = g_new0(CarrelEgressChild, 1);
    child->proc = g_steal_pointer(&proc);
    child->pid_file = g_strdup(pid_file);
    child->on_line = on_line;
    child->data = data;
    child->data_free = data_free;
    child->err = g_data_input_stream_new(g_subprocess_get_stderr_pipe(child->proc));
    child->refs = 2;
    read_line(child);
    return child;
}

void
carrel_egress_child_stop(CarrelEgressChild *child)
{
    if (!child)
        return;
    child->stopping = TRUE;
    g_subprocess_send_signal(child->proc, SIGTERM);
    /* GLib reaps children in its own worker thread: the identifier goes once it is gone. */
    for (int i = 0; i < 60 && g_subprocess_get_identifier(child->proc); i++)
        g_usleep(50 * 1000);
    if (g_subprocess_get_identifier(child->proc))
        g_subprocess_force_exit(child->proc);
    (void)g_unlink(child->pid_file);
    child_unref(child);
}

gboolean
carrel_egress_child_running(CarrelEgressChild *child)
{
    return child && g_subprocess_get_identifier(child->proc) != NULL;
}

void
carrel_egress_kill_stale(const char *pid_file, const char *program)
{
    g_autofree char *text = NULL;
    g_autofree char *comm_path = NULL;
    g_autofree char *comm = NULL;
    gint64 pid = 0;

    if (g_file_get_contents(pid_file, &text, NULL, NULL))
        pid = g_ascii_strtoll(g_strstrip(text), NULL, 10);
    /* Only if the pid still names that program: pids are reused. */
    comm_path = g_strdup_printf("/proc/%" G_GINT64_FORMAT "/comm", pid);
    if (pid > 1 && g_file_get_contents(comm_path, &comm, NULL, NULL) &&
        g_str_equal(g_strstrip(comm), program) && kill((pid_t)pid, SIGKILL) == 0)
        g_usleep(200 * 1000);
    (void)g_unlink(pid_file);
}

gboolean
carrel_egress_run(const char *const *argv, const char *stdin_text, GError **error)
{
    g_autoptr(GSubprocess) proc =
        g_subprocess_newv(argv,
                          G_SUBPROCESS_FLAGS_STDIN_PIPE | G_SUBPROCESS_FLAGS_STDOUT_SILENCE |
                              G_SUBPROCESS_FLAGS_STDERR_PIPE,
                          error);
    g_autofree char *err = NULL;

    if (!proc || !g_subprocess_communicate_utf8(proc, stdin_text, NULL, NULL, &err, error)) {
        g_prefix_error(error, "%s: ", argv[0]);
        return FALSE;
    }
    if (!g_subprocess_get_successful(proc)) {
        g_set_error(error, CARREL_ERROR, CARREL_ERROR_FAILED, "%s failed: %s", argv[0],
                    err ? g_strstrip(err) : "");
        return FALSE;
    }
    return TRUE;
}
