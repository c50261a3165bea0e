/*
 * carrel's action names and Anthropic's computer tool, which share the "action" member:
 * {"action": NAME, ...}.
 */
#include <math.h>

#include "conf/conf-action-priv.h"

/* Anthropic's left_click_drag: from start_coordinate to coordinate. */
static gboolean
parse_left_click_drag(CarrelActionCtx *ctx, GError **error)
{
    JsonNode *start = carrel_conf_get_node(ctx->obj, "start_coordinate");
    JsonNode *end = carrel_conf_get_node(ctx->obj, "coordinate");
    CarrelPoint points[2];

    if (!start || !end)
        return carrel_action_set_invalid(error, "'start_coordinate' and 'coordinate' are required");
    if (!carrel_action_pair_to_point(start, "start_coordinate", &points[0], error) ||
        !carrel_action_pair_to_point(end, "coordinate", &points[1], error))
        return FALSE;
    ctx->action->path = g_array_sized_new(FALSE, TRUE, sizeof(CarrelPoint), 2);
    g_array_append_vals(ctx->action->path, points, 2);
    return TRUE;
}

static const char *const directions[] = {"up", "down", "left", "right", NULL};

/* direction + amount (carrel) or scroll_direction + scroll_amount (Anthropic) into dx/dy. */
static gboolean
parse_direction(CarrelActionCtx *ctx, const char *direction_name, const char *amount_name,
                GError **error)
{
    g_autofree char *direction = NULL;
    gint64 amount = 0;
    int sign;

    if (!carrel_conf_get_string(ctx->obj, direction_name, TRUE, &direction, error) ||
        !carrel_conf_get_int(ctx->obj, amount_name, 1, CARREL_ACTION_MAX_SCROLL, &amount, error))
        return FALSE;
    if (!g_strv_contains(directions, direction))
        return carrel_action_set_invalid(error, "'%s' must be up, down, left or right",
                                         direction_name);
    if (amount == 0)
        return carrel_action_set_invalid(error, "'%s' is required with '%s'", amount_name,
                                         direction_name);
    sign = (g_str_equal(direction, "up") || g_str_equal(direction, "left")) ? -1 : 1;
    if (g_str_equal(direction, "up") || g_str_equal(direction, "down"))
        ctx->action->dy = sign * (int)amount;
    else
        ctx->action->dx = sign * (int)amount;
    return TRUE;
}

static gboolean
parse_scroll(CarrelActionCtx *ctx, GError **error)
{
    gboolean has_delta =
        carrel_conf_get_node(ctx->obj, "dx") || carrel_conf_get_node(ctx->obj, "dy");
    gboolean has_direction =
        carrel_conf_get_node(ctx->obj, "direction") || carrel_conf_get_node(ctx->obj, "amount");
    gboolean has_anthropic = carrel_conf_get_node(ctx->obj, "scroll_direction") ||
                             carrel_conf_get_node(ctx->obj, "scroll_amount");
    gint64 dx = 0, dy = 0;

    if (has_delta + has_direction + has_anthropic != 1)
        return carrel_action_set_invalid(
            error, "scroll takes one of 'dx'/'dy', 'direction' with 'amount', or "
                   "'scroll_direction' with 'scroll_amount'");
    if (!carrel_action_get_point(ctx, FALSE, error) || !carrel_action_get_modifiers(ctx, error))
        return FALSE;
    if (has_direction)
        return parse_direction(ctx, "direction", "amount", error);
    if (has_anthropic)
        return parse_direction(ctx, "scroll_direction", "scroll_amount", error);
    if (!carrel_conf_get_int(ctx->obj, "dx", -CARREL_ACTION_MAX_SCROLL, CARREL_ACTION_MAX_SCROLL,
                             &dx, error) ||
        !carrel_conf_get_int(ctx->obj, "dy", -CARREL_ACTION_MAX_SCROLL, CARREL_ACTION_MAX_SCROLL,
                             &dy, error))
        return FALSE;
    if (dx == 0 && dy == 0)
        return carrel_action_set_invalid(error, "scroll needs a non-zero 'dx' or 'dy'");
    ctx->action->dx = (int)dx;
    ctx->action->dy = (int)dy;
    return TRUE;
}

/* The key member of carrel and Anthropic: text or combo (a sequence), or keys (together). */
static gboolean
parse_key(CarrelActionCtx *ctx, GError **error)
{
    static const char *const names[] = {"text", "combo", "keys"};
    g_autoptr(GPtrArray) combos = NULL;
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
        return carrel_action_set_invalid(error, "'combo' (or 'keys' or 'text') is required");
    if (carrel_conf_node_holds(node, G_TYPE_STRING)) {
        combos =
            carrel_keymap_parse_combos(json_node_get_string(node), CARREL_ACTION_MAX_COMBOS, error);
        if (!combos) {
            g_prefix_error(error, "'%s': ", name);
            return FALSE;
        }
    } else if (g_str_equal(name, "keys")) {
        GStrv keys = carrel_action_node_to_keys(node, name, FALSE, error);
        if (!keys)
            return FALSE;
        combos = g_ptr_array_new_with_free_func((GDestroyNotify)g_strfreev);
        g_ptr_array_add(combos, keys);
    } else {
        return carrel_action_set_invalid(error, "'%s' must be a string", name);
    }
    ctx->action->combos = g_steal_pointer(&combos);
    return TRUE;
}

/* key_down, key_up: one combination. */
static gboolean
parse_key_single(CarrelActionCtx *ctx, GError **error)
{
    if (!parse_key(ctx, error))
        return FALSE;
    if (ctx->action->combos->len != 1)
        return carrel_action_set_invalid(error, "%s takes one key combination, not a sequence",
                                         ctx->alias->name);
    return TRUE;
}

/* A duration in seconds (Anthropic, a number) or in milliseconds (carrel, an integer). */
static gboolean
get_duration(CarrelActionCtx *ctx, gboolean required, GError **error)
{
    JsonNode *seconds = carrel_conf_get_node(ctx->obj, "duration");
    gint64 ms = -1;

    if (seconds && carrel_conf_get_node(ctx->obj, "duration_ms"))
        return carrel_action_set_invalid(error,
                                         "give either 'duration' or 'duration_ms', not both");
    if (seconds) {
        double value = JSON_NODE_HOLDS_VALUE(seconds) ? json_node_get_double(seconds) : -1;
        if (!(carrel_conf_node_holds(seconds, G_TYPE_INT64) ||
              carrel_conf_node_holds(seconds, G_TYPE_DOUBLE)) ||
            value < 0 || value > CARREL_ACTION_MAX_DURATION_MS / 1000)
            return carrel_action_set_invalid(
                error, "'duration' must be a number of seconds between 0 and %d",
                CARREL_ACTION_MAX_DURATION_MS / 1000);
        ms = (gint64)lround(value * 1000);
    } else if (!carrel_conf_get_int(ctx->obj, "duration_ms", 0, CARREL_ACTION_MAX_DURATION_MS, &ms,
                                    error)) {
        return FALSE;
    }
    if (ms < 0 && required)
        return carrel_action_set_invalid(error, "'duration' (or 'duration_ms') is required");
    ctx->action->duration_ms = ms < 0 ? CARREL_ACTION_DEFAULT_WAIT_MS : (guint)ms;
    return TRUE;
}

static gboolean
parse_hold_key(CarrelActionCtx *ctx, GError **error)
{
    return parse_key_single(ctx, error) && get_duration(ctx, TRUE, error);
}

static gboolean
parse_wait(CarrelActionCtx *ctx, GError **error)
{
    return get_duration(ctx, FALSE, error);
}

static gboolean
parse_zoom(CarrelActionCtx *ctx, GError **error)
{
    JsonNode *node = carrel_conf_get_node(ctx->obj, "region");
    JsonArray *arr = node && JSON_NODE_HOLDS_ARRAY(node) ? json_node_get_array(node) : NULL;
    gint64 v[4];

    for (guint i = 0; i < 4; i++) {
        if (!arr || json_array_get_length(arr) != 4 ||
            !carrel_action_node_to_coordinate(json_array_get_element(arr, i), &v[i]))
            return carrel_action_set_invalid(
                error, "'region' must be [x0, y0, x1, y1] with integers between 0 and %d",
                CARREL_ACTION_MAX_COORDINATE);
    }
    if (v[0] >= v[2] || v[1] >= v[3])
        return carrel_action_set_invalid(error, "'region' must have x0 < x1 and y0 < y1");
    ctx->action->region[0] = (CarrelPoint){(guint)v[0], (guint)v[1]};
    ctx->action->region[1] = (CarrelPoint){(guint)v[2], (guint)v[3]};
    return TRUE;
}

static gboolean
parse_clipboard_set(CarrelActionCtx *ctx, GError **error)
{
    return carrel_conf_get_text(ctx->obj, "text", TRUE, CARREL_ACTION_MAX_TEXT, &ctx->action->text,
                                error);
}

/* A program name or a path, a URL: one line of text the guest helper passes on as one argument. */
static gboolean
get_line(CarrelActionCtx *ctx, const char *name, char **ret_value, GError **error)
{
    g_autofree char *value = NULL;

    if (!carrel_conf_get_text(ctx->obj, name, TRUE, CARREL_ACTION_MAX_TEXT, &value, error))
        return FALSE;
    if (!*value || !carrel_util_is_clean_text(value))
        return carrel_action_set_invalid(
            error, "'%s' must be non-empty text without control characters", name);
    *ret_value = g_steal_pointer(&value);
    return TRUE;
}

static gboolean
parse_launch(CarrelActionCtx *ctx, GError **error)
{
    JsonNode *args = carrel_conf_get_node(ctx->obj, "args");

    if (!get_line(ctx, "app", &ctx->action->app, error))
        return FALSE;
    return !args || carrel_action_get_strings(args, "args", CARREL_ACTION_MAX_ARGS,
                                              &ctx->action->args, error);
}

static gboolean
parse_open(CarrelActionCtx *ctx, GError **error)
{
    return get_line(ctx, "target", &ctx->action->target, error);
}

/* click_element: an accessibility tree id, clicked at its centre or acted on (AT-SPI). */
static gboolean
parse_click_element(CarrelActionCtx *ctx, GError **error)
{
    const char *mode = NULL;

    if (!carrel_conf_get_text(ctx->obj, "element", TRUE, CARREL_A11Y_MAX_ID_LEN,
                              &ctx->action->element, error) ||
        !carrel_a11y_check_id(ctx->action->element, error) ||
        !carrel_conf_get_string_ref(ctx->obj, "mode", FALSE, &mode, error))
        return FALSE;
    if (mode && !g_str_equal(mode, "click") && !g_str_equal(mode, "action"))
        return carrel_action_set_invalid(error, "'mode' must be 'click' or 'action'");
    ctx->action->element_action = mode && g_str_equal(mode, "action");
    return TRUE;
}

/* The members each action allows, besides the one naming the action. */
#define POINT_MEMBERS "coordinate", "x", "y"
static const char *const zoom_members[] = {"region", NULL};
static const char *const move_members[] = {POINT_MEMBERS, "modifiers", NULL};
static const char *const click_members[] = {POINT_MEMBERS, "button", "count",
                                            "modifiers",   "text",   NULL};
static const char *const click_alias_members[] = {POINT_MEMBERS, "modifiers", "text", NULL};
static const char *const press_members[] = {POINT_MEMBERS, "button", NULL};
static const char *const point_members[] = {POINT_MEMBERS, NULL};
static const char *const drag_members[] = {"path", "modifiers", NULL};
static const char *const left_click_drag_members[] = {"start_coordinate", "coordinate", NULL};
static const char *const scroll_members[] = {
    POINT_MEMBERS,   "dx",        "dy",   "direction", "amount", "scroll_direction",
    "scroll_amount", "modifiers", "text", NULL};
static const char *const key_members[] = {"text", "combo", "keys", NULL};
static const char *const hold_key_members[] = {"text",     "combo",       "keys",
                                               "duration", "duration_ms", NULL};
static const char *const wait_members[] = {"duration", "duration_ms", NULL};
static const char *const launch_members[] = {"app", "args", NULL};
static const char *const open_members[] = {"target", NULL};
static const char *const click_element_members[] = {"element", "mode", NULL};

/* carrel's names and Anthropic's, which share the "action" member. */
const CarrelActionAlias carrel_action_carrel_aliases[] = {
    {"screenshot", CARREL_ACTION_SCREENSHOT, NULL, carrel_action_no_members,
     CARREL_ACTION_NO_BUTTON},
    {"zoom", CARREL_ACTION_ZOOM, parse_zoom, zoom_members, CARREL_ACTION_NO_BUTTON},
    {"cursor_position", CARREL_ACTION_CURSOR_POSITION, NULL, carrel_action_no_members,
     CARREL_ACTION_NO_BUTTON},
    {"screen_size", CARREL_ACTION_SCREEN_SIZE, NULL, carrel_action_no_members,
     CARREL_ACTION_NO_BUTTON},
    {"mouse_move", CARREL_ACTION_MOUSE_MOVE, carrel_action_parse_move, move_members,
     CARREL_ACTION_NO_BUTTON},
    {"click", CARREL_ACTION_CLICK, carrel_action_parse_click, click_members, CARREL_BUTTON_LEFT, 1},
    {"left_click", CARREL_ACTION_CLICK, carrel_action_parse_click, click_alias_members,
     CARREL_BUTTON_LEFT, 1},
    {"right_click", CARREL_ACTION_CLICK, carrel_action_parse_click, click_alias_members,
     CARREL_BUTTON_RIGHT, 1},
    {"middle_click", CARREL_ACTION_CLICK, carrel_action_parse_click, click_alias_members,
     CARREL_BUTTON_MIDDLE, 1},
    {"double_click", CARREL_ACTION_CLICK, carrel_action_parse_click, click_alias_members,
     CARREL_BUTTON_LEFT, 2},
    {"triple_click", CARREL_ACTION_CLICK, carrel_action_parse_click, click_alias_members,
     CARREL_BUTTON_LEFT, 3},
    {"mouse_down", CARREL_ACTION_MOUSE_DOWN, carrel_action_parse_press, press_members,
     CARREL_ACTION_NO_BUTTON},
    {"mouse_up", CARREL_ACTION_MOUSE_UP, carrel_action_parse_press, press_members,
     CARREL_ACTION_NO_BUTTON},
    {"left_mouse_down", CARREL_ACTION_MOUSE_DOWN, carrel_action_parse_press, point_members,
     CARREL_ACTION_NO_BUTTON},
    {"left_mouse_up", CARREL_ACTION_MOUSE_UP, carrel_action_parse_press, point_members,
     CARREL_ACTION_NO_BUTTON},
    {"drag", CARREL_ACTION_DRAG, carrel_action_parse_path, drag_members, CARREL_ACTION_NO_BUTTON},
    {"left_click_drag", CARREL_ACTION_DRAG, parse_left_click_drag, left_click_drag_members,
     CARREL_ACTION_NO_BUTTON},
    {"scroll", CARREL_ACTION_SCROLL, parse_scroll, scroll_members, CARREL_ACTION_NO_BUTTON},
    {"type", CARREL_ACTION_TYPE, carrel_action_parse_type, carrel_action_type_members,
     CARREL_ACTION_NO_BUTTON},
    {"key", CARREL_ACTION_KEY, parse_key, key_members, CARREL_ACTION_NO_BUTTON},
    {"key_down", CARREL_ACTION_KEY_DOWN, parse_key_single, key_members, CARREL_ACTION_NO_BUTTON},
    {"key_up", CARREL_ACTION_KEY_UP, parse_key_single, key_members, CARREL_ACTION_NO_BUTTON},
    {"hold_key", CARREL_ACTION_HOLD_KEY, parse_hold_key, hold_key_members, CARREL_ACTION_NO_BUTTON},
    {"wait", CARREL_ACTION_WAIT, parse_wait, wait_members, CARREL_ACTION_NO_BUTTON},
    {"clipboard_get", CARREL_ACTION_CLIPBOARD_GET, NULL, carrel_action_no_members,
     CARREL_ACTION_NO_BUTTON},
    {"clipboard_set", CARREL_ACTION_CLIPBOARD_SET, parse_clipboard_set, carrel_action_text_members,
     CARREL_ACTION_NO_BUTTON},
    {"windows", CARREL_ACTION_WINDOWS, NULL, carrel_action_no_members, CARREL_ACTION_NO_BUTTON},
    {"launch", CARREL_ACTION_LAUNCH, parse_launch, launch_members, CARREL_ACTION_NO_BUTTON},
    {"open", CARREL_ACTION_OPEN, parse_open, open_members, CARREL_ACTION_NO_BUTTON},
    {"click_element", CARREL_ACTION_CLICK_ELEMENT, parse_click_element, click_element_members,
     CARREL_ACTION_NO_BUTTON},
    {"fail", CARREL_ACTION_FAIL, NULL, carrel_action_no_members, CARREL_ACTION_NO_BUTTON},
    {"done", CARREL_ACTION_DONE, NULL, carrel_action_no_members, CARREL_ACTION_NO_BUTTON},
    {NULL, CARREL_ACTION_LAST, NULL, carrel_action_no_members, CARREL_ACTION_NO_BUTTON},
};
