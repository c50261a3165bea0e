/*
 * The members of computer actions that several formats share: positions, drag paths, keys,
 * buttons, typed text, and the parsers of the actions whose members are the same everywhere.
 */
#include <string.h>

#include "conf/conf-action-priv.h"

gboolean
carrel_action_set_invalid(GError **error, const char *format, ...)
{
    va_list args;
    GError *local;

    va_start(args, format);
    local = g_error_new_valist(CARREL_ERROR, CARREL_ERROR_INVALID_ARG, format, args);
    va_end(args);
    g_propagate_error(error, local);
    return FALSE;
}

gboolean
carrel_action_node_to_coordinate(JsonNode *node, gint64 *ret_value)
{
    if (!carrel_conf_node_holds(node, G_TYPE_INT64) || json_node_get_int(node) < 0 ||
        json_node_get_int(node) > CARREL_ACTION_MAX_COORDINATE)
        return FALSE;
    *ret_value = json_node_get_int(node);
    return TRUE;
}

/* [x, y] (Anthropic's coordinate, carrel's path points). */
gboolean
carrel_action_pair_to_point(JsonNode *node, const char *name, CarrelPoint *ret_point,
                            GError **error)
{
    JsonArray *arr = JSON_NODE_HOLDS_ARRAY(node) ? json_node_get_array(node) : NULL;
    gint64 x, y;

    if (!arr || json_array_get_length(arr) != 2 ||
        !carrel_action_node_to_coordinate(json_array_get_element(arr, 0), &x) ||
        !carrel_action_node_to_coordinate(json_array_get_element(arr, 1), &y))
        return carrel_action_set_invalid(error,
                                         "'%s' must be [x, y] with integers between 0 and %d", name,
                                         CARREL_ACTION_MAX_COORDINATE);
    ret_point->x = (guint)x;
    ret_point->y = (guint)y;
    return TRUE;
}

/* {"x": X, "y": Y} (OpenAI's path points). */
static gboolean
object_to_point(JsonNode *node, const char *name, CarrelPoint *ret_point, GError **error)
{
    JsonObject *obj = JSON_NODE_HOLDS_OBJECT(node) ? json_node_get_object(node) : NULL;
    JsonNode *x_node = obj ? carrel_conf_get_node(obj, "x") : NULL;
    JsonNode *y_node = obj ? carrel_conf_get_node(obj, "y") : NULL;
    gint64 x, y;

    if (!x_node || !y_node || json_object_get_size(obj) != 2 ||
        !carrel_action_node_to_coordinate(x_node, &x) ||
        !carrel_action_node_to_coordinate(y_node, &y))
        return carrel_action_set_invalid(
            error, "'%s' must be {\"x\": X, \"y\": Y} with integers between 0 and %d", name,
            CARREL_ACTION_MAX_COORDINATE);
    ret_point->x = (guint)x;
    ret_point->y = (guint)y;
    return TRUE;
}

/* The position of the action: "coordinate": [x, y] or "x" and "y"; FALSE+no error if absent. */
static gboolean
find_point(CarrelActionCtx *ctx, gboolean *ret_found, CarrelPoint *ret_point, GError **error)
{
    JsonNode *coordinate = carrel_conf_get_node(ctx->obj, "coordinate");
    JsonNode *x = carrel_conf_get_node(ctx->obj, "x");
    JsonNode *y = carrel_conf_get_node(ctx->obj, "y");
    gint64 vx, vy;

    *ret_found = FALSE;
    if (coordinate && (x || y))
        return carrel_action_set_invalid(error,
                                         "give either 'coordinate' or 'x' and 'y', not both");
    if (coordinate) {
        *ret_found = TRUE;
        return carrel_action_pair_to_point(coordinate, "coordinate", ret_point, error);
    }
    if (!x && !y)
        return TRUE;
    if (!x || !y)
        return carrel_action_set_invalid(error, "'x' and 'y' must be given together");
    if (!carrel_action_node_to_coordinate(x, &vx) || !carrel_action_node_to_coordinate(y, &vy))
        return carrel_action_set_invalid(error, "'x' and 'y' must be integers between 0 and %d",
                                         CARREL_ACTION_MAX_COORDINATE);
    ret_point->x = (guint)vx;
    ret_point->y = (guint)vy;
    *ret_found = TRUE;
    return TRUE;
}

gboolean
carrel_action_get_point(CarrelActionCtx *ctx, gboolean required, GError **error)
{
    gboolean found;
    CarrelPoint point = {0, 0};

    if (!find_point(ctx, &found, &point, error))
        return FALSE;
    if (!found && required)
        return carrel_action_set_invalid(error, ctx->format == CARREL_ACTION_FORMAT_CARREL
                                                    ? "'coordinate' (or 'x' and 'y') is required"
                                                    : "'x' and 'y' are required");
    ctx->action->has_point = found;
    ctx->action->point = point;
    return TRUE;
}

/* An array of 1..max strings (each valid UTF-8 within CARREL_ACTION_MAX_TEXT bytes). */
gboolean
carrel_action_get_strings(JsonNode *node, const char *name, guint max, GStrv *ret_strings,
                          GError **error)
{
    JsonArray *arr = JSON_NODE_HOLDS_ARRAY(node) ? json_node_get_array(node) : NULL;
    g_autoptr(GStrvBuilder) b = g_strv_builder_new();

    if (!arr || json_array_get_length(arr) > max)
        return carrel_action_set_invalid(error, "'%s' must be an array of at most %u strings", name,
                                         max);
    for (guint i = 0; i < json_array_get_length(arr); i++) {
        JsonNode *item = json_array_get_element(arr, i);
        if (!carrel_conf_node_holds(item, G_TYPE_STRING) ||
            strlen(json_node_get_string(item)) > CARREL_ACTION_MAX_TEXT ||
            !g_utf8_validate(json_node_get_string(item), -1, NULL))
            return carrel_action_set_invalid(error, "'%s' must be an array of at most %u strings",
                                             name, max);
        g_strv_builder_add(b, json_node_get_string(item));
    }
    *ret_strings = g_strv_builder_end(b);
    return TRUE;
}

/* Keys given as one name or combination string, or as an array of names pressed together. */
GStrv
carrel_action_node_to_keys(JsonNode *node, const char *name, gboolean caseless, GError **error)
{
    g_auto(GStrv) names = NULL;
    GStrv keys;

    if (carrel_conf_node_holds(node, G_TYPE_STRING))
        keys = caseless ? carrel_keymap_resolve_keys(
                              (const char *const[]){json_node_get_string(node), NULL}, TRUE, error)
                        : carrel_keymap_parse_combo(json_node_get_string(node), error);
    else if (!carrel_action_get_strings(node, name, CARREL_KEYMAP_MAX_COMBO_KEYS, &names, error))
        return NULL;
    else
        keys = carrel_keymap_resolve_keys((const char *const *)names, caseless, error);
    if (!keys)
        g_prefix_error(error, "'%s': ", name);
    return keys;
}

/* The keys held by a pointer action: carrel's "modifiers", Anthropic's "text", OpenAI's "keys". */
gboolean
carrel_action_get_modifiers(CarrelActionCtx *ctx, GError **error)
{
    static const char *const names[] = {"modifiers", "text", "keys"};
    JsonNode *node = NULL;
    const char *name = NULL;

    for (gsize i = 0; i < G_N_ELEMENTS(names); i++) {
        JsonNode *n = carrel_conf_get_node(ctx->obj, names[i]);
        if (n && node)
            return carrel_action_set_invalid(error, "give either '%s' or '%s', not both", name,
                                             names[i]);
        if (n) {
            node = n;
            name = names[i];
        }
    }
    if (!node)
        return TRUE;
    ctx->action->modifiers =
        carrel_action_node_to_keys(node, name, ctx->format == CARREL_ACTION_FORMAT_OPENAI, error);
    return ctx->action->modifiers != NULL;
}

typedef struct {
    const char *name;
    CarrelButton button;
} ButtonName;

static const ButtonName carrel_buttons[] = {
    {"left", CARREL_BUTTON_LEFT},       {"middle", CARREL_BUTTON_MIDDLE},
    {"right", CARREL_BUTTON_RIGHT},     {"back", CARREL_BUTTON_BACK},
    {"forward", CARREL_BUTTON_FORWARD}, {NULL, CARREL_BUTTON_LAST},
};
static const ButtonName openai_buttons[] = {
    {"left", CARREL_BUTTON_LEFT},       {"right", CARREL_BUTTON_RIGHT},
    {"wheel", CARREL_BUTTON_MIDDLE},    {"back", CARREL_BUTTON_BACK},
    {"forward", CARREL_BUTTON_FORWARD}, {NULL, CARREL_BUTTON_LAST},
};
static const ButtonName osworld_buttons[] = {
    {"left", CARREL_BUTTON_LEFT},
    {"right", CARREL_BUTTON_RIGHT},
    {"middle", CARREL_BUTTON_MIDDLE},
    {NULL, CARREL_BUTTON_LAST},
};

gboolean
carrel_action_get_button(CarrelActionCtx *ctx, GError **error)
{
    const ButtonName *table = ctx->format == CARREL_ACTION_FORMAT_OPENAI    ? openai_buttons
                              : ctx->format == CARREL_ACTION_FORMAT_OSWORLD ? osworld_buttons
                                                                            : carrel_buttons;
    JsonNode *node = carrel_conf_get_node(ctx->obj, "button");
    g_autoptr(GString) known = g_string_new(NULL);

    if (!node)
        return TRUE;
    for (gsize i = 0; table[i].name; i++) {
        if (carrel_conf_node_holds(node, G_TYPE_STRING) &&
            g_str_equal(json_node_get_string(node), table[i].name)) {
            ctx->action->button = table[i].button;
            return TRUE;
        }
        g_string_append_printf(known, "%s%s", i ? ", " : "", table[i].name);
    }
    return carrel_action_set_invalid(error, "'button' must be one of %s", known->str);
}

gboolean
carrel_action_parse_move(CarrelActionCtx *ctx, GError **error)
{
    return carrel_action_get_point(ctx, TRUE, error) && carrel_action_get_modifiers(ctx, error);
}

gboolean
carrel_action_parse_click(CarrelActionCtx *ctx, GError **error)
{
    gint64 count = ctx->action->count;

    if (!carrel_action_get_point(ctx, FALSE, error) || !carrel_action_get_button(ctx, error) ||
        !carrel_action_get_modifiers(ctx, error) ||
        !carrel_conf_get_int(ctx->obj,
                             ctx->format == CARREL_ACTION_FORMAT_OSWORLD ? "num_clicks" : "count",
                             1, CARREL_ACTION_MAX_CLICKS, &count, error))
        return FALSE;
    ctx->action->count = (guint)count;
    return TRUE;
}

/* mouse_down, mouse_up: where (optional) and which button. */
gboolean
carrel_action_parse_press(CarrelActionCtx *ctx, GError **error)
{
    return carrel_action_get_point(ctx, FALSE, error) && carrel_action_get_button(ctx, error);
}

/* A drag path of 2..CARREL_ACTION_MAX_PATH points: [x, y] or {x, y} (carrel), {x, y} (OpenAI). */
gboolean
carrel_action_parse_path(CarrelActionCtx *ctx, GError **error)
{
    JsonNode *node = carrel_conf_get_node(ctx->obj, "path");
    JsonArray *arr = node && JSON_NODE_HOLDS_ARRAY(node) ? json_node_get_array(node) : NULL;
    g_autoptr(GArray) path = g_array_new(FALSE, TRUE, sizeof(CarrelPoint));

    if (!arr || json_array_get_length(arr) < 2 ||
        json_array_get_length(arr) > CARREL_ACTION_MAX_PATH)
        return carrel_action_set_invalid(error, "'path' must be an array of 2 to %d points",
                                         CARREL_ACTION_MAX_PATH);
    for (guint i = 0; i < json_array_get_length(arr); i++) {
        JsonNode *item = json_array_get_element(arr, i);
        CarrelPoint point;
        g_autofree char *name = g_strdup_printf("path[%u]", i);

        if (ctx->format == CARREL_ACTION_FORMAT_CARREL && JSON_NODE_HOLDS_ARRAY(item)) {
            if (!carrel_action_pair_to_point(item, name, &point, error))
                return FALSE;
        } else if (!object_to_point(item, name, &point, error)) {
            return FALSE;
        }
        g_array_append_val(path, point);
    }
    ctx->action->path = g_steal_pointer(&path);
    return carrel_action_get_modifiers(ctx, error);
}

const char *const carrel_action_no_members[] = {NULL};
const char *const carrel_action_text_members[] = {"text", NULL};
