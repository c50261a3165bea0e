/* policy: internals shared by the module's files. */
#pragma once

#include "policy/policy.h"

struct _CarrelPolicy {
    char *name; /* the file's base name without .policy; "default" for the built-in one */
    guint max_vcpus;
    guint max_memory_mib;
    guint max_disk_gib; /* 0: no limit */
    GStrv exit_paths;   /* [artifacts] paths: collected from every session on exit */
    guint ttl_s;        /* [timeouts] ttl_s, 0 = none */
    guint idle_timeout_s;
    char *expiry_action;
    CarrelGrant grants[CARREL_ROLE_LAST][CARREL_OP_LAST]; /* the role matrix (policy-roles.c) */
    CarrelNetworkMode network_mode;                       /* [network] (policy-network.c) */
    GPtrArray *allow;                                     /* CarrelEgressRule */
    GPtrArray *deny;
    GPtrArray *ask;
    guint ask_timeout_s;
    GPtrArray *secrets;              /* CarrelPolicySecret, by name (policy-secrets.c) */
    CarrelLimits limits;             /* [limits]: per token, carreld's (read from default only) */
    gboolean record_typed_text;      /* [console]: a person's typed text kept on the timeline */
    CarrelRecordingPolicy recording; /* [recording] (policy-recording.c) */
};

typedef struct _CarrelEgressRule CarrelEgressRule;
void carrel_egress_rule_free(CarrelEgressRule *rule);
G_DEFINE_AUTOPTR_CLEANUP_FUNC(CarrelEgressRule, carrel_egress_rule_free)

/* [group] key = an integer from 1 to max, into *ret_value when present. */
gboolean carrel_policy_read_limit(GKeyFile *kf, const char *group, const char *key, guint max,
                                  guint *ret_value, GError **error);
/* A [group] key's comma-separated NAME, *.NAME, NAME:PORT entries (an empty array if absent). */
gboolean carrel_policy_read_rules(GKeyFile *kf, const char *group, const char *key,
                                  GPtrArray **ret_rules, GError **error);
gboolean carrel_policy_rules_match(const GPtrArray *rules, const char *host, guint port);
char *carrel_policy_rule_to_text(const CarrelEgressRule *rule);
/* Whether the policy lets a session reach (allow or ask) what the rule names. */
gboolean carrel_policy_rule_reachable(const CarrelPolicy *policy, const CarrelEgressRule *rule);
/* Reads [secrets] (after [network]: a secret's destinations must be reachable). */
gboolean carrel_policy_secrets_read(GKeyFile *kf, CarrelPolicy *policy, GError **error);
void carrel_policy_secret_free(CarrelPolicySecret *secret);
/* Adds "secrets": [{name, source, header, destinations}] (never a value). */
void carrel_policy_secrets_to_json(const CarrelPolicy *policy, JsonBuilder *b);

/* Reads [network]; the defaults when it is absent. */
gboolean carrel_policy_network_read(GKeyFile *kf, CarrelPolicy *policy, GError **error);
/* Adds "network": {mode, allow, deny, ask, ask_timeout_s} to an object being built. */
void carrel_policy_network_to_json(const CarrelPolicy *policy, JsonBuilder *b);

/* [recording] (policy-recording.c): init sets the defaults, read the file's values, to_json adds
 * "recording": {enabled, fps, max_mib, segment_s}. */
void carrel_policy_recording_init(CarrelPolicy *policy);
gboolean carrel_policy_recording_read(GKeyFile *kf, CarrelPolicy *policy, GError **error);
void carrel_policy_recording_to_json(const CarrelPolicy *policy, JsonBuilder *b);

/* Fills policy->grants with the default matrix. */
void carrel_policy_roles_init(CarrelPolicy *policy);
/* Applies a policy file's [roles] overrides. */
gboolean carrel_policy_roles_read(GKeyFile *kf, CarrelPolicy *policy, GError **error);
