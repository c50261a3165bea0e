/*
 * The watcher: notices sessions whose QEMU went away while carreld runs (killed, crashed, or
 * the guest powered itself off) or paused itself (a disk write found the host's disk full),
 * pauses sessions over their disk limit, records the new state and collects the session's exit
 * artifacts from its disk before anything else can touch it.
 */
#include "core/core-priv.h"

/* The exit path: collects a session's exit paths (if any) with reason. Failures are in the
 * extraction's record and the timeline; they never stop what the caller is doing. */
void
carrel_manager_collect_exit(CarrelManager *mgr, const CarrelSession *session, const char *reason,
                            gboolean by_agent)
{
    g_autoptr(CarrelExtraction) x = NULL;
    g_autoptr(GError) error = NULL;
    gint64 t0 = g_get_monotonic_time();
    g_autoptr(JsonBuilder) b = NULL;
    g_autoptr(JsonNode) result = NULL;

    if (!session->exit_paths || !session->exit_paths[0])
        return;
    x = carrel_manager_collect(mgr, session, session->exit_paths, CARREL_LIMIT_EXTRACT_BYTES,
                               CARREL_LIMIT_EXTRACT_FILES, reason, by_agent, &error);
    if (x) {
        b = json_builder_new();
        json_builder_begin_object(b);
        json_builder_set_member_name(b, "extraction");
        json_builder_add_string_value(b, x->id);
        json_builder_set_member_name(b, "count");
        json_builder_add_int_value(b, x->count);
        json_builder_set_member_name(b, "reason");
        json_builder_add_string_value(b, reason);
        json_builder_end_object(b);
        result = json_builder_get_root(b);
    }
    carrel_manager_record_logged(mgr, session->id, carrel_principal_daemon(), "artifacts",
                                 "collect-on-exit", NULL, result, x ? NULL : error, t0);
}

/* What the watcher saw: the session's new state, why, and the reason's code for the event. */
typedef struct {
    CarrelSessionState next;
    char *reason;
    const char *code; /* "host_disk_full", "io_error", "disk_limit", or NULL */
} Verdict;

static void
verdict_clear(Verdict *v)
{
    g_clear_pointer(&v->reason, g_free);
}
G_DEFINE_AUTO_CLEANUP_CLEAR_FUNC(Verdict, verdict_clear)

static gboolean
verdict(Verdict *v, CarrelSessionState next, const char *reason, const char *code)
{
    v->next = next;
    v->reason = g_strdup(reason);
    v->code = code;
    return TRUE;
}

/* A paused domain: QEMU stopped it on a disk error (reason set), or someone else paused it. */
static gboolean
judge_paused(CarrelManager *mgr, const char *domain, Verdict *v)
{
    CarrelPauseReason why = CARREL_PAUSE_NONE;
    const char *text;

    if (!carrel_hypervisor_get_pause_reason(mgr->hv, domain, &why, NULL))
        return FALSE;
    text = carrel_manager_pause_reason_text(why);
    return text && verdict(v, CARREL_SESSION_PAUSED, text, carrel_pause_reason_to_string(why));
}

/* A running session whose domain is no longer running: its verdict, or FALSE. */
static gboolean
judge(CarrelManager *mgr, const CarrelSession *session, Verdict *v)
{
    g_autofree char *domain = carrel_session_domain_name(session->id);
    g_autoptr(GError) error = NULL;
    CarrelDomainState state;

    if (!carrel_hypervisor_get_state(mgr->hv, domain, &state, &error)) {
        if (!g_error_matches(error, CARREL_ERROR, CARREL_ERROR_NOT_FOUND))
            return FALSE;
        return verdict(v, CARREL_SESSION_CRASHED, "the domain vanished", NULL);
    }
    if (state == CARREL_DOMAIN_CRASHED)
        return verdict(v, CARREL_SESSION_CRASHED, "QEMU ended unexpectedly (killed or crashed)",
                       NULL);
    if (state == CARREL_DOMAIN_SHUTOFF)
        return verdict(v, CARREL_SESSION_STOPPED, "the guest powered off", NULL);
    if (state == CARREL_DOMAIN_PAUSED)
        return judge_paused(mgr, domain, v);
    return FALSE;
}

/* A running session whose disk holds more than its policy allows: paused, with its verdict. */
static gboolean
over_limit(CarrelManager *mgr, const CarrelSession *session, Verdict *v)
{
    g_autofree char *domain = carrel_session_domain_name(session->id);
    g_autofree char *reason = carrel_manager_disk_over_limit(mgr, session);
    g_autoptr(GError) error = NULL;
    CarrelDomainState state = CARREL_DOMAIN_OTHER;

    if (!reason)
        return FALSE;
    /* Already paused (a round whose event could not be written paused it): only record it. */
    if (carrel_hypervisor_get_state(mgr->hv, domain, &state, NULL) &&
        state != CARREL_DOMAIN_PAUSED && !carrel_hypervisor_pause(mgr->hv, domain, TRUE, &error)) {
        g_warning("session '%s': %s; pausing it: %s", session->id, reason, error->message);
        return FALSE;
    }
    v->next = CARREL_SESSION_PAUSED;
    v->reason = g_steal_pointer(&reason);
    v->code = "disk_limit";
    return TRUE;
}

static JsonNode *
verdict_params(const Verdict *v)
{
    JsonNode *node;

    if (!v->code)
        return NULL;
    node = carrel_conf_new_object_node();
    json_object_set_string_member(json_node_get_object(node), "reason", v->code);
    json_object_set_string_member(json_node_get_object(node), "detail", v->reason);
    return node;
}

/* The new state and its audit row (by carreld), together. */
static gboolean
record_observed(CarrelManager *mgr, const char *id, CarrelSessionState next, const char *reason)
{
    g_auto(CarrelDoor) door = {0};
    g_autoptr(CarrelAuditRecord) audit = NULL;
    JsonNode *params = carrel_conf_new_object_node();

    json_object_set_string_member(json_node_get_object(params), "state",
                                  carrel_session_state_to_string(next));
    if (!carrel_door_enter(&door, mgr, carrel_principal_daemon(), CARREL_OP_SESSION_OBSERVE, id,
                           params, NULL))
        return FALSE;
    audit = carrel_door_audit_record(&door, "ok", NULL);
    door.audited = door.quiet = TRUE;
    return carrel_store_session_set_state_audited(mgr->store, id, next, reason, audit, NULL);
}

/*
 * Records what was seen. The event goes first: one that cannot be written leaves the state as it
 * was, and the next round sees the same and tries both again, so no change is ever without its
 * event.
 */
static void
observe(CarrelManager *mgr, const CarrelSession *session, const Verdict *v)
{
    g_autoptr(JsonNode) params = verdict_params(v);
    g_autoptr(GError) error = NULL;

    if (!carrel_manager_record(mgr, session->id, carrel_principal_daemon(), "lifecycle",
                               carrel_session_state_to_string(v->next), params, NULL, NULL, 0, NULL,
                               &error)) {
        g_critical("session '%s': %s; the next round tries again", session->id, error->message);
        return;
    }
    if (!record_observed(mgr, session->id, v->next, v->reason) || v->next == CARREL_SESSION_PAUSED)
        return;
    /* Off the watcher: an appliance boots to read the disk, and time limits must not wait. */
    if (session->exit_paths && session->exit_paths[0]) {
        g_mutex_lock(&mgr->lock);
        g_ptr_array_add(mgr->pending_exit, g_strdup(session->id));
        g_mutex_unlock(&mgr->lock);
        carrel_manager_chore(mgr, CARREL_CHORE_COLLECT);
    }
}

static void
settle(CarrelManager *mgr, const char *id)
{
    g_autoptr(CarrelSession) session = NULL;
    g_auto(Verdict) v = {0};

    /* A verb in progress owns the session; the next round looks again. */
    if (!carrel_manager_mark_busy(mgr, id, "watch", NULL))
        return;
    session = carrel_store_session_get(mgr->store, id, NULL);
    if (session && session->state == CARREL_SESSION_RUNNING &&
        (judge(mgr, session, &v) || over_limit(mgr, session, &v)))
        observe(mgr, session, &v);
    carrel_manager_clear_busy(mgr, id);
}

/* Exit paths of sessions that ended: found by reconcile, or seen by the watcher. */
void
carrel_manager_collect_pending(CarrelManager *mgr)
{
    for (;;) {
        g_autofree char *id = NULL;
        g_autoptr(CarrelSession) session = NULL;

        g_mutex_lock(&mgr->lock);
        if (mgr->pending_exit->len > 0)
            id = g_ptr_array_steal_index(mgr->pending_exit, 0);
        g_mutex_unlock(&mgr->lock);
        if (!id)
            return;
        if (!carrel_manager_mark_busy(mgr, id, "collect", NULL))
            continue;
        session = carrel_store_session_get(mgr->store, id, NULL);
        if (session &&
            (session->state == CARREL_SESSION_CRASHED || session->state == CARREL_SESSION_STOPPED))
            carrel_manager_collect_exit(
                mgr, session, session->state == CARREL_SESSION_CRASHED ? "crash" : "stop", FALSE);
        carrel_manager_clear_busy(mgr, id);
    }
}

/* Why a session's time is up ("ttl", "idle"), or NULL. A TTL also catches a session whose
 * expiry action was cut short by a carreld crash (found stopped or crashed since). */
static const char *
expired(CarrelManager *mgr, const CarrelSession *s)
{
    gint64 now = carrel_util_now(), last_us;

    if (s->pool || s->state == CARREL_SESSION_CREATING || s->state == CARREL_SESSION_DESTROYED)
        return NULL;
    if (s->expires_at && now >= s->expires_at)
        return "ttl";
    if (!s->idle_timeout_s || s->state != CARREL_SESSION_RUNNING)
        return NULL;
    last_us = carrel_store_event_last_ts(mgr->store, s->id, NULL);
    if (last_us < 0)
        return NULL;
    /* No client activity yet: idle since it came up. */
    return now - MAX(last_us / G_USEC_PER_SEC, s->updated_at) >= (gint64)s->idle_timeout_s ? "idle"
                                                                                           : NULL;
}

/* Runs the expiry action where the session's state calls for it; FALSE with error when it
 * failed. A session already past what the action does (stopped for "stop") needs nothing. */
static gboolean
act(CarrelManager *mgr, const CarrelSession *s, const char *action, const char *why, GError **error)
{
    g_autoptr(CarrelSession) after = NULL;
    gboolean running = s->state == CARREL_SESSION_RUNNING;

    if (g_str_equal(action, "destroy"))
        return (after = carrel_manager_session_destroy(mgr, carrel_principal_daemon(), s->id,
                                                       error)) != NULL;
    if (g_str_equal(action, "stop"))
        return !(running || s->state == CARREL_SESSION_PAUSED) ||
               (after = carrel_manager_session_stop(mgr, carrel_principal_daemon(), s->id, 30,
                                                    error)) != NULL;
    if (!running)
        return TRUE;
    /* pause and hibernate keep the guest: its exit paths are collected first, by the agent. */
    if (carrel_manager_mark_busy(mgr, s->id, "expire", error)) {
        carrel_manager_collect_exit(mgr, s, why, TRUE);
        carrel_manager_clear_busy(mgr, s->id);
    } else
        return FALSE;
    if (g_str_equal(action, "hibernate"))
        return (after = carrel_manager_session_hibernate(mgr, carrel_principal_daemon(), s->id,
                                                         error)) != NULL;
    return (after = carrel_manager_session_pause(mgr, carrel_principal_daemon(), s->id, error)) !=
           NULL;
}

/*
 * A time limit acts: the exit paths are collected first (stop and destroy collect on their own
 * once the guest is off), then the action. The limits are cleared only once it is done, so an
 * action that another verb held up, or that a carreld crash cut short, runs again next round.
 */
static void
expire(CarrelManager *mgr, const CarrelSession *s, const char *why)
{
    g_autoptr(GError) error = NULL;
    g_autoptr(JsonBuilder) b = json_builder_new();
    g_autoptr(JsonNode) params = NULL;
    const char *action = s->expiry_action ? s->expiry_action : "destroy";
    gint64 t0 = g_get_monotonic_time();
    gboolean ok = act(mgr, s, action, why, &error);

    /* Busy with another verb: try again next round. */
    if (!ok && g_error_matches(error, CARREL_ERROR, CARREL_ERROR_BUSY))
        return;
    if (!g_str_equal(action, "destroy") || !ok)
        (void)carrel_store_session_clear_limits(mgr->store, s->id, NULL);
    json_builder_begin_object(b);
    json_builder_set_member_name(b, "reason");
    json_builder_add_string_value(b, why);
    json_builder_set_member_name(b, "action");
    json_builder_add_string_value(b, action);
    json_builder_end_object(b);
    params = json_builder_get_root(b);
    carrel_manager_record_logged(mgr, s->id, carrel_principal_daemon(), "lifecycle", "expire",
                                 params, NULL, error, t0);
}

guint
carrel_manager_watch(CarrelManager *mgr)
{
    g_autoptr(GPtrArray) sessions = NULL;
    guint changed = 0;

    carrel_manager_chore(mgr, CARREL_CHORE_COLLECT);
    carrel_manager_disk_tend(mgr);
    (void)carrel_manager_sweep_uploads(mgr);
    carrel_manager_chore(mgr, CARREL_CHORE_REFILL);
    carrel_manager_egress_sync(mgr);
    sessions = carrel_store_session_list(mgr->store, FALSE, NULL);

    for (guint i = 0; sessions && i < sessions->len; i++) {
        CarrelSession *s = g_ptr_array_index(sessions, i);
        g_autoptr(CarrelSession) after = NULL;
        const char *why = expired(mgr, s);
        if (why) {
            expire(mgr, s, why);
            changed++;
            continue;
        }
        if (s->state != CARREL_SESSION_RUNNING)
            continue;
        settle(mgr, s->id);
        after = carrel_store_session_get(mgr->store, s->id, NULL);
        changed += after && after->state != CARREL_SESSION_RUNNING;
    }
    /* Recorders follow what the sessions are now (after this round's changes). */
    g_clear_pointer(&sessions, g_ptr_array_unref);
    sessions = carrel_store_session_list(mgr->store, FALSE, NULL);
    if (sessions)
        carrel_manager_recording_watch(mgr, sessions);
    return changed;
}

static gpointer
watch_thread(gpointer data)
{
    CarrelManager *mgr = data;

    g_mutex_lock(&mgr->watch_lock);
    while (!mgr->watch_stop) {
        gint64 until = g_get_monotonic_time() + (gint64)mgr->watch_interval_ms * 1000;
        g_mutex_unlock(&mgr->watch_lock);
        (void)carrel_manager_watch(mgr);
        g_mutex_lock(&mgr->watch_lock);
        while (!mgr->watch_stop && g_cond_wait_until(&mgr->watch_cond, &mgr->watch_lock, until))
            ;
    }
    g_mutex_unlock(&mgr->watch_lock);
    return NULL;
}

void
carrel_manager_start_watch(CarrelManager *mgr, guint interval_ms)
{
    g_return_if_fail(mgr->watch_thread == NULL);
    mgr->watch_interval_ms = interval_ms ? interval_ms : 2000;
    carrel_manager_chores_start(mgr);
    mgr->watch_thread = g_thread_new("carrel-watch", watch_thread, mgr);
}

void
carrel_manager_stop_watch(CarrelManager *mgr)
{
    if (!mgr->watch_thread)
        return;
    g_mutex_lock(&mgr->watch_lock);
    mgr->watch_stop = TRUE;
    g_cond_signal(&mgr->watch_cond);
    g_mutex_unlock(&mgr->watch_lock);
    g_thread_join(g_steal_pointer(&mgr->watch_thread));
    carrel_manager_chores_stop(mgr);
    /* No watcher restarts them now: every recording's segment is finished. */
    carrel_manager_recording_stop_all(mgr);
}
