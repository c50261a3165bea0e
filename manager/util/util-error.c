#include "util/util.h"

G_DEFINE_QUARK(carrel - error - quark, carrel_error)

static const char *const error_names[CARREL_ERROR_LAST] = {
    [CARREL_ERROR_FAILED] = "failed",
    [CARREL_ERROR_INVALID_ARG] = "invalid_argument",
    [CARREL_ERROR_NOT_FOUND] = "not_found",
    [CARREL_ERROR_EXISTS] = "exists",
    [CARREL_ERROR_WRONG_STATE] = "wrong_state",
    [CARREL_ERROR_POLICY_DENIED] = "policy_denied",
    [CARREL_ERROR_UNAUTHORIZED] = "unauthorized",
    [CARREL_ERROR_FORBIDDEN] = "forbidden",
    [CARREL_ERROR_LIMIT] = "limit_exceeded",
    [CARREL_ERROR_UNSUPPORTED] = "unsupported",
    [CARREL_ERROR_TIMEOUT] = "timeout",
    [CARREL_ERROR_HYPERVISOR] = "hypervisor_error",
    [CARREL_ERROR_DISK] = "disk_error",
    [CARREL_ERROR_STORE] = "store_error",
    [CARREL_ERROR_INTERNAL] = "internal",
    [CARREL_ERROR_BUSY] = "busy",
    [CARREL_ERROR_NO_SPACE] = "no_space",
    [CARREL_ERROR_RATE_LIMITED] = "rate_limited",
    [CARREL_ERROR_GONE] = "gone",
    [CARREL_ERROR_OVERLOADED] = "overloaded",
};

const char *
carrel_error_code_to_string(CarrelErrorCode code)
{
    if ((int)code < 0 || code >= CARREL_ERROR_LAST)
        return error_names[CARREL_ERROR_FAILED];
    return error_names[code];
}

CarrelErrorCode
carrel_error_code_from_string(const char *name)
{
    for (int i = 0; name && i < CARREL_ERROR_LAST; i++) {
        if (g_str_equal(error_names[i], name))
            return (CarrelErrorCode)i;
    }
    return CARREL_ERROR_FAILED;
}
