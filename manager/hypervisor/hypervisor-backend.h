/*
 * hypervisor: the table of operations behind CarrelHypervisor, for the module's backends (libvirt)
 * and the test doubles under tests/fake/; core and the daemon never see it. The dispatchers in
 * hypervisor-ops.c check arguments and add context, so a backend implements only the call.
 */
#pragma once

#ifndef CARREL_HYPERVISOR_BACKEND_H_ALLOW
#error "hypervisor-backend.h is for hypervisor backends only"
#endif

#include "hypervisor/hypervisor.h"

G_BEGIN_DECLS

/* Receives a guest file's bytes chunk by chunk; FALSE (with error) stops the copy. */
typedef gboolean (*CarrelHypervisorChunkFunc)(const guint8 *data, gsize len, gpointer user_data,
                                              GError **error);
/* Fills buf with up to max bytes of a file to write; *ret_len 0 means the end. FALSE (with
 * error) stops the copy. */
typedef gboolean (*CarrelHypervisorSourceFunc)(guint8 *buf, gsize max, gsize *ret_len,
                                               gpointer user_data, GError **error);

/*
 * One entry per call of hypervisor.h, with the contract said there (carrel_hypervisor_<op>).
 * Every entry is synchronous and thread-safe; the error is the backend's, without the domain
 * context the dispatcher adds.
 */
typedef struct {
    gboolean (*define_start)(CarrelHypervisor *hv, const char *xml, GError **error);
    gboolean (*start)(CarrelHypervisor *hv, const char *name, GError **error);
    gboolean (*shutdown)(CarrelHypervisor *hv, const char *name, guint timeout_s, GError **error);
    gboolean (*destroy)(CarrelHypervisor *hv, const char *name, GError **error);
    gboolean (*undefine)(CarrelHypervisor *hv, const char *name, GError **error);
    gboolean (*get_state)(CarrelHypervisor *hv, const char *name, CarrelDomainState *ret_state,
                          GError **error);
    gboolean (*disk_allocation)(CarrelHypervisor *hv, const char *name, guint64 *ret_bytes,
                                GError **error);
    gboolean (*cpu_time)(CarrelHypervisor *hv, const char *name, guint64 *ret_ns, GError **error);
    gboolean (*get_pause_reason)(CarrelHypervisor *hv, const char *name,
                                 CarrelPauseReason *ret_reason, GError **error);
    gboolean (*agent_ping)(CarrelHypervisor *hv, const char *name, guint timeout_s, GError **error);
    GPtrArray *(*list)(CarrelHypervisor *hv, GError **error);
    char *(*describe)(CarrelHypervisor *hv);
    /* Releases backend_data (called once, by carrel_hypervisor_free). */
    void (*close)(CarrelHypervisor *hv);
    gboolean (*define)(CarrelHypervisor *hv, const char *xml, GError **error);
    gboolean (*persist)(CarrelHypervisor *hv, const char *name, GError **error);
    gboolean (*save)(CarrelHypervisor *hv, const char *name, const char *path, GError **error);
    gboolean (*snapshot_live)(CarrelHypervisor *hv, const char *name, const char *memory_path,
                              const char *top_path, GError **error);
    gboolean (*restore)(CarrelHypervisor *hv, const char *path, const char *xml, GError **error);
    gboolean (*set_time)(CarrelHypervisor *hv, const char *name, GError **error);
    gboolean (*fs_freeze)(CarrelHypervisor *hv, const char *name, gboolean freeze, GError **error);
    gboolean (*pause)(CarrelHypervisor *hv, const char *name, gboolean pause, GError **error);
    /* run already checked (carrel_hypervisor_exec_check_args); ret_result arrives zeroed and
     * is filled whole on success. */
    gboolean (*agent_exec)(CarrelHypervisor *hv, const char *name, const CarrelGuestExec *run,
                           CarrelExecResult *ret_result, GError **error);
    /* The primary screen as the hypervisor encodes it (PNG or binary PPM, at most
     * CARREL_HYPERVISOR_SCREENSHOT_MAX bytes); the dispatcher decodes and validates it. */
    gboolean (*screenshot)(CarrelHypervisor *hv, const char *name, GBytes **ret_image,
                           GError **error);
    /* Hands the file to sink in chunks, LIMIT beyond max bytes; see carrel_hypervisor_file_read. */
    gboolean (*file_read)(CarrelHypervisor *hv, const char *name, const char *path, guint64 max,
                          CarrelHypervisorChunkFunc sink, gpointer sink_data, GError **error);
    /* Takes the file from source in chunks of up to CARREL_HYPERVISOR_FILE_CHUNK. */
    gboolean (*file_write)(CarrelHypervisor *hv, const char *name, const char *path,
                           CarrelHypervisorSourceFunc source, gpointer source_data, GError **error);
    /* Sends one QMP input-send-event command (from carrel_hypervisor_hid_command) to QEMU. */
    gboolean (*hid_send)(CarrelHypervisor *hv, const char *name, const char *command,
                         GError **error);
    /* Buffers of device's input queue that the guest has handed over and QEMU not used yet: how
     * many events can be sent now without QEMU dropping them. *where is the backend's note of
     * the device, NULL at first, kept by the caller for one plan (freed with g_free).
     * On any error (UNSUPPORTED: the backend cannot tell) input is sent unpaced. May be NULL. */
    gboolean (*hid_room)(CarrelHypervisor *hv, const char *name, CarrelHidDevice device,
                         char **where, guint *ret_free, GError **error);
    gboolean (*ensure_network)(CarrelHypervisor *hv, const char *name, const char *xml,
                               char **ret_xml, GError **error);
    gboolean (*set_balloon)(CarrelHypervisor *hv, const char *name, guint target_mib,
                            guint timeout_s, guint *ret_actual_mib, GError **error);
    gboolean (*spice_info)(CarrelHypervisor *hv, const char *name, CarrelSpiceInfo *ret_info,
                           GError **error);
    gboolean (*spice_password)(CarrelHypervisor *hv, const char *name, const char *password,
                               gint64 valid_until, GError **error);
    /* The unix socket of the domain's VNC display (the screen's change signal). May be NULL. */
    gboolean (*vnc_socket)(CarrelHypervisor *hv, const char *name, char **ret_path, GError **error);
    /* NULL when the backend runs no QEMU of its own (the dispatcher says UNSUPPORTED). */
    gboolean (*qemu_owner)(CarrelHypervisor *hv, guint *ret_uid, guint *ret_gid, GError **error);
} CarrelHypervisorOps;

struct _CarrelHypervisor {
    const CarrelHypervisorOps *ops;
    char *uri;
    char *scratch_dir;     /* NULL: the system's temporary folder */
    gpointer backend_data; /* owned by the backend; released by ops->close */
    guint hid_wait_ms;     /* CARREL_HID_ROOM_WAIT_MS; tests shorten it */
};

/* Wraps a backend: takes ownership of backend_data (released through ops->close). */
CarrelHypervisor *carrel_hypervisor_new_backend(const CarrelHypervisorOps *ops, const char *uri,
                                                gpointer backend_data);

/*
 * Scans domain XML (a whole <domain>, or the <session> element libvirt returns for our
 * metadata) for the domain name and carrel's session id. Inside a <domain>, only a <session>
 * declaring CARREL_XMLNS_SESSION counts; a root <session> is taken as ours, since libvirt
 * selected it by that namespace and returns it without. The text is treated as untrusted:
 * it is bounded, parsed with GMarkup, and the id is returned only when it has the session-id
 * shape. Either output is NULL when absent. FALSE with INVALID_ARG when the XML is malformed.
 */
gboolean carrel_hypervisor_scan_xml(const char *xml, char **ret_name, char **ret_session_id,
                                    char **ret_instance_id, GError **error);

/* The source file of domain XML's first <disk device="disk">, absolute; NULL when absent or
 * malformed (the same bounds as carrel_hypervisor_scan_xml). */
char *carrel_hypervisor_scan_disk_source(const char *xml);

/* Largest XML text carrel_hypervisor_scan_xml accepts. */
#define CARREL_HYPERVISOR_SCAN_MAX_BYTES (256 * 1024)

/*
 * Writes a new save image at path (created 0600, never over an existing file: EXISTS): the
 * header, xml, cookie (optional) and libvirt's 64 KiB of room, then memory as the memory
 * stream. For the fake backend and tests; real images come from libvirt.
 */
gboolean carrel_hypervisor_saveimage_create(const char *path, const char *xml, const char *cookie,
                                            GBytes *memory, GError **error);

/* Opens the save image at path read-write (no symlinks) and rewrites its domain XML. */
gboolean carrel_hypervisor_saveimage_rewrite_file(const char *path, const char *xml,
                                                  GError **error);

G_END_DECLS
