/*
 * Named policies: read from carreld's policy folder at start, picked by each create (the
 * caller's token may be limited to some), and listed for callers.
 */
#include <string.h>
#include <sys/stat.h>

#include "core/core-priv.h"

#define POLICY_SUFFIX ".policy"

static gboolean
add_file(CarrelPolicySet *set, const char *name, const char *path, GError **error)
{
    g_autofree char *text = NULL;
    gsize len = 0;

    if (!g_file_get_contents(path, &text, &len, error) ||
        !carrel_policy_set_add(set, name, text, len, error)) {
        g_prefix_error(error, "policy file '%s': ", path);
        return FALSE;
    }
    return TRUE;
}

static int
compare_names(gconstpointer a, gconstpointer b)
{
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

/* The NAME.policy files of dir, sorted (the order errors are found in does not vary). */
static GPtrArray *
policy_files(const char *dir, GError **error)
{
    g_autoptr(GDir) d = g_dir_open(dir, 0, error);
    g_autoptr(GPtrArray) names = g_ptr_array_new_with_free_func(g_free);
    const char *entry;

    if (!d) {
        g_prefix_error(error, "policy folder: ");
        return NULL;
    }
    while ((entry = g_dir_read_name(d)))
        if (g_str_has_suffix(entry, POLICY_SUFFIX) && strlen(entry) > strlen(POLICY_SUFFIX))
            g_ptr_array_add(names, g_strndup(entry, strlen(entry) - strlen(POLICY_SUFFIX)));
    g_ptr_array_sort(names, compare_names);
    return g_steal_pointer(&names);
}

CarrelPolicySet *
carrel_manager_load_policies(const char *dir, const char *default_path, GError **error)
{
    g_autoptr(CarrelPolicySet) set = carrel_policy_set_new();
    g_autoptr(GPtrArray) names = NULL;

    if (default_path && !add_file(set, CARREL_POLICY_DEFAULT, default_path, error))
        return NULL;
    if (dir && !(names = policy_files(dir, error)))
        return NULL;
    for (guint i = 0; names && i < names->len; i++) {
        const char *name = g_ptr_array_index(names, i);
        g_autofree char *file = g_strconcat(name, POLICY_SUFFIX, NULL);
        g_autofree char *path = g_build_filename(dir, file, NULL);

        /* --policy FILE stands in for the folder's default.policy. */
        if (default_path && g_str_equal(name, CARREL_POLICY_DEFAULT))
            continue;
        if (!add_file(set, name, path, error))
            return NULL;
    }
    return g_steal_pointer(&set);
}

/* What a request that names no policy gets: "default", or the token's first when it may not
 * use "default". */
static const char *
implied_policy(const CarrelPrincipal *who)
{
    if (who->policies && who->policies[0] &&
        !carrel_principal_may_use_policy(who, CARREL_POLICY_DEFAULT))
        return who->policies[0];
    return CARREL_POLICY_DEFAULT;
}

const CarrelPolicy *
carrel_manager_policy_for(CarrelManager *mgr, const CarrelPrincipal *who, const char *name,
                          GError **error)
{
    const CarrelPolicy *policy;
    g_autofree char *allowed = NULL;

    if (!name)
        name = implied_policy(who);
    policy = carrel_policy_set_lookup(mgr->policies, name);
    if (!policy) {
        g_set_error(error, CARREL_ERROR, CARREL_ERROR_NOT_FOUND,
                    "no policy named '%s' (carrel policy ls)", name);
        return NULL;
    }
    if (!carrel_principal_may_use_policy(who, name)) {
        allowed = g_strjoinv(", ", who->policies);
        g_set_error(error, CARREL_ERROR, CARREL_ERROR_POLICY_DENIED,
                    "token '%s' may create sessions only under the policies %s, not '%s'",
                    who->label, allowed, name);
        return NULL;
    }
    return policy;
}

const CarrelPolicy *
carrel_manager_session_policy(CarrelManager *mgr, const CarrelSession *session, GError **error)
{
    const char *name = session->policy ? session->policy : CARREL_POLICY_DEFAULT;
    const CarrelPolicy *policy = carrel_policy_set_lookup(mgr->policies, name);

    if (!policy)
        g_set_error(error, CARREL_ERROR, CARREL_ERROR_WRONG_STATE,
                    "session '%s' runs under policy '%s', which carreld no longer has (its file "
                    "was removed from the policy folder)",
                    session->name, name);
    return policy;
}

gboolean
carrel_manager_check_policy_names(CarrelManager *mgr, char **names, GError **error)
{
    if (names && !names[0]) {
        g_set_error(error, CARREL_ERROR, CARREL_ERROR_INVALID_ARG,
                    "a token limited to policies needs at least one");
        return FALSE;
    }
    for (guint i = 0; names && names[i]; i++) {
        if (!carrel_policy_set_lookup(mgr->policies, names[i])) {
            g_set_error(error, CARREL_ERROR, CARREL_ERROR_NOT_FOUND,
                        "no policy named '%s' (carrel policy ls)", names[i]);
            return FALSE;
        }
    }
    return TRUE;
}

char *
carrel_manager_policy_names(CarrelManager *mgr)
{
    g_autoptr(GPtrArray) all = carrel_policy_set_list(mgr->policies);
    g_autoptr(GString) names = g_string_new(NULL);

    for (guint i = 0; i < all->len; i++)
        g_string_append_printf(names, "%s%s", i ? ", " : "",
                               carrel_policy_get_name(g_ptr_array_index(all, i)));
    return g_string_free(g_steal_pointer(&names), FALSE);
}

JsonNode *
carrel_manager_policy_list(CarrelManager *mgr, const CarrelPrincipal *who, GError **error)
{
    g_auto(CarrelDoor) door = {0};
    g_autoptr(GPtrArray) all = NULL;
    g_autoptr(JsonBuilder) b = json_builder_new();

    if (!carrel_door_enter(&door, mgr, who, CARREL_OP_POLICY_READ, NULL, NULL, error))
        return NULL;
    all = carrel_policy_set_list(mgr->policies);
    json_builder_begin_object(b);
    json_builder_set_member_name(b, "policies");
    json_builder_begin_array(b);
    /* A token limited to some policies sees those alone: the others are not its business. */
    for (guint i = 0; i < all->len; i++) {
        const CarrelPolicy *policy = g_ptr_array_index(all, i);
        if (carrel_principal_may_use_policy(who, carrel_policy_get_name(policy)))
            json_builder_add_value(b, carrel_policy_to_json(policy));
    }
    json_builder_end_array(b);
    json_builder_end_object(b);
    return json_builder_get_root(b);
}

JsonNode *
carrel_manager_policy_show(CarrelManager *mgr, const CarrelPrincipal *who, const char *name,
                           GError **error)
{
    g_auto(CarrelDoor) door = {0};
    const CarrelPolicy *policy;

    if (!carrel_door_enter(&door, mgr, who, CARREL_OP_POLICY_READ, NULL, NULL, error))
        return NULL;
    policy = carrel_policy_set_lookup(mgr->policies, name);
    if (!policy || !carrel_principal_may_use_policy(who, name)) {
        g_set_error(error, CARREL_ERROR, CARREL_ERROR_NOT_FOUND,
                    "no policy named '%s' (carrel policy ls)", name ? name : "");
        return NULL;
    }
    return carrel_policy_to_json(policy);
}

#define SECRET_MAX_BYTES 4096

/* A secret's value: printable, no quote or backslash (it travels in squid's helper protocol),
 * and never quoted in an error. */
static gboolean
check_value(const char *policy, const char *name, const char *value, GError **error)
{
    if (!value || !*value || strlen(value) > SECRET_MAX_BYTES ||
        !carrel_util_is_clean_text(value) || strpbrk(value, "\"\\%")) {
        g_set_error(error, CARREL_ERROR, CARREL_ERROR_INVALID_ARG,
                    "secret '%s' of policy '%s': the value must be 1-%d printable characters "
                    "without \", \\ or %%",
                    name, policy, SECRET_MAX_BYTES);
        return FALSE;
    }
    return TRUE;
}

/* A root-only regular file (not a link): anyone else able to read it defeats the point. */
static char *
read_secret_file(const char *policy, const char *name, const char *path, GError **error)
{
    struct stat st;
    char *text = NULL;

    if (lstat(path, &st) != 0 || !S_ISREG(st.st_mode)) {
        g_set_error(error, CARREL_ERROR, CARREL_ERROR_INVALID_ARG,
                    "secret '%s' of policy '%s': '%s' is not a regular file", name, policy, path);
        return NULL;
    }
    if (st.st_uid != 0 || (st.st_mode & 077) != 0) {
        g_set_error(error, CARREL_ERROR, CARREL_ERROR_INVALID_ARG,
                    "secret '%s' of policy '%s': '%s' is readable by others than root "
                    "(chown root and chmod 600 it)",
                    name, policy, path);
        return NULL;
    }
    if (!g_file_get_contents(path, &text, NULL, error)) {
        g_prefix_error(error, "secret '%s' of policy '%s': ", name, policy);
        return NULL;
    }
    /* One trailing newline is the editor's, not the secret's. */
    if (*text && text[strlen(text) - 1] == '\n')
        text[strlen(text) - 1] = '\0';
    return text;
}

static char *
secret_value(const char *policy, const CarrelPolicySecret *s, GError **error)
{
    const char *source = carrel_policy_secret_source(s);
    const char *name = carrel_policy_secret_name(s);
    g_autofree char *value = NULL;

    if (g_str_has_prefix(source, "env:")) {
        value = g_strdup(g_getenv(source + 4));
        if (!value) {
            g_set_error(error, CARREL_ERROR, CARREL_ERROR_INVALID_ARG,
                        "secret '%s' of policy '%s': carreld's environment has no %s", name, policy,
                        source + 4);
            return NULL;
        }
    } else if (!(value = read_secret_file(policy, name, source + 5, error))) {
        return NULL;
    }
    return check_value(policy, name, value, error) ? g_steal_pointer(&value) : NULL;
}

static void
free_secret(gpointer value)
{
    /* Gone from memory as well as from use. */
    explicit_bzero(value, strlen(value));
    g_free(value);
}

GHashTable *
carrel_manager_load_secret_values(CarrelPolicySet *set, GError **error)
{
    g_autoptr(GPtrArray) all = carrel_policy_set_list(set);
    g_autoptr(GHashTable) values =
        g_hash_table_new_full(g_str_hash, g_str_equal, g_free, free_secret);

    for (guint i = 0; i < all->len; i++) {
        const CarrelPolicy *p = g_ptr_array_index(all, i);
        GPtrArray *secrets = carrel_policy_secrets(p);

        for (guint j = 0; secrets && j < secrets->len; j++) {
            const CarrelPolicySecret *s = g_ptr_array_index(secrets, j);
            char *value = secret_value(carrel_policy_get_name(p), s, error);
            if (!value)
                return NULL;
            g_hash_table_replace(
                values,
                g_strconcat(carrel_policy_get_name(p), "/", carrel_policy_secret_name(s), NULL),
                value);
        }
    }
    return g_steal_pointer(&values);
}

const char *
carrel_manager_secret_value(CarrelManager *mgr, const CarrelPolicy *policy,
                            const CarrelPolicySecret *s)
{
    g_autofree char *key =
        g_strconcat(carrel_policy_get_name(policy), "/", carrel_policy_secret_name(s), NULL);

    return g_hash_table_lookup(mgr->secret_values, key);
}

GStrv
carrel_manager_secret_headers(CarrelManager *mgr)
{
    g_autoptr(GPtrArray) all = carrel_policy_set_list(mgr->policies);
    g_autoptr(GStrvBuilder) b = g_strv_builder_new();
    g_autoptr(GHashTable) seen = g_hash_table_new_full(g_str_hash, g_str_equal, g_free, NULL);

    for (guint i = 0; i < all->len; i++) {
        GPtrArray *secrets = carrel_policy_secrets(g_ptr_array_index(all, i));
        for (guint j = 0; secrets && j < secrets->len; j++) {
            const char *h = carrel_policy_secret_header(g_ptr_array_index(secrets, j));
            if (h && g_hash_table_add(seen, g_ascii_strdown(h, -1)))
                g_strv_builder_add(b, h);
        }
    }
    return g_strv_builder_end(b);
}
