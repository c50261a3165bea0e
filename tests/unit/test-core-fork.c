/*
 * Forks (core-fork.c) on the fake: restored side by side, and all or nothing when one of them
 * fails while the others are under way.
 */
#include "core-fixture.h"

/* A running origin with a snapshot "s1" to fork from. */
static CarrelSession *
origin_with_snapshot(Fixture *fx)
{
    g_autoptr(GError) error = NULL;
    CarrelSession *s = create(fx, "origin", &error);
    g_autoptr(CarrelSnapshot) snap = NULL;

    if (!s)
        fail_msg("create: %s", error->message);
    snap = carrel_manager_snapshot_create(fx->mgr, ADMIN, "origin", "s1", &error);
    if (!snap)
        fail_msg("snapshot: %s", error->message);
    return s;
}

/* The sessions not destroyed. */
static guint
live_sessions(Fixture *fx)
{
    g_autoptr(GPtrArray) all = carrel_manager_session_list(fx->mgr, ADMIN, FALSE, NULL);

    assert_non_null(all);
    return all->len;
}

static void
test_side_by_side(void **state)
{
    Fixture *fx = *state;
    g_autoptr(CarrelTemplate) tmpl G_GNUC_UNUSED = import(fx, "tiny");
    g_autoptr(CarrelSession) origin = origin_with_snapshot(fx);
    g_autoptr(GError) error = NULL;
    g_autoptr(GPtrArray) forks = NULL;
    g_autoptr(GHashTable) ids = g_hash_table_new(g_str_hash, g_str_equal);

    /* Each restore lasts until all four are under way, at most 5 s: one after another, no two
     * would overlap. (A 300 ms hold saw only three at once under a loaded CI run.) */
    assert_true(g_hash_table_add(ids, origin->id)); /* no fork takes the origin's id */
    carrel_hypervisor_fake_set_restore_gather(fx->hv, 4, 5000);
    forks = carrel_manager_session_fork(fx->mgr, ADMIN, "origin", "s1", 4, &error);
    if (!forks)
        fail_msg("fork: %s", error->message);
    assert_int_equal(forks->len, 4);
    assert_int_equal(carrel_hypervisor_fake_get_restore_most(fx->hv), 4);
    for (guint i = 0; i < forks->len; i++) {
        CarrelSession *f = g_ptr_array_index(forks, i);
        assert_int_equal(f->state, CARREL_SESSION_RUNNING);
        assert_true(g_hash_table_add(ids, f->id));
    }
    assert_int_equal(live_sessions(fx), 5);
    g_usleep(100 * 1000); /* the reclaim jobs' last steps, before the fixture goes */
}

static void
test_all_or_nothing(void **state)
{
    Fixture *fx = *state;
    g_autoptr(CarrelTemplate) tmpl G_GNUC_UNUSED = import(fx, "tiny");
    g_autoptr(CarrelSession) origin G_GNUC_UNUSED = origin_with_snapshot(fx);
    g_autoptr(GError) error = NULL;
    g_autoptr(GPtrArray) forks = NULL;

    /* One of the four restores fails while the others are under way. */
    carrel_hypervisor_fake_set_restore_hold(fx->hv, 200);
    carrel_hypervisor_fake_fail_next(fx->hv, "restore");
    forks = carrel_manager_session_fork(fx->mgr, ADMIN, "origin", "s1", 4, &error);
    assert_null(forks);
    assert_true(g_error_matches(error, CARREL_ERROR, CARREL_ERROR_HYPERVISOR));
    assert_non_null(strstr(error->message, " of 4 from "));
    assert_non_null(strstr(error->message, "injected failure"));
    /* The three that came up went again: only the origin is left. */
    assert_int_equal(live_sessions(fx), 1);
    g_usleep(100 * 1000);
}

/* Five forks, four at a time: the fifth restores after the first fork is up. No balloon
 * inflates (a memory reclaim: guest work) while a fork still restores; the reclaims run after. */
static void
test_reclaim_after_forks(void **state)
{
    Fixture *fx = *state;
    g_autoptr(CarrelTemplate) tmpl G_GNUC_UNUSED = import(fx, "tiny");
    g_autoptr(CarrelSession) origin G_GNUC_UNUSED = origin_with_snapshot(fx);
    g_autoptr(GError) error = NULL;
    g_autoptr(GPtrArray) forks = NULL;
    guint balloons = carrel_hypervisor_fake_get_balloon_calls(fx->hv);

    carrel_hypervisor_fake_set_restore_hold(fx->hv, 200);
    carrel_hypervisor_fake_set_balloon_hold(fx->hv, 100);
    forks = carrel_manager_session_fork(fx->mgr, ADMIN, "origin", "s1", 5, &error);
    if (!forks)
        fail_msg("fork: %s", error->message);
    assert_int_equal(forks->len, 5);
    /* Each fork's reclaim inflates and deflates: ten calls, one at a time. */
    for (guint i = 0; i < 200 && carrel_hypervisor_fake_get_balloon_calls(fx->hv) < balloons + 10;
         i++)
        g_usleep(20 * 1000);
    assert_int_equal(carrel_hypervisor_fake_get_balloon_calls(fx->hv), balloons + 10);
    assert_int_equal(carrel_hypervisor_fake_get_holds_beside(fx->hv), 0);
}

/* Eight forks, four at a time: the forks up first set their clocks (guest work, as their MAC)
 * only once every fork is up, not while the second four restore. */
static void
test_catch_up_after_forks(void **state)
{
    Fixture *fx = *state;
    g_autoptr(CarrelTemplate) tmpl G_GNUC_UNUSED = import(fx, "tiny");
    g_autoptr(CarrelSession) origin G_GNUC_UNUSED = origin_with_snapshot(fx);
    g_autoptr(GError) error = NULL;
    g_autoptr(GPtrArray) forks = NULL;

    carrel_hypervisor_fake_set_restore_hold(fx->hv, 200);
    forks = carrel_manager_session_fork(fx->mgr, ADMIN, "origin", "s1", 8, &error);
    if (!forks)
        fail_msg("fork: %s", error->message);
    assert_int_equal(forks->len, 8);
    for (guint i = 0; i < forks->len; i++) {
        const CarrelSession *f = g_ptr_array_index(forks, i);
        carrel_manager_wait_caught_up(fx->mgr, f->id);
    }
    assert_int_equal(carrel_hypervisor_fake_get_agent_beside(fx->hv), 0);
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_side_by_side, setup, teardown),
        cmocka_unit_test_setup_teardown(test_all_or_nothing, setup, teardown),
        cmocka_unit_test_setup_teardown(test_reclaim_after_forks, setup, teardown),
        cmocka_unit_test_setup_teardown(test_catch_up_after_forks, setup, teardown),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
