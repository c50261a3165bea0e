/* api: internals shared by the server and the route handlers. */
#pragma once

#include "api/api.h"

/* How a request is run (api-pool.c): each class has its own threads and bounded queue. */
typedef enum {
    CARREL_API_CLASS_BY_OP,  /* the route table's default: the class of the route's operation */
    CARREL_API_CLASS_INLINE, /* answered on the main loop, so it must never block (health) */
    CARREL_API_CLASS_QUICK,  /* reads and short calls */
    CARREL_API_CLASS_LONG,   /* VM operations: boots, saves, restores, copies */
    CARREL_API_CLASS_EXEC,   /* what waits on the guest: exec, files, screenshots, input */
    CARREL_API_CLASS_LAST
} CarrelApiClass;

typedef struct _CarrelApiPools CarrelApiPools;

/*
 * Rendered replies by key, all of one store generation (api-cache.c): a lookup or a fill with a
 * newer generation drops every text kept; one with an older generation finds nothing and keeps
 * nothing. Thread-safe.
 */
typedef struct _CarrelApiCache CarrelApiCache;
CarrelApiCache *carrel_api_cache_new(void);
void carrel_api_cache_free(CarrelApiCache *cache);
/* The text kept for key at generation (a reference), or NULL. */
GBytes *carrel_api_cache_get(CarrelApiCache *cache, const char *key, guint64 generation);
/* Keeps text for key, made from what the store held at generation (or later). */
void carrel_api_cache_put(CarrelApiCache *cache, const char *key, guint64 generation, GBytes *text);

struct _CarrelApi {
    SoupServer *server;
    GMainContext *context;         /* where replies are written (the one carrel_api_new ran in) */
    CarrelApiPools *pools;         /* the request classes' worker pools (api-pool.c) */
    CarrelApiCache *lists;         /* rendered session lists (api-cache.c) */
    struct _CarrelApiRates *rates; /* requests per token (api-limit.c), main loop only */
    GMutex hold_lock;              /* the test hook's gate (api-hold.c) */
    GCond hold_cond;
    gboolean hold_closed;
    guint hold_waiting;
    CarrelManager *mgr;
    char *version_info;
    gint in_flight;
    char *web_dir;   /* web-console/, served at / */
    char *spice_dir; /* spice-html5, served at /spice-html5/ */
    gboolean test_hooks;
    char *web_url; /* http(s)://ADDR:PORT when listening on TCP, else NULL */
    gboolean tls;  /* the TCP listener speaks TLS: cookies are Secure */
    struct _CarrelApiLimiter *login_limiter; /* failed credentials per source (api-limit.c) */
    GMutex cookie_lock;                      /* guards cookie_sessions */
    GHashTable *cookie_sessions;             /* cookie -> CarrelApiCookieSession (api-cookie.c) */
    struct _CarrelConsoleTickets *console_tickets; /* api-console-ticket.c */
    GHashTable *console_upstreams; /* ticket -> proxies whose SPICE connection is open */
    gsize console_flow_bound;      /* api-console-flow.c (tests may lower them) */
    guint console_stall_ms;
    gsize console_flow_peak;           /* the most a proxy held for a viewer (main loop only) */
    struct _CarrelApiStreams *streams; /* open event streams per principal (api-stream.c) */
    struct _CarrelApiReaper *reaper;   /* closes what clients closed while idle (api-reaper.c) */
    struct _CarrelApiExecStreams *exec_streams; /* streamed commands' threads (api-exec-stream.c) */
    struct _CarrelApiShells *shells;            /* open shells' threads (api-shell.c) */
};

/* api-reaper.c: libsoup 3.2 keeps a keep-alive connection its client closed while idle open for
 * ever; the reaper closes such sockets (never one with a request in flight). reaped: how many
 * so far. */
typedef struct _CarrelApiReaper CarrelApiReaper;
CarrelApiReaper *carrel_api_reaper_new(SoupServer *server);
guint carrel_api_reaper_reaped(CarrelApiReaper *reaper);
void carrel_api_reaper_free(CarrelApiReaper *reaper, SoupServer *server);

typedef struct {
    CarrelApi *api;
    CarrelManager *mgr;
    const char *version_info;
    char *method;
    char *path;
    GPtrArray *params; /* decoded path segments captured by '*' in the route */
    GHashTable *query; /* decoded query, may be NULL */
    JsonNode *body;    /* parsed JSON object, or NULL when there was no body */
    gpointer typed;    /* the body as the route's typed request (CarrelApiBodyType), or NULL */
    GDestroyNotify typed_free;
    GBytes *raw_body;     /* the body as sent, for CARREL_API_ROUTE_RAW_BODY routes only */
    char *upload_path;    /* CARREL_API_ROUTE_UPLOAD: the spooled body (removed with req) */
    guint64 upload_bytes; /* its size */
    GError *upload_error; /* why it could not be spooled whole, or NULL */
    CarrelPrincipal *who; /* whoever the credentials say, handed to every core verb */
    char *source;         /* the peer's address ("unix" on the socket), for the login limit */
    gboolean by_cookie;   /* authenticated by the web console's cookie */
    char *cookie;         /* the console's cookie as sent, or NULL (logout ends it; never logged) */
    char *request_id;
    char *origin;               /* the Origin header, or NULL (checked by /mcp) */
    char *mcp_protocol_version; /* the MCP-Protocol-Version header, or NULL */
    char *range;                /* the Range header, or NULL (file replies that seek) */
    gboolean websocket;         /* a valid websocket handshake (any origin) */
    gboolean same_origin;       /* Origin is the console's own (carrel_api_same_origin) */
} CarrelApiRequest;

/* libsoup 3.2 has no name for it. */
#define CARREL_HTTP_TOO_MANY_REQUESTS 429

/* What a handler answers (api-reply.c): the server writes it. */
typedef enum {
    CARREL_API_REPLY_JSON,     /* a JSON document */
    CARREL_API_REPLY_BYTES,    /* bytes of a content type, maybe as an attachment */
    CARREL_API_REPLY_EMPTY,    /* a status and headers only (204, 202) */
    CARREL_API_REPLY_REDIRECT, /* a status and a Location */
    CARREL_API_REPLY_STREAM,   /* the server-sent event stream (api-stream.c) */
    CARREL_API_REPLY_FILE,     /* a regular file on the host, sent from disk in chunks */
    CARREL_API_REPLY_EXEC,     /* a streamed command's events (api-exec-stream.c) */
    CARREL_API_REPLY_SHELL,    /* 101: the connection becomes a shell's websocket (api-shell.c) */
    CARREL_API_REPLY_LAST,
} CarrelApiReplyKind;

typedef struct _CarrelApiReply CarrelApiReply;

/* A JSON reply, taking node; NULL when node is NULL (the call that made it set the error), so a
 * handler may pass a core call's result straight on. */
CarrelApiReply *carrel_api_reply_new_json(guint status, JsonNode *node);
/* The same with 200 OK, the status of most replies. */
CarrelApiReply *carrel_api_reply_ok(JsonNode *node);
/* Bytes of content_type, taking bytes; NULL when bytes is NULL, as above. */
CarrelApiReply *carrel_api_reply_new_bytes(guint status, GBytes *bytes, const char *content_type);
/* The regular file at path as content_type, read from disk chunk by chunk as the client takes
 * them (never whole in memory), with its Content-Length; NULL with error when it cannot be opened
 * or is not a regular file. */
CarrelApiReply *carrel_api_reply_new_file(guint status, const char *path, const char *content_type,
                                          GError **error);
/* A streamed command's events, taking core (its stream slot of token_id already reserved). */
CarrelApiReply *carrel_api_reply_new_exec_stream(const char *token_id, CarrelExecStream *core);
/* The websocket upgrade to a started shell, taking core (its stream slot of token_id already
 * reserved; the request was checked to be a websocket handshake). */
CarrelApiReply *carrel_api_reply_new_shell(struct _CarrelApiStreams *streams, const char *token_id,
                                           CarrelShell *core);
/* A status without a body (204 No Content, 202 Accepted). */
CarrelApiReply *carrel_api_reply_new_empty(guint status);
/* A status (302, 303, 307) that sends the client to location. */
CarrelApiReply *carrel_api_reply_new_redirect(guint status, const char *location);
/* The event stream as who sees it, with session_id's timeline when not NULL. */
CarrelApiReply *carrel_api_reply_new_stream(const CarrelPrincipal *who, const char *session_id);
/* The error envelope of error, with status (0: the error table's). */
CarrelApiReply *carrel_api_reply_new_error(guint status, const GError *error);
void carrel_api_reply_free(CarrelApiReply *reply);
G_DEFINE_AUTOPTR_CLEANUP_FUNC(CarrelApiReply, carrel_api_reply_free)

/* A header the reply carries (appended: Set-Cookie may come more than once). */
void carrel_api_reply_add_header(CarrelApiReply *reply, const char *name, const char *value);
/* One byte range of a file of size from an HTTP Range header ("bytes=A-B", "bytes=A-",
 * "bytes=-N"), clamped to the file; FALSE for anything else (several ranges, none inside). */
gboolean carrel_api_parse_range(const char *header, guint64 size, guint64 *ret_first,
                                guint64 *ret_last);
/* A file reply serves only range (the request's Range header, may be NULL) when it is one
 * satisfiable part: 206 with Content-Range; otherwise the whole file. Says Accept-Ranges. */
void carrel_api_reply_file_range(CarrelApiReply *reply, const char *range);
/* A bytes or file reply is sent as an attachment of this name (Content-Disposition). */
void carrel_api_reply_set_attachment(CarrelApiReply *reply, const char *filename);
CarrelApiReplyKind carrel_api_reply_get_kind(const CarrelApiReply *reply);
guint carrel_api_reply_get_status(const CarrelApiReply *reply);
/* The first value of the header name (any case), or NULL. */
const char *carrel_api_reply_get_header(const CarrelApiReply *reply, const char *name);
/* The JSON of a JSON reply (borrowed), else NULL. */
JsonNode *carrel_api_reply_get_json(const CarrelApiReply *reply);
/* Makes a JSON reply's text now (in a worker thread), so that writing it on the main loop only
 * copies bytes; other kinds have nothing to make. */
void carrel_api_reply_render(CarrelApiReply *reply);
/* node as compact JSON text, the way replies are written. */
GBytes *carrel_api_json_text(JsonNode *node);
/* Writes reply on msg: status, headers and body, or starts the stream (main loop only). */
void carrel_api_reply_write(CarrelApiReply *reply, CarrelApi *api, SoupServerMessage *msg);

/*
 * A route's handler: a reply, or NULL with error (sent as the error envelope with the status of
 * the error table). A refusal that needs a status or headers of its own (429 and Retry-After) is
 * a reply made with carrel_api_reply_new_error.
 */
typedef CarrelApiReply *(*CarrelApiHandler)(CarrelApiRequest *req, GError **error);

typedef enum {
    /* The body is handed over as bytes, not parsed, up to CARREL_LIMIT_FILE_BYTES. */
    CARREL_API_ROUTE_RAW_BODY = 1 << 0,
    /* With RAW_BODY: up to CARREL_LIMIT_UPLOAD_BYTES instead (task inputs), written to a spool
     * file as it arrives (req->upload_path), never held in memory (api-upload.c). */
    CARREL_API_ROUTE_UPLOAD = 1 << 1,
    /* With UPLOAD: up to CARREL_LIMIT_TRANSFER_BYTES (a file streamed into a guest). */
    CARREL_API_ROUTE_TRANSFER = 1 << 6,
    /* Needs no credentials (health, login). */
    CARREL_API_ROUTE_PUBLIC = 1 << 2,
    /* Exists only when carreld runs with --test-hooks. */
    CARREL_API_ROUTE_TEST_HOOK = 1 << 3,
} CarrelApiRouteFlags;

/*
 * How a route's body becomes its typed request: the server calls parse on the JSON body (NULL
 * when none was sent) before the handler, answers its error (400, or 413 for a limit) without
 * calling the handler, and hands the handler the record as req->typed.
 */
typedef gpointer (*CarrelApiBodyParser)(JsonNode *body, GError **error);
typedef struct {
    CarrelApiBodyParser parse;
    GDestroyNotify free;
} CarrelApiBodyType;

/* The body type of a parser and the free function of its record, for the route table. */
#define CARREL_API_BODY_OF(from_json, free_func)                                                   \
    (&(const CarrelApiBodyType){(CarrelApiBodyParser)(from_json), (GDestroyNotify)(free_func)})
/* The same for conf's record PREFIX: PREFIX_from_json and PREFIX_free. */
#define CARREL_API_BODY(prefix) CARREL_API_BODY_OF(prefix##_from_json, prefix##_free)

/*
 * A route and the core operation it reaches. The operation is documentation and the key of the
 * role matrix test, never a check: core decides (CARREL_OP_LAST: no core verb, e.g. login).
 */
typedef struct {
    const char *method;
    const char *pattern; /* "/v1/sessions/ * /start" without spaces: '*' is one segment */
    CarrelApiHandler handler;
    CarrelOp op;
    CarrelApiRouteFlags flags;
    const CarrelApiBodyType *body; /* the typed request of its JSON body, or NULL */
    CarrelApiClass klass;          /* left out (BY_OP): the class of op */
} CarrelApiRoute;

/* The route table (api-routes.c), terminated by a NULL method. */
extern const CarrelApiRoute carrel_api_routes[];

/* Finds the route for method and path; NOT_FOUND or INVALID_ARG (405) when none. */
const CarrelApiRoute *carrel_api_route_match(const char *method, const char *path,
                                             GPtrArray **ret_params, guint *ret_status,
                                             GError **error);

/* Largest body the route accepts. */
gsize carrel_api_route_body_max(const CarrelApiRoute *route);

/* The i-th '*' segment of the route's path (decoded). */
const char *carrel_api_param(CarrelApiRequest *req, guint i);
/* A query value or NULL. */
const char *carrel_api_query(CarrelApiRequest *req, const char *key);

/*
 * POST /mcp (api-mcp.c): one JSON-RPC message of MCP's streamable HTTP transport, answered with
 * application/json (202 and no body for notifications and responses). Malformed messages get
 * JSON-RPC errors, not the error envelope; a foreign Origin is refused with 403.
 */
CarrelApiReply *carrel_api_mcp_post(CarrelApiRequest *req, GError **error);
/* GET /v1/sessions/{id}/recording and /recording/{name} (api-recording.c). */
CarrelApiReply *carrel_api_get_recording(CarrelApiRequest *req, GError **error);
CarrelApiReply *carrel_api_get_recording_segment(CarrelApiRequest *req, GError **error);
/* The core operation an MCP tool reaches (for the role matrix test). */
CarrelOp carrel_api_mcp_tool_op(CarrelMcpTool tool);

/* api-openapi.c: the OpenAPI description (manager/api/openapi.json, built in), a new reference;
 * NULL and error only when the build left it out. */
GBytes *carrel_api_openapi_bytes(GError **error);
/* GET /v1/openapi.json: that description. */
CarrelApiReply *carrel_api_get_openapi(CarrelApiRequest *req, GError **error);

/* api-cookie.c: the web console's cookie sessions. */
#define CARREL_API_COOKIE "carrel_session"
/* Starts a cookie session for a principal; returns the Set-Cookie header value. */
char *carrel_api_cookie_login(CarrelApi *api, const CarrelPrincipal *who);
/* Ends the cookie session of cookie (if any); returns the Set-Cookie value that clears it. */
char *carrel_api_cookie_logout(CarrelApi *api, const char *cookie);
/* The console's cookie as msg carries it (valid or not), or NULL. */
char *carrel_api_cookie_get(SoupServerMessage *msg);
/* The principal of a cookie session, asked of core (a revoked token has none any more);
 * UNAUTHORIZED otherwise. */
CarrelPrincipal *carrel_api_cookie_lookup(CarrelApi *api, const char *cookie, GError **error);
/* TRUE when msg's Origin header names this server: https:// + Host, or http:// + Host when msg
 * did not come over TLS. */
gboolean carrel_api_same_origin(SoupServerMessage *msg);

/* api-static.c: a file of web-console/ or spice-html5 for GET/HEAD of a path outside /v1 and
 * /mcp (a text 404 or 405 otherwise). */
CarrelApiReply *carrel_api_static_reply(CarrelApi *api, const char *method, const char *path);

/* api-stream.c: GET /v1/stream, a stream reply for the caller, with ?session's timeline. */
CarrelApiReply *carrel_api_get_stream(CarrelApiRequest *req, GError **error);
/* Open event streams per principal: at most max each (0: CARREL_API_STREAMS_DEFAULT). */
typedef struct _CarrelApiStreams CarrelApiStreams;
CarrelApiStreams *carrel_api_streams_new(guint max_per_principal);
void carrel_api_streams_free(CarrelApiStreams *streams);
void carrel_api_streams_set_max(CarrelApiStreams *streams, guint max_per_principal);
/* Takes one of token_id's streams; LIMIT when it holds the most already. Thread-safe. */
gboolean carrel_api_streams_reserve(CarrelApiStreams *streams, const char *token_id,
                                    GError **error);
void carrel_api_streams_release(CarrelApiStreams *streams, const char *token_id);
/* How many streams token_id holds now. */
guint carrel_api_streams_count(CarrelApiStreams *streams, const char *token_id);
/* Starts server-sent events on msg (sessions, approvals, a session's timeline), as who sees
 * them; it ends when who's token does (the writer of stream replies). */
void carrel_api_stream_start(CarrelApi *api, SoupServerMessage *msg, const CarrelPrincipal *who,
                             const char *session_id);

/* TRUE when the client of an event stream closed its end (it sends nothing after its request,
 * so a readable end of file or a hangup means it left). */
gboolean carrel_api_stream_client_gone(SoupServerMessage *msg);
/* From a worker thread: func(data) runs later in context's loop, after what was posted before.
 * Never runs it in the calling thread (g_main_context_invoke would, when the context is free,
 * and so reorder it ahead of what is queued). */
void carrel_api_post_to_loop(GMainContext *context, GSourceFunc func, gpointer data,
                             GDestroyNotify notify);

/* api-exec-stream.c: the threads of streamed commands; freeing stops and joins them. */
typedef struct _CarrelApiExecStreams CarrelApiExecStreams;
CarrelApiExecStreams *carrel_api_exec_streams_new(void);
void carrel_api_exec_streams_free(CarrelApiExecStreams *all);
/* Starts the events of core on msg and the thread that polls it (main loop only). */
void carrel_api_exec_stream_start(CarrelApi *api, SoupServerMessage *msg, const char *token_id,
                                  CarrelExecStream *core);

/* api-shell.c: GET /v1/sessions/{id}/shell and the threads of open shells (freeing kills the
 * shells and joins them). */
typedef struct _CarrelApiShells CarrelApiShells;
CarrelApiShells *carrel_api_shells_new(void);
void carrel_api_shells_free(CarrelApiShells *all);
CarrelApiReply *carrel_api_get_shell(CarrelApiRequest *req, GError **error);
/* Answers the handshake of msg and relays core over the websocket (main loop only). */
void carrel_api_shell_start(CarrelApi *api, SoupServerMessage *msg, const char *token_id,
                            CarrelShell *core);

/* api-procs.c: background processes and streamed commands. */
CarrelApiReply *carrel_api_post_exec_detached(CarrelApiRequest *req, GError **error);
CarrelApiReply *carrel_api_get_processes(CarrelApiRequest *req, GError **error);
CarrelApiReply *carrel_api_get_process(CarrelApiRequest *req, GError **error);
CarrelApiReply *carrel_api_post_process_kill(CarrelApiRequest *req, GError **error);
CarrelApiReply *carrel_api_post_process_stdin(CarrelApiRequest *req, GError **error);

/* api-json.c: a session as the API shows it to who, with its control lease: the one shape of a
 * session everywhere (REST, stream, MCP). */
JsonNode *carrel_api_session_json(CarrelManager *mgr, const CarrelPrincipal *who,
                                  const CarrelSession *s);
/* Whom a list is shown to (the data of carrel_api_session_item). */
typedef struct {
    CarrelManager *mgr;
    const CarrelPrincipal *who;
    GHashTable *leases; /* carrel_manager_leases, read once for the list; NULL: one per item */
} CarrelApiView;
/* {member: [to_json(item, data) for each item]}, the shape of every list the API returns. */
typedef JsonNode *(*CarrelApiItemJson)(gpointer item, gpointer data);
JsonNode *carrel_api_list_of(const char *member, GPtrArray *items, CarrelApiItemJson to_json,
                             gpointer data);
/* Item functions for carrel_api_list_of: a session (data: a CarrelApiView), an approval, a
 * snapshot, a timeline event. */
JsonNode *carrel_api_session_item(gpointer session, gpointer view);
JsonNode *carrel_api_approval_item(gpointer approval, gpointer unused);
JsonNode *carrel_api_snapshot_item(gpointer snapshot, gpointer unused);
JsonNode *carrel_api_event_item(gpointer event, gpointer unused);

/* api-auth.c: who the caller is: login and logout (the console's cookie), whoami, the role
 * matrix and named tokens. */
CarrelApiReply *carrel_api_post_login(CarrelApiRequest *req, GError **error);
CarrelApiReply *carrel_api_post_logout(CarrelApiRequest *req, GError **error);
CarrelApiReply *carrel_api_get_whoami(CarrelApiRequest *req, GError **error);
CarrelApiReply *carrel_api_get_roles(CarrelApiRequest *req, GError **error);
CarrelApiReply *carrel_api_post_tokens(CarrelApiRequest *req, GError **error);
CarrelApiReply *carrel_api_get_tokens(CarrelApiRequest *req, GError **error);
CarrelApiReply *carrel_api_delete_token(CarrelApiRequest *req, GError **error);
CarrelApiReply *carrel_api_post_admin_rotate(CarrelApiRequest *req, GError **error);

/* api-files.c: a guest's files: streamed transfers (sha256 in X-Carrel-Sha256) and the
 * operations of carrel-guest fs. */
CarrelApiReply *carrel_api_get_session_file(CarrelApiRequest *req, GError **error);
/* GET /v1/sessions/{id}/export: the session's signed evidence bundle (a tar), from disk. */
CarrelApiReply *carrel_api_get_session_export(CarrelApiRequest *req, GError **error);
CarrelApiReply *carrel_api_put_session_file(CarrelApiRequest *req, GError **error);
CarrelApiReply *carrel_api_get_session_fs(CarrelApiRequest *req, GError **error);
CarrelApiReply *carrel_api_get_session_fs_stat(CarrelApiRequest *req, GError **error);
CarrelApiReply *carrel_api_post_session_fs_mkdir(CarrelApiRequest *req, GError **error);
CarrelApiReply *carrel_api_post_session_fs_remove(CarrelApiRequest *req, GError **error);
CarrelApiReply *carrel_api_post_session_fs_move(CarrelApiRequest *req, GError **error);

/* api-control.c: what reviewers hold and see: the control lease, approvals, the screenshots
 * kept on a timeline and the audit log. */
CarrelApiReply *carrel_api_get_control(CarrelApiRequest *req, GError **error);
CarrelApiReply *carrel_api_post_control(CarrelApiRequest *req, GError **error);
CarrelApiReply *carrel_api_get_approvals(CarrelApiRequest *req, GError **error);
CarrelApiReply *carrel_api_post_approval_approve(CarrelApiRequest *req, GError **error);
CarrelApiReply *carrel_api_post_approval_deny(CarrelApiRequest *req, GError **error);
CarrelApiReply *carrel_api_post_test_approval(CarrelApiRequest *req, GError **error);
CarrelApiReply *carrel_api_get_session_shot(CarrelApiRequest *req, GError **error);
CarrelApiReply *carrel_api_get_audit(CarrelApiRequest *req, GError **error);
CarrelApiReply *carrel_api_get_audit_verify(CarrelApiRequest *req, GError **error);

/* api-metrics.c: GET /metrics (Prometheus text), and the count of every reply the server sends:
 * requests by method, route pattern and status, and error replies by code. */
CarrelApiReply *carrel_api_get_metrics(CarrelApiRequest *req, GError **error);
void carrel_api_count_reply(CarrelApi *api, const char *method, const char *path,
                            const CarrelApiRoute *route, const CarrelApiReply *reply);
/* api-upload.c: from the early handler (the headers passed the size check), an upload route's
 * body (route: the request's, NULL when none) is not accumulated but written to a spool file
 * as it arrives. take hands the file (and any failure) to the request, which removes it when
 * freed; check is the route's body check: the route's limit or a write failure is the error. */
void carrel_api_upload_spool_start(CarrelApi *api, SoupServerMessage *msg,
                                   const CarrelApiRoute *route);
void carrel_api_upload_spool_take(SoupServerMessage *msg, CarrelApiRequest *req);
gboolean carrel_api_upload_check(CarrelApiRequest *req, GError **error);

/* api-limit.c: failed credentials per source. A source with too many failures in a window is
 * refused (429) until the window moves on; ret_retry_s says when to try again. */
typedef struct _CarrelApiLimiter CarrelApiLimiter;
CarrelApiLimiter *carrel_api_limiter_new(guint max_failures, guint window_s);
void carrel_api_limiter_free(CarrelApiLimiter *limiter);
/* TRUE when source may try now; else *ret_retry_s > 0. */
gboolean carrel_api_limiter_check(CarrelApiLimiter *limiter, const char *source, gint64 now_us,
                                  guint *ret_retry_s);
void carrel_api_limiter_fail(CarrelApiLimiter *limiter, const char *source, gint64 now_us);
/* The login limit of api (api-server.c): NULL while source may try, else the 429 reply that
 * says "too many failed logins" and when to try again (Retry-After). */
CarrelApiReply *carrel_api_login_limit_reply(CarrelApi *api, const char *source);
void carrel_api_count_failed_login(CarrelApi *api, const char *source);

/* api-limit.c: requests per token, a token bucket ([limits] rate and burst). Pure: the time is
 * the caller's. A new bucket (all zero) starts full. */
typedef struct {
    double tokens;
    gint64 last_us;
} CarrelApiBucket;
/* TRUE when one request may go now (and takes it); else *ret_retry_s > 0 says when. */
gboolean carrel_api_bucket_take(CarrelApiBucket *bucket, guint rate, guint burst, gint64 now_us,
                                guint *ret_retry_s);
/* The buckets of every token, by key (main loop only: no lock). */
typedef struct _CarrelApiRates CarrelApiRates;
CarrelApiRates *carrel_api_rates_new(void);
void carrel_api_rates_free(CarrelApiRates *rates);
gboolean carrel_api_rates_take(CarrelApiRates *rates, const char *key, guint rate, guint burst,
                               gint64 now_us, guint *ret_retry_s);

/* api-pool.c: request classes and their pools. */
const char *carrel_api_class_to_string(CarrelApiClass klass);
/* The class of an operation: every operation has one (a new one must be added here). */
CarrelApiClass carrel_api_class_of_op(CarrelOp op);
/* The class a request runs in: the route's, else its operation's; for POST /mcp, the class of
 * the tool it calls (exec for bodies too big to look into on the main loop). */
CarrelApiClass carrel_api_request_class(const CarrelApiRoute *route, const CarrelApiRequest *req);
/* Pools of the QUICK, LONG and EXEC classes that call run(item, data), with the default sizes. */
CarrelApiPools *carrel_api_pools_new(GFunc run, gpointer data, GError **error);
gboolean carrel_api_pools_set_sizes(CarrelApiPools *pools, const CarrelApiPoolSizes *sizes,
                                    GError **error);
void carrel_api_pools_free(CarrelApiPools *pools);
G_DEFINE_AUTOPTR_CLEANUP_FUNC(CarrelApiPools, carrel_api_pools_free)
/* Queues item in klass's pool (main loop only); OVERLOADED with *ret_retry_s when the class
 * already has its bound of requests waiting. */
gboolean carrel_api_pools_push(CarrelApiPools *pools, CarrelApiClass klass, gpointer item,
                               guint *ret_retry_s, GError **error);
/* Requests of klass waiting for a thread. */
guint carrel_api_pools_queued(CarrelApiPools *pools, CarrelApiClass klass);

/* api-hold.c (test hooks): POST /v1/test/hold waits while the gate is closed (a long request
 * that tests use to fill the long pool); POST /v1/test/gate {"closed": bool} closes or opens
 * it and says how many holds wait and how many long requests are queued. */
CarrelApiReply *carrel_api_post_test_hold(CarrelApiRequest *req, GError **error);
CarrelApiReply *carrel_api_post_test_gate(CarrelApiRequest *req, GError **error);
