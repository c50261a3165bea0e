/* api: internals shared by the server and the route handlers. */
#pragma once

#include "api/api.h"

typedef struct {
    CarrelManager *mgr;
    const char *version_info;
    char *method;
    char *path;
    GPtrArray *params; /* decoded path segments captured by '*' in the route */
    GHashTable *query; /* decoded query, may be NULL */
    JsonNode *body;    /* parsed JSON object, or NULL when there was no body */
    GBytes *raw_body;  /* the body as sent, for CARREL_API_ROUTE_RAW_BODY routes only */
    /* A handler that answers with bytes (an image, a file) sets these and returns NULL. */
    GBytes *reply_bytes;
    const char *reply_type; /* a static string, e.g. "image/png" */
    char *role;
    char *request_id;
    char *origin;               /* the Origin header, or NULL (checked by /mcp) */
    char *mcp_protocol_version; /* the MCP-Protocol-Version header, or NULL */
} CarrelApiRequest;

typedef JsonNode *(*CarrelApiHandler)(CarrelApiRequest *req, guint *ret_status, GError **error);

typedef enum {
    /* The body is handed over as bytes, not parsed, up to CARREL_LIMIT_FILE_BYTES. */
    CARREL_API_ROUTE_RAW_BODY = 1 << 0,
    /* With RAW_BODY: up to CARREL_LIMIT_UPLOAD_BYTES instead (task inputs). */
    CARREL_API_ROUTE_UPLOAD = 1 << 1,
} CarrelApiRouteFlags;

typedef struct {
    const char *method;
    const char *pattern; /* "/v1/sessions/ * /start" without spaces: '*' is one segment */
    CarrelApiHandler handler;
    const char *role; /* required role, NULL = any authenticated */
    CarrelApiRouteFlags flags;
} CarrelApiRoute;

/* The route table (api-routes.c), terminated by a NULL method. */
extern const CarrelApiRoute carrel_api_routes[];

/* Finds the route for method and path; NOT_FOUND or INVALID_ARG (405) when none. */
const CarrelApiRoute *carrel_api_route_match(const char *method, const char *path,
                                             GPtrArray **ret_params, guint *ret_status,
                                             GError **error);

/* Largest body the route accepts. */
gsize carrel_api_route_body_max(const CarrelApiRoute *route);

/* A query value or NULL. */
const char *carrel_api_query(CarrelApiRequest *req, const char *key);

/*
 * POST /mcp (api-mcp.c): one JSON-RPC message of MCP's streamable HTTP transport, answered with
 * application/json (202 and no body for notifications and responses). Malformed messages get
 * JSON-RPC errors, not the error envelope; a foreign Origin is refused with 403.
 */
JsonNode *carrel_api_mcp_post(CarrelApiRequest *req, guint *ret_status, GError **error);
