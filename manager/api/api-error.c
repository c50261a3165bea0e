#include "api/api.h"

static const guint status_table[CARREL_ERROR_LAST] = {
    [CARREL_ERROR_FAILED] = SOUP_STATUS_INTERNAL_SERVER_ERROR,
    [CARREL_ERROR_INVALID_ARG] = SOUP_STATUS_BAD_REQUEST,
    [CARREL_ERROR_NOT_FOUND] = SOUP_STATUS_NOT_FOUND,
    [CARREL_ERROR_EXISTS] = SOUP_STATUS_CONFLICT,
    [CARREL_ERROR_WRONG_STATE] = SOUP_STATUS_CONFLICT,
    [CARREL_ERROR_POLICY_DENIED] = SOUP_STATUS_FORBIDDEN,
    [CARREL_ERROR_UNAUTHORIZED] = SOUP_STATUS_UNAUTHORIZED,
    [CARREL_ERROR_FORBIDDEN] = SOUP_STATUS_FORBIDDEN,
    [CARREL_ERROR_LIMIT] = SOUP_STATUS_REQUEST_ENTITY_TOO_LARGE,
    [CARREL_ERROR_UNSUPPORTED] = SOUP_STATUS_NOT_IMPLEMENTED,
    [CARREL_ERROR_TIMEOUT] = SOUP_STATUS_GATEWAY_TIMEOUT,
    [CARREL_ERROR_HYPERVISOR] = SOUP_STATUS_INTERNAL_SERVER_ERROR,
    [CARREL_ERROR_DISK] = SOUP_STATUS_INTERNAL_SERVER_ERROR,
    [CARREL_ERROR_STORE] = SOUP_STATUS_INTERNAL_SERVER_ERROR,
    [CARREL_ERROR_INTERNAL] = SOUP_STATUS_INTERNAL_SERVER_ERROR,
    [CARREL_ERROR_BUSY] = SOUP_STATUS_CONFLICT,
    [CARREL_ERROR_NO_SPACE] = SOUP_STATUS_INSUFFICIENT_STORAGE,
    [CARREL_ERROR_RATE_LIMITED] = 429,
    [CARREL_ERROR_OVERLOADED] = SOUP_STATUS_SERVICE_UNAVAILABLE,
    [CARREL_ERROR_GONE] = SOUP_STATUS_GONE,
};

guint
carrel_api_status_for_error(const GError *error)
{
    if (!error || error->domain != CARREL_ERROR || error->code < 0 ||
        error->code >= CARREL_ERROR_LAST)
        return SOUP_STATUS_INTERNAL_SERVER_ERROR;
    return status_table[error->code];
}

JsonNode *
carrel_api_error_envelope(const GError *error)
{
    g_autoptr(JsonBuilder) b = json_builder_new();
    const char *code =
        error->domain == CARREL_ERROR ? carrel_error_code_to_string(error->code) : "failed";

    json_builder_begin_object(b);
    json_builder_set_member_name(b, "error");
    json_builder_begin_object(b);
    json_builder_set_member_name(b, "code");
    json_builder_add_string_value(b, code);
    json_builder_set_member_name(b, "message");
    json_builder_add_string_value(b, error->message);
    json_builder_end_object(b);
    json_builder_end_object(b);
    return json_builder_get_root(b);
}
