/*
 * The fake's CPU time: a guest that works for a while after it is first looked at (as a booted
 * guest still loading drivers does), then idles, for core's wait for a quiet guest. And the
 * host facts around its QEMU: the user it runs as, the XML it was given.
 */
#include <unistd.h>

#define CARREL_HYPERVISOR_BACKEND_H_ALLOW
#include "hypervisor/hypervisor-backend.h"
#include "tests/fake/hypervisor-fake-priv.h"

/* What an idle guest uses: a little, never nothing. */
#define FAKE_IDLE_NS_PER_MS 10000

gboolean
fake_cpu_time(CarrelHypervisor *hv, const char *name, guint64 *ret_ns, GError **error)
{
    FakeBackend *be = hv->backend_data;
    g_autoptr(GMutexLocker) locker G_GNUC_UNUSED = g_mutex_locker_new(&be->lock);
    gint64 now = g_get_monotonic_time();
    FakeDomain *dom;
    gint64 ms, busy;

    if (fake_take_failure(be, "cpu_time", error) || !(dom = fake_find_domain(be, name, error)))
        return FALSE;
    if (dom->state != CARREL_DOMAIN_RUNNING && dom->state != CARREL_DOMAIN_PAUSED) {
        g_set_error(error, CARREL_ERROR, CARREL_ERROR_WRONG_STATE, "domain is not running");
        return FALSE;
    }
    if (!dom->cpu_origin_us)
        dom->cpu_origin_us = now;
    ms = (now - dom->cpu_origin_us) / 1000;
    busy = MIN(ms, (gint64)be->busy_ms);
    *ret_ns =
        (guint64)busy * G_GINT64_CONSTANT(1000000) + (guint64)(ms - busy) * FAKE_IDLE_NS_PER_MS;
    return TRUE;
}

void
carrel_hypervisor_fake_set_busy(CarrelHypervisor *hv, guint ms)
{
    FakeBackend *be = hv->backend_data;
    g_autoptr(GMutexLocker) locker G_GNUC_UNUSED = g_mutex_locker_new(&be->lock);

    be->busy_ms = ms;
}

gboolean
fake_qemu_owner(CarrelHypervisor *hv, guint *ret_uid, guint *ret_gid, GError **error)
{
    FakeBackend *be = hv->backend_data;
    g_autoptr(GMutexLocker) locker G_GNUC_UNUSED = g_mutex_locker_new(&be->lock);

    if (!be->qemu_owner) {
        g_set_error(error, CARREL_ERROR, CARREL_ERROR_UNSUPPORTED, "the fake runs no QEMU");
        return FALSE;
    }
    *ret_uid = (guint)getuid();
    *ret_gid = (guint)getgid();
    return TRUE;
}

void
carrel_hypervisor_fake_set_qemu_owner(CarrelHypervisor *hv, gboolean known)
{
    FakeBackend *be = hv->backend_data;
    g_autoptr(GMutexLocker) locker G_GNUC_UNUSED = g_mutex_locker_new(&be->lock);

    be->qemu_owner = known;
}

char *
carrel_hypervisor_fake_get_xml(CarrelHypervisor *hv, const char *name)
{
    FakeBackend *be = hv->backend_data;
    g_autoptr(GMutexLocker) locker G_GNUC_UNUSED = g_mutex_locker_new(&be->lock);
    FakeDomain *dom = fake_find_domain(be, name, NULL);

    return dom ? g_strdup(dom->xml) : NULL;
}
