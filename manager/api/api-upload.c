/*
 * api: bodies of upload routes (POST /v1/uploads) go to a spool file as they arrive, never into
 * memory: the request body does not accumulate in libsoup and each chunk is written out as it
 * comes, counted against the route's limit. The request takes the file as soon as it exists, so
 * the file is removed with the request, before its reply goes out, unless core stored it.
 */
#include <errno.h>
#include <glib/gstdio.h>
#include <unistd.h>

#include "api/api-priv.h"

#define SPOOL_KEY "carrel-upload-spool"

typedef struct {
    int fd;
    char *path; /* NULL once the request took it */
    guint64 bytes;
    guint64 max;
    GError *error; /* the first failure: the request is refused with it */
} Spool;

static void
spool_free(gpointer data)
{
    Spool *s = data;

    if (s->fd >= 0)
        close(s->fd);
    if (s->path)
        (void)g_unlink(s->path);
    g_free(s->path);
    g_clear_error(&s->error);
    g_free(s);
}

static gboolean
write_all(int fd, const guint8 *data, gsize len, GError **error)
{
    while (len > 0) {
        gssize n = write(fd, data, len);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0) {
            int saved = errno;
            g_set_error(error, CARREL_ERROR,
                        saved == ENOSPC ? CARREL_ERROR_LIMIT : CARREL_ERROR_FAILED,
                        "writing the upload: %s", g_strerror(saved));
            return FALSE;
        }
        data += n;
        len -= (gsize)n;
    }
    return TRUE;
}

static void
on_got_chunk(SoupServerMessage *msg, GBytes *chunk, gpointer data)
{
    Spool *s = data;
    gsize len = 0;
    const guint8 *bytes = g_bytes_get_data(chunk, &len);

    if (s->error)
        return;
    /* Content-Length was checked already; this holds whatever the framing says. */
    if (len > s->max - s->bytes) {
        g_set_error(&s->error, CARREL_ERROR, CARREL_ERROR_LIMIT,
                    "request body is larger than %" G_GUINT64_FORMAT " bytes", s->max);
        return;
    }
    if (write_all(s->fd, bytes, len, &s->error))
        s->bytes += len;
}

static gboolean
has_credentials(SoupServerMessage *msg)
{
    SoupMessageHeaders *headers = soup_server_message_get_request_headers(msg);
    g_autofree char *cookie = carrel_api_cookie_get(msg);

    return soup_message_headers_get_one(headers, "Authorization") != NULL || cookie != NULL;
}

void
carrel_api_upload_spool_start(CarrelApi *api, SoupServerMessage *msg, const CarrelApiRoute *route)
{
    Spool *s;

    if (!route || !(route->flags & CARREL_API_ROUTE_UPLOAD))
        return;
    /* Nothing to write for a caller without credentials: it gets 401, its body goes nowhere. */
    soup_message_body_set_accumulate(soup_server_message_get_request_body(msg), FALSE);
    if (!has_credentials(msg))
        return;
    s = g_new0(Spool, 1);
    s->max = carrel_api_route_body_max(route);
    s->fd = carrel_manager_upload_spool(api->mgr, &s->path, &s->error);
    /* Without a spool file nothing is kept either: the request fails with s->error. */
    g_object_set_data_full(G_OBJECT(msg), SPOOL_KEY, s, spool_free);
    if (s->fd >= 0)
        g_signal_connect(msg, "got-chunk", G_CALLBACK(on_got_chunk), s);
}

void
carrel_api_upload_spool_take(SoupServerMessage *msg, CarrelApiRequest *req)
{
    Spool *s = g_object_get_data(G_OBJECT(msg), SPOOL_KEY);

    if (!s)
        return;
    if (s->fd >= 0)
        close(s->fd);
    s->fd = -1;
    req->upload_path = g_steal_pointer(&s->path);
    req->upload_bytes = s->bytes;
    req->upload_error = g_steal_pointer(&s->error);
}

gboolean
carrel_api_upload_check(CarrelApiRequest *req, GError **error)
{
    if (req->upload_error) {
        g_propagate_error(error, g_error_copy(req->upload_error));
        return FALSE;
    }
    if (!req->upload_path) {
        g_set_error(error, CARREL_ERROR, CARREL_ERROR_INTERNAL, "the upload was not spooled");
        return FALSE;
    }
    return TRUE;
}
