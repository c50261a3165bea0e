/*
 * The libvirt backend: one connection, shared by every thread (libvirt connections are
 * thread-safe). libvirt errors become GError in set_libvirt_error() and nowhere else.
 */
#include <stdlib.h>
#include <libvirt/libvirt.h>
#include <libvirt/libvirt-qemu.h>
#include <libvirt/virterror.h>

#define CARREL_HYPERVISOR_PRIV_H_ALLOW
#include "hypervisor/hypervisor-priv.h"

G_DEFINE_AUTOPTR_CLEANUP_FUNC(virDomain, virDomainFree)

#define POLL_INTERVAL_US (100 * 1000)
#define AGENT_MAX_TIMEOUT_S 300

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

/* The one place libvirt errors become GError; consumes the thread's last libvirt error. */
static void
set_libvirt_error(GError **error, const char *what)
{
    virErrorPtr err = virGetLastError();
    g_autofree char *message = g_strdup(err && err->message ? err->message : "unknown error");

    /* libvirt messages may span lines (XML errors); keep ours on one line for the logs. */
    for (char *p = message; *p; p++) {
        if ((guchar)*p < 0x20)
            *p = ' ';
    }
    g_set_error(error, CARREL_ERROR,
                err ? code_of_libvirt_error(err->code) : CARREL_ERROR_HYPERVISOR, "%s: %s", what,
                message);
    virResetLastError();
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

static gboolean
lv_agent_ping(CarrelHypervisor *hv, const char *name, guint timeout_s, GError **error)
{
    LibvirtBackend *be = hv->backend_data;
    g_autoptr(virDomain) dom = lookup_domain(be, name, error);
    char *reply;

    if (!dom)
        return FALSE;
    if (be->is_test) {
        if (virDomainIsActive(dom) == 1)
            return TRUE;
        virResetLastError();
        g_set_error(error, CARREL_ERROR, CARREL_ERROR_WRONG_STATE, "domain is not running");
        return FALSE;
    }
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
