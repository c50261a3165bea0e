/*
 * api: POST /v1/sessions/{id}/exec with "stream": true, the command's output as server-sent
 * events while it runs (started, stdout, stderr, then exit or error). A thread of its own polls
 * the guest (core's CarrelExecStream: 50 ms between reads while output comes, rising to 1 s
 * while none does) and hands each chunk to the main loop, which appends it (the body does not
 * accumulate, and a client that stops reading is cut off as on GET /v1/stream). A client that
 * leaves ends the poll and kills the process in the guest. Each open stream counts against the
 * principal's stream cap. A command silent for 15 s gets a comment (": keepalive").
 */
#include <string.h>
#include <sys/socket.h>

#include "api/api-priv.h"

#define POLL_MIN_MS 50
#define POLL_MAX_MS 1000
/* How often the main loop looks for a client that left. */
#define GONE_CHECK_MS 250
#define PENDING_MAX (8 * 1024 * 1024)
/* A silent command still sends a comment this often: proxies and client timeouts keep the
 * stream open. */
#define KEEPALIVE_US (15 * G_USEC_PER_SEC)

struct _CarrelApiExecStreams {
    GMutex lock;
    GPtrArray *open; /* ExecStream, each with a running thread */
    GPtrArray *live; /* ExecStream whose message has not finished (main loop only) */
};

typedef struct {
    gint ref;
    CarrelApi *api;
    CarrelApiExecStreams *all; /* api's, read here: carrel_api_free clears api's pointer first */
    GMainContext *context;
    SoupServerMessage *msg; /* main loop only; NULL once finished */
    CarrelExecStream *core; /* the thread's */
    char *token_id;
    gint cancelled; /* atomic */
    gsize pending;  /* main loop only */
    guint timer;    /* main loop only */
    gboolean ended; /* main loop only */
    GThread *thread;
} ExecStream;

typedef struct {
    ExecStream *st;
    char *event; /* NULL: the end of the body */
    char *data;
} Post;

static void message_done(ExecStream *st);

CarrelApiExecStreams *
carrel_api_exec_streams_new(void)
{
    CarrelApiExecStreams *all = g_new0(CarrelApiExecStreams, 1);

    g_mutex_init(&all->lock);
    all->open = g_ptr_array_new();
    all->live = g_ptr_array_new();
    return all;
}

static void
exec_stream_unref(ExecStream *st)
{
    if (!g_atomic_int_dec_and_test(&st->ref))
        return;
    carrel_exec_stream_free(st->core);
    g_main_context_unref(st->context);
    g_free(st->token_id);
    g_free(st);
}

void
carrel_api_exec_streams_free(CarrelApiExecStreams *all)
{
    g_autoptr(GPtrArray) threads = g_ptr_array_new();

    if (!all)
        return;
    /* carreld is going: every poll stops (its process is killed) and its thread is joined,
     * so that none of them uses the manager after this. */
    g_mutex_lock(&all->lock);
    for (guint i = 0; i < all->open->len; i++) {
        ExecStream *st = g_ptr_array_index(all->open, i);

        g_atomic_int_set(&st->cancelled, 1);
        g_ptr_array_add(threads, g_thread_ref(st->thread));
    }
    g_mutex_unlock(&all->lock);
    /* Each join takes the reference added here; thread_end drops the list's. */
    for (guint i = 0; i < threads->len; i++)
        g_thread_join(g_ptr_array_index(threads, i));
    /* Replies still being written will never say "finished" to us: let go of them now, while
     * their messages and the API's stream counts still exist. */
    while (all->live->len > 0) {
        ExecStream *st = g_ptr_array_index(all->live, 0);

        g_signal_handlers_disconnect_by_data(st->msg, st);
        message_done(st);
    }
    g_ptr_array_unref(all->live);
    g_ptr_array_unref(all->open);
    g_mutex_clear(&all->lock);
    g_free(all);
}

static void
stream_end(ExecStream *st)
{
    if (st->ended || !st->msg)
        return;
    st->ended = TRUE;
    soup_message_body_complete(soup_server_message_get_response_body(st->msg));
    soup_server_message_unpause(st->msg);
}

static void
cut_off(ExecStream *st)
{
    GSocket *sock = soup_server_message_get_socket(st->msg);

    g_atomic_int_set(&st->cancelled, 1);
    stream_end(st);
    if (sock)
        g_socket_shutdown(sock, TRUE, TRUE, NULL);
}

/* Appends one event (main loop). */
static void
append_event(ExecStream *st, const char *event, const char *data)
{
    char *chunk;
    gsize len;

    if (!st->msg || st->ended)
        return;
    if (st->pending > PENDING_MAX) {
        g_message("exec stream of session output ended: the client does not read");
        cut_off(st);
        return;
    }
    chunk = g_strdup_printf("event: %s\ndata: %s\n\n", event, data);
    len = strlen(chunk);
    st->pending += len;
    soup_message_body_append(soup_server_message_get_response_body(st->msg), SOUP_MEMORY_TAKE,
                             chunk, len);
    soup_server_message_unpause(st->msg);
}

static gboolean
on_post(gpointer data)
{
    Post *p = data;

    if (p->event && !p->data && p->st->msg && !p->st->ended) {
        /* A comment: clients skip it. */
        soup_message_body_append(soup_server_message_get_response_body(p->st->msg),
                                 SOUP_MEMORY_STATIC, ": keepalive\n\n", 13);
        soup_server_message_unpause(p->st->msg);
    } else if (p->event && p->data) {
        append_event(p->st, p->event, p->data);
    } else if (!p->event) {
        stream_end(p->st);
    }
    return G_SOURCE_REMOVE;
}

static void
post_free(gpointer data)
{
    Post *p = data;

    exec_stream_unref(p->st);
    g_free(p->event);
    g_free(p->data);
    g_free(p);
}

/* From the thread: event with data (a JSON node, taken) to the main loop; NULL ends the body. */
static void
post(ExecStream *st, const char *event, JsonNode *data)
{
    Post *p = g_new0(Post, 1);

    g_atomic_int_inc(&st->ref);
    p->st = st;
    p->event = g_strdup(event);
    p->data = data ? json_to_string(data, FALSE) : NULL;
    if (data)
        json_node_unref(data);
    carrel_api_post_to_loop(st->context, on_post, p, post_free);
}

static JsonNode *
chunk_json(GBytes *bytes)
{
    g_autoptr(JsonBuilder) b = json_builder_new();
    gsize len = 0;
    const char *data = g_bytes_get_data(bytes, &len);
    g_autofree char *text = g_utf8_make_valid(data ? data : "", (gssize)len);
    g_autofree char *b64 = g_base64_encode((const guchar *)data, len);

    json_builder_begin_object(b);
    json_builder_set_member_name(b, "data");
    json_builder_add_string_value(b, text);
    json_builder_set_member_name(b, "data_base64");
    json_builder_add_string_value(b, b64);
    json_builder_end_object(b);
    return json_builder_get_root(b);
}

/* Sleeps ms in short steps, so that a client that left is noticed soon. */
static void
nap(ExecStream *st, guint ms)
{
    for (guint slept = 0; slept < ms && !g_atomic_int_get(&st->cancelled); slept += POLL_MIN_MS)
        g_usleep(POLL_MIN_MS * 1000);
}

static gpointer
poll_thread(gpointer data)
{
    ExecStream *st = data;
    guint interval = POLL_MIN_MS;
    g_autoptr(GError) failure = NULL;
    gint64 last_sent = g_get_monotonic_time();

    while (!g_atomic_int_get(&st->cancelled)) {
        g_autoptr(CarrelProcRead) read = carrel_exec_stream_next(st->core, &failure);
        gboolean got;

        if (!read)
            break;
        got = g_bytes_get_size(read->stdout_data) || g_bytes_get_size(read->stderr_data);
        if (g_bytes_get_size(read->stdout_data))
            post(st, "stdout", chunk_json(read->stdout_data));
        if (g_bytes_get_size(read->stderr_data))
            post(st, "stderr", chunk_json(read->stderr_data));
        if (carrel_proc_read_is_last(read)) {
            post(st, "exit", carrel_exec_stream_finish(st->core, NULL));
            post(st, NULL, NULL);
            return NULL;
        }
        if (got) {
            last_sent = g_get_monotonic_time();
        } else if (g_get_monotonic_time() - last_sent > KEEPALIVE_US) {
            post(st, "keepalive", NULL);
            last_sent = g_get_monotonic_time();
        }
        /* A read that waited in the guest already paused; otherwise: output coming, read
         * again soon; none: back off, up to a second. */
        if (carrel_exec_stream_waits(st->core))
            continue;
        interval = got ? POLL_MIN_MS : MIN(interval * 2, POLL_MAX_MS);
        nap(st, interval);
    }
    if (g_atomic_int_get(&st->cancelled)) {
        carrel_exec_stream_cancel(st->core);
        json_node_unref(carrel_exec_stream_finish(st->core, NULL));
    } else {
        post(st, "error", carrel_api_error_envelope(failure));
        /* The guest stopped answering: the process may still run; try to end it. */
        carrel_exec_stream_cancel(st->core);
        json_node_unref(carrel_exec_stream_finish(st->core, failure));
    }
    post(st, NULL, NULL);
    return NULL;
}

static gboolean
gone_tick(gpointer data)
{
    ExecStream *st = data;

    if (!st->msg || st->ended)
        return G_SOURCE_CONTINUE;
    if (carrel_api_stream_client_gone(st->msg)) {
        cut_off(st);
        st->timer = 0;
        return G_SOURCE_REMOVE;
    }
    return G_SOURCE_CONTINUE;
}

static void
on_wrote_body_data(SoupServerMessage *msg, guint chunk_size, gpointer data)
{
    ExecStream *st = data;

    st->pending -= MIN(st->pending, (gsize)chunk_size);
}

static gpointer
thread_end(gpointer data)
{
    ExecStream *st = data;
    CarrelApiExecStreams *all = st->all;
    gpointer ret = poll_thread(st);

    g_mutex_lock(&all->lock);
    /* Not joined by carreld's exit: the thread's resources go with its last reference. */
    if (g_ptr_array_remove(all->open, st))
        g_thread_unref(st->thread);
    g_mutex_unlock(&all->lock);
    exec_stream_unref(st);
    return ret;
}

/* The message is done with: it "finished", or the API goes first (a server torn down while the
 * reply is being written never says "finished"). Drops the message's reference. */
static void
message_done(ExecStream *st)
{
    g_atomic_int_set(&st->cancelled, 1);
    g_ptr_array_remove(st->all->live, st);
    st->msg = NULL;
    if (st->timer)
        g_source_remove(st->timer);
    st->timer = 0;
    carrel_api_streams_release(st->api->streams, st->token_id);
    exec_stream_unref(st);
}

static void
on_finished(SoupServerMessage *msg, gpointer data)
{
    ExecStream *st = data;

    if (st->msg)
        message_done(st);
}

void
carrel_api_exec_stream_start(CarrelApi *api, SoupServerMessage *msg, const char *token_id,
                             CarrelExecStream *core)
{
    SoupMessageHeaders *out = soup_server_message_get_response_headers(msg);
    ExecStream *st = g_new0(ExecStream, 1);
    g_autoptr(JsonBuilder) b = json_builder_new();
    g_autoptr(JsonNode) started = NULL;
    g_autofree char *text = NULL;

    st->ref = 2; /* the message's (on_finished) and the thread's (thread_end) */
    st->api = api;
    st->all = api->exec_streams;
    st->context = g_main_context_ref(api->context);
    st->msg = msg;
    st->core = core;
    st->token_id = g_strdup(token_id);
    soup_server_message_set_status(msg, SOUP_STATUS_OK, NULL);
    soup_message_headers_set_encoding(out, SOUP_ENCODING_CHUNKED);
    soup_message_headers_replace(out, "Content-Type", "text/event-stream");
    soup_message_headers_replace(out, "Cache-Control", "no-store");
    soup_message_body_set_accumulate(soup_server_message_get_response_body(msg), FALSE);
    g_signal_connect(msg, "wrote-body-data", G_CALLBACK(on_wrote_body_data), st);
    g_signal_connect(msg, "finished", G_CALLBACK(on_finished), st);
    g_ptr_array_add(api->exec_streams->live, st);
    json_builder_begin_object(b);
    json_builder_set_member_name(b, "handle");
    json_builder_add_string_value(b, carrel_exec_stream_handle(core));
    json_builder_end_object(b);
    started = json_builder_get_root(b);
    text = json_to_string(started, FALSE);
    append_event(st, "started", text);
    st->timer = g_timeout_add(GONE_CHECK_MS, gone_tick, st);
    g_mutex_lock(&api->exec_streams->lock);
    g_ptr_array_add(api->exec_streams->open, st);
    st->thread = g_thread_new("exec-stream", thread_end, st);
    g_mutex_unlock(&api->exec_streams->lock);
}
