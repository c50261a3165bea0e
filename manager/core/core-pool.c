/*
 * Warm pools: per template, N sessions kept created and paused, invisible to listings. A
 * create that fits takes one (resume, clock, the request's name, limits and inputs) instead of
 * restoring or booting, and the watcher creates a replacement in the background.
 */
#include "core/core-priv.h"

static gboolean
set_pool(CarrelManager *mgr, const char *template_name, guint size, GError **error)
{
    g_autoptr(CarrelTemplate) tmpl = carrel_store_template_get(mgr->store, template_name, 0, error);

    if (!tmpl)
        return FALSE;
    if (size > CARREL_LIMIT_POOL) {
        g_set_error(error, CARREL_ERROR, CARREL_ERROR_INVALID_ARG,
                    "a pool holds at most %d sessions", CARREL_LIMIT_POOL);
        return FALSE;
    }
    return carrel_store_pool_set(mgr->store, template_name, size, error);
}

gboolean
carrel_manager_pool_set(CarrelManager *mgr, const CarrelPrincipal *who, const char *template_name,
                        guint size, GError **error)
{
    g_auto(CarrelDoor) door = {0};
    g_autoptr(GError) local = NULL;
    JsonNode *params = carrel_conf_new_object_node();

    json_object_set_string_member(json_node_get_object(params), "template", template_name);
    json_object_set_int_member(json_node_get_object(params), "size", size);
    if (!carrel_door_enter(&door, mgr, who, CARREL_OP_POOL_SET, NULL, params, error))
        return FALSE;
    return carrel_door_finish_ok(&door, set_pool(mgr, template_name, size, &local), &local, error);
}

JsonNode *
carrel_manager_pool_list(CarrelManager *mgr, const CarrelPrincipal *who, GError **error)
{
    g_auto(CarrelDoor) door = {0};
    g_autoptr(GHashTable) pools = NULL;
    g_autoptr(JsonBuilder) b = json_builder_new();
    GHashTableIter iter;
    gpointer key, value;

    if (!carrel_door_enter(&door, mgr, who, CARREL_OP_POOL_READ, NULL, NULL, error) ||
        !(pools = carrel_store_pool_list(mgr->store, error)))
        return NULL;
    json_builder_begin_object(b);
    json_builder_set_member_name(b, "pools");
    json_builder_begin_array(b);
    g_hash_table_iter_init(&iter, pools);
    while (g_hash_table_iter_next(&iter, &key, &value)) {
        g_autoptr(GPtrArray) members = carrel_store_pool_members(mgr->store, key, NULL);
        guint ready = 0;
        for (guint i = 0; members && i < members->len; i++)
            ready +=
                ((CarrelSession *)g_ptr_array_index(members, i))->state == CARREL_SESSION_PAUSED;
        json_builder_begin_object(b);
        json_builder_set_member_name(b, "template");
        json_builder_add_string_value(b, key);
        json_builder_set_member_name(b, "size");
        json_builder_add_int_value(b, GPOINTER_TO_UINT(value));
        json_builder_set_member_name(b, "ready");
        json_builder_add_int_value(b, ready);
        json_builder_set_member_name(b, "members");
        json_builder_add_int_value(b, members ? members->len : 0);
        json_builder_end_object(b);
    }
    json_builder_end_array(b);
    json_builder_end_object(b);
    return json_builder_get_root(b);
}

/* The request fits the pool's members: same version, same shape, no cold boot asked for, and a
 * shape the request's policy allows. */
static gboolean
fits(const CarrelSessionRequest *req, const CarrelTemplate *tmpl, const CarrelPolicy *policy,
     const CarrelSession *m)
{
    /* Members sit on the isolated network: a policy with network boots or restores its own. */
    return !req->cold && m->state == CARREL_SESSION_PAUSED &&
           carrel_policy_network_mode(policy) == CARREL_NETWORK_NONE &&
           carrel_policy_check_resources(policy, m->vcpus, m->memory_mib, NULL) &&
           carrel_policy_check_disk(policy, tmpl->virtual_size_bytes, NULL) &&
           m->template_version == tmpl->version && (!req->vcpus || req->vcpus == m->vcpus) &&
           (!req->memory_mib || req->memory_mib == m->memory_mib);
}

/* The member becomes the request's session: running, clock and screen set, named, limits and
 * inputs. */
static gboolean
hand_over(CarrelManager *mgr, const CarrelPrincipal *who, CarrelSession *m,
          const CarrelSessionRequest *req, const CarrelTemplate *tmpl, const CarrelPolicy *policy,
          GError **error)
{
    g_autofree char *domain = carrel_session_domain_name(m->id);
    CarrelSessionShape shape = {0};
    guint ttl_s = 0, idle_s = 0;
    const char *action = NULL;

    /* A member has its template's screen: the request's own, if any, is set on taking. */
    carrel_session_resolve_shape(req, tmpl, &shape);
    m->screen_width = shape.screen_width;
    m->screen_height = shape.screen_height;
    g_free(m->name);
    m->name = g_strdup(req->name ? req->name : m->id);
    g_strfreev(m->exit_paths);
    m->exit_paths = carrel_policy_exit_paths(policy, req->exit_paths);
    g_free(m->policy);
    m->policy = g_strdup(carrel_policy_get_name(policy));
    carrel_policy_time_limits(policy, req->ttl_s, req->idle_timeout_s, req->expiry_action, &ttl_s,
                              &idle_s, &action);
    m->expires_at = ttl_s ? carrel_util_now() + ttl_s : 0;
    m->idle_timeout_s = idle_s;
    g_free(m->expiry_action);
    m->expiry_action = g_strdup(action);
    /* A member taken belongs to whoever took it, as a session it created would. */
    g_free(m->owner_id);
    g_free(m->owner_label);
    m->owner_id = g_strdup(who->token_id);
    m->owner_label = g_strdup(who->label);
    /* Adopted but not yet running, a member would be its new owner's paused session with no
     * reason given: the intent lets recovery run it (core-recover.c). */
    if (!carrel_manager_intent_begin(mgr, m->id, "claim", NULL, error) ||
        !carrel_store_session_adopt_member(mgr->store, m, error))
        return FALSE;
    carrel_timings_mark("adopt");
    carrel_crash_point("pool.taken");
    if (!carrel_hypervisor_pause(mgr->hv, domain, FALSE, error))
        return FALSE;
    carrel_timings_mark("resume");
    /* Its clock stood still while it waited, and the screen may be the request's own: both are
     * set after the reply, before any verb reaches the guest (core-catchup.c). */
    carrel_manager_catchup_restored(mgr, m, FALSE);
    return carrel_store_session_set_state(mgr->store, m->id, CARREL_SESSION_RUNNING, NULL, error) &&
           (!req->inputs || !req->inputs->len ||
            carrel_manager_inject_by_agent(mgr, m, req->inputs, error));
}

CarrelSession *
carrel_manager_pool_take(CarrelManager *mgr, const CarrelPrincipal *who,
                         const CarrelSessionRequest *req, const CarrelTemplate *tmpl,
                         const CarrelPolicy *policy)
{
    g_autoptr(GPtrArray) members = carrel_store_pool_members(mgr->store, tmpl->name, NULL);
    g_autoptr(GError) error = NULL;

    /* A bad request takes the normal path, which says what is wrong. */
    g_autoptr(CarrelSession) same_name =
        req->name ? carrel_store_session_get(mgr->store, req->name, NULL) : NULL;

    if ((req->name && !carrel_util_is_valid_name(req->name)) || same_name ||
        !carrel_manager_check_inputs(mgr, req->inputs, NULL))
        return NULL;
    for (guint i = 0; members && i < members->len; i++) {
        CarrelSession *m = g_ptr_array_index(members, i);
        g_autoptr(CarrelSession) fresh = NULL;
        gboolean ok;
        if (!fits(req, tmpl, policy, m) || !carrel_manager_mark_busy(mgr, m->id, "hand-over", NULL))
            continue;
        carrel_timings_mark("lookup");
        fresh = carrel_store_session_get(mgr->store, m->id, NULL);
        ok = fresh && fresh->pool && fits(req, tmpl, policy, fresh) &&
             hand_over(mgr, who, fresh, req, tmpl, policy, &error);
        carrel_manager_intent_end(mgr, m->id);
        carrel_manager_clear_busy(mgr, m->id);
        if (ok) {
            carrel_manager_forget_uploads(mgr, req->inputs);
            return carrel_store_session_get(mgr->store, m->id, NULL);
        }
        if (error) {
            /* A member that failed its hand-over is no member: it goes. */
            g_warning("warm pool of %s: handing over %s failed: %s", tmpl->name, m->id,
                      error->message);
            carrel_session_free(
                carrel_manager_session_destroy(mgr, carrel_principal_daemon(), m->id, NULL));
            return NULL;
        }
    }
    return NULL;
}

/* A new member: created like any session (warm when the template is), then paused. */
static void
add_member(CarrelManager *mgr, const char *template_name)
{
    CarrelSessionRequest req = {.template_name = (char *)template_name};
    g_autoptr(GError) error = NULL;
    const CarrelPrincipal *daemon = carrel_principal_daemon();
    g_autoptr(CarrelSession) s =
        carrel_manager_create_into(mgr, daemon, &req, template_name, &error);
    g_autoptr(CarrelSession) paused = NULL;

    if (s)
        paused = carrel_manager_session_pause(mgr, daemon, s->id, &error);
    if (!paused)
        g_warning("warm pool of %s: adding a member failed: %s", template_name,
                  error ? error->message : "?");
}

void
carrel_manager_pool_refill(CarrelManager *mgr)
{
    g_autoptr(GHashTable) pools = carrel_store_pool_list(mgr->store, NULL);
    GHashTableIter iter;
    gpointer key, value;

    if (!pools)
        return;
    g_hash_table_iter_init(&iter, pools);
    while (g_hash_table_iter_next(&iter, &key, &value)) {
        g_autoptr(GPtrArray) members = carrel_store_pool_members(mgr->store, key, NULL);
        guint size = GPOINTER_TO_UINT(value);
        if (!members)
            continue;
        /* Shrunk: the extra members go, newest first. */
        if (members->len > size) {
            CarrelSession *extra = g_ptr_array_index(members, members->len - 1);
            carrel_session_free(
                carrel_manager_session_destroy(mgr, carrel_principal_daemon(), extra->id, NULL));
        } else if (members->len < size) {
            add_member(mgr, key);
        }
    }
}
