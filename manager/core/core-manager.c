#include <string.h>
#include <glib/gstdio.h>

#include "core/core-priv.h"

#define INSTANCE_ID_FILE "instance-id"

static char *
load_instance_id(const char *state_dir, GError **error)
{
    g_autofree char *path = g_build_filename(state_dir, INSTANCE_ID_FILE, NULL);
    g_autofree char *text = NULL;
    g_autofree char *id = NULL;

    if (g_file_get_contents(path, &text, NULL, NULL)) {
        g_strstrip(text);
        if (g_str_has_prefix(text, "i-") && carrel_util_is_valid_name(text))
            return g_steal_pointer(&text);
        g_set_error(error, CARREL_ERROR, CARREL_ERROR_INTERNAL, "'%s' is damaged", path);
        return NULL;
    }
    id = carrel_util_new_id("i-");
    if (!carrel_util_write_file(path, id, -1, 0644, error))
        return NULL;
    return g_steal_pointer(&id);
}

static gboolean
make_layout(const char *state_dir, GError **error)
{
    static const char *const subdirs[] = {"templates", "sessions", "artifacts"};

    /* 0711: libvirt-qemu must traverse to the disks, but may not list sessions. */
    if (!carrel_util_ensure_dir(state_dir, 0711, error))
        return FALSE;
    for (gsize i = 0; i < G_N_ELEMENTS(subdirs); i++) {
        g_autofree char *dir = g_build_filename(state_dir, subdirs[i], NULL);
        if (!carrel_util_ensure_dir(dir, 0711, error))
            return FALSE;
    }
    return TRUE;
}

/*
 * The hypervisor's scratch folder, `run/`, emptied of what a carreld killed during a restore left
 * there (a FIFO's folder): none of this process's restores runs yet, and no other writes here.
 */
static gboolean
set_scratch(CarrelManager *mgr, GError **error)
{
    g_autofree char *run = g_build_filename(mgr->state_dir, "run", NULL);

    if (!carrel_util_ensure_dir(run, 0700, error))
        return FALSE;
    carrel_hypervisor_set_scratch_dir(mgr->hv, run);
    return carrel_hypervisor_clear_scratch(mgr->hv, error);
}

static void
hid_state_free(gpointer data)
{
    CarrelHidState *state = data;

    g_mutex_clear(&state->lock);
    g_free(state);
}

CarrelHidState *
carrel_manager_hid_state(CarrelManager *mgr, const char *session_id)
{
    g_autoptr(GMutexLocker) locker G_GNUC_UNUSED = g_mutex_locker_new(&mgr->lock);
    CarrelHidState *state = g_hash_table_lookup(mgr->hid_states, session_id);

    if (!state) {
        state = g_new0(CarrelHidState, 1);
        g_mutex_init(&state->lock);
        g_hash_table_insert(mgr->hid_states, g_strdup(session_id), state);
    }
    return state;
}

CarrelManager *
carrel_manager_new(const CarrelManagerConfig *config, CarrelHypervisor *hv, GError **error)
{
    g_autoptr(CarrelHypervisor) owned_hv = hv;
    g_autoptr(CarrelManager) mgr = g_new0(CarrelManager, 1);
    g_autofree char *db = NULL;
    g_autoptr(GError) reserve_error = NULL;

    g_return_val_if_fail(config->accel == CARREL_ACCEL_KVM || config->accel == CARREL_ACCEL_TCG,
                         NULL);
    g_mutex_init(&mgr->lock);
    carrel_manager_tokens_init(mgr);
    g_cond_init(&mgr->busy_cond);
    g_mutex_init(&mgr->disk_lock);
    g_mutex_init(&mgr->watch_lock);
    g_cond_init(&mgr->watch_cond);
    mgr->busy = g_hash_table_new_full(g_str_hash, g_str_equal, g_free, g_free);
    mgr->catchup_pending = g_hash_table_new_full(g_str_hash, g_str_equal, g_free, NULL);
    g_mutex_init(&mgr->recorders_lock);
    g_mutex_init(&mgr->reclaim_lock);
    mgr->recorders = g_hash_table_new(g_str_hash, g_str_equal);
    mgr->pending_exit = g_ptr_array_new_with_free_func(g_free);
    mgr->hid_states = g_hash_table_new_full(g_str_hash, g_str_equal, g_free, hid_state_free);
    mgr->creating = g_hash_table_new_full(g_str_hash, g_str_equal, g_free, NULL);
    g_mutex_init(&mgr->console_lock);
    mgr->consoles =
        g_hash_table_new_full(g_str_hash, g_str_equal, g_free, carrel_console_password_free);
    mgr->jobs =
        g_hash_table_new_full(g_str_hash, g_str_equal, NULL, (GDestroyNotify)carrel_job_unref);
    g_mutex_init(&mgr->egress_lock);
    mgr->egress_sources = g_hash_table_new_full(g_str_hash, g_str_equal, g_free, g_free);
    carrel_manager_egress_asks_init(mgr);
    mgr->metrics = carrel_manager_metrics_new();
    mgr->egress_dns = g_strdup(config->egress_dns);
    mgr->egress_ca = g_strdup(config->egress_ca);
    mgr->egress_helper = g_strdup(config->egress_helper);
    mgr->hv = g_steal_pointer(&owned_hv);
    mgr->state_dir = g_canonicalize_filename(config->state_dir, NULL);
    mgr->recipes_dir = g_strdup(config->recipes_dir);
    mgr->cache_dir = g_strdup(config->cache_dir);
    mgr->guest_tool = g_strdup(config->guest_tool);
    mgr->guest_tool_src = g_strdup(config->guest_tool_src);
    mgr->accel = config->accel;
    mgr->reads_allocate = config->reads_allocate;
    mgr->accel_reason = g_strdup(config->accel_reason ? config->accel_reason : "requested");
    mgr->agent_timeout_s = config->agent_timeout_s ? config->agent_timeout_s : 300;
    mgr->screen_grace_s = config->screen_grace_s ? config->screen_grace_s : 45;
    mgr->screen_poll_ms = config->screen_poll_ms ? config->screen_poll_ms : 500;
    mgr->tb_cache_mib = config->tb_cache_mib ? config->tb_cache_mib : 64;
    mgr->upload_ttl_s = config->upload_ttl_s ? config->upload_ttl_s : 3600;
    mgr->shots_max = config->shots_max ? config->shots_max : CARREL_SHOTS_MAX_DEFAULT;
    mgr->shots_max_bytes =
        (guint64)(config->shots_max_mib ? config->shots_max_mib : CARREL_SHOTS_MAX_MIB_DEFAULT) *
        1024 * 1024;
    mgr->policies = carrel_manager_load_policies(config->policy_dir, config->policy_path, error);
    if (!mgr->policies)
        return NULL;
    mgr->policy = carrel_policy_set_get_default(mgr->policies);
    mgr->secret_values = carrel_manager_load_secret_values(mgr->policies, error);
    if (!mgr->secret_values)
        return NULL;
    if (!make_layout(mgr->state_dir, error))
        return NULL;
    if (!set_scratch(mgr, error))
        return NULL;
    mgr->instance_id = load_instance_id(mgr->state_dir, error);
    if (!mgr->instance_id)
        return NULL;
    if (!carrel_manager_emulator_init(mgr, config->emulator, error))
        return NULL;
    mgr->host_key = carrel_manager_load_host_key(mgr->state_dir, error);
    if (!mgr->host_key)
        return NULL;
    carrel_manager_disk_init(mgr, config->disk_reserve_mib ? config->disk_reserve_mib : 64,
                             config->disk_low_mib);
    /* A full disk at start is no reason not to start: the reserve comes once there is room. */
    if (!carrel_manager_disk_reserve(mgr, &reserve_error))
        g_warning("%s", reserve_error->message);
    db = g_build_filename(mgr->state_dir, "state.db", NULL);
    mgr->store = carrel_store_open(db, error);
    if (!mgr->store) {
        g_prefix_error(error, "opening '%s': ", db);
        return NULL;
    }
    carrel_store_set_full_func(mgr->store, (CarrelStoreFullFunc)carrel_manager_disk_release, mgr);
    return g_steal_pointer(&mgr);
}

void
carrel_manager_count_job(CarrelManager *mgr, guint *running, gint delta)
{
    g_autoptr(GMutexLocker) locker G_GNUC_UNUSED = g_mutex_locker_new(&mgr->lock);

    *running = (guint)((gint)*running + delta);
    if (delta < 0)
        g_cond_broadcast(&mgr->busy_cond);
}

void
carrel_manager_free(CarrelManager *mgr)
{
    if (!mgr)
        return;
    carrel_manager_stop_watch(mgr);
    carrel_manager_catchup_drain(mgr);
    carrel_manager_reclaim_drain(mgr);
    /* Before the hypervisor goes: each recorder finishes its segment. */
    carrel_manager_recording_stop_all(mgr);
    g_clear_pointer(&mgr->recorders, g_hash_table_unref);
    g_mutex_clear(&mgr->recorders_lock);
    g_mutex_clear(&mgr->reclaim_lock);
    g_mutex_clear(&mgr->watch_lock);
    g_cond_clear(&mgr->watch_cond);
    g_clear_pointer(&mgr->jobs, g_hash_table_unref);
    g_clear_pointer(&mgr->pending_exit, g_ptr_array_unref);
    g_clear_pointer(&mgr->busy, g_hash_table_unref);
    g_clear_pointer(&mgr->catchup_pending, g_hash_table_unref);
    g_clear_pointer(&mgr->hid_states, g_hash_table_unref);
    g_clear_pointer(&mgr->creating, g_hash_table_unref);
    g_clear_pointer(&mgr->consoles, g_hash_table_unref);
    g_mutex_clear(&mgr->console_lock);
    carrel_manager_egress_stop(mgr);
    if (mgr->egress_ask_timer)
        g_source_remove(mgr->egress_ask_timer);
    g_clear_pointer(&mgr->egress_asks, g_ptr_array_unref);
    g_clear_pointer(&mgr->egress_sources, g_hash_table_unref);
    g_mutex_clear(&mgr->egress_lock);
    g_free(mgr->egress_dns);
    g_free(mgr->egress_ca);
    g_clear_pointer(&mgr->secret_values, g_hash_table_unref);
    g_strfreev(mgr->secret_headers);
    g_free(mgr->egress_helper);
    g_free(mgr->emulator);
    g_free(mgr->cpu_cache);
    g_clear_pointer(&mgr->store, carrel_store_free);
    g_clear_pointer(&mgr->hv, carrel_hypervisor_free);
    g_clear_pointer(&mgr->policies, carrel_policy_set_free);
    g_mutex_clear(&mgr->lock);
    carrel_manager_tokens_clear(mgr);
    g_cond_clear(&mgr->busy_cond);
    g_free(mgr->state_dir);
    g_free(mgr->recipes_dir);
    g_free(mgr->cache_dir);
    g_free(mgr->guest_tool);
    g_free(mgr->guest_tool_src);
    g_free(mgr->instance_id);
    carrel_evidence_key_free(mgr->host_key);
    g_free(mgr->accel_reason);
    carrel_metrics_free(mgr->metrics);
    g_free(mgr->reserve_path);
    g_mutex_clear(&mgr->disk_lock);
    g_free(mgr);
}

const char *
carrel_manager_get_instance_id(CarrelManager *mgr)
{
    return mgr->instance_id;
}

const char *
carrel_manager_get_accel_reason(CarrelManager *mgr)
{
    return mgr->accel_reason;
}

CarrelHypervisor *
carrel_manager_get_hypervisor(CarrelManager *mgr)
{
    return mgr->hv;
}

CarrelAccel
carrel_manager_get_accel(CarrelManager *mgr)
{
    return mgr->accel;
}

/* The watcher's look at a session holds it for one state query: a verb that arrives meanwhile
 * waits for it (this long at most) instead of being refused as busy. */
#define BRIEF_HOLD_WAIT_US (30 * G_USEC_PER_SEC)

static gboolean
held_briefly(const char *running, const char *op)
{
    return (g_strcmp0(running, "watch") == 0 && g_strcmp0(op, "watch") != 0) ||
           carrel_manager_is_catchup_op(running);
}

gboolean
carrel_manager_mark_busy(CarrelManager *mgr, const char *key, const char *op, GError **error)
{
    g_autoptr(GMutexLocker) locker G_GNUC_UNUSED = g_mutex_locker_new(&mgr->lock);
    const char *running = g_hash_table_lookup(mgr->busy, key);
    gint64 end = g_get_monotonic_time() + BRIEF_HOLD_WAIT_US;

    while (running && held_briefly(running, op) &&
           g_cond_wait_until(&mgr->busy_cond, &mgr->lock, end))
        running = g_hash_table_lookup(mgr->busy, key);
    if (mgr->draining) {
        g_set_error(error, CARREL_ERROR, CARREL_ERROR_BUSY,
                    "carreld is stopping: try again once it is back");
        return FALSE;
    }
    if (running) {
        g_set_error(error, CARREL_ERROR, CARREL_ERROR_BUSY, "'%s' is busy: %s is in progress", key,
                    running);
        return FALSE;
    }
    g_hash_table_insert(mgr->busy, g_strdup(key), g_strdup(op));
    return TRUE;
}

void
carrel_manager_clear_busy(CarrelManager *mgr, const char *key)
{
    guint later;

    g_mutex_lock(&mgr->lock);
    /* What the verb left to catch up on keeps the mark, as "catch-up", until it is done. */
    later = carrel_manager_catchup_take(mgr, key);
    if (!later)
        g_hash_table_remove(mgr->busy, key);
    g_cond_broadcast(&mgr->busy_cond);
    g_mutex_unlock(&mgr->lock);
    if (later)
        carrel_manager_catchup_start(mgr, key, later);
}

guint
carrel_manager_drain(CarrelManager *mgr, guint timeout_s)
{
    g_autoptr(GMutexLocker) locker G_GNUC_UNUSED = g_mutex_locker_new(&mgr->lock);
    gint64 end = g_get_monotonic_time() + (gint64)timeout_s * G_USEC_PER_SEC;

    /* New verbs are refused from now on; those running finish (a snapshot half done would
     * leave its intent for the next carreld to settle, which costs the session a restore). */
    mgr->draining = TRUE;
    while (g_hash_table_size(mgr->busy) > 0)
        if (!g_cond_wait_until(&mgr->busy_cond, &mgr->lock, end))
            break;
    return g_hash_table_size(mgr->busy);
}
