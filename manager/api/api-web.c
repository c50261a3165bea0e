/*
 * api: what the web console needs beyond JSON routes: cookie sessions (the browser never holds
 * the token after login), static files and a server-sent event stream.
 */
#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "api/api-priv.h"

#define WEB_SESSION_TTL_US (12 * G_TIME_SPAN_HOUR)
#define WEB_SESSIONS_MAX 1024
#define STATIC_FILE_MAX (8 * 1024 * 1024)
#define STREAM_INTERVAL_MS 1000
#define STREAM_KEEPALIVE_TICKS 15
#define STREAM_EVENTS_MAX 200

/* Scripts, styles and images only from here; no inline code; sockets only back to carreld. */
#define WEB_CSP                                                                                    \
    "default-src 'self'; img-src 'self' data: blob:; connect-src 'self' ws: wss:; "                \
    "style-src 'self'; script-src 'self'; media-src 'self' blob:; object-src 'none'; "             \
    "base-uri 'none'; form-action 'self'; frame-ancestors 'none'"

/* A login keeps the token's id only: every request asks core again, so a revoked or expired
 * token ends its cookies at once. */
typedef struct {
    char *token_id;
    gint64 expires_us;
} CarrelApiWebSession;

static void
web_session_free(gpointer data)
{
    CarrelApiWebSession *ws = data;

    g_free(ws->token_id);
    g_free(ws);
}

static void
ensure_table(CarrelApi *api)
{
    if (!api->web_sessions)
        api->web_sessions =
            g_hash_table_new_full(g_str_hash, g_str_equal, g_free, web_session_free);
}

static gboolean
expired(gpointer key, gpointer value, gpointer now)
{
    return ((CarrelApiWebSession *)value)->expires_us <= *(gint64 *)now;
}

char *
carrel_api_web_login(CarrelApi *api, const CarrelPrincipal *who)
{
    g_autoptr(GMutexLocker) locker G_GNUC_UNUSED = g_mutex_locker_new(&api->web_lock);
    CarrelApiWebSession *ws = g_new0(CarrelApiWebSession, 1);
    char *value = carrel_util_new_token();
    gint64 now = g_get_monotonic_time();

    ensure_table(api);
    g_hash_table_foreach_remove(api->web_sessions, expired, &now);
    /* A flood of logins must not grow memory without end: the table is bounded. */
    if (g_hash_table_size(api->web_sessions) >= WEB_SESSIONS_MAX)
        g_hash_table_remove_all(api->web_sessions);
    ws->token_id = g_strdup(who->token_id);
    ws->expires_us = now + WEB_SESSION_TTL_US;
    g_hash_table_replace(api->web_sessions, g_strdup(value), ws);
    /* Secure when carreld speaks TLS: the cookie never travels in the clear then. */
    return g_strdup_printf(CARREL_API_COOKIE "=%s; HttpOnly; SameSite=Strict; Path=/; Max-Age=%d%s",
                           g_steal_pointer(&value), (int)(WEB_SESSION_TTL_US / G_USEC_PER_SEC),
                           api->tls ? "; Secure" : "");
}

char *
carrel_api_web_cookie(SoupServerMessage *msg)
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
    g_autoptr(GMutexLocker) locker G_GNUC_UNUSED = g_mutex_locker_new(&api->web_lock);
    CarrelApiWebSession *ws;

    if (!cookie || !api->web_sessions)
        return NULL;
    ws = g_hash_table_lookup(api->web_sessions, cookie);
    if (!ws || ws->expires_us <= g_get_monotonic_time())
        return NULL;
    return g_strdup(ws->token_id);
}

CarrelPrincipal *
carrel_api_web_lookup(CarrelApi *api, const char *cookie, GError **error)
{
    g_autofree char *token_id = cookie_token_id(api, cookie);

    if (!token_id) {
        g_set_error(error, CARREL_ERROR, CARREL_ERROR_UNAUTHORIZED, "console login expired");
        return NULL;
    }
    return carrel_manager_principal(api->mgr, token_id, error);
}

char *
carrel_api_web_logout(CarrelApi *api, const char *cookie)
{
    if (cookie) {
        g_autoptr(GMutexLocker) locker G_GNUC_UNUSED = g_mutex_locker_new(&api->web_lock);
        if (api->web_sessions)
            g_hash_table_remove(api->web_sessions, cookie);
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

/* ---- static files ---- */

static const char *
content_type(const char *path)
{
    static const char *const table[][2] = {
        {".html", "text/html; charset=utf-8"},
        {".js", "text/javascript; charset=utf-8"},
        {".mjs", "text/javascript; charset=utf-8"},
        {".css", "text/css; charset=utf-8"},
        {".svg", "image/svg+xml"},
        {".png", "image/png"},
        {".ico", "image/x-icon"},
        {".json", "application/json"},
        {".txt", "text/plain; charset=utf-8"},
    };

    for (gsize i = 0; i < G_N_ELEMENTS(table); i++) {
        if (g_str_has_suffix(path, table[i][0]))
            return table[i][1];
    }
    return NULL;
}

/* Path segments that stay inside the served folder: no dot files, no '..', no backslashes. */
static gboolean
static_path_ok(const char *rel)
{
    g_auto(GStrv) parts = g_strsplit(rel, "/", -1);

    if (!*rel || strlen(rel) > 256)
        return FALSE;
    for (guint i = 0; parts[i]; i++) {
        if (parts[i][0] == '\0' || parts[i][0] == '.' || strchr(parts[i], '\\') ||
            !carrel_util_is_clean_text(parts[i]))
            return FALSE;
    }
    return TRUE;
}

/* Reads root/rel: a regular file, opened without following a symlink at its last component. */
static GBytes *
read_static(const char *root, const char *rel)
{
    g_autofree char *path = g_build_filename(root, rel, NULL);
    g_autofree char *data = NULL;
    struct stat st;
    gssize got;
    int fd;

    fd = open(path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0)
        return NULL;
    if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode) || st.st_size > STATIC_FILE_MAX) {
        close(fd);
        return NULL;
    }
    data = g_malloc(st.st_size + 1);
    got = read(fd, data, st.st_size);
    close(fd);
    if (got != st.st_size)
        return NULL;
    return g_bytes_new_take(g_steal_pointer(&data), st.st_size);
}

static CarrelApiReply *
static_error(guint status, const char *text)
{
    return carrel_api_reply_new_bytes(status, g_bytes_new_static(text, strlen(text)),
                                      "text/plain; charset=utf-8");
}

CarrelApiReply *
carrel_api_web_static(CarrelApi *api, const char *method, const char *path)
{
    g_autofree char *decoded = g_uri_unescape_string(path, NULL);
    const char *root = api->web_dir;
    const char *rel;
    const char *type;
    GBytes *body = NULL;
    CarrelApiReply *reply;

    if (!g_str_equal(method, "GET") && !g_str_equal(method, "HEAD"))
        return static_error(SOUP_STATUS_METHOD_NOT_ALLOWED, "method not allowed\n");
    rel = decoded ? decoded + 1 : "";
    if (g_str_equal(rel, ""))
        rel = "index.html";
    if (g_str_has_prefix(rel, "spice-html5/")) {
        root = api->spice_dir;
        rel += strlen("spice-html5/");
    }
    type = content_type(rel);
    if (!root || !decoded || !static_path_ok(rel) || !type || !(body = read_static(root, rel)))
        return static_error(SOUP_STATUS_NOT_FOUND, "not found\n");
    reply = carrel_api_reply_new_bytes(SOUP_STATUS_OK, body, type);
    carrel_api_reply_add_header(reply, "Content-Security-Policy", WEB_CSP);
    carrel_api_reply_add_header(reply, "X-Content-Type-Options", "nosniff");
    carrel_api_reply_add_header(reply, "Referrer-Policy", "no-referrer");
    carrel_api_reply_add_header(reply, "Cache-Control", "no-cache");
    return reply;
}

/* ---- the event stream ---- */

typedef struct {
    CarrelApi *api;
    SoupServerMessage *msg;
    CarrelPrincipal *who; /* asked again every tick: a revoked token ends the stream */
    char *session_id;     /* NULL = no timeline */
    char *last_sessions;
    char *last_approvals;
    gint64 last_seq;
    guint ticks;
    guint timer;
} Stream;

static void
stream_free(Stream *st)
{
    if (st->timer)
        g_source_remove(st->timer);
    carrel_principal_free(st->who);
    g_free(st->session_id);
    g_free(st->last_sessions);
    g_free(st->last_approvals);
    g_free(st);
}

static void
stream_send(Stream *st, const char *event, const char *data)
{
    SoupMessageBody *body = soup_server_message_get_response_body(st->msg);
    g_autofree char *chunk = event ? g_strdup_printf("event: %s\ndata: %s\n\n", event, data)
                                   : g_strdup(": keepalive\n\n");

    soup_message_body_append(body, SOUP_MEMORY_COPY, chunk, strlen(chunk));
    soup_server_message_unpause(st->msg);
}

static char *
list_text(const char *member, GPtrArray *items, CarrelApiItemJson to_json, gpointer data)
{
    g_autoptr(JsonNode) root = NULL;

    if (!items)
        return NULL;
    root = carrel_api_list_of(member, items, to_json, data);
    return json_to_string(root, FALSE);
}

static char *
sessions_text(Stream *st)
{
    CarrelApiView view = {st->api->mgr, st->who};
    g_autoptr(GPtrArray) list = carrel_manager_session_list(view.mgr, st->who, FALSE, NULL);

    return list_text("sessions", list, carrel_api_session_item, &view);
}

static char *
approvals_text(Stream *st)
{
    g_autoptr(GPtrArray) list = carrel_manager_approval_list(st->api->mgr, st->who, TRUE, NULL);

    return list_text("approvals", list, carrel_api_approval_item, NULL);
}

static char *
timeline_text(Stream *st)
{
    g_autoptr(GPtrArray) events = carrel_manager_session_events(
        st->api->mgr, st->who, st->session_id, st->last_seq, STREAM_EVENTS_MAX, NULL);
    g_autofree char *text = NULL;

    if (!events || events->len == 0)
        return NULL;
    text = list_text("events", events, carrel_api_event_item, NULL);
    for (guint i = 0; i < events->len; i++)
        st->last_seq = MAX(st->last_seq, ((CarrelEvent *)g_ptr_array_index(events, i))->seq);
    return g_steal_pointer(&text);
}

/* Sends what changed since the last tick: a poll of the store, cheap at one per second. */
static gboolean
stream_tick(gpointer data)
{
    Stream *st = data;
    g_autoptr(CarrelPrincipal) still =
        carrel_manager_principal(st->api->mgr, st->who->token_id, NULL);
    g_autofree char *sessions = NULL;
    g_autofree char *approvals = NULL;
    g_autofree char *timeline = NULL;
    gboolean sent = FALSE;

    /* Revoked or expired: the stream ends now, as every other request of that token does. */
    if (!still) {
        soup_message_body_complete(soup_server_message_get_response_body(st->msg));
        soup_server_message_unpause(st->msg);
        st->timer = 0;
        return G_SOURCE_REMOVE;
    }
    sessions = sessions_text(st);
    approvals = approvals_text(st);
    timeline = st->session_id ? timeline_text(st) : NULL;

    if (sessions && g_strcmp0(sessions, st->last_sessions) != 0) {
        stream_send(st, "sessions", sessions);
        g_free(st->last_sessions);
        st->last_sessions = g_steal_pointer(&sessions);
        sent = TRUE;
    }
    if (approvals && g_strcmp0(approvals, st->last_approvals) != 0) {
        stream_send(st, "approvals", approvals);
        g_free(st->last_approvals);
        st->last_approvals = g_steal_pointer(&approvals);
        sent = TRUE;
    }
    if (timeline) {
        stream_send(st, "timeline", timeline);
        sent = TRUE;
    }
    /* Proxies and browsers drop a silent stream: a comment now and then keeps it open. */
    if (!sent && ++st->ticks >= STREAM_KEEPALIVE_TICKS) {
        stream_send(st, NULL, NULL);
        st->ticks = 0;
    }
    return G_SOURCE_CONTINUE;
}

static void
on_stream_finished(SoupServerMessage *msg, gpointer data)
{
    stream_free(data);
}

void
carrel_api_stream_start(CarrelApi *api, SoupServerMessage *msg, const CarrelPrincipal *who,
                        const char *session_id)
{
    SoupMessageHeaders *out = soup_server_message_get_response_headers(msg);
    Stream *st = g_new0(Stream, 1);

    st->api = api;
    st->msg = msg;
    st->who = carrel_principal_copy(who);
    st->session_id = g_strdup(session_id);
    soup_server_message_set_status(msg, SOUP_STATUS_OK, NULL);
    soup_message_headers_set_encoding(out, SOUP_ENCODING_CHUNKED);
    soup_message_headers_replace(out, "Content-Type", "text/event-stream");
    soup_message_headers_replace(out, "Cache-Control", "no-store");
    g_signal_connect(msg, "finished", G_CALLBACK(on_stream_finished), st);
    stream_tick(st);
    st->timer = g_timeout_add(STREAM_INTERVAL_MS, stream_tick, st);
}

CarrelApiReply *
carrel_api_get_stream(CarrelApiRequest *req, GError **error)
{
    return carrel_api_reply_new_stream(req->who, carrel_api_query(req, "session"));
}
