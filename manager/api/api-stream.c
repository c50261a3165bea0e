/*
 * api: GET /v1/stream, the web console's server-sent events: the sessions and approvals as the
 * caller sees them, and a session's timeline, polled once a second and sent when they change.
 */
#include <string.h>

#include "api/api-priv.h"

#define STREAM_INTERVAL_MS 1000
#define STREAM_KEEPALIVE_TICKS 15
#define STREAM_EVENTS_MAX 200

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
