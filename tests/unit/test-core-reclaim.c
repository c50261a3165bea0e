/*
 * A warm clone's memory reclaim (core-warm.c) on the fake: its balloon in, then out, and one
 * reclaim at a time daemon-wide, however many clones are made together; none when sessions run
 * as carrel-qemu (the fixture's manager names no emulator: libvirt's own QEMU), unless the host
 * allocates on reads of untouched memory.
 */
#include "core-fixture.h"

/* The carrel_memory_reclaims gauge of a scrape. */
static guint
reclaims_gauge(Fixture *fx)
{
    g_autoptr(GError) error = NULL;
    g_autofree char *text = carrel_manager_metrics_text(fx->mgr, ADMIN, &error);
    const char *line = text ? strstr(text, "\ncarrel_memory_reclaims ") : NULL;

    assert_non_null(line);
    return (guint)g_ascii_strtoull(line + strlen("\ncarrel_memory_reclaims "), NULL, 10);
}

/* tiny imported and warmed: its creates restore. */
static CarrelTemplate *
warm_tiny(Fixture *fx)
{
    CarrelTemplate *tmpl = import(fx, "tiny");
    g_autoptr(GError) error = NULL;
    g_autoptr(CarrelJob) job = carrel_manager_template_warm(fx->mgr, ADMIN, "tiny", 0, &error);

    assert_non_null(job);
    if (!carrel_job_wait(job, &error))
        fail_msg("warm: %s", error->message);
    return tmpl;
}

static void
test_one_at_a_time(void **state)
{
    Fixture *fx = *state;
    g_autoptr(CarrelTemplate) tmpl G_GNUC_UNUSED = NULL;
    g_autoptr(GError) error = NULL;
    CarrelSessionRequest plain = {.template_name = (char *)"tiny"};
    CarrelSession *clones[3] = {NULL};
    guint before;

    carrel_hypervisor_fake_set_exec_result(fx->hv, 0, "{\"ready\":true}", "");
    tmpl = warm_tiny(fx);
    /* Each guest takes 500 ms to move its balloon: clones made one after another overlap. */
    carrel_hypervisor_fake_set_balloon_hold(fx->hv, 500);
    before = carrel_hypervisor_fake_get_balloon_calls(fx->hv);
    for (guint i = 0; i < G_N_ELEMENTS(clones); i++) {
        clones[i] = carrel_manager_session_create(fx->mgr, ADMIN, &plain, &error);
        if (!clones[i])
            fail_msg("clone %u: %s", i, error->message);
        assert_true(clones[i]->from_warm);
    }
    /* Each takes a second at least: the last is still to do. */
    assert_true(reclaims_gauge(fx) >= 1);
    /* In and out for each clone, never two at once. */
    for (int i = 0; i < 300 && carrel_hypervisor_fake_get_balloon_calls(fx->hv) < before + 6; i++)
        g_usleep(20 * 1000);
    assert_int_equal(carrel_hypervisor_fake_get_balloon_calls(fx->hv), before + 6);
    assert_int_equal(carrel_hypervisor_fake_get_balloon_most(fx->hv), 1);
    /* The last job's last steps, before the fixture goes: the gauge says when they are done. */
    for (int i = 0; i < 100 && reclaims_gauge(fx) > 0; i++)
        g_usleep(20 * 1000);
    assert_int_equal(reclaims_gauge(fx), 0);
    for (guint i = 0; i < G_N_ELEMENTS(clones); i++)
        carrel_session_free(clones[i]);
}

/* A warm clone made as carrel-qemu on a host whose reads allocate or not; *ret_before: the
 * balloon calls before it. */
static CarrelSession *
carrel_qemu_clone(Fixture *fx, gboolean reads_allocate, guint *ret_before)
{
    g_autoptr(GError) error = NULL;
    CarrelSessionRequest plain = {.template_name = (char *)"tiny"};
    CarrelSession *clone;

    fx->mgr->emulator = g_strdup("/usr/libexec/carrel/carrel-qemu");
    fx->mgr->reads_allocate = reads_allocate;
    *ret_before = carrel_hypervisor_fake_get_balloon_calls(fx->hv);
    clone = carrel_manager_session_create(fx->mgr, ADMIN, &plain, &error);
    if (!clone)
        fail_msg("clone: %s", error->message);
    assert_true(clone->from_warm);
    return clone;
}

static void
test_none_under_carrel_qemu(void **state)
{
    Fixture *fx = *state;
    g_autoptr(CarrelTemplate) tmpl G_GNUC_UNUSED = warm_tiny(fx);
    guint before;
    CarrelSession *clone = carrel_qemu_clone(fx, FALSE, &before);

    g_usleep(300 * 1000);
    assert_int_equal(carrel_hypervisor_fake_get_balloon_calls(fx->hv), before);
    carrel_session_free(clone);
}

/* A host that allocates on a read of untouched memory: carrel-qemu's clones hold all of their
 * guest's RAM after a restore, so they get the reclaim too. */
static void
test_carrel_qemu_where_reads_allocate(void **state)
{
    Fixture *fx = *state;
    g_autoptr(CarrelTemplate) tmpl G_GNUC_UNUSED = warm_tiny(fx);
    guint before;
    CarrelSession *clone = carrel_qemu_clone(fx, TRUE, &before);

    /* In and out. */
    for (int i = 0; i < 150 && carrel_hypervisor_fake_get_balloon_calls(fx->hv) < before + 2; i++)
        g_usleep(20 * 1000);
    assert_int_equal(carrel_hypervisor_fake_get_balloon_calls(fx->hv), before + 2);
    g_usleep(100 * 1000); /* the job's last steps, before the fixture goes */
    carrel_session_free(clone);
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_one_at_a_time, setup, teardown),
        cmocka_unit_test_setup_teardown(test_none_under_carrel_qemu, setup, teardown),
        cmocka_unit_test_setup_teardown(test_carrel_qemu_where_reads_allocate, setup, teardown),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
