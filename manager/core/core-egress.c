/*
 * Sessions with a network: an address on the egress network, given at create and kept until
 * destroyed; the guest is told it (carrel-guest set-net) once its agent answers; the egress path
 * (egress/) is started with the first such session. Decisions and records: core-egress-decide.c.
 */
#include <string.h>

#include "core/core-priv.h"
#include "net/net.h"

#define EGRESS_HOSTS 65534

/* Guest ports sent to the TLS intercept: 443 and whatever port a policy names. */
static GArray *
tls_ports(CarrelManager *mgr)
{
    g_autoptr(GPtrArray) all = carrel_policy_set_list(mgr->policies);
    GArray *ports = g_array_new(FALSE, FALSE, sizeof(guint));
    guint https = 443;

    g_array_append_val(ports, https);
    for (guint i = 0; i < all->len; i++)
        carrel_policy_tls_ports(g_ptr_array_index(all, i), ports);
    return ports;
}

static gboolean
ensure_libvirt_network(CarrelManager *mgr, GError **error)
{
    g_autofree char *running = NULL;
    g_autofree char *xml =
        carrel_net_egress_network_xml(CARREL_NET_EGRESS_NAME, CARREL_NET_EGRESS_BRIDGE,
                                      CARREL_NET_EGRESS_GATEWAY, CARREL_NET_EGRESS_PREFIX, error);

    /* As for the isolated network: what runs is checked, not what was asked for. */
    if (!xml ||
        !carrel_hypervisor_ensure_network(mgr->hv, CARREL_NET_EGRESS_NAME, xml, &running, error) ||
        !carrel_net_check_egress(running, CARREL_NET_EGRESS_GATEWAY, error)) {
        g_prefix_error(error, "session network '%s': ", CARREL_NET_EGRESS_NAME);
        return FALSE;
    }
    return TRUE;
}

/* The path, started once; under egress_lock. */
static gboolean
ensure_path_locked(CarrelManager *mgr, GError **error)
{
    g_autofree char *run_dir = NULL;
    g_autoptr(GArray) ports = NULL;
    CarrelEgressConfig config = {0};

    if (mgr->egress)
        return TRUE;
    if (!mgr->egress_dns || !mgr->egress_helper) {
        g_set_error(error, CARREL_ERROR, CARREL_ERROR_FAILED,
                    "this carreld has no egress path: it needs an upstream resolver "
                    "(--egress-dns ADDR) and carrel-egress-helper");
        return FALSE;
    }
    if (!ensure_libvirt_network(mgr, error))
        return FALSE;
    run_dir = g_build_filename(mgr->state_dir, "egress", NULL);
    ports = tls_ports(mgr);
    config.run_dir = run_dir;
    config.upstream_dns = mgr->egress_dns;
    config.helper_path = mgr->egress_helper;
    config.tls_ports = (const guint *)(gpointer)ports->data;
    config.n_tls_ports = ports->len;
    g_strfreev(mgr->secret_headers);
    mgr->secret_headers = carrel_manager_secret_headers(mgr);
    config.secret_headers = mgr->secret_headers;
    config.upstream_ca = mgr->egress_ca;
    config.decide = carrel_manager_egress_decide;
    config.record = carrel_manager_egress_record;
    config.data = mgr;
    mgr->egress = carrel_egress_start(&config, error);
    return mgr->egress != NULL;
}

gboolean
carrel_manager_egress_ensure(CarrelManager *mgr, GError **error)
{
    g_autoptr(GMutexLocker) locker G_GNUC_UNUSED = g_mutex_locker_new(&mgr->egress_lock);

    return ensure_path_locked(mgr, error);
}

static char *
address_of(guint n)
{
    /* 10.77.0.0/16: the gateway is .0.1; hosts from .0.2, never a .0 or .255. */
    return g_strdup_printf("10.77.%u.%u", n / 256, n % 256);
}

/* The lowest address no session that is not destroyed has, nor one being made. */
static char *
allocate_locked(CarrelManager *mgr, GError **error)
{
    g_autoptr(GHashTable) used = carrel_store_egress_addresses(mgr->store, error);

    if (!used)
        return NULL;
    for (guint n = 2; n < EGRESS_HOSTS; n++) {
        g_autofree char *address = NULL;

        if (n % 256 == 0 || n % 256 == 255)
            continue;
        address = address_of(n);
        if (!g_hash_table_contains(used, address) &&
            !g_hash_table_contains(mgr->egress_sources, address))
            return g_steal_pointer(&address);
    }
    g_set_error(error, CARREL_ERROR, CARREL_ERROR_LIMIT, "every egress address is in use");
    return NULL;
}

gboolean
carrel_manager_egress_prepare(CarrelManager *mgr, CarrelSession *session,
                              const CarrelPolicy *policy, GError **error)
{
    g_autoptr(GMutexLocker) locker G_GNUC_UNUSED = g_mutex_locker_new(&mgr->egress_lock);

    if (carrel_policy_network_mode(policy) == CARREL_NETWORK_NONE)
        return TRUE;
    if (!ensure_path_locked(mgr, error) || !(session->egress_ip = allocate_locked(mgr, error)))
        return FALSE;
    /* Reserved from now on, so that a create running beside this one takes another. */
    g_hash_table_replace(mgr->egress_sources, g_strdup(session->egress_ip), g_strdup(session->id));
    return TRUE;
}

char *
carrel_manager_egress_tap(const CarrelSession *session)
{
    /* "cs-" and the id's 12 hex: 15 bytes, the most a Linux interface name has. */
    return g_strconcat(CARREL_NET_EGRESS_TAP_PREFIX, session->id + 2, NULL);
}

/* carrel-guest set-net ADDRESS/PREFIX GATEWAY DNS, as root through the agent. */
static gboolean
set_guest_net(CarrelManager *mgr, const char *domain, const char *address, GError **error)
{
    g_autofree char *cidr = g_strdup_printf("%s/%u", address, CARREL_NET_EGRESS_PREFIX);
    const char *argv[] = {CARREL_GUEST_TOOL_PATH,    "set-net", cidr, CARREL_NET_EGRESS_GATEWAY,
                          CARREL_NET_EGRESS_GATEWAY, NULL};
    CarrelGuestExec run = {.argv = argv, .timeout_s = 15, .max_output = 4096};
    g_auto(CarrelExecResult) result = {0};

    if (!carrel_hypervisor_agent_exec(mgr->hv, domain, &run, &result, error))
        return FALSE;
    /* The guest's words are not quoted: its output is untrusted. */
    if (result.exit_code != 0) {
        g_set_error(error, CARREL_ERROR, CARREL_ERROR_FAILED, "carrel-guest set-net exited %d%s",
                    result.exit_code,
                    result.exit_code == 127 ? " (this guest has no carrel-guest)" : "");
        return FALSE;
    }
    return TRUE;
}

/* The guest trusts that CA already: a fork, revert, resume or start of a session that had it.
 * The link in /etc/ssl/certs is there only once the CA was added with the file in place. */
static gboolean
guest_trusts(CarrelManager *mgr, const char *domain, GBytes *pem)
{
    g_autoptr(GBytes) have = NULL;

    return carrel_hypervisor_file_read(mgr->hv, domain, "/etc/ssl/certs/carrel-egress.pem",
                                       g_bytes_get_size(pem), &have, NULL) &&
           g_bytes_equal(have, pem);
}

/* The proxy's CA in the guest's trust store, for sessions whose policy sends secrets: their
 * connections to those destinations are decrypted and signed by it. */
static gboolean
trust_proxy_ca(CarrelManager *mgr, const char *domain, const CarrelPolicy *policy, GError **error)
{
    /* What update-ca-certificates would do for one new CA, without rehashing the whole store
     * (most of a minute under TCG): the bundle, the named link and the hash link. A store in
     * which the CA was once another, or a guest without openssl, takes the full update. */
    const char *argv[] = {
        "/bin/sh", "-ec",
        "crt=/usr/local/share/ca-certificates/carrel-egress.crt; d=/etc/ssl/certs\n"
        "if [ -e \"$d/carrel-egress.pem\" ] || ! command -v openssl >/dev/null; then\n"
        "  exec /usr/sbin/update-ca-certificates; fi\n"
        "h=$(openssl x509 -hash -noout -in \"$crt\")\n"
        "cat \"$crt\" >> \"$d/ca-certificates.crt\"\n"
        "ln -sf \"$crt\" \"$d/carrel-egress.pem\"\n"
        "ln -sf carrel-egress.pem \"$d/$h.0\"\n",
        NULL};
    CarrelGuestExec run = {.argv = argv, .timeout_s = 60, .max_output = 65536};
    g_auto(CarrelExecResult) result = {0};
    g_autofree char *pem = NULL;
    g_autoptr(GBytes) data = NULL;
    gsize len = 0;
    GPtrArray *secrets = carrel_policy_secrets(policy);
    gboolean any = FALSE;

    for (guint i = 0; secrets && i < secrets->len; i++)
        any = any || carrel_policy_secret_header(g_ptr_array_index(secrets, i)) != NULL;
    if (!any)
        return TRUE;
    if (!g_file_get_contents(carrel_egress_ca_cert(mgr->egress), &pem, &len, error))
        return FALSE;
    data = g_bytes_new_take(g_steal_pointer(&pem), len);
    if (guest_trusts(mgr, domain, data))
        return TRUE;
    if (!carrel_hypervisor_file_write(
            mgr->hv, domain, "/usr/local/share/ca-certificates/carrel-egress.crt", data, error) ||
        !carrel_hypervisor_agent_exec(mgr->hv, domain, &run, &result, error))
        return FALSE;
    if (result.exit_code != 0) {
        g_set_error(error, CARREL_ERROR, CARREL_ERROR_FAILED,
                    "adding the CA exited %d in the guest (has it ca-certificates?)",
                    result.exit_code);
        return FALSE;
    }
    return TRUE;
}

gboolean
carrel_manager_egress_attach(CarrelManager *mgr, const CarrelSession *session, gboolean tell_guest,
                             GError **error)
{
    g_autofree char *domain = carrel_session_domain_name(session->id);
    g_autofree char *tap = NULL;
    g_auto(GStrv) resolve = NULL;
    g_auto(GStrv) refuse = NULL;
    const CarrelPolicy *policy;
    CarrelNetDnsSpec dns = {0};
    gboolean ok;

    if (!session->egress_ip)
        return TRUE;
    if (!(policy = carrel_manager_session_policy(mgr, session, error)) ||
        (tell_guest && !set_guest_net(mgr, domain, session->egress_ip, error))) {
        g_prefix_error(error, "giving the session its network: ");
        return FALSE;
    }
    tap = carrel_manager_egress_tap(session);
    carrel_policy_dns_names(policy, &resolve, &refuse);
    dns.open = carrel_policy_network_mode(policy) == CARREL_NETWORK_OPEN;
    dns.resolve = resolve;
    dns.refuse = refuse;
    g_mutex_lock(&mgr->egress_lock);
    ok = ensure_path_locked(mgr, error);
    if (ok)
        g_hash_table_replace(mgr->egress_sources, g_strdup(session->egress_ip),
                             g_strdup(session->id));
    g_mutex_unlock(&mgr->egress_lock);
    /* Outside the lock: dnsmasq takes a moment to start. */
    return ok &&
           carrel_egress_session_add(mgr->egress, session->id, session->egress_ip, tap, &dns,
                                     error) &&
           (!tell_guest || trust_proxy_ca(mgr, domain, policy, error));
}

void
carrel_manager_egress_detach(CarrelManager *mgr, const char *session_id, const char *address)
{
    CarrelEgress *eg;

    g_mutex_lock(&mgr->egress_lock);
    eg = mgr->egress;
    if (address && g_strcmp0(g_hash_table_lookup(mgr->egress_sources, address), session_id) == 0)
        g_hash_table_remove(mgr->egress_sources, address);
    g_mutex_unlock(&mgr->egress_lock);
    if (eg)
        carrel_egress_session_remove(eg, session_id);
}

void
carrel_manager_egress_sync(CarrelManager *mgr)
{
    g_auto(GStrv) on_path = NULL;

    g_mutex_lock(&mgr->egress_lock);
    on_path = mgr->egress ? carrel_egress_sessions(mgr->egress) : NULL;
    g_mutex_unlock(&mgr->egress_lock);
    /* A session that stopped, crashed, hibernated or went has no use for its resolver. */
    for (guint i = 0; on_path && on_path[i]; i++) {
        g_autoptr(CarrelSession) s = carrel_store_session_get(mgr->store, on_path[i], NULL);
        if (!s || (s->state != CARREL_SESSION_RUNNING && s->state != CARREL_SESSION_PAUSED &&
                   s->state != CARREL_SESSION_CREATING))
            carrel_manager_egress_detach(mgr, on_path[i], s ? s->egress_ip : NULL);
    }
}

gboolean
carrel_manager_egress_resume(CarrelManager *mgr, GError **error)
{
    g_autoptr(GPtrArray) sessions = carrel_store_session_list(mgr->store, FALSE, error);

    if (!sessions)
        return FALSE;
    /* Sessions that kept running while carreld was away keep their address; only the path's
     * processes and tables are new. */
    for (guint i = 0; i < sessions->len; i++) {
        CarrelSession *s = g_ptr_array_index(sessions, i);
        g_autoptr(GError) local = NULL;

        if (!s->egress_ip ||
            (s->state != CARREL_SESSION_RUNNING && s->state != CARREL_SESSION_PAUSED))
            continue;
        if (!carrel_manager_egress_attach(mgr, s, FALSE, &local)) {
            g_propagate_prefixed_error(error, g_steal_pointer(&local), "session %s: ", s->id);
            return FALSE;
        }
    }
    return TRUE;
}

void
carrel_manager_egress_stop(CarrelManager *mgr)
{
    CarrelEgress *eg;

    g_mutex_lock(&mgr->egress_lock);
    eg = g_steal_pointer(&mgr->egress);
    g_hash_table_remove_all(mgr->egress_sources);
    g_mutex_unlock(&mgr->egress_lock);
    carrel_egress_free(eg);
}
