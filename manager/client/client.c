#include "client/client.h"

#include <string.h>

#include <libsoup/soup.h>

#include "carrel-config.h"

#define CLIENT_DEFAULT_TIMEOUT_S 900
#define CLIENT_MAX_REPLY_BYTES (64 * 1024 * 1024)
#define CLIENT_READ_CHUNK (64 * 1024)
#define CLIENT_MAX_REQUEST_ID_LEN 128

struct _CarrelClient {
    SoupSession *session;
    char *base_url; /* scheme://host[:port], no trailing slash */
    char *endpoint; /* the socket path or the URL, shown in errors */
    char *token;    /* never copied into an error message */
    guint timeout_s;
    gboolean unreachable;
    CarrelClientProgressFunc progress;
    gpointer progress_data;
    gint64 sent;       /* bytes of the current request's body written so far */
    gint64 sent_total; /* its size */
    gboolean reading;  /* report the reply's bytes: a request without a body (a download) */
};

void
carrel_client_free(CarrelClient *client)
{
    if (!client)
        return;
    g_clear_object(&client->session);
    g_free(client->base_url);
    g_free(client->endpoint);
    if (client->token)
        explicit_bzero(client->token, strlen(client->token));
    g_free(client->token);
    g_free(client);
}

static gboolean
client_check_url(const char *base_url, GError **error)
{
    g_autoptr(GUri) uri = g_uri_parse(base_url, G_URI_FLAGS_NONE, NULL);
    const char *scheme;
    const char *path;

    if (!uri) {
        g_set_error(error, CARREL_ERROR, CARREL_ERROR_INVALID_ARG, "invalid carreld URL '%s'",
                    base_url);
        return FALSE;
    }
    /* A URL with credentials would end up in error messages; tokens go in a header. */
    if (g_uri_get_userinfo(uri)) {
        g_set_error(error, CARREL_ERROR, CARREL_ERROR_INVALID_ARG,
                    "the carreld URL must not contain credentials");
        return FALSE;
    }
    scheme = g_uri_get_scheme(uri);
    path = g_uri_get_path(uri);
    if ((!g_str_equal(scheme, "http") && !g_str_equal(scheme, "https")) || !g_uri_get_host(uri) ||
        !*g_uri_get_host(uri) || g_uri_get_query(uri) || g_uri_get_fragment(uri) ||
        (*path && !g_str_equal(path, "/"))) {
        g_set_error(error, CARREL_ERROR, CARREL_ERROR_INVALID_ARG,
                    "invalid carreld URL '%s': use http://HOST:PORT", base_url);
        return FALSE;
    }
    return TRUE;
}

static gboolean
client_check_args(const char *socket_path, const char *base_url, const char *token, GError **error)
{
    if (token && (!*token || !carrel_util_is_clean_text(token))) {
        g_set_error(error, CARREL_ERROR, CARREL_ERROR_INVALID_ARG,
                    "the token is empty or contains control characters");
        return FALSE;
    }
    if (base_url)
        return client_check_url(base_url, error);
    if (!socket_path || !*socket_path) {
        g_set_error(error, CARREL_ERROR, CARREL_ERROR_INVALID_ARG,
                    "either a socket path or a URL of carreld is required");
        return FALSE;
    }
    return TRUE;
}

CarrelClient *
carrel_client_new(const char *socket_path, const char *base_url, const char *token, guint timeout_s,
                  GError **error)
{
    g_autoptr(CarrelClient) client = NULL;
    g_autofree char *user_agent = g_strdup_printf("carrel/%s", CARREL_VERSION);

    if (!client_check_args(socket_path, base_url, token, error))
        return NULL;
    client = g_new0(CarrelClient, 1);
    client->timeout_s = timeout_s ? timeout_s : CLIENT_DEFAULT_TIMEOUT_S;
    client->token = g_strdup(token);
    if (base_url) {
        client->base_url = g_strdup(base_url);
        while (g_str_has_suffix(client->base_url, "/"))
            client->base_url[strlen(client->base_url) - 1] = '\0';
        client->endpoint = g_strdup(client->base_url);
        client->session = soup_session_new_with_options("timeout", client->timeout_s, "user-agent",
                                                        user_agent, NULL);
    } else {
        g_autoptr(GSocketAddress) address = g_unix_socket_address_new(socket_path);

        /* Every connection goes to the socket, so the host of the URL does not matter. */
        client->base_url = g_strdup("http://localhost");
        client->endpoint = g_strdup(socket_path);
        client->session =
            soup_session_new_with_options("remote-connectable", address, "timeout",
                                          client->timeout_s, "user-agent", user_agent, NULL);
    }
    /* carreld is local: a proxy from the environment must never see the token. */
    soup_session_set_proxy_resolver(client->session, NULL);
    return g_steal_pointer(&client);
}

gboolean
carrel_client_last_unreachable(const CarrelClient *client)
{
    return client && client->unreachable;
}

static SoupMessage *
client_new_message(CarrelClient *client, const char *method, const char *path,
                   const char *content_type, GBytes *body, GError **error)
{
    g_autofree char *url = NULL;
    g_autoptr(SoupMessage) msg = NULL;
    SoupMessageHeaders *headers;

    if (!path || path[0] != '/' || !carrel_util_is_clean_text(path) || strchr(path, ' ')) {
        g_autofree char *shown = g_strescape(path ? path : "", NULL);

        g_set_error(error, CARREL_ERROR, CARREL_ERROR_INVALID_ARG, "invalid request path '%s'",
                    shown);
        return NULL;
    }
    url = g_strconcat(client->base_url, path, NULL);
    msg = soup_message_new(method, url);
    if (!msg) {
        g_set_error(error, CARREL_ERROR, CARREL_ERROR_INVALID_ARG, "invalid request path '%s'",
                    path);
        return NULL;
    }
    headers = soup_message_get_request_headers(msg);
    soup_message_headers_replace(headers, "Accept", "application/json");
    if (client->token) {
        g_autofree char *value = g_strconcat("Bearer ", client->token, NULL);

        soup_message_headers_replace(headers, "Authorization", value);
        explicit_bzero(value, strlen(value));
    }
    if (body)
        soup_message_set_request_body_from_bytes(
            msg, content_type ? content_type : "application/octet-stream", body);
    return g_steal_pointer(&msg);
}

static gboolean
client_is_connect_error(const GError *error)
{
    return error->domain == G_RESOLVER_ERROR ||
           g_error_matches(error, G_IO_ERROR, G_IO_ERROR_NOT_FOUND) ||
           g_error_matches(error, G_IO_ERROR, G_IO_ERROR_CONNECTION_REFUSED) ||
           g_error_matches(error, G_IO_ERROR, G_IO_ERROR_PERMISSION_DENIED) ||
           g_error_matches(error, G_IO_ERROR, G_IO_ERROR_HOST_UNREACHABLE) ||
           g_error_matches(error, G_IO_ERROR, G_IO_ERROR_NETWORK_UNREACHABLE) ||
           g_error_matches(error, G_IO_ERROR, G_IO_ERROR_NOT_DIRECTORY) ||
           g_error_matches(error, G_IO_ERROR, G_IO_ERROR_INVALID_ARGUMENT);
}

static gboolean
client_set_transport_error(CarrelClient *client, const GError *local, const char *what,
                           GError **error)
{
    if (g_error_matches(local, G_IO_ERROR, G_IO_ERROR_TIMED_OUT)) {
        g_set_error(error, CARREL_ERROR, CARREL_ERROR_TIMEOUT,
                    "carreld at '%s' did not answer within %u s", client->endpoint,
                    client->timeout_s);
    } else if (client_is_connect_error(local)) {
        gboolean down = g_error_matches(local, G_IO_ERROR, G_IO_ERROR_NOT_FOUND) ||
                        g_error_matches(local, G_IO_ERROR, G_IO_ERROR_CONNECTION_REFUSED);

        client->unreachable = TRUE;
        g_set_error(error, CARREL_ERROR, CARREL_ERROR_FAILED, "cannot reach carreld at '%s': %s%s",
                    client->endpoint, local->message, down ? " (is carreld running?)" : "");
    } else {
        g_set_error(error, CARREL_ERROR, CARREL_ERROR_FAILED, "%s carreld at '%s': %s", what,
                    client->endpoint, local->message);
    }
    return FALSE;
}

void
carrel_client_set_progress(CarrelClient *client, CarrelClientProgressFunc func, gpointer user_data)
{
    client->progress = func;
    client->progress_data = user_data;
}

static void
client_wrote_body_data(SoupMessage *msg, guint chunk_size, gpointer user_data)
{
    CarrelClient *client = user_data;

    client->sent += chunk_size;
    client->progress(TRUE, client->sent, client->sent_total, client->progress_data);
}

static gboolean
client_check_length(CarrelClient *client, SoupMessage *msg, GError **error)
{
    SoupMessageHeaders *headers = soup_message_get_response_headers(msg);

    if (soup_message_headers_get_encoding(headers) == SOUP_ENCODING_CONTENT_LENGTH &&
        soup_message_headers_get_content_length(headers) > CLIENT_MAX_REPLY_BYTES) {
        g_set_error(error, CARREL_ERROR, CARREL_ERROR_FAILED,
                    "the reply of carreld at '%s' is larger than %d MiB", client->endpoint,
                    CLIENT_MAX_REPLY_BYTES / (1024 * 1024));
        return FALSE;
    }
    return TRUE;
}

static GBytes *
client_read_reply(CarrelClient *client, SoupMessage *msg, GInputStream *stream, GError **error)
{
    g_autoptr(GByteArray) data = g_byte_array_new();
    SoupMessageHeaders *headers = soup_message_get_response_headers(msg);
    gint64 total = soup_message_headers_get_encoding(headers) == SOUP_ENCODING_CONTENT_LENGTH
                       ? soup_message_headers_get_content_length(headers)
                       : -1;

    if (!client_check_length(client, msg, error))
        return NULL;
    for (;;) {
        g_autoptr(GError) local = NULL;
        g_autoptr(GBytes) chunk =
            g_input_stream_read_bytes(stream, CLIENT_READ_CHUNK, NULL, &local);

        if (!chunk) {
            client_set_transport_error(client, local, "reading the reply of", error);
            return NULL;
        }
        if (g_bytes_get_size(chunk) == 0)
            break;
        if (data->len + g_bytes_get_size(chunk) > CLIENT_MAX_REPLY_BYTES) {
            g_set_error(error, CARREL_ERROR, CARREL_ERROR_FAILED,
                        "the reply of carreld at '%s' is larger than %d MiB", client->endpoint,
                        CLIENT_MAX_REPLY_BYTES / (1024 * 1024));
            return NULL;
        }
        g_byte_array_append(data, g_bytes_get_data(chunk, NULL), g_bytes_get_size(chunk));
        if (client->progress && client->reading)
            client->progress(FALSE, data->len, total, client->progress_data);
    }
    g_input_stream_close(stream, NULL, NULL);
    return g_byte_array_free_to_bytes(g_steal_pointer(&data));
}

static char *
client_request_id(SoupMessage *msg)
{
    const char *id =
        soup_message_headers_get_one(soup_message_get_response_headers(msg), "X-Request-Id");

    if (!id || strlen(id) > CLIENT_MAX_REQUEST_ID_LEN || !carrel_util_is_clean_text(id))
        return NULL;
    return g_strdup(id);
}

gboolean
carrel_client_request_raw(CarrelClient *client, const char *method, const char *path,
                          const char *content_type, GBytes *body, guint *ret_status,
                          GBytes **ret_body, char **ret_request_id, GError **error)
{
    g_autoptr(SoupMessage) msg = NULL;
    g_autoptr(GInputStream) stream = NULL;
    g_autoptr(GBytes) reply = NULL;
    g_autoptr(GError) local = NULL;

    g_return_val_if_fail(client != NULL && method != NULL, FALSE);
    client->unreachable = FALSE;
    msg = client_new_message(client, method, path, content_type, body, error);
    if (!msg)
        return FALSE;
    client->reading = !body;
    if (client->progress && body) {
        client->sent = 0;
        client->sent_total = (gint64)g_bytes_get_size(body);
        g_signal_connect(msg, "wrote-body-data", G_CALLBACK(client_wrote_body_data), client);
    }
    stream = soup_session_send(client->session, msg, NULL, &local);
    if (!stream)
        return client_set_transport_error(client, local, "sending a request to", error);
    reply = client_read_reply(client, msg, stream, error);
    if (!reply)
        return FALSE;
    if (ret_status)
        *ret_status = soup_message_get_status(msg);
    if (ret_request_id)
        *ret_request_id = client_request_id(msg);
    if (ret_body)
        *ret_body = g_steal_pointer(&reply);
    return TRUE;
}

static JsonNode *
client_parse_json(GBytes *data, GError **error)
{
    g_autoptr(JsonParser) parser = json_parser_new_immutable();
    g_autoptr(GError) local = NULL;
    gsize len = 0;
    const char *text = g_bytes_get_data(data, &len);

    if (!json_parser_load_from_data(parser, text ? text : "", (gssize)len, &local) ||
        !json_parser_get_root(parser)) {
        g_set_error(error, CARREL_ERROR, CARREL_ERROR_FAILED,
                    "carreld sent a reply that is not "
                    "JSON: %s",
                    local ? local->message : "empty document");
        return NULL;
    }
    return json_node_copy(json_parser_get_root(parser));
}

static const char *
client_string_member(JsonObject *obj, const char *member)
{
    JsonNode *node = json_object_get_member(obj, member);

    if (!node || !JSON_NODE_HOLDS_VALUE(node) || json_node_get_value_type(node) != G_TYPE_STRING)
        return NULL;
    return json_node_get_string(node);
}

/* The "error" object of an API error envelope, or NULL when root is not one. */
static JsonObject *
client_envelope_error(JsonNode *root)
{
    JsonNode *err;

    if (!root || !JSON_NODE_HOLDS_OBJECT(root))
        return NULL;
    err = json_object_get_member(json_node_get_object(root), "error");
    if (!err || !JSON_NODE_HOLDS_OBJECT(err))
        return NULL;
    return json_node_get_object(err);
}

/* Turns a non-2xx reply into a GError: the envelope's code and message when it has one. */
static void
client_set_api_error(guint status, GBytes *body, GError **error)
{
    g_autoptr(JsonNode) root = client_parse_json(body, NULL);
    JsonObject *err = client_envelope_error(root);
    const char *code = err ? client_string_member(err, "code") : NULL;
    const char *message = err ? client_string_member(err, "message") : NULL;

    if (!code || !message) {
        /* libsoup's own refusal of a request it cannot read (a path with "%2F..") has no
         * envelope: still the caller's request that was wrong. */
        g_set_error(error, CARREL_ERROR,
                    status == 400 ? CARREL_ERROR_INVALID_ARG : CARREL_ERROR_FAILED,
                    "HTTP %u from carreld", status);
        return;
    }
    g_set_error_literal(error, CARREL_ERROR, carrel_error_code_from_string(code), message);
}

gboolean
carrel_client_call(CarrelClient *client, const char *method, const char *path, JsonNode *body,
                   JsonNode **ret_reply, GError **error)
{
    g_autoptr(GBytes) request = NULL;
    g_autoptr(GBytes) reply = NULL;
    g_autoptr(JsonNode) node = NULL;
    guint status = 0;

    if (body) {
        char *text = json_to_string(body, FALSE);

        request = g_bytes_new_take(text, strlen(text));
    }
    if (!carrel_client_request_raw(client, method, path, body ? "application/json" : NULL, request,
                                   &status, &reply, NULL, error))
        return FALSE;
    if (status < 200 || status > 299) {
        client_set_api_error(status, reply, error);
        return FALSE;
    }
    if (status != 204 && g_bytes_get_size(reply) > 0) {
        node = client_parse_json(reply, error);
        if (!node)
            return FALSE;
    }
    if (ret_reply)
        *ret_reply = g_steal_pointer(&node);
    return TRUE;
}

gboolean
carrel_client_call_bytes(CarrelClient *client, const char *method, const char *path,
                         const char *content_type, GBytes *body, GBytes **ret_reply, GError **error)
{
    g_autoptr(GBytes) reply = NULL;
    guint status = 0;

    if (!carrel_client_request_raw(client, method, path, body ? content_type : NULL, body, &status,
                                   &reply, NULL, error))
        return FALSE;
    if (status < 200 || status > 299) {
        client_set_api_error(status, reply, error);
        return FALSE;
    }
    if (ret_reply)
        *ret_reply = g_steal_pointer(&reply);
    return TRUE;
}

/* Sends msg and gives its body's stream once the status is 2xx; otherwise the transport's
 * error, or the API's read from the body. */
static GInputStream *
client_send_ok(CarrelClient *client, SoupMessage *msg, GError **error)
{
    g_autoptr(GError) local = NULL;
    g_autoptr(GInputStream) stream = soup_session_send(client->session, msg, NULL, &local);
    guint status;

    if (!stream) {
        client_set_transport_error(client, local, "sending a request to", error);
        return NULL;
    }
    status = soup_message_get_status(msg);
    if (status < 200 || status > 299) {
        g_autoptr(GBytes) reply = client_read_reply(client, msg, stream, error);

        if (reply)
            client_set_api_error(status, reply, error);
        return NULL;
    }
    return g_steal_pointer(&stream);
}

#define CLIENT_EVENT_MAX (1024 * 1024)

/* Hands one "event: NAME\ndata: JSON" block to func; lines other than these are ignored. */
static gboolean
client_dispatch_event(const char *block, CarrelClientEventFunc func, gpointer user_data,
                      gboolean *ret_more, GError **error)
{
    g_auto(GStrv) lines = g_strsplit(block, "\n", -1);
    const char *event = NULL;
    const char *data = NULL;
    g_autoptr(GBytes) bytes = NULL;
    g_autoptr(JsonNode) node = NULL;

    for (guint i = 0; lines[i]; i++) {
        if (g_str_has_prefix(lines[i], "event: "))
            event = lines[i] + 7;
        else if (g_str_has_prefix(lines[i], "data: "))
            data = lines[i] + 6;
    }
    *ret_more = TRUE;
    if (!event || !data)
        return TRUE;
    bytes = g_bytes_new_static(data, strlen(data));
    node = client_parse_json(bytes, error);
    if (!node)
        return FALSE;
    *ret_more = func(event, node, user_data);
    return TRUE;
}

static gboolean
client_read_events(GInputStream *stream, CarrelClientEventFunc func, gpointer user_data,
                   GError **error)
{
    g_autoptr(GString) buf = g_string_new(NULL);
    gboolean more = TRUE;

    while (more) {
        g_autoptr(GError) local = NULL;
        g_autoptr(GBytes) chunk =
            g_input_stream_read_bytes(stream, CLIENT_READ_CHUNK, NULL, &local);
        char *end;

        if (!chunk) {
            g_set_error(error, CARREL_ERROR, CARREL_ERROR_FAILED, "reading events: %s",
                        local->message);
            return FALSE;
        }
        if (g_bytes_get_size(chunk) == 0)
            break;
        g_string_append_len(buf, g_bytes_get_data(chunk, NULL), (gssize)g_bytes_get_size(chunk));
        while (more && (end = strstr(buf->str, "\n\n")) != NULL) {
            g_autofree char *block = g_strndup(buf->str, (gsize)(end - buf->str));

            g_string_erase(buf, 0, end - buf->str + 2);
            if (!client_dispatch_event(block, func, user_data, &more, error))
                return FALSE;
        }
        if (buf->len > CLIENT_EVENT_MAX) {
            g_set_error(error, CARREL_ERROR, CARREL_ERROR_FAILED,
                        "carreld sent an event over %d bytes", CLIENT_EVENT_MAX);
            return FALSE;
        }
    }
    g_input_stream_close(stream, NULL, NULL);
    return TRUE;
}

gboolean
carrel_client_call_events(CarrelClient *client, const char *method, const char *path,
                          JsonNode *body, CarrelClientEventFunc func, gpointer user_data,
                          GError **error)
{
    g_autoptr(SoupMessage) msg = NULL;
    g_autoptr(GInputStream) stream = NULL;
    g_autoptr(GBytes) request = NULL;

    if (body) {
        char *text = json_to_string(body, FALSE);

        request = g_bytes_new_take(text, strlen(text));
    }
    client->unreachable = FALSE;
    msg =
        client_new_message(client, method, path, body ? "application/json" : NULL, request, error);
    if (!msg)
        return FALSE;
    client->reading = FALSE;
    if (!(stream = client_send_ok(client, msg, error)))
        return FALSE;
    return client_read_events(stream, func, user_data, error);
}

gboolean
carrel_client_upload(CarrelClient *client, const char *path, GInputStream *body, goffset length,
                     JsonNode **ret_reply, GError **error)
{
    g_autoptr(SoupMessage) msg = NULL;
    g_autoptr(GInputStream) stream = NULL;
    g_autoptr(GBytes) reply = NULL;
    g_autoptr(JsonNode) node = NULL;
    g_autoptr(GError) local = NULL;
    guint status;

    client->unreachable = FALSE;
    if (!(msg = client_new_message(client, "PUT", path, NULL, NULL, error)))
        return FALSE;
    /* length -1: chunked, for a pipe whose size nobody knows in advance. */
    soup_message_set_request_body(msg, "application/octet-stream", body, length);
    client->reading = FALSE;
    if (client->progress) {
        client->sent = 0;
        client->sent_total = length;
        g_signal_connect(msg, "wrote-body-data", G_CALLBACK(client_wrote_body_data), client);
    }
    stream = soup_session_send(client->session, msg, NULL, &local);
    if (!stream)
        return client_set_transport_error(client, local, "sending a request to", error);
    if (!(reply = client_read_reply(client, msg, stream, error)))
        return FALSE;
    status = soup_message_get_status(msg);
    if (status < 200 || status > 299) {
        client_set_api_error(status, reply, error);
        return FALSE;
    }
    if (!(node = client_parse_json(reply, error)))
        return FALSE;
    if (ret_reply)
        *ret_reply = g_steal_pointer(&node);
    return TRUE;
}

/* Copies the reply body to out chunk by chunk, hashing it; nothing is held beyond a chunk. */
static gboolean
client_copy_reply(CarrelClient *client, SoupMessage *msg, GInputStream *stream, GOutputStream *out,
                  GChecksum *sha, guint64 *ret_bytes, GError **error)
{
    SoupMessageHeaders *headers = soup_message_get_response_headers(msg);
    gint64 total = soup_message_headers_get_encoding(headers) == SOUP_ENCODING_CONTENT_LENGTH
                       ? soup_message_headers_get_content_length(headers)
                       : -1;
    guint64 done = 0;

    for (;;) {
        g_autoptr(GError) local = NULL;
        g_autoptr(GBytes) chunk =
            g_input_stream_read_bytes(stream, CLIENT_READ_CHUNK, NULL, &local);
        gsize len = 0;
        const guint8 *data;

        if (!chunk)
            return client_set_transport_error(client, local, "reading the reply of", error);
        data = g_bytes_get_data(chunk, &len);
        if (len == 0)
            break;
        if (!g_output_stream_write_all(out, data, len, NULL, NULL, error))
            return FALSE;
        g_checksum_update(sha, data, (gssize)len);
        done += len;
        if (client->progress)
            client->progress(FALSE, (gint64)done, total, client->progress_data);
    }
    g_input_stream_close(stream, NULL, NULL);
    *ret_bytes = done;
    return TRUE;
}

gboolean
carrel_client_download(CarrelClient *client, const char *path, GOutputStream *out,
                       CarrelClientDownload *ret_info, GError **error)
{
    g_autoptr(SoupMessage) msg = NULL;
    g_autoptr(GInputStream) stream = NULL;
    g_autoptr(GChecksum) sha = g_checksum_new(G_CHECKSUM_SHA256);
    const char *header;
    guint64 bytes = 0;

    client->unreachable = FALSE;
    if (!(msg = client_new_message(client, "GET", path, NULL, NULL, error)))
        return FALSE;
    client->reading = TRUE;
    if (!(stream = client_send_ok(client, msg, error)))
        return FALSE;
    if (!client_copy_reply(client, msg, stream, out, sha, &bytes, error))
        return FALSE;
    header =
        soup_message_headers_get_one(soup_message_get_response_headers(msg), "X-Carrel-Sha256");
    ret_info->bytes = bytes;
    ret_info->sha256 = g_strdup(g_checksum_get_string(sha));
    ret_info->reply_sha256 = header && strlen(header) == 64 && carrel_util_is_clean_text(header)
                                 ? g_strdup(header)
                                 : NULL;
    return TRUE;
}

void
carrel_client_download_clear(CarrelClientDownload *info)
{
    g_clear_pointer(&info->sha256, g_free);
    g_clear_pointer(&info->reply_sha256, g_free);
}

typedef struct {
    GMainLoop *loop;
    SoupWebsocketConnection *ws;
    GError *error;
} WsConnect;

static void
on_ws_connected(GObject *source, GAsyncResult *result, gpointer data)
{
    WsConnect *c = data;

    c->ws = soup_session_websocket_connect_finish(SOUP_SESSION(source), result, &c->error);
    g_main_loop_quit(c->loop);
}

SoupWebsocketConnection *
carrel_client_websocket(CarrelClient *client, const char *path, GError **error)
{
    g_autoptr(GMainContext) context = g_main_context_ref_thread_default();
    g_autoptr(SoupMessage) msg = client_new_message(client, "GET", path, NULL, NULL, error);
    WsConnect c = {0};
    g_autoptr(JsonNode) reply = NULL;
    guint status;

    if (!msg)
        return NULL;
    c.loop = g_main_loop_new(context, FALSE);
    soup_session_websocket_connect_async(client->session, msg, NULL, NULL, G_PRIORITY_DEFAULT, NULL,
                                         on_ws_connected, &c);
    g_main_loop_run(c.loop);
    g_main_loop_unref(c.loop);
    if (c.ws) {
        /* The handshake's timeout is the session's; an interactive shell may stay idle. */
        soup_websocket_connection_set_keepalive_interval(c.ws, 30);
        return c.ws;
    }
    status = soup_message_get_status(msg);
    client->unreachable = status == 0;
    if (status == 0 || status == SOUP_STATUS_SWITCHING_PROTOCOLS) {
        g_set_error(error, CARREL_ERROR, CARREL_ERROR_FAILED, "cannot open a websocket to %s: %s",
                    client->endpoint, c.error->message);
        g_error_free(c.error);
        return NULL;
    }
    g_error_free(c.error);
    /* A refused handshake has no body to read: the same request without the upgrade gets the
     * API's error envelope, its reason. */
    if (!carrel_client_call(client, "GET", path, NULL, &reply, error))
        return NULL;
    g_set_error(error, CARREL_ERROR, CARREL_ERROR_FAILED, "carreld refused the websocket (HTTP %u)",
                status);
    return NULL;
}
