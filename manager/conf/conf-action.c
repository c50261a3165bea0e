/*
 * Computer actions: the enums, and one parser per format (carrel's own names with Anthropic's
 * computer tool, OpenAI's computer-use actions, OSWorld's computer_13), each a table of action
 * names with the members they allow, all producing the same CarrelAction. Untrusted input:
 * every member is checked, every count and size bounded.
 */
#include <math.h>
#include <string.h>

#include "conf/conf.h"
#include "conf/conf-priv.h"

static const char *const kind_names[CARREL_ACTION_LAST] = {
    [CARREL_ACTION_SCREENSHOT] = "screenshot",
    [CARREL_ACTION_ZOOM] = "zoom",
    [CARREL_ACTION_CURSOR_POSITION] = "cursor_position",
    [CARREL_ACTION_SCREEN_SIZE] = "screen_size",
    [CARREL_ACTION_MOUSE_MOVE] = "mouse_move",
    [CARREL_ACTION_CLICK] = "click",
    [CARREL_ACTION_MOUSE_DOWN] = "mouse_down",
    [CARREL_ACTION_MOUSE_UP] = "mouse_up",
    [CARREL_ACTION_DRAG] = "drag",
    [CARREL_ACTION_SCROLL] = "scroll",
    [CARREL_ACTION_TYPE] = "type",
    [CARREL_ACTION_KEY] = "key",
    [CARREL_ACTION_KEY_DOWN] = "key_down",
    [CARREL_ACTION_KEY_UP] = "key_up",
    [CARREL_ACTION_HOLD_KEY] = "hold_key",
    [CARREL_ACTION_WAIT] = "wait",
    [CARREL_ACTION_CLIPBOARD_GET] = "clipboard_get",
    [CARREL_ACTION_CLIPBOARD_SET] = "clipboard_set",
    [CARREL_ACTION_WINDOWS] = "windows",
    [CARREL_ACTION_LAUNCH] = "launch",
    [CARREL_ACTION_OPEN] = "open",
    [CARREL_ACTION_FAIL] = "fail",
    [CARREL_ACTION_DONE] = "done",
};

static const char *const button_names[CARREL_BUTTON_LAST] = {
    [CARREL_BUTTON_LEFT] = "left",       [CARREL_BUTTON_MIDDLE] = "middle",
    [CARREL_BUTTON_RIGHT] = "right",     [CARREL_BUTTON_BACK] = "back",
    [CARREL_BUTTON_FORWARD] = "forward",
};

static const char *const observe_names[CARREL_OBSERVE_LAST] = {
    [CARREL_OBSERVE_FINAL] = "final",
    [CARREL_OBSERVE_EACH] = "each",
    [CARREL_OBSERVE_NONE] = "none",
};

const char *
carrel_action_kind_to_string(CarrelActionKind kind)
{
    return carrel_util_enum_to_string(kind_names, CARREL_ACTION_LAST, (int)kind);
}

CarrelActionKind
carrel_action_kind_from_string(const char *name)
{
    return (CarrelActionKind)carrel_util_enum_from_string(kind_names, CARREL_ACTION_LAST, name);
}

const char *
carrel_button_to_string(CarrelButton button)
{
    return carrel_util_enum_to_string(button_names, CARREL_BUTTON_LAST, (int)button);
}

CarrelButton
carrel_button_from_string(const char *name)
{
    return (CarrelButton)carrel_util_enum_from_string(button_names, CARREL_BUTTON_LAST, name);
}

const char *
carrel_observe_to_string(CarrelObserve observe)
{
    return carrel_util_enum_to_string(observe_names, CARREL_OBSERVE_LAST, (int)observe);
}

CarrelObserve
carrel_observe_from_string(const char *name)
{
    return (CarrelObserve)carrel_util_enum_from_string(observe_names, CARREL_OBSERVE_LAST, name);
}

gboolean
carrel_action_kind_sends_input(CarrelActionKind kind)
{
    switch (kind) {
    case CARREL_ACTION_MOUSE_MOVE:
    case CARREL_ACTION_CLICK:
    case CARREL_ACTION_MOUSE_DOWN:
    case CARREL_ACTION_MOUSE_UP:
    case CARREL_ACTION_DRAG:
    case CARREL_ACTION_SCROLL:
    case CARREL_ACTION_TYPE:
    case CARREL_ACTION_KEY:
    case CARREL_ACTION_KEY_DOWN:
    case CARREL_ACTION_KEY_UP:
    case CARREL_ACTION_HOLD_KEY:
    case CARREL_ACTION_WAIT:
        return TRUE;
    case CARREL_ACTION_SCREENSHOT:
    case CARREL_ACTION_ZOOM:
    case CARREL_ACTION_CURSOR_POSITION:
    case CARREL_ACTION_SCREEN_SIZE:
    case CARREL_ACTION_CLIPBOARD_GET:
    case CARREL_ACTION_CLIPBOARD_SET:
    case CARREL_ACTION_WINDOWS:
    case CARREL_ACTION_LAUNCH:
    case CARREL_ACTION_OPEN:
    case CARREL_ACTION_FAIL:
    case CARREL_ACTION_DONE:
    case CARREL_ACTION_LAST:
        break;
    }
    return FALSE;
}

void
carrel_action_free(CarrelAction *action)
{
    if (!action)
        return;
    g_strfreev(action->modifiers);
    g_clear_pointer(&action->path, g_array_unref);
    g_clear_pointer(&action->combos, g_ptr_array_unref);
    g_free(action->text);
    g_free(action->app);
    g_strfreev(action->args);
    g_free(action->target);
    g_free(action);
}

/* The action formats; Anthropic's names and carrel's share the "action" member. */
typedef enum {
    FORMAT_CARREL,
    FORMAT_OPENAI,
    FORMAT_OSWORLD,
} Format;

typedef struct _ActionAlias ActionAlias;

/* What a member parser works on: the action's members (OSWorld: its parameters). */
typedef struct {
    JsonObject *obj;
    Format format;
    const ActionAlias *alias;
    CarrelAction *action;
} Ctx;

typedef gboolean (*ParseFunc)(Ctx *ctx, GError **error);

/* One action name of a format: the kind it means, its parser and its allowed members. */
struct _ActionAlias {
    const char *name;
    CarrelActionKind kind;
    ParseFunc parse;            /* NULL: no members */
    const char *const *members; /* allowed besides the one naming the action */
    CarrelButton button;        /* defaults of the click and press aliases */
    guint count;
};

static gboolean set_invalid(GError **error, const char *format, ...) G_GNUC_PRINTF(2, 3);

static gboolean
set_invalid(GError **error, const char *format, ...)
{
    va_list args;
    GError *local;

    va_start(args, format);
    local = g_error_new_valist(CARREL_ERROR, CARREL_ERROR_INVALID_ARG, format, args);
    va_end(args);
    g_propagate_error(error, local);
    return FALSE;
}

static gboolean
node_to_coordinate(JsonNode *node, gint64 *ret_value)
{
    if (!carrel_conf_node_holds(node, G_TYPE_INT64) || json_node_get_int(node) < 0 ||
        json_node_get_int(node) > CARREL_ACTION_MAX_COORDINATE)
        return FALSE;
    *ret_value = json_node_get_int(node);
    return TRUE;
}

/* [x, y] (Anthropic's coordinate, carrel's path points). */
static gboolean
pair_to_point(JsonNode *node, const char *name, CarrelPoint *ret_point, GError **error)
{
    JsonArray *arr = JSON_NODE_HOLDS_ARRAY(node) ? json_node_get_array(node) : NULL;
    gint64 x, y;

    if (!arr || json_array_get_length(arr) != 2 ||
        !node_to_coordinate(json_array_get_element(arr, 0), &x) ||
        !node_to_coordinate(json_array_get_element(arr, 1), &y))
        return set_invalid(error, "'%s' must be [x, y] with integers between 0 and %d", name,
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

    if (!x_node || !y_node || json_object_get_size(obj) != 2 || !node_to_coordinate(x_node, &x) ||
        !node_to_coordinate(y_node, &y))
        return set_invalid(error,
                           "'%s' must be {\"x\": X, \"y\": Y} with integers between 0 and %d", name,
                           CARREL_ACTION_MAX_COORDINATE);
    ret_point->x = (guint)x;
    ret_point->y = (guint)y;
    return TRUE;
}

/* The position of the action: "coordinate": [x, y] or "x" and "y"; FALSE+no error if absent. */
static gboolean
find_point(Ctx *ctx, gboolean *ret_found, CarrelPoint *ret_point, GError **error)
{
    JsonNode *coordinate = carrel_conf_get_node(ctx->obj, "coordinate");
    JsonNode *x = carrel_conf_get_node(ctx->obj, "x");
    JsonNode *y = carrel_conf_get_node(ctx->obj, "y");
    gint64 vx, vy;

    *ret_found = FALSE;
    if (coordinate && (x || y))
        return set_invalid(error, "give either 'coordinate' or 'x' and 'y', not both");
    if (coordinate) {
        *ret_found = TRUE;
        return pair_to_point(coordinate, "coordinate", ret_point, error);
    }
    if (!x && !y)
        return TRUE;
    if (!x || !y)
        return set_invalid(error, "'x' and 'y' must be given together");
    if (!node_to_coordinate(x, &vx) || !node_to_coordinate(y, &vy))
        return set_invalid(error, "'x' and 'y' must be integers between 0 and %d",
                           CARREL_ACTION_MAX_COORDINATE);
    ret_point->x = (guint)vx;
    ret_point->y = (guint)vy;
    *ret_found = TRUE;
    return TRUE;
}

static gboolean
get_point(Ctx *ctx, gboolean required, GError **error)
{
    gboolean found;
    CarrelPoint point = {0, 0};

    if (!find_point(ctx, &found, &point, error))
        return FALSE;
    if (!found && required)
        return set_invalid(error, ctx->format == FORMAT_CARREL
                                      ? "'coordinate' (or 'x' and 'y') is required"
                                      : "'x' and 'y' are required");
    ctx->action->has_point = found;
    ctx->action->point = point;
    return TRUE;
}

/* An array of 1..max strings (each valid UTF-8 within CARREL_ACTION_MAX_TEXT bytes). */
static gboolean
get_strings(JsonNode *node, const char *name, guint max, GStrv *ret_strings, GError **error)
{
    JsonArray *arr = JSON_NODE_HOLDS_ARRAY(node) ? json_node_get_array(node) : NULL;
    g_autoptr(GStrvBuilder) b = g_strv_builder_new();

    if (!arr || json_array_get_length(arr) > max)
        return set_invalid(error, "'%s' must be an array of at most %u strings", name, max);
    for (guint i = 0; i < json_array_get_length(arr); i++) {
        JsonNode *item = json_array_get_element(arr, i);
        if (!carrel_conf_node_holds(item, G_TYPE_STRING) ||
            strlen(json_node_get_string(item)) > CARREL_ACTION_MAX_TEXT ||
            !g_utf8_validate(json_node_get_string(item), -1, NULL))
            return set_invalid(error, "'%s' must be an array of at most %u strings", name, max);
        g_strv_builder_add(b, json_node_get_string(item));
    }
    *ret_strings = g_strv_builder_end(b);
    return TRUE;
}

/* Keys given as one name or combination string, or as an array of names pressed together. */
static GStrv
node_to_keys(JsonNode *node, const char *name, gboolean caseless, GError **error)
{
    g_auto(GStrv) names = NULL;
    GStrv keys;

    if (carrel_conf_node_holds(node, G_TYPE_STRING))
        keys = caseless ? carrel_keymap_resolve_keys(
                              (const char *const[]){json_node_get_string(node), NULL}, TRUE, error)
                        : carrel_keymap_parse_combo(json_node_get_string(node), error);
    else if (!get_strings(node, name, CARREL_KEYMAP_MAX_COMBO_KEYS, &names, error))
        return NULL;
    else
        keys = carrel_keymap_resolve_keys((const char *const *)names, caseless, error);
    if (!keys)
        g_prefix_error(error, "'%s': ", name);
    return keys;
}

/* The keys held by a pointer action: carrel's "modifiers", Anthropic's "text", OpenAI's "keys". */
static gboolean
get_modifiers(Ctx *ctx, GError **error)
{
    static const char *const names[] = {"modifiers", "text", "keys"};
    JsonNode *node = NULL;
    const char *name = NULL;

    for (gsize i = 0; i < G_N_ELEMENTS(names); i++) {
        JsonNode *n = carrel_conf_get_node(ctx->obj, names[i]);
        if (n && node)
            return set_invalid(error, "give either '%s' or '%s', not both", name, names[i]);
        if (n) {
            node = n;
            name = names[i];
        }
    }
    if (!node)
        return TRUE;
    ctx->action->modifiers = node_to_keys(node, name, ctx->format == FORMAT_OPENAI, error);
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

static gboolean
get_button(Ctx *ctx, GError **error)
{
    const ButtonName *table = ctx->format == FORMAT_OPENAI    ? openai_buttons
                              : ctx->format == FORMAT_OSWORLD ? osworld_buttons
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
    return set_invalid(error, "'button' must be one of %s", known->str);
}

static gboolean
parse_move(Ctx *ctx, GError **error)
{
    return get_point(ctx, TRUE, error) && get_modifiers(ctx, error);
}

static gboolean
parse_click(Ctx *ctx, GError **error)
{
    gint64 count = ctx->action->count;

    if (!get_point(ctx, FALSE, error) || !get_button(ctx, error) || !get_modifiers(ctx, error) ||
        !carrel_conf_get_int(ctx->obj, ctx->format == FORMAT_OSWORLD ? "num_clicks" : "count", 1,
                             CARREL_ACTION_MAX_CLICKS, &count, error))
        return FALSE;
    ctx->action->count = (guint)count;
    return TRUE;
}

/* mouse_down, mouse_up: where (optional) and which button. */
static gboolean
parse_press(Ctx *ctx, GError **error)
{
    return get_point(ctx, FALSE, error) && get_button(ctx, error);
}

/* A drag path of 2..CARREL_ACTION_MAX_PATH points: [x, y] or {x, y} (carrel), {x, y} (OpenAI). */
static gboolean
parse_path(Ctx *ctx, GError **error)
{
    JsonNode *node = carrel_conf_get_node(ctx->obj, "path");
    JsonArray *arr = node && JSON_NODE_HOLDS_ARRAY(node) ? json_node_get_array(node) : NULL;
    g_autoptr(GArray) path = g_array_new(FALSE, TRUE, sizeof(CarrelPoint));

    if (!arr || json_array_get_length(arr) < 2 ||
        json_array_get_length(arr) > CARREL_ACTION_MAX_PATH)
        return set_invalid(error, "'path' must be an array of 2 to %d points",
                           CARREL_ACTION_MAX_PATH);
    for (guint i = 0; i < json_array_get_length(arr); i++) {
        JsonNode *item = json_array_get_element(arr, i);
        CarrelPoint point;
        g_autofree char *name = g_strdup_printf("path[%u]", i);

        if (ctx->format == FORMAT_CARREL && JSON_NODE_HOLDS_ARRAY(item)) {
            if (!pair_to_point(item, name, &point, error))
                return FALSE;
        } else if (!object_to_point(item, name, &point, error)) {
            return FALSE;
        }
        g_array_append_val(path, point);
    }
    ctx->action->path = g_steal_pointer(&path);
    return get_modifiers(ctx, error);
}

/* Anthropic's left_click_drag: from start_coordinate to coordinate. */
static gboolean
parse_left_click_drag(Ctx *ctx, GError **error)
{
    JsonNode *start = carrel_conf_get_node(ctx->obj, "start_coordinate");
    JsonNode *end = carrel_conf_get_node(ctx->obj, "coordinate");
    CarrelPoint points[2];

    if (!start || !end)
        return set_invalid(error, "'start_coordinate' and 'coordinate' are required");
    if (!pair_to_point(start, "start_coordinate", &points[0], error) ||
        !pair_to_point(end, "coordinate", &points[1], error))
        return FALSE;
    ctx->action->path = g_array_sized_new(FALSE, TRUE, sizeof(CarrelPoint), 2);
    g_array_append_vals(ctx->action->path, points, 2);
    return TRUE;
}

static const char *const directions[] = {"up", "down", "left", "right", NULL};

/* direction + amount (carrel) or scroll_direction + scroll_amount (Anthropic) into dx/dy. */
static gboolean
parse_direction(Ctx *ctx, const char *direction_name, const char *amount_name, GError **error)
{
    g_autofree char *direction = NULL;
    gint64 amount = 0;
    int sign;

    if (!carrel_conf_get_string(ctx->obj, direction_name, TRUE, &direction, error) ||
        !carrel_conf_get_int(ctx->obj, amount_name, 1, CARREL_ACTION_MAX_SCROLL, &amount, error))
        return FALSE;
    if (!g_strv_contains(directions, direction))
        return set_invalid(error, "'%s' must be up, down, left or right", direction_name);
    if (amount == 0)
        return set_invalid(error, "'%s' is required with '%s'", amount_name, direction_name);
    sign = (g_str_equal(direction, "up") || g_str_equal(direction, "left")) ? -1 : 1;
    if (g_str_equal(direction, "up") || g_str_equal(direction, "down"))
        ctx->action->dy = sign * (int)amount;
    else
        ctx->action->dx = sign * (int)amount;
    return TRUE;
}

static gboolean
parse_scroll(Ctx *ctx, GError **error)
{
    gboolean has_delta =
        carrel_conf_get_node(ctx->obj, "dx") || carrel_conf_get_node(ctx->obj, "dy");
    gboolean has_direction =
        carrel_conf_get_node(ctx->obj, "direction") || carrel_conf_get_node(ctx->obj, "amount");
    gboolean has_anthropic = carrel_conf_get_node(ctx->obj, "scroll_direction") ||
                             carrel_conf_get_node(ctx->obj, "scroll_amount");
    gint64 dx = 0, dy = 0;

    if (has_delta + has_direction + has_anthropic != 1)
        return set_invalid(error, "scroll takes one of 'dx'/'dy', 'direction' with 'amount', or "
                                  "'scroll_direction' with 'scroll_amount'");
    if (!get_point(ctx, FALSE, error) || !get_modifiers(ctx, error))
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
        return set_invalid(error, "scroll needs a non-zero 'dx' or 'dy'");
    ctx->action->dx = (int)dx;
    ctx->action->dy = (int)dy;
    return TRUE;
}

static gboolean
parse_type(Ctx *ctx, GError **error)
{
    if (!carrel_conf_get_text(ctx->obj, "text", TRUE, CARREL_ACTION_MAX_TEXT, &ctx->action->text,
                              error))
        return FALSE;
    if (!carrel_keymap_check_text(ctx->action->text, error)) {
        g_prefix_error(error, "'text': ");
        return FALSE;
    }
    return TRUE;
}

/* The key member of carrel and Anthropic: text or combo (a sequence), or keys (together). */
static gboolean
parse_key(Ctx *ctx, GError **error)
{
    static const char *const names[] = {"text", "combo", "keys"};
    g_autoptr(GPtrArray) combos = NULL;
    JsonNode *node = NULL;
    const char *name = NULL;

    for (gsize i = 0; i < G_N_ELEMENTS(names); i++) {
        JsonNode *n = carrel_conf_get_node(ctx->obj, names[i]);
        if (n && node)
            return set_invalid(error, "give either '%s' or '%s', not both", name, names[i]);
        if (n) {
            node = n;
            name = names[i];
        }
    }
    if (!node)
        return set_invalid(error, "'combo' (or 'keys' or 'text') is required");
    if (carrel_conf_node_holds(node, G_TYPE_STRING)) {
        combos =
            carrel_keymap_parse_combos(json_node_get_string(node), CARREL_ACTION_MAX_COMBOS, error);
        if (!combos) {
            g_prefix_error(error, "'%s': ", name);
            return FALSE;
        }
    } else if (g_str_equal(name, "keys")) {
        GStrv keys = node_to_keys(node, name, FALSE, error);
        if (!keys)
            return FALSE;
        combos = g_ptr_array_new_with_free_func((GDestroyNotify)g_strfreev);
        g_ptr_array_add(combos, keys);
    } else {
        return set_invalid(error, "'%s' must be a string", name);
    }
    ctx->action->combos = g_steal_pointer(&combos);
    return TRUE;
}

/* key_down, key_up: one combination. */
static gboolean
parse_key_single(Ctx *ctx, GError **error)
{
    if (!parse_key(ctx, error))
        return FALSE;
    if (ctx->action->combos->len != 1)
        return set_invalid(error, "%s takes one key combination, not a sequence", ctx->alias->name);
    return TRUE;
}

/* A duration in seconds (Anthropic, a number) or in milliseconds (carrel, an integer). */
static gboolean
get_duration(Ctx *ctx, gboolean required, GError **error)
{
    JsonNode *seconds = carrel_conf_get_node(ctx->obj, "duration");
    gint64 ms = -1;

    if (seconds && carrel_conf_get_node(ctx->obj, "duration_ms"))
        return set_invalid(error, "give either 'duration' or 'duration_ms', not both");
    if (seconds) {
        double value = JSON_NODE_HOLDS_VALUE(seconds) ? json_node_get_double(seconds) : -1;
        if (!(carrel_conf_node_holds(seconds, G_TYPE_INT64) ||
              carrel_conf_node_holds(seconds, G_TYPE_DOUBLE)) ||
            value < 0 || value > CARREL_ACTION_MAX_DURATION_MS / 1000)
            return set_invalid(error, "'duration' must be a number of seconds between 0 and %d",
                               CARREL_ACTION_MAX_DURATION_MS / 1000);
        ms = (gint64)lround(value * 1000);
    } else if (!carrel_conf_get_int(ctx->obj, "duration_ms", 0, CARREL_ACTION_MAX_DURATION_MS, &ms,
                                    error)) {
        return FALSE;
    }
    if (ms < 0 && required)
        return set_invalid(error, "'duration' (or 'duration_ms') is required");
    ctx->action->duration_ms = ms < 0 ? CARREL_ACTION_DEFAULT_WAIT_MS : (guint)ms;
    return TRUE;
}

static gboolean
parse_hold_key(Ctx *ctx, GError **error)
{
    return parse_key_single(ctx, error) && get_duration(ctx, TRUE, error);
}

static gboolean
parse_wait(Ctx *ctx, GError **error)
{
    return get_duration(ctx, FALSE, error);
}

static gboolean
parse_zoom(Ctx *ctx, GError **error)
{
    JsonNode *node = carrel_conf_get_node(ctx->obj, "region");
    JsonArray *arr = node && JSON_NODE_HOLDS_ARRAY(node) ? json_node_get_array(node) : NULL;
    gint64 v[4];

    for (guint i = 0; i < 4; i++) {
        if (!arr || json_array_get_length(arr) != 4 ||
            !node_to_coordinate(json_array_get_element(arr, i), &v[i]))
            return set_invalid(error,
                               "'region' must be [x0, y0, x1, y1] with integers between 0 and %d",
                               CARREL_ACTION_MAX_COORDINATE);
    }
    if (v[0] >= v[2] || v[1] >= v[3])
        return set_invalid(error, "'region' must have x0 < x1 and y0 < y1");
    ctx->action->region[0] = (CarrelPoint){(guint)v[0], (guint)v[1]};
    ctx->action->region[1] = (CarrelPoint){(guint)v[2], (guint)v[3]};
    return TRUE;
}

static gboolean
parse_clipboard_set(Ctx *ctx, GError **error)
{
    return carrel_conf_get_text(ctx->obj, "text", TRUE, CARREL_ACTION_MAX_TEXT, &ctx->action->text,
                                error);
}

/* A program name or a path, a URL: one line of text the guest helper passes on as one argument. */
static gboolean
get_line(Ctx *ctx, const char *name, char **ret_value, GError **error)
{
    g_autofree char *value = NULL;

    if (!carrel_conf_get_text(ctx->obj, name, TRUE, CARREL_ACTION_MAX_TEXT, &value, error))
        return FALSE;
    if (!*value || !carrel_util_is_clean_text(value))
        return set_invalid(error, "'%s' must be non-empty text without control characters", name);
    *ret_value = g_steal_pointer(&value);
    return TRUE;
}

static gboolean
parse_launch(Ctx *ctx, GError **error)
{
    JsonNode *args = carrel_conf_get_node(ctx->obj, "args");

    if (!get_line(ctx, "app", &ctx->action->app, error))
        return FALSE;
    return !args || get_strings(args, "args", CARREL_ACTION_MAX_ARGS, &ctx->action->args, error);
}

static gboolean
parse_open(Ctx *ctx, GError **error)
{
    return get_line(ctx, "target", &ctx->action->target, error);
}

/* The members each action allows, besides the one naming the action. */
#define POINT_MEMBERS "coordinate", "x", "y"
static const char *const no_members[] = {NULL};
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
static const char *const text_members[] = {"text", NULL};
static const char *const key_members[] = {"text", "combo", "keys", NULL};
static const char *const hold_key_members[] = {"text",     "combo",       "keys",
                                               "duration", "duration_ms", NULL};
static const char *const wait_members[] = {"duration", "duration_ms", NULL};
static const char *const launch_members[] = {"app", "args", NULL};
static const char *const open_members[] = {"target", NULL};

#define NO_BUTTON CARREL_BUTTON_LEFT, 0

/* carrel's names and Anthropic's, which share the "action" member. */
static const ActionAlias carrel_actions[] = {
    {"screenshot", CARREL_ACTION_SCREENSHOT, NULL, no_members, NO_BUTTON},
    {"zoom", CARREL_ACTION_ZOOM, parse_zoom, zoom_members, NO_BUTTON},
    {"cursor_position", CARREL_ACTION_CURSOR_POSITION, NULL, no_members, NO_BUTTON},
    {"screen_size", CARREL_ACTION_SCREEN_SIZE, NULL, no_members, NO_BUTTON},
    {"mouse_move", CARREL_ACTION_MOUSE_MOVE, parse_move, move_members, NO_BUTTON},
    {"click", CARREL_ACTION_CLICK, parse_click, click_members, CARREL_BUTTON_LEFT, 1},
    {"left_click", CARREL_ACTION_CLICK, parse_click, click_alias_members, CARREL_BUTTON_LEFT, 1},
    {"right_click", CARREL_ACTION_CLICK, parse_click, click_alias_members, CARREL_BUTTON_RIGHT, 1},
    {"middle_click", CARREL_ACTION_CLICK, parse_click, click_alias_members, CARREL_BUTTON_MIDDLE,
     1},
    {"double_click", CARREL_ACTION_CLICK, parse_click, click_alias_members, CARREL_BUTTON_LEFT, 2},
    {"triple_click", CARREL_ACTION_CLICK, parse_click, click_alias_members, CARREL_BUTTON_LEFT, 3},
    {"mouse_down", CARREL_ACTION_MOUSE_DOWN, parse_press, press_members, NO_BUTTON},
    {"mouse_up", CARREL_ACTION_MOUSE_UP, parse_press, press_members, NO_BUTTON},
    {"left_mouse_down", CARREL_ACTION_MOUSE_DOWN, parse_press, point_members, NO_BUTTON},
    {"left_mouse_up", CARREL_ACTION_MOUSE_UP, parse_press, point_members, NO_BUTTON},
    {"drag", CARREL_ACTION_DRAG, parse_path, drag_members, NO_BUTTON},
    {"left_click_drag", CARREL_ACTION_DRAG, parse_left_click_drag, left_click_drag_members,
     NO_BUTTON},
    {"scroll", CARREL_ACTION_SCROLL, parse_scroll, scroll_members, NO_BUTTON},
    {"type", CARREL_ACTION_TYPE, parse_type, text_members, NO_BUTTON},
    {"key", CARREL_ACTION_KEY, parse_key, key_members, NO_BUTTON},
    {"key_down", CARREL_ACTION_KEY_DOWN, parse_key_single, key_members, NO_BUTTON},
    {"key_up", CARREL_ACTION_KEY_UP, parse_key_single, key_members, NO_BUTTON},
    {"hold_key", CARREL_ACTION_HOLD_KEY, parse_hold_key, hold_key_members, NO_BUTTON},
    {"wait", CARREL_ACTION_WAIT, parse_wait, wait_members, NO_BUTTON},
    {"clipboard_get", CARREL_ACTION_CLIPBOARD_GET, NULL, no_members, NO_BUTTON},
    {"clipboard_set", CARREL_ACTION_CLIPBOARD_SET, parse_clipboard_set, text_members, NO_BUTTON},
    {"windows", CARREL_ACTION_WINDOWS, NULL, no_members, NO_BUTTON},
    {"launch", CARREL_ACTION_LAUNCH, parse_launch, launch_members, NO_BUTTON},
    {"open", CARREL_ACTION_OPEN, parse_open, open_members, NO_BUTTON},
    {"fail", CARREL_ACTION_FAIL, NULL, no_members, NO_BUTTON},
    {"done", CARREL_ACTION_DONE, NULL, no_members, NO_BUTTON},
    {NULL, CARREL_ACTION_LAST, NULL, no_members, NO_BUTTON},
};

/* OpenAI click, double_click: x and y are required. */
static gboolean
parse_openai_click(Ctx *ctx, GError **error)
{
    return get_point(ctx, TRUE, error) && get_button(ctx, error) && get_modifiers(ctx, error);
}

/* OpenAI's keys: names pressed together, letters in any case. */
static gboolean
parse_keypress(Ctx *ctx, GError **error)
{
    JsonNode *node = carrel_conf_get_node(ctx->obj, "keys");
    GStrv keys;

    if (!node)
        return set_invalid(error, "'keys' is required");
    if (!(keys = node_to_keys(node, "keys", TRUE, error)))
        return FALSE;
    ctx->action->combos = g_ptr_array_new_with_free_func((GDestroyNotify)g_strfreev);
    g_ptr_array_add(ctx->action->combos, keys);
    return TRUE;
}

/* Pixels to wheel notches: at least one for any movement, at most CARREL_ACTION_MAX_SCROLL. */
static gboolean
pixels_to_notches(JsonObject *obj, const char *name, int *ret_notches, GError **error)
{
    const gint64 max = (gint64)CARREL_ACTION_MAX_SCROLL * CARREL_ACTION_SCROLL_PIXELS_PER_NOTCH;
    gint64 pixels = 0, notches;

    if (!carrel_conf_get_int(obj, name, -max, max, &pixels, error))
        return FALSE;
    notches = (ABS(pixels) + CARREL_ACTION_SCROLL_PIXELS_PER_NOTCH / 2) /
              CARREL_ACTION_SCROLL_PIXELS_PER_NOTCH;
    if (pixels != 0 && notches == 0)
        notches = 1;
    *ret_notches = (int)(pixels < 0 ? -notches : notches);
    return TRUE;
}

static gboolean
parse_openai_scroll(Ctx *ctx, GError **error)
{
    int dx = 0, dy = 0;

    if (!get_point(ctx, TRUE, error) || !get_modifiers(ctx, error) ||
        !pixels_to_notches(ctx->obj, "scroll_x", &dx, error) ||
        !pixels_to_notches(ctx->obj, "scroll_y", &dy, error))
        return FALSE;
    if (dx == 0 && dy == 0)
        return set_invalid(error, "scroll needs a non-zero 'scroll_x' or 'scroll_y'");
    ctx->action->dx = dx;
    ctx->action->dy = dy;
    return TRUE;
}

static gboolean
parse_openai_wait(Ctx *ctx, GError **error)
{
    gint64 ms = CARREL_ACTION_DEFAULT_WAIT_MS;

    if (!carrel_conf_get_int(ctx->obj, "ms", 0, CARREL_ACTION_MAX_DURATION_MS, &ms, error))
        return FALSE;
    ctx->action->duration_ms = (guint)ms;
    return TRUE;
}

static const char *const openai_click_members[] = {"x", "y", "button", "keys", NULL};
static const char *const openai_point_members[] = {"x", "y", "keys", NULL};
static const char *const openai_drag_members[] = {"path", "keys", NULL};
static const char *const openai_keys_members[] = {"keys", NULL};
static const char *const openai_scroll_members[] = {"x", "y", "scroll_x", "scroll_y", "keys", NULL};
static const char *const openai_wait_members[] = {"ms", NULL};

static const ActionAlias openai_actions[] = {
    {"click", CARREL_ACTION_CLICK, parse_openai_click, openai_click_members, CARREL_BUTTON_LEFT, 1},
    {"double_click", CARREL_ACTION_CLICK, parse_openai_click, openai_point_members,
     CARREL_BUTTON_LEFT, 2},
    {"drag", CARREL_ACTION_DRAG, parse_path, openai_drag_members, NO_BUTTON},
    {"keypress", CARREL_ACTION_KEY, parse_keypress, openai_keys_members, NO_BUTTON},
    {"move", CARREL_ACTION_MOUSE_MOVE, parse_move, openai_point_members, NO_BUTTON},
    {"screenshot", CARREL_ACTION_SCREENSHOT, NULL, no_members, NO_BUTTON},
    {"scroll", CARREL_ACTION_SCROLL, parse_openai_scroll, openai_scroll_members, NO_BUTTON},
    {"type", CARREL_ACTION_TYPE, parse_type, text_members, NO_BUTTON},
    {"wait", CARREL_ACTION_WAIT, parse_openai_wait, openai_wait_members, NO_BUTTON},
    {NULL, CARREL_ACTION_LAST, NULL, no_members, NO_BUTTON},
};

/* OSWorld's DRAG_TO: from wherever the pointer is to x, y. */
static gboolean
parse_drag_to(Ctx *ctx, GError **error)
{
    if (!get_point(ctx, TRUE, error))
        return FALSE;
    ctx->action->path = g_array_sized_new(FALSE, TRUE, sizeof(CarrelPoint), 1);
    g_array_append_val(ctx->action->path, ctx->action->point);
    ctx->action->path_from_pointer = TRUE;
    ctx->action->has_point = FALSE;
    ctx->action->point = (CarrelPoint){0, 0};
    return TRUE;
}

/* pyautogui's scroll: notches, dy > 0 scrolls up (X button 4), dx > 0 right. */
static gboolean
parse_osworld_scroll(Ctx *ctx, GError **error)
{
    gint64 dx = 0, dy = 0;

    if (!carrel_conf_get_int(ctx->obj, "dx", -CARREL_ACTION_MAX_SCROLL, CARREL_ACTION_MAX_SCROLL,
                             &dx, error) ||
        !carrel_conf_get_int(ctx->obj, "dy", -CARREL_ACTION_MAX_SCROLL, CARREL_ACTION_MAX_SCROLL,
                             &dy, error))
        return FALSE;
    if (dx == 0 && dy == 0)
        return set_invalid(error, "SCROLL needs a non-zero 'dx' or 'dy'");
    ctx->action->dx = (int)dx;
    ctx->action->dy = (int)-dy;
    return TRUE;
}

/* The keys of PRESS, KEY_DOWN, KEY_UP ("key", one name) and HOTKEY ("keys", names). */
static gboolean
add_osworld_keys(Ctx *ctx, const char *name, GError **error)
{
    JsonNode *node = carrel_conf_get_node(ctx->obj, name);
    gboolean single = g_str_equal(name, "key");
    GStrv keys;

    if (!node)
        return set_invalid(error, "'%s' is required", name);
    if (single && !carrel_conf_node_holds(node, G_TYPE_STRING))
        return set_invalid(error, "'key' must be a string");
    if (!single && !JSON_NODE_HOLDS_ARRAY(node))
        return set_invalid(error, "'keys' must be an array of key names");
    if (single)
        keys = carrel_keymap_resolve_keys((const char *const[]){json_node_get_string(node), NULL},
                                          FALSE, error);
    else
        keys = node_to_keys(node, name, FALSE, error);
    if (!keys)
        return FALSE;
    ctx->action->combos = g_ptr_array_new_with_free_func((GDestroyNotify)g_strfreev);
    g_ptr_array_add(ctx->action->combos, keys);
    return TRUE;
}

static gboolean
parse_osworld_key(Ctx *ctx, GError **error)
{
    return add_osworld_keys(ctx, "key", error);
}

static gboolean
parse_osworld_hotkey(Ctx *ctx, GError **error)
{
    return add_osworld_keys(ctx, "keys", error);
}

static gboolean
parse_osworld_wait(Ctx *ctx, GError **error)
{
    ctx->action->duration_ms = CARREL_ACTION_OSWORLD_WAIT_MS;
    return TRUE;
}

static const char *const osworld_point_members[] = {"x", "y", NULL};
static const char *const osworld_click_members[] = {"x", "y", "button", "num_clicks", NULL};
static const char *const osworld_button_members[] = {"button", NULL};
static const char *const osworld_scroll_members[] = {"dx", "dy", NULL};
static const char *const osworld_key_members[] = {"key", NULL};
static const char *const osworld_keys_members[] = {"keys", NULL};

static const ActionAlias osworld_actions[] = {
    {"MOVE_TO", CARREL_ACTION_MOUSE_MOVE, parse_move, osworld_point_members, NO_BUTTON},
    {"CLICK", CARREL_ACTION_CLICK, parse_click, osworld_click_members, CARREL_BUTTON_LEFT, 1},
    {"MOUSE_DOWN", CARREL_ACTION_MOUSE_DOWN, parse_press, osworld_button_members, NO_BUTTON},
    {"MOUSE_UP", CARREL_ACTION_MOUSE_UP, parse_press, osworld_button_members, NO_BUTTON},
    {"RIGHT_CLICK", CARREL_ACTION_CLICK, parse_click, osworld_point_members, CARREL_BUTTON_RIGHT,
     1},
    {"DOUBLE_CLICK", CARREL_ACTION_CLICK, parse_click, osworld_point_members, CARREL_BUTTON_LEFT,
     2},
    {"DRAG_TO", CARREL_ACTION_DRAG, parse_drag_to, osworld_point_members, NO_BUTTON},
    {"SCROLL", CARREL_ACTION_SCROLL, parse_osworld_scroll, osworld_scroll_members, NO_BUTTON},
    {"TYPING", CARREL_ACTION_TYPE, parse_type, text_members, NO_BUTTON},
    {"PRESS", CARREL_ACTION_KEY, parse_osworld_key, osworld_key_members, NO_BUTTON},
    {"KEY_DOWN", CARREL_ACTION_KEY_DOWN, parse_osworld_key, osworld_key_members, NO_BUTTON},
    {"KEY_UP", CARREL_ACTION_KEY_UP, parse_osworld_key, osworld_key_members, NO_BUTTON},
    {"HOTKEY", CARREL_ACTION_KEY, parse_osworld_hotkey, osworld_keys_members, NO_BUTTON},
    {"WAIT", CARREL_ACTION_WAIT, parse_osworld_wait, no_members, NO_BUTTON},
    {"FAIL", CARREL_ACTION_FAIL, NULL, no_members, NO_BUTTON},
    {"DONE", CARREL_ACTION_DONE, NULL, no_members, NO_BUTTON},
    {NULL, CARREL_ACTION_LAST, NULL, no_members, NO_BUTTON},
};

/* Untrusted text in a message: escaped and cut, so it cannot forge a log line. */
static char *
shown(const char *text)
{
    g_autofree char *escaped = g_strescape(text, NULL);

    return g_strdup_printf("%.40s", escaped);
}

static const ActionAlias *
find_alias(const ActionAlias *table, const char *format_label, const char *name, GError **error)
{
    g_autoptr(GString) known = g_string_new(NULL);
    g_autofree char *name_shown = shown(name);

    for (gsize i = 0; table[i].name; i++) {
        if (g_str_equal(table[i].name, name))
            return &table[i];
        g_string_append_printf(known, "%s%s", i ? ", " : "", table[i].name);
    }
    set_invalid(error, "unknown %saction '%s'; known: %s", format_label, name_shown, known->str);
    return NULL;
}

static gboolean
check_members(JsonObject *obj, const char *discriminator, const ActionAlias *alias, GError **error)
{
    g_autoptr(GList) members = json_object_get_members(obj);

    for (GList *l = members; l; l = l->next) {
        const char *name = l->data;
        gboolean allowed = discriminator && g_str_equal(name, discriminator);

        for (gsize i = 0; !allowed && alias->members[i]; i++)
            allowed = g_str_equal(name, alias->members[i]);
        if (!allowed) {
            g_autofree char *name_shown = shown(name);
            return set_invalid(error, "unknown member '%s' for action '%s'", name_shown,
                               alias->name);
        }
    }
    return TRUE;
}

static CarrelAction *
parse_alias(const ActionAlias *alias, JsonObject *obj, const char *discriminator, Format format,
            GError **error)
{
    g_autoptr(CarrelAction) action = g_new0(CarrelAction, 1);
    Ctx ctx = {obj, format, alias, action};

    action->kind = alias->kind;
    action->button = alias->button;
    if (alias->kind == CARREL_ACTION_CLICK)
        action->count = alias->count;
    if (!check_members(obj, discriminator, alias, error))
        return NULL;
    if (alias->parse && !alias->parse(&ctx, error))
        return NULL;
    return g_steal_pointer(&action);
}

/* The value of the member that names the action; NULL+error when it is not a string. */
static const char *
get_name(JsonObject *obj, const char *member, GError **error)
{
    JsonNode *node = json_object_get_member(obj, member);

    if (!carrel_conf_node_holds(node, G_TYPE_STRING)) {
        set_invalid(error, "'%s' must be a string", member);
        return NULL;
    }
    return json_node_get_string(node);
}

static CarrelAction *
parse_osworld(JsonObject *obj, GError **error)
{
    static const char *const allowed[] = {"action_type", "parameters", NULL};
    const char *name = get_name(obj, "action_type", error);
    JsonNode *params = carrel_conf_get_node(obj, "parameters");
    g_autoptr(JsonObject) empty = json_object_new();
    const ActionAlias *alias;

    if (!name || !carrel_conf_check_members(obj, allowed, error) ||
        !(alias = find_alias(osworld_actions, "OSWorld ", name, error)))
        return NULL;
    if (params && !JSON_NODE_HOLDS_OBJECT(params)) {
        set_invalid(error, "'parameters' must be an object");
        return NULL;
    }
    return parse_alias(alias, params ? json_node_get_object(params) : empty, NULL, FORMAT_OSWORLD,
                       error);
}

static CarrelAction *
parse_object(JsonObject *obj, GError **error)
{
    const ActionAlias *alias;
    const char *name;

    if (json_object_has_member(obj, "action_type"))
        return parse_osworld(obj, error);
    if (json_object_has_member(obj, "action")) {
        if (!(name = get_name(obj, "action", error)))
            return NULL;
        if (g_str_equal(name, "batch")) {
            set_invalid(error, "a batch cannot be one of the actions (batches do not nest)");
            return NULL;
        }
        if (!(alias = find_alias(carrel_actions, "", name, error)))
            return NULL;
        return parse_alias(alias, obj, "action", FORMAT_CARREL, error);
    }
    if (json_object_has_member(obj, "type")) {
        if (!(name = get_name(obj, "type", error)) ||
            !(alias = find_alias(openai_actions, "OpenAI ", name, error)))
            return NULL;
        return parse_alias(alias, obj, "type", FORMAT_OPENAI, error);
    }
    if (json_object_has_member(obj, "actions")) {
        set_invalid(error, "a batch cannot be one of the actions (batches do not nest)");
        return NULL;
    }
    set_invalid(error, "an action needs an 'action', 'type' or 'action_type' member");
    return NULL;
}

/* OSWorld sends WAIT and its verdicts as bare strings. */
static CarrelAction *
parse_bare_string(const char *name, GError **error)
{
    g_autoptr(JsonObject) empty = json_object_new();
    const ActionAlias *alias;

    if (!g_str_equal(name, "WAIT") && !g_str_equal(name, "FAIL") && !g_str_equal(name, "DONE")) {
        set_invalid(error, "an action given as a string must be WAIT, FAIL or DONE");
        return NULL;
    }
    if (!(alias = find_alias(osworld_actions, "OSWorld ", name, error)))
        return NULL;
    return parse_alias(alias, empty, NULL, FORMAT_OSWORLD, error);
}

CarrelAction *
carrel_action_from_json(JsonNode *node, GError **error)
{
    if (node && carrel_conf_node_holds(node, G_TYPE_STRING))
        return parse_bare_string(json_node_get_string(node), error);
    if (!node || !JSON_NODE_HOLDS_OBJECT(node)) {
        set_invalid(error, "an action must be a JSON object");
        return NULL;
    }
    return parse_object(json_node_get_object(node), error);
}
