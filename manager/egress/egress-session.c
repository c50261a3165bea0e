/*
 * egress: a session on the path. Its own dnsmasq (so that its log is the session's DNS log, and
 * its rules the session's policy) on a port of the gateway, and its nftables entries: the map
 * from its address to that port, and the pair (tap, address) it may send from.
 */
#include <string.h>

#include "egress/egress-priv.h"

#define NFT_BIN "/usr/sbin/nft"
#define DNSMASQ_BIN "/usr/sbin/dnsmasq"
#define DNSMASQ_USER "dnsmasq"

typedef struct {
    CarrelEgress *eg;
    char *address;
} LineData;

static void
line_data_free(gpointer p)
{
    LineData *d = p;

    g_free(d->address);
    g_free(d);
}

/* dnsmasq's refusals ("config NAME is NXDOMAIN"): a denied lookup in the egress log. */
static void
dns_line(const char *line, gpointer data)
{
    LineData *d = data;
    g_autofree char *name = carrel_egress_parse_dnsmasq_line(line);
    g_autoptr(CarrelEgressRecord) rec = NULL;

    if (!name)
        return;
    rec = carrel_egress_record_new();
    rec->ts_us = g_get_real_time();
    rec->name = g_steal_pointer(&name);
    rec->port = 53;
    rec->protocol = g_strdup("dns");
    rec->decision = g_strdup("denied");
    carrel_egress_report(d->eg, d->address, rec);
}

/* A port of the range nobody holds on the gateway (UDP and TCP). */
static guint
free_dns_port(guint after)
{
    for (guint port = MAX(after, CARREL_NET_EGRESS_DNS_PORT_FIRST);
         port <= CARREL_NET_EGRESS_DNS_PORT_LAST; port++) {
        g_autoptr(GInetAddress) gw = g_inet_address_new_from_string(CARREL_NET_EGRESS_GATEWAY);
        g_autoptr(GSocketAddress) at = g_inet_socket_address_new(gw, (guint16)port);
        g_autoptr(GSocket) udp =
            g_socket_new(G_SOCKET_FAMILY_IPV4, G_SOCKET_TYPE_DATAGRAM, G_SOCKET_PROTOCOL_UDP, NULL);
        g_autoptr(GSocket) tcp =
            g_socket_new(G_SOCKET_FAMILY_IPV4, G_SOCKET_TYPE_STREAM, G_SOCKET_PROTOCOL_TCP, NULL);

        if (udp && tcp && g_socket_bind(udp, at, FALSE, NULL) && g_socket_bind(tcp, at, TRUE, NULL))
            return port;
    }
    return 0;
}

static CarrelEgressChild *
start_dnsmasq(CarrelEgress *eg, const char *session_id, const char *address, CarrelNetDnsSpec *dns,
              guint *ret_port, GError **error)
{
    g_autofree char *dir = g_build_filename(carrel_egress_run_dir(eg), "dns", NULL);
    g_autofree char *conf_name = g_strconcat(session_id, ".conf", NULL);
    g_autofree char *pid_name = g_strconcat(session_id, ".pid", NULL);
    g_autofree char *conf_path = g_build_filename(dir, conf_name, NULL);
    g_autofree char *pid_path = g_build_filename(dir, pid_name, NULL);
    g_autofree char *conf_arg = g_strconcat("--conf-file=", conf_path, NULL);
    const char *argv[] = {DNSMASQ_BIN,        "--keep-in-foreground",
                          "--log-facility=-", "--user=" DNSMASQ_USER,
                          conf_arg,           NULL};

    /* A port taken between the check and dnsmasq's bind makes it exit at once: try the next. */
    for (guint tries = 0, port = 0; tries < 5; tries++) {
        g_autofree char *conf = NULL;
        CarrelEgressChild *child;
        LineData *d;

        dns->port = port = free_dns_port(port + 1);
        if (!port) {
            g_set_error(error, CARREL_ERROR, CARREL_ERROR_LIMIT,
                        "no free resolver port on %s (%u-%u)", CARREL_NET_EGRESS_GATEWAY,
                        CARREL_NET_EGRESS_DNS_PORT_FIRST, CARREL_NET_EGRESS_DNS_PORT_LAST);
            return NULL;
        }
        conf = carrel_net_dnsmasq_conf(dns, error);
        if (!conf || !carrel_util_ensure_dir(dir, 0750, error) ||
            !carrel_util_write_file(conf_path, conf, -1, 0644, error))
            return NULL;
        d = g_new0(LineData, 1);
        d->eg = eg;
        d->address = g_strdup(address);
        child = carrel_egress_child_spawn(argv, pid_path, dns_line, d, line_data_free, error);
        if (!child)
            return NULL;
        g_usleep(200 * 1000);
        if (carrel_egress_child_running(child)) {
            *ret_port = port;
            return child;
        }
        carrel_egress_child_stop(child);
    }
    g_set_error(error, CARREL_ERROR, CARREL_ERROR_FAILED,
                "dnsmasq for session %s did not stay up (5 ports tried)", session_id);
    return NULL;
}

static gboolean
add_rules(const char *address, guint port, const char *tap, GError **error)
{
    const char *argv[] = {NFT_BIN, "-f", "-", NULL};
    g_autofree char *stale = carrel_net_egress_nft_session(FALSE, address, port, tap, error);
    g_autofree char *script = carrel_net_egress_nft_session(TRUE, address, port, tap, error);

    if (!stale || !script)
        return FALSE;
    /* A pair left by a session that ended while carreld was down would make "add" fail. */
    (void)carrel_egress_run(argv, stale, NULL);
    return carrel_egress_run(argv, script, error);
}

gboolean
carrel_egress_session_add(CarrelEgress *eg, const char *session_id, const char *address,
                          const char *tap, CarrelNetDnsSpec *dns, GError **error)
{
    CarrelEgressMember *m = g_new0(CarrelEgressMember, 1);

    carrel_egress_session_remove(eg, session_id);
    dns->gateway = CARREL_NET_EGRESS_GATEWAY;
    dns->upstream = carrel_egress_upstream(eg);
    m->dnsmasq = start_dnsmasq(eg, session_id, address, dns, &m->dns_port, error);
    if (!m->dnsmasq) {
        g_free(m);
        return FALSE;
    }
    m->session_id = g_strdup(session_id);
    m->address = g_strdup(address);
    m->tap = g_strdup(tap);
    if (!add_rules(address, m->dns_port, tap, error)) {
        carrel_egress_member_free(m);
        return FALSE;
    }
    carrel_egress_member_insert(eg, m);
    return TRUE;
}
