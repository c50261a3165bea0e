/*
 * Named policies: read from carreld's policy folder at start, picked by each create (the
 * caller's token may be limited to some), and listed for callers.
 */
#include <string.h>

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
