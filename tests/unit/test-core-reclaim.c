/*
 * A warm clone's memory reclaim (core-warm.c) on the fake: its balloon in, then out, and one
 * reclaim at a time daemon-wide, however many clones are made together; none when sessions run
 * as carrel-qemu (the fixture's manager names no emulator: libvirt's own QEMU), unless the host
 * allocates on reads of untouched memory.
 */
#include <unistd.h>

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

/* template warm of tiny once more; tiny itself. */
static CarrelTemplate *
warm_tiny_again(Fixture *fx)
{
    g_autoptr(GError) error = NULL;
    g_autoptr(CarrelJob) job = carrel_manager_template_warm(fx->mgr, ADMIN, "tiny", 0, &error);

    assert_non_null(job);
    if (!carrel_job_wait(job, &error))
        fail_msg("warm again: %s", error->message);
    return carrel_store_template_get(fx->mgr->store, "tiny", 0, NULL);
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

    g_free(fx->mgr->emulator);
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

/* tiny warmed as carrel-qemu where QEMU's user is known; its warm state, with a RAM file. */
static CarrelWarmState *
warm_with_memory_file(Fixture *fx)
{
    g_autoptr(CarrelTemplate) tmpl = NULL;
    CarrelWarmState *warm;

    carrel_hypervisor_fake_set_exec_result(fx->hv, 0, "{\"ready\":true}", "");
    carrel_hypervisor_fake_set_qemu_owner(fx->hv, TRUE);
    g_free(fx->mgr->emulator);
    fx->mgr->emulator = g_strdup("/usr/libexec/carrel/carrel-qemu");
    tmpl = warm_tiny(fx);
    warm = carrel_manager_template_warm_state(fx->mgr, "tiny", tmpl->version);
    assert_non_null(warm);
    assert_non_null(warm->memory_file);
    return warm;
}

/*
 * Where QEMU's user is known, carrel-qemu's warm state keeps guest RAM in a file (0600, that
 * user's): the saved domain writes it, each clone maps it privately, with free page reporting
 * off; and no clone gets a reclaim, whose balloon would punch holes into the file.
 */
static void
test_memory_file(void **state)
{
    Fixture *fx = *state;
    g_autoptr(CarrelWarmState) warm = warm_with_memory_file(fx);
    g_autoptr(CarrelSession) clone = NULL;
    g_autofree char *domain = NULL;
    g_autofree char *xml = NULL;
    g_autofree char *want = NULL;
    GStatBuf st;
    guint before;

    assert_string_equal(strrchr(warm->memory_file, '/'), "/memory.ram");
    assert_int_equal(g_stat(warm->memory_file, &st), 0);
    assert_int_equal(st.st_mode & 0777, 0600);
    assert_int_equal(st.st_uid, getuid());
    clone = carrel_qemu_clone(fx, TRUE, &before);
    assert_string_equal(clone->memory_file, warm->memory_file);
    domain = carrel_session_domain_name(clone->id);
    xml = carrel_hypervisor_fake_get_xml(fx->hv, domain);
    assert_non_null(xml);
    want = g_strdup_printf("value='private:%s'", warm->memory_file);
    assert_non_null(strstr(xml, want));
    assert_null(strstr(xml, "freePageReporting"));
    g_usleep(300 * 1000);
    assert_int_equal(carrel_hypervisor_fake_get_balloon_calls(fx->hv), before);
}

/* template warm again: the state stands while its RAM file has the guest's size (QEMU sizes
 * it; here the test does), and is made again, beside it, once the file is gone. */
static void
test_memory_file_gone(void **state)
{
    Fixture *fx = *state;
    g_autoptr(CarrelWarmState) first = warm_with_memory_file(fx);
    g_autoptr(CarrelWarmState) kept = NULL;
    g_autoptr(CarrelWarmState) again = NULL;

    assert_int_equal(truncate(first->memory_file, (off_t)first->memory_mib * 1024 * 1024), 0);
    carrel_template_free(warm_tiny_again(fx));
    kept = carrel_manager_template_warm_state(fx->mgr, "tiny", first->template_version);
    assert_string_equal(kept->memory_file, first->memory_file);
    assert_int_equal(g_unlink(first->memory_file), 0);
    carrel_template_free(warm_tiny_again(fx));
    again = carrel_manager_template_warm_state(fx->mgr, "tiny", first->template_version);
    assert_non_null(again->memory_file);
    assert_string_not_equal(again->memory_file, first->memory_file);
    assert_true(g_file_test(again->memory_file, G_FILE_TEST_EXISTS));
}

/* A carreld that runs no carrel-qemu (--emulator "") cannot map the RAM file: its creates boot. */
static void
test_memory_file_without_carrel_qemu(void **state)
{
    Fixture *fx = *state;
    g_autoptr(CarrelWarmState) warm = warm_with_memory_file(fx);
    g_autoptr(CarrelSession) booted = NULL;
    g_autoptr(GError) error = NULL;
    CarrelSessionRequest plain = {.template_name = (char *)"tiny"};

    g_clear_pointer(&fx->mgr->emulator, g_free);
    booted = carrel_manager_session_create(fx->mgr, ADMIN, &plain, &error);
    if (!booted)
        fail_msg("create: %s", error->message);
    assert_false(booted->from_warm);
    assert_null(booted->memory_file);
}

/* Under libvirt's own QEMU (no emulator) the RAM stays in the save image. */
static void
test_no_memory_file_without_carrel_qemu(void **state)
{
    Fixture *fx = *state;
    g_autoptr(CarrelTemplate) tmpl = NULL;
    g_autoptr(CarrelWarmState) warm = NULL;

    carrel_hypervisor_fake_set_exec_result(fx->hv, 0, "{\"ready\":true}", "");
    carrel_hypervisor_fake_set_qemu_owner(fx->hv, TRUE);
    tmpl = warm_tiny(fx);
    warm = carrel_manager_template_warm_state(fx->mgr, "tiny", tmpl->version);
    assert_non_null(warm);
    assert_null(warm->memory_file);
}

/* A clone of tiny with carreld's emulator set up as carreld does it (here /bin/true: any
 * program others may run stands where it is); QEMU's user known or not. Its domain's XML. */
static char *
cpu_cache_clone_xml(Fixture *fx, gboolean owner_known)
{
    g_autoptr(GError) error = NULL;
    g_autoptr(CarrelTemplate) tmpl = NULL;
    g_autoptr(CarrelSession) clone = NULL;
    g_autofree char *domain = NULL;
    CarrelSessionRequest plain = {.template_name = (char *)"tiny"};

    carrel_hypervisor_fake_set_exec_result(fx->hv, 0, "{\"ready\":true}", "");
    carrel_hypervisor_fake_set_qemu_owner(fx->hv, owner_known);
    g_clear_pointer(&fx->mgr->emulator, g_free);
    if (!carrel_manager_emulator_init(fx->mgr, "/bin/true", &error))
        fail_msg("emulator: %s", error->message);
    tmpl = warm_tiny(fx);
    clone = carrel_manager_session_create(fx->mgr, ADMIN, &plain, &error);
    if (!clone)
        fail_msg("clone: %s", error->message);
    domain = carrel_session_domain_name(clone->id);
    return carrel_hypervisor_fake_get_xml(fx->hv, domain);
}

/* Where QEMU's user is known, carreld keeps carrel-qemu's CPU cache in STATE/emulator/cpu
 * (0700, that user's) and names it in every domain's environment (the monitor relay). */
static void
test_cpu_cache(void **state)
{
    Fixture *fx = *state;
    g_autofree char *xml = cpu_cache_clone_xml(fx, TRUE);
    g_autofree char *dir = g_build_filename(fx->mgr->state_dir, "emulator", "cpu", NULL);
    g_autofree char *want = NULL;
    GStatBuf st;

    assert_string_equal(fx->mgr->cpu_cache, dir);
    assert_int_equal(g_lstat(dir, &st), 0);
    assert_true(S_ISDIR(st.st_mode));
    assert_int_equal(st.st_mode & 0777, 0700);
    assert_int_equal(st.st_uid, getuid());
    want = g_strdup_printf("<qemu:env name='CARREL_QEMU_CPU_CACHE' value='%s'/>", dir);
    assert_non_null(xml);
    assert_non_null(strstr(xml, want));
}

/* Where it is not (a fake without QEMU, a confined QEMU), no folder and no relay. */
static void
test_no_cpu_cache_without_qemu_user(void **state)
{
    Fixture *fx = *state;
    g_autofree char *xml = cpu_cache_clone_xml(fx, FALSE);
    g_autofree char *dir = g_build_filename(fx->mgr->state_dir, "emulator", "cpu", NULL);

    assert_null(fx->mgr->cpu_cache);
    assert_false(g_file_test(dir, G_FILE_TEST_EXISTS));
    assert_non_null(xml);
    assert_null(strstr(xml, "CARREL_QEMU_CPU_CACHE"));
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_one_at_a_time, setup, teardown),
        cmocka_unit_test_setup_teardown(test_none_under_carrel_qemu, setup, teardown),
        cmocka_unit_test_setup_teardown(test_carrel_qemu_where_reads_allocate, setup, teardown),
        cmocka_unit_test_setup_teardown(test_memory_file, setup, teardown),
        cmocka_unit_test_setup_teardown(test_memory_file_gone, setup, teardown),
        cmocka_unit_test_setup_teardown(test_memory_file_without_carrel_qemu, setup, teardown),
        cmocka_unit_test_setup_teardown(test_no_memory_file_without_carrel_qemu, setup, teardown),
        cmocka_unit_test_setup_teardown(test_cpu_cache, setup, teardown),
        cmocka_unit_test_setup_teardown(test_no_cpu_cache_without_qemu_user, setup, teardown),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
