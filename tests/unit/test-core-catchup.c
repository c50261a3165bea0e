/*
 * Settling after the reply (core-catchup.c): a warm create, a pool claim, a revert and a fork
 * answer before the guest's clock, MAC and screen are set; a "catch_up" event says when they
 * were, and every verb that reaches the guest waits for them at the door.
 */
#include "core-fixture.h"

/* The lifecycle event action of session id, or NULL. */
static CarrelEvent *
find_event(Fixture *fx, const char *id, const char *action)
{
    g_autoptr(GPtrArray) events = carrel_manager_session_events(fx->mgr, ADMIN, id, 0, 1000, NULL);

    assert_non_null(events);
    for (guint i = 0; i < events->len; i++) {
        CarrelEvent *ev = g_ptr_array_index(events, i);
        if (g_str_equal(ev->kind, "lifecycle") && g_str_equal(ev->action, action))
            return g_ptr_array_steal_index(events, i);
    }
    return NULL;
}

static gboolean
has_phase(JsonNode *timings, const char *member)
{
    return timings && JSON_NODE_HOLDS_OBJECT(timings) &&
           json_object_has_member(json_node_get_object(timings), member);
}

static JsonNode *
event_timings(const CarrelEvent *ev)
{
    assert_non_null(ev);
    assert_non_null(ev->result);
    return json_object_get_member(json_node_get_object(ev->result), "timings");
}

static void
warm(Fixture *fx)
{
    g_autoptr(GError) error = NULL;
    g_autoptr(CarrelJob) job = carrel_manager_template_warm(fx->mgr, ADMIN, "tiny", 0, &error);

    assert_non_null(job);
    assert_true(carrel_job_wait(job, &error));
}

/* A warm create answers once the agent answers; clock and MAC follow in a catch_up event. */
static void
test_warm_create_catches_up(void **state)
{
    Fixture *fx = *state;
    g_autoptr(CarrelTemplate) tmpl G_GNUC_UNUSED = import(fx, "tiny");
    g_autoptr(GError) error = NULL;
    g_autoptr(CarrelSession) s = NULL;
    g_autoptr(CarrelEvent) created = NULL;
    g_autoptr(CarrelEvent) caught = NULL;

    warm(fx);
    s = create(fx, "warm", &error);
    assert_non_null(s);
    assert_true(s->from_warm);
    assert_true(has_phase(s->timings, "restore_ms"));
    assert_true(has_phase(s->timings, "agent_ms"));
    assert_false(has_phase(s->timings, "clock_ms"));
    assert_false(has_phase(s->timings, "mac_ms"));
    carrel_manager_wait_caught_up(fx->mgr, s->id);
    created = find_event(fx, s->id, "create");
    caught = find_event(fx, s->id, "catch_up");
    assert_non_null(created);
    assert_non_null(caught);
    assert_true(caught->seq > created->seq);
    assert_string_equal(caught->actor, "carreld");
    assert_true(has_phase(event_timings(caught), "clock_ms"));
    assert_true(has_phase(event_timings(caught), "mac_ms"));
    /* Nothing is left marked: another verb takes the session at once. */
    assert_true(carrel_manager_mark_busy(fx->mgr, s->id, "test", &error));
    carrel_manager_clear_busy(fx->mgr, s->id);
}

typedef struct {
    Fixture *fx;
    const char *id;
    gint done;
    gboolean ok;
} ExecRun;

static gpointer
exec_thread(gpointer data)
{
    ExecRun *run = data;
    const char *argv[] = {"/bin/true", NULL};
    CarrelExecRequest req = {.argv = (GStrv)argv, .timeout_s = 10};
    g_auto(CarrelExecResult) result = {0};

    run->ok =
        carrel_manager_session_exec(run->fx->mgr, ADMIN, run->id, &req, &result, NULL) != FALSE;
    g_atomic_int_set(&run->done, 1);
    return NULL;
}

/* A verb that reaches the guest waits while the session catches up; reading it does not. */
static void
test_door_waits(void **state)
{
    Fixture *fx = *state;
    g_autoptr(CarrelTemplate) tmpl G_GNUC_UNUSED = import(fx, "tiny");
    g_autoptr(GError) error = NULL;
    g_autoptr(CarrelSession) s = create(fx, "waits", &error);
    g_autoptr(CarrelSession) read = NULL;
    ExecRun run = {.fx = fx};
    GThread *thread;

    assert_non_null(s);
    run.id = s->id;
    /* As the catch-up job holds it. */
    assert_true(carrel_manager_mark_busy(fx->mgr, s->id, "catch-up", &error));
    read = carrel_manager_session_get(fx->mgr, ADMIN, s->id, &error);
    assert_non_null(read);
    thread = g_thread_new("exec", exec_thread, &run);
    g_usleep(300 * 1000);
    assert_int_equal(g_atomic_int_get(&run.done), 0);
    carrel_manager_clear_busy(fx->mgr, s->id);
    g_thread_join(thread);
    assert_int_equal(g_atomic_int_get(&run.done), 1);
    assert_true(run.ok);
}

/* A pool claim resumes and answers; its clock is set after, and a verb that marks the session
 * busy waits for that instead of being refused. */
static void
test_pool_claim_catches_up(void **state)
{
    Fixture *fx = *state;
    g_autoptr(CarrelTemplate) tmpl G_GNUC_UNUSED = import(fx, "tiny");
    g_autoptr(GError) error = NULL;
    g_autoptr(CarrelSession) taken = NULL;
    g_autoptr(CarrelSession) paused = NULL;
    g_autoptr(CarrelEvent) caught = NULL;

    assert_true(carrel_manager_pool_set(fx->mgr, ADMIN, "tiny", 1, &error));
    carrel_manager_watch(fx->mgr);
    taken = create(fx, "claimed", &error);
    assert_non_null(taken);
    assert_true(taken->from_pool);
    assert_false(has_phase(taken->timings, "clock_ms"));
    /* Straight after the reply: the pause waits for the settling, then pauses. */
    paused = carrel_manager_session_pause(fx->mgr, ADMIN, taken->id, &error);
    if (!paused)
        fail_msg("pause: %s", error->message);
    assert_int_equal(paused->state, CARREL_SESSION_PAUSED);
    caught = find_event(fx, taken->id, "catch_up");
    assert_non_null(caught);
    assert_true(has_phase(event_timings(caught), "clock_ms"));
}

/* A revert and a fork leave their clock (and the fork its MAC) to catch up on. */
static void
test_revert_fork_catch_up(void **state)
{
    Fixture *fx = *state;
    g_autoptr(CarrelTemplate) tmpl G_GNUC_UNUSED = import(fx, "tiny");
    g_autoptr(GError) error = NULL;
    g_autoptr(CarrelSession) s = create(fx, "origin", &error);
    g_autoptr(CarrelSnapshot) snap = NULL;
    g_autoptr(CarrelSession) back = NULL;
    g_autoptr(GPtrArray) forks = NULL;
    g_autoptr(CarrelEvent) caught = NULL;
    CarrelSession *f;

    assert_non_null(s);
    snap = carrel_manager_snapshot_create(fx->mgr, ADMIN, s->id, "one", &error);
    assert_non_null(snap);
    back = carrel_manager_snapshot_revert(fx->mgr, ADMIN, s->id, "one", &error);
    assert_non_null(back);
    assert_false(has_phase(back->timings, "clock_ms"));
    forks = carrel_manager_session_fork(fx->mgr, ADMIN, s->id, "one", 1, &error);
    assert_non_null(forks);
    f = g_ptr_array_index(forks, 0);
    carrel_manager_wait_caught_up(fx->mgr, f->id);
    caught = find_event(fx, f->id, "catch_up");
    assert_true(has_phase(event_timings(caught), "clock_ms"));
    assert_true(has_phase(event_timings(caught), "mac_ms"));
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_warm_create_catches_up, setup, teardown),
        cmocka_unit_test_setup_teardown(test_door_waits, setup, teardown),
        cmocka_unit_test_setup_teardown(test_pool_claim_catches_up, setup, teardown),
        cmocka_unit_test_setup_teardown(test_revert_fork_catch_up, setup, teardown),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
