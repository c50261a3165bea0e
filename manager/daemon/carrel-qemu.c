/*
 * carrel-qemu ARGS...: QEMU as every session's emulator. libvirt starts it (<emulator> in the
 * domain XML); it decides transparent huge pages (THP) for itself, which execve keeps, and
 * becomes CARREL_QEMU_BINARY with the same arguments.
 *
 * Why: QEMU asks for huge pages on guest RAM. Where the kernel maps the shared zero page on a
 * read of untouched memory, restoring a saved guest allocates only what it writes, but with THP
 * each write into an untouched 2 MiB region makes the kernel allocate and zero the whole region:
 * a 512 MiB guest whose saved state is 150 MiB ends up with all 512 MiB zeroed and resident,
 * which was most of a warm create's CPU. There THP goes off (bench/warm, bench/lifecycle's fork
 * x4; README "Performance"). Where a read allocates (no shared zero page), QEMU's load reads
 * every page, so all of guest RAM is resident either way: there THP stays on, one fault per
 * 2 MiB instead of 512, and a warm create of `tiny` took 1.6-2.3 s instead of 3.2 s here.
 *
 * With CARREL_QEMU_MEMORY in its environment (the domain XML's <qemu:env>, see
 * carrel_util_qemu_memory_args) guest RAM lives in a file and QEMU migrates with
 * x-ignore-shared: a warm state's save holds the device state only (7 MB for tiny, not 160),
 * and its clones map the file privately instead of loading (and, where reads allocate,
 * allocating) every page. QEMU 7.2 has no command-line switch for that capability, so a helper
 * sets it on a monitor of its own before libvirt's first command can start a migration.
 *
 * With CARREL_QEMU_CPU_CACHE in its environment, libvirt's monitor goes through a relay that
 * answers libvirt's ~400 questions about the CPU from a cache (carrel-qemu-relay.c).
 */
#define _GNU_SOURCE /* close_range */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "carrel-config.h"
#include "daemon/carrel-qemu-relay.h"
#include "util/util.h"

/* This process has one thread: a small probe is exact, and costs ~250 faults. */
#define PROBE_BYTES (1024 * 1024)

/* The helper's bound on QEMU's answers (QEMU reads the monitor once it is up, in seconds). */
#define HELPER_TIMEOUT_S 120
#define HELPER_FD 3

/* The helper: writes the QMP lines, reads two answers, says a refusal in the domain's log. */
static void
run_helper(int fd)
{
    FILE *in;
    char *line = NULL;
    size_t cap = 0;
    guint answers = 0;

    /* Nothing of QEMU's (its tap, libvirt's sockets) may outlive it here; stderr is the log. */
    if (fd != HELPER_FD && dup2(fd, HELPER_FD) < 0)
        _exit(1);
    close_range(HELPER_FD + 1, ~0U, 0);
    alarm(HELPER_TIMEOUT_S);
    if (write(HELPER_FD, carrel_util_qemu_ignore_shared_qmp,
              strlen(carrel_util_qemu_ignore_shared_qmp)) < 0)
        _exit(1);
    in = fdopen(HELPER_FD, "r");
    while (in && answers < 2 && getline(&line, &cap, in) > 0) {
        if (strstr(line, "\"error\""))
            fprintf(stderr, "carrel-qemu: QEMU refused x-ignore-shared: %s", line);
        if (strstr(line, "\"return\"") || strstr(line, "\"error\""))
            answers++;
    }
    _exit(0);
}

/* QEMU's end of the helper's monitor, or -1. The helper is forked twice: nobody's child, so
 * no zombie waits on a QEMU that never reaps it. */
static int
start_helper(void)
{
    int fds[2];
    pid_t child;

    if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, fds) != 0) {
        perror("carrel-qemu: socketpair");
        return -1;
    }
    child = fork();
    if (child == 0) {
        close(fds[0]);
        if (fork() == 0)
            run_helper(fds[1]);
        _exit(0);
    }
    close(fds[1]);
    if (child < 0 || waitpid(child, NULL, 0) < 0 || fcntl(fds[0], F_SETFD, 0) != 0) {
        perror("carrel-qemu: starting the memory helper");
        close(fds[0]);
        return -1;
    }
    return fds[0];
}

/* argv with guest RAM in the file the environment names, or NULL (said on stderr). */
static char **
memory_file_args(char **argv, const char *value)
{
    g_autoptr(GError) error = NULL;
    char **args;
    int fd = start_helper();

    if (fd < 0)
        return NULL;
    args = carrel_util_qemu_memory_args((const char *const *)argv, value, fd, &error);
    if (!args)
        fprintf(stderr, "carrel-qemu: %s\n", error->message);
    return args;
}

int
main(int argc, char **argv)
{
    const char *memory = g_getenv(CARREL_UTIL_QEMU_MEMORY_ENV);
    g_autoptr(GError) error = NULL;
    gboolean reads_allocate = FALSE;
    char **process_argv = argv;

    (void)argc;
    /* Unknown: THP off, as on most hosts. Either way QEMU runs; say why in the domain's log. */
    if (!carrel_util_reads_allocate(PROBE_BYTES, &reads_allocate, &error))
        fprintf(stderr, "carrel-qemu: probing memory: %s\n", error->message);
    if (!reads_allocate && prctl(PR_SET_THP_DISABLE, 1, 0, 0, 0) != 0)
        perror("carrel-qemu: turning transparent huge pages off");
    if (memory && !(argv = memory_file_args(argv, memory)))
        return 1;
    argv = carrel_qemu_relay_start(process_argv, argv, g_getenv(CARREL_UTIL_QEMU_CPU_CACHE_ENV));
    argv[0] = (char *)CARREL_QEMU_BINARY;
    execv(CARREL_QEMU_BINARY, argv);
    perror("carrel-qemu: starting " CARREL_QEMU_BINARY);
    return 127;
}
