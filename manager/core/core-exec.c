#include <string.h>

#include "core/core-priv.h"

#define EXEC_MAX_OUTPUT (1024 * 1024)

/* env and cwd go through coreutils' env(1) in the guest: guest-exec has no cwd. */
GStrv
carrel_manager_exec_argv(const CarrelExecRequest *req)
{
    g_autoptr(GStrvBuilder) b = g_strv_builder_new();

    if (req->cwd || (req->env && req->env[0])) {
        g_strv_builder_add(b, "/usr/bin/env");
        if (req->cwd) {
            g_strv_builder_add(b, "-C");
            g_strv_builder_add(b, req->cwd);
        }
        if (req->env)
            g_strv_builder_addv(b, (const char **)req->env);
    }
    g_strv_builder_addv(b, (const char **)req->argv);
    return g_strv_builder_end(b);
}

/* What the timeline keeps of a command: argv, cwd, env names (values may be secrets). */
JsonNode *
carrel_manager_exec_params(const CarrelExecRequest *req)
{
    g_autoptr(JsonBuilder) b = json_builder_new();

    json_builder_begin_object(b);
    json_builder_set_member_name(b, "argv");
    json_builder_begin_array(b);
    for (guint i = 0; req->argv[i]; i++)
        json_builder_add_string_value(b, req->argv[i]);
    json_builder_end_array(b);
    json_builder_set_member_name(b, "env_names");
    json_builder_begin_array(b);
    for (guint i = 0; req->env && req->env[i]; i++) {
        g_autofree char *name = g_strndup(req->env[i], strcspn(req->env[i], "="));
        json_builder_add_string_value(b, name);
    }
    json_builder_end_array(b);
    if (req->cwd) {
        json_builder_set_member_name(b, "cwd");
        json_builder_add_string_value(b, req->cwd);
    }
    json_builder_set_member_name(b, "timeout_s");
    json_builder_add_int_value(b, req->timeout_s);
    json_builder_set_member_name(b, "stdin_bytes");
    json_builder_add_int_value(b,
                               req->stdin_bytes ? (gint64)g_bytes_get_size(req->stdin_bytes) : 0);
    if (req->stream || req->background) {
        json_builder_set_member_name(b, req->stream ? "stream" : "background");
        json_builder_add_boolean_value(b, TRUE);
    }
    json_builder_end_object(b);
    return json_builder_get_root(b);
}

static JsonNode *
exec_summary(const CarrelExecResult *result)
{
    g_autoptr(JsonBuilder) b = json_builder_new();

    json_builder_begin_object(b);
    json_builder_set_member_name(b, "exit_code");
    json_builder_add_int_value(b, result->exit_code);
    json_builder_set_member_name(b, "timed_out");
    json_builder_add_boolean_value(b, result->timed_out);
    json_builder_set_member_name(b, "truncated");
    json_builder_add_boolean_value(b, result->truncated);
    json_builder_set_member_name(b, "stdout_bytes");
    json_builder_add_int_value(b, (gint64)g_bytes_get_size(result->stdout_bytes));
    json_builder_set_member_name(b, "stderr_bytes");
    json_builder_add_int_value(b, (gint64)g_bytes_get_size(result->stderr_bytes));
    json_builder_end_object(b);
    return json_builder_get_root(b);
}

static gboolean
run_exec(CarrelDoor *door, const CarrelExecRequest *req, CarrelExecResult *ret_result,
         GError **error)
{
    CarrelManager *mgr = door->mgr;
    g_autoptr(CarrelSession) session = NULL;
    g_autofree char *domain = NULL;
    g_auto(GStrv) argv = NULL;
    g_autoptr(GError) local = NULL;
    g_autoptr(JsonNode) summary = NULL;
    CarrelGuestExec run = {
        .stdin_bytes = req->stdin_bytes,
        .timeout_s = req->timeout_s,
        .max_output = EXEC_MAX_OUTPUT,
    };
    CarrelExecResult result = {0};
    gint64 start = g_get_monotonic_time();
    gboolean ok;

    session =
        carrel_manager_running_session(mgr, door->session_id, "run a command in", &domain, error);
    if (!session)
        return FALSE;
    argv = carrel_manager_exec_argv(req);
    run.argv = (const char *const *)argv;
    ok = carrel_hypervisor_agent_exec(mgr->hv, domain, &run, &result, &local);
    summary = ok ? exec_summary(&result) : NULL;
    ok = carrel_manager_record_outcome(mgr, session->id, door->who, "command", "exec", door->params,
                                       summary, &local, start, NULL, ok);
    if (!ok) {
        carrel_exec_result_clear(&result);
        g_propagate_prefixed_error(error, g_steal_pointer(&local),
                                   "running a command in session '%s': ", session->id);
        return FALSE;
    }
    result.duration_ms = (g_get_monotonic_time() - start) / 1000;
    *ret_result = result;
    return TRUE;
}

gboolean
carrel_manager_session_exec(CarrelManager *mgr, const CarrelPrincipal *who, const char *id_or_name,
                            const CarrelExecRequest *req, CarrelExecResult *ret_result,
                            GError **error)
{
    g_auto(CarrelDoor) door = {0};
    g_autoptr(GError) local = NULL;

    if (!carrel_door_enter(&door, mgr, who, CARREL_OP_SESSION_EXEC, id_or_name,
                           carrel_manager_exec_params(req), error))
        return FALSE;
    return carrel_door_finish_ok(&door, run_exec(&door, req, ret_result, &local), &local, error);
}
