/* The core tests' fixture: a manager over the fake hypervisor (core-fixture.h). */
#include "core-fixture.h"

/* The principal these tests act as: an admin, who may do everything (test-policy.c and the
 * role matrix tests cover the others). */
const CarrelPrincipal test_admin = {
    .token_id = (char *)"t-admin", .label = (char *)"admin", .role = CARREL_ROLE_ADMIN};

/* A desktop that is drawn: not blank. */
const guint8 core_fixture_picture[] = "P6\n4 3\n255\n"
                                      "\x10\x20\x30\xff\x00\x00\x00\xff\x00\x00\x00\xff"
                                      "\x80\x80\x80\x20\x40\x60\xff\xff\x00\x00\xff\xff"
                                      "\x01\x02\x03\x40\x50\x60\x70\x80\x90\xa0\xb0\xc0";
const gsize core_fixture_picture_len = sizeof(core_fixture_picture) - 1;

int
setup(void **state)
{
    Fixture *fx = g_new0(Fixture, 1);
    g_autofree char *state_dir = NULL;
    g_autofree char *policies = NULL;
    g_autofree char *small = NULL;
    const char *create[] = {"qemu-img", "create", "-q", "-f", "qcow2", NULL, "32M", NULL};
    CarrelManagerConfig config = {0};
    g_autoptr(GError) error = NULL;

    fx->dir = g_dir_make_tmp("carrel-core-XXXXXX", NULL);
    fx->disk = g_build_filename(fx->dir, "disk.qcow2", NULL);
    fx->kernel = g_build_filename(fx->dir, "vmlinuz", NULL);
    create[5] = fx->disk;
    assert_true(carrel_util_run(create, 30, NULL, NULL, &error));
    assert_true(carrel_util_write_file(fx->kernel, "k", 1, 0644, NULL));
    state_dir = g_build_filename(fx->dir, "state", NULL);
    policies = g_build_filename(fx->dir, "policies", NULL);
    small = g_build_filename(policies, "small.policy", NULL);
    assert_int_equal(g_mkdir_with_parents(policies, 0755), 0);
    assert_true(carrel_util_write_file(small, CORE_FIXTURE_SMALL_POLICY, -1, 0644, NULL));
    config.policy_dir = policies;
    config.state_dir = state_dir;
    config.recipes_dir = fx->dir;
    config.cache_dir = fx->dir;
    config.accel = CARREL_ACCEL_TCG;
    config.agent_timeout_s = 2;
    config.screen_grace_s = 1;
    config.screen_poll_ms = 50;
    fx->hv = carrel_hypervisor_new_fake();
    /* Guests have carrel-guest and draw a desktop, unless a test says otherwise. */
    carrel_hypervisor_fake_set_exec_result(fx->hv, 0, "{\"ready\":true}", "");
    {
        g_autoptr(GBytes) screen =
            g_bytes_new_static(core_fixture_picture, core_fixture_picture_len);
        carrel_hypervisor_fake_set_screen(fx->hv, screen);
    }
    fx->mgr = carrel_manager_new(&config, fx->hv, &error);
    assert_non_null(fx->mgr);
    *state = fx;
    return 0;
}

int
teardown(void **state)
{
    Fixture *fx = *state;

    carrel_manager_free(fx->mgr);
    carrel_util_remove_tree(fx->dir, NULL);
    g_free(fx->dir);
    g_free(fx->disk);
    g_free(fx->kernel);
    g_free(fx);
    return 0;
}

CarrelTemplate *
import(Fixture *fx, const char *name)
{
    CarrelTemplateImport req = {
        .name = (char *)name,
        .disk = fx->disk,
        .format = (char *)"qcow2",
        .boot = CARREL_BOOT_DIRECT,
        .kernel = fx->kernel,
        .cmdline = (char *)"root=/dev/vda",
    };
    g_autoptr(GError) error = NULL;
    CarrelTemplate *tmpl = carrel_manager_template_import(fx->mgr, ADMIN, &req, &error);

    if (!tmpl)
        fail_msg("import: %s", error->message);
    return tmpl;
}

CarrelSession *
create(Fixture *fx, const char *name, GError **error)
{
    CarrelSessionRequest req = {.template_name = (char *)"tiny", .name = (char *)name};

    return carrel_manager_session_create(fx->mgr, ADMIN, &req, error);
}

/* The seq of a session's first event, its creation (by ADMIN): later events follow it. */
gint64
after_create(Fixture *fx, const char *id)
{
    g_autoptr(GPtrArray) events = carrel_manager_session_events(fx->mgr, ADMIN, id, 0, 1, NULL);
    CarrelEvent *ev;

    assert_non_null(events);
    assert_int_equal(events->len, 1);
    ev = g_ptr_array_index(events, 0);
    assert_string_equal(ev->kind, "lifecycle");
    assert_string_equal(ev->action, "create");
    assert_string_equal(ev->actor, "admin");
    return ev->seq;
}
