/*
 * egress: reading what squid and dnsmasq write. Pure: lines in, records out. Both programs are
 * ours, but what they log comes from guests (names, SNI), so every field is checked.
 */
#include <string.h>

#include "egress/egress.h"

/* Fields of the "carrel" logformat, in order (see carrel_net_squid_conf). */
enum {
    F_TIME,
    F_SOURCE,
    F_ADDRESS,
    F_PORT,
    F_SNI,
    F_URL_HOST,
    F_SERVER,
    F_SCHEME,
    F_METHOD,
    F_STATUS,
    F_BUMP,
    F_WORD,
    F_OUT,
    F_IN,
    F_MS,
    F_COUNT
};

static gboolean
to_int(const char *text, gint64 max, gint64 *ret)
{
    guint64 v = 0;

    if (!g_ascii_string_to_unsigned(text, 10, 0, (guint64)max, &v, NULL))
        return FALSE;
    *ret = (gint64)v;
    return TRUE;
}

/* "1733070000.123" -> microseconds. */
static gboolean
parse_time(const char *text, gint64 *ret_us)
{
    g_auto(GStrv) parts = g_strsplit(text, ".", 2);
    gint64 s = 0, ms = 0;

    if (!parts[0] || !parts[1] || !to_int(parts[0], G_MAXINT32 * G_GINT64_CONSTANT(4), &s) ||
        !to_int(parts[1], 999, &ms))
        return FALSE;
    *ret_us = s * G_USEC_PER_SEC + ms * 1000;
    return TRUE;
}

static const char *
decision_of(const char *word, const char *status)
{
    static const struct {
        const char *word;
        const char *decision;
    } words[] = {
        {"allow", "allowed"},       {"deny", "denied"},        {"deny-raw-ip", "denied"},
        {"deny-host", "denied"},    {"ask-allow", "approved"}, {"ask-deny", "refused"},
        {"ask-timeout", "expired"},
    };

    for (gsize i = 0; i < G_N_ELEMENTS(words); i++)
        if (g_str_equal(word, words[i].word))
            return words[i].decision;
    /* No answer from carreld: squid refused by itself (a forged Host, a TLS port without a
     * name), or this is a step before the decision. */
    return g_str_has_prefix(status, "TCP_TUNNEL") || g_str_has_prefix(status, "TCP_MISS")
               ? "allowed"
               : "denied";
}

static char *
name_of(char **f)
{
    const char *name = !g_str_equal(f[F_SNI], "-") ? f[F_SNI] : f[F_URL_HOST];
    g_autofree char *unescaped = g_uri_unescape_string(name, NULL);

    /* A guest's words: printable, and not a whole page. */
    if (!unescaped || !carrel_util_is_clean_text(unescaped) || strlen(unescaped) > 255)
        return g_strdup("(unreadable)");
    return g_ascii_strdown(unescaped, -1);
}

CarrelEgressRecord *
carrel_egress_parse_squid_line(const char *line, char **ret_source)
{
    g_auto(GStrv) f = g_strsplit(line, " ", -1);
    g_autoptr(CarrelEgressRecord) rec = carrel_egress_record_new();
    gint64 port = 0;
    gboolean tls;

    *ret_source = NULL;
    if (g_strv_length(f) != F_COUNT || !parse_time(f[F_TIME], &rec->ts_us) ||
        !g_hostname_is_ip_address(f[F_SOURCE]) || !to_int(f[F_PORT], 65535, &port) ||
        !to_int(f[F_OUT], G_MAXINT64, &rec->bytes_out) ||
        !to_int(f[F_IN], G_MAXINT64, &rec->bytes_in) ||
        !to_int(f[F_MS], G_MAXINT64, &rec->duration_ms))
        return NULL;
    tls = g_str_equal(f[F_METHOD], "CONNECT") || !g_str_equal(f[F_BUMP], "-");
    /* A spliced connection is logged twice: once decided (no bytes yet), once closed. */
    if (tls && g_str_equal(f[F_BUMP], "splice") && g_str_has_prefix(f[F_STATUS], "NONE"))
        return NULL;
    rec->port = (guint)port;
    rec->name = name_of(f);
    rec->address = g_hostname_is_ip_address(f[F_ADDRESS]) ? g_strdup(f[F_ADDRESS]) : NULL;
    rec->protocol = g_strdup(tls ? "tls" : "http");
    rec->decision = g_strdup(decision_of(f[F_WORD], f[F_STATUS]));
    *ret_source = g_strdup(f[F_SOURCE]);
    return g_steal_pointer(&rec);
}

char *
carrel_egress_parse_dnsmasq_line(const char *line)
{
    const char *at = strstr(line, " config ");
    const char *end;
    g_autofree char *name = NULL;

    if (!at || !g_str_has_suffix(line, " is NXDOMAIN"))
        return NULL;
    at += strlen(" config ");
    end = line + strlen(line) - strlen(" is NXDOMAIN");
    if (end <= at || end - at > 255)
        return NULL;
    name = g_ascii_strdown(at, end - at);
    return carrel_util_is_clean_text(name) && !strchr(name, ' ') ? g_steal_pointer(&name) : NULL;
}
