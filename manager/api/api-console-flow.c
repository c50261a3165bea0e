/*
 * api: flow control of the console proxy toward a viewer. libsoup 3.2's websocket queues every
 * message it cannot write at once and says nothing of that queue, so the proxy counts what it
 * handed over (frames included) and asks the kernel what left: the bytes the TCP connection
 * took (acknowledged by the browser + still in the send buffer). What is left over is what
 * libsoup holds. Past the bound the proxy stops reading the SPICE server. A viewer that
 * acknowledges nothing for the stall time while bytes wait for it (in libsoup or in the kernel)
 * is closed.
 */
#include <linux/sockios.h>
#include <stddef.h>
#include <string.h>
#include <linux/tcp.h>
#include <netinet/in.h>
#include <sys/ioctl.h>
#include <sys/socket.h>

#include "api/api-console-priv.h"

struct _CarrelConsoleFlow {
    gsize bound;
    gint64 stall_us;
    guint64 sent;        /* bytes handed to the writer, frame headers included */
    guint64 written;     /* bytes the writer passed on (to the kernel), as last measured */
    guint64 acked;       /* of those, what the viewer acknowledged, as last measured */
    gint64 progress_us;  /* when acked last grew by more than a control frame, or the start */
    guint64 progress_at; /* acked at progress_us */
    gsize peak;          /* the most pending ever seen */
};

CarrelConsoleFlow *
carrel_console_flow_new(gsize bound, gint64 stall_us, gint64 now_us)
{
    CarrelConsoleFlow *flow = g_new0(CarrelConsoleFlow, 1);

    flow->bound = bound;
    flow->stall_us = stall_us;
    flow->progress_us = now_us;
    return flow;
}

void
carrel_console_flow_free(CarrelConsoleFlow *flow)
{
    g_free(flow);
}

void
carrel_console_flow_sent(CarrelConsoleFlow *flow, gsize bytes, gint64 now_us)
{
    /* The stall clock starts when something starts waiting, not at the last progress. */
    if (flow->sent <= flow->acked)
        flow->progress_us = now_us;
    flow->sent += bytes;
    flow->peak = MAX(flow->peak, carrel_console_flow_pending(flow));
}

void
carrel_console_flow_measured(CarrelConsoleFlow *flow, guint64 acked, guint64 queued, gint64 now_us)
{
    /* Counters only grow; a measure that goes back (none expected) is ignored. */
    if (acked < flow->acked || acked + queued < flow->written)
        return;
    flow->written = acked + queued;
    flow->acked = acked;
    /* libsoup writes control frames on its own (a pong to each ping, up to 127 bytes): a stuck
     * viewer that pings is not taking data. */
    if (acked - flow->progress_at <= CARREL_CONSOLE_WS_CONTROL_MAX)
        return;
    flow->progress_at = acked;
    flow->progress_us = now_us;
}

void
carrel_console_flow_start(CarrelConsoleFlow *flow, guint64 written)
{
    /* What the connection carried before (the handshake) is neither sent nor pending. */
    flow->sent = flow->written = flow->acked = flow->progress_at = written;
}

gsize
carrel_console_flow_pending(const CarrelConsoleFlow *flow)
{
    return flow->sent > flow->written ? (gsize)(flow->sent - flow->written) : 0;
}

gsize
carrel_console_flow_peak(const CarrelConsoleFlow *flow)
{
    return flow->peak;
}

CarrelConsoleFlowState
carrel_console_flow_state(const CarrelConsoleFlow *flow, gint64 now_us)
{
    gsize pending = carrel_console_flow_pending(flow);

    if (flow->sent > flow->acked && now_us - flow->progress_us >= flow->stall_us)
        return CARREL_CONSOLE_FLOW_STUCK;
    if (pending == 0)
        return CARREL_CONSOLE_FLOW_OPEN;
    /* Resume at half the bound, so that reading does not flap at its edge. */
    return pending > flow->bound / 2 ? CARREL_CONSOLE_FLOW_FULL : CARREL_CONSOLE_FLOW_OPEN;
}

gboolean
carrel_console_flow_over(const CarrelConsoleFlow *flow)
{
    return carrel_console_flow_pending(flow) > flow->bound;
}

gsize
carrel_console_ws_frame_size(gsize payload)
{
    /* A server's frames are not masked: 2 header bytes, 2 or 8 more for longer payloads. */
    return payload + (payload < 126 ? 2 : payload <= 0xffff ? 4 : 10);
}

void
carrel_console_socket_reset(GSocket *socket)
{
    struct sockaddr unspec = {.sa_family = AF_UNSPEC};

    /* Linux's disconnect of a TCP socket: a reset now, queued bytes dropped, the fd left to its
     * owner (whose next read or write fails); a socket that is not TCP is shut down instead. */
    if (connect(g_socket_get_fd(socket), &unspec, sizeof(unspec)) != 0)
        (void)g_socket_shutdown(socket, TRUE, TRUE, NULL);
}

gboolean
carrel_console_socket_measure(GSocket *socket, guint64 *ret_acked, guint64 *ret_queued)
{
    struct tcp_info info;
    socklen_t len = sizeof(info);
    int fd = g_socket_get_fd(socket);
    int outq = 0;

    /* Acknowledged + still queued = every byte the process wrote to the connection. */
    memset(&info, 0, sizeof(info));
    if (getsockopt(fd, IPPROTO_TCP, TCP_INFO, &info, &len) != 0 ||
        len < offsetof(struct tcp_info, tcpi_bytes_acked) + sizeof(info.tcpi_bytes_acked) ||
        ioctl(fd, SIOCOUTQ, &outq) != 0 || outq < 0)
        return FALSE;
    *ret_acked = info.tcpi_bytes_acked;
    *ret_queued = (guint64)outq;
    return TRUE;
}
