/* policy: internals shared by the module's files. */
#pragma once

#include "policy/policy.h"

struct _CarrelPolicy {
    char *name; /* the file's base name without .policy; "default" for the built-in one */
    guint max_vcpus;
    guint max_memory_mib;
    GStrv exit_paths; /* [artifacts] paths: collected from every session on exit */
    guint ttl_s;      /* [timeouts] ttl_s, 0 = none */
    guint idle_timeout_s;
    char *expiry_action;
    CarrelGrant grants[CARREL_ROLE_LAST][CARREL_OP_LAST]; /* the role matrix (policy-roles.c) */
};

/* Fills policy->grants with the default matrix. */
void carrel_policy_roles_init(CarrelPolicy *policy);
/* Applies a policy file's [roles] overrides. */
gboolean carrel_policy_roles_read(GKeyFile *kf, CarrelPolicy *policy, GError **error);
