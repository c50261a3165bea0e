/*
 * carrel-egress-helper SOCKET: squid's external ACL helper. It relays each of squid's lines to
 * carreld's decision socket and each answer back, unchanged. Answers come in any order (an
 * "ask" waits for a person), which squid allows with concurrency: every line carries its
 * channel id. After squid closes stdin (a reconfigure) it keeps relaying until every question
 * it passed on has its answer, so that no waiting request is lost.
 */
#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#define BUF_BYTES 65536

static int
connect_socket(const char *path)
{
    struct sockaddr_un addr = {.sun_family = AF_UNIX};
    int fd;

    if (strlen(path) >= sizeof(addr.sun_path))
        return -1;
    memcpy(addr.sun_path, path, strlen(path) + 1);
    fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0 || connect(fd, (struct sockaddr *)&addr, sizeof(addr)) != 0) {
        if (fd >= 0)
            close(fd);
        return -1;
    }
    return fd;
}

static int
write_all(int fd, const char *buf, size_t len)
{
    while (len > 0) {
        ssize_t n = write(fd, buf, len);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            return -1;
        buf += n;
        len -= (size_t)n;
    }
    return 0;
}

static size_t
count_lines(const char *buf, size_t len)
{
    size_t n = 0;

    for (size_t i = 0; i < len; i++)
        n += buf[i] == '\n';
    return n;
}

int
main(int argc, char **argv)
{
    static char buf[BUF_BYTES];
    size_t asked = 0, answered = 0;
    int stdin_open = 1;
    int sock;

    if (argc != 2) {
        fprintf(stderr, "usage: carrel-egress-helper SOCKET\n");
        return 2;
    }
    sock = connect_socket(argv[1]);
    if (sock < 0) {
        fprintf(stderr, "carrel-egress-helper: cannot reach carreld at %s: %s\n", argv[1],
                strerror(errno));
        return 1;
    }
    while (stdin_open || answered < asked) {
        struct pollfd fds[2] = {{.fd = sock, .events = POLLIN},
                                {.fd = stdin_open ? 0 : -1, .events = POLLIN}};
        ssize_t n;

        if (poll(fds, 2, -1) < 0) {
            if (errno == EINTR)
                continue;
            return 1;
        }
        if (fds[1].revents & (POLLIN | POLLHUP)) {
            n = read(0, buf, sizeof(buf));
            if (n <= 0) {
                stdin_open = 0;
            } else {
                asked += count_lines(buf, (size_t)n);
                if (write_all(sock, buf, (size_t)n) != 0)
                    return 1;
            }
        }
        if (fds[0].revents & (POLLIN | POLLHUP)) {
            n = read(sock, buf, sizeof(buf));
            /* carreld gone: squid fails closed on a helper that died. */
            if (n <= 0)
                return 1;
            answered += count_lines(buf, (size_t)n);
            if (write_all(1, buf, (size_t)n) != 0)
                return 1;
        }
    }
    return 0;
}
