/*
 * carrel-run SECONDS PROGRAM [ARG...]: what carreld's exec runs in the guest, in place of
 * `timeout --signal=KILL SECONDS PROGRAM...` (see hypervisor.h). PROGRAM runs as the leader of a
 * new process group, in this process (so it is the pid qemu-ga watches); a watchdog child kills
 * the whole group with SIGKILL at the deadline, and dies with PROGRAM if it ends first.
 *
 * Why not timeout(1): under TCG every dynamically linked program started costs tens of
 * milliseconds, and timeout starts itself, forks, then starts PROGRAM: measured through
 * guest-exec, `true` took 91 ms p50 alone and 150 ms under timeout. This one is linked
 * statically and PROGRAM replaces it at once.
 *
 * Exit status: PROGRAM's; 128 + 9 when the deadline killed it (qemu-ga reports the signal);
 * 127 when PROGRAM is not found, 126 when it cannot run, 125 for carrel-run's own errors (as
 * timeout(1)). Only libc: it is linked -static.
 */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <time.h>
#include <unistd.h>

/* The longest deadline carreld asks for (CARREL_HYPERVISOR_EXEC_MAX_TIMEOUT_S). */
#define MAX_SECONDS 3600
#define EXIT_USAGE 125
#define EXIT_CANNOT_RUN 126
#define EXIT_NOT_FOUND 127

/* A whole number of seconds, 1..MAX_SECONDS, digits only; 0 when it is not one. */
static unsigned
parse_seconds(const char *text)
{
    unsigned value = 0;

    if (!*text)
        return 0;
    for (const char *p = text; *p; p++) {
        if (*p < '0' || *p > '9')
            return 0;
        value = value * 10 + (unsigned)(*p - '0');
        if (value > MAX_SECONDS)
            return 0;
    }
    return value;
}

/* Sleeps until the deadline, whatever signals interrupt the sleep. */
static void
sleep_until(const struct timespec *deadline)
{
    while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, deadline, NULL) == EINTR)
        ;
}

/* The watchdog: holds none of PROGRAM's output pipes, so qemu-ga sees their end with PROGRAM's. */
static void
watchdog(pid_t leader, unsigned seconds)
{
    struct timespec deadline;
    int null = open("/dev/null", O_RDWR);

    if (null >= 0) {
        dup2(null, STDIN_FILENO);
        dup2(null, STDOUT_FILENO);
        dup2(null, STDERR_FILENO);
        if (null > STDERR_FILENO)
            close(null);
    }
    /* Dies with the leader; it may have ended (or become PROGRAM and ended) already. */
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (getppid() != leader)
        _exit(0);
    clock_gettime(CLOCK_MONOTONIC, &deadline);
    deadline.tv_sec += seconds;
    sleep_until(&deadline);
    kill(-leader, SIGKILL);
    _exit(0);
}

int
main(int argc, char **argv)
{
    unsigned seconds = argc >= 3 ? parse_seconds(argv[1]) : 0;
    pid_t leader = getpid(), child;

    if (seconds == 0) {
        fprintf(stderr, "usage: carrel-run SECONDS PROGRAM [ARG...] (SECONDS 1..%d)\n",
                MAX_SECONDS);
        return EXIT_USAGE;
    }
    /* As timeout(1) without --foreground: the group holds everything PROGRAM starts. */
    if (setpgid(0, 0) < 0 && errno != EPERM) {
        fprintf(stderr, "carrel-run: setpgid: %s\n", strerror(errno));
        return EXIT_USAGE;
    }
    child = fork();
    if (child < 0) {
        fprintf(stderr, "carrel-run: cannot start the watchdog: %s\n", strerror(errno));
        return EXIT_USAGE;
    }
    if (child == 0)
        watchdog(leader, seconds);
    execvp(argv[2], argv + 2);
    fprintf(stderr, "carrel-run: %s: %s\n", argv[2], strerror(errno));
    return errno == ENOENT ? EXIT_NOT_FOUND : EXIT_CANNOT_RUN;
}
