/*
 * Unit tests of core's type action on the fake hypervisor: text the US keymap can type goes as
 * HID key presses and nothing runs in the guest; other text goes to carrel-guest's type on its
 * standard input; clipboard sets the selections there and presses the paste keys; the reply and
 * the timeline say which method was used. The fixture is core-fixture.c.
 */
#include "core-fixture.h"

static JsonNode *
computer(Fixture *fx, const char *id, const char *json, GError **error)
{
    g_autoptr(JsonNode) body = json_from_string(json, NULL);

    assert_non_null(body);
    return carrel_manager_session_computer(fx->mgr, ADMIN, id, body, error);
}

/* The output's method of the reply's first result. */
static const char *
reply_method(JsonNode *reply)
{
    JsonObject *result = json_array_get_object_element(
        json_object_get_array_member(json_node_get_object(reply), "results"), 0);

    return json_object_get_string_member(json_object_get_object_member(result, "output"), "method");
}

static guint
hid_count(Fixture *fx)
{
    g_autoptr(GPtrArray) sent = carrel_hypervisor_fake_get_hid(fx->hv);

    return sent->len;
}

static gboolean
hid_mentions(Fixture *fx, const char *fragment)
{
    g_autoptr(GPtrArray) sent = carrel_hypervisor_fake_get_hid(fx->hv);

    for (guint i = 0; i < sent->len; i++) {
        if (strstr(g_ptr_array_index(sent, i), fragment))
            return TRUE;
    }
    return FALSE;
}

static void
assert_exec(Fixture *fx, const char *const *expected_argv, const char *expected_stdin)
{
    g_auto(GStrv) argv = carrel_hypervisor_fake_get_exec_argv(fx->hv);
    g_autoptr(GBytes) in = carrel_hypervisor_fake_get_exec_stdin(fx->hv);
    gsize len = 0;
    const char *data;

    assert_non_null(argv);
    assert_int_equal(g_strv_length(argv), g_strv_length((GStrv)expected_argv));
    for (guint i = 0; expected_argv[i]; i++)
        assert_string_equal(argv[i], expected_argv[i]);
    assert_non_null(in);
    data = g_bytes_get_data(in, &len);
    assert_int_equal(len, strlen(expected_stdin));
    assert_memory_equal(data, expected_stdin, len);
}

static void
test_keys_need_no_guest(void **state)
{
    Fixture *fx = *state;
    g_autoptr(CarrelTemplate) tmpl G_GNUC_UNUSED = import(fx, "tiny");
    g_autoptr(GError) error = NULL;
    g_autoptr(CarrelSession) s = create(fx, "ascii", &error);
    g_autoptr(JsonNode) reply = NULL;
    g_autoptr(GPtrArray) events = NULL;
    g_auto(GStrv) argv = NULL;
    JsonObject *output;

    assert_non_null(s);
    reply = computer(fx, s->id, "{\"action\":\"type\",\"text\":\"ok\"}", &error);
    if (!reply)
        fail_msg("%s", error->message);
    assert_string_equal(reply_method(reply), "keys");
    assert_true(hid_count(fx) >= 4);
    /* Nothing ran in the guest for it (create's readiness check aside, which is not a type). */
    argv = carrel_hypervisor_fake_get_exec_argv(fx->hv);
    assert_true(!argv || !g_strv_contains((const char *const *)argv, "type"));
    /* The timeline keeps the method too. */
    events =
        carrel_manager_session_events(fx->mgr, ADMIN, s->id, after_create(fx, s->id), 10, &error);
    assert_int_equal(events->len, 1);
    output = json_object_get_object_member(
        json_node_get_object(((CarrelEvent *)g_ptr_array_index(events, 0))->result), "output");
    assert_string_equal(json_object_get_string_member(output, "method"), "keys");
}

static void
test_unicode_through_guest(void **state)
{
    Fixture *fx = *state;
    g_autoptr(CarrelTemplate) tmpl G_GNUC_UNUSED = import(fx, "tiny");
    g_autoptr(GError) error = NULL;
    g_autoptr(CarrelSession) s = create(fx, "unicode", &error);
    g_autoptr(JsonNode) reply = NULL;
    const char *typed = "na\xc3\xafve \xe4\xb8\xad\xe6\x96\x87 \xf0\x9f\x98\x80\n";
    const char *const argv[] = {CARREL_GUEST_TOOL_PATH, "type", "--stdin", NULL};
    guint before;

    assert_non_null(s);
    before = hid_count(fx);
    carrel_hypervisor_fake_set_exec_result(fx->hv, 0, "{\"typed\":12}", "");
    reply = computer(
        fx, s->id,
        "{\"action\":\"type\",\"text\":\"na\\u00efve \\u4e2d\\u6587 \\ud83d\\ude00\\n\"}", &error);
    if (!reply)
        fail_msg("%s", error->message);
    assert_string_equal(reply_method(reply), "guest_keysyms");
    assert_exec(fx, argv, typed);
    /* No key press went through the hypervisor for it. */
    assert_int_equal(hid_count(fx), before);
    g_clear_pointer(&reply, json_node_unref);

    /* Asked for, even ASCII goes through the guest. */
    reply = computer(fx, s->id,
                     "{\"action\":\"type\",\"text\":\"ab\",\"method\":\"guest_keysyms\"}", &error);
    assert_non_null(reply);
    assert_exec(fx, argv, "ab");
    assert_int_equal(hid_count(fx), before);
    g_clear_pointer(&reply, json_node_unref);

    /* A guest without carrel-guest says so; one that fails passes its message on. Typable text
     * that AUTO sent to the guest goes as key presses instead. */
    carrel_hypervisor_fake_set_exec_result(fx->hv, 127, "", "");
    {
        guint sent = hid_count(fx);

        reply = computer(fx, s->id, "{\"action\":\"type\",\"text\":\"echo a long line\"}", &error);
        if (!reply)
            fail_msg("%s", error->message);
        assert_string_equal(reply_method(reply), "keys");
        assert_int_equal(hid_count(fx), sent + 2 * strlen("echo a long line"));
        g_clear_pointer(&reply, json_node_unref);
    }
    assert_null(computer(fx, s->id, "{\"action\":\"type\",\"text\":\"\\u00e9\"}", &error));
    assert_true(g_error_matches(error, CARREL_ERROR, CARREL_ERROR_UNSUPPORTED));
    assert_non_null(strstr(error->message, "no carrel-guest for 'type'"));
    g_clear_error(&error);
    carrel_hypervisor_fake_set_exec_result(
        fx->hv, 1, "{\"error\":{\"code\":\"x11\",\"message\":\"no XTEST extension\"}}", "");
    assert_null(computer(fx, s->id, "{\"action\":\"type\",\"text\":\"\\u00e9\"}", &error));
    assert_true(g_error_matches(error, CARREL_ERROR, CARREL_ERROR_FAILED));
    assert_non_null(strstr(error->message, "carrel-guest type failed: no XTEST extension"));
}

static void
test_clipboard_pastes(void **state)
{
    Fixture *fx = *state;
    g_autoptr(CarrelTemplate) tmpl G_GNUC_UNUSED = import(fx, "tiny");
    g_autoptr(GError) error = NULL;
    g_autoptr(CarrelSession) s = create(fx, "paste", &error);
    g_autoptr(JsonNode) reply = NULL;
    const char *const argv[] = {CARREL_GUEST_TOOL_PATH, "clipboard", "set", "--stdin", NULL};

    assert_non_null(s);
    carrel_hypervisor_fake_set_exec_result(fx->hv, 0, "{\"ok\":true}", "");
    reply = computer(fx, s->id,
                     "{\"action\":\"type\",\"text\":\"\\u00df\",\"method\":\"clipboard\"}", &error);
    if (!reply)
        fail_msg("%s", error->message);
    assert_string_equal(reply_method(reply), "clipboard");
    assert_exec(fx, argv, "\xc3\x9f");
    assert_true(hid_mentions(fx, "\"insert\""));
    assert_true(hid_mentions(fx, "\"shift\""));
    g_clear_pointer(&reply, json_node_unref);

    reply = computer(fx, s->id,
                     "{\"action\":\"type\",\"text\":\"x\",\"method\":\"clipboard\","
                     "\"paste_keys\":\"ctrl+shift+v\"}",
                     &error);
    assert_non_null(reply);
    assert_true(hid_mentions(fx, "\"ctrl\""));
    assert_true(hid_mentions(fx, "\"v\""));
    g_clear_pointer(&reply, json_node_unref);

    /* When the selections cannot be set, no paste keys are pressed. */
    carrel_hypervisor_fake_set_exec_result(fx->hv, 127, "", "");
    {
        guint before = hid_count(fx);
        assert_null(computer(
            fx, s->id, "{\"action\":\"type\",\"text\":\"y\",\"method\":\"clipboard\"}", &error));
        assert_true(g_error_matches(error, CARREL_ERROR, CARREL_ERROR_UNSUPPORTED));
        assert_int_equal(hid_count(fx), before);
    }
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_keys_need_no_guest, setup, teardown),
        cmocka_unit_test_setup_teardown(test_unicode_through_guest, setup, teardown),
        cmocka_unit_test_setup_teardown(test_clipboard_pastes, setup, teardown),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
