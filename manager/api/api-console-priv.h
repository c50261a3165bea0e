/*
 * api: the console's pure parts (SPICE link parsing, the client stream filter, the .vv file,
 * the ticket store) and the entry points of the console's routes and proxy. Internal to the api
 * module and its tests.
 */
#pragma once

#include "api/api-priv.h"

/* SPICE protocol values (spice-protocol's protocol.h, spice-html5's enums.js). */
#define CARREL_SPICE_MAGIC "REDQ"
#define CARREL_SPICE_VERSION_MAJOR 2
#define CARREL_SPICE_LINK_HEADER_SIZE 16
#define CARREL_SPICE_LINK_MESS_SIZE 18 /* before the capabilities */
#define CARREL_SPICE_LINK_MAX 4096     /* largest link message accepted */
#define CARREL_SPICE_TICKET_SIZE 128   /* an RSA-1024 encrypted password */
#define CARREL_SPICE_PUBKEY_SIZE 162   /* the server's RSA key in its link reply (DER) */
/* A link reply's header and fields up to the end of its key. */
#define CARREL_SPICE_LINK_REPLY_KEY_END                                                            \
    (CARREL_SPICE_LINK_HEADER_SIZE + 4 + CARREL_SPICE_PUBKEY_SIZE)

#define CARREL_SPICE_CHANNEL_MAIN 1
#define CARREL_SPICE_CHANNEL_DISPLAY 2
#define CARREL_SPICE_CHANNEL_INPUTS 3
#define CARREL_SPICE_CHANNEL_CURSOR 4
#define CARREL_SPICE_CHANNEL_PLAYBACK 5

#define CARREL_SPICE_CAP_AUTH_SELECTION 0
#define CARREL_SPICE_CAP_AUTH_SPICE 1
#define CARREL_SPICE_CAP_MINI_HEADER 3

/* Client messages 101 and up are specific to their channel. */
#define CARREL_SPICE_MSGC_FIRST_CHANNEL 101
#define CARREL_SPICE_MSGC_MAIN_AGENT_DATA 107
#define CARREL_SPICE_MSGC_DISPLAY_INIT 101

/* What the first message of a SPICE channel says. */
typedef struct {
    guint32 connection_id;
    guint8 channel_type;
    guint8 channel_id;
    gboolean auth_selection; /* the client names its auth mechanism before the ticket */
    gboolean mini_header;    /* messages carry the 6-byte mini header */
} CarrelSpiceLink;

/*
 * Parses a SPICE link message (SpiceLinkHeader + SpiceLinkMess) at the start of data. Returns
 * its size when complete, 0 when more bytes are needed, -1 with INVALID_ARG when it is not one
 * (magic, major version, size over CARREL_SPICE_LINK_MAX, capabilities outside the message) or
 * FORBIDDEN for a channel the proxy does not carry (only main, display, inputs, cursor and
 * playback: no USB, smartcard, webdav or port channels).
 */
gssize carrel_spice_parse_link(const guint8 *data, gsize len, CarrelSpiceLink *ret_link,
                               GError **error);

/*
 * TRUE when a client message of that channel acts on the guest: every channel message of the
 * inputs channel (keys, pointer) and the agent data of the main channel (clipboard, monitor
 * layout). A view-only viewer's such messages are dropped.
 */
gboolean carrel_spice_msg_acts_on_guest(guint8 channel_type, guint16 msg_type);

/*
 * The server's side of a link: the public key in the first bytes of its link reply
 * (SpiceLinkHeader, then SpiceLinkReply: error, pub_key[162], ...). Returns 0 while fewer than
 * CARREL_SPICE_LINK_REPLY_KEY_END bytes are there, CARREL_SPICE_LINK_REPLY_KEY_END once the key
 * is in ret_key, -1 with an error for anything else (wrong magic or version, an error reply).
 */
gssize carrel_spice_parse_link_reply(const guint8 *data, gsize len,
                                     guint8 ret_key[CARREL_SPICE_PUBKEY_SIZE], GError **error);

/* The SPICE ticket for password: RSA-OAEP (SHA-1, as spice-server decrypts it) of the password
 * and its terminating NUL under the server's key. INVALID_ARG for a key that is not RSA or a
 * password too long for it. */
gboolean carrel_spice_encrypt_ticket(const guint8 key[CARREL_SPICE_PUBKEY_SIZE],
                                     const char *password,
                                     guint8 ret_ticket[CARREL_SPICE_TICKET_SIZE], GError **error);

/* Asked when a message that acts on the guest arrives: may it reach the guest? */
typedef gboolean (*CarrelSpiceMayAct)(gpointer user_data);

/* Asked when the viewer's ticket has arrived: the ticket to send the server in its place. */
typedef gboolean (*CarrelSpiceMakeTicket)(gpointer user_data,
                                          guint8 ret_ticket[CARREL_SPICE_TICKET_SIZE],
                                          GError **error);

typedef struct _CarrelSpiceFilter CarrelSpiceFilter;

/*
 * A filter of the client-to-server byte stream of one channel, in any chunking: the link
 * message, then the auth mechanism (SPICE only: SASL is refused) and the ticket, then messages,
 * whose messages that act on the guest are dropped whole unless may_act says yes at that moment.
 * Memory is bounded: only a link message or a message header is ever buffered.
 */
CarrelSpiceFilter *carrel_spice_filter_new(CarrelSpiceMayAct may_act, gpointer user_data);
void carrel_spice_filter_free(CarrelSpiceFilter *filter);
G_DEFINE_AUTOPTR_CLEANUP_FUNC(CarrelSpiceFilter, carrel_spice_filter_free)

/* Feeds bytes; what may go to the server is appended to out. FALSE with an error when the
 * stream is not SPICE as the proxy carries it (then nothing more may be fed). */
gboolean carrel_spice_filter_feed(CarrelSpiceFilter *filter, const guint8 *data, gsize len,
                                  GByteArray *out, GError **error);

/* From now on the viewer's ticket goes nowhere: make_ticket's is sent in its place (the proxy
 * authenticates; viewers never hold the SPICE password). */
void carrel_spice_filter_set_make_ticket(CarrelSpiceFilter *filter,
                                         CarrelSpiceMakeTicket make_ticket);

/* The link message once the filter has read it, else NULL. */
const CarrelSpiceLink *carrel_spice_filter_get_link(CarrelSpiceFilter *filter);

/*
 * spice-server 0.15 (Debian 12) crashes QEMU (a NULL dereference in its display worker) when an
 * authenticated display channel goes away before its client sent DISPLAY_INIT, and a viewer may
 * close at any moment. When the filter's channel is a display channel past its ticket that sent
 * no message yet, at a message boundary, this appends the DISPLAY_INIT spice-html5 would send
 * to out and returns TRUE (the proxy sends it before closing); else FALSE.
 */
gboolean carrel_spice_filter_append_display_init(CarrelSpiceFilter *filter, GByteArray *out);

/* How many messages that act on the guest were dropped so far. */
guint64 carrel_spice_filter_get_dropped(CarrelSpiceFilter *filter);

/* Called with the bytes of every message that passes the filter after the ticket (header and
 * body, in order, in any chunking). */
typedef void (*CarrelSpiceTap)(gpointer user_data, const guint8 *data, gsize len);

/* From now on the messages that pass go to tap as well (the proxy records people's input). */
void carrel_spice_filter_set_tap(CarrelSpiceFilter *filter, CarrelSpiceTap tap);

/* api-spice-input.c: the client messages of the inputs channel, read as they pass. */

#define CARREL_SPICE_MSGC_INPUTS_KEY_DOWN 101
#define CARREL_SPICE_MSGC_INPUTS_KEY_UP 102
#define CARREL_SPICE_MSGC_INPUTS_KEY_MODIFIERS 103
#define CARREL_SPICE_MSGC_INPUTS_MOUSE_MOTION 111
#define CARREL_SPICE_MSGC_INPUTS_MOUSE_POSITION 112
#define CARREL_SPICE_MSGC_INPUTS_MOUSE_PRESS 113
#define CARREL_SPICE_MSGC_INPUTS_MOUSE_RELEASE 114
/* The largest body of an inputs message read; a longer one is not SPICE as clients send it. */
#define CARREL_SPICE_INPUT_BODY_MAX 16

typedef enum {
    CARREL_SPICE_INPUT_KEY_DOWN,
    CARREL_SPICE_INPUT_KEY_UP,
    CARREL_SPICE_INPUT_KEY_MODIFIERS,
    CARREL_SPICE_INPUT_MOUSE_MOTION,
    CARREL_SPICE_INPUT_MOUSE_POSITION,
    CARREL_SPICE_INPUT_MOUSE_PRESS,
    CARREL_SPICE_INPUT_MOUSE_RELEASE,
    CARREL_SPICE_INPUT_LAST
} CarrelSpiceInputType;

/* One client message of the inputs channel. */
typedef struct {
    CarrelSpiceInputType type;
    guint32 code;      /* keys: PC AT scancode as sent (0xE0 | key << 8 for extended keys) */
    guint16 modifiers; /* KEY_MODIFIERS: scroll, num, caps lock (bits 0, 1, 2) */
    gint64 x, y;       /* MOUSE_POSITION: display pixels; MOUSE_MOTION: a relative move */
    guint8 button;     /* MOUSE_PRESS/RELEASE: 1 left, 2 middle, 3 right, 4 and 5 the wheel */
    guint16 buttons;   /* buttons held after the message */
} CarrelSpiceInput;

typedef struct _CarrelSpiceInputParser CarrelSpiceInputParser;

/* A parser of the messages of one inputs channel (after its link and ticket); mini_header as
 * the link negotiated (6-byte headers, else the 18-byte data header). */
CarrelSpiceInputParser *carrel_spice_input_parser_new(gboolean mini_header);
void carrel_spice_input_parser_free(CarrelSpiceInputParser *parser);
G_DEFINE_AUTOPTR_CLEANUP_FUNC(CarrelSpiceInputParser, carrel_spice_input_parser_free)

/*
 * Feeds bytes in any chunking; each complete message of the types above is appended to
 * ret_inputs (GArray of CarrelSpiceInput). Never fails: messages of other types are skipped,
 * and an input message shorter than its type's body or longer than
 * CARREL_SPICE_INPUT_BODY_MAX is skipped and counted as refused (its bytes still go to the
 * server: the parser only reads). Memory stays bounded whatever the sizes say.
 */
void carrel_spice_input_parser_feed(CarrelSpiceInputParser *parser, const guint8 *data, gsize len,
                                    GArray *ret_inputs);
/* How many input messages were refused so far. */
guint64 carrel_spice_input_parser_get_refused(const CarrelSpiceInputParser *parser);

/* api-spice-record.c: a person's input as timeline events. */

/* Typed text waits this long for more keys before it becomes an event. */
#define CARREL_PERSON_TYPE_IDLE_US (1 * G_USEC_PER_SEC)
/* Most characters of one "type" event: more start the next. */
#define CARREL_PERSON_TYPE_MAX 1000
/* Events one console may record: a bucket of this many, refilled at RATE per second. */
#define CARREL_PERSON_EVENT_BURST 50
#define CARREL_PERSON_EVENT_RATE 20

/* One event of a person: "click" {x, y, button, modifiers?}, "keys" {combo}, "type" {text}. */
typedef struct {
    char *action;
    JsonNode *params;
    gint64 started_us; /* monotonic time of its first input */
} CarrelPersonEvent;

void carrel_person_event_free(CarrelPersonEvent *event);
G_DEFINE_AUTOPTR_CLEANUP_FUNC(CarrelPersonEvent, carrel_person_event_free)

typedef struct _CarrelSpiceRecorder CarrelSpiceRecorder;

/* Pure: turns the input of one inputs channel into events, times given by the caller. */
CarrelSpiceRecorder *carrel_spice_recorder_new(void);
void carrel_spice_recorder_free(CarrelSpiceRecorder *rec);
G_DEFINE_AUTOPTR_CLEANUP_FUNC(CarrelSpiceRecorder, carrel_spice_recorder_free)

/*
 * One input at now_us (monotonic); the events it completes are appended to ret_events
 * (GPtrArray of CarrelPersonEvent, owning). Clicks take the position of the latest
 * MOUSE_POSITION (none after a relative MOUSE_MOTION: x and y are null); a key pressed with
 * ctrl, alt or super, or a key that types nothing (Enter, Tab, Esc, arrows, F-keys...), is a
 * "keys" combo; printable keys (US layout, shift and caps lock honoured) gather into "type",
 * which any other event flushes first. Backspace removes the last character gathered.
 */
void carrel_spice_recorder_feed(CarrelSpiceRecorder *rec, const CarrelSpiceInput *input,
                                gint64 now_us, GPtrArray *ret_events);
/* Typed text idle for CARREL_PERSON_TYPE_IDLE_US at now_us becomes its event. */
void carrel_spice_recorder_tick(CarrelSpiceRecorder *rec, gint64 now_us, GPtrArray *ret_events);
/* Typed text becomes its event now (the channel closes). */
void carrel_spice_recorder_flush(CarrelSpiceRecorder *rec, GPtrArray *ret_events);
/* TRUE while typed text waits for its event. */
gboolean carrel_spice_recorder_pending(const CarrelSpiceRecorder *rec);
/* Events left out because the console sent more than the rate allows. */
guint64 carrel_spice_recorder_get_suppressed(const CarrelSpiceRecorder *rec);

/* What a remote-viewer file says. */
typedef struct {
    const char *title;
    guint port;
    const char *password;
} CarrelVvSpec;

/* Pure: the .vv file for remote-viewer ([virt-viewer], SPICE on 127.0.0.1, deleted after
 * reading); INVALID_ARG for a port outside 1..65535 or an empty password. */
char *carrel_spice_vv_file(const CarrelVvSpec *spec, GError **error);

/* The ticket store (api-console-ticket.c). */

/* Tickets expire this long after issue unless a main channel used them. */
#define CARREL_CONSOLE_TICKET_TTL_US (10 * G_USEC_PER_SEC)
/* Used or expired tickets are remembered this long, to answer 410 rather than 404. */
#define CARREL_CONSOLE_TICKET_GONE_US (120 * G_USEC_PER_SEC)
#define CARREL_CONSOLE_TICKETS_MAX 1024

/* Monotonic microseconds (g_get_monotonic_time, or a test's clock). */
typedef gint64 (*CarrelClockFunc)(void);

typedef struct _CarrelConsoleTickets CarrelConsoleTickets;

CarrelConsoleTickets *carrel_console_tickets_new(CarrelClockFunc clock);
void carrel_console_tickets_free(CarrelConsoleTickets *tickets);
G_DEFINE_AUTOPTR_CLEANUP_FUNC(CarrelConsoleTickets, carrel_console_tickets_free)

/* A new random ticket (256 bits, 64 hex characters) for principal's console of a session whose
 * SPICE listens on port with password (kept for the proxy, which authenticates with it; NULL:
 * none). LIMIT when too many are outstanding. Thread-safe, as every call. */
char *carrel_console_tickets_issue(CarrelConsoleTickets *tickets, const char *session_id,
                                   guint port, const char *password, const char *principal,
                                   GError **error);

/* The SPICE password a ticket was issued with, for principal (the errors of check). */
char *carrel_console_tickets_password(CarrelConsoleTickets *tickets, const char *ticket,
                                      const char *principal, GError **error);

/*
 * Before the websocket upgrade: may principal open a channel with ticket? NOT_FOUND for an
 * unknown ticket, FORBIDDEN for another principal's, WRONG_STATE when it expired or was used
 * and its main channel closed. The session id and port are returned on success (optional).
 */
gboolean carrel_console_tickets_check(CarrelConsoleTickets *tickets, const char *ticket,
                                      const char *principal, char **ret_session_id, guint *ret_port,
                                      GError **error);

/*
 * A channel's link message arrived: a main channel consumes the fresh ticket (WRONG_STATE once
 * used or expired: one main connection per ticket); another channel is accepted only while the
 * ticket's main connection is open, and only from the same principal (FORBIDDEN).
 */
gboolean carrel_console_tickets_link(CarrelConsoleTickets *tickets, const char *ticket,
                                     const char *principal, guint8 channel_type, GError **error);

/* The ticket's main connection closed: the ticket opens nothing any more. */
void carrel_console_tickets_main_closed(CarrelConsoleTickets *tickets, const char *ticket);

/* api-console-flow.c: flow control toward a viewer (what the websocket holds unwritten). */

/* Bytes the websocket may hold for a viewer before the proxy stops reading SPICE. */
#define CARREL_CONSOLE_FLOW_BOUND (4 * 1024 * 1024)
/* A viewer that takes nothing for this long while bytes wait is closed. */
#define CARREL_CONSOLE_STALL_MS (30 * 1000)

typedef enum {
    CARREL_CONSOLE_FLOW_OPEN,  /* read on */
    CARREL_CONSOLE_FLOW_FULL,  /* over half the bound: wait */
    CARREL_CONSOLE_FLOW_STUCK, /* nothing acknowledged for the stall time while bytes wait */
} CarrelConsoleFlowState;

typedef struct _CarrelConsoleFlow CarrelConsoleFlow;

CarrelConsoleFlow *carrel_console_flow_new(gsize bound, gint64 stall_us, gint64 now_us);
void carrel_console_flow_free(CarrelConsoleFlow *flow);
G_DEFINE_AUTOPTR_CLEANUP_FUNC(CarrelConsoleFlow, carrel_console_flow_free)
/* The writer's counter when the flow starts (bytes before it are not the flow's). */
void carrel_console_flow_start(CarrelConsoleFlow *flow, guint64 written);
/* bytes more were handed to the writer (as written on the wire: frame included). */
void carrel_console_flow_sent(CarrelConsoleFlow *flow, gsize bytes, gint64 now_us);
/* The largest websocket control frame on the wire (125 bytes of payload and its header). */
#define CARREL_CONSOLE_WS_CONTROL_MAX 127
/* The connection's counters as measured now: bytes the viewer acknowledged, and bytes written
 * but not acknowledged yet (in the kernel). Growth of acked by no more than a control frame
 * since the last progress is not progress (libsoup's pongs): the stall clock runs on. */
void carrel_console_flow_measured(CarrelConsoleFlow *flow, guint64 acked, guint64 queued,
                                  gint64 now_us);
/* Handed over and not written yet; the most ever seen. */
gsize carrel_console_flow_pending(const CarrelConsoleFlow *flow);
gsize carrel_console_flow_peak(const CarrelConsoleFlow *flow);
/* TRUE when pending is over the bound: time to measure, and maybe stop reading. */
gboolean carrel_console_flow_over(const CarrelConsoleFlow *flow);
/* What the reader should do now (after a measure). */
CarrelConsoleFlowState carrel_console_flow_state(const CarrelConsoleFlow *flow, gint64 now_us);
/* The bytes an unmasked websocket frame of payload bytes takes on the wire. */
gsize carrel_console_ws_frame_size(gsize payload);
/* A TCP socket's bytes written so far: acknowledged by the peer, and still in the send queue;
 * FALSE when the kernel cannot say (not TCP). */
gboolean carrel_console_socket_measure(GSocket *socket, guint64 *ret_acked, guint64 *ret_queued);
/* Resets a TCP connection at once, whatever is queued, without closing the socket under its
 * owner (libsoup); any other socket is shut down both ways. */
void carrel_console_socket_reset(GSocket *socket);

/* Tests: the flow bound and stall time of the proxies opened from now on (0: the defaults),
 * and the most any proxy of api held for a viewer so far. */
void carrel_api_console_set_flow(CarrelApi *api, gsize bound, guint stall_ms);
gsize carrel_api_console_flow_peak(CarrelApi *api);

/* api-console-proxy.c */

/* Where the console's websockets are: CARREL_CONSOLE_PREFIX "/" TICKET. */
#define CARREL_CONSOLE_PREFIX "/v1/console"

/* Registers WS /v1/console/{ticket} on api's server (from carrel_api_new). */
void carrel_api_console_init(CarrelApi *api);
/* Releases what carrel_api_console_init made (from carrel_api_free). */
void carrel_api_console_clear(CarrelApi *api);

/* api-console-routes.c: POST /v1/sessions/{id}/console and GET /v1/sessions/{id}/console.vv. */
CarrelApiReply *carrel_api_post_console(CarrelApiRequest *req, GError **error);
CarrelApiReply *carrel_api_get_console_vv(CarrelApiRequest *req, GError **error);
