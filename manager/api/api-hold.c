/*
 * api (test hooks only): a request that holds a thread of the long pool until a test lets it
 * go, so that tests can fill that pool and check that the other classes still answer.
 */
#include "api/api-priv.h"

/* A hold never outlives a forgotten test by long. */
#define HOLD_MAX_S 300

CarrelApiReply *
carrel_api_post_test_hold(CarrelApiRequest *req, GError **error)
{
    CarrelApi *api = req->api;
    gint64 deadline = g_get_monotonic_time() + HOLD_MAX_S * G_TIME_SPAN_SECOND;
    g_autoptr(JsonBuilder) b = json_builder_new();
    gboolean released = TRUE;

    g_mutex_lock(&api->hold_lock);
    api->hold_waiting++;
    while (api->hold_closed && released)
        released = g_cond_wait_until(&api->hold_cond, &api->hold_lock, deadline);
    api->hold_waiting--;
    g_mutex_unlock(&api->hold_lock);
    json_builder_begin_object(b);
    json_builder_set_member_name(b, "released");
    json_builder_add_boolean_value(b, released);
    json_builder_end_object(b);
    return carrel_api_reply_ok(json_builder_get_root(b));
}

/* Runs on the main loop (inline): it only takes the gate's lock, which no one holds long. */
CarrelApiReply *
carrel_api_post_test_gate(CarrelApiRequest *req, GError **error)
{
    CarrelApi *api = req->api;
    JsonObject *body = req->body ? json_node_get_object(req->body) : NULL;
    JsonNode *closed = body ? json_object_get_member(body, "closed") : NULL;
    g_autoptr(JsonBuilder) b = json_builder_new();
    guint waiting;
    gboolean now_closed;

    if (closed && json_node_get_value_type(closed) != G_TYPE_BOOLEAN) {
        g_set_error(error, CARREL_ERROR, CARREL_ERROR_INVALID_ARG, "closed must be a boolean");
        return NULL;
    }
    g_mutex_lock(&api->hold_lock);
    if (closed)
        api->hold_closed = json_node_get_boolean(closed);
    g_cond_broadcast(&api->hold_cond);
    waiting = api->hold_waiting;
    now_closed = api->hold_closed;
    g_mutex_unlock(&api->hold_lock);
    json_builder_begin_object(b);
    json_builder_set_member_name(b, "closed");
    json_builder_add_boolean_value(b, now_closed);
    json_builder_set_member_name(b, "holding");
    json_builder_add_int_value(b, waiting);
    json_builder_set_member_name(b, "long_queued");
    json_builder_add_int_value(b, carrel_api_pools_queued(api->pools, CARREL_API_CLASS_LONG));
    json_builder_end_object(b);
    return carrel_api_reply_ok(json_builder_get_root(b));
}
