/*
 * core: the one door. Every public verb enters here with its principal, as libvirt's driver
 * entry points check their ACL and write their audit record: the policy decides (role matrix,
 * owner, control lease), every refusal and every state-changing outcome becomes one row of the
 * hash-chained audit log, and session verbs land on the session's timeline with who did them.
 * REST, MCP, the console proxy and the watcher only translate into these calls.
 */
#include "core/core-priv.h"

/* The timeline names of the session verbs recorded as "lifecycle" events. */
static const char *const lifecycle_actions[CARREL_OP_LAST] = {
    [CARREL_OP_SESSION_CREATE] = "create",    [CARREL_OP_SESSION_START] = "start",
    [CARREL_OP_SESSION_STOP] = "stop",        [CARREL_OP_SESSION_PAUSE] = "pause",
    [CARREL_OP_SESSION_RESUME] = "resume",    [CARREL_OP_SESSION_HIBERNATE] = "hibernate",
    [CARREL_OP_SESSION_DESTROY] = "destroy",  [CARREL_OP_SESSION_FORK] = "fork",
    [CARREL_OP_SNAPSHOT_CREATE] = "snapshot", [CARREL_OP_SNAPSHOT_DELETE] = "snapshot_delete",
    [CARREL_OP_SNAPSHOT_REVERT] = "revert",
};

static const char *
lifecycle_action(CarrelOp op)
{
    return (int)op >= 0 && op < CARREL_OP_LAST ? lifecycle_actions[op] : NULL;
}

void
carrel_door_clear(CarrelDoor *door)
{
    if (door->holding) {
        door->holding = FALSE;
        carrel_catchup_release();
    }
    g_clear_pointer(&door->session, carrel_session_free);
    g_clear_pointer(&door->params, json_node_unref);
    g_clear_pointer(&door->session_id, g_free);
    /* A verb that returned early still closes its frame: frames nest, one per open door. */
    (void)carrel_door_timings(door);
    g_clear_pointer(&door->timings, json_node_unref);
}

JsonNode *
carrel_door_timings(CarrelDoor *door)
{
    if (door->timing) {
        door->timing = FALSE;
        door->timings = carrel_timings_end();
    }
    return door->timings;
}

CarrelAuditRecord *
carrel_door_audit_record(const CarrelDoor *door, const char *result, const GError *failure)
{
    g_autoptr(CarrelAuditRecord) rec = carrel_audit_record_new();

    rec->ts_us = g_get_real_time();
    rec->principal_id = g_strdup(door->who->token_id);
    rec->principal_label = g_strdup(door->who->label);
    rec->role = g_strdup(carrel_role_to_string(door->who->role));
    rec->operation = g_strdup(carrel_op_to_string(door->op));
    rec->session_id = g_strdup(door->session_id);
    rec->params_digest = carrel_audit_digest(door->params);
    rec->result = g_strdup(result);
    if (failure)
        rec->error_code = g_strdup(carrel_error_code_to_string(failure->domain == CARREL_ERROR
                                                                   ? (CarrelErrorCode)failure->code
                                                                   : CARREL_ERROR_FAILED));
    return g_steal_pointer(&rec);
}

void
carrel_manager_audit(CarrelManager *mgr, CarrelAuditRecord *rec)
{
    g_autoptr(GError) error = NULL;

    /* What it records already happened: a log that cannot be written is reported, loudly. */
    if (!carrel_store_audit_append(mgr->store, rec, &error))
        g_critical("audit: cannot record %s by '%s': %s", rec->operation, rec->principal_label,
                   error->message);
}

static void
audit_refusal(CarrelDoor *door, const GError *refusal)
{
    g_autoptr(CarrelAuditRecord) rec = carrel_door_audit_record(door, "denied", refusal);

    carrel_manager_audit(door->mgr, rec);
}

/* Verbs that act on the guest, its screen or its disk: they wait until what a restore left to
 * catch up on after its reply is done (core-catchup.c). Reading rows and the timeline does not. */
static gboolean
reaches_guest(CarrelOp op)
{
    static const CarrelOp rows_only[] = {
        CARREL_OP_SESSION_LIST,    CARREL_OP_SESSION_READ,    CARREL_OP_ARTIFACT_READ,
        CARREL_OP_CONSOLE_VIEW,    CARREL_OP_CONTROL_TAKE,    CARREL_OP_CONTROL_RELEASE,
        CARREL_OP_APPROVAL_LIST,   CARREL_OP_APPROVAL_DECIDE, CARREL_OP_APPROVAL_REQUEST,
        CARREL_OP_SESSION_OBSERVE, CARREL_OP_SESSION_EXPORT,
    };

    for (guint i = 0; i < G_N_ELEMENTS(rows_only); i++)
        if (rows_only[i] == op)
            return FALSE;
    return TRUE;
}

/* The session as the policy sees it: owner and control lease. */
static gboolean
authorize_session(CarrelDoor *door, GError **error)
{
    g_autofree char *holder_id = NULL;
    g_autofree char *holder_label = NULL;
    CarrelPolicyTarget target = {.id = door->session->id, .owner_id = door->session->owner_id};

    if (!carrel_store_lease_get(door->mgr->store, door->session->id, &holder_id, &holder_label,
                                &target.lease_since, error))
        return FALSE;
    target.lease_holder_id = holder_id;
    target.lease_holder_label = holder_label;
    return carrel_policy_authorize(door->mgr->policy, door->who, door->op, &target, error);
}

gboolean
carrel_door_enter(CarrelDoor *door, CarrelManager *mgr, const CarrelPrincipal *who, CarrelOp op,
                  const char *id_or_name, JsonNode *params, GError **error)
{
    g_autoptr(GError) refusal = NULL;
    gboolean ok;

    g_return_val_if_fail(who != NULL, FALSE);
    door->mgr = mgr;
    door->who = who;
    door->op = op;
    door->params = params;
    door->started_us = g_get_monotonic_time();
    door->holding = TRUE;
    carrel_catchup_hold();
    if (id_or_name) {
        door->session = carrel_store_session_get(mgr->store, id_or_name, error);
        if (!door->session)
            return FALSE;
        door->session_id = g_strdup(door->session->id);
        ok = authorize_session(door, &refusal);
    } else {
        ok = carrel_policy_authorize(mgr->policy, who, op, NULL, &refusal);
    }
    if (ok && door->session && reaches_guest(op))
        carrel_manager_wait_caught_up(mgr, door->session->id);
    if (ok && lifecycle_action(op)) {
        carrel_timings_begin();
        door->timing = TRUE;
    }
    if (ok)
        return TRUE;
    audit_refusal(door, refusal);
    g_propagate_error(error, g_steal_pointer(&refusal));
    return FALSE;
}

gboolean
carrel_door_check(CarrelDoor *door, CarrelOp op, GError **error)
{
    g_autoptr(GError) refusal = NULL;
    CarrelOp was = door->op;
    gboolean ok;

    door->op = op;
    ok = door->session ? authorize_session(door, &refusal)
                       : carrel_policy_authorize(door->mgr->policy, door->who, op, NULL, &refusal);
    if (!ok) {
        audit_refusal(door, refusal);
        g_propagate_error(error, g_steal_pointer(&refusal));
    }
    door->op = ok ? was : op;
    return ok;
}

void
carrel_door_set_session(CarrelDoor *door, const char *session_id)
{
    g_free(door->session_id);
    door->session_id = g_strdup(session_id);
}

/* Audits the outcome and puts lifecycle verbs on the timeline; FALSE (with error) when that
 * event could not be recorded. */
static gboolean
record_outcome(CarrelDoor *door, const GError *failure, GError **error)
{
    const char *action = lifecycle_action(door->op);
    JsonNode *timings = carrel_door_timings(door);
    g_autoptr(JsonNode) result = NULL;

    if (carrel_op_changes_state(door->op) && !door->audited) {
        g_autoptr(CarrelAuditRecord) rec =
            carrel_door_audit_record(door, failure ? "failed" : "ok", failure);
        carrel_manager_audit(door->mgr, rec);
        door->audited = TRUE;
    }
    if (!action || !door->session_id || door->quiet)
        return TRUE;
    /* Where the time went, on the event (its duration is the whole). */
    if (timings && !failure) {
        result = carrel_conf_new_object_node();
        json_object_set_member(json_node_get_object(result), "timings", json_node_copy(timings));
    }
    return carrel_manager_record(door->mgr, door->session_id, door->who, "lifecycle", action,
                                 door->params, result, failure, door->started_us, NULL, error);
}

gpointer
carrel_door_finish_full(CarrelDoor *door, gpointer result, GDestroyNotify free_result,
                        GError **local, GError **error)
{
    g_autoptr(GError) failure = g_steal_pointer(local);
    g_autoptr(GError) lost = NULL;

    /* A verb that failed without saying why still fails, and says so. */
    if (!result && !failure)
        failure = g_error_new(CARREL_ERROR, CARREL_ERROR_INTERNAL, "%s failed",
                              carrel_op_to_string(door->op));
    if (!record_outcome(door, result ? NULL : failure, &lost)) {
        if (!result) {
            /* It failed anyway: its own error is the answer, the lost event is logged. */
            g_critical("session '%s': %s", door->session_id, lost->message);
        } else {
            /* It happened, but no one could tell from the timeline: the caller must know. */
            g_prefix_error(&lost, "%s done, but ", carrel_op_to_string(door->op));
            if (free_result)
                free_result(result);
            result = NULL;
            g_propagate_error(error, g_steal_pointer(&lost));
            return NULL;
        }
    }
    if (!result)
        g_propagate_error(error, g_steal_pointer(&failure));
    return result;
}

gpointer
carrel_door_finish(CarrelDoor *door, gpointer result, GError **local, GError **error)
{
    return carrel_door_finish_full(door, result, NULL, local, error);
}

gboolean
carrel_door_finish_ok(CarrelDoor *door, gboolean ok, GError **local, GError **error)
{
    return carrel_door_finish(door, ok ? door : NULL, local, error) != NULL;
}
