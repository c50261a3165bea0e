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
    char *role;
    char *request_id;
} CarrelApiRequest;

typedef JsonNode *(*CarrelApiHandler)(CarrelApiRequest *req, guint *ret_status, GError **error);

typedef struct {
    const char *method;
    const char *pattern; /* "/v1/sessions/ * /start" without spaces: '*' is one segment */
    CarrelApiHandler handler;
    const char *role; /* required role, NULL = any authenticated */
} CarrelApiRoute;

/* The route table (api-routes.c), terminated by a NULL method. */
extern const CarrelApiRoute carrel_api_routes[];

/* Finds the route for method and path; NOT_FOUND or INVALID_ARG (405) when none. */
const CarrelApiRoute *carrel_api_route_match(const char *method, const char *path,
                                             GPtrArray **ret_params, guint *ret_status,
                                             GError **error);

/* A query value or NULL. */
const char *carrel_api_query(CarrelApiRequest *req, const char *key);
