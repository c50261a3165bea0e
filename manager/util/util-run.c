#include <string.h>

#include "util/util.h"

typedef struct {
    gboolean done;
    gboolean timed_out;
    GBytes *out;
    GBytes *err;
    GError *error;
} RunState;

static void
on_communicated(GObject *source, GAsyncResult *res, gpointer user_data)
{
    RunState *st = user_data;

    g_subprocess_communicate_finish(G_SUBPROCESS(source), res, &st->out, &st->err, &st->error);
    st->done = TRUE;
}

static gboolean
on_timeout(gpointer user_data)
{
    GSubprocess *proc = user_data;

    g_object_set_data(G_OBJECT(proc), "carrel-timed-out", GINT_TO_POINTER(1));
    g_subprocess_force_exit(proc);
    return G_SOURCE_REMOVE;
}

static char *
bytes_to_text(GBytes *bytes, gboolean keep_tail)
{
    gsize len = 0;
    const char *data = bytes ? g_bytes_get_data(bytes, &len) : NULL;
    gsize keep = MIN(len, (gsize)CARREL_LIMIT_SUBPROCESS_OUTPUT);
    const char *start = data;

    if (!data)
        return g_strdup("");
    if (keep_tail)
        start = data + (len - keep);
    return g_strndup(start, keep);
}

static char *
stderr_tail(const char *text)
{
    gsize len = strlen(text);
    const char *start = len > 400 ? text + len - 400 : text;

    return g_strstrip(g_strdup(start));
}

static gboolean
check_exit(GSubprocess *proc, const char *prog, const char *err_text, GError **error)
{
    g_autofree char *tail = stderr_tail(err_text);

    if (g_subprocess_get_if_signaled(proc)) {
        g_set_error(error, CARREL_ERROR, CARREL_ERROR_FAILED, "'%s' killed by signal %d: %s", prog,
                    g_subprocess_get_term_sig(proc), tail);
        return FALSE;
    }
    if (g_subprocess_get_exit_status(proc) != 0) {
        g_set_error(error, CARREL_ERROR, CARREL_ERROR_FAILED, "'%s' exited with status %d: %s",
                    prog, g_subprocess_get_exit_status(proc), tail);
        return FALSE;
    }
    return TRUE;
}

static gboolean
run_collect(const char *const *argv, guint timeout_s, GSubprocess **ret_proc, char **ret_stdout,
            char **ret_stderr, GError **error)
{
    g_autoptr(GMainContext) ctx = g_main_context_new();
    g_autoptr(GSubprocess) proc = NULL;
    RunState st = {0};
    GSource *timer = NULL;

    proc = g_subprocess_newv(argv, G_SUBPROCESS_FLAGS_STDOUT_PIPE | G_SUBPROCESS_FLAGS_STDERR_PIPE,
                             error);
    if (!proc) {
        g_prefix_error(error, "starting '%s': ", argv[0]);
        return FALSE;
    }
    g_main_context_push_thread_default(ctx);
    g_subprocess_communicate_async(proc, NULL, NULL, on_communicated, &st);
    if (timeout_s > 0) {
        timer = g_timeout_source_new_seconds(timeout_s);
        g_source_set_callback(timer, on_timeout, proc, NULL);
        g_source_attach(timer, ctx);
    }
    while (!st.done)
        g_main_context_iteration(ctx, TRUE);
    /* Reap the child inside our context so no later wait touches another one. */
    while (!g_subprocess_wait(proc, NULL, NULL))
        ;
    if (timer) {
        g_source_destroy(timer);
        g_source_unref(timer);
    }
    g_main_context_pop_thread_default(ctx);
    *ret_stdout = bytes_to_text(st.out, FALSE);
    *ret_stderr = bytes_to_text(st.err, TRUE);
    g_clear_pointer(&st.out, g_bytes_unref);
    g_clear_pointer(&st.err, g_bytes_unref);
    if (st.error) {
        g_propagate_prefixed_error(error, st.error, "running '%s': ", argv[0]);
        return FALSE;
    }
    if (g_object_get_data(G_OBJECT(proc), "carrel-timed-out")) {
        g_set_error(error, CARREL_ERROR, CARREL_ERROR_TIMEOUT, "'%s' did not finish within %u s",
                    argv[0], timeout_s);
        return FALSE;
    }
    *ret_proc = g_steal_pointer(&proc);
    return TRUE;
}

gboolean
carrel_util_run_status(const char *const *argv, guint timeout_s, int *ret_status, char **ret_stdout,
                       char **ret_stderr, GError **error)
{
    g_autoptr(GSubprocess) proc = NULL;
    g_autofree char *out_text = NULL;
    g_autofree char *err_text = NULL;

    if (!run_collect(argv, timeout_s, &proc, &out_text, &err_text, error))
        return FALSE;
    if (g_subprocess_get_if_signaled(proc)) {
        g_set_error(error, CARREL_ERROR, CARREL_ERROR_FAILED, "'%s' killed by signal %d", argv[0],
                    g_subprocess_get_term_sig(proc));
        return FALSE;
    }
    *ret_status = g_subprocess_get_exit_status(proc);
    if (ret_stdout)
        *ret_stdout = g_steal_pointer(&out_text);
    if (ret_stderr)
        *ret_stderr = g_steal_pointer(&err_text);
    return TRUE;
}

gboolean
carrel_util_run(const char *const *argv, guint timeout_s, char **ret_stdout, char **ret_stderr,
                GError **error)
{
    g_autoptr(GSubprocess) proc = NULL;
    g_autofree char *out_text = NULL;
    g_autofree char *err_text = NULL;

    if (!run_collect(argv, timeout_s, &proc, &out_text, &err_text, error) ||
        !check_exit(proc, argv[0], err_text, error))
        return FALSE;
    if (ret_stdout)
        *ret_stdout = g_steal_pointer(&out_text);
    if (ret_stderr)
        *ret_stderr = g_steal_pointer(&err_text);
    return TRUE;
}
