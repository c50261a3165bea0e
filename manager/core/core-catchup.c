/*
 * Catching up: what a restored or resumed guest still needs once it runs (the host's time on its
 * clock, its own MAC, the session's screen size) is done after the verb's reply, on a job of
 * its own. A verb asks for it with carrel_manager_catchup_later while it holds the session's
 * busy mark; when it clears the mark, the mark becomes "catch-up" until the job is done. Every
 * later verb that reaches the guest waits for that (carrel_door_enter), and so does any verb
 * that marks the session busy: the first action sees the clock, MAC and screen right, while a
 * create, claim, revert or fork answers as soon as the guest runs.
 */
#include "core/core-priv.h"

#define CATCHUP_OP "catch-up"
/* Its event on the timeline. */
#define CATCHUP_ACTION "catch_up"
/* Longer than any one step may take (the agent's own timeouts end first). */
#define CATCHUP_WAIT_US (60 * G_USEC_PER_SEC)

typedef struct {
    CarrelManager *mgr;
    char *session_id;
    guint steps;
} CatchupData;

static void
catchup_data_free(gpointer data)
{
    CatchupData *sd = data;

    g_free(sd->session_id);
    g_free(sd);
}

void
carrel_manager_catchup_later(CarrelManager *mgr, const char *session_id, guint steps)
{
    g_autoptr(GMutexLocker) locker G_GNUC_UNUSED = g_mutex_locker_new(&mgr->lock);
    guint had = GPOINTER_TO_UINT(g_hash_table_lookup(mgr->catchup_pending, session_id));

    g_hash_table_insert(mgr->catchup_pending, g_strdup(session_id), GUINT_TO_POINTER(had | steps));
}

/* One step; a failure is the session's to know (its timeline) and the operator's (the log),
 * but the guest runs on: a clock a few seconds behind does not make it unusable. */
static gboolean
catchup_step(CarrelManager *mgr, const CarrelSession *s, guint step, GError **error)
{
    g_autofree char *domain = carrel_session_domain_name(s->id);

    switch (step) {
    case CARREL_CATCHUP_CLOCK:
        return carrel_manager_set_guest_clock(mgr, domain, error);
    case CARREL_CATCHUP_MAC:
        carrel_manager_set_clone_mac(mgr, domain, s->mac);
        return TRUE;
    case CARREL_CATCHUP_SCREEN:
        if (!carrel_manager_apply_screen(mgr, s, FALSE, error))
            return FALSE;
        carrel_timings_mark("screen");
        return TRUE;
    default:
        return TRUE;
    }
}

static gboolean
catchup_run(CarrelJob *job, gpointer data, JsonNode **ret_result, GError **error)
{
    static const guint order[] = {CARREL_CATCHUP_CLOCK, CARREL_CATCHUP_MAC, CARREL_CATCHUP_SCREEN};
    CatchupData *sd = data;
    g_autoptr(CarrelSession) s = carrel_store_session_get(sd->mgr->store, sd->session_id, NULL);
    g_autoptr(GError) failure = NULL;
    g_autoptr(JsonNode) result = NULL;
    JsonNode *timings;
    gint64 started = g_get_monotonic_time();

    (void)job;
    carrel_timings_begin();
    /* Gone or stopped meanwhile (a verb that failed after asking): nothing to catch up on. */
    for (guint i = 0; s && s->state == CARREL_SESSION_RUNNING && i < G_N_ELEMENTS(order); i++)
        if ((sd->steps & order[i]) && !catchup_step(sd->mgr, s, order[i], &failure))
            break;
    result = carrel_conf_new_object_node();
    timings = carrel_timings_end();
    /* Nothing done (the session went meanwhile) marks no phase: no timings then. */
    if (timings)
        json_object_set_member(json_node_get_object(result), "timings", timings);
    if (s)
        carrel_manager_record_logged(sd->mgr, s->id, carrel_principal_daemon(), "lifecycle",
                                     CATCHUP_ACTION, NULL, failure ? NULL : result, failure,
                                     started);
    carrel_manager_clear_busy(sd->mgr, sd->session_id);
    /* The verb left its recorder to start once the mark was gone: it starts now, not at the
     * watcher's next round. */
    carrel_manager_recording_sync_id(sd->mgr, sd->session_id);
    if (failure) {
        g_warning("session '%s': catching up after the reply failed: %s", sd->session_id,
                  failure->message);
        g_propagate_error(error, g_steal_pointer(&failure));
        return FALSE;
    }
    *ret_result = g_steal_pointer(&result);
    return TRUE;
}

/* The job counts as running until its last use of the manager, which
 * carrel_manager_catchup_drain waits for (clearing the busy mark is not its end). */
static gboolean
catchup_job(CarrelJob *job, gpointer data, JsonNode **ret_result, GError **error)
{
    CatchupData *sd = data;
    gboolean ok = catchup_run(job, data, ret_result, error);

    carrel_manager_count_job(sd->mgr, &sd->mgr->catchups_running, -1);
    return ok;
}

guint
carrel_manager_catchup_take(CarrelManager *mgr, const char *key)
{
    guint steps = GPOINTER_TO_UINT(g_hash_table_lookup(mgr->catchup_pending, key));

    /* The catch-up job's own end, or a verb with nothing to leave behind. */
    if (!steps || carrel_manager_is_catchup_op(g_hash_table_lookup(mgr->busy, key)))
        return 0;
    g_hash_table_remove(mgr->catchup_pending, key);
    g_hash_table_insert(mgr->busy, g_strdup(key), g_strdup(CATCHUP_OP));
    return steps;
}

static void
run_catchup(CatchupData *sd)
{
    CarrelJob *job = carrel_job_new("catch-up", sd->session_id);

    carrel_manager_count_job(sd->mgr, &sd->mgr->catchups_running, 1);
    carrel_manager_add_job(sd->mgr, job);
    carrel_job_run(job, catchup_job, sd, catchup_data_free);
    carrel_job_unref(job);
}

/* Doors open on one thread, and the catch-up jobs waiting for the outermost one to end. */
typedef struct {
    guint depth;
    GPtrArray *jobs; /* CatchupData */
} Held;

static void
held_free(gpointer data)
{
    Held *h = data;

    g_clear_pointer(&h->jobs, g_ptr_array_unref);
    g_free(h);
}

static GPrivate held_key = G_PRIVATE_INIT(held_free);

static Held *
held(void)
{
    Held *h = g_private_get(&held_key);

    if (!h) {
        h = g_new0(Held, 1);
        g_private_set(&held_key, h);
    }
    return h;
}

void
carrel_catchup_hold(void)
{
    held()->depth++;
}

void
carrel_catchup_release(void)
{
    Held *h = held();
    g_autoptr(GPtrArray) jobs = NULL;

    if (h->depth == 0 || --h->depth > 0)
        return;
    jobs = g_steal_pointer(&h->jobs);
    for (guint i = 0; jobs && i < jobs->len; i++)
        run_catchup(g_ptr_array_index(jobs, i));
}

void
carrel_manager_catchup_start(CarrelManager *mgr, const char *session_id, guint steps)
{
    CatchupData *sd = g_new0(CatchupData, 1);

    sd->mgr = mgr;
    sd->session_id = g_strdup(session_id);
    sd->steps = steps;
    if (held()->depth == 0) {
        run_catchup(sd);
        return;
    }
    if (!held()->jobs)
        held()->jobs = g_ptr_array_new();
    g_ptr_array_add(held()->jobs, sd);
}

GPtrArray *
carrel_catchup_unhold(void)
{
    Held *h = held();

    if (h->depth > 0)
        h->depth--;
    return h->depth == 0 ? g_steal_pointer(&h->jobs) : NULL;
}

void
carrel_catchup_adopt(GPtrArray *jobs, gboolean now)
{
    Held *h = held();

    for (guint i = 0; jobs && i < jobs->len; i++) {
        CatchupData *sd = g_ptr_array_index(jobs, i);
        if (now || h->depth == 0) {
            run_catchup(sd);
            continue;
        }
        if (!h->jobs)
            h->jobs = g_ptr_array_new();
        g_ptr_array_add(h->jobs, sd);
    }
    if (jobs)
        g_ptr_array_unref(jobs);
}

gboolean
carrel_manager_is_catchup_op(const char *op)
{
    return g_strcmp0(op, CATCHUP_OP) == 0;
}

void
carrel_manager_wait_caught_up(CarrelManager *mgr, const char *session_id)
{
    g_autoptr(GMutexLocker) locker G_GNUC_UNUSED = g_mutex_locker_new(&mgr->lock);
    gint64 end = g_get_monotonic_time() + CATCHUP_WAIT_US;

    while (carrel_manager_is_catchup_op(g_hash_table_lookup(mgr->busy, session_id)))
        if (!g_cond_wait_until(&mgr->busy_cond, &mgr->lock, end))
            break;
}

void
carrel_manager_catchup_restored(CarrelManager *mgr, const CarrelSession *s, gboolean new_mac)
{
    guint steps = CARREL_CATCHUP_CLOCK;

    if (s->screen_width)
        steps |= CARREL_CATCHUP_SCREEN;
    /* A guest whose network is set up next needs its own MAC first. */
    if (new_mac && s->egress_ip) {
        g_autofree char *domain = carrel_session_domain_name(s->id);
        carrel_manager_set_clone_mac(mgr, domain, s->mac);
    } else if (new_mac) {
        steps |= CARREL_CATCHUP_MAC;
    }
    carrel_manager_catchup_later(mgr, s->id, steps);
}

static gboolean
any_catching_up(CarrelManager *mgr)
{
    GHashTableIter iter;
    gpointer value;

    g_hash_table_iter_init(&iter, mgr->busy);
    while (g_hash_table_iter_next(&iter, NULL, &value))
        if (carrel_manager_is_catchup_op(value))
            return TRUE;
    return FALSE;
}

void
carrel_manager_catchup_drain(CarrelManager *mgr)
{
    g_autoptr(GMutexLocker) locker G_GNUC_UNUSED = g_mutex_locker_new(&mgr->lock);
    gint64 end = g_get_monotonic_time() + CATCHUP_WAIT_US;

    /* Their jobs use the manager: it stays until they are done. */
    while (any_catching_up(mgr) || mgr->catchups_running > 0)
        if (!g_cond_wait_until(&mgr->busy_cond, &mgr->lock, end))
            break;
}
