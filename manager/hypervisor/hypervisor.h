/*
 * hypervisor: what core uses of the virtual machines: domains and their lifecycle, save and
 * restore, the guest agent, screen and HID events (keyboard, pointer), over a libvirt backend (the
 * table of operations behind it is in hypervisor-backend.h; the fake for tests is under
 * tests/fake/). Also the pure domain-XML builder and accelerator detection. libvirt errors become
 * GError only in here.
 */
#pragma once

#include "conf/conf.h"
#include "image/image.h"

G_BEGIN_DECLS

typedef enum {
    CARREL_ACCEL_AUTO,
    CARREL_ACCEL_KVM,
    CARREL_ACCEL_TCG,
    CARREL_ACCEL_LAST
} CarrelAccel;

const char *carrel_accel_to_string(CarrelAccel accel);
/* Returns CARREL_ACCEL_LAST for unknown names. */
CarrelAccel carrel_accel_from_string(const char *name);

/* What the domain-XML builder needs; everything else is fixed policy of carrel. */
typedef struct {
    const char *domain_name; /* carrel-<id> */
    const char *session_id;
    const char *instance_id; /* "i-" + 12 hex: which carrel state dir owns the domain */
    const char *uuid;        /* NULL lets libvirt choose */
    CarrelAccel accel;       /* KVM or TCG (never AUTO here) */
    guint vcpus;
    guint memory_mib;
    CarrelBoot boot;
    const char *kernel_path; /* DIRECT only */
    const char *initrd_path; /* DIRECT only, optional */
    const char *cmdline;     /* DIRECT only, optional */
    const char *disk_path;   /* the session overlay */
    const char *disk_format; /* "qcow2" or "raw": always stated, never probed */
    const char *console_log_path;
    guint tb_cache_mib; /* TCG translation cache; 0 = QEMU default; ignored under KVM */
    /*
     * VM generation id (a GUID; NULL = no vmgenid device). With it the guest kernel learns that
     * its memory state was cloned and reseeds its RNG: on every restore (and snapshot revert)
     * libvirt itself replaces the value with a fresh random one, which QEMU writes into guest
     * memory. So what matters for warm start is that the saved domain and all its clones HAVE
     * one (the device set must match); the value given here is used by cold starts.
     */
    const char *genid;
    /*
     * The session's NIC: a virtio interface with this MAC (lowercase, unicast, see
     * carrel_util_is_mac) on the libvirt network `network`. NULL mac = no NIC (sessions made
     * before NICs existed); network is required with a mac.
     */
    const char *mac;
    const char *network;
    /* The host side of the NIC (a tap of at most 15 bytes), or NULL for libvirt's own name:
     * the egress firewall knows each session's tap by name. */
    const char *tap;
    /* The program libvirt starts as QEMU (carrel-qemu: QEMU without transparent huge pages),
     * or NULL for libvirt's default emulator. */
    const char *emulator;
    /*
     * Guest RAM in this file instead of anonymous memory (needs emulator: carrel-qemu reads
     * it from the domain's environment, manager/daemon/carrel-qemu.c). memory_file_shared: the
     * guest writes its RAM into the file (the domain a warm state is saved from, whose save
     * then holds no RAM); otherwise the file is mapped privately, read as the saved RAM and
     * never written (its clones). Free page reporting is off for such a domain: QEMU 7.2
     * discards a reported page by punching a hole into the file, private mapping or not.
     * NULL = anonymous RAM.
     */
    const char *memory_file;
    gboolean memory_file_shared;
    /* The folder where carrel-qemu keeps what QEMU answered about its CPU (needs emulator; a
     * folder of QEMU's user, manager/daemon/carrel-qemu-relay.c), or NULL for no relay. */
    const char *cpu_cache;
} CarrelDomainSpec;

/*
 * Pure generator: the libvirt domain XML for spec. No I/O. Text is escaped; values that cannot
 * be meaningful (control characters in paths or names, '/' in the name, a session id not of the
 * form "s-" + 12 lowercase hex, an invalid uuid or genid, relative paths, a disk format other than
 * qcow2 or raw, missing kernel for direct boot, kernel/initrd/cmdline without direct boot, AUTO
 * accel, vcpus or memory outside CARREL_LIMIT_*) are refused with CARREL_ERROR_INVALID_ARG.
 */
char *carrel_hypervisor_build_domain_xml(const CarrelDomainSpec *spec, GError **error);
/* Pure: the snapshot XML of carrel_hypervisor_snapshot_live (paths escaped). */
char *carrel_hypervisor_build_snapshot_xml(const char *memory_path, const char *top_path);

/*
 * The revision of the machine the builder describes (its device set). Saved memory can only be
 * restored into the machine it was saved from: bump this whenever a device comes or goes, so
 * warm states of an older machine are redone instead of failing in QEMU ("Unknown savevm
 * section"). 2: every session has a NIC and a balloon with free page reporting. 3: SPICE is
 * locked at boot by an expired password (QEMU only takes console passwords when it started with
 * one), so a warm state saved before cannot serve the web console. 4: the QXL device holds
 * 40 MiB (ram 32 + vram 8) instead of 128, and QEMU migrates every byte of it.
 */
#define CARREL_HYPERVISOR_MACHINE_REVISION 4

/* XML namespace of carrel's <metadata> element. */
#define CARREL_XMLNS_SESSION "https://carrel.dev/xmlns/session/1"
/* libvirt's namespace of QEMU passthrough (the memory file's environment variable). */
#define CARREL_XMLNS_QEMU "http://libvirt.org/schemas/domain/qemu/1.0"

typedef enum {
    CARREL_DOMAIN_RUNNING,
    CARREL_DOMAIN_PAUSED,
    CARREL_DOMAIN_SHUTOFF,
    CARREL_DOMAIN_CRASHED,
    CARREL_DOMAIN_OTHER,
    CARREL_DOMAIN_LAST
} CarrelDomainState;

const char *carrel_domain_state_to_string(CarrelDomainState state);
/* Returns CARREL_DOMAIN_LAST for unknown names. */
CarrelDomainState carrel_domain_state_from_string(const char *name);

/*
 * Why a domain is paused. QEMU pauses a guest by itself when a disk write fails with the host's
 * disk full (the XML builder sets error_policy='enospace'), so the guest never sees its write
 * fail and can run on once there is room again.
 */
typedef enum {
    CARREL_PAUSE_NONE,     /* not paused */
    CARREL_PAUSE_USER,     /* asked for (carrel's pause, virsh suspend), or any other reason */
    CARREL_PAUSE_NO_SPACE, /* a disk write found the host's disk full */
    CARREL_PAUSE_IO_ERROR, /* another disk error stopped it */
    CARREL_PAUSE_LAST
} CarrelPauseReason;

/* "none", "user", "host_disk_full", "io_error". */
const char *carrel_pause_reason_to_string(CarrelPauseReason reason);

/* A libvirt domain carrying carrel's metadata. */
typedef struct {
    char *name;
    char *session_id;  /* from <metadata>, never from the name alone */
    char *instance_id; /* from <metadata>; NULL when absent */
    CarrelDomainState state;
    char *disk_path;     /* the first disk's source file (live XML when running); NULL if none */
    gboolean persistent; /* defined; FALSE for a transient (restored, not yet defined) domain */
    gboolean in_job;     /* libvirt still saves, restores or starts it (a caller died mid-way) */
} CarrelDomainInfo;

void carrel_domain_info_free(CarrelDomainInfo *info);
G_DEFINE_AUTOPTR_CLEANUP_FUNC(CarrelDomainInfo, carrel_domain_info_free)

typedef struct _CarrelHypervisor CarrelHypervisor;

/* Where a running domain's SPICE server listens (always 127.0.0.1, see the XML builder). */
typedef struct {
    guint port;
    gint64 run_id; /* libvirt's id of the running domain: a new one each time QEMU starts */
} CarrelSpiceInfo;

/* Longest SPICE password carrel sets (SPICE tickets hold at most 60 bytes). */
#define CARREL_SPICE_PASSWORD_MAX 60

/*
 * Opens the libvirt backend on uri. test:/// URIs work for fast tests; there the guest agent
 * is reported ready at once for a running domain, since the test driver runs no guest, and
 * shutdown uses the driver's default method. Installs (once per process) a libvirt error handler
 * that keeps libvirt from printing to stderr.
 */
CarrelHypervisor *carrel_hypervisor_open_libvirt(const char *uri, GError **error);

/* Closes the backend (its connection) and frees hv; NULL is fine. */
void carrel_hypervisor_free(CarrelHypervisor *hv);
G_DEFINE_AUTOPTR_CLEANUP_FUNC(CarrelHypervisor, carrel_hypervisor_free)

/* The URI the backend was opened with. */
const char *carrel_hypervisor_get_uri(CarrelHypervisor *hv);

/*
 * Where the backend makes its scratch files (a restore's FIFO), in folders of its own
 * (CARREL_HYPERVISOR_SCRATCH_PREFIX...); the system's temporary folder when unset.
 */
#define CARREL_HYPERVISOR_SCRATCH_PREFIX "restore-"
void carrel_hypervisor_set_scratch_dir(CarrelHypervisor *hv, const char *dir);
const char *carrel_hypervisor_get_scratch_dir(CarrelHypervisor *hv);
/*
 * Removes the scratch folders a killed process left in the scratch folder set (links are not
 * followed). Only for a caller that owns that folder, before any restore of its own: no other
 * process may write there.
 */
gboolean carrel_hypervisor_clear_scratch(CarrelHypervisor *hv, GError **error);

/*
 * The domain calls. Every call is synchronous and thread-safe and adds "domain 'NAME': " context
 * to its error. Errors: NOT_FOUND when the domain does not exist, EXISTS when define_start finds
 * one of that name, WRONG_STATE when the domain is not in a state for the call, TIMEOUT when the
 * guest does not react in time, HYPERVISOR for everything else (with libvirt's message).
 */

/* Defines the persistent domain from xml and starts it; undefines it again if start fails. */
gboolean carrel_hypervisor_define_start(CarrelHypervisor *hv, const char *xml, GError **error);
/* Starts an already defined domain. */
gboolean carrel_hypervisor_start(CarrelHypervisor *hv, const char *name, GError **error);
/* Asks the guest to power off (agent, then ACPI) and waits up to timeout_s; FALSE+TIMEOUT if
 * not. */
gboolean carrel_hypervisor_shutdown(CarrelHypervisor *hv, const char *name, guint timeout_s,
                                    GError **error);
/* Hard power-off; success when already off. */
gboolean carrel_hypervisor_destroy(CarrelHypervisor *hv, const char *name, GError **error);
/* Removes the definition; success when absent. */
gboolean carrel_hypervisor_undefine(CarrelHypervisor *hv, const char *name, GError **error);
/* State of a domain (CRASHED also when QEMU died); NOT_FOUND when it does not exist. */
gboolean carrel_hypervisor_get_state(CarrelHypervisor *hv, const char *name,
                                     CarrelDomainState *ret_state, GError **error);
/* Why the domain is paused (NONE when it is not); NOT_FOUND when it does not exist. */
gboolean carrel_hypervisor_get_pause_reason(CarrelHypervisor *hv, const char *name,
                                            CarrelPauseReason *ret_reason, GError **error);
/*
 * How many bytes of the host's disk the domain's disk (vda: the session overlay) takes, as
 * QEMU reports it for a running or paused domain (virDomainGetBlockInfo's allocation: for a
 * qcow2 file, the highest offset written). WRONG_STATE when QEMU does not run, UNSUPPORTED where
 * the backend cannot tell (the caller may then stat the file).
 */
gboolean carrel_hypervisor_disk_allocation(CarrelHypervisor *hv, const char *name,
                                           guint64 *ret_bytes, GError **error);
/*
 * The host CPU time the domain has used so far, in ns (every vCPU and QEMU's own threads), to
 * tell a busy guest from an idle one. WRONG_STATE when QEMU does not run, UNSUPPORTED where the
 * backend cannot tell.
 */
gboolean carrel_hypervisor_cpu_time(CarrelHypervisor *hv, const char *name, guint64 *ret_ns,
                                    GError **error);
/*
 * One guest-ping through the guest agent with a response timeout (1..300 s). TIMEOUT while
 * the agent is not connected yet or does not answer; WRONG_STATE when not running.
 */
gboolean carrel_hypervisor_agent_ping(CarrelHypervisor *hv, const char *name, guint timeout_s,
                                      GError **error);
/* Every domain with valid carrel metadata (GPtrArray of CarrelDomainInfo); others skipped. */
GPtrArray *carrel_hypervisor_list(CarrelHypervisor *hv, GError **error);
/* Hypervisor description for /v1/version: e.g. "libvirt 9.0.0, QEMU 7.2.22". */
char *carrel_hypervisor_describe(CarrelHypervisor *hv);
/*
 * Defines (or redefines) the persistent domain from xml without starting it. On a running
 * transient domain (a restored clone) it makes it persistent: xml must then carry that
 * domain's UUID, or libvirt refuses ("already exists with uuid"); the running guest is not
 * changed, the definition applies from its next start.
 */
gboolean carrel_hypervisor_define(CarrelHypervisor *hv, const char *xml, GError **error);
/* Makes a running transient domain (restored, not yet defined: its definer died) persistent
 * from its own live XML, UUID and all; TRUE at once for a persistent one. */
gboolean carrel_hypervisor_persist(CarrelHypervisor *hv, const char *name, GError **error);
/*
 * Saves the memory of a running or paused domain to path and stops QEMU (the domain stays
 * defined if it was persistent, is gone if transient). path must be absolute and must not
 * exist (EXISTS): libvirt would follow a symlink there as root. The file ends up a regular
 * file owned by root, mode 0600. UNSUPPORTED on test:/// (its images cannot be restored
 * by carrel_hypervisor_restore).
 */
gboolean carrel_hypervisor_save(CarrelHypervisor *hv, const char *name, const char *path,
                                GError **error);
/*
 * A snapshot of a running or paused domain that keeps it: its memory to memory_path (a save
 * image, as carrel_hypervisor_save writes, for carrel_hypervisor_restore) and its disk onto
 * top_path, an overlay the caller made on the disk it runs on. The guest stands still while
 * its memory is written, then runs on top_path. All or nothing: on failure the domain runs
 * on its old disk. memory_path as for save (absolute, new; root's, mode 0600 after).
 * UNSUPPORTED on test:///.
 */
gboolean carrel_hypervisor_snapshot_live(CarrelHypervisor *hv, const char *name,
                                         const char *memory_path, const char *top_path,
                                         GError **error);
/*
 * Restores the save image at path as a new running domain described by xml, a full domain
 * XML from carrel_hypervisor_build_domain_xml with its own name, UUID, genid, disk and
 * console log (libvirt refuses another UUID through its own XML argument, so libvirt reads
 * the image through a FIFO whose header carries xml instead, see
 * hypervisor-libvirt-restore.c). The result
 * is transient: call define (with the same xml) to make it persistent. xml must describe
 * the same machine as the saved domain (vcpus, memory, machine type, CPU model, device set,
 * genid present or not) since QEMU loads the memory state into it; a mismatch fails with
 * HYPERVISOR and QEMU's words (e.g. "Size mismatch: pc.ram", "Unknown savevm section") and
 * leaves no domain behind. Paths (disk, console log) and the SPICE port may differ. EXISTS
 * when a domain of that name exists, LIMIT when xml does not fit into the image's header,
 * UNSUPPORTED on test:///.
 *
 * The image file is only read: any number of restores of one file (the clones of a warm
 * template, the forks of a snapshot) may run at once.
 */
gboolean carrel_hypervisor_restore(CarrelHypervisor *hv, const char *path, const char *xml,
                                   GError **error);
/*
 * Sets the guest clock to the host's current time through the guest agent (after a restore
 * the guest clock is behind by the time the image spent on disk). TIMEOUT when the agent
 * does not answer within CARREL_HYPERVISOR_AGENT_TIMEOUT_S.
 */
gboolean carrel_hypervisor_set_time(CarrelHypervisor *hv, const char *name, GError **error);
/*
 * Freezes (or thaws) the guest's filesystems through the agent: once frozen they are flushed
 * and take no writes, so the disk can be copied as a consistent whole. Thaw soon: the guest's
 * programs block on writes meanwhile.
 */
gboolean carrel_hypervisor_fs_freeze(CarrelHypervisor *hv, const char *name, gboolean freeze,
                                     GError **error);
/* Pauses (TRUE) or resumes (FALSE) a domain's vCPUs; WRONG_STATE when it is not running or
 * paused respectively. QEMU flushes the disks when it pauses. */
gboolean carrel_hypervisor_pause(CarrelHypervisor *hv, const char *name, gboolean pause,
                                 GError **error);
/*
 * Sets the live balloon target of a running domain to target_mib and waits (up to
 * timeout_s) until the balloon is there or the guest stops moving it for 3 s (it gives no
 * more than it has free). *ret_actual_mib gets the guest's memory at the end. UNSUPPORTED on
 * test:///, WRONG_STATE when not running.
 */
gboolean carrel_hypervisor_set_balloon(CarrelHypervisor *hv, const char *name, guint target_mib,
                                       guint timeout_s, guint *ret_actual_mib, GError **error);
/*
 * Makes path a new empty file (0600) of the user QEMU runs as (libvirt's DAC base label:
 * libvirt-qemu on Debian), for a file QEMU opens itself (a memory file). UNSUPPORTED on test:///
 * and where libvirt confines QEMU with AppArmor or SELinux (it would open no file libvirt did
 * not name); FAILED when libvirt names no DAC label or the file cannot be made (it exists).
 */
gboolean carrel_hypervisor_make_qemu_file(CarrelHypervisor *hv, const char *path, GError **error);
/* The same for a folder (0700; an existing one is made QEMU's), for files QEMU's side writes
 * itself (carrel-qemu's CPU cache). */
gboolean carrel_hypervisor_make_qemu_dir(CarrelHypervisor *hv, const char *path, GError **error);
/*
 * Splits the save image at save_path, of a guest whose RAM (libvirt's "pc.ram") mapped a file
 * privately under carrel-qemu, into device_path (the same image with the device state only, 0600)
 * and ram_path (made as by carrel_hypervisor_make_qemu_file, of the RAM's size, holding its pages;
 * zero pages are holes), for a restore that maps ram_path privately. save_path is left as it
 * is; on failure neither new file is. UNSUPPORTED where QEMU cannot be given a file or for a
 * stream this does not know (hypervisor-migstream.c).
 */
gboolean carrel_hypervisor_saveimage_split_ram(CarrelHypervisor *hv, const char *save_path,
                                               const char *device_path, const char *ram_path,
                                               GError **error);
/* Pure: the DAC base label ("+64055:+64055") of libvirt's capabilities XML, for QEMU. */
gboolean carrel_hypervisor_parse_qemu_owner(const char *caps_xml, guint *ret_uid, guint *ret_gid,
                                            GError **error);
/*
 * Makes sure the libvirt network `name` exists and is active: defines it from xml
 * (persistent, autostarted) when absent, starts it when inactive, and leaves an existing
 * definition as it is. *ret_xml gets the XML of the network as it now runs, which the
 * caller must check (another tool may have made a network of that name). Safe against
 * another process doing the same at once.
 */
gboolean carrel_hypervisor_ensure_network(CarrelHypervisor *hv, const char *name, const char *xml,
                                          char **ret_xml, GError **error);

/*
 * Where the SPICE server of a running or paused domain listens on 127.0.0.1, read from its
 * live XML. WRONG_STATE when the domain does not run (no port yet), UNSUPPORTED when it has no
 * SPICE display.
 */
gboolean carrel_hypervisor_spice_info(CarrelHypervisor *hv, const char *name,
                                      CarrelSpiceInfo *ret_info, GError **error);

/*
 * Sets the SPICE password of a running or paused domain, valid until valid_until (Unix time,
 * UTC seconds; a time in the past locks the display), through virDomainUpdateDeviceFlags on
 * the live <graphics> element (VIR_DOMAIN_AFFECT_LIVE). Viewers already connected stay.
 * password: 1..CARREL_SPICE_PASSWORD_MAX printable characters. UNSUPPORTED on test:///.
 */
gboolean carrel_hypervisor_spice_password(CarrelHypervisor *hv, const char *name,
                                          const char *password, gint64 valid_until, GError **error);

/*
 * A change signal for a running domain's screen, from its VNC display (a unix socket only
 * root reaches): carrel_rfb_watch_poll says whether the screen changed since the last request,
 * carrel_rfb_watch_request asks to hear of the next change. UNSUPPORTED for a domain without
 * such a display (one defined by an older carrel) or a backend without any.
 */
typedef struct _CarrelRfbWatch CarrelRfbWatch;
CarrelRfbWatch *carrel_hypervisor_display_watch(CarrelHypervisor *hv, const char *name,
                                                GError **error);
/*
 * Never blocks: reads what the server has sent (at most a few MiB per call; the fd stays
 * readable when more is waiting), parses every complete message and sets *ret_changed to TRUE
 * when a FramebufferUpdate with at least one rectangle (a DesktopSize one included) completed
 * since the last call. FALSE with HYPERVISOR when the server closed the connection or broke the
 * protocol; the watch then stays failed.
 */
gboolean carrel_rfb_watch_poll(CarrelRfbWatch *w, gboolean *ret_changed, GError **error);
/*
 * Asks for the next change: an incremental FramebufferUpdateRequest of the whole screen (its
 * current size). At most one request is outstanding: a call before the previous request's
 * update arrived sends nothing. Waits at most a second for room in the socket.
 */
gboolean carrel_rfb_watch_request(CarrelRfbWatch *w, GError **error);
/* Closes the socket; accepts NULL. */
void carrel_rfb_watch_free(CarrelRfbWatch *w);
G_DEFINE_AUTOPTR_CLEANUP_FUNC(CarrelRfbWatch, carrel_rfb_watch_free)

/* Response timeout of every single guest-agent command carrel sends (a hung agent never hangs
 * the daemon longer than this per command). */
#define CARREL_HYPERVISOR_AGENT_TIMEOUT_S 10
/* Bounds of carrel_hypervisor_agent_exec. */
#define CARREL_HYPERVISOR_EXEC_MAX_TIMEOUT_S 3600
#define CARREL_HYPERVISOR_EXEC_MAX_OUTPUT (1024 * 1024)
#define CARREL_HYPERVISOR_EXEC_MAX_INPUT (1024 * 1024)
#define CARREL_HYPERVISOR_EXEC_MAX_ARGS 256
#define CARREL_HYPERVISOR_EXEC_MAX_ARGV_BYTES (64 * 1024)
/* Where the templates' recipes install guest-tools/carrel-run (its deadline: see below). */
#define CARREL_HYPERVISOR_EXEC_RUNNER "/usr/local/bin/carrel-run"

/*
 * A program to run in the guest through carrel_hypervisor_agent_exec; every pointer is borrowed.
 * What guest-exec itself takes, plus the output cap: conf's CarrelExecRequest (the API's) also
 * has env and cwd, which core turns into an env(1) command line.
 */
typedef struct {
    const char *const *argv; /* NULL-terminated; argv[0] looked up in the guest's PATH */
    GBytes *stdin_bytes;     /* optional, up to CARREL_HYPERVISOR_EXEC_MAX_INPUT */
    guint timeout_s;         /* 1..CARREL_HYPERVISOR_EXEC_MAX_TIMEOUT_S */
    gsize max_output;        /* per stream, 0..CARREL_HYPERVISOR_EXEC_MAX_OUTPUT */
} CarrelGuestExec;

/*
 * Runs run->argv in the guest through qemu-ga's guest-exec, as root, with run->stdin_bytes as
 * its standard input, and waits for it up to run->timeout_s.
 *
 * The program runs under the guest's `CARREL_HYPERVISOR_EXEC_RUNNER timeout_s` (carrel-run,
 * which carrel's templates carry), or `timeout --signal=KILL timeout_s` (coreutils, in every
 * Debian guest) where guest-exec cannot start carrel-run (a template built without it: the
 * domain is then remembered as one). Either way the program leads a new process group, and at
 * the deadline it and every process of its group are killed inside the guest with SIGKILL, even
 * if the host lost contact. carrel-run is static and becomes the program itself: under TCG,
 * `timeout` made a `true` take 150 ms instead of 91. The host polls guest-exec-status (every
 * 10 ms for the first 250 ms, then doubling up to 200 ms); if the program still has not ended 5 s
 * after the deadline (a stalled guest), the host kills the process group through another
 * guest-exec of /bin/sh and gives up waiting.
 *
 * Success means the program ran and ended (or was killed at the deadline), and *ret_result
 * (optional; clear it with carrel_exec_result_clear) says how: exit_code is its exit status, or
 * 128 + the signal number when a signal ended it (137 after the deadline), or -1 when the host
 * gave up; a program that cannot be found or run gives 127 or 126 (from the wrapper, with its
 * message on stderr). timed_out says whether the deadline was reached. stdout_bytes and
 * stderr_bytes (never NULL) hold up to run->max_output bytes each, binary-safe; truncated is TRUE
 * when either was cut here or by qemu-ga (16 MiB per stream). duration_ms is how long the host
 * waited. Everything the agent returns is parsed as untrusted input. qemu-ga returns all the
 * output in one reply, which libvirt's RPC refuses above 4 MiB ("Unable to encode message
 * payload": HYPERVISOR, and the output is lost) and carrel refuses above
 * CARREL_HYPERVISOR_AGENT_REPLY_MAX (LIMIT): a program that may print more than ~3 MiB in
 * total must cap its own output (e.g. through head -c).
 *
 * Every agent command has a response timeout of CARREL_HYPERVISOR_AGENT_TIMEOUT_S. Errors:
 * INVALID_ARG for bad arguments, WRONG_STATE when not running, TIMEOUT when the agent does not
 * answer, HYPERVISOR when the agent refuses (e.g. the program does not exist), UNSUPPORTED on
 * test:///.
 */
gboolean carrel_hypervisor_agent_exec(CarrelHypervisor *hv, const char *name,
                                      const CarrelGuestExec *run, CarrelExecResult *ret_result,
                                      GError **error);

/*
 * Bytes per guest-file-read/-write command. Measured with libvirt 9.0 and QEMU 7.2 under TCG:
 * 64 KiB chunks move 3 MB in 1.2 s (write) and 0.5 s (read), while a single 256 KiB write was
 * never answered within the 10 s agent timeout and left the channel unusable for a while.
 */
#define CARREL_HYPERVISOR_FILE_CHUNK (64 * 1024)

/*
 * Reads the guest file path (absolute) through the guest agent, in chunks of
 * CARREL_HYPERVISOR_FILE_CHUNK; binary-safe. LIMIT when it holds more than max bytes (nothing is
 * returned then), HYPERVISOR with the agent's message when the guest cannot open it (e.g. no such
 * file), TIMEOUT when the agent does not answer, WRONG_STATE when not running, UNSUPPORTED on
 * test:///. Every reply is parsed as untrusted input.
 */
gboolean carrel_hypervisor_file_read(CarrelHypervisor *hv, const char *name, const char *path,
                                     gsize max, GBytes **ret_data, GError **error);

/*
 * Writes data to the guest file path (absolute; created or truncated, as root with qemu-ga's
 * mode) through the guest agent, in chunks. A failure part-way leaves a partial file in the
 * guest. Errors as carrel_hypervisor_file_read.
 */
gboolean carrel_hypervisor_file_write(CarrelHypervisor *hv, const char *name, const char *path,
                                      GBytes *data, GError **error);

/* Like carrel_hypervisor_file_read, but streams into fd (at most max bytes, LIMIT beyond: what
 * was written stays); *ret_size is the byte count. For files too large to hold in memory. */
gboolean carrel_hypervisor_file_read_fd(CarrelHypervisor *hv, const char *name, const char *path,
                                        int fd, guint64 max, guint64 *ret_size, GError **error);
/* Like carrel_hypervisor_file_read_fd, and *ret_sha256 (optional, on success) is the lowercase
 * hex sha256 of the bytes written, computed chunk by chunk as they pass. */
gboolean carrel_hypervisor_file_read_fd_sha(CarrelHypervisor *hv, const char *name,
                                            const char *path, int fd, guint64 max,
                                            guint64 *ret_size, char **ret_sha256, GError **error);
/*
 * Like carrel_hypervisor_file_write, but streams size bytes read from fd (its current offset)
 * chunk by chunk, never holding the file in memory; *ret_sha256 (optional, on success) is the
 * sha256 of the bytes sent. FAILED when fd ends before size bytes.
 */
gboolean carrel_hypervisor_file_write_fd(CarrelHypervisor *hv, const char *name, const char *path,
                                         int fd, guint64 size, char **ret_sha256, GError **error);

/* Largest guest-agent reply carrel parses (libvirt's RPC carries strings up to 4 MiB). */
#define CARREL_HYPERVISOR_AGENT_REPLY_MAX (4 * 1024 * 1024 + 64 * 1024)

/* Largest screenshot accepted (bytes, as PNG or PPM). */
#define CARREL_HYPERVISOR_SCREENSHOT_MAX CARREL_IMAGE_PPM_MAX
/* Largest screen width or height accepted. */
#define CARREL_HYPERVISOR_SCREEN_MAX_SIDE CARREL_IMAGE_MAX_SIDE

/*
 * The primary screen of a running domain as binary PPM (P6, maxval 255), at most
 * CARREL_HYPERVISOR_SCREENSHOT_MAX bytes, validated like carrel_image_ppm_parse. libvirt
 * 9.0 with QEMU 7.2 (and the test driver) hands over PNG, which is decoded by
 * carrel_image_to_ppm under the same limits; the guest chooses the screen size and content, so
 * both are untrusted. Every output is optional. WRONG_STATE when not running, LIMIT when larger,
 * INVALID_ARG when the image is malformed, UNSUPPORTED for another image type.
 */
gboolean carrel_hypervisor_screenshot(CarrelHypervisor *hv, const char *name, GBytes **ret_ppm,
                                      guint *ret_width, guint *ret_height, GError **error);

/*
 * The save image at path as the start of a restore of another domain, without writing to it:
 * *ret_head is its header and data area with new_xml in place of the saved XML (as a rewrite
 * would leave them), and the returned fd (read-only, close it) is positioned at the memory
 * stream that follows. -1 with INVALID_ARG / UNSUPPORTED for an image read_header refuses,
 * LIMIT when new_xml does not fit. Any number of these may read one file at once.
 */
int carrel_hypervisor_saveimage_open_as(const char *path, const char *new_xml, GBytes **ret_head,
                                        GError **error);
/* The domain XML inside the save image at path (read-only; for tests and debugging). */
char *carrel_hypervisor_saveimage_get_xml(const char *path, GError **error);
/* Makes a save image whole again after a crash in the middle of a header rewrite (from the
 * journal that rewrite left beside it); TRUE when there was nothing to do. */
gboolean carrel_hypervisor_saveimage_recover(const char *path, GError **error);

/*
 * HID plans (hypervisor-hid.c): what an action sends to the guest's virtio tablet and
 * keyboard, as QMP input-send-event commands (QEMU 7.2) and pauses, in order.
 */

/* The tablet's absolute axes run 0..CARREL_HID_ABS_MAX (QEMU's INPUT_EVENT_ABS_MAX). */
#define CARREL_HID_ABS_MAX 32767
/* Between typed characters and between the combinations of a key sequence. */
#define CARREL_HID_TYPE_DELAY_MS 8
/* Between the clicks of a double or triple click: well inside X's double-click time (400 ms). */
#define CARREL_HID_CLICK_GAP_MS 40
/* Drags move in steps of about this many pixels, at most CARREL_HID_DRAG_MAX_STEPS per
 * segment of the path, pausing after the press and after every step. */
#define CARREL_HID_DRAG_STEP_PX 20
#define CARREL_HID_DRAG_MAX_STEPS 64
#define CARREL_HID_DRAG_DELAY_MS 8
/* Between wheel notches. */
#define CARREL_HID_SCROLL_DELAY_MS 8

/* One step of a plan: an input-send-event to send, or a pause. */
/* The two input devices of carrel's domains (hypervisor-xml.c). */
typedef enum {
    CARREL_HID_KEYBOARD,
    CARREL_HID_TABLET,
} CarrelHidDevice;

/* A plan waits at most this long for the guest to take its input, then fails (TIMEOUT) rather
 * than let QEMU drop what the guest has no room for; it looks again this often. */
#define CARREL_HID_ROOM_WAIT_MS 10000
#define CARREL_HID_ROOM_POLL_MS 5

typedef struct {
    char *arguments; /* JSON text of the command's arguments, {"events":[...]}; NULL = a pause */
    guint delay_ms;  /* the pause, when arguments is NULL */
} CarrelHidStep;

void carrel_hid_step_free(CarrelHidStep *step);
G_DEFINE_AUTOPTR_CLEANUP_FUNC(CarrelHidStep, carrel_hid_step_free)

/*
 * Pure generator: the steps (GPtrArray of CarrelHidStep) that perform action on a width x
 * height screen whose pointer is at pointer, and in *ret_pointer (optional) where the pointer is
 * afterwards. Positions must already be in screen space (carrel_action_batch_check_bounds).
 * A pixel maps to round(x * CARREL_HID_ABS_MAX / (width - 1)) on the tablet's axis.
 *
 * - mouse_move: the keys held down, the move (both axes in one step), the keys up.
 * - click: move (when it has a point), modifiers down, button down and up count times with
 *   CARREL_HID_CLICK_GAP_MS between clicks, modifiers up (in reverse order).
 * - mouse_down, mouse_up: move (when it has a point), the button.
 * - drag: move to the first point (unless it starts at the pointer), modifiers down, left down,
 *   moves along the path in steps of CARREL_HID_DRAG_STEP_PX with pauses, left up, modifiers
 *   up.
 * - scroll: move (when it has a point), modifiers down, one wheel-up/wheel-down notch per step
 *   for dy (> 0 down), then for dx shift + wheel-down (right) or wheel-up (left), since the
 *   virtio tablet drops wheel-left/wheel-right; modifiers up.
 * - type: per character, shift (if needed) and key down, then key up and shift up, with
 *   CARREL_HID_TYPE_DELAY_MS between characters.
 * - key: per combination, its keys down in order, then up in reverse order.
 * - key_down, key_up: the keys down, or up in reverse order. hold_key: down, pause, up.
 * - wait: one pause. Every other kind (screenshot, zoom, helpers...) sends no HID event: no steps.
 *
 * Nothing of the action is trusted: INVALID_ARG for a screen size outside
 * 1..CARREL_HYPERVISOR_SCREEN_MAX_SIDE, a point off the screen, a key that is not a QKeyCode,
 * untypable text or a count, path, scroll or duration out of its bounds.
 */
GPtrArray *carrel_hypervisor_hid_plan(const CarrelAction *action, guint width, guint height,
                                      CarrelPoint pointer, CarrelPoint *ret_pointer,
                                      GError **error);

/*
 * Performs a plan from carrel_hypervisor_hid_plan on the domain: each event step is one QMP
 * input-send-event (through libvirt's QEMU monitor passthrough, which marks the domain
 * "custom-monitor" tainted), each pause a sleep. On a failure part-way, every key and button the
 * plan pressed and did not release yet is released (best effort), so the guest is not left
 * with a key held. WRONG_STATE when the domain is not running, HYPERVISOR with QEMU's words.
 */
gboolean carrel_hypervisor_hid_run(CarrelHypervisor *hv, const char *name, GPtrArray *plan,
                                   GError **error);

/*
 * Resolves AUTO to KVM or TCG. KVM is chosen only when /dev/kvm opens read-write and a probe
 * guest really boots under it: QEMU is started with -accel kvm -cpu host on a kernel
 * (probe_kernel, or the newest readable /boot/vmlinuz-*) and its serial console must show the
 * kernel booting within timeout_s (0 = 15 s); QEMU is then killed. Otherwise TCG. KVM and TCG
 * requests are returned unchanged. *ret_reason (optional) always gets one short line saying why,
 * e.g. "kvm probe: no kernel output within 15 s; using tcg". Blocks up to timeout_s.
 */
CarrelAccel carrel_hypervisor_resolve_accel(CarrelAccel requested, const char *probe_kernel,
                                            guint timeout_s, char **ret_reason);

G_END_DECLS
