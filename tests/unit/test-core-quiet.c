/*
 * A warm state is saved once the guest has gone quiet (core-ready.c, core-warm.c): not while it
 * still works through its boot (tiny's carrel-init coldplugs the rest of the hardware after the
 * desktop is drawn), which every clone would otherwise restore and run again.
 */
#include "core-fixture.h"

/* Warms tiny; returns how long the job took (ms) and its progress lines, joined. */
static gint64
warm_tiny(Fixture *fx, char **ret_progress)
{
    g_autoptr(CarrelTemplate) tmpl G_GNUC_UNUSED = import(fx, "tiny");
    g_autoptr(GError) error = NULL;
    g_autoptr(CarrelJob) job = NULL;
    g_autoptr(JsonNode) json = NULL;
    gint64 start = g_get_monotonic_time();
    gint64 took;
    JsonArray *lines;
    GString *all = g_string_new(NULL);

    carrel_hypervisor_fake_set_exec_result(fx->hv, 0, "{\"ready\":true}", "");
    job = carrel_manager_template_warm(fx->mgr, ADMIN, "tiny", 0, &error);
    assert_non_null(job);
    if (!carrel_job_wait(job, &error))
        fail_msg("warm: %s", error->message);
    took = (g_get_monotonic_time() - start) / 1000;
    json = carrel_job_to_json(job);
    lines = json_object_get_array_member(json_node_get_object(json), "progress");
    for (guint i = 0; lines && i < json_array_get_length(lines); i++)
        g_string_append_printf(all, "%s\n", json_array_get_string_element(lines, i));
    *ret_progress = g_string_free(all, FALSE);
    return took;
}

/* The number after "went quiet after " in the progress, or -1. */
static gint64
quiet_ms(const char *progress)
{
    const char *at = strstr(progress, "the guest went quiet after ");

    return at ? g_ascii_strtoll(at + strlen("the guest went quiet after "), NULL, 10) : -1;
}

static void
test_waits_for_a_busy_guest(void **state)
{
    Fixture *fx = *state;
    g_autofree char *progress = NULL;
    g_autoptr(CarrelWarmState) warm = NULL;
    gint64 took, waited;

    /* Busy for 2.5 s from the first look: quiet in the first whole second after that. */
    carrel_hypervisor_fake_set_busy(fx->hv, 2500);
    took = warm_tiny(fx, &progress);
    waited = quiet_ms(progress);
    if (waited < 2500 || waited > 6000 || took < waited)
        fail_msg("waited %" G_GINT64_FORMAT " ms of %" G_GINT64_FORMAT ": %s", waited, took,
                 progress);
    warm = carrel_manager_template_warm_state(fx->mgr, "tiny", 1);
    assert_non_null(warm);
}

static void
test_an_idle_guest_is_saved_at_once(void **state)
{
    Fixture *fx = *state;
    g_autofree char *progress = NULL;
    gint64 waited;

    warm_tiny(fx, &progress);
    waited = quiet_ms(progress);
    /* One window of a second to see it idle. */
    if (waited < 900 || waited > 2500)
        fail_msg("waited %" G_GINT64_FORMAT " ms: %s", waited, progress);
}

static void
test_unknown_cpu_time_waits_for_nothing(void **state)
{
    Fixture *fx = *state;
    g_autofree char *progress = NULL;
    g_autoptr(CarrelWarmState) warm = NULL;
    gint64 took;

    carrel_hypervisor_fake_set_busy(fx->hv, 60000);
    carrel_hypervisor_fake_fail_next(fx->hv, "cpu_time");
    took = warm_tiny(fx, &progress);
    assert_non_null(strstr(progress, "did not go quiet"));
    assert_int_equal(quiet_ms(progress), -1);
    if (took > 20000)
        fail_msg("the warm took %" G_GINT64_FORMAT " ms: %s", took, progress);
    warm = carrel_manager_template_warm_state(fx->mgr, "tiny", 1);
    assert_non_null(warm);
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_waits_for_a_busy_guest, setup, teardown),
        cmocka_unit_test_setup_teardown(test_an_idle_guest_is_saved_at_once, setup, teardown),
        cmocka_unit_test_setup_teardown(test_unknown_cpu_time_waits_for_nothing, setup, teardown),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
