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
    /* Some left: still over half the bound; most left: open again (no flapping at the edge). */
    carrel_console_flow_written(flow, 300 + 600, 40);
    assert_int_equal(carrel_console_flow_state(flow, 50), CARREL_CONSOLE_FLOW_FULL);
    carrel_console_flow_written(flow, 300 + 800, 60);
    assert_int_equal(carrel_console_flow_pending(flow), 400);
    assert_int_equal(carrel_console_flow_state(flow, 70), CARREL_CONSOLE_FLOW_OPEN);
    /* Nothing taken for the stall time while bytes wait: stuck. */
    assert_int_equal(carrel_console_flow_state(flow, 60 + 5000000), CARREL_CONSOLE_FLOW_STUCK);
    /* A counter that goes back changes nothing; all taken: open whatever the clock says. */
    carrel_console_flow_written(flow, 10, 6000000);
    assert_int_equal(carrel_console_flow_pending(flow), 400);
    carrel_console_flow_written(flow, 300 + 1200, 6000000);
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
    gint64 written;
    gboolean closed;  /* a send failed: the proxy closed the connection */
    gboolean stalled; /* gave up waiting with the connection open */
    gint done;
} Flood;

static gpointer
flood_thread(gpointer data)
{
    Flood *f = data;
    g_autoptr(GError) error = NULL;
    g_autoptr(GSocket) conn = g_socket_accept(f->listener, NULL, &error);
    g_autofree char *buf = g_malloc(CHUNK);
    guint idle_s = 0;

    assert_non_null(conn);
    memset(buf, 0x55, CHUNK);
    g_socket_set_option(conn, SOL_SOCKET, SO_SNDBUF, 16384, NULL);
    g_socket_set_timeout(conn, FLOOD_IDLE_S);
    while (f->written < FLOOD_CAP) {
        gssize n = g_socket_send(conn, buf, CHUNK, NULL, &error);

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
    g_atomic_int_set(&f->done, 1);
    return NULL;
}

typedef struct {
    guint port;
    char *cookie; /* carrel_session=... */
    char *ticket;
    gboolean upgraded;
    gint stop;
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

/* spice-html5's first message, a main channel's link (no capabilities), in one masked frame
 * (the mask 0 leaves the bytes as they are). */
static void
viewer_send_link(GSocket *sock)
{
    g_autoptr(GByteArray) b = g_byte_array_new();
    guint8 channel[2] = {CARREL_SPICE_CHANNEL_MAIN, 0};
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
        viewer_send_link(sock);
    /* Then never read. */
    while (!g_atomic_int_get(&v->stop))
        g_usleep(20 * 1000);
    return NULL;
}

static void
test_proxy_backpressure(void **state)
{
    Fixture *fx = *state;
    g_autoptr(GError) error = NULL;
    g_autoptr(CarrelApi) api = NULL;
    g_autoptr(CarrelPrincipal) who = NULL;
    g_autoptr(GInetAddress) lo = g_inet_address_new_loopback(G_SOCKET_FAMILY_IPV4);
    g_autoptr(GSocketAddress) any = g_inet_socket_address_new(lo, 0);
    g_autoptr(GSocketAddress) spice_addr = NULL;
    g_autofree char *set_cookie = NULL;
    Flood flood = {0};
    Viewer viewer = {0};
    GThread *flood_t, *viewer_t;
    gint64 slack;
    g_autofree char *rmem = NULL;
    g_autofree char *wmem = NULL;
    g_auto(GStrv) r = NULL;
    g_auto(GStrv) w = NULL;

    assert_true(carrel_manager_ensure_admin_token(fx->mgr, "flow-test-token-0123456789", &error));
    who = carrel_manager_authenticate(fx->mgr, "flow-test-token-0123456789", &error);
    assert_non_null(who);
    api = carrel_api_new(fx->mgr, "test", &error);
    assert_non_null(api);
    carrel_api_console_set_flow(api, BOUND, STALL_MS);
    assert_true(carrel_api_listen_tcp(api, any, NULL, &error));
    viewer.port = url_port(carrel_api_web_url(api));
    assert_int_not_equal(viewer.port, 0);

    /* The "SPICE server": a listener whose first connection floods. */
    flood.listener =
        g_socket_new(G_SOCKET_FAMILY_IPV4, G_SOCKET_TYPE_STREAM, G_SOCKET_PROTOCOL_TCP, &error);
    assert_true(g_socket_bind(flood.listener, any, TRUE, &error));
    assert_true(g_socket_listen(flood.listener, &error));
    spice_addr = g_socket_get_local_address(flood.listener, &error);
    viewer.ticket = carrel_console_tickets_issue(
        api->console_tickets, "s-000000000001",
        g_inet_socket_address_get_port(G_INET_SOCKET_ADDRESS(spice_addr)), "pw", who->token_id,
        &error);
    assert_non_null(viewer.ticket);
    set_cookie = carrel_api_cookie_login(api, who);
    viewer.cookie = g_strndup(set_cookie, strcspn(set_cookie, ";"));

    flood_t = g_thread_new("flood", flood_thread, &flood);
    viewer_t = g_thread_new("viewer", viewer_thread, &viewer);
    while (!g_atomic_int_get(&flood.done))
        g_main_context_iteration(NULL, TRUE);
    g_atomic_int_set(&viewer.stop, 1);
    g_thread_join(viewer_t);
    g_thread_join(flood_t);
    /* Let the proxy finish closing before the API goes. */
    for (int i = 0; i < 50; i++)
        g_main_context_iteration(NULL, FALSE);

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
                  flood.written, carrel_api_console_flow_peak(api), BOUND, slack);
    assert_true(viewer.upgraded);
    assert_true(flood.closed);
    assert_false(flood.stalled);
    assert_true(flood.written < (gint64)BOUND + CHUNK + slack);
    assert_true(flood.written < FLOOD_CAP);
    assert_true(carrel_api_console_flow_peak(api) > BOUND / 2);
    assert_true(carrel_api_console_flow_peak(api) <= BOUND + carrel_console_ws_frame_size(CHUNK));
    g_object_unref(flood.listener);
    g_free(viewer.cookie);
    g_free(viewer.ticket);
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_flow_arithmetic),
        cmocka_unit_test_setup_teardown(test_proxy_backpressure, setup, teardown),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
