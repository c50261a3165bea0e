/*
 * Unit: the accessibility tree through core and the fake hypervisor, whose agent answers scripted
 * carrel-guest a11y replies (the tree, hostile replies, guest errors, the timeline), the
 * click_element action in both modes, and the route, the MCP tool and the CLI through the real
 * API in this process.
 */
#include <string.h>

#include "core-fixture.h"
#include "api/api-priv.h"
#include "client/client.h"

#define TOKEN "a11y-test-token-0123456789abcdef"

/* The fake's screen is 4x3: the button covers it, its centre is (2, 1). */
#define BUTTON_FIELDS                                                                              \
    "\"role\":\"push button\",\"name\":\"Increment\",\"states\":[\"enabled\"],\"bounds\":{\"x\":"  \
    "0,\"y\":0,\"width\":4,\"height\":3},\"action\":\"click\""
#define TREE                                                                                       \
    "{\"scope\":\"desktop\",\"root\":{\"id\":\"\",\"role\":\"desktop frame\",\"name\":\"main\","   \
    "\"states\":[],\"bounds\":null,\"action\":null,\"children\":[{\"id\":\"0\",\"role\":"          \
    "\"application\",\"name\":\"carrel-demo\",\"states\":[],\"bounds\":null,\"action\":null,"      \
    "\"children\":[{\"id\":\"0.0\"," BUTTON_FIELDS ",\"children\":[]}]}]},\"count\":3,"            \
    "\"truncated\":false}"
#define NODE "{\"node\":{\"id\":\"0.0\"," BUTTON_FIELDS "}}"
#define NOT_FOUND_REPLY                                                                            \
    "{\"error\":{\"code\":\"not_found\",\"message\":\"no element '0.7' (it may have gone away; "   \
    "read the tree again)\"}}"

static CarrelSession *
session(Fixture *fx, const char *name)
{
    g_autoptr(CarrelTemplate) tmpl G_GNUC_UNUSED = import(fx, "tiny");
    g_autoptr(GError) error = NULL;
    CarrelSession *s = create(fx, name, &error);

    if (!s)
        fail_msg("%s", error->message);
    return s;
}

static void
test_tree(void **state)
{
    Fixture *fx = *state;
    g_autoptr(CarrelSession) s = session(fx, "tree");
    CarrelA11yRequest req = {.desktop = TRUE, .depth = 5, .max_nodes = 50};
    CarrelA11yRequest scaled = {.depth = 5, .max_nodes = 50, .model_width = 8, .model_height = 6};
    g_autoptr(GError) error = NULL;
    g_autoptr(JsonNode) out = NULL;
    g_autoptr(JsonNode) big = NULL;
    g_auto(GStrv) argv = NULL;
    g_autoptr(GPtrArray) events = NULL;
    CarrelEvent *ev;
    JsonObject *b;

    carrel_hypervisor_fake_set_exec_result(fx->hv, 0, TREE, NULL);
    out = carrel_manager_session_accessibility(fx->mgr, ADMIN, s->id, &req, &error);
    if (!out)
        fail_msg("%s", error->message);
    argv = carrel_hypervisor_fake_get_exec_argv(fx->hv);
    assert_int_equal(g_strv_length(argv), 9);
    assert_string_equal(argv[1], "a11y");
    assert_string_equal(argv[2], "tree");
    assert_string_equal(argv[4], "all");
    assert_string_equal(argv[6], "5");
    assert_string_equal(argv[8], "50");
    assert_int_equal(json_object_get_int_member(json_node_get_object(out), "count"), 3);
    /* One application: its name one argument with its option, even when it looks like one. */
    g_clear_pointer(&argv, g_strfreev);
    json_node_unref(g_steal_pointer(&out));
    req.app = "--help me";
    out = carrel_manager_session_accessibility(fx->mgr, ADMIN, s->id, &req, &error);
    assert_non_null(out);
    argv = carrel_hypervisor_fake_get_exec_argv(fx->hv);
    assert_int_equal(g_strv_length(argv), 10);
    assert_string_equal(argv[9], "--app=--help me");
    /* Model pixels: the 4x3 screen seen as 8x6 doubles every bound. */
    big = carrel_manager_session_accessibility(fx->mgr, ADMIN, s->id, &scaled, &error);
    assert_non_null(big);
    b = json_object_get_object_member(
        json_array_get_object_element(
            json_object_get_array_member(
                json_array_get_object_element(
                    json_object_get_array_member(
                        json_object_get_object_member(json_node_get_object(big), "root"),
                        "children"),
                    0),
                "children"),
            0),
        "bounds");
    assert_int_equal(json_object_get_int_member(b, "width"), 8);
    assert_int_equal(json_object_get_int_member(b, "height"), 6);
    /* On the timeline: the request and the tree's size, not the tree. */
    events =
        carrel_manager_session_events(fx->mgr, ADMIN, s->id, after_create(fx, s->id), 100, &error);
    assert_non_null(events);
    assert_int_equal(events->len, 3);
    {
        g_autofree char *detail = carrel_event_detail_to_text(g_ptr_array_index(events, 1));

        assert_non_null(strstr(detail, "\"app\":\"--help me\""));
    }
    ev = g_ptr_array_index(events, 0);
    assert_string_equal(ev->action, "accessibility");
    {
        g_autofree char *detail = carrel_event_detail_to_text(ev);

        assert_non_null(strstr(detail, "\"count\":3"));
        assert_null(strstr(detail, "Increment"));
    }
}

static void
expect_tree_error(Fixture *fx, const char *id, int code, const char *reply, CarrelErrorCode want)
{
    CarrelA11yRequest req = {.depth = 12, .max_nodes = 500};
    g_autoptr(GError) error = NULL;
    g_autoptr(JsonNode) out = NULL;

    carrel_hypervisor_fake_set_exec_result(fx->hv, code, reply, NULL);
    out = carrel_manager_session_accessibility(fx->mgr, ADMIN, id, &req, &error);
    if (out)
        fail_msg("accepted: %s", reply ? reply : "(none)");
    if (!g_error_matches(error, CARREL_ERROR, (int)want))
        fail_msg("%s: got '%s'", reply ? reply : "(none)", error->message);
}

static void
test_tree_refused(void **state)
{
    Fixture *fx = *state;
    g_autoptr(CarrelSession) s = session(fx, "hostile");
    g_autofree char *huge = g_strnfill(CARREL_A11Y_MAX_OUTPUT_BYTES + 1, ' ');

    expect_tree_error(fx, s->id, 0, "garbage", CARREL_ERROR_HYPERVISOR);
    expect_tree_error(fx, s->id, 0, huge, CARREL_ERROR_HYPERVISOR);
    expect_tree_error(fx, s->id, 0, "{\"scope\":\"desktop\",\"root\":7}", CARREL_ERROR_HYPERVISOR);
    expect_tree_error(fx, s->id, 1, NOT_FOUND_REPLY, CARREL_ERROR_NOT_FOUND);
    expect_tree_error(fx, s->id, 1,
                      "{\"error\":{\"code\":\"not_found\",\"message\":\"no accessibility bus\"}}",
                      CARREL_ERROR_NOT_FOUND);
    expect_tree_error(fx, s->id, 127, NULL, CARREL_ERROR_UNSUPPORTED);
    /* An unknown session, before anything reaches a guest. */
    expect_tree_error(fx, "nope", 0, TREE, CARREL_ERROR_NOT_FOUND);
}

static JsonNode *
computer(Fixture *fx, const char *id, const char *body, GError **error)
{
    g_autoptr(JsonNode) node = json_from_string(body, NULL);

    return carrel_manager_session_computer(fx->mgr, ADMIN, id, node, error);
}

static guint
hid_sent(Fixture *fx)
{
    g_autoptr(GPtrArray) sent = carrel_hypervisor_fake_get_hid(fx->hv);

    return sent->len;
}

static void
test_click_element(void **state)
{
    Fixture *fx = *state;
    g_autoptr(CarrelSession) s = session(fx, "click");
    g_autoptr(GError) error = NULL;
    g_autoptr(JsonNode) clicked = NULL;
    g_autoptr(JsonNode) acted = NULL;
    g_auto(GStrv) argv = NULL;
    g_autofree char *text = NULL;
    guint before;

    /* mode click: the element looked up again, then a click at its centre. */
    carrel_hypervisor_fake_set_exec_result(fx->hv, 0, NODE, NULL);
    before = hid_sent(fx);
    clicked = computer(fx, s->id,
                       "{\"actions\":[{\"action\":\"click_element\",\"element\":\"0.0\"}],"
                       "\"observe\":\"none\"}",
                       &error);
    if (!clicked)
        fail_msg("%s", error->message);
    argv = carrel_hypervisor_fake_get_exec_argv(fx->hv);
    assert_string_equal(argv[2], "node");
    assert_string_equal(argv[3], "--");
    assert_string_equal(argv[4], "0.0");
    assert_true(hid_sent(fx) > before);
    text = json_to_string(clicked, FALSE);
    assert_non_null(strstr(text, "\"mode\":\"click\""));
    assert_non_null(strstr(text, "\"clicked\":{\"x\":2,\"y\":1}"));
    g_clear_pointer(&argv, g_strfreev);

    /* mode action: carrel-guest runs the default action; no pointer event. */
    carrel_hypervisor_fake_set_exec_result(
        fx->hv, 0, "{\"id\":\"0.0\",\"action\":\"click\",\"done\":true}", NULL);
    before = hid_sent(fx);
    acted = computer(fx, s->id,
                     "{\"actions\":[{\"action\":\"click_element\",\"element\":\"0.0\",\"mode\":"
                     "\"action\"}],\"observe\":\"none\"}",
                     &error);
    if (!acted)
        fail_msg("%s", error->message);
    argv = carrel_hypervisor_fake_get_exec_argv(fx->hv);
    assert_string_equal(argv[2], "action");
    assert_string_equal(argv[4], "0.0");
    assert_int_equal(hid_sent(fx), before);
    g_free(text);
    text = json_to_string(acted, FALSE);
    assert_non_null(strstr(text, "\"done\":true"));
    assert_non_null(strstr(text, "\"mode\":\"action\""));
}

static void
test_click_element_refused(void **state)
{
    Fixture *fx = *state;
    g_autoptr(CarrelSession) s = session(fx, "refused");
    static const char *const modes[] = {"click", "action"};
    guint before = hid_sent(fx);

    /* An element the tree does not have: not_found, and nothing done, in both modes. */
    for (guint i = 0; i < G_N_ELEMENTS(modes); i++) {
        g_autoptr(GError) error = NULL;
        g_autofree char *body =
            g_strdup_printf("{\"actions\":[{\"action\":\"click_element\",\"element\":\"0.7\","
                            "\"mode\":\"%s\"}],\"observe\":\"none\"}",
                            modes[i]);
        g_autoptr(JsonNode) out = NULL;

        carrel_hypervisor_fake_set_exec_result(fx->hv, 1, NOT_FOUND_REPLY, NULL);
        out = computer(fx, s->id, body, &error);
        assert_null(out);
        assert_true(g_error_matches(error, CARREL_ERROR, CARREL_ERROR_NOT_FOUND));
        assert_int_equal(hid_sent(fx), before);
    }
    /* An element off the screen (the fake's is 4x3) is not clicked. */
    {
        g_autoptr(GError) error = NULL;
        g_autoptr(JsonNode) out = NULL;

        carrel_hypervisor_fake_set_exec_result(
            fx->hv, 0,
            "{\"node\":{\"id\":\"0.0\",\"role\":\"r\",\"name\":\"\",\"states\":[],\"bounds\":{"
            "\"x\":50,\"y\":50,\"width\":4,\"height\":4},\"action\":null}}",
            NULL);
        out = computer(fx, s->id,
                       "{\"actions\":[{\"action\":\"click_element\",\"element\":\"0.0\"}],"
                       "\"observe\":\"none\"}",
                       &error);
        assert_null(out);
        assert_true(g_error_matches(error, CARREL_ERROR, CARREL_ERROR_WRONG_STATE));
        assert_int_equal(hid_sent(fx), before);
    }
}

/* The route, the MCP tool and the CLI, through the real API in this process. */
typedef struct {
    char *url;
    char *path;
    char *session;
    JsonNode *route;
    JsonNode *mcp;
    GError *route_error;
    char *cli_out;
    int cli_status;
    gint done;
} Client;

/* The three calls; the client and the CLI are gone (their connections closed) on return. */
static void
client_calls(Client *c)
{
    g_autoptr(CarrelClient) client = carrel_client_new(NULL, c->url, TOKEN, 30, NULL);
    g_autofree char *call = g_strdup_printf(
        "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"tools/call\",\"params\":{\"name\":"
        "\"accessibility_tree\",\"arguments\":{\"session\":\"%s\",\"app\":\"Firefox\"}}}",
        c->session);
    g_autoptr(JsonNode) body = json_from_string(call, NULL);
    const char *cli = g_getenv("CARREL_CLI");
    g_autoptr(GSubprocess) p = NULL;

    carrel_client_call(client, "GET", c->path, NULL, &c->route, &c->route_error);
    carrel_client_call(client, "POST", "/mcp", body, &c->mcp, NULL);
    if (cli) {
        g_autofree char *cli_err = NULL;

        p = g_subprocess_new(G_SUBPROCESS_FLAGS_STDOUT_PIPE | G_SUBPROCESS_FLAGS_STDERR_PIPE, NULL,
                             cli, "--url", c->url, "a11y", c->session, "--app", "Fire fox&x", NULL);
        if (p && g_subprocess_communicate_utf8(p, NULL, NULL, &c->cli_out, &cli_err, NULL))
            c->cli_status = g_subprocess_get_exit_status(p);
    }
}

static gpointer
client_thread(gpointer data)
{
    Client *c = data;

    client_calls(c);
    g_atomic_int_set(&c->done, 1);
    return NULL;
}

static void
test_route_mcp_cli(void **state)
{
    Fixture *fx = *state;
    g_autoptr(GError) error = NULL;
    g_autoptr(GInetAddress) lo = g_inet_address_new_loopback(G_SOCKET_FAMILY_IPV4);
    g_autoptr(GSocketAddress) any = g_inet_socket_address_new(lo, 0);
    g_autoptr(CarrelSession) s = session(fx, "api");
    g_autoptr(CarrelApi) api = NULL;
    g_autofree char *mcp_text = NULL;
    Client c = {0};
    GThread *t;

    assert_true(carrel_manager_ensure_admin_token(fx->mgr, TOKEN, &error));
    api = carrel_api_new(fx->mgr, "test", &error);
    assert_non_null(api);
    assert_true(carrel_api_listen_tcp(api, any, NULL, &error));
    c.url = g_strdup(carrel_api_web_url(api));
    c.session = g_strdup(s->id);
    c.path = g_strdup_printf("/v1/sessions/%s/accessibility?scope=desktop&depth=4", s->id);
    /* The CLI reads its token from the environment; set before any thread starts. */
    g_setenv("CARREL_TOKEN", TOKEN, TRUE);
    carrel_hypervisor_fake_set_exec_result(fx->hv, 0, TREE, NULL);
    t = g_thread_new("client", client_thread, &c);
    while (!g_atomic_int_get(&c.done))
        g_main_context_iteration(NULL, TRUE);
    g_thread_join(t);
    /* The server's side of the connections the client closed: seen before the API goes. */
    for (guint i = 0; i < 20; i++) {
        while (g_main_context_iteration(NULL, FALSE))
            ;
        g_usleep(1000);
    }
    if (!c.route)
        fail_msg("%s", c.route_error ? c.route_error->message : "no reply");
    assert_string_equal(json_object_get_string_member(json_node_get_object(c.route), "scope"),
                        "desktop");
    assert_non_null(c.mcp);
    mcp_text = json_to_string(c.mcp, FALSE);
    assert_non_null(strstr(mcp_text, "Increment"));
    assert_null(strstr(mcp_text, "\"isError\":true"));
    if (g_getenv("CARREL_CLI")) {
        assert_int_equal(c.cli_status, 0);
        assert_non_null(c.cli_out);
        assert_non_null(strstr(c.cli_out, "    [0.0] push button \"Increment\" at 0,0 4x3 "
                                          "{enabled} action=click\n"));
        assert_non_null(strstr(c.cli_out, "[desktop] desktop frame \"main\""));
        /* --app: the desktop's tree of that application, its name whole through the query. */
        {
            g_auto(GStrv) argv = carrel_hypervisor_fake_get_exec_argv(fx->hv);

            assert_int_equal(g_strv_length(argv), 10);
            assert_string_equal(argv[4], "all");
            assert_string_equal(argv[9], "--app=Fire fox&x");
        }
    }
    g_free(c.url);
    g_free(c.path);
    g_free(c.session);
    g_free(c.cli_out);
    g_clear_pointer(&c.route, json_node_unref);
    g_clear_pointer(&c.mcp, json_node_unref);
    g_clear_error(&c.route_error);
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_tree, setup, teardown),
        cmocka_unit_test_setup_teardown(test_tree_refused, setup, teardown),
        cmocka_unit_test_setup_teardown(test_click_element, setup, teardown),
        cmocka_unit_test_setup_teardown(test_click_element_refused, setup, teardown),
        cmocka_unit_test_setup_teardown(test_route_mcp_cli, setup, teardown),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
