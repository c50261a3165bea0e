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

static void
add_string_or_null(JsonBuilder *b, const char *name, const char *value)
{
    json_builder_set_member_name(b, name);
    if (value)
        json_builder_add_string_value(b, value);
    else
        json_builder_add_null_value(b);
}

/* The members kept in the detail column. */
static void
add_detail(JsonBuilder *b, const CarrelEvent *event)
{
    add_string_or_null(b, "action", event->action);
    add_node(b, "params", event->params);
    add_node(b, "result", event->result);
    add_string_or_null(b, "error", event->error);
    json_builder_set_member_name(b, "duration_ms");
    json_builder_add_int_value(b, event->duration_ms);
    add_string_or_null(b, "screenshot", event->screenshot);
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

/* A member that is absent or null gives NULL. */
static JsonNode *
member_or_null(JsonObject *obj, const char *name)
{
    JsonNode *node = json_object_get_member(obj, name);

    return node && !JSON_NODE_HOLDS_NULL(node) ? json_node_copy(node) : NULL;
}

static char *
string_member(JsonObject *obj, const char *name)
{
    JsonNode *node = json_object_get_member(obj, name);

    if (!node || !JSON_NODE_HOLDS_VALUE(node) || json_node_get_value_type(node) != G_TYPE_STRING)
        return NULL;
    return g_strdup(json_node_get_string(node));
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
    event->action = string_member(obj, "action");
    event->params = member_or_null(obj, "params");
    event->result = member_or_null(obj, "result");
    event->error = string_member(obj, "error");
    event->duration_ms = json_object_get_int_member_with_default(obj, "duration_ms", 0);
    event->screenshot = string_member(obj, "screenshot");
    return TRUE;
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
    add_string_or_null(b, "session_id", event->session_id);
    add_string_or_null(b, "time", ts);
    add_string_or_null(b, "actor", event->actor);
    add_string_or_null(b, "kind", event->kind);
    add_detail(b, event);
    json_builder_set_member_name(b, "ok");
    json_builder_add_boolean_value(b, event->error == NULL);
    add_string_or_null(b, "actor_id", event->actor_id);
    json_builder_end_object(b);
    return json_builder_get_root(b);
}
