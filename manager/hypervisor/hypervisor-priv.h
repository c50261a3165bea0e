/* hypervisor: internals shared by the module's own files and its unit test; not for other modules.
 */
#pragma once

#ifndef CARREL_HYPERVISOR_PRIV_H_ALLOW
#error "hypervisor-priv.h is private to the hypervisor module"
#endif

#define CARREL_HYPERVISOR_BACKEND_H_ALLOW
#include "hypervisor/hypervisor-backend.h"

/* The fixed part of a libvirt QEMU save image (libvirt's src/qemu/qemu_saveimage.h). */
typedef struct {
    guint32 version;       /* always 2 (older and foreign-endian images are refused) */
    guint32 data_len;      /* bytes after the header before the memory stream */
    guint32 was_running;   /* libvirt's own "start running" flag; restore overrides it */
    guint32 format;        /* 0 = raw; compressed images are refused */
    guint32 cookie_offset; /* of the cookie XML within the data; 0 = no cookie */
} CarrelSaveImageHeader;

/* Size of that fixed part on disk: 16-byte magic, 5 + 14 unused 32-bit words. */
#define CARREL_SAVEIMAGE_HEADER_SIZE 92
/* Largest data_len accepted (libvirt writes the XML with 64 KiB of room). */
#define CARREL_SAVEIMAGE_MAX_DATA_LEN (16 * 1024 * 1024)

/*
 * Reads and validates the header of a QEMU save image on fd (with pread; the offset is not
 * used): magic "LibvirtQemudSave" (an incomplete "LibvirtQemudPart" is refused), version 2 in
 * host byte order, raw format, 0 < data_len <= CARREL_SAVEIMAGE_MAX_DATA_LEN and within the
 * file, the domain XML NUL-terminated and valid UTF-8, cookie_offset 0 or inside the data with
 * a NUL-terminated cookie there. INVALID_ARG for anything malformed, UNSUPPORTED for valid but
 * unusable images (compressed, other version or byte order). Every output is optional; the
 * cookie is NULL when the image has none.
 */
gboolean carrel_hypervisor_saveimage_read_header(int fd, CarrelSaveImageHeader *ret_header,
                                                 char **ret_xml, char **ret_cookie, GError **error);

/*
 * Replaces the domain XML inside the save image on fd (opened read-write) with new_xml, keeping
 * data_len, so the memory stream does not move: the data becomes new_xml, NUL, the old cookie,
 * NUL (cookie_offset updated), zeros. LIMIT when that does not fit into data_len. The image is
 * first marked incomplete and only marked complete again once the new data is written, each
 * step followed by fsync: a crash in between leaves an image that read_header and libvirt refuse
 * (remake it), never one with a torn XML. Not safe against concurrent readers or writers of the
 * same file: callers serialise per file.
 */
gboolean carrel_hypervisor_saveimage_rewrite_xml(int fd, const char *new_xml, GError **error);

/* A page of the RAM block taken out of a migration stream: PAGE bytes at offset into the
 * block (of block_size bytes), or, page NULL, a page of fill bytes. FALSE with error stops. */
typedef gboolean (*CarrelRamPageFunc)(guint64 block_size, guint64 offset, const guint8 *page,
                                      guint8 fill, gpointer user_data, GError **error);

/*
 * Splits QEMU's migration stream (len bytes from "QEVM") of a source that ran with
 * x-ignore-shared: the pages of the RAM block named block go to page, in stream order (a page
 * sent twice comes twice, the later one wins), everything else is appended to out, which QEMU
 * then loads as the device state (the block's pages taken from a file it maps). The block's
 * size in *ret_block_size. UNSUPPORTED for a stream this does not know (hypervisor-migstream.c),
 * or whatever page said; out then holds part of the stream.
 */
gboolean carrel_hypervisor_migstream_split(const guint8 *stream, gsize len, const char *block,
                                           GByteArray *out, guint64 *ret_block_size,
                                           CarrelRamPageFunc page, gpointer user_data,
                                           GError **error);

/* The QMP command of a step, {"execute":"input-send-event","arguments":...}; NULL for a pause. */
char *carrel_hypervisor_hid_command(const CarrelHidStep *step);

/* A plan as text, one step per line: the arguments JSON, or "delay MS". For tests and logs. */
char *carrel_hypervisor_hid_plan_to_text(GPtrArray *plan);

/* True when text is a session id as carrel makes them: "s-" + 12 lowercase hex characters. */
gboolean carrel_hypervisor_is_session_id(const char *text);

/* True for prefix + 12 lowercase hex characters (instance ids use "i-"). */
gboolean carrel_hypervisor_is_carrel_id(const char *text, const char *prefix);

/*
 * Boots kernel under qemu with the given accelerator and cpu model, reading the serial console
 * until it proves that the guest really runs ("Linux version", then "VFS:" or "Kernel panic")
 * or timeout_s passes. QEMU is always killed and reaped before returning. *ret_reason gets one
 * short line saying what happened.
 */
gboolean carrel_hypervisor_probe_boot(const char *qemu, const char *accel, const char *cpu,
                                      const char *kernel, guint timeout_s, char **ret_reason);

/* Validates the arguments of carrel_hypervisor_agent_exec (INVALID_ARG). */
gboolean carrel_hypervisor_exec_check_args(const char *const *argv, GBytes *stdin_bytes,
                                           guint timeout_s, gsize max_output, GError **error);

/*
 * The guest-exec command running argv under the guest's deadline wrapper: with_runner,
 * `CARREL_HYPERVISOR_EXEC_RUNNER timeout_s argv...`; without, `timeout --signal=KILL timeout_s
 * argv...` (coreutils, for templates without carrel-run).
 */
char *carrel_hypervisor_agent_exec_command(const char *const *argv, GBytes *stdin_bytes,
                                           guint timeout_s, gboolean with_runner);

/*
 * TRUE when message (libvirt's, quoting qemu-ga's spawn error) says guest-exec could not start
 * CARREL_HYPERVISOR_EXEC_RUNNER itself: the template has no carrel-run, so timeout(1) it is.
 */
gboolean carrel_hypervisor_agent_runner_missing(const char *message);

/* The guest-exec-status command for pid. */
char *carrel_hypervisor_agent_status_command(gint64 pid);

/* A guest-exec killing the process group pid (the deadline wrapper makes pid lead one) and pid. */
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

/* The value of attribute want in a GMarkup start element's names/values, or NULL. */
const char *carrel_hypervisor_markup_attr(const char **names, const char **values,
                                          const char *want);

/* Pure: the unix socket path of a domain's VNC display from its live XML (bounded):
 * <graphics type='vnc' socket=...> or its <listen type='socket' socket=...>. UNSUPPORTED
 * without one, INVALID_ARG for malformed XML. */
gboolean carrel_hypervisor_vnc_scan(const char *xml, char **ret_path, GError **error);
