/* carrel-guest a11y: the tree builder over a fake source of elements (no D-Bus), its ids, limits
 * and JSON, and the a11y options. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <string.h>

#include "guest.h"

/* A fake element: a static description and children. */
typedef struct FakeNode FakeNode;
struct FakeNode {
    const char *role;
    const char *name;
    guint64 states;
    gboolean has_bounds;
    int x, y, w, h;
    const char *action;
    FakeNode *const *children;
    gboolean vanishes; /* describe fails: gone between two calls */
};

typedef struct {
    FakeNode *desktop;
    guint children_calls;
} Fake;

static GPtrArray *
fake_children(gpointer source, gconstpointer element, guint max, GError **error)
{
    Fake *fake = source;
    const FakeNode *node = element ? element : fake->desktop;
    GPtrArray *list = g_ptr_array_new(); /* handles are borrowed: nothing to free */

    fake->children_calls++;
    for (guint i = 0; node->children && node->children[i] && list->len < max; i++)
        g_ptr_array_add(list, node->children[i]);
    return list;
}

static gboolean
fake_describe(gpointer source, gconstpointer element, CarrelGuestA11yInfo *ret_info, GError **error)
{
    const FakeNode *node = element;

    if (node->vanishes) {
        g_set_error(error, CARREL_GUEST_ERROR, CARREL_GUEST_ERROR_NOT_FOUND, "gone");
        return FALSE;
    }
    ret_info->role = g_strdup(node->role);
    ret_info->name = g_strdup(node->name);
    ret_info->states = node->states;
    ret_info->has_bounds = node->has_bounds;
    ret_info->x = node->x;
    ret_info->y = node->y;
    ret_info->width = node->w;
    ret_info->height = node->h;
    ret_info->action = g_strdup(node->action);
    return TRUE;
}

static void
no_free(gpointer data)
{
}

static const CarrelGuestA11yOps fake_ops = {fake_children, fake_describe, no_free};

#define ST(n) (G_GUINT64_CONSTANT(1) << (n))
static FakeNode increment = {
    "push button", "Increment", ST(8) | ST(11) | ST(24) | ST(39), TRUE, 10, 40, 80, 30, "click",
    NULL,          FALSE};
static FakeNode reset = {"push button", "Reset", ST(8), TRUE, 100, 40, 60, 30,
                         "click",       NULL,    FALSE};
static FakeNode label = {"label", "Count: 0", 0, TRUE, 10, 80, 90, 20, NULL, NULL, FALSE};
static FakeNode ghost = {"label", "ghost", 0, FALSE, 0, 0, 0, 0, NULL, NULL, TRUE};
static FakeNode *const panel_children[] = {&increment, &reset, &ghost, &label, NULL};
static FakeNode panel = {"panel", "", 0, TRUE, 0, 30, 200, 100, NULL, panel_children, FALSE};
static FakeNode *const frame_children[] = {&panel, NULL};
static FakeNode frame = {"frame", "carrel demo", ST(1) | ST(8), TRUE,           0,    0,
                         200,     130,           NULL,          frame_children, FALSE};
static FakeNode other_frame = {"frame", "xterm", ST(8), TRUE, 300, 0, 100, 100, NULL, NULL, FALSE};
static FakeNode *const app0_children[] = {&other_frame, NULL};
static FakeNode *const app1_children[] = {&frame, NULL};
static FakeNode app0 = {"application", "xterm", 0, FALSE, 0, 0, 0, 0, NULL, app0_children, FALSE};
static FakeNode app1 = {"application", "carrel-demo", 0,    FALSE, 0, 0, 0, 0,
                        NULL,          app1_children, FALSE};
static FakeNode *const desktop_children[] = {&app0, &app1, NULL};
static FakeNode desktop = {"desktop frame",  "main", 0, FALSE, 0, 0, 0, 0, NULL,
                           desktop_children, FALSE};

static JsonObject *
child(JsonObject *node, guint i)
{
    JsonArray *children = json_object_get_array_member(node, "children");

    assert_true(i < json_array_get_length(children));
    return json_array_get_object_element(children, i);
}

static void
test_desktop_tree(void **state)
{
    Fake fake = {&desktop, 0};
    g_autoptr(GError) error = NULL;
    g_autoptr(JsonNode) tree = carrel_guest_a11y_tree(&fake_ops, &fake, NULL, 12, 500, &error);
    JsonObject *root, *button;
    JsonArray *states;
    g_autofree char *text = NULL;

    assert_null(error);
    assert_non_null(tree);
    root = json_object_get_object_member(json_node_get_object(tree), "root");
    assert_string_equal(json_object_get_string_member(json_node_get_object(tree), "scope"),
                        "desktop");
    assert_false(json_object_get_boolean_member(json_node_get_object(tree), "truncated"));
    /* desktop, 2 apps, 2 frames, panel, 3 live children (the vanished one left out) */
    assert_int_equal(json_object_get_int_member(json_node_get_object(tree), "count"), 9);
    assert_string_equal(json_object_get_string_member(root, "id"), "");
    button = child(child(child(child(root, 1), 0), 0), 0);
    assert_string_equal(json_object_get_string_member(button, "id"), "1.0.0.0");
    assert_string_equal(json_object_get_string_member(button, "name"), "Increment");
    assert_string_equal(json_object_get_string_member(button, "role"), "push button");
    assert_string_equal(json_object_get_string_member(button, "action"), "click");
    assert_int_equal(
        json_object_get_int_member(json_object_get_object_member(button, "bounds"), "width"), 80);
    states = json_object_get_array_member(button, "states");
    assert_int_equal(json_array_get_length(states), 4);
    assert_string_equal(json_array_get_string_element(states, 0), "enabled");
    assert_string_equal(json_array_get_string_element(states, 3), "is-default");
    /* The label keeps its index (3) although the element before it vanished. */
    assert_string_equal(
        json_object_get_string_member(child(child(child(child(root, 1), 0), 0), 2), "id"),
        "1.0.0.3");
    assert_true(json_object_get_null_member(child(root, 0), "bounds"));
    text = carrel_guest_json_to_string(tree);
    assert_non_null(strstr(text, "\"Count: 0\""));
}

static void
test_limits(void **state)
{
    Fake fake = {&desktop, 0};
    g_autoptr(GError) error = NULL;
    g_autoptr(JsonNode) shallow = carrel_guest_a11y_tree(&fake_ops, &fake, NULL, 1, 500, &error);
    g_autoptr(JsonNode) few = carrel_guest_a11y_tree(&fake_ops, &fake, NULL, 12, 4, &error);
    g_autoptr(JsonNode) leaf = carrel_guest_a11y_tree(&fake_ops, &fake, "1.0.0.3", 12, 500, &error);
    JsonObject *o;

    assert_null(error);
    o = json_node_get_object(shallow);
    assert_int_equal(json_object_get_int_member(o, "count"), 3);
    assert_true(json_object_get_boolean_member(o, "truncated"));
    o = json_node_get_object(few);
    assert_int_equal(json_object_get_int_member(o, "count"), 4);
    assert_true(json_object_get_boolean_member(o, "truncated"));
    /* Breadth first: both applications before any window. */
    assert_int_equal(json_array_get_length(json_object_get_array_member(
                         json_object_get_object_member(o, "root"), "children")),
                     2);
    o = json_node_get_object(leaf);
    assert_int_equal(json_object_get_int_member(o, "count"), 1);
    assert_false(json_object_get_boolean_member(o, "truncated"));
    assert_string_equal(json_object_get_string_member(o, "scope"), "focused");
}

/* Many elements with long names: the reply stops short of carreld's 1 MiB, saying so. */
static void
test_byte_budget(void **state)
{
    g_autofree char *name = g_strnfill(CARREL_GUEST_LIMIT_A11Y_NAME_CHARS, 'n');
    FakeNode leaf = {"label", name, 0, TRUE, 1, 1, 1, 1, NULL, NULL, FALSE};
    g_autofree FakeNode **many = g_new0(FakeNode *, 4001);
    FakeNode root = {"desktop frame", "main", 0, FALSE, 0, 0, 0, 0, NULL, NULL, FALSE};
    Fake fake = {&root, 0};
    g_autoptr(GError) error = NULL;
    g_autoptr(JsonNode) tree = NULL;
    g_autofree char *text = NULL;

    for (guint i = 0; i < 4000; i++)
        many[i] = &leaf;
    root.children = many;
    tree =
        carrel_guest_a11y_tree(&fake_ops, &fake, NULL, 12, CARREL_GUEST_LIMIT_A11Y_NODES, &error);
    assert_non_null(tree);
    text = carrel_guest_json_to_string(tree);
    assert_true(strlen(text) <= CARREL_GUEST_LIMIT_A11Y_JSON_BYTES);
    assert_true(json_object_get_boolean_member(json_node_get_object(tree), "truncated"));
    assert_true(json_object_get_int_member(json_node_get_object(tree), "count") > 100);
}

/* The id of the first element named name (depth first), or NULL. */
static const char *
find_named(JsonObject *node, const char *name)
{
    JsonArray *children = json_object_get_array_member(node, "children");

    if (g_str_equal(json_object_get_string_member(node, "name"), name))
        return json_object_get_string_member(node, "id");
    for (guint i = 0; children && i < json_array_get_length(children); i++) {
        const char *id = find_named(json_array_get_object_element(children, i), name);

        if (id)
            return id;
    }
    return NULL;
}

/* A panel of 50 buttons beside a browser whose menus and toolbar come before its page: with a
 * budget that plain breadth-first order spends on the menus, the page's heading is still read,
 * and the chrome's containers are still listed. */
static void
test_content_first(void **state)
{
    FakeNode button = {"push button", "launcher", 0, TRUE, 1, 1, 1, 1, "click", NULL, FALSE};
    FakeNode item = {"menu item", "item", 0, TRUE, 1, 1, 1, 1, "click", NULL, FALSE};
    FakeNode heading = {"heading", "carrel heading check", 0, TRUE, 5, 5, 9, 9, NULL, NULL, FALSE};
    FakeNode *heading_list[] = {&heading, NULL};
    FakeNode section = {"section", "", 0, TRUE, 0, 0, 9, 9, NULL, heading_list, FALSE};
    FakeNode *section_list[] = {&section, NULL};
    FakeNode doc = {"document web", "page", 0, TRUE, 0, 0, 9, 9, NULL, section_list, FALSE};
    FakeNode *doc_list[] = {&doc, NULL};
    FakeNode iframe = {"internal frame", "", 0, TRUE, 0, 0, 9, 9, NULL, doc_list, FALSE};
    FakeNode *buttons[51] = {NULL}, *items[11] = {NULL}, *menus[8] = {NULL};
    FakeNode menu = {"menu", "File", 0, TRUE, 1, 1, 1, 1, NULL, items, FALSE};
    FakeNode menubar = {"menu bar", "", 0, TRUE, 0, 0, 9, 9, NULL, menus, FALSE};
    FakeNode toolbar = {"tool bar", "Navigation", 0, TRUE, 0, 0, 9, 9, NULL, buttons, FALSE};
    FakeNode *frame_list[] = {&menubar, &toolbar, &iframe, NULL};
    FakeNode browser = {"frame", "page - Firefox", ST(1), TRUE, 0, 0, 9, 9,
                        NULL,    frame_list,       FALSE};
    FakeNode *browser_list[] = {&browser, NULL};
    FakeNode ff = {"application", "Firefox", 0, FALSE, 0, 0, 0, 0, NULL, browser_list, FALSE};
    FakeNode xpanel = {"panel", "", 0, TRUE, 0, 0, 9, 9, NULL, buttons, FALSE};
    FakeNode *xpanel_list[] = {&xpanel, NULL};
    FakeNode panel_app = {"application", "xfce4-panel", 0,    FALSE, 0, 0, 0, 0,
                          NULL,          xpanel_list,   FALSE};
    FakeNode *apps[] = {&panel_app, &ff, NULL};
    FakeNode root = {"desktop frame", "main", 0, FALSE, 0, 0, 0, 0, NULL, apps, FALSE};
    Fake fake = {&root, 0};
    g_autoptr(GError) error = NULL;
    g_autoptr(JsonNode) tree = NULL;
    JsonObject *o, *win;

    for (guint i = 0; i < 50; i++)
        buttons[i] = &button;
    for (guint i = 0; i < 10; i++)
        items[i] = &item;
    for (guint i = 0; i < 7; i++)
        menus[i] = &menu;
    /* Levels 0-3 hold 58 elements; then the page (3 more) before any menu's insides. */
    tree = carrel_guest_a11y_tree(&fake_ops, &fake, NULL, 12, 65, &error);
    assert_non_null(tree);
    o = json_node_get_object(tree);
    assert_int_equal(json_object_get_int_member(o, "count"), 65);
    assert_true(json_object_get_boolean_member(o, "truncated"));
    assert_string_equal(
        find_named(json_object_get_object_member(o, "root"), "carrel heading check"),
        "1.0.2.0.0.0");
    win = child(child(json_object_get_object_member(o, "root"), 1), 0);
    assert_int_equal(json_array_get_length(json_object_get_array_member(win, "children")), 3);
    /* The rest of the budget went to the menu bar, the first chrome waiting. */
    assert_int_equal(json_array_get_length(json_object_get_array_member(child(win, 0), "children")),
                     4);
    assert_int_equal(json_array_get_length(json_object_get_array_member(child(win, 1), "children")),
                     0);
    /* One application: the other left out, ids as in the desktop's tree. */
    json_node_unref(g_steal_pointer(&tree));
    tree = carrel_guest_a11y_tree_app(&fake_ops, &fake, "FIREFOX", 12, 65, &error);
    o = json_node_get_object(tree);
    assert_string_equal(json_object_get_string_member(o, "scope"), "desktop");
    assert_int_equal(json_array_get_length(json_object_get_array_member(
                         json_object_get_object_member(o, "root"), "children")),
                     1);
    assert_string_equal(
        json_object_get_string_member(child(json_object_get_object_member(o, "root"), 0), "id"),
        "1");
    /* The root, Firefox, its window, 3 + the page (3) + 7 menus + 49 of the 50 buttons. */
    assert_int_equal(json_object_get_int_member(o, "count"), 65);
    assert_string_equal(find_named(json_object_get_object_member(o, "root"), "launcher"),
                        "1.0.1.0");
    json_node_unref(g_steal_pointer(&tree));
    tree = carrel_guest_a11y_tree_app(&fake_ops, &fake, "Fire", 12, 65, &error);
    o = json_node_get_object(tree);
    assert_int_equal(json_object_get_int_member(o, "count"), 1);
    /* With room for everything, everything is there, in its place. */
    json_node_unref(g_steal_pointer(&tree));
    tree = carrel_guest_a11y_tree(&fake_ops, &fake, NULL, 12, 500, &error);
    o = json_node_get_object(tree);
    assert_int_equal(json_object_get_int_member(o, "count"), 61 + 7 + 70 + 50);
    assert_false(json_object_get_boolean_member(o, "truncated"));
}

static void
test_resolve_and_active(void **state)
{
    Fake fake = {&desktop, 0};
    g_autoptr(GError) error = NULL;
    g_autofree char *active = carrel_guest_a11y_find_active(&fake_ops, &fake, &error);
    const FakeNode *found;

    assert_null(error);
    assert_string_equal(active, "1.0");
    found = carrel_guest_a11y_resolve(&fake_ops, &fake, "1.0.0.1", &error);
    assert_ptr_equal(found, &reset);
    assert_null(carrel_guest_a11y_resolve(&fake_ops, &fake, "1.0.0.9", &error));
    assert_true(g_error_matches(error, CARREL_GUEST_ERROR, CARREL_GUEST_ERROR_NOT_FOUND));
    g_clear_error(&error);
    assert_null(carrel_guest_a11y_resolve(&fake_ops, &fake, "7", &error));
    assert_true(g_error_matches(error, CARREL_GUEST_ERROR, CARREL_GUEST_ERROR_NOT_FOUND));
}

static void
test_id_parse(void **state)
{
    static const char *const bad[] = {
        "",   ".",   "1.",   ".1", "1..2", "-1",  "+1",
        "01", "1.a", "4096", "1 ", " 1",   "0x1", "99999999999999999999"};
    g_autoptr(GError) error = NULL;
    g_autoptr(GArray) ok = carrel_guest_a11y_id_parse("2.0.13", &error);
    g_autoptr(GString) deep = g_string_new("0");

    assert_non_null(ok);
    assert_int_equal(ok->len, 3);
    assert_int_equal(g_array_index(ok, guint, 2), 13);
    for (guint i = 0; i < G_N_ELEMENTS(bad); i++) {
        g_autoptr(GError) e = NULL;
        g_autoptr(GArray) path = carrel_guest_a11y_id_parse(bad[i], &e);

        if (path)
            fail_msg("'%s' accepted", bad[i]);
        assert_true(g_error_matches(e, CARREL_GUEST_ERROR, CARREL_GUEST_ERROR_INVALID_ARG));
    }
    for (guint i = 0; i < 100; i++)
        g_string_append(deep, ".0");
    assert_null(carrel_guest_a11y_id_parse(deep->str, &error));
}

static void
test_node_json_clips(void **state)
{
    g_autofree char *long_name = g_strnfill(2000, 'n');
    CarrelGuestA11yInfo info = {
        .role = g_strdup("label"), .name = g_strdup(long_name), .states = ST(63) | ST(12)};
    g_autoptr(JsonNode) node = carrel_guest_a11y_node_to_json("3", &info);
    JsonObject *o = json_node_get_object(node);

    assert_int_equal(g_utf8_strlen(json_object_get_string_member(o, "name"), -1),
                     CARREL_GUEST_LIMIT_A11Y_NAME_CHARS);
    /* Unknown state bits are left out, known ones named. */
    assert_int_equal(json_array_get_length(json_object_get_array_member(o, "states")), 1);
    assert_true(json_object_get_null_member(o, "action"));
    assert_false(json_object_has_member(o, "children"));
    carrel_guest_a11y_info_clear(&info);
}

static CarrelGuestOptions *
parse(GError **error, ...)
{
    g_autoptr(GPtrArray) args = g_ptr_array_new();
    va_list ap;
    const char *arg;

    g_ptr_array_add(args, (char *)"carrel-guest");
    va_start(ap, error);
    while ((arg = va_arg(ap, const char *)))
        g_ptr_array_add(args, (char *)arg);
    va_end(ap);
    return carrel_guest_options_parse((int)args->len, (char **)args->pdata, error);
}

static void
test_options(void **state)
{
    g_autoptr(GError) error = NULL;
    g_autoptr(CarrelGuestOptions) def = parse(&error, "a11y", "tree", NULL);
    g_autoptr(CarrelGuestOptions) all =
        parse(&error, "a11y", "tree", "--window", "all", "--depth=3", "--max-nodes", "7", NULL);
    g_autoptr(CarrelGuestOptions) act = parse(&error, "a11y", "action", "1.0.2", NULL);
    g_autoptr(CarrelGuestOptions) app = parse(&error, "a11y", "tree", "--app", "Firefox", NULL);
    static const char *const refused[][5] = {
        {"a11y", "tree", "--window", "some", NULL},
        {"a11y", "tree", "--depth", "65", NULL},
        {"a11y", "tree", "--max-nodes", "0", NULL},
        {"a11y", "tree", "--max-nodes", "5001", NULL},
        {"a11y", "action", NULL},
        {"a11y", "node", "--depth", "1", "1"},
        {"a11y", "tree", "x", NULL},
        {"a11y", "tree", "--app", "", NULL},
        {"a11y", "tree", "--app", "a\nb", NULL},
        {"a11y", "node", "--app", "x", "1"},
        {"a11y", "poke", NULL},
    };

    assert_null(error);
    assert_int_equal(def->command, CARREL_GUEST_COMMAND_A11Y_TREE);
    assert_false(def->a11y_all);
    assert_int_equal(def->depth, CARREL_GUEST_DEFAULT_A11Y_DEPTH);
    assert_int_equal(def->max_nodes, CARREL_GUEST_DEFAULT_A11Y_NODES);
    assert_true(all->a11y_all);
    assert_int_equal(all->depth, 3);
    assert_int_equal(all->max_nodes, 7);
    assert_int_equal(act->command, CARREL_GUEST_COMMAND_A11Y_ACTION);
    assert_string_equal(app->a11y_app, "Firefox");
    assert_true(app->a11y_all);
    assert_null(def->a11y_app);
    assert_string_equal(act->argv[0], "1.0.2");
    assert_string_equal(carrel_guest_command_to_string(CARREL_GUEST_COMMAND_A11Y_ACTION),
                        "a11y action");
    for (guint i = 0; i < G_N_ELEMENTS(refused); i++) {
        g_autoptr(GError) e = NULL;
        g_autoptr(CarrelGuestOptions) o = parse(&e, refused[i][0], refused[i][1], refused[i][2],
                                                refused[i][3], refused[i][4], NULL);

        if (o)
            fail_msg("case %u accepted", i);
        assert_true(g_error_matches(e, CARREL_GUEST_ERROR, CARREL_GUEST_ERROR_INVALID_ARG));
    }
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_desktop_tree),       cmocka_unit_test(test_limits),
        cmocka_unit_test(test_resolve_and_active), cmocka_unit_test(test_id_parse),
        cmocka_unit_test(test_byte_budget),        cmocka_unit_test(test_content_first),
        cmocka_unit_test(test_node_json_clips),    cmocka_unit_test(test_options),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
