#include <glib/gstdio.h>

#include "core/core-priv.h"
#include "disk/disk.h"
#include "net/net.h"

/* memory_shared: the guest writes its RAM into session->memory_file (carrel_manager_warm_xml). */
static char *
session_xml(CarrelManager *mgr, const CarrelSession *session, const CarrelTemplate *tmpl,
            gboolean memory_shared, GError **error)
{
    g_autofree char *domain = carrel_session_domain_name(session->id);
    g_autofree char *log = g_build_filename(session->dir, "console.log", NULL);
    /* Fresh identity every time: a restored clone must never share its original's. */
    g_autofree char *uuid = g_uuid_string_random();
    g_autofree char *genid = g_uuid_string_random();
    g_autofree char *tap = session->egress_ip ? carrel_manager_egress_tap(session) : NULL;
    CarrelDomainSpec spec = {
        .domain_name = domain,
        .session_id = session->id,
        .instance_id = mgr->instance_id,
        .uuid = uuid,
        .genid = genid,
        .accel = mgr->accel,
        .vcpus = session->vcpus,
        .memory_mib = session->memory_mib,
        .boot = tmpl->boot,
        .kernel_path = tmpl->kernel_path,
        .initrd_path = tmpl->initrd_path,
        .cmdline = tmpl->cmdline,
        .disk_path = session->overlay_path,
        .disk_format = "qcow2",
        .console_log_path = log,
        .tb_cache_mib = mgr->accel == CARREL_ACCEL_TCG ? mgr->tb_cache_mib : 0,
        .mac = session->mac,
        .network = session->egress_ip ? CARREL_NET_EGRESS_NAME : CARREL_NET_ISOLATED_NAME,
        .tap = tap,
        .emulator = mgr->emulator,
        .memory_file = session->memory_file,
        .memory_file_shared = memory_shared,
        .cpu_cache = mgr->cpu_cache,
    };

    return carrel_hypervisor_build_domain_xml(&spec, error);
}

char *
carrel_manager_session_xml(CarrelManager *mgr, const CarrelSession *session,
                           const CarrelTemplate *tmpl, GError **error)
{
    return session_xml(mgr, session, tmpl, FALSE, error);
}

char *
carrel_manager_warm_xml(CarrelManager *mgr, const CarrelSession *session,
                        const CarrelTemplate *tmpl, GError **error)
{
    return session_xml(mgr, session, tmpl, TRUE, error);
}

void
carrel_manager_session_teardown(CarrelManager *mgr, const CarrelSession *session)
{
    g_autofree char *domain = carrel_session_domain_name(session->id);

    carrel_manager_egress_detach(mgr, session->id, session->egress_ip);
    (void)carrel_hypervisor_destroy(mgr->hv, domain, NULL);
    (void)carrel_hypervisor_undefine(mgr->hv, domain, NULL);
    if (session->dir)
        (void)carrel_util_remove_tree(session->dir, NULL);
}

static void
set_time_limits(const CarrelPolicy *policy, const CarrelSessionRequest *req, CarrelSession *session)
{
    guint ttl_s = 0, idle_s = 0;
    const char *action = NULL;

    carrel_policy_time_limits(policy, req->ttl_s, req->idle_timeout_s, req->expiry_action, &ttl_s,
                              &idle_s, &action);
    session->expires_at = ttl_s ? session->created_at + ttl_s : 0;
    session->idle_timeout_s = idle_s;
    session->expiry_action = g_strdup(action);
}

/*
 * The machine and screen: the request's, else the template's defaults, else carreld's. A
 * template's default above the policy's maximum is lowered to it (nobody asked for that much);
 * a request above it is refused later by carrel_policy_check_resources.
 */
static void
apply_shape(CarrelSession *session, const CarrelSessionRequest *req, const CarrelTemplate *tmpl,
            const CarrelPolicy *policy)
{
    CarrelSessionShape shape = {0};
    guint vcpus, memory_mib;

    carrel_session_resolve_shape(req, tmpl, &shape);
    vcpus = shape.vcpus;
    memory_mib = shape.memory_mib;
    carrel_policy_clamp_resources(policy, &vcpus, &memory_mib);
    session->vcpus = shape.vcpus_explicit ? shape.vcpus : vcpus;
    session->memory_mib = shape.memory_explicit ? shape.memory_mib : memory_mib;
    session->screen_width = shape.screen_width;
    session->screen_height = shape.screen_height;
}

static CarrelSession *
session_from_request(CarrelManager *mgr, const CarrelPrincipal *owner,
                     const CarrelSessionRequest *req, const CarrelTemplate *tmpl,
                     const CarrelPolicy *policy)
{
    g_autoptr(CarrelSession) session = carrel_session_new();

    /* carreld's own sessions (pool members) belong to nobody until a create takes them. */
    if (owner->role != CARREL_ROLE_SYSTEM) {
        session->owner_id = g_strdup(owner->token_id);
        session->owner_label = g_strdup(owner->label);
    }

    session->id = carrel_util_new_id("s-");
    session->name = g_strdup(req->name ? req->name : session->id);
    session->template_name = g_strdup(tmpl->name);
    session->template_version = tmpl->version;
    session->state = CARREL_SESSION_CREATING;
    apply_shape(session, req, tmpl, policy);
    session->dir = g_build_filename(mgr->state_dir, "sessions", session->id, NULL);
    session->overlay_path = g_build_filename(session->dir, "disk.qcow2", NULL);
    session->mac = carrel_net_new_mac();
    session->created_at = session->updated_at = carrel_util_now();
    session->policy = g_strdup(carrel_policy_get_name(policy));
    session->exit_paths = carrel_policy_exit_paths(policy, req->exit_paths);
    set_time_limits(policy, req, session);
    return g_steal_pointer(&session);
}

/*
 * Sets the guest clock after a restore. date(1) through the agent sets the system clock alone;
 * the agent's guest-set-time also rewrites the hardware clock with hwclock, ~2 s under TCG. The
 * agent's way stays as the fallback for guests without a POSIX date.
 */
gboolean
carrel_manager_set_guest_clock(CarrelManager *mgr, const char *domain, GError **error)
{
    gint64 now = g_get_real_time();
    g_autofree char *stamp = g_strdup_printf("@%" G_GINT64_FORMAT ".%06" G_GINT64_FORMAT,
                                             now / G_USEC_PER_SEC, now % G_USEC_PER_SEC);
    const char *argv[] = {"/bin/date", "-u", "-s", stamp, NULL};
    CarrelGuestExec run = {.argv = argv, .timeout_s = 15, .max_output = 4096};
    g_auto(CarrelExecResult) result = {0};

    gboolean ok;

    ok = (carrel_hypervisor_agent_exec(mgr->hv, domain, &run, &result, NULL) &&
          result.exit_code == 0) ||
         carrel_hypervisor_set_time(mgr->hv, domain, error);
    carrel_timings_mark("clock");
    return ok;
}

/*
 * A restored clone's NIC still has the MAC of the saved template (QEMU's virtio-net state
 * carries it) while its domain XML has the session's own: the guest sets its own, which also
 * updates QEMU's device. A guest without carrel-guest keeps the old one; that costs it nothing
 * on an isolated network, so it is a warning, not a failed session.
 */
void
carrel_manager_set_clone_mac(CarrelManager *mgr, const char *domain, const char *mac)
{
    g_autoptr(GError) local = NULL;

    if (mac && !carrel_manager_set_guest_mac(mgr, domain, mac, &local))
        g_warning("%s: the guest keeps the template's MAC: %s", domain, local->message);
    carrel_timings_mark("mac");
}

/*
 * Restores the warm memory as this session's domain. Every clone reads the one save file, side
 * by side (hypervisor-libvirt-restore.c).
 */
static gboolean
restore_warm(CarrelManager *mgr, const CarrelWarmState *warm, const char *xml, GError **error)
{
    carrel_timings_mark("prepare");
    /* Persistent like every session. */
    return carrel_manager_restore(mgr, "warm", warm->memory_path, xml, error) &&
           carrel_hypervisor_define(mgr->hv, xml, error);
}

/* Everything after the row exists: files, domain, boot or restore, agent. */
static gboolean
bring_up(CarrelManager *mgr, CarrelSession *session, const CarrelTemplate *tmpl,
         const CarrelWarmState *warm, GPtrArray *inputs, GError **error)
{
    g_autofree char *domain = carrel_session_domain_name(session->id);
    g_autofree char *xml = NULL;
    const char *backing = warm ? warm->disk_path : tmpl->disk_path;
    const char *backing_format = warm ? "qcow2" : tmpl->format;
    gboolean by_screen = FALSE;

    if (!carrel_util_ensure_dir(session->dir, 0711, error) ||
        !carrel_disk_create_overlay(session->overlay_path, backing, backing_format, error))
        return FALSE;
    /* A cold guest finds its inputs on its disk from the first boot. */
    if (!warm && inputs && inputs->len && !carrel_manager_inject_cold(mgr, session, inputs, error))
        return FALSE;
    xml = carrel_manager_session_xml(mgr, session, tmpl, error);
    if (!xml || !carrel_manager_ensure_network(mgr, error))
        return FALSE;
    if (!warm)
        carrel_timings_mark("prepare");
    if (warm ? !restore_warm(mgr, warm, xml, error)
             : !carrel_hypervisor_define_start(mgr->hv, xml, error))
        return FALSE;
    carrel_timings_mark(warm ? "define" : "boot");
    carrel_crash_point("create.restored");
    if (!carrel_manager_wait_agent(mgr, domain, &by_screen, error))
        return FALSE;
    if (warm && inputs && inputs->len &&
        !carrel_manager_inject_by_agent(mgr, session, inputs, error))
        return FALSE;
    if (warm && inputs && inputs->len)
        carrel_timings_mark("inputs");
    /* The clock stood still since the save, the NIC has the template's MAC and the screen its
     * size: set after the reply, before any verb reaches the guest (core-catchup.c). */
    if (warm && !by_screen) {
        carrel_manager_catchup_restored(mgr, session, TRUE);
        if (!carrel_manager_egress_attach(mgr, session, TRUE, error))
            return FALSE;
        carrel_timings_mark("network");
        return carrel_store_session_set_state(mgr->store, session->id, CARREL_SESSION_RUNNING, NULL,
                                              error);
    }
    /* A booted guest whose agent answers may still be drawing its desktop; a restored one was
     * saved ready, and a guest found ready by its screen is so already. Its screen size comes
     * after (X must be up) and before "running": no screenshot of the image's size is ever
     * taken for the session's. */
    if (!warm && !by_screen &&
        !carrel_manager_wait_ready(mgr, NULL, domain, mgr->agent_timeout_s, error))
        return FALSE;
    if (!warm)
        carrel_timings_mark("ready");
    if (!carrel_manager_apply_screen(mgr, session, by_screen, error))
        return FALSE;
    carrel_timings_mark("screen");
    /* Its network once its agent can set it up: the path is ready before "running". */
    if (!carrel_manager_egress_attach(mgr, session, TRUE, error))
        return FALSE;
    carrel_timings_mark("network");
    return carrel_store_session_set_state(
        mgr->store, session->id, CARREL_SESSION_RUNNING,
        by_screen ? "no guest agent answered: ready once the screen settled" : NULL, error);
}

static CarrelSession *
create_while_busy(CarrelManager *mgr, CarrelSession *session, const CarrelTemplate *tmpl,
                  const CarrelWarmState *warm, GPtrArray *inputs, GError **error)
{
    if (!carrel_store_session_insert(mgr->store, session, error))
        return NULL;
    carrel_crash_point("create.inserted");
    if (!bring_up(mgr, session, tmpl, warm, inputs, error)) {
        /* Nothing half-made may remain: domain, files and row all go. */
        carrel_manager_session_teardown(mgr, session);
        (void)carrel_store_session_delete(mgr->store, session->id, NULL);
        return NULL;
    }
    return carrel_store_session_get(mgr->store, session->id, error);
}

/* The warm state to restore, unless the request wants a cold boot or another machine size, or
 * the policy allows less than the warm machine has (the session then boots at its own size). */
static CarrelWarmState *
pick_warm(CarrelManager *mgr, const CarrelSessionRequest *req, const CarrelTemplate *tmpl,
          const CarrelPolicy *policy)
{
    g_autoptr(CarrelWarmState) warm = NULL;

    if (req->cold)
        return NULL;
    warm = carrel_store_warm_get(mgr->store, tmpl->name, tmpl->version, NULL);
    /* The saved memory fixes the machine's shape: another size, or a machine of an older
     * revision (until the template is warmed again), has to boot; so does one whose RAM is in a
     * file when carreld runs no carrel-qemu to map it (--emulator ""). */
    if (!warm || warm->machine_revision != CARREL_HYPERVISOR_MACHINE_REVISION ||
        (warm->memory_file && !mgr->emulator) || (req->vcpus && req->vcpus != warm->vcpus) ||
        (req->memory_mib && req->memory_mib != warm->memory_mib) ||
        !carrel_policy_check_resources(policy, warm->vcpus, warm->memory_mib, NULL))
        return NULL;
    return g_steal_pointer(&warm);
}

CarrelSession *
carrel_manager_create_into(CarrelManager *mgr, const CarrelPrincipal *who,
                           const CarrelSessionRequest *req, const char *pool, GError **error)
{
    g_autoptr(CarrelTemplate) tmpl = NULL;
    g_autoptr(CarrelSession) session = NULL;
    g_autoptr(CarrelWarmState) warm = NULL;
    const CarrelPolicy *policy;
    CarrelSession *result;
    gint64 started = g_get_monotonic_time();

    policy = carrel_manager_policy_for(mgr, who, req->policy, error);
    tmpl = policy ? carrel_store_template_get(mgr->store, req->template_name, req->template_version,
                                              error)
                  : NULL;
    /* The disk checks come first: a full host disk refuses before anything is made. */
    if (!tmpl || !carrel_policy_check_disk(policy, tmpl->virtual_size_bytes, error) ||
        !carrel_manager_disk_check(mgr, "creating a session", error)) {
        g_prefix_error(error, "creating session: ");
        return NULL;
    }
    /* A ready member of the template's warm pool: taken at once, refilled later. */
    if (!pool && (result = carrel_manager_pool_take(mgr, who, req, tmpl, policy))) {
        carrel_timings_mark("pool");
        carrel_manager_observe_since(mgr, "carrel_create_duration_seconds", "pool", started);
        return result;
    }
    session = session_from_request(mgr, who, req, tmpl, policy);
    session->pool = g_strdup(pool);
    warm = pick_warm(mgr, req, tmpl, policy);
    if (warm) {
        session->vcpus = warm->vcpus;
        session->memory_mib = warm->memory_mib;
        session->from_warm = TRUE;
        session->memory_file = g_strdup(warm->memory_file);
    }
    if (!carrel_policy_check_resources(policy, session->vcpus, session->memory_mib, error) ||
        !carrel_manager_check_inputs(mgr, req->inputs, error) ||
        !carrel_manager_mark_busy(mgr, session->id, "create", error)) {
        g_prefix_error(error, "creating session: ");
        return NULL;
    }
    /* Its address, once everything else about the request is known to be fine. */
    if (!carrel_manager_egress_prepare(mgr, session, policy, error)) {
        carrel_manager_clear_busy(mgr, session->id);
        g_prefix_error(error, "creating session '%s': ", session->name);
        return NULL;
    }
    result = create_while_busy(mgr, session, tmpl, warm, req->inputs, error);
    carrel_manager_clear_busy(mgr, session->id);
    /* A failed create gives its address back. */
    if (!result)
        carrel_manager_egress_detach(mgr, session->id, session->egress_ip);
    if (result)
        carrel_manager_forget_uploads(mgr, req->inputs);
    /* What a caller waited for; a pool's own refills are not creates anyone asked for. */
    if (result && !pool)
        carrel_manager_observe_since(mgr, "carrel_create_duration_seconds", warm ? "warm" : "cold",
                                     started);
    if (result && warm)
        carrel_job_unref(carrel_manager_reclaim_restored(mgr, result));
    if (!result)
        g_prefix_error(error, "creating session '%s': ", session->name);
    return result;
}

/* Files of the host are for admins only: inputs naming one need their own grant. */
static gboolean
check_host_inputs(CarrelDoor *door, const CarrelSessionRequest *req, GError **error)
{
    for (guint i = 0; req->inputs && i < req->inputs->len; i++) {
        const CarrelInput *in = g_ptr_array_index(req->inputs, i);
        if (in->host_path)
            return carrel_door_check(door, CARREL_OP_INPUT_HOST_PATH, error);
    }
    return TRUE;
}

static JsonNode *
create_params(const CarrelSessionRequest *req)
{
    JsonNode *node = carrel_conf_new_object_node();
    JsonObject *obj = json_node_get_object(node);

    json_object_set_string_member(obj, "template", req->template_name);
    if (req->name)
        json_object_set_string_member(obj, "name", req->name);
    if (req->policy)
        json_object_set_string_member(obj, "policy", req->policy);
    return node;
}

CarrelSession *
carrel_manager_session_create(CarrelManager *mgr, const CarrelPrincipal *who,
                              const CarrelSessionRequest *req, GError **error)
{
    g_auto(CarrelDoor) door = {0};
    g_autoptr(GError) local = NULL;
    CarrelSession *made;

    if (!carrel_door_enter(&door, mgr, who, CARREL_OP_SESSION_CREATE, NULL, create_params(req),
                           error) ||
        !check_host_inputs(&door, req, error))
        return NULL;
    if (!carrel_manager_limits_enter(mgr, who, 1, &local))
        return carrel_door_finish(&door, NULL, &local, error);
    made = carrel_manager_create_into(mgr, who, req, NULL, &local);
    carrel_manager_limits_leave(mgr, who);
    if (made) {
        carrel_door_set_session(&door, made->id);
        made->timings = json_node_copy(carrel_door_timings(&door));
    }
    return carrel_door_finish_full(&door, made, (GDestroyNotify)carrel_session_free, &local, error);
}

GPtrArray *
carrel_manager_session_list(CarrelManager *mgr, const CarrelPrincipal *who,
                            gboolean include_destroyed, GError **error)
{
    g_auto(CarrelDoor) door = {0};
    GPtrArray *all;

    if (!carrel_door_enter(&door, mgr, who, CARREL_OP_SESSION_LIST, NULL, NULL, error))
        return NULL;
    all = carrel_store_session_list(mgr->store, include_destroyed, error);
    /* Warm pool members are no one's sessions until a create takes them; an agent sees only
     * its own. */
    for (guint i = all ? all->len : 0; i > 0; i--) {
        CarrelSession *s = g_ptr_array_index(all, i - 1);
        if (s->pool ||
            !carrel_policy_may_see(mgr->policy, who, CARREL_OP_SESSION_LIST, s->owner_id))
            g_ptr_array_remove_index(all, i - 1);
    }
    return all;
}

guint64
carrel_manager_generation(CarrelManager *mgr)
{
    return carrel_store_generation(mgr->store);
}

gboolean
carrel_manager_session_list_scope(CarrelManager *mgr, const CarrelPrincipal *who, char **ret_scope,
                                  guint64 *ret_generation, GError **error)
{
    g_auto(CarrelDoor) door = {0};
    /* First: a list read after it is at least as new as this generation. */
    guint64 generation = carrel_store_generation(mgr->store);
    gboolean any;

    if (!carrel_door_enter(&door, mgr, who, CARREL_OP_SESSION_LIST, NULL, NULL, error))
        return FALSE;
    /* The same test as the list's filter (carrel_policy_may_see), made once for the scope. */
    any = carrel_policy_grant(mgr->policy, who->role, CARREL_OP_SESSION_LIST) == CARREL_GRANT_ANY;
    if (!any && !who->token_id) {
        g_set_error(error, CARREL_ERROR, CARREL_ERROR_INTERNAL,
                    "principal '%s' sees its own sessions but has no token id", who->label);
        return FALSE;
    }
    *ret_scope = any ? g_strdup("*") : g_strconcat("own:", who->token_id, NULL);
    *ret_generation = generation;
    return TRUE;
}

CarrelSession *
carrel_manager_session_get(CarrelManager *mgr, const CarrelPrincipal *who, const char *id_or_name,
                           GError **error)
{
    g_auto(CarrelDoor) door = {0};

    if (!carrel_door_enter(&door, mgr, who, CARREL_OP_SESSION_READ, id_or_name, NULL, error))
        return NULL;
    return g_steal_pointer(&door.session);
}
