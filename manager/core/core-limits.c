/*
 * core: what one token may use at once ([limits] of the default policy). A runaway agent must
 * not fill the host with sessions nor take every create slot: past its limits it is told to
 * wait (RATE_LIMITED, 429), and the refusal is audited like any other, by the door.
 */
#include "core/core-priv.h"

const CarrelLimits *
carrel_manager_limits_for(CarrelManager *mgr, const CarrelPrincipal *who)
{
    if (!who || who->role == CARREL_ROLE_ADMIN || who->role == CARREL_ROLE_SYSTEM)
        return NULL;
    return carrel_policy_limits(mgr->policy);
}

/* Sessions who owns (not destroyed; warm pool members are nobody's). */
static gboolean
count_owned(CarrelManager *mgr, const CarrelPrincipal *who, guint *ret_count, GError **error)
{
    g_autoptr(GPtrArray) all = carrel_store_session_list(mgr->store, FALSE, error);
    guint n = 0;

    if (!all)
        return FALSE;
    for (guint i = 0; i < all->len; i++) {
        const CarrelSession *s = g_ptr_array_index(all, i);
        if (!s->pool && g_strcmp0(s->owner_id, who->token_id) == 0)
            n++;
    }
    *ret_count = n;
    return TRUE;
}

gboolean
carrel_manager_limits_enter(CarrelManager *mgr, const CarrelPrincipal *who, guint count,
                            GError **error)
{
    const CarrelLimits *limits = carrel_manager_limits_for(mgr, who);
    guint owned = 0;
    guint running;

    if (!limits)
        return TRUE;
    /* Creates running now are not all in the store yet: [limits] creates bounds the overshoot. */
    if (!count_owned(mgr, who, &owned, error))
        return FALSE;
    if (owned + count > limits->sessions) {
        g_set_error(error, CARREL_ERROR, CARREL_ERROR_RATE_LIMITED,
                    "token '%s' owns %u sessions and [limits] sessions allows %u: destroy some "
                    "first",
                    who->label, owned, limits->sessions);
        return FALSE;
    }
    g_mutex_lock(&mgr->lock);
    running = GPOINTER_TO_UINT(g_hash_table_lookup(mgr->creating, who->token_id));
    if (running >= limits->creates) {
        g_mutex_unlock(&mgr->lock);
        g_set_error(error, CARREL_ERROR, CARREL_ERROR_RATE_LIMITED,
                    "token '%s' has %u creates and forks running and [limits] creates allows %u: "
                    "wait for one to end",
                    who->label, running, limits->creates);
        return FALSE;
    }
    g_hash_table_insert(mgr->creating, g_strdup(who->token_id), GUINT_TO_POINTER(running + 1));
    g_mutex_unlock(&mgr->lock);
    return TRUE;
}

void
carrel_manager_limits_leave(CarrelManager *mgr, const CarrelPrincipal *who)
{
    guint running;

    if (!carrel_manager_limits_for(mgr, who))
        return;
    g_mutex_lock(&mgr->lock);
    running = GPOINTER_TO_UINT(g_hash_table_lookup(mgr->creating, who->token_id));
    if (running <= 1)
        g_hash_table_remove(mgr->creating, who->token_id);
    else
        g_hash_table_insert(mgr->creating, g_strdup(who->token_id), GUINT_TO_POINTER(running - 1));
    g_mutex_unlock(&mgr->lock);
}
