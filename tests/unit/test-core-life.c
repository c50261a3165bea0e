/*
 * Unit tests of core over the fake hypervisor, the session's life after create: the door
 * (owners, refusals, the audit), pause and hibernate, snapshots, forks, time limits, warm pools
 * and the console. The fixture is core-fixture.c.
 */
#include "core-fixture.h"

static const CarrelPrincipal agent_a = {(char *)"t-a", (char *)"agent-a", CARREL_ROLE_AGENT};
static const CarrelPrincipal agent_b = {(char *)"t-b", (char *)"agent-b", CARREL_ROLE_AGENT};

/* Rows of the audit log matching principal, operation and result (any when NULL). */
static guint
audit_rows(Fixture *fx, const char *principal, const char *operation, const char *result)
{
    CarrelAuditQuery q = {.principal = principal, .operation = operation, .result = result};
    g_autoptr(JsonNode) list = carrel_manager_audit_list(fx->mgr, ADMIN, &q, NULL);

    assert_non_null(list);
    return json_array_get_length(
        json_object_get_array_member(json_node_get_object(list), "entries"));
}

/* The door: owners, refusals audited, the state change and its row together, the timeline
 * naming who acted, and an intact chain. */
static void
test_door(void **state)
{
    Fixture *fx = *state;
    g_autoptr(CarrelTemplate) tmpl G_GNUC_UNUSED = import(fx, "tiny");
    CarrelSessionRequest req = {.template_name = (char *)"tiny", .name = (char *)"mine"};
    g_autoptr(GError) error = NULL;
    g_autoptr(CarrelSession) s = carrel_manager_session_create(fx->mgr, &agent_a, &req, &error);
    g_autoptr(CarrelSession) paused = NULL;
    g_autoptr(GPtrArray) seen_by_b = NULL;
    g_autoptr(GPtrArray) events = NULL;
    g_autoptr(JsonNode) verdict = NULL;
    CarrelEvent *ev;

    assert_non_null(s);
    assert_string_equal(s->owner_id, "t-a");
    assert_string_equal(s->owner_label, "agent-a");
    /* Agent B: the session does not exist, for reading and for acting; both refusals audited. */
    assert_null(carrel_manager_session_get(fx->mgr, &agent_b, "mine", &error));
    assert_true(g_error_matches(error, CARREL_ERROR, CARREL_ERROR_NOT_FOUND));
    g_clear_error(&error);
    assert_null(carrel_manager_session_destroy(fx->mgr, &agent_b, s->id, &error));
    assert_true(g_error_matches(error, CARREL_ERROR, CARREL_ERROR_NOT_FOUND));
    g_clear_error(&error);
    seen_by_b = carrel_manager_session_list(fx->mgr, &agent_b, FALSE, &error);
    assert_int_equal(seen_by_b->len, 0);
    assert_int_equal(audit_rows(fx, "agent-b", NULL, "denied"), 2);
    assert_int_equal(audit_rows(fx, "agent-b", "session.destroy", "denied"), 1);
    /* Agent A pauses its own: the row and the timeline name it. */
    paused = carrel_manager_session_pause(fx->mgr, &agent_a, "mine", &error);
    assert_non_null(paused);
    assert_int_equal(audit_rows(fx, "agent-a", "session.create", "ok"), 1);
    assert_int_equal(audit_rows(fx, "t-a", "session.pause", "ok"), 1);
    events = carrel_manager_session_events(fx->mgr, ADMIN, s->id, 0, 100, &error);
    ev = g_ptr_array_index(events, events->len - 1);
    assert_string_equal(ev->action, "pause");
    assert_string_equal(ev->actor, "agent-a");
    assert_string_equal(ev->actor_id, "t-a");
    /* A failed verb is a "failed" row: pausing a paused session. */
    assert_null(carrel_manager_session_pause(fx->mgr, &agent_a, "mine", &error));
    g_clear_error(&error);
    assert_int_equal(audit_rows(fx, "agent-a", "session.pause", "failed"), 1);
    /* Agents may not read the log. */
    {
        CarrelAuditQuery q = {0};
        assert_null(carrel_manager_audit_list(fx->mgr, &agent_a, &q, &error));
        assert_true(g_error_matches(error, CARREL_ERROR, CARREL_ERROR_FORBIDDEN));
        g_clear_error(&error);
    }
    verdict = carrel_manager_audit_verify(fx->mgr, ADMIN, &error);
    assert_true(json_object_get_boolean_member(json_node_get_object(verdict), "intact"));
}

static void
test_pause_hibernate(void **state)
{
    Fixture *fx = *state;
    g_autoptr(CarrelTemplate) tmpl G_GNUC_UNUSED = import(fx, "tiny");
    g_autoptr(GError) error = NULL;
    g_autoptr(CarrelSession) s = create(fx, "ph", &error);
    g_autoptr(CarrelSession) paused = NULL, resumed = NULL, asleep = NULL, woken = NULL;
    g_autoptr(CarrelSession) gone = NULL;
    g_autofree char *domain = NULL;
    g_autofree char *saved = NULL;
    CarrelDomainState dstate;

    assert_non_null(s);
    domain = carrel_session_domain_name(s->id);
    saved = g_build_filename(s->dir, "hibernate.save", NULL);
    paused = carrel_manager_session_pause(fx->mgr, ADMIN, "ph", &error);
    assert_non_null(paused);
    assert_int_equal(paused->state, CARREL_SESSION_PAUSED);
    assert_null(carrel_manager_session_pause(fx->mgr, ADMIN, "ph", &error));
    assert_true(g_error_matches(error, CARREL_ERROR, CARREL_ERROR_WRONG_STATE));
    g_clear_error(&error);
    resumed = carrel_manager_session_resume(fx->mgr, ADMIN, "ph", &error);
    assert_int_equal(resumed->state, CARREL_SESSION_RUNNING);
    assert_true(carrel_hypervisor_get_state(fx->hv, domain, &dstate, NULL));
    assert_int_equal(dstate, CARREL_DOMAIN_RUNNING);

    /* Hibernate: memory in a file, no domain left; resume brings the same domain back. */
    asleep = carrel_manager_session_hibernate(fx->mgr, ADMIN, "ph", &error);
    assert_non_null(asleep);
    assert_int_equal(asleep->state, CARREL_SESSION_HIBERNATED);
    assert_true(g_file_test(saved, G_FILE_TEST_IS_REGULAR));
    assert_false(carrel_hypervisor_get_state(fx->hv, domain, &dstate, &error));
    assert_true(g_error_matches(error, CARREL_ERROR, CARREL_ERROR_NOT_FOUND));
    g_clear_error(&error);
    woken = carrel_manager_session_resume(fx->mgr, ADMIN, "ph", &error);
    if (!woken)
        fail_msg("resume: %s", error->message);
    assert_int_equal(woken->state, CARREL_SESSION_RUNNING);
    assert_false(g_file_test(saved, G_FILE_TEST_EXISTS));

    /* A hibernated session can be destroyed: no definition to undefine. */
    g_clear_pointer(&asleep, carrel_session_free);
    asleep = carrel_manager_session_hibernate(fx->mgr, ADMIN, "ph", &error);
    assert_non_null(asleep);
    gone = carrel_manager_session_destroy(fx->mgr, ADMIN, "ph", &error);
    assert_non_null(gone);
    assert_int_equal(gone->state, CARREL_SESSION_DESTROYED);
}

/* The disk a domain runs on, as the hypervisor lists it. */
static char *
domain_disk(Fixture *fx, const char *domain)
{
    g_autoptr(GPtrArray) all = carrel_hypervisor_list(fx->hv, NULL);

    for (guint i = 0; all && i < all->len; i++) {
        CarrelDomainInfo *info = g_ptr_array_index(all, i);
        if (g_str_equal(info->name, domain))
            return g_strdup(info->disk_path);
    }
    return g_strdup("");
}

/* A live snapshot the hypervisor refuses leaves the session as it was, and no file behind. */
static void
test_snapshot_refused(void **state)
{
    Fixture *fx = *state;
    g_autoptr(CarrelTemplate) tmpl G_GNUC_UNUSED = import(fx, "tiny");
    g_autoptr(GError) error = NULL;
    g_autoptr(CarrelSession) s = create(fx, "snap", &error);
    g_autoptr(CarrelSession) after = NULL;
    g_autofree char *snapshots = NULL;
    g_autoptr(GDir) dir = NULL;
    const char *name;

    assert_non_null(s);
    carrel_hypervisor_fake_fail_next(fx->hv, "snapshot_live");
    assert_null(carrel_manager_snapshot_create(fx->mgr, ADMIN, "snap", "s1", &error));
    assert_true(g_error_matches(error, CARREL_ERROR, CARREL_ERROR_HYPERVISOR));
    after = carrel_manager_session_get(fx->mgr, ADMIN, "snap", NULL);
    assert_int_equal(after->state, CARREL_SESSION_RUNNING);
    assert_string_equal(after->overlay_path, s->overlay_path);
    assert_null(after->head_snapshot);
    snapshots = g_build_filename(s->dir, "snapshots", NULL);
    dir = g_dir_open(snapshots, 0, NULL);
    assert_true(!dir || !g_dir_read_name(dir));
    g_clear_pointer(&dir, g_dir_close);
    dir = g_dir_open(s->dir, 0, NULL);
    while ((name = g_dir_read_name(dir)))
        assert_false(g_str_has_prefix(name, "top-"));
}

static void
test_snapshots(void **state)
{
    Fixture *fx = *state;
    g_autoptr(CarrelTemplate) tmpl G_GNUC_UNUSED = import(fx, "tiny");
    g_autoptr(GError) error = NULL;
    g_autoptr(CarrelSession) s = create(fx, "snap", &error);
    g_autoptr(CarrelSnapshot) s1 = NULL, s2 = NULL, dup = NULL, off = NULL;
    g_autoptr(CarrelSession) after = NULL, back = NULL, stopped = NULL, disk_only = NULL;
    g_autoptr(GPtrArray) list = NULL;
    g_autofree char *domain = NULL, *disk = NULL;
    CarrelSpiceInfo before = {0}, now = {0};

    assert_non_null(s);
    domain = carrel_session_domain_name(s->id);
    assert_true(carrel_hypervisor_spice_info(fx->hv, domain, &before, &error));
    s1 = carrel_manager_snapshot_create(fx->mgr, ADMIN, "snap", "s1", &error);
    if (!s1)
        fail_msg("snapshot: %s", error->message);
    assert_non_null(s1->memory_path);
    assert_true(g_file_test(s1->memory_path, G_FILE_TEST_IS_REGULAR));
    assert_string_equal(s1->layer_path, s->overlay_path); /* the old top is now the layer */
    after = carrel_manager_session_get(fx->mgr, ADMIN, "snap", &error);
    assert_int_equal(after->state, CARREL_SESSION_RUNNING);
    assert_string_not_equal(after->overlay_path, s->overlay_path);
    assert_string_equal(after->head_snapshot, s1->id);
    /* The same QEMU runs on, on the new top. */
    assert_true(carrel_hypervisor_spice_info(fx->hv, domain, &now, &error));
    assert_int_equal(now.run_id, before.run_id);
    disk = domain_disk(fx, domain);
    assert_string_equal(disk, after->overlay_path);
    dup = carrel_manager_snapshot_create(fx->mgr, ADMIN, "snap", "s1", &error);
    assert_null(dup);
    assert_true(g_error_matches(error, CARREL_ERROR, CARREL_ERROR_EXISTS));
    g_clear_error(&error);
    assert_null(carrel_manager_snapshot_create(fx->mgr, ADMIN, "snap", "Bad Name", &error));
    assert_true(g_error_matches(error, CARREL_ERROR, CARREL_ERROR_INVALID_ARG));
    g_clear_error(&error);
    s2 = carrel_manager_snapshot_create(fx->mgr, ADMIN, "snap", "s2", &error);
    assert_non_null(s2);
    assert_string_equal(s2->parent, s1->id);

    /* Revert to s1: running again on a fresh top over s1's layer. */
    back = carrel_manager_snapshot_revert(fx->mgr, ADMIN, "snap", "s1", &error);
    if (!back)
        fail_msg("revert: %s", error->message);
    assert_int_equal(back->state, CARREL_SESSION_RUNNING);
    assert_string_equal(back->head_snapshot, s1->id);
    assert_null(carrel_manager_snapshot_revert(fx->mgr, ADMIN, "snap", "nope", &error));
    assert_true(g_error_matches(error, CARREL_ERROR, CARREL_ERROR_NOT_FOUND));
    g_clear_error(&error);
    list = carrel_manager_snapshot_list(fx->mgr, ADMIN, "snap", &error);
    assert_int_equal(list->len, 2);
    assert_true(((CarrelSnapshot *)g_ptr_array_index(list, 0))->size_bytes > 0);

    /* A stopped session: disk only; reverting to it leaves the session stopped. */
    stopped = carrel_manager_session_stop(fx->mgr, ADMIN, "snap", 1, &error);
    assert_non_null(stopped);
    off = carrel_manager_snapshot_create(fx->mgr, ADMIN, "snap", "off", &error);
    assert_non_null(off);
    assert_null(off->memory_path);
    disk_only = carrel_manager_snapshot_revert(fx->mgr, ADMIN, "snap", "off", &error);
    assert_non_null(disk_only);
    assert_int_equal(disk_only->state, CARREL_SESSION_STOPPED);

    /* Delete: a leaf nothing stands on loses its layer; s1 carries "off" and keeps its layer,
     * and "off" now hangs from s1's parent. */
    {
        gboolean kept = TRUE;
        g_autoptr(CarrelSnapshot) off_after = NULL;
        assert_true(carrel_manager_snapshot_delete(fx->mgr, ADMIN, "snap", "s2", &kept, &error));
        assert_false(kept);
        assert_false(g_file_test(s2->layer_path, G_FILE_TEST_EXISTS));
        assert_false(g_file_test(s2->memory_path, G_FILE_TEST_EXISTS));
        assert_true(carrel_manager_snapshot_delete(fx->mgr, ADMIN, "snap", "s1", &kept, &error));
        assert_true(kept);
        assert_true(g_file_test(s1->layer_path, G_FILE_TEST_EXISTS));
        g_clear_pointer(&list, g_ptr_array_unref);
        list = carrel_manager_snapshot_list(fx->mgr, ADMIN, "snap", &error);
        assert_int_equal(list->len, 1);
        off_after = carrel_store_snapshot_get(fx->mgr->store, s->id, "off", &error);
        assert_null(off_after->parent);
        assert_false(carrel_manager_snapshot_delete(fx->mgr, ADMIN, "snap", "s1", &kept, &error));
        assert_true(g_error_matches(error, CARREL_ERROR, CARREL_ERROR_NOT_FOUND));
    }
}

static void
test_fork(void **state)
{
    Fixture *fx = *state;
    g_autoptr(CarrelTemplate) tmpl G_GNUC_UNUSED = import(fx, "tiny");
    g_autoptr(GError) error = NULL;
    g_autoptr(CarrelSession) s = create(fx, "origin", &error);
    g_autoptr(CarrelSnapshot) s1 = NULL;
    g_autoptr(GPtrArray) forks = NULL;
    g_autoptr(CarrelSession) refused = NULL;

    assert_non_null(s);
    s1 = carrel_manager_snapshot_create(fx->mgr, ADMIN, "origin", "s1", &error);
    assert_non_null(s1);
    assert_null(carrel_manager_session_fork(fx->mgr, ADMIN, "origin", "s1", 0, &error));
    assert_true(g_error_matches(error, CARREL_ERROR, CARREL_ERROR_INVALID_ARG));
    g_clear_error(&error);
    forks = carrel_manager_session_fork(fx->mgr, ADMIN, "origin", "s1", 2, &error);
    if (!forks)
        fail_msg("fork: %s", error->message);
    assert_int_equal(forks->len, 2);
    for (guint i = 0; i < forks->len; i++) {
        CarrelSession *f = g_ptr_array_index(forks, i);
        assert_int_equal(f->state, CARREL_SESSION_RUNNING);
        assert_string_equal(f->origin_session, s->id);
        assert_string_equal(f->head_snapshot, s1->id);
    }
    /* The origin's layers carry the forks: it cannot go first. */
    refused = carrel_manager_session_destroy(fx->mgr, ADMIN, "origin", &error);
    assert_null(refused);
    assert_true(g_error_matches(error, CARREL_ERROR, CARREL_ERROR_WRONG_STATE));
    g_clear_error(&error);
    for (guint i = 0; i < forks->len; i++) {
        g_autoptr(CarrelSession) gone = carrel_manager_session_destroy(
            fx->mgr, ADMIN, ((CarrelSession *)g_ptr_array_index(forks, i))->id, &error);
        assert_non_null(gone);
    }
    g_clear_pointer(&refused, carrel_session_free);
    refused = carrel_manager_session_destroy(fx->mgr, ADMIN, "origin", &error);
    assert_non_null(refused);
}

static void
test_time_limits(void **state)
{
    Fixture *fx = *state;
    g_autoptr(CarrelTemplate) tmpl G_GNUC_UNUSED = import(fx, "tiny");
    g_autoptr(GError) error = NULL;
    CarrelSessionRequest ttl_req = {.template_name = (char *)"tiny",
                                    .name = (char *)"short",
                                    .ttl_s = 1,
                                    .expiry_action = (char *)"destroy"};
    CarrelSessionRequest idle_req = {.template_name = (char *)"tiny",
                                     .name = (char *)"idle",
                                     .idle_timeout_s = 1,
                                     .expiry_action = (char *)"pause"};
    g_autoptr(CarrelSession) a = carrel_manager_session_create(fx->mgr, ADMIN, &ttl_req, &error);
    g_autoptr(CarrelSession) b = carrel_manager_session_create(fx->mgr, ADMIN, &idle_req, &error);
    g_autoptr(CarrelSession) a2 = NULL, b2 = NULL;

    assert_non_null(a);
    assert_non_null(b);
    assert_true(a->expires_at > 0);
    for (guint acted = 0, i = 0; acted < 2 && i < 50; i++) {
        acted += carrel_manager_watch(fx->mgr);
        g_usleep(100 * 1000);
    }
    a2 = carrel_manager_session_get(fx->mgr, ADMIN, a->id, &error);
    b2 = carrel_manager_session_get(fx->mgr, ADMIN, b->id, &error);
    assert_int_equal(a2->state, CARREL_SESSION_DESTROYED);
    assert_int_equal(b2->state, CARREL_SESSION_PAUSED);
    /* Limits act once: the paused session stays paused. */
    assert_int_equal(carrel_manager_watch(fx->mgr), 0);
}

static void
test_warm_pool(void **state)
{
    Fixture *fx = *state;
    g_autoptr(CarrelTemplate) tmpl G_GNUC_UNUSED = import(fx, "tiny");
    g_autoptr(GError) error = NULL;
    g_autoptr(GPtrArray) listed = NULL;
    g_autoptr(GPtrArray) members = NULL;
    g_autoptr(CarrelSession) taken = NULL;
    g_autoptr(CarrelSession) plain = NULL;
    CarrelSessionRequest cold = {
        .template_name = (char *)"tiny", .name = (char *)"c", .cold = TRUE};

    assert_false(carrel_manager_pool_set(fx->mgr, ADMIN, "tiny", CARREL_LIMIT_POOL + 1, &error));
    g_clear_error(&error);
    assert_true(carrel_manager_pool_set(fx->mgr, ADMIN, "tiny", 1, &error));
    carrel_manager_watch(fx->mgr);
    members = carrel_store_pool_members(fx->mgr->store, "tiny", &error);
    assert_int_equal(members->len, 1);
    assert_int_equal(((CarrelSession *)g_ptr_array_index(members, 0))->state,
                     CARREL_SESSION_PAUSED);
    /* Members are nobody's sessions: not listed. */
    listed = carrel_manager_session_list(fx->mgr, ADMIN, FALSE, &error);
    assert_int_equal(listed->len, 0);
    /* A cold create does not take from the pool; a plain one does, at once. */
    plain = carrel_manager_session_create(fx->mgr, ADMIN, &cold, &error);
    assert_non_null(plain);
    assert_false(plain->from_pool);
    taken = create(fx, "from-pool", &error);
    assert_non_null(taken);
    assert_true(taken->from_pool);
    assert_null(taken->pool);
    assert_string_equal(taken->name, "from-pool");
    assert_int_equal(taken->state, CARREL_SESSION_RUNNING);
    assert_string_equal(taken->id, ((CarrelSession *)g_ptr_array_index(members, 0))->id);
    /* The watcher refills. */
    g_clear_pointer(&members, g_ptr_array_unref);
    carrel_manager_watch(fx->mgr);
    members = carrel_store_pool_members(fx->mgr->store, "tiny", &error);
    assert_int_equal(members->len, 1);
    /* Shrinking to 0 removes the member. */
    assert_true(carrel_manager_pool_set(fx->mgr, ADMIN, "tiny", 0, &error));
    carrel_manager_watch(fx->mgr);
    g_clear_pointer(&members, g_ptr_array_unref);
    members = carrel_store_pool_members(fx->mgr->store, "tiny", &error);
    assert_int_equal(members->len, 0);
}

/* Once the watcher runs on its own, a refill is a chore of its worker: watch returns without
 * waiting for it, and the member appears all the same. */
static void
test_refill_is_a_chore(void **state)
{
    Fixture *fx = *state;
    g_autoptr(CarrelTemplate) tmpl G_GNUC_UNUSED = import(fx, "tiny");
    g_autoptr(GError) error = NULL;
    guint members = 0;

    assert_true(carrel_manager_pool_set(fx->mgr, ADMIN, "tiny", 1, &error));
    carrel_manager_chores_start(fx->mgr);
    /* Asked twice: queued once (or run again once the first run began), never twice at once. */
    carrel_manager_chore(fx->mgr, CARREL_CHORE_REFILL);
    carrel_manager_chore(fx->mgr, CARREL_CHORE_REFILL);
    for (guint i = 0; i < 100 && members < 1; i++) {
        g_autoptr(GPtrArray) list = carrel_store_pool_members(fx->mgr->store, "tiny", NULL);
        members = list ? list->len : 0;
        g_usleep(50 * 1000);
    }
    carrel_manager_chores_stop(fx->mgr);
    assert_int_equal(members, 1);
}

static void
test_warm_older_machine(void **state)
{
    Fixture *fx = *state;
    g_autoptr(CarrelTemplate) tmpl G_GNUC_UNUSED = import(fx, "tiny");
    g_autoptr(GError) error = NULL;
    g_autoptr(CarrelJob) job = carrel_manager_template_warm(fx->mgr, ADMIN, "tiny", 0, &error);
    g_autoptr(CarrelJob) again = NULL;
    g_autoptr(CarrelWarmState) warm = NULL;
    g_autoptr(CarrelWarmState) redone = NULL;
    g_autoptr(CarrelSession) booted = NULL;
    g_autoptr(CarrelSession) restored = NULL;

    assert_true(carrel_job_wait(job, &error));
    warm = carrel_manager_template_warm_state(fx->mgr, "tiny", 1);
    assert_int_equal(warm->machine_revision, CARREL_HYPERVISOR_MACHINE_REVISION);
    /* A warm state of an older machine is never restored: creates boot... */
    warm->machine_revision = CARREL_HYPERVISOR_MACHINE_REVISION - 1;
    assert_true(carrel_store_warm_put(fx->mgr->store, warm, &error));
    booted = create(fx, "booted", &error);
    assert_non_null(booted);
    assert_false(booted->from_warm);
    /* ...until warming again redoes it. */
    again = carrel_manager_template_warm(fx->mgr, ADMIN, "tiny", 0, &error);
    assert_true(carrel_job_wait(again, &error));
    redone = carrel_manager_template_warm_state(fx->mgr, "tiny", 1);
    assert_int_equal(redone->machine_revision, CARREL_HYPERVISOR_MACHINE_REVISION);
    restored = create(fx, "restored", &error);
    assert_non_null(restored);
    assert_true(restored->from_warm);
}

/* Console access: a running or paused session's port and a password reused while fresh. */
static void
test_console_open(void **state)
{
    Fixture *fx = *state;
    g_autoptr(CarrelTemplate) tmpl G_GNUC_UNUSED = import(fx, "tiny");
    g_autoptr(GError) error = NULL;
    g_autoptr(CarrelSession) s = create(fx, "con", &error);
    g_autoptr(CarrelConsoleAccess) first = NULL;
    g_autoptr(CarrelConsoleAccess) second = NULL;
    g_autoptr(CarrelConsoleAccess) third = NULL;
    g_autoptr(CarrelSession) paused = NULL;
    g_autoptr(CarrelSession) stopped = NULL;
    g_autofree char *set = NULL;
    gint64 until = 0, now = g_get_real_time() / G_USEC_PER_SEC;

    assert_non_null(s);
    first = carrel_manager_console_open(fx->mgr, ADMIN, "con", &error);
    assert_non_null(first);
    assert_string_equal(first->session_id, s->id);
    assert_true(first->port > 0);
    assert_true(strlen(first->password) >= 32);
    assert_true(first->expires_at >= now + CARREL_CONSOLE_PASSWORD_TTL_S - 1);
    set = carrel_hypervisor_fake_get_spice_password(fx->hv, first->domain, &until);
    assert_string_equal(set, first->password);
    assert_int_equal(until, first->expires_at);
    /* A second viewer gets the same password instead of locking out the first. */
    paused = carrel_manager_session_pause(fx->mgr, ADMIN, "con", &error);
    assert_non_null(paused);
    second = carrel_manager_console_open(fx->mgr, ADMIN, s->id, &error);
    assert_non_null(second);
    assert_string_equal(second->password, first->password);
    assert_int_equal(second->expires_at, first->expires_at);
    /* A new QEMU forgot it: a new one is set. */
    assert_true(carrel_hypervisor_destroy(fx->hv, first->domain, NULL));
    assert_true(carrel_hypervisor_start(fx->hv, first->domain, NULL));
    third = carrel_manager_console_open(fx->mgr, ADMIN, s->id, &error);
    assert_non_null(third);
    assert_string_not_equal(third->password, first->password);
    carrel_hypervisor_fake_fail_next(fx->hv, "spice_password");
    g_clear_pointer(&third, carrel_console_access_free);
    assert_true(carrel_hypervisor_destroy(fx->hv, first->domain, NULL));
    assert_true(carrel_hypervisor_start(fx->hv, first->domain, NULL));
    assert_null(carrel_manager_console_open(fx->mgr, ADMIN, s->id, &error));
    assert_true(g_error_matches(error, CARREL_ERROR, CARREL_ERROR_HYPERVISOR));
    assert_non_null(strstr(error->message, "opening the console of session"));
    g_clear_error(&error);
    stopped = carrel_manager_session_destroy(fx->mgr, ADMIN, s->id, &error);
    assert_non_null(stopped);
    assert_null(carrel_manager_console_open(fx->mgr, ADMIN, s->id, &error));
    assert_true(g_error_matches(error, CARREL_ERROR, CARREL_ERROR_WRONG_STATE));
    assert_non_null(strstr(error->message, "destroyed"));
    g_clear_error(&error);
    assert_null(carrel_manager_console_open(fx->mgr, ADMIN, "nope", &error));
    assert_true(g_error_matches(error, CARREL_ERROR, CARREL_ERROR_NOT_FOUND));
}

/* (e) A path the guest says is over the limit (du's apparent size: a sparse file counts whole)
 * is refused before its tar is made: the error names it and its size, and tar never ran. */
static void
test_extract_refuses_oversized(void **state)
{
    Fixture *fx = *state;
    g_autoptr(CarrelTemplate) tmpl G_GNUC_UNUSED = import(fx, "tiny");
    g_autoptr(GError) error = NULL;
    g_autoptr(CarrelSession) s = create(fx, "big", &error);
    char *paths[] = {(char *)"/out/big.iso", NULL};
    CarrelExtractRequest req = {.paths = paths, .max_bytes = 1 << 20, .max_files = 100};
    g_autoptr(CarrelExtraction) x = NULL;
    g_auto(GStrv) argv = NULL;

    assert_non_null(s);
    carrel_hypervisor_fake_set_exec_result(fx->hv, 0, "5368709120\t/out/big.iso\n", NULL);
    x = carrel_manager_session_extract(fx->mgr, ADMIN, s->id, &req, &error);
    assert_non_null(x);
    assert_non_null(x->error);
    assert_non_null(strstr(x->error, "'/out/big.iso' is 5368709120 bytes"));
    assert_int_equal(x->count, 0);
    argv = carrel_hypervisor_fake_get_exec_argv(fx->hv);
    assert_non_null(argv);
    assert_string_equal(argv[0], "/usr/bin/du"); /* the last thing asked of the guest */
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_door, setup, teardown),
        cmocka_unit_test_setup_teardown(test_pause_hibernate, setup, teardown),
        cmocka_unit_test_setup_teardown(test_snapshots, setup, teardown),
        cmocka_unit_test_setup_teardown(test_snapshot_refused, setup, teardown),
        cmocka_unit_test_setup_teardown(test_fork, setup, teardown),
        cmocka_unit_test_setup_teardown(test_time_limits, setup, teardown),
        cmocka_unit_test_setup_teardown(test_warm_pool, setup, teardown),
        cmocka_unit_test_setup_teardown(test_warm_older_machine, setup, teardown),
        cmocka_unit_test_setup_teardown(test_refill_is_a_chore, setup, teardown),
        cmocka_unit_test_setup_teardown(test_console_open, setup, teardown),
        cmocka_unit_test_setup_teardown(test_extract_refuses_oversized, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
