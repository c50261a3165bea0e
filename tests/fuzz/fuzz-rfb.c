/*
 * libFuzzer harness for the RFB client (hypervisor-rfb.c): what a VNC server sends is drawn by
 * the guest and untrusted. The first byte picks the mode: odd, a valid 3.8 handshake of a
 * 1024x768 screen comes first and the input is the message stream, fed in chunks whose sizes
 * come from the input with a poll after each; even, the input is the whole server side,
 * handshake included. Checked: nothing more than a message header is kept between polls, a
 * watch that failed stays failed, and the end of the stream is always noticed.
 */
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#define CARREL_HYPERVISOR_RFB_H_ALLOW
#include "hypervisor/hypervisor-rfb.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* The most bytes written ahead of a read: well inside a unix socket's buffer. */
#define MAX_SERVER_BYTES (64 * 1024)

static const char hello[] = "RFB 003.008\n"
                            "\x01\x01"         /* one security type: None */
                            "\x00\x00\x00\x00" /* SecurityResult OK */
                            "\x04\x00\x03\x00" /* 1024x768 */
                            "\x20\x18\x00\x01\x00\xff\x00\xff\x00\xff\x10\x08\x00\x00\x00\x00"
                            "\x00\x00\x00\x01"
                            "x";

static void
drain(int fd)
{
    guint8 sink[256];

    while (recv(fd, sink, sizeof sink, MSG_DONTWAIT) > 0) {
    }
}

static void
send_all(int fd, const void *buf, gsize len)
{
    if (len > 0 && send(fd, buf, len, MSG_NOSIGNAL) != (ssize_t)len)
        __builtin_trap();
}

/* Polls once; FALSE once the watch failed (and checks it stays failed). */
static gboolean
poll_once(CarrelRfbWatch *w)
{
    g_autoptr(GError) error = NULL;
    gboolean changed = FALSE;

    if (!carrel_rfb_watch_poll(w, &changed, &error)) {
        g_autoptr(GError) again = NULL;
        if (!error || carrel_rfb_watch_poll(w, &changed, &again) || !again)
            __builtin_trap();
        return FALSE;
    }
    if (carrel_rfb_watch_held_bytes(w) > CARREL_RFB_HEAD_MAX)
        __builtin_trap();
    if (changed && !carrel_rfb_watch_request(w, NULL))
        return FALSE;
    return TRUE;
}

static void
run(int server, int client, const uint8_t *data, size_t size)
{
    g_autoptr(CarrelRfbWatch) w = NULL;
    gboolean chunked = data[0] & 1;
    gsize at = 1;

    if (chunked)
        send_all(server, hello, sizeof hello - 1);
    else
        send_all(server, data + 1, size - 1);
    if (!chunked)
        shutdown(server, SHUT_WR);
    /* Timeout 0: everything is written already, or the end of the stream is. */
    w = carrel_rfb_watch_new_fd(client, 0, NULL);
    if (!w)
        return;
    drain(server);
    while (chunked && at < size) {
        gsize chunk = MIN((gsize)(1 + data[at] % 64), size - at);

        send_all(server, data + at, chunk);
        at += chunk;
        if (!poll_once(w))
            return;
        drain(server);
    }
    shutdown(server, SHUT_WR);
    /* What is left is parsed, then the end is seen: a poll fails within a few calls. */
    for (guint i = 0; i < 4; i++) {
        if (!poll_once(w))
            return;
    }
    __builtin_trap();
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    int fds[2];

    if (size == 0 || size > MAX_SERVER_BYTES)
        return 0;
    if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, fds) < 0)
        __builtin_trap();
    run(fds[0], fds[1], data, size);
    close(fds[0]);
    return 0;
}
