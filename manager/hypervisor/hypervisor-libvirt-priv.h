/*
 * hypervisor: what the files of the libvirt backend (hypervisor-libvirt*.c) share; not for the
 * module's other files. The entries of the operations table are carrel_hypervisor_libvirt_<op>,
 * each with the contract of carrel_hypervisor_<op> in hypervisor.h.
 */
#pragma once

#ifndef CARREL_HYPERVISOR_PRIV_H_ALLOW
#error "hypervisor-libvirt-priv.h is private to the hypervisor module"
#endif

#include <libvirt/libvirt.h>
#include <libvirt/libvirt-qemu.h>
#include <libvirt/virterror.h>

#include "hypervisor/hypervisor-priv.h"

G_DEFINE_AUTOPTR_CLEANUP_FUNC(virDomain, virDomainFree)
G_DEFINE_AUTOPTR_CLEANUP_FUNC(virStream, virStreamFree)
G_DEFINE_AUTOPTR_CLEANUP_FUNC(virNetwork, virNetworkFree)
G_DEFINE_AUTOPTR_CLEANUP_FUNC(virDomainSnapshot, virDomainSnapshotFree)

/* The backend_data of a libvirt CarrelHypervisor. */
typedef struct {
    virConnectPtr conn; /* through carrel_hypervisor_libvirt_conn, never directly */
    GMutex conn_lock;   /* guards conn and dead */
    GPtrArray *dead;    /* connections replaced after libvirtd restarted (see _conn) */
    char *uri;
    gboolean is_test;       /* the test driver: no guest runs, so there is no agent either */
    gint screendump_misses; /* fast screenshots failed in a row where libvirt's worked */
    GMutex runner_lock;     /* guards no_runner */
    GHashTable *no_runner;  /* names of domains whose guest has no carrel-run (exec's wrapper) */
} CarrelLibvirtBackend;

/*
 * The connection, opened again when libvirtd restarted (guests run on; carreld must not need a
 * restart too). A replaced connection is kept until the backend closes: another thread may be
 * in a call on it, which then fails and is retried by its caller.
 */
virConnectPtr carrel_hypervisor_libvirt_conn(CarrelLibvirtBackend *be);
/* TRUE when the last libvirt error came from a broken connection (worth one retry). */
gboolean carrel_hypervisor_libvirt_conn_broke(CarrelLibvirtBackend *be);

/*
 * The one place libvirt errors become GError; consumes the thread's last libvirt error. With
 * guest_file the failure was a guest-file-open, whose reason the guest gives only in words.
 */
void carrel_hypervisor_libvirt_set_error_full(GError **error, const char *what,
                                              gboolean guest_file);

/* carrel_hypervisor_libvirt_set_error_full for every call but guest-file-open. */
void carrel_hypervisor_libvirt_set_error(GError **error, const char *what);

/* The domain name; NOT_FOUND (without libvirt's words) when there is none. */
virDomainPtr carrel_hypervisor_libvirt_lookup(CarrelLibvirtBackend *be, const char *name,
                                              GError **error);

/* TRUE, with UNSUPPORTED, on the test driver, which cannot do what (it runs no guest). */
gboolean carrel_hypervisor_libvirt_refuse_on_test(const CarrelLibvirtBackend *be, const char *what,
                                                  GError **error);

/* hypervisor-libvirt-agent.c: forgets what exec learnt of the domain name (it was undefined). */
void carrel_hypervisor_libvirt_agent_forget(CarrelLibvirtBackend *be, const char *name);

/* hypervisor-libvirt-domain.c: domains, lifecycle, save and restore. */
gboolean carrel_hypervisor_libvirt_define_start(CarrelHypervisor *hv, const char *xml,
                                                GError **error);
gboolean carrel_hypervisor_libvirt_start(CarrelHypervisor *hv, const char *name, GError **error);
gboolean carrel_hypervisor_libvirt_shutdown(CarrelHypervisor *hv, const char *name, guint timeout_s,
                                            GError **error);
gboolean carrel_hypervisor_libvirt_destroy(CarrelHypervisor *hv, const char *name, GError **error);
gboolean carrel_hypervisor_libvirt_undefine(CarrelHypervisor *hv, const char *name, GError **error);
gboolean carrel_hypervisor_libvirt_get_state(CarrelHypervisor *hv, const char *name,
                                             CarrelDomainState *ret_state, GError **error);
gboolean carrel_hypervisor_libvirt_cpu_time(CarrelHypervisor *hv, const char *name, guint64 *ret_ns,
                                            GError **error);
gboolean carrel_hypervisor_libvirt_disk_allocation(CarrelHypervisor *hv, const char *name,
                                                   guint64 *ret_bytes, GError **error);
gboolean carrel_hypervisor_libvirt_get_pause_reason(CarrelHypervisor *hv, const char *name,
                                                    CarrelPauseReason *ret_reason, GError **error);
GPtrArray *carrel_hypervisor_libvirt_list(CarrelHypervisor *hv, GError **error);
gboolean carrel_hypervisor_libvirt_define(CarrelHypervisor *hv, const char *xml, GError **error);
gboolean carrel_hypervisor_libvirt_persist(CarrelHypervisor *hv, const char *name, GError **error);
gboolean carrel_hypervisor_libvirt_snapshot_live(CarrelHypervisor *hv, const char *name,
                                                 const char *memory_path, const char *top_path,
                                                 GError **error);
gboolean carrel_hypervisor_libvirt_save(CarrelHypervisor *hv, const char *name, const char *path,
                                        GError **error);
gboolean carrel_hypervisor_libvirt_restore(CarrelHypervisor *hv, const char *path, const char *xml,
                                           GError **error);
gboolean carrel_hypervisor_libvirt_pause(CarrelHypervisor *hv, const char *name, gboolean pause,
                                         GError **error);
gboolean carrel_hypervisor_libvirt_set_balloon(CarrelHypervisor *hv, const char *name,
                                               guint target_mib, guint timeout_s,
                                               guint *ret_actual_mib, GError **error);

/* hypervisor-libvirt-agent.c: the guest agent. */
gboolean carrel_hypervisor_libvirt_agent_ping(CarrelHypervisor *hv, const char *name,
                                              guint timeout_s, GError **error);
gboolean carrel_hypervisor_libvirt_set_time(CarrelHypervisor *hv, const char *name, GError **error);
gboolean carrel_hypervisor_libvirt_fs_freeze(CarrelHypervisor *hv, const char *name,
                                             gboolean freeze, GError **error);
gboolean carrel_hypervisor_libvirt_agent_exec(CarrelHypervisor *hv, const char *name,
                                              const CarrelGuestExec *run,
                                              CarrelExecResult *ret_result, GError **error);
gboolean carrel_hypervisor_libvirt_file_read(CarrelHypervisor *hv, const char *name,
                                             const char *path, guint64 max,
                                             CarrelHypervisorChunkFunc sink, gpointer sink_data,
                                             GError **error);
gboolean carrel_hypervisor_libvirt_file_write(CarrelHypervisor *hv, const char *name,
                                              const char *path, CarrelHypervisorSourceFunc source,
                                              gpointer source_data, GError **error);

/*
 * hypervisor-libvirt-screendump.c: the primary screen as QEMU's PPM, written by QEMU into a
 * memfd passed with QMP add-fd (no PNG encoding in QEMU, no copy through libvirt's stream).
 * HYPERVISOR when QEMU or libvirt refuses (the caller then asks virDomainScreenshot), LIMIT
 * beyond CARREL_HYPERVISOR_SCREENSHOT_MAX. The image is not validated here.
 */
gboolean carrel_hypervisor_libvirt_screendump(virDomainPtr dom, GBytes **ret_image, GError **error);

/* hypervisor-libvirt-display.c: screen, SPICE and HID events. */
gboolean carrel_hypervisor_libvirt_screenshot(CarrelHypervisor *hv, const char *name,
                                              GBytes **ret_image, GError **error);
gboolean carrel_hypervisor_libvirt_vnc_socket(CarrelHypervisor *hv, const char *name,
                                              char **ret_path, GError **error);
gboolean carrel_hypervisor_libvirt_spice_info(CarrelHypervisor *hv, const char *name,
                                              CarrelSpiceInfo *ret_info, GError **error);
gboolean carrel_hypervisor_libvirt_spice_password(CarrelHypervisor *hv, const char *name,
                                                  const char *password, gint64 valid_until,
                                                  GError **error);
gboolean carrel_hypervisor_libvirt_hid_room(CarrelHypervisor *hv, const char *name,
                                            CarrelHidDevice device, char **where, guint *ret_free,
                                            GError **error);
gboolean carrel_hypervisor_libvirt_hid_send(CarrelHypervisor *hv, const char *name,
                                            const char *command, GError **error);
