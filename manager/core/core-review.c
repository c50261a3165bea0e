/*
 * core: what people reviewing sessions hold and decide: the control lease (a human has the
 * session's input, agents wait) and approvals (actions waiting for a reviewer).
 */
#include <string.h>

#include "core/core-priv.h"

#define TOKEN_NAME_MAX 64

char *
carrel_manager_authenticate(CarrelManager *mgr, const char *token, char **ret_name)
{
    g_autofree char *hash = NULL;
    g_autofree char *label = NULL;
    g_autoptr(GError) local = NULL;
    char *role;

    if (!token || !*token || strlen(token) > 256)
        return NULL;
    /* Only hashes are stored, so a leaked database does not leak usable tokens. */
    hash = carrel_util_sha256_string(token);
    role = carrel_store_token_lookup(mgr->store, hash, &label, &local);
    if (role && ret_name)
        *ret_name = g_strdup(label && *label ? label : role);
    return role;
}

gboolean
carrel_manager_add_token(CarrelManager *mgr, const char *token, const char *role, GError **error)
{
    g_autofree char *hash = carrel_util_sha256_string(token);
    g_autofree char *known = carrel_store_token_lookup(mgr->store, hash, NULL, NULL);

    if (known)
        return TRUE;
    return carrel_store_token_insert(mgr->store, hash, role, role, error);
}

static gboolean
check_token_name(const char *name, GError **error)
{
    gsize len = name ? strlen(name) : 0;

    for (gsize i = 0; i < len; i++) {
        if (!g_ascii_isalnum(name[i]) && !strchr("._@-", name[i]))
            len = 0;
    }
    if (len == 0 || len > TOKEN_NAME_MAX) {
        g_set_error(error, CARREL_ERROR, CARREL_ERROR_INVALID_ARG,
                    "a token's name must be 1-%d of letters, digits and . _ @ -", TOKEN_NAME_MAX);
        return FALSE;
    }
    return TRUE;
}

char *
carrel_manager_create_token(CarrelManager *mgr, const char *role, const char *name, GError **error)
{
    g_autofree char *token = NULL;
    g_autofree char *hash = NULL;

    if (g_strcmp0(role, "admin") != 0 && g_strcmp0(role, "agent") != 0 &&
        g_strcmp0(role, "reviewer") != 0) {
        g_set_error(error, CARREL_ERROR, CARREL_ERROR_INVALID_ARG,
                    "a token's role is admin, agent or reviewer");
        return NULL;
    }
    if (!check_token_name(name, error))
        return NULL;
    token = carrel_util_new_token();
    hash = carrel_util_sha256_string(token);
    if (!carrel_store_token_insert(mgr->store, hash, role, name, error))
        return NULL;
    return g_steal_pointer(&token);
}

void
carrel_manager_note(CarrelManager *mgr, const char *session_id, const char *actor, const char *kind,
                    const char *action, JsonNode *params, JsonNode *result, const GError *failure,
                    gint64 started_us)
{
    carrel_manager_record(mgr, session_id, actor, kind, action, params, result, failure, started_us,
                          NULL);
}

static JsonNode *
lease_json(const char *holder, gint64 since)
{
    g_autoptr(JsonBuilder) b = json_builder_new();
    g_autofree char *when = holder ? carrel_util_format_time(since) : NULL;

    json_builder_begin_object(b);
    json_builder_set_member_name(b, "holder");
    if (holder)
        json_builder_add_string_value(b, holder);
    else
        json_builder_add_null_value(b);
    json_builder_set_member_name(b, "since");
    if (when)
        json_builder_add_string_value(b, when);
    else
        json_builder_add_null_value(b);
    json_builder_end_object(b);
    return json_builder_get_root(b);
}

JsonNode *
carrel_manager_lease_get(CarrelManager *mgr, const char *id_or_name, GError **error)
{
    g_autoptr(CarrelSession) s = carrel_store_session_get(mgr->store, id_or_name, error);
    g_autofree char *holder = NULL;
    gint64 since = 0;

    if (!s || !carrel_store_lease_get(mgr->store, s->id, &holder, &since, error))
        return NULL;
    return lease_json(holder, since);
}

char *
carrel_manager_lease_holder(CarrelManager *mgr, const char *id_or_name)
{
    g_autoptr(CarrelSession) s = carrel_store_session_get(mgr->store, id_or_name, NULL);
    char *holder = NULL;

    if (s && !carrel_store_lease_get(mgr->store, s->id, &holder, NULL, NULL))
        return NULL;
    return holder;
}

JsonNode *
carrel_manager_lease_take(CarrelManager *mgr, const char *id_or_name, const char *who,
                          GError **error)
{
    g_autoptr(CarrelSession) s = carrel_store_session_get(mgr->store, id_or_name, error);
    g_autofree char *holder = NULL;
    gint64 since = 0;
    g_autoptr(GError) refused = NULL;

    if (!s)
        return NULL;
    if (s->state == CARREL_SESSION_DESTROYED) {
        g_set_error(error, CARREL_ERROR, CARREL_ERROR_WRONG_STATE, "session '%s' is destroyed",
                    s->id);
        return NULL;
    }
    if (!carrel_store_lease_take(mgr->store, s->id, who, &holder, &since, error))
        return NULL;
    if (g_strcmp0(holder, who) != 0) {
        g_set_error(&refused, CARREL_ERROR, CARREL_ERROR_WRONG_STATE,
                    "session '%s' is under human control: '%s' holds the control lease", s->id,
                    holder);
        carrel_manager_note(mgr, s->id, who, "control", "take", NULL, NULL, refused, 0);
        g_propagate_error(error, g_steal_pointer(&refused));
        return NULL;
    }
    carrel_manager_note(mgr, s->id, who, "control", "take", NULL, NULL, NULL, 0);
    return lease_json(holder, since);
}

JsonNode *
carrel_manager_lease_release(CarrelManager *mgr, const char *id_or_name, const char *who,
                             gboolean force, GError **error)
{
    g_autoptr(CarrelSession) s = carrel_store_session_get(mgr->store, id_or_name, error);
    g_autofree char *holder = NULL;
    gint64 since = 0;

    if (!s || !carrel_store_lease_get(mgr->store, s->id, &holder, &since, error))
        return NULL;
    if (holder && g_strcmp0(holder, who) != 0 && !force) {
        g_set_error(error, CARREL_ERROR, CARREL_ERROR_FORBIDDEN,
                    "'%s' holds the control lease of session '%s'; only they (or an admin) can "
                    "release it",
                    holder, s->id);
        return NULL;
    }
    if (holder) {
        /* The lease that ends, as it was: who held it and since when. */
        g_autoptr(JsonNode) params = lease_json(holder, since);
        if (!carrel_store_lease_release(mgr->store, s->id, error))
            return NULL;
        carrel_manager_note(mgr, s->id, who, "control", "release", params, NULL, NULL, 0);
    }
    return lease_json(NULL, 0);
}

gboolean
carrel_manager_check_agent_input(CarrelManager *mgr, const CarrelSession *s, GError **error)
{
    g_autofree char *holder = NULL;
    gint64 since = 0;
    g_autofree char *when = NULL;

    if (!carrel_store_lease_get(mgr->store, s->id, &holder, &since, error))
        return FALSE;
    if (!holder)
        return TRUE;
    when = carrel_util_format_time(since);
    g_set_error(error, CARREL_ERROR, CARREL_ERROR_WRONG_STATE,
                "session under human control: '%s' took over at %s; agent input is refused until "
                "they release it",
                holder, when);
    return FALSE;
}

CarrelApproval *
carrel_manager_approval_request(CarrelManager *mgr, const char *id_or_name, const char *action,
                                JsonNode *detail, const char *requested_by, GError **error)
{
    g_autoptr(CarrelSession) s = carrel_store_session_get(mgr->store, id_or_name, error);
    g_autoptr(CarrelApproval) a = NULL;
    g_autoptr(JsonNode) params = NULL;

    if (!s || !carrel_approval_check_action(action, error))
        return NULL;
    if (detail && !JSON_NODE_HOLDS_OBJECT(detail)) {
        g_set_error(error, CARREL_ERROR, CARREL_ERROR_INVALID_ARG,
                    "an approval's detail must be an object");
        return NULL;
    }
    a = carrel_approval_new();
    a->id = carrel_util_new_id("ap-");
    a->session_id = g_strdup(s->id);
    a->action = g_strdup(action);
    a->detail = detail ? json_node_copy(detail)
                       : json_node_init_object(json_node_alloc(), json_object_new());
    a->requested_by = g_strdup(requested_by);
    a->requested_at = carrel_util_now();
    a->state = g_strdup("pending");
    if (!carrel_store_approval_insert(mgr->store, a, error))
        return NULL;
    params = carrel_approval_to_json(a);
    carrel_manager_note(mgr, s->id, requested_by, "approval", "request", params, NULL, NULL, 0);
    return g_steal_pointer(&a);
}

GPtrArray *
carrel_manager_approval_list(CarrelManager *mgr, gboolean pending_only, GError **error)
{
    return carrel_store_approval_list(mgr->store, pending_only, error);
}

CarrelApproval *
carrel_manager_approval_decide(CarrelManager *mgr, const char *id, gboolean approve,
                               const char *who, const char *reason, GError **error)
{
    g_autoptr(CarrelApproval) a = NULL;
    g_autoptr(JsonNode) params = NULL;

    if (!carrel_approval_check_reason(reason, error) ||
        !carrel_store_approval_decide(mgr->store, id, approve, who, reason, error) ||
        !(a = carrel_store_approval_get(mgr->store, id, error)))
        return NULL;
    params = carrel_approval_to_json(a);
    carrel_manager_note(mgr, a->session_id, who, "approval", approve ? "approve" : "deny", params,
                        NULL, NULL, 0);
    return g_steal_pointer(&a);
}
