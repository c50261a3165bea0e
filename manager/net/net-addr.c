/*
 * Addresses no session may reach, whatever its policy says: the host's and the LAN's, the
 * cloud's metadata service, other sessions, multicast. Pure.
 */
#include <string.h>

#include "net/net.h"

/*
 * Private, loopback, link-local (169.254.169.254 included), CGNAT, "this network", benchmark,
 * reserved and multicast ranges; for IPv6 also the forms that embed an IPv4 address (mapped,
 * NAT64, 6to4), since what they embed could be any of the above. The documentation ranges
 * (192.0.2.0/24, 198.51.100.0/24, 203.0.113.0/24, 2001:db8::/32) are not here: nothing answers
 * there on the internet, and the e2e tier's stand-in internet lives in them.
 */
static const char *const internal_ranges[] = {
    "0.0.0.0/8",     "10.0.0.0/8",   "100.64.0.0/10",  "127.0.0.0/8",   "169.254.0.0/16",
    "172.16.0.0/12", "192.0.0.0/24", "192.168.0.0/16", "198.18.0.0/15", "224.0.0.0/4",
    "240.0.0.0/4",   "::/127",       "::ffff:0:0/96",  "64:ff9b::/96",  "100::/64",
    "2002::/16",     "fc00::/7",     "fe80::/10",      "fec0::/10",     "ff00::/8",
};

gboolean
carrel_net_address_is_internal(GInetAddress *addr)
{
    for (gsize i = 0; i < G_N_ELEMENTS(internal_ranges); i++) {
        g_autoptr(GInetAddressMask) mask =
            g_inet_address_mask_new_from_string(internal_ranges[i], NULL);
        if (mask && g_inet_address_mask_matches(mask, addr))
            return TRUE;
    }
    return FALSE;
}

gboolean
carrel_net_text_is_internal(const char *text)
{
    g_autoptr(GInetAddress) addr = NULL;
    g_autoptr(GInetAddressMask) range = NULL;

    if (!text)
        return FALSE;
    /* A range ("10.0.0.0/8") is internal when its first address is: masks are aligned. */
    range = strchr(text, '/') ? g_inet_address_mask_new_from_string(text, NULL) : NULL;
    if (range)
        return carrel_net_address_is_internal(g_inet_address_mask_get_address(range));
    addr = g_inet_address_new_from_string(text);
    return addr && carrel_net_address_is_internal(addr);
}
