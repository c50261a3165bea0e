/*
 * The egress path's configuration, as pure generators: the libvirt network sessions with a
 * network sit on, the nftables tables that leave them only DNS (to their own resolver) and
 * HTTP/HTTPS (to the proxy), the proxy's squid.conf, and each session's dnsmasq.conf. carreld
 * writes and runs them (core and the egress module); nothing here does I/O.
 */
#include <string.h>

#include "net/net.h"

static gboolean
is_plain(const char *text)
{
    /* Values go into line-based files: a newline or quote would start a directive of its own. */
    return text && *text && carrel_util_is_clean_text(text) && !strpbrk(text, "\"'\\ #;{}");
}

static gboolean
check_plain(const char *what, const char *text, GError **error)
{
    if (is_plain(text))
        return TRUE;
    g_set_error(error, CARREL_ERROR, CARREL_ERROR_INVALID_ARG,
                "%s '%s' cannot go into a config file", what,
                text && carrel_util_is_clean_text(text) ? text : "(control characters)");
    return FALSE;
}

char *
carrel_net_egress_network_xml(const char *name, const char *bridge, const char *gateway,
                              guint prefix, GError **error)
{
    if (!carrel_util_is_valid_name(name) || !carrel_util_is_valid_name(bridge) ||
        strlen(bridge) > 15 || !g_hostname_is_ip_address(gateway) || prefix < 8 || prefix > 30) {
        g_set_error(error, CARREL_ERROR, CARREL_ERROR_INVALID_ARG,
                    "egress network: invalid name, bridge, gateway or prefix");
        return NULL;
    }
    /*
     * No <forward>: nothing is routed or NATed; the host's address is the only thing on the
     * bridge, where the proxy and the resolvers listen (nftables drops the rest). No <dhcp> and
     * DNS off: libvirt runs no dnsmasq of its own; carreld gives each guest its address.
     * Isolated ports: sessions cannot reach each other.
     */
    return g_markup_printf_escaped("<network>\n"
                                   "  <name>%s</name>\n"
                                   "  <bridge name='%s' stp='off' delay='0'/>\n"
                                   "  <port isolated='yes'/>\n"
                                   "  <dns enable='no'/>\n"
                                   "  <ip address='%s' prefix='%u'/>\n"
                                   "</network>\n",
                                   name, bridge, gateway, prefix);
}

static void
append_ports(GString *out, const guint *ports, guint n)
{
    for (guint i = 0; i < n; i++)
        g_string_append_printf(out, "%s%u", i ? ", " : "", ports[i]);
}

char *
carrel_net_egress_nft(const CarrelNetEgressFirewall *fw, GError **error)
{
    g_autoptr(GString) tls = g_string_new(NULL);
    g_autoptr(GString) out = g_string_new(NULL);

    if (!check_plain("bridge", fw->bridge, error) ||
        !check_plain("tap prefix", fw->tap_prefix, error) ||
        !g_hostname_is_ip_address(fw->gateway) || fw->n_tls_ports == 0 ||
        fw->dns_port_first > fw->dns_port_last) {
        if (error && !*error)
            g_set_error(error, CARREL_ERROR, CARREL_ERROR_INVALID_ARG,
                        "egress firewall: invalid gateway, TLS ports or DNS port range");
        return NULL;
    }
    append_ports(tls, fw->tls_ports, fw->n_tls_ports);
    /* Replaced whole and atomically: the empty table first, so that "delete" never fails. */
    g_string_append(out, "table inet carrel_egress\ndelete table inet carrel_egress\n");
    g_string_append(out, "table bridge carrel_egress\ndelete table bridge carrel_egress\n");
    g_string_append_printf(
        out,
        "table inet carrel_egress {\n"
        /* Each session's address -> the port of its own resolver. */
        "  map dns_port { type ipv4_addr : inet_service; }\n"
        /* Before routing, whatever ip_forward says: DNS to the host, web ports, nothing else. */
        "  chain pre_filter {\n"
        "    type filter hook prerouting priority -150; policy accept;\n"
        "    iifname != \"%s\" accept\n"
        "    meta nfproto ipv6 counter drop\n"
        "    ip daddr %s meta l4proto { tcp, udp } th dport 53 accept\n"
        "    tcp dport { 80, %s } accept\n"
        "    counter drop\n"
        "  }\n"
        /* The guest needs no proxy settings: its web traffic is redirected to the proxy. */
        "  chain pre_nat {\n"
        "    type nat hook prerouting priority dstnat; policy accept;\n"
        "    iifname != \"%s\" accept\n"
        "    ip daddr %s meta l4proto { tcp, udp } th dport 53 redirect to ip saddr map "
        "@dns_port\n"
        "    tcp dport 80 redirect to :%u\n"
        "    tcp dport { %s } redirect to :%u\n"
        "  }\n"
        /* The host takes only what was redirected: its own services stay out of reach. */
        "  chain input {\n"
        "    type filter hook input priority filter; policy accept;\n"
        "    iifname != \"%s\" accept\n"
        "    ct state established,related accept\n"
        "    ct status dnat tcp dport { %u, %u } accept\n"
        "    ct status dnat meta l4proto { tcp, udp } th dport %u-%u accept\n"
        "    counter drop\n"
        "  }\n"
        "  chain forward {\n"
        "    type filter hook forward priority filter; policy accept;\n"
        "    iifname \"%s\" counter drop\n"
        "    oifname \"%s\" counter drop\n"
        "  }\n"
        "}\n",
        fw->bridge, fw->gateway, tls->str, fw->bridge, fw->gateway, fw->http_port, tls->str,
        fw->https_port, fw->bridge, fw->http_port, fw->https_port, fw->dns_port_first,
        fw->dns_port_last, fw->bridge, fw->bridge);
    /* A guest speaks only from the address it was given: another session's address would get
     * that session's policy. */
    g_string_append_printf(out,
                           "table bridge carrel_egress {\n"
                           "  set ports { type ifname . ipv4_addr; }\n"
                           "  chain pre {\n"
                           "    type filter hook prerouting priority filter; policy accept;\n"
                           "    iifname != \"%s*\" accept\n"
                           "    ether type != { ip, arp } counter drop\n"
                           "    ether type ip iifname . ip saddr != @ports counter drop\n"
                           "    ether type arp iifname . arp saddr ip != @ports counter drop\n"
                           "  }\n"
                           "}\n",
                           fw->tap_prefix);
    return g_string_free(g_steal_pointer(&out), FALSE);
}

char *
carrel_net_egress_nft_session(gboolean add, const char *address, guint dns_port, const char *tap,
                              GError **error)
{
    if (!g_hostname_is_ip_address(address) || !check_plain("tap", tap, error) || dns_port == 0) {
        if (error && !*error)
            g_set_error(error, CARREL_ERROR, CARREL_ERROR_INVALID_ARG,
                        "egress session: invalid address or port");
        return NULL;
    }
    return g_strdup_printf("%s element inet carrel_egress dns_port { %s : %u }\n"
                           "%s element bridge carrel_egress ports { \"%s\" . %s }\n",
                           add ? "add" : "delete", address, dns_port, add ? "add" : "delete", tap,
                           address);
}

static char *squid_base(const CarrelNetSquidSpec *spec, GError **error);
static gboolean append_secret_headers(GString *out, const CarrelNetSquidSpec *spec, GError **error);

char *
carrel_net_squid_conf(const CarrelNetSquidSpec *spec, GError **error)
{
    g_autofree char *base = squid_base(spec, error);
    g_autoptr(GString) out = NULL;

    if (!base)
        return NULL;
    out = g_string_new(base);
    if (!append_secret_headers(out, spec, error))
        return NULL;
    return g_string_free(g_steal_pointer(&out), FALSE);
}

static char *
squid_base(const CarrelNetSquidSpec *spec, GError **error)
{
    const char *paths[] = {spec->helper,  spec->helper_socket, spec->ca_pem,    spec->ssl_db,
                           spec->certgen, spec->access_log,    spec->cache_log, spec->pid_file,
                           spec->subnet,  spec->user};

    for (gsize i = 0; i < G_N_ELEMENTS(paths); i++)
        if (!check_plain("squid setting", paths[i], error))
            return NULL;
    if (!g_hostname_is_ip_address(spec->gateway) || !g_hostname_is_ip_address(spec->upstream_dns) ||
        spec->local_port == 0) {
        g_set_error(error, CARREL_ERROR, CARREL_ERROR_INVALID_ARG,
                    "squid: the gateway and the upstream resolver must be addresses");
        return NULL;
    }
    return g_strdup_printf(
        "# Written by carreld: the egress proxy of carrel sessions. Do not edit.\n"
        "cache_effective_user %s\n"
        "pid_filename %s\n"
        "cache_log %s\n"
        "cache deny all\n"
        "pinger_enable off\n"
        "shutdown_lifetime 1 seconds\n"
        /* A guest's Host or SNI must match the address it connects to: otherwise an allowed
         * name in the header would open any address. Squid resolves like the guests do. */
        "host_verify_strict on\n"
        "dns_nameservers %s\n"
        "visible_hostname carrel-egress\n"
        /* squid wants a forward port; nobody but the host's loopback reaches this one. */
        "http_port 127.0.0.1:%u\n"
        "http_port %s:%u intercept name=http_icpt\n"
        "https_port %s:%u intercept ssl-bump name=https_icpt tls-cert=%s "
        "generate-host-certificates=on dynamic_cert_mem_cache_size=4MB\n"
        "sslcrtd_program %s -s %s -M 4MB\n"
        "sslcrtd_children 3 startup=1 idle=1\n"
        /* Every request asks carreld (ttl=0): the policy lives there, not in this file. */
        "external_acl_type carrel_policy concurrency=100 ttl=0 negative_ttl=0 grace=0 "
        "children-max=1 children-startup=1 %%>a %%>ha{Host} %%ssl::>sni %%DST %%PORT %%>rm "
        "%s %s\n"
        "acl policy external carrel_policy\n"
        "acl guests src %s\n"
        "acl step1 at_step SslBump1\n"
        "acl step2 at_step SslBump2\n"
        "acl tls_icpt myportname https_icpt\n"
        "acl carrel_bump note carrel_bump yes\n"
        "http_access deny !guests\n"
        /* The first look at a TLS connection has no name yet: decide on the SNI at step 2. */
        "http_access allow tls_icpt step1\n"
        "http_access allow policy\n"
        "http_access deny all\n"
        /* Positive rules, then terminate: a lookup without an answer fails closed. One question
         * to carreld decides both: allowed, and decrypted only where its answer carries the
         * note (a secret goes there). */
        "ssl_bump peek step1\n"
        "ssl_bump splice step2 policy !carrel_bump\n"
        "ssl_bump bump step2 carrel_bump\n"
        "ssl_bump terminate all\n"
        "logformat carrel %%ts.%%03tu %%>a %%>la %%>lp %%ssl::>sni %%>rd %%<a %%>rs %%rm %%Ss "
        "%%ssl::bump_mode %%ea %%>st %%<st %%tr\n"
        "access_log stdio:%s carrel\n",
        spec->user, spec->pid_file, spec->cache_log, spec->upstream_dns, spec->local_port,
        spec->gateway, spec->http_port, spec->gateway, spec->https_port, spec->ca_pem,
        spec->certgen, spec->ssl_db, spec->helper, spec->helper_socket, spec->subnet,
        spec->access_log);
}

/* The secret headers: the guest's own dropped, carreld's (from its answer's note) sent. */
static gboolean
append_secret_headers(GString *out, const CarrelNetSquidSpec *spec, GError **error)
{
    for (guint i = 0; spec->headers && spec->headers[i]; i++) {
        const char *h = spec->headers[i];
        if (!*h || strspn(h, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-") !=
                       strlen(h)) {
            g_set_error(error, CARREL_ERROR, CARREL_ERROR_INVALID_ARG,
                        "header '%s' cannot go into squid.conf",
                        carrel_util_is_clean_text(h) ? h : "(control characters)");
            return FALSE;
        }
        g_string_append_printf(out,
                               "acl carrel_hdr_%u note carrel_hdr_%u\n"
                               "request_header_access %s deny carrel_hdr_%u\n"
                               "request_header_add %s \"%%'note{carrel_hdr_%u}\" carrel_hdr_%u\n",
                               i, i, h, i, h, i, i);
    }
    if (spec->upstream_ca) {
        if (!check_plain("upstream CA", spec->upstream_ca, error))
            return FALSE;
        g_string_append_printf(out, "tls_outgoing_options cafile=%s\n", spec->upstream_ca);
    }
    return TRUE;
}

static gboolean
check_names(char **names, GError **error)
{
    for (guint i = 0; names && names[i]; i++) {
        if (!check_plain("name", names[i], error))
            return FALSE;
        if (strchr(names[i], '/')) {
            g_set_error(error, CARREL_ERROR, CARREL_ERROR_INVALID_ARG,
                        "name '%s' cannot go into a dnsmasq rule", names[i]);
            return FALSE;
        }
    }
    return TRUE;
}

char *
carrel_net_dnsmasq_conf(const CarrelNetDnsSpec *spec, GError **error)
{
    g_autoptr(GString) out = g_string_new(NULL);

    if (!g_hostname_is_ip_address(spec->gateway) || !g_hostname_is_ip_address(spec->upstream) ||
        spec->port == 0 || !check_names(spec->resolve, error) ||
        !check_names(spec->refuse, error)) {
        if (error && !*error)
            g_set_error(error, CARREL_ERROR, CARREL_ERROR_INVALID_ARG,
                        "dnsmasq: invalid gateway, upstream or port");
        return NULL;
    }
    g_string_append_printf(out,
                           "# Written by carreld: one session's resolver. Do not edit.\n"
                           "listen-address=%s\n"
                           "bind-interfaces\n"
                           "port=%u\n"
                           "no-resolv\n"
                           "no-hosts\n"
                           "log-queries=extra\n",
                           spec->gateway, spec->port);
    /* Names the policy refuses are answered here (NXDOMAIN) and logged; they never leave. */
    for (guint i = 0; spec->refuse && spec->refuse[i]; i++)
        g_string_append_printf(out, "address=/%s/\n", spec->refuse[i]);
    if (spec->open) {
        g_string_append_printf(out, "server=%s\n", spec->upstream);
    } else {
        for (guint i = 0; spec->resolve && spec->resolve[i]; i++)
            g_string_append_printf(out, "server=/%s/%s\n", spec->resolve[i], spec->upstream);
        g_string_append(out, "address=/#/\n");
    }
    return g_string_free(g_steal_pointer(&out), FALSE);
}
