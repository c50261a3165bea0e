/*
 * Crash points: named places inside the long operations where a test build can make carreld
 * die at once, as a SIGKILL or a power cut would, to show that reconcile converges from each.
 * Armed only by carreld's --test-hooks with CARREL_CRASH_AT; a daemon without them never exits
 * here. Every point is listed below: the e2e crash matrix walks this list, and the style tier
 * checks that every point named in the code is in it.
 */
#include <unistd.h>

#include "util/util.h"

static const char *const points[] = {
    "create.inserted",   "create.restored",     "warm.saved",
    "warm.frozen",       "snapshot.intent",     "snapshot.top",
    "snapshot.saving",   "snapshot.saved",      "revert.intent",
    "revert.destroyed",  "revert.restoring",    "revert.restored",
    "fork.inserted",     "fork.restoring",      "hibernate.saving",
    "hibernate.saved",   "hibernate.undefined", "resume.restoring",
    "resume.restored",   "resume.defined",      "pool.taken",
    "extract.copying",   "extract.copied",      "destroy.intent",
    "destroy.destroyed", "destroy.removed",     NULL,
};

static const char *armed; /* one of points, or NULL; set once before any thread starts */

const char *const *
carrel_crash_points(void)
{
    return points;
}

gboolean
carrel_crash_arm(const char *point, GError **error)
{
    for (guint i = 0; points[i]; i++)
        if (g_str_equal(points[i], point)) {
            armed = points[i];
            return TRUE;
        }
    g_set_error(error, CARREL_ERROR, CARREL_ERROR_INVALID_ARG, "no crash point '%s'", point);
    return FALSE;
}

static gboolean
is_armed(const char *point)
{
    return armed && g_str_equal(armed, point);
}

void
carrel_crash_point(const char *point)
{
    if (is_armed(point))
        _exit(CARREL_CRASH_EXIT);
}

static gpointer
die_later(gpointer data)
{
    g_usleep((gulong)GPOINTER_TO_UINT(data) * 1000);
    _exit(CARREL_CRASH_EXIT);
    return NULL;
}

void
carrel_crash_during(const char *point, guint delay_ms)
{
    if (is_armed(point))
        g_thread_unref(g_thread_new("crash", die_later, GUINT_TO_POINTER(delay_ms)));
}
