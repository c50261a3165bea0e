#include "core/core-priv.h"

typedef gboolean (*LifecycleFunc)(CarrelManager *mgr, CarrelSession *session, gpointer data,
                                  GError **error);

/*
 * The shape of every verb: find the session, hold it against concurrent verbs, check the state
 * machine, act, record the new state, and return the session as stored.
 */
static CarrelSession *
run_verb(CarrelManager *mgr, const char *id_or_name, CarrelSessionOp op, LifecycleFunc func,
         gpointer data, GError **error)
{
    g_autoptr(CarrelSession) session = carrel_store_session_get(mgr->store, id_or_name, error);
    g_autoptr(CarrelSession) fresh = NULL;
    CarrelSessionState next;
    gboolean ok;

    if (!session)
        return NULL;
    if (!carrel_manager_claim(mgr, session->id, carrel_session_op_to_string(op), error))
        return NULL;
    /* Read again under the claim: another verb may have finished in between. */
    fresh = carrel_store_session_get(mgr->store, session->id, error);
    ok = fresh && carrel_session_transition(fresh->state, op, &next, error) &&
         func(mgr, fresh, data, error) &&
         carrel_store_session_set_state(mgr->store, fresh->id, next, NULL, error);
    carrel_manager_release(mgr, session->id);
    if (!ok) {
        g_prefix_error(error, "%s session '%s': ", carrel_session_op_to_string(op), session->id);
        return NULL;
    }
    return carrel_store_session_get(mgr->store, session->id, error);
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
    if (carrel_hypervisor_get_state(mgr->hv, domain, &state, &local)) {
        if (state != CARREL_DOMAIN_RUNNING && !carrel_hypervisor_start(mgr->hv, domain, error))
            return FALSE;
        return carrel_manager_wait_agent(mgr, domain, &by_screen, error);
    }
    if (!g_error_matches(local, CARREL_ERROR, CARREL_ERROR_NOT_FOUND)) {
        g_propagate_error(error, g_steal_pointer(&local));
        return FALSE;
    }
    /* The definition is gone (vanished while we were down): define it again. */
    tmpl = carrel_store_template_get(mgr->store, session->template_name, session->template_version,
                                     error);
    xml = tmpl ? carrel_manager_session_xml(mgr, session, tmpl, error) : NULL;
    return xml && carrel_hypervisor_define_start(mgr->hv, xml, error) &&
           carrel_manager_wait_agent(mgr, domain, &by_screen, error);
}

CarrelSession *
carrel_manager_session_start(CarrelManager *mgr, const char *id_or_name, GError **error)
{
    return run_verb(mgr, id_or_name, CARREL_SESSION_OP_START, do_start, NULL, error);
}

static gboolean
do_stop(CarrelManager *mgr, CarrelSession *session, gpointer data, GError **error)
{
    g_autofree char *domain = carrel_session_domain_name(session->id);
    guint timeout_s = GPOINTER_TO_UINT(data);
    g_autoptr(GError) local = NULL;

    if (carrel_hypervisor_shutdown(mgr->hv, domain, timeout_s, &local))
        return TRUE;
    /* A guest that ignores the request within the timeout is powered off. */
    return carrel_hypervisor_destroy(mgr->hv, domain, error);
}

CarrelSession *
carrel_manager_session_stop(CarrelManager *mgr, const char *id_or_name, guint timeout_s,
                            GError **error)
{
    return run_verb(mgr, id_or_name, CARREL_SESSION_OP_STOP, do_stop, GUINT_TO_POINTER(timeout_s),
                    error);
}

static gboolean
do_destroy(CarrelManager *mgr, CarrelSession *session, gpointer data, GError **error)
{
    g_autofree char *domain = carrel_session_domain_name(session->id);
    g_autoptr(GError) local = NULL;

    /* A domain that is already gone (it crashed, or someone removed it) is destroyed enough. */
    if (!carrel_hypervisor_destroy(mgr->hv, domain, &local) &&
        !g_error_matches(local, CARREL_ERROR, CARREL_ERROR_NOT_FOUND)) {
        g_propagate_error(error, g_steal_pointer(&local));
        return FALSE;
    }
    if (!carrel_hypervisor_undefine(mgr->hv, domain, error))
        return FALSE;
    return carrel_util_remove_tree(session->dir, error);
}

CarrelSession *
carrel_manager_session_destroy(CarrelManager *mgr, const char *id_or_name, GError **error)
{
    return run_verb(mgr, id_or_name, CARREL_SESSION_OP_DESTROY, do_destroy, NULL, error);
}
