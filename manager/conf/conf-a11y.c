/*
 * The accessibility tree: carrel-guest a11y replies are untrusted (a hostile guest, or any
 * application in it, may say anything). The reply is parsed with bounded size and nesting, then
 * every element is re-made from checked values: known members of the right types, text cut and
 * cleaned, numbers in range, ids in the shape of the tree, depth and count within the request.
 */
#include <string.h>

#include "conf/conf.h"
#include "conf/conf-priv.h"

/* The root object, its "root" node, then per level a children array and a node; the states
 * array and bounds object one more. */
#define REPLY_JSON_DEPTH (2 * CARREL_A11Y_MAX_DEPTH + 6)
#define STATE_NAME_MAX 32

static const char *const node_members[] = {"id",     "role",   "name",     "states",
                                           "bounds", "action", "children", NULL};

static gboolean
query_uint(GHashTable *query, const char *key, guint min, guint max, guint *ret, GError **error)
{
    const char *value = query ? g_hash_table_lookup(query, key) : NULL;
    guint64 n = 0;

    if (!value)
        return TRUE;
    if (!g_ascii_string_to_unsigned(value, 10, min, max, &n, NULL)) {
        g_set_error(error, CARREL_ERROR, CARREL_ERROR_INVALID_ARG,
                    "query parameter '%s' must be an integer from %u to %u", key, min, max);
        return FALSE;
    }
    *ret = (guint)n;
    return TRUE;
}

gboolean
carrel_a11y_request_parse(GHashTable *query, CarrelA11yRequest *ret_req, GError **error)
{
    static const char *const known[] = {"scope",        "depth", "max_nodes", "model_width",
                                        "model_height", "app",   NULL};
    CarrelA11yRequest req = {.depth = CARREL_A11Y_DEFAULT_DEPTH,
                             .max_nodes = CARREL_A11Y_DEFAULT_NODES};
    const char *scope = query ? g_hash_table_lookup(query, "scope") : NULL;
    GHashTableIter iter;
    gpointer key;

    if (query) {
        g_hash_table_iter_init(&iter, query);
        while (g_hash_table_iter_next(&iter, &key, NULL)) {
            if (!g_strv_contains(known, key)) {
                g_set_error(error, CARREL_ERROR, CARREL_ERROR_INVALID_ARG,
                            "unknown query parameter '%s'; known: scope, depth, max_nodes, "
                            "model_width, model_height, app",
                            carrel_util_is_clean_text(key) ? (const char *)key : "?");
                return FALSE;
            }
        }
    }
    if (scope && !g_str_equal(scope, "focused") && !g_str_equal(scope, "desktop")) {
        g_set_error(error, CARREL_ERROR, CARREL_ERROR_INVALID_ARG,
                    "query parameter 'scope' must be 'focused' or 'desktop'");
        return FALSE;
    }
    req.app = query ? g_hash_table_lookup(query, "app") : NULL;
    if (req.app && !carrel_a11y_check_app(req.app, error))
        return FALSE;
    if (req.app && scope && g_str_equal(scope, "focused")) {
        g_set_error(error, CARREL_ERROR, CARREL_ERROR_INVALID_ARG,
                    "query parameter 'app' walks the desktop's applications: not with "
                    "scope=focused");
        return FALSE;
    }
    req.desktop = req.app || (scope && g_str_equal(scope, "desktop"));
    if (!query_uint(query, "depth", 0, CARREL_A11Y_MAX_DEPTH, &req.depth, error) ||
        !query_uint(query, "max_nodes", 1, CARREL_A11Y_MAX_NODES, &req.max_nodes, error) ||
        !query_uint(query, "model_width", 1, CARREL_ACTION_MAX_COORDINATE, &req.model_width,
                    error) ||
        !query_uint(query, "model_height", 1, CARREL_ACTION_MAX_COORDINATE, &req.model_height,
                    error))
        return FALSE;
    if ((req.model_width == 0) != (req.model_height == 0)) {
        g_set_error(error, CARREL_ERROR, CARREL_ERROR_INVALID_ARG,
                    "query parameters 'model_width' and 'model_height' go together");
        return FALSE;
    }
    *ret_req = req;
    return TRUE;
}

gboolean
carrel_a11y_check_app(const char *app, GError **error)
{
    if (!app || !*app || strlen(app) > CARREL_A11Y_MAX_APP_BYTES ||
        !carrel_util_is_clean_text(app)) {
        g_set_error(error, CARREL_ERROR, CARREL_ERROR_INVALID_ARG,
                    "an application's name is one line of text of 1 to %d bytes",
                    CARREL_A11Y_MAX_APP_BYTES);
        return FALSE;
    }
    return TRUE;
}

JsonNode *
carrel_a11y_request_to_json(const CarrelA11yRequest *req)
{
    JsonNode *node = carrel_conf_new_object_node();
    JsonObject *o = json_node_get_object(node);

    json_object_set_string_member(o, "scope", req->desktop ? "desktop" : "focused");
    json_object_set_int_member(o, "depth", req->depth);
    json_object_set_int_member(o, "max_nodes", req->max_nodes);
    if (req->app)
        json_object_set_string_member(o, "app", req->app);
    if (req->model_width) {
        json_object_set_int_member(o, "model_width", req->model_width);
        json_object_set_int_member(o, "model_height", req->model_height);
    }
    return node;
}

gboolean
carrel_a11y_check_id(const char *id, GError **error)
{
    gboolean ok = id && *id && strlen(id) <= CARREL_A11Y_MAX_ID_LEN;
    gboolean at_start = TRUE;

    /* Indexes: a digit run without a leading zero (except "0"), separated by single dots. */
    for (const char *p = id; ok && *p; p++) {
        if (*p == '.')
            ok = !at_start && p[1] != '\0';
        else
            ok = g_ascii_isdigit(*p) && !(at_start && *p == '0' && g_ascii_isdigit(p[1])) &&
                 (at_start || p[-1] == '.' || g_ascii_isdigit(p[-1]));
        at_start = *p == '.';
    }
    if (!ok)
        g_set_error(error, CARREL_ERROR, CARREL_ERROR_INVALID_ARG,
                    "invalid element id '%.40s': expected child indexes like '2.0.13' (from the "
                    "accessibility tree)",
                    id && carrel_util_is_clean_text(id) ? id : "?");
    return ok;
}

JsonNode *
carrel_a11y_reply_parse(const char *data, gsize len, GError **error)
{
    g_autoptr(GError) local = NULL;
    g_autoptr(JsonParser) parser = NULL;
    JsonNode *root;

    if (len > CARREL_A11Y_MAX_OUTPUT_BYTES ||
        !carrel_util_json_structure_ok(data, len, REPLY_JSON_DEPTH)) {
        g_set_error(error, CARREL_ERROR, CARREL_ERROR_HYPERVISOR,
                    "carrel-guest a11y printed no acceptable JSON (larger than %d bytes, nested "
                    "deeper than %d or malformed)",
                    CARREL_A11Y_MAX_OUTPUT_BYTES, REPLY_JSON_DEPTH);
        return NULL;
    }
    parser = json_parser_new_immutable();
    if (!json_parser_load_from_data(parser, data, (gssize)len, &local) ||
        !(root = json_parser_get_root(parser)) || !JSON_NODE_HOLDS_OBJECT(root)) {
        g_set_error(error, CARREL_ERROR, CARREL_ERROR_HYPERVISOR,
                    "carrel-guest a11y printed no JSON object");
        return NULL;
    }
    return json_node_copy(root);
}

/* The walk over a guest tree: the request's bounds and the mapping of bounds. */
typedef struct {
    guint max_depth;
    guint max_nodes;
    guint count;
    guint screen_w, screen_h; /* 0: no mapping */
    guint model_w, model_h;
} Check;

static gboolean
bad(GError **error, const char *id, const char *why)
{
    g_set_error(error, CARREL_ERROR, CARREL_ERROR_HYPERVISOR, "carrel-guest a11y: element '%s': %s",
                id ? id : "?", why);
    return FALSE;
}

static gboolean
get_string(JsonObject *o, const char *member, gboolean nullable, const char **ret)
{
    JsonNode *n = json_object_get_member(o, member);

    *ret = NULL;
    if (nullable && (!n || JSON_NODE_HOLDS_NULL(n)))
        return TRUE;
    if (!carrel_conf_node_holds(n, G_TYPE_STRING))
        return FALSE;
    *ret = json_node_get_string(n);
    return TRUE;
}

/* One line of clean text of at most max characters. */
static char *
clean(const char *text, guint max)
{
    g_autofree char *line = carrel_util_clean_text(text, strlen(text), (gsize)max * 4);
    const char *end = g_utf8_offset_to_pointer(line, MIN((glong)max, g_utf8_strlen(line, -1)));

    return g_strndup(line, (gsize)(end - line));
}

static gboolean
is_state_name(const char *s)
{
    gsize len = strlen(s);

    if (len == 0 || len > STATE_NAME_MAX)
        return FALSE;
    for (gsize i = 0; i < len; i++) {
        if (!g_ascii_islower(s[i]) && s[i] != '-')
            return FALSE;
    }
    return TRUE;
}

static gboolean
copy_states(JsonObject *in, JsonObject *out, const char *id, GError **error)
{
    JsonNode *n = json_object_get_member(in, "states");
    JsonArray *a = n && JSON_NODE_HOLDS_ARRAY(n) ? json_node_get_array(n) : NULL;
    JsonArray *states = json_array_new();

    json_object_set_array_member(out, "states", states);
    if (!a || json_array_get_length(a) > CARREL_A11Y_MAX_STATES)
        return bad(error, id, "'states' must be an array of at most 64 names");
    for (guint i = 0; i < json_array_get_length(a); i++) {
        JsonNode *s = json_array_get_element(a, i);

        if (!carrel_conf_node_holds(s, G_TYPE_STRING) || !is_state_name(json_node_get_string(s)))
            return bad(error, id, "a state is not a name of lowercase letters and '-'");
        json_array_add_string_element(states, json_node_get_string(s));
    }
    return TRUE;
}

static gboolean
get_coordinate(JsonObject *o, const char *member, gint64 *ret)
{
    JsonNode *n = json_object_get_member(o, member);

    if (!carrel_conf_node_holds(n, G_TYPE_INT64))
        return FALSE;
    *ret = json_node_get_int(n);
    return TRUE;
}

static gboolean
in_range(gint64 v, gboolean size)
{
    return v <= CARREL_A11Y_MAX_COORDINATE && v >= (size ? 0 : -CARREL_A11Y_MAX_COORDINATE);
}

static gint64
map(gint64 v, guint model, guint screen)
{
    return screen ? v * (gint64)model / (gint64)screen : v;
}

static gboolean
copy_bounds(const Check *check, JsonObject *in, JsonObject *out, const char *id, GError **error)
{
    static const char *const members[] = {"x", "y", "width", "height", NULL};
    JsonNode *n = json_object_get_member(in, "bounds");
    JsonObject *b, *o;
    gint64 v[4];
    gboolean placed = TRUE;

    if (!n || JSON_NODE_HOLDS_NULL(n)) {
        json_object_set_null_member(out, "bounds");
        return TRUE;
    }
    b = JSON_NODE_HOLDS_OBJECT(n) ? json_node_get_object(n) : NULL;
    if (!b || json_object_get_size(b) != 4)
        return bad(error, id, "'bounds' must be null or {x, y, width, height}");
    for (guint i = 0; i < 4; i++) {
        if (!get_coordinate(b, members[i], &v[i]))
            return bad(error, id, "a bound is not an integer");
        placed = placed && in_range(v[i], i >= 2);
    }
    /* AT-SPI says "nowhere" with INT_MIN (GTK's unmapped widgets, e.g. a hidden panel button):
     * such an element, or one placed past any screen, has no bounds. */
    if (!placed) {
        json_object_set_null_member(out, "bounds");
        return TRUE;
    }
    o = json_object_new();
    json_object_set_int_member(o, "x", map(v[0], check->model_w, check->screen_w));
    json_object_set_int_member(o, "y", map(v[1], check->model_h, check->screen_h));
    json_object_set_int_member(o, "width", map(v[2], check->model_w, check->screen_w));
    json_object_set_int_member(o, "height", map(v[3], check->model_h, check->screen_h));
    json_object_set_object_member(out, "bounds", o);
    return TRUE;
}

/* The node's own members (all but children), checked and cleaned into out. */
static gboolean
copy_fields(const Check *check, JsonObject *in, const char *id, JsonObject *out, GError **error)
{
    const char *role, *name, *action;
    g_autofree char *role_clean = NULL;
    g_autofree char *name_clean = NULL;
    g_autofree char *action_clean = NULL;

    if (!get_string(in, "role", FALSE, &role) || !get_string(in, "name", FALSE, &name) ||
        !get_string(in, "action", TRUE, &action))
        return bad(error, id, "'role' and 'name' must be strings, 'action' a string or null");
    role_clean = clean(role, CARREL_A11Y_MAX_ROLE_CHARS);
    name_clean = clean(name, CARREL_A11Y_MAX_NAME_CHARS);
    json_object_set_string_member(out, "id", id);
    json_object_set_string_member(out, "role", role_clean);
    json_object_set_string_member(out, "name", name_clean);
    if (!copy_states(in, out, id, error) || !copy_bounds(check, in, out, id, error))
        return FALSE;
    if (action) {
        action_clean = clean(action, CARREL_A11Y_MAX_ROLE_CHARS);
        json_object_set_string_member(out, "action", action_clean);
    } else {
        json_object_set_null_member(out, "action");
    }
    return TRUE;
}

static JsonNode *copy_node(Check *check, JsonNode *node, const char *expected_id, guint level,
                           GError **error);

static gboolean
copy_children(Check *check, JsonObject *in, const char *id, guint level, JsonObject *out,
              GError **error)
{
    JsonNode *n = json_object_get_member(in, "children");
    JsonArray *a = n && JSON_NODE_HOLDS_ARRAY(n) ? json_node_get_array(n) : NULL;
    JsonArray *children = json_array_new();
    g_autofree char *prefix = *id ? g_strdup_printf("%s.", id) : g_strdup("");

    json_object_set_array_member(out, "children", children);
    if (!a)
        return bad(error, id, "'children' must be an array");
    if (json_array_get_length(a) > 0 && level >= check->max_depth)
        return bad(error, id, "the tree is deeper than asked");
    for (guint i = 0; i < json_array_get_length(a); i++) {
        JsonNode *child = json_array_get_element(a, i);
        JsonNode *child_id = JSON_NODE_HOLDS_OBJECT(child)
                                 ? json_object_get_member(json_node_get_object(child), "id")
                                 : NULL;
        const char *cid =
            carrel_conf_node_holds(child_id, G_TYPE_STRING) ? json_node_get_string(child_id) : "";
        JsonNode *copy;

        /* A child's id is its parent's and one more index: ids stay paths from the desktop. */
        if (!g_str_has_prefix(cid, prefix) || strchr(cid + strlen(prefix), '.'))
            return bad(error, id, "a child's id is not the parent's with one more index");
        if (!(copy = copy_node(check, child, cid, level + 1, error)))
            return FALSE;
        json_array_add_element(children, copy);
    }
    return TRUE;
}

static JsonNode *
copy_node(Check *check, JsonNode *node, const char *expected_id, guint level, GError **error)
{
    g_autoptr(JsonNode) out = carrel_conf_new_object_node();
    JsonObject *in = node && JSON_NODE_HOLDS_OBJECT(node) ? json_node_get_object(node) : NULL;
    g_autoptr(GError) local = NULL;

    if (!in) {
        bad(error, expected_id, "not an object");
        return NULL;
    }
    if (++check->count > check->max_nodes) {
        bad(error, expected_id, "more elements than asked");
        return NULL;
    }
    if (!carrel_conf_check_members(in, node_members, &local)) {
        bad(error, expected_id, "unknown member");
        return NULL;
    }
    /* The desktop's id is ""; every other must be a path of indexes. */
    if ((*expected_id || level > 0) && !carrel_a11y_check_id(expected_id, NULL)) {
        bad(error, "?", "malformed id");
        return NULL;
    }
    if (!copy_fields(check, in, expected_id, json_node_get_object(out), error) ||
        !copy_children(check, in, expected_id, level, json_node_get_object(out), error))
        return NULL;
    return g_steal_pointer(&out);
}

JsonNode *
carrel_a11y_tree_from_guest(JsonNode *reply, const CarrelA11yRequest *req, guint screen_w,
                            guint screen_h, GError **error)
{
    static const char *const members[] = {"scope", "root", "count", "truncated", NULL};
    Check check = {.max_depth = req->depth, .max_nodes = req->max_nodes};
    JsonObject *o = JSON_NODE_HOLDS_OBJECT(reply) ? json_node_get_object(reply) : NULL;
    JsonNode *root = o ? json_object_get_member(o, "root") : NULL;
    JsonNode *truncated = o ? json_object_get_member(o, "truncated") : NULL;
    const char *scope = NULL;
    const char *root_id = NULL;
    g_autoptr(JsonNode) tree = NULL;
    g_autoptr(JsonNode) out = NULL;
    JsonObject *oo;

    if (!o || !carrel_conf_check_members(o, members, NULL) ||
        !get_string(o, "scope", FALSE, &scope) ||
        (!g_str_equal(scope, "focused") && !g_str_equal(scope, "desktop")) ||
        !carrel_conf_node_holds(truncated, G_TYPE_BOOLEAN) || !root ||
        !JSON_NODE_HOLDS_OBJECT(root) ||
        !get_string(json_node_get_object(root), "id", FALSE, &root_id)) {
        g_set_error(error, CARREL_ERROR, CARREL_ERROR_HYPERVISOR,
                    "carrel-guest a11y: the reply is not {scope, root, count, truncated}");
        return NULL;
    }
    /* The desktop's root is "" and nothing else; a focused window's is an element id. */
    if (g_str_equal(scope, "desktop") != (*root_id == '\0')) {
        bad(error, root_id, "the root does not match the scope");
        return NULL;
    }
    if (req->model_width && screen_w && screen_h) {
        check.screen_w = screen_w;
        check.screen_h = screen_h;
        check.model_w = req->model_width;
        check.model_h = req->model_height;
    }
    if (!(tree = copy_node(&check, root, root_id, 0, error)))
        return NULL;
    out = carrel_conf_new_object_node();
    oo = json_node_get_object(out);
    json_object_set_string_member(oo, "scope", scope);
    json_object_set_int_member(oo, "count", check.count);
    json_object_set_boolean_member(oo, "truncated", json_node_get_boolean(truncated));
    if (check.screen_w) {
        JsonObject *m = json_object_new();

        json_object_set_int_member(m, "width", check.model_w);
        json_object_set_int_member(m, "height", check.model_h);
        json_object_set_object_member(oo, "model_screen", m);
    }
    json_object_set_member(oo, "root", g_steal_pointer(&tree));
    return g_steal_pointer(&out);
}

JsonNode *
carrel_a11y_node_from_guest(JsonNode *reply, const char *id, GError **error)
{
    Check check = {.max_nodes = 1};
    JsonObject *o = JSON_NODE_HOLDS_OBJECT(reply) ? json_node_get_object(reply) : NULL;
    JsonNode *node = o ? json_object_get_member(o, "node") : NULL;
    JsonObject *in = node && JSON_NODE_HOLDS_OBJECT(node) ? json_node_get_object(node) : NULL;
    g_autoptr(JsonNode) out = carrel_conf_new_object_node();
    const char *got = NULL;

    if (!in || json_object_has_member(in, "children") ||
        !carrel_conf_check_members(in, node_members, NULL) || !get_string(in, "id", FALSE, &got) ||
        !g_str_equal(got, id)) {
        bad(error, id, "the reply is not {node: {id, role, name, states, bounds, action}}");
        return NULL;
    }
    if (!copy_fields(&check, in, id, json_node_get_object(out), error))
        return NULL;
    return g_steal_pointer(&out);
}

gboolean
carrel_a11y_node_centre(JsonNode *node, guint width, guint height, guint *ret_x, guint *ret_y,
                        GError **error)
{
    JsonObject *o = json_node_get_object(node);
    JsonNode *b = json_object_get_member(o, "bounds");
    JsonObject *bo = b && JSON_NODE_HOLDS_OBJECT(b) ? json_node_get_object(b) : NULL;
    gint64 x, y;

    if (!bo || json_object_get_int_member(bo, "width") < 1 ||
        json_object_get_int_member(bo, "height") < 1) {
        g_set_error(error, CARREL_ERROR, CARREL_ERROR_WRONG_STATE,
                    "element '%s' has no size on the screen (hidden?); try mode 'action'",
                    json_object_get_string_member(o, "id"));
        return FALSE;
    }
    x = json_object_get_int_member(bo, "x") + json_object_get_int_member(bo, "width") / 2;
    y = json_object_get_int_member(bo, "y") + json_object_get_int_member(bo, "height") / 2;
    if (x < 0 || y < 0 || x >= width || y >= height) {
        g_set_error(error, CARREL_ERROR, CARREL_ERROR_WRONG_STATE,
                    "element '%s' is off the screen (centre %" G_GINT64_FORMAT ",%" G_GINT64_FORMAT
                    " on %ux%u); try mode 'action'",
                    json_object_get_string_member(o, "id"), x, y, width, height);
        return FALSE;
    }
    *ret_x = (guint)x;
    *ret_y = (guint)y;
    return TRUE;
}
