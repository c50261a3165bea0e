/*
 * policy: [secrets], credentials the guest never holds. Each names where carreld reads its value
 * (a root-only file, or carreld's environment) and the destinations it may go to: the proxy
 * adds it as a header to requests for those alone (decrypting TLS for them only), and the
 * type_secret action types it. Values are read by core, not here (no I/O in policy).
 */
#include <string.h>

#include "policy/policy-priv.h"

#define SECRET_NAME_MAX 32
#define SECRETS_MAX 32

struct _CarrelPolicySecret {
    char *name;
    char *source;     /* "file:/abs/path" or "env:NAME" */
    GPtrArray *rules; /* CarrelEgressRule: the destinations */
    char *header;     /* e.g. "Authorization", or NULL: typed only */
    char *format;     /* the header's value, "{value}" replaced; default "{value}" */
};

void
carrel_policy_secret_free(CarrelPolicySecret *secret)
{
    if (!secret)
        return;
    g_free(secret->name);
    g_free(secret->source);
    g_clear_pointer(&secret->rules, g_ptr_array_unref);
    g_free(secret->header);
    g_free(secret->format);
    g_free(secret);
}

G_DEFINE_AUTOPTR_CLEANUP_FUNC(CarrelPolicySecret, carrel_policy_secret_free)

static gboolean
is_secret_name(const char *name)
{
    gsize len = strlen(name);

    if (len == 0 || len > SECRET_NAME_MAX)
        return FALSE;
    for (gsize i = 0; i < len; i++)
        if (!g_ascii_islower(name[i]) && !g_ascii_isdigit(name[i]) && name[i] != '_')
            return FALSE;
    return TRUE;
}

static gboolean
check_source(const char *name, const char *source, GError **error)
{
    const char *env = g_str_has_prefix(source, "env:") ? source + 4 : NULL;
    const char *file = g_str_has_prefix(source, "file:") ? source + 5 : NULL;
    gboolean ok = FALSE;

    if (env)
        ok = *env && strspn(env, "ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_") == strlen(env);
    if (file)
        ok = g_path_is_absolute(file) && carrel_util_is_clean_text(file) && !strstr(file, "/../");
    if (!ok)
        g_set_error(error, CARREL_ERROR, CARREL_ERROR_INVALID_ARG,
                    "[secrets] %s.source must be file:/ABSOLUTE/PATH (root-only) or env:NAME",
                    name);
    return ok;
}

/* Header names that are the connection's, not a credential's. */
static gboolean
check_header(const char *name, const char *header, GError **error)
{
    static const char *const refused[] = {"host",       "content-length",   "transfer-encoding",
                                          "connection", "upgrade",          "te",
                                          "trailer",    "proxy-connection", NULL};
    g_autofree char *lower = g_ascii_strdown(header, -1);
    gsize len = strlen(header);

    if (len == 0 || len > 64 ||
        strspn(header, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-") != len ||
        g_strv_contains(refused, lower)) {
        g_set_error(error, CARREL_ERROR, CARREL_ERROR_INVALID_ARG,
                    "[secrets] %s.header '%s' is not a header a credential goes in", name, header);
        return FALSE;
    }
    return TRUE;
}

static gboolean
check_format(const char *name, const char *format, GError **error)
{
    const char *at = strstr(format, "{value}");

    /* Once, and nothing that would end the header or be read as a squid macro. */
    if (!at || strstr(at + 1, "{value}") || !carrel_util_is_clean_text(format) ||
        strpbrk(format, "%\"\\")) {
        g_set_error(error, CARREL_ERROR, CARREL_ERROR_INVALID_ARG,
                    "[secrets] %s.format must hold {value} once, and no %%, \" or \\", name);
        return FALSE;
    }
    return TRUE;
}

static CarrelPolicySecret *
read_secret(GKeyFile *kf, const CarrelPolicy *policy, const char *name, GError **error)
{
    g_autoptr(CarrelPolicySecret) s = g_new0(CarrelPolicySecret, 1);
    g_autofree char *source_key = g_strconcat(name, ".source", NULL);
    g_autofree char *dest_key = g_strconcat(name, ".destinations", NULL);
    g_autofree char *header_key = g_strconcat(name, ".header", NULL);
    g_autofree char *format_key = g_strconcat(name, ".format", NULL);

    s->name = g_strdup(name);
    s->source = g_key_file_get_string(kf, "secrets", source_key, NULL);
    s->header = g_key_file_get_string(kf, "secrets", header_key, NULL);
    s->format = g_key_file_get_string(kf, "secrets", format_key, NULL);
    if (!s->source) {
        g_set_error(error, CARREL_ERROR, CARREL_ERROR_INVALID_ARG, "[secrets] %s needs %s", name,
                    source_key);
        return NULL;
    }
    if (!check_source(name, g_strstrip(s->source), error) ||
        (s->header && !check_header(name, g_strstrip(s->header), error)) ||
        (s->format && !check_format(name, s->format, error)) ||
        !carrel_policy_read_rules(kf, "secrets", dest_key, &s->rules, error))
        return NULL;
    if (!s->format)
        s->format = g_strdup("{value}");
    if (s->header && s->rules->len == 0) {
        g_set_error(error, CARREL_ERROR, CARREL_ERROR_INVALID_ARG,
                    "[secrets] %s has a header but no destinations", name);
        return NULL;
    }
    /* A destination the policy does not let the session reach would never see it. */
    for (guint i = 0; i < s->rules->len; i++) {
        g_autofree char *text = carrel_policy_rule_to_text(g_ptr_array_index(s->rules, i));
        if (carrel_policy_network_mode(policy) == CARREL_NETWORK_NONE ||
            !carrel_policy_rule_reachable(policy, g_ptr_array_index(s->rules, i))) {
            g_set_error(error, CARREL_ERROR, CARREL_ERROR_INVALID_ARG,
                        "[secrets] %s goes to '%s', which [network] does not allow", name, text);
            return NULL;
        }
    }
    return g_steal_pointer(&s);
}

static gint
compare_names(gconstpointer a, gconstpointer b, gpointer unused)
{
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

gboolean
carrel_policy_secrets_read(GKeyFile *kf, CarrelPolicy *policy, GError **error)
{
    g_auto(GStrv) keys = g_key_file_get_keys(kf, "secrets", NULL, NULL);
    g_autoptr(GHashTable) names = g_hash_table_new_full(g_str_hash, g_str_equal, g_free, NULL);

    policy->secrets = g_ptr_array_new_with_free_func((GDestroyNotify)carrel_policy_secret_free);
    for (guint i = 0; keys && keys[i]; i++) {
        const char *dot = strchr(keys[i], '.');
        g_autofree char *name = dot ? g_strndup(keys[i], dot - keys[i]) : g_strdup(keys[i]);
        static const char *const fields[] = {"source", "destinations", "header", "format", NULL};

        if (!dot || !is_secret_name(name) || !g_strv_contains(fields, dot + 1)) {
            g_set_error(error, CARREL_ERROR, CARREL_ERROR_INVALID_ARG,
                        "[secrets] '%s': keys are NAME.source, NAME.destinations, NAME.header, "
                        "NAME.format (NAME: 1-%d of a-z, 0-9, _)",
                        keys[i], SECRET_NAME_MAX);
            return FALSE;
        }
        g_hash_table_add(names, g_steal_pointer(&name));
    }
    if (g_hash_table_size(names) > SECRETS_MAX) {
        g_set_error(error, CARREL_ERROR, CARREL_ERROR_LIMIT, "[secrets] holds more than %d",
                    SECRETS_MAX);
        return FALSE;
    }
    {
        g_autofree gpointer *sorted = g_hash_table_get_keys_as_array(names, NULL);
        guint n = g_hash_table_size(names);

        g_qsort_with_data(sorted, n, sizeof(gpointer), compare_names, NULL);
        for (guint i = 0; i < n; i++) {
            CarrelPolicySecret *s = read_secret(kf, policy, sorted[i], error);
            if (!s)
                return FALSE;
            g_ptr_array_add(policy->secrets, s);
        }
    }
    return TRUE;
}

GPtrArray *
carrel_policy_secrets(const CarrelPolicy *policy)
{
    return policy->secrets;
}

const char *
carrel_policy_secret_name(const CarrelPolicySecret *s)
{
    return s->name;
}

const char *
carrel_policy_secret_source(const CarrelPolicySecret *s)
{
    return s->source;
}

const char *
carrel_policy_secret_header(const CarrelPolicySecret *s)
{
    return s->header;
}

char *
carrel_policy_secret_header_value(const CarrelPolicySecret *s, const char *value)
{
    const char *at = strstr(s->format, "{value}");
    g_autofree char *head = g_strndup(s->format, at - s->format);

    return g_strconcat(head, value, at + strlen("{value}"), NULL);
}

const CarrelPolicySecret *
carrel_policy_secret_for(const CarrelPolicy *policy, const char *host, guint port)
{
    for (guint i = 0; policy->secrets && i < policy->secrets->len; i++) {
        const CarrelPolicySecret *s = g_ptr_array_index(policy->secrets, i);
        if (s->header && carrel_policy_rules_match(s->rules, host, port))
            return s;
    }
    return NULL;
}

const CarrelPolicySecret *
carrel_policy_secret_named(const CarrelPolicy *policy, const char *name)
{
    for (guint i = 0; policy->secrets && i < policy->secrets->len; i++) {
        const CarrelPolicySecret *s = g_ptr_array_index(policy->secrets, i);
        if (g_strcmp0(s->name, name) == 0)
            return s;
    }
    return NULL;
}

void
carrel_policy_secrets_to_json(const CarrelPolicy *policy, JsonBuilder *b)
{
    json_builder_set_member_name(b, "secrets");
    json_builder_begin_array(b);
    /* Where values come from and where they go; never a value. */
    for (guint i = 0; policy->secrets && i < policy->secrets->len; i++) {
        const CarrelPolicySecret *s = g_ptr_array_index(policy->secrets, i);

        json_builder_begin_object(b);
        json_builder_set_member_name(b, "name");
        json_builder_add_string_value(b, s->name);
        json_builder_set_member_name(b, "source");
        json_builder_add_string_value(b, s->source);
        json_builder_set_member_name(b, "header");
        if (s->header)
            json_builder_add_string_value(b, s->header);
        else
            json_builder_add_null_value(b);
        json_builder_set_member_name(b, "destinations");
        json_builder_begin_array(b);
        for (guint j = 0; j < s->rules->len; j++) {
            g_autofree char *text = carrel_policy_rule_to_text(g_ptr_array_index(s->rules, j));
            json_builder_add_string_value(b, text);
        }
        json_builder_end_array(b);
        json_builder_end_object(b);
    }
    json_builder_end_array(b);
}
