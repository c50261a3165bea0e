/* core: reading the audit log and checking its chain (writing is the door's, core-door.c). */
#include "core/core-priv.h"

#define AUDIT_LIMIT_MAX 10000

JsonNode *
carrel_manager_audit_list(CarrelManager *mgr, const CarrelPrincipal *who,
                          const CarrelAuditQuery *query, GError **error)
{
    g_auto(CarrelDoor) door = {0};
    g_autoptr(GPtrArray) rows = NULL;
    g_autoptr(JsonBuilder) b = json_builder_new();
    CarrelAuditFilter filter = {
        .after_seq = MAX(query->after_seq, 0),
        .since_us = MAX(query->since_us, 0),
        .session_id = query->session_id,
        .principal = query->principal,
        .operation = query->operation,
        .result = query->result,
        .limit = query->limit,
    };

    if (!carrel_door_enter(&door, mgr, who, CARREL_OP_AUDIT_READ, NULL, NULL, error))
        return NULL;
    if (query->limit > AUDIT_LIMIT_MAX) {
        g_set_error(error, CARREL_ERROR, CARREL_ERROR_INVALID_ARG, "limit must be between 1 and %d",
                    AUDIT_LIMIT_MAX);
        return NULL;
    }
    rows = carrel_store_audit_list(mgr->store, &filter, error);
    if (!rows)
        return NULL;
    json_builder_begin_object(b);
    json_builder_set_member_name(b, "entries");
    json_builder_begin_array(b);
    for (guint i = 0; i < rows->len; i++)
        json_builder_add_value(b, carrel_audit_record_to_json(g_ptr_array_index(rows, i)));
    json_builder_end_array(b);
    json_builder_end_object(b);
    return json_builder_get_root(b);
}

JsonNode *
carrel_manager_audit_verify(CarrelManager *mgr, const CarrelPrincipal *who, GError **error)
{
    g_auto(CarrelDoor) door = {0};
    g_auto(CarrelAuditVerdict) verdict = {0};
    g_autoptr(JsonBuilder) b = json_builder_new();

    if (!carrel_door_enter(&door, mgr, who, CARREL_OP_AUDIT_READ, NULL, NULL, error) ||
        !carrel_store_audit_verify(mgr->store, &verdict, error))
        return NULL;
    json_builder_begin_object(b);
    json_builder_set_member_name(b, "intact");
    json_builder_add_boolean_value(b, verdict.intact);
    json_builder_set_member_name(b, "rows");
    json_builder_add_int_value(b, verdict.rows);
    json_builder_set_member_name(b, "bad_seq");
    if (verdict.intact)
        json_builder_add_null_value(b);
    else
        json_builder_add_int_value(b, verdict.bad_seq);
    json_builder_set_member_name(b, "why");
    if (verdict.why)
        json_builder_add_string_value(b, verdict.why);
    else
        json_builder_add_null_value(b);
    json_builder_end_object(b);
    return json_builder_get_root(b);
}

JsonNode *
carrel_manager_role_matrix(CarrelManager *mgr, const CarrelPrincipal *who, GError **error)
{
    g_auto(CarrelDoor) door = {0};

    if (!carrel_door_enter(&door, mgr, who, CARREL_OP_SERVER_READ, NULL, NULL, error))
        return NULL;
    return carrel_policy_matrix_to_json(mgr->policy);
}
