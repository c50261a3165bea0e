/*
 * conf: the bodies of the API's requests that are not records of their own (included by
 * conf.h). Each has a parser that takes the body as sent (a JSON object, or NULL when there was
 * none) and refuses it with an INVALID_ARG that names the member; the API hands the handler the
 * record, never the JSON.
 */
#pragma once

#ifndef CARREL_CONF_H_INSIDE
#error "include conf/conf.h, not conf-requests.h"
#endif

G_BEGIN_DECLS

/* POST /v1/login: {token}. */
typedef struct {
    char *token;
} CarrelLoginRequest;

void carrel_login_request_free(CarrelLoginRequest *req);
G_DEFINE_AUTOPTR_CLEANUP_FUNC(CarrelLoginRequest, carrel_login_request_free)
CarrelLoginRequest *carrel_login_request_from_json(JsonNode *body, GError **error);

/* POST /v1/tokens: {role, name, expires?: "12h", policies?: [names]}. */
typedef struct {
    char *role; /* checked by core, which names the roles */
    char *name;
    gint64 ttl_s;   /* 0: never expires */
    GStrv policies; /* NULL: any policy */
} CarrelTokenRequest;

void carrel_token_request_free(CarrelTokenRequest *req);
G_DEFINE_AUTOPTR_CLEANUP_FUNC(CarrelTokenRequest, carrel_token_request_free)
CarrelTokenRequest *carrel_token_request_from_json(JsonNode *body, GError **error);

/* POST /v1/sessions/{id}/control: {action: "take" | "release"}. */
typedef struct {
    gboolean take; /* FALSE: release */
} CarrelControlRequest;

void carrel_control_request_free(CarrelControlRequest *req);
G_DEFINE_AUTOPTR_CLEANUP_FUNC(CarrelControlRequest, carrel_control_request_free)
CarrelControlRequest *carrel_control_request_from_json(JsonNode *body, GError **error);

/* POST /v1/approvals/{id}/approve and /deny: {reason?}. */
typedef struct {
    char *reason; /* NULL: none given */
} CarrelDecisionRequest;

void carrel_decision_request_free(CarrelDecisionRequest *req);
G_DEFINE_AUTOPTR_CLEANUP_FUNC(CarrelDecisionRequest, carrel_decision_request_free)
CarrelDecisionRequest *carrel_decision_request_from_json(JsonNode *body, GError **error);

/* POST /v1/test/approvals (a test hook): {session_id, action, detail?}. */
typedef struct {
    char *session_id;
    char *action;
    JsonNode *detail; /* as sent (core wants an object), or NULL */
} CarrelApprovalAsk;

void carrel_approval_ask_free(CarrelApprovalAsk *req);
G_DEFINE_AUTOPTR_CLEANUP_FUNC(CarrelApprovalAsk, carrel_approval_ask_free)
CarrelApprovalAsk *carrel_approval_ask_from_json(JsonNode *body, GError **error);

/* POST /v1/templates/{name}/warm: {version?} (a positive integer; 0 here: the latest). */
typedef struct {
    guint version;
} CarrelWarmRequest;

void carrel_warm_request_free(CarrelWarmRequest *req);
G_DEFINE_AUTOPTR_CLEANUP_FUNC(CarrelWarmRequest, carrel_warm_request_free)
CarrelWarmRequest *carrel_warm_request_from_json(JsonNode *body, GError **error);

/* PUT /v1/templates/{name}/pool: {size} (0 to CARREL_LIMIT_POOL). */
typedef struct {
    guint size;
} CarrelPoolRequest;

void carrel_pool_request_free(CarrelPoolRequest *req);
G_DEFINE_AUTOPTR_CLEANUP_FUNC(CarrelPoolRequest, carrel_pool_request_free)
CarrelPoolRequest *carrel_pool_request_from_json(JsonNode *body, GError **error);

/*
 * POST /v1/sessions/{id}/snapshots {name} and /revert {snapshot}: the one string the verb
 * needs. Other members are let through, as they always were.
 */
typedef struct {
    char *name; /* the snapshot's name (to make), or its id or name (to revert to) */
} CarrelSnapshotRequest;

void carrel_snapshot_request_free(CarrelSnapshotRequest *req);
G_DEFINE_AUTOPTR_CLEANUP_FUNC(CarrelSnapshotRequest, carrel_snapshot_request_free)
/* {name}: a snapshot to take. */
CarrelSnapshotRequest *carrel_snapshot_request_from_json(JsonNode *body, GError **error);
/* {snapshot}: a snapshot to revert to. */
CarrelSnapshotRequest *carrel_revert_request_from_json(JsonNode *body, GError **error);

/* POST /v1/sessions/{id}/fork: {snapshot?, count?} (count 1 to CARREL_LIMIT_FORKS, default 1). */
typedef struct {
    char *snapshot; /* NULL: one taken now */
    guint count;
} CarrelForkRequest;

void carrel_fork_request_free(CarrelForkRequest *req);
G_DEFINE_AUTOPTR_CLEANUP_FUNC(CarrelForkRequest, carrel_fork_request_free)
CarrelForkRequest *carrel_fork_request_from_json(JsonNode *body, GError **error);

/* POST /v1/sessions/{id}/stop: {timeout_s?} (0 to 600, default 30). */
typedef struct {
    guint timeout_s;
} CarrelStopRequest;

void carrel_stop_request_free(CarrelStopRequest *req);
G_DEFINE_AUTOPTR_CLEANUP_FUNC(CarrelStopRequest, carrel_stop_request_free)
CarrelStopRequest *carrel_stop_request_from_json(JsonNode *body, GError **error);

G_END_DECLS
