/* policy: pure decisions over a loaded policy; no I/O beyond reading the policy text. */
#pragma once

#include "conf/conf.h"

G_BEGIN_DECLS

typedef struct _CarrelPolicy CarrelPolicy;

/* The policy a session gets when its request names none. */
#define CARREL_POLICY_DEFAULT "default"

/* The built-in default (named "default"): at most 4 vCPUs and 8 GiB per session. */
CarrelPolicy *carrel_policy_new_default(void);

/* Parses a policy in GKeyFile syntax: [resources] max_vcpus=, max_memory_mib=, max_disk_gib=;
 * [artifacts] paths=/home/agent/out;/tmp/result.json (collected when a session ends);
 * [timeouts] ttl_s=, idle_timeout_s=, on_expiry=destroy|stop|hibernate|pause;
 * [network] mode=none|allowlist|open, allow=, deny=, ask= (NAME, *.NAME, NAME:PORT, comma-
 * separated), ask_timeout_s=;
 * [roles] agent.OPERATION=yes|own|no, reviewer.OPERATION=... (the role matrix's overrides);
 * [limits] sessions=, creates=, rate=, burst= (per token);
 * [console] record_typed_text=true|false (default false);
 * [recording] enabled=, fps=, max_mib=, segment_s= (screen recording). */
CarrelPolicy *carrel_policy_load_data(const char *data, gsize len, GError **error);

void carrel_policy_free(CarrelPolicy *policy);
G_DEFINE_AUTOPTR_CLEANUP_FUNC(CarrelPolicy, carrel_policy_free)

const char *carrel_policy_get_name(const CarrelPolicy *policy);

/* [network] mode: none (no route out, the isolated network), allowlist, open. */
typedef enum {
    CARREL_NETWORK_NONE,
    CARREL_NETWORK_ALLOWLIST,
    CARREL_NETWORK_OPEN,
    CARREL_NETWORK_LAST
} CarrelNetworkMode;

const char *carrel_network_mode_to_string(CarrelNetworkMode mode);
CarrelNetworkMode carrel_policy_network_mode(const CarrelPolicy *policy);
/* How long a connection to an "ask" destination waits for a reviewer (default 120 s). */
guint carrel_policy_ask_timeout_s(const CarrelPolicy *policy);

typedef enum { CARREL_EGRESS_DENY, CARREL_EGRESS_ALLOW, CARREL_EGRESS_ASK } CarrelEgressVerdict;

/*
 * What the policy says about a connection to host (the name the guest used: HTTP Host, TLS SNI,
 * a DNS query) on port (0: the name alone, as DNS asks). Deny wins, then allow, then ask; then
 * open allows and allowlist denies. A raw address or a malformed name is always DENY. Whether
 * the address a name resolves to is internal is the proxy's check, not this one. Pure.
 */
CarrelEgressVerdict carrel_policy_egress(const CarrelPolicy *policy, const char *host, guint port);
/* What a session's resolver answers: *ret_resolve the allowed and asked names (each with its
 * subdomains), *ret_refuse the denied ones (NXDOMAIN). Only mode decides about the rest. */
void carrel_policy_dns_names(const CarrelPolicy *policy, GStrv *ret_resolve, GStrv *ret_refuse);
/* Appends to ports (guint) the ports other than 80 and 443 the policy's rules name, once. */
void carrel_policy_tls_ports(const CarrelPolicy *policy, GArray *ports);

/*
 * [secrets]: NAME.source = file:/PATH (root-only) | env:NAME, NAME.destinations = (as allow),
 * NAME.header = Authorization, NAME.format = "Bearer {value}". The proxy sends the header to
 * those destinations alone (decrypting TLS for them); type_secret types the value.
 */
typedef struct _CarrelPolicySecret CarrelPolicySecret;

/* The policy's secrets (CarrelPolicySecret), by name; borrowed. */
GPtrArray *carrel_policy_secrets(const CarrelPolicy *policy);
const char *carrel_policy_secret_name(const CarrelPolicySecret *s);
const char *carrel_policy_secret_source(const CarrelPolicySecret *s);
/* The header it goes in, or NULL (only typed). */
const char *carrel_policy_secret_header(const CarrelPolicySecret *s);
/* The header's value for value (format with {value} replaced). */
char *carrel_policy_secret_header_value(const CarrelPolicySecret *s, const char *value);
/* The secret whose header goes to host:port, or NULL. */
const CarrelPolicySecret *carrel_policy_secret_for(const CarrelPolicy *policy, const char *host,
                                                   guint port);
const CarrelPolicySecret *carrel_policy_secret_named(const CarrelPolicy *policy, const char *name);

/* [console] record_typed_text: TRUE when what a person types on a session's console is kept on
 * its timeline as text; FALSE (the default) keeps only how many characters were typed. */
gboolean carrel_policy_record_typed_text(const CarrelPolicy *policy);

/* {name, resources: {max_vcpus, max_memory_mib, max_disk_gib}, artifacts: {paths}, timeouts:
 * {ttl_s, idle_timeout_s, on_expiry}, network: {mode, allow, deny, ask, ask_timeout_s},
 * console: {record_typed_text}, recording: {enabled, fps, max_mib, segment_s}}; what
 * `carrel policy show` prints. Pure. */
JsonNode *carrel_policy_to_json(const CarrelPolicy *policy);

/*
 * Named policies (policy-set.c): every *.policy of carreld's policy folder, by name. The role
 * matrix is carreld's, not a session's: [roles] is read from "default" only. A set always has
 * a "default" (the built-in one unless a file of that name was added).
 */
typedef struct _CarrelPolicySet CarrelPolicySet;

CarrelPolicySet *carrel_policy_set_new(void);
void carrel_policy_set_free(CarrelPolicySet *set);
G_DEFINE_AUTOPTR_CLEANUP_FUNC(CarrelPolicySet, carrel_policy_set_free)

/* Parses data as the policy called name. INVALID_ARG: a name that is not a carrel name
 * ([a-z0-9][a-z0-9._-]*, at most 63), a name already added, [roles] outside "default", or
 * anything carrel_policy_load_data refuses. */
gboolean carrel_policy_set_add(CarrelPolicySet *set, const char *name, const char *data, gsize len,
                               GError **error);

/* The policy called name, or NULL. */
const CarrelPolicy *carrel_policy_set_lookup(const CarrelPolicySet *set, const char *name);
const CarrelPolicy *carrel_policy_set_get_default(const CarrelPolicySet *set);
/* Every policy, sorted by name (borrowed: the set owns them). */
GPtrArray *carrel_policy_set_list(const CarrelPolicySet *set);

/* [resources] max_disk_gib in bytes: the most a session's disk may grow to (its virtual size at
 * create, its overlay's allocation while it runs); 0 = no limit. */
guint64 carrel_policy_max_disk_bytes(const CarrelPolicy *policy);
/* Decides whether a session on a disk of that virtual size may be created (POLICY_DENIED). */
gboolean carrel_policy_check_disk(const CarrelPolicy *policy, guint64 virtual_bytes,
                                  GError **error);
/* [limits] sessions=, creates=, rate=, burst=: what one non-admin token may use (defaults 64
 * sessions, 8 creates or forks at once, 50 requests per second with bursts of 200). Like
 * [roles], carreld's: read from default.policy only. */
const CarrelLimits *carrel_policy_limits(const CarrelPolicy *policy);

/* [recording]: enabled (false), fps (1..10, 2), max_mib (1..4096, 256: the most a session's
 * segments hold together, the oldest go beyond), segment_s (10..600, 60: a segment's length). */
#define CARREL_RECORDING_MAX_FPS 10
#define CARREL_RECORDING_MAX_MIB 4096
#define CARREL_RECORDING_MIN_SEGMENT_S 10
#define CARREL_RECORDING_MAX_SEGMENT_S 600
typedef struct {
    gboolean enabled;
    guint fps;
    guint max_mib;
    guint segment_s;
} CarrelRecordingPolicy;

/* The policy's [recording] (its defaults when the file has none); borrowed. */
const CarrelRecordingPolicy *carrel_policy_recording(const CarrelPolicy *policy);

/* Decides whether a session of that size may be created; POLICY_DENIED says which limit. */
gboolean carrel_policy_check_resources(const CarrelPolicy *policy, guint vcpus, guint memory_mib,
                                       GError **error);
/* Lowers *vcpus and *memory_mib to the policy's maximums (for sizes nobody asked for, such as a
 * template's defaults: an explicit request above a maximum is refused instead). */
void carrel_policy_clamp_resources(const CarrelPolicy *policy, guint *vcpus, guint *memory_mib);

/* A session's time limits: the request's where given, else the policy's ([timeouts] ttl_s,
 * idle_timeout_s, on_expiry; 0 = none); the action defaults to "destroy". */
void carrel_policy_time_limits(const CarrelPolicy *policy, guint ttl_s, guint idle_timeout_s,
                               const char *action, guint *ret_ttl_s, guint *ret_idle_s,
                               const char **ret_action);

/* The paths a session's exit collects: the policy's, then the request's, without repeats. */
GStrv carrel_policy_exit_paths(const CarrelPolicy *policy, char **requested);

/* The role matrix: what a role may do. OWN: only on the sessions its principal created. */
typedef enum {
    CARREL_GRANT_NONE,
    CARREL_GRANT_OWN,
    CARREL_GRANT_ANY,
    CARREL_GRANT_LAST
} CarrelGrant;

/* "no", "own", "yes". */
const char *carrel_grant_to_string(CarrelGrant grant);
CarrelGrant carrel_grant_from_string(const char *name);

/* What a role may do with op under this policy (defaults, then the file's [roles]). */
CarrelGrant carrel_policy_grant(const CarrelPolicy *policy, CarrelRole role, CarrelOp op);

/* The session an operation acts on, as far as the decision needs it. */
typedef struct {
    const char *id;                 /* as stored ("s-..."), for messages */
    const char *owner_id;           /* token id of its creator; NULL: nobody's (admins only) */
    const char *lease_holder_id;    /* token id holding its control lease, or NULL */
    const char *lease_holder_label; /* that holder's name, for the message */
    gint64 lease_since;             /* Unix seconds */
} CarrelPolicyTarget;

/*
 * The one decision: may who do op (on target, NULL when no session is involved)? Refusals:
 * FORBIDDEN when the role may not do op; NOT_FOUND when it may only on its own sessions and
 * this one is not (it must not learn that the session exists); WRONG_STATE "session under
 * human control" when a person holds target's control lease and op is bound to it (every
 * mutating verb of an agent; input through the API from anyone). Pure.
 */
gboolean carrel_policy_authorize(const CarrelPolicy *policy, const CarrelPrincipal *who,
                                 CarrelOp op, const CarrelPolicyTarget *target, GError **error);

/* TRUE when who may see an item of a list (sessions, approvals) owned by owner_id under op. */
gboolean carrel_policy_may_see(const CarrelPolicy *policy, const CarrelPrincipal *who, CarrelOp op,
                               const char *owner_id);

/* {operation: {admin, agent, reviewer: "yes"|"own"|"no", lease: "all"|"agents"|"no"}} */
JsonNode *carrel_policy_matrix_to_json(const CarrelPolicy *policy);

G_END_DECLS
