/*
 * core's background processes and streamed commands over the fake hypervisor, whose agent_exec
 * answers a scripted carrel-guest reply: the command lines sent to the guest, the guest's errors
 * as carrel's codes, and hostile replies refused.
 */
#include "core-fixture.h"

static const char exited_reply[] =
    "{\"handle\":\"p1a\",\"pid\":42,\"state\":\"exited\",\"exit_code\":3,"
    "\"stdout\":{\"offset\":0,\"data\":\"aGkK\",\"size\":3},"
    "\"stderr\":{\"offset\":0,\"data\":\"\",\"size\":0}}";

static CarrelSession *
running(Fixture *fx)
{
    g_autoptr(CarrelTemplate) tmpl G_GNUC_UNUSED = import(fx, "tiny");
    g_autoptr(GError) error = NULL;
    CarrelSession *s = create(fx, "procs", &error);

    assert_non_null(s);
    return s;
}

static void
test_background_start(void **state)
{
    Fixture *fx = *state;
    g_autoptr(CarrelSession) s = running(fx);
    char *argv[] = {(char *)"sleep", (char *)"600", NULL};
    CarrelExecRequest req = {.argv = argv, .timeout_s = 60, .background = TRUE};
    g_autoptr(GError) error = NULL;
    g_autoptr(CarrelProcInfo) info = NULL;
    g_auto(GStrv) sent = NULL;

    carrel_hypervisor_fake_set_exec_result(fx->hv, 0, "{\"handle\":\"p1a\",\"pid\":42}", "");
    info = carrel_manager_proc_start(fx->mgr, ADMIN, s->id, &req, &error);
    assert_null(error);
    assert_string_equal(info->handle, "p1a");
    assert_int_equal(info->pid, 42);
    assert_false(info->exited);
    sent = carrel_hypervisor_fake_get_exec_argv(fx->hv);
    /* The program follows "--": carrel-guest never reads it as one of its options. */
    assert_string_equal(sent[0], CARREL_GUEST_TOOL_PATH);
    assert_string_equal(sent[1], "proc");
    assert_string_equal(sent[2], "start");
    assert_string_equal(sent[3], "--");
    assert_string_equal(sent[4], "sleep");
    assert_string_equal(sent[5], "600");
    assert_null(sent[6]);
}

static void
assert_read_fails(Fixture *fx, const char *id, const char *handle, int code)
{
    g_autoptr(GError) error = NULL;
    g_autoptr(CarrelProcRead) read =
        carrel_manager_proc_read(fx->mgr, ADMIN, id, handle, 0, 0, &error);

    assert_null(read);
    if (!g_error_matches(error, CARREL_ERROR, code))
        fail_msg("want code %d, got %d: %s", code, error ? error->code : -1,
                 error ? error->message : "");
}

static void
test_read_and_errors(void **state)
{
    Fixture *fx = *state;
    g_autoptr(CarrelSession) s = running(fx);
    g_autoptr(GError) error = NULL;
    g_autoptr(CarrelProcRead) read = NULL;
    g_auto(GStrv) sent = NULL;

    carrel_hypervisor_fake_set_exec_result(fx->hv, 0, exited_reply, "");
    read = carrel_manager_proc_read(fx->mgr, ADMIN, s->id, "p1a", 0, 0, &error);
    assert_null(error);
    assert_true(read->exited);
    assert_int_equal(read->exit_code, 3);
    assert_int_equal(g_bytes_get_size(read->stdout_data), 3);
    sent = carrel_hypervisor_fake_get_exec_argv(fx->hv);
    assert_string_equal(sent[2], "read");
    assert_string_equal(sent[3], "p1a");
    assert_string_equal(sent[4], "0");
    assert_string_equal(sent[5], "0");

    /* A handle that is not one is refused before the guest hears of it. */
    assert_read_fails(fx, s->id, "../../etc/passwd", CARREL_ERROR_INVALID_ARG);
    /* The guest's own errors keep their meaning. */
    carrel_hypervisor_fake_set_exec_result(
        fx->hv, 1, "{\"error\":{\"code\":\"not_found\",\"message\":\"no process\"}}", "");
    assert_read_fails(fx, s->id, "p1b", CARREL_ERROR_NOT_FOUND);
    carrel_hypervisor_fake_set_exec_result(
        fx->hv, 1, "{\"error\":{\"code\":\"wrong_state\",\"message\":\"exited\"}}", "");
    assert_read_fails(fx, s->id, "p1b", CARREL_ERROR_WRONG_STATE);
    /* No carrel-guest in the guest. */
    carrel_hypervisor_fake_set_exec_result(fx->hv, 127, NULL, "not found");
    assert_read_fails(fx, s->id, "p1b", CARREL_ERROR_UNSUPPORTED);
    /* Hostile or broken replies: not JSON, an offset not asked for, a chunk past its size. */
    carrel_hypervisor_fake_set_exec_result(fx->hv, 0, "not json", "");
    assert_read_fails(fx, s->id, "p1b", CARREL_ERROR_HYPERVISOR);
    carrel_hypervisor_fake_set_exec_result(fx->hv, 0,
                                           "{\"handle\":\"p1a\",\"pid\":42,\"state\":\"running\","
                                           "\"stdout\":{\"offset\":7,\"data\":\"\",\"size\":9},"
                                           "\"stderr\":{\"offset\":0,\"data\":\"\",\"size\":0}}",
                                           "");
    assert_read_fails(fx, s->id, "p1a", CARREL_ERROR_HYPERVISOR);
    carrel_hypervisor_fake_set_exec_result(
        fx->hv, 0,
        "{\"handle\":\"p1a\",\"pid\":42,\"state\":\"running\","
        "\"stdout\":{\"offset\":0,\"data\":\"aGVsbG8gd29ybGQ=\",\"size\":1},"
        "\"stderr\":{\"offset\":0,\"data\":\"\",\"size\":0}}",
        "");
    assert_read_fails(fx, s->id, "p1a", CARREL_ERROR_HYPERVISOR);
}

static void
test_signal_and_input(void **state)
{
    Fixture *fx = *state;
    g_autoptr(CarrelSession) s = running(fx);
    g_autoptr(GError) error = NULL;
    g_autoptr(GBytes) data = g_bytes_new_static("x\n", 2);
    CarrelProcInput input = {.data = data, .close = TRUE};
    g_auto(GStrv) sent = NULL;

    carrel_hypervisor_fake_set_exec_result(fx->hv, 0, exited_reply, "");
    assert_true(carrel_manager_proc_signal(fx->mgr, ADMIN, s->id, "p1a", 9, &error));
    sent = carrel_hypervisor_fake_get_exec_argv(fx->hv);
    assert_string_equal(sent[2], "kill");
    assert_string_equal(sent[4], "9");
    g_clear_pointer(&sent, g_strfreev);
    assert_false(carrel_manager_proc_signal(fx->mgr, ADMIN, s->id, "p1a", 0, &error));
    assert_true(g_error_matches(error, CARREL_ERROR, CARREL_ERROR_INVALID_ARG));
    g_clear_error(&error);
    /* Written, then closed: the last call the guest saw is the close. */
    assert_true(carrel_manager_proc_input(fx->mgr, ADMIN, s->id, "p1a", &input, &error));
    sent = carrel_hypervisor_fake_get_exec_argv(fx->hv);
    assert_string_equal(sent[2], "close");
}

static void
test_stream(void **state)
{
    Fixture *fx = *state;
    g_autoptr(CarrelSession) s = running(fx);
    char *argv[] = {(char *)"echo", (char *)"hi", NULL};
    CarrelExecRequest req = {.argv = argv, .timeout_s = 60, .stream = TRUE};
    g_autoptr(GError) error = NULL;
    g_autoptr(CarrelExecStream) st = NULL;
    g_autoptr(CarrelProcRead) read = NULL;
    g_autoptr(JsonNode) end = NULL;
    JsonObject *o;

    /* One scripted reply serves the start (handle, pid), the close and the read. */
    carrel_hypervisor_fake_set_exec_result(fx->hv, 0, exited_reply, "");
    st = carrel_manager_exec_stream_start(fx->mgr, ADMIN, s->id, &req, &error);
    assert_null(error);
    assert_string_equal(carrel_exec_stream_handle(st), "p1a");
    read = carrel_exec_stream_next(st, &error);
    assert_non_null(read);
    assert_true(carrel_proc_read_is_last(read));
    /* The read waits in the guest for output: no blind polling from the host. */
    assert_true(carrel_exec_stream_waits(st));
    {
        g_auto(GStrv) sent = carrel_hypervisor_fake_get_exec_argv(fx->hv);

        assert_string_equal(sent[2], "read");
        assert_string_equal(sent[6], "--timeout");
        assert_non_null(sent[7]);
        assert_null(sent[8]);
    }
    end = carrel_exec_stream_finish(st, NULL);
    o = json_node_get_object(end);
    assert_int_equal(json_object_get_int_member(o, "exit_code"), 3);
    assert_int_equal(json_object_get_int_member(o, "stdout_bytes"), 3);
    assert_false(json_object_get_boolean_member(o, "cancelled"));

    /* An older carrel-guest refuses --timeout on read: the stream reads on without it. */
    {
        g_autoptr(CarrelExecStream) old = NULL;
        g_auto(GStrv) sent = NULL;

        old = carrel_manager_exec_stream_start(fx->mgr, ADMIN, s->id, &req, &error);
        assert_non_null(old);
        carrel_hypervisor_fake_set_exec_result(
            fx->hv, 2,
            "{\"error\":{\"code\":\"invalid_argument\",\"message\":\"--timeout does not "
            "apply to 'proc read'\"}}",
            "");
        assert_null(carrel_exec_stream_next(old, &error));
        g_clear_error(&error);
        assert_false(carrel_exec_stream_waits(old));
        sent = carrel_hypervisor_fake_get_exec_argv(fx->hv);
        assert_string_equal(sent[2], "read");
        assert_null(sent[6]);
        carrel_exec_stream_cancel(old);
        json_node_unref(carrel_exec_stream_finish(old, NULL));
    }

    /* A guest without carrel-guest: the stream never starts. */
    carrel_hypervisor_fake_set_exec_result(fx->hv, 127, NULL, "");
    assert_null(carrel_manager_exec_stream_start(fx->mgr, ADMIN, s->id, &req, &error));
    assert_true(g_error_matches(error, CARREL_ERROR, CARREL_ERROR_UNSUPPORTED));
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_background_start, setup, teardown),
        cmocka_unit_test_setup_teardown(test_read_and_errors, setup, teardown),
        cmocka_unit_test_setup_teardown(test_signal_and_input, setup, teardown),
        cmocka_unit_test_setup_teardown(test_stream, setup, teardown),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
