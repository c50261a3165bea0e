/*
 * Input is paced by the guest's queue: a step goes only once the guest has room for it (QEMU
 * would drop it otherwise), a guest that takes nothing fails the action with TIMEOUT instead of
 * losing keys, and a backend that cannot tell sends as before.
 */
#include "core-fixture.h"

static JsonNode *
type_text(Fixture *fx, const char *id, const char *text, GError **error)
{
    g_autofree char *json =
        g_strdup_printf("{\"action\":\"type\",\"text\":\"%s\",\"method\":\"keys\"}", text);
    g_autoptr(JsonNode) body = json_from_string(json, NULL);

    assert_non_null(body);
    return carrel_manager_session_computer(fx->mgr, ADMIN, id, body, error);
}

/* A slow guest (room for one character at a time, two more buffers per look): every key
 * arrives, none is sent without room, and the room was asked for. */
static void
test_typing_waits_for_room(void **state)
{
    Fixture *fx = *state;
    g_autoptr(CarrelTemplate) tmpl G_GNUC_UNUSED = import(fx, "tiny");
    g_autoptr(GError) error = NULL;
    g_autoptr(CarrelSession) s = create(fx, "slow", &error);
    g_autoptr(JsonNode) reply = NULL;
    g_autoptr(GPtrArray) sent = NULL;
    guint calls = 0;

    assert_non_null(s);
    carrel_hypervisor_fake_set_hid_room(fx->hv, 2, 2, 5000);
    reply = type_text(fx, s->id, "echo Hello > /tmp/x", &error);
    if (!reply)
        fail_msg("%s", error->message);
    sent = carrel_hypervisor_fake_get_hid(fx->hv);
    /* A press and a release per character. */
    assert_int_equal(sent->len, 2 * strlen("echo Hello > /tmp/x"));
    assert_int_equal(carrel_hypervisor_fake_get_hid_dropped(fx->hv, &calls), 0);
    assert_true(calls > 10);
}

/* A guest that takes nothing: the action fails with TIMEOUT, saying so, and sends nothing. */
static void
test_typing_gives_up(void **state)
{
    Fixture *fx = *state;
    g_autoptr(CarrelTemplate) tmpl G_GNUC_UNUSED = import(fx, "tiny");
    g_autoptr(GError) error = NULL;
    g_autoptr(CarrelSession) s = create(fx, "hung", &error);
    g_autoptr(GPtrArray) sent = NULL;

    assert_non_null(s);
    carrel_hypervisor_fake_set_hid_room(fx->hv, 0, 0, 100);
    assert_null(type_text(fx, s->id, "ab", &error));
    assert_true(g_error_matches(error, CARREL_ERROR, CARREL_ERROR_TIMEOUT));
    assert_non_null(strstr(error->message, "keyboard"));
    sent = carrel_hypervisor_fake_get_hid(fx->hv);
    assert_int_equal(sent->len, 0);
    assert_int_equal(carrel_hypervisor_fake_get_hid_dropped(fx->hv, NULL), 0);
}

/* A backend that cannot tell the room: input goes unpaced, as before. */
static void
test_typing_blind(void **state)
{
    Fixture *fx = *state;
    g_autoptr(CarrelTemplate) tmpl G_GNUC_UNUSED = import(fx, "tiny");
    g_autoptr(GError) error = NULL;
    g_autoptr(CarrelSession) s = create(fx, "blind", &error);
    g_autoptr(JsonNode) reply = NULL;
    g_autoptr(GPtrArray) sent = NULL;
    guint calls = 0;

    assert_non_null(s);
    reply = type_text(fx, s->id, "abc", &error);
    assert_non_null(reply);
    sent = carrel_hypervisor_fake_get_hid(fx->hv);
    assert_int_equal(sent->len, 6);
    carrel_hypervisor_fake_get_hid_dropped(fx->hv, &calls);
    assert_int_equal(calls, 0);
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_typing_waits_for_room, setup, teardown),
        cmocka_unit_test_setup_teardown(test_typing_gives_up, setup, teardown),
        cmocka_unit_test_setup_teardown(test_typing_blind, setup, teardown),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
