#include <string.h>

#include "net/net.h"

#define LISTEN_MAX_LEN 64

/* Splits "HOST:PORT" or "[V6]:PORT"; the host comes back without brackets. */
static gboolean
split_host_port(const char *text, char **ret_host, char **ret_port, gboolean *ret_bracketed,
                GError **error)
{
    const char *colon;

    if (text[0] == '[') {
        const char *close = strchr(text, ']');
        if (!close || close[1] != ':') {
            g_set_error(error, CARREL_ERROR, CARREL_ERROR_INVALID_ARG,
                        "listen address '%s' must be HOST:PORT or [IPV6]:PORT", text);
            return FALSE;
        }
        *ret_host = g_strndup(text + 1, (gsize)(close - text - 1));
        *ret_port = g_strdup(close + 2);
        *ret_bracketed = TRUE;
        return TRUE;
    }
    colon = strchr(text, ':');
    /* More than one colon without brackets is an IPv6 address whose port cannot be told apart. */
    if (!colon || strchr(colon + 1, ':')) {
        g_set_error(error, CARREL_ERROR, CARREL_ERROR_INVALID_ARG,
                    "listen address '%s' must be HOST:PORT or [IPV6]:PORT", text);
        return FALSE;
    }
    *ret_host = g_strndup(text, (gsize)(colon - text));
    *ret_port = g_strdup(colon + 1);
    *ret_bracketed = FALSE;
    return TRUE;
}

/* Port 0 is any free port: carreld writes the one bound to web.url in its state directory. */
static gboolean
parse_port(const char *text, const char *port, guint16 *ret_port, GError **error)
{
    guint64 value = 0;
    gsize len = strlen(port);

    if (len == 0 || len > 5 || strspn(port, "0123456789") != len ||
        !g_ascii_string_to_unsigned(port, 10, 0, 65535, &value, NULL)) {
        g_set_error(error, CARREL_ERROR, CARREL_ERROR_INVALID_ARG,
                    "port '%s' in listen address '%s' must be a number from 0 to 65535", port,
                    text);
        return FALSE;
    }
    *ret_port = (guint16)value;
    return TRUE;
}

/*
 * Numeric addresses only: a name would go through the resolver (and /etc/hosts), which could
 * map it anywhere. "localhost" alone is taken, always as 127.0.0.1, without resolving it.
 */
static GInetAddress *
parse_host(const char *text, const char *host, gboolean bracketed, GError **error)
{
    g_autoptr(GInetAddress) addr = NULL;

    if (!bracketed && g_ascii_strcasecmp(host, "localhost") == 0)
        return g_inet_address_new_loopback(G_SOCKET_FAMILY_IPV4);
    /* Scope ids ("fe80::1%eth0") name an interface, not an address: refused before GLib parses
     * them, so a listener is always one plain address. */
    if (*host && !strchr(host, '%'))
        addr = g_inet_address_new_from_string(host);
    if (!addr || (bracketed != (g_inet_address_get_family(addr) == G_SOCKET_FAMILY_IPV6))) {
        g_set_error(error, CARREL_ERROR, CARREL_ERROR_INVALID_ARG,
                    "host '%s' in listen address '%s' must be a numeric IP address (IPv6 in "
                    "brackets) or 'localhost'",
                    host, text);
        return NULL;
    }
    return g_steal_pointer(&addr);
}

GSocketAddress *
carrel_net_parse_listen(const char *text, gboolean tls, GError **error)
{
    g_autofree char *host = NULL;
    g_autofree char *port_text = NULL;
    g_autoptr(GInetAddress) addr = NULL;
    gboolean bracketed = FALSE;
    guint16 port = 0;

    if (!text || strlen(text) > LISTEN_MAX_LEN || !carrel_util_is_clean_text(text)) {
        g_set_error(error, CARREL_ERROR, CARREL_ERROR_INVALID_ARG,
                    "listen address must be HOST:PORT of at most %d printable characters",
                    LISTEN_MAX_LEN);
        return NULL;
    }
    if (!split_host_port(text, &host, &port_text, &bracketed, error) ||
        !parse_port(text, port_text, &port, error))
        return NULL;
    addr = parse_host(text, host, bracketed, error);
    if (!addr)
        return NULL;
    /* Cookies and tokens cross this listener: in the clear, only on the host itself. */
    if (!tls && !g_inet_address_get_is_loopback(addr)) {
        g_set_error(error, CARREL_ERROR, CARREL_ERROR_POLICY_DENIED,
                    "listen address '%s' is not a loopback address: without TLS only "
                    "127.0.0.0/8 and [::1] are allowed, so the API is never reachable in the "
                    "clear from another host",
                    text);
        return NULL;
    }
    return g_inet_socket_address_new(addr, port);
}
