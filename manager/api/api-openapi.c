/*
 * api: the OpenAPI description of the API (openapi.json beside this file), compiled into the
 * binary as a GResource so an installed carreld never reads the source tree.
 */
#include "api/api-priv.h"
#include "api-resources.h"

#define OPENAPI_PATH "/org/carrel/api/openapi.json"

GBytes *
carrel_api_openapi_bytes(GError **error)
{
    /* Looked up in the library's own resource, not the global table: a static library's
     * constructor that would register it may be dropped by the linker. */
    GBytes *bytes = g_resource_lookup_data(carrel_api_resources_get_resource(), OPENAPI_PATH,
                                           G_RESOURCE_LOOKUP_FLAGS_NONE, error);

    if (!bytes)
        g_prefix_error(error, "reading the built-in OpenAPI description: ");
    return bytes;
}

CarrelApiReply *
carrel_api_get_openapi(CarrelApiRequest *req, GError **error)
{
    return carrel_api_reply_new_bytes(SOUP_STATUS_OK, carrel_api_openapi_bytes(error),
                                      "application/json");
}
