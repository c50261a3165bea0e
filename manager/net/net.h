/* net: address rules (plain HTTP on loopback only), the isolated session network and NIC MACs;
 * the egress proxy later. */
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
