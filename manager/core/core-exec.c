#include "core/core-priv.h"

#define EXEC_MAX_OUTPUT (1024 * 1024)

/* env and cwd go through coreutils' env(1) in the guest: guest-exec has no cwd. */
static GStrv
guest_argv(const CarrelExecRequest *req)
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

gboolean
carrel_manager_session_exec(CarrelManager *mgr, const char *id_or_name,
                            const CarrelExecRequest *req, CarrelExecResult *ret_result,
                            GError **error)
{
    g_autoptr(CarrelSession) session = carrel_store_session_get(mgr->store, id_or_name, error);
    g_autofree char *domain = NULL;
    g_auto(GStrv) argv = NULL;
    CarrelExecResult result = {0};
    gint64 start = g_get_monotonic_time();

    if (!session)
        return FALSE;
    if (session->state != CARREL_SESSION_RUNNING) {
        g_set_error(error, CARREL_ERROR, CARREL_ERROR_WRONG_STATE,
                    "cannot run a command in a session that is %s",
                    carrel_session_state_to_string(session->state));
        return FALSE;
    }
    domain = carrel_session_domain_name(session->id);
    argv = guest_argv(req);
    if (!carrel_hypervisor_agent_exec(mgr->hv, domain, (const char *const *)argv, req->stdin_bytes,
                                      req->timeout_s, EXEC_MAX_OUTPUT, &result.exit_code,
                                      &result.stdout_bytes, &result.stderr_bytes, &result.truncated,
                                      &result.timed_out, error)) {
        g_prefix_error(error, "running a command in session '%s': ", session->id);
        return FALSE;
    }
    result.duration_ms = (g_get_monotonic_time() - start) / 1000;
    *ret_result = result;
    return TRUE;
}
