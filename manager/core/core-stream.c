/* Streamed commands: a background process (core-procs.c) read from its offsets as it runs, until
 * it has exited and both streams are read out. The door is passed once, at the start; the reads
 * that follow belong to that one command and are neither audited nor events of their own. */
#include <signal.h>

#include "core/core-priv.h"

/* What one streamed command may forward in all, both streams together: past it the process is
 * killed and the end says truncated. */
#define STREAM_OUTPUT_MAX (64 * 1024 * 1024)
/* Past the deadline the process is killed; reading goes on until the guest says it exited,
 * and gives up this long after the deadline (a stalled guest). */
#define STREAM_GRACE_US (10 * G_USEC_PER_SEC)
/* Each read waits in the guest this long for output (carrel-guest proc read --timeout): output
 * comes back one guest call after it was written, with no blind polling from here. */
#define STREAM_READ_WAIT "1"

struct _CarrelExecStream {
    CarrelManager *mgr;
    CarrelPrincipal *who;
    char *session_id;
    char *domain;
    char *handle;
    JsonNode *params;
    gint64 started_us;
    gint64 deadline_us;
    gint64 stdout_offset;
    gint64 stderr_offset;
    int exit_code;
    gboolean killed;
    gboolean timed_out;
    gboolean truncated;
    gboolean cancelled;
    gboolean recorded;
    gboolean no_wait; /* an older carrel-guest, whose reads cannot wait */
};

void
carrel_exec_stream_free(CarrelExecStream *st)
{
    if (!st)
        return;
    carrel_principal_free(st->who);
    g_free(st->session_id);
    g_free(st->domain);
    g_free(st->handle);
    if (st->params)
        json_node_unref(st->params);
    g_free(st);
}

static CarrelExecStream *
stream_open(CarrelDoor *door, const CarrelExecRequest *req, GError **error)
{
    g_autoptr(CarrelExecStream) st = g_new0(CarrelExecStream, 1);
    g_autoptr(CarrelSession) session = carrel_manager_running_session(
        door->mgr, door->session_id, "run a command in", &st->domain, error);
    g_autoptr(CarrelProcInfo) info = NULL;
    g_autoptr(GError) local = NULL;

    if (!session)
        return NULL;
    st->mgr = door->mgr;
    st->who = carrel_principal_copy(door->who);
    st->session_id = g_strdup(session->id);
    st->params = json_node_copy(door->params);
    st->started_us = g_get_monotonic_time();
    st->deadline_us = st->started_us + (gint64)req->timeout_s * G_USEC_PER_SEC;
    /* Its input is what the request gave, then its end, as for a command that is not streamed. */
    info = carrel_manager_proc_spawn(st->mgr, st->domain, req, TRUE, &local);
    if (!info) {
        carrel_manager_record_outcome(st->mgr, st->session_id, st->who, "command", "exec",
                                      st->params, NULL, &local, st->started_us, NULL, FALSE);
        g_propagate_prefixed_error(error, g_steal_pointer(&local),
                                   "running a command in session '%s': ", st->session_id);
        return NULL;
    }
    st->handle = g_strdup(info->handle);
    return g_steal_pointer(&st);
}

CarrelExecStream *
carrel_manager_exec_stream_start(CarrelManager *mgr, const CarrelPrincipal *who,
                                 const char *id_or_name, const CarrelExecRequest *req,
                                 GError **error)
{
    g_auto(CarrelDoor) door = {0};
    g_autoptr(GError) local = NULL;

    if (!carrel_door_enter(&door, mgr, who, CARREL_OP_SESSION_EXEC, id_or_name,
                           carrel_manager_exec_params(req), error))
        return NULL;
    return carrel_door_finish_full(&door, stream_open(&door, req, &local),
                                   (GDestroyNotify)carrel_exec_stream_free, &local, error);
}

const char *
carrel_exec_stream_handle(const CarrelExecStream *st)
{
    return st->handle;
}

static void
stream_kill(CarrelExecStream *st)
{
    g_autoptr(JsonNode) reply = NULL;
    g_autofree char *sig = g_strdup_printf("%d", SIGKILL);

    if (st->killed)
        return;
    st->killed = TRUE;
    /* Already gone (WRONG_STATE) is as good as killed. */
    reply = carrel_manager_guest_proc(
        st->mgr, st->domain, (const char *const[]){"kill", st->handle, sig, NULL}, NULL, NULL);
}

/* A carrel-guest that refuses --timeout on proc read predates it: read without waiting. */
static JsonNode *
guest_read(CarrelExecStream *st, const char *out, const char *err, GError **error)
{
    g_autoptr(GError) local = NULL;
    JsonNode *reply;

    if (!st->no_wait) {
        reply =
            carrel_manager_guest_proc(st->mgr, st->domain,
                                      (const char *const[]){"read", st->handle, out, err,
                                                            "--timeout", STREAM_READ_WAIT, NULL},
                                      NULL, &local);
        if (reply || !g_error_matches(local, CARREL_ERROR, CARREL_ERROR_INVALID_ARG)) {
            if (local)
                g_propagate_error(error, g_steal_pointer(&local));
            return reply;
        }
        st->no_wait = TRUE;
    }
    return carrel_manager_guest_proc(st->mgr, st->domain,
                                     (const char *const[]){"read", st->handle, out, err, NULL},
                                     NULL, error);
}

gboolean
carrel_exec_stream_waits(const CarrelExecStream *st)
{
    return !st->no_wait;
}

CarrelProcRead *
carrel_exec_stream_next(CarrelExecStream *st, GError **error)
{
    g_autofree char *out = g_strdup_printf("%" G_GINT64_FORMAT, st->stdout_offset);
    g_autofree char *err = g_strdup_printf("%" G_GINT64_FORMAT, st->stderr_offset);
    gint64 now = g_get_monotonic_time();
    g_autoptr(JsonNode) reply = NULL;
    g_autoptr(CarrelProcRead) read = NULL;

    if (now > st->deadline_us && !st->killed) {
        st->timed_out = TRUE;
        stream_kill(st);
    }
    if (now > st->deadline_us + STREAM_GRACE_US) {
        g_set_error(error, CARREL_ERROR, CARREL_ERROR_TIMEOUT,
                    "process '%s' did not end after it was killed", st->handle);
        return NULL;
    }
    reply = guest_read(st, out, err, error);
    if (!reply)
        return NULL;
    read = carrel_proc_read_from_guest(reply, st->stdout_offset, st->stderr_offset, error);
    if (!read)
        return NULL;
    st->stdout_offset += (gint64)g_bytes_get_size(read->stdout_data);
    st->stderr_offset += (gint64)g_bytes_get_size(read->stderr_data);
    if (st->stdout_offset + st->stderr_offset > STREAM_OUTPUT_MAX && !read->exited) {
        st->truncated = TRUE;
        stream_kill(st);
    }
    if (carrel_proc_read_is_last(read))
        st->exit_code = st->timed_out ? 137 : read->exit_code;
    return g_steal_pointer(&read);
}

void
carrel_exec_stream_cancel(CarrelExecStream *st)
{
    st->cancelled = TRUE;
    stream_kill(st);
}

static JsonNode *
stream_summary(const CarrelExecStream *st, gboolean ended)
{
    g_autoptr(JsonBuilder) b = json_builder_new();

    json_builder_begin_object(b);
    json_builder_set_member_name(b, "handle");
    json_builder_add_string_value(b, st->handle);
    json_builder_set_member_name(b, "exit_code");
    if (ended)
        json_builder_add_int_value(b, st->exit_code);
    else
        json_builder_add_null_value(b);
    json_builder_set_member_name(b, "timed_out");
    json_builder_add_boolean_value(b, st->timed_out);
    json_builder_set_member_name(b, "truncated");
    json_builder_add_boolean_value(b, st->truncated);
    json_builder_set_member_name(b, "cancelled");
    json_builder_add_boolean_value(b, st->cancelled);
    json_builder_set_member_name(b, "stdout_bytes");
    json_builder_add_int_value(b, st->stdout_offset);
    json_builder_set_member_name(b, "stderr_bytes");
    json_builder_add_int_value(b, st->stderr_offset);
    json_builder_set_member_name(b, "duration_ms");
    json_builder_add_int_value(b, (g_get_monotonic_time() - st->started_us) / 1000);
    json_builder_end_object(b);
    return json_builder_get_root(b);
}

JsonNode *
carrel_exec_stream_finish(CarrelExecStream *st, const GError *failure)
{
    g_autoptr(GError) local = failure ? g_error_copy(failure) : NULL;
    JsonNode *summary = stream_summary(st, !failure && !st->cancelled);

    if (!st->recorded) {
        st->recorded = TRUE;
        if (!carrel_manager_record_outcome(st->mgr, st->session_id, st->who, "command", "exec",
                                           st->params, summary, &local, st->started_us, NULL,
                                           failure == NULL))
            g_debug("the streamed command's event was not recorded");
    }
    return summary;
}
