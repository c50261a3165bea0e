#include <glib/gstdio.h>

#include "core/core-priv.h"
#include "disk/disk.h"
#include "net/net.h"

/*
 * Warm start: a template version is booted once, waited for, and its memory saved together
 * with the disk layer it ran on (frozen afterwards). A session from a warm template gets its
 * own overlay on that layer and restores the memory instead of booting.
 */

#define WARM_READY_TIMEOUT_S 120
/* How long a ready guest may take to go quiet before its memory is saved anyway. */
#define WARM_QUIET_MAX_S 30

typedef struct {
    CarrelManager *mgr;
    char *name;
    guint version;
} WarmData;

static void
warm_data_free(gpointer data)
{
    WarmData *wd = data;

    g_free(wd->name);
    g_free(wd);
}

/* The warm domain looks like a session to libvirt, so a crash mid-warm leaves an orphan that
 * reconcile removes. */
static CarrelSession *
warm_session(CarrelManager *mgr, const CarrelTemplate *tmpl, const char *dir)
{
    g_autoptr(CarrelSession) s = carrel_session_new();

    s->id = carrel_util_new_id("s-");
    s->name = g_strdup(s->id);
    s->template_name = g_strdup(tmpl->name);
    s->template_version = tmpl->version;
    /* The shape of a create that names no size (the template's defaults), so that it restores. */
    s->vcpus = tmpl->default_vcpus ? tmpl->default_vcpus : CARREL_DEFAULT_VCPUS;
    s->memory_mib = tmpl->default_memory_mib ? tmpl->default_memory_mib : CARREL_DEFAULT_MEMORY_MIB;
    s->dir = g_strdup(dir);
    s->overlay_path = g_build_filename(dir, "disk.qcow2", NULL);
    /* Clones restore the device set saved here: the NIC must be part of it. */
    s->mac = carrel_net_new_mac();
    return g_steal_pointer(&s);
}

/* Every clone restores what the saved guest was doing: not the work left from its boot. */
static void
wait_quiet(CarrelManager *mgr, CarrelJob *job, const char *domain)
{
    g_autofree char *line = NULL;
    guint waited = 0;

    carrel_job_progress(job, "waiting for the guest to go quiet");
    if (carrel_manager_wait_quiet(mgr, domain, WARM_QUIET_MAX_S, &waited))
        line = g_strdup_printf("the guest went quiet after %u ms", waited);
    else
        line = g_strdup_printf("the guest did not go quiet within %u s (or its CPU time is not "
                               "known): saving it as it is",
                               WARM_QUIET_MAX_S);
    carrel_job_progress(job, line);
}

static gboolean
boot_and_save(CarrelManager *mgr, CarrelJob *job, const CarrelTemplate *tmpl, CarrelSession *ws,
              const char *memory_path, GError **error)
{
    g_autofree char *domain = carrel_session_domain_name(ws->id);
    g_autofree char *xml = NULL;
    gboolean ok;

    if (!carrel_disk_create_overlay(ws->overlay_path, tmpl->disk_path, tmpl->format, error))
        return FALSE;
    xml = carrel_manager_warm_xml(mgr, ws, tmpl, error);
    if (!xml || !carrel_manager_ensure_network(mgr, error))
        return FALSE;
    carrel_job_progress(job, "booting the template");
    if (!carrel_hypervisor_define_start(mgr->hv, xml, error))
        return FALSE;
    ok = carrel_manager_wait_agent(mgr, domain, NULL, error) &&
         carrel_manager_wait_ready(mgr, job, domain, WARM_READY_TIMEOUT_S, error);
    if (ok)
        wait_quiet(mgr, job, domain);
    if (ok) {
        carrel_job_progress(job, "saving the memory state");
        ok = carrel_hypervisor_save(mgr->hv, domain, memory_path, error);
    }
    (void)carrel_hypervisor_destroy(mgr->hv, domain, NULL);
    (void)carrel_hypervisor_undefine(mgr->hv, domain, NULL);
    return ok;
}

/*
 * One folder per machine revision: sessions of an older warm state stand on its layer. A
 * folder already there (a warm state found broken) may hold a layer that sessions stand on:
 * never replaced, the new state goes beside it.
 */
static char *
warm_folder(const CarrelTemplate *tmpl)
{
    g_autofree char *name = g_strdup_printf("warm-r%d", CARREL_HYPERVISOR_MACHINE_REVISION);
    g_autofree char *path = g_build_filename(tmpl->dir, name, NULL);
    g_autofree char *prefix = g_strconcat(name, "-", NULL);
    g_autofree char *other = NULL;

    if (!g_file_test(path, G_FILE_TEST_EXISTS))
        return g_steal_pointer(&path);
    other = carrel_util_new_id(prefix);
    return g_build_filename(tmpl->dir, other, NULL);
}

/* A warm state whose memory cannot be restored (damaged, its header left half rewritten with
 * no journal to repair it, or its RAM file gone or cut short) is no warm state. */
static gboolean
warm_broken(const CarrelWarmState *warm, GError **error)
{
    g_autofree char *xml = NULL;
    GStatBuf st;

    if (warm->memory_file && (g_stat(warm->memory_file, &st) != 0 ||
                              (guint64)st.st_size != (guint64)warm->memory_mib * 1024 * 1024)) {
        g_set_error(error, CARREL_ERROR, CARREL_ERROR_FAILED,
                    "its RAM file '%s' is missing or not of the guest's size", warm->memory_file);
        return TRUE;
    }
    return !carrel_hypervisor_saveimage_recover(warm->memory_path, error) ||
           !(xml = carrel_hypervisor_saveimage_get_xml(warm->memory_path, error));
}

/*
 * Where carrel-qemu runs the sessions, the guest's RAM goes into dir/memory.ram: the save then
 * holds the device state only, and each clone maps the file privately instead of loading the
 * RAM (carrel-qemu.c). NULL (RAM in the save image, as under libvirt's QEMU) when that cannot be.
 */
static char *
memory_file(CarrelManager *mgr, CarrelJob *job, const char *dir)
{
    g_autofree char *path = g_build_filename(dir, "memory.ram", NULL);
    g_autofree char *line = NULL;
    g_autoptr(GError) local = NULL;

    if (!mgr->emulator)
        return NULL;
    if (!carrel_hypervisor_make_qemu_file(mgr->hv, path, &local)) {
        line = g_strdup_printf("guest RAM goes into the save image: %s", local->message);
        carrel_job_progress(job, line);
        return NULL;
    }
    return g_steal_pointer(&path);
}

static CarrelWarmState *
make_warm(CarrelManager *mgr, CarrelJob *job, const CarrelTemplate *tmpl, GError **error)
{
    g_autofree char *tmp = g_build_filename(tmpl->dir, "warm.tmp", NULL);
    g_autofree char *final = warm_folder(tmpl);
    g_autofree char *memory_tmp = g_build_filename(tmp, "memory.save", NULL);
    g_autoptr(CarrelSession) ws = warm_session(mgr, tmpl, tmp);
    g_autoptr(CarrelWarmState) warm = carrel_warm_state_new();
    GStatBuf st;
    gboolean ok;

    if (!carrel_util_remove_tree(tmp, error) || !carrel_util_ensure_dir(tmp, 0711, error))
        return NULL;
    ws->memory_file = memory_file(mgr, job, tmp);
    ok = boot_and_save(mgr, job, tmpl, ws, memory_tmp, error);
    if (ok)
        carrel_crash_point("warm.saved");
    ok = ok && carrel_disk_freeze(ws->overlay_path, error) && g_stat(memory_tmp, &st) == 0;
    if (ok)
        carrel_crash_point("warm.frozen");
    if (!ok || g_rename(tmp, final) < 0) {
        if (error && !*error)
            g_set_error(error, CARREL_ERROR, CARREL_ERROR_INTERNAL, "storing the warm state");
        (void)carrel_util_remove_tree(tmp, NULL);
        return NULL;
    }
    warm->template_name = g_strdup(tmpl->name);
    warm->template_version = tmpl->version;
    warm->memory_path = g_build_filename(final, "memory.save", NULL);
    warm->disk_path = g_build_filename(final, "disk.qcow2", NULL);
    warm->vcpus = ws->vcpus;
    warm->memory_mib = ws->memory_mib;
    warm->memory_bytes = (guint64)st.st_size;
    warm->machine_revision = CARREL_HYPERVISOR_MACHINE_REVISION;
    warm->created_at = carrel_util_now();
    if (ws->memory_file)
        warm->memory_file = g_build_filename(final, "memory.ram", NULL);
    return g_steal_pointer(&warm);
}

static gboolean
warm_while_busy(CarrelJob *job, gpointer data, JsonNode **ret_result, GError **error)
{
    WarmData *wd = data;
    g_autoptr(CarrelTemplate) tmpl = NULL;
    g_autoptr(CarrelWarmState) warm = NULL;
    g_autoptr(GError) broken = NULL;

    tmpl = carrel_store_template_get(wd->mgr->store, wd->name, wd->version, error);
    if (!tmpl)
        return FALSE;
    warm = carrel_store_warm_get(wd->mgr->store, tmpl->name, tmpl->version, NULL);
    if (warm && warm->machine_revision != CARREL_HYPERVISOR_MACHINE_REVISION) {
        carrel_job_progress(job, "the warm state is of an older machine: warming again");
        g_clear_pointer(&warm, carrel_warm_state_free);
    }
    if (warm && warm_broken(warm, &broken)) {
        g_autofree char *line =
            g_strdup_printf("the warm state is broken (%s): warming again", broken->message);
        carrel_job_progress(job, line);
        g_clear_pointer(&warm, carrel_warm_state_free);
    }
    if (warm) {
        /* Sessions may stand on the existing warm layer: it is never replaced under them. */
        carrel_job_progress(job, "this template version is already warm");
    } else {
        warm = make_warm(wd->mgr, job, tmpl, error);
        if (!warm || !carrel_store_warm_put(wd->mgr->store, warm, error))
            return FALSE;
    }
    carrel_job_progress(job, "done");
    *ret_result = carrel_template_to_json(tmpl, 0);
    json_object_set_member(json_node_get_object(*ret_result), "warm",
                           carrel_warm_state_to_json(warm));
    return TRUE;
}

static gboolean
warm_job(CarrelJob *job, gpointer data, JsonNode **ret_result, GError **error)
{
    WarmData *wd = data;
    g_autofree char *key = g_strdup_printf("warm:%s", wd->name);
    gboolean ok = warm_while_busy(job, data, ret_result, error);

    if (!ok)
        g_prefix_error(error, "warming template '%s': ", wd->name);
    carrel_manager_clear_busy(wd->mgr, key);
    return ok;
}

static CarrelJob *
start_warm(CarrelManager *mgr, const char *name, guint version, GError **error)
{
    g_autoptr(CarrelTemplate) tmpl = carrel_store_template_get(mgr->store, name, version, error);
    g_autofree char *key = g_strdup_printf("warm:%s", name);
    CarrelJob *job;
    WarmData *wd;

    if (!tmpl || !carrel_manager_disk_check(mgr, "warming a template", error) ||
        !carrel_manager_mark_busy(mgr, key, "warming", error))
        return NULL;
    job = carrel_job_new("template-warm", name);
    wd = g_new0(WarmData, 1);
    wd->mgr = mgr;
    wd->name = g_strdup(tmpl->name);
    wd->version = tmpl->version;
    carrel_manager_add_job(mgr, job);
    carrel_job_run(job, warm_job, wd, warm_data_free);
    return job;
}

CarrelJob *
carrel_manager_template_warm(CarrelManager *mgr, const CarrelPrincipal *who, const char *name,
                             guint version, GError **error)
{
    g_auto(CarrelDoor) door = {0};
    g_autoptr(GError) local = NULL;
    JsonNode *params = carrel_conf_new_object_node();

    json_object_set_string_member(json_node_get_object(params), "template", name ? name : "");
    json_object_set_int_member(json_node_get_object(params), "version", version);
    if (!carrel_door_enter(&door, mgr, who, CARREL_OP_TEMPLATE_WARM, NULL, params, error))
        return NULL;
    return carrel_door_finish(&door, start_warm(mgr, name, version, &local), &local, error);
}

/*
 * Host RAM of a restored clone under libvirt's own QEMU (--emulator ""). QEMU asks for
 * transparent huge pages on guest RAM, so a restore's first write into each 2 MiB region
 * allocates and zeroes all of it: a clone holds all of its guest's RAM (measured: 1 GiB tiny at
 * 1.23-1.30 GB against a cold boot's 0.43 GB). The balloon gets it back: inflated, the guest
 * hands its free pages to the host, which discards them; deflated, they return to the guest
 * untouched. Measured on tiny: 1.23 GB -> 0.45 GB, ~8 s inflating and ~2 s deflating under TCG.
 * It runs as a job after create returns, so a warm create stays fast; meanwhile the guest has
 * less memory. carrel-qemu (THP off) allocates only the pages a restore writes: its clones held
 * 281-282 MB without the job and 283 MB with it (512 MiB tiny, 45 s after), so none runs there,
 * unless the host allocates on a read of untouched memory (no shared zero page): QEMU reads every
 * page it loads, so a carrel-qemu clone held all of it there too (718 MB, 512 MiB tiny).
 * The balloon goes down to a quarter of RAM, at least RECLAIM_FLOOR_MIB: an idle tiny holds
 * ~135 MB (65 used, 70 of cache), which 192 MiB keeps without evicting its cache (RSS after:
 * 380 MB at 256 MiB, 327 MB at 192; exec, screenshot and a new xterm as fast after).
 */
#define RECLAIM_FLOOR_MIB 192
#define RECLAIM_TIMEOUT_S 60

typedef struct {
    CarrelManager *mgr;
    char *domain;
    guint memory_mib;
} ReclaimData;

static void
reclaim_data_free(gpointer data)
{
    ReclaimData *rd = data;

    g_free(rd->domain);
    g_free(rd);
}

static gboolean
reclaim_run(CarrelJob *job, gpointer data, JsonNode **ret_result, GError **error)
{
    ReclaimData *rd = data;
    guint target = MAX(RECLAIM_FLOOR_MIB, rd->memory_mib / 4), low = 0, back = 0;
    g_autoptr(JsonBuilder) b = json_builder_new();
    g_autoptr(GMutexLocker) locker = NULL;

    /* One reclaim at a time, daemon-wide. Clones made together (a fork, a pool, a fleet) each
     * inflating at once starved one another's guests under TCG: a balloon that stops moving
     * for a while is taken as done, so clones were left at 0.8-1.3 GB instead of ~0.5. */
    carrel_job_progress(job, "waiting for other clones' reclaims");
    locker = g_mutex_locker_new(&rd->mgr->reclaim_lock);
    carrel_job_progress(job, "inflating the balloon");
    if (!carrel_hypervisor_set_balloon(rd->mgr->hv, rd->domain, target, RECLAIM_TIMEOUT_S, &low,
                                       error))
        return FALSE;
    carrel_job_progress(job, "deflating the balloon");
    /* Always try to give the guest all its memory back, whatever the inflating did. */
    if (!carrel_hypervisor_set_balloon(rd->mgr->hv, rd->domain, rd->memory_mib, RECLAIM_TIMEOUT_S,
                                       &back, error))
        return FALSE;
    json_builder_begin_object(b);
    json_builder_set_member_name(b, "lowest_mib");
    json_builder_add_int_value(b, low);
    json_builder_set_member_name(b, "memory_mib");
    json_builder_add_int_value(b, back);
    json_builder_end_object(b);
    *ret_result = json_builder_get_root(b);
    return TRUE;
}

/* The job's end, counted: carrel_manager_reclaim_drain waits for it. */
static gboolean
reclaim_job(CarrelJob *job, gpointer data, JsonNode **ret_result, GError **error)
{
    ReclaimData *rd = data;
    gboolean ok = reclaim_run(job, data, ret_result, error);

    carrel_manager_count_job(rd->mgr, &rd->mgr->reclaims_running, -1);
    return ok;
}

void
carrel_manager_reclaim_drain(CarrelManager *mgr)
{
    g_autoptr(GMutexLocker) locker G_GNUC_UNUSED = g_mutex_locker_new(&mgr->lock);
    /* Each of its two balloon steps gives up after RECLAIM_TIMEOUT_S. */
    gint64 end = g_get_monotonic_time() + (2 * RECLAIM_TIMEOUT_S + 10) * G_USEC_PER_SEC;

    while (mgr->reclaims_running > 0)
        if (!g_cond_wait_until(&mgr->busy_cond, &mgr->lock, end))
            break;
}

CarrelJob *
carrel_manager_reclaim_restored(CarrelManager *mgr, const CarrelSession *session)
{
    CarrelJob *job;
    ReclaimData *rd;

    /* A clone that maps its RAM file loaded no RAM to give back, and a balloon would punch
     * holes into that file (QEMU 7.2 discards file memory so, private mapping or not). */
    if ((mgr->emulator && !mgr->reads_allocate) || session->memory_file)
        return NULL;
    job = carrel_job_new("memory-reclaim", session->id);
    rd = g_new0(ReclaimData, 1);
    rd->mgr = mgr;
    rd->domain = carrel_session_domain_name(session->id);
    rd->memory_mib = session->memory_mib;
    carrel_manager_add_job(mgr, job);
    carrel_manager_count_job(mgr, &mgr->reclaims_running, 1);
    carrel_job_run(job, reclaim_job, rd, reclaim_data_free);
    return job;
}

CarrelWarmState *
carrel_manager_template_warm_state(CarrelManager *mgr, const char *name, guint version)
{
    return carrel_store_warm_get(mgr->store, name, version, NULL);
}
