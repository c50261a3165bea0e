/* Unit: the accessibility tree's request, element ids, the click_element action, and
 * carrel-guest a11y replies checked as untrusted input (conf-a11y.c). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <string.h>

#include "conf/conf.h"

#define BUTTON                                                                                     \
    "{\"id\":\"0.0.1\",\"role\":\"push button\",\"name\":\"Increment\",\"states\":[\"enabled\","   \
    "\"focusable\"],\"bounds\":{\"x\":100,\"y\":50,\"width\":80,\"height\":30},\"action\":"        \
    "\"click\",\"children\":[]}"
#define LABEL                                                                                      \
    "{\"id\":\"0.0.0\",\"role\":\"label\",\"name\":\"Count: 0\",\"states\":[],\"bounds\":null,"    \
    "\"action\":null,\"children\":[]}"
#define FRAME(children)                                                                            \
    "{\"id\":\"0.0\",\"role\":\"frame\",\"name\":\"carrel demo\",\"states\":[\"active\"],"         \
    "\"bounds\":{\"x\":0,\"y\":0,\"width\":400,\"height\":200},\"action\":null,\"children\":"      \
    "[" children "]}"
#define REPLY(root) "{\"scope\":\"focused\",\"root\":" root ",\"count\":3,\"truncated\":false}"

static JsonNode *
parse(const char *text)
{
    g_autoptr(GError) error = NULL;
    JsonNode *node = carrel_a11y_reply_parse(text, strlen(text), &error);

    if (!node)
        fail_msg("%s", error->message);
    return node;
}

static CarrelA11yRequest
request(guint depth, guint max_nodes)
{
    CarrelA11yRequest req = {.depth = depth, .max_nodes = max_nodes};

    return req;
}

static JsonNode *
tree(const char *text, const CarrelA11yRequest *req, GError **error)
{
    g_autoptr(JsonNode) reply = parse(text);

    return carrel_a11y_tree_from_guest(reply, req, 0, 0, error);
}

static void
test_tree_clean(void **state)
{
    g_autoptr(GError) error = NULL;
    CarrelA11yRequest req = request(12, 500);
    g_autoptr(JsonNode) out = tree(REPLY(FRAME(LABEL "," BUTTON)), &req, &error);
    g_autofree char *text = NULL;

    assert_null(error);
    text = json_to_string(out, FALSE);
    assert_string_equal(
        text, "{\"scope\":\"focused\",\"count\":3,\"truncated\":false,\"root\":{\"id\":\"0.0\","
              "\"role\":\"frame\",\"name\":\"carrel demo\",\"states\":[\"active\"],\"bounds\":{"
              "\"x\":0,\"y\":0,\"width\":400,\"height\":200},\"action\":null,\"children\":["
              "{\"id\":\"0.0.0\",\"role\":\"label\",\"name\":\"Count: 0\",\"states\":[],"
              "\"bounds\":null,\"action\":null,\"children\":[]},{\"id\":\"0.0.1\",\"role\":"
              "\"push button\",\"name\":\"Increment\",\"states\":[\"enabled\",\"focusable\"],"
              "\"bounds\":{\"x\":100,\"y\":50,\"width\":80,\"height\":30},\"action\":\"click\","
              "\"children\":[]}]}}");
}

static void
test_tree_scaled(void **state)
{
    g_autoptr(GError) error = NULL;
    CarrelA11yRequest req = {
        .depth = 12, .max_nodes = 500, .model_width = 512, .model_height = 384};
    g_autoptr(JsonNode) reply = parse(REPLY(FRAME(BUTTON)));
    g_autoptr(JsonNode) out = carrel_a11y_tree_from_guest(reply, &req, 1024, 768, &error);
    JsonObject *root, *b;

    assert_non_null(out);
    root = json_object_get_object_member(json_node_get_object(out), "root");
    b = json_object_get_object_member(
        json_array_get_object_element(json_object_get_array_member(root, "children"), 0), "bounds");
    assert_int_equal(json_object_get_int_member(b, "x"), 50);
    assert_int_equal(json_object_get_int_member(b, "width"), 40);
    assert_int_equal(json_object_get_int_member(b, "y"), 25);
    assert_int_equal(
        json_object_get_int_member(
            json_object_get_object_member(json_node_get_object(out), "model_screen"), "width"),
        512);
}

/* Names and roles come out as one line of clean text, cut to their limits. */
static void
test_tree_text_cleaned(void **state)
{
    g_autoptr(GError) error = NULL;
    CarrelA11yRequest req = request(12, 500);
    g_autofree char *long_name = g_strnfill(3000, 'x');
    g_autofree char *text = g_strdup_printf(
        REPLY("{\"id\":\"1\",\"role\":\"a\\u001b[31mb\",\"name\":\"%s\",\"states\":[],\"bounds\""
              ":null,\"action\":\"x\\ny\",\"children\":[]}"),
        long_name);
    g_autoptr(JsonNode) out = tree(text, &req, &error);
    JsonObject *root;

    assert_non_null(out);
    root = json_object_get_object_member(json_node_get_object(out), "root");
    assert_true(carrel_util_is_clean_text(json_object_get_string_member(root, "role")));
    assert_true(carrel_util_is_clean_text(json_object_get_string_member(root, "action")));
    assert_int_equal(strlen(json_object_get_string_member(root, "name")),
                     CARREL_A11Y_MAX_NAME_CHARS);
}

/* Elements AT-SPI places nowhere (GTK's unmapped widgets say INT_MIN: a hidden panel button
 * of Xfce did), past any screen, or with a negative size: kept in the tree, with no bounds. */
static void
test_tree_unplaced(void **state)
{
    static const char *const bounds[] = {
        "{\"x\":-2147483648,\"y\":-2147483648,\"width\":1,\"height\":1}",
        "{\"x\":99999999,\"y\":0,\"width\":1,\"height\":1}",
        "{\"x\":0,\"y\":0,\"width\":-1,\"height\":1}",
    };
    CarrelA11yRequest req = request(12, 500);

    (void)state;
    for (guint i = 0; i < G_N_ELEMENTS(bounds); i++) {
        g_autoptr(GError) error = NULL;
        g_autofree char *text = g_strdup_printf(
            REPLY(FRAME("{\"id\":\"0.0.0\",\"role\":\"toggle button\",\"name\":\"Firefox\","
                        "\"states\":[\"enabled\"],\"bounds\":%s,\"action\":\"press\","
                        "\"children\":[]}")),
            bounds[i]);
        g_autoptr(JsonNode) out = tree(text, &req, &error);
        JsonObject *root, *child;

        if (!out)
            fail_msg("refused %s: %s", bounds[i], error->message);
        root = json_object_get_object_member(json_node_get_object(out), "root");
        child = json_array_get_object_element(json_object_get_array_member(root, "children"), 0);
        assert_string_equal(json_object_get_string_member(child, "name"), "Firefox");
        assert_true(json_object_has_member(child, "bounds"));
        assert_null(json_object_get_object_member(child, "bounds"));
        /* The frame around it keeps its own. */
        assert_non_null(json_object_get_object_member(root, "bounds"));
    }
}

static void
expect_refused(const char *text, const CarrelA11yRequest *req, const char *fragment)
{
    g_autoptr(GError) error = NULL;
    g_autoptr(JsonNode) reply = NULL;
    g_autoptr(JsonNode) out = NULL;

    reply = carrel_a11y_reply_parse(text, strlen(text), &error);
    if (reply)
        out = carrel_a11y_tree_from_guest(reply, req, 0, 0, &error);
    if (out)
        fail_msg("accepted: %s", text);
    assert_true(g_error_matches(error, CARREL_ERROR, CARREL_ERROR_HYPERVISOR));
    if (fragment && !strstr(error->message, fragment))
        fail_msg("'%s' not in '%s'", fragment, error->message);
}

static void
test_tree_hostile(void **state)
{
    CarrelA11yRequest req = request(12, 500);
    CarrelA11yRequest shallow = request(0, 500);
    CarrelA11yRequest one = request(1, 500);
    CarrelA11yRequest few = request(12, 2);
    g_autoptr(GString) deep = g_string_new(NULL);

    expect_refused("not json", &req, NULL);
    expect_refused("[1,2]", &req, "no JSON object");
    expect_refused("{\"scope\":\"focused\"}", &req, "not {scope");
    /* Deeper than asked: children under a root of depth 0, grandchildren under depth 1. */
    expect_refused(REPLY(FRAME(LABEL)), &shallow, "deeper");
    expect_refused(REPLY(FRAME("{\"id\":\"0.0.0\",\"role\":\"r\",\"name\":\"\",\"states\":[],"
                               "\"bounds\":null,\"action\":null,\"children\":[" BUTTON "]}")),
                   &one, NULL);
    expect_refused(REPLY(FRAME(LABEL "," BUTTON)), &few, "more elements");
    /* Wrong types, one member at a time. */
    expect_refused(REPLY("{\"id\":\"0\",\"role\":7,\"name\":\"\",\"states\":[],\"bounds\":null,"
                         "\"action\":null,\"children\":[]}"),
                   &req, "'role'");
    expect_refused(REPLY("{\"id\":\"0\",\"role\":\"r\",\"name\":\"\",\"states\":[1],\"bounds\""
                         ":null,\"action\":null,\"children\":[]}"),
                   &req, "state");
    expect_refused(REPLY("{\"id\":\"0\",\"role\":\"r\",\"name\":\"\",\"states\":[\"A B\"],"
                         "\"bounds\":null,\"action\":null,\"children\":[]}"),
                   &req, "state");
    expect_refused(REPLY("{\"id\":\"0\",\"role\":\"r\",\"name\":\"\",\"states\":[],\"bounds\":"
                         "{\"x\":1.5,\"y\":0,\"width\":1,\"height\":1},\"action\":null,"
                         "\"children\":[]}"),
                   &req, "bound");
    expect_refused(REPLY("{\"id\":\"0\",\"role\":\"r\",\"name\":\"\",\"states\":[],\"bounds\":"
                         "{\"x\":0,\"y\":0,\"width\":\"1\",\"height\":1},\"action\":null,"
                         "\"children\":[]}"),
                   &req, "bound");
    expect_refused(REPLY("{\"id\":\"0\",\"role\":\"r\",\"name\":\"\",\"states\":[],\"bounds\":"
                         "null,\"action\":null,\"children\":{}}"),
                   &req, "'children'");
    expect_refused(REPLY("{\"id\":\"0\",\"role\":\"r\",\"name\":\"\",\"states\":[],\"bounds\":"
                         "null,\"action\":null,\"children\":[],\"script\":\"x\"}"),
                   &req, "unknown member");
    /* Ids must keep the tree's shape: a child elsewhere, or a malformed one. */
    expect_refused(REPLY(FRAME("{\"id\":\"3.1\",\"role\":\"r\",\"name\":\"\",\"states\":[],"
                               "\"bounds\":null,\"action\":null,\"children\":[]}")),
                   &req, "parent's");
    expect_refused(REPLY(FRAME("{\"id\":\"0.0.01\",\"role\":\"r\",\"name\":\"\",\"states\":[],"
                               "\"bounds\":null,\"action\":null,\"children\":[]}")),
                   &req, "malformed id");
    /* A focused root is an element, the desktop's is "". */
    expect_refused("{\"scope\":\"desktop\",\"root\":" LABEL ",\"count\":1,\"truncated\":false}",
                   &req, "scope");
    /* Nested past what any tree needs: refused before json-glib recurses into it. */
    for (guint i = 0; i < 10000; i++)
        g_string_append_c(deep, '[');
    expect_refused(deep->str, &req, "nested");
}

static void
test_node(void **state)
{
    g_autoptr(GError) error = NULL;
    g_autoptr(JsonNode) reply = parse("{\"node\":{\"id\":\"0.0.1\",\"role\":\"push button\","
                                      "\"name\":\"Increment\",\"states\":[],\"bounds\":{\"x\":"
                                      "100,\"y\":50,\"width\":80,\"height\":30},\"action\":"
                                      "\"click\"}}");
    g_autoptr(JsonNode) node = carrel_a11y_node_from_guest(reply, "0.0.1", &error);
    g_autoptr(JsonNode) other = NULL;
    guint x = 0, y = 0;

    assert_non_null(node);
    assert_true(carrel_a11y_node_centre(node, 1024, 768, &x, &y, &error));
    assert_int_equal(x, 140);
    assert_int_equal(y, 65);
    /* Off the screen: no click. */
    assert_false(carrel_a11y_node_centre(node, 100, 768, &x, &y, &error));
    assert_true(g_error_matches(error, CARREL_ERROR, CARREL_ERROR_WRONG_STATE));
    g_clear_error(&error);
    /* The guest answered for another element. */
    other = carrel_a11y_node_from_guest(reply, "0.0.2", &error);
    assert_null(other);
    assert_true(g_error_matches(error, CARREL_ERROR, CARREL_ERROR_HYPERVISOR));
}

static void
test_ids(void **state)
{
    static const char *const good[] = {"0", "12", "0.0.1", "3.10.0"};
    static const char *const bad[] = {"",     ".", "1.", ".1",  "1..2", "-1",  "01",
                                      "1.02", "a", "1 ", "0x1", "1/2",  "1.-1"};
    g_autofree char *long_id = g_strnfill(CARREL_A11Y_MAX_ID_LEN + 1, '1');

    for (guint i = 0; i < G_N_ELEMENTS(good); i++) {
        if (!carrel_a11y_check_id(good[i], NULL))
            fail_msg("'%s' refused", good[i]);
    }
    for (guint i = 0; i < G_N_ELEMENTS(bad); i++) {
        g_autoptr(GError) error = NULL;

        if (carrel_a11y_check_id(bad[i], &error))
            fail_msg("'%s' accepted", bad[i]);
        assert_true(g_error_matches(error, CARREL_ERROR, CARREL_ERROR_INVALID_ARG));
    }
    assert_false(carrel_a11y_check_id(long_id, NULL));
    assert_false(carrel_a11y_check_id(NULL, NULL));
}

static GHashTable *
query(const char *first, ...)
{
    GHashTable *q = g_hash_table_new_full(g_str_hash, g_str_equal, g_free, g_free);
    va_list ap;
    const char *key = first;

    va_start(ap, first);
    while (key) {
        g_hash_table_insert(q, g_strdup(key), g_strdup(va_arg(ap, const char *)));
        key = va_arg(ap, const char *);
    }
    va_end(ap);
    return q;
}

static void
test_request(void **state)
{
    CarrelA11yRequest req;
    g_autoptr(GError) error = NULL;
    g_autoptr(GHashTable) full = query("scope", "desktop", "depth", "3", "max_nodes", "9",
                                       "model_width", "640", "model_height", "480", NULL);
    GHashTable *bad[] = {
        query("scope", "all", NULL),
        query("depth", "33", NULL),
        query("max_nodes", "0", NULL),
        query("max_nodes", "5001", NULL),
        query("depth", "-1", NULL),
        query("model_width", "640", NULL),
        query("colour", "blue", NULL),
        query("depth", "2x", NULL),
        query("app", "", NULL),
        query("app", "a\nb", NULL),
        query("app", "Firefox", "scope", "focused", NULL),
    };
    g_autoptr(GHashTable) one = query("app", "Firefox", NULL);
    g_autofree char *long_name = g_strnfill(CARREL_A11Y_MAX_APP_BYTES + 1, 'a');
    g_autoptr(GHashTable) too_long = query("app", long_name, NULL);
    g_autoptr(JsonNode) audit = NULL;

    assert_true(carrel_a11y_request_parse(NULL, &req, &error));
    assert_false(req.desktop);
    assert_int_equal(req.depth, CARREL_A11Y_DEFAULT_DEPTH);
    assert_int_equal(req.max_nodes, CARREL_A11Y_DEFAULT_NODES);
    assert_true(carrel_a11y_request_parse(full, &req, &error));
    assert_true(req.desktop);
    assert_int_equal(req.depth, 3);
    assert_int_equal(req.max_nodes, 9);
    assert_int_equal(req.model_height, 480);
    assert_null(req.app);
    /* app: the desktop, that application only; kept in the audit record. */
    assert_true(carrel_a11y_request_parse(one, &req, &error));
    assert_true(req.desktop);
    assert_string_equal(req.app, "Firefox");
    audit = carrel_a11y_request_to_json(&req);
    assert_string_equal(json_object_get_string_member(json_node_get_object(audit), "app"),
                        "Firefox");
    assert_false(carrel_a11y_request_parse(too_long, &req, &error));
    assert_true(g_error_matches(error, CARREL_ERROR, CARREL_ERROR_INVALID_ARG));
    g_clear_error(&error);
    for (guint i = 0; i < G_N_ELEMENTS(bad); i++) {
        g_autoptr(GError) e = NULL;

        if (carrel_a11y_request_parse(bad[i], &req, &e))
            fail_msg("case %u accepted", i);
        assert_true(g_error_matches(e, CARREL_ERROR, CARREL_ERROR_INVALID_ARG));
        g_hash_table_unref(bad[i]);
    }
}

static CarrelAction *
action(const char *text, GError **error)
{
    g_autoptr(JsonNode) node = json_from_string(text, NULL);

    return carrel_action_from_json(node, error);
}

static void
test_click_element_action(void **state)
{
    g_autoptr(GError) error = NULL;
    g_autoptr(CarrelAction) click =
        action("{\"action\":\"click_element\",\"element\":\"0.2\"}", &error);
    g_autoptr(CarrelAction) act =
        action("{\"action\":\"click_element\",\"element\":\"0.2.1\",\"mode\":\"action\"}", &error);
    static const char *const refused[] = {
        "{\"action\":\"click_element\"}",
        "{\"action\":\"click_element\",\"element\":\"\"}",
        "{\"action\":\"click_element\",\"element\":\"0..1\"}",
        "{\"action\":\"click_element\",\"element\":3}",
        "{\"action\":\"click_element\",\"element\":\"0\",\"mode\":\"poke\"}",
        "{\"action\":\"click_element\",\"element\":\"0\",\"x\":1}",
    };

    assert_null(error);
    assert_int_equal(click->kind, CARREL_ACTION_CLICK_ELEMENT);
    assert_string_equal(click->element, "0.2");
    assert_false(click->element_action);
    assert_true(act->element_action);
    assert_string_equal(carrel_action_kind_to_string(CARREL_ACTION_CLICK_ELEMENT), "click_element");
    assert_true(carrel_action_kind_sends_hid(CARREL_ACTION_CLICK_ELEMENT));
    for (guint i = 0; i < G_N_ELEMENTS(refused); i++) {
        g_autoptr(GError) e = NULL;
        g_autoptr(CarrelAction) a = action(refused[i], &e);

        if (a)
            fail_msg("accepted: %s", refused[i]);
        assert_true(g_error_matches(e, CARREL_ERROR, CARREL_ERROR_INVALID_ARG));
    }
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_tree_clean),
        cmocka_unit_test(test_tree_scaled),
        cmocka_unit_test(test_tree_text_cleaned),
        cmocka_unit_test(test_tree_unplaced),
        cmocka_unit_test(test_tree_hostile),
        cmocka_unit_test(test_node),
        cmocka_unit_test(test_ids),
        cmocka_unit_test(test_request),
        cmocka_unit_test(test_click_element_action),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
