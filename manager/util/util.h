/* util: GLib helpers shared by every module (GLib only, no logging). */
#pragma once

#include <gio/gio.h>

G_BEGIN_DECLS

#define CARREL_ERROR (carrel_error_quark())

/* One error domain for the whole manager; api/ maps each code to an HTTP status. */
typedef enum {
    CARREL_ERROR_FAILED,
    CARREL_ERROR_INVALID_ARG,
    CARREL_ERROR_NOT_FOUND,
    CARREL_ERROR_EXISTS,
    CARREL_ERROR_WRONG_STATE,
    CARREL_ERROR_POLICY_DENIED,
    CARREL_ERROR_UNAUTHORIZED,
    CARREL_ERROR_FORBIDDEN,
    CARREL_ERROR_LIMIT,
    CARREL_ERROR_UNSUPPORTED,
    CARREL_ERROR_TIMEOUT,
    CARREL_ERROR_HYPERVISOR,
    CARREL_ERROR_DISK,
    CARREL_ERROR_STORE,
    CARREL_ERROR_INTERNAL,
    /* Another operation holds the object right now: the same request may succeed later. */
    CARREL_ERROR_BUSY,
    /* The host's disk (carreld's state dir) is full or below its reserve: free space, retry. */
    CARREL_ERROR_NO_SPACE,
    /* A per-token limit ([limits]: sessions, concurrent creates, request rate): retry later. */
    CARREL_ERROR_RATE_LIMITED,
    /* carreld has too many requests of this kind queued already: retry later. */
    CARREL_ERROR_OVERLOADED,
    /* It existed and is gone for good (a pruned screenshot, a used console ticket): 410. */
    CARREL_ERROR_GONE,
    CARREL_ERROR_LAST
} CarrelErrorCode;

GQuark carrel_error_quark(void);

/* Stable wire name of a code ("not_found"); "failed" for out-of-range values. */
const char *carrel_error_code_to_string(CarrelErrorCode code);

/* Parses a wire name back; returns CARREL_ERROR_FAILED for unknown names. */
CarrelErrorCode carrel_error_code_from_string(const char *name);

/* Limits on everything a user or a guest controls. */
#define CARREL_LIMIT_NAME_LEN 63
#define CARREL_LIMIT_BODY_BYTES (1024 * 1024)
/* Largest file moved in one request (file upload body, file download). */
#define CARREL_LIMIT_FILE_BYTES (32 * 1024 * 1024)
/* Largest file streamed by PUT/GET /v1/sessions/{id}/files (spooled on the host's disk, sent
 * to or read from the guest in chunks, never held in memory). */
#define CARREL_LIMIT_TRANSFER_BYTES (G_GUINT64_CONSTANT(1024) * 1024 * 1024)
/* Artifacts: default and hard limits of one extraction. */
#define CARREL_LIMIT_EXTRACT_BYTES (G_GUINT64_CONSTANT(1024) * 1024 * 1024)
#define CARREL_LIMIT_EXTRACT_MAX_MIB (16 * 1024)
#define CARREL_LIMIT_EXTRACT_FILES 10000
#define CARREL_LIMIT_EXTRACT_MAX_FILES 1000000
#define CARREL_LIMIT_EXTRACT_PATHS 256
/* Named policies one token may be limited to. */
#define CARREL_LIMIT_TOKEN_POLICIES 64
/* Task inputs: items per create request, and the size of one upload (a tar). */
#define CARREL_LIMIT_INPUTS 256
#define CARREL_LIMIT_UPLOAD_BYTES (256 * 1024 * 1024)
#define CARREL_LIMIT_VCPUS 16
/* Longest time limit or idle timeout (30 days). */
#define CARREL_LIMIT_TTL_S (30 * 24 * 3600)
/* Highest [limits] sessions= and creates= per token, and rate= and burst= (requests). */
#define CARREL_LIMIT_TOKEN_SESSIONS 100000
#define CARREL_LIMIT_TOKEN_RATE 1000000
/* Sessions a template's warm pool keeps. */
#define CARREL_LIMIT_POOL 8
/* Sessions one fork request makes. */
#define CARREL_LIMIT_FORKS 16
#define CARREL_LIMIT_MEMORY_MIB (64 * 1024)
/* Largest [resources] max_disk_gib of a policy. */
#define CARREL_LIMIT_DISK_GIB (16 * 1024)
#define CARREL_LIMIT_MIN_MEMORY_MIB 128
#define CARREL_LIMIT_VIRTUAL_SIZE_BYTES (G_GUINT64_CONSTANT(2) * 1024 * 1024 * 1024 * 1024)
#define CARREL_LIMIT_CMDLINE_LEN 1024
#define CARREL_LIMIT_SUBPROCESS_OUTPUT (4 * 1024 * 1024)
#define CARREL_LIMIT_JSON_DEPTH 32

/*
 * The to/from-string tables of carrel's enums: names[value] for 0 <= value < count. to_string
 * gives "unknown" outside the table; from_string gives count (the _LAST sentinel) for names it
 * does not know, NULL included.
 */
const char *carrel_util_enum_to_string(const char *const *names, int count, int value);
int carrel_util_enum_from_string(const char *const *names, int count, const char *name);

/* Fills buf with len bytes from the kernel's random source (getrandom). */
void carrel_util_random_bytes(guint8 *buf, gsize len);

/* Returns a new random id with a prefix: "s-" + 12 lowercase hex characters. */
char *carrel_util_new_id(const char *prefix);

/* Returns 32 random bytes as 64 hex characters (tokens). */
char *carrel_util_new_token(void);

/* TRUE when text[0..len) is standard base64 in whole, padded groups of four (what GLib and
 * qemu-ga write); g_base64_decode itself accepts anything. */
gboolean carrel_util_is_base64(const char *text, gsize len);

/* Longest guest path accepted. */
#define CARREL_LIMIT_GUEST_PATH 4096

/*
 * Checks a path inside a guest given by a client: absolute, at most CARREL_LIMIT_GUEST_PATH
 * bytes, valid UTF-8 without control characters, and no "." or ".." segment (no traversal to
 * hide where a file really goes). INVALID_ARG otherwise.
 */
gboolean carrel_util_check_guest_path(const char *path, GError **error);

/* Hex sha256 of a string. */
char *carrel_util_sha256_string(const char *text);

/* Hex sha256 of a file's contents, streamed. */
char *carrel_util_sha256_file(const char *path, GError **error);

/* Constant-time comparison of two NUL-terminated strings. */
gboolean carrel_util_secure_equal(const char *a, const char *b);

/* Current time as RFC 3339 UTC text, and a unix time as the same. */
char *carrel_util_format_time(gint64 unix_seconds);
gint64 carrel_util_now(void);

/* Creates dir (and parents) with mode; fails if it exists as a non-directory. */
gboolean carrel_util_ensure_dir(const char *path, int mode, GError **error);

/* Removes a directory tree without following symlinks; missing is success. */
gboolean carrel_util_remove_tree(const char *path, GError **error);

/*
 * Copies a regular file (refusing symlinks and non-regular files) to dest, created with mode.
 * Whatever went wrong with dest (created, written, synced) is CARREL_ERROR_DISK; what went wrong
 * with src is any other error, so a caller whose src came from a user can tell the two apart.
 */
gboolean carrel_util_copy_file(const char *src, const char *dest, int mode, GError **error);

/* Writes contents atomically with mode (tmp file + rename, fsync). */
gboolean carrel_util_write_file(const char *path, const char *contents, gssize len, int mode,
                                GError **error);
/* Like carrel_util_write_file for a new file that a crash may lose (a kept screenshot): written
 * whole under a temporary name and renamed, but not synced to disk, which on a busy host costs
 * more than the rest of a screenshot. */
gboolean carrel_util_write_new_file(const char *path, const char *contents, gssize len, int mode,
                                    GError **error);

/*
 * Runs argv to completion with a timeout (0 = none), capturing stdout and stderr up to
 * CARREL_LIMIT_SUBPROCESS_OUTPUT each. Fails with context (program, exit status, stderr tail)
 * when the program cannot start, times out (killed) or exits non-zero.
 */
gboolean carrel_util_run(const char *const *argv, guint timeout_s, char **ret_stdout,
                         char **ret_stderr, GError **error);

/*
 * Like carrel_util_run, but a program that ran to its end is a success whatever its exit
 * status, returned in *ret_status (for tools whose statuses carry meaning, like qemu-img check).
 * Fails when it cannot start, is killed by a signal, or times out.
 */
gboolean carrel_util_run_status(const char *const *argv, guint timeout_s, int *ret_status,
                                char **ret_stdout, char **ret_stderr, GError **error);

/*
 * Guards json-glib, which parses recursively without a depth limit (a megabyte of '[' overflows
 * the stack), cuts strings at the escape \u0000 and leaks what it had built on many of its
 * errors: TRUE when untrusted JSON text is one well-formed JSON value (RFC 8259; NULs count as
 * whitespace outside strings, and no text at all passes: json-glib calls it empty) that nests
 * at most max_depth levels and has no \u0000.
 */
gboolean carrel_util_json_structure_ok(const char *json, gsize len, guint max_depth);

/* True when text is a valid name: [a-z0-9][a-z0-9._-]*, at most CARREL_LIMIT_NAME_LEN long. */
gboolean carrel_util_is_valid_name(const char *text);

/* True when text has no ASCII control characters (including newline) and is valid UTF-8. */
gboolean carrel_util_is_clean_text(const char *text);

/* Untrusted bytes (a guest's stderr) as one line of clean text: at most max bytes read, invalid
 * UTF-8 replaced, line breaks as "; ", other control characters dropped. */
char *carrel_util_clean_text(const char *data, gsize len, gsize max);
/* True when text is a unicast, non-zero MAC address written as six lowercase hex pairs with ':'
 * ("02:1a:2b:3c:4d:5e"): the one form carrel stores and puts into domain XML. */
gboolean carrel_util_is_mac(const char *text);

/* Whether a read of untouched private memory makes this host's kernel allocate a page (no shared
 * zero page: a kernel booted with pvm_no_zero_page=1). Probed by reading probe_bytes of fresh
 * memory against the process's resident set: what other threads allocate meanwhile must stay
 * far below half of it (carreld reads 16 MiB, single-threaded carrel-qemu 1 MiB). */
#define CARREL_UTIL_READS_PROBE_BYTES (16 * 1024 * 1024)
gboolean carrel_util_reads_allocate(gsize probe_bytes, gboolean *ret_allocate, GError **error);

/*
 * Guest RAM in a file (util-qemu.c, for carrel-qemu): the domain's environment names it as
 * CARREL_UTIL_QEMU_MEMORY_ENV = "shared:PATH" (the guest writes its RAM there: the domain a warm
 * state is saved from) or "private:PATH" (mapped privately: read as the saved RAM, never
 * written: its clones). Either way QEMU migrates with x-ignore-shared, so a save of the shared
 * domain holds no RAM and its clones load none.
 */
#define CARREL_UTIL_QEMU_MEMORY_ENV "CARREL_QEMU_MEMORY"
#define CARREL_UTIL_QEMU_MEMORY_SHARED "shared:"
#define CARREL_UTIL_QEMU_MEMORY_PRIVATE "private:"
/* The QMP lines that turn x-ignore-shared on (QEMU 7.2 has no command-line property for it). */
extern const char carrel_util_qemu_ignore_shared_qmp[];
/*
 * Pure: QEMU's argv (argv[0] included) with libvirt's RAM backend "pc.ram" turned into a file
 * backend as value says, and a QMP monitor on monitor_fd (a connected socket) appended.
 * INVALID_ARG when value is not of the forms above or argv has no such backend.
 */
GStrv carrel_util_qemu_memory_args(const char *const *argv, const char *value, int monitor_fd,
                                   GError **error);

/*
 * The monitor relay (carrel-qemu, util-qmp-relay.c). carrel-qemu finds the folder of its CPU
 * caches in CARREL_UTIL_QEMU_CPU_CACHE_ENV (the domain's environment); without it, no relay.
 */
#define CARREL_UTIL_QEMU_CPU_CACHE_ENV "CARREL_QEMU_CPU_CACHE"
/*
 * Pure: QEMU's argv with libvirt's monitor (-chardev socket,id=charmonitor,fd=N,server=on,
 * wait=off) put on qemu_fd, another listening socket, in *ret_argv; N, the socket libvirt
 * connects to, in *ret_listen_fd. FALSE (nothing set) when argv has no monitor of exactly that
 * form.
 */
gboolean carrel_util_qemu_monitor_args(const char *const *argv, int qemu_fd, GStrv *ret_argv,
                                       int *ret_listen_fd);
/* Pure: the name of the CPU cache for a QEMU binary (binary_identity: its path, inode, size
 * and mtime) started with argv: a SHA-256 over those and argv's -cpu, -machine, -accel, -smp
 * and -global values. */
char *carrel_util_qemu_cpu_key(const char *const *argv, const char *binary_identity);

/*
 * The relay's decisions, pure: bytes from libvirt go in by carrel_qmp_relay_client_input, bytes
 * from QEMU by carrel_qmp_relay_qemu_input; what to write out collects in the GStrings of
 * carrel_qmp_relay_to_qemu and carrel_qmp_relay_to_client (the caller writes and empties them).
 * libvirt's qom-gets of the CPU's properties that known answers are answered here, the rest go
 * to QEMU; QEMU's replies to them are learned when known was empty. Everything else passes
 * through unchanged. A cache maps a property to a boolean (carrel_qmp_cache_new).
 */
typedef struct _CarrelQmpRelay CarrelQmpRelay;
CarrelQmpRelay *carrel_qmp_relay_new(GHashTable *known);
void carrel_qmp_relay_free(CarrelQmpRelay *relay);
void carrel_qmp_relay_client_input(CarrelQmpRelay *relay, const char *data, gsize len);
void carrel_qmp_relay_qemu_input(CarrelQmpRelay *relay, const char *data, gsize len);
GString *carrel_qmp_relay_to_qemu(CarrelQmpRelay *relay);
GString *carrel_qmp_relay_to_client(CarrelQmpRelay *relay);
/* How many qom-gets were answered here; whether libvirt went on past the CPU's properties. */
guint carrel_qmp_relay_answered(CarrelQmpRelay *relay);
gboolean carrel_qmp_relay_storm_over(CarrelQmpRelay *relay);
/* What was learned, once libvirt went on past the CPU's properties; NULL before, after it was
 * taken, when nothing was learned, or when known was not empty. */
GHashTable *carrel_qmp_relay_take_learned(CarrelQmpRelay *relay);
G_DEFINE_AUTOPTR_CLEANUP_FUNC(CarrelQmpRelay, carrel_qmp_relay_free)
GHashTable *carrel_qmp_cache_new(void);
/* A cache as text, one "PROPERTY 0|1" line each in name order, and back (INVALID_ARG). */
char *carrel_qmp_cache_format(GHashTable *cache);
GHashTable *carrel_qmp_cache_parse(const char *text, GError **error);

/*
 * Crash points (util-crash.c), for tests of recovery: carreld --test-hooks arms one point named
 * by CARREL_CRASH_AT; reaching it ends the process at once with CARREL_CRASH_EXIT, as a kill
 * would. Unarmed, they cost a string compare. carrel_crash_during ends it delay_ms later from
 * another thread, so the crash lands inside a call that blocks (a save or restore in libvirt).
 */
#define CARREL_CRASH_EXIT 86
const char *const *carrel_crash_points(void);
gboolean carrel_crash_arm(const char *point, GError **error);
void carrel_crash_point(const char *point);
void carrel_crash_during(const char *point, guint delay_ms);

G_END_DECLS

/* Counters, gauges and histograms, and their Prometheus text. */
#define CARREL_UTIL_H_INSIDE
#include "util/util-metrics.h"
#undef CARREL_UTIL_H_INSIDE
