/* store: SQLite (WAL, synchronous=FULL), versioned migrations, typed queries; owns all SQL. */
#pragma once

#include "conf/conf.h"

G_BEGIN_DECLS

typedef struct _CarrelStore CarrelStore;

/*
 * Opens (creating if needed) the database at path and migrates it to the latest schema.
 * ":memory:" gives a private in-memory store for tests. Thread-safe: one mutex serialises use.
 */
CarrelStore *carrel_store_open(const char *path, GError **error);
void carrel_store_free(CarrelStore *store);
G_DEFINE_AUTOPTR_CLEANUP_FUNC(CarrelStore, carrel_store_free)

/*
 * Called when a write finds the disk full (NO_SPACE), from the writing thread with the store's
 * lock held: it must not use the store. Returns TRUE when it made room (e.g. gave up a reserve
 * file), and the write is then tried once more: a single statement outside a transaction only,
 * since SQLite may have rolled a transaction back. A transaction also calls it before it
 * begins when the database's folder has less than 2 MiB free, so that its COMMIT finds room.
 */
typedef gboolean (*CarrelStoreFullFunc)(gpointer data);
void carrel_store_set_full_func(CarrelStore *store, CarrelStoreFullFunc func, gpointer data);

/*
 * A number that grows whenever a write changes a row, in any table (sqlite's count of changed
 * rows on the store's one connection, triggers and cascades included). Every transaction runs
 * under the store's lock, so when the generation read before some reads equals the one read
 * later, nothing was written in between: what those reads gave is still what is stored.
 */
guint64 carrel_store_generation(CarrelStore *store);

/* Schema version the database is at (after open: the latest). */
int carrel_store_schema_version(CarrelStore *store);
/* Schema version this build migrates to. */
int carrel_store_latest_schema_version(void);

/* Templates. Versions of a name are numbered 1, 2, ... in import order. */
gboolean carrel_store_template_insert(CarrelStore *store, const CarrelTemplate *tmpl,
                                      GError **error);
/*
 * Next free version number for name (1 when none exists); never one used before, even if that
 * version was deleted since. 0 with an error on failure.
 */
guint carrel_store_template_next_version(CarrelStore *store, const char *name, GError **error);
/* version 0 = the latest. NOT_FOUND when absent. */
CarrelTemplate *carrel_store_template_get(CarrelStore *store, const char *name, guint version,
                                          GError **error);
/* Every version of every template, ordered by name then version (GPtrArray of CarrelTemplate). */
GPtrArray *carrel_store_template_list(CarrelStore *store, GError **error);
/*
 * Deletes one version (version 0 = every version of name). WRONG_STATE while a session that is
 * not destroyed uses it, NOT_FOUND when absent. Destroyed sessions keep the name and version.
 */
gboolean carrel_store_template_delete(CarrelStore *store, const char *name, guint version,
                                      GError **error);
/* Sessions not destroyed that use name (version 0 = any version); 0 with an error on failure. */
guint carrel_store_template_count_sessions(CarrelStore *store, const char *name, guint version,
                                           GError **error);

/*
 * Sessions. Insert: EXISTS when the id exists or the name is used by a session that is not
 * destroyed ("session name 'x' is already used"); NOT_FOUND when its template does not exist.
 */
gboolean carrel_store_session_insert(CarrelStore *store, const CarrelSession *session,
                                     GError **error);
/* Looks up by id, or by name among sessions that are not destroyed. NOT_FOUND when absent. */
CarrelSession *carrel_store_session_get(CarrelStore *store, const char *id_or_name, GError **error);
/* Sessions ordered by creation; destroyed ones only when include_destroyed. */
GPtrArray *carrel_store_session_list(CarrelStore *store, gboolean include_destroyed,
                                     GError **error);
/*
 * Sets state and reason (NULL clears it) and bumps updated_at. NOT_FOUND when absent. Does not
 * check transitions (conf's state machine does); leaving 'destroyed' fails with EXISTS if the
 * name was reused, WRONG_STATE if the template is gone.
 */
gboolean carrel_store_session_set_state(CarrelStore *store, const char *id,
                                        CarrelSessionState state, const char *reason,
                                        GError **error);
/* The same, with audit (see carrel_store_audit_append) appended in the same transaction: the
 * state change and its record land together or not at all. */
gboolean carrel_store_session_set_state_audited(CarrelStore *store, const char *id,
                                                CarrelSessionState state, const char *reason,
                                                CarrelAuditRecord *audit, GError **error);
/* Removes the row entirely (used to roll back a failed create). */
gboolean carrel_store_session_delete(CarrelStore *store, const char *id, GError **error);

/* Warm states: at most one per template version; deleted with their template version. */
gboolean carrel_store_warm_put(CarrelStore *store, const CarrelWarmState *warm, GError **error);
/* NOT_FOUND when the version is not warm. */
CarrelWarmState *carrel_store_warm_get(CarrelStore *store, const char *name, guint version,
                                       GError **error);
gboolean carrel_store_warm_delete(CarrelStore *store, const char *name, guint version,
                                  GError **error);

/* Appends event to its session's timeline and sets event->seq. */
gboolean carrel_store_event_add(CarrelStore *store, CarrelEvent *event, GError **error);
/* Events of a session with seq > after_seq, oldest first, at most limit (GPtrArray of
 * CarrelEvent). */
GPtrArray *carrel_store_event_list(CarrelStore *store, const char *session_id, gint64 after_seq,
                                   guint limit, GError **error);

/*
 * API tokens, stored as sha256 hashes only (never echoed in errors). Insert: EXISTS "a token
 * named 'x' already exists" when the label is taken (revoked tokens keep their name).
 */
gboolean carrel_store_token_insert(CarrelStore *store, const CarrelToken *token,
                                   const char *token_hash, GError **error);
/* The token whose secret hashes to token_hash (live or not), or NULL without error. */
CarrelToken *carrel_store_token_by_hash(CarrelStore *store, const char *token_hash, GError **error);
/* By id ("t-...") or label; NOT_FOUND "token 'x' does not exist". */
CarrelToken *carrel_store_token_get(CarrelStore *store, const char *id_or_label, GError **error);
/* Every token, oldest first (GPtrArray of CarrelToken). */
GPtrArray *carrel_store_token_list(CarrelStore *store, GError **error);
/* last_used_at is written only when the stored value is older than this (a busy agent must
 * not turn every request into a write). */
#define CARREL_STORE_TOKEN_TOUCH_S 60
/* last_used_at = now, written only when the stored value is more than CARREL_STORE_TOKEN_TOUCH_S
 * older. */
gboolean carrel_store_token_touch(CarrelStore *store, const char *id, gint64 now, GError **error);
/* revoked_at = now; NOT_FOUND when absent, WRONG_STATE when revoked already. */
gboolean carrel_store_token_revoke(CarrelStore *store, const char *id, gint64 now, GError **error);
/* Replaces a token's secret (rotation); NOT_FOUND when absent. */
gboolean carrel_store_token_set_hash(CarrelStore *store, const char *id, const char *token_hash,
                                     GError **error);

/*
 * The audit log, a hash chain. Append sets rec->seq, rec->prev_hash (the last row's hash, or
 * CARREL_AUDIT_GENESIS) and rec->hash under the store's lock, so rows have one order.
 */
gboolean carrel_store_audit_append(CarrelStore *store, CarrelAuditRecord *rec, GError **error);

typedef struct {
    gint64 after_seq;       /* rows with seq > after_seq */
    gint64 since_us;        /* and ts_us >= since_us (0 = any) */
    const char *session_id; /* NULL = any */
    const char *principal;  /* a token id or label, NULL = any */
    const char *operation;  /* NULL = any */
    const char *result;     /* "ok", "denied", "failed", NULL = any */
    guint limit;            /* 1..10000; 0 = 1000 */
} CarrelAuditFilter;

/* Rows matching filter, oldest first (GPtrArray of CarrelAuditRecord). */
GPtrArray *carrel_store_audit_list(CarrelStore *store, const CarrelAuditFilter *filter,
                                   GError **error);

typedef struct {
    gboolean intact;
    gint64 rows;    /* rows checked */
    gint64 bad_seq; /* the first row that breaks the chain (intact FALSE) */
    char *why;      /* what is wrong with it: "hash mismatch", "prev_hash does not match ..." */
} CarrelAuditVerdict;

void carrel_audit_verdict_clear(CarrelAuditVerdict *v);
G_DEFINE_AUTO_CLEANUP_CLEAR_FUNC(CarrelAuditVerdict, carrel_audit_verdict_clear)
/* Walks the whole chain in seq order: edited, deleted or reordered rows break it. FALSE (with
 * error) only when the store cannot be read. */
gboolean carrel_store_audit_verify(CarrelStore *store, CarrelAuditVerdict *ret_verdict,
                                   GError **error);

/* Extractions, stored with all their artifacts in one transaction. */
gboolean carrel_store_extraction_insert(CarrelStore *store, const CarrelExtraction *x,
                                        GError **error);
/* Whether an extraction with this id is stored (reconcile removes folders of none). */
gboolean carrel_store_extraction_exists(CarrelStore *store, const char *id, gboolean *ret_exists,
                                        GError **error);
/* A session's extractions, oldest first, each with its artifacts. */
GPtrArray *carrel_store_extraction_list(CarrelStore *store, const char *session_id, GError **error);
/* NOT_FOUND when there is no such artifact. */
CarrelArtifact *carrel_store_artifact_get(CarrelStore *store, const char *id, GError **error);

/* The RAM file a session's domain maps (a revert onto a snapshot's own). */
gboolean carrel_store_session_set_memory_file(CarrelStore *store, const char *id,
                                              const char *memory_file, GError **error);
/* Sessions, not destroyed, whose RAM maps memory_file (0 on error, which is set). */
guint carrel_store_session_count_memory_users(CarrelStore *store, const char *memory_file,
                                              GError **error);
/* A session's current top overlay and the snapshot it descends from (snapshot, revert). */
gboolean carrel_store_session_set_disk(CarrelStore *store, const char *id, const char *overlay_path,
                                       const char *head_snapshot, GError **error);
/* Time (microseconds) of a session's last event by a client (not carreld), 0 when none, -1 on
 * error: the idle timeout's measure of activity. */
gint64 carrel_store_event_last_ts(CarrelStore *store, const char *session_id, GError **error);
/* Whether an event of the session names screenshot name (kept with it once, maybe pruned). */
gboolean carrel_store_event_names_screenshot(CarrelStore *store, const char *session_id,
                                             const char *name, gboolean *ret_named, GError **error);
/* A session's time limits acted: they do not act again. */
gboolean carrel_store_session_clear_limits(CarrelStore *store, const char *id, GError **error);
/* Warm pools: size per template name (0 = none). */
gboolean carrel_store_pool_set(CarrelStore *store, const char *template_name, guint size,
                               GError **error);
/* template name -> GUINT_TO_POINTER(size). */
GHashTable *carrel_store_pool_list(CarrelStore *store, GError **error);
/* A pool's members that are not destroyed (any state: creating ones count too). */
GPtrArray *carrel_store_pool_members(CarrelStore *store, const char *template_name, GError **error);
/* Hands a pool member to a create: pool cleared, from_pool set, and the request's name, exit
 * paths, time limits, owner and screen size (from s) stored. NOT_FOUND when another create adopted
 * it already.
 */
gboolean carrel_store_session_adopt_member(CarrelStore *store, const CarrelSession *s,
                                           GError **error);
/* Live (not destroyed) sessions forked from session id. */
guint carrel_store_session_count_forks(CarrelStore *store, const char *id, GError **error);
/* Snapshots: EXISTS for a name the session already has. */
gboolean carrel_store_snapshot_insert(CarrelStore *store, const CarrelSnapshot *snap,
                                      GError **error);
/* By id or by name within the session; NOT_FOUND otherwise. */
CarrelSnapshot *carrel_store_snapshot_get(CarrelStore *store, const char *session_id,
                                          const char *id_or_name, GError **error);
/* Deletes a snapshot row; its children and sessions that descended from it now descend from its
 * parent (one transaction). */
gboolean carrel_store_snapshot_delete(CarrelStore *store, const CarrelSnapshot *snap,
                                      GError **error);
/* A session's snapshots, oldest first. */
GPtrArray *carrel_store_snapshot_list(CarrelStore *store, const char *session_id, GError **error);

/* Approvals. List: pending only, or pending plus the latest decided ones (GPtrArray of
 * CarrelApproval). Decide: WRONG_STATE unless it exists and is pending. */
gboolean carrel_store_approval_insert(CarrelStore *store, const CarrelApproval *a, GError **error);
CarrelApproval *carrel_store_approval_get(CarrelStore *store, const char *id, GError **error);
/* The latest approval of session for action whose detail's "destination" is key; NOT_FOUND when
 * there is none. */
CarrelApproval *carrel_store_approval_find(CarrelStore *store, const char *session_id,
                                           const char *action, const char *key, GError **error);

/* The egress log (store-egress.c): appends rec (sets rec->seq); lists a session's after a seq. */
gboolean carrel_store_egress_add(CarrelStore *store, CarrelEgressRecord *rec, GError **error);
GPtrArray *carrel_store_egress_list(CarrelStore *store, const char *session_id, gint64 after_seq,
                                    guint limit, GError **error);
/* Egress addresses of sessions that are not destroyed: address -> session id. */
GHashTable *carrel_store_egress_addresses(CarrelStore *store, GError **error);
GPtrArray *carrel_store_approval_list(CarrelStore *store, gboolean pending_only, GError **error);
gboolean carrel_store_approval_decide(CarrelStore *store, const char *id, gboolean approve,
                                      const char *decided_by, const char *reason, GError **error);

/* Control leases, keyed by the holder's token id, shown by its label: take keeps an existing
 * holder and returns whoever holds it after the call; get gives NULLs when nobody does. */
gboolean carrel_store_lease_take(CarrelStore *store, const char *session_id, const char *holder_id,
                                 const char *holder_label, char **ret_holder_id,
                                 char **ret_holder_label, gint64 *ret_since, GError **error);
gboolean carrel_store_lease_get(CarrelStore *store, const char *session_id, char **ret_holder_id,
                                char **ret_holder_label, gint64 *ret_since, GError **error);
gboolean carrel_store_lease_release(CarrelStore *store, const char *session_id, GError **error);
/* Every lease held: session id -> CarrelStoreLease (one read for a whole list of sessions). */
typedef struct {
    char *holder_id;
    char *holder_label;
    gint64 since;
} CarrelStoreLease;
void carrel_store_lease_free(CarrelStoreLease *lease);
GHashTable *carrel_store_lease_all(CarrelStore *store, GError **error);

/* Intents of long operations (store-intent.c): put replaces the key's intent; data is JSON. */
typedef struct {
    char *key;
    char *op;
    char *data;
} CarrelIntent;

void carrel_intent_free(CarrelIntent *intent);
G_DEFINE_AUTOPTR_CLEANUP_FUNC(CarrelIntent, carrel_intent_free)
gboolean carrel_store_intent_put(CarrelStore *store, const char *key, const char *op,
                                 const char *data, GError **error);
gboolean carrel_store_intent_delete(CarrelStore *store, const char *key, GError **error);
/* Every intent left, oldest first (GPtrArray of CarrelIntent). */
GPtrArray *carrel_store_intent_list(CarrelStore *store, GError **error);

G_END_DECLS
