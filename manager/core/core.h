/*
 * core: the manager. Owns the session state machine, jobs and orchestration; the only module
 * that uses more than one backend (store, disk, hypervisor, policy). Calls are synchronous and
 * thread-safe: the API runs them in worker threads. Nothing here logs; callers decide.
 */
#pragma once

#include "conf/conf.h"
#include "hypervisor/hypervisor.h"

G_BEGIN_DECLS

typedef struct {
    const char *state_dir;      /* state.db, templates/, sessions/ */
    const char *recipes_dir;    /* template recipes: <recipes_dir>/<name>/build */
    const char *cache_dir;      /* built disks, keyed by recipe hash */
    CarrelAccel accel;          /* resolved already: KVM or TCG */
    const char *accel_reason;   /* why that accelerator (shown by /v1/version) */
    guint agent_timeout_s;      /* how long create/start wait for the guest agent (0 = 300) */
    guint screen_grace_s;       /* silent agent this long: judge by the screen (0 = 45) */
    guint screen_poll_ms;       /* between screenshots that judge readiness (0 = 500) */
    guint tb_cache_mib;         /* TCG translation cache per guest (0 = 64) */
    guint upload_ttl_s;         /* an upload no create used is removed after this (0 = 3600) */
    guint shots_max;            /* screenshots kept per session, newest first (0 = 500) */
    guint shots_max_mib;        /* and at most this many MiB of them (0 = 256) */
    const char *policy_dir;     /* every *.policy in it, by name; NULL = none */
    const char *policy_path;    /* the "default" policy, over policy_dir's; NULL = that one, or
                                   the built-in default */
    const char *guest_tool;     /* carrel-guest binary given to recipes, or NULL */
    const char *guest_tool_src; /* its sources, hashed into every recipe hash, or NULL */
    const char *egress_dns;     /* upstream resolver of sessions with a network; NULL: none */
    const char *egress_helper;  /* carrel-egress-helper (squid's helper) */
    const char *emulator;       /* carrel-qemu, what domains start as QEMU; NULL = libvirt's */
    gboolean reads_allocate;    /* the host allocates on reads of untouched memory: restored
                                   clones get a memory reclaim under carrel-qemu too */
    const char *egress_ca;      /* extra CAs squid trusts upstream (a test's), or NULL */
    guint disk_reserve_mib;     /* preallocated in the state dir for the store (0 = 64) */
    guint disk_low_mib;         /* less free refuses creates, snapshots, uploads (0 = reserve) */
} CarrelManagerConfig;

/* What a session's kept screenshots may take by default (CarrelManagerConfig). */
#define CARREL_SHOTS_MAX_DEFAULT 500
#define CARREL_SHOTS_MAX_MIB_DEFAULT 256

typedef struct _CarrelManager CarrelManager;

/* Opens the store under state_dir and takes ownership of hv. */
CarrelManager *carrel_manager_new(const CarrelManagerConfig *config, CarrelHypervisor *hv,
                                  GError **error);
void carrel_manager_free(CarrelManager *mgr);
G_DEFINE_AUTOPTR_CLEANUP_FUNC(CarrelManager, carrel_manager_free)

/* The random id of this state dir, written into every domain so reconcile never touches
 * domains of another carrel instance on the same libvirt. */
const char *carrel_manager_get_instance_id(CarrelManager *mgr);
CarrelHypervisor *carrel_manager_get_hypervisor(CarrelManager *mgr);
CarrelAccel carrel_manager_get_accel(CarrelManager *mgr);
const char *carrel_manager_get_accel_reason(CarrelManager *mgr);
/* The [limits] of who's token (the default policy's), or NULL when who is not limited (admins:
 * they can mint tokens anyway; carreld itself). The API applies rate and burst; core the rest. */
const CarrelLimits *carrel_manager_limits_for(CarrelManager *mgr, const CarrelPrincipal *who);

/* What reconcile did, for the daemon's log. */
typedef struct {
    guint adopted;   /* running or paused domains taken back */
    guint stopped;   /* sessions found powered off */
    guint vanished;  /* sessions whose domain is gone: marked crashed */
    guint cleaned;   /* half-created sessions removed */
    guint orphans;   /* carrel domains of this instance with no session: removed */
    guint recovered; /* operations cut short by a crash, finished or rolled back */
    guint lost;      /* such operations that could not be settled: session stopped, with why */
} CarrelReconcileReport;

/* Puts sessions that kept running with a network back on the egress path (after reconcile). */
gboolean carrel_manager_egress_resume(CarrelManager *mgr, GError **error);
/* Stops the egress path (squid, resolvers, tables) now; carreld calls it on its way out, also
 * when it leaves the manager to running jobs. */
void carrel_manager_egress_stop(CarrelManager *mgr);

/* Matches the store with libvirt's carrel-tagged domains; run before serving. */
gboolean carrel_manager_reconcile(CarrelManager *mgr, CarrelReconcileReport *ret_report,
                                  GError **error);

/*
 * Credentials and who holds them (core-token.c). authenticate: the principal of a live token;
 * UNAUTHORIZED "invalid token" (unknown), "token 'x' was revoked" or "token 'x' expired", each
 * refusal audited. principal: the same by token id (the web console's cookie keeps only that,
 * so a revocation ends it at once).
 */
CarrelPrincipal *carrel_manager_authenticate(CarrelManager *mgr, const char *token, GError **error);
CarrelPrincipal *carrel_manager_principal(CarrelManager *mgr, const char *token_id, GError **error);
/* Audits a refused credential (a login, a bearer token) from source (e.g. "127.0.0.1"). */
void carrel_manager_audit_refused_login(CarrelManager *mgr, const char *source, const GError *why);
/* The admin token of the state dir's admin.token file: registered (as "admin") when unknown,
 * and when the file changed, the "admin" token takes its value. */
gboolean carrel_manager_ensure_admin_token(CarrelManager *mgr, const char *token, GError **error);
/* Makes a token named name (unique, [A-Za-z0-9._@-] 1-64) for role, expiring after ttl_s
 * (0 = never), limited to the named policies (NULL: any; agents only; each must be loaded).
 * Returns the secret, shown once (only its hash is kept); *ret_token its record. */
char *carrel_manager_token_create(CarrelManager *mgr, const CarrelPrincipal *who, const char *role,
                                  const char *name, gint64 ttl_s, char **policies,
                                  CarrelToken **ret_token, GError **error);
GPtrArray *carrel_manager_token_list(CarrelManager *mgr, const CarrelPrincipal *who,
                                     GError **error);
/* Revokes by name or id: every request and console cookie of it fails from now on. */
CarrelToken *carrel_manager_token_revoke(CarrelManager *mgr, const CarrelPrincipal *who,
                                         const char *name, GError **error);
/* A new secret for the "admin" token, also written to the state dir's admin.token (0600). */
char *carrel_manager_token_rotate_admin(CarrelManager *mgr, const CarrelPrincipal *who,
                                        GError **error);

/* The audit log (core-audit.c). */
typedef struct {
    gint64 after_seq;
    gint64 since_us;
    const char *session_id;
    const char *principal; /* token id or name */
    const char *operation;
    const char *result; /* ok, denied, failed */
    guint limit;        /* 0 = 1000, at most 10000 */
} CarrelAuditQuery;

/* Rows as {entries: [...]} (see carrel_audit_record_to_json). Reading is itself not audited. */
JsonNode *carrel_manager_audit_list(CarrelManager *mgr, const CarrelPrincipal *who,
                                    const CarrelAuditQuery *query, GError **error);
/* {intact, rows, bad_seq, why}: the whole chain checked. */
JsonNode *carrel_manager_audit_verify(CarrelManager *mgr, const CarrelPrincipal *who,
                                      GError **error);
/* The role matrix in force: {operation: {admin, agent, reviewer, lease}}. */
JsonNode *carrel_manager_role_matrix(CarrelManager *mgr, const CarrelPrincipal *who,
                                     GError **error);

/* Metrics (core-metrics.c). The registry every family is declared in: api counts its requests
 * (carrel_http_requests_total) and error replies (carrel_errors_total) there. */
CarrelMetrics *carrel_manager_get_metrics(CarrelManager *mgr);
/* GET /metrics (metrics.read): Prometheus text of everything recorded, with the figures read
 * now (sessions by state, free disk of the state directory, the process's memory and fds). */
char *carrel_manager_metrics_text(CarrelManager *mgr, const CarrelPrincipal *who, GError **error);

/* A session's egress log (CarrelEgressRecord), oldest first, after after_seq, at most limit
 * (1-10000). */
GPtrArray *carrel_manager_session_egress(CarrelManager *mgr, const CarrelPrincipal *who,
                                         const char *id_or_name, gint64 after_seq, guint limit,
                                         GError **error);

/* The loaded policies' names, ", "-separated (for carreld's log). */
char *carrel_manager_policy_names(CarrelManager *mgr);
/* Named policies: {policies: [carrel_policy_to_json...]}, those who may use alone; show: one,
 * NOT_FOUND when unknown or not the caller's to use. */
JsonNode *carrel_manager_policy_list(CarrelManager *mgr, const CarrelPrincipal *who,
                                     GError **error);
JsonNode *carrel_manager_policy_show(CarrelManager *mgr, const CarrelPrincipal *who,
                                     const char *name, GError **error);

/* Records an event on a session's timeline (kind "lifecycle", "control", ...); a failure is the
 * error the action ended with. FALSE when the event could not be recorded (after a few tries):
 * the caller's verb then fails with that error, or logs it. */
gboolean carrel_manager_note(CarrelManager *mgr, const char *session_id, const CarrelPrincipal *who,
                             const char *kind, const char *action, JsonNode *params,
                             JsonNode *result, const GError *failure, gint64 started_us,
                             GError **error);

/*
 * The control lease: while a person holds it, agents' mutating verbs and everyone else's HID
 * events are refused (WRONG_STATE, "session under human control"; the policy decides). Take:
 * WRONG_STATE when someone else holds it. Release: FORBIDDEN when someone else holds it, unless
 * who is an admin. Both answer {holder, holder_id, since} and are recorded.
 */
JsonNode *carrel_manager_lease_get(CarrelManager *mgr, const CarrelPrincipal *who,
                                   const char *id_or_name, GError **error);
JsonNode *carrel_manager_lease_take(CarrelManager *mgr, const CarrelPrincipal *who,
                                    const char *id_or_name, GError **error);
JsonNode *carrel_manager_lease_release(CarrelManager *mgr, const CarrelPrincipal *who,
                                       const char *id_or_name, GError **error);
/* The lease of a session its caller read through core already (a get or a list, which decided
 * who may see it): one read, without a second decision per session of a list. NULL when the
 * store cannot say. */
JsonNode *carrel_manager_lease_of(CarrelManager *mgr, const CarrelSession *session);
/* Every lease held, as for carrel_manager_lease_of: session id -> {holder, holder_id, since},
 * for a list of sessions read through core; NULL when the store cannot say. */
GHashTable *carrel_manager_leases(CarrelManager *mgr);
/* The holder's token id and name (NULLs when nobody holds it or the session is unknown). */
void carrel_manager_lease_holder(CarrelManager *mgr, const char *session_id, char **ret_holder_id,
                                 char **ret_holder_label);

/* Approvals: actions waiting for a reviewer (requested by policies; the API's test hook). */
CarrelApproval *carrel_manager_approval_request(CarrelManager *mgr, const CarrelPrincipal *who,
                                                const char *id_or_name, const char *action,
                                                JsonNode *detail, GError **error);
GPtrArray *carrel_manager_approval_list(CarrelManager *mgr, const CarrelPrincipal *who,
                                        gboolean pending_only, GError **error);
/* WRONG_STATE when decided already; reason may be NULL. */
CarrelApproval *carrel_manager_approval_decide(CarrelManager *mgr, const CarrelPrincipal *who,
                                               const char *id, gboolean approve, const char *reason,
                                               GError **error);

/* Templates. */
CarrelTemplate *carrel_manager_template_import(CarrelManager *mgr, const CarrelPrincipal *who,
                                               const CarrelTemplateImport *req, GError **error);
/* Every version (GPtrArray of CarrelTemplate). */
GPtrArray *carrel_manager_template_list(CarrelManager *mgr, const CarrelPrincipal *who,
                                        GError **error);
/* version 0 = latest. */
CarrelTemplate *carrel_manager_template_get(CarrelManager *mgr, const CarrelPrincipal *who,
                                            const char *name, guint version, GError **error);
guint carrel_manager_template_sessions(CarrelManager *mgr, const char *name, guint version);
/* Removes name@version, or every version of name when version is 0; WRONG_STATE while
 * sessions use what would go. Returns the removed refs. */
GStrv carrel_manager_template_remove(CarrelManager *mgr, const CarrelPrincipal *who,
                                     const char *name, guint version, GError **error);

/* Jobs: long work (template builds) runs in its own thread and is polled. */
typedef struct _CarrelJob CarrelJob;

/* Starts building the recipe <recipes_dir>/<name>; returns the job (a new reference). */
CarrelJob *carrel_manager_template_build(CarrelManager *mgr, const CarrelPrincipal *who,
                                         const char *name, GError **error);
/*
 * Starts warming name@version (0 = latest): boots it, waits for its desktop, saves its memory
 * with the frozen disk layer. Already warm: the job ends at once with the existing state.
 */
CarrelJob *carrel_manager_template_warm(CarrelManager *mgr, const CarrelPrincipal *who,
                                        const char *name, guint version, GError **error);
/* The warm state of a template version, or NULL when it is not warm. */
CarrelWarmState *carrel_manager_template_warm_state(CarrelManager *mgr, const char *name,
                                                    guint version);

/* Jobs still running (the daemon must not free the manager under them). */
guint carrel_manager_jobs_running(CarrelManager *mgr);
/* On the way out: refuses new verbs (BUSY) and waits up to timeout_s for the running ones
 * (snapshots, reverts, creates, warms...) to end; returns how many still run. */
guint carrel_manager_drain(CarrelManager *mgr, guint timeout_s);
/* Waits (a minute at most) until what a create, claim, revert, fork or resume left to do after
 * its reply (clock, MAC, screen size) is done. Verbs that reach the guest wait for it at the
 * door by themselves. */
void carrel_manager_wait_caught_up(CarrelManager *mgr, const char *session_id);

/* A new reference to a job, or NOT_FOUND. */
CarrelJob *carrel_manager_job_get(CarrelManager *mgr, const CarrelPrincipal *who, const char *id,
                                  GError **error);
CarrelJob *carrel_job_ref(CarrelJob *job);
void carrel_job_unref(CarrelJob *job);
G_DEFINE_AUTOPTR_CLEANUP_FUNC(CarrelJob, carrel_job_unref)
const char *carrel_job_get_id(CarrelJob *job);
/* Snapshot of the job as the API's JSON object. */
JsonNode *carrel_job_to_json(CarrelJob *job);
/* Blocks until the job ends; TRUE when it succeeded. For tests and the CLI-less paths. */
gboolean carrel_job_wait(CarrelJob *job, GError **error);

/* Sessions. */
CarrelSession *carrel_manager_session_create(CarrelManager *mgr, const CarrelPrincipal *who,
                                             const CarrelSessionRequest *req, GError **error);
GPtrArray *carrel_manager_session_list(CarrelManager *mgr, const CarrelPrincipal *who,
                                       gboolean include_destroyed, GError **error);
/*
 * The door of a session list (authorization, a refusal audited), as carrel_manager_session_list
 * enters it, without reading the list: for a front door that keeps lists it made. ret_scope
 * names which sessions who sees ("*": every owner's; "own:ID": those of token ID), and
 * ret_generation is the store's generation (carrel_manager_generation) read first, so a list
 * read afterwards for the same scope is the list for as long as the generation stays the same.
 */
gboolean carrel_manager_session_list_scope(CarrelManager *mgr, const CarrelPrincipal *who,
                                           char **ret_scope, guint64 *ret_generation,
                                           GError **error);
/* The store's generation: it grows with every write to carrel's database. */
guint64 carrel_manager_generation(CarrelManager *mgr);
CarrelSession *carrel_manager_session_get(CarrelManager *mgr, const CarrelPrincipal *who,
                                          const char *id_or_name, GError **error);
CarrelSession *carrel_manager_session_start(CarrelManager *mgr, const CarrelPrincipal *who,
                                            const char *id_or_name, GError **error);
/* Graceful power-off within timeout_s, then forced. */
CarrelSession *carrel_manager_session_stop(CarrelManager *mgr, const CarrelPrincipal *who,
                                           const char *id_or_name, guint timeout_s, GError **error);
/* Pause: vCPUs stopped, memory kept (a host reboot loses it: hibernate survives one). */
CarrelSession *carrel_manager_session_pause(CarrelManager *mgr, const CarrelPrincipal *who,
                                            const char *id_or_name, GError **error);
/* Hibernate: memory saved to a file under the session, QEMU gone (no CPU, no RAM held). */
CarrelSession *carrel_manager_session_hibernate(CarrelManager *mgr, const CarrelPrincipal *who,
                                                const char *id_or_name, GError **error);
/* Resume a paused session, or restore a hibernated one (clock set, agent answering). */
CarrelSession *carrel_manager_session_resume(CarrelManager *mgr, const CarrelPrincipal *who,
                                             const char *id_or_name, GError **error);
/* Destroys the domain, undefines it and deletes the session's files; the row stays as
 * "destroyed" for the record. */
CarrelSession *carrel_manager_session_destroy(CarrelManager *mgr, const CarrelPrincipal *who,
                                              const char *id_or_name, GError **error);

/*
 * Runs a command in a running session through the guest agent; output bounded, the process
 * killed at the timeout. *ret_result is filled only on success (clear it after use). Recorded
 * as an event by actor (argv, cwd and env names, never env values or output).
 */
gboolean carrel_manager_session_exec(CarrelManager *mgr, const CarrelPrincipal *who,
                                     const char *id_or_name, const CarrelExecRequest *req,
                                     CarrelExecResult *ret_result, GError **error);

/*
 * Background processes (carrel-guest proc in the guest, core-procs.c), each behind the
 * session.exec door. Handles are the guest's ("p" and hex digits); the guest's spool folder is
 * their state, so they outlive a carreld restart. Errors: NOT_FOUND for an unknown handle,
 * WRONG_STATE for a process that has exited (signal, input) or whose input is closed,
 * UNSUPPORTED for a guest without carrel-guest, HYPERVISOR for a malformed guest reply.
 */
/* Starts req (req->stdin_bytes written to it, its input left open): its handle and pid. */
CarrelProcInfo *carrel_manager_proc_start(CarrelManager *mgr, const CarrelPrincipal *who,
                                          const char *id_or_name, const CarrelExecRequest *req,
                                          GError **error);
/* The session's processes, oldest first (CarrelProcInfo; at most CARREL_PROC_LIST_MAX). */
GPtrArray *carrel_manager_proc_list(CarrelManager *mgr, const CarrelPrincipal *who,
                                    const char *id_or_name, GError **error);
/* A process's state and the output from these offsets (at most CARREL_PROC_CHUNK_MAX each). */
CarrelProcRead *carrel_manager_proc_read(CarrelManager *mgr, const CarrelPrincipal *who,
                                         const char *id_or_name, const char *handle,
                                         gint64 stdout_offset, gint64 stderr_offset,
                                         GError **error);
/* Sends signal (1..64) to the process's group. */
gboolean carrel_manager_proc_signal(CarrelManager *mgr, const CarrelPrincipal *who,
                                    const char *id_or_name, const char *handle, int signal,
                                    GError **error);
/* Writes input->data to the process's input, then ends it when input->close. */
gboolean carrel_manager_proc_input(CarrelManager *mgr, const CarrelPrincipal *who,
                                   const char *id_or_name, const char *handle,
                                   const CarrelProcInput *input, GError **error);

/*
 * A streamed command (core-stream.c): started through the session.exec door as a background
 * process with its input closed after req->stdin_bytes, then read with _next until a read
 * says it is the last (carrel_proc_read_is_last). Past req->timeout_s the process is killed
 * (exit 137, timed_out); past 64 MiB of output, too (truncated). _cancel kills it (the client
 * left). _finish records the command's event once and returns the end record (handle,
 * exit_code, timed_out, truncated, cancelled, stdout_bytes, stderr_bytes, duration_ms).
 * One thread at a time.
 */
typedef struct _CarrelExecStream CarrelExecStream;
CarrelExecStream *carrel_manager_exec_stream_start(CarrelManager *mgr, const CarrelPrincipal *who,
                                                   const char *id_or_name,
                                                   const CarrelExecRequest *req, GError **error);
const char *carrel_exec_stream_handle(const CarrelExecStream *st);
CarrelProcRead *carrel_exec_stream_next(CarrelExecStream *st, GError **error);
/* Whether each read waits in the guest for output (then the caller need not pause between). */
gboolean carrel_exec_stream_waits(const CarrelExecStream *st);
void carrel_exec_stream_cancel(CarrelExecStream *st);
JsonNode *carrel_exec_stream_finish(CarrelExecStream *st, const GError *failure);
void carrel_exec_stream_free(CarrelExecStream *st);
G_DEFINE_AUTOPTR_CLEANUP_FUNC(CarrelExecStream, carrel_exec_stream_free)

/*
 * An interactive terminal (core-shell.c): a login shell on a pseudo-terminal in the guest
 * (carrel-guest proc start --pty). _open passes the session.shell door: FORBIDDEN unless who
 * holds the session's control lease or is an admin, WRONG_STATE unless it runs; nothing starts
 * yet. _start starts it rows x cols (1..CARREL_SHELL_SIZE_MAX, conf-proc.h) as the session's
 * "command" "shell" event. _read gives the output since the last read (at most
 * CARREL_PROC_CHUNK_MAX) and says when the shell ended and its output is read out, with its exit
 * code. _write is refused (FORBIDDEN) once the lease moved to someone else. _close kills what is
 * left (the guest ends the shell's whole session) and records the end. One thread at a time.
 */
typedef struct _CarrelShell CarrelShell;
CarrelShell *carrel_manager_shell_open(CarrelManager *mgr, const CarrelPrincipal *who,
                                       const char *id_or_name, GError **error);
gboolean carrel_shell_start(CarrelShell *sh, guint rows, guint cols, GError **error);
const char *carrel_shell_handle(const CarrelShell *sh);
GBytes *carrel_shell_read(CarrelShell *sh, gboolean *ret_ended, int *ret_exit_code, GError **error);
gboolean carrel_shell_write(CarrelShell *sh, GBytes *data, GError **error);
/* The shell reads the end of its input (^D) after what was written. */
gboolean carrel_shell_end_input(CarrelShell *sh, GError **error);
gboolean carrel_shell_resize(CarrelShell *sh, guint rows, guint cols, GError **error);
void carrel_shell_close(CarrelShell *sh);
void carrel_shell_free(CarrelShell *sh);
G_DEFINE_AUTOPTR_CLEANUP_FUNC(CarrelShell, carrel_shell_free)

/*
 * Reads a file of a running session through the guest agent (at most CARREL_LIMIT_FILE_BYTES;
 * path absolute and clean, see carrel_util_check_guest_path). Recorded as an event by actor.
 */
GBytes *carrel_manager_session_file_read(CarrelManager *mgr, const CarrelPrincipal *who,
                                         const char *id_or_name, const char *path, GError **error);

/* Writes data to a file of a running session (created or replaced) through the guest agent. */
gboolean carrel_manager_session_file_write(CarrelManager *mgr, const CarrelPrincipal *who,
                                           const char *id_or_name, const char *path, GBytes *data,
                                           GError **error);

/* What a streamed transfer moved. */
typedef struct {
    char *host_path; /* download: the spool file holding the bytes (the caller removes it) */
    guint64 bytes;
    char *sha256; /* lowercase hex, computed chunk by chunk as the bytes passed */
} CarrelTransfer;

void carrel_transfer_clear(CarrelTransfer *t);
G_DEFINE_AUTO_CLEANUP_CLEAR_FUNC(CarrelTransfer, carrel_transfer_clear)

/*
 * Streams a guest file (at most CARREL_LIMIT_TRANSFER_BYTES, LIMIT beyond) into a new spool file
 * under the state dir's uploads/ (swept like an unused upload if carreld dies before the caller
 * removes it), 64 KiB per agent call, never the whole file in memory. Path as for file_read;
 * audited as "file_read" with bytes and sha256, as root in the guest (qemu-ga's rights).
 */
gboolean carrel_manager_session_file_download(CarrelManager *mgr, const CarrelPrincipal *who,
                                              const char *id_or_name, const char *path,
                                              CarrelTransfer *ret_transfer, GError **error);

/*
 * A signed evidence bundle of a session in any state (a destroyed one too, while its records
 * are kept): record, audit rows, timeline, kept screenshots, artifacts, egress log and policy,
 * with manifest.json and the host key's manifest.sig (see evidence.h). Written to a new spool
 * file (ret_transfer->host_path, bytes; the caller removes it). Audited as session.export; the
 * bundle holds the rows before that one.
 */
gboolean carrel_manager_session_export(CarrelManager *mgr, const CarrelPrincipal *who,
                                       const char *id_or_name, CarrelTransfer *ret_transfer,
                                       GError **error);
/* The host key that signs bundles: its public key (base64 of the 32 raw bytes) and its
 * fingerprint ("sha256:<hex>"), for auditors to pin. */
const char *carrel_manager_get_host_key(CarrelManager *mgr);
const char *carrel_manager_get_host_fingerprint(CarrelManager *mgr);

/*
 * Streams the spool file spool_path (bytes long, from carrel_manager_upload_spool) into the
 * guest file path (created or truncated, as root), chunk by chunk; *ret_transfer gets bytes and
 * sha256 of what was sent. Audited as "file_write". The spool file stays the caller's.
 */
gboolean carrel_manager_session_file_upload(CarrelManager *mgr, const CarrelPrincipal *who,
                                            const char *id_or_name, const char *path,
                                            const char *spool_path, guint64 bytes,
                                            CarrelTransfer *ret_transfer, GError **error);

/*
 * The accessibility (AT-SPI) tree of a running session's desktop through carrel-guest a11y:
 * the focused window or the whole desktop, as req bounds it, every element with an id that
 * click_element takes (carrel_a11y_tree_from_guest: the guest's reply checked as untrusted).
 * Looking, like a screenshot: the session.screenshot operation; audited as an action
 * "accessibility" (the request and the tree's size, not the tree). UNSUPPORTED without
 * carrel-guest in the guest; FAILED when the guest has no accessibility bus.
 */
JsonNode *carrel_manager_session_accessibility(CarrelManager *mgr, const CarrelPrincipal *who,
                                               const char *id_or_name, const CarrelA11yRequest *req,
                                               GError **error);

/*
 * File operations in a running session's guest through carrel-guest fs (as root, like the file
 * routes), each audited with kind "file" and action fs_list, fs_stat, fs_mkdir, fs_remove or
 * fs_move. Paths must pass carrel_fs_check_path; the guest's reply is checked as untrusted
 * (carrel_fs_listing_from_guest). Guest failures keep their meaning: NOT_FOUND, EXISTS,
 * WRONG_STATE (a directory not empty without recursive), INVALID_ARG, FORBIDDEN; UNSUPPORTED
 * when the guest has no carrel-guest. list/stat use the file_read operation, the others
 * file_write.
 */
JsonNode *carrel_manager_session_fs_list(CarrelManager *mgr, const CarrelPrincipal *who,
                                         const char *id_or_name, const char *path, GError **error);
JsonNode *carrel_manager_session_fs_stat(CarrelManager *mgr, const CarrelPrincipal *who,
                                         const char *id_or_name, const char *path, GError **error);
JsonNode *carrel_manager_session_fs_mkdir(CarrelManager *mgr, const CarrelPrincipal *who,
                                          const char *id_or_name, const char *path,
                                          gboolean parents, GError **error);
JsonNode *carrel_manager_session_fs_remove(CarrelManager *mgr, const CarrelPrincipal *who,
                                           const char *id_or_name, const char *path,
                                           gboolean recursive, GError **error);
JsonNode *carrel_manager_session_fs_move(CarrelManager *mgr, const CarrelPrincipal *who,
                                         const char *id_or_name, const char *from, const char *to,
                                         GError **error);

/*
 * A screenshot of a running or paused session, taken by the hypervisor (never the guest),
 * cropped, scaled and encoded as req says; kept for the timeline and recorded as an event.
 */
/* A screenshot kept with a timeline event (its "screenshot" name); ret_type: its MIME type. */
GBytes *carrel_manager_session_kept_screenshot(CarrelManager *mgr, const CarrelPrincipal *who,
                                               const char *id_or_name, const char *name,
                                               const char **ret_type, GError **error);
GBytes *carrel_manager_session_screenshot(CarrelManager *mgr, const CarrelPrincipal *who,
                                          const char *id_or_name,
                                          const CarrelScreenshotRequest *req, GError **error);

/*
 * Runs computer actions on a running session: body is one action or a batch in any supported
 * format (see carrel_action_batch_from_json). HID events go through the hypervisor; the reply is
 * {results: [{index, action, duration_ms, output?, screenshot?}], screenshot (the observation
 * after the last action, or null), screen, pointer, duration_ms}, sizes and positions in the
 * model's space. Every action is recorded as an event; the batch stops at the first failure.
 */
JsonNode *carrel_manager_session_computer(CarrelManager *mgr, const CarrelPrincipal *who,
                                          const char *id_or_name, JsonNode *body, GError **error);

/*
 * A session's screen recording (policy [recording]; core-recording.c), read like its timeline:
 * {enabled, fps, active, segments: [{name, started_ms, ended_ms (null while open), duration_ms,
 * frames, bytes, sha256 (null while open), open}], dropped (segments deleted to keep max_mib),
 * events: [{seq, segment, offset_ms}] (each timeline event inside a finished segment)}.
 */
JsonNode *carrel_manager_session_recording(CarrelManager *mgr, const CarrelPrincipal *who,
                                           const char *id_or_name, GError **error);
/* Where a finished segment of it is (name exactly "seg-NNNNNN.webm": INVALID_ARG otherwise;
 * NOT_FOUND for one open, dropped or unknown); *ret_sha256 (optional) its hash. */
char *carrel_manager_session_recording_segment(CarrelManager *mgr, const CarrelPrincipal *who,
                                               const char *id_or_name, const char *name,
                                               char **ret_sha256, GError **error);

/* A session's timeline: events with seq > after_seq, oldest first, 1..1000 of them. */
GPtrArray *carrel_manager_session_events(CarrelManager *mgr, const CarrelPrincipal *who,
                                         const char *id_or_name, gint64 after_seq, guint limit,
                                         GError **error);

/*
 * Takes paths out of a session as artifacts (see CarrelExtraction): through the guest agent
 * when it runs, else from its disk with libguestfs, read-only. Recorded as an event by actor.
 * What came out before a limit or a failure is kept and the extraction's error says why.
 */
CarrelExtraction *carrel_manager_session_extract(CarrelManager *mgr, const CarrelPrincipal *who,
                                                 const char *id_or_name,
                                                 const CarrelExtractRequest *req, GError **error);
/* A session's extractions, oldest first, with their artifacts. */
GPtrArray *carrel_manager_session_extractions(CarrelManager *mgr, const CarrelPrincipal *who,
                                              const char *id_or_name, GError **error);
/* An artifact's record; *ret_host_path is where its bytes are (regular files written only). */
CarrelArtifact *carrel_manager_artifact_get(CarrelManager *mgr, const CarrelPrincipal *who,
                                            const char *id, char **ret_host_path, GError **error);

/*
 * The watcher: one round finds running sessions whose domain is gone, shut off or crashed,
 * records the new state and collects their exit artifacts. Returns how many changed.
 * start_watch runs rounds every interval_ms (0 = 2000) in a thread until stop_watch (also
 * called by carrel_manager_free).
 */
guint carrel_manager_watch(CarrelManager *mgr);
void carrel_manager_start_watch(CarrelManager *mgr, guint interval_ms);
void carrel_manager_stop_watch(CarrelManager *mgr);

/*
 * Uploads (POST /v1/uploads) arrive in a spool file: spool creates an empty one under the state
 * dir's uploads/ (0600) and returns its descriptor (close-on-exec) and path. It is no verb:
 * nothing is stored for anyone until upload_file takes it, and an abandoned spool file is swept
 * like an unused upload.
 */
int carrel_manager_upload_spool(CarrelManager *mgr, char **ret_path, GError **error);
/* Stores the spool file at spool_path (bytes long) as a tar of task inputs for a later create,
 * moving it; returns its id "u-...". */
char *carrel_manager_upload_file(CarrelManager *mgr, const CarrelPrincipal *who,
                                 const char *spool_path, guint64 bytes, GError **error);
/* Removes the uploads (and spool files) untouched for the upload TTL, each with an audit row
 * "upload.expire" by carreld; returns how many. The watcher runs it every round. */
guint carrel_manager_sweep_uploads(CarrelManager *mgr);

/*
 * Files added, changed and removed in a session's disk against its template's (CarrelDiffEntry,
 * by path), under the guest folder under (NULL: everywhere). Changed regular files carry the
 * new content's sha256. A running session's disk is copied while its filesystems are frozen.
 */
GPtrArray *carrel_manager_session_diff(CarrelManager *mgr, const CarrelPrincipal *who,
                                       const char *id_or_name, const char *under, GError **error);

/*
 * Snapshots. create: a running session's memory and disk (it runs on after a pause of a few
 * seconds), a stopped session's disk only; EXISTS for a name already taken. list: oldest
 * first, sizes filled. revert: back to any snapshot, any number of times (running again when
 * it has memory, else stopped); the current state is dropped.
 */
CarrelSnapshot *carrel_manager_snapshot_create(CarrelManager *mgr, const CarrelPrincipal *who,
                                               const char *id_or_name, const char *name,
                                               GError **error);
GPtrArray *carrel_manager_snapshot_list(CarrelManager *mgr, const CarrelPrincipal *who,
                                        const char *id_or_name, GError **error);
/* Deletes a snapshot: its memory always, its disk layer only when no other snapshot, the
 * session's disk or a fork stands on it (*ret_layer_kept says which); its children re-link to
 * its parent, so every chain stays valid. */
gboolean carrel_manager_snapshot_delete(CarrelManager *mgr, const CarrelPrincipal *who,
                                        const char *id_or_name, const char *snapshot,
                                        gboolean *ret_layer_kept, GError **error);
CarrelSession *carrel_manager_snapshot_revert(CarrelManager *mgr, const CarrelPrincipal *who,
                                              const char *id_or_name, const char *snapshot,
                                              GError **error);

/*
 * Forks count (1..CARREL_LIMIT_FORKS) new running sessions from a snapshot's memory (snapshot
 * NULL: one taken now), each on its own overlay with its own UUID, generation id and MAC. All
 * or nothing. The origin cannot be destroyed while its forks live.
 */
GPtrArray *carrel_manager_session_fork(CarrelManager *mgr, const CarrelPrincipal *who,
                                       const char *id_or_name, const char *snapshot, guint count,
                                       GError **error);

/* Warm pools: size (0..CARREL_LIMIT_POOL, 0 = none) per template name; the watcher fills them
 * with paused sessions that creates take. list: {pools: [{template, size, ready, members}]}. */
gboolean carrel_manager_pool_set(CarrelManager *mgr, const CarrelPrincipal *who,
                                 const char *template_name, guint size, GError **error);
JsonNode *carrel_manager_pool_list(CarrelManager *mgr, const CarrelPrincipal *who, GError **error);

/* Console access (core-console.c). */
#define CARREL_CONSOLE_PASSWORD_TTL_S 30
/* A password with at least this much life left is handed out again instead of replaced. */
#define CARREL_CONSOLE_PASSWORD_REUSE_S 15

/* A way into a session's SPICE display. */
typedef struct {
    char *session_id;
    char *domain;
    guint port;        /* SPICE on 127.0.0.1 */
    char *password;    /* the SPICE password (secret: never log it) */
    gint64 expires_at; /* Unix seconds: new connections need the password until then */
} CarrelConsoleAccess;

void carrel_console_access_free(CarrelConsoleAccess *access);
G_DEFINE_AUTOPTR_CLEANUP_FUNC(CarrelConsoleAccess, carrel_console_access_free)

/*
 * The SPICE port of a running or paused session and a password valid for
 * CARREL_CONSOLE_PASSWORD_TTL_S: the current one while it has at least
 * CARREL_CONSOLE_PASSWORD_REUSE_S left (for the same QEMU), else a new random one set on the
 * domain. WRONG_STATE for sessions in other states, UNSUPPORTED where passwords cannot be set.
 */
/* TRUE when who (a token still live) holds the session's control lease: only then may its
 * console send keyboard and mouse (the proxy asks for every message that acts on the guest). */
gboolean carrel_manager_console_may_act(CarrelManager *mgr, const CarrelPrincipal *who,
                                        const char *session_id);
/*
 * What a person did on a session's console, reported by the console proxy: action "click"
 * {x, y, button, modifiers?}, "keys" {combo} or "type" {text}, its first input at started_us
 * (monotonic; 0: now). Recorded on the timeline as kind "console" with actor_kind "person" and
 * who's name, only while who (a token still live) holds the control lease: FORBIDDEN
 * otherwise, and nothing is recorded. Typed text stays on the timeline only when the session's
 * policy says [console] record_typed_text=true; else the event holds {redacted: true, chars}.
 * INVALID_ARG for another action or malformed params.
 */
gboolean carrel_manager_person_event(CarrelManager *mgr, const CarrelPrincipal *who,
                                     const char *session_id, const char *action, JsonNode *params,
                                     gint64 started_us, GError **error);
CarrelConsoleAccess *carrel_manager_console_open(CarrelManager *mgr, const CarrelPrincipal *who,
                                                 const char *id_or_name, GError **error);

G_END_DECLS
