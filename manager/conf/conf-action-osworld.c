/*
 * OSWorld's computer_13 actions: {"action_type": NAME, "parameters": {...}}, upper-case names.
 */
#include "conf/conf-action-priv.h"

/* OSWorld's DRAG_TO: from wherever the pointer is to x, y. */
static gboolean
parse_drag_to(CarrelActionCtx *ctx, GError **error)
{
    if (!carrel_action_get_point(ctx, TRUE, error))
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
parse_osworld_scroll(CarrelActionCtx *ctx, GError **error)
{
    gint64 dx = 0, dy = 0;

    if (!carrel_conf_get_int(ctx->obj, "dx", -CARREL_ACTION_MAX_SCROLL, CARREL_ACTION_MAX_SCROLL,
                             &dx, error) ||
        !carrel_conf_get_int(ctx->obj, "dy", -CARREL_ACTION_MAX_SCROLL, CARREL_ACTION_MAX_SCROLL,
                             &dy, error))
        return FALSE;
    if (dx == 0 && dy == 0)
        return carrel_action_set_invalid(error, "SCROLL needs a non-zero 'dx' or 'dy'");
    ctx->action->dx = (int)dx;
    ctx->action->dy = (int)-dy;
    return TRUE;
}

/* The keys of PRESS, KEY_DOWN, KEY_UP ("key", one name) and HOTKEY ("keys", names). */
static gboolean
add_osworld_keys(CarrelActionCtx *ctx, const char *name, GError **error)
{
    JsonNode *node = carrel_conf_get_node(ctx->obj, name);
    gboolean single = g_str_equal(name, "key");
    GStrv keys;

    if (!node)
        return carrel_action_set_invalid(error, "'%s' is required", name);
    if (single && !carrel_conf_node_holds(node, G_TYPE_STRING))
        return carrel_action_set_invalid(error, "'key' must be a string");
    if (!single && !JSON_NODE_HOLDS_ARRAY(node))
        return carrel_action_set_invalid(error, "'keys' must be an array of key names");
    if (single)
        keys = carrel_keymap_resolve_keys((const char *const[]){json_node_get_string(node), NULL},
                                          FALSE, error);
    else
        keys = carrel_action_node_to_keys(node, name, FALSE, error);
    if (!keys)
        return FALSE;
    ctx->action->combos = g_ptr_array_new_with_free_func((GDestroyNotify)g_strfreev);
    g_ptr_array_add(ctx->action->combos, keys);
    return TRUE;
}

static gboolean
parse_osworld_key(CarrelActionCtx *ctx, GError **error)
{
    return add_osworld_keys(ctx, "key", error);
}

static gboolean
parse_osworld_hotkey(CarrelActionCtx *ctx, GError **error)
{
    return add_osworld_keys(ctx, "keys", error);
}

static gboolean
parse_osworld_wait(CarrelActionCtx *ctx, GError **error)
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

const CarrelActionAlias carrel_action_osworld_aliases[] = {
    {"MOVE_TO", CARREL_ACTION_MOUSE_MOVE, carrel_action_parse_move, osworld_point_members,
     CARREL_ACTION_NO_BUTTON},
    {"CLICK", CARREL_ACTION_CLICK, carrel_action_parse_click, osworld_click_members,
     CARREL_BUTTON_LEFT, 1},
    {"MOUSE_DOWN", CARREL_ACTION_MOUSE_DOWN, carrel_action_parse_press, osworld_button_members,
     CARREL_ACTION_NO_BUTTON},
    {"MOUSE_UP", CARREL_ACTION_MOUSE_UP, carrel_action_parse_press, osworld_button_members,
     CARREL_ACTION_NO_BUTTON},
    {"RIGHT_CLICK", CARREL_ACTION_CLICK, carrel_action_parse_click, osworld_point_members,
     CARREL_BUTTON_RIGHT, 1},
    {"DOUBLE_CLICK", CARREL_ACTION_CLICK, carrel_action_parse_click, osworld_point_members,
     CARREL_BUTTON_LEFT, 2},
    {"DRAG_TO", CARREL_ACTION_DRAG, parse_drag_to, osworld_point_members, CARREL_ACTION_NO_BUTTON},
    {"SCROLL", CARREL_ACTION_SCROLL, parse_osworld_scroll, osworld_scroll_members,
     CARREL_ACTION_NO_BUTTON},
    {"TYPING", CARREL_ACTION_TYPE, carrel_action_parse_type, carrel_action_type_members,
     CARREL_ACTION_NO_BUTTON},
    {"PRESS", CARREL_ACTION_KEY, parse_osworld_key, osworld_key_members, CARREL_ACTION_NO_BUTTON},
    {"KEY_DOWN", CARREL_ACTION_KEY_DOWN, parse_osworld_key, osworld_key_members,
     CARREL_ACTION_NO_BUTTON},
    {"KEY_UP", CARREL_ACTION_KEY_UP, parse_osworld_key, osworld_key_members,
     CARREL_ACTION_NO_BUTTON},
    {"HOTKEY", CARREL_ACTION_KEY, parse_osworld_hotkey, osworld_keys_members,
     CARREL_ACTION_NO_BUTTON},
    {"WAIT", CARREL_ACTION_WAIT, parse_osworld_wait, carrel_action_no_members,
     CARREL_ACTION_NO_BUTTON},
    {"FAIL", CARREL_ACTION_FAIL, NULL, carrel_action_no_members, CARREL_ACTION_NO_BUTTON},
    {"DONE", CARREL_ACTION_DONE, NULL, carrel_action_no_members, CARREL_ACTION_NO_BUTTON},
    {NULL, CARREL_ACTION_LAST, NULL, carrel_action_no_members, CARREL_ACTION_NO_BUTTON},
};
