/*
 * The fake backend: domains live in a hash table inside the object, with the same semantics as
 * the libvirt backend (errors, idempotent destroy/undefine, transient domains), so core's unit
 * tests exercise the real contract without libvirt.
 */
#define CARREL_HYPERVISOR_PRIV_H_ALLOW
#include "hypervisor/hypervisor-priv.h"

typedef struct {
    char *session_id;
    char *instance_id;
    CarrelDomainState state;
    gboolean persistent;
} FakeDomain;

typedef struct {
    GMutex lock;
    GHashTable *domains;   /* name -> FakeDomain */
    GHashTable *fail_next; /* op names whose next call fails */
    gboolean agent_silent; /* every guest agent times out, as in a guest without one */
} FakeBackend;

static const char *const fake_op_names[] = {
    "define_start", "start", "shutdown", "destroy", "undefine", "get_state", "agent_ping", "list",
};

static void
fake_domain_free(gpointer data)
{
    FakeDomain *dom = data;

    g_free(dom->session_id);
    g_free(dom->instance_id);
    g_free(dom);
}

/* Called with the lock held: TRUE (and error set) when op was told to fail now. */
static gboolean
take_failure(FakeBackend *be, const char *op, GError **error)
{
    if (!g_hash_table_remove(be->fail_next, op))
        return FALSE;
    g_set_error(error, CARREL_ERROR, CARREL_ERROR_HYPERVISOR, "%s: injected failure", op);
    return TRUE;
}

/* Called with the lock held. */
static FakeDomain *
find_domain(FakeBackend *be, const char *name, GError **error)
{
    FakeDomain *dom = g_hash_table_lookup(be->domains, name);

    if (!dom)
        g_set_error(error, CARREL_ERROR, CARREL_ERROR_NOT_FOUND, "domain does not exist");
    return dom;
}

/* Called with the lock held: a transient domain disappears when it stops, as in libvirt. */
static void
power_off(FakeBackend *be, const char *name, FakeDomain *dom)
{
    dom->state = CARREL_DOMAIN_SHUTOFF;
    if (!dom->persistent)
        g_hash_table_remove(be->domains, name);
}

static gboolean
fake_define_start(CarrelHypervisor *hv, const char *xml, GError **error)
{
    FakeBackend *be = hv->backend_data;
    g_autoptr(GMutexLocker) locker = g_mutex_locker_new(&be->lock);
    g_autofree char *name = NULL;
    g_autofree char *session_id = NULL;
    g_autofree char *instance_id = NULL;
    FakeDomain *dom;

    if (take_failure(be, "define_start", error))
        return FALSE;
    if (!carrel_hypervisor_scan_xml(xml, &name, &session_id, &instance_id, error)) {
        g_prefix_error(error, "defining: ");
        return FALSE;
    }
    if (!name || !*name) {
        g_set_error(error, CARREL_ERROR, CARREL_ERROR_HYPERVISOR,
                    "defining: domain xml has no name");
        return FALSE;
    }
    if (g_hash_table_contains(be->domains, name)) {
        g_set_error(error, CARREL_ERROR, CARREL_ERROR_EXISTS, "domain already exists");
        return FALSE;
    }
    dom = g_new0(FakeDomain, 1);
    dom->session_id = g_steal_pointer(&session_id);
    dom->instance_id = g_steal_pointer(&instance_id);
    dom->state = CARREL_DOMAIN_RUNNING;
    dom->persistent = TRUE;
    g_hash_table_insert(be->domains, g_steal_pointer(&name), dom);
    return TRUE;
}

static gboolean
fake_start(CarrelHypervisor *hv, const char *name, GError **error)
{
    FakeBackend *be = hv->backend_data;
    g_autoptr(GMutexLocker) locker = g_mutex_locker_new(&be->lock);
    FakeDomain *dom;

    if (take_failure(be, "start", error) || !(dom = find_domain(be, name, error)))
        return FALSE;
    if (dom->state != CARREL_DOMAIN_SHUTOFF && dom->state != CARREL_DOMAIN_CRASHED) {
        g_set_error(error, CARREL_ERROR, CARREL_ERROR_WRONG_STATE, "starting: domain is %s",
                    carrel_domain_state_to_string(dom->state));
        return FALSE;
    }
    dom->state = CARREL_DOMAIN_RUNNING;
    return TRUE;
}

static gboolean
fake_shutdown(CarrelHypervisor *hv, const char *name, guint timeout_s, GError **error)
{
    FakeBackend *be = hv->backend_data;
    g_autoptr(GMutexLocker) locker = g_mutex_locker_new(&be->lock);
    FakeDomain *dom;

    if (take_failure(be, "shutdown", error) || !(dom = find_domain(be, name, error)))
        return FALSE;
    if (dom->state == CARREL_DOMAIN_PAUSED) {
        /* A paused guest cannot react to the request: it times out, as a real one would. */
        g_set_error(error, CARREL_ERROR, CARREL_ERROR_TIMEOUT,
                    "guest did not power off within %u s", timeout_s);
        return FALSE;
    }
    if (dom->state != CARREL_DOMAIN_CRASHED)
        power_off(be, name, dom);
    return TRUE;
}

static gboolean
fake_destroy(CarrelHypervisor *hv, const char *name, GError **error)
{
    FakeBackend *be = hv->backend_data;
    g_autoptr(GMutexLocker) locker = g_mutex_locker_new(&be->lock);
    FakeDomain *dom;

    if (take_failure(be, "destroy", error) || !(dom = find_domain(be, name, error)))
        return FALSE;
    if (dom->state != CARREL_DOMAIN_CRASHED)
        power_off(be, name, dom);
    return TRUE;
}

static gboolean
fake_undefine(CarrelHypervisor *hv, const char *name, GError **error)
{
    FakeBackend *be = hv->backend_data;
    g_autoptr(GMutexLocker) locker = g_mutex_locker_new(&be->lock);
    FakeDomain *dom;

    if (take_failure(be, "undefine", error))
        return FALSE;
    dom = g_hash_table_lookup(be->domains, name);
    if (!dom)
        return TRUE;
    if (dom->state == CARREL_DOMAIN_SHUTOFF || dom->state == CARREL_DOMAIN_CRASHED)
        g_hash_table_remove(be->domains, name);
    else
        dom->persistent = FALSE; /* keeps running, gone once it stops */
    return TRUE;
}

static gboolean
fake_get_state(CarrelHypervisor *hv, const char *name, CarrelDomainState *ret_state, GError **error)
{
    FakeBackend *be = hv->backend_data;
    g_autoptr(GMutexLocker) locker = g_mutex_locker_new(&be->lock);
    FakeDomain *dom;

    if (take_failure(be, "get_state", error) || !(dom = find_domain(be, name, error)))
        return FALSE;
    *ret_state = dom->state;
    return TRUE;
}

static gboolean
fake_agent_ping(CarrelHypervisor *hv, const char *name, guint timeout_s, GError **error)
{
    FakeBackend *be = hv->backend_data;
    g_autoptr(GMutexLocker) locker = g_mutex_locker_new(&be->lock);
    FakeDomain *dom;

    if (take_failure(be, "agent_ping", error) || !(dom = find_domain(be, name, error)))
        return FALSE;
    if (dom->state != CARREL_DOMAIN_RUNNING) {
        g_set_error(error, CARREL_ERROR, CARREL_ERROR_WRONG_STATE, "domain is not running");
        return FALSE;
    }
    if (be->agent_silent) {
        g_set_error(error, CARREL_ERROR, CARREL_ERROR_TIMEOUT, "guest agent is not responding");
        return FALSE;
    }
    return TRUE;
}

static gint
compare_info(gconstpointer a, gconstpointer b)
{
    const CarrelDomainInfo *ia = *(const CarrelDomainInfo *const *)a;
    const CarrelDomainInfo *ib = *(const CarrelDomainInfo *const *)b;

    return g_strcmp0(ia->name, ib->name);
}

static GPtrArray *
fake_list(CarrelHypervisor *hv, GError **error)
{
    FakeBackend *be = hv->backend_data;
    g_autoptr(GMutexLocker) locker = g_mutex_locker_new(&be->lock);
    GPtrArray *infos;
    GHashTableIter iter;
    gpointer key, value;

    if (take_failure(be, "list", error))
        return NULL;
    infos = g_ptr_array_new_with_free_func((GDestroyNotify)carrel_domain_info_free);
    g_hash_table_iter_init(&iter, be->domains);
    while (g_hash_table_iter_next(&iter, &key, &value)) {
        FakeDomain *dom = value;
        CarrelDomainInfo *info;

        if (!dom->session_id)
            continue; /* like libvirt: only domains with carrel's metadata */
        info = g_new0(CarrelDomainInfo, 1);
        info->name = g_strdup(key);
        info->session_id = g_strdup(dom->session_id);
        info->instance_id = g_strdup(dom->instance_id);
        info->state = dom->state;
        g_ptr_array_add(infos, info);
    }
    /* Stable order for tests. */
    g_ptr_array_sort(infos, compare_info);
    return infos;
}

static char *
fake_describe(CarrelHypervisor *hv)
{
    return g_strdup("fake hypervisor");
}

static void
fake_close(CarrelHypervisor *hv)
{
    FakeBackend *be = hv->backend_data;

    if (!be)
        return;
    g_hash_table_unref(be->domains);
    g_hash_table_unref(be->fail_next);
    g_mutex_clear(&be->lock);
    g_free(be);
    hv->backend_data = NULL;
}

static const CarrelHypervisorOps fake_ops = {
    .define_start = fake_define_start,
    .start = fake_start,
    .shutdown = fake_shutdown,
    .destroy = fake_destroy,
    .undefine = fake_undefine,
    .get_state = fake_get_state,
    .agent_ping = fake_agent_ping,
    .list = fake_list,
    .describe = fake_describe,
    .close = fake_close,
};

CarrelHypervisor *
carrel_hypervisor_new_fake(void)
{
    FakeBackend *be = g_new0(FakeBackend, 1);

    g_mutex_init(&be->lock);
    be->domains = g_hash_table_new_full(g_str_hash, g_str_equal, g_free, fake_domain_free);
    be->fail_next = g_hash_table_new_full(g_str_hash, g_str_equal, g_free, NULL);
    return carrel_hypervisor_new_backend(&fake_ops, "fake://", be);
}

static FakeBackend *
fake_backend_of(CarrelHypervisor *hv)
{
    g_return_val_if_fail(hv != NULL && hv->ops == &fake_ops, NULL);
    return hv->backend_data;
}

void
carrel_hypervisor_fake_fail_next(CarrelHypervisor *hv, const char *op)
{
    FakeBackend *be = fake_backend_of(hv);
    gboolean known = FALSE;

    g_return_if_fail(be != NULL && op != NULL);
    for (gsize i = 0; i < G_N_ELEMENTS(fake_op_names); i++)
        known = known || g_str_equal(fake_op_names[i], op);
    g_return_if_fail(known);
    g_mutex_lock(&be->lock);
    g_hash_table_add(be->fail_next, g_strdup(op));
    g_mutex_unlock(&be->lock);
}

gboolean
carrel_hypervisor_fake_set_state(CarrelHypervisor *hv, const char *name, CarrelDomainState state)
{
    FakeBackend *be = fake_backend_of(hv);
    g_autoptr(GMutexLocker) locker = NULL;
    FakeDomain *dom;

    g_return_val_if_fail(be != NULL && name != NULL, FALSE);
    g_return_val_if_fail((int)state >= 0 && state < CARREL_DOMAIN_LAST, FALSE);
    locker = g_mutex_locker_new(&be->lock);
    dom = g_hash_table_lookup(be->domains, name);
    if (!dom)
        return FALSE;
    dom->state = state;
    if ((state == CARREL_DOMAIN_SHUTOFF || state == CARREL_DOMAIN_CRASHED) && !dom->persistent)
        g_hash_table_remove(be->domains, name);
    return TRUE;
}

void
carrel_hypervisor_fake_set_agent_silent(CarrelHypervisor *hv, gboolean silent)
{
    FakeBackend *be = fake_backend_of(hv);
    g_autoptr(GMutexLocker) locker = NULL;

    g_return_if_fail(be != NULL);
    locker = g_mutex_locker_new(&be->lock);
    be->agent_silent = silent;
}
