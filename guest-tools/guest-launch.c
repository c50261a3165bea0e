/* launch / open: start a program in the desktop session, as the desktop user, detached. */
#define _GNU_SOURCE /* close_range, getgrouplist */
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <pwd.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>
#include <glib-unix.h>

#include "guest-x11.h"

#define DEFAULT_PATH "/usr/local/bin:/usr/bin:/bin:/usr/games"
#define PW_BUFFER_SIZE 16384

typedef enum {
    STAGE_OK,
    STAGE_IDENTITY,
    STAGE_STDIO,
    STAGE_EXEC,
} ChildStage;

typedef struct {
    char *name;
    uid_t uid;
    gid_t gid;
    char *home;
    char *shell;
} User;

/* Everything the child needs, prepared before fork so that the child only makes system calls. */
typedef struct {
    User user;
    gboolean switch_user;
    gid_t groups[CARREL_GUEST_LIMIT_GROUPS];
    int n_groups;
    char *path;
    GStrv argv;
    GStrv envp;
    char *cwd;
    char *log_path;
} LaunchPlan;

static void
user_clear(User *user)
{
    g_clear_pointer(&user->name, g_free);
    g_clear_pointer(&user->home, g_free);
    g_clear_pointer(&user->shell, g_free);
}

static void
plan_clear(LaunchPlan *plan)
{
    user_clear(&plan->user);
    g_clear_pointer(&plan->path, g_free);
    g_clear_pointer(&plan->argv, g_strfreev);
    g_clear_pointer(&plan->envp, g_strfreev);
    g_clear_pointer(&plan->cwd, g_free);
    g_clear_pointer(&plan->log_path, g_free);
}

G_DEFINE_AUTO_CLEANUP_CLEAR_FUNC(LaunchPlan, plan_clear)

static gboolean
user_from_passwd(const char *name, uid_t uid, User *ret_user)
{
    g_autofree char *buffer = g_malloc(PW_BUFFER_SIZE);
    struct passwd entry;
    struct passwd *found = NULL;

    if (name)
        getpwnam_r(name, &entry, buffer, PW_BUFFER_SIZE, &found);
    else
        getpwuid_r(uid, &entry, buffer, PW_BUFFER_SIZE, &found);
    if (!found)
        return FALSE;
    ret_user->name = g_strdup(found->pw_name);
    ret_user->uid = found->pw_uid;
    ret_user->gid = found->pw_gid;
    ret_user->home = g_strdup(found->pw_dir && found->pw_dir[0] ? found->pw_dir : "/");
    ret_user->shell = g_strdup(found->pw_shell && found->pw_shell[0] ? found->pw_shell : "/bin/sh");
    return TRUE;
}

/* --user, else the user running the session's processes, else the first of "agent", "user". */
static gboolean
resolve_user(const CarrelGuestOptions *options, const CarrelGuestSession *session, User *ret_user,
             GError **error)
{
    if (options->user) {
        if (user_from_passwd(options->user, 0, ret_user))
            return TRUE;
        g_set_error(error, CARREL_GUEST_ERROR, CARREL_GUEST_ERROR_NOT_FOUND,
                    "no user '%s' in this guest", options->user);
        return FALSE;
    }
    if (session && user_from_passwd(NULL, session->uid, ret_user))
        return TRUE;
    if (user_from_passwd("agent", 0, ret_user) || user_from_passwd("user", 0, ret_user))
        return TRUE;
    g_set_error(error, CARREL_GUEST_ERROR, CARREL_GUEST_ERROR_NOT_FOUND,
                "no desktop user found on display '%s' (no session process, no user 'agent' or "
                "'user'); pass --user",
                options->display);
    return FALSE;
}

/* The launched program must not run as root, and only root can start it as someone else. */
static gboolean
check_identity(LaunchPlan *plan, GError **error)
{
    uid_t self = getuid();

    if (plan->user.uid == 0) {
        g_set_error(error, CARREL_GUEST_ERROR, CARREL_GUEST_ERROR_FORBIDDEN,
                    "refusing to launch as root ('%s')", plan->user.name);
        return FALSE;
    }
    if (self != 0 && self != plan->user.uid) {
        g_set_error(error, CARREL_GUEST_ERROR, CARREL_GUEST_ERROR_FORBIDDEN,
                    "cannot launch as '%s': running as uid %u, not as root or that user",
                    plan->user.name, (unsigned int)self);
        return FALSE;
    }
    plan->switch_user = self == 0;
    plan->n_groups = CARREL_GUEST_LIMIT_GROUPS;
    if (getgrouplist(plan->user.name, plan->user.gid, plan->groups, &plan->n_groups) < 0)
        plan->n_groups = CARREL_GUEST_LIMIT_GROUPS;
    return TRUE;
}

static gboolean
is_user_file(const char *path, uid_t uid)
{
    struct stat st;

    return path && stat(path, &st) == 0 && S_ISREG(st.st_mode) && st.st_uid == uid;
}

static gboolean
is_user_dir(const char *path, uid_t uid)
{
    struct stat st;

    return stat(path, &st) == 0 && S_ISDIR(st.st_mode) && st.st_uid == uid;
}

/* The cookie the user's own session uses; NULL when none is known (a server without auth). */
static char *
user_xauthority(const CarrelGuestOptions *options, const CarrelGuestSession *session,
                const User *user)
{
    g_autofree char *home_file = g_build_filename(user->home, ".Xauthority", NULL);
    g_autofree char *run_file = g_strdup_printf("/run/user/%u/Xauthority", (unsigned)user->uid);

    if (options->xauthority)
        return g_strdup(options->xauthority);
    if (session && session->uid == user->uid && session->xauthority &&
        g_file_test(session->xauthority, G_FILE_TEST_IS_REGULAR))
        return g_strdup(session->xauthority);
    if (is_user_file(run_file, user->uid))
        return g_steal_pointer(&run_file);
    if (is_user_file(home_file, user->uid))
        return g_steal_pointer(&home_file);
    return NULL;
}

static GStrv
build_env(const CarrelGuestOptions *options, const CarrelGuestSession *session, const User *user)
{
    GStrv env = NULL;
    g_autofree char *xauthority = user_xauthority(options, session, user);
    g_autofree char *runtime = g_strdup_printf("/run/user/%u", (unsigned)user->uid);

    if (session && session->uid == user->uid)
        env = g_strdupv(session->env);
    env = g_environ_setenv(env, "DISPLAY", options->display, TRUE);
    env = g_environ_setenv(env, "HOME", user->home, TRUE);
    env = g_environ_setenv(env, "USER", user->name, TRUE);
    env = g_environ_setenv(env, "LOGNAME", user->name, TRUE);
    env = g_environ_setenv(env, "SHELL", user->shell, TRUE);
    env = g_environ_setenv(env, "PATH", DEFAULT_PATH, FALSE);
    env = g_environ_setenv(env, "LANG", "C.UTF-8", FALSE);
    if (is_user_dir(runtime, user->uid))
        env = g_environ_setenv(env, "XDG_RUNTIME_DIR", runtime, FALSE);
    if (xauthority)
        env = g_environ_setenv(env, "XAUTHORITY", xauthority, TRUE);
    return env;
}

/* A bare name is looked up in the launched program's PATH; a path must be absolute. */
static char *
find_program(const char *name, const char *const *envp, GError **error)
{
    const char *path_env = g_environ_getenv((char **)envp, "PATH");
    g_auto(GStrv) dirs = NULL;

    if (strchr(name, '/')) {
        if (g_path_is_absolute(name) && g_file_test(name, G_FILE_TEST_IS_EXECUTABLE) &&
            !g_file_test(name, G_FILE_TEST_IS_DIR))
            return g_strdup(name);
        g_set_error(error, CARREL_GUEST_ERROR, CARREL_GUEST_ERROR_NOT_FOUND,
                    "program '%s' is not an executable file (give a bare name or an absolute path)",
                    name);
        return NULL;
    }
    dirs = g_strsplit(path_env ? path_env : DEFAULT_PATH, ":", 64);
    for (guint i = 0; dirs[i]; i++) {
        g_autofree char *candidate = NULL;

        if (!g_path_is_absolute(dirs[i]))
            continue;
        candidate = g_build_filename(dirs[i], name, NULL);
        if (g_file_test(candidate, G_FILE_TEST_IS_EXECUTABLE) &&
            !g_file_test(candidate, G_FILE_TEST_IS_DIR))
            return g_steal_pointer(&candidate);
    }
    g_set_error(error, CARREL_GUEST_ERROR, CARREL_GUEST_ERROR_NOT_FOUND,
                "program '%s' not found in PATH '%s'", name, path_env ? path_env : DEFAULT_PATH);
    return NULL;
}

/* In the child: drop to the user, check that it cannot come back, detach.  Returns the stage
 * that failed (errno set) or STAGE_OK. */
static ChildStage
child_setup(const LaunchPlan *plan)
{
    const User *user = &plan->user;
    sigset_t none;
    int null_fd;
    int log_fd;

    setsid();
    if (plan->switch_user && (setgroups((size_t)plan->n_groups, plan->groups) != 0 ||
                              setgid(user->gid) != 0 || setuid(user->uid) != 0))
        return STAGE_IDENTITY;
    if (getuid() != user->uid || geteuid() != user->uid || getgid() != user->gid ||
        getegid() != user->gid || (user->uid != 0 && setuid(0) == 0)) {
        errno = EPERM;
        return STAGE_IDENTITY;
    }
    null_fd = open("/dev/null", O_RDWR | O_CLOEXEC);
    if (null_fd < 0 || dup2(null_fd, STDIN_FILENO) < 0)
        return STAGE_STDIO;
    /* Created by the user, after the switch: no root-owned file, no symlink followed. */
    log_fd = open(plan->log_path, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
    if (log_fd < 0)
        log_fd = null_fd;
    if (dup2(log_fd, STDOUT_FILENO) < 0 || dup2(log_fd, STDERR_FILENO) < 0)
        return STAGE_STDIO;
    if (chdir(plan->cwd) != 0 && chdir("/") != 0)
        return STAGE_STDIO;
    for (int sig = 1; sig < NSIG; sig++)
        signal(sig, SIG_DFL);
    sigemptyset(&none);
    sigprocmask(SIG_SETMASK, &none, NULL);
    /* Nothing of ours (the guest agent's pipes included) reaches the program. */
    close_range(3, ~0U, CLOSE_RANGE_CLOEXEC);
    return STAGE_OK;
}

G_GNUC_NORETURN static void
child_run(const LaunchPlan *plan, int report_fd)
{
    int report[2];

    report[0] = child_setup(plan);
    if (report[0] == STAGE_OK) {
        execve(plan->path, plan->argv, plan->envp);
        report[0] = STAGE_EXEC;
    }
    report[1] = errno;
    if (write(report_fd, report, sizeof(report)) < 0) {
        /* the parent sees EOF and a dead child */
    }
    _exit(127);
}

static const char *
stage_to_string(ChildStage stage)
{
    switch (stage) {
    case STAGE_IDENTITY:
        return "switching to the user";
    case STAGE_STDIO:
        return "redirecting standard descriptors";
    case STAGE_EXEC:
        return "executing";
    case STAGE_OK:
        break;
    }
    return "starting";
}

/* fork + exec, with a close-on-exec pipe that carries the child's errno if exec fails. */
static gboolean
spawn(const LaunchPlan *plan, pid_t *ret_pid, GError **error)
{
    int fds[2];
    int report[2] = {0, 0};
    ssize_t n;
    pid_t pid;

    if (!g_unix_open_pipe(fds, FD_CLOEXEC, error))
        return FALSE;
    pid = fork();
    if (pid == 0)
        child_run(plan, fds[1]);
    close(fds[1]);
    if (pid < 0) {
        close(fds[0]);
        g_set_error(error, CARREL_GUEST_ERROR, CARREL_GUEST_ERROR_LAUNCH, "fork failed: %s",
                    g_strerror(errno));
        return FALSE;
    }
    do
        n = read(fds[0], report, sizeof(report));
    while (n < 0 && errno == EINTR);
    close(fds[0]);
    if (n == 0) {
        *ret_pid = pid;
        return TRUE;
    }
    while (waitpid(pid, NULL, 0) < 0 && errno == EINTR)
        ;
    g_set_error(error, CARREL_GUEST_ERROR, CARREL_GUEST_ERROR_LAUNCH, "%s '%s' as '%s': %s",
                stage_to_string((ChildStage)report[0]), plan->path, plan->user.name,
                n == sizeof(report) ? g_strerror(report[1]) : "child died");
    return FALSE;
}

static JsonNode *
launched_json(const LaunchPlan *plan, pid_t pid)
{
    g_autoptr(JsonBuilder) builder = carrel_guest_json_begin();

    json_builder_set_member_name(builder, "pid");
    json_builder_add_int_value(builder, pid);
    json_builder_set_member_name(builder, "user");
    json_builder_add_string_value(builder, plan->user.name);
    json_builder_set_member_name(builder, "program");
    json_builder_add_string_value(builder, plan->path);
    json_builder_set_member_name(builder, "log");
    if (is_user_file(plan->log_path, plan->user.uid))
        json_builder_add_string_value(builder, plan->log_path);
    else
        json_builder_add_null_value(builder);
    return carrel_guest_json_end(builder);
}

/* The user, environment and identity checks shared by launch and open. */
static gboolean
plan_prepare(const CarrelGuestOptions *options, LaunchPlan *plan, GError **error)
{
    g_autoptr(CarrelGuestSession) session = NULL;
    g_autoptr(CarrelGuestX11) x = NULL;
    int number = 0;

    carrel_guest_display_number(options->display, &number);
    session = carrel_guest_proc_find_session(number);
    if (!resolve_user(options, session, &plan->user, error) || !check_identity(plan, error))
        return FALSE;
    /* Fail early and clearly when there is no desktop to start the program in. */
    x = carrel_guest_x11_open(options, error);
    if (!x)
        return FALSE;
    plan->envp = build_env(options, session, &plan->user);
    plan->cwd = g_strdup(plan->user.home);
    plan->log_path =
        g_strdup_printf("/tmp/carrel-launch-%s-%08x.log", plan->user.name, g_random_int());
    return TRUE;
}

static JsonNode *
plan_run(LaunchPlan *plan, GError **error)
{
    pid_t pid = 0;

    if (!spawn(plan, &pid, error))
        return NULL;
    return launched_json(plan, pid);
}

JsonNode *
carrel_guest_cmd_launch(const CarrelGuestOptions *options, GError **error)
{
    g_auto(LaunchPlan) plan = {0};

    if (!plan_prepare(options, &plan, error))
        return NULL;
    plan.path = find_program(options->argv[0], (const char *const *)plan.envp, error);
    if (!plan.path)
        return NULL;
    plan.argv = g_strdupv(options->argv);
    return plan_run(&plan, error);
}

static char *
find_first(const char *const *names, const char *const *envp)
{
    for (guint i = 0; names[i]; i++) {
        char *path = find_program(names[i], envp, NULL);

        if (path)
            return path;
    }
    return NULL;
}

/* Without xdg-open: URLs go to a browser; directories get a terminal there; files are shown in
 * a terminal by a pager. */
static gboolean
plan_open_fallback(LaunchPlan *plan, const char *target, gboolean is_url)
{
    static const char *const browsers[] = {"firefox-esr", "firefox", "x-www-browser", "chromium",
                                           NULL};
    static const char *const terminals[] = {"x-terminal-emulator", "xterm", NULL};
    const char *const *envp = (const char *const *)plan->envp;

    plan->path = find_first(is_url ? browsers : terminals, envp);
    if (!plan->path)
        return FALSE;
    if (is_url) {
        plan->argv = g_strdupv((char *[]){plan->path, (char *)target, NULL});
    } else if (g_file_test(target, G_FILE_TEST_IS_DIR)) {
        plan->argv = g_strdupv((char *[]){plan->path, NULL});
        g_free(plan->cwd);
        plan->cwd = g_strdup(target);
    } else {
        plan->argv = g_strdupv((char *[]){plan->path, (char *)"-e", (char *)"less", (char *)"--",
                                          (char *)target, NULL});
    }
    return TRUE;
}

JsonNode *
carrel_guest_cmd_open(const CarrelGuestOptions *options, GError **error)
{
    g_auto(LaunchPlan) plan = {0};
    const char *target = options->argv[0];
    gboolean is_url = carrel_guest_is_url(target);
    g_autofree char *path = NULL;

    if (!plan_prepare(options, &plan, error))
        return NULL;
    if (!is_url) {
        /* Relative paths are the user's: relative to the home directory. */
        path = g_path_is_absolute(target) ? g_strdup(target)
                                          : g_build_filename(plan.user.home, target, NULL);
        if (!g_file_test(path, G_FILE_TEST_EXISTS)) {
            g_set_error(error, CARREL_GUEST_ERROR, CARREL_GUEST_ERROR_NOT_FOUND,
                        "no such file or directory '%s'", path);
            return NULL;
        }
        target = path;
    }
    plan.path = find_program("xdg-open", (const char *const *)plan.envp, NULL);
    if (plan.path)
        plan.argv = g_strdupv((char *[]){plan.path, (char *)target, NULL});
    else if (!plan_open_fallback(&plan, target, is_url)) {
        g_set_error(error, CARREL_GUEST_ERROR, CARREL_GUEST_ERROR_NOT_FOUND,
                    "no program to open '%s': install xdg-utils", target);
        return NULL;
    }
    return plan_run(&plan, error);
}
