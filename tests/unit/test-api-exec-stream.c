/*
 * POST /v1/sessions/{id}/exec with "stream": true through the real API in this process (over
 * core and the fake hypervisor, whose agent answers scripted carrel-guest replies) and the real
 * client: the events arrive in order (started, stdout, exit with the guest's exit code); a
 * client that closes its stream has the process killed in the guest.
 */
#include "core-fixture.h"
#include "api/api-priv.h"
#include "client/client.h"

#define TOKEN "stream-test-token-0123456789"

static const char exited_reply[] =
    "{\"handle\":\"p1a\",\"pid\":42,\"state\":\"exited\",\"exit_code\":3,"
    "\"stdout\":{\"offset\":0,\"data\":\"aGkK\",\"size\":3},"
    "\"stderr\":{\"offset\":0,\"data\":\"\",\"size\":0}}";
static const char running_reply[] =
    "{\"handle\":\"p1a\",\"pid\":42,\"state\":\"running\",\"exit_code\":null,"
    "\"stdout\":{\"offset\":0,\"data\":\"\",\"size\":0},"
    "\"stderr\":{\"offset\":0,\"data\":\"\",\"size\":0}}";

typedef struct {
    char *url;
    char *path;
    gboolean stop_at_start; /* the client leaves after "started" */
    GPtrArray *events;      /* "NAME DATA" */
    gboolean ok;
    gint done;
} Client;

static gboolean
on_event(const char *event, JsonNode *data, gpointer user_data)
{
    Client *c = user_data;
    g_autofree char *text = json_to_string(data, FALSE);

    g_ptr_array_add(c->events, g_strdup_printf("%s %s", event, text));
    return !(c->stop_at_start && g_str_equal(event, "started"));
}

static gpointer
client_thread(gpointer data)
{
    Client *c = data;
    g_autoptr(CarrelClient) client = carrel_client_new(NULL, c->url, TOKEN, 30, NULL);
    g_autoptr(JsonNode) body =
        json_from_string("{\"argv\":[\"echo\",\"hi\"],\"stream\":true}", NULL);

    c->ok = client && carrel_client_call_events(client, "POST", c->path, body, on_event, c, NULL);
    g_atomic_int_set(&c->done, 1);
    return NULL;
}

static CarrelApi *
api_up(Fixture *fx, Client *c, CarrelSession **ret_session)
{
    g_autoptr(GError) error = NULL;
    g_autoptr(GInetAddress) lo = g_inet_address_new_loopback(G_SOCKET_FAMILY_IPV4);
    g_autoptr(GSocketAddress) any = g_inet_socket_address_new(lo, 0);
    g_autoptr(CarrelTemplate) tmpl G_GNUC_UNUSED = import(fx, "tiny");
    CarrelApi *api;

    assert_true(carrel_manager_ensure_admin_token(fx->mgr, TOKEN, &error));
    *ret_session = create(fx, "streamed", &error);
    assert_non_null(*ret_session);
    api = carrel_api_new(fx->mgr, "test", &error);
    assert_non_null(api);
    assert_true(carrel_api_listen_tcp(api, any, NULL, &error));
    c->url = g_strdup(carrel_api_web_url(api));
    c->path = g_strdup_printf("/v1/sessions/%s/exec", (*ret_session)->id);
    c->events = g_ptr_array_new_with_free_func(g_free);
    return api;
}

static void
client_clear(Client *c)
{
    g_free(c->url);
    g_free(c->path);
    g_ptr_array_unref(c->events);
}

static void
test_stream_events(void **state)
{
    Fixture *fx = *state;
    g_autoptr(CarrelSession) s = NULL;
    Client c = {0};
    g_autoptr(CarrelApi) api G_GNUC_UNUSED = api_up(fx, &c, &s);
    GThread *t;

    carrel_hypervisor_fake_set_exec_result(fx->hv, 0, exited_reply, "");
    t = g_thread_new("client", client_thread, &c);
    while (!g_atomic_int_get(&c.done))
        g_main_context_iteration(NULL, TRUE);
    g_thread_join(t);
    assert_true(c.ok);
    assert_int_equal(c.events->len, 3);
    assert_string_equal(g_ptr_array_index(c.events, 0), "started {\"handle\":\"p1a\"}");
    assert_string_equal(g_ptr_array_index(c.events, 1),
                        "stdout {\"data\":\"hi\\n\",\"data_base64\":\"aGkK\"}");
    assert_true(g_str_has_prefix(g_ptr_array_index(c.events, 2),
                                 "exit {\"handle\":\"p1a\",\"exit_code\":3,"));
    client_clear(&c);
}

typedef struct {
    GThread *loop_thread;
    GString *order;
    gboolean in_loop; /* every call ran in the loop's thread */
} Posted;

static gboolean
note_post(gpointer data)
{
    gpointer *item = data;
    Posted *p = item[0];

    g_string_append(p->order, item[1]);
    p->in_loop = p->in_loop && g_thread_self() == p->loop_thread;
    return G_SOURCE_REMOVE;
}

static gpointer
post_three(gpointer data)
{
    static const char *const names[] = {"a", "b", "c"};

    for (guint i = 0; i < G_N_ELEMENTS(names); i++) {
        gpointer *item = g_new(gpointer, 2);

        item[0] = data;
        item[1] = (gpointer)names[i];
        carrel_api_post_to_loop(NULL, note_post, item, g_free);
    }
    return NULL;
}

/* A worker's posts to a loop that no thread runs at that moment still wait for the loop, in
 * order: run in the worker (as g_main_context_invoke does then), an exit could overtake the
 * output queued before it, and the stream lose that output. */
static void
test_posts_keep_order(void **state)
{
    Posted p = {.loop_thread = g_thread_self(), .order = g_string_new(NULL), .in_loop = TRUE};

    (void)state;
    g_thread_join(g_thread_new("poster", post_three, &p));
    assert_int_equal(p.order->len, 0);
    while (g_main_context_iteration(NULL, FALSE))
        ;
    assert_string_equal(p.order->str, "abc");
    assert_true(p.in_loop);
    g_string_free(p.order, TRUE);
}

/* The fake's last command was proc kill HANDLE 9. */
static gboolean
killed(Fixture *fx)
{
    g_auto(GStrv) argv = carrel_hypervisor_fake_get_exec_argv(fx->hv);

    return argv && g_strv_length(argv) == 5 && g_str_equal(argv[2], "kill") &&
           g_str_equal(argv[3], "p1a") && g_str_equal(argv[4], "9");
}

static void
test_client_leaves(void **state)
{
    Fixture *fx = *state;
    g_autoptr(CarrelSession) s = NULL;
    Client c = {.stop_at_start = TRUE};
    g_autoptr(CarrelApi) api G_GNUC_UNUSED = api_up(fx, &c, &s);
    GThread *t;
    guint rounds = 0;

    /* A process that never ends: only the client's leaving ends the stream. */
    carrel_hypervisor_fake_set_exec_result(fx->hv, 0, running_reply, "");
    t = g_thread_new("client", client_thread, &c);
    while (!g_atomic_int_get(&c.done))
        g_main_context_iteration(NULL, TRUE);
    g_thread_join(t);
    assert_true(c.ok);
    /* Bounded rounds of the main loop (each at most the gone check's 250 ms), no clock. */
    while (!killed(fx) && rounds++ < 400)
        g_main_context_iteration(NULL, TRUE);
    assert_true(killed(fx));
    client_clear(&c);
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_stream_events, setup, teardown),
        cmocka_unit_test_setup_teardown(test_client_leaves, setup, teardown),
        cmocka_unit_test(test_posts_keep_order),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
