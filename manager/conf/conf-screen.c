/* Screen sizes ("WxH") of sessions and template defaults: the one parser and range check. */
#include <string.h>

#include "conf/conf.h"
#include "conf/conf-priv.h"

/* Digits only, no sign, no leading zero, at most 9 of them (no overflow; the range check says
 * what is too large). */
static gboolean
parse_dimension(const char *text, gsize len, guint *ret_value)
{
    guint value = 0;

    if (len == 0 || len > 9 || text[0] == '0')
        return FALSE;
    for (gsize i = 0; i < len; i++) {
        if (!g_ascii_isdigit(text[i]))
            return FALSE;
        value = value * 10 + (guint)(text[i] - '0');
    }
    *ret_value = value;
    return TRUE;
}

gboolean
carrel_screen_size_check(guint width, guint height, GError **error)
{
    if (width < CARREL_SCREEN_MIN_WIDTH || width > CARREL_SCREEN_MAX_WIDTH ||
        height < CARREL_SCREEN_MIN_HEIGHT || height > CARREL_SCREEN_MAX_HEIGHT || width % 8 != 0) {
        g_set_error(error, CARREL_ERROR, CARREL_ERROR_INVALID_ARG,
                    "screen '%ux%u' is out of range: %dx%d to %dx%d, the width a multiple of 8",
                    width, height, CARREL_SCREEN_MIN_WIDTH, CARREL_SCREEN_MIN_HEIGHT,
                    CARREL_SCREEN_MAX_WIDTH, CARREL_SCREEN_MAX_HEIGHT);
        return FALSE;
    }
    return TRUE;
}

gboolean
carrel_screen_size_parse(const char *text, guint *ret_width, guint *ret_height, GError **error)
{
    const char *x = text ? strchr(text, 'x') : NULL;
    guint width = 0, height = 0;

    if (!x || strlen(text) > 19 || !parse_dimension(text, (gsize)(x - text), &width) ||
        !parse_dimension(x + 1, strlen(x + 1), &height)) {
        g_set_error(error, CARREL_ERROR, CARREL_ERROR_INVALID_ARG,
                    "screen must be WIDTHxHEIGHT in pixels (e.g. 1280x800), not '%.32s'",
                    text ? text : "");
        return FALSE;
    }
    if (!carrel_screen_size_check(width, height, error))
        return FALSE;
    *ret_width = width;
    *ret_height = height;
    return TRUE;
}

char *
carrel_screen_size_format(guint width, guint height)
{
    return width && height ? g_strdup_printf("%ux%u", width, height) : NULL;
}

gboolean
carrel_conf_get_screen(JsonObject *obj, const char *member, guint *ret_width, guint *ret_height,
                       GError **error)
{
    const char *text = NULL;

    if (!carrel_conf_get_string_ref(obj, member, FALSE, &text, error))
        return FALSE;
    if (!text)
        return TRUE;
    if (!carrel_screen_size_parse(text, ret_width, ret_height, error)) {
        g_prefix_error(error, "'%s': ", member);
        return FALSE;
    }
    return TRUE;
}

/* One bounded count of the defaults object; absent leaves *ret_value as it is. */
static gboolean
get_default(JsonObject *obj, const char *member, guint min, guint max, guint *ret_value,
            GError **error)
{
    if (!carrel_conf_get_uint(obj, member, min, max, ret_value, error)) {
        g_prefix_error(error, "'defaults': ");
        return FALSE;
    }
    return TRUE;
}

gboolean
carrel_template_defaults_from_recipe(JsonNode *recipe, CarrelTemplate *tmpl, GError **error)
{
    static const char *const allowed[] = {"vcpus", "memory_mib", "screen", NULL};
    JsonObject *obj =
        recipe && JSON_NODE_HOLDS_OBJECT(recipe) ? json_node_get_object(recipe) : NULL;
    JsonNode *node = obj ? json_object_get_member(obj, "defaults") : NULL;
    JsonObject *defaults;
    guint vcpus = 0, memory_mib = 0, width = 0, height = 0;

    if (!node || JSON_NODE_HOLDS_NULL(node))
        return TRUE;
    if (!JSON_NODE_HOLDS_OBJECT(node)) {
        g_set_error(error, CARREL_ERROR, CARREL_ERROR_INVALID_ARG,
                    "'defaults' must be an object {vcpus?, memory_mib?, screen?}");
        return FALSE;
    }
    defaults = json_node_get_object(node);
    if (!carrel_conf_check_members(defaults, allowed, error) ||
        !get_default(defaults, "vcpus", 1, CARREL_LIMIT_VCPUS, &vcpus, error) ||
        !get_default(defaults, "memory_mib", CARREL_LIMIT_MIN_MEMORY_MIB, CARREL_LIMIT_MEMORY_MIB,
                     &memory_mib, error) ||
        !carrel_conf_get_screen(defaults, "screen", &width, &height, error)) {
        g_prefix_error(error, "recipe defaults: ");
        return FALSE;
    }
    tmpl->default_vcpus = vcpus;
    tmpl->default_memory_mib = memory_mib;
    tmpl->default_screen_width = width;
    tmpl->default_screen_height = height;
    return TRUE;
}

void
carrel_session_resolve_shape(const CarrelSessionRequest *req, const CarrelTemplate *tmpl,
                             CarrelSessionShape *ret_shape)
{
    gboolean own_screen = req->screen_width != 0;

    ret_shape->vcpus = req->vcpus            ? req->vcpus
                       : tmpl->default_vcpus ? tmpl->default_vcpus
                                             : CARREL_DEFAULT_VCPUS;
    ret_shape->memory_mib = req->memory_mib            ? req->memory_mib
                            : tmpl->default_memory_mib ? tmpl->default_memory_mib
                                                       : CARREL_DEFAULT_MEMORY_MIB;
    ret_shape->vcpus_explicit = req->vcpus != 0;
    ret_shape->memory_explicit = req->memory_mib != 0;
    ret_shape->screen_width = own_screen ? req->screen_width : tmpl->default_screen_width;
    ret_shape->screen_height = own_screen ? req->screen_height : tmpl->default_screen_height;
}
