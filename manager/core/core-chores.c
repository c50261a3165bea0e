/*
 * The watcher's chores, off its thread: refilling warm pools (a create each, seconds to
 * minutes) and collecting exit paths (an appliance boot each). Run inline they held up every
 * time limit and every crash detection behind them. One worker runs them in turn; each chore is
 * queued at most once, and one asked for while it runs is queued again. Without a started
 * watcher (core's tests drive carrel_manager_watch by hand) a chore runs at once, inline.
 */
#include "core/core-priv.h"

static void
run_chore(CarrelManager *mgr, CarrelChore chore)
{
    switch (chore) {
    case CARREL_CHORE_REFILL:
        carrel_manager_pool_refill(mgr);
        break;
    case CARREL_CHORE_COLLECT:
        carrel_manager_collect_pending(mgr);
        break;
    case CARREL_CHORE_LAST:
        break;
    }
}

static void
chore_worker(gpointer item, gpointer data)
{
    CarrelManager *mgr = data;
    CarrelChore chore = (CarrelChore)(GPOINTER_TO_UINT(item) - 1);

    /* Cleared first: asked again while it runs, it runs again after. */
    g_mutex_lock(&mgr->lock);
    mgr->chore_queued[chore] = FALSE;
    g_mutex_unlock(&mgr->lock);
    run_chore(mgr, chore);
}

void
carrel_manager_chore(CarrelManager *mgr, CarrelChore chore)
{
    gboolean queue;

    g_mutex_lock(&mgr->lock);
    queue = mgr->chores && !mgr->chore_queued[chore];
    if (queue)
        mgr->chore_queued[chore] = TRUE;
    g_mutex_unlock(&mgr->lock);
    if (!mgr->chores) {
        run_chore(mgr, chore);
        return;
    }
    if (queue)
        g_thread_pool_push(mgr->chores, GUINT_TO_POINTER((guint)chore + 1), NULL);
}

void
carrel_manager_chores_start(CarrelManager *mgr)
{
    /* Exclusive: a thread of its own, never GLib's shared pool. */
    mgr->chores = g_thread_pool_new(chore_worker, mgr, 1, TRUE, NULL);
}

void
carrel_manager_chores_stop(CarrelManager *mgr)
{
    GThreadPool *pool;

    g_mutex_lock(&mgr->lock);
    pool = g_steal_pointer(&mgr->chores);
    g_mutex_unlock(&mgr->lock);
    /* Queued chores are dropped (the next carreld's watcher asks again); a running one ends. */
    if (pool)
        g_thread_pool_free(pool, TRUE, TRUE);
}
