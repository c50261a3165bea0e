/*
 * Fork: N new sessions restored from one snapshot's memory, each on its own overlay over the
 * snapshot's frozen layer, each with its own UUID, VM generation id and MAC, running side by
 * side. A fork's disk stands on its origin's layers, so the origin cannot be destroyed while
 * forks live.
 */
#include "core/core-priv.h"
#include "disk/disk.h"
#include "net/net.h"

/* Forks restored at once: enough to overlap the restores' waits, few enough for small hosts. */
#define CARREL_FORK_PARALLEL 4

static CarrelSession *
fork_row(CarrelManager *mgr, const CarrelPrincipal *who, const CarrelSession *origin,
         const CarrelSnapshot *snap)
{
    g_autoptr(CarrelSession) s = carrel_session_new();

    s->id = carrel_util_new_id("s-");
    s->name = g_strdup(s->id);
    s->template_name = g_strdup(origin->template_name);
    s->template_version = origin->template_version;
    s->state = CARREL_SESSION_CREATING;
    s->vcpus = origin->vcpus;
    s->memory_mib = origin->memory_mib;
    s->screen_width = origin->screen_width;
    s->screen_height = origin->screen_height;
    s->dir = g_build_filename(mgr->state_dir, "sessions", s->id, NULL);
    s->overlay_path = g_build_filename(s->dir, "disk.qcow2", NULL);
    s->from_warm = TRUE;
    s->exit_paths = g_strdupv(origin->exit_paths);
    s->policy = g_strdup(origin->policy);
    s->head_snapshot = g_strdup(snap->id);
    s->origin_session = g_strdup(origin->id);
    s->mac = carrel_net_new_mac();
    /* It maps the snapshot's RAM file where the snapshot has one (core-snapshot.c), else the
     * origin's, on which the snapshot's whole save loads. */
    s->memory_file = g_strdup(snap->memory_file ? snap->memory_file : origin->memory_file);
    /* A fork belongs to whoever asked for it, not to the origin's owner. */
    s->owner_id = g_strdup(who->token_id);
    s->owner_label = g_strdup(who->label);
    s->created_at = s->updated_at = carrel_util_now();
    return g_steal_pointer(&s);
}

static gboolean
bring_up_fork(CarrelManager *mgr, CarrelSession *s, const CarrelSnapshot *snap, GError **error)
{
    g_autofree char *domain = carrel_session_domain_name(s->id);
    g_autoptr(CarrelTemplate) tmpl = NULL;
    g_autofree char *xml = NULL;
    gboolean by_screen = FALSE, ok;

    tmpl = carrel_store_template_get(mgr->store, s->template_name, s->template_version, error);
    if (!tmpl || !carrel_util_ensure_dir(s->dir, 0711, error) ||
        !carrel_disk_create_overlay(s->overlay_path, snap->layer_path, "qcow2", error) ||
        !(xml = carrel_manager_session_xml(mgr, s, tmpl, error)))
        return FALSE;
    /* The forks read the one memory file side by side (hypervisor-libvirt-restore.c). */
    carrel_crash_during("fork.restoring", 200);
    carrel_timings_mark("prepare");
    ok = carrel_manager_restore(mgr, "fork", snap->memory_path, xml, error);
    if (!ok || !carrel_hypervisor_define(mgr->hv, xml, error) ||
        !carrel_manager_wait_agent(mgr, domain, &by_screen, error))
        return FALSE;
    /* Clock, MAC and screen after the reply (core-catchup.c); without an agent, none of them. */
    if (!by_screen)
        carrel_manager_catchup_restored(mgr, s, TRUE);
    else if (!carrel_manager_apply_screen(mgr, s, by_screen, error))
        return FALSE;
    /* The restored guest still has its origin's address: it gets its own. */
    ok = carrel_manager_egress_attach(mgr, s, TRUE, error);
    carrel_timings_mark("network");
    return ok &&
           carrel_store_session_set_state(mgr->store, s->id, CARREL_SESSION_RUNNING, NULL, error);
}

/* One fork, all or nothing. */
static CarrelSession *
fork_one(CarrelManager *mgr, const CarrelPrincipal *who, const CarrelSession *origin,
         const CarrelPolicy *policy, const CarrelSnapshot *snap, GError **error)
{
    g_autoptr(CarrelSession) s = fork_row(mgr, who, origin, snap);
    g_autoptr(JsonNode) timings = NULL;
    CarrelSession *made;
    gboolean ok;

    if (!carrel_manager_mark_busy(mgr, s->id, "fork", error))
        return NULL;
    if (!carrel_manager_egress_prepare(mgr, s, policy, error)) {
        carrel_manager_clear_busy(mgr, s->id);
        return NULL;
    }
    /* Each fork's own phases, beside the fork verb's (its snapshot). */
    carrel_timings_begin();
    ok = carrel_manager_ensure_network(mgr, error) &&
         carrel_store_session_insert(mgr->store, s, error);
    if (ok)
        carrel_crash_point("fork.inserted");
    ok = ok && bring_up_fork(mgr, s, snap, error);
    timings = carrel_timings_end();
    if (!ok) {
        carrel_manager_session_teardown(mgr, s);
        (void)carrel_store_session_delete(mgr->store, s->id, NULL);
        carrel_manager_egress_detach(mgr, s->id, s->egress_ip);
    }
    carrel_manager_clear_busy(mgr, s->id);
    made = ok ? carrel_store_session_get(mgr->store, s->id, error) : NULL;
    if (made)
        made->timings = g_steal_pointer(&timings);
    return made;
}

/* The snapshot to fork from: the named one, or a new one taken now. */
static CarrelSnapshot *
fork_source(CarrelManager *mgr, const CarrelSession *origin, const char *snapshot, GError **error)
{
    g_autofree char *name = NULL;
    CarrelSnapshot *snap;

    if (snapshot)
        snap = carrel_store_snapshot_get(mgr->store, origin->id, snapshot, error);
    else {
        name = carrel_util_new_id("fork-");
        snap = carrel_manager_snapshot_take(mgr, origin->id, name, error);
    }
    if (snap && !snap->memory_path) {
        g_set_error(error, CARREL_ERROR, CARREL_ERROR_WRONG_STATE,
                    "snapshot '%s' has no memory (taken while the session was stopped): a fork "
                    "restores memory",
                    snap->name);
        carrel_snapshot_free(snap);
        return NULL;
    }
    return snap;
}

/* One fork's work and what came of it, for a thread of the pool. */
typedef struct {
    CarrelManager *mgr;
    const CarrelPrincipal *who;
    const CarrelSession *origin;
    const CarrelPolicy *policy;
    const CarrelSnapshot *snap;
    CarrelSession *made;
    GError *error;
    GPtrArray *catchups; /* its catch-up job, held until every fork is up */
} ForkTask;

/* A fork's clock and MAC are set by guest commands, CPU work under TCG: done while the other
 * forks restore, they slowed those down. So they wait until every fork is up. */
static void
fork_task(gpointer data, gpointer user_data)
{
    ForkTask *t = data;

    (void)user_data;
    carrel_catchup_hold();
    t->made = fork_one(t->mgr, t->who, t->origin, t->policy, t->snap, &t->error);
    t->catchups = carrel_catchup_unhold();
}

/* Forks side by side (each restore reads the one memory file through its own FIFO), at most
 * CARREL_FORK_PARALLEL at once so that 16 QEMUs do not start on two cores together. Returns when
 * every one has ended. */
static void
run_forks(ForkTask *tasks, guint count)
{
    g_autoptr(GError) local = NULL;
    GThreadPool *pool =
        g_thread_pool_new(fork_task, NULL, MIN(count, CARREL_FORK_PARALLEL), FALSE, &local);

    for (guint i = 0; i < count; i++) {
        /* Without a pool (no thread to be had), one after another here. */
        if (!pool || !g_thread_pool_push(pool, &tasks[i], NULL))
            fork_task(&tasks[i], NULL);
    }
    if (pool)
        g_thread_pool_free(pool, FALSE, TRUE);
}

/* All or nothing: when one fork failed, the others go too, and the first failure is the error. */
static GPtrArray *
collect_forks(CarrelManager *mgr, const CarrelSession *origin, ForkTask *tasks, guint count,
              GError **error)
{
    g_autoptr(GPtrArray) forks =
        g_ptr_array_new_with_free_func((GDestroyNotify)carrel_session_free);
    int failed = -1;

    for (guint i = 0; i < count; i++) {
        if (tasks[i].made)
            g_ptr_array_add(forks, g_steal_pointer(&tasks[i].made));
        else if (failed < 0)
            failed = (int)i;
    }
    if (failed < 0)
        return g_steal_pointer(&forks);
    for (guint j = 0; j < forks->len; j++) {
        CarrelSession *made = g_ptr_array_index(forks, j);
        carrel_session_free(
            carrel_manager_session_destroy(mgr, carrel_principal_daemon(), made->id, NULL));
    }
    g_propagate_prefixed_error(error, g_steal_pointer(&tasks[failed].error),
                               "fork %d of %u from '%s': ", failed + 1, count, origin->id);
    return NULL;
}

static GPtrArray *
fork_from(CarrelManager *mgr, const CarrelPrincipal *who, const CarrelSession *origin,
          const char *snapshot, guint count, GError **error)
{
    g_autoptr(CarrelSnapshot) snap = NULL;
    const CarrelPolicy *policy;
    g_autofree ForkTask *tasks = NULL;
    gboolean all_up = TRUE;
    GPtrArray *forks;

    if (count < 1 || count > CARREL_LIMIT_FORKS) {
        g_set_error(error, CARREL_ERROR, CARREL_ERROR_INVALID_ARG, "count must be between 1 and %d",
                    CARREL_LIMIT_FORKS);
        return NULL;
    }
    if (!carrel_manager_disk_check(mgr, "forking a session", error))
        return NULL;
    /* A fork runs under its origin's policy, which the caller must be allowed to use. */
    if (!(policy = carrel_manager_policy_for(mgr, who, origin->policy, error)) ||
        !carrel_policy_check_resources(policy, origin->vcpus, origin->memory_mib, error) ||
        !(snap = fork_source(mgr, origin, snapshot, error))) {
        g_prefix_error(error, "fork of '%s': ", origin->id);
        return NULL;
    }
    tasks = g_new0(ForkTask, count);
    for (guint i = 0; i < count; i++)
        tasks[i] = (ForkTask){mgr, who, origin, policy, snap, NULL, NULL};
    run_forks(tasks, count);
    /* Held by the verb's door, they start after its reply; at once when a fork failed, whose
     * siblings are destroyed next (a destroy waits for a catch-up). */
    for (guint i = 0; i < count; i++)
        if (!tasks[i].made)
            all_up = FALSE;
    for (guint i = 0; i < count; i++)
        carrel_catchup_adopt(g_steal_pointer(&tasks[i].catchups), !all_up);
    forks = collect_forks(mgr, origin, tasks, count, error);
    for (guint i = 0; i < count; i++)
        g_clear_error(&tasks[i].error);
    /* Like warm clones, the forks give their free memory back to the host (under libvirt's own
     * QEMU only); once all are up, so that no balloon inflates (guest work, seconds under TCG)
     * beside a restore. */
    for (guint i = 0; forks && i < forks->len; i++)
        carrel_job_unref(carrel_manager_reclaim_restored(mgr, g_ptr_array_index(forks, i)));
    return forks;
}

GPtrArray *
carrel_manager_session_fork(CarrelManager *mgr, const CarrelPrincipal *who, const char *id_or_name,
                            const char *snapshot, guint count, GError **error)
{
    g_auto(CarrelDoor) door = {0};
    g_autoptr(GError) local = NULL;
    JsonNode *params = carrel_conf_new_object_node();
    GPtrArray *forks;

    if (snapshot)
        json_object_set_string_member(json_node_get_object(params), "snapshot", snapshot);
    json_object_set_int_member(json_node_get_object(params), "count", count);
    if (!carrel_door_enter(&door, mgr, who, CARREL_OP_SESSION_FORK, id_or_name, params, error))
        return NULL;
    if (!carrel_manager_limits_enter(mgr, who, count, &local))
        return carrel_door_finish(&door, NULL, &local, error);
    forks = fork_from(mgr, who, door.session, snapshot, count, &local);
    carrel_manager_limits_leave(mgr, who);
    return carrel_door_finish_full(&door, forks, (GDestroyNotify)g_ptr_array_unref, &local, error);
}
