/*
 * conf: who may do what (included by conf.h). A principal travels with every core verb; an
 * operation names what it asks for; tokens are the principals' credentials; audit records are
 * the hash-chained log of what principals did and were refused.
 */
#pragma once

#ifndef CARREL_CONF_H_INSIDE
#error "include conf/conf.h, not conf-trust.h"
#endif

G_BEGIN_DECLS

typedef enum {
    CARREL_ROLE_ADMIN,
    CARREL_ROLE_AGENT,
    CARREL_ROLE_REVIEWER,
    CARREL_ROLE_SYSTEM, /* carreld itself: the watcher, reconcile, time limits */
    CARREL_ROLE_LAST
} CarrelRole;

const char *carrel_role_to_string(CarrelRole role);
/* CARREL_ROLE_LAST for unknown names; "carreld" (SYSTEM) is never a token's role. */
CarrelRole carrel_role_from_string(const char *name);

/* Who asks: a token's id and its unique label, with its role. */
typedef struct {
    char *token_id; /* "t-...", or "carreld" */
    char *label;    /* shown on timelines, leases and the audit log */
    CarrelRole role;
    GStrv policies; /* the named policies its sessions may have; NULL = any */
} CarrelPrincipal;

CarrelPrincipal *carrel_principal_new(const char *token_id, const char *label, CarrelRole role);
CarrelPrincipal *carrel_principal_copy(const CarrelPrincipal *who);
void carrel_principal_free(CarrelPrincipal *who);
G_DEFINE_AUTOPTR_CLEANUP_FUNC(CarrelPrincipal, carrel_principal_free)
/* TRUE when who may have sessions under the named policy. */
gboolean carrel_principal_may_use_policy(const CarrelPrincipal *who, const char *policy);

/*
 * What one token may use at once ([limits] of the default policy): sessions it owns, creates
 * and forks running together, and requests per second (a bucket of burst, refilled at rate).
 */
typedef struct {
    guint sessions;
    guint creates;
    guint rate;
    guint burst;
} CarrelLimits;

/* carreld itself (a static principal; never free it). */
const CarrelPrincipal *carrel_principal_daemon(void);
/* {id, label, role} */
JsonNode *carrel_principal_to_json(const CarrelPrincipal *who);

/*
 * What a principal asks core for. The wire names ("session.exec") are what policies, the role
 * matrix and the audit log say. Keep carrel_op_names in conf-trust.c in this order.
 */
typedef enum {
    CARREL_OP_SERVER_READ, /* version, whoami */
    CARREL_OP_SESSION_CREATE,
    CARREL_OP_SESSION_LIST,
    CARREL_OP_SESSION_READ, /* a session, its timeline, snapshots, lease, kept screenshots */
    CARREL_OP_SESSION_START,
    CARREL_OP_SESSION_STOP,
    CARREL_OP_SESSION_PAUSE,
    CARREL_OP_SESSION_RESUME,
    CARREL_OP_SESSION_HIBERNATE,
    CARREL_OP_SESSION_DESTROY,
    CARREL_OP_SESSION_EXEC,
    CARREL_OP_SESSION_FILE_READ,
    CARREL_OP_SESSION_FILE_WRITE,
    CARREL_OP_SESSION_SCREENSHOT,
    CARREL_OP_SESSION_INPUT, /* computer actions that send HID events or run desktop helpers */
    CARREL_OP_SESSION_EXTRACT,
    CARREL_OP_SESSION_DIFF,
    CARREL_OP_SESSION_FORK,
    CARREL_OP_SNAPSHOT_CREATE,
    CARREL_OP_SNAPSHOT_DELETE,
    CARREL_OP_SNAPSHOT_REVERT,
    CARREL_OP_ARTIFACT_READ,
    CARREL_OP_CONSOLE_VIEW,
    CARREL_OP_SESSION_SHELL, /* an interactive terminal in the guest: the lease holder or admin */
    CARREL_OP_CONTROL_TAKE,
    CARREL_OP_CONTROL_RELEASE,
    CARREL_OP_APPROVAL_LIST,
    CARREL_OP_APPROVAL_DECIDE,
    CARREL_OP_APPROVAL_REQUEST,
    CARREL_OP_TEMPLATE_READ,
    CARREL_OP_TEMPLATE_IMPORT,
    CARREL_OP_TEMPLATE_BUILD,
    CARREL_OP_TEMPLATE_WARM,
    CARREL_OP_TEMPLATE_REMOVE,
    CARREL_OP_POOL_READ,
    CARREL_OP_POOL_SET,
    CARREL_OP_POLICY_READ, /* the named policies a caller may create sessions under */
    CARREL_OP_JOB_READ,
    CARREL_OP_UPLOAD_CREATE,
    CARREL_OP_TOKEN_LIST,
    CARREL_OP_TOKEN_CREATE,
    CARREL_OP_TOKEN_REVOKE,
    CARREL_OP_TOKEN_ROTATE,
    CARREL_OP_AUDIT_READ,
    CARREL_OP_METRICS_READ,    /* GET /metrics: counts over every session, for operators */
    CARREL_OP_INPUT_HOST_PATH, /* a create whose inputs name files on the host */
    CARREL_OP_SESSION_OBSERVE, /* carreld found a guest stopped or crashed (the watcher) */
    CARREL_OP_AUTH_LOGIN,      /* a login or a refused credential: audited, never authorized */
    CARREL_OP_SESSION_EXPORT,  /* a signed evidence bundle of a session: audited */
    CARREL_OP_LAST
} CarrelOp;

const char *carrel_op_to_string(CarrelOp op);
/* CARREL_OP_LAST for unknown names. */
CarrelOp carrel_op_from_string(const char *name);
/* TRUE for operations that change something (the audit log records every one of them, and
 * every refusal of any operation). */
gboolean carrel_op_changes_state(CarrelOp op);

/* An API token as listed: never its secret, which only its holder has (the store keeps a
 * sha256 hash). Times are Unix seconds, 0 = never. */
typedef struct {
    char *id;    /* "t-..." */
    char *label; /* unique */
    CarrelRole role;
    gint64 created_at;
    gint64 last_used_at;
    gint64 expires_at;
    gint64 revoked_at;
    GStrv policies; /* the only named policies its sessions may have; NULL = any */
} CarrelToken;

CarrelToken *carrel_token_new(void);
void carrel_token_free(CarrelToken *token);
G_DEFINE_AUTOPTR_CLEANUP_FUNC(CarrelToken, carrel_token_free)
/* TRUE while the token may be used at now (not revoked, not expired). */
gboolean carrel_token_is_live(const CarrelToken *token, gint64 now);
/* {id, name, role, created_at, last_used_at, expires_at, revoked_at, state, policies (null =
 * any)}; times RFC 3339. */
JsonNode *carrel_token_to_json(const CarrelToken *token, gint64 now);
/* A token's name: 1-64 of [A-Za-z0-9._@-]. */
gboolean carrel_token_check_label(const char *label, GError **error);
/* "90s", "30m", "12h", "7d" (at most 366 days) -> seconds; INVALID_ARG otherwise. */
gboolean carrel_token_parse_ttl(const char *text, gint64 *ret_seconds, GError **error);

/* A token request's "policies": absent or null = NULL (any), else names of policies (checked
 * for shape here; whether they exist, core decides). */
gboolean carrel_token_policies_from_json(JsonNode *request, GStrv *ret_policies, GError **error);

#define CARREL_AUDIT_GENESIS "0000000000000000000000000000000000000000000000000000000000000000"

/*
 * One row of the audit log. result: "ok", "denied" (refused before acting: policy, lease,
 * credentials) or "failed" (tried, and the error_code says why). params_digest: sha256 of the
 * operation's parameters as JSON, secrets left out before hashing. hash = sha256 over
 * prev_hash and the row's other fields (carrel_audit_record_hash).
 */
typedef struct {
    gint64 seq;
    gint64 ts_us;
    char *principal_id;
    char *principal_label;
    char *role;
    char *operation;
    char *session_id; /* NULL when no session is involved */
    char *params_digest;
    char *result;
    char *error_code; /* NULL when result is "ok" */
    char *prev_hash;
    char *hash;
} CarrelAuditRecord;

CarrelAuditRecord *carrel_audit_record_new(void);
void carrel_audit_record_free(CarrelAuditRecord *rec);
G_DEFINE_AUTOPTR_CLEANUP_FUNC(CarrelAuditRecord, carrel_audit_record_free)
/* The chain hash of rec (every field but hash itself, prev_hash included). Pure. */
char *carrel_audit_record_hash(const CarrelAuditRecord *rec);
/* {seq, time, principal: {id, label}, role, operation, session, params_digest, result,
 * error_code, prev_hash, hash} */
JsonNode *carrel_audit_record_to_json(const CarrelAuditRecord *rec);
/* sha256 of params as compact JSON ("null" when NULL). */
char *carrel_audit_digest(JsonNode *params);

G_END_DECLS
