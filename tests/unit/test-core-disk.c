/*
 * core and the host's disk: a session QEMU paused on a full disk shows why, [resources]
 * max_disk_gib at create and while running, the disk reserve and NO_SPACE refusals, and events
 * that cannot be written failing their verb instead of vanishing.
 */
#include <sqlite3.h>

#include "core-fixture.h"
#define CARREL_STORE_PRIV_H_ALLOW
#include "store/store-priv.h"

#define GIB (G_GUINT64_CONSTANT(1024) * 1024 * 1024)

/* The fixture plus disk.policy (at most 1 GiB of disk); policies are read at start, so the
 * manager reads its folder again. */
static int
setup_disk(void **state)
{
    Fixture *fx;
    g_autofree char *dir = NULL;
    g_autofree char *path = NULL;
    g_autoptr(GError) error = NULL;
    CarrelPolicySet *set;

    setup(state);
    fx = *state;
    dir = g_build_filename(fx->dir, "policies", NULL);
    path = g_build_filename(dir, "disk.policy", NULL);
    assert_true(carrel_util_write_file(path, "[resources]\nmax_disk_gib=1\n", -1, 0644, NULL));
    set = carrel_manager_load_policies(dir, NULL, &error);
    assert_non_null(set);
    carrel_policy_set_free(fx->mgr->policies);
    fx->mgr->policies = set;
    fx->mgr->policy = carrel_policy_set_get_default(set);
    return 0;
}

static CarrelSession *
create_under(Fixture *fx, const char *tmpl, const char *name, const char *policy, GError **error)
{
    CarrelSessionRequest req = {
        .template_name = (char *)tmpl, .name = (char *)name, .policy = (char *)policy};

    return carrel_manager_session_create(fx->mgr, ADMIN, &req, error);
}

/* The session's last event. */
static CarrelEvent *
last_event(Fixture *fx, const char *id)
{
    g_autoptr(GPtrArray) events = carrel_manager_session_events(fx->mgr, ADMIN, id, 0, 1000, NULL);

    assert_non_null(events);
    assert_true(events->len > 0);
    return g_ptr_array_steal_index(events, events->len - 1);
}

static const char *
param(const CarrelEvent *event, const char *name)
{
    assert_non_null(event->params);
    return json_object_get_string_member_with_default(json_node_get_object(event->params), name,
                                                      NULL);
}

static void
exec_sql(Fixture *fx, const char *sql)
{
    assert_int_equal(sqlite3_exec(fx->mgr->store->db, sql, NULL, NULL, NULL), SQLITE_OK);
}

/* Every event insert fails, as a store that cannot write would. */
#define NO_EVENTS                                                                                  \
    "CREATE TEMP TRIGGER no_events BEFORE INSERT ON main.events "                                  \
    "BEGIN SELECT RAISE(FAIL, 'cannot write (test)'); END"

/* QEMU paused the guest on ENOSPC: the watcher shows paused with the reason and an event; a
 * resume once there is room runs it again and clears the reason. */
static void
test_paused_host_disk_full(void **state)
{
    Fixture *fx = *state;
    g_autoptr(CarrelTemplate) tmpl G_GNUC_UNUSED = import(fx, "tiny");
    g_autoptr(GError) error = NULL;
    g_autoptr(CarrelSession) s = create(fx, "full", &error);
    g_autoptr(CarrelSession) paused = NULL;
    g_autoptr(CarrelSession) resumed = NULL;
    g_autoptr(CarrelEvent) event = NULL;
    g_autofree char *domain = NULL;

    assert_non_null(s);
    domain = carrel_session_domain_name(s->id);
    assert_true(carrel_hypervisor_fake_pause_for(fx->hv, domain, CARREL_PAUSE_NO_SPACE));
    assert_int_equal(carrel_manager_watch(fx->mgr), 1);
    paused = carrel_manager_session_get(fx->mgr, ADMIN, s->id, &error);
    assert_int_equal(paused->state, CARREL_SESSION_PAUSED);
    assert_true(g_str_has_prefix(paused->state_reason, "host disk full"));
    event = last_event(fx, s->id);
    assert_string_equal(event->kind, "lifecycle");
    assert_string_equal(event->action, "paused");
    assert_string_equal(param(event, "reason"), "host_disk_full");
    /* Paused sessions are not watched again: one event, not one per round. */
    assert_int_equal(carrel_manager_watch(fx->mgr), 0);
    resumed = carrel_manager_session_resume(fx->mgr, ADMIN, s->id, &error);
    if (!resumed)
        fail_msg("resume: %s", error->message);
    assert_int_equal(resumed->state, CARREL_SESSION_RUNNING);
    assert_null(resumed->state_reason);
}

/* A pause someone asked for (virsh suspend) is not a disk error: nothing is recorded. */
static void
test_paused_by_user_not_disk(void **state)
{
    Fixture *fx = *state;
    g_autoptr(CarrelTemplate) tmpl G_GNUC_UNUSED = import(fx, "tiny");
    g_autoptr(GError) error = NULL;
    g_autoptr(CarrelSession) s = create(fx, "user", &error);
    g_autoptr(CarrelSession) after = NULL;
    g_autofree char *domain = NULL;

    assert_non_null(s);
    domain = carrel_session_domain_name(s->id);
    assert_true(carrel_hypervisor_fake_pause_for(fx->hv, domain, CARREL_PAUSE_USER));
    assert_int_equal(carrel_manager_watch(fx->mgr), 0);
    after = carrel_manager_session_get(fx->mgr, ADMIN, s->id, &error);
    assert_int_equal(after->state, CARREL_SESSION_RUNNING);
}

/* Reconcile finds a domain QEMU paused on a full disk while carreld was down: it says why. */
static void
test_reconcile_paused_host_disk_full(void **state)
{
    Fixture *fx = *state;
    g_autoptr(CarrelTemplate) tmpl G_GNUC_UNUSED = import(fx, "tiny");
    g_autoptr(GError) error = NULL;
    g_autoptr(CarrelSession) s = create(fx, "down", &error);
    g_autoptr(CarrelSession) after = NULL;
    g_autofree char *domain = NULL;
    CarrelReconcileReport report = {0};

    assert_non_null(s);
    domain = carrel_session_domain_name(s->id);
    assert_true(carrel_hypervisor_fake_pause_for(fx->hv, domain, CARREL_PAUSE_NO_SPACE));
    assert_true(carrel_manager_reconcile(fx->mgr, &report, &error));
    after = carrel_manager_session_get(fx->mgr, ADMIN, s->id, &error);
    assert_int_equal(after->state, CARREL_SESSION_PAUSED);
    assert_true(g_str_has_prefix(after->state_reason, "host disk full"));
}

/* max_disk_gib at create: a template whose virtual size is larger is refused. */
static void
test_max_disk_at_create(void **state)
{
    Fixture *fx = *state;
    g_autoptr(CarrelTemplate) tiny G_GNUC_UNUSED = import(fx, "tiny");
    g_autoptr(CarrelTemplate) big = NULL;
    g_autoptr(GError) error = NULL;
    g_autoptr(CarrelSession) fits = NULL;
    g_autoptr(CarrelSession) refused = NULL;
    const char *grow[] = {"qemu-img", "resize", "-q", fx->disk, "2G", NULL};

    /* tiny's 32 MiB fit in 1 GiB. */
    fits = create_under(fx, "tiny", "fits", "disk", &error);
    if (!fits)
        fail_msg("create: %s", error->message);
    assert_true(carrel_util_run(grow, 30, NULL, NULL, &error));
    big = import(fx, "big");
    assert_true(big->virtual_size_bytes > GIB);
    refused = create_under(fx, "big", "refused", "disk", &error);
    assert_null(refused);
    assert_true(g_error_matches(error, CARREL_ERROR, CARREL_ERROR_POLICY_DENIED));
    assert_non_null(strstr(error->message, "max_disk_gib"));
    g_clear_error(&error);
    /* Without the limit, the same template is fine. */
    refused = create_under(fx, "big", "unlimited", NULL, &error);
    assert_non_null(refused);
}

/* A running session whose overlay holds more than max_disk_gib is paused, with an event. */
static void
test_max_disk_while_running(void **state)
{
    Fixture *fx = *state;
    g_autoptr(CarrelTemplate) tmpl G_GNUC_UNUSED = import(fx, "tiny");
    g_autoptr(GError) error = NULL;
    g_autoptr(CarrelSession) s = create_under(fx, "tiny", "grows", "disk", &error);
    g_autoptr(CarrelSession) after = NULL;
    g_autoptr(CarrelEvent) event = NULL;
    g_autofree char *domain = NULL;
    CarrelDomainState state_now = CARREL_DOMAIN_OTHER;

    assert_non_null(s);
    domain = carrel_session_domain_name(s->id);
    /* Without QEMU's word the overlay's blocks count: a few KiB. */
    assert_int_equal(carrel_manager_watch(fx->mgr), 0);
    assert_true(carrel_hypervisor_fake_set_disk_allocation(fx->hv, domain, GIB));
    assert_int_equal(carrel_manager_watch(fx->mgr), 0);
    /* What QEMU reports once the guest wrote 1.1 GiB. */
    assert_true(carrel_hypervisor_fake_set_disk_allocation(fx->hv, domain, GIB + GIB / 10));
    assert_int_equal(carrel_manager_watch(fx->mgr), 1);
    after = carrel_manager_session_get(fx->mgr, ADMIN, s->id, &error);
    assert_int_equal(after->state, CARREL_SESSION_PAUSED);
    assert_true(g_str_has_prefix(after->state_reason, "disk limit"));
    assert_true(carrel_hypervisor_get_state(fx->hv, domain, &state_now, NULL));
    assert_int_equal(state_now, CARREL_DOMAIN_PAUSED);
    event = last_event(fx, s->id);
    assert_string_equal(event->action, "paused");
    assert_string_equal(param(event, "reason"), "disk_limit");
}

/* A verb that happened but whose event cannot be written fails, saying so. */
static void
test_event_failure_fails_verb(void **state)
{
    Fixture *fx = *state;
    g_autoptr(CarrelTemplate) tmpl G_GNUC_UNUSED = import(fx, "tiny");
    g_autoptr(GError) error = NULL;
    g_autoptr(CarrelSession) s = create(fx, "lost", &error);
    g_autoptr(CarrelSession) paused = NULL;
    g_autoptr(GBytes) shot = NULL;
    CarrelScreenshotRequest req = {.scale = 1};

    assert_non_null(s);
    exec_sql(fx, NO_EVENTS);
    paused = carrel_manager_session_pause(fx->mgr, ADMIN, s->id, &error);
    assert_null(paused);
    assert_non_null(error);
    assert_non_null(strstr(error->message, "the pause event could not be recorded"));
    g_clear_error(&error);
    shot = carrel_manager_session_screenshot(fx->mgr, ADMIN, s->id, &req, &error);
    assert_null(shot);
    assert_non_null(strstr(error->message, "the screenshot event could not be recorded"));
}

/* The watcher records the event before the state: while events cannot be written the session
 * keeps its state, and the next round records both. */
static void
test_watch_retries_event(void **state)
{
    Fixture *fx = *state;
    g_autoptr(CarrelTemplate) tmpl G_GNUC_UNUSED = import(fx, "tiny");
    g_autoptr(GError) error = NULL;
    g_autoptr(CarrelSession) s = create(fx, "retry", &error);
    g_autoptr(CarrelSession) held = NULL;
    g_autoptr(CarrelSession) paused = NULL;
    g_autoptr(CarrelEvent) event = NULL;
    g_autofree char *domain = NULL;

    assert_non_null(s);
    domain = carrel_session_domain_name(s->id);
    assert_true(carrel_hypervisor_fake_pause_for(fx->hv, domain, CARREL_PAUSE_NO_SPACE));
    exec_sql(fx, NO_EVENTS);
    assert_int_equal(carrel_manager_watch(fx->mgr), 0);
    held = carrel_manager_session_get(fx->mgr, ADMIN, s->id, &error);
    assert_int_equal(held->state, CARREL_SESSION_RUNNING);
    exec_sql(fx, "DROP TRIGGER temp.no_events");
    assert_int_equal(carrel_manager_watch(fx->mgr), 1);
    paused = carrel_manager_session_get(fx->mgr, ADMIN, s->id, &error);
    assert_int_equal(paused->state, CARREL_SESSION_PAUSED);
    event = last_event(fx, s->id);
    assert_string_equal(param(event, "reason"), "host_disk_full");
}

/* A full store (SQLite's page limit stands in for the disk): the reserve is given up and the
 * write tried again; when even that cannot help, the verb fails with NO_SPACE. */
static void
test_store_full_releases_reserve(void **state)
{
    Fixture *fx = *state;
    g_autoptr(CarrelTemplate) tmpl G_GNUC_UNUSED = import(fx, "tiny");
    g_autoptr(GError) error = NULL;
    g_autoptr(CarrelSession) s = create(fx, "cap", &error);
    g_autoptr(CarrelSession) paused = NULL;
    g_autofree char *reserve = g_build_filename(fx->mgr->state_dir, "disk-reserve", NULL);
    g_autofree char *sql = NULL;
    sqlite3_stmt *stmt = NULL;
    gint64 pages;

    assert_non_null(s);
    assert_true(g_file_test(reserve, G_FILE_TEST_IS_REGULAR));
    assert_int_equal(sqlite3_prepare_v2(fx->mgr->store->db, "PRAGMA page_count", -1, &stmt, NULL),
                     SQLITE_OK);
    assert_int_equal(sqlite3_step(stmt), SQLITE_ROW);
    pages = sqlite3_column_int64(stmt, 0);
    sqlite3_finalize(stmt);
    /* Fill the last free pages, then no page more. */
    sql = g_strdup_printf("PRAGMA max_page_count = %" G_GINT64_FORMAT, pages);
    exec_sql(fx, sql);
    for (guint size = 2048; size >= 4; size /= 2)
        for (guint i = 0; i < 400; i++) {
            g_autofree char *pad =
                g_strdup_printf("INSERT INTO events (session_id, ts, actor, kind, detail) "
                                "SELECT id, 0, 'test', 'pad', hex(randomblob(%u)) FROM sessions",
                                size);
            if (sqlite3_exec(fx->mgr->store->db, pad, NULL, NULL, NULL) != SQLITE_OK)
                break;
        }
    paused = carrel_manager_session_pause(fx->mgr, ADMIN, s->id, &error);
    assert_null(paused);
    assert_true(g_error_matches(error, CARREL_ERROR, CARREL_ERROR_NO_SPACE));
    assert_false(g_file_test(reserve, G_FILE_TEST_EXISTS));
}

/* While the disk is low, creates, snapshots and uploads are refused early (NO_SPACE); reads
 * work; once there is room again the reserve comes back. */
static void
test_low_disk_refuses(void **state)
{
    Fixture *fx = *state;
    g_autoptr(CarrelTemplate) tmpl G_GNUC_UNUSED = import(fx, "tiny");
    g_autoptr(GError) error = NULL;
    g_autoptr(CarrelSession) s = create(fx, "before", &error);
    g_autoptr(CarrelSession) refused = NULL;
    g_autoptr(CarrelSnapshot) snap = NULL;
    g_autoptr(GPtrArray) list = NULL;
    g_autofree char *upload = NULL;
    g_autofree char *reserve = g_build_filename(fx->mgr->state_dir, "disk-reserve", NULL);
    guint64 low = fx->mgr->low_bytes;

    assert_non_null(s);
    /* More than any disk has free: always low. */
    fx->mgr->low_bytes = G_MAXUINT64 / 4;
    refused = create(fx, "after", &error);
    assert_null(refused);
    assert_true(g_error_matches(error, CARREL_ERROR, CARREL_ERROR_NO_SPACE));
    assert_non_null(strstr(error->message, "creating a session refused until there is room"));
    g_clear_error(&error);
    snap = carrel_manager_snapshot_create(fx->mgr, ADMIN, s->id, "s1", &error);
    assert_null(snap);
    assert_true(g_error_matches(error, CARREL_ERROR, CARREL_ERROR_NO_SPACE));
    g_clear_error(&error);
    /* An upload is refused before its body is spooled. */
    assert_int_equal(carrel_manager_upload_spool(fx->mgr, &upload, &error), -1);
    assert_null(upload);
    assert_true(g_error_matches(error, CARREL_ERROR, CARREL_ERROR_NO_SPACE));
    g_clear_error(&error);
    list = carrel_manager_session_list(fx->mgr, ADMIN, FALSE, &error);
    assert_non_null(list);
    /* The reserve given up (a full store did it) is made again once there is room. */
    fx->mgr->low_bytes = low;
    assert_true(carrel_manager_disk_release(fx->mgr));
    assert_false(g_file_test(reserve, G_FILE_TEST_EXISTS));
    assert_false(carrel_manager_disk_release(fx->mgr));
    refused = create(fx, "after", &error);
    if (!refused)
        fail_msg("create: %s", error->message);
    assert_true(g_file_test(reserve, G_FILE_TEST_IS_REGULAR));
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_paused_host_disk_full, setup, teardown),
        cmocka_unit_test_setup_teardown(test_paused_by_user_not_disk, setup, teardown),
        cmocka_unit_test_setup_teardown(test_reconcile_paused_host_disk_full, setup, teardown),
        cmocka_unit_test_setup_teardown(test_max_disk_at_create, setup_disk, teardown),
        cmocka_unit_test_setup_teardown(test_max_disk_while_running, setup_disk, teardown),
        cmocka_unit_test_setup_teardown(test_event_failure_fails_verb, setup, teardown),
        cmocka_unit_test_setup_teardown(test_watch_retries_event, setup, teardown),
        cmocka_unit_test_setup_teardown(test_store_full_releases_reserve, setup, teardown),
        cmocka_unit_test_setup_teardown(test_low_disk_refuses, setup, teardown),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
