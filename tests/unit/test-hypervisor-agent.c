/* hypervisor: the guest agent, its commands and untrusted replies, exec and files on the fake
 * and on libvirt's test driver. */
#include "hypervisor-fixture.h"

static JsonObject *
parse_object(JsonParser *parser, const char *json)
{
    JsonNode *root;

    assert_true(json_parser_load_from_data(parser, json, -1, NULL));
    root = json_parser_get_root(parser);
    assert_true(JSON_NODE_HOLDS_OBJECT(root));
    return json_node_get_object(root);
}

/* The guest-exec of argv under either wrapper: path, its own arguments, then argv untouched. */
static void
assert_exec_command(const char *exec, const char *path, const char *const *wrapper_args)
{
    g_autoptr(JsonParser) parser = json_parser_new();
    JsonObject *root = parse_object(parser, exec), *args;
    JsonArray *arg;
    g_autofree guchar *decoded = NULL;
    gsize decoded_len = 0, n = g_strv_length((char **)wrapper_args);

    assert_string_equal(json_object_get_string_member(root, "execute"), "guest-exec");
    args = json_object_get_object_member(root, "arguments");
    assert_string_equal(json_object_get_string_member(args, "path"), path);
    assert_true(json_object_get_boolean_member(args, "capture-output"));
    arg = json_object_get_array_member(args, "arg");
    assert_int_equal(json_array_get_length(arg), n + 3);
    for (gsize i = 0; i < n; i++)
        assert_string_equal(json_array_get_string_element(arg, i), wrapper_args[i]);
    /* A program name that looks like an option stays the program: both stop at "30". */
    assert_string_equal(json_array_get_string_element(arg, n), "-rf");
    assert_string_equal(json_array_get_string_element(arg, n + 1), "a \"b\"\n");
    assert_string_equal(json_array_get_string_element(arg, n + 2), "é");
    decoded = g_base64_decode(json_object_get_string_member(args, "input-data"), &decoded_len);
    assert_int_equal(decoded_len, 8);
    assert_memory_equal(decoded, "\0\1binary", 8);
}

static void
test_agent_commands(void **state)
{
    const char *argv[] = {"-rf", "a \"b\"\n", "é", NULL};
    const char *runner_args[] = {"30", NULL};
    const char *timeout_args[] = {"--signal=KILL", "30", NULL};
    g_autoptr(GBytes) input = g_bytes_new_static("\0\1binary", 8);
    g_autofree char *exec = carrel_hypervisor_agent_exec_command(argv, input, 30, TRUE);
    g_autofree char *fallback = carrel_hypervisor_agent_exec_command(argv, input, 30, FALSE);
    g_autofree char *status = carrel_hypervisor_agent_status_command(1234);
    g_autofree char *kill = carrel_hypervisor_agent_kill_command(77);
    g_autoptr(JsonParser) parser = json_parser_new();
    JsonObject *root, *args;
    JsonArray *arg;

    assert_exec_command(exec, CARREL_HYPERVISOR_EXEC_RUNNER, runner_args);
    assert_exec_command(fallback, "timeout", timeout_args);
    assert_string_equal(status, "{\"execute\":\"guest-exec-status\",\"arguments\":{\"pid\":1234}}");
    root = parse_object(parser, kill);
    args = json_object_get_object_member(root, "arguments");
    assert_string_equal(json_object_get_string_member(args, "path"), "/bin/sh");
    arg = json_object_get_array_member(args, "arg");
    assert_string_equal(json_array_get_string_element(arg, 3), "77");
    assert_false(json_object_has_member(args, "capture-output"));
}

/* Only guest-exec's failure to start carrel-run itself sends exec to timeout(1). */
static void
test_agent_runner_missing(void **state)
{
    assert_true(carrel_hypervisor_agent_runner_missing(
        "internal error: unable to execute QEMU agent command 'guest-exec': Guest agent command "
        "failed, error was 'Failed to execute child process \u201c/usr/local/bin/carrel-run\u201d "
        "(No such file or directory)'"));
    /* The program itself missing is the wrapper's 127, never a reason to drop the wrapper. */
    assert_false(
        carrel_hypervisor_agent_runner_missing("Guest agent command failed, error was 'Failed to "
                                               "execute child process \u201ctimeout\u201d "
                                               "(No such file or directory)'"));
    assert_false(carrel_hypervisor_agent_runner_missing(
        "Guest agent is not responding: Guest agent not available for now"));
    assert_false(carrel_hypervisor_agent_runner_missing(NULL));
}

static void
test_agent_exec_args(void **state)
{
    const char *ok[] = {"true", NULL};
    const char *empty[] = {"", NULL};
    const char *latin1[] = {"echo", "\xe9", NULL};
    g_autoptr(GPtrArray) many = g_ptr_array_new();
    g_autofree char *long_arg = g_strnfill(CARREL_HYPERVISOR_EXEC_MAX_ARGV_BYTES, 'a');
    const char *too_long[] = {"echo", long_arg, NULL};
    g_autoptr(GBytes) big_input = g_bytes_new_take(g_malloc0(CARREL_HYPERVISOR_EXEC_MAX_INPUT + 1),
                                                   CARREL_HYPERVISOR_EXEC_MAX_INPUT + 1);
    g_autoptr(GError) error = NULL;

    for (int i = 0; i <= CARREL_HYPERVISOR_EXEC_MAX_ARGS; i++)
        g_ptr_array_add(many, (gpointer) "x");
    g_ptr_array_add(many, NULL);
    assert_true(carrel_hypervisor_exec_check_args(ok, NULL, 1, 0, NULL));
    assert_true(carrel_hypervisor_exec_check_args(ok, NULL, CARREL_HYPERVISOR_EXEC_MAX_TIMEOUT_S,
                                                  CARREL_HYPERVISOR_EXEC_MAX_OUTPUT, NULL));
#define REFUSED(argv, input, timeout, max, fragment)                                               \
    do {                                                                                           \
        assert_false(carrel_hypervisor_exec_check_args(argv, input, timeout, max, &error));        \
        assert_error(error, CARREL_ERROR_INVALID_ARG, fragment);                                   \
        g_clear_error(&error);                                                                     \
    } while (0)
    REFUSED(NULL, NULL, 1, 0, "program name");
    REFUSED(empty, NULL, 1, 0, "program name");
    REFUSED(latin1, NULL, 1, 0, "argument 1 is not valid UTF-8");
    REFUSED((const char *const *)many->pdata, NULL, 1, 0, "exceed");
    REFUSED(too_long, NULL, 1, 0, "exceed");
    REFUSED(ok, big_input, 1, 0, "standard input");
    REFUSED(ok, NULL, 0, 0, "timeout '0'");
    REFUSED(ok, NULL, CARREL_HYPERVISOR_EXEC_MAX_TIMEOUT_S + 1, 0, "timeout");
    REFUSED(ok, NULL, 1, CARREL_HYPERVISOR_EXEC_MAX_OUTPUT + 1, "output limit");
#undef REFUSED
}

static void
assert_pid_refused(const char *reply, int code, const char *fragment)
{
    g_autoptr(GError) error = NULL;
    gint64 pid = -5;

    assert_false(carrel_hypervisor_agent_parse_pid(reply, &pid, &error));
    assert_error(error, code, fragment);
    assert_int_equal(pid, -5);
}

static void
test_agent_parse_pid(void **state)
{
    g_autofree char *brackets = g_strnfill(5000, '[');
    g_autofree char *deep = g_strdup_printf("{\"return\":%s}", brackets);
    g_autofree char *big = g_strnfill(CARREL_HYPERVISOR_AGENT_REPLY_MAX + 1, ' ');
    gint64 pid = 0;

    assert_true(carrel_hypervisor_agent_parse_pid("{\"return\": {\"pid\": 4242}}", &pid, NULL));
    assert_int_equal(pid, 4242);
    assert_pid_refused("{\"return\": {}}", CARREL_ERROR_INVALID_ARG, "no 'pid'");
    assert_pid_refused("{\"return\": {\"pid\": 0}}", CARREL_ERROR_INVALID_ARG, "out of range");
    assert_pid_refused("{\"return\": {\"pid\": -1}}", CARREL_ERROR_INVALID_ARG, "out of range");
    assert_pid_refused("{\"return\": {\"pid\": 4294967296}}", CARREL_ERROR_INVALID_ARG, "range");
    assert_pid_refused("{\"return\": {\"pid\": \"7\"}}", CARREL_ERROR_INVALID_ARG, "is not a");
    assert_pid_refused("{\"return\": {\"pid\": 7.5}}", CARREL_ERROR_INVALID_ARG, "is not a");
    assert_pid_refused("{\"return\": [7]}", CARREL_ERROR_INVALID_ARG, "no 'return' object");
    assert_pid_refused("[]", CARREL_ERROR_INVALID_ARG, "no 'return'");
    assert_pid_refused("{\"return\": {\"pid\": 7}", CARREL_ERROR_INVALID_ARG, "not JSON");
    assert_pid_refused("", CARREL_ERROR_INVALID_ARG, "empty");
    assert_pid_refused(NULL, CARREL_ERROR_INVALID_ARG, "empty");
    assert_pid_refused("{\"return\": {\"pid\": 7, \"x\": \"\\u0000\"}}", CARREL_ERROR_INVALID_ARG,
                       "NUL");
    assert_pid_refused(deep, CARREL_ERROR_INVALID_ARG, "nested too deep");
    assert_pid_refused(big, CARREL_ERROR_LIMIT, "exceeds");
}

/* guest-file-* replies are the guest's words: every inconsistency is refused. */
static void
test_agent_file_replies(void **state)
{
    g_autoptr(GError) error = NULL;
    g_autoptr(GBytes) data = NULL;
    g_autofree char *open_cmd = carrel_hypervisor_agent_file_open_command("/tmp/\"x", "r");
    g_autofree char *write_cmd =
        carrel_hypervisor_agent_file_write_command(1000, (guint8 *)"hi", 2);
    gint64 handle = 0;
    gboolean eof = FALSE;
    gsize count = 0;

    assert_string_equal(open_cmd, "{\"execute\":\"guest-file-open\",\"arguments\":"
                                  "{\"path\":\"/tmp/\\\"x\",\"mode\":\"r\"}}");
    assert_non_null(strstr(write_cmd, "\"buf-b64\":\"aGk=\""));
    assert_true(carrel_hypervisor_agent_parse_file_handle("{\"return\": 1000}", &handle, NULL));
    assert_int_equal(handle, 1000);
    assert_false(carrel_hypervisor_agent_parse_file_handle("{\"return\": 0}", &handle, &error));
    assert_error(error, CARREL_ERROR_INVALID_ARG, "file handle");
    g_clear_error(&error);
    assert_false(carrel_hypervisor_agent_parse_file_handle("{\"return\": \"7\"}", &handle, &error));
    g_clear_error(&error);
    /* A failed open: a missing file is NOT_FOUND; a path that only names the words is not. */
    assert_int_equal(carrel_hypervisor_agent_file_open_code(
                         CARREL_ERROR_HYPERVISOR,
                         "internal error: unable to execute QEMU agent command 'guest-file-open': "
                         "failed to open file '/x' (mode: 'r'): No such file or directory"),
                     CARREL_ERROR_NOT_FOUND);
    assert_int_equal(carrel_hypervisor_agent_file_open_code(
                         CARREL_ERROR_HYPERVISOR,
                         "internal error: unable to execute QEMU agent command 'guest-file-open': "
                         "failed to open file '/No such file or directory' (mode: 'r'): "
                         "Permission denied"),
                     CARREL_ERROR_HYPERVISOR);
    assert_int_equal(carrel_hypervisor_agent_file_open_code(CARREL_ERROR_TIMEOUT,
                                                            "guest agent is not responding: "
                                                            "No such file or directory"),
                     CARREL_ERROR_TIMEOUT);
    assert_int_equal(carrel_hypervisor_agent_file_open_code(CARREL_ERROR_HYPERVISOR, NULL),
                     CARREL_ERROR_HYPERVISOR);

    assert_true(carrel_hypervisor_agent_parse_file_read(
        "{\"return\": {\"count\": 2, \"buf-b64\": \"aGk=\", \"eof\": true}}", 16, &data, &eof,
        NULL));
    assert_int_equal(g_bytes_get_size(data), 2);
    assert_true(eof);
    /* The count must match the data, the data must fit what was asked, base64 must be padded. */
    assert_false(carrel_hypervisor_agent_parse_file_read(
        "{\"return\": {\"count\": 3, \"buf-b64\": \"aGk=\", \"eof\": true}}", 16, &data, &eof,
        &error));
    assert_error(error, CARREL_ERROR_INVALID_ARG, "inconsistent");
    g_clear_error(&error);
    assert_false(carrel_hypervisor_agent_parse_file_read(
        "{\"return\": {\"count\": 2, \"buf-b64\": \"aGk=\", \"eof\": true}}", 1, &data, &eof,
        &error));
    g_clear_error(&error);
    assert_false(carrel_hypervisor_agent_parse_file_read(
        "{\"return\": {\"count\": 2, \"buf-b64\": \"aGk\", \"eof\": true}}", 16, &data, &eof,
        &error));
    assert_error(error, CARREL_ERROR_INVALID_ARG, "base64");
    g_clear_error(&error);
    assert_true(
        carrel_hypervisor_agent_parse_file_write("{\"return\": {\"count\": 2}}", 2, &count, NULL));
    assert_int_equal(count, 2);
    assert_false(carrel_hypervisor_agent_parse_file_write("{\"return\": {\"count\": 3}}", 2, &count,
                                                          &error));
    assert_error(error, CARREL_ERROR_INVALID_ARG, "out of range");
}

static void
assert_status_refused(const char *reply, const char *fragment)
{
    g_auto(CarrelExecStatus) status = {0};
    g_autoptr(GError) error = NULL;

    assert_false(carrel_hypervisor_agent_parse_status(reply, 100, &status, &error));
    assert_error(error, CARREL_ERROR_INVALID_ARG, fragment);
    assert_null(status.out);
}

static void
test_agent_parse_status(void **state)
{
    g_auto(CarrelExecStatus) status = {0};
    g_autoptr(GError) error = NULL;
    g_autofree char *encoded = g_base64_encode((const guchar *)"0123456789", 10);
    g_autofree char *reply = g_strdup_printf("{\"return\": {\"exited\": true, \"exitcode\": 3, "
                                             "\"out-data\": \"%s\", \"err-data\": \"ZXJy\"}}",
                                             encoded);

    assert_true(carrel_hypervisor_agent_parse_status("{\"return\": {\"exited\": false}}", 100,
                                                     &status, NULL));
    assert_false(status.exited);
    carrel_exec_status_clear(&status);
    if (!carrel_hypervisor_agent_parse_status(reply, 100, &status, &error))
        fail_msg("parse: %s", error->message);
    assert_true(status.exited);
    assert_int_equal(status.exit_code, 3);
    assert_int_equal(status.signal, 0);
    assert_int_equal(g_bytes_get_size(status.out), 10);
    assert_memory_equal(g_bytes_get_data(status.out, NULL), "0123456789", 10);
    assert_int_equal(g_bytes_get_size(status.err), 3);
    assert_false(status.truncated);
    carrel_exec_status_clear(&status);
    /* Cut to max_output, at every length (decoding stops early). */
    for (gsize max = 0; max <= 11; max++) {
        assert_true(carrel_hypervisor_agent_parse_status(reply, max, &status, NULL));
        assert_int_equal(g_bytes_get_size(status.out), MIN(max, 10));
        assert_memory_equal(g_bytes_get_data(status.out, NULL), "0123456789", MIN(max, 10));
        assert_int_equal(status.truncated, max < 10);
        carrel_exec_status_clear(&status);
    }
    assert_true(carrel_hypervisor_agent_parse_status(
        "{\"return\": {\"exited\": true, \"signal\": 9}}", 100, &status, NULL));
    assert_int_equal(status.exit_code, 137);
    assert_int_equal(status.signal, 9);
    assert_int_equal(g_bytes_get_size(status.out), 0);
    carrel_exec_status_clear(&status);
    assert_true(carrel_hypervisor_agent_parse_status(
        "{\"return\": {\"exited\": true, \"out-truncated\": true}}", 100, &status, NULL));
    assert_int_equal(status.exit_code, -1);
    assert_true(status.truncated);
    carrel_exec_status_clear(&status);
    assert_status_refused("{\"return\": {\"exited\": 1}}", "'exited' is not a");
    assert_status_refused("{\"return\": {\"exited\": true, \"exitcode\": 256}}", "out of range");
    assert_status_refused("{\"return\": {\"exited\": true, \"exitcode\": -1}}", "out of range");
    assert_status_refused("{\"return\": {\"exited\": true, \"signal\": 0}}", "out of range");
    assert_status_refused("{\"return\": {\"exited\": true, \"exitcode\": \"0\"}}", "is not a");
    assert_status_refused("{\"return\": {\"exited\": true, \"out-data\": 5}}", "is not a");
    assert_status_refused("{\"return\": {\"exited\": true, \"out-data\": \"abc\"}}", "not base64");
    assert_status_refused("{\"return\": {\"exited\": true, \"out-data\": \"ab=c\"}}", "base64");
    assert_status_refused("{\"return\": {\"exited\": true, \"out-data\": \"a===\"}}", "base64");
    assert_status_refused("{\"return\": {\"exited\": true, \"err-data\": \"ab\\nc\"}}", "base64");
    assert_status_refused("{\"return\": {\"exited\": true, \"err-truncated\": \"no\"}}",
                          "is not a");
}

static void
test_fake_agent_exec(void **state)
{
    g_autoptr(CarrelHypervisor) hv = carrel_hypervisor_new_fake();
    g_autofree char *xml = make_xml("carrel-s-0000000000e5", "s-0000000000e5");
    const char *name = "carrel-s-0000000000e5";
    const char *argv[] = {"uname", "-a", NULL};
    CarrelGuestExec run = {.argv = argv, .timeout_s = 5, .max_output = 100};
    /* Not what the fake reports: every member must be written. */
    g_auto(CarrelExecResult) result = {.exit_code = -7, .truncated = TRUE, .timed_out = TRUE};
    g_auto(GStrv) seen = NULL;

    assert_true(carrel_hypervisor_define_start(hv, xml, NULL));
    assert_null(carrel_hypervisor_fake_get_exec_argv(hv));
    assert_true(carrel_hypervisor_agent_exec(hv, name, &run, &result, NULL));
    assert_int_equal(result.exit_code, 0);
    assert_int_equal(g_bytes_get_size(result.stdout_bytes), 0);
    assert_false(result.truncated || result.timed_out);
    seen = carrel_hypervisor_fake_get_exec_argv(hv);
    assert_string_equal(seen[0], "uname");
    assert_string_equal(seen[1], "-a");
    assert_null(seen[2]);
    carrel_exec_result_clear(&result);
    carrel_hypervisor_fake_set_exec_result(hv, 2, "Linux carrel\n", "warning\n");
    run.max_output = 5;
    assert_true(carrel_hypervisor_agent_exec(hv, name, &run, &result, NULL));
    assert_int_equal(result.exit_code, 2);
    assert_int_equal(g_bytes_get_size(result.stdout_bytes), 5);
    assert_memory_equal(g_bytes_get_data(result.stdout_bytes, NULL), "Linux", 5);
    assert_true(result.truncated);
    carrel_exec_result_clear(&result);
    carrel_hypervisor_fake_set_exec_hang(hv, TRUE);
    run.max_output = 100;
    assert_true(carrel_hypervisor_agent_exec(hv, name, &run, &result, NULL));
    assert_true(result.timed_out);
    assert_int_equal(result.exit_code, 137);
    /* The result is optional: a caller may only want to know that it ran. */
    assert_true(carrel_hypervisor_agent_exec(hv, name, &run, NULL, NULL));
}

static void
test_fake_agent_exec_errors(void **state)
{
    g_autoptr(CarrelHypervisor) hv = carrel_hypervisor_new_fake();
    g_autofree char *xml = make_xml("carrel-s-0000000000e7", "s-0000000000e7");
    const char *name = "carrel-s-0000000000e7";
    const char *argv[] = {"true", NULL};
    CarrelGuestExec bad = {.argv = argv, .timeout_s = 0, .max_output = 100};
    CarrelGuestExec run = {.argv = argv, .timeout_s = 5, .max_output = 100};
    g_autoptr(GError) error = NULL;

    assert_true(carrel_hypervisor_define_start(hv, xml, NULL));
    /* Arguments are checked before any backend sees them. */
    assert_false(carrel_hypervisor_agent_exec(hv, name, &bad, NULL, &error));
    assert_error(error, CARREL_ERROR_INVALID_ARG, "domain 'carrel-s-0000000000e7': guest-exec: ");
    g_clear_error(&error);
    carrel_hypervisor_fake_set_agent_silent(hv, TRUE);
    assert_false(carrel_hypervisor_agent_exec(hv, name, &run, NULL, &error));
    assert_error(error, CARREL_ERROR_TIMEOUT, NULL);
    g_clear_error(&error);
    assert_false(carrel_hypervisor_set_time(hv, name, &error));
    assert_error(error, CARREL_ERROR_TIMEOUT, NULL);
    g_clear_error(&error);
    carrel_hypervisor_fake_set_agent_silent(hv, FALSE);
    carrel_hypervisor_fake_fail_next(hv, "agent_exec");
    assert_false(carrel_hypervisor_agent_exec(hv, name, &run, NULL, &error));
    assert_error(error, CARREL_ERROR_HYPERVISOR, NULL);
    g_clear_error(&error);
    assert_true(carrel_hypervisor_destroy(hv, name, NULL));
    assert_false(carrel_hypervisor_agent_exec(hv, name, &run, NULL, &error));
    assert_error(error, CARREL_ERROR_WRONG_STATE, NULL);
}

static void
test_libvirt_guest_ops(void **state)
{
    g_autoptr(GError) error = NULL;
    g_autoptr(CarrelHypervisor) hv = carrel_hypervisor_open_libvirt(TEST_URI, &error);
    g_autofree char *xml = make_xml("carrel-s-0000000000b2", "s-0000000000b2");
    const char *name = "carrel-s-0000000000b2";
    const char *argv[] = {"true", NULL};
    CarrelGuestExec run = {.argv = argv, .timeout_s = 5, .max_output = 100};
    g_autoptr(GBytes) shot = NULL;
    guint width = 0, height = 0;

    if (!hv || !carrel_hypervisor_define_start(hv, xml, &error))
        fail_msg("setup: %s", error->message);
    assert_true(carrel_hypervisor_set_time(hv, name, NULL));
    assert_false(carrel_hypervisor_agent_exec(hv, name, &run, NULL, &error));
    assert_error(error, CARREL_ERROR_UNSUPPORTED, "test driver");
    g_clear_error(&error);
    assert_false(carrel_hypervisor_save(hv, name, "/nonexistent/warm.save", &error));
    assert_error(error, CARREL_ERROR_UNSUPPORTED, "domain 'carrel-s-0000000000b2': ");
    g_clear_error(&error);
    assert_false(carrel_hypervisor_restore(hv, "/nonexistent/warm.save", xml, &error));
    assert_error(error, CARREL_ERROR_UNSUPPORTED, NULL);
    g_clear_error(&error);
    /* The test driver's screenshot is a PNG: the stream path and the decoder, end to end. */
    if (!carrel_hypervisor_screenshot(hv, name, &shot, &width, &height, &error))
        fail_msg("screenshot: %s", error->message);
    assert_true(width > 0 && height > 0);
    assert_int_equal(g_bytes_get_size(shot), strlen("P6\n") + (width >= 1000 ? 4 : 3) + 1 +
                                                 (height >= 1000 ? 4 : 3) + strlen("\n255\n") +
                                                 (gsize)width * height * 3);
    assert_true(carrel_hypervisor_destroy(hv, name, NULL));
    assert_false(carrel_hypervisor_set_time(hv, name, &error));
    assert_error(error, CARREL_ERROR_WRONG_STATE, NULL);
    g_clear_error(&error);
    assert_true(carrel_hypervisor_undefine(hv, name, NULL));
    assert_false(carrel_hypervisor_set_time(hv, name, &error));
    assert_error(error, CARREL_ERROR_NOT_FOUND, NULL);
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_agent_commands),     cmocka_unit_test(test_agent_runner_missing),
        cmocka_unit_test(test_agent_exec_args),    cmocka_unit_test(test_agent_parse_pid),
        cmocka_unit_test(test_agent_file_replies), cmocka_unit_test(test_agent_parse_status),
        cmocka_unit_test(test_fake_agent_exec),    cmocka_unit_test(test_fake_agent_exec_errors),
        cmocka_unit_test(test_libvirt_guest_ops),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
