/*
 * core: a person's own input on the console, on the timeline beside the agent's actions. The
 * console proxy reads it (api-spice-record.c); core decides whether it is the lease holder's
 * and what of it is kept: typed text only where the session's policy allows it.
 */
#include <string.h>

#include "core/core-priv.h"

static gboolean
person_refused(GError **error, const char *why)
{
    g_set_error(error, CARREL_ERROR, CARREL_ERROR_INVALID_ARG, "console event: %s", why);
    return FALSE;
}

/* The params as kept: typed text replaced by its length unless the policy keeps it. */
static JsonNode *
kept_params(const char *action, JsonNode *params, gboolean keep_text, GError **error)
{
    g_autoptr(JsonBuilder) b = NULL;
    const char *text;

    if (!params || !JSON_NODE_HOLDS_OBJECT(params)) {
        person_refused(error, "params must be an object");
        return NULL;
    }
    if (!g_str_equal(action, "type") || keep_text)
        return json_node_copy(params);
    text = json_object_get_string_member_with_default(json_node_get_object(params), "text", NULL);
    if (!text || !g_utf8_validate(text, -1, NULL)) {
        person_refused(error, "a type event needs its text");
        return NULL;
    }
    b = json_builder_new();
    json_builder_begin_object(b);
    json_builder_set_member_name(b, "redacted");
    json_builder_add_boolean_value(b, TRUE);
    json_builder_set_member_name(b, "chars");
    json_builder_add_int_value(b, g_utf8_strlen(text, -1));
    json_builder_end_object(b);
    return json_builder_get_root(b);
}

gboolean
carrel_manager_person_event(CarrelManager *mgr, const CarrelPrincipal *who, const char *session_id,
                            const char *action, JsonNode *params, gint64 started_us, GError **error)
{
    g_autoptr(CarrelSession) session = NULL;
    g_autoptr(CarrelEvent) event = NULL;
    const CarrelPolicy *policy;
    JsonNode *kept;

    if (!action || (!g_str_equal(action, "click") && !g_str_equal(action, "keys") &&
                    !g_str_equal(action, "type")))
        return person_refused(error, "the action must be click, keys or type");
    /* Only the lease holder's hands are a person's on this desktop; anyone else's input never
     * reached the guest (the proxy dropped it), so it is nobody's event. */
    if (!carrel_manager_console_may_act(mgr, who, session_id)) {
        g_set_error(error, CARREL_ERROR, CARREL_ERROR_FORBIDDEN,
                    "'%s' does not hold the control lease of session '%s': their console input "
                    "is not recorded",
                    who->label, session_id);
        return FALSE;
    }
    if (!(session = carrel_store_session_get(mgr->store, session_id, error)) ||
        !(policy = carrel_manager_session_policy(mgr, session, error)) ||
        !(kept = kept_params(action, params, carrel_policy_record_typed_text(policy), error)))
        return FALSE;
    event = carrel_event_new();
    event->session_id = g_strdup(session->id);
    event->ts_us = g_get_real_time();
    event->actor = g_strdup(who->label);
    event->actor_id = g_strdup(who->token_id);
    event->actor_kind = g_strdup("person");
    event->kind = g_strdup("console");
    event->action = g_strdup(action);
    event->params = kept;
    event->result = json_node_new(JSON_NODE_NULL);
    event->duration_ms = started_us ? MAX(0, g_get_monotonic_time() - started_us) / 1000 : 0;
    return carrel_manager_event_add(mgr, event, error);
}
