/*
 * api: how the API shows things in JSON, the same for every front door (REST, the event stream,
 * MCP): one shape of a session, with its control lease, and one shape of a list.
 */
#include "api/api-priv.h"

/* "control": the lease while someone holds it, else null. */
static JsonNode *
with_control(JsonNode *node, JsonNode *lease)
{
    JsonObject *l = lease ? json_node_get_object(lease) : NULL;

    if (l && !json_object_get_null_member(l, "holder"))
        json_object_set_member(json_node_get_object(node), "control", json_node_copy(lease));
    else
        json_object_set_null_member(json_node_get_object(node), "control");
    return node;
}

JsonNode *
carrel_api_session_json(CarrelManager *mgr, const CarrelPrincipal *who, const CarrelSession *s)
{
    /* s came from core, which decided that who may see it. */
    g_autoptr(JsonNode) lease = carrel_manager_lease_of(mgr, s);

    return with_control(carrel_session_to_json(s), lease);
}

JsonNode *
carrel_api_list_of(const char *member, GPtrArray *items, CarrelApiItemJson to_json, gpointer data)
{
    g_autoptr(JsonBuilder) b = json_builder_new();

    json_builder_begin_object(b);
    json_builder_set_member_name(b, member);
    json_builder_begin_array(b);
    for (guint i = 0; i < items->len; i++)
        json_builder_add_value(b, to_json(g_ptr_array_index(items, i), data));
    json_builder_end_array(b);
    json_builder_end_object(b);
    return json_builder_get_root(b);
}

JsonNode *
carrel_api_session_item(gpointer session, gpointer view)
{
    CarrelApiView *v = view;
    const CarrelSession *s = session;

    if (!v->leases)
        return carrel_api_session_json(v->mgr, v->who, s);
    return with_control(carrel_session_to_json(s), g_hash_table_lookup(v->leases, s->id));
}

JsonNode *
carrel_api_approval_item(gpointer approval, gpointer unused)
{
    return carrel_approval_to_json(approval);
}

JsonNode *
carrel_api_snapshot_item(gpointer snapshot, gpointer unused)
{
    return carrel_snapshot_to_json(snapshot);
}

JsonNode *
carrel_api_event_item(gpointer event, gpointer unused)
{
    return carrel_event_to_json(event);
}
