/*
 * policy: named policies. carreld loads every *.policy of its policy folder; a session names
 * one at create (or gets "default"), and tokens may be limited to some of them.
 */
#include <string.h>

#include "policy/policy-priv.h"

struct _CarrelPolicySet {
    GHashTable *by_name;    /* name -> CarrelPolicy (owned) */
    CarrelPolicy *fallback; /* the built-in default, used while no file is called default */
};

CarrelPolicySet *
carrel_policy_set_new(void)
{
    CarrelPolicySet *set = g_new0(CarrelPolicySet, 1);

    set->by_name =
        g_hash_table_new_full(g_str_hash, g_str_equal, NULL, (GDestroyNotify)carrel_policy_free);
    set->fallback = carrel_policy_new_default();
    return set;
}

void
carrel_policy_set_free(CarrelPolicySet *set)
{
    if (!set)
        return;
    g_hash_table_unref(set->by_name);
    carrel_policy_free(set->fallback);
    g_free(set);
}

/* The file's text, without a group of carreld's own: who may do what is one matrix, and what
 * a token may use is one set of limits. */
static gboolean
check_no_group(const char *name, const char *data, gsize len, const char *group)
{
    g_autoptr(GKeyFile) kf = g_key_file_new();

    return !g_key_file_load_from_data(kf, data, len, G_KEY_FILE_NONE, NULL) ||
           !g_key_file_has_group(kf, group) || g_str_equal(name, CARREL_POLICY_DEFAULT);
}

gboolean
carrel_policy_set_add(CarrelPolicySet *set, const char *name, const char *data, gsize len,
                      GError **error)
{
    g_autoptr(CarrelPolicy) policy = NULL;
    char *key;

    if (!carrel_util_is_valid_name(name)) {
        g_set_error(error, CARREL_ERROR, CARREL_ERROR_INVALID_ARG,
                    "policy name '%s' is not valid: 1-%d of a-z, 0-9, '.', '-', '_', starting "
                    "with a letter or digit",
                    name, CARREL_LIMIT_NAME_LEN);
        return FALSE;
    }
    if (g_hash_table_contains(set->by_name, name)) {
        g_set_error(error, CARREL_ERROR, CARREL_ERROR_INVALID_ARG, "policy '%s' is loaded twice",
                    name);
        return FALSE;
    }
    if (!check_no_group(name, data, len, "roles")) {
        g_set_error(error, CARREL_ERROR, CARREL_ERROR_INVALID_ARG,
                    "policy '%s': [roles] belongs in default.policy (the role matrix is carreld's, "
                    "not a session's)",
                    name);
        return FALSE;
    }
    if (!check_no_group(name, data, len, "limits")) {
        g_set_error(error, CARREL_ERROR, CARREL_ERROR_INVALID_ARG,
                    "policy '%s': [limits] belongs in default.policy (the limits are per token, "
                    "not per session)",
                    name);
        return FALSE;
    }
    policy = carrel_policy_load_data(data, len, error);
    if (!policy) {
        g_prefix_error(error, "policy '%s': ", name);
        return FALSE;
    }
    g_free(policy->name);
    policy->name = g_strdup(name);
    key = policy->name;
    g_hash_table_insert(set->by_name, key, g_steal_pointer(&policy));
    return TRUE;
}

const CarrelPolicy *
carrel_policy_set_lookup(const CarrelPolicySet *set, const char *name)
{
    const CarrelPolicy *policy = name ? g_hash_table_lookup(set->by_name, name) : NULL;

    if (!policy && g_strcmp0(name, CARREL_POLICY_DEFAULT) == 0)
        return set->fallback;
    return policy;
}

const CarrelPolicy *
carrel_policy_set_get_default(const CarrelPolicySet *set)
{
    return carrel_policy_set_lookup(set, CARREL_POLICY_DEFAULT);
}

static int
by_name(gconstpointer a, gconstpointer b)
{
    const CarrelPolicy *pa = *(const CarrelPolicy *const *)a;
    const CarrelPolicy *pb = *(const CarrelPolicy *const *)b;

    return strcmp(pa->name, pb->name);
}

GPtrArray *
carrel_policy_set_list(const CarrelPolicySet *set)
{
    GPtrArray *all = g_ptr_array_new();
    GHashTableIter iter;
    gpointer value;

    g_hash_table_iter_init(&iter, set->by_name);
    while (g_hash_table_iter_next(&iter, NULL, &value))
        g_ptr_array_add(all, value);
    if (!g_hash_table_contains(set->by_name, CARREL_POLICY_DEFAULT))
        g_ptr_array_add(all, set->fallback);
    g_ptr_array_sort(all, by_name);
    return all;
}

const char *
carrel_policy_get_name(const CarrelPolicy *policy)
{
    return policy->name;
}

static void
add_uint_or_null(JsonBuilder *b, const char *name, guint value)
{
    json_builder_set_member_name(b, name);
    if (value)
        json_builder_add_int_value(b, value);
    else
        json_builder_add_null_value(b);
}

JsonNode *
carrel_policy_to_json(const CarrelPolicy *policy)
{
    g_autoptr(JsonBuilder) b = json_builder_new();

    json_builder_begin_object(b);
    json_builder_set_member_name(b, "name");
    json_builder_add_string_value(b, policy->name);
    json_builder_set_member_name(b, "resources");
    json_builder_begin_object(b);
    add_uint_or_null(b, "max_vcpus", policy->max_vcpus);
    add_uint_or_null(b, "max_memory_mib", policy->max_memory_mib);
    add_uint_or_null(b, "max_disk_gib", policy->max_disk_gib);
    json_builder_end_object(b);
    json_builder_set_member_name(b, "artifacts");
    json_builder_begin_object(b);
    json_builder_set_member_name(b, "paths");
    json_builder_begin_array(b);
    for (guint i = 0; policy->exit_paths && policy->exit_paths[i]; i++)
        json_builder_add_string_value(b, policy->exit_paths[i]);
    json_builder_end_array(b);
    json_builder_end_object(b);
    json_builder_set_member_name(b, "timeouts");
    json_builder_begin_object(b);
    add_uint_or_null(b, "ttl_s", policy->ttl_s);
    add_uint_or_null(b, "idle_timeout_s", policy->idle_timeout_s);
    json_builder_set_member_name(b, "on_expiry");
    json_builder_add_string_value(b, policy->expiry_action ? policy->expiry_action : "destroy");
    json_builder_end_object(b);
    carrel_policy_network_to_json(policy, b);
    carrel_policy_secrets_to_json(policy, b);
    json_builder_set_member_name(b, "console");
    json_builder_begin_object(b);
    json_builder_set_member_name(b, "record_typed_text");
    json_builder_add_boolean_value(b, policy->record_typed_text);
    json_builder_end_object(b);
    carrel_policy_recording_to_json(policy, b);
    json_builder_end_object(b);
    return json_builder_get_root(b);
}
