/* conf: approvals (conf-approval.c) and egress records (conf-egress.c). Included through
 * conf.h only. */
#pragma once

#ifndef CARREL_CONF_H_INSIDE
#error "include conf/conf.h"
#endif

G_BEGIN_DECLS

/*
 * An action waiting for a reviewer: requested by a policy (or the test hook), decided once by a
 * person with a reason.
 */
#define CARREL_APPROVAL_REASON_MAX 1000
typedef struct {
    char *id; /* "ap-..." */
    char *session_id;
    char *action;     /* what waits, e.g. "network.egress", "artifacts.release" */
    JsonNode *detail; /* an object, shown to the reviewer */
    char *requested_by;
    gint64 requested_at; /* unix seconds */
    char *state;         /* "pending", "approved", "denied" */
    char *decided_by;
    gint64 decided_at;
    char *reason;
} CarrelApproval;

CarrelApproval *carrel_approval_new(void);
void carrel_approval_free(CarrelApproval *a);
G_DEFINE_AUTOPTR_CLEANUP_FUNC(CarrelApproval, carrel_approval_free)
/* {id, session_id, action, detail, state, requested_by, requested_at, decided_by, decided_at,
 * reason}; times as RFC 3339 or null. */
JsonNode *carrel_approval_to_json(const CarrelApproval *a);

/*
 * One attempt of a session to reach the outside (conf-egress.c): a DNS lookup, an HTTP
 * request or a TLS connection, with what the policy decided. decision: "allowed", "denied",
 * "approved" or "refused" (an ask a reviewer decided), "expired" (an ask nobody decided in time).
 */
typedef struct {
    gint64 seq;
    gint64 ts_us;
    char *session_id;
    char *name;     /* what the guest asked for: DNS name, Host, SNI (or an address) */
    char *address;  /* the address it connected to, or NULL (DNS) */
    guint port;     /* 53 for DNS */
    char *protocol; /* "dns", "http", "tls" */
    char *decision;
    gint64 bytes_out; /* guest to the outside */
    gint64 bytes_in;
    gint64 duration_ms;
} CarrelEgressRecord;

CarrelEgressRecord *carrel_egress_record_new(void);
void carrel_egress_record_free(CarrelEgressRecord *rec);
G_DEFINE_AUTOPTR_CLEANUP_FUNC(CarrelEgressRecord, carrel_egress_record_free)
/* {seq, time, session, name, address, port, protocol, decision, bytes_out, bytes_in,
 * duration_ms} */
JsonNode *carrel_egress_record_to_json(const CarrelEgressRecord *rec);
/* An action name: 1-64 of [A-Za-z0-9._:-]. */
gboolean carrel_approval_check_action(const char *action, GError **error);
/* NULL or clean text of at most CARREL_APPROVAL_REASON_MAX bytes. */
gboolean carrel_approval_check_reason(const char *reason, GError **error);

G_END_DECLS
