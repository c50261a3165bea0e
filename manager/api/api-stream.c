/*
 * api: GET /v1/stream, the web console's server-sent events: the sessions and approvals as the
 * caller sees them, and a session's timeline, polled once a second and sent when they change.
 * A stream holds only what libsoup has not written yet (the body does not accumulate), and a
 * principal holds at most a few streams at once (429 beyond).
 */
#include <string.h>
#include <sys/socket.h>

#include "api/api-priv.h"

#define STREAM_INTERVAL_MS 1000
#define STREAM_KEEPALIVE_TICKS 15
#define STREAM_EVENTS_MAX 200
/* A client that stops reading: its stream ends once this much waits to be written. */
#define STREAM_PENDING_MAX (8 * 1024 * 1024)
/* Sent with the 429: a tab that closes frees its stream within a tick or two. */
#define STREAM_RETRY_AFTER_S 5

/* Open streams per principal (token id), main loop and handler threads alike. */
struct _CarrelApiStreams {
    GMutex lock;
    GHashTable *open; /* token id -> GUINT_TO_POINTER(count) */
    guint max;
};

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
    gsize pending; /* bytes appended and not yet written */
    gboolean ended;
} Stream;

CarrelApiStreams *
carrel_api_streams_new(guint max_per_principal)
{
    CarrelApiStreams *streams = g_new0(CarrelApiStreams, 1);

    g_mutex_init(&streams->lock);
    streams->open = g_hash_table_new_full(g_str_hash, g_str_equal, g_free, NULL);
    streams->max = max_per_principal ? max_per_principal : CARREL_API_STREAMS_DEFAULT;
    return streams;
}

void
carrel_api_streams_free(CarrelApiStreams *streams)
{
    if (!streams)
        return;
    g_hash_table_unref(streams->open);
    g_mutex_clear(&streams->lock);
    g_free(streams);
}

void
carrel_api_streams_set_max(CarrelApiStreams *streams, guint max_per_principal)
{
    g_mutex_lock(&streams->lock);
    streams->max = max_per_principal ? max_per_principal : CARREL_API_STREAMS_DEFAULT;
    g_mutex_unlock(&streams->lock);
}

gboolean
carrel_api_streams_reserve(CarrelApiStreams *streams, const char *token_id, GError **error)
{
    guint count;
    gboolean ok;

    g_mutex_lock(&streams->lock);
    count = GPOINTER_TO_UINT(g_hash_table_lookup(streams->open, token_id));
    ok = count < streams->max;
    if (ok)
        g_hash_table_replace(streams->open, g_strdup(token_id), GUINT_TO_POINTER(count + 1));
    else
        g_set_error(error, CARREL_ERROR, CARREL_ERROR_LIMIT,
                    "too many open event streams for this token (at most %u): close one "
                    "(another tab or client) and try again",
                    streams->max);
    g_mutex_unlock(&streams->lock);
    return ok;
}

void
carrel_api_streams_release(CarrelApiStreams *streams, const char *token_id)
{
    guint count;

    g_mutex_lock(&streams->lock);
    count = GPOINTER_TO_UINT(g_hash_table_lookup(streams->open, token_id));
    if (count <= 1)
        g_hash_table_remove(streams->open, token_id);
    else
        g_hash_table_replace(streams->open, g_strdup(token_id), GUINT_TO_POINTER(count - 1));
    g_mutex_unlock(&streams->lock);
}

guint
carrel_api_streams_count(CarrelApiStreams *streams, const char *token_id)
{
    guint count;

    g_mutex_lock(&streams->lock);
    count = GPOINTER_TO_UINT(g_hash_table_lookup(streams->open, token_id));
    g_mutex_unlock(&streams->lock);
    return count;
}

static void
stream_free(Stream *st)
{
    if (st->timer)
        g_source_remove(st->timer);
    carrel_api_streams_release(st->api->streams, st->who->token_id);
    carrel_principal_free(st->who);
    g_free(st->session_id);
    g_free(st->last_sessions);
    g_free(st->last_approvals);
    g_free(st);
}

/* Ends the stream once: the client sees the end of the body. */
static void
stream_end(Stream *st)
{
    if (st->ended)
        return;
    st->ended = TRUE;
    if (st->timer) {
        g_source_remove(st->timer);
        st->timer = 0;
    }
    soup_message_body_complete(soup_server_message_get_response_body(st->msg));
    soup_server_message_unpause(st->msg);
}

static void
stream_send(Stream *st, const char *event, const char *data)
{
    SoupMessageBody *body = soup_server_message_get_response_body(st->msg);
    char *chunk = event ? g_strdup_printf("event: %s\ndata: %s\n\n", event, data)
                        : g_strdup(": keepalive\n\n");
    gsize len = strlen(chunk);

    if (st->ended) {
        g_free(chunk);
        return;
    }
    /* A client that reads nothing would make carreld hold every chunk: it is cut off once
     * what it left unread passes the bound (one large chunk alone is let through). */
    if (st->pending > STREAM_PENDING_MAX) {
        GSocket *sock = soup_server_message_get_socket(st->msg);

        g_free(chunk);
        g_message("event stream of %s ended: the client does not read", st->who->label);
        stream_end(st);
        /* What is queued would wait for that client forever: the connection goes, and with
         * it the message (finished) and its slot. */
        if (sock)
            g_socket_shutdown(sock, TRUE, TRUE, NULL);
        return;
    }
    st->pending += len;
    soup_message_body_append(body, SOUP_MEMORY_TAKE, chunk, len);
    soup_server_message_unpause(st->msg);
}

/* libsoup wrote a chunk: with accumulate off, it is freed now. */
static void
on_wrote_body_data(SoupServerMessage *msg, guint chunk_size, gpointer data)
{
    Stream *st = data;

    st->pending -= MIN(st->pending, (gsize)chunk_size);
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

void
carrel_api_post_to_loop(GMainContext *context, GSourceFunc func, gpointer data,
                        GDestroyNotify notify)
{
    g_autoptr(GSource) source = g_idle_source_new();

    /* Same-priority sources dispatch in the order they were attached. */
    g_source_set_priority(source, G_PRIORITY_DEFAULT);
    g_source_set_callback(source, func, data, notify);
    g_source_attach(source, context);
}

/* The client closed its end: an event-stream client sends nothing after its request, so a
 * readable socket at its end of file (or a hangup) means it left. Seen within a tick, rather
 * than at the next write that fails (a keepalive or two later). Over TLS the close is a record,
 * not the end of file: there, the write that fails notices it. */
gboolean
carrel_api_stream_client_gone(SoupServerMessage *msg)
{
    GSocket *sock = soup_server_message_get_socket(msg);
    GIOCondition cond;
    char c;

    if (!sock)
        return FALSE;
    cond = g_socket_condition_check(sock, G_IO_IN | G_IO_HUP | G_IO_ERR);
    if (cond & (G_IO_HUP | G_IO_ERR))
        return TRUE;
    return (cond & G_IO_IN) && recv(g_socket_get_fd(sock), &c, 1, MSG_PEEK | MSG_DONTWAIT) == 0;
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
        st->timer = 0; /* removed by returning */
        st->ended = TRUE;
        soup_message_body_complete(soup_server_message_get_response_body(st->msg));
        soup_server_message_unpause(st->msg);
        return G_SOURCE_REMOVE;
    }
    if (carrel_api_stream_client_gone(st->msg)) {
        GSocket *sock = soup_server_message_get_socket(st->msg);

        /* The end of the body cannot be written: the message finishes, and frees the slot. */
        g_socket_shutdown(sock, TRUE, TRUE, NULL);
        stream_end(st);
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
    if (timeline && !st->ended) {
        stream_send(st, "timeline", timeline);
        sent = TRUE;
    }
    if (st->ended)
        return G_SOURCE_REMOVE; /* stream_end cleared st->timer */
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
    /* Each chunk is dropped once written: a long stream holds what is in flight, not its
     * history. */
    soup_message_body_set_accumulate(soup_server_message_get_response_body(msg), FALSE);
    g_signal_connect(msg, "wrote-body-data", G_CALLBACK(on_wrote_body_data), st);
    g_signal_connect(msg, "finished", G_CALLBACK(on_stream_finished), st);
    if (stream_tick(st) == G_SOURCE_CONTINUE)
        st->timer = g_timeout_add(STREAM_INTERVAL_MS, stream_tick, st);
}

void
carrel_api_set_max_streams(CarrelApi *api, guint max_per_principal)
{
    carrel_api_streams_set_max(api->streams, max_per_principal);
}

CarrelApiReply *
carrel_api_get_stream(CarrelApiRequest *req, GError **error)
{
    g_autoptr(GError) limit = NULL;
    g_autofree char *after = NULL;
    CarrelApiReply *reply;

    /* Reserved here, released when the stream finishes (stream_free). */
    if (carrel_api_streams_reserve(req->api->streams, req->who->token_id, &limit))
        return carrel_api_reply_new_stream(req->who, carrel_api_query(req, "session"));
    reply = carrel_api_reply_new_error(CARREL_HTTP_TOO_MANY_REQUESTS, limit);
    after = g_strdup_printf("%u", STREAM_RETRY_AFTER_S);
    carrel_api_reply_add_header(reply, "Retry-After", after);
    return reply;
}
