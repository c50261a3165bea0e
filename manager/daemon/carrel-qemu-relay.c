/*
 * carrel-qemu's monitor relay: a process between libvirt and QEMU's monitor that answers
 * libvirt's ~400 qom-gets of the CPU's properties from a cache (manager/util/util-qmp-relay.c
 * says why and what it recognises). The cache is a file per QEMU binary and CPU arguments in
 * the folder the domain's environment names; the first QEMU without one learns it from its own
 * answers. Everything else passes through, with the descriptors libvirt sends along.
 *
 * libvirt connects to the relay where it would to QEMU (its monitor socket), and reconnects
 * after a restart of its own; QEMU listens on a socket of its own in the cache folder (QEMU's
 * user's alone), to which the relay connects for each of libvirt's connections: QEMU sees each
 * of them begin and end as it would without the relay (a new greeting, capabilities again).
 * The relay ends with QEMU.
 */
#define _GNU_SOURCE /* close_range */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include "carrel-config.h"
#include "daemon/carrel-qemu-relay.h"
#include "util/util.h"

#define LISTEN_FD 3
#define READ_BYTES 65536

static gboolean
write_all(int fd, GString *out)
{
    gsize done = 0;

    while (done < out->len) {
        ssize_t n = write(fd, out->str + done, out->len - done);

        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            return FALSE;
        done += (gsize)n;
    }
    g_string_truncate(out, 0);
    return TRUE;
}

static GHashTable *
read_cache(const char *path)
{
    g_autofree char *text = NULL;
    g_autoptr(GError) error = NULL;
    GHashTable *cache;

    if (!g_file_get_contents(path, &text, NULL, NULL))
        return NULL;
    cache = carrel_qmp_cache_parse(text, &error);
    if (!cache)
        fprintf(stderr, "carrel-qemu: ignoring the CPU cache %s: %s\n", path, error->message);
    return cache;
}

/* Written whole under a new name, then renamed: a reader sees all of it or nothing (a cache a
 * crash may lose: the next QEMU learns it again). */
static void
write_cache(const char *path, GHashTable *learned)
{
    g_autofree char *text = carrel_qmp_cache_format(learned);
    g_autoptr(GError) error = NULL;

    if (carrel_util_write_new_file(path, text, -1, 0600, &error))
        fprintf(stderr, "carrel-qemu: learned %u CPU properties (%s)\n", g_hash_table_size(learned),
                path);
    else
        fprintf(stderr, "carrel-qemu: keeping the CPU's properties: %s\n", error->message);
}

/* Waits for libvirt on the listening socket; -1 once QEMU has ended (pidfd readable). */
static int
accept_client(int pidfd)
{
    struct pollfd fds[2] = {{.fd = LISTEN_FD, .events = POLLIN}, {.fd = pidfd, .events = POLLIN}};

    while (poll(fds, pidfd >= 0 ? 2 : 1, -1) < 0)
        if (errno != EINTR)
            return -1;
    if (!(fds[0].revents & POLLIN))
        return -1;
    return accept4(LISTEN_FD, NULL, NULL, SOCK_CLOEXEC);
}

static gboolean
unix_address(const char *path, struct sockaddr_un *addr)
{
    memset(addr, 0, sizeof(*addr));
    addr->sun_family = AF_UNIX;
    if (strlen(path) >= sizeof(addr->sun_path))
        return FALSE;
    memcpy(addr->sun_path, path, strlen(path));
    return TRUE;
}

/* A connection to QEMU's monitor, or -1 (QEMU gone). */
static int
connect_qemu(const char *path)
{
    struct sockaddr_un addr;
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);

    if (fd >= 0 && unix_address(path, &addr) &&
        connect(fd, (struct sockaddr *)&addr, sizeof(addr)) == 0)
        return fd;
    if (fd >= 0)
        close(fd);
    return -1;
}

/* File descriptors libvirt sends with a command (SCM_RIGHTS: getfd, add-fd), on their way. */
#define MAX_FDS 16
typedef struct {
    int fds[MAX_FDS];
    guint count;
} Passed;

static void
passed_close(Passed *passed)
{
    for (guint i = 0; i < passed->count; i++)
        close(passed->fds[i]);
    passed->count = 0;
}

/* The descriptors a message carried, kept while there is room (closed past it). */
static void
take_fds(struct msghdr *msg, Passed *passed)
{
    for (struct cmsghdr *c = CMSG_FIRSTHDR(msg); c; c = CMSG_NXTHDR(msg, c)) {
        const int *fds = (const int *)CMSG_DATA(c);
        guint n;

        if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS)
            continue;
        n = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
        for (guint i = 0; i < n; i++) {
            if (passed->count < MAX_FDS)
                passed->fds[passed->count++] = fds[i];
            else
                close(fds[i]);
        }
    }
}

typedef union {
    char space[CMSG_SPACE(sizeof(int) * MAX_FDS)];
    struct cmsghdr align;
} Control;

/* One read from fd into the relay, with the descriptors that came along (from libvirt only:
 * QEMU sends none, and any it did the kernel drops); FALSE at its end. */
static gboolean
pump(CarrelQmpRelay *relay, int fd, Passed *passed)
{
    char buf[READ_BYTES];
    Control control;
    struct iovec iov = {.iov_base = buf, .iov_len = sizeof(buf)};
    struct msghdr msg = {.msg_iov = &iov, .msg_iovlen = 1};
    ssize_t n;

    if (passed) {
        msg.msg_control = control.space;
        msg.msg_controllen = sizeof(control.space);
    }
    do
        n = recvmsg(fd, &msg, MSG_CMSG_CLOEXEC);
    while (n < 0 && errno == EINTR);
    if (passed && n >= 0)
        take_fds(&msg, passed);
    if (n <= 0)
        return FALSE;
    if (passed)
        carrel_qmp_relay_client_input(relay, buf, (gsize)n);
    else
        carrel_qmp_relay_qemu_input(relay, buf, (gsize)n);
    return TRUE;
}

/* To QEMU: the descriptors go with the first byte of what follows them, as libvirt sent them
 * with its command's first byte. */
static gboolean
write_to_qemu(int qemu, GString *out, Passed *passed)
{
    Control control;
    struct iovec iov = {.iov_base = out->str, .iov_len = 1};
    struct msghdr msg = {.msg_iov = &iov, .msg_iovlen = 1};
    struct cmsghdr *c;
    ssize_t n;

    if (passed->count && out->len) {
        memset(&control, 0, sizeof(control));
        msg.msg_control = control.space;
        msg.msg_controllen = CMSG_SPACE(sizeof(int) * passed->count);
        c = CMSG_FIRSTHDR(&msg);
        c->cmsg_level = SOL_SOCKET;
        c->cmsg_type = SCM_RIGHTS;
        c->cmsg_len = CMSG_LEN(sizeof(int) * passed->count);
        memcpy(CMSG_DATA(c), passed->fds, sizeof(int) * passed->count);
        do
            n = sendmsg(qemu, &msg, MSG_NOSIGNAL);
        while (n < 0 && errno == EINTR);
        passed_close(passed);
        if (n != 1)
            return FALSE;
        g_string_erase(out, 0, 1);
    }
    return write_all(qemu, out);
}

/* One connection of libvirt's, to its end; TRUE when QEMU's side ended (QEMU is gone). */
static gboolean
relay_loop(int client, int qemu, const char *cache_path)
{
    g_autoptr(GHashTable) known = read_cache(cache_path);
    g_autoptr(CarrelQmpRelay) relay = carrel_qmp_relay_new(known);
    struct pollfd fds[2] = {{.fd = client, .events = POLLIN}, {.fd = qemu, .events = POLLIN}};
    Passed passed = {.count = 0};
    gboolean said = FALSE;

    for (;;) {
        g_autoptr(GHashTable) learned = NULL;

        if (poll(fds, 2, -1) < 0) {
            if (errno == EINTR)
                continue;
            return TRUE;
        }
        if ((fds[0].revents & (POLLIN | POLLHUP | POLLERR)) && !pump(relay, client, &passed))
            break;
        if ((fds[1].revents & (POLLIN | POLLHUP | POLLERR)) && !pump(relay, qemu, NULL)) {
            (void)write_all(client, carrel_qmp_relay_to_client(relay));
            return TRUE;
        }
        if (!write_to_qemu(qemu, carrel_qmp_relay_to_qemu(relay), &passed))
            return TRUE;
        if (!write_all(client, carrel_qmp_relay_to_client(relay)))
            break;
        if ((learned = carrel_qmp_relay_take_learned(relay)))
            write_cache(cache_path, learned);
        if (!said && known && carrel_qmp_relay_storm_over(relay)) {
            fprintf(stderr, "carrel-qemu: %u CPU properties answered from %s\n",
                    carrel_qmp_relay_answered(relay), cache_path);
            said = TRUE;
        }
    }
    passed_close(&passed);
    return FALSE;
}

/* ps shows the relay as such, not as a second QEMU of the domain (its arguments are gone). */
static void
rename_process(char **process_argv)
{
    static const char name[] = "carrel-qemu-relay";
    char *start = process_argv[0], *end = start;

    for (guint i = 0; process_argv[i]; i++)
        end = process_argv[i] + strlen(process_argv[i]) + 1;
    memset(start, 0, end - start);
    if ((gsize)(end - start) > sizeof(name))
        memcpy(start, name, sizeof(name));
    (void)prctl(PR_SET_NAME, "qemu-relay", 0, 0, 0);
}

/* The relay's process: libvirt's socket on a fixed number, nothing else of QEMU's kept. */
static void
run_relay(char **process_argv, int listen_fd, pid_t qemu_pid, const char *qemu_path,
          const char *cache_path)
{
    int a = fcntl(listen_fd, F_DUPFD_CLOEXEC, 100), pidfd, client, qemu;
    gboolean qemu_ended = FALSE;

    if (a < 0 || dup2(a, LISTEN_FD) < 0)
        _exit(1);
    close_range(LISTEN_FD + 1, ~0U, 0);
    (void)prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0);
    rename_process(process_argv);
    /* Without it (a kernel before 5.3), the relay ends at QEMU's end only while libvirt is
     * connected, as it is but for its own restarts. */
    pidfd = (int)syscall(SYS_pidfd_open, qemu_pid, 0);
    while (!qemu_ended && (client = accept_client(pidfd)) >= 0) {
        if ((qemu = connect_qemu(qemu_path)) < 0)
            qemu_ended = TRUE;
        else {
            qemu_ended = relay_loop(client, qemu, cache_path);
            close(qemu);
        }
        close(client);
    }
    (void)unlink(qemu_path);
    _exit(0);
}

/* QEMU's own listening monitor socket at path, or -1. */
static int
listen_at(const char *path)
{
    struct sockaddr_un addr;
    int fd;

    if (!unix_address(path, &addr)) {
        errno = ENAMETOOLONG;
        return -1;
    }
    fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    (void)unlink(path);
    if (fd >= 0 && bind(fd, (struct sockaddr *)&addr, sizeof(addr)) == 0 && listen(fd, 1) == 0)
        return fd;
    if (fd >= 0)
        close(fd);
    return -1;
}

/* Where the cache of this QEMU and argv lives, or NULL (said on stderr). */
static char *
cache_path_for(char **argv, const char *cache_dir)
{
    g_autofree char *identity = NULL;
    g_autofree char *key = NULL;
    struct stat st;

    if (!g_path_is_absolute(cache_dir) || stat(CARREL_QEMU_BINARY, &st) != 0) {
        fprintf(stderr, "carrel-qemu: no monitor relay: %s\n",
                g_path_is_absolute(cache_dir) ? g_strerror(errno) : "cache folder not absolute");
        return NULL;
    }
    identity = g_strdup_printf("%s:%ju:%ju:%jd:%jd.%09ld", CARREL_QEMU_BINARY, (uintmax_t)st.st_dev,
                               (uintmax_t)st.st_ino, (intmax_t)st.st_size,
                               (intmax_t)st.st_mtim.tv_sec, st.st_mtim.tv_nsec);
    key = carrel_util_qemu_cpu_key((const char *const *)argv, identity);
    return g_build_filename(cache_dir, key, NULL);
}

char **
carrel_qemu_relay_start(char **process_argv, char **argv, const char *cache_dir)
{
    g_autofree char *cache_path = NULL;
    g_autofree char *qemu_path = NULL;
    g_auto(GStrv) relayed = NULL;
    int qemu_listen, listen_fd = -1;
    pid_t child, qemu_pid = getpid();

    if (!cache_dir || !(cache_path = cache_path_for(argv, cache_dir)))
        return argv;
    /* A name no other QEMU's relay could take for its own, even after this pid's reuse. */
    qemu_path =
        g_strdup_printf("%s/monitor-%d-%08x.sock", cache_dir, (int)qemu_pid, g_random_int());
    if ((qemu_listen = listen_at(qemu_path)) < 0) {
        fprintf(stderr, "carrel-qemu: no monitor relay: %s: %s\n", qemu_path, g_strerror(errno));
        return argv;
    }
    /* Not libvirt's monitor as it makes it (a command line of another libvirt): QEMU's own. */
    if (!carrel_util_qemu_monitor_args((const char *const *)argv, qemu_listen, &relayed,
                                       &listen_fd)) {
        close(qemu_listen);
        (void)unlink(qemu_path);
        return argv;
    }
    /* Forked twice: nobody's child, so no zombie waits on a QEMU that never reaps it. */
    if (fcntl(qemu_listen, F_SETFD, 0) != 0 || (child = fork()) < 0) {
        /* libvirt's socket is still QEMU's: it goes on without the relay. */
        perror("carrel-qemu: starting the monitor relay");
        close(qemu_listen);
        (void)unlink(qemu_path);
        return argv;
    }
    if (child == 0) {
        if (fork() == 0)
            run_relay(process_argv, listen_fd, qemu_pid, qemu_path, cache_path);
        _exit(0);
    }
    while (waitpid(child, NULL, 0) < 0 && errno == EINTR)
        ;
    /* The relay listens where libvirt connects; QEMU listens where the relay does. */
    close(listen_fd);
    return g_steal_pointer(&relayed);
}
