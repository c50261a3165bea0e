/*
 * api: the one reply contract. A handler returns a CarrelApiReply (or fails with a GError, which
 * becomes the error envelope) and the server writes it: the reply itself says what it is, so
 * nothing is special-cased by path or by handler.
 */
#include <errno.h>
#include <fcntl.h>
#include <glib/gstdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "api/api-priv.h"

/* What a file reply reads per chunk: the most a download holds in memory at once. */
#define FILE_CHUNK_BYTES (256 * 1024)

typedef struct {
    char *name;
    char *value;
} Header;

struct _CarrelApiReply {
    CarrelApiReplyKind kind;
    guint status;
    GArray *headers;                   /* of Header, in the order added */
    JsonNode *json;                    /* JSON */
    GBytes *bytes;                     /* BYTES; JSON: its text once rendered */
    char *content_type;                /* BYTES */
    char *filename;                    /* BYTES, FILE: sent as an attachment of this name */
    int fd;                            /* FILE: the open file (-1 once the writer took it) */
    guint64 size;                      /* FILE: its size when opened, the Content-Length */
    CarrelPrincipal *who;              /* STREAM: whom the stream shows things to */
    char *session_id;                  /* STREAM: whose timeline, or NULL */
    char *token_id;                    /* EXEC: whose stream slot it holds */
    CarrelExecStream *exec;            /* EXEC: the command (NULL once the writer took it) */
    CarrelShell *shell;                /* SHELL: the started shell (NULL once the writer took it) */
    struct _CarrelApiStreams *streams; /* SHELL: the API's, where its slot is held */
};

static void
header_clear(gpointer data)
{
    Header *h = data;

    g_free(h->name);
    g_free(h->value);
}

static CarrelApiReply *
reply_new(CarrelApiReplyKind kind, guint status)
{
    CarrelApiReply *reply = g_new0(CarrelApiReply, 1);

    reply->kind = kind;
    reply->status = status;
    reply->fd = -1;
    reply->headers = g_array_new(FALSE, TRUE, sizeof(Header));
    g_array_set_clear_func(reply->headers, header_clear);
    return reply;
}

void
carrel_api_reply_free(CarrelApiReply *reply)
{
    if (!reply)
        return;
    g_array_unref(reply->headers);
    g_clear_pointer(&reply->json, json_node_unref);
    g_clear_pointer(&reply->bytes, g_bytes_unref);
    g_free(reply->content_type);
    g_free(reply->filename);
    if (reply->fd >= 0)
        close(reply->fd);
    carrel_principal_free(reply->who);
    g_free(reply->session_id);
    g_free(reply->token_id);
    if (reply->exec) {
        /* Never written (the client left first): nobody else ends the process. */
        carrel_exec_stream_cancel(reply->exec);
        json_node_unref(carrel_exec_stream_finish(reply->exec, NULL));
        carrel_exec_stream_free(reply->exec);
    }
    if (reply->shell) {
        /* Never written: nothing is left running, and its stream slot goes back. */
        carrel_shell_close(reply->shell);
        carrel_shell_free(reply->shell);
        carrel_api_streams_release(reply->streams, reply->token_id);
    }
    g_free(reply);
}

CarrelApiReply *
carrel_api_reply_new_json(guint status, JsonNode *node)
{
    CarrelApiReply *reply;

    /* NULL: the call that made node failed and set the error the handler passes on. */
    if (!node)
        return NULL;
    reply = reply_new(CARREL_API_REPLY_JSON, status);
    reply->json = node;
    return reply;
}

CarrelApiReply *
carrel_api_reply_ok(JsonNode *node)
{
    return carrel_api_reply_new_json(SOUP_STATUS_OK, node);
}

CarrelApiReply *
carrel_api_reply_new_bytes(guint status, GBytes *bytes, const char *content_type)
{
    CarrelApiReply *reply;

    if (!bytes)
        return NULL;
    reply = reply_new(CARREL_API_REPLY_BYTES, status);
    reply->bytes = bytes;
    reply->content_type = g_strdup(content_type);
    return reply;
}

CarrelApiReply *
carrel_api_reply_new_file(guint status, const char *path, const char *content_type, GError **error)
{
    CarrelApiReply *reply;
    struct stat st;
    int fd = g_open(path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC, 0);

    if (fd < 0 || fstat(fd, &st) < 0 || !S_ISREG(st.st_mode)) {
        int saved = fd < 0 ? errno : EINVAL;
        if (fd >= 0)
            close(fd);
        g_set_error(error, CARREL_ERROR, CARREL_ERROR_FAILED, "opening '%s': %s", path,
                    g_strerror(saved));
        return NULL;
    }
    reply = reply_new(CARREL_API_REPLY_FILE, status);
    reply->fd = fd;
    reply->size = (guint64)st.st_size;
    reply->content_type = g_strdup(content_type);
    return reply;
}

CarrelApiReply *
carrel_api_reply_new_empty(guint status)
{
    return reply_new(CARREL_API_REPLY_EMPTY, status);
}

CarrelApiReply *
carrel_api_reply_new_redirect(guint status, const char *location)
{
    CarrelApiReply *reply = reply_new(CARREL_API_REPLY_REDIRECT, status);

    carrel_api_reply_add_header(reply, "Location", location);
    return reply;
}

CarrelApiReply *
carrel_api_reply_new_stream(const CarrelPrincipal *who, const char *session_id)
{
    CarrelApiReply *reply = reply_new(CARREL_API_REPLY_STREAM, SOUP_STATUS_OK);

    reply->who = carrel_principal_copy(who);
    reply->session_id = g_strdup(session_id);
    return reply;
}

CarrelApiReply *
carrel_api_reply_new_exec_stream(const char *token_id, CarrelExecStream *core)
{
    CarrelApiReply *reply = reply_new(CARREL_API_REPLY_EXEC, SOUP_STATUS_OK);

    reply->token_id = g_strdup(token_id);
    reply->exec = core;
    return reply;
}

CarrelApiReply *
carrel_api_reply_new_shell(CarrelApiStreams *streams, const char *token_id, CarrelShell *core)
{
    CarrelApiReply *reply = reply_new(CARREL_API_REPLY_SHELL, SOUP_STATUS_SWITCHING_PROTOCOLS);

    reply->streams = streams;
    reply->token_id = g_strdup(token_id);
    reply->shell = core;
    return reply;
}

CarrelApiReply *
carrel_api_reply_new_error(guint status, const GError *error)
{
    CarrelApiReply *reply =
        reply_new(CARREL_API_REPLY_JSON, status ? status : carrel_api_status_for_error(error));

    reply->json = carrel_api_error_envelope(error);
    return reply;
}

void
carrel_api_reply_add_header(CarrelApiReply *reply, const char *name, const char *value)
{
    Header h = {g_strdup(name), g_strdup(value)};

    g_array_append_val(reply->headers, h);
}

void
carrel_api_reply_set_attachment(CarrelApiReply *reply, const char *filename)
{
    g_free(reply->filename);
    reply->filename = g_strdup(filename);
}

gboolean
carrel_api_parse_range(const char *header, guint64 size, guint64 *ret_first, guint64 *ret_last)
{
    g_auto(GStrv) ends = NULL;
    guint64 first = 0, last = 0;
    gboolean has_first, has_last;

    if (!header || !g_str_has_prefix(header, "bytes=") || strchr(header, ',') || size == 0)
        return FALSE;
    ends = g_strsplit(header + strlen("bytes="), "-", -1);
    if (g_strv_length(ends) != 2)
        return FALSE;
    has_first = ends[0][0] != '\0';
    has_last = ends[1][0] != '\0';
    if ((!has_first && !has_last) ||
        (has_first && !g_ascii_string_to_unsigned(ends[0], 10, 0, G_MAXUINT64, &first, NULL)) ||
        (has_last && !g_ascii_string_to_unsigned(ends[1], 10, 0, G_MAXUINT64, &last, NULL)))
        return FALSE;
    if (!has_first) {
        /* "-N": the last N bytes. */
        if (last == 0)
            return FALSE;
        first = size - MIN(last, size);
        last = size - 1;
    } else if (!has_last || last >= size)
        last = size - 1;
    if (first > last)
        return FALSE;
    *ret_first = first;
    *ret_last = last;
    return TRUE;
}

void
carrel_api_reply_file_range(CarrelApiReply *reply, const char *range)
{
    guint64 first = 0, last = 0, total = reply->size;
    g_autofree char *content_range = NULL;

    if (reply->kind != CARREL_API_REPLY_FILE)
        return;
    carrel_api_reply_add_header(reply, "Accept-Ranges", "bytes");
    /* A Range that cannot be served as one part is ignored: the whole file, 200 (RFC 9110). */
    if (!carrel_api_parse_range(range, total, &first, &last) ||
        lseek(reply->fd, (off_t)first, SEEK_SET) < 0)
        return;
    reply->size = last - first + 1;
    reply->status = SOUP_STATUS_PARTIAL_CONTENT;
    content_range = g_strdup_printf(
        "bytes %" G_GUINT64_FORMAT "-%" G_GUINT64_FORMAT "/%" G_GUINT64_FORMAT, first, last, total);
    carrel_api_reply_add_header(reply, "Content-Range", content_range);
}

CarrelApiReplyKind
carrel_api_reply_get_kind(const CarrelApiReply *reply)
{
    return reply->kind;
}

guint
carrel_api_reply_get_status(const CarrelApiReply *reply)
{
    return reply->status;
}

const char *
carrel_api_reply_get_header(const CarrelApiReply *reply, const char *name)
{
    for (guint i = 0; i < reply->headers->len; i++) {
        Header *h = &g_array_index(reply->headers, Header, i);

        if (g_ascii_strcasecmp(h->name, name) == 0)
            return h->value;
    }
    return NULL;
}

JsonNode *
carrel_api_reply_get_json(const CarrelApiReply *reply)
{
    return reply->json;
}

GBytes *
carrel_api_json_text(JsonNode *node)
{
    g_autoptr(JsonGenerator) gen = json_generator_new();
    gsize len = 0;
    char *text;

    json_generator_set_root(gen, node);
    text = json_generator_to_data(gen, &len);
    return g_bytes_new_take(text, len);
}

static void
set_body(SoupServerMessage *msg, const char *content_type, GBytes *bytes)
{
    soup_server_message_set_response(msg, content_type, SOUP_MEMORY_COPY,
                                     g_bytes_get_data(bytes, NULL), g_bytes_get_size(bytes));
}

static void
write_attachment(SoupMessageHeaders *out, const char *filename)
{
    g_autoptr(GHashTable) params = g_hash_table_new(g_str_hash, g_str_equal);

    g_hash_table_insert(params, (char *)"filename", (char *)filename);
    soup_message_headers_set_content_disposition(out, "attachment", params);
}

/* A file being sent: what is left of it to read. */
typedef struct {
    int fd;
    guint64 left;
} FileBody;

static void
file_body_free(gpointer data)
{
    FileBody *f = data;

    close(f->fd);
    g_free(f);
}

/* The file ended early (truncated under us) or could not be read: the promised length cannot
 * be kept, so the connection is cut and the client sees a short body, never a wrong one. */
static void
file_body_abort(SoupServerMessage *msg, FileBody *f, int err)
{
    GSocket *sock = soup_server_message_get_socket(msg);

    g_warning("sending a file: %s with %" G_GUINT64_FORMAT " bytes left: closing the connection",
              err ? g_strerror(err) : "unexpected end of file", f->left);
    f->left = 0;
    if (sock)
        (void)g_socket_shutdown(sock, TRUE, TRUE, NULL);
    soup_message_body_complete(soup_server_message_get_response_body(msg));
}

/* Appends the next chunk once the last one was written: one chunk in memory at a time. */
static void
file_body_next(SoupServerMessage *msg, gpointer data)
{
    FileBody *f = data;
    SoupMessageBody *body = soup_server_message_get_response_body(msg);
    gsize want = (gsize)MIN(f->left, (guint64)FILE_CHUNK_BYTES);
    g_autofree guint8 *buf = NULL;
    gssize n;

    if (f->left == 0) {
        soup_message_body_complete(body);
        return;
    }
    buf = g_malloc(want);
    do
        n = read(f->fd, buf, want);
    while (n < 0 && errno == EINTR);
    if (n <= 0) {
        file_body_abort(msg, f, n < 0 ? errno : 0);
        return;
    }
    f->left -= (guint64)n;
    soup_message_body_append_take(body, g_steal_pointer(&buf), (gsize)n);
}

static void
write_file(CarrelApiReply *reply, SoupServerMessage *msg)
{
    SoupMessageHeaders *out = soup_server_message_get_response_headers(msg);
    SoupMessageBody *body = soup_server_message_get_response_body(msg);
    FileBody *f = g_new0(FileBody, 1);

    f->fd = reply->fd;
    f->left = reply->size;
    reply->fd = -1;
    if (reply->filename && reply->status == SOUP_STATUS_OK)
        write_attachment(out, reply->filename);
    soup_server_message_set_status(msg, reply->status, NULL);
    soup_message_headers_set_content_type(out, reply->content_type, NULL);
    soup_message_headers_set_content_length(out, (goffset)reply->size);
    /* Written chunks are dropped, not kept for the whole body. */
    soup_message_body_set_accumulate(body, FALSE);
    g_object_set_data_full(G_OBJECT(msg), "carrel-file-body", f, file_body_free);
    g_signal_connect(msg, "wrote-chunk", G_CALLBACK(file_body_next), f);
    file_body_next(msg, f);
}

void
carrel_api_reply_render(CarrelApiReply *reply)
{
    if (reply->kind == CARREL_API_REPLY_JSON && !reply->bytes)
        reply->bytes = carrel_api_json_text(reply->json);
}

void
carrel_api_reply_write(CarrelApiReply *reply, CarrelApi *api, SoupServerMessage *msg)
{
    SoupMessageHeaders *out = soup_server_message_get_response_headers(msg);
    g_autoptr(GBytes) json = NULL;

    for (guint i = 0; i < reply->headers->len; i++) {
        Header *h = &g_array_index(reply->headers, Header, i);

        soup_message_headers_append(out, h->name, h->value);
    }
    switch (reply->kind) {
    case CARREL_API_REPLY_JSON:
        soup_server_message_set_status(msg, reply->status, NULL);
        json = reply->bytes ? g_bytes_ref(reply->bytes) : carrel_api_json_text(reply->json);
        set_body(msg, "application/json", json);
        break;
    case CARREL_API_REPLY_BYTES:
        if (reply->filename && reply->status == SOUP_STATUS_OK)
            write_attachment(out, reply->filename);
        soup_server_message_set_status(msg, reply->status, NULL);
        set_body(msg, reply->content_type, reply->bytes);
        break;
    case CARREL_API_REPLY_EMPTY:
    case CARREL_API_REPLY_REDIRECT:
        soup_server_message_set_status(msg, reply->status, NULL);
        break;
    case CARREL_API_REPLY_STREAM:
        carrel_api_stream_start(api, msg, reply->who, reply->session_id);
        break;
    case CARREL_API_REPLY_FILE:
        write_file(reply, msg);
        break;
    case CARREL_API_REPLY_EXEC:
        carrel_api_exec_stream_start(api, msg, reply->token_id, g_steal_pointer(&reply->exec));
        break;
    case CARREL_API_REPLY_SHELL:
        carrel_api_shell_start(api, msg, reply->token_id, g_steal_pointer(&reply->shell));
        break;
    case CARREL_API_REPLY_LAST:
    default:
        g_assert_not_reached();
    }
}
