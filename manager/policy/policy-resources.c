#include "policy/policy-priv.h"

CarrelPolicy *
carrel_policy_new_default(void)
{
    CarrelPolicy *policy = g_new0(CarrelPolicy, 1);

    policy->name = g_strdup(CARREL_POLICY_DEFAULT);
    policy->max_vcpus = 4;
    policy->max_memory_mib = 8192;
    policy->limits = (CarrelLimits){.sessions = 64, .creates = 8, .rate = 50, .burst = 200};
    carrel_policy_roles_init(policy);
    carrel_policy_recording_init(policy);
    return policy;
}

void
carrel_policy_free(CarrelPolicy *policy)
{
    if (!policy)
        return;
    g_free(policy->name);
    g_strfreev(policy->exit_paths);
    g_free(policy->expiry_action);
    g_clear_pointer(&policy->allow, g_ptr_array_unref);
    g_clear_pointer(&policy->deny, g_ptr_array_unref);
    g_clear_pointer(&policy->ask, g_ptr_array_unref);
    g_clear_pointer(&policy->secrets, g_ptr_array_unref);
    g_free(policy);
}

static gboolean
read_exit_paths(GKeyFile *kf, CarrelPolicy *policy, GError **error)
{
    g_auto(GStrv) paths = NULL;

    if (!g_key_file_has_key(kf, "artifacts", "paths", NULL))
        return TRUE;
    paths = g_key_file_get_string_list(kf, "artifacts", "paths", NULL, NULL);
    if (!paths || g_strv_length(paths) > CARREL_LIMIT_EXTRACT_PATHS ||
        !carrel_extract_check_paths(paths, error)) {
        g_prefix_error(error, "[artifacts] paths: ");
        if (error && !*error)
            g_set_error(error, CARREL_ERROR, CARREL_ERROR_INVALID_ARG,
                        "[artifacts] paths must be a list of at most %d absolute guest paths "
                        "separated by ';'",
                        CARREL_LIMIT_EXTRACT_PATHS);
        return FALSE;
    }
    policy->exit_paths = g_steal_pointer(&paths);
    return TRUE;
}

GStrv
carrel_policy_exit_paths(const CarrelPolicy *policy, char **requested)
{
    g_autoptr(GStrvBuilder) b = g_strv_builder_new();
    g_autoptr(GHashTable) seen = g_hash_table_new(g_str_hash, g_str_equal);
    char **lists[] = {policy->exit_paths, requested};

    for (guint l = 0; l < G_N_ELEMENTS(lists); l++)
        for (guint i = 0; lists[l] && lists[l][i]; i++)
            if (g_hash_table_add(seen, lists[l][i]))
                g_strv_builder_add(b, lists[l][i]);
    return g_strv_builder_end(b);
}

gboolean
carrel_policy_read_limit(GKeyFile *kf, const char *group, const char *key, guint max,
                         guint *ret_value, GError **error)
{
    g_autoptr(GError) local = NULL;
    gint64 value;

    if (!g_key_file_has_key(kf, group, key, NULL))
        return TRUE;
    value = g_key_file_get_int64(kf, group, key, &local);
    if (local || value < 1 || value > max) {
        g_set_error(error, CARREL_ERROR, CARREL_ERROR_INVALID_ARG,
                    "[%s] %s must be an integer between 1 and %u", group, key, max);
        return FALSE;
    }
    *ret_value = (guint)value;
    return TRUE;
}

static gboolean
read_limit(GKeyFile *kf, const char *key, guint max, guint *ret_value, GError **error)
{
    return carrel_policy_read_limit(kf, "resources", key, max, ret_value, error);
}

static gboolean
read_timeouts(GKeyFile *kf, CarrelPolicy *policy, GError **error)
{
    g_autofree char *action = g_key_file_get_string(kf, "timeouts", "on_expiry", NULL);

    if (!carrel_policy_read_limit(kf, "timeouts", "ttl_s", CARREL_LIMIT_TTL_S, &policy->ttl_s,
                                  error) ||
        !carrel_policy_read_limit(kf, "timeouts", "idle_timeout_s", CARREL_LIMIT_TTL_S,
                                  &policy->idle_timeout_s, error))
        return FALSE;
    if (action && !carrel_expiry_action_is_valid(action)) {
        g_set_error(error, CARREL_ERROR, CARREL_ERROR_INVALID_ARG,
                    "[timeouts] on_expiry must be destroy, stop, hibernate or pause");
        return FALSE;
    }
    policy->expiry_action = g_steal_pointer(&action);
    return TRUE;
}

void
carrel_policy_time_limits(const CarrelPolicy *policy, guint ttl_s, guint idle_timeout_s,
                          const char *action, guint *ret_ttl_s, guint *ret_idle_s,
                          const char **ret_action)
{
    *ret_ttl_s = ttl_s ? ttl_s : policy->ttl_s;
    *ret_idle_s = idle_timeout_s ? idle_timeout_s : policy->idle_timeout_s;
    *ret_action = action ? action : policy->expiry_action ? policy->expiry_action : "destroy";
}

static gboolean
read_token_limits(GKeyFile *kf, CarrelLimits *limits, GError **error)
{
    return carrel_policy_read_limit(kf, "limits", "sessions", CARREL_LIMIT_TOKEN_SESSIONS,
                                    &limits->sessions, error) &&
           carrel_policy_read_limit(kf, "limits", "creates", CARREL_LIMIT_TOKEN_SESSIONS,
                                    &limits->creates, error) &&
           carrel_policy_read_limit(kf, "limits", "rate", CARREL_LIMIT_TOKEN_RATE, &limits->rate,
                                    error) &&
           carrel_policy_read_limit(kf, "limits", "burst", CARREL_LIMIT_TOKEN_RATE, &limits->burst,
                                    error);
}

static gboolean
read_console(GKeyFile *kf, CarrelPolicy *policy, GError **error)
{
    g_autoptr(GError) local = NULL;
    gboolean value;

    if (!g_key_file_has_key(kf, "console", "record_typed_text", NULL))
        return TRUE;
    value = g_key_file_get_boolean(kf, "console", "record_typed_text", &local);
    if (local) {
        g_set_error(error, CARREL_ERROR, CARREL_ERROR_INVALID_ARG,
                    "[console] record_typed_text must be true or false");
        return FALSE;
    }
    policy->record_typed_text = value;
    return TRUE;
}

gboolean
carrel_policy_record_typed_text(const CarrelPolicy *policy)
{
    return policy->record_typed_text;
}

const CarrelLimits *
carrel_policy_limits(const CarrelPolicy *policy)
{
    return &policy->limits;
}

CarrelPolicy *
carrel_policy_load_data(const char *data, gsize len, GError **error)
{
    g_autoptr(GKeyFile) kf = g_key_file_new();
    g_autoptr(CarrelPolicy) policy = carrel_policy_new_default();
    g_autoptr(GError) local = NULL;

    if (!g_key_file_load_from_data(kf, data, len, G_KEY_FILE_NONE, &local)) {
        g_set_error(error, CARREL_ERROR, CARREL_ERROR_INVALID_ARG, "malformed policy: %s",
                    local->message);
        return NULL;
    }
    if (!read_limit(kf, "max_vcpus", CARREL_LIMIT_VCPUS, &policy->max_vcpus, error) ||
        !read_limit(kf, "max_memory_mib", CARREL_LIMIT_MEMORY_MIB, &policy->max_memory_mib,
                    error) ||
        !read_limit(kf, "max_disk_gib", CARREL_LIMIT_DISK_GIB, &policy->max_disk_gib, error) ||
        !read_exit_paths(kf, policy, error) || !read_timeouts(kf, policy, error) ||
        !read_token_limits(kf, &policy->limits, error) || !read_console(kf, policy, error) ||
        !carrel_policy_network_read(kf, policy, error) ||
        !carrel_policy_secrets_read(kf, policy, error) ||
        !carrel_policy_recording_read(kf, policy, error) ||
        !carrel_policy_roles_read(kf, policy, error))
        return NULL;
    return g_steal_pointer(&policy);
}

gboolean
carrel_policy_check_resources(const CarrelPolicy *policy, guint vcpus, guint memory_mib,
                              GError **error)
{
    if (vcpus > policy->max_vcpus) {
        g_set_error(error, CARREL_ERROR, CARREL_ERROR_POLICY_DENIED,
                    "%u vCPUs requested, the policy allows at most %u", vcpus, policy->max_vcpus);
        return FALSE;
    }
    if (memory_mib > policy->max_memory_mib) {
        g_set_error(error, CARREL_ERROR, CARREL_ERROR_POLICY_DENIED,
                    "%u MiB of memory requested, the policy allows at most %u", memory_mib,
                    policy->max_memory_mib);
        return FALSE;
    }
    return TRUE;
}

void
carrel_policy_clamp_resources(const CarrelPolicy *policy, guint *vcpus, guint *memory_mib)
{
    *vcpus = MIN(*vcpus, policy->max_vcpus);
    *memory_mib = MIN(*memory_mib, policy->max_memory_mib);
}

guint64
carrel_policy_max_disk_bytes(const CarrelPolicy *policy)
{
    return (guint64)policy->max_disk_gib * 1024 * 1024 * 1024;
}

gboolean
carrel_policy_check_disk(const CarrelPolicy *policy, guint64 virtual_bytes, GError **error)
{
    guint64 max = carrel_policy_max_disk_bytes(policy);

    if (max && virtual_bytes > max) {
        g_set_error(error, CARREL_ERROR, CARREL_ERROR_POLICY_DENIED,
                    "the template's disk is %" G_GUINT64_FORMAT
                    " bytes (virtual size), the policy allows at most %u GiB ([resources] "
                    "max_disk_gib)",
                    virtual_bytes, policy->max_disk_gib);
        return FALSE;
    }
    return TRUE;
}
