/*
 * Template builds (core-build.c) into a cache that two carrelds share: the recipe runs once, the
 * other carreld waits for it and imports the same entry.
 */
#include "core-fixture.h"

/* Counts its runs beside the recipes (outside the recipe's folder, which its hash covers), and
 * takes long enough that two builds started together overlap. */
static const char slow_recipe[] = "#!/bin/sh\n"
                                  "set -e\n"
                                  "echo run >> \"$(dirname \"$0\")/../runs\"\n"
                                  "sleep 1\n"
                                  "qemu-img create -q -f qcow2 \"$1/disk.qcow2\" 32M\n"
                                  "echo k > \"$1/vmlinuz\"\n"
                                  "echo i > \"$1/initrd.img\"\n"
                                  "echo root=/dev/vda > \"$1/cmdline\"\n";

/* A second manager on the fixture's recipes and cache, with its own state. */
static CarrelManager *
second_manager(Fixture *fx)
{
    g_autofree char *state_dir = g_build_filename(fx->dir, "state2", NULL);
    g_autofree char *policies = g_build_filename(fx->dir, "policies", NULL);
    CarrelManagerConfig config = {0};
    g_autoptr(GError) error = NULL;
    CarrelManager *mgr;

    config.policy_dir = policies;
    config.state_dir = state_dir;
    config.recipes_dir = fx->dir;
    config.cache_dir = fx->dir;
    config.accel = CARREL_ACCEL_TCG;
    mgr = carrel_manager_new(&config, carrel_hypervisor_new_fake(), &error);
    if (!mgr)
        fail_msg("second manager: %s", error->message);
    return mgr;
}

static void
test_shared_cache_builds_once(void **state)
{
    Fixture *fx = *state;
    g_autofree char *recipe = g_build_filename(fx->dir, "tiny", NULL);
    g_autofree char *script = g_build_filename(recipe, "build", NULL);
    g_autofree char *runs_path = g_build_filename(fx->dir, "runs", NULL);
    g_autofree char *runs = NULL;
    CarrelManager *other = second_manager(fx);
    g_autoptr(GError) error = NULL;
    g_autoptr(CarrelJob) first = NULL;
    g_autoptr(CarrelJob) second = NULL;
    g_autoptr(CarrelTemplate) a = NULL;
    g_autoptr(CarrelTemplate) b = NULL;

    assert_int_equal(g_mkdir_with_parents(recipe, 0755), 0);
    assert_true(carrel_util_write_file(script, slow_recipe, -1, 0755, NULL));
    first = carrel_manager_template_build(fx->mgr, ADMIN, "tiny", &error);
    assert_non_null(first);
    second = carrel_manager_template_build(other, ADMIN, "tiny", &error);
    assert_non_null(second);
    if (!carrel_job_wait(first, &error) || !carrel_job_wait(second, &error))
        fail_msg("build: %s", error->message);
    assert_true(g_file_get_contents(runs_path, &runs, NULL, NULL));
    assert_string_equal(runs, "run\n");
    /* Both imported the one entry. */
    a = carrel_manager_template_get(fx->mgr, ADMIN, "tiny", 0, &error);
    b = carrel_manager_template_get(other, ADMIN, "tiny", 0, &error);
    assert_non_null(a);
    assert_non_null(b);
    assert_string_equal(a->recipe_hash, b->recipe_hash);
    carrel_manager_free(other);
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_shared_cache_builds_once, setup, teardown),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
