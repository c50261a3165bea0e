/* OpenAI's computer-use actions: {"type": NAME, ...}, positions as "x" and "y". */
#include "conf/conf-action-priv.h"

/* OpenAI click, double_click: x and y are required. */
static gboolean
parse_openai_click(CarrelActionCtx *ctx, GError **error)
{
    return carrel_action_get_point(ctx, TRUE, error) && carrel_action_get_button(ctx, error) &&
           carrel_action_get_modifiers(ctx, error);
}

/* OpenAI's keys: names pressed together, letters in any case. */
static gboolean
parse_keypress(CarrelActionCtx *ctx, GError **error)
{
    JsonNode *node = carrel_conf_get_node(ctx->obj, "keys");
    GStrv keys;

    if (!node)
        return carrel_action_set_invalid(error, "'keys' is required");
    if (!(keys = carrel_action_node_to_keys(node, "keys", TRUE, error)))
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
parse_openai_scroll(CarrelActionCtx *ctx, GError **error)
{
    int dx = 0, dy = 0;

    if (!carrel_action_get_point(ctx, TRUE, error) || !carrel_action_get_modifiers(ctx, error) ||
        !pixels_to_notches(ctx->obj, "scroll_x", &dx, error) ||
        !pixels_to_notches(ctx->obj, "scroll_y", &dy, error))
        return FALSE;
    if (dx == 0 && dy == 0)
        return carrel_action_set_invalid(error, "scroll needs a non-zero 'scroll_x' or 'scroll_y'");
    ctx->action->dx = dx;
    ctx->action->dy = dy;
    return TRUE;
}

static gboolean
parse_openai_wait(CarrelActionCtx *ctx, GError **error)
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

const CarrelActionAlias carrel_action_openai_aliases[] = {
    {"click", CARREL_ACTION_CLICK, parse_openai_click, openai_click_members, CARREL_BUTTON_LEFT, 1},
    {"double_click", CARREL_ACTION_CLICK, parse_openai_click, openai_point_members,
     CARREL_BUTTON_LEFT, 2},
    {"drag", CARREL_ACTION_DRAG, carrel_action_parse_path, openai_drag_members,
     CARREL_ACTION_NO_BUTTON},
    {"keypress", CARREL_ACTION_KEY, parse_keypress, openai_keys_members, CARREL_ACTION_NO_BUTTON},
    {"move", CARREL_ACTION_MOUSE_MOVE, carrel_action_parse_move, openai_point_members,
     CARREL_ACTION_NO_BUTTON},
    {"screenshot", CARREL_ACTION_SCREENSHOT, NULL, carrel_action_no_members,
     CARREL_ACTION_NO_BUTTON},
    {"scroll", CARREL_ACTION_SCROLL, parse_openai_scroll, openai_scroll_members,
     CARREL_ACTION_NO_BUTTON},
    {"type", CARREL_ACTION_TYPE, carrel_action_parse_type, carrel_action_type_members,
     CARREL_ACTION_NO_BUTTON},
    {"wait", CARREL_ACTION_WAIT, parse_openai_wait, openai_wait_members, CARREL_ACTION_NO_BUTTON},
    {NULL, CARREL_ACTION_LAST, NULL, carrel_action_no_members, CARREL_ACTION_NO_BUTTON},
};
