#include <string.h>

#include "conf/conf.h"
#include "conf/conf-priv.h"

#define QUALITY_DEFAULT 80
#define SCALE_MIN 0.01
#define SCALE_MAX 4.0
#define EDGE_MIN 16
#define EDGE_MAX 16384

static gboolean
parse_uint(const char *key, const char *text, guint min, guint max, guint *ret, GError **error)
{
    guint64 value = 0;

    if (!g_ascii_string_to_unsigned(text, 10, min, max, &value, NULL)) {
        g_set_error(error, CARREL_ERROR, CARREL_ERROR_INVALID_ARG,
                    "'%s' must be an integer from %u to %u", key, min, max);
        return FALSE;
    }
    *ret = (guint)value;
    return TRUE;
}

static gboolean
parse_scale(const char *text, double *ret, GError **error)
{
    char *end = NULL;
    double value = g_ascii_strtod(text, &end);

    if (!*text || !end || *end || !(value >= SCALE_MIN && value <= SCALE_MAX)) {
        g_set_error(error, CARREL_ERROR, CARREL_ERROR_INVALID_ARG,
                    "'scale' must be a number from %.2f to %.1f", SCALE_MIN, SCALE_MAX);
        return FALSE;
    }
    *ret = value;
    return TRUE;
}

/* "x,y,w,h" with w and h at least 1; the screen-bounds check comes later. */
static gboolean
parse_region(const char *text, guint ret[4], GError **error)
{
    g_auto(GStrv) parts = g_strsplit(text, ",", -1);

    if (g_strv_length(parts) != 4) {
        g_set_error(error, CARREL_ERROR, CARREL_ERROR_INVALID_ARG,
                    "'region' must be x,y,width,height");
        return FALSE;
    }
    for (guint i = 0; i < 4; i++) {
        if (!parse_uint("region", parts[i], i < 2 ? 0 : 1, EDGE_MAX, &ret[i], error))
            return FALSE;
    }
    return TRUE;
}

static gboolean
parse_format(const char *text, CarrelScreenshotRequest *req, GError **error)
{
    if (g_str_equal(text, "png")) {
        req->jpeg = FALSE;
    } else if (g_str_equal(text, "jpeg") || g_str_equal(text, "jpg")) {
        req->jpeg = TRUE;
    } else {
        g_set_error(error, CARREL_ERROR, CARREL_ERROR_INVALID_ARG,
                    "'format' must be png or jpeg, not '%s'", text);
        return FALSE;
    }
    return TRUE;
}

/* thumbnail=1|true|0|false; a thumbnail is small and whole: at most CARREL_THUMBNAIL_EDGE. */
static gboolean
parse_thumbnail(const char *text, CarrelScreenshotRequest *req, GError **error)
{
    if (g_str_equal(text, "0") || g_str_equal(text, "false"))
        return TRUE;
    if (!g_str_equal(text, "1") && !g_str_equal(text, "true")) {
        g_set_error(error, CARREL_ERROR, CARREL_ERROR_INVALID_ARG,
                    "'thumbnail' must be 1 or 0, not '%s'",
                    carrel_util_is_clean_text(text) ? text : "?");
        return FALSE;
    }
    if (req->scale != 1.0 || req->has_region) {
        g_set_error(error, CARREL_ERROR, CARREL_ERROR_INVALID_ARG,
                    "a thumbnail is the whole screen scaled by 'max_edge' (at most %d): no "
                    "'scale' or 'region'",
                    CARREL_THUMBNAIL_EDGE);
        return FALSE;
    }
    req->thumbnail = TRUE;
    req->max_edge =
        req->max_edge ? MIN(req->max_edge, CARREL_THUMBNAIL_EDGE) : CARREL_THUMBNAIL_EDGE;
    return TRUE;
}

gboolean
carrel_screenshot_request_parse(GHashTable *query, CarrelScreenshotRequest *ret_req, GError **error)
{
    static const char *const known[] = {"format", "quality",   "scale", "max_edge",
                                        "region", "thumbnail", NULL};
    CarrelScreenshotRequest req = {.quality = QUALITY_DEFAULT, .scale = 1.0};
    const char *value;
    GHashTableIter iter;
    gpointer key;

    if (query) {
        g_hash_table_iter_init(&iter, query);
        while (g_hash_table_iter_next(&iter, &key, NULL)) {
            if (!g_strv_contains(known, key)) {
                g_set_error(error, CARREL_ERROR, CARREL_ERROR_INVALID_ARG,
                            "unknown screenshot option '%s' (known: format, quality, scale, "
                            "max_edge, region, thumbnail)",
                            carrel_util_is_clean_text(key) ? (const char *)key : "?");
                return FALSE;
            }
        }
    }
    if (query && (value = g_hash_table_lookup(query, "format")) &&
        !parse_format(value, &req, error))
        return FALSE;
    if (query && (value = g_hash_table_lookup(query, "quality")) &&
        !parse_uint("quality", value, 1, 100, &req.quality, error))
        return FALSE;
    if (query && (value = g_hash_table_lookup(query, "scale")) &&
        !parse_scale(value, &req.scale, error))
        return FALSE;
    if (query && (value = g_hash_table_lookup(query, "max_edge")) &&
        !parse_uint("max_edge", value, EDGE_MIN, EDGE_MAX, &req.max_edge, error))
        return FALSE;
    if (query && (value = g_hash_table_lookup(query, "region"))) {
        if (!parse_region(value, req.region, error))
            return FALSE;
        req.has_region = TRUE;
    }
    if (req.scale != 1.0 && req.max_edge) {
        g_set_error(error, CARREL_ERROR, CARREL_ERROR_INVALID_ARG,
                    "give 'scale' or 'max_edge', not both");
        return FALSE;
    }
    if (query && (value = g_hash_table_lookup(query, "thumbnail")) &&
        !parse_thumbnail(value, &req, error))
        return FALSE;
    *ret_req = req;
    return TRUE;
}
