/* proc start --pty: a program on a pseudo-terminal, for carreld's interactive shell.
 *
 * The same three processes as a plain handle (guest-procs-spawn.c), but the keeper holds the
 * terminal's master: it copies what the program writes to the "stdout" file and what arrives on
 * the "stdin" FIFO to the terminal. The program leads a session of its own with the terminal as
 * its controlling tty, so a shell has job control; when it ends, everything left in that
 * session is killed (background jobs included), then the master is drained. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <poll.h>
#include <pwd.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <termios.h>
#include <unistd.h>

#include <glib-unix.h>
#include <glib/gstdio.h>

#include "guest-procs.h"

/* While the program runs, the keeper looks at it this often (ms). */
#define PTY_TICK_MS 100
/* After it ended, output still on its way is awaited this long per read (ms), at most this many
 * times: a flood cannot keep the keeper forever. */
#define PTY_DRAIN_MS 200
#define PTY_DRAIN_ROUNDS 64
#define PTY_PENDING_MAX (64 * 1024)

/* Everything the child needs, prepared before the fork. */
typedef struct {
    char **argv;
    char **envp;
    char *home;
    char *name;
    uid_t uid;
    gid_t gid;
    gboolean switch_user;
    int slave;
} PtyChild;

static void
pty_child_clear(PtyChild *c)
{
    g_strfreev(c->argv);
    g_strfreev(c->envp);
    g_free(c->home);
    g_free(c->name);
}

G_DEFINE_AUTO_CLEANUP_CLEAR_FUNC(PtyChild, pty_child_clear)

static char **
login_env(const char *name, const char *home, const char *shell, uid_t uid)
{
    g_autoptr(GStrvBuilder) b = g_strv_builder_new();
    g_autofree char *h = g_strconcat("HOME=", home, NULL);
    g_autofree char *u = g_strconcat("USER=", name, NULL);
    g_autofree char *l = g_strconcat("LOGNAME=", name, NULL);
    g_autofree char *s = g_strconcat("SHELL=", shell, NULL);

    g_strv_builder_add_many(b, "TERM=xterm-256color", "LANG=C.UTF-8", h, u, l, s, NULL);
    g_strv_builder_add(b, uid == 0
                              ? "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
                              : "PATH=/usr/local/bin:/usr/bin:/bin:/usr/games");
    return g_strv_builder_end(b);
}

/* As root without --user: the desktop session's user (on :0), else "user", else "agent" (the
 * templates' desktop users). */
static struct passwd *
desktop_user(void)
{
    g_autoptr(CarrelGuestSession) session = carrel_guest_proc_find_session(0);
    struct passwd *pw = session && session->uid != 0 ? getpwuid(session->uid) : NULL;

    if (!pw)
        pw = getpwnam(CARREL_GUEST_PTY_USER);
    return pw ? pw : getpwnam("agent");
}

/* Whom the program runs as: spec->user, or as root the desktop's user, or the caller. */
static gboolean
pty_identity(const CarrelGuestPtySpec *spec, PtyChild *c, GError **error)
{
    const char *want = spec->user ? spec->user : geteuid() == 0 ? CARREL_GUEST_PTY_USER : NULL;
    struct passwd *pw = spec->user       ? getpwnam(spec->user)
                        : geteuid() == 0 ? desktop_user()
                                         : getpwuid(geteuid());

    if (!pw) {
        g_set_error(error, CARREL_GUEST_ERROR, CARREL_GUEST_ERROR_NOT_FOUND,
                    "no user '%s' in this guest", want ? want : "(self)");
        return FALSE;
    }
    if (geteuid() != 0 && pw->pw_uid != geteuid()) {
        g_set_error(error, CARREL_GUEST_ERROR, CARREL_GUEST_ERROR_FORBIDDEN,
                    "only root may start a terminal as '%s'", pw->pw_name);
        return FALSE;
    }
    c->switch_user = geteuid() == 0 && pw->pw_uid != 0;
    c->uid = pw->pw_uid;
    c->gid = pw->pw_gid;
    c->name = g_strdup(pw->pw_name);
    c->home = g_strdup(pw->pw_dir && g_path_is_absolute(pw->pw_dir) ? pw->pw_dir : "/");
    c->envp = login_env(c->name, c->home, "/bin/bash", pw->pw_uid);
    return TRUE;
}

static G_GNUC_NORETURN void
run_on_tty(PtyChild *c)
{
    static const char message[] = "carrel-guest: cannot run the command\r\n";

    setsid();
    if (ioctl(c->slave, TIOCSCTTY, 0) < 0)
        _exit(126);
    dup2(c->slave, STDIN_FILENO);
    dup2(c->slave, STDOUT_FILENO);
    dup2(c->slave, STDERR_FILENO);
    if (c->slave > STDERR_FILENO)
        close(c->slave);
    signal(SIGPIPE, SIG_DFL);
    if (c->switch_user &&
        (initgroups(c->name, c->gid) < 0 || setgid(c->gid) < 0 || setuid(c->uid) < 0))
        _exit(126);
    if (chdir(c->home) < 0 && chdir("/") < 0)
        _exit(126);
    execvpe(c->argv[0], c->argv, c->envp);
    if (write(STDERR_FILENO, message, sizeof(message) - 1) < 0) {
        /* nothing left to tell */
    }
    _exit(errno == ENOENT ? 127 : 126);
}

/* A new terminal of rows x cols: its master, and in ret_slave a descriptor of its slave side
 * that the keeper keeps (so that the master never reads EIO before the program opened it). */
static int
open_terminal(const CarrelGuestPtySpec *spec, const PtyChild *c, int *ret_slave, char **ret_name)
{
    struct winsize ws = {.ws_row = spec->rows ? spec->rows : 24,
                         .ws_col = spec->cols ? spec->cols : 80};
    int master = posix_openpt(O_RDWR | O_NOCTTY | O_CLOEXEC);
    char name[64];
    int slave;

    if (master < 0)
        return -1;
    if (grantpt(master) < 0 || unlockpt(master) < 0 || ptsname_r(master, name, sizeof(name)) != 0 ||
        (slave = open(name, O_RDWR | O_NOCTTY | O_CLOEXEC)) < 0) {
        close(master);
        return -1;
    }
    /* As login does: the user owns the terminal it types on. */
    if (c->switch_user && fchown(slave, c->uid, (gid_t)-1) < 0) {
        /* the program still has its descriptors */
    }
    ioctl(master, TIOCSWINSZ, &ws);
    *ret_slave = slave;
    *ret_name = g_strdup(name);
    return master;
}

/* SIGKILL to every process of session sid (a shell's background jobs have groups of their
 * own), read from /proc. */
static void
kill_session(pid_t sid)
{
    g_autoptr(GDir) d = g_dir_open("/proc", 0, NULL);
    const char *name;
    guint seen = 0;

    while (d && (name = g_dir_read_name(d)) && seen++ < CARREL_GUEST_LIMIT_PROC_ENTRIES) {
        g_autofree char *path = NULL;
        g_autofree char *stat = NULL;
        gsize len = 0;
        const char *close_paren;
        long fields[4] = {0};
        char state = 0;

        if (!g_ascii_isdigit(name[0]))
            continue;
        path = g_strdup_printf("/proc/%s/stat", name);
        if (!carrel_guest_read_bounded(path, 1024, &stat, &len, NULL))
            continue;
        close_paren = strrchr(stat, ')');
        /* ") STATE PPID PGRP SESSION" */
        if (close_paren &&
            sscanf(close_paren + 1, " %c %ld %ld %ld", &state, &fields[0], &fields[1],
                   &fields[2]) == 4 &&
            fields[2] == sid)
            kill((pid_t)atol(name), SIGKILL);
    }
}

typedef struct {
    int master;
    int in; /* -1 once the FIFO ended */
    int out;
    pid_t child;
    gint64 written;
    gboolean over;
    GByteArray *pending; /* input not yet taken by the terminal */
} Relay;

static void
store(Relay *r, const char *buf, gsize n)
{
    gsize room = r->written < CARREL_GUEST_PROC_OUTPUT_MAX
                     ? (gsize)(CARREL_GUEST_PROC_OUTPUT_MAX - r->written)
                     : 0;
    gsize take = MIN(n, room);

    /* Past the bound the program gets SIGXFSZ, as a plain handle's does from RLIMIT_FSIZE. */
    if (take < n && !r->over) {
        r->over = TRUE;
        kill(-r->child, SIGXFSZ);
    }
    for (gsize done = 0; done < take;) {
        gssize w = write(r->out, buf + done, take - done);

        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            break;
        done += (gsize)w;
    }
    r->written += (gint64)take;
}

/* One read of the master: FALSE when it has nothing more to give (EIO: no slave side left). */
static gboolean
read_master(Relay *r)
{
    char buf[16384];
    gssize n = read(r->master, buf, sizeof(buf));

    if (n > 0)
        store(r, buf, (gsize)n);
    return n > 0 || (n < 0 && (errno == EAGAIN || errno == EINTR));
}

static void
read_input(Relay *r)
{
    char buf[4096];
    gssize n = read(r->in, buf, sizeof(buf));

    if (n > 0) {
        g_byte_array_append(r->pending, (const guint8 *)buf, (guint)n);
    } else if (n == 0) {
        /* proc close: the end of input is the terminal's end-of-file character (^D). */
        g_byte_array_append(r->pending, (const guint8 *)"\x04", 1);
        close(r->in);
        r->in = -1;
    }
}

static void
write_input(Relay *r)
{
    gssize n = write(r->master, r->pending->data, r->pending->len);

    if (n > 0)
        g_byte_array_remove_range(r->pending, 0, (guint)n);
}

/* Relays until the program ends; its wait status. */
static int
relay_until_exit(Relay *r)
{
    int status = 0;

    for (;;) {
        struct pollfd p[2] = {
            {.fd = r->master, .events = POLLIN | (r->pending->len ? POLLOUT : 0)},
            /* No more input is taken while the terminal has not taken the last. */
            {.fd = r->pending->len < PTY_PENDING_MAX ? r->in : -1, .events = POLLIN},
        };

        if (waitpid(r->child, &status, WNOHANG) == r->child)
            return status;
        if (poll(p, 2, PTY_TICK_MS) < 0 && errno != EINTR)
            break;
        if (p[0].revents & POLLIN)
            read_master(r);
        if ((p[0].revents & POLLOUT) && r->pending->len)
            write_input(r);
        if (p[1].revents & (POLLIN | POLLHUP))
            read_input(r);
    }
    while (waitpid(r->child, &status, 0) < 0 && errno == EINTR)
        ;
    return status;
}

/* After the end: what is still on its way through the terminal, until EIO (every slave
 * descriptor closed) or a quiet PTY_DRAIN_MS. */
static void
drain(Relay *r)
{
    for (guint i = 0; i < PTY_DRAIN_ROUNDS; i++) {
        struct pollfd p = {.fd = r->master, .events = POLLIN};

        if (poll(&p, 1, PTY_DRAIN_MS) <= 0 || !(p.revents & (POLLIN | POLLHUP)))
            return;
        if (!read_master(r))
            return;
    }
}

static G_GNUC_NORETURN void
run_pty_keeper(const char *dir, const CarrelGuestPtySpec *spec, PtyChild *c, int report)
{
    Relay r = {.in = -1, .out = -1, .child = -1};
    g_autofree char *tty = NULL;
    g_autofree char *text = NULL;
    pid_t holder;
    int status;

    setsid();
    carrel_guest_procs_null_stdio();
    holder = carrel_guest_procs_fork_holder(dir);
    r.in = holder > 0 ? carrel_guest_procs_open_in(dir, "stdin", O_RDONLY | O_NONBLOCK) : -1;
    r.out = carrel_guest_procs_open_in(dir, "stdout", O_WRONLY | O_CREAT | O_APPEND);
    close(carrel_guest_procs_open_in(dir, "stderr", O_WRONLY | O_CREAT | O_APPEND));
    r.master = r.in >= 0 && r.out >= 0 ? open_terminal(spec, c, &c->slave, &tty) : -1;
    r.child = r.master >= 0 ? fork() : -1;
    if (r.child == 0)
        run_on_tty(c);
    text = g_strdup_printf("%d\n", (int)holder);
    carrel_guest_procs_write_small(dir, "holder", text);
    g_free(text);
    text = g_strdup_printf("%d\n", (int)r.child);
    carrel_guest_procs_write_small(dir, "pid", text);
    if (tty)
        carrel_guest_procs_write_small(dir, "tty", tty);
    if (write(report, &r.child, sizeof(r.child)) != sizeof(r.child))
        _exit(1);
    close(report);
    if (r.child < 0)
        _exit(1);
    fcntl(r.master, F_SETFL, O_NONBLOCK);
    r.pending = g_byte_array_new();
    status = relay_until_exit(&r);
    /* Nothing the program started is left behind, in its group or in its session. */
    kill(-r.child, SIGKILL);
    kill_session(r.child);
    close(c->slave);
    drain(&r);
    kill(holder, SIGKILL);
    waitpid(holder, NULL, 0);
    g_free(text);
    text = carrel_guest_procs_exit_text(status);
    carrel_guest_procs_write_small(dir, "exit", text);
    _exit(0);
}

gboolean
carrel_guest_procs_spawn_pty(const char *dir, char **argv, const CarrelGuestPtySpec *spec,
                             gint64 *ret_pid, GError **error)
{
    static const char *const login[] = {"/bin/bash", "-l", NULL};
    g_auto(PtyChild) c = {.slave = -1};
    int report[2];
    pid_t keeper, child = -1;
    g_autofree char *fifo = g_build_filename(dir, "stdin", NULL);

    if (!pty_identity(spec, &c, error))
        return FALSE;
    c.argv = g_strdupv(argv && argv[0] ? argv : (char **)login);
    if (mkfifo(fifo, 0600) < 0 || !g_unix_open_pipe(report, FD_CLOEXEC, NULL)) {
        g_set_error(error, CARREL_GUEST_ERROR, CARREL_GUEST_ERROR_INTERNAL,
                    "cannot prepare '%s': %s", dir, g_strerror(errno));
        return FALSE;
    }
    keeper = fork();
    if (keeper == 0) {
        close(report[0]);
        run_pty_keeper(dir, spec, &c, report[1]);
    }
    close(report[1]);
    if (keeper < 0 || read(report[0], &child, sizeof(child)) != sizeof(child) || child <= 0) {
        close(report[0]);
        g_set_error(error, CARREL_GUEST_ERROR, CARREL_GUEST_ERROR_LAUNCH,
                    "cannot start the command on a terminal: %s", g_strerror(errno));
        return FALSE;
    }
    close(report[0]);
    *ret_pid = child;
    return TRUE;
}
