/*
 * api: the web console's cookie sessions. The browser holds the token only to log in: the cookie
 * stands for it after that, and every request asks core again who it is. Changes that come with
 * the cookie must come from the console's own origin.
 */
#include "api/api-priv.h"

#define COOKIE_SESSION_TTL_US (12 * G_TIME_SPAN_HOUR)
#define COOKIE_SESSIONS_MAX 1024

/* A login keeps the token's id only: every request asks core again, so a revoked or expired
 * token ends its cookies at once. */
typedef struct {
    char *token_id;
    gint64 expires_us;
} CarrelApiCookieSession;

static void
cookie_session_free(gpointer data)
{
    CarrelApiCookieSession *cs = data;

    g_free(cs->token_id);
    g_free(cs);
}

static void
ensure_table(CarrelApi *api)
{
    if (!api->cookie_sessions)
        api->cookie_sessions =
            g_hash_table_new_full(g_str_hash, g_str_equal, g_free, cookie_session_free);
}

static gboolean
expired(gpointer key, gpointer value, gpointer now)
{
    return ((CarrelApiCookieSession *)value)->expires_us <= *(gint64 *)now;
}

char *
carrel_api_cookie_login(CarrelApi *api, const CarrelPrincipal *who)
{
    g_autoptr(GMutexLocker) locker G_GNUC_UNUSED = g_mutex_locker_new(&api->cookie_lock);
    CarrelApiCookieSession *cs = g_new0(CarrelApiCookieSession, 1);
    g_autofree char *value = carrel_util_new_token();
    gint64 now = g_get_monotonic_time();

    ensure_table(api);
    g_hash_table_foreach_remove(api->cookie_sessions, expired, &now);
    /* A flood of logins must not grow memory without end: the table is bounded. */
    if (g_hash_table_size(api->cookie_sessions) >= COOKIE_SESSIONS_MAX)
        g_hash_table_remove_all(api->cookie_sessions);
    cs->token_id = g_strdup(who->token_id);
    cs->expires_us = now + COOKIE_SESSION_TTL_US;
    g_hash_table_replace(api->cookie_sessions, g_strdup(value), cs);
    /* Secure when carreld speaks TLS: the cookie never travels in the clear then. */
    return g_strdup_printf(CARREL_API_COOKIE "=%s; HttpOnly; SameSite=Strict; Path=/; Max-Age=%d%s",
                           value, (int)(COOKIE_SESSION_TTL_US / G_USEC_PER_SEC),
                           api->tls ? "; Secure" : "");
}

char *
carrel_api_cookie_get(SoupServerMessage *msg)
{
    SoupMessageHeaders *headers = soup_server_message_get_request_headers(msg);
    const char *header = soup_message_headers_get_list(headers, "Cookie");
    g_autoptr(GHashTable) pairs = NULL;
    const char *value;

    if (!header)
        return NULL;
    pairs = soup_header_parse_semi_param_list(header);
    value = g_hash_table_lookup(pairs, CARREL_API_COOKIE);
    return value && *value ? g_strdup(value) : NULL;
}

/* The token id of a cookie session, or NULL. */
static char *
cookie_token_id(CarrelApi *api, const char *cookie)
{
    g_autoptr(GMutexLocker) locker G_GNUC_UNUSED = g_mutex_locker_new(&api->cookie_lock);
    CarrelApiCookieSession *cs;

    if (!cookie || !api->cookie_sessions)
        return NULL;
    cs = g_hash_table_lookup(api->cookie_sessions, cookie);
    if (!cs || cs->expires_us <= g_get_monotonic_time())
        return NULL;
    return g_strdup(cs->token_id);
}

CarrelPrincipal *
carrel_api_cookie_lookup(CarrelApi *api, const char *cookie, GError **error)
{
    g_autofree char *token_id = cookie_token_id(api, cookie);

    if (!token_id) {
        g_set_error(error, CARREL_ERROR, CARREL_ERROR_UNAUTHORIZED, "console login expired");
        return NULL;
    }
    return carrel_manager_principal(api->mgr, token_id, error);
}

char *
carrel_api_cookie_logout(CarrelApi *api, const char *cookie)
{
    if (cookie) {
        g_autoptr(GMutexLocker) locker G_GNUC_UNUSED = g_mutex_locker_new(&api->cookie_lock);
        if (api->cookie_sessions)
            g_hash_table_remove(api->cookie_sessions, cookie);
    }
    return g_strdup(CARREL_API_COOKIE "=; HttpOnly; SameSite=Strict; Path=/; Max-Age=0");
}

/*
 * Over TLS only https://HOST is the console's origin. A page of http://HOST would come from
 * whoever answers plain HTTP on the way (a network attacker), and browsers without schemeful
 * same-site still send it the Strict cookie. Over plain HTTP, https://HOST is what a proxy that
 * ends TLS in front of the loopback listener passes on.
 */
gboolean
carrel_api_same_origin(SoupServerMessage *msg)
{
    SoupMessageHeaders *headers = soup_server_message_get_request_headers(msg);
    const char *origin = soup_message_headers_get_one(headers, "Origin");
    const char *host = soup_message_headers_get_one(headers, "Host");
    /* libsoup's scheme says whether the connection is TLS (a client that sends an absolute URI
     * picks its own, but that is no browser, and it could send any Origin anyway). */
    gboolean tls = g_strcmp0(g_uri_get_scheme(soup_server_message_get_uri(msg)), "https") == 0;
    g_autofree char *http = NULL;
    g_autofree char *https = NULL;

    if (!origin || !host)
        return FALSE;
    https = g_strconcat("https://", host, NULL);
    if (g_str_equal(origin, https))
        return TRUE;
    if (tls)
        return FALSE;
    http = g_strconcat("http://", host, NULL);
    return g_str_equal(origin, http);
}
