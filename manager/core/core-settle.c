/*
 * core: the observation after HID events, taken once the screen has settled. A fixed wait is
 * either too short for a slow guest (the frame predates the action's effect) or too long for a
 * fast one; instead the screen is sampled every SETTLE_INTERVAL_MS and each frame's pixel hash
 * compared with the frame from before the action:
 * - a frame that differs shows the effect has begun: it is returned once the screen has then
 *   stayed the same for quiet_ms (so a window still redrawing is not caught halfway), or for as
 *   long as the guest took to show that first change if that was longer: a guest slow to react
 *   (a busy host) pauses as long between the echoes of typed keys;
 * - a screen that never differs within window_ms of the last event is taken as an action with
 *   no visible effect (a click on nothing), and returned as it is;
 * - a screen that keeps changing (a video, a progress bar) is returned at max_ms, not settled.
 * A frame taken before the action is never returned: every sample is taken after the last event.
 */
#include "core/core-priv.h"
#include "image/image.h"

/* Between the starts of two samples: below the 16 ms of a 60 Hz frame it would only add load,
 * and a full screenshot costs several milliseconds of QEMU's main loop. */
#define SETTLE_INTERVAL_MS 20

static gboolean
sample(CarrelManager *mgr, const char *domain, GBytes **ppm, guint64 *ret_hash, gint64 *ret_at,
       GError **error)
{
    g_clear_pointer(ppm, g_bytes_unref);
    if (!carrel_hypervisor_screenshot(mgr->hv, domain, ppm, NULL, NULL, error))
        return FALSE;
    *ret_at = g_get_monotonic_time();
    *ret_hash = carrel_image_ppm_hash(*ppm);
    return TRUE;
}

static void
sleep_until(gint64 when_us)
{
    gint64 now = g_get_monotonic_time();

    if (when_us > now)
        g_usleep((gulong)(when_us - now));
}

/* The old behaviour: wait fixed_ms after the last event, look once; nothing is known settled. */
static GBytes *
settle_fixed(CarrelManager *mgr, const char *domain, const CarrelSettle *settle, guint64 ref_hash,
             gint64 hid_at, CarrelSettleResult *ret_result, GError **error)
{
    g_autoptr(GBytes) ppm = NULL;
    guint64 hash = 0;
    gint64 at = 0;

    sleep_until(hid_at + (gint64)settle->fixed_ms * 1000);
    if (!sample(mgr, domain, &ppm, &hash, &at, error))
        return NULL;
    *ret_result = (CarrelSettleResult){.settled = FALSE,
                                       .changed = hash != ref_hash,
                                       .settled_ms = (guint)((at - hid_at) / 1000),
                                       .samples = 1};
    return g_steal_pointer(&ppm);
}

GBytes *
carrel_manager_settle_screen(CarrelManager *mgr, const char *domain, const CarrelSettle *settle,
                             guint64 ref_hash, gint64 hid_at, CarrelSettleResult *ret_result,
                             GError **error)
{
    g_autoptr(GBytes) ppm = NULL;
    CarrelSettleResult r = {0};
    guint64 last = ref_hash, hash = 0;
    gint64 stable_since = 0, at = 0, began, quiet_us = (gint64)settle->quiet_ms * 1000;

    if (settle->fixed_ms)
        return settle_fixed(mgr, domain, settle, ref_hash, hid_at, ret_result, error);
    for (;;) {
        began = g_get_monotonic_time();
        if (!sample(mgr, domain, &ppm, &hash, &at, error))
            return NULL;
        r.samples++;
        if (hash != last) {
            if (!r.changed)
                quiet_us = MAX(quiet_us, at - hid_at);
            last = hash;
            stable_since = at;
            r.changed = r.changed || hash != ref_hash;
        } else if (r.changed ? at - stable_since >= quiet_us
                             : at - hid_at >= (gint64)settle->window_ms * 1000) {
            r.settled = TRUE;
            break;
        }
        if (at - hid_at >= (gint64)settle->max_ms * 1000)
            break;
        sleep_until(began + SETTLE_INTERVAL_MS * 1000);
    }
    r.settled_ms = (guint)((at - hid_at) / 1000);
    *ret_result = r;
    return g_steal_pointer(&ppm);
}
