#include <string.h>

#include "conf/conf.h"
#include "conf/conf-priv.h"

CarrelEvent *
carrel_event_new(void)
{
    return g_new0(CarrelEvent, 1);
}

void
carrel_event_free(CarrelEvent *event)
{
    if (!event)
        return;
    g_free(event->session_id);
    g_free(event->actor);
    g_free(event->actor_id);
    g_free(event->actor_kind);
    g_free(event->kind);
    g_free(event->action);
    g_clear_pointer(&event->params, json_node_unref);
    g_clear_pointer(&event->result, json_node_unref);
    g_free(event->error);
    g_free(event->screenshot);
    g_free(event);
}

static void
add_node(JsonBuilder *b, const char *name, JsonNode *node)
{
    json_builder_set_member_name(b, name);
    json_builder_add_value(b, node ? json_node_copy(node) : json_node_new(JSON_NODE_NULL));
}

/* The members kept in the detail column. */
static void
add_detail(JsonBuilder *b, const CarrelEvent *event)
{
    carrel_conf_add_optional_string(b, "action", event->action);
    add_node(b, "params", event->params);
    add_node(b, "result", event->result);
    carrel_conf_add_optional_string(b, "error", event->error);
    json_builder_set_member_name(b, "duration_ms");
    json_builder_add_int_value(b, event->duration_ms);
    carrel_conf_add_optional_string(b, "screenshot", event->screenshot);
    /* Only a person's events say it: every other kind is derived from the actor. */
    if (event->actor_kind)
        carrel_conf_add_optional_string(b, "actor_kind", event->actor_kind);
}

static char *
node_text(JsonNode *node)
{
    g_autoptr(JsonGenerator) gen = json_generator_new();

    json_generator_set_root(gen, node);
    return json_generator_to_data(gen, NULL);
}

char *
carrel_event_detail_to_text(const CarrelEvent *event)
{
    g_autoptr(JsonBuilder) b = json_builder_new();
    g_autoptr(JsonNode) root = NULL;

    json_builder_begin_object(b);
    add_detail(b, event);
    json_builder_end_object(b);
    root = json_builder_get_root(b);
    return node_text(root);
}

static JsonNode *
copy_node(JsonNode *node)
{
    return node ? json_node_copy(node) : NULL;
}

gboolean
carrel_event_detail_from_text(CarrelEvent *event, const char *text, GError **error)
{
    g_autoptr(JsonNode) root = carrel_conf_parse_json(text, strlen(text), error);
    JsonObject *obj;

    if (!root)
        return FALSE;
    if (!JSON_NODE_HOLDS_OBJECT(root)) {
        g_set_error(error, CARREL_ERROR, CARREL_ERROR_INVALID_ARG, "event detail is not an object");
        return FALSE;
    }
    obj = json_node_get_object(root);
    /* Carrel wrote the detail: a member of another type is left out rather than refused. */
    event->action = g_strdup(carrel_conf_peek_string(obj, "action"));
    event->params = copy_node(carrel_conf_get_node(obj, "params"));
    event->result = copy_node(carrel_conf_get_node(obj, "result"));
    event->error = g_strdup(carrel_conf_peek_string(obj, "error"));
    event->duration_ms = json_object_get_int_member_with_default(obj, "duration_ms", 0);
    event->screenshot = g_strdup(carrel_conf_peek_string(obj, "screenshot"));
    if (g_strcmp0(carrel_conf_peek_string(obj, "actor_kind"), "person") == 0)
        event->actor_kind = g_strdup("person");
    return TRUE;
}

const char *
carrel_event_actor_kind(const CarrelEvent *event)
{
    if (event->actor_kind)
        return event->actor_kind;
    /* By id where there is one: a token may be named "carreld", but no token's id is that. */
    return g_strcmp0(event->actor_id ? event->actor_id : event->actor, "carreld") == 0 ? "carreld"
                                                                                       : "agent";
}

JsonNode *
carrel_event_to_json(const CarrelEvent *event)
{
    g_autoptr(JsonBuilder) b = json_builder_new();
    g_autoptr(GDateTime) secs = g_date_time_new_from_unix_utc(event->ts_us / G_USEC_PER_SEC);
    g_autoptr(GDateTime) dt = secs ? g_date_time_add(secs, event->ts_us % G_USEC_PER_SEC) : NULL;
    g_autofree char *ts = dt ? g_date_time_format(dt, "%Y-%m-%dT%H:%M:%S.%fZ") : NULL;

    json_builder_begin_object(b);
    json_builder_set_member_name(b, "seq");
    json_builder_add_int_value(b, event->seq);
    carrel_conf_add_optional_string(b, "session_id", event->session_id);
    carrel_conf_add_optional_string(b, "time", ts);
    carrel_conf_add_optional_string(b, "actor", event->actor);
    carrel_conf_add_optional_string(b, "kind", event->kind);
    add_detail(b, event);
    /* add_detail wrote actor_kind for a person already; the others' is derived here. */
    if (!event->actor_kind)
        carrel_conf_add_optional_string(b, "actor_kind", carrel_event_actor_kind(event));
    json_builder_set_member_name(b, "ok");
    json_builder_add_boolean_value(b, event->error == NULL);
    carrel_conf_add_optional_string(b, "actor_id", event->actor_id);
    json_builder_end_object(b);
    return json_builder_get_root(b);
}
