/*
 * Screen recording by carreld: one thread per recorded session looks fps times a second whether
 * the screen changed (the VNC display's signal) and then hands the hypervisor's screenshot to
 * record/ (an idle desktop costs no screenshots).
 * A recorder runs while its session runs under a policy with [recording] enabled: the lifecycle
 * verbs stop it before they act (the segment is finished) and start it again when the session
 * runs after them, and the watcher starts it for sessions that came up otherwise (create, fork,
 * restore, a carreld restart). It never holds a session's busy mark, and a failure only ends
 * the recording (an event on the timeline says why), never the session.
 */
#include "core/core-priv.h"
#include "record/record.h"

struct _CarrelRecorder {
    CarrelManager *mgr;
    char *session_id;
    char *domain;
    char *dir;
    CarrelRecordLimits limits;
    GThread *thread;
    GMutex lock; /* guards stop, with cond */
    GCond cond;
    gboolean stop;
    /* Read by the status while the thread runs: atomics. */
    gint from_display; /* the change signal is connected */
    gint screenshots;  /* taken since the recorder started */
    gint64 busy_until; /* guarded by lock: monotonic us until which every tick takes a frame */
};

static void
recorder_free(CarrelRecorder *r)
{
    g_free(r->session_id);
    g_free(r->domain);
    g_free(r->dir);
    g_mutex_clear(&r->lock);
    g_cond_clear(&r->cond);
    g_free(r);
}

char *
carrel_manager_recording_dir(const CarrelSession *session)
{
    return g_build_filename(session->dir, "recording", NULL);
}

static gint64
now_ms(void)
{
    return g_get_real_time() / 1000;
}

/* The end of a recording that failed: on the timeline, never in the session's way. */
static void
record_failure(CarrelRecorder *r, const GError *error)
{
    carrel_manager_record_logged(r->mgr, r->session_id, carrel_principal_daemon(), "recording",
                                 "failed", NULL, NULL, error, 0);
}

/* How often a recorder without a change signal tries to get one again. */
#define WATCH_RETRY_US (10 * G_USEC_PER_SEC)
/* How long after a timeline event every tick takes a frame: QEMU looks for changes to tell a
 * VNC client less often the longer the screen was still (up to every 3 s), and an action's
 * effect belongs in the video when it happened. */
#define BUSY_US (3 * G_USEC_PER_SEC)

/* What tells a recorder that the screen changed: the domain's VNC display. Without it (a
 * domain from an older carrel, a backend without one, a connection that ended) every tick
 * takes a screenshot, and the encoder drops the unchanged ones. */
typedef struct {
    CarrelRfbWatch *watch;
    gint64 retry_at; /* monotonic us of the next attempt to connect */
    gboolean first;  /* the screen as it is at the start is always taken */
} Signal;

static void
signal_drop(Signal *sig)
{
    g_clear_pointer(&sig->watch, carrel_rfb_watch_free);
    sig->retry_at = g_get_monotonic_time() + WATCH_RETRY_US;
}

/* TRUE when this tick takes a frame: the screen changed, or there is no signal to say. */
static gboolean
screen_changed(CarrelRecorder *r, Signal *sig)
{
    gboolean changed = FALSE;

    if (!sig->watch && g_get_monotonic_time() >= sig->retry_at) {
        sig->watch = carrel_hypervisor_display_watch(r->mgr->hv, r->domain, NULL);
        if (!sig->watch)
            signal_drop(sig);
    }
    if (sig->watch && !carrel_rfb_watch_poll(sig->watch, &changed, NULL))
        signal_drop(sig);
    g_atomic_int_set(&r->from_display, sig->watch != NULL);
    g_mutex_lock(&r->lock);
    changed = changed || g_get_monotonic_time() < r->busy_until;
    g_mutex_unlock(&r->lock);
    if (!sig->watch || sig->first || changed) {
        sig->first = FALSE;
        return TRUE;
    }
    return FALSE;
}

/* One frame when the screen changed: a screen the hypervisor cannot give now (a restore or
 * pause in between) is skipped; FALSE only when encoding failed. */
static gboolean
tick(CarrelRecorder *r, Signal *sig, CarrelRecord *rec, GError **error)
{
    g_autoptr(GBytes) ppm = NULL;

    if (!screen_changed(r, sig))
        return TRUE;
    /* Asked before the screenshot: a change while it is taken is the next tick's frame. */
    if (sig->watch && !carrel_rfb_watch_request(sig->watch, NULL))
        signal_drop(sig);
    g_atomic_int_inc(&r->screenshots);
    if (!carrel_hypervisor_screenshot(r->mgr->hv, r->domain, &ppm, NULL, NULL, NULL))
        return TRUE;
    return carrel_record_push_ppm(rec, ppm, now_ms(), NULL, error);
}

static gpointer
recorder_main(gpointer data)
{
    CarrelRecorder *r = data;
    g_autoptr(GError) error = NULL;
    g_autoptr(CarrelRecord) rec = carrel_record_open(r->dir, &r->limits, &error);
    gint64 period_us = G_USEC_PER_SEC / r->limits.fps;
    gint64 next = g_get_monotonic_time();
    gboolean ok = rec != NULL;
    Signal sig = {.first = TRUE};

    g_mutex_lock(&r->lock);
    while (ok && !r->stop) {
        /* A tick that ran long skips the frames it missed instead of catching up. */
        next = MAX(next + period_us, g_get_monotonic_time());
        while (!r->stop && g_cond_wait_until(&r->cond, &r->lock, next))
            ;
        if (r->stop)
            break;
        g_mutex_unlock(&r->lock);
        ok = tick(r, &sig, rec, &error);
        g_mutex_lock(&r->lock);
    }
    g_mutex_unlock(&r->lock);
    g_clear_pointer(&sig.watch, carrel_rfb_watch_free);
    if (ok && !carrel_record_close_segment(rec, now_ms(), &error))
        ok = FALSE;
    if (!ok)
        record_failure(r, error);
    return NULL;
}

/* Ends a recorder taken out of the table: its segment is finished when this returns. */
static void
recorder_end(CarrelRecorder *r)
{
    g_mutex_lock(&r->lock);
    r->stop = TRUE;
    g_cond_signal(&r->cond);
    g_mutex_unlock(&r->lock);
    g_thread_join(r->thread);
    recorder_free(r);
}

static CarrelRecorder *
recorder_start(CarrelManager *mgr, const CarrelSession *session, const CarrelRecordingPolicy *p)
{
    CarrelRecorder *r = g_new0(CarrelRecorder, 1);
    g_autofree char *name = g_strdup_printf("carrel-rec-%.8s", session->id);

    r->mgr = mgr;
    r->session_id = g_strdup(session->id);
    r->domain = carrel_session_domain_name(session->id);
    r->dir = carrel_manager_recording_dir(session);
    r->limits = (CarrelRecordLimits){.fps = p->fps,
                                     .max_bytes = (guint64)p->max_mib * 1024 * 1024,
                                     .segment_ms = (guint64)p->segment_s * 1000};
    g_mutex_init(&r->lock);
    g_cond_init(&r->cond);
    r->thread = g_thread_new(name, recorder_main, r);
    return r;
}

void
carrel_manager_recording_stop(CarrelManager *mgr, const char *session_id)
{
    CarrelRecorder *r = NULL;

    g_mutex_lock(&mgr->recorders_lock);
    if (mgr->recorders)
        g_hash_table_steal_extended(mgr->recorders, session_id, NULL, (gpointer *)&r);
    g_mutex_unlock(&mgr->recorders_lock);
    if (r)
        recorder_end(r);
}

void
carrel_manager_recording_stop_all(CarrelManager *mgr)
{
    g_autoptr(GPtrArray) ending = g_ptr_array_new();
    GHashTableIter it;
    gpointer value;

    g_mutex_lock(&mgr->recorders_lock);
    if (mgr->recorders) {
        g_hash_table_iter_init(&it, mgr->recorders);
        while (g_hash_table_iter_next(&it, NULL, &value)) {
            g_ptr_array_add(ending, value);
            g_hash_table_iter_steal(&it);
        }
    }
    g_mutex_unlock(&mgr->recorders_lock);
    for (guint i = 0; i < ending->len; i++)
        recorder_end(g_ptr_array_index(ending, i));
}

/* What the session's policy asks for, or NULL when it is not to be recorded now. */
static const CarrelRecordingPolicy *
wanted(CarrelManager *mgr, const CarrelSession *session)
{
    const CarrelPolicy *policy;
    const CarrelRecordingPolicy *p;

    if (session->state != CARREL_SESSION_RUNNING || session->pool)
        return NULL;
    policy = carrel_manager_session_policy(mgr, session, NULL);
    p = policy ? carrel_policy_recording(policy) : NULL;
    return p && p->enabled ? p : NULL;
}

void
carrel_manager_recording_sync(CarrelManager *mgr, const CarrelSession *session)
{
    const CarrelRecordingPolicy *p = wanted(mgr, session);
    gboolean busy, have;

    if (!p) {
        carrel_manager_recording_stop(mgr, session->id);
        return;
    }
    g_mutex_lock(&mgr->lock);
    /* A verb at work on it stops and starts the recorder itself. */
    busy = g_hash_table_contains(mgr->busy, session->id);
    g_mutex_unlock(&mgr->lock);
    g_mutex_lock(&mgr->recorders_lock);
    /* One that failed stays in the table, ended, until the session stops running. */
    have = g_hash_table_contains(mgr->recorders, session->id);
    if (!have && !busy) {
        CarrelRecorder *r = recorder_start(mgr, session, p);
        /* Keyed by the recorder's own copy of the id: taking it out frees nothing. */
        g_hash_table_insert(mgr->recorders, r->session_id, r);
    }
    g_mutex_unlock(&mgr->recorders_lock);
}

void
carrel_manager_recording_sync_id(CarrelManager *mgr, const char *session_id)
{
    g_autoptr(CarrelSession) session = carrel_store_session_get(mgr->store, session_id, NULL);

    if (session)
        carrel_manager_recording_sync(mgr, session);
    else
        carrel_manager_recording_stop(mgr, session_id);
}

void
carrel_manager_recording_watch(CarrelManager *mgr, GPtrArray *sessions)
{
    g_autoptr(GHashTable) listed = g_hash_table_new(g_str_hash, g_str_equal);
    g_autoptr(GPtrArray) gone = g_ptr_array_new_with_free_func(g_free);
    GHashTableIter it;
    gpointer key;

    for (guint i = 0; sessions && i < sessions->len; i++) {
        CarrelSession *s = g_ptr_array_index(sessions, i);
        g_hash_table_add(listed, s->id);
        carrel_manager_recording_sync(mgr, s);
    }
    /* Recorders of sessions no longer listed (destroyed meanwhile). */
    g_mutex_lock(&mgr->recorders_lock);
    g_hash_table_iter_init(&it, mgr->recorders);
    while (g_hash_table_iter_next(&it, &key, NULL))
        if (!g_hash_table_contains(listed, key))
            g_ptr_array_add(gone, g_strdup(key));
    g_mutex_unlock(&mgr->recorders_lock);
    for (guint i = 0; i < gone->len; i++)
        carrel_manager_recording_stop(mgr, g_ptr_array_index(gone, i));
}

gboolean
carrel_manager_recording_active(CarrelManager *mgr, const char *session_id)
{
    gboolean active;

    g_mutex_lock(&mgr->recorders_lock);
    active = g_hash_table_contains(mgr->recorders, session_id);
    g_mutex_unlock(&mgr->recorders_lock);
    return active;
}

void
carrel_manager_recording_kick(CarrelManager *mgr, const char *session_id)
{
    CarrelRecorder *r;

    g_mutex_lock(&mgr->recorders_lock);
    r = g_hash_table_lookup(mgr->recorders, session_id);
    if (r) {
        g_mutex_lock(&r->lock);
        r->busy_until = g_get_monotonic_time() + BUSY_US;
        g_mutex_unlock(&r->lock);
    }
    g_mutex_unlock(&mgr->recorders_lock);
}

/* The running recorder's "changes_from" and "screenshots", or nulls when none runs. */
static void
add_recorder(CarrelManager *mgr, const char *session_id, JsonBuilder *b)
{
    CarrelRecorder *r;
    gboolean display = FALSE, have;
    gint shots = 0;

    g_mutex_lock(&mgr->recorders_lock);
    r = g_hash_table_lookup(mgr->recorders, session_id);
    have = r != NULL;
    if (r) {
        display = g_atomic_int_get(&r->from_display);
        shots = g_atomic_int_get(&r->screenshots);
    }
    g_mutex_unlock(&mgr->recorders_lock);
    json_builder_set_member_name(b, "changes_from");
    if (have)
        json_builder_add_string_value(b, display ? "display" : "screenshots");
    else
        json_builder_add_null_value(b);
    json_builder_set_member_name(b, "screenshots");
    if (have)
        json_builder_add_int_value(b, shots);
    else
        json_builder_add_null_value(b);
}

/* The events index: each timeline event inside a finished segment, with its offset there. */
static gboolean
add_events(CarrelManager *mgr, const char *session_id, const CarrelRecordIndex *index,
           JsonBuilder *b, GError **error)
{
    gint64 after = 0;

    json_builder_set_member_name(b, "events");
    json_builder_begin_array(b);
    for (guint page = 0; page < CARREL_RECORDING_EVENT_PAGES; page++) {
        g_autoptr(GPtrArray) events =
            carrel_store_event_list(mgr->store, session_id, after, 1000, error);
        if (!events)
            return FALSE;
        for (guint i = 0; i < events->len; i++) {
            const CarrelEvent *ev = g_ptr_array_index(events, i);
            gint64 ts = ev->ts_us / 1000;
            after = ev->seq;
            for (guint k = 0; k < index->segments->len; k++) {
                const CarrelRecordSegment *seg = g_ptr_array_index(index->segments, k);
                if (seg->open || ts < seg->started_ms || ts > seg->ended_ms)
                    continue;
                json_builder_begin_object(b);
                json_builder_set_member_name(b, "seq");
                json_builder_add_int_value(b, ev->seq);
                json_builder_set_member_name(b, "segment");
                json_builder_add_string_value(b, seg->name);
                json_builder_set_member_name(b, "offset_ms");
                json_builder_add_int_value(b, ts - seg->started_ms);
                json_builder_end_object(b);
                break;
            }
        }
        if (events->len < 1000)
            break;
    }
    json_builder_end_array(b);
    return TRUE;
}

static void
add_segment(JsonBuilder *b, const CarrelRecordSegment *seg)
{
    json_builder_begin_object(b);
    json_builder_set_member_name(b, "name");
    json_builder_add_string_value(b, seg->name);
    json_builder_set_member_name(b, "started_ms");
    json_builder_add_int_value(b, seg->started_ms);
    json_builder_set_member_name(b, "ended_ms");
    if (seg->open)
        json_builder_add_null_value(b);
    else
        json_builder_add_int_value(b, seg->ended_ms);
    json_builder_set_member_name(b, "duration_ms");
    json_builder_add_int_value(b, seg->open ? 0 : seg->ended_ms - seg->started_ms);
    json_builder_set_member_name(b, "frames");
    json_builder_add_int_value(b, seg->frames);
    json_builder_set_member_name(b, "bytes");
    json_builder_add_int_value(b, (gint64)seg->bytes);
    json_builder_set_member_name(b, "sha256");
    json_builder_add_string_value(b, seg->sha256);
    json_builder_set_member_name(b, "open");
    json_builder_add_boolean_value(b, seg->open);
    json_builder_end_object(b);
}

JsonNode *
carrel_manager_recording_to_json(CarrelManager *mgr, const CarrelSession *session, GError **error)
{
    g_autofree char *dir = carrel_manager_recording_dir(session);
    g_autoptr(CarrelRecordIndex) index = carrel_record_index_load(dir, error);
    const CarrelPolicy *policy = carrel_manager_session_policy(mgr, session, NULL);
    const CarrelRecordingPolicy *p = policy ? carrel_policy_recording(policy) : NULL;
    g_autoptr(JsonBuilder) b = json_builder_new();

    if (!index)
        return NULL;
    json_builder_begin_object(b);
    json_builder_set_member_name(b, "enabled");
    json_builder_add_boolean_value(b, p && p->enabled);
    json_builder_set_member_name(b, "fps");
    json_builder_add_int_value(b, p ? p->fps : 0);
    json_builder_set_member_name(b, "active");
    json_builder_add_boolean_value(b, carrel_manager_recording_active(mgr, session->id));
    add_recorder(mgr, session->id, b);
    json_builder_set_member_name(b, "segments");
    json_builder_begin_array(b);
    for (guint i = 0; i < index->segments->len; i++)
        add_segment(b, g_ptr_array_index(index->segments, i));
    json_builder_end_array(b);
    json_builder_set_member_name(b, "dropped");
    json_builder_add_int_value(b, index->dropped);
    if (!add_events(mgr, session->id, index, b, error))
        return NULL;
    json_builder_end_object(b);
    return json_builder_get_root(b);
}

JsonNode *
carrel_manager_session_recording(CarrelManager *mgr, const CarrelPrincipal *who,
                                 const char *id_or_name, GError **error)
{
    g_auto(CarrelDoor) door = {0};
    JsonNode *node;

    if (!carrel_door_enter(&door, mgr, who, CARREL_OP_SESSION_READ, id_or_name, NULL, error))
        return NULL;
    node = carrel_manager_recording_to_json(mgr, door.session, error);
    if (!node)
        g_prefix_error(error, "recording of session '%s': ", door.session->id);
    return node;
}

char *
carrel_manager_session_recording_segment(CarrelManager *mgr, const CarrelPrincipal *who,
                                         const char *id_or_name, const char *name,
                                         char **ret_sha256, GError **error)
{
    g_auto(CarrelDoor) door = {0};
    g_autofree char *dir = NULL;
    g_autoptr(CarrelRecordIndex) index = NULL;
    const CarrelRecordSegment *seg;

    if (!carrel_door_enter(&door, mgr, who, CARREL_OP_SESSION_READ, id_or_name, NULL, error))
        return NULL;
    /* Only a segment's exact name: nothing that could leave the recording folder. */
    if (!carrel_record_name_ok(name)) {
        g_set_error(error, CARREL_ERROR, CARREL_ERROR_INVALID_ARG,
                    "malformed recording segment name (seg-NNNNNN.webm)");
        return NULL;
    }
    dir = carrel_manager_recording_dir(door.session);
    if (!(index = carrel_record_index_load(dir, error)))
        return NULL;
    seg = carrel_record_index_finished(index, name);
    if (!seg) {
        g_set_error(error, CARREL_ERROR, CARREL_ERROR_NOT_FOUND,
                    "session '%s' has no finished recording segment '%s'", door.session->id, name);
        return NULL;
    }
    if (ret_sha256)
        *ret_sha256 = g_strdup(seg->sha256);
    return g_build_filename(dir, name, NULL);
}
