/* core over the fake hypervisor, a real store in a temp dir and real qemu-img overlays. */
#include "archive/archive.h"
#include "core-fixture.h"

/* A source the daemon cannot read is the caller's mistake (INVALID_ARG: 400), not the host's. */
static void
test_import_bad_source(void **state)
{
    Fixture *fx = *state;
    g_autofree char *missing = g_build_filename(fx->dir, "missing.qcow2", NULL);
    char *disks[] = {missing, fx->dir};
    g_autoptr(GError) error = NULL;

    for (gsize i = 0; i < G_N_ELEMENTS(disks); i++) {
        CarrelTemplateImport req = {
            .name = (char *)"tiny",
            .disk = disks[i],
            .format = (char *)"qcow2",
            .boot = CARREL_BOOT_DIRECT,
            .kernel = fx->kernel,
            .cmdline = (char *)"root=/dev/vda",
        };
        g_autoptr(CarrelTemplate) tmpl =
            carrel_manager_template_import(fx->mgr, ADMIN, &req, &error);

        assert_null(tmpl);
        assert_true(g_error_matches(error, CARREL_ERROR, CARREL_ERROR_INVALID_ARG));
        assert_non_null(strstr(error->message, disks[i]));
        g_clear_error(&error);
    }
    {
        CarrelTemplateImport req = {.name = (char *)"tiny",
                                    .disk = fx->disk,
                                    .format = (char *)"qcow2",
                                    .boot = CARREL_BOOT_DIRECT,
                                    .kernel = missing,
                                    .cmdline = (char *)"root=/dev/vda"};
        g_autoptr(CarrelTemplate) tmpl =
            carrel_manager_template_import(fx->mgr, ADMIN, &req, &error);

        assert_null(tmpl);
        assert_true(g_error_matches(error, CARREL_ERROR, CARREL_ERROR_INVALID_ARG));
    }
}

static void
test_import_versions(void **state)
{
    Fixture *fx = *state;
    g_autoptr(CarrelTemplate) v1 = import(fx, "tiny");
    g_autoptr(CarrelTemplate) v2 = import(fx, "tiny");
    g_autoptr(CarrelTemplate) latest = carrel_manager_template_get(fx->mgr, ADMIN, "tiny", 0, NULL);

    assert_int_equal(v1->version, 1);
    assert_int_equal(v2->version, 2);
    assert_int_equal(latest->version, 2);
    assert_string_equal(v1->sha256, v2->sha256);
    assert_true(g_file_test(v2->disk_path, G_FILE_TEST_IS_REGULAR));
    assert_true(g_str_has_prefix(v2->disk_path, fx->dir));
    {
        GStatBuf st;
        assert_int_equal(g_stat(v2->disk_path, &st), 0);
        assert_int_equal(st.st_mode & 0777, 0444); /* templates are read-only */
    }
    /* A session stands on v2: v1 can go, v2 cannot, and v2's files stay untouched. */
    {
        CarrelSessionRequest req = {.template_name = (char *)"tiny"};
        g_autoptr(GError) error = NULL;
        g_autoptr(CarrelSession) s = carrel_manager_session_create(fx->mgr, ADMIN, &req, &error);
        g_auto(GStrv) refs = NULL;

        assert_non_null(s);
        assert_int_equal(s->template_version, 2);
        assert_null(carrel_manager_template_remove(fx->mgr, ADMIN, "tiny", 2, &error));
        assert_true(g_error_matches(error, CARREL_ERROR, CARREL_ERROR_WRONG_STATE));
        g_clear_error(&error);
        refs = carrel_manager_template_remove(fx->mgr, ADMIN, "tiny", 1, &error);
        assert_non_null(refs);
        assert_string_equal(refs[0], "tiny@1");
        assert_null(refs[1]);
        assert_false(g_file_test(v1->dir, G_FILE_TEST_EXISTS));
        assert_true(g_file_test(v2->disk_path, G_FILE_TEST_EXISTS));
    }
}

static void
test_create_and_lifecycle(void **state)
{
    Fixture *fx = *state;
    g_autoptr(CarrelTemplate) tmpl G_GNUC_UNUSED = import(fx, "tiny");
    g_autoptr(GError) error = NULL;
    g_autoptr(CarrelSession) s = create(fx, "alpha", &error);
    g_autoptr(CarrelSession) stopped = NULL;
    g_autoptr(CarrelSession) again = NULL;
    g_autoptr(CarrelSession) gone = NULL;
    g_autofree char *dom = NULL;
    CarrelDomainState ds;

    assert_non_null(s);
    assert_int_equal(s->state, CARREL_SESSION_RUNNING);
    assert_true(g_file_test(s->overlay_path, G_FILE_TEST_IS_REGULAR));
    dom = carrel_session_domain_name(s->id);
    assert_true(carrel_hypervisor_get_state(fx->hv, dom, &ds, NULL));
    assert_int_equal(ds, CARREL_DOMAIN_RUNNING);

    stopped = carrel_manager_session_stop(fx->mgr, ADMIN, "alpha", 1, &error);
    assert_non_null(stopped);
    assert_int_equal(stopped->state, CARREL_SESSION_STOPPED);
    assert_null(carrel_manager_session_stop(fx->mgr, ADMIN, s->id, 1, &error));
    assert_true(g_error_matches(error, CARREL_ERROR, CARREL_ERROR_WRONG_STATE));
    assert_non_null(strstr(error->message, "stopped"));
    g_clear_error(&error);
    again = carrel_manager_session_start(fx->mgr, ADMIN, s->id, &error);
    assert_non_null(again);
    assert_int_equal(again->state, CARREL_SESSION_RUNNING);

    /* The template is in use: removal refused. */
    assert_null(carrel_manager_template_remove(fx->mgr, ADMIN, "tiny", 0, &error));
    assert_true(g_error_matches(error, CARREL_ERROR, CARREL_ERROR_WRONG_STATE));
    g_clear_error(&error);

    gone = carrel_manager_session_destroy(fx->mgr, ADMIN, s->id, &error);
    assert_non_null(gone);
    assert_int_equal(gone->state, CARREL_SESSION_DESTROYED);
    assert_false(g_file_test(s->dir, G_FILE_TEST_EXISTS));
    assert_false(carrel_hypervisor_get_state(fx->hv, dom, &ds, &error));
    assert_true(g_error_matches(error, CARREL_ERROR, CARREL_ERROR_NOT_FOUND));
    g_clear_error(&error);
    {
        g_auto(GStrv) refs = carrel_manager_template_remove(fx->mgr, ADMIN, "tiny", 0, &error);
        assert_non_null(refs);
        assert_string_equal(refs[0], "tiny@1");
    }
}

static void
test_failed_create_leaves_nothing(void **state)
{
    Fixture *fx = *state;
    g_autoptr(CarrelTemplate) tmpl G_GNUC_UNUSED = import(fx, "tiny");
    g_autoptr(GError) error = NULL;
    g_autoptr(GPtrArray) all = NULL;
    g_autofree char *sessions_dir = g_build_filename(fx->dir, "state", "sessions", NULL);
    g_autoptr(GDir) dir = NULL;

    carrel_hypervisor_fake_fail_next(fx->hv, "define_start");
    assert_null(create(fx, "broken", &error));
    assert_true(g_error_matches(error, CARREL_ERROR, CARREL_ERROR_HYPERVISOR));
    assert_non_null(strstr(error->message, "creating session 'broken'"));
    all = carrel_manager_session_list(fx->mgr, ADMIN, TRUE, NULL);
    assert_int_equal(all->len, 0);
    dir = g_dir_open(sessions_dir, 0, NULL);
    assert_null(g_dir_read_name(dir));
    /* The name is free again. */
    g_clear_error(&error);
    {
        g_autoptr(CarrelSession) ok = create(fx, "broken", &error);
        assert_non_null(ok);
    }
}

static void
test_agent_never_answers(void **state)
{
    Fixture *fx = *state;
    g_autoptr(CarrelTemplate) tmpl G_GNUC_UNUSED = import(fx, "tiny");
    g_autoptr(GError) error = NULL;
    g_autoptr(GPtrArray) all = NULL;

    /* One failed ping is retried. */
    carrel_hypervisor_fake_fail_next(fx->hv, "agent_ping");
    {
        g_autoptr(CarrelSession) ok = create(fx, "slow", &error);
        assert_non_null(ok);
    }
    /* An agent that never answers: a clear timeout, and nothing left (the screen is not
     * looked at before the agent's time is up). */
    carrel_hypervisor_fake_set_agent_silent(fx->hv, TRUE);
    fx->mgr->screen_grace_s = 10;
    assert_null(create(fx, "mute", &error));
    assert_true(g_error_matches(error, CARREL_ERROR, CARREL_ERROR_TIMEOUT));
    assert_non_null(strstr(error->message, "did not become ready within 2 s"));
    all = carrel_manager_session_list(fx->mgr, ADMIN, TRUE, NULL);
    assert_int_equal(all->len, 1);
    carrel_hypervisor_fake_set_agent_silent(fx->hv, FALSE);
}

/* A guest without an agent (an imported image) is ready once its screen shows and holds. */
static void
test_ready_by_screen(void **state)
{
    Fixture *fx = *state;
    g_autoptr(CarrelTemplate) tmpl G_GNUC_UNUSED = import(fx, "tiny");
    g_autoptr(GBytes) screen = g_bytes_new_static(core_fixture_picture, core_fixture_picture_len);
    g_autoptr(GError) error = NULL;
    g_autoptr(CarrelSession) s = NULL;

    carrel_manager_get_hypervisor(fx->mgr);
    carrel_hypervisor_fake_set_agent_silent(fx->hv, TRUE);
    carrel_hypervisor_fake_set_screen(fx->hv, screen);
    fx->mgr->agent_timeout_s = 30;
    s = create(fx, "byo", &error);
    if (!s)
        fail_msg("%s", error->message);
    assert_int_equal(s->state, CARREL_SESSION_RUNNING);
    assert_non_null(s->state_reason);
    assert_non_null(strstr(s->state_reason, "screen settled"));
}

/* Warm start over the fake: warm once, then sessions restore unless asked to boot. */
static void
test_warm_start(void **state)
{
    Fixture *fx = *state;
    g_autoptr(CarrelTemplate) tmpl G_GNUC_UNUSED = import(fx, "tiny");
    g_autoptr(GError) error = NULL;
    g_autoptr(CarrelJob) job = NULL;
    g_autoptr(CarrelJob) again = NULL;
    g_autoptr(CarrelWarmState) warm = NULL;
    CarrelSessionRequest plain = {.template_name = (char *)"tiny"};
    CarrelSessionRequest cold = {.template_name = (char *)"tiny", .cold = TRUE};
    CarrelSessionRequest bigger = {.template_name = (char *)"tiny", .memory_mib = 2048};
    g_autoptr(CarrelSession) w = NULL;
    g_autoptr(CarrelSession) c = NULL;
    g_autoptr(CarrelSession) b = NULL;
    GStatBuf st;

    carrel_hypervisor_fake_set_exec_result(fx->hv, 0, "{\"ready\":true}", "");
    job = carrel_manager_template_warm(fx->mgr, ADMIN, "tiny", 0, &error);
    assert_non_null(job);
    if (!carrel_job_wait(job, &error))
        fail_msg("warm: %s", error->message);
    warm = carrel_manager_template_warm_state(fx->mgr, "tiny", 1);
    assert_non_null(warm);
    assert_int_equal(warm->memory_mib, CARREL_DEFAULT_MEMORY_MIB);
    assert_int_equal(g_stat(warm->disk_path, &st), 0);
    assert_int_equal(st.st_mode & 0777, 0444); /* the frozen layer */
    assert_true(g_file_test(warm->memory_path, G_FILE_TEST_IS_REGULAR));
    /* Warming again keeps the state sessions may stand on. */
    again = carrel_manager_template_warm(fx->mgr, ADMIN, "tiny", 1, &error);
    assert_non_null(again);
    assert_true(carrel_job_wait(again, &error));

    w = carrel_manager_session_create(fx->mgr, ADMIN, &plain, &error);
    assert_non_null(w);
    assert_true(w->from_warm);
    /* The clone's guest is given the clone's own MAC after the restore (once settled: the
     * last guest command). */
    carrel_manager_wait_caught_up(fx->mgr, w->id);
    {
        g_auto(GStrv) argv = carrel_hypervisor_fake_get_exec_argv(fx->hv);
        assert_non_null(argv);
        assert_int_equal(g_strv_length(argv), 3);
        assert_string_equal(argv[1], "set-mac");
        assert_string_equal(argv[2], w->mac);
    }
    /* A job then inflates and deflates the clone's balloon (its RAM back to the host). */
    for (int i = 0; i < 100 && carrel_hypervisor_fake_get_balloon_calls(fx->hv) < 2; i++)
        g_usleep(20 * 1000);
    assert_int_equal(carrel_hypervisor_fake_get_balloon_calls(fx->hv), 2);
    g_usleep(100 * 1000); /* the job's last steps, before the fixture goes */
    c = carrel_manager_session_create(fx->mgr, ADMIN, &cold, &error);
    assert_non_null(c);
    assert_false(c->from_warm);
    /* A booted session needs no balloon. */
    assert_int_equal(carrel_hypervisor_fake_get_balloon_calls(fx->hv), 2);
    /* The saved memory fixes the machine's shape: another size boots. */
    b = carrel_manager_session_create(fx->mgr, ADMIN, &bigger, &error);
    assert_non_null(b);
    assert_false(b->from_warm);
    assert_int_equal(b->memory_mib, 2048);
}

/* Every session gets its own MAC on carrel's isolated network, which must really be isolated. */
static void
test_session_network(void **state)
{
    Fixture *fx = *state;
    g_autoptr(CarrelTemplate) tmpl G_GNUC_UNUSED = import(fx, "tiny");
    g_autoptr(GError) error = NULL;
    g_autoptr(CarrelSession) a = create(fx, "net-a", &error);
    g_autoptr(CarrelSession) b = create(fx, "net-b", &error);
    g_autoptr(CarrelSession) stored = NULL;
    g_autoptr(GPtrArray) all = NULL;

    assert_non_null(a);
    assert_non_null(b);
    assert_true(carrel_util_is_mac(a->mac));
    assert_true(g_str_has_prefix(a->mac, "02:"));
    assert_string_not_equal(a->mac, b->mac);
    stored = carrel_manager_session_get(fx->mgr, ADMIN, "net-a", &error);
    assert_string_equal(stored->mac, a->mac);

    /* A network of carrel's name that forwards (someone else's) is never used. */
    carrel_hypervisor_fake_set_network(fx->hv, "carrel-isolated",
                                       "<network><name>carrel-isolated</name>"
                                       "<forward mode='nat'/><port isolated='yes'/></network>");
    assert_null(create(fx, "net-c", &error));
    assert_true(g_error_matches(error, CARREL_ERROR, CARREL_ERROR_POLICY_DENIED));
    assert_non_null(strstr(error->message, "session network 'carrel-isolated'"));
    all = carrel_manager_session_list(fx->mgr, ADMIN, FALSE, NULL);
    assert_int_equal(all->len, 2);
}

static void
test_policy_and_unknowns(void **state)
{
    Fixture *fx = *state;
    g_autoptr(CarrelTemplate) tmpl G_GNUC_UNUSED = import(fx, "tiny");
    CarrelSessionRequest big = {.template_name = (char *)"tiny", .vcpus = 8};
    CarrelSessionRequest missing = {.template_name = (char *)"nope"};
    g_autoptr(GError) error = NULL;

    assert_null(carrel_manager_session_create(fx->mgr, ADMIN, &big, &error));
    assert_true(g_error_matches(error, CARREL_ERROR, CARREL_ERROR_POLICY_DENIED));
    g_clear_error(&error);
    assert_null(carrel_manager_session_create(fx->mgr, ADMIN, &missing, &error));
    assert_true(g_error_matches(error, CARREL_ERROR, CARREL_ERROR_NOT_FOUND));
    g_clear_error(&error);
    assert_null(carrel_manager_session_get(fx->mgr, ADMIN, "s-000000000000", &error));
    assert_true(g_error_matches(error, CARREL_ERROR, CARREL_ERROR_NOT_FOUND));
}

static void
test_busy_session(void **state)
{
    Fixture *fx = *state;
    g_autoptr(CarrelTemplate) tmpl G_GNUC_UNUSED = import(fx, "tiny");
    g_autoptr(GError) error = NULL;
    g_autoptr(CarrelSession) s = create(fx, NULL, &error);

    assert_non_null(s);
    assert_string_equal(s->name, s->id);
    assert_true(carrel_manager_mark_busy(fx->mgr, s->id, "snapshot", NULL));
    assert_false(carrel_manager_mark_busy(fx->mgr, s->id, "fork", &error));
    assert_true(g_error_matches(error, CARREL_ERROR, CARREL_ERROR_BUSY));
    g_clear_error(&error);
    assert_null(carrel_manager_session_stop(fx->mgr, ADMIN, s->id, 1, &error));
    assert_true(g_error_matches(error, CARREL_ERROR, CARREL_ERROR_BUSY));
    assert_non_null(strstr(error->message, "snapshot is in progress"));
    carrel_manager_clear_busy(fx->mgr, s->id);
}

typedef struct {
    CarrelManager *mgr;
    char *id;
} WatchHold;

/* Ends a watcher's look after a while, from another thread. */
static gpointer
end_watch_later(gpointer data)
{
    WatchHold *hold = data;

    g_usleep(200 * 1000);
    carrel_manager_clear_busy(hold->mgr, hold->id);
    return NULL;
}

/* The watcher's look at a session is waited for, not answered "busy"; a second look is not. */
static void
test_verb_waits_for_watch(void **state)
{
    Fixture *fx = *state;
    g_autoptr(CarrelTemplate) tmpl G_GNUC_UNUSED = import(fx, "tiny");
    g_autoptr(GError) error = NULL;
    g_autoptr(CarrelSession) s = create(fx, NULL, &error);
    g_autoptr(CarrelSession) stopped = NULL;
    WatchHold hold = {fx->mgr, NULL};
    GThread *thread;

    assert_non_null(s);
    hold.id = s->id;
    assert_true(carrel_manager_mark_busy(fx->mgr, s->id, "watch", NULL));
    assert_false(carrel_manager_mark_busy(fx->mgr, s->id, "watch", &error));
    assert_true(g_error_matches(error, CARREL_ERROR, CARREL_ERROR_BUSY));
    g_clear_error(&error);
    thread = g_thread_new("watch", end_watch_later, &hold);
    stopped = carrel_manager_session_stop(fx->mgr, ADMIN, s->id, 1, &error);
    g_thread_join(thread);
    assert_null(error);
    assert_non_null(stopped);
    assert_int_equal(stopped->state, CARREL_SESSION_STOPPED);
}

/* How many "expire" events a session's timeline holds. */
static guint
count_expire_events(Fixture *fx, const char *id)
{
    g_autoptr(GPtrArray) events = carrel_manager_session_events(fx->mgr, ADMIN, id, 0, 100, NULL);
    guint n = 0;

    assert_non_null(events);
    for (guint i = 0; i < events->len; i++)
        n += g_str_equal(((CarrelEvent *)g_ptr_array_index(events, i))->action, "expire");
    return n;
}

/* A time limit that falls while another verb holds the session (BUSY) is neither done nor
 * dropped: the watcher keeps the limit and acts in a later round. */
static void
test_watch_retries_busy(void **state)
{
    Fixture *fx = *state;
    g_autoptr(CarrelTemplate) tmpl G_GNUC_UNUSED = import(fx, "tiny");
    g_autoptr(GError) error = NULL;
    CarrelSessionRequest req = {.template_name = (char *)"tiny",
                                .name = (char *)"held",
                                .ttl_s = 1,
                                .expiry_action = (char *)"destroy"};
    g_autoptr(CarrelSession) s = carrel_manager_session_create(fx->mgr, ADMIN, &req, &error);
    g_autoptr(CarrelSession) held = NULL;
    g_autoptr(CarrelSession) gone = NULL;
    guint acted = 0;

    assert_non_null(s);
    assert_true(carrel_manager_mark_busy(fx->mgr, s->id, "snapshot", NULL));
    for (guint i = 0; acted == 0 && i < 50; i++) {
        acted = carrel_manager_watch(fx->mgr);
        if (acted == 0)
            g_usleep(100 * 1000);
    }
    assert_int_equal(acted, 1);
    held = carrel_manager_session_get(fx->mgr, ADMIN, s->id, &error);
    assert_int_equal(held->state, CARREL_SESSION_RUNNING);
    assert_int_equal(held->expires_at, s->expires_at);
    assert_int_equal(count_expire_events(fx, s->id), 0);
    carrel_manager_clear_busy(fx->mgr, s->id);
    assert_int_equal(carrel_manager_watch(fx->mgr), 1);
    gone = carrel_manager_session_get(fx->mgr, ADMIN, s->id, &error);
    assert_int_equal(gone->state, CARREL_SESSION_DESTROYED);
    assert_int_equal(count_expire_events(fx, s->id), 1);
}

static CarrelSession *
insert_row(Fixture *fx, CarrelSessionState state)
{
    CarrelSession *s = carrel_session_new();

    s->id = carrel_util_new_id("s-");
    s->name = g_strdup(s->id);
    s->template_name = g_strdup("tiny");
    s->template_version = 1;
    s->state = state;
    s->vcpus = 1;
    s->memory_mib = 512;
    s->dir = g_build_filename(fx->dir, "state", "sessions", s->id, NULL);
    s->overlay_path = g_build_filename(s->dir, "disk.qcow2", NULL);
    assert_true(carrel_util_ensure_dir(s->dir, 0711, NULL));
    assert_true(carrel_store_session_insert(fx->mgr->store, s, NULL));
    return s;
}

static CarrelSessionState
state_of(Fixture *fx, const char *id)
{
    g_autoptr(CarrelSession) s = carrel_manager_session_get(fx->mgr, ADMIN, id, NULL);

    assert_non_null(s);
    return s->state;
}

static void
define_domain(Fixture *fx, const char *session_id, const char *instance_id)
{
    g_autofree char *name = carrel_session_domain_name(session_id);
    CarrelDomainSpec spec = {
        .domain_name = name,
        .session_id = session_id,
        .instance_id = instance_id,
        .accel = CARREL_ACCEL_TCG,
        .vcpus = 1,
        .memory_mib = 512,
        .boot = CARREL_BOOT_BIOS,
        .disk_path = "/tmp/x.qcow2",
        .disk_format = "qcow2",
        .console_log_path = "/tmp/console.log",
    };
    g_autofree char *xml = carrel_hypervisor_build_domain_xml(&spec, NULL);

    assert_non_null(xml);
    assert_true(carrel_hypervisor_define_start(fx->hv, xml, NULL));
}

/* Files through the agent and the timeline they leave. */
static void
test_files_and_events(void **state)
{
    Fixture *fx = *state;
    g_autoptr(CarrelTemplate) tmpl G_GNUC_UNUSED = import(fx, "tiny");
    g_autoptr(GError) error = NULL;
    g_autoptr(CarrelSession) s = create(fx, "files", &error);
    static const guint8 binary[] = {0, 1, 2, 0xff, '\n', 0};
    g_autoptr(GBytes) data = g_bytes_new_static(binary, sizeof(binary));
    g_autoptr(GBytes) back = NULL;
    g_autoptr(GPtrArray) events = NULL;
    const char *bad[] = {"relative", "/a/../etc/shadow", "/a/./b", "/a\nb", ""};
    g_autoptr(CarrelSession) stopped = NULL;
    gint64 last_seq;
    CarrelEvent *ev;

    assert_non_null(s);
    assert_true(carrel_manager_session_file_write(fx->mgr, ADMIN, s->id, "/tmp/x", data, &error));
    back = carrel_manager_session_file_read(fx->mgr, ADMIN, s->id, "/tmp/x", &error);
    assert_non_null(back);
    assert_true(g_bytes_equal(back, data));
    for (guint i = 0; i < G_N_ELEMENTS(bad); i++) {
        assert_null(carrel_manager_session_file_read(fx->mgr, ADMIN, s->id, bad[i], &error));
        assert_true(g_error_matches(error, CARREL_ERROR, CARREL_ERROR_INVALID_ARG));
        g_clear_error(&error);
    }
    assert_null(carrel_manager_session_file_read(fx->mgr, ADMIN, s->id, "/nope", &error));
    assert_true(g_error_matches(error, CARREL_ERROR, CARREL_ERROR_NOT_FOUND));
    g_clear_error(&error);

    events =
        carrel_manager_session_events(fx->mgr, ADMIN, s->id, after_create(fx, s->id), 100, &error);
    assert_non_null(events);
    assert_int_equal(events->len, 3); /* write, read, failed read: refusals never reach the guest */
    ev = g_ptr_array_index(events, 0);
    assert_string_equal(ev->kind, "file");
    assert_string_equal(ev->action, "file_write");
    assert_string_equal(ev->actor, "admin");
    assert_string_equal(ev->actor_id, "t-admin");
    assert_null(ev->error);
    assert_int_equal(json_object_get_int_member(json_node_get_object(ev->params), "bytes"), 6);
    ev = g_ptr_array_index(events, 2);
    assert_non_null(ev->error);
    assert_null(ev->result);
    assert_true(((CarrelEvent *)g_ptr_array_index(events, 1))->seq < ev->seq);
    last_seq = ev->seq;
    g_clear_pointer(&events, g_ptr_array_unref);
    /* after= pages; limit is bounded. */
    events = carrel_manager_session_events(fx->mgr, ADMIN, s->id, last_seq - 1, 100, &error);
    assert_int_equal(events->len, 1);
    assert_null(carrel_manager_session_events(fx->mgr, ADMIN, s->id, after_create(fx, s->id), 5000,
                                              &error));
    assert_true(g_error_matches(error, CARREL_ERROR, CARREL_ERROR_INVALID_ARG));
    g_clear_error(&error);

    /* A stopped session refuses, naming its state. */
    stopped = carrel_manager_session_stop(fx->mgr, ADMIN, s->id, 1, &error);
    assert_non_null(stopped);
    assert_false(carrel_manager_session_file_write(fx->mgr, ADMIN, s->id, "/tmp/x", data, &error));
    assert_true(g_error_matches(error, CARREL_ERROR, CARREL_ERROR_WRONG_STATE));
    assert_non_null(strstr(error->message, "stopped"));
}

/* Screenshots come from the hypervisor, are encoded as asked and kept for the timeline. */
static void
test_screenshot(void **state)
{
    Fixture *fx = *state;
    g_autoptr(CarrelTemplate) tmpl G_GNUC_UNUSED = import(fx, "tiny");
    g_autoptr(GError) error = NULL;
    g_autoptr(CarrelSession) s = create(fx, "shot", &error);
    CarrelScreenshotRequest png = {.quality = 80, .scale = 1.0};
    CarrelScreenshotRequest off = png;
    g_autoptr(GBytes) image = NULL;
    g_autoptr(GPtrArray) events = NULL;
    g_autofree char *kept = NULL;
    CarrelEvent *ev;

    assert_non_null(s);
    image = carrel_manager_session_screenshot(fx->mgr, ADMIN, s->id, &png, &error);
    assert_non_null(image);
    assert_memory_equal(g_bytes_get_data(image, NULL), "\x89PNG", 4);
    off.has_region = TRUE;
    off.region[0] = 2;
    off.region[2] = 3; /* 2 + 3 > 4 pixels wide */
    off.region[3] = 1;
    assert_null(carrel_manager_session_screenshot(fx->mgr, ADMIN, s->id, &off, &error));
    assert_true(g_error_matches(error, CARREL_ERROR, CARREL_ERROR_INVALID_ARG));
    assert_non_null(strstr(error->message, "4x3"));
    g_clear_error(&error);
    events =
        carrel_manager_session_events(fx->mgr, ADMIN, s->id, after_create(fx, s->id), 10, &error);
    assert_int_equal(events->len, 2);
    ev = g_ptr_array_index(events, 0);
    assert_string_equal(ev->action, "screenshot");
    assert_non_null(ev->screenshot);
    kept = g_build_filename(s->dir, "screenshots", ev->screenshot, NULL);
    assert_true(g_file_test(kept, G_FILE_TEST_IS_REGULAR));
    assert_null(((CarrelEvent *)g_ptr_array_index(events, 1))->screenshot);
}

static JsonNode *
computer(Fixture *fx, const char *id, const char *json, GError **error)
{
    g_autoptr(JsonNode) body = json_from_string(json, NULL);

    assert_non_null(body);
    return carrel_manager_session_computer(fx->mgr, ADMIN, id, body, error);
}

/* Actions become QMP HID events on the fake; bad ones are refused before anything is sent. */
static void
test_computer(void **state)
{
    Fixture *fx = *state;
    g_autoptr(CarrelTemplate) tmpl G_GNUC_UNUSED = import(fx, "tiny");
    g_autoptr(GError) error = NULL;
    g_autoptr(CarrelSession) s = create(fx, "pc", &error);
    g_autoptr(JsonNode) reply = NULL;
    g_autoptr(GPtrArray) sent = NULL;
    g_autoptr(GPtrArray) events = NULL;
    JsonObject *obj, *shot;

    assert_non_null(s);
    /* The fake screen is 4x3: (5, 1) is off it. Nothing may be sent. */
    assert_null(computer(fx, s->id, "{\"action\":\"left_click\",\"coordinate\":[5,1]}", &error));
    assert_true(g_error_matches(error, CARREL_ERROR, CARREL_ERROR_INVALID_ARG));
    assert_non_null(strstr(error->message, "4x3"));
    g_clear_error(&error);
    assert_null(computer(fx, s->id, "{\"action\":\"teleport\"}", &error));
    assert_true(g_error_matches(error, CARREL_ERROR, CARREL_ERROR_INVALID_ARG));
    g_clear_error(&error);
    sent = carrel_hypervisor_fake_get_hid(fx->hv);
    assert_int_equal(sent->len, 0);
    g_clear_pointer(&sent, g_ptr_array_unref);

    reply = computer(fx, s->id,
                     "{\"actions\":[{\"type\":\"click\",\"x\":3,\"y\":2,\"button\":\"right\"},"
                     "{\"action\":\"type\",\"text\":\"A\"},{\"action\":\"cursor_position\"}],"
                     "\"observe\":\"final\"}",
                     &error);
    if (!reply)
        fail_msg("%s", error->message);
    obj = json_node_get_object(reply);
    assert_int_equal(json_array_get_length(json_object_get_array_member(obj, "results")), 3);
    shot = json_object_get_object_member(obj, "screenshot");
    assert_non_null(shot);
    assert_int_equal(json_object_get_int_member(shot, "width"), 4);
    assert_non_null(json_object_get_string_member(shot, "data"));
    assert_int_equal(json_object_get_int_member(json_object_get_object_member(obj, "pointer"), "x"),
                     3);
    sent = carrel_hypervisor_fake_get_hid(fx->hv);
    assert_true(sent->len >= 4);
    assert_non_null(strstr(g_ptr_array_index(sent, 0), "input-send-event"));
    {
        gboolean right = FALSE, shift = FALSE;
        for (guint i = 0; i < sent->len; i++) {
            right = right || strstr(g_ptr_array_index(sent, i), "\"right\"") != NULL;
            shift = shift || strstr(g_ptr_array_index(sent, i), "\"shift\"") != NULL;
        }
        assert_true(right);
        assert_true(shift);
    }
    /* One event per action, with the image data kept out of the timeline. */
    events =
        carrel_manager_session_events(fx->mgr, ADMIN, s->id, after_create(fx, s->id), 100, &error);
    assert_int_equal(events->len, 3);
    assert_string_equal(((CarrelEvent *)g_ptr_array_index(events, 0))->action, "click");
    assert_string_equal(((CarrelEvent *)g_ptr_array_index(events, 1))->action, "type");
    g_clear_pointer(&reply, json_node_unref);
    g_clear_pointer(&events, g_ptr_array_unref);

    /* A screenshot action's image is in the reply (its output), never on the timeline. */
    reply = computer(fx, s->id, "{\"action\":\"screenshot\"}", &error);
    assert_non_null(reply);
    shot = json_object_get_object_member(
        json_array_get_object_element(
            json_object_get_array_member(json_node_get_object(reply), "results"), 0),
        "output");
    assert_non_null(json_object_get_string_member(shot, "data"));
    events =
        carrel_manager_session_events(fx->mgr, ADMIN, s->id, after_create(fx, s->id), 100, &error);
    assert_int_equal(events->len, 4);
    shot = json_object_get_object_member(
        json_node_get_object(((CarrelEvent *)g_ptr_array_index(events, 3))->result), "output");
    assert_false(json_object_has_member(shot, "data"));
    assert_true(json_object_has_member(shot, "width"));
    g_clear_pointer(&reply, json_node_unref);

    /* A failure part-way stops the batch and names the action. */
    carrel_hypervisor_fake_fail_next(fx->hv, "hid_send");
    assert_null(computer(fx, s->id, "{\"action\":\"key\",\"text\":\"ctrl+c\"}", &error));
    assert_true(g_error_matches(error, CARREL_ERROR, CARREL_ERROR_HYPERVISOR));
    assert_non_null(strstr(error->message, "actions[0] (key)"));
}

static void
test_reconcile(void **state)
{
    Fixture *fx = *state;
    g_autoptr(CarrelTemplate) tmpl G_GNUC_UNUSED = import(fx, "tiny");
    g_autoptr(GError) error = NULL;
    g_autoptr(CarrelSession) adopted = create(fx, "adopted", &error);
    g_autoptr(CarrelSession) vanished = create(fx, "vanished", &error);
    g_autoptr(CarrelSession) off = create(fx, "off", &error);
    g_autoptr(CarrelSession) half = insert_row(fx, CARREL_SESSION_CREATING);
    g_autofree char *vanished_dom = carrel_session_domain_name(vanished->id);
    g_autofree char *off_dom = carrel_session_domain_name(off->id);
    g_autofree char *orphan_id = carrel_util_new_id("s-");
    g_autofree char *foreign_id = carrel_util_new_id("s-");
    g_autofree char *orphan_dom = carrel_session_domain_name(orphan_id);
    g_autofree char *foreign_dom = carrel_session_domain_name(foreign_id);
    CarrelReconcileReport report;
    CarrelDomainState ds;

    assert_true(carrel_hypervisor_destroy(fx->hv, vanished_dom, NULL));
    assert_true(carrel_hypervisor_undefine(fx->hv, vanished_dom, NULL));
    assert_true(carrel_hypervisor_fake_set_state(fx->hv, off_dom, CARREL_DOMAIN_SHUTOFF));
    define_domain(fx, half->id, carrel_manager_get_instance_id(fx->mgr));
    define_domain(fx, orphan_id, carrel_manager_get_instance_id(fx->mgr));
    define_domain(fx, foreign_id, "i-0000000000ff");

    assert_true(carrel_manager_reconcile(fx->mgr, &report, &error));
    assert_int_equal(report.adopted, 1);
    assert_int_equal(report.vanished, 1);
    assert_int_equal(report.stopped, 1);
    assert_int_equal(report.cleaned, 1);
    assert_int_equal(report.orphans, 1);
    assert_int_equal(state_of(fx, adopted->id), CARREL_SESSION_RUNNING);
    assert_int_equal(state_of(fx, vanished->id), CARREL_SESSION_CRASHED);
    assert_int_equal(state_of(fx, off->id), CARREL_SESSION_STOPPED);
    assert_int_equal(state_of(fx, half->id), CARREL_SESSION_DESTROYED);
    assert_false(g_file_test(half->dir, G_FILE_TEST_EXISTS));
    /* Our orphan is gone; another instance's domain is never touched. */
    assert_false(carrel_hypervisor_get_state(fx->hv, orphan_dom, &ds, NULL));
    assert_true(carrel_hypervisor_get_state(fx->hv, foreign_dom, &ds, NULL));
    assert_int_equal(ds, CARREL_DOMAIN_RUNNING);
    /* A crashed session can be started again: its definition is made anew. */
    {
        g_autoptr(CarrelSession) back =
            carrel_manager_session_start(fx->mgr, ADMIN, vanished->id, &error);
        assert_non_null(back);
        assert_int_equal(back->state, CARREL_SESSION_RUNNING);
    }
    /* A crashed session whose domain is gone can still be removed. */
    {
        g_autofree char *adopted_dom = carrel_session_domain_name(adopted->id);
        g_autoptr(CarrelSession) gone = NULL;
        assert_true(carrel_hypervisor_destroy(fx->hv, adopted_dom, NULL));
        assert_true(carrel_hypervisor_undefine(fx->hv, adopted_dom, NULL));
        gone = carrel_manager_session_destroy(fx->mgr, ADMIN, adopted->id, &error);
        assert_non_null(gone);
        assert_int_equal(gone->state, CARREL_SESSION_DESTROYED);
    }
    /* Reconcile again: nothing more to do. */
    assert_true(carrel_manager_reconcile(fx->mgr, &report, &error));
    assert_int_equal(report.adopted, 1);
    assert_int_equal(report.cleaned + report.orphans + report.vanished, 0);
}

/* The tar a guest's own tar would hand over: a file, a folder, a link to /etc/shadow. */
static GBytes *
guest_tar(Fixture *fx)
{
    g_autofree char *tree = g_build_filename(fx->dir, "tree", NULL);
    g_autofree char *link = g_build_filename(tree, "shadow", NULL);
    g_autofree char *tar = g_build_filename(fx->dir, "guest.tar", NULL);
    g_autoptr(CarrelArchiveWriter) w = carrel_archive_writer_new(tar, NULL, NULL);
    g_autofree char *data = NULL;
    gsize len = 0;

    assert_int_equal(g_mkdir_with_parents(tree, 0755), 0);
    assert_int_equal(symlink("/etc/shadow", link), 0);
    assert_non_null(w);
    assert_true(carrel_archive_writer_add_bytes(w, "/out/a.txt", (const guint8 *)"hello", 5, 0640,
                                                1000, 1000, NULL));
    assert_true(carrel_archive_writer_add_local(w, tree, "/out/tree", 1000, 1000, NULL));
    assert_true(carrel_archive_writer_finish(w, NULL));
    assert_true(g_file_get_contents(tar, &data, &len, NULL));
    return g_bytes_new_take(g_steal_pointer(&data), len);
}

static CarrelArtifact *
find_artifact(CarrelExtraction *x, const char *guest_path)
{
    for (guint i = 0; i < x->artifacts->len; i++) {
        CarrelArtifact *a = g_ptr_array_index(x->artifacts, i);
        if (g_str_equal(a->guest_path, guest_path))
            return a;
    }
    fail_msg("no artifact %s", guest_path);
    return NULL;
}

static void
test_extract_by_agent(void **state)
{
    Fixture *fx = *state;
    g_autoptr(CarrelTemplate) tmpl G_GNUC_UNUSED = import(fx, "tiny");
    g_autoptr(GError) error = NULL;
    g_autoptr(CarrelSession) s = create(fx, "art", &error);
    g_autoptr(GBytes) tar = guest_tar(fx);
    char *paths[] = {(char *)"/out", (char *)"/missing", NULL};
    CarrelExtractRequest req = {.paths = paths, .max_bytes = 1 << 20, .max_files = 100};
    g_autoptr(CarrelExtraction) x = NULL;
    g_autoptr(CarrelExtraction) limited = NULL;
    g_autoptr(CarrelArtifact) file = NULL;
    g_autoptr(CarrelArtifact) link = NULL;
    g_autoptr(GPtrArray) list = NULL;
    g_autofree char *host = NULL;
    g_autofree char *none = NULL;
    g_autofree char *content = NULL;
    g_auto(GStrv) argv = NULL;

    assert_non_null(s);
    carrel_hypervisor_fake_set_read_fallback(fx->hv, tar);
    x = carrel_manager_session_extract(fx->mgr, ADMIN, s->id, &req, &error);
    assert_non_null(x);
    assert_string_equal(x->source, "agent");
    assert_string_equal(x->reason, "request");
    assert_null(x->error);
    /* The guest's tar was asked for both paths, each as ./PATH (never an option). */
    argv = carrel_hypervisor_fake_get_exec_argv(fx->hv);
    assert_non_null(argv);
    assert_string_equal(argv[0], "/bin/rm"); /* the guest's copy is removed after the read */
    assert_non_null(x->missing);
    assert_int_equal(json_array_get_length(json_node_get_array(x->missing)), 1);
    file = carrel_manager_artifact_get(fx->mgr, ADMIN, find_artifact(x, "/out/a.txt")->id, &host,
                                       &error);
    assert_non_null(file);
    assert_string_equal(file->sha256,
                        "2cf24dba5fb0a30e26e83b2ac5b9e29e1b161e5c1fa7425e73043362938b9824");
    assert_int_equal(file->mode, 0640);
    assert_true(g_str_has_prefix(host, fx->dir));
    assert_true(g_file_get_contents(host, &content, NULL, NULL));
    assert_string_equal(content, "hello");
    link = carrel_manager_artifact_get(fx->mgr, ADMIN, find_artifact(x, "/out/tree/shadow")->id,
                                       &none, &error);
    assert_non_null(link);
    assert_int_equal(link->type, CARREL_FILE_SYMLINK);
    assert_string_equal(link->link_target, "/etc/shadow");
    assert_null(none); /* a link has no bytes to download */

    /* A limit stops the extraction; what came is kept and the error says why. */
    req.max_files = 1;
    limited = carrel_manager_session_extract(fx->mgr, ADMIN, s->id, &req, &error);
    assert_non_null(limited);
    assert_non_null(limited->error);
    assert_non_null(strstr(limited->error, "limit"));
    assert_true(limited->count <= 1);
    list = carrel_manager_session_extractions(fx->mgr, ADMIN, "art", &error);
    assert_int_equal(list->len, 2);
    assert_null(carrel_manager_artifact_get(fx->mgr, ADMIN, "a-nope", NULL, &error));
    assert_true(g_error_matches(error, CARREL_ERROR, CARREL_ERROR_NOT_FOUND));
}

static void
test_watch_marks_crashed(void **state)
{
    Fixture *fx = *state;
    g_autoptr(CarrelTemplate) tmpl G_GNUC_UNUSED = import(fx, "tiny");
    g_autoptr(GError) error = NULL;
    g_autoptr(CarrelSession) s = create(fx, "w", &error);
    g_autoptr(CarrelSession) after = NULL;
    g_autofree char *domain = NULL;

    assert_non_null(s);
    domain = carrel_session_domain_name(s->id);
    assert_int_equal(carrel_manager_watch(fx->mgr), 0);
    assert_true(carrel_hypervisor_fake_set_state(fx->hv, domain, CARREL_DOMAIN_CRASHED));
    assert_int_equal(carrel_manager_watch(fx->mgr), 1);
    after = carrel_manager_session_get(fx->mgr, ADMIN, s->id, &error);
    assert_int_equal(after->state, CARREL_SESSION_CRASHED);
    assert_non_null(strstr(after->state_reason, "unexpectedly"));
    /* Only running sessions are watched: a second round changes nothing. */
    assert_int_equal(carrel_manager_watch(fx->mgr), 0);
}

static void
test_passwd(void **state)
{
    const char *text = "root:x:0:0:root:/root:/bin/bash\n"
                       "broken line\n"
                       "agent:x:1000:1001:carrel agent:/home/agent:/bin/bash\n";
    gint64 gid = -1;

    assert_true(carrel_passwd_find_uid(text, strlen(text), 1000, &gid));
    assert_int_equal(gid, 1001);
    assert_false(carrel_passwd_find_uid(text, strlen(text), 1002, &gid));
    assert_false(carrel_passwd_find_uid("a:x:1000\n", 9, 1000, &gid));
}

static void
put_stat(GHashTable *t, const char *path, CarrelDiskFileType type, guint64 size, guint32 mode,
         gint64 mtime)
{
    CarrelGuestfsStat *st = g_new0(CarrelGuestfsStat, 1);

    st->type = type;
    st->size = size;
    st->mode = mode;
    st->mtime = mtime;
    g_hash_table_insert(t, g_strdup(path), st);
}

static void
test_diff_plan(void **state)
{
    g_autoptr(GHashTable) base = g_hash_table_new_full(g_str_hash, g_str_equal, g_free, g_free);
    g_autoptr(GHashTable) top = g_hash_table_new_full(g_str_hash, g_str_equal, g_free, g_free);
    g_autoptr(GPtrArray) entries = NULL;
    g_autoptr(GPtrArray) check = NULL;
    g_autoptr(GString) got = g_string_new(NULL);

    put_stat(base, "same", CARREL_DISK_FILE_REGULAR, 5, 0644, 1);
    put_stat(top, "same", CARREL_DISK_FILE_REGULAR, 5, 0644, 1);
    put_stat(base, "touched", CARREL_DISK_FILE_REGULAR, 5, 0644, 1);
    put_stat(top, "touched", CARREL_DISK_FILE_REGULAR, 5, 0644, 2);
    put_stat(base, "chmod", CARREL_DISK_FILE_REGULAR, 5, 0644, 1);
    put_stat(top, "chmod", CARREL_DISK_FILE_REGULAR, 5, 0600, 1);
    put_stat(base, "dir", CARREL_DISK_FILE_DIR, 0, 0755, 1);
    put_stat(top, "dir", CARREL_DISK_FILE_DIR, 0, 0755, 9); /* a dir's mtime alone is no change */
    put_stat(top, "dir/new", CARREL_DISK_FILE_REGULAR, 3, 0644, 9);
    put_stat(base, "gone", CARREL_DISK_FILE_SYMLINK, 4, 0777, 1);
    entries = carrel_diff_plan(base, top, "home/agent", &check);
    g_ptr_array_sort(entries, (GCompareFunc)g_strcmp0);
    for (guint i = 0; i < entries->len; i++) {
        CarrelDiffEntry *e = g_ptr_array_index(entries, i);
        g_string_append_printf(got, "%s:%d ", e->path, e->change);
    }
    assert_int_equal(entries->len, 3);
    assert_non_null(strstr(got->str, "/home/agent/chmod:1"));
    assert_non_null(strstr(got->str, "/home/agent/dir/new:0"));
    assert_non_null(strstr(got->str, "/home/agent/gone:2"));
    assert_int_equal(check->len, 1);
    assert_string_equal(((CarrelDiffEntry *)g_ptr_array_index(check, 0))->path,
                        "/home/agent/touched");
}

/* A recipe's hash covers its folder and the library beside it (templates/lib), not the others. */
static void
test_recipe_hash_covers_lib(void **state)
{
    Fixture *fx = *state;
    g_autofree char *recipe = g_build_filename(fx->dir, "recipes", "tiny", NULL);
    g_autofree char *other = g_build_filename(fx->dir, "recipes", "desktop", NULL);
    g_autofree char *lib = g_build_filename(fx->dir, "recipes", "lib", NULL);
    g_autofree char *build = g_build_filename(recipe, "build", NULL);
    g_autofree char *other_build = g_build_filename(other, "build", NULL);
    g_autofree char *lib_file = g_build_filename(lib, "recipe.sh", NULL);
    g_autofree char *alone = NULL;
    g_autofree char *with_lib = NULL;
    g_autofree char *lib_changed = NULL;
    g_autofree char *again = NULL;
    g_autoptr(GError) error = NULL;

    assert_int_equal(g_mkdir_with_parents(recipe, 0755), 0);
    assert_int_equal(g_mkdir_with_parents(other, 0755), 0);
    assert_true(carrel_util_write_file(build, "#!/bin/sh\n", -1, 0755, NULL));
    assert_true(carrel_util_write_file(other_build, "#!/bin/sh\n", -1, 0755, NULL));
    alone = carrel_manager_recipe_hash(fx->mgr, recipe, &error);
    assert_non_null(alone);
    assert_int_equal(strlen(alone), 64);

    assert_int_equal(g_mkdir_with_parents(lib, 0755), 0);
    assert_true(carrel_util_write_file(lib_file, "step() { :; }\n", -1, 0644, NULL));
    with_lib = carrel_manager_recipe_hash(fx->mgr, recipe, &error);
    assert_non_null(with_lib);
    assert_string_not_equal(with_lib, alone);

    assert_true(carrel_util_write_file(lib_file, "step() { true; }\n", -1, 0644, NULL));
    lib_changed = carrel_manager_recipe_hash(fx->mgr, recipe, &error);
    assert_non_null(lib_changed);
    assert_string_not_equal(lib_changed, with_lib);

    /* Another recipe's files are not this one's. */
    assert_true(carrel_util_write_file(other_build, "#!/bin/sh\nexit 1\n", -1, 0755, NULL));
    again = carrel_manager_recipe_hash(fx->mgr, recipe, &error);
    assert_non_null(again);
    assert_string_equal(again, lib_changed);
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_import_bad_source, setup, teardown),
        cmocka_unit_test_setup_teardown(test_import_versions, setup, teardown),
        cmocka_unit_test_setup_teardown(test_create_and_lifecycle, setup, teardown),
        cmocka_unit_test_setup_teardown(test_verb_waits_for_watch, setup, teardown),
        cmocka_unit_test_setup_teardown(test_failed_create_leaves_nothing, setup, teardown),
        cmocka_unit_test_setup_teardown(test_agent_never_answers, setup, teardown),
        cmocka_unit_test_setup_teardown(test_ready_by_screen, setup, teardown),
        cmocka_unit_test_setup_teardown(test_warm_start, setup, teardown),
        cmocka_unit_test_setup_teardown(test_session_network, setup, teardown),
        cmocka_unit_test_setup_teardown(test_policy_and_unknowns, setup, teardown),
        cmocka_unit_test_setup_teardown(test_busy_session, setup, teardown),
        cmocka_unit_test_setup_teardown(test_reconcile, setup, teardown),
        cmocka_unit_test_setup_teardown(test_files_and_events, setup, teardown),
        cmocka_unit_test_setup_teardown(test_screenshot, setup, teardown),
        cmocka_unit_test_setup_teardown(test_computer, setup, teardown),
        cmocka_unit_test_setup_teardown(test_extract_by_agent, setup, teardown),
        cmocka_unit_test_setup_teardown(test_watch_marks_crashed, setup, teardown),
        cmocka_unit_test_setup_teardown(test_watch_retries_busy, setup, teardown),
        cmocka_unit_test_setup_teardown(test_recipe_hash_covers_lib, setup, teardown),
        cmocka_unit_test(test_passwd),
        cmocka_unit_test(test_diff_plan),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
