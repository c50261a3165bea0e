/* carrel-guest proc: start, read, write, close, kill and list against a temporary spool. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <errno.h>
#include <glib/gstdio.h>
#include <signal.h>
#include <unistd.h>

#include "guest-procs.h"

static CarrelGuestOptions *
options_of(const char *const *argv)
{
    CarrelGuestOptions *options = g_new0(CarrelGuestOptions, 1);

    options->argv = g_strdupv((char **)argv);
    options->timeout_ms = 5000;
    return options;
}

static JsonObject *
call(JsonNode *(*cmd)(const CarrelGuestOptions *, GError **), const char *const *argv,
     JsonNode **ret_node, GError **error)
{
    g_autoptr(CarrelGuestOptions) options = options_of(argv);

    *ret_node = cmd(options, error);
    return *ret_node ? json_node_get_object(*ret_node) : NULL;
}

static char *
start(const char *const *argv)
{
    g_autoptr(GError) error = NULL;
    g_autoptr(JsonNode) node = NULL;
    JsonObject *o = call(carrel_guest_cmd_proc_start, argv, &node, &error);

    assert_null(error);
    assert_true(json_object_get_int_member(o, "pid") > 1);
    return g_strdup(json_object_get_string_member(o, "handle"));
}

/* Reads until the process has exited (a bounded number of rounds, no time asserted). */
static JsonNode *
read_until_exited(const char *handle)
{
    for (guint i = 0; i < 500; i++) {
        g_autoptr(GError) error = NULL;
        JsonNode *node = NULL;
        JsonObject *o =
            call(carrel_guest_cmd_proc_read, (const char *[]){handle, NULL}, &node, &error);

        assert_null(error);
        if (g_str_equal(json_object_get_string_member(o, "state"), "exited"))
            return node;
        json_node_unref(node);
        g_usleep(20000);
    }
    fail_msg("process '%s' never exited", handle);
    return NULL;
}

static char *
stream_text(JsonNode *node, const char *name)
{
    JsonObject *s = json_object_get_object_member(json_node_get_object(node), name);
    gsize len = 0;
    g_autofree guchar *data = g_base64_decode(json_object_get_string_member(s, "data"), &len);

    return g_strndup((const char *)data, len);
}

static void
test_output_and_exit(void **state)
{
    g_autofree char *h =
        start((const char *[]){"sh", "-c", "echo one; echo two >&2; exit 3", NULL});
    g_autoptr(JsonNode) done = read_until_exited(h);
    g_autofree char *out = stream_text(done, "stdout");
    g_autofree char *err = stream_text(done, "stderr");
    g_autoptr(GError) error = NULL;
    g_autoptr(JsonNode) node = NULL;

    assert_int_equal(json_object_get_int_member(json_node_get_object(done), "exit_code"), 3);
    assert_string_equal(out, "one\n");
    assert_string_equal(err, "two\n");
    /* From an offset: only what follows it; past the end: refused. */
    {
        g_autoptr(JsonNode) tail = NULL;
        g_autofree char *rest = NULL;

        assert_non_null(
            call(carrel_guest_cmd_proc_read, (const char *[]){h, "2", "0", NULL}, &tail, &error));
        rest = stream_text(tail, "stdout");
        assert_string_equal(rest, "e\n");
    }
    assert_null(call(carrel_guest_cmd_proc_read, (const char *[]){h, "99", NULL}, &node, &error));
    assert_true(g_error_matches(error, CARREL_GUEST_ERROR, CARREL_GUEST_ERROR_INVALID_ARG));
    g_clear_error(&error);
    /* An ended process takes no signal and no input. */
    assert_null(call(carrel_guest_cmd_proc_kill, (const char *[]){h, NULL}, &node, &error));
    assert_true(g_error_matches(error, CARREL_GUEST_ERROR, CARREL_GUEST_ERROR_WRONG_STATE));
}

/* One waiting read brings output that came after the call began; a silent process's waiting
 * read ends empty at its timeout, still running. */
static void
test_read_waits(void **state)
{
    g_autofree char *late = start((const char *[]){"sh", "-c", "sleep 0.3; echo late", NULL});
    g_autofree char *quiet = start((const char *[]){"sleep", "600", NULL});
    g_autoptr(CarrelGuestOptions) options = options_of((const char *[]){late, NULL});
    g_autoptr(CarrelGuestOptions) silent = options_of((const char *[]){quiet, NULL});
    g_autoptr(GError) error = NULL;
    g_autoptr(JsonNode) got = NULL;
    g_autoptr(JsonNode) none = NULL;
    g_autoptr(JsonNode) k = NULL;
    g_autoptr(JsonNode) done = NULL;
    g_autofree char *text = NULL;
    g_autofree char *empty = NULL;

    options->timeout_ms = 8000;
    got = carrel_guest_cmd_proc_read(options, &error);
    assert_null(error);
    text = stream_text(got, "stdout");
    assert_string_equal(text, "late\n");
    silent->timeout_ms = 100;
    none = carrel_guest_cmd_proc_read(silent, &error);
    assert_null(error);
    empty = stream_text(none, "stdout");
    assert_string_equal(empty, "");
    assert_string_equal(json_object_get_string_member(json_node_get_object(none), "state"),
                        "running");
    assert_non_null(call(carrel_guest_cmd_proc_kill, (const char *[]){quiet, "9", NULL}, &k, NULL));
    done = read_until_exited(quiet);
}

static void
test_missing_program(void **state)
{
    g_autofree char *h = start((const char *[]){"/nonexistent/program", NULL});
    g_autoptr(JsonNode) done = read_until_exited(h);

    assert_int_equal(json_object_get_int_member(json_node_get_object(done), "exit_code"), 127);
}

static void
test_kill(void **state)
{
    g_autofree char *h = start((const char *[]){"sleep", "600", NULL});
    g_autoptr(GError) error = NULL;
    g_autoptr(JsonNode) node = NULL;
    g_autoptr(JsonNode) done = NULL;

    assert_non_null(
        call(carrel_guest_cmd_proc_kill, (const char *[]){h, "9", NULL}, &node, &error));
    done = read_until_exited(h);
    assert_int_equal(json_object_get_int_member(json_node_get_object(done), "exit_code"), 137);
}

/* What proc write reads on its standard input reaches cat, which ends once input is closed. */
static void
test_stdin(void **state)
{
    g_autofree char *h = start((const char *[]){"cat", NULL});
    g_autoptr(GError) error = NULL;
    g_autoptr(JsonNode) node = NULL;
    g_autoptr(JsonNode) closed = NULL;
    g_autoptr(JsonNode) again = NULL;
    g_autoptr(JsonNode) done = NULL;
    g_autofree char *out = NULL;
    int saved = dup(STDIN_FILENO), fds[2];

    assert_int_equal(pipe(fds), 0);
    assert_int_equal(write(fds[1], "hello\n", 6), 6);
    close(fds[1]);
    dup2(fds[0], STDIN_FILENO);
    close(fds[0]);
    assert_non_null(call(carrel_guest_cmd_proc_write, (const char *[]){h, NULL}, &node, &error));
    dup2(saved, STDIN_FILENO);
    close(saved);
    assert_non_null(call(carrel_guest_cmd_proc_close, (const char *[]){h, NULL}, &closed, &error));
    done = read_until_exited(h);
    out = stream_text(done, "stdout");
    assert_string_equal(out, "hello\n");
    assert_null(call(carrel_guest_cmd_proc_write, (const char *[]){h, NULL}, &again, &error));
    assert_true(g_error_matches(error, CARREL_GUEST_ERROR, CARREL_GUEST_ERROR_WRONG_STATE));
}

static void
test_bad_handles(void **state)
{
    static const char *const bad[] = {
        "", "p", "../etc", "p../x", "pABC", "q123", "p12345678901234567"};

    for (guint i = 0; i < G_N_ELEMENTS(bad); i++) {
        g_autoptr(GError) error = NULL;
        g_autoptr(JsonNode) node = NULL;

        assert_false(carrel_guest_procs_handle_valid(bad[i]));
        assert_null(
            call(carrel_guest_cmd_proc_read, (const char *[]){bad[i], NULL}, &node, &error));
        assert_true(g_error_matches(error, CARREL_GUEST_ERROR, CARREL_GUEST_ERROR_INVALID_ARG));
    }
    {
        g_autoptr(GError) error = NULL;
        g_autoptr(JsonNode) node = NULL;

        assert_null(
            call(carrel_guest_cmd_proc_read, (const char *[]){"p1234", NULL}, &node, &error));
        assert_true(g_error_matches(error, CARREL_GUEST_ERROR, CARREL_GUEST_ERROR_NOT_FOUND));
    }
}

/* The list is bounded: ended handles make room; when all run, a start is refused. */
static void
test_list_bound(void **state)
{
    g_autoptr(GPtrArray) running = g_ptr_array_new_with_free_func(g_free);
    g_autoptr(GError) error = NULL;
    g_autoptr(JsonNode) node = NULL;
    g_autoptr(JsonNode) list = NULL;
    JsonArray *items;

    for (guint i = 0; i < CARREL_GUEST_PROC_MAX; i++)
        g_ptr_array_add(running, start((const char *[]){"sleep", "600", NULL}));
    assert_null(call(carrel_guest_cmd_proc_start, (const char *[]){"true", NULL}, &node, &error));
    assert_true(g_error_matches(error, CARREL_GUEST_ERROR, CARREL_GUEST_ERROR_LIMIT));
    call(carrel_guest_cmd_proc_list, (const char *[]){NULL}, &list, NULL);
    items = json_object_get_array_member(json_node_get_object(list), "processes");
    assert_int_equal(json_array_get_length(items), CARREL_GUEST_PROC_MAX);
    for (guint i = 0; i < running->len; i++) {
        g_autoptr(JsonNode) k = NULL;
        g_autoptr(JsonNode) d = NULL;
        const char *h = g_ptr_array_index(running, i);

        assert_non_null(call(carrel_guest_cmd_proc_kill, (const char *[]){h, "9", NULL}, &k, NULL));
        d = read_until_exited(h);
    }
    g_free(start((const char *[]){"true", NULL}));
}

/* proc start --pty with rows x cols; its handle. */
static char *
start_pty(guint rows, guint cols, const char *const *argv)
{
    g_autoptr(CarrelGuestOptions) options = options_of(argv);
    g_autoptr(GError) error = NULL;
    g_autoptr(JsonNode) node = NULL;

    options->pty = TRUE;
    options->rows = rows;
    options->cols = cols;
    /* Whoever runs the tests (root in a container has no "user"). */
    options->user = g_strdup(g_get_user_name());
    node = carrel_guest_cmd_proc_start(options, &error);
    assert_null(error);
    return g_strdup(json_object_get_string_member(json_node_get_object(node), "handle"));
}

static void
send_input(const char *handle, const char *text)
{
    g_autoptr(GError) error = NULL;
    g_autoptr(JsonNode) node = NULL;
    int saved = dup(STDIN_FILENO), fds[2];

    assert_int_equal(pipe(fds), 0);
    assert_int_equal(write(fds[1], text, strlen(text)), (gssize)strlen(text));
    close(fds[1]);
    dup2(fds[0], STDIN_FILENO);
    close(fds[0]);
    call(carrel_guest_cmd_proc_write, (const char *[]){handle, NULL}, &node, &error);
    dup2(saved, STDIN_FILENO);
    close(saved);
    assert_null(error);
}

/* Reads the output until it holds want (a bounded number of rounds); the whole output. */
static char *
read_until_output(const char *handle, const char *want)
{
    for (guint i = 0; i < 500; i++) {
        g_autoptr(GError) error = NULL;
        g_autoptr(JsonNode) node = NULL;
        g_autofree char *out = NULL;

        call(carrel_guest_cmd_proc_read, (const char *[]){handle, NULL}, &node, &error);
        assert_null(error);
        out = stream_text(node, "stdout");
        if (strstr(out, want))
            return g_steal_pointer(&out);
        g_usleep(20000);
    }
    fail_msg("process '%s' never wrote '%s'", handle, want);
    return NULL;
}

/* The terminal echoes what is typed (cat then prints it again, with the terminal's CR LF); the
 * end of input is ^D, which ends cat. */
static void
test_pty_echo(void **state)
{
    g_autofree char *h = start_pty(0, 0, (const char *[]){"cat", NULL});
    g_autofree char *out = NULL;
    g_autoptr(JsonNode) closed = NULL;
    g_autoptr(JsonNode) done = NULL;
    g_autoptr(GError) error = NULL;

    send_input(h, "hello\n");
    out = read_until_output(h, "hello\r\nhello\r\n");
    assert_string_equal(out, "hello\r\nhello\r\n");
    assert_non_null(call(carrel_guest_cmd_proc_close, (const char *[]){h, NULL}, &closed, &error));
    done = read_until_exited(h);
    assert_int_equal(json_object_get_int_member(json_node_get_object(done), "exit_code"), 0);
}

/* The program's standard streams are the terminal, of the size asked; proc resize changes it;
 * its exit code is the handle's. */
static void
test_pty_size_and_exit(void **state)
{
    g_autofree char *h = start_pty(
        30, 100,
        (const char *[]){"sh", "-c",
                         "test -t 0 && test -t 1 && stty size; read x; stty size; exit 3", NULL});
    g_autofree char *first G_GNUC_UNUSED = read_until_output(h, "30 100\r\n");
    g_autofree char *second = NULL;
    g_autoptr(JsonNode) resized = NULL;
    g_autoptr(JsonNode) done = NULL;
    g_autoptr(GError) error = NULL;

    assert_non_null(call(carrel_guest_cmd_proc_resize, (const char *[]){h, "40", "120", NULL},
                         &resized, &error));
    send_input(h, "\n");
    second = read_until_output(h, "40 120\r\n");
    done = read_until_exited(h);
    assert_int_equal(json_object_get_int_member(json_node_get_object(done), "exit_code"), 3);
}

/* A background job in a group of its own (job control on) is killed with the session. */
static void
test_pty_session_killed(void **state)
{
    g_autofree char *h =
        start_pty(0, 0, (const char *[]){"sh", "-c", "set -m; sleep 600 & echo \"job=$!.\"", NULL});
    g_autoptr(JsonNode) done = read_until_exited(h);
    g_autofree char *out = stream_text(done, "stdout");
    const char *job = strstr(out, "job=");
    gint64 pid = job ? g_ascii_strtoll(job + 4, NULL, 10) : 0;
    guint i;

    assert_true(pid > 1);
    for (i = 0; i < 500 && kill((pid_t)pid, 0) == 0; i++)
        g_usleep(20000);
    assert_int_equal(kill((pid_t)pid, 0), -1);
    assert_int_equal(errno, ESRCH);
}

static void
test_pty_refusals(void **state)
{
    g_autofree char *plain = start((const char *[]){"sleep", "600", NULL});
    g_autoptr(GError) error = NULL;
    g_autoptr(JsonNode) node = NULL;
    g_autoptr(JsonNode) killed = NULL;
    g_autoptr(JsonNode) done = NULL;
    static const char *const bad_args[][8] = {
        {"carrel-guest", "proc", "start", "--rows", "5", "--", "sh", NULL},
        {"carrel-guest", "proc", "start", "--pty", "--rows", "0", NULL},
        {"carrel-guest", "proc", "start", "--pty", "--cols", "1001", NULL},
        {"carrel-guest", "proc", "resize", "p1", "24", NULL},
    };

    /* Not on a terminal, or a size out of range. */
    assert_null(call(carrel_guest_cmd_proc_resize, (const char *[]){plain, "24", "80", NULL}, &node,
                     &error));
    assert_true(g_error_matches(error, CARREL_GUEST_ERROR, CARREL_GUEST_ERROR_INVALID_ARG));
    g_clear_error(&error);
    assert_null(call(carrel_guest_cmd_proc_resize, (const char *[]){plain, "0", "80", NULL}, &node,
                     &error));
    assert_true(g_error_matches(error, CARREL_GUEST_ERROR, CARREL_GUEST_ERROR_INVALID_ARG));
    g_clear_error(&error);
    assert_non_null(
        call(carrel_guest_cmd_proc_kill, (const char *[]){plain, "9", NULL}, &killed, NULL));
    done = read_until_exited(plain);
    for (guint i = 0; i < G_N_ELEMENTS(bad_args); i++) {
        g_autoptr(CarrelGuestOptions) options = NULL;
        int argc = (int)g_strv_length((char **)bad_args[i]);

        options = carrel_guest_options_parse(argc, (char **)bad_args[i], &error);
        assert_null(options);
        assert_true(g_error_matches(error, CARREL_GUEST_ERROR, CARREL_GUEST_ERROR_INVALID_ARG));
        g_clear_error(&error);
    }
    /* Without a program, --pty is a login shell. */
    {
        static const char *const shell[] = {"carrel-guest", "proc", "start", "--pty",
                                            "--rows",       "10",   NULL};
        g_autoptr(CarrelGuestOptions) options =
            carrel_guest_options_parse(6, (char **)shell, &error);

        assert_non_null(options);
        assert_true(options->pty);
        assert_int_equal(options->rows, 10);
        assert_null(options->argv[0]);
    }
}

int
main(void)
{
    g_autofree char *dir = g_dir_make_tmp("carrel-procs-XXXXXX", NULL);
    g_autofree char *spool = g_build_filename(dir, "procs", NULL);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_output_and_exit),
        cmocka_unit_test(test_read_waits),
        cmocka_unit_test(test_missing_program),
        cmocka_unit_test(test_kill),
        cmocka_unit_test(test_stdin),
        cmocka_unit_test(test_bad_handles),
        cmocka_unit_test(test_list_bound),
        cmocka_unit_test(test_pty_echo),
        cmocka_unit_test(test_pty_size_and_exit),
        cmocka_unit_test(test_pty_session_killed),
        cmocka_unit_test(test_pty_refusals),
    };
    int failed;

    g_setenv("CARREL_GUEST_PROC_DIR", spool, TRUE);
    failed = cmocka_run_group_tests(tests, NULL, NULL);
    g_spawn_sync(NULL, (char *[]){(char *)"rm", (char *)"-rf", dir, NULL}, NULL,
                 G_SPAWN_SEARCH_PATH, NULL, NULL, NULL, NULL, NULL, NULL);
    return failed;
}
