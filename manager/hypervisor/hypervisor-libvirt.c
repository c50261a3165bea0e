/*
 * The libvirt backend: one connection, shared by every thread (libvirt connections are
 * thread-safe). libvirt errors become GError in set_libvirt_error() and nowhere else.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#include <libvirt/libvirt.h>
#include <libvirt/libvirt-qemu.h>
#include <libvirt/virterror.h>

#define CARREL_HYPERVISOR_PRIV_H_ALLOW
#include "hypervisor/hypervisor-priv.h"

G_DEFINE_AUTOPTR_CLEANUP_FUNC(virDomain, virDomainFree)
G_DEFINE_AUTOPTR_CLEANUP_FUNC(virStream, virStreamFree)
G_DEFINE_AUTOPTR_CLEANUP_FUNC(virNetwork, virNetworkFree)

#define POLL_INTERVAL_US (100 * 1000)
#define AGENT_MAX_TIMEOUT_S 300
/* guest-exec-status polling: fast at first (most commands take milliseconds), then gentler. */
#define EXEC_POLL_MIN_US (50 * 1000)
#define EXEC_POLL_MAX_US (200 * 1000)
/* How long past its deadline a guest program may take before the host kills it itself. */
#define EXEC_GRACE_S 5
/* How long the host then waits for the kill to show in guest-exec-status. */
#define EXEC_REAP_S 3
/* Guest and host clocks may disagree by this much about when the deadline passed. */
#define EXEC_SKEW_US (500 * 1000)
#define SIGKILL_NUMBER 9

/* Everything a session's domain may own besides its XML; NVRAM exists for UEFI only. */
#define UNDEFINE_FLAGS                                                                             \
    (VIR_DOMAIN_UNDEFINE_NVRAM | VIR_DOMAIN_UNDEFINE_MANAGED_SAVE |                                \
     VIR_DOMAIN_UNDEFINE_SNAPSHOTS_METADATA | VIR_DOMAIN_UNDEFINE_CHECKPOINTS_METADATA)
/* The test driver refuses the NVRAM and checkpoint flags ("unsupported flags"). */
#define UNDEFINE_FLAGS_TEST                                                                        \
    (VIR_DOMAIN_UNDEFINE_MANAGED_SAVE | VIR_DOMAIN_UNDEFINE_SNAPSHOTS_METADATA)

typedef struct {
    virConnectPtr conn;
    gboolean is_test; /* the test driver: no guest runs, so there is no agent either */
} LibvirtBackend;

static unsigned int
undefine_flags(const LibvirtBackend *be)
{
    return be->is_test ? UNDEFINE_FLAGS_TEST : UNDEFINE_FLAGS;
}

static CarrelErrorCode
code_of_libvirt_error(int code)
{
    if (code == VIR_ERR_NO_DOMAIN)
        return CARREL_ERROR_NOT_FOUND;
    if (code == VIR_ERR_DOM_EXIST)
        return CARREL_ERROR_EXISTS;
    /* libvirt's "domain is not running" / "is already active" */
    if (code == VIR_ERR_OPERATION_INVALID)
        return CARREL_ERROR_WRONG_STATE;
    /* The agent is not connected yet (guest still booting) or does not answer in time. */
    if (code == VIR_ERR_AGENT_UNRESPONSIVE || code == VIR_ERR_OPERATION_TIMEOUT)
        return CARREL_ERROR_TIMEOUT;
    return CARREL_ERROR_HYPERVISOR;
}

/*
 * The one place libvirt errors become GError; consumes the thread's last libvirt error. With
 * guest_file the failure was a guest-file-open, whose reason the guest gives only in words.
 */
static void
set_libvirt_error_full(GError **error, const char *what, gboolean guest_file)
{
    virErrorPtr err = virGetLastError();
    g_autofree char *message = g_strdup(err && err->message ? err->message : "unknown error");
    CarrelErrorCode code = err ? code_of_libvirt_error(err->code) : CARREL_ERROR_HYPERVISOR;

    /* libvirt messages may span lines (XML errors); keep ours on one line for the logs. */
    for (char *p = message; *p; p++) {
        if ((guchar)*p < 0x20)
            *p = ' ';
    }
    if (guest_file)
        code = carrel_hypervisor_agent_file_open_code(code, message);
    g_set_error(error, CARREL_ERROR, code, "%s: %s", what, message);
    virResetLastError();
}

static void
set_libvirt_error(GError **error, const char *what)
{
    set_libvirt_error_full(error, what, FALSE);
}

static virDomainPtr
lookup_domain(LibvirtBackend *be, const char *name, GError **error)
{
    virDomainPtr dom = virDomainLookupByName(be->conn, name);

    if (dom)
        return dom;
    if (virGetLastErrorCode() == VIR_ERR_NO_DOMAIN) {
        virResetLastError();
        g_set_error(error, CARREL_ERROR, CARREL_ERROR_NOT_FOUND, "domain does not exist");
        return NULL;
    }
    set_libvirt_error(error, "looking up domain");
    return NULL;
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
        set_libvirt_error(error, "reading state");
        return FALSE;
    }
    *ret_state = map_state(state, reason);
    return TRUE;
}

static gboolean
lv_define_start(CarrelHypervisor *hv, const char *xml, GError **error)
{
    LibvirtBackend *be = hv->backend_data;
    g_autoptr(virDomain) dom = NULL;
    g_autofree char *name = NULL;

    /* Never redefine: the undefine below must only ever remove a domain made right here. */
    if (carrel_hypervisor_scan_xml(xml, &name, NULL, NULL, NULL) && name) {
        g_autoptr(virDomain) old = virDomainLookupByName(be->conn, name);
        if (old) {
            g_set_error(error, CARREL_ERROR, CARREL_ERROR_EXISTS, "domain already exists");
            return FALSE;
        }
        virResetLastError();
    }
    dom = virDomainDefineXMLFlags(be->conn, xml, VIR_DOMAIN_DEFINE_VALIDATE);
    if (!dom) {
        set_libvirt_error(error, "defining");
        return FALSE;
    }
    if (virDomainCreate(dom) < 0) {
        set_libvirt_error(error, "starting");
        /* Leave nothing half made: a defined domain that never ran would be an orphan. */
        if (virDomainUndefineFlags(dom, undefine_flags(be)) < 0)
            virResetLastError();
        return FALSE;
    }
    return TRUE;
}

static gboolean
lv_start(CarrelHypervisor *hv, const char *name, GError **error)
{
    g_autoptr(virDomain) dom = lookup_domain(hv->backend_data, name, error);

    if (!dom)
        return FALSE;
    if (virDomainCreate(dom) < 0) {
        set_libvirt_error(error, "starting");
        return FALSE;
    }
    return TRUE;
}

static gboolean
request_shutdown(LibvirtBackend *be, virDomainPtr dom, GError **error)
{
    if (be->is_test) {
        if (virDomainShutdown(dom) == 0)
            return TRUE;
        set_libvirt_error(error, "shutting down");
        return FALSE;
    }
    /* The agent works without an ACPI handler (the tiny template has none); ACPI without agent. */
    if (virDomainShutdownFlags(dom, VIR_DOMAIN_SHUTDOWN_GUEST_AGENT) == 0)
        return TRUE;
    virResetLastError();
    if (virDomainShutdownFlags(dom, VIR_DOMAIN_SHUTDOWN_ACPI_POWER_BTN) == 0)
        return TRUE;
    set_libvirt_error(error, "shutting down");
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

static gboolean
lv_shutdown(CarrelHypervisor *hv, const char *name, guint timeout_s, GError **error)
{
    LibvirtBackend *be = hv->backend_data;
    g_autoptr(virDomain) dom = lookup_domain(be, name, error);
    CarrelDomainState state;

    if (!dom || !query_state(dom, &state, error))
        return FALSE;
    if (state == CARREL_DOMAIN_SHUTOFF || state == CARREL_DOMAIN_CRASHED)
        return TRUE;
    if (!request_shutdown(be, dom, error))
        return FALSE;
    return wait_shutoff(dom, timeout_s, error);
}

static gboolean
lv_destroy(CarrelHypervisor *hv, const char *name, GError **error)
{
    g_autoptr(virDomain) dom = lookup_domain(hv->backend_data, name, error);
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
    set_libvirt_error(error, "destroying");
    return FALSE;
}

static gboolean
lv_undefine(CarrelHypervisor *hv, const char *name, GError **error)
{
    g_autoptr(GError) local = NULL;
    g_autoptr(virDomain) dom = lookup_domain(hv->backend_data, name, &local);

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
    set_libvirt_error(error, "undefining");
    return FALSE;
}

static gboolean
lv_get_state(CarrelHypervisor *hv, const char *name, CarrelDomainState *ret_state, GError **error)
{
    g_autoptr(virDomain) dom = lookup_domain(hv->backend_data, name, error);

    return dom && query_state(dom, ret_state, error);
}

/* The test driver runs no guest: its "agent" is ready whenever the domain runs. */
static gboolean
test_agent_ready(virDomainPtr dom, GError **error)
{
    if (virDomainIsActive(dom) == 1)
        return TRUE;
    virResetLastError();
    g_set_error(error, CARREL_ERROR, CARREL_ERROR_WRONG_STATE, "domain is not running");
    return FALSE;
}

static gboolean
lv_agent_ping(CarrelHypervisor *hv, const char *name, guint timeout_s, GError **error)
{
    LibvirtBackend *be = hv->backend_data;
    g_autoptr(virDomain) dom = lookup_domain(be, name, error);
    char *reply;

    if (!dom)
        return FALSE;
    if (be->is_test)
        return test_agent_ready(dom, error);
    /* 0 would mean "do not wait"; the reply is the guest's, so it is not even looked at. */
    reply = virDomainQemuAgentCommand(dom, "{\"execute\":\"guest-ping\"}",
                                      (int)CLAMP(timeout_s, 1, AGENT_MAX_TIMEOUT_S), 0);
    if (!reply) {
        set_libvirt_error(error, "pinging guest agent");
        return FALSE;
    }
    free(reply);
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
    char *meta;
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
    return info;
}

static GPtrArray *
lv_list(CarrelHypervisor *hv, GError **error)
{
    LibvirtBackend *be = hv->backend_data;
    virDomainPtr *doms = NULL;
    GPtrArray *infos;
    int n;

    n = virConnectListAllDomains(be->conn, &doms, 0);
    if (n < 0) {
        set_libvirt_error(error, "listing");
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

static char *
format_version(unsigned long version)
{
    return g_strdup_printf("%lu.%lu.%lu", version / 1000000, version / 1000 % 1000, version % 1000);
}

static char *
lv_describe(CarrelHypervisor *hv)
{
    LibvirtBackend *be = hv->backend_data;
    unsigned long lib_version = 0;
    unsigned long hv_version = 0;
    const char *type = virConnectGetType(be->conn);
    g_autofree char *lib_text = NULL;
    g_autofree char *hv_text = NULL;

    if (virConnectGetLibVersion(be->conn, &lib_version) < 0 ||
        virConnectGetVersion(be->conn, &hv_version) < 0 || !type) {
        virResetLastError();
        return g_strdup("libvirt (version unknown)");
    }
    lib_text = format_version(lib_version);
    hv_text = format_version(hv_version);
    return g_strdup_printf("libvirt %s, %s %s", lib_text, type, hv_text);
}

static void
lv_close(CarrelHypervisor *hv)
{
    LibvirtBackend *be = hv->backend_data;

    if (!be)
        return;
    if (be->conn)
        virConnectClose(be->conn);
    g_free(be);
    hv->backend_data = NULL;
}

static gboolean
lv_define(CarrelHypervisor *hv, const char *xml, GError **error)
{
    LibvirtBackend *be = hv->backend_data;
    g_autoptr(virDomain) dom = virDomainDefineXMLFlags(be->conn, xml, VIR_DOMAIN_DEFINE_VALIDATE);

    if (!dom) {
        set_libvirt_error(error, "defining");
        return FALSE;
    }
    return TRUE;
}

static gboolean
refuse_on_test(const LibvirtBackend *be, const char *what, GError **error)
{
    if (!be->is_test)
        return FALSE;
    g_set_error(error, CARREL_ERROR, CARREL_ERROR_UNSUPPORTED,
                "%s is not supported by libvirt's test driver", what);
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

static gboolean
lv_save(CarrelHypervisor *hv, const char *name, const char *path, GError **error)
{
    LibvirtBackend *be = hv->backend_data;
    g_autoptr(virDomain) dom = NULL;
    struct stat st;

    if (refuse_on_test(be, "saving", error))
        return FALSE;
    if (!g_path_is_absolute(path)) {
        g_set_error(error, CARREL_ERROR, CARREL_ERROR_INVALID_ARG, "save path '%s' is not absolute",
                    path);
        return FALSE;
    }
    /* libvirtd opens the path as root with O_TRUNC and follows symlinks: never over a file. */
    if (lstat(path, &st) == 0) {
        g_set_error(error, CARREL_ERROR, CARREL_ERROR_EXISTS, "save path '%s' already exists",
                    path);
        return FALSE;
    }
    if (errno != ENOENT) {
        carrel_hypervisor_set_errno_error(error, errno, "inspecting save path");
        return FALSE;
    }
    dom = lookup_domain(be, name, error);
    if (!dom)
        return FALSE;
    if (virDomainSaveFlags(dom, path, NULL, VIR_DOMAIN_SAVE_RUNNING) < 0) {
        set_libvirt_error(error, "saving");
        return FALSE;
    }
    if (!secure_save_file(path, error)) {
        g_prefix_error(error, "saved to '%s' but: ", path);
        return FALSE;
    }
    return TRUE;
}

static gboolean
lv_restore(CarrelHypervisor *hv, const char *path, const char *xml, GError **error)
{
    LibvirtBackend *be = hv->backend_data;
    g_autoptr(virDomain) old = NULL;
    g_autofree char *name = NULL;

    if (refuse_on_test(be, "restoring", error))
        return FALSE;
    if (!carrel_hypervisor_scan_xml(xml, &name, NULL, NULL, error))
        return FALSE;
    if (!name || !*name) {
        g_set_error(error, CARREL_ERROR, CARREL_ERROR_INVALID_ARG, "domain xml has no name");
        return FALSE;
    }
    old = virDomainLookupByName(be->conn, name);
    if (old) {
        g_set_error(error, CARREL_ERROR, CARREL_ERROR_EXISTS, "domain already exists");
        return FALSE;
    }
    virResetLastError();
    /* libvirt checks a new XML given here against the saved one and refuses another UUID. */
    if (!carrel_hypervisor_saveimage_rewrite_file(path, xml, error))
        return FALSE;
    if (virDomainRestoreFlags(be->conn, path, NULL, VIR_DOMAIN_SAVE_RUNNING) < 0) {
        set_libvirt_error(error, "restoring");
        return FALSE;
    }
    return TRUE;
}

static gboolean
lv_pause(CarrelHypervisor *hv, const char *name, gboolean pause, GError **error)
{
    g_autoptr(virDomain) dom = lookup_domain(hv->backend_data, name, error);
    CarrelDomainState state;

    if (!dom || !query_state(dom, &state, error))
        return FALSE;
    if (state != (pause ? CARREL_DOMAIN_RUNNING : CARREL_DOMAIN_PAUSED)) {
        g_set_error(error, CARREL_ERROR, CARREL_ERROR_WRONG_STATE, "the domain is %s",
                    carrel_domain_state_to_string(state));
        return FALSE;
    }
    if ((pause ? virDomainSuspend(dom) : virDomainResume(dom)) < 0) {
        set_libvirt_error(error, pause ? "suspending" : "resuming");
        return FALSE;
    }
    return TRUE;
}

static gboolean
lv_fs_freeze(CarrelHypervisor *hv, const char *name, gboolean freeze, GError **error)
{
    LibvirtBackend *be = hv->backend_data;
    g_autoptr(virDomain) dom = NULL;
    int rc;

    if (refuse_on_test(be, "guest-fsfreeze", error) || !(dom = lookup_domain(be, name, error)))
        return FALSE;
    if (virDomainAgentSetResponseTimeout(dom, CARREL_HYPERVISOR_AGENT_TIMEOUT_S, 0) < 0) {
        set_libvirt_error(error, "setting guest agent timeout");
        return FALSE;
    }
    rc = freeze ? virDomainFSFreeze(dom, NULL, 0, 0) : virDomainFSThaw(dom, NULL, 0, 0);
    if (rc < 0) {
        set_libvirt_error(error, freeze ? "guest-fsfreeze-freeze" : "guest-fsfreeze-thaw");
        return FALSE;
    }
    return TRUE;
}

static gboolean
lv_set_time(CarrelHypervisor *hv, const char *name, GError **error)
{
    LibvirtBackend *be = hv->backend_data;
    g_autoptr(virDomain) dom = lookup_domain(be, name, error);
    struct timespec now;

    if (!dom)
        return FALSE;
    if (be->is_test)
        return test_agent_ready(dom, error);
    /* virDomainSetTime has no timeout argument; libvirt's default would wait forever. */
    if (virDomainAgentSetResponseTimeout(dom, CARREL_HYPERVISOR_AGENT_TIMEOUT_S, 0) < 0) {
        set_libvirt_error(error, "setting guest agent timeout");
        return FALSE;
    }
    clock_gettime(CLOCK_REALTIME, &now);
    if (virDomainSetTime(dom, (long long)now.tv_sec, (unsigned int)now.tv_nsec, 0) < 0) {
        set_libvirt_error(error, "setting guest time");
        return FALSE;
    }
    return TRUE;
}

/* The network, defined from xml when absent; NULL with error set otherwise. */
static virNetworkPtr
lookup_or_define_network(LibvirtBackend *be, const char *name, const char *xml, GError **error)
{
    virNetworkPtr net = virNetworkLookupByName(be->conn, name);

    if (net)
        return net;
    if (virGetLastErrorCode() != VIR_ERR_NO_NETWORK) {
        set_libvirt_error(error, "looking up network");
        return NULL;
    }
    virResetLastError();
    net = virNetworkDefineXML(be->conn, xml);
    if (net) {
        /* Best effort: carrel ensures it again before every session anyway. */
        (void)virNetworkSetAutostart(net, 1);
        virResetLastError();
        return net;
    }
    /* Another carreld may have defined it in between: use that one. */
    virResetLastError();
    net = virNetworkLookupByName(be->conn, name);
    if (!net)
        set_libvirt_error(error, "defining network");
    return net;
}

static gboolean
lv_ensure_network(CarrelHypervisor *hv, const char *name, const char *xml, char **ret_xml,
                  GError **error)
{
    LibvirtBackend *be = hv->backend_data;
    g_autoptr(virNetwork) net = lookup_or_define_network(be, name, xml, error);
    char *desc;

    if (!net)
        return FALSE;
    /* Started by another process in between is as good as started here. */
    if (virNetworkIsActive(net) != 1 && virNetworkCreate(net) < 0 && virNetworkIsActive(net) != 1) {
        set_libvirt_error(error, "starting network");
        return FALSE;
    }
    virResetLastError();
    desc = virNetworkGetXMLDesc(net, 0);
    if (!desc) {
        set_libvirt_error(error, "reading network xml");
        return FALSE;
    }
    *ret_xml = g_strdup(desc);
    free(desc);
    return TRUE;
}

/* The balloon's current size (QEMU's query-balloon, no guest statistics needed). */
static gboolean
balloon_actual_kib(virDomainPtr dom, unsigned long long *ret_kib, GError **error)
{
    virDomainMemoryStatStruct stats[VIR_DOMAIN_MEMORY_STAT_NR];
    int n = virDomainMemoryStats(dom, stats, VIR_DOMAIN_MEMORY_STAT_NR, 0);

    if (n < 0) {
        set_libvirt_error(error, "reading balloon size");
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

static gboolean
lv_set_balloon(CarrelHypervisor *hv, const char *name, guint target_mib, guint timeout_s,
               guint *ret_actual_mib, GError **error)
{
    LibvirtBackend *be = hv->backend_data;
    g_autoptr(virDomain) dom = NULL;
    unsigned long long target = (unsigned long long)target_mib * 1024, actual = 0, last = 0;
    gint64 now = g_get_monotonic_time(), deadline = now + (gint64)timeout_s * G_USEC_PER_SEC;
    gint64 moved = now;

    if (refuse_on_test(be, "ballooning", error) || !(dom = lookup_domain(be, name, error)))
        return FALSE;
    if (virDomainSetMemoryFlags(dom, (unsigned long)target, VIR_DOMAIN_AFFECT_LIVE) < 0) {
        set_libvirt_error(error, "setting the balloon target");
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

/* The live XML of a domain (without secrets). */
static char *
live_xml(virDomainPtr dom, GError **error)
{
    char *desc = virDomainGetXMLDesc(dom, 0);
    char *copy;

    if (!desc) {
        set_libvirt_error(error, "reading domain xml");
        return NULL;
    }
    copy = g_strdup(desc);
    free(desc);
    return copy;
}

static gboolean
lv_spice_info(CarrelHypervisor *hv, const char *name, CarrelSpiceInfo *ret_info, GError **error)
{
    LibvirtBackend *be = hv->backend_data;
    g_autoptr(virDomain) dom = lookup_domain(be, name, error);
    g_autofree char *xml = dom ? live_xml(dom, error) : NULL;

    return xml && carrel_hypervisor_spice_scan(xml, NULL, 0, ret_info, NULL, error);
}

static gboolean
lv_spice_password(CarrelHypervisor *hv, const char *name, const char *password, gint64 valid_until,
                  GError **error)
{
    LibvirtBackend *be = hv->backend_data;
    g_autoptr(virDomain) dom = NULL;
    g_autofree char *xml = NULL;
    g_autofree char *graphics = NULL;

    if (refuse_on_test(be, "setting a SPICE password", error) ||
        !(dom = lookup_domain(be, name, error)) || !(xml = live_xml(dom, error)) ||
        !carrel_hypervisor_spice_scan(xml, password, valid_until, NULL, &graphics, error))
        return FALSE;
    /* The live element as it is (libvirt refuses changes of listen or port), plus the password. */
    if (virDomainUpdateDeviceFlags(dom, graphics, VIR_DOMAIN_AFFECT_LIVE) < 0) {
        set_libvirt_error(error, "updating the graphics device");
        return FALSE;
    }
    return TRUE;
}

/* One agent command with carrel's response timeout; the reply is the guest's, untrusted. */
static char *
agent_command_full(virDomainPtr dom, const char *command, const char *what, gboolean guest_file,
                   GError **error)
{
    char *reply = virDomainQemuAgentCommand(dom, command, CARREL_HYPERVISOR_AGENT_TIMEOUT_S, 0);
    char *copy;

    if (!reply) {
        set_libvirt_error_full(error, what, guest_file);
        return NULL;
    }
    copy = g_strndup(reply, CARREL_HYPERVISOR_AGENT_REPLY_MAX + 1);
    free(reply);
    return copy; /* a longer reply stays longer than the limit: the parsers refuse it */
}

static char *
agent_command(virDomainPtr dom, const char *command, const char *what, GError **error)
{
    return agent_command_full(dom, command, what, FALSE, error);
}

static gboolean
exec_poll(virDomainPtr dom, gint64 pid, gsize max_output, CarrelExecStatus *status, GError **error)
{
    g_autofree char *command = carrel_hypervisor_agent_status_command(pid);
    g_autofree char *reply = agent_command(dom, command, "reading guest-exec status", error);

    carrel_exec_status_clear(status);
    return reply && carrel_hypervisor_agent_parse_status(reply, max_output, status, error);
}

/* Polls until the program ended or deadline (monotonic) passed. */
static gboolean
exec_wait(virDomainPtr dom, gint64 pid, gint64 deadline, gsize max_output, CarrelExecStatus *status,
          GError **error)
{
    gint64 interval = EXEC_POLL_MIN_US;

    for (;;) {
        gint64 now;

        if (!exec_poll(dom, pid, max_output, status, error))
            return FALSE;
        now = g_get_monotonic_time();
        if (status->exited || now >= deadline)
            return TRUE;
        g_usleep(MIN(interval, deadline - now));
        interval = MIN(interval * 2, EXEC_POLL_MAX_US);
    }
}

/* The guest missed its own deadline (stalled?): kill the group from here, reap it briefly. */
static void
exec_kill(virDomainPtr dom, gint64 pid, gsize max_output, CarrelExecStatus *status)
{
    g_autofree char *command = carrel_hypervisor_agent_kill_command(pid);
    g_autofree char *reply = agent_command(dom, command, "killing guest program", NULL);
    gint64 deadline = g_get_monotonic_time() + EXEC_REAP_S * G_USEC_PER_SEC;
    gint64 kill_pid = 0;

    if (!exec_wait(dom, pid, deadline, max_output, status, NULL))
        carrel_exec_status_clear(status);
    /* qemu-ga keeps every finished program until its status is read once. */
    if (reply && carrel_hypervisor_agent_parse_pid(reply, &kill_pid, NULL)) {
        g_auto(CarrelExecStatus) killer = {0};
        exec_wait(dom, kill_pid, g_get_monotonic_time() + EXEC_REAP_S * G_USEC_PER_SEC, 0, &killer,
                  NULL);
    }
}

static gboolean
lv_agent_exec(CarrelHypervisor *hv, const char *name, const char *const *argv, GBytes *stdin_bytes,
              guint timeout_s, gsize max_output, int *ret_exit_code, GBytes **ret_stdout,
              GBytes **ret_stderr, gboolean *ret_truncated, gboolean *ret_timed_out, GError **error)
{
    LibvirtBackend *be = hv->backend_data;
    g_autoptr(virDomain) dom = NULL;
    g_auto(CarrelExecStatus) status = {0};
    g_autofree char *command = NULL;
    g_autofree char *reply = NULL;
    gint64 started = g_get_monotonic_time(), pid = 0, elapsed;
    gint64 deadline = started + ((gint64)timeout_s + EXEC_GRACE_S) * G_USEC_PER_SEC;
    gboolean timed_out;

    if (refuse_on_test(be, "guest-exec", error) || !(dom = lookup_domain(be, name, error)))
        return FALSE;
    command = carrel_hypervisor_agent_exec_command(argv, stdin_bytes, timeout_s);
    reply = agent_command(dom, command, "starting guest program", error);
    if (!reply || !carrel_hypervisor_agent_parse_pid(reply, &pid, error) ||
        !exec_wait(dom, pid, deadline, max_output, &status, error))
        return FALSE;
    if (!status.exited)
        exec_kill(dom, pid, max_output, &status);
    elapsed = g_get_monotonic_time() - started;
    /* The guest's timeout(1) kills with SIGKILL at the deadline; the host clock confirms it. */
    timed_out = !status.exited || (status.signal == SIGKILL_NUMBER &&
                                   elapsed >= (gint64)timeout_s * G_USEC_PER_SEC - EXEC_SKEW_US);
    if (ret_exit_code)
        *ret_exit_code = status.exited ? status.exit_code : -1;
    if (ret_stdout)
        *ret_stdout = status.out ? g_bytes_ref(status.out) : g_bytes_new(NULL, 0);
    if (ret_stderr)
        *ret_stderr = status.err ? g_bytes_ref(status.err) : g_bytes_new(NULL, 0);
    if (ret_truncated)
        *ret_truncated = status.truncated;
    if (ret_timed_out)
        *ret_timed_out = timed_out;
    return TRUE;
}

typedef struct {
    GByteArray *data;
    gboolean overflow;
} ScreenSink;

/* Must return the bytes it consumed: anything else makes virStreamRecvAll spin or abort. */
static int
screen_sink(virStreamPtr st, const char *data, size_t nbytes, void *opaque)
{
    ScreenSink *sink = opaque;

    if (nbytes > CARREL_HYPERVISOR_SCREENSHOT_MAX - sink->data->len) {
        sink->overflow = TRUE;
        return -1;
    }
    g_byte_array_append(sink->data, (const guint8 *)data, (guint)nbytes);
    return (int)nbytes;
}

static gboolean
receive_screen(virStreamPtr st, ScreenSink *sink, GError **error)
{
    /* On failure virStreamRecvAll has already aborted the stream. */
    if (virStreamRecvAll(st, screen_sink, sink) < 0) {
        if (sink->overflow) {
            virResetLastError();
            g_set_error(error, CARREL_ERROR, CARREL_ERROR_LIMIT, "screenshot exceeds %d bytes",
                        CARREL_HYPERVISOR_SCREENSHOT_MAX);
        } else {
            set_libvirt_error(error, "receiving screenshot");
        }
        return FALSE;
    }
    if (virStreamFinish(st) < 0) {
        set_libvirt_error(error, "finishing screenshot");
        return FALSE;
    }
    return TRUE;
}

static gboolean
lv_screenshot(CarrelHypervisor *hv, const char *name, GBytes **ret_image, GError **error)
{
    LibvirtBackend *be = hv->backend_data;
    g_autoptr(virDomain) dom = lookup_domain(be, name, error);
    g_autoptr(virStream) st = NULL;
    g_autoptr(GByteArray) data = NULL;
    ScreenSink sink = {0};
    char *mime;
    gboolean known;

    if (!dom)
        return FALSE;
    st = virStreamNew(be->conn, 0);
    if (!st) {
        set_libvirt_error(error, "creating screenshot stream");
        return FALSE;
    }
    mime = virDomainScreenshot(dom, st, 0, 0);
    if (!mime) {
        set_libvirt_error(error, "taking screenshot");
        return FALSE;
    }
    /* QEMU >= 7.1 gives PNG, older ones PPM; the dispatcher tells them apart by content. */
    known = g_str_equal(mime, "image/png") || g_str_equal(mime, "image/x-portable-pixmap");
    if (!known) {
        g_set_error(error, CARREL_ERROR, CARREL_ERROR_UNSUPPORTED,
                    "screenshot type '%s' is not png or ppm",
                    carrel_util_is_clean_text(mime) ? mime : "?");
        free(mime);
        if (virStreamAbort(st) < 0)
            virResetLastError();
        return FALSE;
    }
    free(mime);
    data = g_byte_array_new();
    sink.data = data;
    if (!receive_screen(st, &sink, error))
        return FALSE;
    *ret_image = g_byte_array_free_to_bytes(g_steal_pointer(&data));
    return TRUE;
}

static gboolean
file_open(virDomainPtr dom, const char *path, const char *mode, gint64 *ret_handle, GError **error)
{
    g_autofree char *command = carrel_hypervisor_agent_file_open_command(path, mode);
    g_autofree char *reply = agent_command_full(dom, command, "guest-file-open", TRUE, error);

    return reply && carrel_hypervisor_agent_parse_file_handle(reply, ret_handle, error);
}

static void
file_close(virDomainPtr dom, gint64 handle)
{
    g_autofree char *command = carrel_hypervisor_agent_file_close_command(handle);

    /* Best effort: a handle left open dies with qemu-ga; nothing to report to the caller. */
    g_free(agent_command(dom, command, "guest-file-close", NULL));
}

static gboolean
file_read_all(virDomainPtr dom, gint64 handle, guint64 max, CarrelHypervisorChunkFunc sink,
              gpointer sink_data, GError **error)
{
    guint64 total = 0;

    for (;;) {
        g_autofree char *command =
            carrel_hypervisor_agent_file_read_command(handle, CARREL_HYPERVISOR_FILE_CHUNK);
        g_autofree char *reply = agent_command(dom, command, "guest-file-read", error);
        g_autoptr(GBytes) chunk = NULL;
        gboolean eof = FALSE;

        if (!reply || !carrel_hypervisor_agent_parse_file_read(reply, CARREL_HYPERVISOR_FILE_CHUNK,
                                                               &chunk, &eof, error))
            return FALSE;
        total += g_bytes_get_size(chunk);
        if (total > max) {
            g_set_error(error, CARREL_ERROR, CARREL_ERROR_LIMIT,
                        "file is larger than %" G_GUINT64_FORMAT " bytes", max);
            return FALSE;
        }
        if (!sink(g_bytes_get_data(chunk, NULL), g_bytes_get_size(chunk), sink_data, error))
            return FALSE;
        /* A read of nothing without eof would loop forever on a lying agent. */
        if (eof || g_bytes_get_size(chunk) == 0)
            return TRUE;
    }
}

static gboolean
lv_file_read(CarrelHypervisor *hv, const char *name, const char *path, guint64 max,
             CarrelHypervisorChunkFunc sink, gpointer sink_data, GError **error)
{
    LibvirtBackend *be = hv->backend_data;
    g_autoptr(virDomain) dom = NULL;
    gint64 handle = 0;
    gboolean ok;

    if (refuse_on_test(be, "guest-file-read", error) || !(dom = lookup_domain(be, name, error)) ||
        !file_open(dom, path, "r", &handle, error))
        return FALSE;
    ok = file_read_all(dom, handle, max, sink, sink_data, error);
    file_close(dom, handle);
    return ok;
}

static gboolean
file_write_all(virDomainPtr dom, gint64 handle, GBytes *data, GError **error)
{
    gsize len = 0, done = 0;
    const guint8 *bytes = g_bytes_get_data(data, &len);

    while (done < len) {
        gsize n = MIN(len - done, CARREL_HYPERVISOR_FILE_CHUNK), count = 0;
        g_autofree char *command =
            carrel_hypervisor_agent_file_write_command(handle, bytes + done, n);
        g_autofree char *reply = agent_command(dom, command, "guest-file-write", error);

        if (!reply || !carrel_hypervisor_agent_parse_file_write(reply, n, &count, error))
            return FALSE;
        if (count == 0) {
            g_set_error(error, CARREL_ERROR, CARREL_ERROR_HYPERVISOR,
                        "guest agent wrote nothing (disk full?)");
            return FALSE;
        }
        done += count;
    }
    return TRUE;
}

static gboolean
lv_file_write(CarrelHypervisor *hv, const char *name, const char *path, GBytes *data,
              GError **error)
{
    LibvirtBackend *be = hv->backend_data;
    g_autoptr(virDomain) dom = NULL;
    gint64 handle = 0;
    gboolean ok;

    if (refuse_on_test(be, "guest-file-write", error) || !(dom = lookup_domain(be, name, error)) ||
        !file_open(dom, path, "w", &handle, error))
        return FALSE;
    ok = file_write_all(dom, handle, data, error);
    file_close(dom, handle);
    return ok;
}

/* QEMU's own reply: {"return": {}} or {"error": {"class", "desc"}}. */
static gboolean
check_qmp_reply(const char *reply, GError **error)
{
    g_autoptr(JsonNode) root = json_from_string(reply, NULL);
    JsonObject *obj = root && JSON_NODE_HOLDS_OBJECT(root) ? json_node_get_object(root) : NULL;
    JsonObject *err = obj && json_object_has_member(obj, "error")
                          ? json_object_get_object_member(obj, "error")
                          : NULL;

    if (obj && !err && json_object_has_member(obj, "return"))
        return TRUE;
    g_set_error(error, CARREL_ERROR, CARREL_ERROR_HYPERVISOR, "QEMU refused input: %s",
                err ? json_object_get_string_member_with_default(err, "desc", "?")
                    : "unreadable reply");
    return FALSE;
}

static gboolean
lv_input_send(CarrelHypervisor *hv, const char *name, const char *command, GError **error)
{
    LibvirtBackend *be = hv->backend_data;
    g_autoptr(virDomain) dom = NULL;
    char *reply = NULL;
    gboolean ok;

    if (refuse_on_test(be, "input-send-event", error) || !(dom = lookup_domain(be, name, error)))
        return FALSE;
    if (virDomainQemuMonitorCommand(dom, command, &reply, 0) < 0) {
        set_libvirt_error(error, "input-send-event");
        return FALSE;
    }
    ok = check_qmp_reply(reply, error);
    free(reply);
    return ok;
}

static const CarrelHypervisorOps libvirt_ops = {
    .define_start = lv_define_start,
    .start = lv_start,
    .shutdown = lv_shutdown,
    .destroy = lv_destroy,
    .undefine = lv_undefine,
    .get_state = lv_get_state,
    .agent_ping = lv_agent_ping,
    .list = lv_list,
    .describe = lv_describe,
    .close = lv_close,
    .define = lv_define,
    .save = lv_save,
    .restore = lv_restore,
    .set_time = lv_set_time,
    .fs_freeze = lv_fs_freeze,
    .pause = lv_pause,
    .agent_exec = lv_agent_exec,
    .screenshot = lv_screenshot,
    .file_read = lv_file_read,
    .file_write = lv_file_write,
    .input_send = lv_input_send,
    .ensure_network = lv_ensure_network,
    .set_balloon = lv_set_balloon,
    .spice_info = lv_spice_info,
    .spice_password = lv_spice_password,
};

static void
quiet_error_handler(void *user_data, virErrorPtr err)
{
    /* Silence: every error reaches the caller as a GError through set_libvirt_error(). */
}

static gpointer
install_quiet_handler(gpointer data)
{
    virSetErrorFunc(NULL, quiet_error_handler);
    return NULL;
}

CarrelHypervisor *
carrel_hypervisor_open_libvirt(const char *uri, GError **error)
{
    static GOnce quiet_once = G_ONCE_INIT;
    LibvirtBackend *be;
    virConnectPtr conn;
    const char *type;

    g_return_val_if_fail(uri != NULL, NULL);
    g_once(&quiet_once, install_quiet_handler, NULL);
    conn = virConnectOpen(uri);
    if (!conn) {
        set_libvirt_error(error, "connecting");
        g_prefix_error(error, "libvirt '%s': ", uri);
        return NULL;
    }
    be = g_new0(LibvirtBackend, 1);
    be->conn = conn;
    type = virConnectGetType(conn);
    be->is_test = type && g_str_equal(type, "TEST");
    virResetLastError();
    return carrel_hypervisor_new_backend(&libvirt_ops, uri, be);
}
