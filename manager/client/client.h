/* client: the HTTP client of carreld's API, used by the CLI and by the tests (libsoup-3). */
#pragma once

#include <json-glib/json-glib.h>
#include <libsoup/soup.h>

#include "util/util.h"

G_BEGIN_DECLS

typedef struct _CarrelClient CarrelClient;

/*
 * A client that reaches carreld on a Unix socket (socket_path) or, when base_url is given,
 * over TCP ("http://127.0.0.1:PORT"). token may be NULL (only /v1/healthz answers then).
 * timeout_s bounds every request (0 = 900 s, long enough for a cold create under TCG).
 */
CarrelClient *carrel_client_new(const char *socket_path, const char *base_url, const char *token,
                                guint timeout_s, GError **error);
void carrel_client_free(CarrelClient *client);
G_DEFINE_AUTOPTR_CLEANUP_FUNC(CarrelClient, carrel_client_free)

/*
 * TRUE when the last request of client failed because carreld could not be reached (no socket,
 * connection refused, unknown host); its error is then CARREL_ERROR_FAILED. Lets the CLI tell
 * "daemon down" from a "failed" reported by carreld. Reset by every request.
 */
gboolean carrel_client_last_unreachable(const CarrelClient *client);

/*
 * Told how far a request is: upload TRUE while its body is sent (total: the body's size), FALSE
 * while the reply of a request without a body is read (total: its Content-Length, or -1).
 */
typedef void (*CarrelClientProgressFunc)(gboolean upload, gint64 done, gint64 total,
                                         gpointer user_data);

/* Calls func as the next requests of client send and receive bodies; func NULL: no more calls. */
void carrel_client_set_progress(CarrelClient *client, CarrelClientProgressFunc func,
                                gpointer user_data);

/*
 * Sends a request and returns status, body and X-Request-Id whatever the status;
 * fails only when the daemon cannot be reached or the reply cannot be read.
 * content_type may be NULL when body is NULL.
 */
gboolean carrel_client_request_raw(CarrelClient *client, const char *method, const char *path,
                                   const char *content_type, GBytes *body, guint *ret_status,
                                   GBytes **ret_body, char **ret_request_id, GError **error);

/*
 * Sends a JSON request (body may be NULL) and parses the JSON reply. A non-2xx status becomes
 * a GError in CARREL_ERROR with the code and message of the API's error envelope.
 * *ret_reply is NULL for 204 No Content.
 */
gboolean carrel_client_call(CarrelClient *client, const char *method, const char *path,
                            JsonNode *body, JsonNode **ret_reply, GError **error);

/*
 * Sends body (may be NULL) as content_type and returns the reply as bytes (images, files). A
 * non-2xx status becomes a GError like carrel_client_call.
 */
gboolean carrel_client_call_bytes(CarrelClient *client, const char *method, const char *path,
                                  const char *content_type, GBytes *body, GBytes **ret_reply,
                                  GError **error);

/*
 * PUTs body (length bytes, or -1 for chunked) to path as application/octet-stream, streamed from
 * the stream as it is sent, and parses the JSON reply; non-2xx as carrel_client_call.
 */
gboolean carrel_client_upload(CarrelClient *client, const char *path, GInputStream *body,
                              goffset length, JsonNode **ret_reply, GError **error);

/* What a download moved: bytes, the sha256 of what arrived (computed here), and the one the
 * reply's X-Carrel-Sha256 header claims (NULL without a well-formed one). */
typedef struct {
    guint64 bytes;
    char *sha256;
    char *reply_sha256;
} CarrelClientDownload;

void carrel_client_download_clear(CarrelClientDownload *info);
G_DEFINE_AUTO_CLEANUP_CLEAR_FUNC(CarrelClientDownload, carrel_client_download_clear)

/*
 * GETs path and writes the reply's body to out chunk by chunk (no size cap beyond the server's:
 * nothing is held in memory); non-2xx as carrel_client_call, with nothing written.
 */
gboolean carrel_client_download(CarrelClient *client, const char *path, GOutputStream *out,
                                CarrelClientDownload *ret_info, GError **error);
/* One server-sent event: its name and its data (a JSON document, borrowed); FALSE stops. */
typedef gboolean (*CarrelClientEventFunc)(const char *event, JsonNode *data, gpointer user_data);

/*
 * Sends a JSON request whose reply is a text/event-stream and calls func for each event as it
 * comes, until the stream ends or func returns FALSE (the connection is closed then). A non-2xx
 * status becomes a GError like carrel_client_call; so does an event whose data is not JSON or
 * is over 1 MiB.
 */
gboolean carrel_client_call_events(CarrelClient *client, const char *method, const char *path,
                                   JsonNode *body, CarrelClientEventFunc func, gpointer user_data,
                                   GError **error);

/*
 * Opens a websocket to path (GET with the token) on the thread-default main context, which it
 * runs until the handshake is done; its messages come on that context. A refusal is a GError
 * like carrel_client_call's (the API's code and message).
 */
SoupWebsocketConnection *carrel_client_websocket(CarrelClient *client, const char *path,
                                                 GError **error);

G_END_DECLS
