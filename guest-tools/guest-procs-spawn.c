/* proc start: runs a command detached from carrel-guest (and so from the guest agent), its
 * output going to files in a private spool folder that later calls read (guest-procs.c).
 *
 * Three processes per handle: the keeper (a session leader that waits for the command and
 * records how it ended), the holder (keeps the write end of the stdin FIFO open, so the command
 * sees no end of input until "proc close" kills it) and the command, in its own process group
 * so that "proc kill" reaches what it started too. */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <glib-unix.h>
#include <glib/gstdio.h>

#include "guest-procs.h"

void
carrel_guest_procs_null_stdio(void)
{
    int fd = open("/dev/null", O_RDWR);

    if (fd < 0)
        _exit(1);
    dup2(fd, STDIN_FILENO);
    dup2(fd, STDOUT_FILENO);
    dup2(fd, STDERR_FILENO);
    if (fd > STDERR_FILENO)
        close(fd);
}

int
carrel_guest_procs_open_in(const char *dir, const char *name, int flags)
{
    g_autofree char *path = g_build_filename(dir, name, NULL);

    return open(path, flags | O_CLOEXEC | O_NOFOLLOW | O_NOCTTY, 0600);
}

static G_GNUC_NORETURN void
run_command(const char *dir, char **argv, int in)
{
    int out = carrel_guest_procs_open_in(dir, "stdout", O_WRONLY | O_CREAT | O_APPEND);
    int err = carrel_guest_procs_open_in(dir, "stderr", O_WRONLY | O_CREAT | O_APPEND);
    /* A command that prints without end would fill the guest's /run: past this it gets
     * SIGXFSZ, as any program over its file size limit does. */
    struct rlimit fsize = {CARREL_GUEST_PROC_OUTPUT_MAX, CARREL_GUEST_PROC_OUTPUT_MAX};
    static const char message[] = "carrel-guest: cannot run the command\n";

    if (in < 0 || out < 0 || err < 0 || fcntl(in, F_SETFL, 0) < 0)
        _exit(126);
    setpgid(0, 0);
    dup2(in, STDIN_FILENO);
    dup2(out, STDOUT_FILENO);
    dup2(err, STDERR_FILENO);
    setrlimit(RLIMIT_FSIZE, &fsize);
    signal(SIGPIPE, SIG_DFL);
    if (chdir("/") < 0)
        _exit(126);
    execvp(argv[0], argv);
    if (write(STDERR_FILENO, message, sizeof(message) - 1) < 0) {
        /* nothing left to tell */
    }
    _exit(errno == ENOENT ? 127 : 126);
}

static G_GNUC_NORETURN void
run_holder(int fifo)
{
    /* Dies with the keeper, whatever ends it. */
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    (void)fifo;
    for (;;)
        pause();
}

void
carrel_guest_procs_write_small(const char *dir, const char *name, const char *text)
{
    g_autofree char *path = g_build_filename(dir, name, NULL);
    g_autofree char *tmp = g_strconcat(path, ".new", NULL);

    if (g_file_set_contents_full(tmp, text, -1, G_FILE_SET_CONTENTS_NONE, 0600, NULL))
        g_rename(tmp, path);
}

pid_t
carrel_guest_procs_fork_holder(const char *dir)
{
    int fifo = carrel_guest_procs_open_in(dir, "stdin", O_RDWR);
    pid_t pid;

    if (fifo < 0)
        return -1;
    pid = fork();
    if (pid == 0) {
        run_holder(fifo);
    }
    close(fifo);
    return pid;
}

static G_GNUC_NORETURN void
run_keeper(const char *dir, char **argv, int report)
{
    pid_t holder, child;
    int status = 0, in;
    g_autofree char *text = NULL;

    setsid();
    carrel_guest_procs_null_stdio();
    holder = carrel_guest_procs_fork_holder(dir);
    /* The read end is open before anyone hears of the process: input written and closed at
     * once is not lost in a FIFO nobody had open. Non-blocking only for this open. */
    in = holder > 0 ? carrel_guest_procs_open_in(dir, "stdin", O_RDONLY | O_NONBLOCK) : -1;
    child = in >= 0 ? fork() : -1;
    if (child == 0)
        run_command(dir, argv, in);
    if (in >= 0)
        close(in);
    /* Here too, so that the group exists before anyone is told the pid (no race with kill). */
    if (child > 0)
        setpgid(child, child);
    text = g_strdup_printf("%d\n", (int)holder);
    carrel_guest_procs_write_small(dir, "holder", text);
    g_free(text);
    text = g_strdup_printf("%d\n", (int)child);
    carrel_guest_procs_write_small(dir, "pid", text);
    if (write(report, &child, sizeof(child)) != sizeof(child))
        _exit(1);
    close(report);
    if (child < 0)
        _exit(1);
    while (waitpid(child, &status, 0) < 0 && errno == EINTR)
        ;
    /* Nothing the command started is left behind, nor the holder. */
    kill(-child, SIGKILL);
    kill(holder, SIGKILL);
    waitpid(holder, NULL, 0);
    g_free(text);
    text = carrel_guest_procs_exit_text(status);
    carrel_guest_procs_write_small(dir, "exit", text);
    _exit(0);
}

char *
carrel_guest_procs_exit_text(int status)
{
    return g_strdup_printf("%d\n", WIFEXITED(status)     ? WEXITSTATUS(status)
                                   : WIFSIGNALED(status) ? 128 + WTERMSIG(status)
                                                         : -1);
}

gboolean
carrel_guest_procs_spawn(const char *dir, char **argv, gint64 *ret_pid, GError **error)
{
    int report[2];
    pid_t keeper, child = -1;
    g_autofree char *fifo = g_build_filename(dir, "stdin", NULL);

    if (mkfifo(fifo, 0600) < 0 || !g_unix_open_pipe(report, FD_CLOEXEC, NULL)) {
        g_set_error(error, CARREL_GUEST_ERROR, CARREL_GUEST_ERROR_INTERNAL,
                    "cannot prepare '%s': %s", dir, g_strerror(errno));
        return FALSE;
    }
    keeper = fork();
    if (keeper == 0) {
        close(report[0]);
        run_keeper(dir, argv, report[1]);
    }
    close(report[1]);
    if (keeper < 0 || read(report[0], &child, sizeof(child)) != sizeof(child) || child <= 0) {
        close(report[0]);
        g_set_error(error, CARREL_GUEST_ERROR, CARREL_GUEST_ERROR_LAUNCH,
                    "cannot start the command: %s", g_strerror(errno));
        return FALSE;
    }
    close(report[0]);
    *ret_pid = child;
    return TRUE;
}
