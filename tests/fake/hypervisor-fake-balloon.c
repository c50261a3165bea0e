/*
 * The fake's calls that take a guest's time: its balloon (a target met at once, or after a hold
 * that stands for a guest moving its balloon) and its restores, each with a count of the calls
 * under way together (core-warm.c runs one reclaim at a time; core-fork.c restores side by side).
 */
#define CARREL_HYPERVISOR_BACKEND_H_ALLOW
#include "hypervisor/hypervisor-backend.h"
#include "tests/fake/hypervisor-fake-priv.h"

void
fake_hold(FakeBackend *be, FakeHold *h)
{
    const FakeHold *other = h == &be->balloon ? &be->restore : &be->balloon;

    if (other->in_flight > 0)
        be->holds_beside++;
    h->in_flight++;
    h->most = MAX(h->most, h->in_flight);
    if (h->gather > 0) {
        /* Side by side, the calls meet and all end at once; one after another, each waits out
         * ms alone. Either way the count does not hang on how fast threads start under load. */
        gint64 end = g_get_monotonic_time() + (gint64)h->ms * 1000;

        g_cond_broadcast(&be->held);
        while (h->most < h->gather && g_cond_wait_until(&be->held, &be->lock, end))
            ;
    } else {
        g_mutex_unlock(&be->lock);
        g_usleep((gulong)h->ms * 1000);
        g_mutex_lock(&be->lock);
    }
    h->in_flight--;
    h->done++;
}

gboolean
fake_set_balloon(CarrelHypervisor *hv, const char *name, guint target_mib, guint timeout_s,
                 guint *ret_actual_mib, GError **error)
{
    FakeBackend *be = hv->backend_data;
    g_autoptr(GMutexLocker) locker G_GNUC_UNUSED = g_mutex_locker_new(&be->lock);
    FakeDomain *dom = NULL;

    (void)timeout_s;
    if (fake_take_failure(be, "set_balloon", error) || !(dom = fake_find_domain(be, name, error)))
        return FALSE;
    if (dom->state != CARREL_DOMAIN_RUNNING) {
        g_set_error(error, CARREL_ERROR, CARREL_ERROR_WRONG_STATE, "domain is not running");
        return FALSE;
    }
    fake_hold(be, &be->balloon);
    *ret_actual_mib = target_mib;
    return TRUE;
}

guint
carrel_hypervisor_fake_get_balloon_calls(CarrelHypervisor *hv)
{
    FakeBackend *be = hv->backend_data;
    g_autoptr(GMutexLocker) locker G_GNUC_UNUSED = g_mutex_locker_new(&be->lock);

    return be->balloon.done;
}

void
carrel_hypervisor_fake_set_balloon_hold(CarrelHypervisor *hv, guint ms)
{
    FakeBackend *be = hv->backend_data;
    g_autoptr(GMutexLocker) locker G_GNUC_UNUSED = g_mutex_locker_new(&be->lock);

    be->balloon.ms = ms;
}

guint
carrel_hypervisor_fake_get_balloon_most(CarrelHypervisor *hv)
{
    FakeBackend *be = hv->backend_data;
    g_autoptr(GMutexLocker) locker G_GNUC_UNUSED = g_mutex_locker_new(&be->lock);

    return be->balloon.most;
}

void
carrel_hypervisor_fake_set_restore_gather(CarrelHypervisor *hv, guint count, guint ms)
{
    FakeBackend *be = hv->backend_data;
    g_autoptr(GMutexLocker) locker G_GNUC_UNUSED = g_mutex_locker_new(&be->lock);

    be->restore.gather = count;
    be->restore.ms = ms;
}

void
carrel_hypervisor_fake_set_restore_hold(CarrelHypervisor *hv, guint ms)
{
    carrel_hypervisor_fake_set_restore_gather(hv, 0, ms);
}

guint
carrel_hypervisor_fake_get_restore_most(CarrelHypervisor *hv)
{
    FakeBackend *be = hv->backend_data;
    g_autoptr(GMutexLocker) locker G_GNUC_UNUSED = g_mutex_locker_new(&be->lock);

    return be->restore.most;
}

guint
carrel_hypervisor_fake_get_holds_beside(CarrelHypervisor *hv)
{
    FakeBackend *be = hv->backend_data;
    g_autoptr(GMutexLocker) locker G_GNUC_UNUSED = g_mutex_locker_new(&be->lock);

    return be->holds_beside;
}

guint
carrel_hypervisor_fake_get_agent_beside(CarrelHypervisor *hv)
{
    FakeBackend *be = hv->backend_data;
    g_autoptr(GMutexLocker) locker G_GNUC_UNUSED = g_mutex_locker_new(&be->lock);

    return be->agent_beside;
}
