/*
 * Per-phase timings: the frame's arithmetic (marks add up, frames nest, no frame counts
 * nothing), then over the fake hypervisor: a cold create, a snapshot, a revert and a fork each
 * say where their time went, in the reply and on the timeline event.
 */
#include "core-fixture.h"

static gboolean
has_phase(JsonNode *timings, const char *member)
{
    return timings && JSON_NODE_HOLDS_OBJECT(timings) &&
           json_object_has_member(json_node_get_object(timings), member);
}

static void
test_frames(void **state)
{
    g_autoptr(JsonNode) inner = NULL;
    g_autoptr(JsonNode) outer = NULL;
    g_autoptr(JsonNode) empty = NULL;
    JsonObject *o;

    /* No frame open: marks count nothing and end says so. */
    carrel_timings_mark("lost");
    assert_null(carrel_timings_end());
    carrel_timings_begin();
    carrel_timings_mark("one");
    carrel_timings_begin();
    carrel_timings_mark("two");
    inner = carrel_timings_end();
    carrel_timings_mark("one");
    carrel_timings_mark("three");
    outer = carrel_timings_end();
    /* Each frame has its own phases, a phase marked twice is one member, and a total. */
    assert_true(has_phase(inner, "two_ms") && !has_phase(inner, "one_ms"));
    o = json_node_get_object(outer);
    assert_true(has_phase(outer, "one_ms") && has_phase(outer, "three_ms"));
    assert_false(has_phase(outer, "two_ms"));
    assert_int_equal(json_object_get_size(o), 3);
    assert_true(json_object_get_int_member(o, "total_ms") >=
                json_object_get_int_member(o, "one_ms"));
    /* A frame where nothing was marked gives nothing. */
    carrel_timings_begin();
    empty = carrel_timings_end();
    assert_null(empty);
}

/* The lifecycle event of action on session id carries result.timings with member. */
static void
assert_event_timings(Fixture *fx, const char *id, const char *action, const char *member)
{
    g_autoptr(GPtrArray) events = carrel_manager_session_events(fx->mgr, ADMIN, id, 0, 1000, NULL);
    gboolean found = FALSE;

    assert_non_null(events);
    for (guint i = 0; i < events->len; i++) {
        CarrelEvent *ev = g_ptr_array_index(events, i);
        if (g_str_equal(ev->kind, "lifecycle") && g_str_equal(ev->action, action)) {
            assert_non_null(ev->result);
            assert_true(has_phase(
                json_object_get_member(json_node_get_object(ev->result), "timings"), member));
            found = TRUE;
        }
    }
    assert_true(found);
}

static void
test_verbs(void **state)
{
    Fixture *fx = *state;
    g_autoptr(GError) error = NULL;
    g_autoptr(CarrelTemplate) tmpl G_GNUC_UNUSED = import(fx, "tiny");
    g_autoptr(CarrelSession) s = create(fx, "timed", &error);
    g_autoptr(CarrelSnapshot) snap = NULL;
    g_autoptr(CarrelSession) back = NULL;
    g_autoptr(GPtrArray) forks = NULL;
    g_autoptr(JsonNode) json = NULL;

    if (!s)
        fail_msg("create: %s", error->message);
    /* A cold create: booted, its agent waited for, its desktop found ready. */
    assert_true(has_phase(s->timings, "boot_ms"));
    assert_true(has_phase(s->timings, "agent_ms"));
    assert_true(has_phase(s->timings, "total_ms"));
    json = carrel_session_to_json(s);
    assert_true(
        has_phase(json_object_get_member(json_node_get_object(json), "timings"), "boot_ms"));
    assert_event_timings(fx, s->id, "create", "boot_ms");

    snap = carrel_manager_snapshot_create(fx->mgr, ADMIN, s->id, "t1", &error);
    assert_non_null(snap);
    /* Written and moved in one step: nothing restored. */
    assert_true(has_phase(snap->timings, "snapshot_ms"));
    assert_false(has_phase(snap->timings, "restore_ms"));
    assert_event_timings(fx, s->id, "snapshot", "snapshot_ms");

    back = carrel_manager_snapshot_revert(fx->mgr, ADMIN, s->id, "t1", &error);
    assert_non_null(back);
    assert_true(has_phase(back->timings, "restore_ms"));
    assert_event_timings(fx, s->id, "revert", "restore_ms");

    forks = carrel_manager_session_fork(fx->mgr, ADMIN, s->id, "t1", 2, &error);
    assert_non_null(forks);
    for (guint i = 0; i < forks->len; i++) {
        CarrelSession *f = g_ptr_array_index(forks, i);
        assert_true(has_phase(f->timings, "restore_ms"));
        assert_true(has_phase(f->timings, "prepare_ms"));
    }
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_frames),
        cmocka_unit_test_setup_teardown(test_verbs, setup, teardown),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
