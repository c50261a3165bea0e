/*
 * policy: [network], what a session may reach. Destinations are names (with "*." for any
 * subdomain, ":PORT" for one port; without a port, 80 and 443); deny wins over allow, allow over
 * ask. Addresses are never destinations: a raw IP is refused, and a policy naming a private or
 * special one is refused at load.
 */
#include <string.h>

#include "net/net.h"
#include "policy/policy-priv.h"

#define ASK_TIMEOUT_DEFAULT_S 120
#define ASK_TIMEOUT_MAX_S 3600
#define NAME_MAX_LEN 253
#define LABEL_MAX_LEN 63

struct _CarrelEgressRule {
    char *name;       /* lower case, no trailing dot, without "*." */
    gboolean any_sub; /* "*.name": any name below it (not name itself) */
    guint port;       /* 0: 80 and 443 */
};

void
carrel_egress_rule_free(CarrelEgressRule *rule)
{
    if (!rule)
        return;
    g_free(rule->name);
    g_free(rule);
}

static const char *const mode_names[CARREL_NETWORK_LAST] = {
    [CARREL_NETWORK_NONE] = "none",
    [CARREL_NETWORK_ALLOWLIST] = "allowlist",
    [CARREL_NETWORK_OPEN] = "open",
};

const char *
carrel_network_mode_to_string(CarrelNetworkMode mode)
{
    return carrel_util_enum_to_string(mode_names, CARREL_NETWORK_LAST, (int)mode);
}

static gboolean
is_valid_label(const char *label, gsize len)
{
    if (len == 0 || len > LABEL_MAX_LEN || label[0] == '-' || label[len - 1] == '-')
        return FALSE;
    for (gsize i = 0; i < len; i++)
        if (!g_ascii_islower(label[i]) && !g_ascii_isdigit(label[i]) && label[i] != '-' &&
            label[i] != '_')
            return FALSE;
    return TRUE;
}

/* A DNS name in lower case: labels of [a-z0-9_-], at most 253 bytes. */
static gboolean
is_valid_name(const char *name)
{
    gsize len = strlen(name);
    const char *label = name;

    if (len == 0 || len > NAME_MAX_LEN)
        return FALSE;
    for (const char *dot; (dot = strchr(label, '.')); label = dot + 1)
        if (!is_valid_label(label, (gsize)(dot - label)))
            return FALSE;
    return is_valid_label(label, strlen(label));
}

/* "host" and its ":port" (0 when none); FALSE for a bad port. IPv6 literals have no port here:
 * they are refused as addresses anyway. */
static gboolean
split_port(char *entry, guint *ret_port)
{
    char *colon = strrchr(entry, ':');
    guint64 port = 0;

    *ret_port = 0;
    if (!colon || strchr(entry, ':') != colon)
        return TRUE;
    if (!g_ascii_string_to_unsigned(colon + 1, 10, 1, 65535, &port, NULL))
        return FALSE;
    *colon = '\0';
    *ret_port = (guint)port;
    return TRUE;
}

static void
refuse_address(const char *group, const char *key, const char *text, const char *address,
               GError **error)
{
    g_set_error(error, CARREL_ERROR, CARREL_ERROR_INVALID_ARG, "[%s] %s '%s': %s", group, key, text,
                carrel_net_text_is_internal(address)
                    ? "a private or special address is never reachable, whatever the policy"
                    : "destinations are names, not addresses (a raw IP is always refused)");
}

static CarrelEgressRule *
parse_rule(const char *group, const char *key, const char *text, GError **error)
{
    g_autofree char *entry = g_ascii_strdown(text, -1);
    g_autoptr(CarrelEgressRule) rule = g_new0(CarrelEgressRule, 1);
    char *name = entry;
    gsize len;

    /* An address, a range, or an address with a port: never a destination. */
    if (g_hostname_is_ip_address(entry) || strchr(entry, '/')) {
        refuse_address(group, key, text, entry, error);
        return NULL;
    }
    if (!split_port(entry, &rule->port)) {
        g_set_error(error, CARREL_ERROR, CARREL_ERROR_INVALID_ARG,
                    "[%s] %s '%s': the port must be a number from 1 to 65535", group, key, text);
        return NULL;
    }
    if (g_hostname_is_ip_address(entry)) {
        refuse_address(group, key, text, entry, error);
        return NULL;
    }
    if (g_str_has_prefix(name, "*.")) {
        rule->any_sub = TRUE;
        name += 2;
    }
    len = strlen(name);
    if (len && name[len - 1] == '.')
        name[len - 1] = '\0';
    if (!is_valid_name(name)) {
        g_set_error(error, CARREL_ERROR, CARREL_ERROR_INVALID_ARG,
                    "[%s] %s '%s': expected NAME, *.NAME or NAME:PORT (a DNS name: letters, "
                    "digits, '-' and '_' between dots)",
                    group, key, text);
        return NULL;
    }
    rule->name = g_strdup(name);
    return g_steal_pointer(&rule);
}

/* The key's comma- (or semicolon-) separated entries, each a rule. */
gboolean
carrel_policy_read_rules(GKeyFile *kf, const char *group, const char *key, GPtrArray **ret_rules,
                         GError **error)
{
    g_autofree char *value = g_key_file_get_value(kf, group, key, NULL);
    g_auto(GStrv) items = value ? g_regex_split_simple("[,;]", value, 0, 0) : NULL;
    g_autoptr(GPtrArray) rules =
        g_ptr_array_new_with_free_func((GDestroyNotify)carrel_egress_rule_free);

    for (guint i = 0; items && items[i]; i++) {
        CarrelEgressRule *rule;
        if (!*g_strstrip(items[i]))
            continue;
        if (!(rule = parse_rule(group, key, items[i], error)))
            return FALSE;
        g_ptr_array_add(rules, rule);
    }
    *ret_rules = g_steal_pointer(&rules);
    return TRUE;
}

static gboolean
read_mode(GKeyFile *kf, CarrelPolicy *policy, GError **error)
{
    g_autofree char *mode = g_key_file_get_string(kf, "network", "mode", NULL);
    int found;

    if (!mode)
        return TRUE;
    found = carrel_util_enum_from_string(mode_names, CARREL_NETWORK_LAST, g_strstrip(mode));
    if (found == CARREL_NETWORK_LAST) {
        g_set_error(error, CARREL_ERROR, CARREL_ERROR_INVALID_ARG,
                    "[network] mode must be none, allowlist or open, not '%s'", mode);
        return FALSE;
    }
    policy->network_mode = (CarrelNetworkMode)found;
    return TRUE;
}

gboolean
carrel_policy_network_read(GKeyFile *kf, CarrelPolicy *policy, GError **error)
{
    static const char *const keys[] = {"mode", "allow", "deny", "ask", "ask_timeout_s", NULL};
    g_auto(GStrv) present = g_key_file_get_keys(kf, "network", NULL, NULL);

    policy->ask_timeout_s = ASK_TIMEOUT_DEFAULT_S;
    for (guint i = 0; present && present[i]; i++) {
        if (!g_strv_contains(keys, present[i])) {
            g_set_error(error, CARREL_ERROR, CARREL_ERROR_INVALID_ARG,
                        "[network] has no key '%s' (mode, allow, deny, ask, ask_timeout_s)",
                        present[i]);
            return FALSE;
        }
    }
    if (!read_mode(kf, policy, error) ||
        !carrel_policy_read_rules(kf, "network", "allow", &policy->allow, error) ||
        !carrel_policy_read_rules(kf, "network", "deny", &policy->deny, error) ||
        !carrel_policy_read_rules(kf, "network", "ask", &policy->ask, error) ||
        !carrel_policy_read_limit(kf, "network", "ask_timeout_s", ASK_TIMEOUT_MAX_S,
                                  &policy->ask_timeout_s, error))
        return FALSE;
    /* Rules that could never act are a mistake worth saying at load. */
    if (policy->network_mode == CARREL_NETWORK_NONE && (policy->allow->len || policy->ask->len)) {
        g_set_error(error, CARREL_ERROR, CARREL_ERROR_INVALID_ARG,
                    "[network] allow and ask need mode=allowlist or mode=open (mode is none: no "
                    "network at all)");
        return FALSE;
    }
    return TRUE;
}

CarrelNetworkMode
carrel_policy_network_mode(const CarrelPolicy *policy)
{
    return policy->network_mode;
}

guint
carrel_policy_ask_timeout_s(const CarrelPolicy *policy)
{
    return policy->ask_timeout_s ? policy->ask_timeout_s : ASK_TIMEOUT_DEFAULT_S;
}

static gboolean
rule_matches(const CarrelEgressRule *rule, const char *host, guint port)
{
    gboolean name_ok;

    if (rule->any_sub) {
        gsize hl = strlen(host), rl = strlen(rule->name);
        name_ok =
            hl > rl + 1 && host[hl - rl - 1] == '.' && strcmp(host + hl - rl, rule->name) == 0;
    } else {
        name_ok = strcmp(host, rule->name) == 0;
    }
    if (!name_ok)
        return FALSE;
    /* port 0 asks about the name alone (DNS). */
    return port == 0 || (rule->port ? port == rule->port : port == 80 || port == 443);
}

static gboolean
any_matches(const GPtrArray *rules, const char *host, guint port)
{
    for (guint i = 0; rules && i < rules->len; i++)
        if (rule_matches(g_ptr_array_index(rules, i), host, port))
            return TRUE;
    return FALSE;
}

gboolean
carrel_policy_rules_match(const GPtrArray *rules, const char *host, guint port)
{
    return any_matches(rules, host, port);
}

char *
carrel_policy_rule_to_text(const CarrelEgressRule *rule)
{
    g_autofree char *port = rule->port ? g_strdup_printf(":%u", rule->port) : g_strdup("");

    return g_strconcat(rule->any_sub ? "*." : "", rule->name, port, NULL);
}

gboolean
carrel_policy_rule_reachable(const CarrelPolicy *policy, const CarrelEgressRule *rule)
{
    /* A name the rule stands for (one below it for "*."), on its port or 443. */
    g_autofree char *host =
        rule->any_sub ? g_strconcat("x.", rule->name, NULL) : g_strdup(rule->name);

    return carrel_policy_egress(policy, host, rule->port ? rule->port : 443) != CARREL_EGRESS_DENY;
}

CarrelEgressVerdict
carrel_policy_egress(const CarrelPolicy *policy, const char *host, guint port)
{
    g_autofree char *name = host ? g_ascii_strdown(host, -1) : NULL;
    gsize len = name ? strlen(name) : 0;

    if (len && name[len - 1] == '.')
        name[len - 1] = '\0';
    /* Raw addresses and names that are not names never pass. */
    if (!name || g_hostname_is_ip_address(name) || !is_valid_name(name) ||
        policy->network_mode == CARREL_NETWORK_NONE || any_matches(policy->deny, name, port))
        return CARREL_EGRESS_DENY;
    if (any_matches(policy->allow, name, port))
        return CARREL_EGRESS_ALLOW;
    if (any_matches(policy->ask, name, port))
        return CARREL_EGRESS_ASK;
    return policy->network_mode == CARREL_NETWORK_OPEN ? CARREL_EGRESS_ALLOW : CARREL_EGRESS_DENY;
}

static void
add_rules(JsonBuilder *b, const char *member, const GPtrArray *rules)
{
    json_builder_set_member_name(b, member);
    json_builder_begin_array(b);
    for (guint i = 0; rules && i < rules->len; i++) {
        g_autofree char *text = carrel_policy_rule_to_text(g_ptr_array_index(rules, i));
        json_builder_add_string_value(b, text);
    }
    json_builder_end_array(b);
}

void
carrel_policy_network_to_json(const CarrelPolicy *policy, JsonBuilder *b)
{
    json_builder_set_member_name(b, "network");
    json_builder_begin_object(b);
    json_builder_set_member_name(b, "mode");
    json_builder_add_string_value(b, carrel_network_mode_to_string(policy->network_mode));
    add_rules(b, "allow", policy->allow);
    add_rules(b, "deny", policy->deny);
    add_rules(b, "ask", policy->ask);
    json_builder_set_member_name(b, "ask_timeout_s");
    json_builder_add_int_value(b, carrel_policy_ask_timeout_s(policy));
    json_builder_end_object(b);
}

static void
add_names(GStrvBuilder *b, GHashTable *seen, const GPtrArray *rules, GHashTable *skip)
{
    for (guint i = 0; rules && i < rules->len; i++) {
        const CarrelEgressRule *rule = g_ptr_array_index(rules, i);
        if ((!skip || !g_hash_table_contains(skip, rule->name)) &&
            g_hash_table_add(seen, rule->name))
            g_strv_builder_add(b, rule->name);
    }
}

void
carrel_policy_dns_names(const CarrelPolicy *policy, GStrv *ret_resolve, GStrv *ret_refuse)
{
    g_autoptr(GStrvBuilder) resolve = g_strv_builder_new();
    g_autoptr(GStrvBuilder) refuse = g_strv_builder_new();
    g_autoptr(GHashTable) resolved = g_hash_table_new(g_str_hash, g_str_equal);
    g_autoptr(GHashTable) refused = g_hash_table_new(g_str_hash, g_str_equal);

    /* A name denied on every port never resolves: deny wins over allow. */
    for (guint i = 0; policy->deny && i < policy->deny->len; i++) {
        const CarrelEgressRule *rule = g_ptr_array_index(policy->deny, i);
        if (!rule->port && g_hash_table_add(refused, rule->name))
            g_strv_builder_add(refuse, rule->name);
    }
    add_names(resolve, resolved, policy->allow, refused);
    add_names(resolve, resolved, policy->ask, refused);
    *ret_resolve = g_strv_builder_end(resolve);
    *ret_refuse = g_strv_builder_end(refuse);
}

void
carrel_policy_tls_ports(const CarrelPolicy *policy, GArray *ports)
{
    const GPtrArray *lists[] = {policy->allow, policy->ask};

    for (guint l = 0; l < G_N_ELEMENTS(lists); l++) {
        for (guint i = 0; lists[l] && i < lists[l]->len; i++) {
            const CarrelEgressRule *rule = g_ptr_array_index(lists[l], i);
            gboolean known = rule->port == 0 || rule->port == 80;
            for (guint j = 0; !known && j < ports->len; j++)
                known = g_array_index(ports, guint, j) == rule->port;
            if (!known)
                g_array_append_val(ports, rule->port);
        }
    }
}
