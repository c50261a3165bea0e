/* proc start|read|write|close|kill|list: each prints one JSON object. The spool folder is the
 * whole state, so a restarted carreld finds every handle again. */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <termios.h>
#include <time.h>
#include <unistd.h>

#include <glib-unix.h>
#include <glib/gstdio.h>

#include "guest-procs.h"

const char *
carrel_guest_procs_dir(void)
{
    const char *dir = g_getenv("CARREL_GUEST_PROC_DIR");

    return dir && g_path_is_absolute(dir) ? dir : CARREL_GUEST_PROC_DIR;
}

gboolean
carrel_guest_procs_handle_valid(const char *handle)
{
    gsize len = handle ? strlen(handle) : 0;

    if (len < 2 || len > 17 || handle[0] != 'p')
        return FALSE;
    for (gsize i = 1; i < len; i++) {
        if (!g_ascii_isxdigit(handle[i]) || g_ascii_isupper(handle[i]))
            return FALSE;
    }
    return TRUE;
}

static char *
handle_dir(const char *handle, GError **error)
{
    g_autofree char *dir = NULL;

    if (!carrel_guest_procs_handle_valid(handle)) {
        g_set_error(error, CARREL_GUEST_ERROR, CARREL_GUEST_ERROR_INVALID_ARG,
                    "invalid process handle '%s'", handle);
        return NULL;
    }
    dir = g_build_filename(carrel_guest_procs_dir(), handle, NULL);
    if (!g_file_test(dir, G_FILE_TEST_IS_DIR)) {
        g_set_error(error, CARREL_GUEST_ERROR, CARREL_GUEST_ERROR_NOT_FOUND,
                    "no process with handle '%s'", handle);
        return NULL;
    }
    return g_steal_pointer(&dir);
}

/* A small number from a file we wrote ("123\n"); fallback when missing or garbled. */
static gint64
read_number(const char *dir, const char *name, gint64 fallback)
{
    g_autofree char *path = g_build_filename(dir, name, NULL);
    g_autofree char *text = NULL;
    gsize len = 0;
    gint64 value;
    char *end = NULL;

    if (!carrel_guest_read_bounded(path, 32, &text, &len, NULL) || len == 0)
        return fallback;
    value = g_ascii_strtoll(text, &end, 10);
    return end == text ? fallback : value;
}

static gint64
file_size(const char *dir, const char *name)
{
    g_autofree char *path = g_build_filename(dir, name, NULL);
    struct stat st;

    return stat(path, &st) == 0 ? (gint64)st.st_size : 0;
}

static gboolean
has_exited(const char *dir, gint64 *ret_code)
{
    gint64 code = read_number(dir, "exit", G_MININT64);

    if (ret_code)
        *ret_code = code;
    return code != G_MININT64;
}

static void
add_state(JsonBuilder *b, const char *dir)
{
    gint64 code = 0;
    gboolean exited = has_exited(dir, &code);

    json_builder_set_member_name(b, "pid");
    json_builder_add_int_value(b, read_number(dir, "pid", -1));
    json_builder_set_member_name(b, "state");
    json_builder_add_string_value(b, exited ? "exited" : "running");
    json_builder_set_member_name(b, "exit_code");
    if (exited)
        json_builder_add_int_value(b, code);
    else
        json_builder_add_null_value(b);
}

static void
add_item(JsonBuilder *b, const char *handle, const char *dir)
{
    g_autofree char *path = g_build_filename(dir, "argv", NULL);
    g_autofree char *block = NULL;
    gsize len = 0;
    g_auto(GStrv) argv = NULL;

    json_builder_begin_object(b);
    json_builder_set_member_name(b, "handle");
    json_builder_add_string_value(b, handle);
    json_builder_set_member_name(b, "argv");
    json_builder_begin_array(b);
    if (carrel_guest_read_bounded(path, 4096, &block, &len, NULL))
        argv = carrel_guest_split_nul(block, len, 32);
    for (guint i = 0; argv && argv[i]; i++) {
        g_autofree char *clean = carrel_guest_text_clip(argv[i], -1, 256);

        json_builder_add_string_value(b, clean);
    }
    json_builder_end_array(b);
    json_builder_set_member_name(b, "started_at");
    json_builder_add_int_value(b, read_number(dir, "started", 0));
    add_state(b, dir);
    json_builder_set_member_name(b, "stdout_bytes");
    json_builder_add_int_value(b, file_size(dir, "stdout"));
    json_builder_set_member_name(b, "stderr_bytes");
    json_builder_add_int_value(b, file_size(dir, "stderr"));
    json_builder_end_object(b);
}

static gint
compare_started(gconstpointer a, gconstpointer b)
{
    g_autofree char *da = g_build_filename(carrel_guest_procs_dir(), *(char **)a, NULL);
    g_autofree char *db = g_build_filename(carrel_guest_procs_dir(), *(char **)b, NULL);
    gint64 sa = read_number(da, "started", 0), sb = read_number(db, "started", 0);

    return sa < sb ? -1 : sa > sb ? 1 : g_strcmp0(*(char **)a, *(char **)b);
}

/* The handles in the spool, oldest first (at most a few beyond the bound: others are skipped). */
static GPtrArray *
list_handles(void)
{
    GPtrArray *handles = g_ptr_array_new_with_free_func(g_free);
    g_autoptr(GDir) d = g_dir_open(carrel_guest_procs_dir(), 0, NULL);
    const char *name;

    while (d && (name = g_dir_read_name(d)) && handles->len < CARREL_GUEST_PROC_MAX * 2) {
        if (carrel_guest_procs_handle_valid(name))
            g_ptr_array_add(handles, g_strdup(name));
    }
    g_ptr_array_sort(handles, compare_started);
    return handles;
}

static void
remove_handle(const char *dir)
{
    static const char *const files[] = {"argv",  "started", "pid",    "holder", "exit",
                                        "stdin", "stdout",  "stderr", "closed", "tty"};

    for (guint i = 0; i < G_N_ELEMENTS(files); i++) {
        g_autofree char *path = g_build_filename(dir, files[i], NULL);

        g_unlink(path);
    }
    g_rmdir(dir);
}

/* Makes room for one more handle: ended ones go, oldest first. */
static gboolean
prune(GError **error)
{
    g_autoptr(GPtrArray) handles = list_handles();
    guint count = handles->len;

    for (guint i = 0; i < handles->len && count >= CARREL_GUEST_PROC_MAX; i++) {
        g_autofree char *dir =
            g_build_filename(carrel_guest_procs_dir(), g_ptr_array_index(handles, i), NULL);

        if (has_exited(dir, NULL)) {
            remove_handle(dir);
            count--;
        }
    }
    if (count >= CARREL_GUEST_PROC_MAX) {
        g_set_error(error, CARREL_GUEST_ERROR, CARREL_GUEST_ERROR_LIMIT,
                    "%d processes are running: kill one first", CARREL_GUEST_PROC_MAX);
        return FALSE;
    }
    return TRUE;
}

static gboolean
write_argv(const char *dir, char **argv, GError **error)
{
    g_autoptr(GString) block = g_string_new(NULL);
    g_autofree char *path = g_build_filename(dir, "argv", NULL);
    g_autofree char *started =
        g_strdup_printf("%" G_GINT64_FORMAT "\n", g_get_real_time() / 1000000);
    g_autofree char *started_path = g_build_filename(dir, "started", NULL);

    for (guint i = 0; argv[i]; i++)
        g_string_append_len(block, argv[i], (gssize)strlen(argv[i]) + 1);
    return g_file_set_contents_full(path, block->str, (gssize)block->len, G_FILE_SET_CONTENTS_NONE,
                                    0600, error) &&
           g_file_set_contents_full(started_path, started, -1, G_FILE_SET_CONTENTS_NONE, 0600,
                                    error);
}

JsonNode *
carrel_guest_cmd_proc_start(const CarrelGuestOptions *options, GError **error)
{
    g_autoptr(JsonBuilder) b = NULL;
    g_autofree char *handle = NULL;
    g_autofree char *dir = NULL;
    gint64 pid = 0;
    static const char *const login[] = {"/bin/bash", "-l", NULL};
    CarrelGuestPtySpec pty = {.rows = options->rows, .cols = options->cols, .user = options->user};

    if (g_mkdir_with_parents(carrel_guest_procs_dir(), 0700) < 0 || !prune(error)) {
        if (error && !*error)
            g_set_error(error, CARREL_GUEST_ERROR, CARREL_GUEST_ERROR_INTERNAL,
                        "cannot make '%s': %s", carrel_guest_procs_dir(), g_strerror(errno));
        return NULL;
    }
    for (guint tries = 0; !dir && tries < 8; tries++) {
        g_free(handle);
        handle = g_strdup_printf("p%08x", g_random_int());
        dir = g_build_filename(carrel_guest_procs_dir(), handle, NULL);
        if (g_mkdir(dir, 0700) < 0)
            g_clear_pointer(&dir, g_free);
    }
    if (!dir) {
        g_set_error(error, CARREL_GUEST_ERROR, CARREL_GUEST_ERROR_INTERNAL,
                    "cannot make a process folder in '%s'", carrel_guest_procs_dir());
        return NULL;
    }
    if (!write_argv(dir, options->pty && !options->argv[0] ? (char **)login : options->argv,
                    error) ||
        !(options->pty ? carrel_guest_procs_spawn_pty(dir, options->argv, &pty, &pid, error)
                       : carrel_guest_procs_spawn(dir, options->argv, &pid, error))) {
        remove_handle(dir);
        return NULL;
    }
    b = carrel_guest_json_begin();
    json_builder_set_member_name(b, "handle");
    json_builder_add_string_value(b, handle);
    json_builder_set_member_name(b, "pid");
    json_builder_add_int_value(b, pid);
    return carrel_guest_json_end(b);
}

static gboolean
parse_offset(const char *text, gint64 *ret_offset, GError **error)
{
    guint64 value = 0;

    if (!text) {
        *ret_offset = 0;
        return TRUE;
    }
    if (!g_ascii_string_to_unsigned(text, 10, 0, G_MAXINT64, &value, NULL)) {
        g_set_error(error, CARREL_GUEST_ERROR, CARREL_GUEST_ERROR_INVALID_ARG,
                    "invalid offset '%s'", text);
        return FALSE;
    }
    *ret_offset = (gint64)value;
    return TRUE;
}

static gboolean
add_stream(JsonBuilder *b, const char *dir, const char *name, gint64 offset, GError **error)
{
    g_autofree char *path = g_build_filename(dir, name, NULL);
    gint64 size = file_size(dir, name);
    g_autofree char *buf = NULL;
    g_autofree char *b64 = NULL;
    gssize got = 0;
    int fd;

    if (offset > size) {
        g_set_error(error, CARREL_GUEST_ERROR, CARREL_GUEST_ERROR_INVALID_ARG,
                    "%s offset %" G_GINT64_FORMAT " is past its end (%" G_GINT64_FORMAT " bytes)",
                    name, offset, size);
        return FALSE;
    }
    buf = g_malloc(CARREL_GUEST_PROC_READ_MAX);
    fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
    if (fd >= 0) {
        got = pread(fd, buf, (gsize)MIN(size - offset, CARREL_GUEST_PROC_READ_MAX), offset);
        close(fd);
    }
    b64 = g_base64_encode((const guchar *)buf, got > 0 ? (gsize)got : 0);
    json_builder_set_member_name(b, name);
    json_builder_begin_object(b);
    json_builder_set_member_name(b, "offset");
    json_builder_add_int_value(b, offset);
    json_builder_set_member_name(b, "data");
    json_builder_add_string_value(b, b64);
    json_builder_set_member_name(b, "size");
    json_builder_add_int_value(b, size);
    json_builder_end_object(b);
    return TRUE;
}

/* How often a waiting read looks again: a stat of two files, cheap even under TCG. */
#define PROC_READ_WAIT_STEP_US (20 * 1000)
/* The longest a read waits for output, whatever --timeout says: carreld reads again. */
#define PROC_READ_WAIT_MAX_MS 10000

/* Until there is output past the offsets or the process exited, at most timeout_ms: one guest
 * call then brings output as soon as it comes, where the host would have to poll blindly. */
static void
wait_for_output(const char *dir, gint64 out, gint64 err, gint64 timeout_ms)
{
    gint64 end = g_get_monotonic_time() + MIN(timeout_ms, PROC_READ_WAIT_MAX_MS) * 1000;

    while (g_get_monotonic_time() < end && !has_exited(dir, NULL) &&
           file_size(dir, "stdout") <= out && file_size(dir, "stderr") <= err)
        g_usleep(PROC_READ_WAIT_STEP_US);
}

/* proc read HANDLE [STDOUT_OFFSET [STDERR_OFFSET]] [--timeout S]: the state first, then the
 * bytes, so that an "exited" reply's sizes are final. */
JsonNode *
carrel_guest_cmd_proc_read(const CarrelGuestOptions *options, GError **error)
{
    g_autofree char *dir = handle_dir(options->argv[0], error);
    g_autoptr(JsonBuilder) b = NULL;
    gint64 out = 0, err = 0;

    if (!dir || !parse_offset(options->argv[1], &out, error) ||
        !parse_offset(options->argv[1] ? options->argv[2] : NULL, &err, error))
        return NULL;
    if (options->timeout_ms > 0)
        wait_for_output(dir, out, err, options->timeout_ms);
    b = carrel_guest_json_begin();
    json_builder_set_member_name(b, "handle");
    json_builder_add_string_value(b, options->argv[0]);
    add_state(b, dir);
    if (!add_stream(b, dir, "stdout", out, error) || !add_stream(b, dir, "stderr", err, error))
        return NULL;
    return carrel_guest_json_end(b);
}

JsonNode *
carrel_guest_cmd_proc_list(const CarrelGuestOptions *options, GError **error)
{
    g_autoptr(GPtrArray) handles = list_handles();
    g_autoptr(JsonBuilder) b = carrel_guest_json_begin();

    json_builder_set_member_name(b, "processes");
    json_builder_begin_array(b);
    for (guint i = 0; i < handles->len; i++) {
        const char *handle = g_ptr_array_index(handles, i);
        g_autofree char *dir = g_build_filename(carrel_guest_procs_dir(), handle, NULL);

        add_item(b, handle, dir);
    }
    json_builder_end_array(b);
    return carrel_guest_json_end(b);
}

static char *
running_dir(const char *handle, GError **error)
{
    g_autofree char *dir = handle_dir(handle, error);

    if (dir && has_exited(dir, NULL)) {
        g_set_error(error, CARREL_GUEST_ERROR, CARREL_GUEST_ERROR_WRONG_STATE,
                    "process '%s' has already exited", handle);
        return NULL;
    }
    return g_steal_pointer(&dir);
}

static JsonNode *
ok_reply(const char *handle, const char *dir)
{
    g_autoptr(JsonBuilder) b = carrel_guest_json_begin();

    json_builder_set_member_name(b, "handle");
    json_builder_add_string_value(b, handle);
    add_state(b, dir);
    return carrel_guest_json_end(b);
}

/* proc kill HANDLE [SIGNAL]: the command's whole process group (TERM by default). */
JsonNode *
carrel_guest_cmd_proc_kill(const CarrelGuestOptions *options, GError **error)
{
    g_autofree char *dir = running_dir(options->argv[0], error);
    guint64 sig = SIGTERM;
    gint64 pid;

    if (!dir)
        return NULL;
    if (options->argv[1] && !g_ascii_string_to_unsigned(options->argv[1], 10, 1, 64, &sig, NULL)) {
        g_set_error(error, CARREL_GUEST_ERROR, CARREL_GUEST_ERROR_INVALID_ARG,
                    "invalid signal '%s': expected a number from 1 to 64", options->argv[1]);
        return NULL;
    }
    pid = read_number(dir, "pid", -1);
    if (pid <= 1 || kill(-(pid_t)pid, (int)sig) < 0) {
        g_set_error(error, CARREL_GUEST_ERROR, CARREL_GUEST_ERROR_FAILED,
                    "cannot signal process '%s': %s", options->argv[0], g_strerror(errno));
        return NULL;
    }
    return ok_reply(options->argv[0], dir);
}

/* proc close HANDLE: the command reads the end of its input once it has read what was sent. */
JsonNode *
carrel_guest_cmd_proc_close(const CarrelGuestOptions *options, GError **error)
{
    g_autofree char *dir = running_dir(options->argv[0], error);
    g_autofree char *closed = NULL;
    gint64 holder;

    if (!dir)
        return NULL;
    closed = g_build_filename(dir, "closed", NULL);
    g_file_set_contents(closed, "", 0, NULL);
    holder = read_number(dir, "holder", -1);
    if (holder > 1)
        kill((pid_t)holder, SIGKILL);
    return ok_reply(options->argv[0], dir);
}

static gboolean
write_all(int fd, const char *data, gsize len, gint64 timeout_ms, GError **error)
{
    gint64 deadline = g_get_monotonic_time() + timeout_ms * 1000;
    gsize done = 0;

    while (done < len) {
        struct pollfd p = {.fd = fd, .events = POLLOUT};
        gint64 left = (deadline - g_get_monotonic_time()) / 1000;
        gssize n;

        if (left <= 0 || poll(&p, 1, (int)left) <= 0) {
            g_set_error(error, CARREL_GUEST_ERROR, CARREL_GUEST_ERROR_TIMEOUT,
                        "the process took %" G_GSIZE_FORMAT " of %" G_GSIZE_FORMAT
                        " bytes: it does not read its input",
                        done, len);
            return FALSE;
        }
        n = write(fd, data + done, len - done);
        if (n < 0 && errno != EAGAIN && errno != EINTR) {
            g_set_error(error, CARREL_GUEST_ERROR, CARREL_GUEST_ERROR_WRONG_STATE,
                        "cannot write to the process: %s", g_strerror(errno));
            return FALSE;
        }
        done += n > 0 ? (gsize)n : 0;
    }
    return TRUE;
}

/* proc write HANDLE --stdin: what carrel-guest reads on its own input goes to the command's. */
JsonNode *
carrel_guest_cmd_proc_write(const CarrelGuestOptions *options, GError **error)
{
    g_autofree char *dir = running_dir(options->argv[0], error);
    g_autofree char *fifo = NULL;
    g_autofree char *closed = NULL;
    g_autofree char *data = NULL;
    gsize len = 0;
    int fd;
    gboolean ok;

    if (!dir)
        return NULL;
    closed = g_build_filename(dir, "closed", NULL);
    if (g_file_test(closed, G_FILE_TEST_EXISTS)) {
        g_set_error(error, CARREL_GUEST_ERROR, CARREL_GUEST_ERROR_WRONG_STATE,
                    "the input of process '%s' is closed", options->argv[0]);
        return NULL;
    }
    if (!carrel_guest_read_bounded("/dev/stdin", CARREL_GUEST_PROC_WRITE_MAX, &data, &len, error))
        return NULL;
    fifo = g_build_filename(dir, "stdin", NULL);
    fd = open(fifo, O_WRONLY | O_NONBLOCK | O_CLOEXEC | O_NOFOLLOW);
    if (fd < 0) {
        g_set_error(error, CARREL_GUEST_ERROR, CARREL_GUEST_ERROR_WRONG_STATE,
                    "the process does not read its input: %s", g_strerror(errno));
        return NULL;
    }
    ok = write_all(fd, data, len, options->timeout_ms, error);
    close(fd);
    return ok ? ok_reply(options->argv[0], dir) : NULL;
}

/* proc resize HANDLE ROWS COLS: the terminal of a --pty process gets this size (its program
 * gets SIGWINCH), through the slave side the keeper named. */
JsonNode *
carrel_guest_cmd_proc_resize(const CarrelGuestOptions *options, GError **error)
{
    g_autofree char *dir = running_dir(options->argv[0], error);
    g_autofree char *path = NULL;
    g_autofree char *tty = NULL;
    gsize len = 0;
    guint rows = 0, cols = 0;
    struct winsize ws = {0};
    guint64 n = 0;
    int fd;

    if (!dir || !carrel_guest_pty_size_parse(options->argv[1], &rows, error) ||
        !carrel_guest_pty_size_parse(options->argv[2], &cols, error))
        return NULL;
    path = g_build_filename(dir, "tty", NULL);
    if (!carrel_guest_read_bounded(path, 64, &tty, &len, NULL) ||
        !g_str_has_prefix(tty, "/dev/pts/") ||
        !g_ascii_string_to_unsigned(tty + 9, 10, 0, G_MAXINT32, &n, NULL)) {
        g_set_error(error, CARREL_GUEST_ERROR, CARREL_GUEST_ERROR_INVALID_ARG,
                    "process '%s' is not on a terminal (start it with --pty)", options->argv[0]);
        return NULL;
    }
    ws.ws_row = (unsigned short)rows;
    ws.ws_col = (unsigned short)cols;
    fd = open(tty, O_RDWR | O_NOCTTY | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0 || ioctl(fd, TIOCSWINSZ, &ws) < 0) {
        g_set_error(error, CARREL_GUEST_ERROR, CARREL_GUEST_ERROR_WRONG_STATE,
                    "cannot resize the terminal of process '%s': %s", options->argv[0],
                    g_strerror(errno));
        if (fd >= 0)
            close(fd);
        return NULL;
    }
    close(fd);
    return ok_reply(options->argv[0], dir);
}
