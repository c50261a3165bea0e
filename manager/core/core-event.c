#include "core/core-priv.h"

/* Most events a single read of the timeline returns. */
#define EVENTS_MAX_LIMIT 1000
/* Writes of one event: the store already gave up the disk reserve and tried again once when it
 * found the disk full; these cover a reserve made again in between, or a moment of contention. */
#define EVENT_ATTEMPTS 3
#define EVENT_RETRY_US (50 * 1000)

gboolean
carrel_manager_event_add(CarrelManager *mgr, CarrelEvent *event, GError **error)
{
    for (guint attempt = 1;; attempt++) {
        g_autoptr(GError) local = NULL;

        if (carrel_store_event_add(mgr->store, event, &local))
            return TRUE;
        if (attempt == EVENT_ATTEMPTS) {
            g_propagate_prefixed_error(error, g_steal_pointer(&local),
                                       "the %s event could not be recorded: ", event->action);
            return FALSE;
        }
        if (g_error_matches(local, CARREL_ERROR, CARREL_ERROR_NO_SPACE))
            (void)carrel_manager_disk_release(mgr);
        g_usleep(EVENT_RETRY_US);
    }
}

gboolean
carrel_manager_record(CarrelManager *mgr, const char *session_id, const CarrelPrincipal *who,
                      const char *kind, const char *action, JsonNode *params, JsonNode *result,
                      const GError *failure, gint64 started_us, const char *screenshot,
                      GError **error)
{
    const CarrelPrincipal *actor = who ? who : carrel_principal_daemon();
    g_autoptr(CarrelEvent) event = carrel_event_new();

    event->session_id = g_strdup(session_id);
    event->ts_us = g_get_real_time();
    event->actor = g_strdup(actor->label);
    event->actor_id = g_strdup(actor->token_id);
    event->kind = g_strdup(kind);
    event->action = g_strdup(action);
    event->params = params ? json_node_copy(params) : NULL;
    event->result = result && !failure ? json_node_copy(result) : NULL;
    event->error = failure ? g_strdup(failure->message) : NULL;
    event->duration_ms = started_us ? (g_get_monotonic_time() - started_us) / 1000 : 0;
    event->screenshot = g_strdup(screenshot);
    if (!carrel_manager_event_add(mgr, event, error))
        return FALSE;
    carrel_manager_recording_kick(mgr, session_id);
    return TRUE;
}

gboolean
carrel_manager_note(CarrelManager *mgr, const char *session_id, const CarrelPrincipal *who,
                    const char *kind, const char *action, JsonNode *params, JsonNode *result,
                    const GError *failure, gint64 started_us, GError **error)
{
    return carrel_manager_record(mgr, session_id, who, kind, action, params, result, failure,
                                 started_us, NULL, error);
}

void
carrel_manager_record_logged(CarrelManager *mgr, const char *session_id, const CarrelPrincipal *who,
                             const char *kind, const char *action, JsonNode *params,
                             JsonNode *result, const GError *failure, gint64 started_us)
{
    g_autoptr(GError) error = NULL;

    if (!carrel_manager_record(mgr, session_id, who, kind, action, params, result, failure,
                               started_us, NULL, &error))
        g_critical("session '%s': %s", session_id, error->message);
}

gboolean
carrel_manager_record_outcome(CarrelManager *mgr, const char *session_id,
                              const CarrelPrincipal *who, const char *kind, const char *action,
                              JsonNode *params, JsonNode *result, GError **local, gint64 started_us,
                              const char *screenshot, gboolean ok)
{
    g_autoptr(GError) lost = NULL;

    if (carrel_manager_record(mgr, session_id, who, kind, action, params, result,
                              ok ? NULL : *local, started_us, screenshot, &lost))
        return ok;
    /* A verb that failed keeps its own error; the lost event is said in the log. */
    if (!ok) {
        g_critical("session '%s': %s", session_id, lost->message);
        return FALSE;
    }
    g_propagate_error(local, g_steal_pointer(&lost));
    return FALSE;
}

GPtrArray *
carrel_manager_session_events(CarrelManager *mgr, const CarrelPrincipal *who,
                              const char *id_or_name, gint64 after_seq, guint limit, GError **error)
{
    g_auto(CarrelDoor) door = {0};

    if (!carrel_door_enter(&door, mgr, who, CARREL_OP_SESSION_READ, id_or_name, NULL, error))
        return NULL;
    if (limit == 0 || limit > EVENTS_MAX_LIMIT) {
        g_set_error(error, CARREL_ERROR, CARREL_ERROR_INVALID_ARG, "limit must be between 1 and %d",
                    EVENTS_MAX_LIMIT);
        return NULL;
    }
    return carrel_store_event_list(mgr->store, door.session->id, MAX(after_seq, 0), limit, error);
}

CarrelSession *
carrel_manager_running_session(CarrelManager *mgr, const char *id_or_name, const char *what,
                               char **ret_domain, GError **error)
{
    g_autoptr(CarrelSession) session = carrel_store_session_get(mgr->store, id_or_name, error);

    if (!session)
        return NULL;
    if (session->state != CARREL_SESSION_RUNNING) {
        g_set_error(error, CARREL_ERROR, CARREL_ERROR_WRONG_STATE, "cannot %s a session that is %s",
                    what, carrel_session_state_to_string(session->state));
        return NULL;
    }
    if (ret_domain)
        *ret_domain = carrel_session_domain_name(session->id);
    return g_steal_pointer(&session);
}
