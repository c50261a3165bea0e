/*
 * The libvirt backend, its connection: one, shared by every thread (libvirt connections are
 * thread-safe). libvirt errors become GError in carrel_hypervisor_libvirt_set_error() and nowhere
 * else. The calls are split by concern as libvirt splits its QEMU driver: domains and their
 * lifecycle (hypervisor-libvirt-domain.c), the guest agent (hypervisor-libvirt-agent.c), screen
 * and HID events (hypervisor-libvirt-display.c); networks stay here with the connection.
 */
#include <stdlib.h>

#define CARREL_HYPERVISOR_PRIV_H_ALLOW
#include "hypervisor/hypervisor-libvirt-priv.h"

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
void
carrel_hypervisor_libvirt_set_error_full(GError **error, const char *what, gboolean guest_file)
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

void
carrel_hypervisor_libvirt_set_error(GError **error, const char *what)
{
    carrel_hypervisor_libvirt_set_error_full(error, what, FALSE);
}

static void
close_connection(gpointer conn)
{
    virConnectClose(conn);
}

virConnectPtr
carrel_hypervisor_libvirt_conn(CarrelLibvirtBackend *be)
{
    g_autoptr(GMutexLocker) locker G_GNUC_UNUSED = g_mutex_locker_new(&be->conn_lock);
    virConnectPtr fresh;

    if (virConnectIsAlive(be->conn) == 1)
        return be->conn;
    fresh = virConnectOpen(be->uri);
    virResetLastError();
    if (!fresh)
        return be->conn; /* still down: calls fail with libvirt's own error */
    g_ptr_array_add(be->dead, be->conn);
    be->conn = fresh;
    return be->conn;
}

/* A call failed because the connection broke (libvirtd restarted): worth one more try, on the
 * connection carrel_hypervisor_libvirt_conn opens again. */
gboolean
carrel_hypervisor_libvirt_conn_broke(CarrelLibvirtBackend *be)
{
    int code = virGetLastErrorCode();

    return (code == VIR_ERR_SYSTEM_ERROR || code == VIR_ERR_RPC || code == VIR_ERR_INTERNAL_ERROR ||
            code == VIR_ERR_NO_CONNECT) &&
           virConnectIsAlive(be->conn) != 1;
}

virDomainPtr
carrel_hypervisor_libvirt_lookup(CarrelLibvirtBackend *be, const char *name, GError **error)
{
    virDomainPtr dom = virDomainLookupByName(carrel_hypervisor_libvirt_conn(be), name);

    if (!dom && carrel_hypervisor_libvirt_conn_broke(be)) {
        virResetLastError();
        dom = virDomainLookupByName(carrel_hypervisor_libvirt_conn(be), name);
    }
    if (dom)
        return dom;
    if (virGetLastErrorCode() == VIR_ERR_NO_DOMAIN) {
        virResetLastError();
        g_set_error(error, CARREL_ERROR, CARREL_ERROR_NOT_FOUND, "domain does not exist");
        return NULL;
    }
    carrel_hypervisor_libvirt_set_error(error, "looking up domain");
    return NULL;
}

gboolean
carrel_hypervisor_libvirt_refuse_on_test(const CarrelLibvirtBackend *be, const char *what,
                                         GError **error)
{
    if (!be->is_test)
        return FALSE;
    g_set_error(error, CARREL_ERROR, CARREL_ERROR_UNSUPPORTED,
                "%s is not supported by libvirt's test driver", what);
    return TRUE;
}

static char *
format_version(unsigned long version)
{
    return g_strdup_printf("%lu.%lu.%lu", version / 1000000, version / 1000 % 1000, version % 1000);
}

static char *
lv_describe(CarrelHypervisor *hv)
{
    CarrelLibvirtBackend *be = hv->backend_data;
    unsigned long lib_version = 0;
    unsigned long hv_version = 0;
    const char *type = virConnectGetType(carrel_hypervisor_libvirt_conn(be));
    g_autofree char *lib_text = NULL;
    g_autofree char *hv_text = NULL;

    if (virConnectGetLibVersion(carrel_hypervisor_libvirt_conn(be), &lib_version) < 0 ||
        virConnectGetVersion(carrel_hypervisor_libvirt_conn(be), &hv_version) < 0 || !type) {
        virResetLastError();
        return g_strdup("libvirt (version unknown)");
    }
    lib_text = format_version(lib_version);
    hv_text = format_version(hv_version);
    return g_strdup_printf("libvirt %s, %s %s", lib_text, type, hv_text);
}

/* The user and group libvirt runs QEMU as: the DAC security model's base label. */
static gboolean
lv_qemu_owner(CarrelHypervisor *hv, guint *ret_uid, guint *ret_gid, GError **error)
{
    CarrelLibvirtBackend *be = hv->backend_data;
    char *caps = virConnectGetCapabilities(carrel_hypervisor_libvirt_conn(be));
    gboolean ok;

    if (!caps) {
        carrel_hypervisor_libvirt_set_error(error, "reading libvirt's capabilities");
        return FALSE;
    }
    ok = carrel_hypervisor_parse_qemu_owner(caps, ret_uid, ret_gid, error);
    free(caps);
    return ok;
}

static void
lv_close(CarrelHypervisor *hv)
{
    CarrelLibvirtBackend *be = hv->backend_data;

    if (!be)
        return;
    if (be->conn)
        virConnectClose(be->conn);
    g_ptr_array_unref(be->dead);
    g_mutex_clear(&be->conn_lock);
    g_hash_table_unref(be->no_runner);
    g_mutex_clear(&be->runner_lock);
    g_free(be->uri);
    g_free(be);
    hv->backend_data = NULL;
}

/* The network, defined from xml when absent; NULL with error set otherwise. */
static virNetworkPtr
lookup_or_define_network(CarrelLibvirtBackend *be, const char *name, const char *xml,
                         GError **error)
{
    virNetworkPtr net = virNetworkLookupByName(carrel_hypervisor_libvirt_conn(be), name);

    if (net)
        return net;
    if (virGetLastErrorCode() != VIR_ERR_NO_NETWORK) {
        carrel_hypervisor_libvirt_set_error(error, "looking up network");
        return NULL;
    }
    virResetLastError();
    net = virNetworkDefineXML(carrel_hypervisor_libvirt_conn(be), xml);
    if (net) {
        /* Best effort: carrel ensures it again before every session anyway. */
        (void)virNetworkSetAutostart(net, 1);
        virResetLastError();
        return net;
    }
    /* Another carreld may have defined it in between: use that one. */
    virResetLastError();
    net = virNetworkLookupByName(carrel_hypervisor_libvirt_conn(be), name);
    if (!net)
        carrel_hypervisor_libvirt_set_error(error, "defining network");
    return net;
}

static gboolean
lv_ensure_network(CarrelHypervisor *hv, const char *name, const char *xml, char **ret_xml,
                  GError **error)
{
    CarrelLibvirtBackend *be = hv->backend_data;
    g_autoptr(virNetwork) net = lookup_or_define_network(be, name, xml, error);
    char *desc;

    if (!net)
        return FALSE;
    /* Started by another process in between is as good as started here. */
    if (virNetworkIsActive(net) != 1 && virNetworkCreate(net) < 0 && virNetworkIsActive(net) != 1) {
        carrel_hypervisor_libvirt_set_error(error, "starting network");
        return FALSE;
    }
    virResetLastError();
    desc = virNetworkGetXMLDesc(net, 0);
    if (!desc) {
        carrel_hypervisor_libvirt_set_error(error, "reading network xml");
        return FALSE;
    }
    *ret_xml = g_strdup(desc);
    free(desc);
    return TRUE;
}

static const CarrelHypervisorOps libvirt_ops = {
    .define_start = carrel_hypervisor_libvirt_define_start,
    .start = carrel_hypervisor_libvirt_start,
    .shutdown = carrel_hypervisor_libvirt_shutdown,
    .destroy = carrel_hypervisor_libvirt_destroy,
    .undefine = carrel_hypervisor_libvirt_undefine,
    .get_state = carrel_hypervisor_libvirt_get_state,
    .get_pause_reason = carrel_hypervisor_libvirt_get_pause_reason,
    .disk_allocation = carrel_hypervisor_libvirt_disk_allocation,
    .cpu_time = carrel_hypervisor_libvirt_cpu_time,
    .agent_ping = carrel_hypervisor_libvirt_agent_ping,
    .list = carrel_hypervisor_libvirt_list,
    .describe = lv_describe,
    .close = lv_close,
    .define = carrel_hypervisor_libvirt_define,
    .persist = carrel_hypervisor_libvirt_persist,
    .save = carrel_hypervisor_libvirt_save,
    .snapshot_live = carrel_hypervisor_libvirt_snapshot_live,
    .restore = carrel_hypervisor_libvirt_restore,
    .set_time = carrel_hypervisor_libvirt_set_time,
    .fs_freeze = carrel_hypervisor_libvirt_fs_freeze,
    .pause = carrel_hypervisor_libvirt_pause,
    .agent_exec = carrel_hypervisor_libvirt_agent_exec,
    .screenshot = carrel_hypervisor_libvirt_screenshot,
    .file_read = carrel_hypervisor_libvirt_file_read,
    .file_write = carrel_hypervisor_libvirt_file_write,
    .hid_send = carrel_hypervisor_libvirt_hid_send,
    .hid_room = carrel_hypervisor_libvirt_hid_room,
    .ensure_network = lv_ensure_network,
    .set_balloon = carrel_hypervisor_libvirt_set_balloon,
    .spice_info = carrel_hypervisor_libvirt_spice_info,
    .spice_password = carrel_hypervisor_libvirt_spice_password,
    .vnc_socket = carrel_hypervisor_libvirt_vnc_socket,
    .qemu_owner = lv_qemu_owner,
};

static void
quiet_error_handler(void *user_data, virErrorPtr err)
{
    /* Silence: every error reaches the caller as a GError through
     * carrel_hypervisor_libvirt_set_error(). */
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
    CarrelLibvirtBackend *be;
    virConnectPtr conn;
    const char *type;

    g_return_val_if_fail(uri != NULL, NULL);
    g_once(&quiet_once, install_quiet_handler, NULL);
    conn = virConnectOpen(uri);
    if (!conn) {
        carrel_hypervisor_libvirt_set_error(error, "connecting");
        g_prefix_error(error, "libvirt '%s': ", uri);
        return NULL;
    }
    be = g_new0(CarrelLibvirtBackend, 1);
    be->conn = conn;
    be->uri = g_strdup(uri);
    be->dead = g_ptr_array_new_with_free_func(close_connection);
    g_mutex_init(&be->conn_lock);
    be->no_runner = g_hash_table_new_full(g_str_hash, g_str_equal, g_free, NULL);
    g_mutex_init(&be->runner_lock);
    type = virConnectGetType(conn);
    be->is_test = type && g_str_equal(type, "TEST");
    virResetLastError();
    return carrel_hypervisor_new_backend(&libvirt_ops, uri, be);
}
