/*
 * Recovery after a crash (core-recover.c, core-reconcile.c) on the fake hypervisor: each
 * intent a dead carreld could leave, with the domain and files as the crash left them, and
 * what reconcile makes of it. The real crash matrix (tests/e2e/crash.sh) kills carreld at
 * every crash point on real VMs; these pin each decision down.
 */
#include <sys/stat.h>
#include <unistd.h>

#include "tests/unit/core-fixture.h"

static CarrelSession *
session_of(Fixture *fx, const char *id)
{
    CarrelSession *s = carrel_store_session_get(fx->mgr->store, id, NULL);

    assert_non_null(s);
    return s;
}

static guint
intents_left(Fixture *fx)
{
    g_autoptr(GPtrArray) all = carrel_store_intent_list(fx->mgr->store, NULL);

    assert_non_null(all);
    return all->len;
}

/* The intent take_snapshot records for a running session, with a fixed snapshot id. */
static void
snapshot_intent(Fixture *fx, const CarrelSession *s, const char *memory, const char *top)
{
    g_autofree char *data = g_strdup_printf(
        "{\"snapshot\":\"p-00000000000a\",\"name\":\"s1\",\"memory\":\"%s\",\"layer\":\"%s\","
        "\"top\":\"%s\",\"running\":true,\"created_at\":1}",
        memory, s->overlay_path, top);

    assert_true(carrel_store_intent_put(fx->mgr->store, s->id, "snapshot", data, NULL));
}

static void
reconcile(Fixture *fx, CarrelReconcileReport *report)
{
    g_autoptr(GError) error = NULL;

    if (!carrel_manager_reconcile(fx->mgr, report, &error))
        fail_msg("reconcile: %s", error->message);
    assert_int_equal(intents_left(fx), 0);
}

/* Killed before the save: the domain still runs on its disk; the snapshot is rolled back. */
static void
test_snapshot_before_save(void **state)
{
    Fixture *fx = *state;
    g_autoptr(CarrelTemplate) tmpl G_GNUC_UNUSED = import(fx, "tiny");
    g_autoptr(CarrelSession) s = create(fx, "snap", NULL);
    g_autofree char *dir = g_build_filename(s->dir, "snapshots", "p-00000000000a", NULL);
    g_autofree char *memory = g_build_filename(dir, "memory.save", NULL);
    g_autofree char *top = g_build_filename(s->dir, "top-x.qcow2", NULL);
    g_autoptr(CarrelSession) after = NULL;
    CarrelReconcileReport report;

    assert_int_equal(g_mkdir_with_parents(dir, 0700), 0);
    snapshot_intent(fx, s, memory, top);
    reconcile(fx, &report);
    assert_int_equal(report.recovered, 1);
    after = session_of(fx, s->id);
    assert_int_equal(after->state, CARREL_SESSION_RUNNING);
    assert_string_equal(after->overlay_path, s->overlay_path);
    assert_null(carrel_store_snapshot_get(fx->mgr->store, s->id, "s1", NULL));
    assert_false(g_file_test(dir, G_FILE_TEST_EXISTS));
}

/* Killed after the save and the undefine: the snapshot is finished, memory restored. */
static void
test_snapshot_after_save(void **state)
{
    Fixture *fx = *state;
    g_autoptr(CarrelTemplate) tmpl G_GNUC_UNUSED = import(fx, "tiny");
    g_autoptr(CarrelSession) s = create(fx, "snap", NULL);
    g_autofree char *domain = carrel_session_domain_name(s->id);
    g_autofree char *dir = g_build_filename(s->dir, "snapshots", "p-00000000000a", NULL);
    g_autofree char *memory = g_build_filename(dir, "memory.save", NULL);
    g_autofree char *top = g_build_filename(s->dir, "top-x.qcow2", NULL);
    g_autoptr(CarrelSession) after = NULL;
    g_autoptr(CarrelSnapshot) snap = NULL;
    CarrelReconcileReport report;
    CarrelDomainState ds;

    assert_int_equal(g_mkdir_with_parents(dir, 0700), 0);
    snapshot_intent(fx, s, memory, top);
    assert_true(carrel_hypervisor_save(fx->hv, domain, memory, NULL));
    assert_true(carrel_hypervisor_undefine(fx->hv, domain, NULL));
    reconcile(fx, &report);
    assert_int_equal(report.recovered, 1);
    assert_int_equal(report.vanished + report.stopped, 0);
    after = session_of(fx, s->id);
    assert_int_equal(after->state, CARREL_SESSION_RUNNING);
    assert_string_equal(after->overlay_path, top);
    snap = carrel_store_snapshot_get(fx->mgr->store, s->id, "s1", NULL);
    assert_non_null(snap);
    assert_string_equal(after->head_snapshot, snap->id);
    assert_true(carrel_hypervisor_get_state(fx->hv, domain, &ds, NULL));
    assert_int_equal(ds, CARREL_DOMAIN_RUNNING);
}

/* Killed after the restore onto the new top: the domain is kept, the snapshot stored. */
static void
test_snapshot_after_restore(void **state)
{
    Fixture *fx = *state;
    g_autoptr(CarrelTemplate) tmpl G_GNUC_UNUSED = import(fx, "tiny");
    g_autoptr(CarrelSession) s = create(fx, "snap", NULL);
    g_autofree char *domain = carrel_session_domain_name(s->id);
    g_autofree char *dir = g_build_filename(s->dir, "snapshots", "p-00000000000a", NULL);
    g_autofree char *memory = g_build_filename(dir, "memory.save", NULL);
    g_autofree char *top = g_build_filename(s->dir, "top-x.qcow2", NULL);
    g_autoptr(CarrelSession) moved = session_of(fx, s->id);
    g_autoptr(CarrelSession) after = NULL;
    g_autoptr(CarrelSnapshot) snap = NULL;
    CarrelReconcileReport report;

    assert_int_equal(g_mkdir_with_parents(dir, 0700), 0);
    snapshot_intent(fx, s, memory, top);
    assert_true(carrel_hypervisor_save(fx->hv, domain, memory, NULL));
    assert_true(carrel_hypervisor_undefine(fx->hv, domain, NULL));
    assert_true(carrel_disk_create_overlay(top, s->overlay_path, "qcow2", NULL));
    assert_true(carrel_manager_restore_onto(fx->mgr, moved, memory, top, NULL));
    reconcile(fx, &report);
    assert_int_equal(report.recovered, 1);
    after = session_of(fx, s->id);
    assert_int_equal(after->state, CARREL_SESSION_RUNNING);
    assert_string_equal(after->overlay_path, top);
    snap = carrel_store_snapshot_get(fx->mgr->store, s->id, "s1", NULL);
    assert_non_null(snap);
}

/* A memory file that never completed cannot be restored: stopped, and saying why. */
static void
test_snapshot_memory_incomplete(void **state)
{
    Fixture *fx = *state;
    g_autoptr(CarrelTemplate) tmpl G_GNUC_UNUSED = import(fx, "tiny");
    g_autoptr(CarrelSession) s = create(fx, "snap", NULL);
    g_autofree char *domain = carrel_session_domain_name(s->id);
    g_autofree char *dir = g_build_filename(s->dir, "snapshots", "p-00000000000a", NULL);
    g_autofree char *memory = g_build_filename(dir, "memory.save", NULL);
    g_autofree char *top = g_build_filename(s->dir, "top-x.qcow2", NULL);
    g_autoptr(CarrelSession) after = NULL;
    CarrelReconcileReport report;

    assert_int_equal(g_mkdir_with_parents(dir, 0700), 0);
    snapshot_intent(fx, s, memory, top);
    assert_true(carrel_hypervisor_destroy(fx->hv, domain, NULL));
    assert_true(g_file_set_contents(memory, "LibvirtQemudPart", -1, NULL));
    reconcile(fx, &report);
    assert_int_equal(report.lost, 1);
    after = session_of(fx, s->id);
    assert_int_equal(after->state, CARREL_SESSION_STOPPED);
    assert_non_null(strstr(after->state_reason, "snapshot was cut short"));
}

/* A revert whose old domain still runs is rolled back; one past the destroy is finished. */
static void
test_revert(void **state)
{
    Fixture *fx = *state;
    g_autoptr(CarrelTemplate) tmpl G_GNUC_UNUSED = import(fx, "tiny");
    g_autoptr(CarrelSession) s = create(fx, "rev", NULL);
    g_autofree char *domain = carrel_session_domain_name(s->id);
    g_autoptr(CarrelSnapshot) snap =
        carrel_manager_snapshot_create(fx->mgr, ADMIN, "rev", "s1", NULL);
    g_autoptr(CarrelSession) now = session_of(fx, s->id);
    g_autofree char *top = g_build_filename(s->dir, "top-r.qcow2", NULL);
    g_autofree char *data =
        g_strdup_printf("{\"snapshot\":\"%s\",\"top\":\"%s\",\"old_top\":\"%s\"}", snap->id, top,
                        now->overlay_path);
    g_autoptr(CarrelSession) after = NULL;
    CarrelReconcileReport report;

    assert_true(carrel_store_intent_put(fx->mgr->store, s->id, "revert", data, NULL));
    assert_true(g_file_set_contents(top, "half", -1, NULL));
    reconcile(fx, &report);
    after = session_of(fx, s->id);
    assert_string_equal(after->overlay_path, now->overlay_path);
    assert_false(g_file_test(top, G_FILE_TEST_EXISTS));
    g_clear_pointer(&after, carrel_session_free);

    assert_true(carrel_store_intent_put(fx->mgr->store, s->id, "revert", data, NULL));
    assert_true(carrel_hypervisor_destroy(fx->hv, domain, NULL));
    assert_true(carrel_hypervisor_undefine(fx->hv, domain, NULL));
    reconcile(fx, &report);
    assert_int_equal(report.recovered, 1);
    after = session_of(fx, s->id);
    assert_int_equal(after->state, CARREL_SESSION_RUNNING);
    assert_string_equal(after->overlay_path, top);
    assert_false(g_file_test(now->overlay_path, G_FILE_TEST_EXISTS));
}

/* A hibernate whose save finished becomes one; a wake whose restore ran becomes running. */
static void
test_hibernate_and_wake(void **state)
{
    Fixture *fx = *state;
    g_autoptr(CarrelTemplate) tmpl G_GNUC_UNUSED = import(fx, "tiny");
    g_autoptr(CarrelSession) s = create(fx, "hib", NULL);
    g_autofree char *domain = carrel_session_domain_name(s->id);
    g_autofree char *path = g_build_filename(s->dir, "hibernate.save", NULL);
    g_autofree char *xml = NULL;
    CarrelReconcileReport report;

    assert_true(carrel_store_intent_put(fx->mgr->store, s->id, "hibernate", "{}", NULL));
    assert_true(carrel_hypervisor_save(fx->hv, domain, path, NULL));
    reconcile(fx, &report);
    assert_int_equal(report.recovered, 1);
    {
        g_autoptr(CarrelSession) after = session_of(fx, s->id);
        assert_int_equal(after->state, CARREL_SESSION_HIBERNATED);
    }
    /* The wake's restore ran, the domain is transient, the row still says hibernated. */
    xml = carrel_hypervisor_saveimage_get_xml(path, NULL);
    assert_non_null(xml);
    assert_true(carrel_store_intent_put(fx->mgr->store, s->id, "wake", "{}", NULL));
    assert_true(carrel_hypervisor_restore(fx->hv, path, xml, NULL));
    reconcile(fx, &report);
    {
        g_autoptr(CarrelSession) after = session_of(fx, s->id);
        assert_int_equal(after->state, CARREL_SESSION_RUNNING);
        assert_false(g_file_test(path, G_FILE_TEST_EXISTS));
    }
}

/* A hibernated row whose domain runs (no intent at all) is running. */
static void
test_hibernated_row_running(void **state)
{
    Fixture *fx = *state;
    g_autoptr(CarrelTemplate) tmpl G_GNUC_UNUSED = import(fx, "tiny");
    g_autoptr(CarrelSession) s = create(fx, "hib", NULL);
    g_autoptr(CarrelSession) after = NULL;
    CarrelReconcileReport report;

    assert_true(carrel_store_session_set_state(fx->mgr->store, s->id, CARREL_SESSION_HIBERNATED,
                                               NULL, NULL));
    reconcile(fx, &report);
    assert_int_equal(report.adopted, 1);
    after = session_of(fx, s->id);
    assert_int_equal(after->state, CARREL_SESSION_RUNNING);
}

/* A destroy cut short is finished: domain, files and row. */
static void
test_destroy(void **state)
{
    Fixture *fx = *state;
    g_autoptr(CarrelTemplate) tmpl G_GNUC_UNUSED = import(fx, "tiny");
    g_autoptr(CarrelSession) s = create(fx, "gone", NULL);
    g_autofree char *domain = carrel_session_domain_name(s->id);
    g_autoptr(CarrelSession) after = NULL;
    CarrelReconcileReport report;
    CarrelDomainState ds;

    assert_true(carrel_store_intent_put(fx->mgr->store, s->id, "destroy", "{}", NULL));
    assert_true(carrel_hypervisor_destroy(fx->hv, domain, NULL));
    reconcile(fx, &report);
    after = session_of(fx, s->id);
    assert_int_equal(after->state, CARREL_SESSION_DESTROYED);
    assert_false(g_file_test(s->dir, G_FILE_TEST_EXISTS));
    assert_false(carrel_hypervisor_get_state(fx->hv, domain, &ds, NULL));
}

/* Every crash point is a known name; an unknown one is refused (carreld says so at start). */
static void
test_crash_points(void **state)
{
    const char *const *points = carrel_crash_points();
    g_autoptr(GError) error = NULL;
    guint n = 0;

    for (; points[n]; n++)
        assert_non_null(strchr(points[n], '.'));
    assert_true(n >= 20);
    assert_false(carrel_crash_arm("no.such.point", &error));
    assert_int_equal(error->code, CARREL_ERROR_INVALID_ARG);
}

/* A manager over the fake hypervisor, state in dir/state (no fixture: a test reopens it). */
static CarrelManager *
open_manager(const char *dir)
{
    CarrelManagerConfig config = {0};
    g_autofree char *state_dir = g_build_filename(dir, "state", NULL);
    g_autoptr(GError) error = NULL;
    CarrelManager *mgr;

    config.state_dir = state_dir;
    config.recipes_dir = dir;
    config.cache_dir = dir;
    config.accel = CARREL_ACCEL_TCG;
    mgr = carrel_manager_new(&config, carrel_hypervisor_new_fake(), &error);
    assert_null(error);
    assert_non_null(mgr);
    return mgr;
}

/*
 * A restore's FIFO folder that a killed carreld left in its scratch folder is gone when the
 * next one opens, without following a link out of it; other files there are kept.
 */
static void
test_stale_scratch(void **state)
{
    g_autofree char *dir = g_dir_make_tmp("carrel-scratch-XXXXXX", NULL);
    g_autofree char *run = g_build_filename(dir, "state", "run", NULL);
    g_autofree char *stale = g_build_filename(run, "restore-AB12CD", NULL);
    g_autofree char *fifo = g_build_filename(stale, "memory.fifo", NULL);
    g_autofree char *link = g_build_filename(stale, "out", NULL);
    g_autofree char *outside = g_build_filename(dir, "outside", NULL);
    g_autofree char *other = g_build_filename(run, "other", NULL);
    CarrelManager *mgr = open_manager(dir);

    assert_string_equal(carrel_hypervisor_get_scratch_dir(carrel_manager_get_hypervisor(mgr)), run);
    carrel_manager_free(mgr);
    assert_int_equal(g_mkdir(stale, 0700), 0);
    assert_int_equal(mkfifo(fifo, 0600), 0);
    assert_int_equal(g_mkdir(outside, 0700), 0);
    assert_int_equal(symlink(outside, link), 0);
    assert_true(carrel_util_write_file(other, "x", 1, 0600, NULL));

    mgr = open_manager(dir);
    assert_false(g_file_test(stale, G_FILE_TEST_EXISTS));
    assert_true(g_file_test(outside, G_FILE_TEST_IS_DIR));
    assert_true(g_file_test(other, G_FILE_TEST_EXISTS));
    carrel_manager_free(mgr);
    assert_true(carrel_util_remove_tree(dir, NULL));
    (void)state;
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_snapshot_before_save, setup, teardown),
        cmocka_unit_test_setup_teardown(test_snapshot_after_save, setup, teardown),
        cmocka_unit_test_setup_teardown(test_snapshot_after_restore, setup, teardown),
        cmocka_unit_test_setup_teardown(test_snapshot_memory_incomplete, setup, teardown),
        cmocka_unit_test_setup_teardown(test_revert, setup, teardown),
        cmocka_unit_test_setup_teardown(test_hibernate_and_wake, setup, teardown),
        cmocka_unit_test_setup_teardown(test_hibernated_row_running, setup, teardown),
        cmocka_unit_test_setup_teardown(test_destroy, setup, teardown),
        cmocka_unit_test(test_crash_points),
        cmocka_unit_test(test_stale_scratch),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
