#include "core/core-priv.h"

/* Domains of this instance, by session id. */
static GHashTable *
own_domains(CarrelManager *mgr, GError **error)
{
    g_autoptr(GPtrArray) all = carrel_hypervisor_list(mgr->hv, error);
    GHashTable *by_id;

    if (!all)
        return NULL;
    by_id = g_hash_table_new_full(g_str_hash, g_str_equal, NULL,
                                  (GDestroyNotify)carrel_domain_info_free);
    for (guint i = 0; i < all->len; i++) {
        CarrelDomainInfo *info = g_ptr_array_index(all, i);
        /* Another carrel (another state dir) may share this libvirt: never touch its domains. */
        if (g_strcmp0(info->instance_id, mgr->instance_id) != 0)
            continue;
        g_hash_table_insert(by_id, info->session_id, g_steal_pointer(&g_ptr_array_index(all, i)));
    }
    return by_id;
}

/* The domain runs on another file of the session than the row says (an operation that left
 * no intent, or a store write lost): the row follows the domain, never the other way. */
static gboolean
adopt_disk(CarrelManager *mgr, CarrelSession *session, const CarrelDomainInfo *info, GError **error)
{
    g_autofree char *prefix = g_strconcat(session->dir, G_DIR_SEPARATOR_S, NULL);

    if (!info->disk_path || g_strcmp0(info->disk_path, session->overlay_path) == 0)
        return TRUE;
    if (!g_str_has_prefix(info->disk_path, prefix) ||
        !g_file_test(info->disk_path, G_FILE_TEST_IS_REGULAR)) {
        g_warning("session '%s' runs on '%s', outside its folder: left as it is", session->id,
                  info->disk_path);
        return TRUE;
    }
    g_warning("session '%s' runs on '%s', not on '%s': the row follows the domain", session->id,
              info->disk_path, session->overlay_path);
    return carrel_store_session_set_disk(mgr->store, session->id, info->disk_path,
                                         session->head_snapshot, error);
}

static gboolean
settle_running(CarrelManager *mgr, CarrelSession *session, CarrelDomainInfo *info,
               CarrelReconcileReport *report, GError **error)
{
    CarrelSessionState next;
    const char *reason = NULL;

    if (!info) {
        next = CARREL_SESSION_CRASHED;
        reason = "the domain vanished while carreld was down";
        report->vanished++;
    } else if (info->state == CARREL_DOMAIN_RUNNING) {
        next = CARREL_SESSION_RUNNING;
        report->adopted++;
        if (!adopt_disk(mgr, session, info, error))
            return FALSE;
    } else if (info->state == CARREL_DOMAIN_PAUSED) {
        CarrelPauseReason why = CARREL_PAUSE_NONE;
        next = CARREL_SESSION_PAUSED;
        /* QEMU paused it on a full disk while carreld was down: say so (kept when it was so). */
        if (carrel_hypervisor_get_pause_reason(mgr->hv, info->name, &why, NULL) &&
            carrel_manager_pause_reason_text(why) &&
            g_strcmp0(session->state_reason, carrel_manager_pause_reason_text(why)) != 0)
            reason = carrel_manager_pause_reason_text(why);
        report->adopted++;
        if (!adopt_disk(mgr, session, info, error))
            return FALSE;
        /* A pause is a verb's or the guest's; one the row does not know has no reason yet. */
        if (session->state != CARREL_SESSION_PAUSED && !reason)
            reason = "found paused after carreld restarted";
    } else if (info->state == CARREL_DOMAIN_CRASHED) {
        next = CARREL_SESSION_CRASHED;
        reason = "QEMU crashed while carreld was down";
        report->vanished++;
    } else {
        next = CARREL_SESSION_STOPPED;
        reason = "found powered off";
        report->stopped++;
    }
    if (next == session->state && !reason)
        return TRUE;
    if (!carrel_store_session_set_state(mgr->store, session->id, next, reason, error))
        return FALSE;
    /* Its exit path runs in the watcher, so serving does not wait for an appliance. */
    if ((next == CARREL_SESSION_CRASHED || next == CARREL_SESSION_STOPPED) && session->exit_paths &&
        session->exit_paths[0]) {
        g_mutex_lock(&mgr->lock);
        g_ptr_array_add(mgr->pending_exit, g_strdup(session->id));
        g_mutex_unlock(&mgr->lock);
    }
    return TRUE;
}

static gboolean
settle_session(CarrelManager *mgr, CarrelSession *session, GHashTable *domains,
               CarrelReconcileReport *report, GError **error)
{
    CarrelDomainInfo *info = g_hash_table_lookup(domains, session->id);

    switch (session->state) {
    case CARREL_SESSION_CREATING:
        /* Creation was cut short: finish nothing, remove everything it made. */
        carrel_manager_session_teardown(mgr, session);
        report->cleaned++;
        return carrel_store_session_set_state(mgr->store, session->id, CARREL_SESSION_DESTROYED,
                                              "creation was interrupted", error);
    case CARREL_SESSION_RUNNING:
    case CARREL_SESSION_PAUSED:
        return settle_running(mgr, session, info, report, error);
    case CARREL_SESSION_STOPPED:
    case CARREL_SESSION_HIBERNATED:
        /* Runs though the row says otherwise (a start or wake whose row was not written). */
        if (info && (info->state == CARREL_DOMAIN_RUNNING || info->state == CARREL_DOMAIN_PAUSED))
            return settle_running(mgr, session, info, report, error);
        return TRUE;
    case CARREL_SESSION_CRASHED:
    case CARREL_SESSION_DESTROYED:
    case CARREL_SESSION_LAST:
        return TRUE;
    }
    return TRUE;
}

static void
remove_orphans(CarrelManager *mgr, GHashTable *domains, GHashTable *known,
               CarrelReconcileReport *report)
{
    GHashTableIter iter;
    gpointer key, value;

    g_hash_table_iter_init(&iter, domains);
    while (g_hash_table_iter_next(&iter, &key, &value)) {
        CarrelDomainInfo *info = value;
        if (g_hash_table_contains(known, key))
            continue;
        (void)carrel_hypervisor_destroy(mgr->hv, info->name, NULL);
        (void)carrel_hypervisor_undefine(mgr->hv, info->name, NULL);
        report->orphans++;
    }
}

/* A warm cut short leaves its scratch folder; a restore cut short in a header rewrite leaves
 * the warm memory marked incomplete, which its journal repairs. */
static void
remove_warm_leftovers(CarrelManager *mgr)
{
    g_autoptr(GPtrArray) templates = carrel_store_template_list(mgr->store, NULL);

    for (guint i = 0; templates && i < templates->len; i++) {
        CarrelTemplate *tmpl = g_ptr_array_index(templates, i);
        g_autofree char *tmp = g_build_filename(tmpl->dir, "warm.tmp", NULL);
        g_autoptr(CarrelWarmState) warm =
            carrel_store_warm_get(mgr->store, tmpl->name, tmpl->version, NULL);
        g_autoptr(GError) error = NULL;

        (void)carrel_util_remove_tree(tmp, NULL);
        if (warm && !carrel_hypervisor_saveimage_recover(warm->memory_path, &error))
            g_warning("template '%s': %s", tmpl->name, error->message);
    }
}

gboolean
carrel_manager_reconcile(CarrelManager *mgr, CarrelReconcileReport *ret_report, GError **error)
{
    g_autoptr(GHashTable) domains = NULL;
    g_autoptr(GPtrArray) sessions = NULL;
    g_autoptr(GHashTable) known = g_hash_table_new(g_str_hash, g_str_equal);
    CarrelReconcileReport report = {0};
    guint waited_s = 0;

    /* What libvirt still does for a carreld that died (a save, a restore) ends first: a domain
     * is only judged once it is what it will be. */
    if (!carrel_manager_wait_libvirt_jobs(mgr, &waited_s))
        g_warning("libvirt still works on some domains after %u s: reconciling anyway", waited_s);
    if (!carrel_manager_recover(mgr, &report, error))
        return FALSE;
    remove_warm_leftovers(mgr);
    carrel_manager_remove_extraction_leftovers(mgr);
    domains = own_domains(mgr, error);
    if (!domains)
        return FALSE;
    sessions = carrel_store_session_list(mgr->store, FALSE, error);
    if (!sessions)
        return FALSE;
    for (guint i = 0; i < sessions->len; i++) {
        CarrelSession *session = g_ptr_array_index(sessions, i);
        if (!settle_session(mgr, session, domains, &report, error)) {
            g_prefix_error(error, "reconciling session '%s': ", session->id);
            return FALSE;
        }
        g_hash_table_add(known, session->id);
    }
    remove_orphans(mgr, domains, known, &report);
    if (ret_report)
        *ret_report = report;
    return TRUE;
}
