/*
 * The emulator sessions start as (core-emulator.c): used where it is when libvirt's QEMU user
 * can run it there, copied into the state dir when a private folder hides it, refused when it
 * cannot be run at all, and named in the domain XML of a session.
 */
#include "core-fixture.h"

static CarrelManager *
manager_with(const char *dir, const char *emulator, GError **error)
{
    CarrelManagerConfig config = {0};
    g_autofree char *state_dir = g_build_filename(dir, "state", NULL);

    config.state_dir = state_dir;
    config.recipes_dir = dir;
    config.cache_dir = dir;
    config.accel = CARREL_ACCEL_TCG;
    config.emulator = emulator;
    return carrel_manager_new(&config, carrel_hypervisor_new_fake(), error);
}

/* A folder under tmp with an executable "qemu" in it, the folder of the given mode. */
static char *
program_in(const char *dir, int mode)
{
    char *path = g_build_filename(dir, "qemu", NULL);

    assert_int_equal(g_mkdir_with_parents(dir, 0700), 0);
    assert_true(carrel_util_write_file(path, "#!/bin/sh\nexit 0\n", -1, 0755, NULL));
    assert_int_equal(g_chmod(dir, mode), 0);
    return path;
}

static void
test_reachable_is_used_in_place(void **state)
{
    g_autofree char *dir = g_dir_make_tmp("carrel-emu-XXXXXX", NULL);
    g_autofree char *bin = g_build_filename(dir, "bin", NULL);
    g_autofree char *program = NULL;
    g_autoptr(GError) error = NULL;
    CarrelManager *mgr;

    (void)state;
    assert_int_equal(g_chmod(dir, 0755), 0);
    program = program_in(bin, 0755);
    mgr = manager_with(dir, program, &error);
    assert_null(error);
    assert_string_equal(mgr->emulator, program);
    carrel_manager_free(mgr);
    assert_true(carrel_util_remove_tree(dir, NULL));
}

static void
test_private_folder_is_copied(void **state)
{
    g_autofree char *dir = g_dir_make_tmp("carrel-emu-XXXXXX", NULL);
    g_autofree char *bin = g_build_filename(dir, "bin", NULL);
    g_autofree char *program = NULL;
    g_autofree char *want = NULL;
    g_autofree char *copied = NULL;
    g_autoptr(GError) error = NULL;
    CarrelManager *mgr;
    struct stat st;

    (void)state;
    assert_int_equal(g_chmod(dir, 0755), 0);
    program = program_in(bin, 0700);
    want = g_build_filename(dir, "state", "emulator", "carrel-qemu", NULL);
    mgr = manager_with(dir, program, &error);
    assert_null(error);
    assert_string_equal(mgr->emulator, want);
    assert_true(g_file_get_contents(want, &copied, NULL, NULL));
    assert_string_equal(copied, "#!/bin/sh\nexit 0\n");
    assert_int_equal(g_stat(want, &st), 0);
    assert_int_equal(st.st_mode & 07777, 0755);
    carrel_manager_free(mgr);
    /* A second start keeps the same copy (libvirt would probe a changed file again). */
    assert_int_equal(g_stat(want, &st), 0);
    {
        struct stat again;
        time_t before = st.st_mtime;

        mgr = manager_with(dir, program, &error);
        assert_null(error);
        assert_int_equal(g_stat(want, &again), 0);
        assert_int_equal(again.st_ino, st.st_ino);
        assert_int_equal(again.st_mtime, before);
        carrel_manager_free(mgr);
    }
    assert_int_equal(g_chmod(bin, 0755), 0);
    assert_true(carrel_util_remove_tree(dir, NULL));
}

static void
test_unrunnable_is_refused(void **state)
{
    g_autofree char *dir = g_dir_make_tmp("carrel-emu-XXXXXX", NULL);
    g_autofree char *missing = g_build_filename(dir, "no-such-qemu", NULL);
    g_autoptr(GError) error = NULL;

    (void)state;
    assert_null(manager_with(dir, missing, &error));
    assert_true(g_error_matches(error, CARREL_ERROR, CARREL_ERROR_INVALID_ARG));
    assert_non_null(strstr(error->message, "cannot be run"));
    g_clear_error(&error);
    assert_null(manager_with(dir, "qemu", &error));
    assert_non_null(strstr(error->message, "not an absolute path"));
    assert_true(carrel_util_remove_tree(dir, NULL));
}

static void
test_session_xml_names_it(void **state)
{
    Fixture *fx = *state;
    g_autoptr(GError) error = NULL;
    g_autoptr(CarrelTemplate) tmpl = import(fx, "tiny");
    g_autoptr(CarrelSession) session = create(fx, "one", &error);
    g_autofree char *xml = NULL;

    assert_null(error);
    /* The fixture's manager has none: libvirt's own QEMU, no element. */
    xml = carrel_manager_session_xml(fx->mgr, session, tmpl, &error);
    assert_null(error);
    assert_null(strstr(xml, "<emulator>"));
    g_free(xml);
    fx->mgr->emulator = g_strdup("/usr/libexec/carrel/carrel-qemu");
    xml = carrel_manager_session_xml(fx->mgr, session, tmpl, &error);
    assert_null(error);
    assert_non_null(strstr(xml, "<emulator>/usr/libexec/carrel/carrel-qemu</emulator>"));
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_reachable_is_used_in_place),
        cmocka_unit_test(test_private_folder_is_copied),
        cmocka_unit_test(test_unrunnable_is_refused),
        cmocka_unit_test_setup_teardown(test_session_xml_names_it, setup, teardown),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
