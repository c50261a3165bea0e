/*
 * The libvirt backend: domains and their lifecycle (define, start, shutdown, destroy, undefine,
 * pause, balloon), listing by carrel's metadata, and memory save and restore.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#define CARREL_HYPERVISOR_PRIV_H_ALLOW
#include "hypervisor/hypervisor-libvirt-priv.h"

#define POLL_INTERVAL_US (100 * 1000)

/* Everything a session's domain may own besides its XML; NVRAM exists for UEFI only. */
#define UNDEFINE_FLAGS                                                                             \
    (VIR_DOMAIN_UNDEFINE_NVRAM | VIR_DOMAIN_UNDEFINE_MANAGED_SAVE |                                \
     VIR_DOMAIN_UNDEFINE_SNAPSHOTS_METADATA | VIR_DOMAIN_UNDEFINE_CHECKPOINTS_METADATA)
/* The test driver refuses the NVRAM and checkpoint flags ("unsupported flags"). */
#define UNDEFINE_FLAGS_TEST                                                                        \
    (VIR_DOMAIN_UNDEFINE_MANAGED_SAVE | VIR_DOMAIN_UNDEFINE_SNAPSHOTS_METADATA)

static unsigned int
undefine_flags(const CarrelLibvirtBackend *be)
{
    return be->is_test ? UNDEFINE_FLAGS_TEST : UNDEFINE_FLAGS;
}

static CarrelDomainState
map_state(int state, int reason)
{
    switch ((virDomainState)state) {
    case VIR_DOMAIN_RUNNING:
    case VIR_DOMAIN_BLOCKED:
    case VIR_DOMAIN_SHUTDOWN: /* shutting down: QEMU still runs */
        return CARREL_DOMAIN_RUNNING;
    case VIR_DOMAIN_PAUSED:
        return CARREL_DOMAIN_PAUSED;
    case VIR_DOMAIN_SHUTOFF:
        /* QEMU died or the guest panicked (on_crash is destroy): core must see a crash. */
        return reason == VIR_DOMAIN_SHUTOFF_CRASHED ? CARREL_DOMAIN_CRASHED : CARREL_DOMAIN_SHUTOFF;
    case VIR_DOMAIN_CRASHED:
        return CARREL_DOMAIN_CRASHED;
    case VIR_DOMAIN_NOSTATE:
    case VIR_DOMAIN_PMSUSPENDED:
    default:
        return CARREL_DOMAIN_OTHER;
    }
}

static gboolean
query_state(virDomainPtr dom, CarrelDomainState *ret_state, GError **error)
{
    int state = VIR_DOMAIN_NOSTATE;
    int reason = 0;

    if (virDomainGetState(dom, &state, &reason, 0) < 0) {
        carrel_hypervisor_libvirt_set_error(error, "reading state");
        return FALSE;
    }
    *ret_state = map_state(state, reason);
    return TRUE;
}

gboolean
carrel_hypervisor_libvirt_define_start(CarrelHypervisor *hv, const char *xml, GError **error)
{
    CarrelLibvirtBackend *be = hv->backend_data;
    g_autoptr(virDomain) dom = NULL;
    g_autofree char *name = NULL;

    /* Never redefine: the undefine below must only ever remove a domain made right here. */
    if (carrel_hypervisor_scan_xml(xml, &name, NULL, NULL, NULL) && name) {
        g_autoptr(virDomain) old = virDomainLookupByName(carrel_hypervisor_libvirt_conn(be), name);
        if (old) {
            g_set_error(error, CARREL_ERROR, CARREL_ERROR_EXISTS, "domain already exists");
            return FALSE;
        }
        virResetLastError();
    }
    dom = virDomainDefineXMLFlags(carrel_hypervisor_libvirt_conn(be), xml,
                                  VIR_DOMAIN_DEFINE_VALIDATE);
    if (!dom) {
        carrel_hypervisor_libvirt_set_error(error, "defining");
        return FALSE;
    }
    if (virDomainCreate(dom) < 0) {
        carrel_hypervisor_libvirt_set_error(error, "starting");
        /* Leave nothing half made: a defined domain that never ran would be an orphan. */
        if (virDomainUndefineFlags(dom, undefine_flags(be)) < 0)
            virResetLastError();
        return FALSE;
    }
    return TRUE;
}

gboolean
carrel_hypervisor_libvirt_start(CarrelHypervisor *hv, const char *name, GError **error)
{
    g_autoptr(virDomain) dom = carrel_hypervisor_libvirt_lookup(hv->backend_data, name, error);

    if (!dom)
        return FALSE;
    if (virDomainCreate(dom) < 0) {
        carrel_hypervisor_libvirt_set_error(error, "starting");
        return FALSE;
    }
    return TRUE;
}

static gboolean
request_shutdown(CarrelLibvirtBackend *be, virDomainPtr dom, GError **error)
{
    if (be->is_test) {
        if (virDomainShutdown(dom) == 0)
            return TRUE;
        carrel_hypervisor_libvirt_set_error(error, "shutting down");
        return FALSE;
    }
    /* The agent works without an ACPI handler (the tiny template has none); ACPI without agent. */
    if (virDomainShutdownFlags(dom, VIR_DOMAIN_SHUTDOWN_GUEST_AGENT) == 0)
        return TRUE;
    virResetLastError();
    if (virDomainShutdownFlags(dom, VIR_DOMAIN_SHUTDOWN_ACPI_POWER_BTN) == 0)
        return TRUE;
    carrel_hypervisor_libvirt_set_error(error, "shutting down");
    return FALSE;
}

static gboolean
wait_shutoff(virDomainPtr dom, guint timeout_s, GError **error)
{
    gint64 deadline = g_get_monotonic_time() + (gint64)timeout_s * G_USEC_PER_SEC;
    CarrelDomainState state;

    for (;;) {
        if (!query_state(dom, &state, error))
            return FALSE;
        if (state == CARREL_DOMAIN_SHUTOFF || state == CARREL_DOMAIN_CRASHED)
            return TRUE;
        if (g_get_monotonic_time() >= deadline)
            break;
        g_usleep(POLL_INTERVAL_US);
    }
    g_set_error(error, CARREL_ERROR, CARREL_ERROR_TIMEOUT, "guest did not power off within %u s",
                timeout_s);
    return FALSE;
}

gboolean
carrel_hypervisor_libvirt_shutdown(CarrelHypervisor *hv, const char *name, guint timeout_s,
                                   GError **error)
{
    CarrelLibvirtBackend *be = hv->backend_data;
    g_autoptr(virDomain) dom = carrel_hypervisor_libvirt_lookup(be, name, error);
    CarrelDomainState state;

    if (!dom || !query_state(dom, &state, error))
        return FALSE;
    if (state == CARREL_DOMAIN_SHUTOFF || state == CARREL_DOMAIN_CRASHED)
        return TRUE;
    if (!request_shutdown(be, dom, error))
        return FALSE;
    return wait_shutoff(dom, timeout_s, error);
}

gboolean
carrel_hypervisor_libvirt_destroy(CarrelHypervisor *hv, const char *name, GError **error)
{
    g_autoptr(virDomain) dom = carrel_hypervisor_libvirt_lookup(hv->backend_data, name, error);
    CarrelDomainState state;

    if (!dom || !query_state(dom, &state, error))
        return FALSE;
    if (state == CARREL_DOMAIN_SHUTOFF || state == CARREL_DOMAIN_CRASHED)
        return TRUE;
    if (virDomainDestroy(dom) == 0)
        return TRUE;
    /* It may have stopped by itself in the meantime: the result is what was asked. */
    if (virGetLastErrorCode() == VIR_ERR_OPERATION_INVALID && virDomainIsActive(dom) == 0) {
        virResetLastError();
        return TRUE;
    }
    carrel_hypervisor_libvirt_set_error(error, "destroying");
    return FALSE;
}

gboolean
carrel_hypervisor_libvirt_undefine(CarrelHypervisor *hv, const char *name, GError **error)
{
    g_autoptr(GError) local = NULL;
    g_autoptr(virDomain) dom = carrel_hypervisor_libvirt_lookup(hv->backend_data, name, &local);

    carrel_hypervisor_libvirt_agent_forget(hv->backend_data, name);
    if (!dom) {
        if (g_error_matches(local, CARREL_ERROR, CARREL_ERROR_NOT_FOUND))
            return TRUE;
        g_propagate_error(error, g_steal_pointer(&local));
        return FALSE;
    }
    /* A transient domain (undefined while running) has no definition left to remove. */
    if (virDomainIsPersistent(dom) == 0)
        return TRUE;
    if (virDomainUndefineFlags(dom, undefine_flags(hv->backend_data)) == 0)
        return TRUE;
    if (virGetLastErrorCode() == VIR_ERR_NO_DOMAIN) {
        virResetLastError();
        return TRUE;
    }
    carrel_hypervisor_libvirt_set_error(error, "undefining");
    return FALSE;
}

gboolean
carrel_hypervisor_libvirt_get_state(CarrelHypervisor *hv, const char *name,
                                    CarrelDomainState *ret_state, GError **error)
{
    g_autoptr(virDomain) dom = carrel_hypervisor_libvirt_lookup(hv->backend_data, name, error);

    return dom && query_state(dom, ret_state, error);
}

/* libvirt still works on the domain for a caller that may be gone: a save or restore runs on
 * in libvirtd when carreld dies, and what the domain becomes is known only once it ends. */
static gboolean
in_job(virDomainPtr dom)
{
    virDomainJobInfo job = {0};
    int state = VIR_DOMAIN_NOSTATE, reason = 0;

    if (virDomainGetJobInfo(dom, &job) == 0 && job.type != VIR_DOMAIN_JOB_NONE)
        return TRUE;
    virResetLastError();
    if (virDomainGetState(dom, &state, &reason, 0) < 0) {
        virResetLastError();
        return FALSE;
    }
    return state == VIR_DOMAIN_PAUSED &&
           (reason == VIR_DOMAIN_PAUSED_SAVE || reason == VIR_DOMAIN_PAUSED_MIGRATION ||
            reason == VIR_DOMAIN_PAUSED_STARTING_UP || reason == VIR_DOMAIN_PAUSED_SNAPSHOT);
}

/* Whether one of the domain's disks reports ENOSPC (what QEMU paused it for). */
static gboolean
disk_full(virDomainPtr dom, gboolean *ret_full, GError **error)
{
    virDomainDiskError errs[16];
    int n = virDomainGetDiskErrors(dom, errs, G_N_ELEMENTS(errs), 0);
    gboolean full = FALSE;

    if (n < 0) {
        carrel_hypervisor_libvirt_set_error(error, "reading disk errors");
        return FALSE;
    }
    for (int i = 0; i < n; i++) {
        full = full || errs[i].error == VIR_DOMAIN_DISK_ERROR_NO_SPACE;
        free(errs[i].disk);
    }
    *ret_full = full;
    return TRUE;
}

gboolean
carrel_hypervisor_libvirt_get_pause_reason(CarrelHypervisor *hv, const char *name,
                                           CarrelPauseReason *ret_reason, GError **error)
{
    g_autoptr(virDomain) dom = carrel_hypervisor_libvirt_lookup(hv->backend_data, name, error);
    int state = VIR_DOMAIN_NOSTATE;
    int reason = 0;
    gboolean full = FALSE;

    if (!dom)
        return FALSE;
    if (virDomainGetState(dom, &state, &reason, 0) < 0) {
        carrel_hypervisor_libvirt_set_error(error, "reading state");
        return FALSE;
    }
    if (state != VIR_DOMAIN_PAUSED) {
        *ret_reason = CARREL_PAUSE_NONE;
        return TRUE;
    }
    if (reason != VIR_DOMAIN_PAUSED_IOERROR) {
        *ret_reason = CARREL_PAUSE_USER;
        return TRUE;
    }
    if (!disk_full(dom, &full, error))
        return FALSE;
    *ret_reason = full ? CARREL_PAUSE_NO_SPACE : CARREL_PAUSE_IO_ERROR;
    return TRUE;
}

/* The domain called name while QEMU runs it, for a figure only QEMU knows (what: that figure,
 * named in the test driver's UNSUPPORTED, as it has no QEMU). */
static virDomainPtr
running_domain(CarrelLibvirtBackend *be, const char *name, const char *what, GError **error)
{
    g_autoptr(virDomain) dom = carrel_hypervisor_libvirt_lookup(be, name, error);

    if (!dom)
        return NULL;
    if (be->is_test) {
        g_set_error(error, CARREL_ERROR, CARREL_ERROR_UNSUPPORTED, "the test driver has no %s",
                    what);
        return NULL;
    }
    if (virDomainIsActive(dom) != 1) {
        virResetLastError();
        g_set_error(error, CARREL_ERROR, CARREL_ERROR_WRONG_STATE, "domain is not running");
        return NULL;
    }
    return g_steal_pointer(&dom);
}

gboolean
carrel_hypervisor_libvirt_cpu_time(CarrelHypervisor *hv, const char *name, guint64 *ret_ns,
                                   GError **error)
{
    /* The test driver's CPU time is the wall clock's: a guest forever busy. */
    g_autoptr(virDomain) dom = running_domain(hv->backend_data, name, "CPU time", error);
    virDomainInfo info;

    if (!dom)
        return FALSE;
    if (virDomainGetInfo(dom, &info) < 0) {
        carrel_hypervisor_libvirt_set_error(error, "reading CPU time");
        return FALSE;
    }
    *ret_ns = info.cpuTime;
    return TRUE;
}

gboolean
carrel_hypervisor_libvirt_disk_allocation(CarrelHypervisor *hv, const char *name,
                                          guint64 *ret_bytes, GError **error)
{
    g_autoptr(virDomain) dom = running_domain(hv->backend_data, name, "disk allocation", error);
    virDomainBlockInfo info;

    if (!dom)
        return FALSE;
    if (virDomainGetBlockInfo(dom, "vda", &info, 0) < 0) {
        carrel_hypervisor_libvirt_set_error(error, "reading disk allocation");
        return FALSE;
    }
    *ret_bytes = info.allocation;
    return TRUE;
}

/* carrel's view of one domain, or NULL when it carries no valid carrel metadata. */
static CarrelDomainInfo *
info_of_domain(virDomainPtr dom)
{
    g_autofree char *session_id = NULL;
    g_autofree char *instance_id = NULL;
    CarrelDomainState state = CARREL_DOMAIN_OTHER;
    CarrelDomainInfo *info;
    char *meta, *xml;
    gboolean ok;

    /* CURRENT: the config of a defined domain, the live XML of a transient leftover. */
    meta = virDomainGetMetadata(dom, VIR_DOMAIN_METADATA_ELEMENT, CARREL_XMLNS_SESSION,
                                VIR_DOMAIN_AFFECT_CURRENT);
    if (!meta) {
        virResetLastError();
        return NULL;
    }
    ok = carrel_hypervisor_scan_xml(meta, NULL, &session_id, &instance_id, NULL);
    free(meta);
    if (!ok || !session_id)
        return NULL;
    if (!query_state(dom, &state, NULL) && virDomainIsActive(dom) < 0) {
        virResetLastError();
        return NULL; /* vanished while we looked */
    }
    info = g_new0(CarrelDomainInfo, 1);
    info->name = g_strdup(virDomainGetName(dom));
    info->session_id = g_steal_pointer(&session_id);
    info->instance_id = g_steal_pointer(&instance_id);
    info->state = state;
    info->persistent = virDomainIsPersistent(dom) == 1;
    info->in_job = in_job(dom);
    xml = virDomainGetXMLDesc(dom, 0);
    info->disk_path = xml ? carrel_hypervisor_scan_disk_source(xml) : NULL;
    free(xml);
    virResetLastError();
    return info;
}

GPtrArray *
carrel_hypervisor_libvirt_list(CarrelHypervisor *hv, GError **error)
{
    CarrelLibvirtBackend *be = hv->backend_data;
    virDomainPtr *doms = NULL;
    GPtrArray *infos;
    int n;

    n = virConnectListAllDomains(carrel_hypervisor_libvirt_conn(be), &doms, 0);
    if (n < 0 && carrel_hypervisor_libvirt_conn_broke(be)) {
        virResetLastError();
        n = virConnectListAllDomains(carrel_hypervisor_libvirt_conn(be), &doms, 0);
    }
    if (n < 0) {
        carrel_hypervisor_libvirt_set_error(error, "listing");
        return NULL;
    }
    infos = g_ptr_array_new_with_free_func((GDestroyNotify)carrel_domain_info_free);
    for (int i = 0; i < n; i++) {
        CarrelDomainInfo *info = info_of_domain(doms[i]);
        if (info)
            g_ptr_array_add(infos, info);
        virDomainFree(doms[i]);
    }
    free(doms);
    return infos;
}

gboolean
carrel_hypervisor_libvirt_define(CarrelHypervisor *hv, const char *xml, GError **error)
{
    CarrelLibvirtBackend *be = hv->backend_data;
    g_autoptr(virDomain) dom = virDomainDefineXMLFlags(carrel_hypervisor_libvirt_conn(be), xml,
                                                       VIR_DOMAIN_DEFINE_VALIDATE);

    if (!dom) {
        carrel_hypervisor_libvirt_set_error(error, "defining");
        return FALSE;
    }
    return TRUE;
}

gboolean
carrel_hypervisor_libvirt_persist(CarrelHypervisor *hv, const char *name, GError **error)
{
    CarrelLibvirtBackend *be = hv->backend_data;
    g_autoptr(virDomain) dom = carrel_hypervisor_libvirt_lookup(be, name, error);
    g_autoptr(virDomain) defined = NULL;
    char *xml;

    if (!dom)
        return FALSE;
    if (virDomainIsPersistent(dom) == 1)
        return TRUE;
    /* SECURE: the SPICE password stays part of the definition, as when carrel defines it. */
    xml = virDomainGetXMLDesc(dom, VIR_DOMAIN_XML_SECURE | VIR_DOMAIN_XML_MIGRATABLE);
    if (!xml) {
        carrel_hypervisor_libvirt_set_error(error, "reading the live definition");
        return FALSE;
    }
    defined = virDomainDefineXMLFlags(carrel_hypervisor_libvirt_conn(be), xml, 0);
    free(xml);
    if (!defined) {
        carrel_hypervisor_libvirt_set_error(error, "defining from the live definition");
        return FALSE;
    }
    return TRUE;
}

/* libvirt creates the image as root 0600, but a umask or a qemu.conf user could differ. */
static gboolean
secure_save_file(const char *path, GError **error)
{
    struct stat st;
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
    gboolean ok = FALSE;

    if (fd < 0) {
        carrel_hypervisor_set_errno_error(error, errno, "opening saved image");
        return FALSE;
    }
    if (fstat(fd, &st) < 0)
        carrel_hypervisor_set_errno_error(error, errno, "inspecting saved image");
    else if (!S_ISREG(st.st_mode))
        g_set_error(error, CARREL_ERROR, CARREL_ERROR_HYPERVISOR,
                    "saved image is not a regular file");
    else if ((st.st_uid != 0 || st.st_gid != 0) && fchown(fd, 0, 0) < 0)
        carrel_hypervisor_set_errno_error(error, errno, "making saved image root's");
    else if ((st.st_mode & 07777) != 0600 && fchmod(fd, 0600) < 0)
        carrel_hypervisor_set_errno_error(error, errno, "making saved image private");
    else
        ok = carrel_hypervisor_saveimage_read_header(fd, NULL, NULL, NULL, error);
    close(fd);
    return ok;
}

/* libvirtd opens a memory path as root with O_TRUNC and follows symlinks: never over a file. */
static gboolean
check_new_memory_path(const char *path, GError **error)
{
    struct stat st;

    if (!g_path_is_absolute(path)) {
        g_set_error(error, CARREL_ERROR, CARREL_ERROR_INVALID_ARG, "save path '%s' is not absolute",
                    path);
        return FALSE;
    }
    if (lstat(path, &st) == 0) {
        g_set_error(error, CARREL_ERROR, CARREL_ERROR_EXISTS, "save path '%s' already exists",
                    path);
        return FALSE;
    }
    if (errno != ENOENT) {
        carrel_hypervisor_set_errno_error(error, errno, "inspecting save path");
        return FALSE;
    }
    return TRUE;
}

gboolean
carrel_hypervisor_libvirt_save(CarrelHypervisor *hv, const char *name, const char *path,
                               GError **error)
{
    CarrelLibvirtBackend *be = hv->backend_data;
    g_autoptr(virDomain) dom = NULL;

    if (carrel_hypervisor_libvirt_refuse_on_test(be, "saving", error) ||
        !check_new_memory_path(path, error))
        return FALSE;
    dom = carrel_hypervisor_libvirt_lookup(be, name, error);
    if (!dom)
        return FALSE;
    if (virDomainSaveFlags(dom, path, NULL, VIR_DOMAIN_SAVE_RUNNING) < 0) {
        carrel_hypervisor_libvirt_set_error(error, "saving");
        return FALSE;
    }
    if (!secure_save_file(path, error)) {
        g_prefix_error(error, "saved to '%s' but: ", path);
        return FALSE;
    }
    return TRUE;
}

gboolean
carrel_hypervisor_libvirt_snapshot_live(CarrelHypervisor *hv, const char *name,
                                        const char *memory_path, const char *top_path,
                                        GError **error)
{
    CarrelLibvirtBackend *be = hv->backend_data;
    g_autoptr(virDomain) dom = NULL;
    g_autoptr(virDomainSnapshot) snap = NULL;
    g_autofree char *xml = NULL;
    /* No libvirt metadata (carrel keeps its own), the top carrel made, all or nothing. */
    const unsigned int flags = VIR_DOMAIN_SNAPSHOT_CREATE_NO_METADATA |
                               VIR_DOMAIN_SNAPSHOT_CREATE_REUSE_EXT |
                               VIR_DOMAIN_SNAPSHOT_CREATE_ATOMIC;

    if (carrel_hypervisor_libvirt_refuse_on_test(be, "a live snapshot", error) ||
        !check_new_memory_path(memory_path, error) ||
        !(dom = carrel_hypervisor_libvirt_lookup(be, name, error)))
        return FALSE;
    xml = carrel_hypervisor_build_snapshot_xml(memory_path, top_path);
    snap = virDomainSnapshotCreateXML(dom, xml, flags);
    if (!snap) {
        carrel_hypervisor_libvirt_set_error(error, "taking a live snapshot");
        return FALSE;
    }
    if (!secure_save_file(memory_path, error)) {
        g_prefix_error(error, "snapshot memory in '%s' but: ", memory_path);
        return FALSE;
    }
    return TRUE;
}

gboolean
carrel_hypervisor_libvirt_pause(CarrelHypervisor *hv, const char *name, gboolean pause,
                                GError **error)
{
    g_autoptr(virDomain) dom = carrel_hypervisor_libvirt_lookup(hv->backend_data, name, error);
    CarrelDomainState state;

    if (!dom || !query_state(dom, &state, error))
        return FALSE;
    if (state != (pause ? CARREL_DOMAIN_RUNNING : CARREL_DOMAIN_PAUSED)) {
        g_set_error(error, CARREL_ERROR, CARREL_ERROR_WRONG_STATE, "the domain is %s",
                    carrel_domain_state_to_string(state));
        return FALSE;
    }
    if ((pause ? virDomainSuspend(dom) : virDomainResume(dom)) < 0) {
        carrel_hypervisor_libvirt_set_error(error, pause ? "suspending" : "resuming");
        return FALSE;
    }
    return TRUE;
}

/* The balloon's current size (QEMU's query-balloon, no guest statistics needed). */
static gboolean
balloon_actual_kib(virDomainPtr dom, unsigned long long *ret_kib, GError **error)
{
    virDomainMemoryStatStruct stats[VIR_DOMAIN_MEMORY_STAT_NR];
    int n = virDomainMemoryStats(dom, stats, VIR_DOMAIN_MEMORY_STAT_NR, 0);

    if (n < 0) {
        carrel_hypervisor_libvirt_set_error(error, "reading balloon size");
        return FALSE;
    }
    for (int i = 0; i < n; i++) {
        if (stats[i].tag == VIR_DOMAIN_MEMORY_STAT_ACTUAL_BALLOON) {
            *ret_kib = stats[i].val;
            return TRUE;
        }
    }
    g_set_error(error, CARREL_ERROR, CARREL_ERROR_HYPERVISOR, "the domain reports no balloon size");
    return FALSE;
}

gboolean
carrel_hypervisor_libvirt_set_balloon(CarrelHypervisor *hv, const char *name, guint target_mib,
                                      guint timeout_s, guint *ret_actual_mib, GError **error)
{
    CarrelLibvirtBackend *be = hv->backend_data;
    g_autoptr(virDomain) dom = NULL;
    unsigned long long target = (unsigned long long)target_mib * 1024, actual = 0, last = 0;
    gint64 now = g_get_monotonic_time(), deadline = now + (gint64)timeout_s * G_USEC_PER_SEC;
    gint64 moved = now;

    if (carrel_hypervisor_libvirt_refuse_on_test(be, "ballooning", error) ||
        !(dom = carrel_hypervisor_libvirt_lookup(be, name, error)))
        return FALSE;
    if (virDomainSetMemoryFlags(dom, (unsigned long)target, VIR_DOMAIN_AFFECT_LIVE) < 0) {
        carrel_hypervisor_libvirt_set_error(error, "setting the balloon target");
        return FALSE;
    }
    /* The guest moves the balloon at its own pace (~80 MB/s inflating under TCG). */
    while (balloon_actual_kib(dom, &actual, error)) {
        now = g_get_monotonic_time();
        if (actual != last)
            moved = now;
        last = actual;
        if ((actual > target ? actual - target : target - actual) <= 1024 || now >= deadline ||
            now - moved > 3 * G_USEC_PER_SEC) {
            *ret_actual_mib = (guint)(actual / 1024);
            return TRUE;
        }
        g_usleep(200 * 1000);
    }
    return FALSE;
}
