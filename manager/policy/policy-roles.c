/*
 * policy: the role matrix. Who may do what is one table (printed in the README), overridable
 * per policy file in [roles]; carrel_policy_authorize is the one decision every front door
 * reaches through core.
 */
#include <string.h>

#include "policy/policy-priv.h"

#define NO CARREL_GRANT_NONE
#define OWN CARREL_GRANT_OWN
#define ANY CARREL_GRANT_ANY

/* Which callers the control lease holds back from an operation on the session it covers. */
typedef enum {
    LEASE_FREE,   /* the lease does not bind it */
    LEASE_AGENTS, /* agents wait while a person holds the session */
    LEASE_ALL,    /* everyone's, the holder's token too: input, so nothing races the person */
} LeaseBinding;

typedef struct {
    CarrelOp op;
    CarrelGrant admin, agent, reviewer;
    LeaseBinding lease;
} MatrixRow;

/*
 * The default matrix (DESIGN.md "Trust"). OWN: only on sessions the principal created (others
 * are NOT_FOUND to it, and lists are filtered); for operations without a session it is ANY.
 */
static const MatrixRow matrix[] = {
    {CARREL_OP_SERVER_READ, ANY, ANY, ANY, LEASE_FREE},
    {CARREL_OP_SESSION_CREATE, ANY, ANY, NO, LEASE_FREE},
    {CARREL_OP_SESSION_LIST, ANY, OWN, ANY, LEASE_FREE},
    {CARREL_OP_SESSION_READ, ANY, OWN, ANY, LEASE_FREE},
    {CARREL_OP_SESSION_START, ANY, OWN, ANY, LEASE_AGENTS},
    {CARREL_OP_SESSION_STOP, ANY, OWN, ANY, LEASE_AGENTS},
    {CARREL_OP_SESSION_PAUSE, ANY, OWN, ANY, LEASE_AGENTS},
    {CARREL_OP_SESSION_RESUME, ANY, OWN, ANY, LEASE_AGENTS},
    {CARREL_OP_SESSION_HIBERNATE, ANY, OWN, ANY, LEASE_AGENTS},
    {CARREL_OP_SESSION_DESTROY, ANY, OWN, NO, LEASE_AGENTS},
    {CARREL_OP_SESSION_EXEC, ANY, OWN, NO, LEASE_AGENTS},
    {CARREL_OP_SESSION_FILE_READ, ANY, OWN, ANY, LEASE_FREE},
    {CARREL_OP_SESSION_FILE_WRITE, ANY, OWN, NO, LEASE_AGENTS},
    {CARREL_OP_SESSION_SCREENSHOT, ANY, OWN, ANY, LEASE_FREE},
    {CARREL_OP_SESSION_INPUT, ANY, OWN, NO, LEASE_ALL},
    {CARREL_OP_SESSION_EXTRACT, ANY, OWN, ANY, LEASE_FREE},
    {CARREL_OP_SESSION_DIFF, ANY, OWN, ANY, LEASE_FREE},
    {CARREL_OP_SESSION_FORK, ANY, OWN, NO, LEASE_AGENTS},
    {CARREL_OP_SNAPSHOT_CREATE, ANY, OWN, ANY, LEASE_AGENTS},
    {CARREL_OP_SNAPSHOT_DELETE, ANY, OWN, NO, LEASE_AGENTS},
    {CARREL_OP_SNAPSHOT_REVERT, ANY, OWN, NO, LEASE_AGENTS},
    {CARREL_OP_ARTIFACT_READ, ANY, OWN, ANY, LEASE_FREE},
    {CARREL_OP_CONSOLE_VIEW, ANY, OWN, ANY, LEASE_FREE},
    /* Core also wants the caller to hold the control lease, unless an admin: a person at the
     * console, never an agent (which has exec). */
    {CARREL_OP_SESSION_SHELL, ANY, NO, ANY, LEASE_FREE},
    {CARREL_OP_CONTROL_TAKE, ANY, NO, ANY, LEASE_FREE},
    {CARREL_OP_CONTROL_RELEASE, ANY, NO, ANY, LEASE_FREE},
    {CARREL_OP_APPROVAL_LIST, ANY, OWN, ANY, LEASE_FREE},
    {CARREL_OP_APPROVAL_DECIDE, ANY, NO, ANY, LEASE_FREE},
    {CARREL_OP_APPROVAL_REQUEST, ANY, OWN, NO, LEASE_FREE},
    {CARREL_OP_TEMPLATE_READ, ANY, ANY, ANY, LEASE_FREE},
    {CARREL_OP_TEMPLATE_IMPORT, ANY, NO, NO, LEASE_FREE},
    {CARREL_OP_TEMPLATE_BUILD, ANY, NO, NO, LEASE_FREE},
    {CARREL_OP_TEMPLATE_WARM, ANY, NO, NO, LEASE_FREE},
    {CARREL_OP_TEMPLATE_REMOVE, ANY, NO, NO, LEASE_FREE},
    {CARREL_OP_POOL_READ, ANY, ANY, ANY, LEASE_FREE},
    {CARREL_OP_POOL_SET, ANY, NO, NO, LEASE_FREE},
    {CARREL_OP_POLICY_READ, ANY, ANY, ANY, LEASE_FREE},
    {CARREL_OP_JOB_READ, ANY, ANY, ANY, LEASE_FREE},
    {CARREL_OP_UPLOAD_CREATE, ANY, ANY, NO, LEASE_FREE},
    {CARREL_OP_TOKEN_LIST, ANY, NO, NO, LEASE_FREE},
    {CARREL_OP_TOKEN_CREATE, ANY, NO, NO, LEASE_FREE},
    {CARREL_OP_TOKEN_REVOKE, ANY, NO, NO, LEASE_FREE},
    {CARREL_OP_TOKEN_ROTATE, ANY, NO, NO, LEASE_FREE},
    {CARREL_OP_AUDIT_READ, ANY, NO, ANY, LEASE_FREE},
    {CARREL_OP_METRICS_READ, ANY, NO, ANY, LEASE_FREE},
    {CARREL_OP_INPUT_HOST_PATH, ANY, NO, NO, LEASE_FREE},
    {CARREL_OP_SESSION_OBSERVE, NO, NO, NO, LEASE_FREE},
    {CARREL_OP_AUTH_LOGIN, ANY, ANY, ANY, LEASE_FREE},
    {CARREL_OP_SESSION_EXPORT, ANY, OWN, ANY, LEASE_FREE},
};

G_STATIC_ASSERT(G_N_ELEMENTS(matrix) == CARREL_OP_LAST);

static const char *const grant_names[CARREL_GRANT_LAST] = {
    [CARREL_GRANT_NONE] = "no",
    [CARREL_GRANT_OWN] = "own",
    [CARREL_GRANT_ANY] = "yes",
};

const char *
carrel_grant_to_string(CarrelGrant grant)
{
    return carrel_util_enum_to_string(grant_names, CARREL_GRANT_LAST, (int)grant);
}

CarrelGrant
carrel_grant_from_string(const char *name)
{
    return (CarrelGrant)carrel_util_enum_from_string(grant_names, CARREL_GRANT_LAST, name);
}

static const MatrixRow *
row_of(CarrelOp op)
{
    for (guint i = 0; i < G_N_ELEMENTS(matrix); i++) {
        if (matrix[i].op == op)
            return &matrix[i];
    }
    return NULL;
}

void
carrel_policy_roles_init(CarrelPolicy *policy)
{
    for (int op = 0; op < CARREL_OP_LAST; op++) {
        const MatrixRow *row = row_of((CarrelOp)op);

        policy->grants[CARREL_ROLE_ADMIN][op] = row ? row->admin : NO;
        policy->grants[CARREL_ROLE_AGENT][op] = row ? row->agent : NO;
        policy->grants[CARREL_ROLE_REVIEWER][op] = row ? row->reviewer : NO;
        policy->grants[CARREL_ROLE_SYSTEM][op] = ANY;
    }
}

/* [roles] ROLE.OPERATION = yes|own|no; admin and carreld keep everything. */
gboolean
carrel_policy_roles_read(GKeyFile *kf, CarrelPolicy *policy, GError **error)
{
    g_auto(GStrv) keys = NULL;

    if (!g_key_file_has_group(kf, "roles"))
        return TRUE;
    keys = g_key_file_get_keys(kf, "roles", NULL, NULL);
    for (guint i = 0; keys && keys[i]; i++) {
        g_autofree char *value = g_key_file_get_string(kf, "roles", keys[i], NULL);
        const char *dot = strchr(keys[i], '.');
        g_autofree char *role_name = dot ? g_strndup(keys[i], dot - keys[i]) : NULL;
        CarrelRole role = role_name ? carrel_role_from_string(role_name) : CARREL_ROLE_LAST;
        CarrelOp op = dot ? carrel_op_from_string(dot + 1) : CARREL_OP_LAST;
        CarrelGrant grant = value ? carrel_grant_from_string(g_strstrip(value)) : CARREL_GRANT_LAST;

        if ((role != CARREL_ROLE_AGENT && role != CARREL_ROLE_REVIEWER) || op == CARREL_OP_LAST ||
            op == CARREL_OP_AUTH_LOGIN || grant == CARREL_GRANT_LAST) {
            g_set_error(error, CARREL_ERROR, CARREL_ERROR_INVALID_ARG,
                        "[roles] '%s': keys are agent.OPERATION or reviewer.OPERATION (see "
                        "policies/README.md), values yes, own or no",
                        keys[i]);
            return FALSE;
        }
        policy->grants[role][op] = grant;
    }
    return TRUE;
}

CarrelGrant
carrel_policy_grant(const CarrelPolicy *policy, CarrelRole role, CarrelOp op)
{
    if ((int)role < 0 || role >= CARREL_ROLE_LAST || (int)op < 0 || op >= CARREL_OP_LAST)
        return CARREL_GRANT_NONE;
    return policy->grants[role][op];
}

static gboolean
lease_allows(const CarrelPrincipal *who, CarrelOp op, const CarrelPolicyTarget *target,
             GError **error)
{
    const MatrixRow *row = row_of(op);
    g_autofree char *when = NULL;

    if (!target->lease_holder_id || !row || row->lease == LEASE_FREE ||
        who->role == CARREL_ROLE_SYSTEM)
        return TRUE;
    /* Agents never hold a lease; input through the API waits even for the holder's own token:
     * the person is at the console, and a script with their token must not race them. */
    if (row->lease == LEASE_AGENTS && who->role != CARREL_ROLE_AGENT)
        return TRUE;
    when = carrel_util_format_time(target->lease_since);
    g_set_error(error, CARREL_ERROR, CARREL_ERROR_WRONG_STATE,
                "session under human control: '%s' took over at %s; %s is refused until they "
                "release it",
                target->lease_holder_label ? target->lease_holder_label : target->lease_holder_id,
                when, carrel_op_to_string(op));
    return FALSE;
}

gboolean
carrel_policy_authorize(const CarrelPolicy *policy, const CarrelPrincipal *who, CarrelOp op,
                        const CarrelPolicyTarget *target, GError **error)
{
    CarrelGrant grant = carrel_policy_grant(policy, who->role, op);

    if (grant == CARREL_GRANT_NONE) {
        g_set_error(error, CARREL_ERROR, CARREL_ERROR_FORBIDDEN, "role '%s' may not do %s",
                    carrel_role_to_string(who->role), carrel_op_to_string(op));
        return FALSE;
    }
    /* Someone else's session does not exist for a principal limited to its own. */
    if (grant == CARREL_GRANT_OWN && target && target->id &&
        g_strcmp0(target->owner_id, who->token_id) != 0) {
        g_set_error(error, CARREL_ERROR, CARREL_ERROR_NOT_FOUND, "session '%s' does not exist",
                    target->id);
        return FALSE;
    }
    return !target || lease_allows(who, op, target, error);
}

gboolean
carrel_policy_may_see(const CarrelPolicy *policy, const CarrelPrincipal *who, CarrelOp op,
                      const char *owner_id)
{
    CarrelGrant grant = carrel_policy_grant(policy, who->role, op);

    return grant == CARREL_GRANT_ANY ||
           (grant == CARREL_GRANT_OWN && g_strcmp0(owner_id, who->token_id) == 0);
}

JsonNode *
carrel_policy_matrix_to_json(const CarrelPolicy *policy)
{
    g_autoptr(JsonBuilder) b = json_builder_new();
    const CarrelRole roles[] = {CARREL_ROLE_ADMIN, CARREL_ROLE_AGENT, CARREL_ROLE_REVIEWER};

    json_builder_begin_object(b);
    for (int op = 0; op < CARREL_OP_LAST; op++) {
        const MatrixRow *row = row_of((CarrelOp)op);

        json_builder_set_member_name(b, carrel_op_to_string((CarrelOp)op));
        json_builder_begin_object(b);
        for (guint r = 0; r < G_N_ELEMENTS(roles); r++) {
            json_builder_set_member_name(b, carrel_role_to_string(roles[r]));
            json_builder_add_string_value(
                b, carrel_grant_to_string(carrel_policy_grant(policy, roles[r], (CarrelOp)op)));
        }
        json_builder_set_member_name(b, "lease");
        json_builder_add_string_value(b, row->lease == LEASE_ALL      ? "all"
                                         : row->lease == LEASE_AGENTS ? "agents"
                                                                      : "no");
        json_builder_end_object(b);
    }
    json_builder_end_object(b);
    return json_builder_get_root(b);
}
