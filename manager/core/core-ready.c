#include <string.h>

#include "core/core-priv.h"
#include "image/image.h"

#define GUEST_TOOL_OUTPUT_MAX (64 * 1024)
/* Rounds are screen_poll_ms apart (500 ms by default). After carrel-guest said ready, the
 * picture must hold for this many rounds (~2 s). */
#define SCREEN_STABLE_ROUNDS 4
#define AGENT_PING_TIMEOUT_S 2
/* How long the agent is polled every 20 ms before every 500 ms. */
#define AGENT_FAST_POLL_US (3 * G_USEC_PER_SEC)
/* Time left for the screen to settle after carrel-guest said ready, at the least. */
#define SCREEN_MIN_WAIT_S 30
/* Without an agent, the screen must hold still this many rounds (~8 s: a booting console can
 * pause for a few seconds; a desktop that is up does not change by itself). */
#define NO_AGENT_STABLE_ROUNDS 16

typedef enum { READY_YES, READY_NO_TOOL, READY_NO_GUEST, READY_FAILED } ToolReady;

/* Asks carrel-guest, when the template has it; its output is untrusted and only inspected. */
static ToolReady
ask_guest_tool(CarrelManager *mgr, const char *domain, guint timeout_s, GError **error)
{
    g_autofree char *timeout_text = g_strdup_printf("%u", timeout_s);
    const char *argv[] = {CARREL_GUEST_TOOL_PATH, "ready", "--timeout", timeout_text, NULL};
    CarrelGuestExec run = {
        .argv = argv,
        .timeout_s = timeout_s + 10,
        .max_output = GUEST_TOOL_OUTPUT_MAX,
    };
    g_auto(CarrelExecResult) result = {0};
    g_autoptr(JsonNode) reply = NULL;
    gsize len = 0;
    const char *data;

    g_autoptr(GError) local = NULL;

    if (!carrel_hypervisor_agent_exec(mgr->hv, domain, &run, &result, &local)) {
        /* libvirt's test driver runs no guest at all: nothing to wait for. */
        if (g_error_matches(local, CARREL_ERROR, CARREL_ERROR_UNSUPPORTED))
            return READY_NO_GUEST;
        g_propagate_error(error, g_steal_pointer(&local));
        return READY_FAILED;
    }
    if (result.exit_code == 127)
        return READY_NO_TOOL;
    data = result.stdout_bytes ? g_bytes_get_data(result.stdout_bytes, &len) : NULL;
    reply = (result.exit_code == 0 && !result.truncated && data)
                ? carrel_conf_parse_json(data, len, NULL)
                : NULL;
    if (reply && JSON_NODE_HOLDS_OBJECT(reply) &&
        json_object_get_boolean_member_with_default(json_node_get_object(reply), "ready", FALSE))
        return READY_YES;
    g_set_error(error, CARREL_ERROR, CARREL_ERROR_TIMEOUT,
                "the desktop did not become ready within %u s (carrel-guest exit %d%s)", timeout_s,
                result.exit_code, result.timed_out ? ", timed out" : "");
    return READY_FAILED;
}

/* Fallback for guests without carrel's tools: the screen shows something and holds still. */
static gboolean
wait_screen_stable(CarrelManager *mgr, const char *domain, guint timeout_s, GError **error)
{
    gint64 deadline = g_get_monotonic_time() + (gint64)timeout_s * G_USEC_PER_SEC;
    g_autoptr(GBytes) last = NULL;
    guint stable = 0;

    while (g_get_monotonic_time() < deadline) {
        g_autoptr(GBytes) shot = NULL;
        guint w, h;

        if (!carrel_hypervisor_screenshot(mgr->hv, domain, &shot, &w, &h, error))
            return FALSE;
        if (carrel_image_ppm_is_blank(shot) || (last && carrel_image_ppm_differs(last, shot)))
            stable = 0;
        else if (last)
            stable++;
        if (stable >= SCREEN_STABLE_ROUNDS)
            return TRUE;
        g_clear_pointer(&last, g_bytes_unref);
        last = g_steal_pointer(&shot);
        g_usleep((gulong)mgr->screen_poll_ms * 1000);
    }
    g_set_error(error, CARREL_ERROR, CARREL_ERROR_TIMEOUT,
                "the screen did not settle on a picture within %u s", timeout_s);
    return FALSE;
}

gboolean
carrel_manager_wait_ready(CarrelManager *mgr, CarrelJob *job, const char *domain, guint timeout_s,
                          GError **error)
{
    gint64 start = g_get_monotonic_time();
    guint left;

    switch (ask_guest_tool(mgr, domain, timeout_s, error)) {
    case READY_YES:
        /* X answers and the window manager runs, but a desktop like Xfce paints its panel and
         * background for a while after that (a minute under TCG): wait until the picture holds. */
        left =
            timeout_s - MIN(timeout_s, (guint)((g_get_monotonic_time() - start) / G_USEC_PER_SEC));
        if (job)
            carrel_job_progress(job, "carrel-guest: the desktop runs; waiting for it to be drawn");
        return wait_screen_stable(mgr, domain, MAX(left, SCREEN_MIN_WAIT_S), error);
    case READY_NO_GUEST:
        return TRUE;
    case READY_NO_TOOL:
        if (job)
            carrel_job_progress(job, "no carrel-guest: waiting for the screen to settle");
        return wait_screen_stable(mgr, domain, timeout_s, error);
    case READY_FAILED:
        break;
    }
    return FALSE;
}

/* A guest at rest uses less than this share of one host CPU (per mille) over one window. An
 * idle `tiny` under TCG uses 1-7 %, one loading drivers all of it. */
#define QUIET_PER_MILLE 200
#define QUIET_WINDOW_US G_USEC_PER_SEC

/* A desktop that is drawn can still be at work: tiny's carrel-init coldplugs the rest of the
 * hardware then, ~4 s of a CPU under TCG. A warm state saved meanwhile would hand that work to
 * every clone, and forks restored side by side would run it side by side. */
gboolean
carrel_manager_wait_quiet(CarrelManager *mgr, const char *domain, guint max_s, guint *ret_waited_ms)
{
    gint64 start = g_get_monotonic_time();
    gint64 deadline = start + (gint64)max_s * G_USEC_PER_SEC;
    gint64 at = start, now;
    guint64 cpu = 0, later = 0;
    gboolean quiet = FALSE;

    if (carrel_hypervisor_cpu_time(mgr->hv, domain, &cpu, NULL)) {
        while (!quiet && g_get_monotonic_time() < deadline) {
            g_usleep(QUIET_WINDOW_US);
            if (!carrel_hypervisor_cpu_time(mgr->hv, domain, &later, NULL))
                break;
            now = g_get_monotonic_time();
            /* ns of CPU per µs of wall: ns / (µs * 1000) per mille. */
            quiet = (later - cpu) < (guint64)(now - at) * QUIET_PER_MILLE;
            at = now;
            cpu = later;
        }
    }
    if (ret_waited_ms)
        *ret_waited_ms = (guint)((g_get_monotonic_time() - start) / 1000);
    return quiet;
}

typedef struct {
    GBytes *last;
    guint stable;
    gint64 next_shot;
} ScreenWatch;

/* One screenshot a second: TRUE once the screen is not blank and has held still long enough. */
static gboolean
screen_settled(CarrelManager *mgr, const char *domain, ScreenWatch *w)
{
    g_autoptr(GBytes) shot = NULL;
    guint width, height;

    if (g_get_monotonic_time() < w->next_shot)
        return FALSE;
    w->next_shot = g_get_monotonic_time() + (gint64)mgr->screen_poll_ms * 1000;
    if (!carrel_hypervisor_screenshot(mgr->hv, domain, &shot, &width, &height, NULL))
        return FALSE;
    if (carrel_image_ppm_is_blank(shot) || (w->last && carrel_image_ppm_differs(w->last, shot)))
        w->stable = 0;
    else if (w->last)
        w->stable++;
    g_clear_pointer(&w->last, g_bytes_unref);
    w->last = g_steal_pointer(&shot);
    return w->stable >= NO_AGENT_STABLE_ROUNDS;
}

static gboolean
guest_alive(CarrelManager *mgr, const char *domain, GError **error)
{
    CarrelDomainState state;

    if (!carrel_hypervisor_get_state(mgr->hv, domain, &state, error))
        return FALSE;
    if (state != CARREL_DOMAIN_RUNNING) {
        g_set_error(error, CARREL_ERROR, CARREL_ERROR_HYPERVISOR,
                    "the guest stopped (%s) before it became ready",
                    carrel_domain_state_to_string(state));
        return FALSE;
    }
    return TRUE;
}

gboolean
carrel_manager_wait_agent(CarrelManager *mgr, const char *domain, gboolean *ret_by_screen,
                          GError **error)
{
    gint64 start = g_get_monotonic_time();
    gint64 deadline = start + (gint64)mgr->agent_timeout_s * G_USEC_PER_SEC;
    gint64 grace = start + (gint64)mgr->screen_grace_s * G_USEC_PER_SEC;
    ScreenWatch watch = {0};
    gboolean ok = FALSE;

    for (;;) {
        g_autoptr(GError) ping_error = NULL;

        if (carrel_hypervisor_agent_ping(mgr->hv, domain, AGENT_PING_TIMEOUT_S, &ping_error)) {
            ok = TRUE;
            break;
        }
        if (!guest_alive(mgr, domain, error))
            break;
        /* Guests without an agent (imported disks): ready when the screen settles. */
        if (ret_by_screen && g_get_monotonic_time() > grace &&
            screen_settled(mgr, domain, &watch)) {
            *ret_by_screen = TRUE;
            ok = TRUE;
            break;
        }
        if (g_get_monotonic_time() > deadline) {
            g_set_error(error, CARREL_ERROR, CARREL_ERROR_TIMEOUT,
                        "the guest did not become ready within %u s (agent: %s)",
                        mgr->agent_timeout_s, ping_error->message);
            break;
        }
        /* A restored guest's agent reconnects within a few hundred ms: look often at first,
         * then every half second (a cold boot takes seconds anyway). */
        g_usleep(g_get_monotonic_time() - start < AGENT_FAST_POLL_US ? G_USEC_PER_SEC / 50
                                                                     : G_USEC_PER_SEC / 2);
    }
    g_clear_pointer(&watch.last, g_bytes_unref);
    carrel_timings_mark("agent");
    return ok;
}
