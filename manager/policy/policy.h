/* policy: pure decisions over a loaded policy; no I/O beyond reading the policy text. */
#pragma once

#include "conf/conf.h"

G_BEGIN_DECLS

typedef struct _CarrelPolicy CarrelPolicy;

/* The built-in default: at most 4 vCPUs and 8 GiB per session. */
CarrelPolicy *carrel_policy_new_default(void);

/* Parses a policy in GKeyFile syntax: [resources] max_vcpus=, max_memory_mib=;
 * [artifacts] paths=/home/agent/out;/tmp/result.json (collected when a session ends);
 * [timeouts] ttl_s=, idle_timeout_s=, on_expiry=destroy|stop|hibernate|pause. */
CarrelPolicy *carrel_policy_load_data(const char *data, gsize len, GError **error);

void carrel_policy_free(CarrelPolicy *policy);
G_DEFINE_AUTOPTR_CLEANUP_FUNC(CarrelPolicy, carrel_policy_free)

/* Decides whether a session of that size may be created; POLICY_DENIED says which limit. */
gboolean carrel_policy_check_resources(const CarrelPolicy *policy, guint vcpus, guint memory_mib,
                                       GError **error);

/* A session's time limits: the request's where given, else the policy's ([timeouts] ttl_s,
 * idle_timeout_s, on_expiry; 0 = none); the action defaults to "destroy". */
void carrel_policy_time_limits(const CarrelPolicy *policy, guint ttl_s, guint idle_timeout_s,
                               const char *action, guint *ret_ttl_s, guint *ret_idle_s,
                               const char **ret_action);

/* The paths a session's exit collects: the policy's, then the request's, without repeats. */
GStrv carrel_policy_exit_paths(const CarrelPolicy *policy, char **requested);

G_END_DECLS
