/*
 * api: WS /v1/console/{ticket}, a websocket proxy from the browser (spice-html5, one websocket per
 * SPICE channel) to the session's SPICE server on 127.0.0.1. Who may connect is decided before the
 * upgrade (same origin, cookie, ticket); what may reach the guest is decided per message by the
 * SPICE filter (view-only unless the viewer holds the control lease). Neither tickets nor cookies
 * are ever logged.
 */
#include <string.h>

#include "api/api-console-priv.h"

/* The first message (the SPICE link) must arrive this soon after the upgrade. */
#define LINK_TIMEOUT_S 10
/* Bytes from the viewer waiting for the SPICE server; beyond this the viewer is cut off. */
#define TO_SERVER_MAX (1024 * 1024)
#define READ_CHUNK (64 * 1024)
/* Websocket close codes: policy violation, unsupported data, server error. */
#define WS_CLOSE_POLICY 1008
#define WS_CLOSE_UNSUPPORTED 1003
#define WS_CLOSE_ERROR 1011
/* Once the main channel's SPICE connection closed, spice-server closes the other channels of that
 * client itself; a connection still open this much later is closed by the proxy. */
#define AFTER_MAIN_S 10
/* While reading SPICE waits for a viewer to drain, how often to look. */
#define DRAIN_POLL_MS 25
/* How often an open channel looks for a viewer that stopped taking what it was sent. */
#define STALL_WATCH_MS 1000
/* How long a closed viewer's connection may take to end before the proxy resets it. */
#define CLOSE_GRACE_S 5

/* ---- refusals before the upgrade ---- */

static void
refuse(CarrelApi *api, SoupServerMessage *msg, guint status, const GError *error)
{
    g_autoptr(CarrelApiReply) reply = carrel_api_reply_new_error(status, error);

    carrel_api_reply_add_header(reply, "Cache-Control", "no-store");
    carrel_api_reply_write(reply, api, msg);
    /* The path holds the ticket: never logged. */
    g_message("console: websocket refused with %u: %s", status, error->message);
}

/* The ticket of a /v1/console/{ticket} path, or NULL. */
static const char *
path_ticket(const char *path)
{
    const char *ticket;

    if (!g_str_has_prefix(path, CARREL_CONSOLE_PREFIX "/"))
        return NULL;
    ticket = path + strlen(CARREL_CONSOLE_PREFIX "/");
    return *ticket && !strchr(ticket, '/') ? ticket : NULL;
}

/* Who opens the websocket, once origin, cookie and ticket are right; else NULL, with the status
 * to refuse it with. */
static CarrelPrincipal *
console_check(CarrelApi *api, SoupServerMessage *msg, const char *path, char **ret_session_id,
              guint *ret_port, guint *ret_status, GError **error)
{
    g_autoptr(CarrelPrincipal) principal = NULL;
    g_autofree char *cookie = NULL;
    const char *ticket = path_ticket(path);

    *ret_status = SOUP_STATUS_NOT_FOUND;
    if (!g_str_equal(soup_server_message_get_method(msg), "GET")) {
        *ret_status = SOUP_STATUS_METHOD_NOT_ALLOWED;
        g_set_error(error, CARREL_ERROR, CARREL_ERROR_INVALID_ARG,
                    "the console is a websocket: GET only");
        return NULL;
    }
    if (!ticket) {
        g_set_error(error, CARREL_ERROR, CARREL_ERROR_NOT_FOUND, "no such route");
        return NULL;
    }
    /* A page of another site must not reach a console with the viewer's cookie. */
    if (!carrel_api_same_origin(msg)) {
        *ret_status = SOUP_STATUS_FORBIDDEN;
        g_set_error(error, CARREL_ERROR, CARREL_ERROR_FORBIDDEN, "cross-origin websocket refused");
        return NULL;
    }
    cookie = carrel_api_cookie_get(msg);
    principal = carrel_api_cookie_lookup(api, cookie, NULL);
    if (!principal) {
        *ret_status = SOUP_STATUS_UNAUTHORIZED;
        g_set_error(error, CARREL_ERROR, CARREL_ERROR_UNAUTHORIZED,
                    "the console needs a login cookie");
        return NULL;
    }
    if (!carrel_console_tickets_check(api->console_tickets, ticket, principal->token_id,
                                      ret_session_id, ret_port, error)) {
        if (g_error_matches(*error, CARREL_ERROR, CARREL_ERROR_FORBIDDEN))
            *ret_status = SOUP_STATUS_FORBIDDEN;
        else if (g_error_matches(*error, CARREL_ERROR, CARREL_ERROR_GONE))
            *ret_status = SOUP_STATUS_GONE;
        return NULL;
    }
    return g_steal_pointer(&principal);
}

static void
console_precheck(SoupServer *server, SoupServerMessage *msg, const char *path, GHashTable *query,
                 gpointer user_data)
{
    g_autoptr(GError) error = NULL;
    guint status = 0;
    g_autoptr(CarrelPrincipal) principal =
        console_check(user_data, msg, path, NULL, NULL, &status, &error);

    /* Accepted: no status set, so libsoup goes on with the handshake (protocol "binary"). */
    if (!principal)
        refuse(user_data, msg, status, error);
}

/* Runs before a body is read: a websocket handshake has none. */
static void
console_early(SoupServer *server, SoupServerMessage *msg, const char *path, GHashTable *query,
              gpointer user_data)
{
    SoupMessageHeaders *headers = soup_server_message_get_request_headers(msg);
    SoupEncoding encoding = soup_message_headers_get_encoding(headers);

    if (encoding == SOUP_ENCODING_CHUNKED || encoding == SOUP_ENCODING_EOF ||
        (encoding == SOUP_ENCODING_CONTENT_LENGTH &&
         soup_message_headers_get_content_length(headers) > 0)) {
        g_autoptr(GError) error =
            g_error_new(CARREL_ERROR, CARREL_ERROR_INVALID_ARG, "the console takes no body");
        soup_message_headers_replace(soup_server_message_get_response_headers(msg), "Connection",
                                     "close");
        refuse(user_data, msg, SOUP_STATUS_BAD_REQUEST, error);
    }
}

/* ---- the proxy ---- */

typedef struct {
    gint refs;
    CarrelApi *api;
    SoupWebsocketConnection *ws;
    char *ticket;
    CarrelPrincipal *who; /* the viewer, asked again for every message acting on the guest */
    char *session_id;
    guint port;
    CarrelSpiceFilter *filter;
    gboolean linked;
    gboolean is_main;
    guint8 channel_type;
    int may_act; /* -1: not asked yet for the message being filtered */
    GCancellable *cancel;
    GSocketConnection *tcp;
    GByteArray *to_server; /* filtered bytes not yet written */
    GBytes *writing;       /* the bytes being written */
    gboolean closed;       /* the viewer's side */
    gboolean tcp_closed;   /* the SPICE server's side */
    gboolean grouped;      /* in api->console_upstreams */
    guint link_timeout;
    guint after_main_timeout;
    GByteArray *reply; /* the SPICE server's link reply, until its key is read */
    guint8 key[CARREL_SPICE_PUBKEY_SIZE];
    gboolean have_key;
    GSocket *ws_socket;      /* the viewer's connection, to see what left (flow) */
    CarrelConsoleFlow *flow; /* SPICE -> viewer: what the websocket holds */
    guint drain_timer;       /* reading SPICE waits for the viewer to drain */
    /* The inputs channel: what the person does, for the timeline. */
    CarrelSpiceInputParser *input_parser;
    CarrelSpiceRecorder *recorder;
    guint typed_timer;         /* typed text waits for more keys */
    guint64 person_events;     /* recorded */
    guint64 person_unrecorded; /* refused by core or not written */
} Proxy;

static void upstreams_remove(Proxy *p);

static Proxy *
proxy_ref(Proxy *p)
{
    g_atomic_int_inc(&p->refs);
    return p;
}

static void
proxy_unref(Proxy *p)
{
    if (!g_atomic_int_dec_and_test(&p->refs))
        return;
    upstreams_remove(p);
    g_clear_object(&p->ws);
    g_clear_object(&p->cancel);
    g_clear_object(&p->tcp);
    g_clear_pointer(&p->filter, carrel_spice_filter_free);
    g_byte_array_unref(p->to_server);
    g_clear_pointer(&p->reply, g_byte_array_unref);
    g_clear_pointer(&p->writing, g_bytes_unref);
    g_clear_object(&p->ws_socket);
    g_clear_pointer(&p->flow, carrel_console_flow_free);
    g_clear_pointer(&p->input_parser, carrel_spice_input_parser_free);
    g_clear_pointer(&p->recorder, carrel_spice_recorder_free);
    g_free(p->ticket);
    carrel_principal_free(p->who);
    g_free(p->session_id);
    g_free(p);
}

static void flush_to_server(Proxy *p);

/*
 * The order of teardown. spice-server 0.15 can crash QEMU (its display worker uses a channel
 * client already destroyed) when a display channel's connection is closed by the client on its
 * own, around its authentication or with a frame half sent. It tears a whole client down itself
 * when the main channel's connection goes. So the proxy never closes a non-main channel's SPICE
 * connection while the main one of its ticket is open: when that viewer leaves, the proxy keeps
 * reading and discarding until spice-server closes the connection, once main is gone.
 */

static GPtrArray *
upstreams(Proxy *p)
{
    return p->api->console_upstreams ? g_hash_table_lookup(p->api->console_upstreams, p->ticket)
                                     : NULL;
}

static void
upstreams_add(Proxy *p)
{
    GPtrArray *group = upstreams(p);

    if (!p->api->console_upstreams)
        return;
    if (!group) {
        group = g_ptr_array_new();
        g_hash_table_insert(p->api->console_upstreams, g_strdup(p->ticket), group);
    }
    g_ptr_array_add(group, p);
    p->grouped = TRUE;
}

static void
upstreams_remove(Proxy *p)
{
    GPtrArray *group = upstreams(p);

    if (!p->grouped)
        return;
    p->grouped = FALSE;
    if (!group)
        return;
    g_ptr_array_remove(group, p);
    if (group->len == 0)
        g_hash_table_remove(p->api->console_upstreams, p->ticket);
}

static gboolean
main_upstream_open(Proxy *p)
{
    GPtrArray *group = upstreams(p);

    for (guint i = 0; group && i < group->len; i++) {
        Proxy *q = g_ptr_array_index(group, i);

        if (q->is_main && q != p)
            return TRUE;
    }
    return FALSE;
}

static void proxy_close_tcp(Proxy *p);

static gboolean
on_after_main_timeout(gpointer user_data)
{
    Proxy *p = user_data;

    p->after_main_timeout = 0;
    g_message("console: session %s channel %u: still open %d s after main, closed by the proxy",
              p->session_id, p->channel_type, AFTER_MAIN_S);
    proxy_close_tcp(p);
    proxy_unref(p);
    return G_SOURCE_REMOVE;
}

/* Main is gone: spice-server closes this connection itself, or the proxy does in a while. */
static void
after_main(Proxy *p)
{
    if (p->tcp_closed || p->after_main_timeout)
        return;
    p->after_main_timeout =
        g_timeout_add_seconds(AFTER_MAIN_S, on_after_main_timeout, proxy_ref(p));
}

/* Ends the TCP side once: pending reads and writes are cancelled. */
static void
proxy_close_tcp(Proxy *p)
{
    g_autoptr(GPtrArray) others = NULL;
    GPtrArray *group;

    if (p->tcp_closed)
        return;
    p->tcp_closed = TRUE;
    g_cancellable_cancel(p->cancel);
    if (p->tcp) {
        g_io_stream_close(G_IO_STREAM(p->tcp), NULL, NULL);
        g_debug("console: session %s channel %u: SPICE connection closed", p->session_id,
                p->channel_type);
    }
    upstreams_remove(p);
    if (p->after_main_timeout) {
        g_source_remove(p->after_main_timeout);
        p->after_main_timeout = 0;
        proxy_unref(p); /* the timeout's; the caller holds another */
    }
    group = upstreams(p);
    if (!p->is_main || !group || main_upstream_open(p))
        return;
    others = g_ptr_array_copy(group, NULL, NULL);
    for (guint i = 0; i < others->len; i++)
        after_main(g_ptr_array_index(others, i));
}

/* The viewer left: what becomes of the SPICE connection. */
static void
proxy_leave_upstream(Proxy *p)
{
    if (p->is_main || !p->grouped) {
        proxy_close_tcp(p);
        return;
    }
    /* A display channel that never sent its DISPLAY_INIT is sent one, as spice-html5 would. */
    carrel_spice_filter_append_display_init(p->filter, p->to_server);
    flush_to_server(p);
    if (!main_upstream_open(p))
        after_main(p);
}

/* ---- people's input on the timeline ---- */

/* Hands events (CarrelPersonEvent) to core, which records those of the lease holder. */
static void
report_person(Proxy *p, GPtrArray *events)
{
    for (guint i = 0; i < events->len; i++) {
        const CarrelPersonEvent *ev = g_ptr_array_index(events, i);
        g_autoptr(GError) error = NULL;

        if (carrel_manager_person_event(p->api->mgr, p->who, p->session_id, ev->action, ev->params,
                                        ev->started_us, &error)) {
            p->person_events++;
            continue;
        }
        /* Said once per channel: a flood of refusals must not flood the log. */
        if (p->person_unrecorded++ == 0)
            g_message("console: session %s: input of %s not recorded: %s", p->session_id,
                      p->who->label, error->message);
    }
}

static gboolean
on_typed_timer(gpointer user_data)
{
    Proxy *p = user_data;
    g_autoptr(GPtrArray) events =
        g_ptr_array_new_with_free_func((GDestroyNotify)carrel_person_event_free);

    carrel_spice_recorder_tick(p->recorder, g_get_monotonic_time(), events);
    report_person(p, events);
    if (carrel_spice_recorder_pending(p->recorder))
        return G_SOURCE_CONTINUE;
    p->typed_timer = 0;
    proxy_unref(p);
    return G_SOURCE_REMOVE;
}

/* The tap of the inputs channel's filter: messages that reached the guest. */
static void
on_input_bytes(gpointer user_data, const guint8 *data, gsize len)
{
    Proxy *p = user_data;
    g_autoptr(GArray) inputs = g_array_new(FALSE, FALSE, sizeof(CarrelSpiceInput));
    g_autoptr(GPtrArray) events =
        g_ptr_array_new_with_free_func((GDestroyNotify)carrel_person_event_free);
    gint64 now = g_get_monotonic_time();

    carrel_spice_input_parser_feed(p->input_parser, data, len, inputs);
    for (guint i = 0; i < inputs->len; i++)
        carrel_spice_recorder_feed(p->recorder, &g_array_index(inputs, CarrelSpiceInput, i), now,
                                   events);
    report_person(p, events);
    if (carrel_spice_recorder_pending(p->recorder) && !p->typed_timer)
        p->typed_timer =
            g_timeout_add(CARREL_PERSON_TYPE_IDLE_US / 1000 / 4, on_typed_timer, proxy_ref(p));
}

/* The channel ends: typed text not yet recorded is, now. */
static void
person_close(Proxy *p)
{
    g_autoptr(GPtrArray) events = NULL;

    if (!p->recorder)
        return;
    events = g_ptr_array_new_with_free_func((GDestroyNotify)carrel_person_event_free);
    carrel_spice_recorder_flush(p->recorder, events);
    report_person(p, events);
    if (p->typed_timer) {
        g_source_remove(p->typed_timer);
        p->typed_timer = 0;
        proxy_unref(p); /* the timer's; the caller holds another */
    }
    g_message("console: session %s: %" G_GUINT64_FORMAT " events of %s recorded, %" G_GUINT64_FORMAT
              " not (%" G_GUINT64_FORMAT " over the rate, %" G_GUINT64_FORMAT
              " malformed input messages)",
              p->session_id, p->person_events, p->who->label, p->person_unrecorded,
              carrel_spice_recorder_get_suppressed(p->recorder),
              carrel_spice_input_parser_get_refused(p->input_parser));
}

/* libsoup times a close handshake out only once its close frame is written, which a viewer
 * that reads nothing never lets happen (seen in CI: a stuck viewer open 60 s after its close):
 * a connection still open CLOSE_GRACE_S after the close is reset. */
static gboolean
on_close_grace(gpointer user_data)
{
    Proxy *p = user_data;

    if (p->ws_socket && soup_websocket_connection_get_state(p->ws) != SOUP_WEBSOCKET_STATE_CLOSED) {
        g_message("console: session %s channel %u of %s: the viewer took no close in %d s, "
                  "its connection reset",
                  p->session_id, p->channel_type, p->who->label, CLOSE_GRACE_S);
        carrel_console_socket_reset(p->ws_socket);
    }
    proxy_unref(p);
    return G_SOURCE_REMOVE;
}

/* Closes both sides once; reason goes to the viewer (never a secret). */
static void
proxy_close(Proxy *p, gushort code, const char *reason)
{
    if (p->closed)
        return;
    p->closed = TRUE;
    person_close(p);
    if (p->link_timeout) {
        g_source_remove(p->link_timeout);
        p->link_timeout = 0;
    }
    proxy_leave_upstream(p);
    if (p->is_main)
        carrel_console_tickets_main_closed(p->api->console_tickets, p->ticket);
    if (soup_websocket_connection_get_state(p->ws) == SOUP_WEBSOCKET_STATE_OPEN) {
        /* A close frame holds at most 123 bytes of reason. */
        g_autofree char *cut = reason ? g_utf8_make_valid(reason, MIN(strlen(reason), 120)) : NULL;
        soup_websocket_connection_close(p->ws, code, cut);
        g_timeout_add_seconds(CLOSE_GRACE_S, on_close_grace, proxy_ref(p));
    }
    g_message("console: session %s channel %u of %s closed (%" G_GUINT64_FORMAT
              " input messages dropped)%s%s",
              p->session_id, p->channel_type, p->who->label,
              carrel_spice_filter_get_dropped(p->filter), reason ? ": " : "", reason ? reason : "");
}

static void
on_written(GObject *source, GAsyncResult *res, gpointer user_data)
{
    Proxy *p = user_data;
    g_autoptr(GError) error = NULL;
    gboolean ok = g_output_stream_write_all_finish(G_OUTPUT_STREAM(source), res, NULL, &error);

    g_clear_pointer(&p->writing, g_bytes_unref);
    if (!ok) {
        proxy_close_tcp(p);
        proxy_close(p, WS_CLOSE_ERROR, "the SPICE server closed");
    } else {
        flush_to_server(p);
    }
    proxy_unref(p);
}

static void
flush_to_server(Proxy *p)
{
    if (p->tcp_closed || !p->tcp || p->writing || p->to_server->len == 0)
        return;
    /* One write at a time; its bytes live in p->writing until it ends. */
    p->writing = g_byte_array_free_to_bytes(g_steal_pointer(&p->to_server));
    p->to_server = g_byte_array_new();
    g_output_stream_write_all_async(
        g_io_stream_get_output_stream(G_IO_STREAM(p->tcp)), g_bytes_get_data(p->writing, NULL),
        g_bytes_get_size(p->writing), G_PRIORITY_DEFAULT, p->cancel, on_written, proxy_ref(p));
}

static void read_from_server(Proxy *p);

/* What the viewer took so far, told to the flow. Without TCP's counters (a Unix socket) a
 * writable socket stands for "all of it". */
static void
measure_viewer(Proxy *p, gint64 now)
{
    guint64 acked = 0, queued = 0;

    if (p->ws_socket && carrel_console_socket_measure(p->ws_socket, &acked, &queued))
        carrel_console_flow_measured(p->flow, acked, queued, now);
    else if (!p->ws_socket ||
             (g_socket_condition_check(p->ws_socket, G_IO_OUT) & G_IO_OUT) == G_IO_OUT)
        carrel_console_flow_measured(p->flow, G_MAXUINT64 / 2, 0, now);
}

static void
close_stuck(Proxy *p)
{
    g_autofree char *why =
        g_strdup_printf("the viewer took nothing for %u s", p->api->console_stall_ms / 1000);

    proxy_close(p, WS_CLOSE_POLICY, why);
}

static gboolean
on_drain_check(gpointer user_data)
{
    Proxy *p = user_data;
    gint64 now = g_get_monotonic_time();
    CarrelConsoleFlowState state;

    if (p->tcp_closed) {
        p->drain_timer = 0;
        proxy_unref(p);
        return G_SOURCE_REMOVE;
    }
    measure_viewer(p, now);
    state = p->closed ? CARREL_CONSOLE_FLOW_OPEN : carrel_console_flow_state(p->flow, now);
    if (state == CARREL_CONSOLE_FLOW_FULL)
        return G_SOURCE_CONTINUE;
    p->drain_timer = 0;
    if (state == CARREL_CONSOLE_FLOW_STUCK)
        close_stuck(p);
    /* Read on: to the viewer again, or (closed) to discard until spice-server closes. */
    if (!p->tcp_closed)
        read_from_server(p);
    proxy_unref(p);
    return G_SOURCE_REMOVE;
}

/* What waits for a stuck viewer may all fit in the kernel's buffers, under the bound, where no
 * drain check runs (spice-server stopped sending, or sends little): this looks all along. */
static gboolean
on_stall_watch(gpointer user_data)
{
    Proxy *p = user_data;
    gint64 now = g_get_monotonic_time();

    if (p->closed) {
        proxy_unref(p);
        return G_SOURCE_REMOVE;
    }
    measure_viewer(p, now);
    if (carrel_console_flow_state(p->flow, now) == CARREL_CONSOLE_FLOW_STUCK)
        close_stuck(p);
    return G_SOURCE_CONTINUE;
}

/* After a message to the viewer: read on, or wait while the websocket holds too much. */
static void
read_on_or_wait(Proxy *p)
{
    gint64 now = g_get_monotonic_time();

    if (carrel_console_flow_over(p->flow)) {
        measure_viewer(p, now);
        p->api->console_flow_peak =
            MAX(p->api->console_flow_peak, carrel_console_flow_peak(p->flow));
        if (carrel_console_flow_over(p->flow)) {
            p->drain_timer = g_timeout_add(DRAIN_POLL_MS, on_drain_check, proxy_ref(p));
            return;
        }
    }
    read_from_server(p);
}

/* The server's key, from the first bytes of its link reply (the viewer gets them unchanged). */
static void
watch_link_reply(Proxy *p, GBytes *data)
{
    g_autoptr(GError) error = NULL;
    gsize len = 0;
    const guint8 *bytes = g_bytes_get_data(data, &len);
    gssize got;

    if (!p->reply)
        return;
    g_byte_array_append(p->reply, bytes,
                        (guint)MIN(len, (gsize)CARREL_SPICE_LINK_REPLY_KEY_END - p->reply->len));
    got = carrel_spice_parse_link_reply(p->reply->data, p->reply->len, p->key, &error);
    if (got == 0)
        return;
    p->have_key = got > 0;
    if (!p->have_key)
        g_message("console: session %s: %s", p->session_id, error->message);
    g_clear_pointer(&p->reply, g_byte_array_unref);
}

/* The ticket that goes to SPICE in place of the viewer's: the password only carreld knows. */
static gboolean
make_ticket(gpointer user_data, guint8 ret_ticket[CARREL_SPICE_TICKET_SIZE], GError **error)
{
    Proxy *p = user_data;
    g_autofree char *password = NULL;
    gboolean ok;

    if (!p->have_key) {
        g_set_error(error, CARREL_ERROR, CARREL_ERROR_INVALID_ARG,
                    "the viewer sent its ticket before the SPICE server's key");
        return FALSE;
    }
    password = carrel_console_tickets_password(p->api->console_tickets, p->ticket, p->who->token_id,
                                               error);
    if (!password)
        return FALSE;
    ok = carrel_spice_encrypt_ticket(p->key, password, ret_ticket, error);
    memset(password, 0, strlen(password));
    return ok;
}

static void
on_read(GObject *source, GAsyncResult *res, gpointer user_data)
{
    Proxy *p = user_data;
    g_autoptr(GError) error = NULL;
    g_autoptr(GBytes) data = g_input_stream_read_bytes_finish(G_INPUT_STREAM(source), res, &error);

    if (!data || g_bytes_get_size(data) == 0) {
        proxy_close_tcp(p);
        proxy_close(p, data ? SOUP_WEBSOCKET_CLOSE_NORMAL : WS_CLOSE_ERROR,
                    "the SPICE server closed");
    } else if (p->tcp_closed) {
        /* Closed meanwhile: nothing more to read. */
    } else if (p->closed ||
               soup_websocket_connection_get_state(p->ws) != SOUP_WEBSOCKET_STATE_OPEN) {
        /* The viewer left: read and discard until spice-server closes this channel. */
        proxy_close(p, SOUP_WEBSOCKET_CLOSE_NORMAL, NULL);
        if (!p->tcp_closed)
            read_from_server(p);
    } else {
        watch_link_reply(p, data);
        /* libsoup queues what the viewer does not take: the flow bounds that queue. */
        soup_websocket_connection_send_binary(p->ws, g_bytes_get_data(data, NULL),
                                              g_bytes_get_size(data));
        carrel_console_flow_sent(p->flow, carrel_console_ws_frame_size(g_bytes_get_size(data)),
                                 g_get_monotonic_time());
        p->api->console_flow_peak =
            MAX(p->api->console_flow_peak, carrel_console_flow_pending(p->flow));
        read_on_or_wait(p);
    }
    proxy_unref(p);
}

static void
read_from_server(Proxy *p)
{
    g_input_stream_read_bytes_async(g_io_stream_get_input_stream(G_IO_STREAM(p->tcp)), READ_CHUNK,
                                    G_PRIORITY_DEFAULT, p->cancel, on_read, proxy_ref(p));
}

static void
on_connected(GObject *source, GAsyncResult *res, gpointer user_data)
{
    Proxy *p = user_data;
    g_autoptr(GError) error = NULL;
    GSocketConnection *tcp = g_socket_client_connect_finish(G_SOCKET_CLIENT(source), res, &error);

    if (!tcp) {
        proxy_close_tcp(p);
        proxy_close(p, WS_CLOSE_ERROR, "cannot reach the session's SPICE server");
    } else if (p->tcp_closed) {
        g_io_stream_close(G_IO_STREAM(tcp), NULL, NULL);
        g_object_unref(tcp);
    } else {
        /* The client's timeout was for connecting: a channel may stay quiet for long (an idle
         * desktop), and a read that times out would close it. */
        g_socket_set_timeout(g_socket_connection_get_socket(tcp), 0);
        p->tcp = tcp;
        read_from_server(p);
        flush_to_server(p);
    }
    proxy_unref(p);
}

static void
connect_server(Proxy *p)
{
    g_autoptr(GSocketClient) client = g_socket_client_new();
    g_autofree char *host = g_strdup_printf("127.0.0.1:%u", p->port);

    g_socket_client_set_timeout(client, 10);
    g_socket_client_connect_to_host_async(client, host, (guint16)p->port, p->cancel, on_connected,
                                          proxy_ref(p));
}

static gboolean
may_act(gpointer user_data)
{
    Proxy *p = user_data;

    /* Asked once per websocket message: the lease as it is when the message arrives. */
    if (p->may_act < 0)
        p->may_act = carrel_manager_console_may_act(p->api->mgr, p->who, p->session_id);
    return p->may_act;
}

/* The link message was read: the ticket decides whether this channel may go on. */
static gboolean
accept_link(Proxy *p)
{
    const CarrelSpiceLink *link = carrel_spice_filter_get_link(p->filter);
    g_autoptr(GError) error = NULL;

    p->channel_type = link->channel_type;
    if (!carrel_console_tickets_link(p->api->console_tickets, p->ticket, p->who->token_id,
                                     link->channel_type, &error)) {
        proxy_close(p, WS_CLOSE_POLICY, error->message);
        return FALSE;
    }
    p->linked = TRUE;
    p->is_main = link->channel_type == CARREL_SPICE_CHANNEL_MAIN;
    if (link->channel_type == CARREL_SPICE_CHANNEL_INPUTS) {
        p->input_parser = carrel_spice_input_parser_new(link->mini_header);
        p->recorder = carrel_spice_recorder_new();
        carrel_spice_filter_set_tap(p->filter, on_input_bytes);
    }
    upstreams_add(p);
    if (p->link_timeout) {
        g_source_remove(p->link_timeout);
        p->link_timeout = 0;
    }
    g_message("console: session %s channel %u opened by %s", p->session_id, link->channel_type,
              p->who->label);
    connect_server(p);
    return TRUE;
}

static void
on_ws_message(SoupWebsocketConnection *ws, gint type, GBytes *message, gpointer user_data)
{
    Proxy *p = user_data;
    g_autoptr(GError) error = NULL;
    gsize len = 0;
    const guint8 *data = g_bytes_get_data(message, &len);

    if (p->closed)
        return;
    if (type != SOUP_WEBSOCKET_DATA_BINARY) {
        proxy_close(p, WS_CLOSE_UNSUPPORTED, "binary messages only");
        return;
    }
    p->may_act = -1;
    if (!carrel_spice_filter_feed(p->filter, data, len, p->to_server, &error)) {
        proxy_close(p, WS_CLOSE_POLICY, error->message);
        return;
    }
    if (!p->linked) {
        /* spice-html5 sends the whole link message as the first websocket message. */
        if (!carrel_spice_filter_get_link(p->filter)) {
            proxy_close(p, WS_CLOSE_POLICY, "the first message must be a SPICE link message");
            return;
        }
        if (!accept_link(p))
            return;
    }
    if (p->to_server->len > TO_SERVER_MAX) {
        proxy_close(p, WS_CLOSE_POLICY, "the viewer sends faster than the SPICE server reads");
        return;
    }
    flush_to_server(p);
}

static void
on_ws_closed(SoupWebsocketConnection *ws, gpointer user_data)
{
    Proxy *p = user_data;

    proxy_close(p, SOUP_WEBSOCKET_CLOSE_NORMAL, NULL);
    g_signal_handlers_disconnect_by_data(ws, p);
    proxy_unref(p);
}

static gboolean
on_link_timeout(gpointer user_data)
{
    Proxy *p = user_data;

    p->link_timeout = 0;
    proxy_close(p, WS_CLOSE_POLICY, "no SPICE link message in time");
    return G_SOURCE_REMOVE;
}

static void
on_websocket(SoupServer *server, SoupServerMessage *msg, const char *path,
             SoupWebsocketConnection *ws, gpointer user_data)
{
    CarrelApi *api = user_data;
    g_autofree char *session_id = NULL;
    g_autoptr(GError) error = NULL;
    guint port = 0, status = 0;
    /* Checked again: the ticket may have expired between the check and the upgrade. */
    g_autoptr(CarrelPrincipal) principal =
        console_check(api, msg, path, &session_id, &port, &status, &error);
    Proxy *p;

    if (!principal) {
        soup_websocket_connection_close(ws, WS_CLOSE_POLICY, "console ticket refused");
        return;
    }
    p = g_new0(Proxy, 1);
    p->refs = 1; /* the websocket's, dropped when it closes */
    p->api = api;
    p->ws = g_object_ref(ws);
    p->ticket = g_strdup(path_ticket(path));
    p->who = g_steal_pointer(&principal);
    p->session_id = g_steal_pointer(&session_id);
    p->port = port;
    p->filter = carrel_spice_filter_new(may_act, p);
    carrel_spice_filter_set_make_ticket(p->filter, make_ticket);
    p->reply = g_byte_array_new();
    p->cancel = g_cancellable_new();
    p->to_server = g_byte_array_new();
    p->flow = carrel_console_flow_new(api->console_flow_bound, (gint64)api->console_stall_ms * 1000,
                                      g_get_monotonic_time());
    if (soup_server_message_get_socket(msg)) {
        guint64 acked = 0, queued = 0;

        p->ws_socket = g_object_ref(soup_server_message_get_socket(msg));
        if (carrel_console_socket_measure(p->ws_socket, &acked, &queued))
            carrel_console_flow_start(p->flow, acked + queued);
    }
    /* Its own reference, dropped at the first look after the close. */
    g_timeout_add(STALL_WATCH_MS, on_stall_watch, proxy_ref(p));
    p->link_timeout = g_timeout_add_seconds(LINK_TIMEOUT_S, on_link_timeout, p);
    g_signal_connect(ws, "message", G_CALLBACK(on_ws_message), p);
    g_signal_connect(ws, "closed", G_CALLBACK(on_ws_closed), p);
}

void
carrel_api_console_init(CarrelApi *api)
{
    char *protocols[] = {(char *)"binary", NULL};

    api->console_tickets = carrel_console_tickets_new(NULL);
    carrel_api_console_set_flow(api, 0, 0);
    api->console_upstreams =
        g_hash_table_new_full(g_str_hash, g_str_equal, g_free, (GDestroyNotify)g_ptr_array_unref);
    soup_server_add_early_handler(api->server, CARREL_CONSOLE_PREFIX, console_early, api, NULL);
    soup_server_add_handler(api->server, CARREL_CONSOLE_PREFIX, console_precheck, api, NULL);
    soup_server_add_websocket_handler(api->server, CARREL_CONSOLE_PREFIX, NULL, protocols,
                                      on_websocket, api, NULL);
}

void
carrel_api_console_set_flow(CarrelApi *api, gsize bound, guint stall_ms)
{
    api->console_flow_bound = bound ? bound : CARREL_CONSOLE_FLOW_BOUND;
    api->console_stall_ms = stall_ms ? stall_ms : CARREL_CONSOLE_STALL_MS;
}

gsize
carrel_api_console_flow_peak(CarrelApi *api)
{
    return api->console_flow_peak;
}

void
carrel_api_console_clear(CarrelApi *api)
{
    g_clear_pointer(&api->console_tickets, carrel_console_tickets_free);
    g_clear_pointer(&api->console_upstreams, g_hash_table_unref);
}
