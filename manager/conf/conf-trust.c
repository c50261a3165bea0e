/* conf: principals, operations, tokens and audit records (conf-trust.h). */
#include <string.h>

#include "conf/conf.h"
#include "conf/conf-priv.h"

#define TOKEN_LABEL_MAX 64
#define TOKEN_TTL_MAX_S (366 * 24 * 3600)

static const char *const role_names[CARREL_ROLE_LAST] = {
    [CARREL_ROLE_ADMIN] = "admin",
    [CARREL_ROLE_AGENT] = "agent",
    [CARREL_ROLE_REVIEWER] = "reviewer",
    [CARREL_ROLE_SYSTEM] = "carreld",
};

typedef struct {
    const char *name;
    gboolean changes_state;
} OpInfo;

static const OpInfo ops[CARREL_OP_LAST] = {
    [CARREL_OP_SERVER_READ] = {"server.read", FALSE},
    [CARREL_OP_SESSION_CREATE] = {"session.create", TRUE},
    [CARREL_OP_SESSION_LIST] = {"session.list", FALSE},
    [CARREL_OP_SESSION_READ] = {"session.read", FALSE},
    [CARREL_OP_SESSION_START] = {"session.start", TRUE},
    [CARREL_OP_SESSION_STOP] = {"session.stop", TRUE},
    [CARREL_OP_SESSION_PAUSE] = {"session.pause", TRUE},
    [CARREL_OP_SESSION_RESUME] = {"session.resume", TRUE},
    [CARREL_OP_SESSION_HIBERNATE] = {"session.hibernate", TRUE},
    [CARREL_OP_SESSION_DESTROY] = {"session.destroy", TRUE},
    [CARREL_OP_SESSION_EXEC] = {"session.exec", TRUE},
    [CARREL_OP_SESSION_FILE_READ] = {"session.file_read", FALSE},
    [CARREL_OP_SESSION_FILE_WRITE] = {"session.file_write", TRUE},
    [CARREL_OP_SESSION_SCREENSHOT] = {"session.screenshot", FALSE},
    [CARREL_OP_SESSION_INPUT] = {"session.input", TRUE},
    [CARREL_OP_SESSION_EXTRACT] = {"session.extract", TRUE},
    [CARREL_OP_SESSION_DIFF] = {"session.diff", FALSE},
    [CARREL_OP_SESSION_FORK] = {"session.fork", TRUE},
    [CARREL_OP_SNAPSHOT_CREATE] = {"snapshot.create", TRUE},
    [CARREL_OP_SNAPSHOT_DELETE] = {"snapshot.delete", TRUE},
    [CARREL_OP_SNAPSHOT_REVERT] = {"snapshot.revert", TRUE},
    [CARREL_OP_ARTIFACT_READ] = {"artifact.read", FALSE},
    [CARREL_OP_CONSOLE_VIEW] = {"console.view", TRUE},
    [CARREL_OP_SESSION_SHELL] = {"session.shell", TRUE},
    [CARREL_OP_CONTROL_TAKE] = {"control.take", TRUE},
    [CARREL_OP_CONTROL_RELEASE] = {"control.release", TRUE},
    [CARREL_OP_APPROVAL_LIST] = {"approval.list", FALSE},
    [CARREL_OP_APPROVAL_DECIDE] = {"approval.decide", TRUE},
    [CARREL_OP_APPROVAL_REQUEST] = {"approval.request", TRUE},
    [CARREL_OP_TEMPLATE_READ] = {"template.read", FALSE},
    [CARREL_OP_TEMPLATE_IMPORT] = {"template.import", TRUE},
    [CARREL_OP_TEMPLATE_BUILD] = {"template.build", TRUE},
    [CARREL_OP_TEMPLATE_WARM] = {"template.warm", TRUE},
    [CARREL_OP_TEMPLATE_REMOVE] = {"template.remove", TRUE},
    [CARREL_OP_POOL_READ] = {"pool.read", FALSE},
    [CARREL_OP_POOL_SET] = {"pool.set", TRUE},
    [CARREL_OP_POLICY_READ] = {"policy.read", FALSE},
    [CARREL_OP_JOB_READ] = {"job.read", FALSE},
    [CARREL_OP_UPLOAD_CREATE] = {"upload.create", TRUE},
    [CARREL_OP_TOKEN_LIST] = {"token.list", FALSE},
    [CARREL_OP_TOKEN_CREATE] = {"token.create", TRUE},
    [CARREL_OP_TOKEN_REVOKE] = {"token.revoke", TRUE},
    [CARREL_OP_TOKEN_ROTATE] = {"token.rotate", TRUE},
    [CARREL_OP_AUDIT_READ] = {"audit.read", FALSE},
    [CARREL_OP_METRICS_READ] = {"metrics.read", FALSE},
    [CARREL_OP_INPUT_HOST_PATH] = {"input.host_path", TRUE},
    [CARREL_OP_SESSION_OBSERVE] = {"session.observe", TRUE},
    [CARREL_OP_AUTH_LOGIN] = {"auth.login", TRUE},
    [CARREL_OP_SESSION_EXPORT] = {"session.export", TRUE},
};

const char *
carrel_role_to_string(CarrelRole role)
{
    return carrel_util_enum_to_string(role_names, CARREL_ROLE_LAST, (int)role);
}

CarrelRole
carrel_role_from_string(const char *name)
{
    return (CarrelRole)carrel_util_enum_from_string(role_names, CARREL_ROLE_LAST, name);
}

const char *
carrel_op_to_string(CarrelOp op)
{
    if ((int)op < 0 || op >= CARREL_OP_LAST)
        return NULL;
    return ops[op].name;
}

CarrelOp
carrel_op_from_string(const char *name)
{
    for (int i = 0; name && i < CARREL_OP_LAST; i++) {
        if (g_str_equal(ops[i].name, name))
            return (CarrelOp)i;
    }
    return CARREL_OP_LAST;
}

gboolean
carrel_op_changes_state(CarrelOp op)
{
    return (int)op >= 0 && op < CARREL_OP_LAST && ops[op].changes_state;
}

CarrelPrincipal *
carrel_principal_new(const char *token_id, const char *label, CarrelRole role)
{
    CarrelPrincipal *who = g_new0(CarrelPrincipal, 1);

    who->token_id = g_strdup(token_id);
    who->label = g_strdup(label);
    who->role = role;
    return who;
}

CarrelPrincipal *
carrel_principal_copy(const CarrelPrincipal *who)
{
    CarrelPrincipal *copy;

    if (!who)
        return NULL;
    copy = carrel_principal_new(who->token_id, who->label, who->role);
    copy->policies = g_strdupv(who->policies);
    return copy;
}

gboolean
carrel_principal_may_use_policy(const CarrelPrincipal *who, const char *policy)
{
    return !who->policies || g_strv_contains((const char *const *)who->policies, policy);
}

void
carrel_principal_free(CarrelPrincipal *who)
{
    if (!who || who == carrel_principal_daemon())
        return;
    g_free(who->token_id);
    g_free(who->label);
    g_strfreev(who->policies);
    g_free(who);
}

const CarrelPrincipal *
carrel_principal_daemon(void)
{
    static const CarrelPrincipal daemon = {
        .token_id = (char *)"carreld", .label = (char *)"carreld", .role = CARREL_ROLE_SYSTEM};

    return &daemon;
}

JsonNode *
carrel_principal_to_json(const CarrelPrincipal *who)
{
    g_autoptr(JsonBuilder) b = json_builder_new();

    json_builder_begin_object(b);
    carrel_conf_add_optional_string(b, "id", who->token_id);
    carrel_conf_add_optional_string(b, "label", who->label);
    carrel_conf_add_optional_string(b, "role", carrel_role_to_string(who->role));
    json_builder_end_object(b);
    return json_builder_get_root(b);
}

CarrelToken *
carrel_token_new(void)
{
    return g_new0(CarrelToken, 1);
}

void
carrel_token_free(CarrelToken *token)
{
    if (!token)
        return;
    g_free(token->id);
    g_free(token->label);
    g_strfreev(token->policies);
    g_free(token);
}

gboolean
carrel_token_is_live(const CarrelToken *token, gint64 now)
{
    return token->revoked_at == 0 && (token->expires_at == 0 || now < token->expires_at);
}

static const char *
token_state(const CarrelToken *token, gint64 now)
{
    if (token->revoked_at)
        return "revoked";
    if (token->expires_at && now >= token->expires_at)
        return "expired";
    return "live";
}

JsonNode *
carrel_token_to_json(const CarrelToken *token, gint64 now)
{
    g_autoptr(JsonBuilder) b = json_builder_new();

    json_builder_begin_object(b);
    carrel_conf_add_optional_string(b, "id", token->id);
    carrel_conf_add_optional_string(b, "name", token->label);
    carrel_conf_add_optional_string(b, "role", carrel_role_to_string(token->role));
    carrel_conf_add_optional_string(b, "state", token_state(token, now));
    carrel_conf_add_optional_time(b, "created_at", token->created_at);
    carrel_conf_add_optional_time(b, "last_used_at", token->last_used_at);
    carrel_conf_add_optional_time(b, "expires_at", token->expires_at);
    carrel_conf_add_optional_time(b, "revoked_at", token->revoked_at);
    json_builder_set_member_name(b, "policies");
    if (token->policies) {
        json_builder_begin_array(b);
        for (guint i = 0; token->policies[i]; i++)
            json_builder_add_string_value(b, token->policies[i]);
        json_builder_end_array(b);
    } else {
        json_builder_add_null_value(b);
    }
    json_builder_end_object(b);
    return json_builder_get_root(b);
}

gboolean
carrel_token_check_label(const char *label, GError **error)
{
    gsize len = label ? strlen(label) : 0;

    for (gsize i = 0; i < len; i++) {
        if (!g_ascii_isalnum(label[i]) && !strchr("._@-", label[i]))
            len = 0;
    }
    if (len == 0 || len > TOKEN_LABEL_MAX) {
        g_set_error(error, CARREL_ERROR, CARREL_ERROR_INVALID_ARG,
                    "a token's name must be 1-%d of letters, digits and . _ @ -", TOKEN_LABEL_MAX);
        return FALSE;
    }
    return TRUE;
}

gboolean
carrel_token_parse_ttl(const char *text, gint64 *ret_seconds, GError **error)
{
    guint64 n = 0;
    gsize len = text ? strlen(text) : 0;
    g_autofree char *digits = len > 1 ? g_strndup(text, len - 1) : NULL;
    const char *units = "smhd";
    const gint64 factor[] = {1, 60, 3600, 86400};
    const char *unit = len > 1 ? strchr(units, text[len - 1]) : NULL;

    if (!unit || !*unit || !g_ascii_string_to_unsigned(digits, 10, 1, G_MAXUINT32, &n, NULL) ||
        (gint64)n * factor[unit - units] > TOKEN_TTL_MAX_S) {
        g_set_error(error, CARREL_ERROR, CARREL_ERROR_INVALID_ARG,
                    "an expiry is a number with s, m, h or d ('12h', '7d'), at most 366 days");
        return FALSE;
    }
    *ret_seconds = (gint64)n * factor[unit - units];
    return TRUE;
}

gboolean
carrel_token_policies_from_json(JsonNode *request, GStrv *ret_policies, GError **error)
{
    g_auto(GStrv) names = NULL;

    *ret_policies = NULL;
    if (!request || !JSON_NODE_HOLDS_OBJECT(request))
        return TRUE;
    if (!carrel_conf_get_string_array(json_node_get_object(request), "policies",
                                      CARREL_LIMIT_TOKEN_POLICIES, &names, error))
        return FALSE;
    for (guint i = 0; names && names[i]; i++) {
        if (!carrel_util_is_valid_name(names[i])) {
            g_set_error(error, CARREL_ERROR, CARREL_ERROR_INVALID_ARG,
                        "'policies' holds names of policies (carrel policy ls), not '%s'",
                        names[i]);
            return FALSE;
        }
    }
    *ret_policies = g_steal_pointer(&names);
    return TRUE;
}

CarrelAuditRecord *
carrel_audit_record_new(void)
{
    return g_new0(CarrelAuditRecord, 1);
}

void
carrel_audit_record_free(CarrelAuditRecord *rec)
{
    if (!rec)
        return;
    g_free(rec->principal_id);
    g_free(rec->principal_label);
    g_free(rec->role);
    g_free(rec->operation);
    g_free(rec->session_id);
    g_free(rec->params_digest);
    g_free(rec->result);
    g_free(rec->error_code);
    g_free(rec->prev_hash);
    g_free(rec->hash);
    g_free(rec);
}

static void
add_nullable(JsonArray *a, const char *text)
{
    if (text)
        json_array_add_string_element(a, text);
    else
        json_array_add_null_element(a);
}

char *
carrel_audit_record_hash(const CarrelAuditRecord *rec)
{
    g_autoptr(JsonArray) fields = json_array_new();
    g_autoptr(JsonNode) node = json_node_new(JSON_NODE_ARRAY);
    g_autofree char *text = NULL;
    g_autofree char *chained = NULL;

    /* A JSON array: every field delimited and escaped, so no two rows serialise alike. */
    json_array_add_int_element(fields, rec->seq);
    json_array_add_int_element(fields, rec->ts_us);
    add_nullable(fields, rec->principal_id);
    add_nullable(fields, rec->principal_label);
    add_nullable(fields, rec->role);
    add_nullable(fields, rec->operation);
    add_nullable(fields, rec->session_id);
    add_nullable(fields, rec->params_digest);
    add_nullable(fields, rec->result);
    add_nullable(fields, rec->error_code);
    json_node_set_array(node, fields);
    text = json_to_string(node, FALSE);
    chained = g_strconcat(rec->prev_hash ? rec->prev_hash : "", "\n", text, NULL);
    return carrel_util_sha256_string(chained);
}

JsonNode *
carrel_audit_record_to_json(const CarrelAuditRecord *rec)
{
    g_autoptr(JsonBuilder) b = json_builder_new();
    g_autoptr(GDateTime) when = g_date_time_new_from_unix_utc(rec->ts_us / G_USEC_PER_SEC);
    g_autofree char *base = when ? g_date_time_format(when, "%Y-%m-%dT%H:%M:%S") : NULL;
    g_autofree char *time =
        base ? g_strdup_printf("%s.%06dZ", base, (int)(rec->ts_us % G_USEC_PER_SEC)) : NULL;

    json_builder_begin_object(b);
    json_builder_set_member_name(b, "seq");
    json_builder_add_int_value(b, rec->seq);
    carrel_conf_add_optional_string(b, "time", time);
    json_builder_set_member_name(b, "principal");
    json_builder_begin_object(b);
    carrel_conf_add_optional_string(b, "id", rec->principal_id);
    carrel_conf_add_optional_string(b, "label", rec->principal_label);
    json_builder_end_object(b);
    carrel_conf_add_optional_string(b, "role", rec->role);
    carrel_conf_add_optional_string(b, "operation", rec->operation);
    carrel_conf_add_optional_string(b, "session", rec->session_id);
    carrel_conf_add_optional_string(b, "params_digest", rec->params_digest);
    carrel_conf_add_optional_string(b, "result", rec->result);
    carrel_conf_add_optional_string(b, "error_code", rec->error_code);
    carrel_conf_add_optional_string(b, "prev_hash", rec->prev_hash);
    carrel_conf_add_optional_string(b, "hash", rec->hash);
    json_builder_end_object(b);
    return json_builder_get_root(b);
}

char *
carrel_audit_digest(JsonNode *params)
{
    g_autofree char *text = params ? json_to_string(params, FALSE) : g_strdup("null");

    return carrel_util_sha256_string(text);
}
