/* hypervisor: internals shared by the module's own files and its unit test; not for other modules.
 */
#pragma once

#ifndef CARREL_HYPERVISOR_PRIV_H_ALLOW
#error "hypervisor-priv.h is private to the hypervisor module"
#endif

#include "hypervisor/hypervisor.h"

struct _CarrelHypervisor {
    const CarrelHypervisorOps *ops;
    char *uri;
    gpointer backend_data; /* owned by the backend; released by ops->close */
};

/* Wraps a backend: takes ownership of backend_data (released through ops->close). */
CarrelHypervisor *carrel_hypervisor_new_backend(const CarrelHypervisorOps *ops, const char *uri,
                                                gpointer backend_data);

/* True when text is a session id as carrel makes them: "s-" + 12 lowercase hex characters. */
gboolean carrel_hypervisor_is_session_id(const char *text);

/* True for prefix + 12 lowercase hex characters (instance ids use "i-"). */
gboolean carrel_hypervisor_is_carrel_id(const char *text, const char *prefix);

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

/* Largest XML text carrel_hypervisor_scan_xml accepts. */
#define CARREL_HYPERVISOR_SCAN_MAX_BYTES (256 * 1024)

/*
 * Boots kernel under qemu with the given accelerator and cpu model, reading the serial console
 * until it proves that the guest really runs ("Linux version", then "VFS:" or "Kernel panic")
 * or timeout_s passes. QEMU is always killed and reaped before returning. *ret_reason gets one
 * short line saying what happened.
 */
gboolean carrel_hypervisor_probe_boot(const char *qemu, const char *accel, const char *cpu,
                                      const char *kernel, guint timeout_s, char **ret_reason);

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

/* Validates the arguments of carrel_hypervisor_agent_exec (INVALID_ARG). */
gboolean carrel_hypervisor_exec_check_args(const char *const *argv, GBytes *stdin_bytes,
                                           guint timeout_s, gsize max_output, GError **error);

/* The guest-exec command running argv under `timeout --signal=KILL timeout_s`. */
char *carrel_hypervisor_agent_exec_command(const char *const *argv, GBytes *stdin_bytes,
                                           guint timeout_s);

/* The guest-exec-status command for pid. */
char *carrel_hypervisor_agent_status_command(gint64 pid);

/* A guest-exec killing the process group pid (the `timeout` wrapper leads one) and pid. */
char *carrel_hypervisor_agent_kill_command(gint64 pid);

/* The pid from an untrusted guest-exec reply; INVALID_ARG (LIMIT when too large) otherwise. */
gboolean carrel_hypervisor_agent_parse_pid(const char *reply, gint64 *ret_pid, GError **error);

/* One guest-exec-status reply, validated. */
typedef struct {
    gboolean exited;
    int exit_code; /* "exitcode", or 128 + "signal", or -1 when the agent gave neither */
    int signal;    /* 0 unless a signal ended the program */
    GBytes *out;   /* at most max_output bytes; never NULL once parsed */
    GBytes *err;
    gboolean truncated; /* cut here or by qemu-ga */
} CarrelExecStatus;

void carrel_exec_status_clear(CarrelExecStatus *status);
G_DEFINE_AUTO_CLEANUP_CLEAR_FUNC(CarrelExecStatus, carrel_exec_status_clear)

/*
 * Parses an untrusted guest-exec-status reply ({"return": {...}}) into *ret_status, which must
 * be cleared. Output data must be padded base64; only what max_output needs is decoded. LIMIT
 * when reply exceeds CARREL_HYPERVISOR_AGENT_REPLY_MAX, INVALID_ARG when malformed.
 */
gboolean carrel_hypervisor_agent_parse_status(const char *reply, gsize max_output,
                                              CarrelExecStatus *ret_status, GError **error);

/* The builder's root as compact JSON text (guest-agent and QMP commands). */
char *carrel_hypervisor_json_text(JsonBuilder *builder);

/*
 * The node under "return" of an untrusted guest-agent reply (the parser owns it): LIMIT above
 * CARREL_HYPERVISOR_AGENT_REPLY_MAX, INVALID_ARG when malformed or without "return".
 */
JsonNode *carrel_hypervisor_agent_reply_return(JsonParser *parser, const char *reply,
                                               GError **error);

/* Integer member name of an agent reply within min..max; *ret_present says whether it is there. */
gboolean carrel_hypervisor_agent_get_int(JsonObject *obj, const char *name, gint64 min, gint64 max,
                                         gboolean *ret_present, gint64 *ret_value, GError **error);

/* Boolean member name of an agent reply (FALSE when absent). */
gboolean carrel_hypervisor_agent_get_bool(JsonObject *obj, const char *name, gboolean *ret_value,
                                          GError **error);

/* Decodes the padded base64 member name (absent = empty), keeping at most max_output bytes and
 * setting *truncated when there was more. */
gboolean carrel_hypervisor_agent_get_base64(JsonObject *obj, const char *name, gsize max_output,
                                            GBytes **ret_bytes, gboolean *truncated,
                                            GError **error);

/* guest-file-* commands: open path with mode ("r" or "w"), read up to count bytes, write data
 * (base64-encoded here), close. */
char *carrel_hypervisor_agent_file_open_command(const char *path, const char *mode);
char *carrel_hypervisor_agent_file_read_command(gint64 handle, gsize count);
char *carrel_hypervisor_agent_file_write_command(gint64 handle, const guint8 *data, gsize len);
char *carrel_hypervisor_agent_file_close_command(gint64 handle);

/*
 * Pure: the code of a failed guest-file-open from libvirt's code and text. qemu-ga gives the
 * errno only in words (a GenericError ending in strerror's text, which libvirt passes on as an
 * internal error), so this reads that text where libvirt's error becomes ours, once: a guest
 * with no such file is NOT_FOUND (the API answers 404); anything else keeps code.
 */
CarrelErrorCode carrel_hypervisor_agent_file_open_code(CarrelErrorCode code,
                                                       const char *libvirt_text);

/* The handle of an untrusted guest-file-open reply. */
gboolean carrel_hypervisor_agent_parse_file_handle(const char *reply, gint64 *ret_handle,
                                                   GError **error);

/*
 * An untrusted guest-file-read reply: at most max bytes (more is INVALID_ARG: the agent sent
 * more than asked), and whether the end of the file was reached.
 */
gboolean carrel_hypervisor_agent_parse_file_read(const char *reply, gsize max, GBytes **ret_data,
                                                 gboolean *ret_eof, GError **error);

/* The byte count of an untrusted guest-file-write reply (0..max). */
gboolean carrel_hypervisor_agent_parse_file_write(const char *reply, gsize max, gsize *ret_count,
                                                  GError **error);

/* Sets a CARREL_ERROR for errno errsv: NOT_FOUND, EXISTS or HYPERVISOR, "what: strerror". */
void carrel_hypervisor_set_errno_error(GError **error, int errsv, const char *what);

/*
 * Pure: from a domain's live XML (bounded, parsed with GMarkup), its SPICE port (0 while QEMU
 * has not started: libvirt says -1) and run id (<domain id>, -1 when inactive) into *ret_info,
 * and in *ret_graphics its <graphics type='spice'> element re-serialised with passwd,
 * passwdValidTo (valid_until as UTC) and connected='keep' in place of any such attributes
 * (password NULL: none added). UNSUPPORTED without a SPICE display, HYPERVISOR with two,
 * INVALID_ARG for malformed XML. Every output is optional.
 */
gboolean carrel_hypervisor_spice_scan(const char *xml, const char *password, gint64 valid_until,
                                      CarrelSpiceInfo *ret_info, char **ret_graphics,
                                      GError **error);
