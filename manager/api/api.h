/* api: carreld's HTTP+JSON API over libsoup-3 (routes, auth, error envelope, request ids). */
#pragma once

#include <libsoup/soup.h>

#include "core/core.h"

G_BEGIN_DECLS

typedef struct _CarrelApi CarrelApi;

/* A server over mgr (borrowed: it must outlive the API). */
CarrelApi *carrel_api_new(CarrelManager *mgr, const char *version_info, GError **error);
void carrel_api_free(CarrelApi *api);
G_DEFINE_AUTOPTR_CLEANUP_FUNC(CarrelApi, carrel_api_free)

/* Listens on a Unix socket at path (mode 0600, replacing a stale socket file). */
gboolean carrel_api_listen_unix(CarrelApi *api, const char *path, GError **error);

/*
 * Listens on a TCP address (checked by the caller with net/: loopback unless with TLS). With a
 * certificate (holding its private key) the listener speaks HTTPS only: the console's cookies
 * are then Secure and its URL starts with https://. NULL: plain HTTP.
 */
gboolean carrel_api_listen_tcp(CarrelApi *api, GSocketAddress *address,
                               GTlsCertificate *certificate, GError **error);

/* http(s)://ADDR:PORT of the TCP listener, with the port really bound; NULL without one. */
const char *carrel_api_web_url(CarrelApi *api);

/* The one table from error to HTTP status. Errors outside CARREL_ERROR are 500. */
guint carrel_api_status_for_error(const GError *error);

/* The error envelope {"error":{"code","message"}} for error. */
JsonNode *carrel_api_error_envelope(const GError *error);

/* The web console: web_dir served at /, spice_dir at /spice-html5/ (either may be NULL: not
 * served); test_hooks enables the routes tests use to trigger what policies will (approvals). */
void carrel_api_set_web(CarrelApi *api, const char *web_dir, const char *spice_dir,
                        gboolean test_hooks);

/* Event streams (GET /v1/stream) one principal may hold open at once; beyond, 429 with
 * Retry-After. 0: the default, CARREL_API_STREAMS_DEFAULT. */
#define CARREL_API_STREAMS_DEFAULT 8
void carrel_api_set_max_streams(CarrelApi *api, guint max_per_principal);
/*
 * The worker pools of the request classes (README: "The API's pools and limits"): threads of
 * quick reads, of long VM operations (create, start, stop, snapshot, revert, fork, hibernate,
 * destroy, template build and warm, extract) and of exec and computer use; and how many
 * requests of a class may wait for a thread before more are refused with 503 and Retry-After.
 * Health needs none: it is answered on the main loop.
 */
typedef struct {
    guint quick;
    guint long_ops;
    guint exec;
    guint queue;
} CarrelApiPoolSizes;

#define CARREL_API_POOL_THREADS_MAX 256
#define CARREL_API_POOL_QUEUE_MAX 65536
#define CARREL_API_POOL_SIZES_DEFAULT                                                              \
    {                                                                                              \
        .quick = 8, .long_ops = 4, .exec = 16, .queue = 64                                         \
    }

/* Sets the pools' sizes; INVALID_ARG for a size out of range (1..CARREL_API_POOL_*_MAX). */
gboolean carrel_api_set_pool_sizes(CarrelApi *api, const CarrelApiPoolSizes *sizes, GError **error);

/* Requests being handled right now (the daemon waits for them on shutdown). */
guint carrel_api_in_flight(CarrelApi *api);

G_END_DECLS
