/*
 * Computer actions: the enums, and carrel_action_from_json, which finds the format of an action
 * and its name in that format's table (conf-action-carrel.c: carrel's own names with Anthropic's
 * computer tool; conf-action-openai.c: OpenAI's computer-use actions; conf-action-osworld.c:
 * OSWorld's computer_13), all producing the same CarrelAction. Untrusted input: every member is
 * checked, every count and size bounded.
 */
#include "conf/conf.h"
#include "conf/conf-action-priv.h"

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
    [CARREL_ACTION_CLICK_ELEMENT] = "click_element",
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
carrel_action_kind_sends_hid(CarrelActionKind kind)
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
    case CARREL_ACTION_CLICK_ELEMENT:
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
    g_free(action->element);
    g_free(action);
}

/* Untrusted text in a message: escaped and cut, so it cannot forge a log line. */
static char *
shown(const char *text)
{
    g_autofree char *escaped = g_strescape(text, NULL);

    return g_strdup_printf("%.40s", escaped);
}

static const CarrelActionAlias *
find_alias(const CarrelActionAlias *table, const char *format_label, const char *name,
           GError **error)
{
    g_autoptr(GString) known = g_string_new(NULL);
    g_autofree char *name_shown = shown(name);

    for (gsize i = 0; table[i].name; i++) {
        if (g_str_equal(table[i].name, name))
            return &table[i];
        g_string_append_printf(known, "%s%s", i ? ", " : "", table[i].name);
    }
    carrel_action_set_invalid(error, "unknown %saction '%s'; known: %s", format_label, name_shown,
                              known->str);
    return NULL;
}

static gboolean
check_members(JsonObject *obj, const char *discriminator, const CarrelActionAlias *alias,
              GError **error)
{
    g_autoptr(GList) members = json_object_get_members(obj);

    for (GList *l = members; l; l = l->next) {
        const char *name = l->data;
        gboolean allowed = discriminator && g_str_equal(name, discriminator);

        for (gsize i = 0; !allowed && alias->members[i]; i++)
            allowed = g_str_equal(name, alias->members[i]);
        if (!allowed) {
            g_autofree char *name_shown = shown(name);
            return carrel_action_set_invalid(error, "unknown member '%s' for action '%s'",
                                             name_shown, alias->name);
        }
    }
    return TRUE;
}

static CarrelAction *
parse_alias(const CarrelActionAlias *alias, JsonObject *obj, const char *discriminator,
            CarrelActionFormat format, GError **error)
{
    g_autoptr(CarrelAction) action = g_new0(CarrelAction, 1);
    CarrelActionCtx ctx = {obj, format, alias, action};

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
        carrel_action_set_invalid(error, "'%s' must be a string", member);
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
    const CarrelActionAlias *alias;

    if (!name || !carrel_conf_check_members(obj, allowed, error) ||
        !(alias = find_alias(carrel_action_osworld_aliases, "OSWorld ", name, error)))
        return NULL;
    if (params && !JSON_NODE_HOLDS_OBJECT(params)) {
        carrel_action_set_invalid(error, "'parameters' must be an object");
        return NULL;
    }
    return parse_alias(alias, params ? json_node_get_object(params) : empty, NULL,
                       CARREL_ACTION_FORMAT_OSWORLD, error);
}

static CarrelAction *
parse_object(JsonObject *obj, GError **error)
{
    const CarrelActionAlias *alias;
    const char *name;

    if (json_object_has_member(obj, "action_type"))
        return parse_osworld(obj, error);
    if (json_object_has_member(obj, "action")) {
        if (!(name = get_name(obj, "action", error)))
            return NULL;
        if (g_str_equal(name, "batch")) {
            carrel_action_set_invalid(error,
                                      "a batch cannot be one of the actions (batches do not nest)");
            return NULL;
        }
        if (!(alias = find_alias(carrel_action_carrel_aliases, "", name, error)))
            return NULL;
        return parse_alias(alias, obj, "action", CARREL_ACTION_FORMAT_CARREL, error);
    }
    if (json_object_has_member(obj, "type")) {
        if (!(name = get_name(obj, "type", error)) ||
            !(alias = find_alias(carrel_action_openai_aliases, "OpenAI ", name, error)))
            return NULL;
        return parse_alias(alias, obj, "type", CARREL_ACTION_FORMAT_OPENAI, error);
    }
    if (json_object_has_member(obj, "actions")) {
        carrel_action_set_invalid(error,
                                  "a batch cannot be one of the actions (batches do not nest)");
        return NULL;
    }
    carrel_action_set_invalid(error, "an action needs an 'action', 'type' or 'action_type' member");
    return NULL;
}

/* OSWorld sends WAIT and its verdicts as bare strings. */
static CarrelAction *
parse_bare_string(const char *name, GError **error)
{
    g_autoptr(JsonObject) empty = json_object_new();
    const CarrelActionAlias *alias;

    if (!g_str_equal(name, "WAIT") && !g_str_equal(name, "FAIL") && !g_str_equal(name, "DONE")) {
        carrel_action_set_invalid(error, "an action given as a string must be WAIT, FAIL or DONE");
        return NULL;
    }
    if (!(alias = find_alias(carrel_action_osworld_aliases, "OSWorld ", name, error)))
        return NULL;
    return parse_alias(alias, empty, NULL, CARREL_ACTION_FORMAT_OSWORLD, error);
}

CarrelAction *
carrel_action_from_json(JsonNode *node, GError **error)
{
    if (node && carrel_conf_node_holds(node, G_TYPE_STRING))
        return parse_bare_string(json_node_get_string(node), error);
    if (!node || !JSON_NODE_HOLDS_OBJECT(node)) {
        carrel_action_set_invalid(error, "an action must be a JSON object");
        return NULL;
    }
    return parse_object(json_node_get_object(node), error);
}
