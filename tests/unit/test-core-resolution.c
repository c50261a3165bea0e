/*
 * A session's own screen size over the fake (whose carrel-guest screen sets the size its
 * screenshots then have, and whose boots and restores show the image's size again): set at
 * create, after every restore, used by input, and a template's defaults.
 */
#include "core-fixture.h"

static JsonNode *
computer(Fixture *fx, const char *id, const char *json, GError **error)
{
    g_autoptr(JsonNode) body = json_from_string(json, NULL);

    assert_non_null(body);
    return carrel_manager_session_computer(fx->mgr, ADMIN, id, body, error);
}

/* The guest's screen now, as an agent sees it (screen_size measures a screenshot). */
static void
assert_screen(Fixture *fx, const char *id, guint width, guint height)
{
    g_autoptr(GError) error = NULL;
    g_autoptr(JsonNode) reply = computer(fx, id, "{\"action\":\"screen_size\"}", &error);
    JsonObject *screen;

    if (!reply)
        fail_msg("screen_size: %s", error->message);
    screen = json_object_get_object_member(json_node_get_object(reply), "screen");
    assert_non_null(screen);
    assert_int_equal(json_object_get_int_member(screen, "width"), width);
    assert_int_equal(json_object_get_int_member(screen, "height"), height);
}

static CarrelSession *
create_sized(Fixture *fx, const char *name, guint width, guint height, GError **error)
{
    CarrelSessionRequest req = {.template_name = (char *)"tiny",
                                .name = (char *)name,
                                .screen_width = width,
                                .screen_height = height};

    return carrel_manager_session_create(fx->mgr, ADMIN, &req, error);
}

/* The tablet value of the last absolute x the fake received. */
static int
last_abs_x(Fixture *fx)
{
    g_autoptr(GPtrArray) sent = carrel_hypervisor_fake_get_hid(fx->hv);
    int value = -1;

    for (guint i = 0; i < sent->len; i++) {
        const char *at = strstr(g_ptr_array_index(sent, i), "\"axis\":\"x\",\"value\":");
        if (at)
            value = atoi(at + strlen("\"axis\":\"x\",\"value\":"));
    }
    return value;
}

static void
test_create_with_screen(void **state)
{
    Fixture *fx = *state;
    g_autoptr(CarrelTemplate) tmpl G_GNUC_UNUSED = import(fx, "tiny");
    g_autoptr(GError) error = NULL;
    g_autoptr(CarrelSession) s = create_sized(fx, "wide", 1280, 800, &error);
    g_autoptr(CarrelSession) got = NULL;
    g_autoptr(CarrelSession) plain = NULL;
    g_autoptr(JsonNode) json = NULL;
    g_autoptr(JsonNode) ok = NULL;
    g_autofree char *domain = NULL;
    g_auto(GStrv) argv = NULL;
    guint w = 0, h = 0;

    if (!s)
        fail_msg("create: %s", error->message);
    assert_int_equal(s->screen_width, 1280);
    assert_int_equal(s->screen_height, 800);
    json = carrel_session_to_json(s);
    assert_string_equal(json_object_get_string_member(json_node_get_object(json), "screen"),
                        "1280x800");
    domain = carrel_session_domain_name(s->id);
    carrel_hypervisor_fake_get_screen(fx->hv, domain, &w, &h);
    assert_int_equal(w, 1280);
    assert_int_equal(h, 800);
    argv = carrel_hypervisor_fake_get_exec_argv(fx->hv);
    assert_string_equal(argv[1], "screen");
    assert_string_equal(argv[2], "1280x800");
    got = carrel_manager_session_get(fx->mgr, ADMIN, "wide", &error);
    assert_int_equal(got->screen_width, 1280);
    assert_screen(fx, s->id, 1280, 800);

    /* Clicks are checked and mapped against this size: the last pixel is the tablet's edge. */
    ok = computer(fx, s->id, "{\"action\":\"left_click\",\"coordinate\":[1279,10]}", &error);
    assert_non_null(ok);
    assert_int_equal(last_abs_x(fx), CARREL_HID_ABS_MAX);
    assert_null(
        computer(fx, s->id, "{\"action\":\"left_click\",\"coordinate\":[1280,10]}", &error));
    assert_true(g_error_matches(error, CARREL_ERROR, CARREL_ERROR_INVALID_ARG));
    g_clear_error(&error);

    /* Without a size the session keeps the image's own, and nothing is run for it. */
    plain = create(fx, "plain", &error);
    assert_non_null(plain);
    assert_int_equal(plain->screen_width, 0);
    json_node_unref(json);
    json = carrel_session_to_json(plain);
    assert_true(json_object_get_null_member(json_node_get_object(json), "screen"));
    assert_screen(fx, plain->id, 4, 3);
}

/* Every restore shows the size the image was saved with: the session's is set again. */
static void
test_screen_after_restores(void **state)
{
    Fixture *fx = *state;
    g_autoptr(CarrelTemplate) tmpl G_GNUC_UNUSED = import(fx, "tiny");
    g_autoptr(GError) error = NULL;
    g_autoptr(CarrelSession) s = create_sized(fx, "small", 800, 600, &error);
    g_autoptr(CarrelSnapshot) snap = NULL;
    g_autoptr(CarrelSession) after = NULL;
    g_autoptr(GPtrArray) forks = NULL;
    guint calls;

    assert_non_null(s);
    snap = carrel_manager_snapshot_create(fx->mgr, ADMIN, s->id, "one", &error);
    if (!snap)
        fail_msg("snapshot: %s", error->message);
    calls = carrel_hypervisor_fake_get_screen(fx->hv, NULL, NULL, NULL);
    after = carrel_manager_snapshot_revert(fx->mgr, ADMIN, s->id, "one", &error);
    if (!after)
        fail_msg("revert: %s", error->message);
    /* The screen is set after the reply: an agent's call waits for it at the door. */
    assert_screen(fx, s->id, 800, 600);
    assert_true(carrel_hypervisor_fake_get_screen(fx->hv, NULL, NULL, NULL) > calls);
    g_clear_pointer(&after, carrel_session_free);

    after = carrel_manager_session_hibernate(fx->mgr, ADMIN, s->id, &error);
    assert_non_null(after);
    g_clear_pointer(&after, carrel_session_free);
    after = carrel_manager_session_resume(fx->mgr, ADMIN, s->id, &error);
    if (!after)
        fail_msg("resume: %s", error->message);
    assert_screen(fx, s->id, 800, 600);
    g_clear_pointer(&after, carrel_session_free);

    after = carrel_manager_session_stop(fx->mgr, ADMIN, s->id, 1, &error);
    assert_non_null(after);
    g_clear_pointer(&after, carrel_session_free);
    after = carrel_manager_session_start(fx->mgr, ADMIN, s->id, &error);
    if (!after)
        fail_msg("start: %s", error->message);
    assert_screen(fx, s->id, 800, 600);

    forks = carrel_manager_session_fork(fx->mgr, ADMIN, s->id, "one", 1, &error);
    if (!forks)
        fail_msg("fork: %s", error->message);
    assert_int_equal(((CarrelSession *)g_ptr_array_index(forks, 0))->screen_width, 800);
    assert_screen(fx, ((CarrelSession *)g_ptr_array_index(forks, 0))->id, 800, 600);
}

/* A guest that cannot take the size: the create fails saying so, and leaves nothing. */
static void
test_screen_refused(void **state)
{
    Fixture *fx = *state;
    g_autoptr(CarrelTemplate) tmpl G_GNUC_UNUSED = import(fx, "tiny");
    g_autoptr(GError) error = NULL;
    g_autoptr(GPtrArray) all = NULL;
    g_autoptr(GPtrArray) domains = NULL;

    carrel_hypervisor_fake_set_screen_refused(fx->hv, TRUE);
    assert_null(create_sized(fx, "refused", 1024, 768, &error));
    assert_true(g_error_matches(error, CARREL_ERROR, CARREL_ERROR_FAILED));
    assert_non_null(strstr(error->message, "screen '1024x768'"));
    all = carrel_manager_session_list(fx->mgr, ADMIN, FALSE, NULL);
    assert_int_equal(all->len, 0);
    domains = carrel_hypervisor_list(fx->hv, NULL);
    assert_non_null(domains);
    assert_int_equal(domains->len, 0);
}

/* A template that declares defaults: the request wins, then them, then carreld's. */
static CarrelTemplate *
import_with_defaults(Fixture *fx)
{
    g_autoptr(CarrelTemplate) defaults = carrel_template_new();
    CarrelTemplateImport req = {
        .name = (char *)"tiny",
        .disk = fx->disk,
        .format = (char *)"qcow2",
        .boot = CARREL_BOOT_DIRECT,
        .kernel = fx->kernel,
        .cmdline = (char *)"root=/dev/vda",
        .defaults = defaults,
    };
    g_autoptr(GError) error = NULL;
    CarrelTemplate *tmpl;

    defaults->default_vcpus = 2;
    defaults->default_memory_mib = 2048;
    defaults->default_screen_width = 1024;
    defaults->default_screen_height = 768;
    tmpl = carrel_manager_template_import(fx->mgr, ADMIN, &req, &error);
    if (!tmpl)
        fail_msg("import: %s", error->message);
    return tmpl;
}

static void
test_template_defaults(void **state)
{
    Fixture *fx = *state;
    g_autoptr(CarrelTemplate) tmpl = import_with_defaults(fx);
    g_autoptr(GError) error = NULL;
    g_autoptr(CarrelSession) d = NULL;
    g_autoptr(CarrelSession) own = NULL;
    g_autoptr(CarrelSession) small = NULL;
    g_autoptr(JsonNode) json = carrel_template_to_json(tmpl, 0);
    JsonObject *defaults = json_object_get_object_member(json_node_get_object(json), "defaults");
    CarrelSessionRequest asked = {.template_name = (char *)"tiny",
                                  .name = (char *)"asked",
                                  .vcpus = 1,
                                  .memory_mib = 512,
                                  .screen_width = 800,
                                  .screen_height = 600};
    CarrelSessionRequest under_small = {
        .template_name = (char *)"tiny", .name = (char *)"small", .policy = (char *)"small"};
    CarrelSessionRequest too_big = {.template_name = (char *)"tiny",
                                    .name = (char *)"big",
                                    .policy = (char *)"small",
                                    .vcpus = 2};

    assert_int_equal(json_object_get_int_member(defaults, "vcpus"), 2);
    assert_string_equal(json_object_get_string_member(defaults, "screen"), "1024x768");
    d = create(fx, "by-default", &error);
    if (!d)
        fail_msg("create: %s", error->message);
    assert_int_equal(d->vcpus, 2);
    assert_int_equal(d->memory_mib, 2048);
    assert_int_equal(d->screen_width, 1024);
    assert_screen(fx, d->id, 1024, 768);

    own = carrel_manager_session_create(fx->mgr, ADMIN, &asked, &error);
    assert_non_null(own);
    assert_int_equal(own->vcpus, 1);
    assert_int_equal(own->memory_mib, 512);
    assert_screen(fx, own->id, 800, 600);

    /* A default above the policy's maximum is lowered to it; a request above it is refused. */
    small = carrel_manager_session_create(fx->mgr, ADMIN, &under_small, &error);
    if (!small)
        fail_msg("create under small: %s", error->message);
    assert_int_equal(small->vcpus, 1);
    assert_int_equal(small->memory_mib, 1024);
    assert_null(carrel_manager_session_create(fx->mgr, ADMIN, &too_big, &error));
    assert_true(g_error_matches(error, CARREL_ERROR, CARREL_ERROR_POLICY_DENIED));
}

/* A warm template's state has the defaults' shape, so a plain create restores it, and the
 * session's screen is set after the restore. */
static void
test_warm_with_defaults(void **state)
{
    Fixture *fx = *state;
    g_autoptr(CarrelTemplate) tmpl G_GNUC_UNUSED = import_with_defaults(fx);
    g_autoptr(GError) error = NULL;
    g_autoptr(CarrelJob) job = carrel_manager_template_warm(fx->mgr, ADMIN, "tiny", 0, &error);
    g_autoptr(CarrelWarmState) warm = NULL;
    g_autoptr(CarrelSession) w = NULL;
    g_autoptr(CarrelSession) sized = NULL;

    assert_non_null(job);
    if (!carrel_job_wait(job, &error))
        fail_msg("warm: %s", error->message);
    warm = carrel_manager_template_warm_state(fx->mgr, "tiny", 1);
    assert_int_equal(warm->vcpus, 2);
    assert_int_equal(warm->memory_mib, 2048);
    w = create(fx, "warm", &error);
    assert_non_null(w);
    assert_true(w->from_warm);
    assert_screen(fx, w->id, 1024, 768);
    sized = create_sized(fx, "warm-sized", 1920, 1200, &error);
    assert_non_null(sized);
    assert_true(sized->from_warm);
    assert_screen(fx, sized->id, 1920, 1200);
    g_usleep(100 * 1000); /* the reclaim jobs' last steps, before the fixture goes */
}

/* A pool member keeps the image's size until a create takes it with its own. */
static void
test_pool_take_sets_screen(void **state)
{
    Fixture *fx = *state;
    g_autoptr(CarrelTemplate) tmpl G_GNUC_UNUSED = import(fx, "tiny");
    g_autoptr(GError) error = NULL;
    g_autoptr(CarrelSession) taken = NULL;

    assert_true(carrel_manager_pool_set(fx->mgr, ADMIN, "tiny", 1, &error));
    carrel_manager_watch(fx->mgr);
    taken = create_sized(fx, "pooled", 1280, 800, &error);
    if (!taken)
        fail_msg("create: %s", error->message);
    assert_true(taken->from_pool);
    assert_int_equal(taken->screen_width, 1280);
    assert_screen(fx, taken->id, 1280, 800);
    assert_true(carrel_manager_pool_set(fx->mgr, ADMIN, "tiny", 0, &error));
    carrel_manager_watch(fx->mgr);
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_create_with_screen, setup, teardown),
        cmocka_unit_test_setup_teardown(test_screen_after_restores, setup, teardown),
        cmocka_unit_test_setup_teardown(test_screen_refused, setup, teardown),
        cmocka_unit_test_setup_teardown(test_template_defaults, setup, teardown),
        cmocka_unit_test_setup_teardown(test_warm_with_defaults, setup, teardown),
        cmocka_unit_test_setup_teardown(test_pool_take_sets_screen, setup, teardown),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
