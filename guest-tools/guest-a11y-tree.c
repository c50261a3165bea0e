/* a11y: the accessibility tree as JSON, built over any source of elements (AT-SPI in the guest,
 * a fake in the unit tests), bounded in depth and in elements; ids are paths of child indexes. */
#include <string.h>

#include "guest.h"

/* AT-SPI's AtspiStateType, in its order (atspi-constants.h): bit n of GetState is state n. */
static const char *const state_names[] = {
    "invalid",         "active",
    "armed",           "busy",
    "checked",         "collapsed",
    "defunct",         "editable",
    "enabled",         "expandable",
    "expanded",        "focusable",
    "focused",         "has-tooltip",
    "horizontal",      "iconified",
    "modal",           "multi-line",
    "multiselectable", "opaque",
    "pressed",         "resizable",
    "selectable",      "selected",
    "sensitive",       "showing",
    "single-line",     "stale",
    "transient",       "vertical",
    "visible",         "manages-descendants",
    "indeterminate",   "required",
    "truncated",       "animated",
    "invalid-entry",   "supports-autocompletion",
    "selectable-text", "is-default",
    "visited",         "checkable",
    "has-popup",       "read-only",
};

#define STATE_ACTIVE 1

const char *
carrel_guest_a11y_state_name(guint n)
{
    return n < G_N_ELEMENTS(state_names) ? state_names[n] : NULL;
}

void
carrel_guest_a11y_info_clear(CarrelGuestA11yInfo *info)
{
    g_clear_pointer(&info->role, g_free);
    g_clear_pointer(&info->name, g_free);
    g_clear_pointer(&info->action, g_free);
}

GArray *
carrel_guest_a11y_id_parse(const char *id, GError **error)
{
    g_autoptr(GArray) path = g_array_new(FALSE, FALSE, sizeof(guint));
    g_auto(GStrv) parts = NULL;

    if (!id || strlen(id) > CARREL_GUEST_LIMIT_A11Y_ID_LEN) {
        g_set_error(error, CARREL_GUEST_ERROR, CARREL_GUEST_ERROR_INVALID_ARG,
                    "an element id is at most %d characters", CARREL_GUEST_LIMIT_A11Y_ID_LEN);
        return NULL;
    }
    parts = g_strsplit(id, ".", -1);
    for (guint i = 0; parts[i]; i++) {
        guint64 n = 0;

        /* Plain decimal only: no sign, no leading zero, within the children bound. */
        if (i >= CARREL_GUEST_LIMIT_A11Y_DEPTH + 2 || !parts[i][0] ||
            (parts[i][0] == '0' && parts[i][1]) ||
            !g_ascii_string_to_unsigned(parts[i], 10, 0, CARREL_GUEST_LIMIT_A11Y_CHILDREN - 1, &n,
                                        NULL)) {
            g_set_error(error, CARREL_GUEST_ERROR, CARREL_GUEST_ERROR_INVALID_ARG,
                        "invalid element id '%s': expected child indexes like '2.0.3'", id);
            return NULL;
        }
        g_array_append_val(path, n);
    }
    if (path->len == 0) {
        g_set_error(error, CARREL_GUEST_ERROR, CARREL_GUEST_ERROR_INVALID_ARG,
                    "an element id must not be empty");
        return NULL;
    }
    return g_steal_pointer(&path);
}

gpointer
carrel_guest_a11y_resolve(const CarrelGuestA11yOps *ops, gpointer source, const char *id,
                          GError **error)
{
    g_autoptr(GArray) path = carrel_guest_a11y_id_parse(id, error);
    gpointer element = NULL;

    if (!path)
        return NULL;
    for (guint i = 0; i < path->len; i++) {
        guint index = g_array_index(path, guint, i);
        g_autoptr(GPtrArray) children = ops->children(source, element, index + 1, error);

        if (element)
            ops->element_free(element);
        element = NULL;
        if (!children)
            return NULL;
        if (index >= children->len) {
            g_set_error(error, CARREL_GUEST_ERROR, CARREL_GUEST_ERROR_NOT_FOUND,
                        "no element '%s' (it may have gone away; read the tree again)", id);
            return NULL;
        }
        element = g_ptr_array_steal_index(children, index);
    }
    return element;
}

char *
carrel_guest_a11y_find_active(const CarrelGuestA11yOps *ops, gpointer source, GError **error)
{
    g_autoptr(GPtrArray) apps =
        ops->children(source, NULL, CARREL_GUEST_LIMIT_A11Y_CHILDREN, error);

    if (!apps)
        return NULL;
    for (guint a = 0; a < apps->len; a++) {
        g_autoptr(GError) local = NULL;
        g_autoptr(GPtrArray) windows = ops->children(source, g_ptr_array_index(apps, a),
                                                     CARREL_GUEST_LIMIT_A11Y_CHILDREN, &local);

        /* An application that went away meanwhile is skipped, not an error. */
        for (guint w = 0; windows && w < windows->len; w++) {
            CarrelGuestA11yInfo info = {0};
            gboolean active = ops->describe(source, g_ptr_array_index(windows, w), &info, NULL) &&
                              (info.states & (G_GUINT64_CONSTANT(1) << STATE_ACTIVE));

            carrel_guest_a11y_info_clear(&info);
            if (active)
                return g_strdup_printf("%u.%u", a, w);
        }
    }
    return NULL;
}

static JsonNode *
bounds_node(const CarrelGuestA11yInfo *info)
{
    JsonObject *o;
    JsonNode *node;

    if (!info->has_bounds)
        return json_node_new(JSON_NODE_NULL);
    node = json_node_new(JSON_NODE_OBJECT);
    o = json_object_new();
    json_object_set_int_member(o, "x", info->x);
    json_object_set_int_member(o, "y", info->y);
    json_object_set_int_member(o, "width", MAX(info->width, 0));
    json_object_set_int_member(o, "height", MAX(info->height, 0));
    json_node_take_object(node, o);
    return node;
}

JsonNode *
carrel_guest_a11y_node_to_json(const char *id, const CarrelGuestA11yInfo *info)
{
    JsonNode *node = json_node_new(JSON_NODE_OBJECT);
    JsonObject *o = json_object_new();
    JsonArray *states = json_array_new();
    g_autofree char *role =
        carrel_guest_text_clip(info->role, -1, CARREL_GUEST_LIMIT_A11Y_ROLE_CHARS);
    g_autofree char *name =
        carrel_guest_text_clip(info->name, -1, CARREL_GUEST_LIMIT_A11Y_NAME_CHARS);
    g_autofree char *action =
        info->action ? carrel_guest_text_clip(info->action, -1, CARREL_GUEST_LIMIT_A11Y_ROLE_CHARS)
                     : NULL;

    for (guint n = 0; n < 64; n++) {
        if ((info->states & (G_GUINT64_CONSTANT(1) << n)) && carrel_guest_a11y_state_name(n))
            json_array_add_string_element(states, carrel_guest_a11y_state_name(n));
    }
    json_object_set_string_member(o, "id", id);
    json_object_set_string_member(o, "role", role);
    json_object_set_string_member(o, "name", name);
    json_object_set_array_member(o, "states", states);
    json_object_set_member(o, "bounds", bounds_node(info));
    if (action)
        json_object_set_string_member(o, "action", action);
    else
        json_object_set_null_member(o, "action");
    json_node_take_object(node, o);
    return node;
}

/* The order in which waiting elements are expanded: breadth first within each rank, a lower
 * rank first. A web page is the deepest part of the desktop, and menus, toolbars and tab lists
 * the widest: in plain breadth-first order the budget (elements, bytes, the deadline) went to
 * the chrome of every application before any page's content was reached (the slow tier's
 * Firefox heading). Documents and what they hold come first, the insides of the chrome last;
 * the chrome's containers themselves are still listed where they are. */
typedef enum {
    RANK_CONTENT, /* a document ("document web", "document frame", ...) and all below it */
    RANK_OTHER,
    RANK_CHROME, /* the insides of menus, menu bars, toolbars, tab lists, status bars */
    RANK_LAST
} Rank;

static const char *const chrome_roles[] = {"menu bar",   "menu",          "popup menu", "tool bar",
                                           "status bar", "page tab list", NULL};

/* An element waiting in the walk: its handle (NULL: the desktop), id, level, rank and the JSON
 * object its children go into. */
typedef struct {
    gpointer element;
    char *id;
    guint level;
    Rank rank;
    JsonObject *obj;
} Pending;

typedef struct {
    const CarrelGuestA11yOps *ops;
    gpointer source;
    GQueue queue[RANK_LAST];
    guint count;
    guint depth;
    guint max_nodes;
    gsize bytes;     /* of JSON so far, estimated from above */
    const char *app; /* NULL, or the one application's name (casefolded) */
    gboolean truncated;
} Walk;

/* JSON of a node beside its name, role and action: members, states, bounds, escapes. */
#define NODE_JSON_OVERHEAD 640

static void
pending_free(Walk *walk, Pending *p)
{
    if (p->element)
        walk->ops->element_free(p->element);
    g_free(p->id);
    g_free(p);
}

/* The bytes of text once clipped to max_chars characters (at most 4 bytes each). */
static gsize
text_bytes(const char *text, gsize max_chars)
{
    return text ? MIN(strlen(text), max_chars * 4) : 0;
}

static gboolean
is_app(const Walk *walk, const CarrelGuestA11yInfo *info)
{
    g_autofree char *name = info->name ? g_utf8_casefold(info->name, -1) : NULL;

    return name && g_str_equal(name, walk->app);
}

static Rank
child_rank(Rank parent, const char *role)
{
    if (parent == RANK_CONTENT || (role && g_str_has_prefix(role, "document")))
        return RANK_CONTENT;
    if (parent == RANK_CHROME || (role && g_strv_contains(chrome_roles, role)))
        return RANK_CHROME;
    return RANK_OTHER;
}

static char *
child_id(const char *parent, guint index)
{
    return *parent ? g_strdup_printf("%s.%u", parent, index) : g_strdup_printf("%u", index);
}

/* Describes one child and queues it; an element that vanished meanwhile is left out. */
static void
add_child(Walk *walk, Pending *parent, JsonArray *list, gpointer element, guint index)
{
    CarrelGuestA11yInfo info = {0};
    g_autofree char *id = child_id(parent->id, index);
    Pending *p;
    JsonNode *node;

    if (!walk->ops->describe(walk->source, element, &info, NULL)) {
        walk->ops->element_free(element);
        return;
    }
    /* The desktop's children are the applications: only the one asked for is walked. */
    if (walk->app && !parent->element && parent->level == 0 && !is_app(walk, &info)) {
        carrel_guest_a11y_info_clear(&info);
        walk->ops->element_free(element);
        return;
    }
    /* Escaping may grow text six-fold (\u00XX); the reply must stay within the byte budget. */
    walk->bytes += NODE_JSON_OVERHEAD + strlen(id) +
                   6 * (text_bytes(info.name, CARREL_GUEST_LIMIT_A11Y_NAME_CHARS) +
                        text_bytes(info.role, CARREL_GUEST_LIMIT_A11Y_ROLE_CHARS) +
                        text_bytes(info.action, CARREL_GUEST_LIMIT_A11Y_ROLE_CHARS));
    if (walk->bytes > CARREL_GUEST_LIMIT_A11Y_JSON_BYTES) {
        walk->truncated = TRUE;
        walk->max_nodes = walk->count; /* no more elements */
        carrel_guest_a11y_info_clear(&info);
        walk->ops->element_free(element);
        return;
    }
    node = carrel_guest_a11y_node_to_json(id, &info);
    p = g_new0(Pending, 1);
    p->rank = child_rank(parent->rank, info.role);
    carrel_guest_a11y_info_clear(&info);
    json_object_set_array_member(json_node_get_object(node), "children", json_array_new());
    p->element = element;
    p->id = g_steal_pointer(&id);
    p->level = parent->level + 1;
    p->obj = json_node_get_object(node);
    json_array_add_element(list, node);
    walk->count++;
    g_queue_push_tail(&walk->queue[p->rank], p);
}

static void
expand(Walk *walk, Pending *p)
{
    JsonArray *list = json_object_get_array_member(p->obj, "children");
    guint room = walk->max_nodes - walk->count;
    gboolean at_limit = p->level >= walk->depth || room == 0;
    g_autoptr(GPtrArray) children =
        walk->ops->children(walk->source, p->element,
                            at_limit ? 1 : MIN(room + 1, CARREL_GUEST_LIMIT_A11Y_CHILDREN), NULL);

    if (!children || children->len == 0)
        return;
    if (at_limit || children->len > room)
        walk->truncated = TRUE;
    for (guint i = 0; !at_limit && i < children->len && walk->count < walk->max_nodes; i++)
        add_child(walk, p, list, g_steal_pointer(&g_ptr_array_index(children, i)), i);
    for (guint i = 0; i < children->len; i++) {
        if (g_ptr_array_index(children, i))
            walk->ops->element_free(g_ptr_array_index(children, i));
    }
    g_ptr_array_set_free_func(children, NULL);
}

/* The next element to expand: the first of the lowest rank waiting. */
static Pending *
next_pending(Walk *walk)
{
    for (guint r = 0; r < RANK_LAST; r++) {
        if (!g_queue_is_empty(&walk->queue[r]))
            return g_queue_pop_head(&walk->queue[r]);
    }
    return NULL;
}

static JsonNode *
root_node(Walk *walk, const char *root_id, gpointer *ret_element, GError **error)
{
    CarrelGuestA11yInfo info = {.role = g_strdup("desktop frame"), .name = g_strdup("main")};
    gpointer element = NULL;
    JsonNode *node;

    if (root_id) {
        carrel_guest_a11y_info_clear(&info);
        if (!(element = carrel_guest_a11y_resolve(walk->ops, walk->source, root_id, error)))
            return NULL;
        if (!walk->ops->describe(walk->source, element, &info, error)) {
            walk->ops->element_free(element);
            return NULL;
        }
    }
    node = carrel_guest_a11y_node_to_json(root_id ? root_id : "", &info);
    carrel_guest_a11y_info_clear(&info);
    json_object_set_array_member(json_node_get_object(node), "children", json_array_new());
    *ret_element = element;
    return node;
}

static JsonNode *
walk_tree(const CarrelGuestA11yOps *ops, gpointer source, const char *root_id, const char *app,
          guint depth, guint max_nodes, GError **error)
{
    g_autofree char *folded = app ? g_utf8_casefold(app, -1) : NULL;
    Walk walk = {.ops = ops,
                 .source = source,
                 .depth = depth,
                 .max_nodes = MAX(max_nodes, 1),
                 .app = folded};
    gpointer element = NULL;
    g_autoptr(JsonNode) root = root_node(&walk, root_id, &element, error);
    g_autoptr(JsonBuilder) b = NULL;
    Pending *p;

    if (!root)
        return NULL;
    p = g_new0(Pending, 1);
    p->element = element;
    p->id = g_strdup(root_id ? root_id : "");
    p->obj = json_node_get_object(root);
    p->rank = RANK_OTHER;
    walk.count = 1;
    for (guint r = 0; r < RANK_LAST; r++)
        g_queue_init(&walk.queue[r]);
    g_queue_push_tail(&walk.queue[p->rank], p);
    while ((p = next_pending(&walk))) {
        expand(&walk, p);
        pending_free(&walk, p);
    }
    b = carrel_guest_json_begin();
    json_builder_set_member_name(b, "scope");
    json_builder_add_string_value(b, root_id ? "focused" : "desktop");
    json_builder_set_member_name(b, "root");
    json_builder_add_value(b, g_steal_pointer(&root));
    json_builder_set_member_name(b, "count");
    json_builder_add_int_value(b, walk.count);
    json_builder_set_member_name(b, "truncated");
    json_builder_add_boolean_value(b, walk.truncated);
    return carrel_guest_json_end(b);
}

JsonNode *
carrel_guest_a11y_tree(const CarrelGuestA11yOps *ops, gpointer source, const char *root_id,
                       guint depth, guint max_nodes, GError **error)
{
    return walk_tree(ops, source, root_id, NULL, depth, max_nodes, error);
}

JsonNode *
carrel_guest_a11y_tree_app(const CarrelGuestA11yOps *ops, gpointer source, const char *app,
                           guint depth, guint max_nodes, GError **error)
{
    return walk_tree(ops, source, NULL, app, depth, max_nodes, error);
}
