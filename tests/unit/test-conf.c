#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <string.h>

#include "conf/conf.h"

static JsonNode *
parse(const char *text)
{
    g_autoptr(GError) error = NULL;
    JsonNode *node = carrel_conf_parse_json(text, strlen(text), &error);

    assert_non_null(node);
    return node;
}

static void
assert_request_refused(const char *text, const char *fragment)
{
    g_autoptr(JsonNode) node = parse(text);
    g_autoptr(GError) error = NULL;
    g_autoptr(CarrelSessionRequest) req = carrel_session_request_from_json(node, &error);

    assert_null(req);
    assert_true(g_error_matches(error, CARREL_ERROR, CARREL_ERROR_INVALID_ARG));
    if (!strstr(error->message, fragment))
        fail_msg("'%s': message '%s' lacks '%s'", text, error->message, fragment);
}

static void
test_session_request_valid(void **state)
{
    g_autoptr(JsonNode) node = parse("{\"template\":\"tiny@2\",\"name\":\"job-1\",\"vcpus\":2,"
                                     "\"memory_mib\":2048}");
    g_autoptr(GError) error = NULL;
    g_autoptr(CarrelSessionRequest) req = carrel_session_request_from_json(node, &error);

    assert_non_null(req);
    assert_string_equal(req->template_name, "tiny");
    assert_int_equal(req->template_version, 2);
    assert_string_equal(req->name, "job-1");
    assert_int_equal(req->vcpus, 2);
    assert_int_equal(req->memory_mib, 2048);
}

static void
test_session_request_defaults(void **state)
{
    g_autoptr(JsonNode) node = parse("{\"template\":\"tiny\"}");
    g_autoptr(CarrelSessionRequest) req = carrel_session_request_from_json(node, NULL);

    assert_non_null(req);
    assert_int_equal(req->template_version, 0);
    assert_null(req->name);
    assert_int_equal(req->vcpus, 0);
}

static void
test_session_request_refusals(void **state)
{
    assert_request_refused("{}", "'template' is required");
    assert_request_refused("[]", "expected a JSON object");
    assert_request_refused("{\"template\":3}", "must be a string");
    assert_request_refused("{\"template\":\"tiny\",\"vcpu\":1}", "unknown member 'vcpu'");
    assert_request_refused("{\"template\":\"tiny\",\"vcpus\":0}", "between 1 and");
    assert_request_refused("{\"template\":\"tiny\",\"vcpus\":\"2\"}", "must be an integer");
    assert_request_refused("{\"template\":\"tiny\",\"vcpus\":1.5}", "must be an integer");
    assert_request_refused("{\"template\":\"tiny\",\"memory_mib\":99999999}", "between");
    assert_request_refused("{\"template\":\"tiny@0\"}", "positive number");
    assert_request_refused("{\"template\":\"tiny@x\"}", "positive number");
    assert_request_refused("{\"template\":\"tiny@1x\"}", "positive number");
    assert_request_refused("{\"template\":\"../etc\"}", "invalid template name");
    assert_request_refused("{\"template\":\"tiny\",\"name\":\"a b\"}", "invalid session name");
    assert_request_refused("{\"template\":\"tiny\",\"name\":\"s-123\"}", "invalid session name");
    assert_request_refused("{\"template\":\"tiny\",\"name\":\"x\\ny\"}", "invalid session name");
}

static void
test_malformed_json(void **state)
{
    g_autoptr(GError) error = NULL;

    assert_null(carrel_conf_parse_json("{\"template\":", 12, &error));
    assert_true(g_error_matches(error, CARREL_ERROR, CARREL_ERROR_INVALID_ARG));
    assert_non_null(strstr(error->message, "malformed JSON"));
    g_clear_error(&error);
    assert_null(carrel_conf_parse_json("", 0, &error));
    assert_non_null(error);
    g_clear_error(&error);
    /* A megabyte of '[' would overflow json-glib's recursion: refused before parsing. */
    {
        g_autofree char *deep = g_strnfill(1024 * 1024, '[');
        assert_null(carrel_conf_parse_json(deep, strlen(deep), &error));
        assert_non_null(strstr(error->message, "nested deeper"));
        g_clear_error(&error);
    }
    /* A second document after the first (json-glib 1.6 would leak it): refused before parsing. */
    assert_null(carrel_conf_parse_json("{\"template\":\"tiny\"} {}", 22, &error));
    assert_non_null(strstr(error->message, "not one well-formed JSON value"));
    g_clear_error(&error);
    /* json-glib would cut "tiny\u0000x" to "tiny": refused. */
    assert_null(carrel_conf_parse_json("{\"template\":\"tiny\\u0000x\"}", 24, &error));
    assert_non_null(error);
}

static void
assert_import_refused(const char *text, const char *fragment)
{
    g_autoptr(JsonNode) node = parse(text);
    g_autoptr(GError) error = NULL;
    g_autoptr(CarrelTemplateImport) req = carrel_template_import_from_json(node, &error);

    assert_null(req);
    if (!strstr(error->message, fragment))
        fail_msg("'%s': message '%s' lacks '%s'", text, error->message, fragment);
}

static void
test_template_import(void **state)
{
    g_autoptr(JsonNode) node = parse("{\"name\":\"tiny\",\"disk\":\"/x/disk.qcow2\","
                                     "\"format\":\"qcow2\",\"kernel\":\"/x/vmlinuz\","
                                     "\"initrd\":\"/x/initrd\",\"cmdline\":\"root=/dev/vda\"}");
    g_autoptr(JsonNode) bios = parse("{\"name\":\"win\",\"disk\":\"/x/w.qcow2\","
                                     "\"format\":\"qcow2\",\"firmware\":\"uefi\"}");
    g_autoptr(CarrelTemplateImport) req = carrel_template_import_from_json(node, NULL);
    g_autoptr(CarrelTemplateImport) req2 = carrel_template_import_from_json(bios, NULL);

    assert_non_null(req);
    assert_int_equal(req->boot, CARREL_BOOT_DIRECT);
    assert_string_equal(req->cmdline, "root=/dev/vda");
    assert_non_null(req2);
    assert_int_equal(req2->boot, CARREL_BOOT_UEFI);

    assert_import_refused("{\"name\":\"t\",\"disk\":\"/d\"}", "'format' must be declared");
    assert_import_refused("{\"name\":\"t\",\"disk\":\"/d\",\"format\":\"vmdk\"}",
                          "'format' must be declared");
    assert_import_refused("{\"name\":\"t\",\"disk\":\"d.qcow2\",\"format\":\"qcow2\"}",
                          "absolute path");
    assert_import_refused("{\"name\":\"t\",\"disk\":\"/d\\n\",\"format\":\"qcow2\"}",
                          "absolute path");
    assert_import_refused("{\"name\":\"T!\",\"disk\":\"/d\",\"format\":\"qcow2\"}",
                          "invalid template name");
    assert_import_refused("{\"name\":\"t\",\"disk\":\"/d\",\"format\":\"raw\",\"boot\":\"direct\"}",
                          "kernel is required");
    assert_import_refused("{\"name\":\"t\",\"disk\":\"/d\",\"format\":\"raw\",\"initrd\":\"/i\"}",
                          "need a kernel");
    assert_import_refused("{\"name\":\"t\",\"disk\":\"/d\",\"format\":\"raw\",\"boot\":\"pxe\"}",
                          "unknown boot method");
    assert_import_refused("{\"name\":\"t\",\"disk\":\"/d\",\"format\":\"raw\",\"extra\":1}",
                          "unknown member");
}

static void
test_state_machine(void **state)
{
    CarrelSessionState next;
    g_autoptr(GError) error = NULL;

    assert_true(
        carrel_session_transition(CARREL_SESSION_RUNNING, CARREL_SESSION_OP_STOP, &next, NULL));
    assert_int_equal(next, CARREL_SESSION_STOPPED);
    assert_true(
        carrel_session_transition(CARREL_SESSION_STOPPED, CARREL_SESSION_OP_START, &next, NULL));
    assert_int_equal(next, CARREL_SESSION_RUNNING);
    assert_true(
        carrel_session_transition(CARREL_SESSION_CRASHED, CARREL_SESSION_OP_DESTROY, &next, NULL));
    assert_int_equal(next, CARREL_SESSION_DESTROYED);
    assert_false(
        carrel_session_transition(CARREL_SESSION_STOPPED, CARREL_SESSION_OP_STOP, &next, &error));
    assert_true(g_error_matches(error, CARREL_ERROR, CARREL_ERROR_WRONG_STATE));
    assert_string_equal(error->message, "cannot stop a session that is stopped");
    g_clear_error(&error);
    assert_false(
        carrel_session_transition(CARREL_SESSION_RUNNING, CARREL_SESSION_OP_START, &next, &error));
    g_clear_error(&error);
    assert_false(carrel_session_transition(CARREL_SESSION_DESTROYED, CARREL_SESSION_OP_DESTROY,
                                           &next, &error));
    /* Every state has a name that parses back. */
    for (int s = 0; s < CARREL_SESSION_LAST; s++)
        assert_int_equal(carrel_session_state_from_string(carrel_session_state_to_string(s)), s);
    for (int b = 0; b < CARREL_BOOT_LAST; b++)
        assert_int_equal(carrel_boot_from_string(carrel_boot_to_string(b)), b);
    assert_int_equal(carrel_session_state_from_string("bogus"), CARREL_SESSION_LAST);
}

static void
test_session_json(void **state)
{
    g_autoptr(CarrelSession) s = carrel_session_new();
    g_autoptr(JsonNode) node = NULL;
    JsonObject *obj;

    s->id = g_strdup("s-0123456789ab");
    s->name = g_strdup("quote\"name");
    s->template_name = g_strdup("tiny");
    s->template_version = 3;
    s->state = CARREL_SESSION_RUNNING;
    s->vcpus = 1;
    s->memory_mib = 1024;
    node = carrel_session_to_json(s);
    obj = json_node_get_object(node);
    assert_string_equal(json_object_get_string_member(obj, "state"), "running");
    assert_string_equal(json_object_get_string_member(obj, "domain"), "carrel-s-0123456789ab");
    assert_string_equal(json_object_get_string_member(obj, "name"), "quote\"name");
    assert_int_equal(json_object_get_int_member(obj, "template_version"), 3);
    assert_true(json_object_get_null_member(obj, "state_reason"));
}

static gboolean
shot_parse(const char *const *kv, CarrelScreenshotRequest *req, GError **error)
{
    g_autoptr(GHashTable) query = g_hash_table_new(g_str_hash, g_str_equal);

    for (guint i = 0; kv[i]; i += 2)
        g_hash_table_insert(query, (gpointer)kv[i], (gpointer)kv[i + 1]);
    return carrel_screenshot_request_parse(query, req, error);
}

static void
test_screenshot_request(void **state)
{
    const char *jpeg[] = {"format", "jpeg", "quality", "55", "region", "1,2,30,40", NULL};
    const char *edge[] = {"max_edge", "1024", NULL};
    const char *bad[][5] = {
        {"format", "gif", NULL},
        {"quality", "0", NULL},
        {"quality", "101", NULL},
        {"scale", "0", NULL},
        {"scale", "5", NULL},
        {"scale", "nan", NULL},
        {"scale", "0.5x", NULL},
        {"region", "1,2,3", NULL},
        {"region", "0,0,0,10", NULL},
        {"region", "-1,0,10,10", NULL},
        {"max_edge", "8", NULL},
        {"scale", "0.5", "max_edge", "100", NULL},
        {"colour", "red", NULL},
        {"thumbnail", "yes", NULL},
        {"thumbnail", "1", "scale", "0.5", NULL},
        {"thumbnail", "1", "region", "0,0,10,10", NULL},
    };
    const char *thumb[] = {"thumbnail", "1", "format", "jpeg", NULL};
    const char *big_thumb[] = {"thumbnail", "true", "max_edge", "4000", NULL};
    const char *small_thumb[] = {"thumbnail", "1", "max_edge", "100", NULL};
    const char *no_thumb[] = {"thumbnail", "0", NULL};
    CarrelScreenshotRequest req;
    g_autoptr(GError) error = NULL;

    assert_true(carrel_screenshot_request_parse(NULL, &req, NULL));
    assert_false(req.jpeg);
    assert_false(req.has_region);
    assert_true(req.scale == 1.0);
    assert_true(shot_parse(jpeg, &req, NULL));
    assert_true(req.jpeg);
    assert_int_equal(req.quality, 55);
    assert_true(req.has_region);
    assert_int_equal(req.region[3], 40);
    assert_true(shot_parse(edge, &req, NULL));
    assert_int_equal(req.max_edge, 1024);
    assert_false(req.thumbnail);
    /* A thumbnail is small: max_edge defaults to, and is capped at, the thumbnail's edge. */
    assert_true(shot_parse(thumb, &req, NULL));
    assert_true(req.thumbnail && req.jpeg);
    assert_int_equal(req.max_edge, CARREL_THUMBNAIL_EDGE);
    assert_true(shot_parse(big_thumb, &req, NULL));
    assert_int_equal(req.max_edge, CARREL_THUMBNAIL_EDGE);
    assert_true(shot_parse(small_thumb, &req, NULL));
    assert_int_equal(req.max_edge, 100);
    assert_true(shot_parse(no_thumb, &req, NULL));
    assert_false(req.thumbnail);
    assert_int_equal(req.max_edge, 0);
    for (guint i = 0; i < G_N_ELEMENTS(bad); i++) {
        if (shot_parse(bad[i], &req, &error))
            fail_msg("accepted case %u", i);
        assert_true(g_error_matches(error, CARREL_ERROR, CARREL_ERROR_INVALID_ARG));
        g_clear_error(&error);
    }
}

static CarrelExecRequest *
exec_parse(const char *json, GError **error)
{
    g_autoptr(JsonNode) node = json_from_string(json, NULL);

    assert_non_null(node);
    return carrel_exec_request_from_json(node, error);
}

static void
test_exec_request(void **state)
{
    g_autoptr(CarrelExecRequest) ok = NULL;
    g_autoptr(GError) error = NULL;
    const char *bad[] = {
        "{\"argv\":[\"cat\"],\"stdin_base64\":\"AAE\"}",  /* not padded */
        "{\"argv\":[\"cat\"],\"stdin_base64\":\"AA*=\"}", /* not the alphabet */
        "{\"argv\":[\"cat\"],\"stdin\":\"x\",\"stdin_base64\":\"AA==\"}",
        "{\"argv\":[\"cat\"],\"stdin_base64\":7}",
        "{\"argv\":[\"cat\"],\"timeout_s\":0}",
        "{\"argv\":[]}",
        "{\"argv\":[\"cat\"],\"cwd\":\"relative\"}",
        "{\"argv\":[\"cat\"],\"shell\":true}",
    };

    ok = exec_parse("{\"argv\":[\"cat\"],\"stdin_base64\":\"AP8KAA==\"}", NULL);
    assert_non_null(ok);
    assert_int_equal(g_bytes_get_size(ok->stdin_bytes), 4);
    assert_memory_equal(g_bytes_get_data(ok->stdin_bytes, NULL), "\x00\xff\n\x00", 4);
    for (guint i = 0; i < G_N_ELEMENTS(bad); i++) {
        g_autoptr(CarrelExecRequest) req = exec_parse(bad[i], &error);
        if (req)
            fail_msg("accepted %s", bad[i]);
        assert_true(g_error_matches(error, CARREL_ERROR, CARREL_ERROR_INVALID_ARG));
        g_clear_error(&error);
    }
}

static void
test_session_request_inputs(void **state)
{
    g_autoptr(JsonNode) node =
        parse("{\"template\":\"tiny\",\"artifacts\":[\"/home/agent/out\"],\"inputs\":["
              "{\"path\":\"/home/agent/a.txt\",\"content_base64\":\"aGk=\",\"mode\":\"0600\"},"
              "{\"path\":\"/home/agent/task\",\"upload\":\"u-0123456789ab\"},"
              "{\"path\":\"/srv/data\",\"host_path\":\"/var/lib/data\"}]}");
    g_autoptr(GError) error = NULL;
    g_autoptr(CarrelSessionRequest) req = carrel_session_request_from_json(node, &error);
    CarrelInput *first;

    assert_non_null(req);
    assert_string_equal(req->exit_paths[0], "/home/agent/out");
    assert_int_equal(req->inputs->len, 3);
    first = g_ptr_array_index(req->inputs, 0);
    assert_int_equal(first->mode, 0600);
    assert_int_equal(g_bytes_get_size(first->content), 2);
    assert_string_equal(((CarrelInput *)g_ptr_array_index(req->inputs, 1))->upload,
                        "u-0123456789ab");
    assert_string_equal(((CarrelInput *)g_ptr_array_index(req->inputs, 2))->host_path,
                        "/var/lib/data");
}

static void
test_session_request_input_refusals(void **state)
{
    assert_request_refused("{\"template\":\"t\",\"inputs\":[{\"path\":\"/a\"}]}", "exactly one of");
    assert_request_refused("{\"template\":\"t\",\"inputs\":[{\"path\":\"/a\","
                           "\"content_base64\":\"aGk=\",\"upload\":\"u-1\"}]}",
                           "exactly one of");
    assert_request_refused("{\"template\":\"t\",\"inputs\":[{\"path\":\"a\","
                           "\"content_base64\":\"aGk=\"}]}",
                           "absolute");
    assert_request_refused("{\"template\":\"t\",\"inputs\":[{\"path\":\"/a/../b\","
                           "\"content_base64\":\"aGk=\"}]}",
                           "..");
    assert_request_refused("{\"template\":\"t\",\"inputs\":[{\"path\":\"/a\","
                           "\"content_base64\":\"a!k=\"}]}",
                           "base64");
    assert_request_refused("{\"template\":\"t\",\"inputs\":[{\"path\":\"/a\","
                           "\"content_base64\":\"aGk=\",\"mode\":\"4755\"}]}",
                           "mode");
    assert_request_refused("{\"template\":\"t\",\"inputs\":[{\"path\":\"/a\","
                           "\"host_path\":\"rel\"}]}",
                           "host_path");
    assert_request_refused("{\"template\":\"t\",\"inputs\":[{\"path\":\"/a\","
                           "\"upload\":\"../../etc\"}]}",
                           "upload");
    assert_request_refused("{\"template\":\"t\",\"inputs\":{}}", "inputs");
    assert_request_refused("{\"template\":\"t\",\"artifacts\":[\"/\"]}", "whole disk");
    assert_request_refused("{\"template\":\"t\",\"artifacts\":[\"rel/x\"]}", "absolute");
}

static CarrelExtractRequest *
extract_parse(const char *text, GError **error)
{
    g_autoptr(JsonNode) node = parse(text);

    return carrel_extract_request_from_json(node, error);
}

static void
test_extract_request(void **state)
{
    static const char *const bad[] = {
        "{}",
        "{\"paths\":[]}",
        "{\"paths\":\"/a\"}",
        "{\"paths\":[1]}",
        "{\"paths\":[\"/\"]}",
        "{\"paths\":[\"/a/./b\"]}",
        "{\"paths\":[\"/a\"],\"max_files\":0}",
        "{\"paths\":[\"/a\"],\"max_bytes_mib\":99999999}",
        "{\"paths\":[\"/a\"],\"extra\":1}",
    };
    g_autoptr(GError) error = NULL;
    g_autoptr(CarrelExtractRequest) ok =
        extract_parse("{\"paths\":[\"/home/agent/out\",\"/tmp/r.json\"],\"max_files\":5}", &error);

    assert_non_null(ok);
    assert_int_equal(g_strv_length(ok->paths), 2);
    assert_int_equal(ok->max_files, 5);
    assert_true(ok->max_bytes == CARREL_LIMIT_EXTRACT_BYTES);
    for (guint i = 0; i < G_N_ELEMENTS(bad); i++) {
        g_autoptr(CarrelExtractRequest) req = extract_parse(bad[i], &error);
        if (req)
            fail_msg("accepted %s", bad[i]);
        assert_true(error->domain == CARREL_ERROR);
        g_clear_error(&error);
    }
}

static void
test_extraction_json(void **state)
{
    g_autoptr(CarrelExtraction) x = carrel_extraction_new();
    g_autoptr(CarrelExtraction) back = carrel_extraction_new();
    CarrelArtifact *a = carrel_artifact_new();
    g_autoptr(JsonNode) node = NULL;
    g_autofree char *text = NULL;
    g_autofree char *detail = NULL;

    x->id = g_strdup("x-1");
    x->paths = g_strsplit("/a,/b", ",", -1);
    x->bytes = 12;
    x->count = 1;
    x->error = g_strdup("archive exceeds the limit");
    a->id = g_strdup("a-1");
    a->guest_path = g_strdup("/a/link");
    a->type = CARREL_FILE_SYMLINK;
    a->mode = 0777;
    a->link_target = g_strdup("/etc/shadow");
    g_ptr_array_add(x->artifacts, a);
    node = carrel_extraction_to_json(x);
    text = json_to_string(node, FALSE);
    assert_non_null(strstr(text, "\"type\":\"symlink\""));
    assert_non_null(strstr(text, "\"mode\":\"0777\""));
    assert_non_null(strstr(text, "\"link_target\":\"/etc/shadow\""));
    assert_non_null(strstr(text, "\"path\":null"));
    detail = carrel_extraction_detail_to_text(x);
    assert_true(carrel_extraction_detail_from_text(back, detail, NULL));
    assert_int_equal(back->bytes, 12);
    assert_string_equal(back->paths[1], "/b");
    assert_string_equal(back->error, "archive exceeds the limit");
    assert_false(carrel_extraction_detail_from_text(back, "[1]", NULL));
    assert_int_equal(carrel_file_type_from_string("hardlink"), CARREL_FILE_HARDLINK);
    assert_int_equal(carrel_file_type_from_string("nope"), CARREL_FILE_LAST);
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_session_request_valid),
        cmocka_unit_test(test_session_request_defaults),
        cmocka_unit_test(test_session_request_refusals),
        cmocka_unit_test(test_malformed_json),
        cmocka_unit_test(test_template_import),
        cmocka_unit_test(test_state_machine),
        cmocka_unit_test(test_session_json),
        cmocka_unit_test(test_screenshot_request),
        cmocka_unit_test(test_exec_request),
        cmocka_unit_test(test_session_request_inputs),
        cmocka_unit_test(test_session_request_input_refusals),
        cmocka_unit_test(test_extract_request),
        cmocka_unit_test(test_extraction_json),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
