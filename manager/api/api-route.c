#include <string.h>

#include "api/api-priv.h"

/* Splits an encoded path into decoded segments; refuses encoded '/' and NUL. */
static GPtrArray *
split_path(const char *path, GError **error)
{
    g_auto(GStrv) parts = g_strsplit(path, "/", -1);
    g_autoptr(GPtrArray) out = g_ptr_array_new_with_free_func(g_free);

    for (guint i = 0; parts[i]; i++) {
        g_autofree char *decoded = NULL;
        if (i == 0 && parts[i][0] == '\0')
            continue;
        decoded = g_uri_unescape_string(parts[i], "/");
        if (!decoded || !carrel_util_is_clean_text(decoded)) {
            g_set_error(error, CARREL_ERROR, CARREL_ERROR_INVALID_ARG, "malformed request path");
            return NULL;
        }
        g_ptr_array_add(out, g_steal_pointer(&decoded));
    }
    return g_steal_pointer(&out);
}

/*
 * Whether the decoded segments match pattern, where a segment "*" stands for any one segment
 * (added to params when given). Walks the pattern in place: a request tries much of the table
 * (twice: the early size check, then dispatch), and splitting every pattern into new strings
 * cost more than a tenth of a session list.
 */
static gboolean
pattern_matches(const char *pattern, GPtrArray *segments, GPtrArray *params)
{
    const char *p = pattern + 1;

    for (guint i = 0; i < segments->len; i++) {
        const char *seg = g_ptr_array_index(segments, i);
        const char *end = strchr(p, '/');
        gsize len = end ? (gsize)(end - p) : strlen(p);

        if (len == 1 && p[0] == '*') {
            if (params)
                g_ptr_array_add(params, g_strdup(seg));
        } else if (strlen(seg) != len || memcmp(seg, p, len) != 0) {
            return FALSE;
        }
        if (!end)
            return i + 1 == segments->len;
        p = end + 1;
    }
    return FALSE;
}

const CarrelApiRoute *
carrel_api_route_match(const char *method, const char *path, GPtrArray **ret_params,
                       guint *ret_status, GError **error)
{
    g_autoptr(GPtrArray) segments = split_path(path, error);
    gboolean path_known = FALSE;

    if (!segments) {
        *ret_status = SOUP_STATUS_BAD_REQUEST;
        return NULL;
    }
    for (const CarrelApiRoute *r = carrel_api_routes; r->method; r++) {
        g_autoptr(GPtrArray) params = NULL;
        if (!pattern_matches(r->pattern, segments, NULL))
            continue;
        path_known = TRUE;
        if (!g_str_equal(r->method, method))
            continue;
        params = g_ptr_array_new_with_free_func(g_free);
        pattern_matches(r->pattern, segments, params);
        *ret_params = g_steal_pointer(&params);
        return r;
    }
    if (path_known) {
        *ret_status = SOUP_STATUS_METHOD_NOT_ALLOWED;
        g_set_error(error, CARREL_ERROR, CARREL_ERROR_INVALID_ARG,
                    "method '%s' is not allowed on this resource", method);
    } else {
        *ret_status = SOUP_STATUS_NOT_FOUND;
        g_set_error(error, CARREL_ERROR, CARREL_ERROR_NOT_FOUND, "no such route");
    }
    return NULL;
}

const char *
carrel_api_param(CarrelApiRequest *req, guint i)
{
    return g_ptr_array_index(req->params, i);
}

const char *
carrel_api_query(CarrelApiRequest *req, const char *key)
{
    return req->query ? g_hash_table_lookup(req->query, key) : NULL;
}

gsize
carrel_api_route_body_max(const CarrelApiRoute *route)
{
    if (route->flags & CARREL_API_ROUTE_TRANSFER)
        return CARREL_LIMIT_TRANSFER_BYTES;
    if (route->flags & CARREL_API_ROUTE_UPLOAD)
        return CARREL_LIMIT_UPLOAD_BYTES;
    return (route->flags & CARREL_API_ROUTE_RAW_BODY) ? CARREL_LIMIT_FILE_BYTES
                                                      : CARREL_LIMIT_BODY_BYTES;
}
