/*
 * conf-proc.c: what carrel-guest proc says is untrusted. Good replies parse; every lie (wrong
 * offsets, more bytes than the bound or the size, bad base64, a handle that could be a path,
 * states and codes out of range, lists that are too long) is HYPERVISOR. The process routes'
 * bodies are checked too.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <signal.h>
#include <string.h>

#include "conf/conf.h"

static JsonNode *
json_of(const char *text)
{
    JsonNode *node = carrel_conf_parse_json(text, strlen(text), NULL);

    assert_non_null(node);
    return node;
}

static const char good_read[] =
    "{\"handle\":\"p0a1b2c3d\",\"pid\":42,\"state\":\"running\",\"exit_code\":null,"
    "\"stdout\":{\"offset\":4,\"data\":\"aGk=\",\"size\":6},"
    "\"stderr\":{\"offset\":0,\"data\":\"\",\"size\":0}}";

static void
test_read_good(void **state)
{
    g_autoptr(JsonNode) node = json_of(good_read);
    g_autoptr(GError) error = NULL;
    g_autoptr(CarrelProcRead) read = carrel_proc_read_from_guest(node, 4, 0, &error);
    g_autoptr(JsonNode) out = NULL;
    JsonObject *o;

    assert_null(error);
    assert_string_equal(read->handle, "p0a1b2c3d");
    assert_int_equal(read->pid, 42);
    assert_false(read->exited);
    assert_int_equal(g_bytes_get_size(read->stdout_data), 2);
    assert_false(carrel_proc_read_is_last(read));
    out = carrel_proc_read_to_json(read);
    o = json_node_get_object(out);
    assert_string_equal(json_object_get_string_member(o, "stdout"), "hi");
    assert_int_equal(json_object_get_int_member(o, "stdout_next"), 6);
    assert_string_equal(json_object_get_string_member(o, "state"), "running");
    assert_true(json_object_get_null_member(o, "exit_code"));
}

static void
test_read_last(void **state)
{
    g_autoptr(JsonNode) node =
        json_of("{\"handle\":\"p1\",\"pid\":7,\"state\":\"exited\",\"exit_code\":3,"
                "\"stdout\":{\"offset\":2,\"data\":\"\",\"size\":2},"
                "\"stderr\":{\"offset\":0,\"data\":\"eA==\",\"size\":1}}");
    g_autoptr(CarrelProcRead) read = carrel_proc_read_from_guest(node, 2, 0, NULL);

    assert_non_null(read);
    assert_true(read->exited);
    assert_int_equal(read->exit_code, 3);
    assert_true(carrel_proc_read_is_last(read));
}

static void
assert_read_refused(const char *text, gint64 out, gint64 err)
{
    g_autoptr(JsonNode) node = carrel_conf_parse_json(text, strlen(text), NULL);
    g_autoptr(GError) error = NULL;
    g_autoptr(CarrelProcRead) read =
        node ? carrel_proc_read_from_guest(node, out, err, &error) : NULL;

    if (!node)
        fail_msg("not JSON: %s", text);
    if (read || !g_error_matches(error, CARREL_ERROR, CARREL_ERROR_HYPERVISOR))
        fail_msg("accepted or wrong error: %s", text);
}

static void
test_read_hostile(void **state)
{
    g_autofree char *huge = NULL;
    g_autoptr(GString) big = g_string_new(NULL);
    static const char *const lies[] = {
        "[]",
        "{}",
        "{\"error\":{\"code\":\"x\"}}",
        /* a handle that could be a path */
        "{\"handle\":\"../../etc\",\"pid\":1,\"state\":\"running\","
        "\"stdout\":{\"offset\":0,\"data\":\"\",\"size\":0},"
        "\"stderr\":{\"offset\":0,\"data\":\"\",\"size\":0}}",
        /* an unknown state, an exit code out of range, a pid as a string */
        "{\"handle\":\"p1\",\"pid\":1,\"state\":\"zombie\","
        "\"stdout\":{\"offset\":0,\"data\":\"\",\"size\":0},"
        "\"stderr\":{\"offset\":0,\"data\":\"\",\"size\":0}}",
        "{\"handle\":\"p1\",\"pid\":1,\"state\":\"exited\",\"exit_code\":9999,"
        "\"stdout\":{\"offset\":0,\"data\":\"\",\"size\":0},"
        "\"stderr\":{\"offset\":0,\"data\":\"\",\"size\":0}}",
        "{\"handle\":\"p1\",\"pid\":\"1\",\"state\":\"running\","
        "\"stdout\":{\"offset\":0,\"data\":\"\",\"size\":0},"
        "\"stderr\":{\"offset\":0,\"data\":\"\",\"size\":0}}",
        /* an offset other than the one asked */
        "{\"handle\":\"p1\",\"pid\":1,\"state\":\"running\","
        "\"stdout\":{\"offset\":5,\"data\":\"\",\"size\":9},"
        "\"stderr\":{\"offset\":0,\"data\":\"\",\"size\":0}}",
        /* more bytes than the size says */
        "{\"handle\":\"p1\",\"pid\":1,\"state\":\"running\","
        "\"stdout\":{\"offset\":0,\"data\":\"aGVsbG8=\",\"size\":2},"
        "\"stderr\":{\"offset\":0,\"data\":\"\",\"size\":0}}",
        /* not base64, a size past the guest's bound, a missing stream */
        "{\"handle\":\"p1\",\"pid\":1,\"state\":\"running\","
        "\"stdout\":{\"offset\":0,\"data\":\"!!!\",\"size\":3},"
        "\"stderr\":{\"offset\":0,\"data\":\"\",\"size\":0}}",
        "{\"handle\":\"p1\",\"pid\":1,\"state\":\"running\","
        "\"stdout\":{\"offset\":0,\"data\":\"\",\"size\":99999999999},"
        "\"stderr\":{\"offset\":0,\"data\":\"\",\"size\":0}}",
        /* stderr missing */
        ("{\"handle\":\"p1\",\"pid\":1,\"state\":\"running\","
         "\"stdout\":{\"offset\":0,\"data\":\"\",\"size\":0}}"),
    };

    for (guint i = 0; i < G_N_ELEMENTS(lies); i++)
        assert_read_refused(lies[i], 0, 0);
    /* A chunk over the bound, however large the size claims to be. */
    for (guint i = 0; i < (CARREL_PROC_CHUNK_MAX + 3) / 3 + 10; i++)
        g_string_append(big, "QUFB");
    huge = g_strdup_printf("{\"handle\":\"p1\",\"pid\":1,\"state\":\"running\","
                           "\"stdout\":{\"offset\":0,\"data\":\"%s\",\"size\":60000000},"
                           "\"stderr\":{\"offset\":0,\"data\":\"\",\"size\":0}}",
                           big->str);
    assert_read_refused(huge, 0, 0);
}

static void
test_list(void **state)
{
    g_autoptr(JsonNode) node =
        json_of("{\"processes\":[{\"handle\":\"pab\",\"argv\":[\"sleep\",\"600\"],\"started_at\":"
                "1700000000,"
                "\"pid\":9,\"state\":\"running\",\"exit_code\":null,\"stdout_bytes\":0,"
                "\"stderr_bytes\":0}]}");
    g_autoptr(GError) error = NULL;
    g_autoptr(GPtrArray) list = carrel_proc_list_from_guest(node, &error);
    g_autoptr(JsonNode) item = NULL;
    g_autoptr(GString) many = g_string_new("{\"processes\":[");
    g_autoptr(JsonNode) too_many = NULL;
    g_autoptr(JsonNode) bad_argv =
        json_of("{\"processes\":[{\"handle\":\"pab\",\"argv\":[1],\"started_at\":1,\"pid\":9,"
                "\"state\":\"running\",\"stdout_bytes\":0,\"stderr_bytes\":0}]}");

    assert_null(error);
    assert_int_equal(list->len, 1);
    item = carrel_proc_info_to_json(g_ptr_array_index(list, 0));
    assert_string_equal(json_object_get_string_member(json_node_get_object(item), "state"),
                        "running");
    for (guint i = 0; i <= CARREL_PROC_LIST_MAX; i++)
        g_string_append_printf(many, "%s{}", i ? "," : "");
    g_string_append(many, "]}");
    too_many = json_of(many->str);
    assert_null(carrel_proc_list_from_guest(too_many, NULL));
    assert_null(carrel_proc_list_from_guest(bad_argv, NULL));
}

static void
test_bodies(void **state)
{
    g_autoptr(JsonNode) input = json_of("{\"data\":\"hello\\n\",\"close\":true}");
    g_autoptr(JsonNode) both = json_of("{\"data\":\"a\",\"data_base64\":\"YQ==\"}");
    g_autoptr(JsonNode) empty = json_of("{}");
    g_autoptr(JsonNode) by_name = json_of("{\"signal\":\"SIGKILL\"}");
    g_autoptr(JsonNode) bad_sig = json_of("{\"signal\":\"BOOM\"}");
    g_autoptr(CarrelProcInput) in = carrel_proc_input_from_json(input, NULL);
    g_autoptr(CarrelProcSignal) sig = carrel_proc_signal_from_json(by_name, NULL);
    g_autoptr(CarrelProcSignal) def = carrel_proc_signal_from_json(NULL, NULL);
    g_autoptr(GError) error = NULL;

    assert_true(in->close);
    assert_int_equal(g_bytes_get_size(in->data), 6);
    assert_null(carrel_proc_input_from_json(both, NULL));
    assert_null(carrel_proc_input_from_json(empty, &error));
    assert_true(g_error_matches(error, CARREL_ERROR, CARREL_ERROR_INVALID_ARG));
    assert_int_equal(sig->signal, SIGKILL);
    assert_int_equal(def->signal, SIGTERM);
    assert_null(carrel_proc_signal_from_json(bad_sig, NULL));
    assert_int_equal(carrel_proc_signal_parse("9"), 9);
    assert_int_equal(carrel_proc_signal_parse("0"), -1);
    assert_int_equal(carrel_proc_signal_parse("65"), -1);
    assert_true(carrel_proc_handle_valid("p0123abcd"));
    assert_false(carrel_proc_handle_valid("p0123ABCD"));
    assert_false(carrel_proc_handle_valid("p/.."));
}

static void
test_exec_flags(void **state)
{
    g_autoptr(JsonNode) stream = json_of("{\"argv\":[\"ls\"],\"stream\":true}");
    g_autoptr(JsonNode) both = json_of("{\"argv\":[\"ls\"],\"stream\":true,\"background\":true}");
    g_autoptr(CarrelExecRequest) req = carrel_exec_request_from_json(stream, NULL);

    assert_true(req->stream);
    assert_false(req->background);
    assert_null(carrel_exec_request_from_json(both, NULL));
}

/* The shell websocket's control messages: resize and eof only, sizes in range, nothing else. */
static void
test_shell_control(void **state)
{
    static const char *const refused[] = {
        "[]",
        "{}",
        "{\"type\":\"resize\",\"rows\":0,\"cols\":80}",
        "{\"type\":\"resize\",\"rows\":24,\"cols\":1001}",
        "{\"type\":\"resize\",\"rows\":24}",
        "{\"type\":\"resize\",\"rows\":\"24\",\"cols\":80}",
        "{\"type\":\"eof\",\"rows\":24}",
        "{\"type\":\"kill\"}",
        "{\"type\":\"eof\",\"extra\":1}",
        "{\"type\":7}",
    };
    g_autoptr(JsonNode) resize =
        json_from_string("{\"type\":\"resize\",\"rows\":40,\"cols\":120}", NULL);
    g_autoptr(JsonNode) eof = json_from_string("{\"type\":\"eof\"}", NULL);
    g_autoptr(CarrelShellControl) r = carrel_shell_control_from_json(resize, NULL);
    g_autoptr(CarrelShellControl) e = carrel_shell_control_from_json(eof, NULL);

    assert_non_null(r);
    assert_false(r->eof);
    assert_int_equal(r->rows, 40);
    assert_int_equal(r->cols, 120);
    assert_non_null(e);
    assert_true(e->eof);
    for (guint i = 0; i < G_N_ELEMENTS(refused); i++) {
        g_autoptr(JsonNode) node = json_from_string(refused[i], NULL);
        g_autoptr(GError) error = NULL;
        g_autoptr(CarrelShellControl) c = carrel_shell_control_from_json(node, &error);

        if (c)
            fail_msg("accepted '%s'", refused[i]);
        assert_true(g_error_matches(error, CARREL_ERROR, CARREL_ERROR_INVALID_ARG));
    }
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_read_good),     cmocka_unit_test(test_read_last),
        cmocka_unit_test(test_read_hostile),  cmocka_unit_test(test_list),
        cmocka_unit_test(test_bodies),        cmocka_unit_test(test_exec_flags),
        cmocka_unit_test(test_shell_control),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
