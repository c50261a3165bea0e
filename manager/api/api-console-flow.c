/*
 * api: flow control of the console proxy toward a viewer. libsoup 3.2's websocket queues every
 * message it cannot write at once and says nothing of that queue, so the proxy counts what it
 * handed over (frames included) and asks the kernel what left: the bytes the TCP connection
 * took (acknowledged by the browser + still in the send buffer). What is left over is what
 * libsoup holds. Past the bound the proxy stops reading the SPICE server; a viewer that takes
 * nothing for the stall time is closed.
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
    guint64 sent;       /* bytes handed to the writer, frame headers included */
    guint64 written;    /* bytes the writer passed on (to the kernel), as last measured */
    gint64 progress_us; /* when written last grew, or the flow started */
    gsize peak;         /* the most pending ever seen */
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
    if (carrel_console_flow_pending(flow) == 0)
        flow->progress_us = now_us;
    flow->sent += bytes;
    flow->peak = MAX(flow->peak, carrel_console_flow_pending(flow));
}

void
carrel_console_flow_written(CarrelConsoleFlow *flow, guint64 written, gint64 now_us)
{
    /* Counters only grow; a measure that goes back (none expected) is ignored. */
    if (written <= flow->written)
        return;
    flow->written = written;
    flow->progress_us = now_us;
}

void
carrel_console_flow_start(CarrelConsoleFlow *flow, guint64 written)
{
    /* What the connection carried before (the handshake) is neither sent nor pending. */
    flow->sent = flow->written = written;
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

    if (pending == 0)
        return CARREL_CONSOLE_FLOW_OPEN;
    if (now_us - flow->progress_us >= flow->stall_us)
        return CARREL_CONSOLE_FLOW_STUCK;
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

gboolean
carrel_console_socket_written(GSocket *socket, guint64 *ret_written)
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
    *ret_written = info.tcpi_bytes_acked + (guint64)outq;
    return TRUE;
}
