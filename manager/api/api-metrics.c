/*
 * api: GET /metrics, and what the server counts of every reply it sends (core declares the
 * families). Labels are the route's pattern, never the path a client sent: a client choosing
 * paths must not choose how many series carreld keeps.
 */
#include <string.h>

#include "api/api-priv.h"

/* The text exposition format Prometheus scrapes. */
#define METRICS_CONTENT_TYPE "text/plain; version=0.0.4; charset=utf-8"
#define NO_ROUTE "unmatched"

/* Methods are a client's words too: the ones the API knows, else "other". */
static const char *
method_label(const char *method)
{
    static const char *const known[] = {"GET",    "HEAD",    "POST",  "PUT",
                                        "DELETE", "OPTIONS", "PATCH", NULL};

    for (guint i = 0; known[i]; i++) {
        if (g_str_equal(method, known[i]))
            return known[i];
    }
    return "other";
}

/* The pattern of the route that path goes to: the one that answered, else the one the request
 * was refused at (401 before the route ran), else NO_ROUTE. */
static const char *
route_label(const char *method, const char *path, const CarrelApiRoute *route)
{
    g_autoptr(GPtrArray) params = NULL;
    g_autoptr(GError) error = NULL;
    guint status = 0;

    if (!route)
        route = carrel_api_route_match(method, path, &params, &status, &error);
    return route ? route->pattern : NO_ROUTE;
}

/* The code of an error envelope ({"error": {"code"}}), else NULL; one of the known codes. */
static const char *
error_code(const CarrelApiReply *reply)
{
    JsonNode *json = carrel_api_reply_get_json(reply);
    JsonNode *err = NULL;
    JsonNode *code = NULL;

    if (carrel_api_reply_get_status(reply) < 400 || !json || !JSON_NODE_HOLDS_OBJECT(json))
        return NULL;
    err = json_object_get_member(json_node_get_object(json), "error");
    if (err && JSON_NODE_HOLDS_OBJECT(err))
        code = json_object_get_member(json_node_get_object(err), "code");
    /* MCP's JSON-RPC errors have numbers for codes: not an envelope, not counted here. */
    if (!code || !JSON_NODE_HOLDS_VALUE(code) || json_node_get_value_type(code) != G_TYPE_STRING)
        return NULL;
    return carrel_error_code_to_string(carrel_error_code_from_string(json_node_get_string(code)));
}

void
carrel_api_count_reply(CarrelApi *api, const char *method, const char *path,
                       const CarrelApiRoute *route, const CarrelApiReply *reply)
{
    CarrelMetrics *metrics = carrel_manager_get_metrics(api->mgr);
    g_autofree char *status = g_strdup_printf("%u", carrel_api_reply_get_status(reply));
    const char *labels[] = {method_label(method), route_label(method, path, route), status, NULL};
    const char *code = error_code(reply);

    carrel_metrics_add(metrics, "carrel_http_requests_total", labels, 1);
    if (code) {
        const char *codes[] = {code, NULL};
        carrel_metrics_add(metrics, "carrel_errors_total", codes, 1);
    }
}

CarrelApiReply *
carrel_api_get_metrics(CarrelApiRequest *req, GError **error)
{
    char *text = carrel_manager_metrics_text(req->mgr, req->who, error);

    if (!text)
        return NULL;
    return carrel_api_reply_new_bytes(SOUP_STATUS_OK, g_bytes_new_take(text, strlen(text)),
                                      METRICS_CONTENT_TYPE);
}
