#include "core/core-priv.h"

/* Most events a single read of the timeline returns. */
#define EVENTS_MAX_LIMIT 1000

void
carrel_manager_record(CarrelManager *mgr, const char *session_id, const CarrelPrincipal *who,
                      const char *kind, const char *action, JsonNode *params, JsonNode *result,
                      const GError *failure, gint64 started_us, const char *screenshot)
{
    const CarrelPrincipal *actor = who ? who : carrel_principal_daemon();
    g_autoptr(CarrelEvent) event = carrel_event_new();
    g_autoptr(GError) error = NULL;

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
    /* The action happened either way: a timeline that cannot be written is logged, not fatal. */
    if (!carrel_store_event_add(mgr->store, event, &error))
        g_warning("session '%s': recording %s event: %s", session_id, action, error->message);
}

void
carrel_manager_note(CarrelManager *mgr, const char *session_id, const CarrelPrincipal *who,
                    const char *kind, const char *action, JsonNode *params, JsonNode *result,
                    const GError *failure, gint64 started_us)
{
    carrel_manager_record(mgr, session_id, who, kind, action, params, result, failure, started_us,
                          NULL);
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
