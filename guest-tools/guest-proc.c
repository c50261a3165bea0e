/* /proc scanning: finds the desktop session (its user and environment), the X server's cookie
 * file and the window manager, since the guest agent runs us with no session environment. */
#include <errno.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include "guest.h"

/* Session variables a launched program inherits from the desktop session's processes. */
static const char *const inherited_keys[] = {
    "LANG",
    "LANGUAGE",
    "LC_ALL",
    "LC_CTYPE",
    "PATH",
    "DBUS_SESSION_BUS_ADDRESS",
    "XDG_RUNTIME_DIR",
    "XDG_CURRENT_DESKTOP",
    "XDG_SESSION_DESKTOP",
    "XDG_SESSION_TYPE",
    "XDG_DATA_DIRS",
    "XDG_CONFIG_DIRS",
    "DESKTOP_SESSION",
};

static const char *const x_servers[] = {
    "Xorg", "X", "Xvfb", "Xephyr", "Xnest", "Xvnc", "Xtigervnc", "Xwayland",
};

/* Process names (/proc/PID/comm, at most 15 characters) of window managers. */
static const char *const window_managers[] = {
    "twm",
    "ctwm",
    "vtwm",
    "tvtwm",
    "xfwm4",
    "openbox",
    "fluxbox",
    "blackbox",
    "icewm",
    "jwm",
    "fvwm",
    "fvwm2",
    "fvwm3",
    "metacity",
    "mutter",
    "marco",
    "muffin",
    "kwin_x11",
    "kwin",
    "awesome",
    "i3",
    "bspwm",
    "dwm",
    "evilwm",
    "herbstluftwm",
    "wmaker",
    "xmonad",
    "spectrwm",
    "enlightenment",
    "e16",
    "compiz",
    "sawfish",
    "pekwm",
    "lwm",
    "cwm",
    "ratpoison",
    "matchbox-window",
    "gnome-shell",
    "budgie-wm",
};

gboolean
carrel_guest_read_bounded(const char *path, gsize max, char **ret_data, gsize *ret_len,
                          GError **error)
{
    g_autofree char *data = g_malloc(max + 1);
    gsize len = 0;
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY);

    if (fd < 0) {
        int saved = errno;

        g_set_error(error, CARREL_GUEST_ERROR, CARREL_GUEST_ERROR_NOT_FOUND, "cannot open '%s': %s",
                    path, g_strerror(saved));
        return FALSE;
    }
    while (len < max) {
        ssize_t n = read(fd, data + len, max - len);

        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            break;
        len += (gsize)n;
    }
    close(fd);
    data[len] = '\0';
    *ret_data = g_steal_pointer(&data);
    *ret_len = len;
    return TRUE;
}

char *
carrel_guest_environ_lookup(const char *block, gsize len, const char *key)
{
    gsize key_len = strlen(key);
    gsize pos = 0;

    while (pos < len) {
        const char *entry = block + pos;
        const char *nul = memchr(entry, '\0', len - pos);
        gsize entry_len = nul ? (gsize)(nul - entry) : len - pos;

        if (entry_len > key_len && entry[key_len] == '=' && strncmp(entry, key, key_len) == 0) {
            gsize value_len = entry_len - key_len - 1;

            if (value_len > CARREL_GUEST_LIMIT_ENV_VALUE)
                return NULL;
            return g_strndup(entry + key_len + 1, value_len);
        }
        pos += entry_len + 1;
    }
    return NULL;
}

GStrv
carrel_guest_split_nul(const char *block, gsize len, guint max_items)
{
    g_autoptr(GStrvBuilder) builder = g_strv_builder_new();
    gsize pos = 0;

    for (guint n = 0; pos < len && n < max_items; n++) {
        const char *item = block + pos;
        const char *nul = memchr(item, '\0', len - pos);
        gsize item_len = nul ? (gsize)(nul - item) : len - pos;
        g_autofree char *copy = g_strndup(item, item_len);

        g_strv_builder_add(builder, copy);
        pos += item_len + 1;
    }
    return g_strv_builder_end(builder);
}

static gboolean
in_list(const char *name, const char *const *list, gsize n)
{
    for (gsize i = 0; i < n; i++) {
        if (g_str_equal(name, list[i]))
            return TRUE;
    }
    return FALSE;
}

char *
carrel_guest_server_auth_from_argv(const char *const *argv, int number)
{
    g_autofree char *base = NULL;
    const char *auth = NULL;
    gboolean serves = FALSE;

    if (!argv || !argv[0])
        return NULL;
    base = g_path_get_basename(argv[0]);
    if (!in_list(base, x_servers, G_N_ELEMENTS(x_servers)))
        return NULL;
    for (guint i = 1; argv[i]; i++) {
        int n;

        if (argv[i][0] == ':' && carrel_guest_display_number(argv[i], &n) && n == number)
            serves = TRUE;
        else if (g_str_equal(argv[i], "-auth") && argv[i + 1])
            auth = argv[++i];
    }
    /* A server started without a display argument serves :0. */
    if (!serves && number == 0) {
        serves = TRUE;
        for (guint i = 1; argv[i]; i++)
            serves = serves && argv[i][0] != ':';
    }
    return serves && auth && g_path_is_absolute(auth) ? g_strdup(auth) : NULL;
}

/* Calls fn for every numeric /proc entry, in directory order, until fn returns FALSE. */
static void
for_each_pid(gboolean (*fn)(pid_t pid, uid_t uid, gpointer data), gpointer data)
{
    g_autoptr(GDir) dir = g_dir_open("/proc", 0, NULL);
    const char *name;
    guint seen = 0;

    while (dir && (name = g_dir_read_name(dir)) && seen++ < CARREL_GUEST_LIMIT_PROC_ENTRIES) {
        g_autofree char *path = NULL;
        struct stat st;
        guint64 pid;

        if (!g_ascii_isdigit(name[0]) ||
            !g_ascii_string_to_unsigned(name, 10, 1, G_MAXINT32, &pid, NULL))
            continue;
        path = g_strdup_printf("/proc/%s", name);
        if (stat(path, &st) != 0)
            continue;
        if (!fn((pid_t)pid, st.st_uid, data))
            return;
    }
}

static gboolean
read_proc_file(pid_t pid, const char *what, char **ret_data, gsize *ret_len)
{
    g_autofree char *path = g_strdup_printf("/proc/%d/%s", (int)pid, what);

    return carrel_guest_read_bounded(path, CARREL_GUEST_LIMIT_PROC_FILE, ret_data, ret_len, NULL);
}

static gboolean
env_display_is(const char *block, gsize len, int number)
{
    g_autofree char *display = carrel_guest_environ_lookup(block, len, "DISPLAY");
    int n;

    return display && carrel_guest_display_number(display, &n) && n == number;
}

typedef struct {
    int number;
    CarrelGuestSession *best;
    gboolean best_regular;
} SessionSearch;

static gboolean
is_regular_uid(uid_t uid)
{
    return uid >= 1000 && uid < 60000;
}

static CarrelGuestSession *
session_from_environ(pid_t pid, uid_t uid, const char *block, gsize len)
{
    CarrelGuestSession *session = g_new0(CarrelGuestSession, 1);
    g_autoptr(GStrvBuilder) env = g_strv_builder_new();

    session->uid = uid;
    session->pid = pid;
    session->xauthority = carrel_guest_environ_lookup(block, len, "XAUTHORITY");
    for (guint i = 0; i < G_N_ELEMENTS(inherited_keys); i++) {
        g_autofree char *value = carrel_guest_environ_lookup(block, len, inherited_keys[i]);
        g_autofree char *entry = NULL;

        if (!value)
            continue;
        entry = g_strdup_printf("%s=%s", inherited_keys[i], value);
        g_strv_builder_add(env, entry);
    }
    session->env = g_strv_builder_end(env);
    return session;
}

static gboolean
consider_session(pid_t pid, uid_t uid, gpointer data)
{
    SessionSearch *search = data;
    g_autofree char *block = NULL;
    g_autofree char *xauthority = NULL;
    gsize len = 0;
    gboolean regular = is_regular_uid(uid);

    /* Once a non-regular user (nobody, a greeter) matched, only a regular user replaces it. */
    if (uid == 0 || (search->best && !regular))
        return TRUE;
    if (!read_proc_file(pid, "environ", &block, &len) ||
        !env_display_is(block, len, search->number))
        return TRUE;
    /* A process left over from an earlier X server on this display names a cookie file that is
     * gone: its session is not the live one. */
    xauthority = carrel_guest_environ_lookup(block, len, "XAUTHORITY");
    if (xauthority && xauthority[0] && !g_file_test(xauthority, G_FILE_TEST_EXISTS))
        return TRUE;
    carrel_guest_session_free(search->best);
    search->best = session_from_environ(pid, uid, block, len);
    search->best_regular = regular;
    /* /proc lists pids in increasing order: the first match is the oldest process. */
    return !regular;
}

CarrelGuestSession *
carrel_guest_proc_find_session(int number)
{
    SessionSearch search = {.number = number};

    for_each_pid(consider_session, &search);
    return search.best;
}

void
carrel_guest_session_free(CarrelGuestSession *session)
{
    if (!session)
        return;
    g_free(session->xauthority);
    g_strfreev(session->env);
    g_free(session);
}

typedef struct {
    int number;
    char *result;
} NameSearch;

static gboolean
consider_server(pid_t pid, uid_t uid, gpointer data)
{
    NameSearch *search = data;
    g_autofree char *block = NULL;
    g_auto(GStrv) argv = NULL;
    gsize len = 0;

    if (!read_proc_file(pid, "cmdline", &block, &len))
        return TRUE;
    argv = carrel_guest_split_nul(block, len, 256);
    search->result = carrel_guest_server_auth_from_argv((const char *const *)argv, search->number);
    return search->result == NULL;
}

char *
carrel_guest_proc_find_server_auth(int number)
{
    NameSearch search = {.number = number};

    for_each_pid(consider_server, &search);
    return search.result;
}

static gboolean
argv_display_is(GStrv argv, int number)
{
    for (guint i = 0; argv[i] && argv[i + 1]; i++) {
        int n;

        if (g_str_equal(argv[i], "-display") || g_str_equal(argv[i], "--display"))
            return carrel_guest_display_number(argv[i + 1], &n) && n == number;
    }
    return FALSE;
}

static gboolean
consider_wm(pid_t pid, uid_t uid, gpointer data)
{
    NameSearch *search = data;
    g_autofree char *comm = NULL;
    g_autofree char *block = NULL;
    g_auto(GStrv) argv = NULL;
    gsize len = 0;

    if (!read_proc_file(pid, "comm", &comm, &len))
        return TRUE;
    g_strchomp(comm);
    if (!in_list(comm, window_managers, G_N_ELEMENTS(window_managers)))
        return TRUE;
    if (read_proc_file(pid, "environ", &block, &len) && env_display_is(block, len, search->number))
        search->result = g_strdup(comm);
    g_clear_pointer(&block, g_free);
    if (!search->result && read_proc_file(pid, "cmdline", &block, &len)) {
        argv = carrel_guest_split_nul(block, len, 256);
        if (argv_display_is(argv, search->number))
            search->result = g_strdup(comm);
    }
    return search->result == NULL;
}

char *
carrel_guest_proc_find_wm(int number)
{
    NameSearch search = {.number = number};

    for_each_pid(consider_wm, &search);
    return search.result;
}
