#include <errno.h>
#include <glib/gstdio.h>
#include <string.h>
#include <gio/gunixsocketaddress.h>
#include <sys/stat.h>

#include "api/api-console-priv.h"

#define REQUEST_ID_MAX 64

/* Failed credentials a source may send in a window before it waits (429). */
#define LOGIN_FAILURES_MAX 10
#define LOGIN_WINDOW_S 60
/* Retry-After of core's [limits] refusals (seconds, as the header says it). */
#define CORE_RETRY_AFTER_S "5"

typedef struct {
    CarrelApi *api;
    SoupServerMessage *msg;
    CarrelApiRequest *req;
    const CarrelApiRoute *route;
    gint64 started;
    CarrelApiReply *reply;
    GMainContext *context; /* the API's, held: a worker finishing at exit never reads api */
} Exchange;

static void
request_free(CarrelApiRequest *req)
{
    g_free(req->method);
    g_free(req->path);
    g_clear_pointer(&req->params, g_ptr_array_unref);
    g_clear_pointer(&req->query, g_hash_table_unref);
    g_clear_pointer(&req->body, json_node_unref);
    if (req->typed)
        req->typed_free(req->typed);
    g_clear_pointer(&req->raw_body, g_bytes_unref);
    if (req->upload_path)
        (void)g_unlink(req->upload_path); /* gone already when core stored it */
    g_free(req->upload_path);
    g_clear_error(&req->upload_error);
    carrel_principal_free(req->who);
    g_free(req->source);
    g_free(req->cookie);
    g_free(req->request_id);
    g_free(req->origin);
    g_free(req->mcp_protocol_version);
    g_free(req->range);
    g_free(req);
}

static void
exchange_free(Exchange *ex)
{
    g_clear_pointer(&ex->req, request_free);
    g_clear_pointer(&ex->reply, carrel_api_reply_free);
    g_clear_object(&ex->msg);
    g_clear_pointer(&ex->context, g_main_context_unref);
    g_free(ex);
}

static gboolean
request_id_ok(const char *id)
{
    gsize len = id ? strlen(id) : 0;

    if (len == 0 || len > REQUEST_ID_MAX)
        return FALSE;
    for (gsize i = 0; i < len; i++) {
        if (!g_ascii_isalnum(id[i]) && id[i] != '-' && id[i] != '_' && id[i] != '.')
            return FALSE;
    }
    return TRUE;
}

/* Writes ex's reply with the request's id; nothing a route answers is cached. */
static void
send_reply(Exchange *ex)
{
    SoupMessageHeaders *headers = soup_server_message_get_response_headers(ex->msg);
    gint64 ms = (g_get_monotonic_time() - ex->started) / 1000;

    soup_message_headers_replace(headers, "X-Request-Id", ex->req->request_id);
    if (!carrel_api_reply_get_header(ex->reply, "Cache-Control"))
        carrel_api_reply_add_header(ex->reply, "Cache-Control", "no-store");
    carrel_api_reply_write(ex->reply, ex->api, ex->msg);
    carrel_api_count_reply(ex->api, ex->req->method, ex->req->path, ex->route, ex->reply);
    /* Method and path only: never headers, so tokens stay out of the log. */
    g_message("request %s: %s %s -> %u (%" G_GINT64_FORMAT " ms)%s", ex->req->request_id,
              ex->req->method, ex->req->path, carrel_api_reply_get_status(ex->reply), ms,
              carrel_api_reply_get_kind(ex->reply) == CARREL_API_REPLY_STREAM ||
                      carrel_api_reply_get_kind(ex->reply) == CARREL_API_REPLY_EXEC ||
                      carrel_api_reply_get_kind(ex->reply) == CARREL_API_REPLY_SHELL
                  ? " (stream opened)"
                  : "");
}

/* The route's typed request from the body, before its handler runs. */
static gboolean
parse_typed(CarrelApiRequest *req, const CarrelApiRoute *route, GError **error)
{
    if (!route->body)
        return TRUE;
    req->typed = route->body->parse(req->body, error);
    req->typed_free = route->body->free;
    return req->typed != NULL;
}

/* Runs ex's handler (a worker thread, or the main loop for inline routes). */
static void
run_handler(Exchange *ex)
{
    g_autoptr(GError) error = NULL;

    ex->reply =
        parse_typed(ex->req, ex->route, &error) ? ex->route->handler(ex->req, &error) : NULL;
    if (!ex->reply) {
        if (!error)
            g_set_error(&error, CARREL_ERROR, CARREL_ERROR_INTERNAL, "route '%s %s' gave no reply",
                        ex->route->method, ex->route->pattern);
        ex->reply = carrel_api_reply_new_error(0, error);
        /* Core's limits (sessions, creates) free up when something else ends: a guess. */
        if (g_error_matches(error, CARREL_ERROR, CARREL_ERROR_RATE_LIMITED))
            carrel_api_reply_add_header(ex->reply, "Retry-After", CORE_RETRY_AFTER_S);
    }
    /* Long lists are serialized here, not on the main loop that health is answered on. */
    carrel_api_reply_render(ex->reply);
}

/* Back on the main loop: the reply goes out (libsoup is not thread-safe). */
static gboolean
on_handler_done(gpointer user_data)
{
    Exchange *ex = user_data;

    send_reply(ex);
    soup_server_message_unpause(ex->msg);
    g_atomic_int_dec_and_test(&ex->api->in_flight);
    exchange_free(ex);
    return G_SOURCE_REMOVE;
}

/* A worker of a class's pool. */
static void
pool_run(gpointer item, gpointer user_data)
{
    Exchange *ex = item;
    g_autoptr(GSource) done = g_idle_source_new();

    run_handler(ex);
    g_source_set_callback(done, on_handler_done, ex, NULL);
    g_source_attach(done, ex->context);
}

static char *
bearer_token(SoupServerMessage *msg)
{
    SoupMessageHeaders *headers = soup_server_message_get_request_headers(msg);
    const char *auth = soup_message_headers_get_one(headers, "Authorization");

    if (!auth || g_ascii_strncasecmp(auth, "Bearer ", 7) != 0)
        return NULL;
    return g_strstrip(g_strdup(auth + 7));
}

static gboolean
safe_method(const char *method)
{
    return g_str_equal(method, "GET") || g_str_equal(method, "HEAD");
}

/* Where a request comes from, for the limit on failed credentials. */
static char *
request_source(SoupServerMessage *msg)
{
    const char *host = soup_server_message_get_remote_host(msg);

    return g_strdup(host ? host : "unix");
}

/* A source that failed too often waits: 429 with Retry-After, before any token is looked at. */
CarrelApiReply *
carrel_api_login_limit_reply(CarrelApi *api, const char *source)
{
    g_autoptr(GError) error = NULL;
    g_autofree char *after = NULL;
    CarrelApiReply *reply;
    guint retry_s = 0;

    /* The socket is root's alone (mode 0600): nobody there to slow down, and a flood on TCP
     * must never lock the operator's CLI out. */
    if (g_str_equal(source, "unix") ||
        carrel_api_limiter_check(api->login_limiter, source, g_get_monotonic_time(), &retry_s))
        return NULL;
    g_set_error(&error, CARREL_ERROR, CARREL_ERROR_LIMIT,
                "too many failed logins from this address: try again in %u s", retry_s);
    reply = carrel_api_reply_new_error(CARREL_HTTP_TOO_MANY_REQUESTS, error);
    after = g_strdup_printf("%u", retry_s);
    carrel_api_reply_add_header(reply, "Retry-After", after);
    return reply;
}

void
carrel_api_count_failed_login(CarrelApi *api, const char *source)
{
    if (g_str_equal(source, "unix"))
        return;
    carrel_api_limiter_fail(api->login_limiter, source, g_get_monotonic_time());
}

/* The principal of ex's credentials, or NULL with the error (see authenticate). */
static CarrelPrincipal *
principal_of(Exchange *ex, const char *token, GError **error)
{
    g_autoptr(GError) local = NULL;
    CarrelPrincipal *who = NULL;

    if (token)
        who = carrel_manager_authenticate(ex->api->mgr, token, &local);
    else if (ex->req->cookie)
        who = carrel_api_cookie_lookup(ex->api, ex->req->cookie, &local);
    if (who)
        return who;
    if (token || ex->req->cookie)
        carrel_api_count_failed_login(ex->api, ex->req->source);
    if (local)
        g_propagate_error(error, g_steal_pointer(&local));
    else
        g_set_error(error, CARREL_ERROR, CARREL_ERROR_UNAUTHORIZED,
                    "missing bearer token or console login");
    return NULL;
}

/*
 * A bearer token, else the web console's cookie (whose changes must come from its own pages).
 * Who it is comes from core; what they may do is core's to decide, verb by verb. NULL when the
 * request may go on, else the reply that refuses it.
 */
static CarrelApiReply *
authenticate(Exchange *ex, const CarrelApiRoute *route)
{
    g_autofree char *token = NULL;
    g_autoptr(GError) error = NULL;
    CarrelApiReply *limited;

    if (route && (route->flags & CARREL_API_ROUTE_PUBLIC))
        return NULL;
    token = bearer_token(ex->msg);
    if ((token || ex->req->cookie) &&
        (limited = carrel_api_login_limit_reply(ex->api, ex->req->source)))
        return limited;
    ex->req->who = principal_of(ex, token, &error);
    if (!ex->req->who)
        return carrel_api_reply_new_error(0, error);
    ex->req->by_cookie = !token;
    if (ex->req->by_cookie && !safe_method(ex->req->method) && !carrel_api_same_origin(ex->msg)) {
        g_set_error(&error, CARREL_ERROR, CARREL_ERROR_FORBIDDEN,
                    "a console request that changes something must come from the "
                    "console's own origin");
        return carrel_api_reply_new_error(0, error);
    }
    return NULL;
}

static gboolean
parse_body(Exchange *ex, const CarrelApiRoute *route, GError **error)
{
    SoupMessageBody *body = soup_server_message_get_request_body(ex->msg);
    gsize max = carrel_api_route_body_max(route);

    if (route->flags & CARREL_API_ROUTE_UPLOAD)
        return carrel_api_upload_check(ex->req, error);
    if (!body || body->length == 0)
        return TRUE;
    if ((gsize)body->length > max) {
        g_set_error(error, CARREL_ERROR, CARREL_ERROR_LIMIT,
                    "request body is larger than %" G_GSIZE_FORMAT " bytes", max);
        return FALSE;
    }
    if (route->flags & CARREL_API_ROUTE_RAW_BODY) {
        ex->req->raw_body = g_bytes_new(body->data, body->length);
        return TRUE;
    }
    ex->req->body = carrel_conf_parse_json(body->data, body->length, error);
    if (!ex->req->body)
        return FALSE;
    if (!JSON_NODE_HOLDS_OBJECT(ex->req->body)) {
        g_set_error(error, CARREL_ERROR, CARREL_ERROR_INVALID_ARG,
                    "request body must be a JSON object");
        return FALSE;
    }
    return TRUE;
}

static Exchange *
exchange_new(CarrelApi *api, SoupServerMessage *msg, GHashTable *query)
{
    Exchange *ex = g_new0(Exchange, 1);
    SoupMessageHeaders *headers = soup_server_message_get_request_headers(msg);
    const char *given_id = soup_message_headers_get_one(headers, "X-Request-Id");
    const char *started_id;
    GUri *uri = soup_server_message_get_uri(msg);

    ex->api = api;
    ex->context = g_main_context_ref(api->context);
    ex->msg = g_object_ref(msg);
    ex->started = g_get_monotonic_time();
    ex->req = g_new0(CarrelApiRequest, 1);
    ex->req->api = api;
    ex->req->mgr = api->mgr;
    ex->req->version_info = api->version_info;
    ex->req->method = g_strdup(soup_server_message_get_method(msg));
    ex->req->path = g_strdup(g_uri_get_path(uri));
    ex->req->query = query ? g_hash_table_ref(query) : NULL;
    /* The id on_request_started gave, unless the client sent its own: one new id a request. */
    started_id =
        soup_message_headers_get_one(soup_server_message_get_response_headers(msg), "X-Request-Id");
    ex->req->request_id = request_id_ok(given_id)     ? g_strdup(given_id)
                          : request_id_ok(started_id) ? g_strdup(started_id)
                                                      : carrel_util_new_id("r-");
    ex->req->origin = g_strdup(soup_message_headers_get_one(headers, "Origin"));
    ex->req->websocket = soup_websocket_server_check_handshake(msg, NULL, NULL, NULL, NULL);
    ex->req->same_origin = carrel_api_same_origin(msg);
    ex->req->mcp_protocol_version =
        g_strdup(soup_message_headers_get_one(headers, "MCP-Protocol-Version"));
    ex->req->range = g_strdup(soup_message_headers_get_one(headers, "Range"));
    ex->req->source = request_source(msg);
    ex->req->cookie = carrel_api_cookie_get(msg);
    carrel_api_upload_spool_take(msg, ex->req);
    return ex;
}

/* A refusal with Retry-After: 429 for a token's limit, 503 for a full queue. */
static CarrelApiReply *
retry_later_reply(const GError *error, guint retry_s)
{
    CarrelApiReply *reply = carrel_api_reply_new_error(0, error);
    g_autofree char *after = g_strdup_printf("%u", retry_s);

    carrel_api_reply_add_header(reply, "Retry-After", after);
    return reply;
}

/* The caller's token past its [limits] rate: 429 with Retry-After; NULL while it may go on. */
static CarrelApiReply *
rate_limit_reply(Exchange *ex)
{
    const CarrelLimits *limits;
    g_autoptr(GError) error = NULL;
    guint retry_s = 0;

    /* The socket is root's alone (mode 0600), like the login limit: root can read the admin
     * token anyway, so a limit there binds nothing. */
    if (g_str_equal(ex->req->source, "unix") || !ex->req->who ||
        !(limits = carrel_manager_limits_for(ex->api->mgr, ex->req->who)) ||
        carrel_api_rates_take(ex->api->rates, ex->req->who->token_id, limits->rate, limits->burst,
                              g_get_monotonic_time(), &retry_s))
        return NULL;
    g_set_error(&error, CARREL_ERROR, CARREL_ERROR_RATE_LIMITED,
                "token '%s' sent more than [limits] rate %u requests per second (burst %u): "
                "retry in %u s",
                ex->req->who->label, limits->rate, limits->burst, retry_s);
    return retry_later_reply(error, retry_s);
}

/* The route of ex's request, or NULL with the reply that refuses it. */
static const CarrelApiRoute *
admit(Exchange *ex, CarrelApiReply **ret_refusal)
{
    g_autoptr(GError) error = NULL;
    g_autoptr(GError) route_error = NULL;
    const CarrelApiRoute *route;
    guint status = 0;

    route = carrel_api_route_match(ex->req->method, ex->req->path, &ex->req->params, &status,
                                   &route_error);
    /* Test hooks do not exist in a daemon started without --test-hooks. */
    if (route && (route->flags & CARREL_API_ROUTE_TEST_HOOK) && !ex->api->test_hooks) {
        route = NULL;
        status = SOUP_STATUS_NOT_FOUND;
        g_set_error(&route_error, CARREL_ERROR, CARREL_ERROR_NOT_FOUND, "no such route");
    }
    /* Unknown routes answer 401 too without credentials: nothing is learnt before auth. */
    if ((*ret_refusal = authenticate(ex, route)))
        return NULL;
    if (!route) {
        *ret_refusal = carrel_api_reply_new_error(status, route_error);
        return NULL;
    }
    if ((*ret_refusal = rate_limit_reply(ex)))
        return NULL;
    if (!parse_body(ex, route, &error)) {
        *ret_refusal = carrel_api_reply_new_error(0, error);
        return NULL;
    }
    return route;
}

/* Queues ex in its class's pool; the reply is sent when a worker is done with it. */
static void
dispatch(Exchange *ex, CarrelApiClass klass)
{
    g_autoptr(GError) error = NULL;
    guint retry_s = 0;

    g_atomic_int_inc(&ex->api->in_flight);
    soup_server_message_pause(ex->msg);
    if (carrel_api_pools_push(ex->api->pools, klass, ex, &retry_s, &error))
        return;
    g_atomic_int_dec_and_test(&ex->api->in_flight);
    soup_server_message_unpause(ex->msg);
    ex->reply = retry_s ? retry_later_reply(error, retry_s) : carrel_api_reply_new_error(0, error);
    send_reply(ex);
    exchange_free(ex);
}

static void
handle_request(SoupServer *server, SoupServerMessage *msg, const char *path, GHashTable *query,
               gpointer user_data)
{
    CarrelApi *api = user_data;
    CarrelApiClass klass;
    Exchange *ex;

    if (!g_str_has_prefix(path, "/v1/") && !g_str_equal(path, "/mcp") &&
        !g_str_equal(path, "/metrics")) {
        g_autoptr(CarrelApiReply) reply =
            carrel_api_static_reply(api, soup_server_message_get_method(msg), path);
        carrel_api_reply_write(reply, api, msg);
        return;
    }
    ex = exchange_new(api, msg, query);
    ex->route = admit(ex, &ex->reply);
    if (!ex->route) {
        send_reply(ex);
        exchange_free(ex);
        return;
    }
    /* Handlers may block (boots take seconds): each class runs in its own bounded pool. */
    klass = carrel_api_request_class(ex->route, ex->req);
    if (klass != CARREL_API_CLASS_INLINE) {
        dispatch(ex, klass);
        return;
    }
    run_handler(ex);
    send_reply(ex);
    exchange_free(ex);
}

/* The route a request goes to, as far as its method and path tell (NULL: none). */
static const CarrelApiRoute *
early_route(SoupServerMessage *msg, const char *path)
{
    g_autoptr(GPtrArray) params = NULL;
    g_autoptr(GError) error = NULL;
    guint status = 0;

    return carrel_api_route_match(soup_server_message_get_method(msg), path, &params, &status,
                                  &error);
}

/* Runs before the body is read: refuse what would be too large instead of buffering it. */
static void
check_request_size(SoupServer *server, SoupServerMessage *msg, const char *path, GHashTable *query,
                   gpointer user_data)
{
    SoupMessageHeaders *headers = soup_server_message_get_request_headers(msg);
    SoupEncoding encoding = soup_message_headers_get_encoding(headers);
    g_autoptr(GError) error = NULL;
    g_autoptr(CarrelApiReply) reply = NULL;
    g_autofree char *rid = NULL;
    CarrelApi *api = user_data;
    const CarrelApiRoute *route = early_route(msg, path);
    /* The JSON limit when there is no such route. */
    gsize max = route ? carrel_api_route_body_max(route) : CARREL_LIMIT_BODY_BYTES;
    guint status;

    if (encoding == SOUP_ENCODING_CHUNKED || encoding == SOUP_ENCODING_EOF) {
        status = SOUP_STATUS_LENGTH_REQUIRED;
        g_set_error(&error, CARREL_ERROR, CARREL_ERROR_INVALID_ARG,
                    "request bodies need a Content-Length");
    } else if (encoding == SOUP_ENCODING_CONTENT_LENGTH &&
               (guint64)soup_message_headers_get_content_length(headers) > max) {
        status = SOUP_STATUS_REQUEST_ENTITY_TOO_LARGE;
        g_set_error(&error, CARREL_ERROR, CARREL_ERROR_LIMIT,
                    "request body is larger than %" G_GSIZE_FORMAT " bytes", max);
    } else {
        carrel_api_upload_spool_start(api, msg, route);
        return;
    }
    /* libsoup still reads the body before it writes the reply (unless the client sent
     * Expect: 100-continue): it must not keep what it reads. */
    soup_message_body_set_accumulate(soup_server_message_get_request_body(msg), FALSE);
    reply = carrel_api_reply_new_error(status, error);
    rid = carrel_util_new_id("r-");
    soup_message_headers_replace(soup_server_message_get_response_headers(msg), "X-Request-Id",
                                 rid);
    carrel_api_reply_add_header(reply, "Connection", "close");
    carrel_api_count_reply(api, soup_server_message_get_method(msg), path, NULL, reply);
    carrel_api_reply_write(reply, api, msg);
    g_message("request %s refused before its body: %s %s -> %u", rid,
              soup_server_message_get_method(msg), path, status);
}

/*
 * Every response carries a request id, even the ones libsoup writes itself (a malformed
 * request line): set one as soon as the request starts; handlers may replace it.
 */
static void
on_request_started(SoupServer *server, SoupServerMessage *msg, gpointer user_data)
{
    g_autofree char *rid = carrel_util_new_id("r-");

    soup_message_headers_replace(soup_server_message_get_response_headers(msg), "X-Request-Id",
                                 rid);
}

CarrelApi *
carrel_api_new(CarrelManager *mgr, const char *version_info, GError **error)
{
    CarrelApi *api = g_new0(CarrelApi, 1);
    g_autofree char *header = g_strdup_printf("carreld/%s", version_info);

    api->mgr = mgr;
    api->version_info = g_strdup(version_info);
    g_mutex_init(&api->cookie_lock);
    api->login_limiter = carrel_api_limiter_new(LOGIN_FAILURES_MAX, LOGIN_WINDOW_S);
    api->streams = carrel_api_streams_new(0);
    api->exec_streams = carrel_api_exec_streams_new();
    api->shells = carrel_api_shells_new();
    api->rates = carrel_api_rates_new();
    api->lists = carrel_api_cache_new();
    g_mutex_init(&api->hold_lock);
    g_cond_init(&api->hold_cond);
    api->context = g_main_context_ref_thread_default();
    api->server = soup_server_new("server-header", header, NULL);
    g_signal_connect(api->server, "request-started", G_CALLBACK(on_request_started), NULL);
    api->reaper = carrel_api_reaper_new(api->server);
    soup_server_add_early_handler(api->server, NULL, check_request_size, api, NULL);
    soup_server_add_handler(api->server, NULL, handle_request, api, NULL);
    carrel_api_console_init(api);
    api->pools = carrel_api_pools_new(pool_run, api, error);
    if (!api->pools) {
        carrel_api_free(api);
        return NULL;
    }
    return api;
}

void
carrel_api_free(CarrelApi *api)
{
    if (!api)
        return;
    g_clear_pointer(&api->pools, carrel_api_pools_free);
    g_clear_pointer(&api->exec_streams, carrel_api_exec_streams_free);
    g_clear_pointer(&api->shells, carrel_api_shells_free);
    carrel_api_reaper_free(api->reaper, api->server);
    soup_server_disconnect(api->server);
    g_clear_object(&api->server);
    carrel_api_console_clear(api);
    g_free(api->version_info);
    g_free(api->web_dir);
    g_free(api->spice_dir);
    g_free(api->web_url);
    g_clear_pointer(&api->cookie_sessions, g_hash_table_unref);
    carrel_api_limiter_free(api->login_limiter);
    carrel_api_streams_free(api->streams);
    carrel_api_rates_free(api->rates);
    carrel_api_cache_free(api->lists);
    g_clear_pointer(&api->context, g_main_context_unref);
    g_mutex_clear(&api->hold_lock);
    g_cond_clear(&api->hold_cond);
    g_mutex_clear(&api->cookie_lock);
    g_free(api);
}

void
carrel_api_set_web(CarrelApi *api, const char *web_dir, const char *spice_dir, gboolean test_hooks)
{
    g_free(api->web_dir);
    g_free(api->spice_dir);
    api->web_dir = g_strdup(web_dir);
    api->spice_dir = g_strdup(spice_dir);
    api->test_hooks = test_hooks;
}

gboolean
carrel_api_set_pool_sizes(CarrelApi *api, const CarrelApiPoolSizes *sizes, GError **error)
{
    return carrel_api_pools_set_sizes(api->pools, sizes, error);
}

guint
carrel_api_in_flight(CarrelApi *api)
{
    return (guint)g_atomic_int_get(&api->in_flight);
}

gboolean
carrel_api_listen_unix(CarrelApi *api, const char *path, GError **error)
{
    g_autoptr(GSocket) sock = NULL;
    g_autoptr(GSocketAddress) addr = NULL;
    mode_t old_mask;
    gboolean ok;

    sock = g_socket_new(G_SOCKET_FAMILY_UNIX, G_SOCKET_TYPE_STREAM, 0, error);
    if (!sock)
        return FALSE;
    if (g_unlink(path) < 0 && errno != ENOENT) {
        g_set_error(error, CARREL_ERROR, CARREL_ERROR_INTERNAL, "removing stale socket '%s': %s",
                    path, g_strerror(errno));
        return FALSE;
    }
    addr = g_unix_socket_address_new(path);
    /* Create the socket file 0600 from the start: no window where others may connect. */
    old_mask = umask(0177);
    ok = g_socket_bind(sock, addr, FALSE, error);
    umask(old_mask);
    if (!ok || !g_socket_listen(sock, error) ||
        !soup_server_listen_socket(api->server, sock, 0, error)) {
        g_prefix_error(error, "listening on '%s': ", path);
        return FALSE;
    }
    return TRUE;
}

/* The local address of the server's TCP listener (there is at most one), or NULL. */
static GSocketAddress *
tcp_local_address(SoupServer *server)
{
    g_autoptr(GSList) listeners = soup_server_get_listeners(server);

    for (GSList *l = listeners; l; l = l->next) {
        GSocketFamily family = g_socket_get_family(l->data);
        if (family == G_SOCKET_FAMILY_IPV4 || family == G_SOCKET_FAMILY_IPV6)
            return g_socket_get_local_address(l->data, NULL);
    }
    return NULL;
}

gboolean
carrel_api_listen_tcp(CarrelApi *api, GSocketAddress *address, GTlsCertificate *certificate,
                      GError **error)
{
    SoupServerListenOptions options = 0;
    g_autoptr(GSocketAddress) bound = NULL;
    g_autofree char *where = NULL;

    /* The certificate is the server's, but only listeners with the HTTPS option use it: the
     * Unix socket stays plain. */
    if (certificate) {
        g_object_set(api->server, "tls-certificate", certificate, NULL);
        options |= SOUP_SERVER_LISTEN_HTTPS;
    }
    if (!soup_server_listen(api->server, address, options, error)) {
        g_prefix_error(error, "listening on TCP%s: ", certificate ? " with TLS" : "");
        return FALSE;
    }
    api->tls = certificate != NULL;
    /* Where the web console is, for clients that talk over the socket (carrel console): the
     * address really bound, so that port 0 (any free port) gives the port the kernel chose. */
    bound = tcp_local_address(api->server);
    where = g_socket_connectable_to_string(G_SOCKET_CONNECTABLE(bound ? bound : address));
    g_free(api->web_url);
    api->web_url = g_strconcat(api->tls ? "https://" : "http://", where, NULL);
    return TRUE;
}

const char *
carrel_api_web_url(CarrelApi *api)
{
    return api->web_url;
}
