/*
 * A person's console input on the timeline, over the fake hypervisor: recorded only for the
 * lease holder, named with actor_kind "person" beside the agents' events, typed text redacted
 * unless the session's policy keeps it.
 */
#include "core-fixture.h"

#define TYPED_POLICY "[console]\nrecord_typed_text=true\n"

static CarrelPrincipal *
reviewer(Fixture *fx, const char *name)
{
    g_autoptr(GError) error = NULL;
    g_autofree char *secret =
        carrel_manager_token_create(fx->mgr, ADMIN, "reviewer", name, 0, NULL, NULL, &error);
    CarrelPrincipal *who;

    if (!secret)
        fail_msg("token: %s", error->message);
    who = carrel_manager_authenticate(fx->mgr, secret, &error);
    assert_non_null(who);
    return who;
}

static JsonNode *
params(const char *json)
{
    return carrel_conf_parse_json(json, strlen(json), NULL);
}

static gboolean
report(Fixture *fx, const CarrelPrincipal *who, const char *id, const char *action,
       const char *json, GError **error)
{
    g_autoptr(JsonNode) p = params(json);

    return carrel_manager_person_event(fx->mgr, who, id, action, p, 0, error);
}

/* The events of a session after seq, as API JSON text, one per line. */
static char *
timeline(Fixture *fx, const char *id, gint64 after)
{
    g_autoptr(GPtrArray) events =
        carrel_manager_session_events(fx->mgr, ADMIN, id, after, 100, NULL);
    GString *text = g_string_new(NULL);

    assert_non_null(events);
    for (guint i = 0; i < events->len; i++) {
        g_autoptr(JsonNode) node = carrel_event_to_json(g_ptr_array_index(events, i));
        g_autoptr(JsonGenerator) gen = json_generator_new();
        g_autofree char *line = NULL;

        json_generator_set_root(gen, node);
        line = json_generator_to_data(gen, NULL);
        g_string_append_printf(text, "%s\n", line);
    }
    return g_string_free(text, FALSE);
}

static void
test_person_events_of_the_holder(void **state)
{
    Fixture *fx = *state;
    g_autoptr(CarrelTemplate) tmpl G_GNUC_UNUSED = import(fx, "tiny");
    g_autoptr(GError) error = NULL;
    g_autoptr(CarrelSession) s = create(fx, "people", &error);
    g_autoptr(CarrelPrincipal) alice = reviewer(fx, "alice");
    g_autoptr(CarrelPrincipal) bob = reviewer(fx, "bob");
    g_autoptr(JsonNode) lease = NULL;
    g_autofree char *text = NULL;
    g_auto(GStrv) parts = NULL;
    gint64 after;

    assert_non_null(s);
    after = after_create(fx, s->id);
    /* Nobody holds the lease: nobody's input is a person's event. */
    assert_false(
        report(fx, alice, s->id, "click", "{\"x\":1,\"y\":2,\"button\":\"left\"}", &error));
    assert_true(g_error_matches(error, CARREL_ERROR, CARREL_ERROR_FORBIDDEN));
    g_clear_error(&error);
    lease = carrel_manager_lease_take(fx->mgr, alice, s->id, &error);
    assert_non_null(lease);
    after++; /* the lease's "take" */
    assert_true(
        report(fx, alice, s->id, "click", "{\"x\":10,\"y\":20,\"button\":\"left\"}", &error));
    assert_true(report(fx, alice, s->id, "keys", "{\"combo\":\"ctrl+c\"}", &error));
    assert_true(report(fx, alice, s->id, "type", "{\"text\":\"sécret\"}", &error));
    /* bob does not hold it: his input is not recorded as his (nor as anyone's). */
    assert_false(report(fx, bob, s->id, "type", "{\"text\":\"bob\"}", &error));
    assert_true(g_error_matches(error, CARREL_ERROR, CARREL_ERROR_FORBIDDEN));
    g_clear_error(&error);
    assert_false(report(fx, alice, s->id, "scroll", "{}", &error));
    assert_true(g_error_matches(error, CARREL_ERROR, CARREL_ERROR_INVALID_ARG));
    g_clear_error(&error);
    text = timeline(fx, s->id, after);
    if (!strstr(text, "\"actor\":\"alice\",\"kind\":\"console\",\"action\":\"click\","
                      "\"params\":{\"x\":10,\"y\":20,\"button\":\"left\"}") ||
        !strstr(text, "\"action\":\"keys\",\"params\":{\"combo\":\"ctrl+c\"}") ||
        !strstr(text, "\"action\":\"type\",\"params\":{\"redacted\":true,\"chars\":6}") ||
        strstr(text, "cret") || strstr(text, "bob") || strstr(text, "\"x\":1,"))
        fail_msg("timeline:\n%s", text);
    /* Three person events; the lease's own event is the agent-side kind of its caller. */
    parts = g_strsplit(text, "\"actor_kind\":\"person\"", -1);
    assert_int_equal(g_strv_length(parts) - 1, 3);
}

static void
test_actor_kinds(void **state)
{
    Fixture *fx = *state;
    g_autoptr(CarrelTemplate) tmpl G_GNUC_UNUSED = import(fx, "tiny");
    g_autoptr(GError) error = NULL;
    g_autoptr(CarrelSession) s = create(fx, "kinds", &error);
    g_autoptr(CarrelPrincipal) alice = reviewer(fx, "alice");
    g_autoptr(JsonNode) lease = NULL;
    g_autofree char *text = NULL;

    assert_non_null(s);
    lease = carrel_manager_lease_take(fx->mgr, alice, s->id, &error);
    assert_true(report(fx, alice, s->id, "keys", "{\"combo\":\"enter\"}", &error));
    assert_true(carrel_manager_note(fx->mgr, s->id, NULL, "lifecycle", "paused", NULL, NULL, NULL,
                                    0, &error));
    text = timeline(fx, s->id, 0);
    /* create by admin (an API caller), take by alice through the API, then her own keys, then
     * carreld's note. */
    if (!strstr(text, "\"action\":\"create\"") || !strstr(text, "\"actor_kind\":\"agent\"") ||
        !strstr(text, "\"action\":\"keys\",\"params\":{\"combo\":\"enter\"}") ||
        !strstr(text, "\"actor\":\"carreld\"") || !strstr(text, "\"actor_kind\":\"carreld\"") ||
        !strstr(text, "\"actor_kind\":\"person\""))
        fail_msg("timeline:\n%s", text);
}

/* A policy that keeps typed text: the text is on the timeline as typed. */
static void
test_typed_text_kept_by_policy(void **state)
{
    Fixture *fx = *state;
    g_autoptr(CarrelTemplate) tmpl G_GNUC_UNUSED = import(fx, "tiny");
    g_autoptr(GError) error = NULL;
    g_autoptr(CarrelPrincipal) alice = reviewer(fx, "alice");
    CarrelSessionRequest req = {.template_name = (char *)"tiny", .policy = (char *)"typed"};
    g_autoptr(CarrelSession) s = NULL;
    g_autoptr(JsonNode) lease = NULL;
    g_autofree char *text = NULL;

    assert_true(carrel_policy_set_add(fx->mgr->policies, "typed", TYPED_POLICY,
                                      strlen(TYPED_POLICY), &error));
    s = carrel_manager_session_create(fx->mgr, ADMIN, &req, &error);
    assert_non_null(s);
    lease = carrel_manager_lease_take(fx->mgr, alice, s->id, &error);
    assert_non_null(lease);
    assert_true(report(fx, alice, s->id, "type", "{\"text\":\"echo hi\"}", &error));
    text = timeline(fx, s->id, 0);
    if (!strstr(text, "\"action\":\"type\",\"params\":{\"text\":\"echo hi\"}") ||
        strstr(text, "redacted"))
        fail_msg("timeline:\n%s", text);
}

/* The policy setting parses both ways and refuses what is not a boolean. */
static void
test_policy_setting(void **state)
{
    g_autoptr(GError) error = NULL;
    g_autoptr(CarrelPolicy) def = carrel_policy_new_default();
    g_autoptr(CarrelPolicy) on = carrel_policy_load_data(TYPED_POLICY, -1, &error);
    g_autoptr(CarrelPolicy) bad = NULL;

    assert_false(carrel_policy_record_typed_text(def));
    assert_non_null(on);
    assert_true(carrel_policy_record_typed_text(on));
    bad = carrel_policy_load_data("[console]\nrecord_typed_text=maybe\n", -1, &error);
    assert_null(bad);
    assert_true(g_error_matches(error, CARREL_ERROR, CARREL_ERROR_INVALID_ARG));
    assert_non_null(strstr(error->message, "record_typed_text"));
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_person_events_of_the_holder, setup, teardown),
        cmocka_unit_test_setup_teardown(test_actor_kinds, setup, teardown),
        cmocka_unit_test_setup_teardown(test_typed_text_kept_by_policy, setup, teardown),
        cmocka_unit_test(test_policy_setting),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
