/* A session's own screen size, set in the guest by carrel-guest after every boot and restore. */
#include "core/core-priv.h"

/* X may be a moment from accepting clients right after a boot; carrel-guest waits that long. */
#define SCREEN_TIMEOUT_S 30
#define SCREEN_OUTPUT_MAX 4096

/* The guest's own words (untrusted): {"width","height",...} must be what was asked. */
static gboolean
check_reply(const CarrelSession *s, const CarrelExecResult *result, GError **error)
{
    g_autoptr(JsonNode) reply = NULL;
    gsize len = 0;
    const char *data = g_bytes_get_data(result->stdout_bytes, &len);
    JsonObject *obj;

    reply = !result->truncated && len ? carrel_conf_parse_json(data, len, NULL) : NULL;
    obj = reply && JSON_NODE_HOLDS_OBJECT(reply) ? json_node_get_object(reply) : NULL;
    if (result->exit_code != 0 || !obj) {
        g_set_error(error, CARREL_ERROR, CARREL_ERROR_FAILED, "carrel-guest screen exited %d%s%s",
                    result->exit_code,
                    result->exit_code == 127 ? " (this guest has no carrel-guest)" : "",
                    result->timed_out ? " (timed out)" : "");
        return FALSE;
    }
    if (json_object_get_int_member_with_default(obj, "width", 0) != s->screen_width ||
        json_object_get_int_member_with_default(obj, "height", 0) != s->screen_height) {
        g_set_error(error, CARREL_ERROR, CARREL_ERROR_FAILED,
                    "the guest did not take the screen size %ux%u", s->screen_width,
                    s->screen_height);
        return FALSE;
    }
    return TRUE;
}

gboolean
carrel_manager_apply_screen(CarrelManager *mgr, const CarrelSession *session, gboolean by_screen,
                            GError **error)
{
    g_autofree char *domain = carrel_session_domain_name(session->id);
    g_autofree char *size = NULL;
    const char *argv[] = {CARREL_GUEST_TOOL_PATH, "screen", NULL, NULL};
    CarrelGuestExec run = {
        .argv = argv, .timeout_s = SCREEN_TIMEOUT_S, .max_output = SCREEN_OUTPUT_MAX};
    g_auto(CarrelExecResult) result = {0};

    if (!session->screen_width)
        return TRUE;
    size = carrel_screen_size_format(session->screen_width, session->screen_height);
    if (by_screen) {
        g_set_error(error, CARREL_ERROR, CARREL_ERROR_FAILED,
                    "screen '%s' needs the guest agent and carrel-guest, and no agent answered",
                    size);
        return FALSE;
    }
    argv[2] = size;
    if (!carrel_hypervisor_agent_exec(mgr->hv, domain, &run, &result, error) ||
        !check_reply(session, &result, error)) {
        g_prefix_error(error, "setting screen '%s': ", size);
        return FALSE;
    }
    return TRUE;
}

gboolean
carrel_manager_apply_screen_after_boot(CarrelManager *mgr, const CarrelSession *session,
                                       gboolean by_screen, GError **error)
{
    g_autofree char *domain = carrel_session_domain_name(session->id);

    /* The desktop's own start-up may set its mode (desktop's xsession does): the session's
     * size comes once the desktop is up, so that it is the last word. */
    if (session->screen_width && !by_screen &&
        !carrel_manager_wait_ready(mgr, NULL, domain, mgr->agent_timeout_s, error))
        return FALSE;
    return carrel_manager_apply_screen(mgr, session, by_screen, error);
}
