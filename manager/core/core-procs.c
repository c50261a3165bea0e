/* Background commands (carrel-guest proc in the guest): start, list, read, signal, input. The
 * guest's spool folder is their whole state, so they survive a carreld restart; the host keeps
 * nothing. Everything the guest says is parsed as untrusted (conf-proc.c). */
#include <string.h>

#include "core/core-priv.h"

#define PROC_TIMEOUT_S 30
/* A read carries at most 2 x 48 KiB of base64 in JSON; a list 32 short items. */
#define PROC_REPLY_MAX (512 * 1024)

JsonNode *
carrel_manager_guest_proc(CarrelManager *mgr, const char *domain, const char *const *args,
                          GBytes *in, GError **error)
{
    g_autoptr(GStrvBuilder) b = g_strv_builder_new();
    g_auto(GStrv) argv = NULL;
    CarrelGuestExec run = {
        .stdin_bytes = in, .timeout_s = PROC_TIMEOUT_S, .max_output = PROC_REPLY_MAX};
    g_auto(CarrelExecResult) result = {0};
    g_autoptr(JsonNode) reply = NULL;
    const char *data;
    gsize len = 0;

    g_strv_builder_add_many(b, CARREL_GUEST_TOOL_PATH, "proc", NULL);
    g_strv_builder_addv(b, (const char **)args);
    argv = g_strv_builder_end(b);
    run.argv = (const char *const *)argv;
    if (!carrel_hypervisor_agent_exec(mgr->hv, domain, &run, &result, error))
        return NULL;
    if (result.exit_code == 127) {
        g_set_error(error, CARREL_ERROR, CARREL_ERROR_UNSUPPORTED,
                    "this guest has no carrel-guest: background and streamed commands need it");
        return NULL;
    }
    data = g_bytes_get_data(result.stdout_bytes, &len);
    reply = !result.truncated && len ? carrel_conf_parse_json(data, len, NULL) : NULL;
    if (!reply || !JSON_NODE_HOLDS_OBJECT(reply)) {
        g_set_error(error, CARREL_ERROR, CARREL_ERROR_HYPERVISOR,
                    "carrel-guest proc %s gave no JSON object (exit %d%s)", args[0],
                    result.exit_code, result.timed_out ? ", timed out" : "");
        return NULL;
    }
    if (result.exit_code != 0) {
        g_autofree char *what = g_strconcat("carrel-guest proc ", args[0], NULL);

        carrel_manager_guest_error(reply, what, error);
        return NULL;
    }
    return g_steal_pointer(&reply);
}

static gboolean
check_handle(const char *handle, GError **error)
{
    if (carrel_proc_handle_valid(handle))
        return TRUE;
    g_set_error(error, CARREL_ERROR, CARREL_ERROR_INVALID_ARG,
                "invalid process handle '%s': expected 'p' and hex digits",
                handle && carrel_util_is_clean_text(handle) && strlen(handle) < 64 ? handle : "?");
    return FALSE;
}

static JsonNode *
handle_params(const char *handle)
{
    g_autoptr(JsonBuilder) b = json_builder_new();

    json_builder_begin_object(b);
    json_builder_set_member_name(b, "handle");
    /* Only a well-formed handle goes into the audit row: the rest is the caller's text. */
    json_builder_add_string_value(b, carrel_proc_handle_valid(handle) ? handle : "(invalid)");
    json_builder_end_object(b);
    return json_builder_get_root(b);
}

/* Starts the command and gives it its first input; close ends the input after it. */
CarrelProcInfo *
carrel_manager_proc_spawn(CarrelManager *mgr, const char *domain, const CarrelExecRequest *req,
                          gboolean close, GError **error)
{
    g_auto(GStrv) argv = carrel_manager_exec_argv(req);
    g_autoptr(GStrvBuilder) b = g_strv_builder_new();
    g_auto(GStrv) args = NULL;
    g_autoptr(JsonNode) reply = NULL;
    g_autoptr(CarrelProcInfo) info = g_new0(CarrelProcInfo, 1);
    g_autoptr(GError) local = NULL;
    JsonObject *obj;
    JsonNode *pid;
    JsonNode *handle;

    g_strv_builder_add_many(b, "start", "--", NULL);
    g_strv_builder_addv(b, (const char **)argv);
    args = g_strv_builder_end(b);
    reply = carrel_manager_guest_proc(mgr, domain, (const char *const *)args, NULL, error);
    if (!reply)
        return NULL;
    obj = json_node_get_object(reply);
    pid = json_object_get_member(obj, "pid");
    handle = json_object_get_member(obj, "handle");
    if (handle && JSON_NODE_HOLDS_VALUE(handle) &&
        json_node_get_value_type(handle) == G_TYPE_STRING)
        info->handle = g_strdup(json_node_get_string(handle));
    if (!carrel_proc_handle_valid(info->handle) || !pid || !JSON_NODE_HOLDS_VALUE(pid) ||
        json_node_get_value_type(pid) != G_TYPE_INT64) {
        g_set_error(error, CARREL_ERROR, CARREL_ERROR_HYPERVISOR,
                    "carrel-guest proc start gave a malformed reply");
        return NULL;
    }
    info->pid = json_node_get_int(pid);
    info->argv = g_strdupv(req->argv);
    info->started_at = g_get_real_time() / G_USEC_PER_SEC;
    /* A command that ended before its input came (echo, exit 3) needs none: not an error. */
    if (!carrel_manager_proc_feed(mgr, domain, info->handle, req->stdin_bytes, close, &local)) {
        if (!g_error_matches(local, CARREL_ERROR, CARREL_ERROR_WRONG_STATE)) {
            g_propagate_error(error, g_steal_pointer(&local));
            return NULL;
        }
    }
    return g_steal_pointer(&info);
}

gboolean
carrel_manager_proc_feed(CarrelManager *mgr, const char *domain, const char *handle, GBytes *data,
                         gboolean close, GError **error)
{
    g_autoptr(JsonNode) wrote = NULL;
    g_autoptr(JsonNode) closed = NULL;

    if (data && g_bytes_get_size(data) > 0) {
        wrote = carrel_manager_guest_proc(
            mgr, domain, (const char *const[]){"write", handle, "--stdin", NULL}, data, error);
        if (!wrote)
            return FALSE;
    }
    if (close) {
        closed = carrel_manager_guest_proc(
            mgr, domain, (const char *const[]){"close", handle, NULL}, NULL, error);
        if (!closed)
            return FALSE;
    }
    return TRUE;
}

static CarrelProcInfo *
start_background(CarrelDoor *door, const CarrelExecRequest *req, GError **error)
{
    g_autofree char *domain = NULL;
    g_autoptr(CarrelSession) session = carrel_manager_running_session(
        door->mgr, door->session_id, "start a process in", &domain, error);
    g_autoptr(GError) local = NULL;
    g_autoptr(CarrelProcInfo) info = NULL;
    g_autoptr(JsonNode) summary = NULL;
    gint64 start = g_get_monotonic_time();

    if (!session)
        return NULL;
    info = carrel_manager_proc_spawn(door->mgr, domain, req, FALSE, &local);
    summary = info ? carrel_proc_info_to_json(info) : NULL;
    if (!carrel_manager_record_outcome(door->mgr, session->id, door->who, "command", "exec",
                                       door->params, summary, &local, start, NULL, info != NULL)) {
        g_propagate_prefixed_error(error, g_steal_pointer(&local),
                                   "starting a process in session '%s': ", session->id);
        return NULL;
    }
    return g_steal_pointer(&info);
}

CarrelProcInfo *
carrel_manager_proc_start(CarrelManager *mgr, const CarrelPrincipal *who, const char *id_or_name,
                          const CarrelExecRequest *req, GError **error)
{
    g_auto(CarrelDoor) door = {0};
    g_autoptr(GError) local = NULL;

    if (!carrel_door_enter(&door, mgr, who, CARREL_OP_SESSION_EXEC, id_or_name,
                           carrel_manager_exec_params(req), error))
        return NULL;
    return carrel_door_finish_full(&door, start_background(&door, req, &local),
                                   (GDestroyNotify)carrel_proc_info_free, &local, error);
}

/* The guest reply of one proc call on a running session, after the door. */
static JsonNode *
door_proc(CarrelDoor *door, const char *what, const char *const *args, GBytes *in, GError **error)
{
    g_autofree char *domain = NULL;
    g_autoptr(CarrelSession) session =
        carrel_manager_running_session(door->mgr, door->session_id, what, &domain, error);

    if (!session)
        return NULL;
    return carrel_manager_guest_proc(door->mgr, domain, args, in, error);
}

GPtrArray *
carrel_manager_proc_list(CarrelManager *mgr, const CarrelPrincipal *who, const char *id_or_name,
                         GError **error)
{
    g_auto(CarrelDoor) door = {0};
    g_autoptr(GError) local = NULL;
    g_autoptr(JsonNode) reply = NULL;
    GPtrArray *list = NULL;

    if (!carrel_door_enter(&door, mgr, who, CARREL_OP_SESSION_EXEC, id_or_name, NULL, error))
        return NULL;
    reply = door_proc(&door, "list the processes of", (const char *const[]){"list", NULL}, NULL,
                      &local);
    list = reply ? carrel_proc_list_from_guest(reply, &local) : NULL;
    return carrel_door_finish_full(&door, list, (GDestroyNotify)g_ptr_array_unref, &local, error);
}

CarrelProcRead *
carrel_manager_proc_read(CarrelManager *mgr, const CarrelPrincipal *who, const char *id_or_name,
                         const char *handle, gint64 stdout_offset, gint64 stderr_offset,
                         GError **error)
{
    g_auto(CarrelDoor) door = {0};
    g_autoptr(GError) local = NULL;
    g_autoptr(JsonNode) reply = NULL;
    g_autofree char *out = g_strdup_printf("%" G_GINT64_FORMAT, stdout_offset);
    g_autofree char *err = g_strdup_printf("%" G_GINT64_FORMAT, stderr_offset);
    CarrelProcRead *read = NULL;

    if (stdout_offset < 0 || stderr_offset < 0 || stdout_offset > CARREL_PROC_OUTPUT_MAX ||
        stderr_offset > CARREL_PROC_OUTPUT_MAX) {
        g_set_error(error, CARREL_ERROR, CARREL_ERROR_INVALID_ARG,
                    "offsets must be between 0 and %d", CARREL_PROC_OUTPUT_MAX);
        return NULL;
    }
    if (!carrel_door_enter(&door, mgr, who, CARREL_OP_SESSION_EXEC, id_or_name,
                           handle_params(handle), error))
        return NULL;
    if (check_handle(handle, &local))
        reply = door_proc(&door, "read a process of",
                          (const char *const[]){"read", handle, out, err, NULL}, NULL, &local);
    read = reply ? carrel_proc_read_from_guest(reply, stdout_offset, stderr_offset, &local) : NULL;
    return carrel_door_finish_full(&door, read, (GDestroyNotify)carrel_proc_read_free, &local,
                                   error);
}

gboolean
carrel_manager_proc_signal(CarrelManager *mgr, const CarrelPrincipal *who, const char *id_or_name,
                           const char *handle, int signal, GError **error)
{
    g_auto(CarrelDoor) door = {0};
    g_autoptr(GError) local = NULL;
    g_autoptr(JsonNode) reply = NULL;
    g_autofree char *sig = g_strdup_printf("%d", signal);

    if (signal < 1 || signal > 64) {
        g_set_error(error, CARREL_ERROR, CARREL_ERROR_INVALID_ARG,
                    "signal %d is not between 1 and 64", signal);
        return FALSE;
    }
    if (!carrel_door_enter(&door, mgr, who, CARREL_OP_SESSION_EXEC, id_or_name,
                           handle_params(handle), error))
        return FALSE;
    if (check_handle(handle, &local))
        reply = door_proc(&door, "signal a process of",
                          (const char *const[]){"kill", handle, sig, NULL}, NULL, &local);
    return carrel_door_finish_ok(&door, reply != NULL, &local, error);
}

gboolean
carrel_manager_proc_input(CarrelManager *mgr, const CarrelPrincipal *who, const char *id_or_name,
                          const char *handle, const CarrelProcInput *input, GError **error)
{
    g_auto(CarrelDoor) door = {0};
    g_autoptr(GError) local = NULL;
    g_autofree char *domain = NULL;
    g_autoptr(CarrelSession) session = NULL;
    gboolean ok = FALSE;

    if (!carrel_door_enter(&door, mgr, who, CARREL_OP_SESSION_EXEC, id_or_name,
                           handle_params(handle), error))
        return FALSE;
    if (check_handle(handle, &local))
        session = carrel_manager_running_session(mgr, door.session_id, "write to a process of",
                                                 &domain, &local);
    if (session)
        ok = carrel_manager_proc_feed(mgr, domain, handle, input->data, input->close, &local);
    return carrel_door_finish_ok(&door, ok, &local, error);
}
