/*
 * Unit: core's metrics on the fake hypervisor. Each verb that completes observes its duration
 * once, under the right label (create from cold, warm or pool; restores of warm states,
 * snapshots, hibernation and forks; snapshots; reverts), failures observe nothing, pool refills
 * are no creates, egress refusals are counted by decision, and the scrape is metrics.read's.
 */
#include "core-fixture.h"

static const CarrelPrincipal agent = {(char *)"t-a", (char *)"agent-a", CARREL_ROLE_AGENT};
static const CarrelPrincipal reviewer = {(char *)"t-r", (char *)"rita", CARREL_ROLE_REVIEWER};

/* The value of a sample line (name and labels as written) in the manager's metrics, as an
 * integer; 0 when there is no such line yet. */
static guint64
sample(Fixture *fx, const char *series)
{
    g_autofree char *text = carrel_metrics_format(carrel_manager_get_metrics(fx->mgr));
    g_auto(GStrv) lines = g_strsplit(text, "\n", -1);
    g_autofree char *prefix = g_strconcat(series, " ", NULL);

    for (guint i = 0; lines[i]; i++) {
        if (g_str_has_prefix(lines[i], prefix))
            return g_ascii_strtoull(lines[i] + strlen(prefix), NULL, 10);
    }
    return 0;
}

#define CREATES(from) sample(fx, "carrel_create_duration_seconds_count{from=\"" from "\"}")
#define RESTORES(from) sample(fx, "carrel_restore_duration_seconds_count{from=\"" from "\"}")
#define SNAPSHOTS() sample(fx, "carrel_snapshot_duration_seconds_count")
#define REVERTS() sample(fx, "carrel_revert_duration_seconds_count")

static void
test_durations(void **state)
{
    Fixture *fx = *state;
    g_autoptr(CarrelTemplate) tmpl G_GNUC_UNUSED = import(fx, "tiny");
    g_autoptr(GError) error = NULL;
    g_autoptr(CarrelSession) s = create(fx, "one", &error);
    g_autoptr(CarrelSnapshot) s1 = NULL;
    g_autoptr(CarrelSession) back = NULL;
    g_autoptr(CarrelSession) asleep = NULL;
    g_autoptr(CarrelSession) woken = NULL;
    g_autoptr(GPtrArray) forks = NULL;

    assert_non_null(s);
    assert_int_equal(CREATES("cold"), 1);
    assert_int_equal(CREATES("warm") + CREATES("pool"), 0);
    /* A snapshot of a running session writes its memory and keeps it running: no restore. */
    s1 = carrel_manager_snapshot_create(fx->mgr, ADMIN, "one", "s1", &error);
    assert_non_null(s1);
    assert_int_equal(SNAPSHOTS(), 1);
    assert_int_equal(RESTORES("snapshot"), 0);
    /* A refused snapshot (a name taken) and a failed revert observe nothing. */
    assert_null(carrel_manager_snapshot_create(fx->mgr, ADMIN, "one", "s1", &error));
    g_clear_error(&error);
    assert_null(carrel_manager_snapshot_revert(fx->mgr, ADMIN, "one", "nope", &error));
    g_clear_error(&error);
    assert_int_equal(SNAPSHOTS(), 1);
    assert_int_equal(REVERTS(), 0);
    back = carrel_manager_snapshot_revert(fx->mgr, ADMIN, "one", "s1", &error);
    assert_non_null(back);
    assert_int_equal(REVERTS(), 1);
    assert_int_equal(RESTORES("snapshot"), 1);
    asleep = carrel_manager_session_hibernate(fx->mgr, ADMIN, "one", &error);
    assert_non_null(asleep);
    woken = carrel_manager_session_resume(fx->mgr, ADMIN, "one", &error);
    assert_non_null(woken);
    assert_int_equal(RESTORES("hibernate"), 1);
    forks = carrel_manager_session_fork(fx->mgr, ADMIN, "one", "s1", 2, &error);
    if (!forks)
        fail_msg("fork: %s", error->message);
    assert_int_equal(RESTORES("fork"), 2);
    /* Forks are not creates. */
    assert_int_equal(CREATES("cold"), 1);
}

static void
test_warm_and_pool(void **state)
{
    Fixture *fx = *state;
    g_autoptr(CarrelTemplate) tmpl G_GNUC_UNUSED = import(fx, "tiny");
    g_autoptr(GError) error = NULL;
    g_autoptr(CarrelJob) job = carrel_manager_template_warm(fx->mgr, ADMIN, "tiny", 0, &error);
    g_autoptr(CarrelSession) warm = NULL;
    g_autoptr(CarrelSession) taken = NULL;

    assert_true(carrel_job_wait(job, &error));
    warm = create(fx, "warm", &error);
    assert_non_null(warm);
    assert_true(warm->from_warm);
    assert_int_equal(CREATES("warm"), 1);
    assert_int_equal(RESTORES("warm"), 1);
    /* The pool's member is made by a restore, but no one asked for a create yet. */
    assert_true(carrel_manager_pool_set(fx->mgr, ADMIN, "tiny", 1, &error));
    carrel_manager_watch(fx->mgr);
    assert_int_equal(RESTORES("warm"), 2);
    assert_int_equal(CREATES("warm"), 1);
    assert_int_equal(CREATES("pool"), 0);
    taken = create(fx, "taken", &error);
    assert_non_null(taken);
    assert_true(taken->from_pool);
    assert_int_equal(CREATES("pool"), 1);
    assert_int_equal(CREATES("warm") + CREATES("cold"), 1);
    assert_true(carrel_manager_pool_set(fx->mgr, ADMIN, "tiny", 0, &error));
    carrel_manager_watch(fx->mgr);
}

static void
test_egress_denials(void **state)
{
    Fixture *fx = *state;
    static const char *const words[] = {"denied",  "allowed", "refused", "approved",
                                        "expired", "denied",  NULL};

    for (guint i = 0; words[i]; i++)
        carrel_manager_count_egress(fx->mgr, words[i]);
    carrel_manager_count_egress(fx->mgr, NULL);
    assert_int_equal(sample(fx, "carrel_egress_denials_total{decision=\"denied\"}"), 2);
    assert_int_equal(sample(fx, "carrel_egress_denials_total{decision=\"refused\"}"), 1);
    assert_int_equal(sample(fx, "carrel_egress_denials_total{decision=\"expired\"}"), 1);
    /* What passed is no denial. */
    assert_int_equal(sample(fx, "carrel_egress_denials_total{decision=\"allowed\"}"), 0);
    assert_int_equal(sample(fx, "carrel_egress_denials_total{decision=\"approved\"}"), 0);
}

static void
test_scrape(void **state)
{
    Fixture *fx = *state;
    g_autoptr(CarrelTemplate) tmpl G_GNUC_UNUSED = import(fx, "tiny");
    g_autoptr(GError) error = NULL;
    g_autoptr(CarrelSession) s = create(fx, "one", &error);
    g_autoptr(CarrelSession) paused = NULL;
    g_autofree char *text = NULL;
    g_autofree char *seen = NULL;

    assert_non_null(s);
    paused = carrel_manager_session_pause(fx->mgr, ADMIN, "one", &error);
    assert_non_null(paused);
    /* Agents see their own sessions only: counts over everyone's are not theirs. */
    assert_null(carrel_manager_metrics_text(fx->mgr, &agent, &error));
    assert_true(g_error_matches(error, CARREL_ERROR, CARREL_ERROR_FORBIDDEN));
    g_clear_error(&error);
    seen = carrel_manager_metrics_text(fx->mgr, &reviewer, &error);
    assert_non_null(seen);
    text = carrel_manager_metrics_text(fx->mgr, ADMIN, &error);
    assert_non_null(text);
    assert_non_null(strstr(text, "\ncarrel_sessions{state=\"paused\"} 1\n"));
    assert_non_null(strstr(text, "\ncarrel_sessions{state=\"running\"} 0\n"));
    assert_null(strstr(text, "state=\"destroyed\""));
    assert_non_null(strstr(text, "\ncarrel_pool_members 0\n"));
    assert_non_null(strstr(text, "\ncarrel_memory_reclaims 0\n"));
    assert_non_null(strstr(text, "\ncarrel_state_dir_free_bytes "));
    assert_non_null(strstr(text, "\nprocess_open_fds "));
    assert_non_null(strstr(text, "# TYPE carrel_create_duration_seconds histogram\n"));
    /* No id of a session in any label. */
    assert_null(strstr(text, s->id));
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_durations, setup, teardown),
        cmocka_unit_test_setup_teardown(test_warm_and_pool, setup, teardown),
        cmocka_unit_test_setup_teardown(test_egress_denials, setup, teardown),
        cmocka_unit_test_setup_teardown(test_scrape, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
