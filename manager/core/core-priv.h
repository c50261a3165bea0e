/* core: internals shared by the module's files. */
#pragma once

#include "core/core.h"
#include "egress/egress.h"
#include "evidence/evidence.h"
#include "policy/policy.h"
#include "store/store.h"

/* Where the shipped templates install carrel-guest (readiness and the desktop helpers). */
#define CARREL_GUEST_TOOL_PATH "/usr/local/bin/carrel-guest"

/* carrel-guest's {"error":{"code","message"}} reply as a CARREL_ERROR of the matching code
 * (FAILED for any other), "WHAT: MESSAGE"; every level checked, the message bounded and clean
 * (core-helper.c). */
void carrel_manager_guest_error(JsonNode *reply, const char *what, GError **error);

/* The watcher's chores (core-chores.c). */
typedef enum { CARREL_CHORE_REFILL, CARREL_CHORE_COLLECT, CARREL_CHORE_LAST } CarrelChore;

struct _CarrelManager {
    char *state_dir;
    char *recipes_dir;
    char *cache_dir;
    char *guest_tool;
    char *guest_tool_src;
    char *instance_id;
    CarrelEvidenceKey *host_key; /* signs evidence bundles (core-export.c) */
    CarrelAccel accel;
    char *accel_reason;
    guint agent_timeout_s;
    guint screen_grace_s;
    guint screen_poll_ms;
    guint tb_cache_mib;
    guint upload_ttl_s;
    guint shots_max; /* screenshots kept per session (the oldest go beyond) */
    guint64 shots_max_bytes;
    CarrelStore *store;
    CarrelHypervisor *hv;
    CarrelPolicySet *policies;   /* the named policies (core-policy.c) */
    const CarrelPolicy *policy;  /* "default": its [roles] are the role matrix */
    GMutex tokens_lock;          /* guards tokens_known and tokens_generation */
    GHashTable *tokens_known;    /* sha256 of a secret -> CarrelToken, as the store had it */
    guint64 tokens_generation;   /* the store's generation tokens_known was read at */
    GMutex lock;                 /* guards busy and jobs */
    GHashTable *busy;            /* session id or "template:<name>" -> operation name */
    GCond busy_cond;             /* with lock: a busy mark was cleared */
    GHashTable *catchup_pending; /* session id -> CarrelCatchupStep bits to do after (lock) */
    guint catchups_running;      /* catch-up jobs not yet at their end (lock) */
    guint reclaims_running;      /* memory-reclaim jobs not yet at their end (lock) */
    gboolean draining;           /* with lock: carreld stops, no new verb starts */
    GHashTable *jobs;            /* job id -> CarrelJob */
    GHashTable *hid_states;      /* session id -> CarrelHidState, guarded by lock */
    GHashTable *creating;        /* token id -> creates and forks running (guint), lock */
    GThread *watch_thread;
    GMutex watch_lock; /* guards watch_stop, with watch_cond */
    GCond watch_cond;
    gboolean watch_stop;
    guint watch_interval_ms;
    GPtrArray *pending_exit; /* session ids whose exit paths are to collect (a chore); lock */
    GThreadPool *chores;     /* the watcher's chores (core-chores.c); NULL: run inline */
    gboolean chore_queued[CARREL_CHORE_LAST]; /* guarded by lock */
    GMutex console_lock;                      /* guards consoles */
    GHashTable *consoles;       /* session id -> its current SPICE password (core-console.c) */
    GHashTable *secret_values;  /* "POLICY/NAME" -> value (core-policy.c) */
    char **secret_headers;      /* the proxy's secret headers, in squid.conf's order */
    char *egress_dns;           /* the sessions' upstream resolver, or NULL: no egress path */
    char *egress_ca;            /* extra CAs squid trusts upstream (tests), or NULL */
    char *egress_helper;        /* carrel-egress-helper */
    char *emulator;             /* what domains start as QEMU (core-emulator.c), or NULL */
    char *cpu_cache;            /* carrel-qemu's CPU answers (core-emulator.c), or NULL */
    gboolean reads_allocate;    /* reads of untouched memory allocate it (core-warm.c) */
    GMutex egress_lock;         /* guards egress and egress_sources */
    CarrelEgress *egress;       /* started with the first session that has a network */
    GHashTable *egress_sources; /* address -> id of the session on the path (or being made) */
    GPtrArray *egress_asks;     /* PendingAsk, main context only (core-egress-decide.c) */
    guint egress_ask_timer;
    CarrelMetrics *metrics; /* every family declared (core-metrics.c); api counts requests */
    GMutex disk_lock;       /* guards reserve_held (core-disk.c) */
    char *reserve_path;     /* the disk reserve in the state dir */
    guint64 reserve_bytes;  /* its size; 0: none */
    guint64 low_bytes;      /* less free than this refuses creates, snapshots, uploads */
    gboolean reserve_held;
    GMutex recorders_lock; /* guards recorders */
    GMutex reclaim_lock;   /* held by the one memory reclaim under way (core-warm.c) */
    GHashTable *recorders; /* session id (the recorder's) -> CarrelRecorder (core-recording.c) */
};

/*
 * Screen recording (core-recording.c). sync: starts the session's recorder when it runs under a
 * policy that records (and no verb holds it), stops it otherwise; stop: ends it, its segment
 * finished (the lifecycle verbs, before they act); watch: sync for every listed session, stop
 * for the others (the watcher); stop_all: carreld stops. A recorder that failed stays ended
 * until its session stops running.
 */
typedef struct _CarrelRecorder CarrelRecorder;
/* How many pages of 1000 timeline events the recording's events index reads at most. */
#define CARREL_RECORDING_EVENT_PAGES 100
char *carrel_manager_recording_dir(const CarrelSession *session);
void carrel_manager_recording_sync(CarrelManager *mgr, const CarrelSession *session);
void carrel_manager_recording_sync_id(CarrelManager *mgr, const char *session_id);
void carrel_manager_recording_stop(CarrelManager *mgr, const char *session_id);
void carrel_manager_recording_watch(CarrelManager *mgr, GPtrArray *sessions);
void carrel_manager_recording_stop_all(CarrelManager *mgr);
gboolean carrel_manager_recording_active(CarrelManager *mgr, const char *session_id);
/* Something happened in the session (a timeline event): its recorder takes every tick's frame
 * for a few seconds, whatever the change signal says. */
void carrel_manager_recording_kick(CarrelManager *mgr, const char *session_id);
/* {enabled, fps, active, segments: [{name, started_ms, ended_ms, duration_ms, frames, bytes,
 * sha256, open}], dropped, events: [{seq, segment, offset_ms}]} (no door: export's too). */
JsonNode *carrel_manager_recording_to_json(CarrelManager *mgr, const CarrelSession *session,
                                           GError **error);

/* The verified tokens kept for authentication (core-token.c). */
void carrel_manager_tokens_init(CarrelManager *mgr);
void carrel_manager_tokens_clear(CarrelManager *mgr);

/* Metrics (core-metrics.c). A registry with every family of carreld declared. */
CarrelMetrics *carrel_manager_metrics_new(void);
/* Observes the time since started_us (monotonic) in a duration histogram, with its one label
 * value (NULL for histograms without labels). */
/*
 * Per-phase timings of the verb running on this thread (core-timings.c): begin opens a frame,
 * mark(PHASE) adds the time since the previous mark (or the begin) to PHASE (a string literal),
 * end closes the frame: {"PHASE_ms": N, ..., "total_ms": T}, or NULL when nothing was marked.
 * Marks with no frame open count nothing.
 */
void carrel_timings_begin(void);
void carrel_timings_mark(const char *phase);
JsonNode *carrel_timings_end(void);

/* How an observation after HID events went (core-settle.c). */
typedef struct {
    gboolean settled; /* the screen was seen to stop changing (FALSE: the cap, or a fixed wait) */
    gboolean changed; /* a frame differed from the one before the action */
    guint settled_ms; /* from the last HID event to the returned frame */
    guint samples;    /* screenshots taken */
} CarrelSettleResult;

/*
 * The screen of domain (validated PPM) once it has settled after HID events whose last one
 * ended at hid_at (monotonic µs), compared with ref_hash, the carrel_image_ppm_hash of a frame
 * taken before them (0: unknown, any frame counts as changed). See core-settle.c and
 * CarrelSettle for when it returns; *ret_result says how it went.
 */
GBytes *carrel_manager_settle_screen(CarrelManager *mgr, const char *domain,
                                     const CarrelSettle *settle, guint64 ref_hash, gint64 hid_at,
                                     CarrelSettleResult *ret_result, GError **error);

void carrel_manager_observe_since(CarrelManager *mgr, const char *histogram, const char *label,
                                  gint64 started_us);
/* carrel_hypervisor_restore, its time observed by what it restores ("warm", "hibernate",
 * "snapshot", "fork") when it succeeds. */
gboolean carrel_manager_restore(CarrelManager *mgr, const char *from, const char *memory,
                                const char *xml, GError **error);
/* Counts a record of the egress path that refused something (its log's decision word). */
void carrel_manager_count_egress(CarrelManager *mgr, const char *decision);

/*
 * The host's disk (core-disk.c). init: the reserve's size and the low mark (0: the reserve's
 * size). reserve: makes the reserve file (preallocated) unless held; NO_SPACE when there is no
 * room. release: gives it up (the store's full handler); TRUE when it freed room. tend: makes it
 * again once there is room to spare (the watcher). check: NO_SPACE "... WHAT refused until there
 * is room" while the reserve is given up or the disk is below the low mark.
 */
void carrel_manager_disk_init(CarrelManager *mgr, guint reserve_mib, guint low_mib);
/* core-emulator.c: mgr->emulator from path (NULL or "": libvirt's default), copied into the
 * state dir when libvirt's QEMU user could not run it where it is. */
gboolean carrel_manager_emulator_init(CarrelManager *mgr, const char *path, GError **error);
gboolean carrel_manager_disk_reserve(CarrelManager *mgr, GError **error);
gboolean carrel_manager_disk_release(CarrelManager *mgr);
void carrel_manager_disk_tend(CarrelManager *mgr);
gboolean carrel_manager_disk_check(CarrelManager *mgr, const char *what, GError **error);
/* The session's state reason when QEMU paused it for reason (NULL: not for a disk). */
const char *carrel_manager_pause_reason_text(CarrelPauseReason reason);
/* The state reason ("disk limit: ...") when the session's overlay holds more than its policy's
 * max_disk_gib, else NULL. */
char *carrel_manager_disk_over_limit(CarrelManager *mgr, const CarrelSession *session);

/* Sessions with a network (core-egress.c). prepare: at create, an address for a session whose
 * policy has network (starting the path if need be); FAILED when carreld has none. attach: once
 * the guest's agent answers, tell the guest its address (tell_guest) and put the session on the
 * path. detach: off the path. sync: off the path for sessions no longer running (the watcher).
 * resume: back on the path for sessions that ran on while carreld was down. */
gboolean carrel_manager_egress_prepare(CarrelManager *mgr, CarrelSession *session,
                                       const CarrelPolicy *policy, GError **error);
gboolean carrel_manager_egress_attach(CarrelManager *mgr, const CarrelSession *session,
                                      gboolean tell_guest, GError **error);
void carrel_manager_egress_detach(CarrelManager *mgr, const char *session_id, const char *address);
void carrel_manager_egress_sync(CarrelManager *mgr);
/* The path (and its libvirt network) up, for a session with an address that starts. */
gboolean carrel_manager_egress_ensure(CarrelManager *mgr, GError **error);
/* The session's tap on the egress network: "cs-" + its id's hex. */
char *carrel_manager_egress_tap(const CarrelSession *session);
/* The proxy's questions and the path's records (core-egress-decide.c, main context). */
void carrel_manager_egress_decide(CarrelEgressQuery *q, gpointer data);
void carrel_manager_egress_record(const char *source, const CarrelEgressRecord *rec, gpointer data);
void carrel_manager_egress_asks_init(CarrelManager *mgr);

/* type_secret (core-type-secret.c): body with each {"action": "type_secret", "name": N} made a
 * type action of the value of the session's policy's secret N; names gets, per action, N or
 * NULL. NOT_FOUND for a secret the policy does not have; never the value in an error. */
JsonNode *carrel_manager_expand_type_secret(CarrelManager *mgr, const CarrelSession *session,
                                            JsonNode *body, GPtrArray *names, GError **error);
/* Empties the texts of such an expanded body before it is freed. */
void carrel_manager_wipe_json(JsonNode *node);

/* Frees an entry of mgr->consoles. */
void carrel_console_password_free(gpointer data);

/* Per session: HID events are sent by one batch at a time, from where the last one left the
 * pointer. */
typedef struct {
    GMutex lock; /* held for a whole batch */
    CarrelPoint pointer;
} CarrelHidState;

/* The HID state of a session (created on first use; lives as long as the manager). */
CarrelHidState *carrel_manager_hid_state(CarrelManager *mgr, const char *session_id);

/* Runs a desktop helper action (clipboard_get/set, windows, launch, open) through carrel-guest;
 * its JSON output (untrusted: bounded, must be an object) is returned. */
JsonNode *carrel_manager_run_helper(CarrelManager *mgr, const char *domain,
                                    const CarrelAction *action, GError **error);

/* carrel-guest a11y in a domain (core-a11y.c). The element id (checked: carrel_a11y_check_id)
 * as it is now: {"id", "role", "name", "states", "bounds" (screen pixels), "action"}; NOT_FOUND
 * when the tree has no such element any more. */
JsonNode *carrel_manager_a11y_element(CarrelManager *mgr, const char *domain, const char *id,
                                      GError **error);
/* Runs the element's default action (AT-SPI DoAction 0): {"element", "action", "done"};
 * NOT_FOUND as above, INVALID_ARG when it has no action. */
JsonNode *carrel_manager_a11y_act(CarrelManager *mgr, const char *domain, const char *id,
                                  GError **error);

/* [limits] (core-limits.c): before a create or fork of count sessions by who, RATE_LIMITED
 * when who already owns too many sessions or runs too many creates and forks; else counts one
 * more running until carrel_manager_limits_leave. Admins and carreld are not limited. */
gboolean carrel_manager_limits_enter(CarrelManager *mgr, const CarrelPrincipal *who, guint count,
                                     GError **error);
void carrel_manager_limits_leave(CarrelManager *mgr, const CarrelPrincipal *who);

/* Marks key busy with op; BUSY naming the running op when it already is (callers may retry). */
gboolean carrel_manager_mark_busy(CarrelManager *mgr, const char *key, const char *op,
                                  GError **error);
/* Ends what carrel_manager_mark_busy began (or hands the mark to the catch-up job). */
void carrel_manager_clear_busy(CarrelManager *mgr, const char *key);

/* What a running guest may have set after the reply (core-catchup.c). */
typedef enum {
    CARREL_CATCHUP_CLOCK = 1 << 0,  /* the host's time (it stood still in the saved memory) */
    CARREL_CATCHUP_MAC = 1 << 1,    /* the session's own MAC (the saved NIC has the origin's) */
    CARREL_CATCHUP_SCREEN = 1 << 2, /* the session's screen size */
} CarrelCatchupStep;

/* Asks for steps once the verb holding session_id's busy mark clears it. */
void carrel_manager_catchup_later(CarrelManager *mgr, const char *session_id, guint steps);
/* With mgr->lock: the steps asked for key, its busy mark now "catch-up"; 0 when none. */
guint carrel_manager_catchup_take(CarrelManager *mgr, const char *key);
/* Runs steps as a job, which clears the "catch-up" mark when done. Inside a door, the job starts
 * when the outermost door ends: its event follows the verb's on the timeline. */
void carrel_manager_catchup_start(CarrelManager *mgr, const char *session_id, guint steps);
/* A door opens on this thread (catch-up jobs wait for it) and ends (they start). */
void carrel_catchup_hold(void);
void carrel_catchup_release(void);
/* Ends this thread's hold without starting what it held: returned (NULL when none) for
 * carrel_catchup_adopt on another thread. */
GPtrArray *carrel_catchup_unhold(void);
/* Jobs unheld on another thread: held by this thread's door (now, when it has none), or started
 * now. Takes jobs. */
void carrel_catchup_adopt(GPtrArray *jobs, gboolean now);
gboolean carrel_manager_is_catchup_op(const char *op);
/* Waits for every catch-up job (the manager goes next). */
void carrel_manager_catchup_drain(CarrelManager *mgr);
/* After a restore whose agent answered: the clock, the screen size and (new_mac) the MAC of
 * the session's own, after the reply; the MAC at once when the guest's network comes next. */
void carrel_manager_catchup_restored(CarrelManager *mgr, const CarrelSession *s, gboolean new_mac);

/*
 * Polls the guest agent until it answers, the domain stops, or the timeout passes. With
 * ret_by_screen, a guest whose agent stays silent past the grace period is also ready once its
 * screen is not blank and holds still (*ret_by_screen is then set TRUE).
 */
gboolean carrel_manager_wait_agent(CarrelManager *mgr, const char *domain, gboolean *ret_by_screen,
                                   GError **error);

/* The domain a warm state is saved from: as a session's, but its guest writes its RAM into
 * session->memory_file (when set), so that the save holds none. */
char *carrel_manager_warm_xml(CarrelManager *mgr, const CarrelSession *session,
                              const CarrelTemplate *tmpl, GError **error);
/* The domain XML of a session (pure builder over the session and its template). */
char *carrel_manager_session_xml(CarrelManager *mgr, const CarrelSession *session,
                                 const CarrelTemplate *tmpl, GError **error);

/* Makes sure carrel's isolated network exists, runs, and is really isolated (core-net.c). */
gboolean carrel_manager_ensure_network(CarrelManager *mgr, GError **error);

/*
 * Sets the MAC of the guest's NIC from inside (carrel-guest set-mac). A restored clone needs it:
 * QEMU's virtio-net state in the save image carries the MAC the template was saved with.
 */
/*
 * Sets the session's own screen size in its guest (carrel-guest screen WxH), after a boot or any
 * restore (a restored image has the size it was saved with). Nothing to do for a session that
 * keeps the image's own size; FAILED when the guest cannot (by_screen: no agent answered).
 */
gboolean carrel_manager_apply_screen(CarrelManager *mgr, const CarrelSession *session,
                                     gboolean by_screen, GError **error);
/* The same after a boot whose desktop may still be starting: waits until it is ready first. */
gboolean carrel_manager_apply_screen_after_boot(CarrelManager *mgr, const CarrelSession *session,
                                                gboolean by_screen, GError **error);
gboolean carrel_manager_set_guest_mac(CarrelManager *mgr, const char *domain, const char *mac,
                                      GError **error);

/* A restored clone takes its own MAC inside the guest; a failure is logged (the old MAC costs
 * nothing on the isolated network), never fatal. */
void carrel_manager_set_clone_mac(CarrelManager *mgr, const char *domain, const char *mac);

/* Starts the job that gives a restored clone's free memory back to the host (core-warm.c);
 * NULL, no job, when sessions run as carrel-qemu, whose restores stay small. */
CarrelJob *carrel_manager_reclaim_restored(CarrelManager *mgr, const CarrelSession *session);
/* Waits for every memory-reclaim job (the manager goes next): one cut off would leave its guest
 * with the balloon inflated. */
void carrel_manager_reclaim_drain(CarrelManager *mgr);
/* A background job that uses the manager starts (+1) or ends (-1) on *running, a counter under
 * mgr->lock; an end wakes the drains waiting on busy_cond. */
void carrel_manager_count_job(CarrelManager *mgr, guint *running, gint delta);

/* Removes domain and files of a session, collecting no error (best effort cleanup paths). */
void carrel_manager_session_teardown(CarrelManager *mgr, const CarrelSession *session);

/*
 * The cache key of the recipe in recipe_dir: its files, the library beside it that every recipe
 * sources (<recipes>/lib, when it exists) and the sources of carrel-guest, which the recipe
 * installs (sources, not the binary: a binary differs between build trees).
 */
char *carrel_manager_recipe_hash(CarrelManager *mgr, const char *recipe_dir, GError **error);

/* Import shared by import and build: one import per template name at a time. */
CarrelTemplate *carrel_manager_template_import_full(CarrelManager *mgr,
                                                    const CarrelTemplateImport *req,
                                                    const char *recipe_hash, GError **error);

/*
 * Waits until the guest's desktop is ready: carrel-guest's `ready` where the template has it,
 * else the screen is not blank and has stopped changing.
 */
gboolean carrel_manager_wait_ready(CarrelManager *mgr, CarrelJob *job, const char *domain,
                                   guint timeout_s, GError **error);

/*
 * Waits until the guest uses less than a fifth of one host CPU over a second, max_s at most:
 * TRUE once it does, FALSE when it is still busy then or the backend cannot tell. ret_waited_ms
 * (may be NULL): how long it waited.
 */
gboolean carrel_manager_wait_quiet(CarrelManager *mgr, const char *domain, guint max_s,
                                   guint *ret_waited_ms);

/* Jobs. */
void carrel_manager_add_job(CarrelManager *mgr, CarrelJob *job);
typedef gboolean (*CarrelJobFunc)(CarrelJob *job, gpointer data, JsonNode **ret_result,
                                  GError **error);
CarrelJob *carrel_job_new(const char *kind, const char *target);
void carrel_job_run(CarrelJob *job, CarrelJobFunc func, gpointer data, GDestroyNotify free_data);
void carrel_job_progress(CarrelJob *job, const char *line);

/* Stores a whole event (its seq is set), a few times if need be (see carrel_manager_record). */
gboolean carrel_manager_event_add(CarrelManager *mgr, CarrelEvent *event, GError **error);

/*
 * Appends an event to a session's timeline (see CarrelEvent): params and result are copied;
 * failure (NULL on success) gives the error text; started_us is the monotonic start (0: no
 * duration). A write that fails is tried again a few times (after the disk reserve is given up,
 * when the disk is full); then FALSE with "the ACTION event could not be recorded: ...". No
 * event is dropped silently: the caller fails its verb with that error, or logs it.
 */
gboolean carrel_manager_record(CarrelManager *mgr, const char *session_id,
                               const CarrelPrincipal *who, const char *kind, const char *action,
                               JsonNode *params, JsonNode *result, const GError *failure,
                               gint64 started_us, const char *screenshot, GError **error);
/* carrel_manager_record where no verb can fail with it (the watcher, the egress proxy's
 * records): an event that cannot be recorded is logged as critical. */
void carrel_manager_record_logged(CarrelManager *mgr, const char *session_id,
                                  const CarrelPrincipal *who, const char *kind, const char *action,
                                  JsonNode *params, JsonNode *result, const GError *failure,
                                  gint64 started_us);
/*
 * The usual end of a verb that records its own event: records the outcome (ok, or *local as
 * the failure) and returns ok. A verb that succeeded but whose event cannot be recorded fails:
 * FALSE with that error in *local. A verb that failed keeps its error (the lost event is
 * logged).
 */
/* An exec request as the guest's command line: env and cwd through env(1) (core-exec.c). */
GStrv carrel_manager_exec_argv(const CarrelExecRequest *req);
/* What the timeline and the audit keep of an exec request: argv, cwd, env names. */
JsonNode *carrel_manager_exec_params(const CarrelExecRequest *req);

/* carrel-guest proc ARGS... in domain, with in as its standard input (may be NULL): its reply
 * object, or the guest's error as a CARREL_ERROR code (core-procs.c). */
JsonNode *carrel_manager_guest_proc(CarrelManager *mgr, const char *domain, const char *const *args,
                                    GBytes *in, GError **error);

/* Starts req detached in domain (carrel-guest proc start), writes its stdin_bytes, and ends
 * its input when close. */
CarrelProcInfo *carrel_manager_proc_spawn(CarrelManager *mgr, const char *domain,
                                          const CarrelExecRequest *req, gboolean close,
                                          GError **error);
/* Writes data (may be NULL) to a process's input, then ends it when close. */
gboolean carrel_manager_proc_feed(CarrelManager *mgr, const char *domain, const char *handle,
                                  GBytes *data, gboolean close, GError **error);

gboolean carrel_manager_record_outcome(CarrelManager *mgr, const char *session_id,
                                       const CarrelPrincipal *who, const char *kind,
                                       const char *action, JsonNode *params, JsonNode *result,
                                       GError **local, gint64 started_us, const char *screenshot,
                                       gboolean ok);

/*
 * The door every public verb enters by (core-door.c): who asks for op on which session. Use:
 *
 *     g_auto(CarrelDoor) door = {0};
 *     g_autoptr(GError) local = NULL;
 *     if (!carrel_door_enter(&door, mgr, who, CARREL_OP_X, id_or_name, params, error))
 *         return NULL;
 *     result = ...act on door.session..., &local);
 *     return carrel_door_finish(&door, result, &local, error);
 */
typedef struct {
    CarrelManager *mgr;
    const CarrelPrincipal *who;
    CarrelOp op;
    CarrelSession *session; /* the session named at enter (NULL when none), as read then */
    char *session_id;       /* the session the audit row and timeline name */
    JsonNode *params;       /* digested into the audit row, shown on the timeline (owned) */
    gint64 started_us;
    gboolean audited;  /* the audit row went in already (with the state change it records) */
    gboolean quiet;    /* no lifecycle event on the timeline (the verb records its own) */
    gboolean timing;   /* a timings frame is open for this verb (lifecycle verbs) */
    JsonNode *timings; /* that frame once closed (carrel_door_timings), or NULL */
    gboolean holding;  /* catch-up jobs started inside wait for this door's end (core-catchup.c) */
} CarrelDoor;

void carrel_door_clear(CarrelDoor *door);
/* A kept screenshot's name ("shot-" id, .png or .jpg): temporary files never match. */
gboolean carrel_manager_shot_name_ok(const char *name);
/* <state_dir>/host-key.pem, created at the first start (0600; core-export.c). */
CarrelEvidenceKey *carrel_manager_load_host_key(const char *state_dir, GError **error);
G_DEFINE_AUTO_CLEANUP_CLEAR_FUNC(CarrelDoor, carrel_door_clear)

/* Named policies (core-policy.c). load: every NAME.policy of dir (NULL: none), default_path
 * (NULL: none) standing in for dir's default.policy; a bad file is an error naming it. */
CarrelPolicySet *carrel_manager_load_policies(const char *dir, const char *default_path,
                                              GError **error);
/* The policy a create by who under name (NULL: "default", or the token's first when it may not
 * use "default") gets: NOT_FOUND for an unknown name, POLICY_DENIED for one the token may not
 * use. */
const CarrelPolicy *carrel_manager_policy_for(CarrelManager *mgr, const CarrelPrincipal *who,
                                              const char *name, GError **error);
/* The policy a session runs under; WRONG_STATE when carreld no longer has it. */
const CarrelPolicy *carrel_manager_session_policy(CarrelManager *mgr, const CarrelSession *session,
                                                  GError **error);
/* The values of every policy's secrets, "POLICY/NAME" -> value (wiped when freed); a file
 * readable by others than root, a missing variable or a bad value is INVALID_ARG naming the
 * secret (never its value). */
GHashTable *carrel_manager_load_secret_values(CarrelPolicySet *set, GError **error);
const char *carrel_manager_secret_value(CarrelManager *mgr, const CarrelPolicy *policy,
                                        const CarrelPolicySecret *s);
/* The header names the proxy may have to set, over all policies, once each (case aside). */
GStrv carrel_manager_secret_headers(CarrelManager *mgr);

/* Every name is a loaded policy (a token's limits); an empty list is INVALID_ARG. */
gboolean carrel_manager_check_policy_names(CarrelManager *mgr, char **names, GError **error);

/* Finds the session (id_or_name may be NULL: no session involved), asks the policy, and audits
 * a refusal. Takes params. FALSE with NOT_FOUND, FORBIDDEN or WRONG_STATE (the lease). */
gboolean carrel_door_enter(CarrelDoor *door, CarrelManager *mgr, const CarrelPrincipal *who,
                           CarrelOp op, const char *id_or_name, JsonNode *params, GError **error);
/* Asks again for another op on the same session (a computer batch that turns out to send
 * input); a refusal is audited under that op. */
gboolean carrel_door_check(CarrelDoor *door, CarrelOp op, GError **error);
/* The session the outcome concerns when the verb made it (create). */
void carrel_door_set_session(CarrelDoor *door, const char *session_id);
/* Closes the verb's timings frame (once) and gives it (borrowed; NULL for verbs not timed or
 * when nothing was marked): the verb's reply shows it, the timeline event carries it. */
JsonNode *carrel_door_timings(CarrelDoor *door);
/* The audit row of the door's operation with result "ok", "failed" or "denied". */
CarrelAuditRecord *carrel_door_audit_record(const CarrelDoor *door, const char *result,
                                            const GError *failure);
/* Appends an audit row; a failure is logged as critical (the act happened already). */
void carrel_manager_audit(CarrelManager *mgr, CarrelAuditRecord *rec);
/* Audits the outcome (a NULL result is a failure, *local its error, which moves to error) and
 * records lifecycle verbs on the timeline; returns result. local is read only here, after the
 * act that fills it was evaluated. */
gpointer carrel_door_finish(CarrelDoor *door, gpointer result, GError **local, GError **error);
/* carrel_door_finish for the lifecycle verbs (the door records their event): when the verb
 * succeeded but its event cannot be recorded, result is freed with free_result and the verb
 * fails with "OP done, but the ACTION event could not be recorded: ...". */
gpointer carrel_door_finish_full(CarrelDoor *door, gpointer result, GDestroyNotify free_result,
                                 GError **local, GError **error);
gboolean carrel_door_finish_ok(CarrelDoor *door, gboolean ok, GError **local, GError **error);

/* The session if it is running (WRONG_STATE "cannot WHAT a session that is STATE" otherwise),
 * and its domain name. */
CarrelSession *carrel_manager_running_session(CarrelManager *mgr, const char *id_or_name,
                                              const char *what, char **ret_domain, GError **error);

/* A screen (PPM) cropped, scaled and encoded as req says. */
GBytes *carrel_manager_screen_encode(GBytes *ppm, const CarrelScreenshotRequest *req,
                                     GError **error);

/* Keeps an encoded screenshot under the session's dir; its file name (the reference the
 * timeline shows), or NULL when it could not be written (logged). The session's oldest kept
 * screenshots are removed beyond its budget (shots_max, shots_max_bytes); their events keep
 * the name, and reading it answers that it was pruned. */
char *carrel_manager_keep_screenshot(CarrelManager *mgr, const CarrelSession *session,
                                     GBytes *image, gboolean jpeg);
/* How many screenshots a session keeps now, and their bytes (ret_bytes may be NULL). */
guint carrel_manager_count_kept_shots(CarrelManager *mgr, const CarrelSession *session,
                                      guint64 *ret_bytes);

/* Rewrites a built template's manifest.json with what its recipe recorded in build_dir:
 * recipe.json (as "recipe") and packages.txt (as "packages": {name: version}), when present. */
/* The defaults a build's recipe.json declares (see carrel_template_defaults_from_recipe), in the
 * default_* members of a new template record; all 0 without a recipe.json. */
CarrelTemplate *carrel_manager_recipe_defaults(const char *build_dir, GError **error);
gboolean carrel_manager_template_record_build(const CarrelTemplate *tmpl, const char *build_dir,
                                              GError **error);

/*
 * Extracts paths from a session (the caller has marked it busy): through the agent, or from the
 * disk (never one QEMU is writing). reason: "request", "stop", "crash", "destroy". Stored; NULL
 * only when nothing could be recorded.
 */
CarrelExtraction *carrel_manager_collect(CarrelManager *mgr, const CarrelSession *session,
                                         char **paths, guint64 max_bytes, guint max_files,
                                         const char *reason, gboolean by_agent, GError **error);

/* The exit path: collects session->exit_paths (if any) as an extraction with reason ("stop",
 * "crash", "destroy"), from the disk unless by_agent. Failures are recorded, never returned. */
void carrel_manager_collect_exit(CarrelManager *mgr, const CarrelSession *session,
                                 const char *reason, gboolean by_agent);

/* spool_path is one of ours: a spool file directly in uploads/, nothing a caller made up
 * (NOT_FOUND otherwise; core-uploads.c). */
gboolean carrel_manager_check_spool_path(CarrelManager *mgr, const char *spool_path,
                                         GError **error);
/* Where upload id's tar is kept (core-uploads.c). */
char *carrel_manager_upload_path(CarrelManager *mgr, const char *id);
/* Inputs (core-inputs.c). Every upload an input names exists (NOT_FOUND otherwise). */
gboolean carrel_manager_check_inputs(CarrelManager *mgr, GPtrArray *inputs, GError **error);
/* Deletes the uploads the inputs used (after a create that took them). */
void carrel_manager_forget_uploads(CarrelManager *mgr, GPtrArray *inputs);
/* Writes the inputs into a session's new overlay with libguestfs (before its first boot). */
gboolean carrel_manager_inject_cold(CarrelManager *mgr, const CarrelSession *session,
                                    GPtrArray *inputs, GError **error);
/* Copies the inputs into a restored, running session through its agent (at most
 * CARREL_LIMIT_FILE_BYTES as a tar). */
gboolean carrel_manager_inject_by_agent(CarrelManager *mgr, const CarrelSession *session,
                                        GPtrArray *inputs, GError **error);
/* The primary gid of uid in /etc/passwd text (untrusted); FALSE when absent. Pure. */
gboolean carrel_passwd_find_uid(const char *text, gsize len, gint64 uid, gint64 *ret_gid);

/*
 * The pure half of a diff: walks of base and top (relative path -> CarrelGuestfsStat) give the
 * entries that differ by presence or metadata; *ret_check gets the ones whose content must be
 * compared (same metadata, size or mtime moved). Paths are "/" + under + relative path.
 */
GPtrArray *carrel_diff_plan(GHashTable *base, GHashTable *top, const char *under,
                            GPtrArray **ret_check);

/* Sets a restored guest's clock (date(1) through the agent, else the agent's guest-set-time). */
gboolean carrel_manager_set_guest_clock(CarrelManager *mgr, const char *domain, GError **error);

/* A session whose disk can be read (every state but creating and destroyed); WRONG_STATE
 * "cannot WHAT a session that is STATE" otherwise. */
gboolean carrel_manager_check_has_disk(const CarrelSession *session, const char *what,
                                       GError **error);

/* A snapshot of a session (the caller went through the door): see carrel_manager_snapshot_create.
 */
CarrelSnapshot *carrel_manager_snapshot_take(CarrelManager *mgr, const char *id_or_name,
                                             const char *name, GError **error);

/* When a session's top overlay is frozen (a snapshot cut short by a carreld crash), stacks a
 * writable top on it and records it; nothing to do otherwise. */
/* Intents of long operations (core-recover.c): begin records data (a builder holding one
 * object; NULL: none, the paths follow from the session) for key before the operation acts; end
 * removes it once it is done or undone. */
gboolean carrel_manager_intent_begin(CarrelManager *mgr, const char *key, const char *op,
                                     JsonBuilder *data, GError **error);
void carrel_manager_intent_end(CarrelManager *mgr, const char *key);
/* The watcher's chores (core-chores.c), run off its thread by one worker once the watcher
 * started, inline before: pool refills, and exit paths of sessions that ended. */
void carrel_manager_chore(CarrelManager *mgr, CarrelChore chore);
void carrel_manager_chores_start(CarrelManager *mgr);
void carrel_manager_chores_stop(CarrelManager *mgr);
/* Collects the exit paths of the sessions in pending_exit (core-watch.c). */
void carrel_manager_collect_pending(CarrelManager *mgr);

/* Removes extraction folders that have no row (core-artifacts.c). */
void carrel_manager_remove_extraction_leftovers(CarrelManager *mgr);
/* Settles every intent a dead carreld left (reconcile runs it first). */
gboolean carrel_manager_recover(CarrelManager *mgr, CarrelReconcileReport *report, GError **error);
/* Waits (bounded) until libvirt has no save, restore or start running for this instance's
 * domains; FALSE when some still run at the end. */
gboolean carrel_manager_wait_libvirt_jobs(CarrelManager *mgr, guint *ret_waited_s);

/* Snapshot steps shared with recovery (core-snapshot.c). restore_onto: memory restored as the
 * session's domain on top, defined, agent answering. define_on: the stopped session's domain
 * defined on top. snapshot_finish: from a quiet disk (memory saved or session stopped), freeze
 * the layer, stack top, run or define on it, and store the snapshot. revert_finish: top on the
 * snapshot's layer, run or define on it, store, remove old_top. */
gboolean carrel_manager_restore_onto(CarrelManager *mgr, CarrelSession *session, const char *memory,
                                     const char *top, GError **error);
gboolean carrel_manager_define_on(CarrelManager *mgr, CarrelSession *session, const char *top,
                                  GError **error);
/* A snapshot that never happened leaves nothing: its folder (memory) and the top made for it. */
void carrel_manager_snapshot_discard(const CarrelSession *session, const CarrelSnapshot *snap,
                                     const char *top);
/* A snapshot whose domain left its disk for top: that disk frozen as the layer, stored. */
gboolean carrel_manager_snapshot_keep(CarrelManager *mgr, CarrelSession *session,
                                      const CarrelSnapshot *snap, const char *top, GError **error);
/* A snapshot from its memory file (or of a stopped session): freeze, new top, restore or define,
 * stored. */
gboolean carrel_manager_snapshot_finish(CarrelManager *mgr, CarrelSession *session,
                                        const CarrelSnapshot *snap, const char *top,
                                        GError **error);
gboolean carrel_manager_revert_finish(CarrelManager *mgr, CarrelSession *session,
                                      const CarrelSnapshot *snap, const char *top,
                                      const char *old_top, GError **error);

gboolean carrel_manager_unfreeze_top(CarrelManager *mgr, CarrelSession *session, GError **error);

/* Creates a session; with pool (a template name) as a member of that template's warm pool
 * (not listed, no pool member taken). */
CarrelSession *carrel_manager_create_into(CarrelManager *mgr, const CarrelPrincipal *who,
                                          const CarrelSessionRequest *req, const char *pool,
                                          GError **error);
/* A ready (paused) member of tmpl's warm pool, resumed and handed to req; NULL when none fits
 * or the hand-over failed (logged; the create then boots or restores as usual). */
CarrelSession *carrel_manager_pool_take(CarrelManager *mgr, const CarrelPrincipal *who,
                                        const CarrelSessionRequest *req, const CarrelTemplate *tmpl,
                                        const CarrelPolicy *policy);
/* One refill step per pool whose members are fewer than its size (the watcher calls it). */
void carrel_manager_pool_refill(CarrelManager *mgr);
