#include <glib/gstdio.h>

#include "core/core-priv.h"

typedef gboolean (*LifecycleFunc)(CarrelManager *mgr, CarrelSession *session, gpointer data,
                                  GError **error);

/*
 * The shape of every verb: through the door (who may do it), hold the session against
 * concurrent verbs, check the state machine, act, and record the new state together with its
 * audit row; return the session as stored.
 */
static CarrelSession *
run_verb(CarrelDoor *door, CarrelSessionOp op, LifecycleFunc func, gpointer data, GError **error)
{
    CarrelManager *mgr = door->mgr;
    const char *id = door->session->id;
    g_autoptr(CarrelSession) fresh = NULL;
    g_autoptr(CarrelAuditRecord) audit = NULL;
    CarrelSessionState next;
    gboolean ok;

    if (!carrel_manager_mark_busy(mgr, id, carrel_session_op_to_string(op), error))
        return NULL;
    /* The recording's segment ends before the session changes (a new one starts after). */
    carrel_manager_recording_stop(mgr, id);
    /* Read again once marked busy: another verb may have finished in between. */
    fresh = carrel_store_session_get(mgr->store, id, error);
    ok = fresh && carrel_session_transition(fresh->state, op, &next, error) &&
         func(mgr, fresh, data, error);
    if (ok) {
        audit = carrel_door_audit_record(door, "ok", NULL);
        ok = carrel_store_session_set_state_audited(mgr->store, id, next, NULL, audit, error);
        door->audited = ok;
    }
    /* Done or undone: nothing is left for a recovery (core-recover.c). */
    carrel_manager_intent_end(mgr, id);
    carrel_manager_clear_busy(mgr, id);
    carrel_manager_recording_sync_id(mgr, id);
    if (!ok) {
        g_prefix_error(error, "%s session '%s': ", carrel_session_op_to_string(op), id);
        return NULL;
    }
    return carrel_store_session_get(mgr->store, id, error);
}

/* A lifecycle verb from the front door: who may, then run_verb. */
static CarrelSession *
enter_verb(CarrelManager *mgr, const CarrelPrincipal *who, CarrelOp what, const char *id_or_name,
           CarrelSessionOp op, LifecycleFunc func, gpointer data, GError **error)
{
    g_auto(CarrelDoor) door = {0};
    g_autoptr(GError) local = NULL;
    CarrelSession *done;

    if (!carrel_door_enter(&door, mgr, who, what, id_or_name, NULL, error))
        return NULL;
    done = run_verb(&door, op, func, data, &local);
    return carrel_door_finish_full(&door, done, (GDestroyNotify)carrel_session_free, &local, error);
}

static gboolean
do_start(CarrelManager *mgr, CarrelSession *session, gpointer data, GError **error)
{
    g_autofree char *domain = carrel_session_domain_name(session->id);
    g_autoptr(CarrelTemplate) tmpl = NULL;
    g_autofree char *xml = NULL;
    CarrelDomainState state;
    g_autoptr(GError) local = NULL;
    gboolean by_screen = FALSE;

    /* The network may be down since the host rebooted; a domain on it would not start. */
    if (session->mac && !carrel_manager_ensure_network(mgr, error))
        return FALSE;
    if (session->egress_ip && !carrel_manager_egress_ensure(mgr, error))
        return FALSE;
    if (carrel_hypervisor_get_state(mgr->hv, domain, &state, &local)) {
        if (state != CARREL_DOMAIN_RUNNING && !carrel_hypervisor_start(mgr->hv, domain, error))
            return FALSE;
        return carrel_manager_wait_agent(mgr, domain, &by_screen, error) &&
               carrel_manager_apply_screen_after_boot(mgr, session, by_screen, error) &&
               carrel_manager_egress_attach(mgr, session, TRUE, error);
    }
    if (!g_error_matches(local, CARREL_ERROR, CARREL_ERROR_NOT_FOUND)) {
        g_propagate_error(error, g_steal_pointer(&local));
        return FALSE;
    }
    /* The definition is gone (vanished while we were down): define it again. */
    if (!carrel_manager_unfreeze_top(mgr, session, error))
        return FALSE;
    tmpl = carrel_store_template_get(mgr->store, session->template_name, session->template_version,
                                     error);
    xml = tmpl ? carrel_manager_session_xml(mgr, session, tmpl, error) : NULL;
    return xml && carrel_hypervisor_define_start(mgr->hv, xml, error) &&
           carrel_manager_wait_agent(mgr, domain, &by_screen, error) &&
           carrel_manager_apply_screen_after_boot(mgr, session, by_screen, error) &&
           carrel_manager_egress_attach(mgr, session, TRUE, error);
}

CarrelSession *
carrel_manager_session_start(CarrelManager *mgr, const CarrelPrincipal *who, const char *id_or_name,
                             GError **error)
{
    return enter_verb(mgr, who, CARREL_OP_SESSION_START, id_or_name, CARREL_SESSION_OP_START,
                      do_start, NULL, error);
}

static gboolean
do_stop(CarrelManager *mgr, CarrelSession *session, gpointer data, GError **error)
{
    g_autofree char *domain = carrel_session_domain_name(session->id);
    guint timeout_s = GPOINTER_TO_UINT(data);
    g_autoptr(GError) local = NULL;

    /* A paused guest cannot hear the shutdown request: let it run to shut down cleanly. */
    if (session->state == CARREL_SESSION_PAUSED &&
        !carrel_hypervisor_pause(mgr->hv, domain, FALSE, error))
        return FALSE;
    /* A guest that ignores the request within the timeout is powered off. */
    if (!carrel_hypervisor_shutdown(mgr->hv, domain, timeout_s, &local) &&
        !carrel_hypervisor_destroy(mgr->hv, domain, error))
        return FALSE;
    /* Off now: the disk is quiet and whole, the right moment for the exit path. */
    carrel_manager_collect_exit(mgr, session, "stop", FALSE);
    return TRUE;
}

CarrelSession *
carrel_manager_session_stop(CarrelManager *mgr, const CarrelPrincipal *who, const char *id_or_name,
                            guint timeout_s, GError **error)
{
    return enter_verb(mgr, who, CARREL_OP_SESSION_STOP, id_or_name, CARREL_SESSION_OP_STOP, do_stop,
                      GUINT_TO_POINTER(timeout_s), error);
}

/* Best effort before a hard power-off: what the guest still holds in its page cache reaches
 * the disk the exit path reads. */
static void
flush_guest(CarrelManager *mgr, const char *domain)
{
    const char *argv[] = {"/bin/sync", NULL};
    CarrelGuestExec run = {.argv = argv, .timeout_s = 10, .max_output = 4096};

    (void)carrel_hypervisor_agent_exec(mgr->hv, domain, &run, NULL, NULL);
}

static gboolean
do_destroy(CarrelManager *mgr, CarrelSession *session, gpointer data, GError **error)
{
    g_autofree char *domain = carrel_session_domain_name(session->id);
    g_autoptr(GError) local = NULL;
    guint forks = carrel_store_session_count_forks(mgr->store, session->id, NULL);

    /* Forks stand on this session's snapshot layers: they go first. */
    if (forks > 0) {
        g_set_error(error, CARREL_ERROR, CARREL_ERROR_WRONG_STATE,
                    "%u forked session(s) stand on its snapshots: destroy them first", forks);
        return FALSE;
    }
    if (!carrel_manager_intent_begin(mgr, session->id, "destroy", NULL, error))
        return FALSE;
    carrel_crash_point("destroy.intent");
    if (session->exit_paths && session->state == CARREL_SESSION_RUNNING)
        flush_guest(mgr, domain);
    /* A domain that is already gone (it crashed, or someone removed it) is destroyed enough. */
    if (!carrel_hypervisor_destroy(mgr->hv, domain, &local) &&
        !g_error_matches(local, CARREL_ERROR, CARREL_ERROR_NOT_FOUND)) {
        g_propagate_error(error, g_steal_pointer(&local));
        return FALSE;
    }
    carrel_crash_point("destroy.destroyed");
    /* Collected before anything is deleted. */
    carrel_manager_collect_exit(mgr, session, "destroy", FALSE);
    g_clear_error(&local);
    /* A hibernated session has no definition: its saved memory file describes it. */
    if (!carrel_hypervisor_undefine(mgr->hv, domain, &local) &&
        !g_error_matches(local, CARREL_ERROR, CARREL_ERROR_NOT_FOUND)) {
        g_propagate_error(error, g_steal_pointer(&local));
        return FALSE;
    }
    if (!carrel_util_remove_tree(session->dir, error))
        return FALSE;
    carrel_crash_point("destroy.removed");
    return TRUE;
}

CarrelSession *
carrel_manager_session_destroy(CarrelManager *mgr, const CarrelPrincipal *who,
                               const char *id_or_name, GError **error)
{
    return enter_verb(mgr, who, CARREL_OP_SESSION_DESTROY, id_or_name, CARREL_SESSION_OP_DESTROY,
                      do_destroy, NULL, error);
}

/* The saved memory of a hibernated session. */
static char *
hibernate_path(const CarrelSession *session)
{
    return g_build_filename(session->dir, "hibernate.save", NULL);
}

static gboolean
do_pause(CarrelManager *mgr, CarrelSession *session, gpointer data, GError **error)
{
    g_autofree char *domain = carrel_session_domain_name(session->id);

    return carrel_hypervisor_pause(mgr->hv, domain, TRUE, error);
}

CarrelSession *
carrel_manager_session_pause(CarrelManager *mgr, const CarrelPrincipal *who, const char *id_or_name,
                             GError **error)
{
    return enter_verb(mgr, who, CARREL_OP_SESSION_PAUSE, id_or_name, CARREL_SESSION_OP_PAUSE,
                      do_pause, NULL, error);
}

/*
 * Hibernate: the memory goes to a file under the session and QEMU exits, holding no CPU or RAM.
 * The definition goes too: resume restores the file (its header holds the domain's own XML:
 * same UUID and generation id, this is no clone) and defines the domain again. A saved
 * memory state and its disk belong together, so nothing writes the overlay meanwhile
 * (extraction and diff read it read-only).
 */
static gboolean
do_hibernate(CarrelManager *mgr, CarrelSession *session, gpointer data, GError **error)
{
    g_autofree char *domain = carrel_session_domain_name(session->id);
    g_autofree char *path = hibernate_path(session);

    /* A file left by a save that failed half-way would make libvirt refuse. */
    (void)g_unlink(path);
    if (!carrel_manager_intent_begin(mgr, session->id, "hibernate", NULL, error))
        return FALSE;
    carrel_crash_during("hibernate.saving", 300);
    if (!carrel_hypervisor_save(mgr->hv, domain, path, error))
        return FALSE;
    carrel_crash_point("hibernate.saved");
    if (!carrel_hypervisor_undefine(mgr->hv, domain, error))
        return FALSE;
    carrel_crash_point("hibernate.undefined");
    return TRUE;
}

CarrelSession *
carrel_manager_session_hibernate(CarrelManager *mgr, const CarrelPrincipal *who,
                                 const char *id_or_name, GError **error)
{
    return enter_verb(mgr, who, CARREL_OP_SESSION_HIBERNATE, id_or_name,
                      CARREL_SESSION_OP_HIBERNATE, do_hibernate, NULL, error);
}

static gboolean
wake(CarrelManager *mgr, CarrelSession *session, const char *domain, GError **error)
{
    g_autofree char *path = hibernate_path(session);
    g_autofree char *xml = NULL;
    gboolean by_screen = FALSE;

    if (!carrel_hypervisor_saveimage_recover(path, error) ||
        !(xml = carrel_hypervisor_saveimage_get_xml(path, error)) ||
        !carrel_manager_intent_begin(mgr, session->id, "wake", NULL, error))
        return FALSE;
    carrel_crash_during("resume.restoring", 200);
    if (!carrel_manager_restore(mgr, "hibernate", path, xml, error))
        return FALSE;
    carrel_crash_point("resume.restored");
    if (!carrel_hypervisor_define(mgr->hv, xml, error))
        return FALSE;
    carrel_crash_point("resume.defined");
    /* The memory is running again: the file is history now. */
    (void)g_unlink(path);
    if (!carrel_manager_wait_agent(mgr, domain, &by_screen, error))
        return FALSE;
    /* Clock and screen after the reply (core-catchup.c); a guest without agent has neither. */
    if (!by_screen)
        carrel_manager_catchup_restored(mgr, session, FALSE);
    else if (!carrel_manager_apply_screen(mgr, session, by_screen, error))
        return FALSE;
    return carrel_manager_egress_attach(mgr, session, FALSE, error);
}

static gboolean
do_resume(CarrelManager *mgr, CarrelSession *session, gpointer data, GError **error)
{
    g_autofree char *domain = carrel_session_domain_name(session->id);

    if (session->state == CARREL_SESSION_HIBERNATED)
        return wake(mgr, session, domain, error);
    return carrel_hypervisor_pause(mgr->hv, domain, FALSE, error);
}

CarrelSession *
carrel_manager_session_resume(CarrelManager *mgr, const CarrelPrincipal *who,
                              const char *id_or_name, GError **error)
{
    return enter_verb(mgr, who, CARREL_OP_SESSION_RESUME, id_or_name, CARREL_SESSION_OP_RESUME,
                      do_resume, NULL, error);
}
