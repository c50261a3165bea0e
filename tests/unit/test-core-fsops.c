/* Unit: core's file operations (carrel-guest fs through the fake's agent_exec) and streamed
 * transfers (through the fake's chunked file calls). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <glib/gstdio.h>
#include <string.h>
#include <unistd.h>

#include "core/core.h"
#include "tests/fake/hypervisor-fake.h"
#include "tests/unit/core-fixture.h"

static void
test_fs_list(void **state)
{
    Fixture *fx = *state;
    g_autoptr(CarrelTemplate) tmpl G_GNUC_UNUSED = import(fx, "tiny");
    g_autoptr(GError) error = NULL;
    g_autoptr(CarrelSession) s = create(fx, "fs", &error);
    g_autoptr(JsonNode) out = NULL;
    g_auto(GStrv) argv = NULL;
    g_autoptr(GPtrArray) events = NULL;
    g_autofree char *huge = NULL;
    CarrelEvent *ev;

    assert_non_null(s);
    carrel_hypervisor_fake_set_exec_result(
        fx->hv, 0,
        "{\"path\":\"/tmp\",\"entries\":[{\"name\":\"a\\tb\",\"type\":\"dir\",\"size\":4096,"
        "\"mode\":493,\"mtime\":7}],\"truncated\":false}",
        NULL);
    out = carrel_manager_session_fs_list(fx->mgr, ADMIN, s->id, "/tmp", &error);
    assert_non_null(out);
    {
        g_autofree char *text = json_to_string(out, FALSE);
        assert_string_equal(text, "{\"path\":\"/tmp\",\"entries\":[{\"name\":null,\"name_escaped\":"
                                  "\"a\\\\x09b\",\"name_error\":\"name contains control "
                                  "characters; shown escaped\",\"type\":\"dir\",\"size\":4096,"
                                  "\"mode\":\"0755\",\"mtime\":7}],\"truncated\":false}");
    }
    argv = carrel_hypervisor_fake_get_exec_argv(fx->hv);
    assert_string_equal(argv[1], "fs");
    assert_string_equal(argv[2], "list");
    assert_string_equal(argv[3], "--");
    assert_string_equal(argv[4], "/tmp");
    g_clear_pointer(&out, json_node_unref);

    /* A hostile listing is refused whole. */
    carrel_hypervisor_fake_set_exec_result(
        fx->hv, 0,
        "{\"entries\":[{\"name\":\"../../etc\",\"type\":\"dir\",\"size\":1,\"mode\":1,"
        "\"mtime\":1}],\"truncated\":false}",
        NULL);
    assert_null(carrel_manager_session_fs_list(fx->mgr, ADMIN, s->id, "/tmp", &error));
    assert_true(g_error_matches(error, CARREL_ERROR, CARREL_ERROR_HYPERVISOR));
    assert_non_null(strstr(error->message, "'/'"));
    g_clear_error(&error);
    /* Output past the cap, and no JSON at all. */
    huge = g_strnfill(CARREL_FS_MAX_OUTPUT_BYTES + 1, ' ');
    carrel_hypervisor_fake_set_exec_result(fx->hv, 0, huge, NULL);
    assert_null(carrel_manager_session_fs_list(fx->mgr, ADMIN, s->id, "/tmp", &error));
    assert_non_null(strstr(error->message, "printed more than"));
    g_clear_error(&error);
    carrel_hypervisor_fake_set_exec_result(fx->hv, 0, "not json", NULL);
    assert_null(carrel_manager_session_fs_stat(fx->mgr, ADMIN, s->id, "/tmp", &error));
    assert_non_null(strstr(error->message, "no JSON object"));
    g_clear_error(&error);
    /* Relative paths never reach the guest. */
    assert_null(carrel_manager_session_fs_list(fx->mgr, ADMIN, s->id, "tmp", &error));
    assert_true(g_error_matches(error, CARREL_ERROR, CARREL_ERROR_INVALID_ARG));
    g_clear_error(&error);

    events =
        carrel_manager_session_events(fx->mgr, ADMIN, s->id, after_create(fx, s->id), 100, &error);
    assert_non_null(events);
    assert_int_equal(events->len, 4); /* the refusal of a relative path is no guest event */
    ev = g_ptr_array_index(events, 0);
    assert_string_equal(ev->kind, "file");
    assert_string_equal(ev->action, "fs_list");
    assert_null(ev->error);
    assert_non_null(((CarrelEvent *)g_ptr_array_index(events, 1))->error);
}

static void
test_fs_guest_errors(void **state)
{
    Fixture *fx = *state;
    g_autoptr(CarrelTemplate) tmpl G_GNUC_UNUSED = import(fx, "tiny");
    g_autoptr(GError) error = NULL;
    g_autoptr(CarrelSession) s = create(fx, "fserr", &error);
    g_autoptr(JsonNode) out = NULL;
    g_auto(GStrv) argv = NULL;

    assert_non_null(s);
    carrel_hypervisor_fake_set_exec_result(
        fx->hv, 1,
        "{\"error\":{\"code\":\"not_empty\",\"message\":\"directory '/d' is not empty\"}}", NULL);
    assert_null(carrel_manager_session_fs_remove(fx->mgr, ADMIN, s->id, "/d", FALSE, &error));
    assert_true(g_error_matches(error, CARREL_ERROR, CARREL_ERROR_WRONG_STATE));
    assert_non_null(strstr(error->message, "not empty"));
    g_clear_error(&error);
    carrel_hypervisor_fake_set_exec_result(
        fx->hv, 1, "{\"error\":{\"code\":\"exists\",\"message\":\"there\\u001b[2J\"}}", NULL);
    assert_null(carrel_manager_session_fs_move(fx->mgr, ADMIN, s->id, "/a", "/b", &error));
    assert_true(g_error_matches(error, CARREL_ERROR, CARREL_ERROR_EXISTS));
    assert_null(strchr(error->message, '\x1b')); /* the guest's text is cleaned */
    g_clear_error(&error);
    /* A code and message of the wrong types are no code and no message, not a crash. */
    carrel_hypervisor_fake_set_exec_result(fx->hv, 1, "{\"error\":{\"code\":5,\"message\":[1]}}",
                                           NULL);
    assert_null(carrel_manager_session_fs_move(fx->mgr, ADMIN, s->id, "/a", "/b", &error));
    assert_true(g_error_matches(error, CARREL_ERROR, CARREL_ERROR_FAILED));
    assert_non_null(strstr(error->message, "fs move: failed in the guest"));
    g_clear_error(&error);
    carrel_hypervisor_fake_set_exec_result(fx->hv, 127, NULL, NULL);
    assert_null(carrel_manager_session_fs_mkdir(fx->mgr, ADMIN, s->id, "/a", TRUE, &error));
    assert_true(g_error_matches(error, CARREL_ERROR, CARREL_ERROR_UNSUPPORTED));
    g_clear_error(&error);
    carrel_hypervisor_fake_set_exec_result(fx->hv, 0, "{\"path\":\"/a/b\",\"created\":true}", NULL);
    out = carrel_manager_session_fs_mkdir(fx->mgr, ADMIN, s->id, "/a/b", TRUE, &error);
    assert_non_null(out);
    assert_true(json_object_get_boolean_member(json_node_get_object(out), "created"));
    argv = carrel_hypervisor_fake_get_exec_argv(fx->hv);
    assert_string_equal(argv[3], "--parents");
    g_clear_pointer(&out, json_node_unref);
    assert_null(carrel_manager_session_fs_remove(fx->mgr, ADMIN, s->id, "/", TRUE, &error));
    assert_true(g_error_matches(error, CARREL_ERROR, CARREL_ERROR_INVALID_ARG));
}

/* A transfer larger than a chunk goes through a spool file both ways with matching sha256. */
static void
test_transfer(void **state)
{
    Fixture *fx = *state;
    g_autoptr(CarrelTemplate) tmpl G_GNUC_UNUSED = import(fx, "tiny");
    g_autoptr(GError) error = NULL;
    g_autoptr(CarrelSession) s = create(fx, "xfer", &error);
    g_auto(CarrelTransfer) up = {0};
    g_auto(CarrelTransfer) down = {0};
    g_autofree char *spool = NULL;
    g_autofree char *back = NULL;
    g_autofree char *expected = NULL;
    gsize len = 3 * 64 * 1024 + 17;
    g_autofree guint8 *data = g_malloc(len);
    gsize back_len = 0;
    int fd;

    assert_non_null(s);
    for (gsize i = 0; i < len; i++)
        data[i] = (guint8)(i * 7);
    expected = g_compute_checksum_for_data(G_CHECKSUM_SHA256, data, len);
    fd = carrel_manager_upload_spool(fx->mgr, &spool, &error);
    assert_true(fd >= 0);
    assert_int_equal(write(fd, data, len), (gssize)len);
    close(fd);
    assert_true(carrel_manager_session_file_upload(fx->mgr, ADMIN, s->id, "/tmp/big", spool, len,
                                                   &up, &error));
    assert_string_equal(up.sha256, expected);
    assert_int_equal(up.bytes, len);
    /* A size the spool does not have is refused, not padded. */
    assert_false(carrel_manager_session_file_upload(fx->mgr, ADMIN, s->id, "/tmp/c", spool, len + 1,
                                                    &up, &error));
    assert_non_null(strstr(error->message, "early"));
    g_clear_error(&error);
    /* Only our spool files are read. */
    assert_false(carrel_manager_session_file_upload(fx->mgr, ADMIN, s->id, "/tmp/c", "/etc/passwd",
                                                    4, &up, &error));
    assert_true(g_error_matches(error, CARREL_ERROR, CARREL_ERROR_NOT_FOUND));
    g_clear_error(&error);
    (void)g_unlink(spool);

    assert_true(
        carrel_manager_session_file_download(fx->mgr, ADMIN, s->id, "/tmp/big", &down, &error));
    assert_string_equal(down.sha256, expected);
    assert_int_equal(down.bytes, len);
    assert_true(g_file_get_contents(down.host_path, &back, &back_len, NULL));
    assert_int_equal(back_len, len);
    assert_memory_equal(back, data, len);
    (void)g_unlink(down.host_path);
    assert_false(
        carrel_manager_session_file_download(fx->mgr, ADMIN, s->id, "/nope", &down, &error));
    assert_true(g_error_matches(error, CARREL_ERROR, CARREL_ERROR_NOT_FOUND));
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_fs_list, setup, teardown),
        cmocka_unit_test_setup_teardown(test_fs_guest_errors, setup, teardown),
        cmocka_unit_test_setup_teardown(test_transfer, setup, teardown),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
