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

typedef struct {
    CarrelApi *api;
    SoupServerMessage *msg;
    CarrelApiRequest *req;
    const CarrelApiRoute *route;
    gint64 started;
    guint status;
    GBytes *reply;
    const char *reply_type;
} Exchange;

static void
request_free(CarrelApiRequest *req)
{
    g_free(req->method);
    g_free(req->path);
    g_clear_pointer(&req->params, g_ptr_array_unref);
    g_clear_pointer(&req->query, g_hash_table_unref);
    g_clear_pointer(&req->body, json_node_unref);
    g_clear_pointer(&req->raw_body, g_bytes_unref);
    g_clear_pointer(&req->reply_bytes, g_bytes_unref);
    carrel_principal_free(req->who);
    g_free(req->source);
    g_free(req->set_cookie);
    g_free(req->reply_filename);
    g_free(req->request_id);
    g_free(req->origin);
    g_free(req->mcp_protocol_version);
    g_free(req);
}

static void
exchange_free(Exchange *ex)
{
    g_clear_pointer(&ex->req, request_free);
    g_clear_pointer(&ex->reply, g_bytes_unref);
    g_clear_object(&ex->msg);
    g_free(ex);
}

static GBytes *
json_bytes(JsonNode *node)
{
    g_autoptr(JsonGenerator) gen = json_generator_new();
    gsize len = 0;
    char *text;

    json_generator_set_root(gen, node);
    text = json_generator_to_data(gen, &len);
    return g_bytes_new_take(text, len);
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

static void
send_reply(Exchange *ex)
{
    SoupMessageHeaders *headers = soup_server_message_get_response_headers(ex->msg);
    gsize len = 0;
    const char *data = ex->reply ? g_bytes_get_data(ex->reply, &len) : NULL;
    gint64 ms = (g_get_monotonic_time() - ex->started) / 1000;

    soup_message_headers_replace(headers, "X-Request-Id", ex->req->request_id);
    soup_message_headers_replace(headers, "Cache-Control", "no-store");
    if (ex->req->set_cookie)
        soup_message_headers_append(headers, "Set-Cookie", ex->req->set_cookie);
    if (ex->req->retry_after_s) {
        g_autofree char *after = g_strdup_printf("%u", ex->req->retry_after_s);
        soup_message_headers_replace(headers, "Retry-After", after);
    }
    if (ex->req->reply_filename && ex->status == SOUP_STATUS_OK) {
        g_autoptr(GHashTable) params = g_hash_table_new(g_str_hash, g_str_equal);
        g_hash_table_insert(params, (char *)"filename", ex->req->reply_filename);
        soup_message_headers_set_content_disposition(headers, "attachment", params);
    }
    soup_server_message_set_status(ex->msg, ex->status, NULL);
    if (data)
        soup_server_message_set_response(ex->msg,
                                         ex->reply_type ? ex->reply_type : "application/json",
                                         SOUP_MEMORY_COPY, data, len);
    /* Method and path only: never headers, so tokens stay out of the log. */
    g_message("request %s: %s %s -> %u (%" G_GINT64_FORMAT " ms)", ex->req->request_id,
              ex->req->method, ex->req->path, ex->status, ms);
}

static void
reply_error(Exchange *ex, guint status, GError *error)
{
    g_autoptr(JsonNode) env = carrel_api_error_envelope(error);

    ex->status = status ? status : carrel_api_status_for_error(error);
    ex->reply_type = NULL;
    g_clear_pointer(&ex->reply, g_bytes_unref);
    ex->reply = json_bytes(env);
}

static void
run_handler(GTask *task, gpointer source, gpointer task_data, GCancellable *cancellable)
{
    Exchange *ex = task_data;
    g_autoptr(GError) error = NULL;
    g_autoptr(JsonNode) reply = NULL;
    guint status = SOUP_STATUS_OK;

    reply = ex->route->handler(ex->req, &status, &error);
    if (error) {
        /* A handler may name the status of its refusal (429 from the login limit). */
        reply_error(ex, status != SOUP_STATUS_OK ? status : 0, error);
    } else if (ex->req->reply_bytes) {
        ex->status = status;
        ex->reply = g_steal_pointer(&ex->req->reply_bytes);
        ex->reply_type = ex->req->reply_type;
    } else {
        ex->status = status;
        ex->reply = reply ? json_bytes(reply) : NULL;
    }
    g_task_return_boolean(task, TRUE);
}

static void
on_handler_done(GObject *source, GAsyncResult *res, gpointer user_data)
{
    Exchange *ex = user_data;

    send_reply(ex);
    soup_server_message_unpause(ex->msg);
    g_atomic_int_dec_and_test(&ex->api->in_flight);
    exchange_free(ex);
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
gboolean
carrel_api_check_login_limit(CarrelApi *api, const char *source, guint *ret_retry_s, GError **error)
{
    /* The socket is root's alone (mode 0600): nobody there to slow down, and a flood on TCP
     * must never lock the operator's CLI out. */
    *ret_retry_s = 0;
    if (g_str_equal(source, "unix") ||
        carrel_api_limiter_check(api->login_limiter, source, g_get_monotonic_time(), ret_retry_s))
        return TRUE;
    g_set_error(error, CARREL_ERROR, CARREL_ERROR_LIMIT,
                "too many failed logins from this address: try again in %u s", *ret_retry_s);
    return FALSE;
}

void
carrel_api_count_failed_login(CarrelApi *api, const char *source)
{
    if (g_str_equal(source, "unix"))
        return;
    carrel_api_limiter_fail(api->login_limiter, source, g_get_monotonic_time());
}

/*
 * A bearer token, else the web console's cookie (whose changes must come from its own pages).
 * Who it is comes from core; what they may do is core's to decide, verb by verb.
 */
static gboolean
authenticate(Exchange *ex, const CarrelApiRoute *route, GError **error)
{
    g_autofree char *token = NULL;
    g_autoptr(GError) local = NULL;
    gboolean cookie = FALSE;

    if (route && (route->flags & CARREL_API_ROUTE_PUBLIC))
        return TRUE;
    token = bearer_token(ex->msg);
    cookie = !token && carrel_api_web_has_cookie(ex->msg);
    if ((token || cookie) &&
        !carrel_api_check_login_limit(ex->api, ex->req->source, &ex->req->retry_after_s, error)) {
        ex->status = CARREL_HTTP_TOO_MANY_REQUESTS;
        return FALSE;
    }
    if (token) {
        ex->req->who = carrel_manager_authenticate(ex->api->mgr, token, &local);
    } else if (cookie) {
        ex->req->who = carrel_api_web_lookup(ex->api, ex->msg, &local);
        ex->req->by_cookie = ex->req->who != NULL;
    }
    if (!ex->req->who) {
        if (token || cookie)
            carrel_api_count_failed_login(ex->api, ex->req->source);
        if (local)
            g_propagate_error(error, g_steal_pointer(&local));
        else
            g_set_error(error, CARREL_ERROR, CARREL_ERROR_UNAUTHORIZED,
                        "missing bearer token or console login");
        return FALSE;
    }
    if (ex->req->by_cookie && !safe_method(ex->req->method) && !carrel_api_same_origin(ex->msg)) {
        g_set_error(error, CARREL_ERROR, CARREL_ERROR_FORBIDDEN,
                    "a console request that changes something must come from the "
                    "console's own origin");
        return FALSE;
    }
    return TRUE;
}

static gboolean
parse_body(Exchange *ex, GError **error)
{
    SoupMessageBody *body = soup_server_message_get_request_body(ex->msg);

    gsize max = carrel_api_route_body_max(ex->route);

    if (!body || body->length == 0)
        return TRUE;
    if ((gsize)body->length > max) {
        g_set_error(error, CARREL_ERROR, CARREL_ERROR_LIMIT,
                    "request body is larger than %" G_GSIZE_FORMAT " bytes", max);
        return FALSE;
    }
    if (ex->route->flags & CARREL_API_ROUTE_RAW_BODY) {
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
exchange_new(CarrelApi *api, SoupServerMessage *msg, const char *path, GHashTable *query)
{
    Exchange *ex = g_new0(Exchange, 1);
    SoupMessageHeaders *headers = soup_server_message_get_request_headers(msg);
    const char *given_id = soup_message_headers_get_one(headers, "X-Request-Id");
    GUri *uri = soup_server_message_get_uri(msg);

    ex->api = api;
    ex->msg = g_object_ref(msg);
    ex->started = g_get_monotonic_time();
    ex->req = g_new0(CarrelApiRequest, 1);
    ex->req->api = api;
    ex->req->mgr = api->mgr;
    ex->req->version_info = api->version_info;
    ex->req->method = g_strdup(soup_server_message_get_method(msg));
    ex->req->path = g_strdup(g_uri_get_path(uri));
    ex->req->query = query ? g_hash_table_ref(query) : NULL;
    ex->req->request_id = request_id_ok(given_id) ? g_strdup(given_id) : carrel_util_new_id("r-");
    ex->req->origin = g_strdup(soup_message_headers_get_one(headers, "Origin"));
    ex->req->mcp_protocol_version =
        g_strdup(soup_message_headers_get_one(headers, "MCP-Protocol-Version"));
    ex->req->source = request_source(msg);
    (void)path;
    return ex;
}

static void
handle_request(SoupServer *server, SoupServerMessage *msg, const char *path, GHashTable *query,
               gpointer user_data)
{
    CarrelApi *api = user_data;
    Exchange *ex = exchange_new(api, msg, path, query);
    g_autoptr(GError) error = NULL;
    g_autoptr(GError) route_error = NULL;
    g_autoptr(GTask) task = NULL;
    const CarrelApiRoute *route;
    guint status = 0;

    if (!g_str_has_prefix(path, "/v1/") && !g_str_equal(path, "/mcp")) {
        exchange_free(ex);
        carrel_api_web_static(api, msg, path);
        return;
    }
    route = carrel_api_route_match(ex->req->method, ex->req->path, &ex->req->params, &status,
                                   &route_error);
    /* Test hooks do not exist in a daemon started without --test-hooks. */
    if (route && (route->flags & CARREL_API_ROUTE_TEST_HOOK) && !api->test_hooks) {
        route = NULL;
        status = SOUP_STATUS_NOT_FOUND;
        g_set_error(&route_error, CARREL_ERROR, CARREL_ERROR_NOT_FOUND, "no such route");
    }
    /* Unknown routes answer 401 too without credentials: nothing is learnt before auth. */
    if (!authenticate(ex, route, &error)) {
        status = ex->status;
    } else if (!route) {
        error = g_steal_pointer(&route_error);
    } else if (g_str_equal(path, "/v1/stream") && g_str_equal(ex->req->method, "GET")) {
        carrel_api_web_stream(api, msg, ex->req->who, carrel_api_query(ex->req, "session"));
        g_message("request %s: GET /v1/stream (stream opened)", ex->req->request_id);
        exchange_free(ex);
        return;
    } else {
        ex->route = route;
        if (route->handler == carrel_api_post_logout)
            ex->req->set_cookie = carrel_api_web_logout(api, msg);
    }
    if (ex->route && parse_body(ex, &error)) {
        /* Handlers may block (boots take seconds): run them off the main loop. */
        g_atomic_int_inc(&api->in_flight);
        soup_server_message_pause(msg);
        task = g_task_new(NULL, NULL, on_handler_done, ex);
        g_task_set_task_data(task, ex, NULL);
        g_task_run_in_thread(task, run_handler);
        return;
    }
    reply_error(ex, status, error);
    send_reply(ex);
    exchange_free(ex);
}

/* The body limit of the route a request goes to (the JSON limit when there is none). */
static gsize
early_body_max(SoupServerMessage *msg, const char *path)
{
    g_autoptr(GPtrArray) params = NULL;
    g_autoptr(GError) error = NULL;
    const CarrelApiRoute *route;
    guint status = 0;

    route =
        carrel_api_route_match(soup_server_message_get_method(msg), path, &params, &status, &error);
    return route ? carrel_api_route_body_max(route) : CARREL_LIMIT_BODY_BYTES;
}

/* Runs before the body is read: refuse what would be too large instead of buffering it. */
static void
check_request_size(SoupServer *server, SoupServerMessage *msg, const char *path, GHashTable *query,
                   gpointer user_data)
{
    SoupMessageHeaders *headers = soup_server_message_get_request_headers(msg);
    SoupEncoding encoding = soup_message_headers_get_encoding(headers);
    g_autoptr(GError) error = NULL;
    g_autoptr(JsonNode) env = NULL;
    g_autoptr(GBytes) bytes = NULL;
    g_autofree char *rid = NULL;
    gsize max = early_body_max(msg, path);
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
        return;
    }
    env = carrel_api_error_envelope(error);
    bytes = json_bytes(env);
    rid = carrel_util_new_id("r-");
    soup_message_headers_replace(soup_server_message_get_response_headers(msg), "X-Request-Id",
                                 rid);
    soup_message_headers_replace(soup_server_message_get_response_headers(msg), "Connection",
                                 "close");
    soup_server_message_set_status(msg, status, NULL);
    soup_server_message_set_response(msg, "application/json", SOUP_MEMORY_COPY,
                                     g_bytes_get_data(bytes, NULL), g_bytes_get_size(bytes));
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
    g_mutex_init(&api->web_lock);
    api->login_limiter = carrel_api_limiter_new(LOGIN_FAILURES_MAX, LOGIN_WINDOW_S);
    api->server = soup_server_new("server-header", header, NULL);
    g_signal_connect(api->server, "request-started", G_CALLBACK(on_request_started), NULL);
    soup_server_add_early_handler(api->server, NULL, check_request_size, api, NULL);
    soup_server_add_handler(api->server, NULL, handle_request, api, NULL);
    carrel_api_console_init(api);
    return api;
}

void
carrel_api_free(CarrelApi *api)
{
    if (!api)
        return;
    soup_server_disconnect(api->server);
    g_clear_object(&api->server);
    carrel_api_console_clear(api);
    g_free(api->version_info);
    g_free(api->web_dir);
    g_free(api->spice_dir);
    g_free(api->web_url);
    g_clear_pointer(&api->web_sessions, g_hash_table_unref);
    carrel_api_limiter_free(api->login_limiter);
    g_mutex_clear(&api->web_lock);
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
