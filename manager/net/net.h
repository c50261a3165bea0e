/* net: address rules (plain HTTP on loopback only), the session networks and NIC MACs, and the
 * egress path's configuration (pure generators). */
#pragma once

#include <gio/gio.h>

#include "util/util.h"

G_BEGIN_DECLS

/*
 * Parses "HOST:PORT" or "[IPV6]:PORT" (numeric addresses, or "localhost" as 127.0.0.1) for the
 * TCP listener; INVALID_ARG when malformed. Without tls, a listener that is not loopback
 * (127.0.0.0/8 or ::1) is POLICY_DENIED, so plain HTTP never leaves the host; with tls, any
 * address is accepted, the wildcards 0.0.0.0 and [::] included. Pure: nothing is resolved.
 */
GSocketAddress *carrel_net_parse_listen(const char *text, gboolean tls, GError **error);

/* The libvirt network every session's NIC is on, and its bridge. */
#define CARREL_NET_ISOLATED_NAME "carrel-isolated"
#define CARREL_NET_ISOLATED_BRIDGE "carrel-iso0"

/*
 * A session NIC's MAC: "02:" and five random bytes. 02 is a locally administered unicast prefix
 * (never a vendor's address); 40 random bits make a clash among even thousands of sessions on
 * one network unlikely (about n^2 / 2^41).
 */
char *carrel_net_new_mac(void);

/* The MAC carrel_net_new_mac makes from these five bytes (pure, for tests). */
char *carrel_net_mac_from_bytes(const guint8 bytes[5]);

/*
 * Pure generator: the libvirt <network> XML of an isolated network named name on bridge
 * (at most 15 bytes): no <forward>, no <ip>, isolated ports. INVALID_ARG for invalid names.
 */
char *carrel_net_isolated_network_xml(const char *name, const char *bridge, GError **error);

/*
 * Checks that a network's XML (as libvirt reports it, untrusted: another tool may have made a
 * network of that name) is isolated: no <forward> and isolated ports. POLICY_DENIED if not,
 * INVALID_ARG when it does not parse.
 */
gboolean carrel_net_check_isolated(const char *xml, GError **error);

/* The libvirt network of sessions whose policy gives them a network (net-egress.c): the host is
 * GATEWAY on BRIDGE; each session gets an address of the /PREFIX and a tap named TAP_PREFIX +
 * 12 hex (its id's). */
#define CARREL_NET_EGRESS_NAME "carrel-egress"
#define CARREL_NET_EGRESS_BRIDGE "carrel-egr0"
#define CARREL_NET_EGRESS_GATEWAY "10.77.0.1"
#define CARREL_NET_EGRESS_SUBNET "10.77.0.0/16"
#define CARREL_NET_EGRESS_PREFIX 16
#define CARREL_NET_EGRESS_TAP_PREFIX "cs-"
/* The proxy's intercept ports and the range of the sessions' resolvers, on the gateway only. */
#define CARREL_NET_EGRESS_HTTP_PORT 3129
#define CARREL_NET_EGRESS_HTTPS_PORT 3130
#define CARREL_NET_EGRESS_LOCAL_PORT 13128
#define CARREL_NET_EGRESS_DNS_PORT_FIRST 15300
#define CARREL_NET_EGRESS_DNS_PORT_LAST 16299

/* Pure generator: the egress network's XML (no forward, isolated ports, no DHCP, DNS off, the
 * host at gateway/prefix). INVALID_ARG for bad values. */
char *carrel_net_egress_network_xml(const char *name, const char *bridge, const char *gateway,
                                    guint prefix, GError **error);
/* Checks a running network's XML (untrusted) is one: no forward, isolated ports, DNS off, no
 * DHCP, and the host at gateway. POLICY_DENIED if not. */
gboolean carrel_net_check_egress(const char *xml, const char *gateway, GError **error);

typedef struct {
    const char *bridge;
    const char *gateway;
    const char *tap_prefix; /* session taps: "cs-" */
    guint http_port;        /* the proxy's HTTP intercept port */
    guint https_port;       /* its TLS intercept port */
    guint dns_port_first;   /* sessions' resolvers */
    guint dns_port_last;
    const guint *tls_ports; /* guest ports sent to the TLS intercept: 443 and policies' others */
    guint n_tls_ports;
} CarrelNetEgressFirewall;

/* Pure generator: an nft script replacing the tables inet and bridge carrel_egress atomically. */
char *carrel_net_egress_nft(const CarrelNetEgressFirewall *fw, GError **error);
/* Pure generator: an nft script adding (or deleting) one session's resolver port and its
 * tap/address pair. */
char *carrel_net_egress_nft_session(gboolean add, const char *address, guint dns_port,
                                    const char *tap, GError **error);

typedef struct {
    const char *gateway;
    guint http_port;
    guint https_port;
    guint local_port;          /* squid's forward port, on 127.0.0.1 (unused, but required) */
    const char *subnet;        /* the sessions' addresses: nobody else is served */
    const char *upstream_dns;  /* what squid resolves with: the same as the sessions' resolvers */
    const char *helper;        /* the external ACL helper, and its one argument: */
    const char *helper_socket; /* carreld's decision socket */
    const char *ca_pem;        /* certificate and key for the TLS intercept port */
    const char *ssl_db;
    const char *certgen; /* security_file_certgen */
    const char *access_log;
    const char *cache_log;
    const char *pid_file;
    const char *user;        /* squid's own user (Debian: proxy) */
    char **headers;          /* secret headers: header i is set from note carrel_hdr_i */
    const char *upstream_ca; /* extra CAs for decrypted connections' servers, or NULL */
} CarrelNetSquidSpec;

/* Pure generator: squid.conf for the egress proxy (transparent HTTP; TLS by SNI, spliced, and
 * decrypted only where carreld's answer carries the note carrel_bump=yes; every request decided
 * by carreld through the helper, whose answer may carry a secret header as note carrel_hdr_I:
 * the guest's own header of that name is dropped, carreld's sent). */
char *carrel_net_squid_conf(const CarrelNetSquidSpec *spec, GError **error);

typedef struct {
    const char *gateway;
    guint port;
    const char *upstream;
    gboolean open;  /* resolve every name but refuse's */
    char **resolve; /* names forwarded upstream (with their subdomains); others NXDOMAIN */
    char **refuse;  /* names answered NXDOMAIN */
} CarrelNetDnsSpec;

/* Pure generator: one session's dnsmasq.conf. */
char *carrel_net_dnsmasq_conf(const CarrelNetDnsSpec *spec, GError **error);

/*
 * TRUE for an address no session may reach whatever its policy (net-addr.c): private (RFC 1918,
 * ULA), loopback, link-local (169.254.169.254 too), CGNAT, multicast, reserved, and IPv6 forms
 * embedding an IPv4 address. Documentation ranges are not internal (the stand-in internet).
 */
gboolean carrel_net_address_is_internal(GInetAddress *addr);
/* The same for text: an address, or a range "ADDR/PREFIX" (by its first address); FALSE when
 * text is neither. */
gboolean carrel_net_text_is_internal(const char *text);

G_END_DECLS
