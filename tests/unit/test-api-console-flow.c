/*
 * Unit tests of the console proxy's flow control toward a viewer: the flow's arithmetic with a
 * test's clock, then the real proxy in this process (carreld's API over core and the fake
 * hypervisor, TCP on loopback) between a SPICE server that floods and a websocket viewer that
 * never reads. What the proxy holds stays under its bound, the flood stops at what the kernel
 * buffers hold, and the stuck viewer is closed (the SPICE connection with it).
 */
#include <sys/socket.h>

#include "core-fixture.h"
#include "api/api-console-priv.h"

#define BOUND (1024 * 1024)
#define STALL_MS 1000
#define CHUNK (64 * 1024)
/* Far more than any kernel's buffers: a proxy without flow control reads all of it. */
#define FLOOD_CAP (160 * 1024 * 1024)
/* A send that makes no progress this long: the flood waits on a viewer nobody closed. */
#define FLOOD_IDLE_S 5
#define FLOOD_GIVE_UP_S 30
/* How long the viewer may still find its connection open after the SPICE side closed. */
#define VIEWER_CLOSE_S 15
/* Longer than the proxy's timeout for connecting to SPICE (10 s). */
#define QUIET_S 12

static void
test_flow_arithmetic(void **state)
{
    g_autoptr(CarrelConsoleFlow) flow = carrel_console_flow_new(1000, 5000000, 0);

    carrel_console_flow_start(flow, 300); /* the handshake went before */
    assert_int_equal(carrel_console_flow_pending(flow), 0);
    assert_int_equal(carrel_console_flow_state(flow, 0), CARREL_CONSOLE_FLOW_OPEN);
    carrel_console_flow_sent(flow, 800, 10);
    assert_false(carrel_console_flow_over(flow));
    assert_int_equal(carrel_console_flow_state(flow, 20), CARREL_CONSOLE_FLOW_FULL);
    carrel_console_flow_sent(flow, 400, 30);
    assert_true(carrel_console_flow_over(flow));
    assert_int_equal(carrel_console_flow_pending(flow), 1200);
    /* Some left (acknowledged or in the kernel): still over half the bound; most left: open
     * again (no flapping at the edge). */
    carrel_console_flow_measured(flow, 300 + 100, 500, 40);
    assert_int_equal(carrel_console_flow_state(flow, 50), CARREL_CONSOLE_FLOW_FULL);
    carrel_console_flow_measured(flow, 300 + 600, 200, 60);
    assert_int_equal(carrel_console_flow_pending(flow), 400);
    assert_int_equal(carrel_console_flow_state(flow, 70), CARREL_CONSOLE_FLOW_OPEN);
    /* A pong libsoup wrote on its own, acknowledged, is not the viewer taking data. */
    carrel_console_flow_measured(flow, 300 + 600 + 2, 200, 4000000);
    assert_int_equal(carrel_console_flow_pending(flow), 398);
    /* Nothing acknowledged for the stall time while bytes wait: stuck. */
    assert_int_equal(carrel_console_flow_state(flow, 60 + 5000000), CARREL_CONSOLE_FLOW_STUCK);
    /* A counter that goes back changes nothing. */
    carrel_console_flow_measured(flow, 10, 0, 6000000);
    assert_int_equal(carrel_console_flow_pending(flow), 398);
    /* All of it in the kernel, none acknowledged: nothing pending in the websocket, and still
     * stuck (what waits fits under the bound, where the proxy stops reading). */
    carrel_console_flow_measured(flow, 300 + 600 + 2, 598, 6000000);
    assert_int_equal(carrel_console_flow_pending(flow), 0);
    assert_int_equal(carrel_console_flow_state(flow, 6000000), CARREL_CONSOLE_FLOW_STUCK);
    /* All acknowledged: open whatever the clock says. */
    carrel_console_flow_measured(flow, 300 + 1200, 0, 6000000);
    assert_int_equal(carrel_console_flow_state(flow, 99000000), CARREL_CONSOLE_FLOW_OPEN);
    /* The stall clock starts when bytes start waiting, not at the last progress long ago. */
    carrel_console_flow_sent(flow, 900, 99000000);
    assert_int_equal(carrel_console_flow_state(flow, 99000001), CARREL_CONSOLE_FLOW_FULL);
    assert_int_equal(carrel_console_flow_peak(flow), 1200);
    assert_int_equal(carrel_console_ws_frame_size(125), 127);
    assert_int_equal(carrel_console_ws_frame_size(126), 130);
    assert_int_equal(carrel_console_ws_frame_size(70000), 70010);
}

typedef struct {
    GSocket *listener;
    gint64 cap; /* send this much, then wait for the close (0: FLOOD_CAP) */
    gint64 written;
    gboolean closed;  /* the proxy closed the connection */
    gboolean stalled; /* gave up waiting with the connection open */
    gint done;
} Flood;

/* After the cap: reads until the proxy closes, or gives up. */
static void
flood_wait_close(Flood *f, GSocket *conn)
{
    char buf[4096];

    for (guint idle_s = 0; idle_s < FLOOD_GIVE_UP_S; idle_s += FLOOD_IDLE_S) {
        g_autoptr(GError) error = NULL;
        gssize n;

        while ((n = g_socket_receive(conn, buf, sizeof(buf), NULL, &error)) > 0)
            ;
        if (n == 0 || !g_error_matches(error, G_IO_ERROR, G_IO_ERROR_TIMED_OUT)) {
            f->closed = TRUE;
            return;
        }
    }
    f->stalled = TRUE;
}

static gpointer
flood_thread(gpointer data)
{
    Flood *f = data;
    g_autoptr(GError) error = NULL;
    g_autoptr(GSocket) conn = g_socket_accept(f->listener, NULL, &error);
    g_autofree char *buf = g_malloc(CHUNK);
    gint64 cap = f->cap ? f->cap : FLOOD_CAP;
    guint idle_s = 0;

    assert_non_null(conn);
    memset(buf, 0x55, CHUNK);
    g_socket_set_option(conn, SOL_SOCKET, SO_SNDBUF, 16384, NULL);
    g_socket_set_timeout(conn, FLOOD_IDLE_S);
    while (f->written < cap) {
        gssize n = g_socket_send(conn, buf, MIN(CHUNK, cap - f->written), NULL, &error);

        if (n > 0) {
            f->written += n;
            idle_s = 0;
        } else if (g_error_matches(error, G_IO_ERROR, G_IO_ERROR_TIMED_OUT) &&
                   (idle_s += FLOOD_IDLE_S) < FLOOD_GIVE_UP_S) {
            g_clear_error(&error);
        } else {
            f->closed = !g_error_matches(error, G_IO_ERROR, G_IO_ERROR_TIMED_OUT);
            f->stalled = !f->closed;
            break;
        }
    }
    if (f->written >= cap)
        flood_wait_close(f, conn);
    g_atomic_int_set(&f->done, 1);
    return NULL;
}

typedef struct {
    guint port;
    char *cookie; /* carrel_session=... */
    char *ticket;
    gboolean upgraded;
    gint stop;
    guint8 channel; /* of the link it sends: 0 for main */
    gint closed;    /* a ping could not be sent: the proxy's end of the connection is gone */
} Viewer;

static void
viewer_send(GSocket *sock, const void *data, gsize len)
{
    g_autoptr(GError) error = NULL;
    const char *p = data;

    while (len > 0) {
        gssize n = g_socket_send(sock, p, len, NULL, &error);
        assert_true(n > 0);
        p += n;
        len -= (gsize)n;
    }
}

static void
put_u32(GByteArray *b, guint32 v)
{
    guint8 le[4] = {v & 0xff, (v >> 8) & 0xff, (v >> 16) & 0xff, (v >> 24) & 0xff};

    g_byte_array_append(b, le, 4);
}

/* spice-html5's first message, a channel's link (no capabilities), in one masked frame (the
 * mask 0 leaves the bytes as they are). */
static void
viewer_send_link(GSocket *sock, guint8 type)
{
    g_autoptr(GByteArray) b = g_byte_array_new();
    guint8 channel[2] = {type ? type : CARREL_SPICE_CHANNEL_MAIN, 0};
    guint8 head[6] = {0x82, 0x80 | (16 + 18), 0, 0, 0, 0}; /* FIN + binary, masked */

    g_byte_array_append(b, head, sizeof(head));
    g_byte_array_append(b, (const guint8 *)"REDQ", 4);
    put_u32(b, 2);  /* major */
    put_u32(b, 2);  /* minor */
    put_u32(b, 18); /* SpiceLinkMess, no capabilities */
    put_u32(b, 0);  /* connection id */
    g_byte_array_append(b, channel, 2);
    put_u32(b, 0);  /* common caps */
    put_u32(b, 0);  /* channel caps */
    put_u32(b, 18); /* caps offset */
    viewer_send(sock, b->data, b->len);
}

static guint
url_port(const char *url)
{
    const char *colon = url ? strrchr(url, ':') : NULL;

    return colon ? (guint)g_ascii_strtoull(colon + 1, NULL, 10) : 0;
}

static gpointer
viewer_thread(gpointer data)
{
    Viewer *v = data;
    g_autoptr(GError) error = NULL;
    g_autoptr(GSocket) sock =
        g_socket_new(G_SOCKET_FAMILY_IPV4, G_SOCKET_TYPE_STREAM, G_SOCKET_PROTOCOL_TCP, &error);
    g_autoptr(GInetAddress) lo = g_inet_address_new_loopback(G_SOCKET_FAMILY_IPV4);
    g_autoptr(GSocketAddress) addr = g_inet_socket_address_new(lo, (guint16)v->port);
    g_autoptr(GString) head = g_string_new(NULL);
    g_autofree char *request = NULL;
    char c;

    /* A small receive window, fixed before connecting: the kernel holds little for us. */
    g_socket_set_option(sock, SOL_SOCKET, SO_RCVBUF, 4096, NULL);
    assert_true(g_socket_connect(sock, addr, NULL, &error));
    request = g_strdup_printf(
        "GET /v1/console/%s HTTP/1.1\r\nHost: 127.0.0.1:%u\r\nOrigin: http://127.0.0.1:%u\r\n"
        "Cookie: %s\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n"
        "Sec-WebSocket-Version: 13\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n"
        "Sec-WebSocket-Protocol: binary\r\n\r\n",
        v->ticket, v->port, v->port, v->cookie);
    viewer_send(sock, request, strlen(request));
    while (!strstr(head->str, "\r\n\r\n") && g_socket_receive(sock, &c, 1, NULL, NULL) == 1)
        g_string_append_c(head, c);
    v->upgraded = g_str_has_prefix(head->str, "HTTP/1.1 101");
    if (v->upgraded)
        viewer_send_link(sock, v->channel);
    /* Then never read, but ping (a masked, empty control frame) as a live page's socket would
     * carry data: the first send that fails is the proxy's close reaching us. */
    g_socket_set_timeout(sock, 1);
    while (!g_atomic_int_get(&v->stop)) {
        static const guint8 ping[6] = {0x89, 0x80, 0, 0, 0, 0};

        if (v->upgraded && !g_atomic_int_get(&v->closed) &&
            g_socket_send(sock, (const char *)ping, sizeof(ping), NULL, NULL) < 0)
            g_atomic_int_set(&v->closed, 1);
        g_usleep(20 * 1000);
    }
    return NULL;
}

static gboolean
on_tick(gpointer user_data)
{
    return G_SOURCE_CONTINUE;
}

/* carreld's API in this process with a small flow bound and stall time, a "SPICE server"
 * listener, and a ticket and login cookie for its viewers. */
typedef struct {
    CarrelApi *api;
    CarrelPrincipal *who;
    GSocket *listener;
    guint port;
    char *ticket;
    char *cookie;
} Rig;

static void
rig_start(Fixture *fx, Rig *rig)
{
    g_autoptr(GError) error = NULL;
    g_autoptr(GInetAddress) lo = g_inet_address_new_loopback(G_SOCKET_FAMILY_IPV4);
    g_autoptr(GSocketAddress) any = g_inet_socket_address_new(lo, 0);
    g_autoptr(GSocketAddress) spice_addr = NULL;
    g_autofree char *set_cookie = NULL;

    assert_true(carrel_manager_ensure_admin_token(fx->mgr, "flow-test-token-0123456789", &error));
    rig->who = carrel_manager_authenticate(fx->mgr, "flow-test-token-0123456789", &error);
    assert_non_null(rig->who);
    rig->api = carrel_api_new(fx->mgr, "test", &error);
    assert_non_null(rig->api);
    carrel_api_console_set_flow(rig->api, BOUND, STALL_MS);
    assert_true(carrel_api_listen_tcp(rig->api, any, NULL, &error));
    rig->port = url_port(carrel_api_web_url(rig->api));
    assert_int_not_equal(rig->port, 0);
    rig->listener =
        g_socket_new(G_SOCKET_FAMILY_IPV4, G_SOCKET_TYPE_STREAM, G_SOCKET_PROTOCOL_TCP, &error);
    assert_true(g_socket_bind(rig->listener, any, TRUE, &error));
    assert_true(g_socket_listen(rig->listener, &error));
    spice_addr = g_socket_get_local_address(rig->listener, &error);
    rig->ticket = carrel_console_tickets_issue(
        rig->api->console_tickets, "s-000000000001",
        g_inet_socket_address_get_port(G_INET_SOCKET_ADDRESS(spice_addr)), "pw", rig->who->token_id,
        &error);
    assert_non_null(rig->ticket);
    set_cookie = carrel_api_cookie_login(rig->api, rig->who);
    rig->cookie = g_strndup(set_cookie, strcspn(set_cookie, ";"));
}

static void
rig_viewer(Rig *rig, Viewer *v, guint8 channel)
{
    v->port = rig->port;
    v->ticket = rig->ticket;
    v->cookie = rig->cookie;
    v->channel = channel;
}

static void
rig_clear(Rig *rig)
{
    /* Let the proxy finish closing before the API goes. */
    for (int i = 0; i < 50; i++)
        g_main_context_iteration(NULL, FALSE);
    g_clear_pointer(&rig->api, carrel_api_free);
    g_clear_pointer(&rig->who, carrel_principal_free);
    g_clear_object(&rig->listener);
    g_free(rig->ticket);
    g_free(rig->cookie);
}

/* Runs the main loop until *flag is set or seconds passed (a timeout source wakes it); returns
 * the seconds it took. */
static double
loop_until(gint *flag, int seconds)
{
    gint64 start = g_get_monotonic_time();
    guint tick = g_timeout_add(50, on_tick, NULL);

    while (!g_atomic_int_get(flag) && g_get_monotonic_time() < start + seconds * G_USEC_PER_SEC)
        g_main_context_iteration(NULL, TRUE);
    g_source_remove(tick);
    return (double)(g_get_monotonic_time() - start) / G_USEC_PER_SEC;
}

static void
test_proxy_backpressure(void **state)
{
    Rig rig = {0};
    Flood flood = {0};
    Viewer viewer = {0};
    GThread *flood_t, *viewer_t;
    gint64 slack;
    g_autofree char *rmem = NULL;
    g_autofree char *wmem = NULL;
    g_auto(GStrv) r = NULL;
    g_auto(GStrv) w = NULL;

    rig_start(*state, &rig);
    rig_viewer(&rig, &viewer, CARREL_SPICE_CHANNEL_MAIN);
    /* The "SPICE server": the listener's first connection floods. */
    flood.listener = rig.listener;
    flood_t = g_thread_new("flood", flood_thread, &flood);
    viewer_t = g_thread_new("viewer", viewer_thread, &viewer);
    while (!g_atomic_int_get(&flood.done))
        g_main_context_iteration(NULL, TRUE);
    /* The viewer's connection ends too, although its close frame waits behind what it never
     * read: a page that reads nothing learns it was closed. */
    print_message("# the stuck main viewer's connection ended %.1f s after the SPICE side's\n",
                  loop_until(&viewer.closed, VIEWER_CLOSE_S));
    g_atomic_int_set(&viewer.stop, 1);
    g_thread_join(viewer_t);
    g_thread_join(flood_t);

    /* What the kernel may hold on the way: the proxy's receive buffer from SPICE and its send
     * buffer toward the viewer at their largest, and a little more for ours. */
    assert_true(g_file_get_contents("/proc/sys/net/ipv4/tcp_rmem", &rmem, NULL, NULL));
    assert_true(g_file_get_contents("/proc/sys/net/ipv4/tcp_wmem", &wmem, NULL, NULL));
    r = g_strsplit_set(g_strstrip(rmem), " \t", -1);
    w = g_strsplit_set(g_strstrip(wmem), " \t", -1);
    assert_int_equal(g_strv_length(r), 3);
    assert_int_equal(g_strv_length(w), 3);
    slack = g_ascii_strtoll(r[2], NULL, 10) + g_ascii_strtoll(w[2], NULL, 10) + 1024 * 1024;
    print_message("# flood: %" G_GINT64_FORMAT " bytes sent, proxy held at most %" G_GSIZE_FORMAT
                  " (bound %d), kernel slack %" G_GINT64_FORMAT "\n",
                  flood.written, carrel_api_console_flow_peak(rig.api), BOUND, slack);
    assert_true(viewer.upgraded);
    assert_true(g_atomic_int_get(&viewer.closed));
    assert_true(flood.closed);
    assert_false(flood.stalled);
    assert_true(flood.written < (gint64)BOUND + CHUNK + slack);
    assert_true(flood.written < FLOOD_CAP);
    assert_true(carrel_api_console_flow_peak(rig.api) > BOUND / 2);
    assert_true(carrel_api_console_flow_peak(rig.api) <=
                BOUND + carrel_console_ws_frame_size(CHUNK));
    rig_clear(&rig);
}

/* A viewer that stops reading while what it was sent fits in the kernel's buffers (under the
 * bound: the proxy never stops reading SPICE, and SPICE sends nothing more) is closed too. */
static void
test_stuck_under_bound(void **state)
{
    Rig rig = {0};
    Flood burst = {.cap = BOUND / 4};
    Viewer viewer = {0};
    GThread *burst_t, *viewer_t;
    double took;

    rig_start(*state, &rig);
    rig_viewer(&rig, &viewer, CARREL_SPICE_CHANNEL_MAIN);
    burst.listener = rig.listener;
    burst_t = g_thread_new("burst", flood_thread, &burst);
    viewer_t = g_thread_new("viewer", viewer_thread, &viewer);
    took = loop_until(&burst.done, FLOOD_GIVE_UP_S + 5);
    print_message("# a burst of %" G_GINT64_FORMAT " bytes, then quiet: closed after %.1f s\n",
                  burst.written, took);
    assert_true(burst.closed);
    assert_false(burst.stalled);
    assert_int_equal(burst.written, BOUND / 4);
    assert_true(carrel_api_console_flow_peak(rig.api) < BOUND);
    loop_until(&viewer.closed, VIEWER_CLOSE_S);
    assert_true(g_atomic_int_get(&viewer.closed));
    g_atomic_int_set(&viewer.stop, 1);
    g_thread_join(viewer_t);
    g_thread_join(burst_t);
    rig_clear(&rig);
}

/* A SPICE server for two channels: main (quiet) first, then a display that floods until stop. */
typedef struct {
    GSocket *listener;
    gint main_accepted;
    gint display_closed; /* the proxy closed the display's SPICE connection */
    gint stop;
    gint64 written;
    gint main_closed; /* the proxy closed main's SPICE connection */
} Pair;

/* Reads what the proxy sent on main (its link); notes the end of the connection. */
static void
pair_watch_main(Pair *pr, GSocket *main_conn)
{
    char buf[256];

    while (!g_atomic_int_get(&pr->main_closed) &&
           g_socket_condition_check(main_conn, G_IO_IN | G_IO_HUP | G_IO_ERR)) {
        if (g_socket_receive(main_conn, buf, sizeof(buf), NULL, NULL) <= 0)
            g_atomic_int_set(&pr->main_closed, 1);
    }
}

static gpointer
pair_thread(gpointer data)
{
    Pair *pr = data;
    g_autoptr(GSocket) main_conn = g_socket_accept(pr->listener, NULL, NULL);
    g_autoptr(GSocket) display = NULL;
    g_autofree char *buf = g_malloc0(CHUNK);

    assert_non_null(main_conn);
    g_atomic_int_set(&pr->main_accepted, 1);
    display = g_socket_accept(pr->listener, NULL, NULL);
    assert_non_null(display);
    g_socket_set_timeout(display, 1);
    while (!g_atomic_int_get(&pr->stop)) {
        g_autoptr(GError) error = NULL;

        gssize n = g_socket_send(display, buf, CHUNK, NULL, &error);

        pair_watch_main(pr, main_conn);
        if (n > 0)
            pr->written += n;
        if (n < 0 && !g_error_matches(error, G_IO_ERROR, G_IO_ERROR_TIMED_OUT)) {
            g_atomic_int_set(&pr->display_closed, 1);
            break;
        }
    }
    /* As spice-server does once its client goes: the display first, then main. */
    g_socket_close(display, NULL);
    g_socket_close(main_conn, NULL);
    return NULL;
}

/* A display viewer that reads nothing, while its main channel stays open: the proxy keeps
 * the display's SPICE connection (spice-server must close it, not the proxy) and closes the
 * viewer; its close frame can never be sent, and the viewer's connection still ends. Main,
 * quiet all along, stays open past the proxy's connect timeout (10 s). */
static void
test_stuck_display_cut(void **state)
{
    Rig rig = {0};
    Pair pair = {0};
    Viewer main_viewer = {0}, display = {0};
    GThread *pair_t, *main_t, *display_t;
    gint never = 0;
    gboolean display_spice_closed, main_spice_closed, main_viewer_closed;
    double took;

    rig_start(*state, &rig);
    rig_viewer(&rig, &main_viewer, CARREL_SPICE_CHANNEL_MAIN);
    rig_viewer(&rig, &display, CARREL_SPICE_CHANNEL_DISPLAY);
    pair.listener = rig.listener;
    pair_t = g_thread_new("pair", pair_thread, &pair);
    main_t = g_thread_new("main", viewer_thread, &main_viewer);
    loop_until(&pair.main_accepted, 10);
    assert_true(g_atomic_int_get(&pair.main_accepted));
    display_t = g_thread_new("display", viewer_thread, &display);
    took = loop_until(&display.closed, VIEWER_CLOSE_S);
    print_message("# the stuck display viewer's connection ended after %.1f s\n", took);
    display_spice_closed = g_atomic_int_get(&pair.display_closed);
    loop_until(&never, QUIET_S - (int)took);
    main_spice_closed = g_atomic_int_get(&pair.main_closed);
    main_viewer_closed = g_atomic_int_get(&main_viewer.closed);
    /* The threads end before any assertion, which would leave them using this stack. */
    g_atomic_int_set(&pair.stop, 1);
    g_atomic_int_set(&main_viewer.stop, 1);
    g_atomic_int_set(&display.stop, 1);
    g_thread_join(pair_t);
    g_thread_join(main_t);
    g_thread_join(display_t);
    rig_clear(&rig);
    assert_true(display.upgraded);
    assert_true(display.closed);
    assert_false(display_spice_closed);
    assert_false(main_spice_closed);
    assert_false(main_viewer_closed);
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_flow_arithmetic),
        cmocka_unit_test_setup_teardown(test_proxy_backpressure, setup, teardown),
        cmocka_unit_test_setup_teardown(test_stuck_under_bound, setup, teardown),
        cmocka_unit_test_setup_teardown(test_stuck_display_cut, setup, teardown),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
