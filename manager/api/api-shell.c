/*
 * api: GET /v1/sessions/{id}/shell, an interactive terminal in the guest over a websocket
 * (core's CarrelShell: a login shell on a pseudo-terminal through carrel-guest).
 *
 * The handler passes core's door (the control lease's holder or an admin), checks that the
 * request is a websocket handshake, starts the shell and answers 101; the connection is then
 * the shell's. Frames: binary both ways are the terminal's bytes; text frames are JSON control
 * messages: from the client {"type":"resize","rows":R,"cols":C} and {"type":"eof"}, from
 * carreld {"type":"started","handle":H}, {"type":"exit","exit_code":N} (then a normal close) and
 * {"type":"error","error":{...}}. A thread of its own polls the guest (50 ms while output or
 * input comes, backing off to 1 s while idle) and passes input on; when the socket closes, the
 * shell is killed in the guest, with everything it started.
 */
#include <string.h>

#include "api/api-priv.h"

#define POLL_MIN_MS 50
#define POLL_MAX_MS 1000
/* One input frame, and all input not yet taken by the guest: a client past them is cut off. */
#define SHELL_FRAME_MAX (64 * 1024)
#define SHELL_QUEUED_MAX (1024 * 1024)
#define SHELL_RETRY_AFTER_S 5
#define SHELL_KEEPALIVE_S 30

struct _CarrelApiShells {
    GMutex lock;
    GPtrArray *open; /* Link, each with a running thread */
};

typedef enum { INPUT_DATA, INPUT_RESIZE, INPUT_EOF, INPUT_WAKE } InputKind;

typedef struct {
    InputKind kind;
    GBytes *data;
    guint rows, cols;
} Input;

typedef struct {
    gint ref;
    CarrelApi *api;
    GMainContext *context;
    SoupWebsocketConnection *ws; /* main loop only; NULL once closed */
    CarrelShell *core;           /* the thread's */
    char *token_id;
    GAsyncQueue *inbox; /* Input, main loop -> thread */
    gint queued;        /* input bytes in the inbox (atomic) */
    gint closed;        /* atomic: the socket closed, the thread ends the shell */
    CarrelApiShells *all;
    GThread *thread;
} Link;

typedef struct {
    Link *link;
    GBytes *output; /* a binary frame, or */
    char *text;     /* a text frame, or neither: */
    gushort close;  /* the close code */
    char *reason;
} Post;

static void
input_free(gpointer data)
{
    Input *in = data;

    if (in->data)
        g_bytes_unref(in->data);
    g_free(in);
}

static void
link_unref(Link *link)
{
    if (!g_atomic_int_dec_and_test(&link->ref))
        return;
    carrel_shell_free(link->core);
    g_async_queue_unref(link->inbox);
    g_main_context_unref(link->context);
    g_free(link->token_id);
    g_free(link);
}

static gboolean
on_post(gpointer data)
{
    Post *p = data;
    SoupWebsocketConnection *ws = p->link->ws;

    if (!ws || soup_websocket_connection_get_state(ws) != SOUP_WEBSOCKET_STATE_OPEN)
        return G_SOURCE_REMOVE;
    if (p->output)
        soup_websocket_connection_send_binary(ws, g_bytes_get_data(p->output, NULL),
                                              g_bytes_get_size(p->output));
    else if (p->text)
        soup_websocket_connection_send_text(ws, p->text);
    else
        soup_websocket_connection_close(ws, p->close, p->reason);
    return G_SOURCE_REMOVE;
}

static void
post_free(gpointer data)
{
    Post *p = data;

    link_unref(p->link);
    if (p->output)
        g_bytes_unref(p->output);
    g_free(p->text);
    g_free(p->reason);
    g_free(p);
}

/* From the thread: one frame (output, or text taking node) or a close, to the main loop. */
static void
post(Link *link, GBytes *output, JsonNode *node, gushort close, const char *reason)
{
    Post *p = g_new0(Post, 1);

    g_atomic_int_inc(&link->ref);
    p->link = link;
    p->output = output ? g_bytes_ref(output) : NULL;
    p->text = node ? json_to_string(node, FALSE) : NULL;
    p->close = close;
    p->reason = g_strdup(reason);
    if (node)
        json_node_unref(node);
    carrel_api_post_to_loop(link->context, on_post, p, post_free);
}

static JsonNode *
control(const char *type, const char *member, gint64 value, const char *text)
{
    g_autoptr(JsonBuilder) b = json_builder_new();

    json_builder_begin_object(b);
    json_builder_set_member_name(b, "type");
    json_builder_add_string_value(b, type);
    if (member && text) {
        json_builder_set_member_name(b, member);
        json_builder_add_string_value(b, text);
    } else if (member) {
        json_builder_set_member_name(b, member);
        json_builder_add_int_value(b, value);
    }
    json_builder_end_object(b);
    return json_builder_get_root(b);
}

/* The error message, then a close with code. */
static void
post_error(Link *link, const GError *error, gushort code)
{
    JsonNode *node = carrel_api_error_envelope(error);

    json_object_set_string_member(json_node_get_object(node), "type", "error");
    post(link, NULL, node, 0, NULL);
    post(link, NULL, NULL, code, "shell error");
}

/* One input item to the guest; FALSE (error set) when the shell cannot go on. */
static gboolean
apply_input(Link *link, Input *in, GError **error)
{
    switch (in->kind) {
    case INPUT_DATA:
        g_atomic_int_add(&link->queued, -(gint)g_bytes_get_size(in->data));
        return carrel_shell_write(link->core, in->data, error);
    case INPUT_RESIZE:
        return carrel_shell_resize(link->core, in->rows, in->cols, error);
    case INPUT_EOF:
        return carrel_shell_end_input(link->core, error);
    case INPUT_WAKE:
        return TRUE;
    }
    return TRUE;
}

/* Waits up to ms for input and applies all that came; TRUE when some did. */
static gboolean
take_input(Link *link, guint ms, GError **error)
{
    Input *in = g_async_queue_timeout_pop(link->inbox, (guint64)ms * 1000);
    gboolean any = in != NULL;

    while (in) {
        g_autoptr(GError) local = NULL;
        gboolean ok = apply_input(link, in, &local);

        /* Input to a shell that just ended is dropped: the next read tells its end. */
        if (!ok && g_error_matches(local, CARREL_ERROR, CARREL_ERROR_WRONG_STATE))
            ok = TRUE;
        else if (!ok)
            g_propagate_error(error, g_steal_pointer(&local));

        input_free(in);
        if (!ok)
            return FALSE;
        in = g_async_queue_try_pop(link->inbox);
    }
    if (error && *error)
        return FALSE;
    return any;
}

static void
relay(Link *link)
{
    guint interval = POLL_MIN_MS;
    g_autoptr(GError) failure = NULL;

    while (!g_atomic_int_get(&link->closed)) {
        gboolean ended = FALSE, busy;
        int exit_code = -1;
        g_autoptr(GBytes) out = carrel_shell_read(link->core, &ended, &exit_code, &failure);

        if (!out)
            break;
        if (g_bytes_get_size(out))
            post(link, out, NULL, 0, NULL);
        if (ended) {
            post(link, NULL, control("exit", "exit_code", exit_code, NULL), 0, NULL);
            post(link, NULL, NULL, SOUP_WEBSOCKET_CLOSE_NORMAL, "exited");
            return;
        }
        busy = take_input(link, g_bytes_get_size(out) ? 0 : interval, &failure);
        if (failure)
            break;
        /* Output or typing: read again soon; neither: back off, up to a second. */
        interval = busy || g_bytes_get_size(out) ? POLL_MIN_MS : MIN(interval * 2, POLL_MAX_MS);
    }
    if (failure)
        post_error(link, failure,
                   g_error_matches(failure, CARREL_ERROR, CARREL_ERROR_FORBIDDEN)
                       ? SOUP_WEBSOCKET_CLOSE_POLICY_VIOLATION
                       : SOUP_WEBSOCKET_CLOSE_SERVER_ERROR);
}

static void
push_input(Link *link, Input *in)
{
    g_async_queue_push(link->inbox, in);
}

static void
wake(Link *link)
{
    Input *in = g_new0(Input, 1);

    in->kind = INPUT_WAKE;
    g_atomic_int_set(&link->closed, 1);
    push_input(link, in);
}

static gpointer
relay_thread(gpointer data)
{
    Link *link = data;
    CarrelApiShells *all = link->all;

    relay(link);
    /* Whatever ended the relay, nothing is left running in the guest. */
    carrel_shell_close(link->core);
    carrel_api_streams_release(link->api->streams, link->token_id);
    g_mutex_lock(&all->lock);
    /* Not joined by carreld's exit: the thread's resources go with it. */
    if (g_ptr_array_remove(all->open, link))
        g_thread_unref(link->thread);
    g_mutex_unlock(&all->lock);
    link_unref(link);
    return NULL;
}

CarrelApiShells *
carrel_api_shells_new(void)
{
    CarrelApiShells *all = g_new0(CarrelApiShells, 1);

    g_mutex_init(&all->lock);
    all->open = g_ptr_array_new();
    return all;
}

void
carrel_api_shells_free(CarrelApiShells *all)
{
    g_autoptr(GPtrArray) threads = g_ptr_array_new();

    if (!all)
        return;
    /* carreld is going: every shell is killed and its thread joined before the manager goes. */
    g_mutex_lock(&all->lock);
    for (guint i = 0; i < all->open->len; i++) {
        Link *link = g_ptr_array_index(all->open, i);

        wake(link);
        g_ptr_array_add(threads, g_thread_ref(link->thread));
    }
    g_mutex_unlock(&all->lock);
    for (guint i = 0; i < threads->len; i++)
        g_thread_join(g_ptr_array_index(threads, i));
    g_ptr_array_unref(all->open);
    g_mutex_clear(&all->lock);
    g_free(all);
}

static void
cut_off(Link *link, gushort code, const char *reason)
{
    if (link->ws && soup_websocket_connection_get_state(link->ws) == SOUP_WEBSOCKET_STATE_OPEN)
        soup_websocket_connection_close(link->ws, code, reason);
}

/* A text frame: a control message (carrel_shell_control_from_json), or NULL. */
static Input *
parse_control(const char *text, gsize len)
{
    g_autoptr(JsonNode) node = carrel_conf_parse_json(text, len, NULL);
    g_autoptr(CarrelShellControl) control =
        node ? carrel_shell_control_from_json(node, NULL) : NULL;
    Input *in;

    if (!control)
        return NULL;
    in = g_new0(Input, 1);
    in->kind = control->eof ? INPUT_EOF : INPUT_RESIZE;
    in->rows = control->rows;
    in->cols = control->cols;
    return in;
}

static void
on_message(SoupWebsocketConnection *ws, gint type, GBytes *message, gpointer data)
{
    Link *link = data;
    gsize len = 0;
    const char *bytes = g_bytes_get_data(message, &len);
    Input *in;

    if (type == SOUP_WEBSOCKET_DATA_TEXT) {
        in = parse_control(bytes, len);
        if (!in) {
            cut_off(link, SOUP_WEBSOCKET_CLOSE_BAD_DATA,
                    "control messages are {\"type\":\"resize\",\"rows\":R,\"cols\":C} or "
                    "{\"type\":\"eof\"}");
            return;
        }
        push_input(link, in);
        return;
    }
    if (g_atomic_int_get(&link->queued) + (gint)len > SHELL_QUEUED_MAX) {
        cut_off(link, SOUP_WEBSOCKET_CLOSE_POLICY_VIOLATION,
                "input comes faster than the guest takes it");
        return;
    }
    in = g_new0(Input, 1);
    in->kind = INPUT_DATA;
    in->data = g_bytes_ref(message);
    g_atomic_int_add(&link->queued, (gint)len);
    push_input(link, in);
}

static void
on_closed(SoupWebsocketConnection *ws, gpointer data)
{
    Link *link = data;

    wake(link);
    g_clear_object(&link->ws);
    link_unref(link);
}

static void
start_thread(Link *link)
{
    g_mutex_lock(&link->all->lock);
    g_ptr_array_add(link->all->open, link);
    link->thread = g_thread_new("shell", relay_thread, link);
    g_mutex_unlock(&link->all->lock);
}

static void
on_upgraded(SoupServerMessage *msg, gpointer data)
{
    Link *link = data;
    GUri *uri = soup_server_message_get_uri(msg);
    SoupMessageHeaders *in = soup_server_message_get_request_headers(msg);
    g_autoptr(GIOStream) stream = soup_server_message_steal_connection(msg);

    /* The message is done with: only the websocket speaks for the shell from now on. */
    g_signal_handlers_disconnect_matched(msg, G_SIGNAL_MATCH_DATA, 0, 0, NULL, NULL, link);
    link->ws =
        soup_websocket_connection_new(stream, uri, SOUP_WEBSOCKET_CONNECTION_SERVER,
                                      soup_message_headers_get_one(in, "Origin"), NULL, NULL);
    soup_websocket_connection_set_max_incoming_payload_size(link->ws, SHELL_FRAME_MAX);
    /* Pings keep proxies from closing an idle shell, and a peer that vanished without a word
     * is found by the failing writes, which close the socket and so kill the shell. */
    soup_websocket_connection_set_keepalive_interval(link->ws, SHELL_KEEPALIVE_S);
    g_signal_connect(link->ws, "message", G_CALLBACK(on_message), link);
    g_signal_connect(link->ws, "closed", G_CALLBACK(on_closed), link);
    post(link, NULL, control("started", "handle", 0, carrel_shell_handle(link->core)), 0, NULL);
    start_thread(link);
}

/* The connection ended before the 101 was written (a stolen one never finishes): the thread
 * only ends the shell, off the main loop, and the socket's reference goes here. */
static void
on_finished(SoupServerMessage *msg, gpointer data)
{
    Link *link = data;

    if (link->thread || link->ws)
        return;
    g_atomic_int_set(&link->closed, 1);
    start_thread(link);
    link_unref(link);
}

void
carrel_api_shell_start(CarrelApi *api, SoupServerMessage *msg, const char *token_id,
                       CarrelShell *core)
{
    Link *link = g_new0(Link, 1);

    link->ref = 2; /* the socket's (on_closed) and the thread's (relay_thread) */
    link->api = api;
    link->all = api->shells;
    link->context = g_main_context_ref(api->context);
    link->core = core;
    link->token_id = g_strdup(token_id);
    link->inbox = g_async_queue_new_full(input_free);
    /* Checked in the handler already: this answers 101 with the accept key. */
    if (!soup_websocket_server_process_handshake(msg, NULL, NULL, NULL, NULL)) {
        g_atomic_int_set(&link->closed, 1);
        carrel_shell_close(link->core);
        carrel_api_streams_release(api->streams, token_id);
        link->ref = 1;
        link_unref(link);
        return;
    }
    g_signal_connect(msg, "wrote-informational", G_CALLBACK(on_upgraded), link);
    g_signal_connect(msg, "finished", G_CALLBACK(on_finished), link);
}

static gboolean
query_size(CarrelApiRequest *req, const char *key, guint fallback, guint *ret, GError **error)
{
    const char *text = carrel_api_query(req, key);
    guint64 n = fallback;

    if (text && !g_ascii_string_to_unsigned(text, 10, 1, CARREL_SHELL_SIZE_MAX, &n, NULL)) {
        g_set_error(error, CARREL_ERROR, CARREL_ERROR_INVALID_ARG,
                    "%s must be a number from 1 to %d", key, CARREL_SHELL_SIZE_MAX);
        return FALSE;
    }
    *ret = (guint)n;
    return TRUE;
}

CarrelApiReply *
carrel_api_get_shell(CarrelApiRequest *req, GError **error)
{
    g_autoptr(CarrelShell) shell = NULL;
    g_autoptr(GError) limit = NULL;
    g_autofree char *after = NULL;
    CarrelApiReply *reply;
    guint rows = 24, cols = 80;

    if (!query_size(req, "rows", 24, &rows, error) || !query_size(req, "cols", 80, &cols, error))
        return NULL;
    shell = carrel_manager_shell_open(req->mgr, req->who, carrel_api_param(req, 0), error);
    if (!shell)
        return NULL;
    if (!req->websocket) {
        g_set_error(error, CARREL_ERROR, CARREL_ERROR_INVALID_ARG,
                    "the shell is a websocket: send a websocket handshake (Upgrade: websocket)");
        return NULL;
    }
    /* A page of another site must not open a shell with the viewer's cookie. */
    if (req->by_cookie && !req->same_origin) {
        g_set_error(error, CARREL_ERROR, CARREL_ERROR_FORBIDDEN, "cross-origin websocket refused");
        return NULL;
    }
    if (!carrel_api_streams_reserve(req->api->streams, req->who->token_id, &limit)) {
        reply = carrel_api_reply_new_error(CARREL_HTTP_TOO_MANY_REQUESTS, limit);
        after = g_strdup_printf("%u", SHELL_RETRY_AFTER_S);
        carrel_api_reply_add_header(reply, "Retry-After", after);
        return reply;
    }
    if (!carrel_shell_start(shell, rows, cols, error)) {
        carrel_api_streams_release(req->api->streams, req->who->token_id);
        return NULL;
    }
    return carrel_api_reply_new_shell(req->api->streams, req->who->token_id,
                                      g_steal_pointer(&shell));
}
