/*
 * Recovery: what a carreld that died in the middle of a long operation left for the next one.
 * Each operation records its intent in the store before it acts (carrel_manager_intent_begin)
 * and removes it when done; reconcile reads what is left, waits for libvirt to finish what it
 * was still doing for the dead daemon (a save or a restore runs on in libvirtd), looks at the
 * domain and the files, and either completes the operation or rolls it back to the last
 * consistent running state. A session that ran before the crash runs after it, memory
 * included, or says why not.
 */
#include <glib/gstdio.h>

#include "core/core-priv.h"
#include "disk/disk.h"

/* libvirt's own jobs for a dead caller: a save of a 1 GiB guest takes seconds under TCG. */
#define RECOVER_JOB_WAIT_S 120

gboolean
carrel_manager_intent_begin(CarrelManager *mgr, const char *key, const char *op, JsonBuilder *data,
                            GError **error)
{
    g_autoptr(JsonGenerator) gen = json_generator_new();
    g_autoptr(JsonNode) root = data ? json_builder_get_root(data) : NULL;
    g_autofree char *text = NULL;

    if (root) {
        json_generator_set_root(gen, root);
        text = json_generator_to_data(gen, NULL);
    }
    if (!carrel_store_intent_put(mgr->store, key, op, text, error)) {
        g_prefix_error(error, "recording what %s is about to do: ", op);
        return FALSE;
    }
    return TRUE;
}

void
carrel_manager_intent_end(CarrelManager *mgr, const char *key)
{
    g_autoptr(GError) error = NULL;

    /* Left behind, it is settled again at the next start: every recovery is idempotent. */
    if (!carrel_store_intent_delete(mgr->store, key, &error))
        g_warning("'%s': %s", key, error->message);
}

/* This instance's domain of a session, or NULL. */
static CarrelDomainInfo *
domain_of(CarrelManager *mgr, const char *session_id)
{
    g_autoptr(GPtrArray) all = carrel_hypervisor_list(mgr->hv, NULL);

    for (guint i = 0; all && i < all->len; i++) {
        CarrelDomainInfo *info = g_ptr_array_index(all, i);
        if (g_strcmp0(info->session_id, session_id) == 0 &&
            g_strcmp0(info->instance_id, mgr->instance_id) == 0)
            return g_steal_pointer(&g_ptr_array_index(all, i));
    }
    return NULL;
}

gboolean
carrel_manager_wait_libvirt_jobs(CarrelManager *mgr, guint *ret_waited_s)
{
    gint64 end = g_get_monotonic_time() + RECOVER_JOB_WAIT_S * G_USEC_PER_SEC;
    gint64 start = g_get_monotonic_time();
    gboolean busy = TRUE;

    while (busy && g_get_monotonic_time() < end) {
        g_autoptr(GPtrArray) all = carrel_hypervisor_list(mgr->hv, NULL);
        busy = FALSE;
        for (guint i = 0; all && i < all->len; i++) {
            CarrelDomainInfo *info = g_ptr_array_index(all, i);
            busy = busy || (info->in_job && g_strcmp0(info->instance_id, mgr->instance_id) == 0);
        }
        if (busy)
            g_usleep(200 * 1000);
    }
    if (ret_waited_s)
        *ret_waited_s = (guint)((g_get_monotonic_time() - start) / G_USEC_PER_SEC);
    return !busy;
}

static gboolean
is_running(const CarrelDomainInfo *info)
{
    return info && (info->state == CARREL_DOMAIN_RUNNING || info->state == CARREL_DOMAIN_PAUSED);
}

static gboolean
runs_on(const CarrelDomainInfo *info, const char *path)
{
    return is_running(info) && path && g_strcmp0(info->disk_path, path) == 0;
}

/* A complete save image (after putting back a header a crash left half rewritten). */
static gboolean
memory_whole(const char *path)
{
    g_autofree char *xml = NULL;

    if (!path || !carrel_hypervisor_saveimage_recover(path, NULL))
        return FALSE;
    xml = carrel_hypervisor_saveimage_get_xml(path, NULL);
    return xml != NULL;
}

/* The domain off and undefined, whatever it was. */
static void
domain_gone(CarrelManager *mgr, const char *session_id)
{
    g_autofree char *domain = carrel_session_domain_name(session_id);

    (void)carrel_hypervisor_destroy(mgr->hv, domain, NULL);
    (void)carrel_hypervisor_undefine(mgr->hv, domain, NULL);
}

/* A restore the dead daemon left shows the size it was saved with: the session's is set again;
 * a guest that cannot take it keeps running, said in the log (recovery never destroys work). */
static void
recover_screen(CarrelManager *mgr, const CarrelSession *session)
{
    g_autoptr(GError) local = NULL;

    if (!carrel_manager_apply_screen(mgr, session, FALSE, &local))
        g_warning("session %s keeps the image's screen size: %s", session->id, local->message);
}

/* A restored domain that the dead daemon did not get to define: defined now, on top. */
static gboolean
keep_restored(CarrelManager *mgr, CarrelSession *session, const CarrelDomainInfo *info,
              GError **error)
{
    g_autofree char *domain = carrel_session_domain_name(session->id);

    /* Its own live XML: a definition built anew would carry another UUID than the one running. */
    if (!info->persistent && !carrel_hypervisor_persist(mgr->hv, domain, error))
        return FALSE;
    /* It stood still while carreld was away; a failed clock set costs nothing lasting. */
    (void)carrel_manager_set_guest_clock(mgr, domain, NULL);
    recover_screen(mgr, session);
    return TRUE;
}

/* A member of an intent's data (written by carreld itself), or NULL. */
static const char *
intent_string(JsonObject *data, const char *member)
{
    JsonNode *node = json_object_get_member(data, member);

    return node && JSON_NODE_HOLDS_VALUE(node) && json_node_get_value_type(node) == G_TYPE_STRING
               ? json_node_get_string(node)
               : NULL;
}

static CarrelSnapshot *
snapshot_of_intent(const CarrelSession *session, JsonObject *data)
{
    CarrelSnapshot *snap = carrel_snapshot_new();

    snap->id = g_strdup(intent_string(data, "snapshot"));
    snap->session_id = g_strdup(session->id);
    snap->name = g_strdup(intent_string(data, "name"));
    snap->parent = g_strdup(intent_string(data, "parent"));
    snap->memory_path = g_strdup(intent_string(data, "memory"));
    snap->layer_path = g_strdup(intent_string(data, "layer"));
    snap->created_at = json_object_get_int_member_with_default(data, "created_at", 0);
    return snap;
}

/*
 * A snapshot cut short. Still running on its old disk: libvirt never moved it (or rolled back),
 * roll back. Running on the new top: the snapshot happened, keep it (the old disk frozen) and
 * store it. Otherwise the domain is gone with its memory in the file (or the session was
 * stopped): finish the snapshot from there.
 */
static gboolean
recover_snapshot(CarrelManager *mgr, CarrelSession *session, JsonObject *data, GError **error)
{
    g_autoptr(CarrelSnapshot) snap = snapshot_of_intent(session, data);
    g_autoptr(CarrelDomainInfo) info = domain_of(mgr, session->id);
    g_autoptr(CarrelSnapshot) stored =
        carrel_store_snapshot_get(mgr->store, session->id, snap->id, NULL);
    const char *top = intent_string(data, "top");

    if (!snap->id || !snap->layer_path || !top) {
        g_set_error(error, CARREL_ERROR, CARREL_ERROR_INTERNAL, "a snapshot intent lacks paths");
        return FALSE;
    }
    if (stored && g_strcmp0(session->overlay_path, top) == 0)
        return TRUE; /* stored: only the intent was left */
    if (runs_on(info, snap->layer_path)) {
        carrel_manager_snapshot_discard(session, snap, top);
        return TRUE;
    }
    if (runs_on(info, top))
        return keep_restored(mgr, session, info, error) &&
               carrel_manager_snapshot_keep(mgr, session, snap, top, error);
    if (snap->memory_path && !memory_whole(snap->memory_path)) {
        carrel_manager_snapshot_discard(session, snap, top);
        g_set_error(error, CARREL_ERROR, CARREL_ERROR_FAILED,
                    "its memory file was left incomplete: the memory state is lost");
        return FALSE;
    }
    domain_gone(mgr, session->id);
    return carrel_manager_snapshot_finish(mgr, session, snap, top, error);
}

/* A revert cut short: rolled back while the old domain still runs, finished otherwise. */
static gboolean
recover_revert(CarrelManager *mgr, CarrelSession *session, JsonObject *data, GError **error)
{
    const char *snap_id = intent_string(data, "snapshot");
    const char *top = intent_string(data, "top");
    const char *old_top = intent_string(data, "old_top");
    g_autoptr(CarrelDomainInfo) info = domain_of(mgr, session->id);
    g_autoptr(CarrelSnapshot) snap = NULL;

    if (!snap_id || !top ||
        !(snap = carrel_store_snapshot_get(mgr->store, session->id, snap_id, error)))
        return FALSE;
    if (runs_on(info, old_top)) {
        (void)g_unlink(top);
        return TRUE;
    }
    if (runs_on(info, top)) {
        /* Restored onto the snapshot's own RAM file, where it has one (core-snapshot.c). */
        if (!keep_restored(mgr, session, info, error) ||
            !carrel_store_session_set_disk(mgr->store, session->id, top, snap->id, error) ||
            (snap->memory_file && !carrel_store_session_set_memory_file(
                                      mgr->store, session->id, snap->memory_file, error)) ||
            !carrel_store_session_set_state(mgr->store, session->id, CARREL_SESSION_RUNNING, NULL,
                                            error))
            return FALSE;
        if (old_top && g_strcmp0(old_top, snap->layer_path) != 0)
            (void)g_unlink(old_top);
        return TRUE;
    }
    if (g_strcmp0(session->overlay_path, top) == 0 && !snap->memory_path)
        return TRUE;
    domain_gone(mgr, session->id);
    return carrel_manager_revert_finish(mgr, session, snap, top, old_top, error);
}

static char *
hibernate_file(const CarrelSession *session)
{
    return g_build_filename(session->dir, "hibernate.save", NULL);
}

/* A hibernate cut short: still running is no hibernate; a whole memory file is one. */
static gboolean
recover_hibernate(CarrelManager *mgr, CarrelSession *session, JsonObject *data, GError **error)
{
    g_autoptr(CarrelDomainInfo) info = domain_of(mgr, session->id);
    g_autofree char *path = hibernate_file(session);

    if (session->state == CARREL_SESSION_HIBERNATED)
        return TRUE;
    if (is_running(info)) {
        (void)g_unlink(path);
        return TRUE;
    }
    if (!memory_whole(path)) {
        (void)g_unlink(path);
        g_set_error(error, CARREL_ERROR, CARREL_ERROR_FAILED,
                    "hibernate was cut short and its memory file is incomplete");
        return FALSE;
    }
    domain_gone(mgr, session->id);
    return carrel_store_session_set_state(mgr->store, session->id, CARREL_SESSION_HIBERNATED, NULL,
                                          error);
}

/* A wake cut short: a running domain is the woken session; none leaves it hibernated. */
static gboolean
recover_wake(CarrelManager *mgr, CarrelSession *session, JsonObject *data, GError **error)
{
    g_autoptr(CarrelDomainInfo) info = domain_of(mgr, session->id);
    g_autofree char *path = hibernate_file(session);
    g_autofree char *domain = carrel_session_domain_name(session->id);

    if (!is_running(info)) {
        domain_gone(mgr, session->id);
        return memory_whole(path)
                   ? carrel_store_session_set_state(mgr->store, session->id,
                                                    CARREL_SESSION_HIBERNATED, NULL, error)
                   : TRUE;
    }
    if (!info->persistent && !carrel_hypervisor_persist(mgr->hv, domain, error))
        return FALSE;
    (void)g_unlink(path);
    (void)carrel_manager_set_guest_clock(mgr, domain, NULL);
    recover_screen(mgr, session);
    return carrel_store_session_set_state(mgr->store, session->id, CARREL_SESSION_RUNNING, NULL,
                                          error);
}

/* A pool claim cut short: a member already adopted runs for its new owner. */
static gboolean
recover_claim(CarrelManager *mgr, CarrelSession *session, JsonObject *data, GError **error)
{
    g_autoptr(CarrelDomainInfo) info = domain_of(mgr, session->id);
    g_autofree char *domain = carrel_session_domain_name(session->id);

    if (session->pool || session->state != CARREL_SESSION_PAUSED || !is_running(info))
        return TRUE;
    if (info->state == CARREL_DOMAIN_PAUSED &&
        !carrel_hypervisor_pause(mgr->hv, domain, FALSE, error))
        return FALSE;
    (void)carrel_manager_set_guest_clock(mgr, domain, NULL);
    recover_screen(mgr, session);
    return carrel_store_session_set_state(mgr->store, session->id, CARREL_SESSION_RUNNING, NULL,
                                          error);
}

/* Whether the destroy's exit path already ran (it is stored only once done). */
static gboolean
destroy_collected(CarrelManager *mgr, const CarrelSession *session)
{
    g_autoptr(GPtrArray) list = carrel_store_extraction_list(mgr->store, session->id, NULL);

    for (guint i = 0; list && i < list->len; i++) {
        const CarrelExtraction *x = g_ptr_array_index(list, i);
        if (g_strcmp0(x->reason, "destroy") == 0)
            return TRUE;
    }
    return FALSE;
}

/* A destroy cut short is finished, with its exit path first when it had not run yet (a TTL's
 * destroy killed while libguestfs read the disk lost its artifacts otherwise). */
static gboolean
recover_destroy(CarrelManager *mgr, CarrelSession *session, JsonObject *data, GError **error)
{
    g_autofree char *domain = carrel_session_domain_name(session->id);

    if (session->state == CARREL_SESSION_DESTROYED)
        return TRUE;
    if (session->exit_paths && session->exit_paths[0] && !destroy_collected(mgr, session)) {
        (void)carrel_hypervisor_destroy(mgr->hv, domain, NULL);
        carrel_manager_collect_exit(mgr, session, "destroy", FALSE);
    }
    carrel_manager_session_teardown(mgr, session);
    return carrel_store_session_set_state(mgr->store, session->id, CARREL_SESSION_DESTROYED,
                                          "destroyed: finished after carreld restarted", error);
}

typedef gboolean (*RecoverFunc)(CarrelManager *mgr, CarrelSession *session, JsonObject *data,
                                GError **error);

static const struct {
    const char *op;
    RecoverFunc func;
} recoveries[] = {
    {"snapshot", recover_snapshot}, {"revert", recover_revert},   {"hibernate", recover_hibernate},
    {"wake", recover_wake},         {"destroy", recover_destroy}, {"claim", recover_claim},
};

static RecoverFunc
recovery_for(const char *op)
{
    for (guint i = 0; i < G_N_ELEMENTS(recoveries); i++)
        if (g_str_equal(recoveries[i].op, op))
            return recoveries[i].func;
    return NULL;
}

/* A session whose recovery failed is stopped, with the reason. */
static void
settle_failed(CarrelManager *mgr, CarrelSession *session, const CarrelIntent *intent,
              const GError *why)
{
    g_autofree char *reason =
        g_strdup_printf("%s was cut short by a crash and could not be finished: %s", intent->op,
                        why ? why->message : "unknown");

    domain_gone(mgr, session->id);
    (void)carrel_store_session_set_state(mgr->store, session->id, CARREL_SESSION_STOPPED, reason,
                                         NULL);
}

static gboolean
recover_one(CarrelManager *mgr, const CarrelIntent *intent, CarrelReconcileReport *report)
{
    g_autoptr(CarrelSession) session = carrel_store_session_get(mgr->store, intent->key, NULL);
    g_autoptr(JsonNode) node = carrel_conf_parse_json(intent->data, strlen(intent->data), NULL);
    g_autoptr(GError) error = NULL;
    RecoverFunc func = recovery_for(intent->op);

    if (!session || !func || !node || !JSON_NODE_HOLDS_OBJECT(node))
        return TRUE; /* nothing left to settle (the session or the operation is gone) */
    if (func(mgr, session, json_node_get_object(node), &error)) {
        report->recovered++;
        return TRUE;
    }
    settle_failed(mgr, session, intent, error);
    report->lost++;
    return TRUE;
}

gboolean
carrel_manager_recover(CarrelManager *mgr, CarrelReconcileReport *report, GError **error)
{
    g_autoptr(GPtrArray) intents = carrel_store_intent_list(mgr->store, error);

    if (!intents)
        return FALSE;
    for (guint i = 0; i < intents->len; i++) {
        CarrelIntent *intent = g_ptr_array_index(intents, i);
        (void)recover_one(mgr, intent, report);
        if (!carrel_store_intent_delete(mgr->store, intent->key, error))
            return FALSE;
    }
    return TRUE;
}
