/*
 * core: the daemon's metrics. Every family is declared here, in one table, so the names, labels
 * and help are in one place (README "Monitoring" lists them). Durations are observed where the
 * verbs complete; requests and errors are counted by api where replies are sent; sessions by
 * state, free disk and the process's figures are read at each scrape.
 *
 * Labels stay bounded: states, route patterns, error codes, fixed words. Never a session id.
 */
#include <sys/resource.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include "core/core-priv.h"

/* Seconds, for TCG guests: a restore under load takes seconds, a cold boot up to minutes. */
static const double duration_buckets[] = {0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 20, 30, 60, 120};

typedef struct {
    const char *name;
    CarrelMetricType type;
    const char *help;
    const char *labels[3];
    gboolean durations; /* a histogram with duration_buckets */
} FamilyRow;

static const FamilyRow families[] = {
    {"carrel_http_requests_total",
     CARREL_METRIC_COUNTER,
     "API requests answered, by method, route pattern and status",
     {"method", "route", "status"},
     FALSE},
    {"carrel_errors_total",
     CARREL_METRIC_COUNTER,
     "API error replies, by error code",
     {"code"},
     FALSE},
    {"carrel_create_duration_seconds",
     CARREL_METRIC_HISTOGRAM,
     "Successful session creates, by how the session came to be (pool, warm, cold)",
     {"from"},
     TRUE},
    {"carrel_restore_duration_seconds",
     CARREL_METRIC_HISTOGRAM,
     "Memory restores of a saved session, by what was restored (warm, hibernate, snapshot, fork)",
     {"from"},
     TRUE},
    {"carrel_snapshot_duration_seconds",
     CARREL_METRIC_HISTOGRAM,
     "Successful snapshots",
     {NULL},
     TRUE},
    {"carrel_revert_duration_seconds",
     CARREL_METRIC_HISTOGRAM,
     "Successful reverts to a snapshot",
     {NULL},
     TRUE},
    {"carrel_egress_denials_total",
     CARREL_METRIC_COUNTER,
     "Connections and lookups of sessions refused on the egress path, by decision",
     {"decision"},
     FALSE},
};

/* Read at each scrape, into a registry of the scrape's own. */
static const FamilyRow scrape_families[] = {
    {"carrel_sessions",
     CARREL_METRIC_GAUGE,
     "Sessions by state (warm pool members and destroyed sessions not included)",
     {"state"},
     FALSE},
    {"carrel_pool_members", CARREL_METRIC_GAUGE, "Members of warm pools", {NULL}, FALSE},
    {"carrel_memory_reclaims",
     CARREL_METRIC_GAUGE,
     "Memory reclaims of restored clones not yet done (queued or running, one at a time)",
     {NULL},
     FALSE},
    {"carrel_state_dir_free_bytes",
     CARREL_METRIC_GAUGE,
     "Bytes available on the file system of the state directory",
     {NULL},
     FALSE},
    {"carrel_state_dir_size_bytes",
     CARREL_METRIC_GAUGE,
     "Size of the file system of the state directory",
     {NULL},
     FALSE},
    {"process_resident_memory_bytes",
     CARREL_METRIC_GAUGE,
     "Resident memory of carreld",
     {NULL},
     FALSE},
    {"process_open_fds", CARREL_METRIC_GAUGE, "Open file descriptors of carreld", {NULL}, FALSE},
    {"process_max_fds",
     CARREL_METRIC_GAUGE,
     "Limit of open file descriptors of carreld",
     {NULL},
     FALSE},
};

static void
declare_all(CarrelMetrics *metrics, const FamilyRow *rows, gsize n)
{
    for (gsize i = 0; i < n; i++) {
        g_autoptr(GError) error = NULL;
        const FamilyRow *r = &rows[i];

        /* The table is carrel's own: a bad row is a bug, caught by every test. */
        if (!carrel_metrics_declare(metrics, r->name, r->type, r->help, r->labels,
                                    r->durations ? duration_buckets : NULL,
                                    r->durations ? G_N_ELEMENTS(duration_buckets) : 0, &error))
            g_error("metrics: %s", error->message);
    }
}

CarrelMetrics *
carrel_manager_metrics_new(void)
{
    CarrelMetrics *metrics = carrel_metrics_new();

    declare_all(metrics, families, G_N_ELEMENTS(families));
    return metrics;
}

CarrelMetrics *
carrel_manager_get_metrics(CarrelManager *mgr)
{
    return mgr->metrics;
}

void
carrel_manager_observe_since(CarrelManager *mgr, const char *histogram, const char *label,
                             gint64 started_us)
{
    const char *values[] = {label, NULL};
    double seconds = (double)(g_get_monotonic_time() - started_us) / G_USEC_PER_SEC;

    carrel_metrics_observe(mgr->metrics, histogram, values, MAX(seconds, 0.0));
}

gboolean
carrel_manager_restore(CarrelManager *mgr, const char *from, const char *memory, const char *xml,
                       GError **error)
{
    gint64 started = g_get_monotonic_time();

    if (!carrel_hypervisor_restore(mgr->hv, memory, xml, error))
        return FALSE;
    carrel_manager_observe_since(mgr, "carrel_restore_duration_seconds", from, started);
    carrel_timings_mark("restore");
    return TRUE;
}

void
carrel_manager_count_egress(CarrelManager *mgr, const char *decision)
{
    /* The log's words for a refusal (egress-log.c): anything else passed. */
    static const char *const denials[] = {"denied", "refused", "expired", NULL};
    const char *values[] = {NULL, NULL};

    if (!decision || !g_strv_contains(denials, decision))
        return;
    values[0] = decision;
    carrel_metrics_add(mgr->metrics, "carrel_egress_denials_total", values, 1);
}

static void
set_gauge(CarrelMetrics *scrape, const char *name, const char *label, double v)
{
    const char *values[] = {label, NULL};

    carrel_metrics_set(scrape, name, values, v);
}

/* Every state but destroyed, 0 when none is in it, so a dashboard sees each series. */
static gboolean
read_sessions(CarrelManager *mgr, CarrelMetrics *scrape, GError **error)
{
    g_autoptr(GPtrArray) all = carrel_store_session_list(mgr->store, FALSE, error);
    guint by_state[CARREL_SESSION_LAST] = {0};
    guint pool = 0;

    if (!all)
        return FALSE;
    for (guint i = 0; i < all->len; i++) {
        const CarrelSession *s = g_ptr_array_index(all, i);
        if (s->pool)
            pool++;
        else if ((int)s->state >= 0 && s->state < CARREL_SESSION_LAST)
            by_state[s->state]++;
    }
    for (int st = 0; st < CARREL_SESSION_LAST; st++) {
        if (st != CARREL_SESSION_DESTROYED)
            set_gauge(scrape, "carrel_sessions", carrel_session_state_to_string(st), by_state[st]);
    }
    set_gauge(scrape, "carrel_pool_members", NULL, pool);
    return TRUE;
}

/* Until it is 0, some clone still holds memory its guest does not use (a density reading
 * waits for it). */
static void
read_reclaims(CarrelManager *mgr, CarrelMetrics *scrape)
{
    guint n;

    g_mutex_lock(&mgr->lock);
    n = mgr->reclaims_running;
    g_mutex_unlock(&mgr->lock);
    set_gauge(scrape, "carrel_memory_reclaims", NULL, n);
}

static void
read_disk(CarrelManager *mgr, CarrelMetrics *scrape)
{
    struct statvfs st;

    /* Without the figure the gauges stay empty rather than say 0 (a full disk). */
    if (statvfs(mgr->state_dir, &st) < 0)
        return;
    set_gauge(scrape, "carrel_state_dir_free_bytes", NULL, (double)st.f_bavail * st.f_frsize);
    set_gauge(scrape, "carrel_state_dir_size_bytes", NULL, (double)st.f_blocks * st.f_frsize);
}

static void
read_process(CarrelMetrics *scrape)
{
    g_autofree char *statm = NULL;
    g_auto(GStrv) fields = NULL;
    g_autoptr(GDir) fds = g_dir_open("/proc/self/fd", 0, NULL);
    struct rlimit limit;
    guint64 pages = 0;
    guint n = 0;

    /* statm: size resident shared ... in pages. */
    if (g_file_get_contents("/proc/self/statm", &statm, NULL, NULL))
        fields = g_strsplit(statm, " ", 3);
    if (fields && g_strv_length(fields) >= 2 &&
        g_ascii_string_to_unsigned(fields[1], 10, 0, G_MAXUINT64, &pages, NULL))
        set_gauge(scrape, "process_resident_memory_bytes", NULL,
                  (double)pages * (double)sysconf(_SC_PAGESIZE));
    if (fds) {
        while (g_dir_read_name(fds))
            n++;
        /* The directory's own descriptor is counted; it is closed right after. */
        set_gauge(scrape, "process_open_fds", NULL, n > 0 ? n - 1 : 0);
    }
    if (getrlimit(RLIMIT_NOFILE, &limit) == 0 && limit.rlim_cur != RLIM_INFINITY)
        set_gauge(scrape, "process_max_fds", NULL, (double)limit.rlim_cur);
}

char *
carrel_manager_metrics_text(CarrelManager *mgr, const CarrelPrincipal *who, GError **error)
{
    g_auto(CarrelDoor) door = {0};
    g_autoptr(CarrelMetrics) scrape = carrel_metrics_new();
    g_autofree char *kept = NULL;
    g_autofree char *now = NULL;

    if (!carrel_door_enter(&door, mgr, who, CARREL_OP_METRICS_READ, NULL, NULL, error))
        return NULL;
    declare_all(scrape, scrape_families, G_N_ELEMENTS(scrape_families));
    if (!read_sessions(mgr, scrape, error))
        return NULL;
    read_reclaims(mgr, scrape);
    read_disk(mgr, scrape);
    read_process(scrape);
    kept = carrel_metrics_format(mgr->metrics);
    now = carrel_metrics_format(scrape);
    return g_strconcat(kept, now, NULL);
}
