/* Unit tests of the api module's pure parts: the status of each error code, replies, SPICE link
 * parsing, the client stream filter (view-only) and the ticket store. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <string.h>

#include "api/api-console-priv.h"
#include "api/api.h"

/* Every code has a status (a code left out of the table would answer 0); busy is a conflict. */
static void
test_error_status(void **state)
{
    for (int i = 0; i < CARREL_ERROR_LAST; i++) {
        g_autoptr(GError) error = g_error_new_literal(CARREL_ERROR, i, "x");

        assert_true(carrel_api_status_for_error(error) >= 400);
    }
    {
        g_autoptr(GError) busy = g_error_new_literal(CARREL_ERROR, CARREL_ERROR_BUSY, "x");
        g_autoptr(GError) other = g_error_new_literal(G_IO_ERROR, G_IO_ERROR_NOT_FOUND, "x");
        g_autoptr(JsonNode) envelope = carrel_api_error_envelope(busy);
        JsonObject *inner = json_object_get_object_member(json_node_get_object(envelope), "error");

        assert_int_equal(carrel_api_status_for_error(busy), SOUP_STATUS_CONFLICT);
        assert_string_equal(json_object_get_string_member(inner, "code"), "busy");
        assert_int_equal(carrel_api_status_for_error(other), SOUP_STATUS_INTERNAL_SERVER_ERROR);
    }
}

/* A reply says what it is: status, kind and headers; NULL in gives NULL out (the error is set). */
static void
test_reply(void **state)
{
    g_autoptr(GError) busy = g_error_new_literal(CARREL_ERROR, CARREL_ERROR_BUSY, "x");
    g_autoptr(CarrelApiReply) error = carrel_api_reply_new_error(0, busy);
    g_autoptr(CarrelApiReply) limited = carrel_api_reply_new_error(429, busy);
    g_autoptr(CarrelApiReply) empty = carrel_api_reply_new_empty(SOUP_STATUS_NO_CONTENT);
    g_autoptr(CarrelApiReply) moved = carrel_api_reply_new_redirect(303, "/v1/healthz");
    JsonObject *inner;

    assert_null(carrel_api_reply_ok(NULL));
    assert_null(carrel_api_reply_new_bytes(SOUP_STATUS_OK, NULL, "image/png"));
    assert_int_equal(carrel_api_reply_get_kind(error), CARREL_API_REPLY_JSON);
    assert_int_equal(carrel_api_reply_get_status(error), SOUP_STATUS_CONFLICT);
    inner = json_object_get_object_member(json_node_get_object(carrel_api_reply_get_json(error)),
                                          "error");
    assert_string_equal(json_object_get_string_member(inner, "code"), "busy");
    assert_int_equal(carrel_api_reply_get_status(limited), 429);
    assert_int_equal(carrel_api_reply_get_kind(empty), CARREL_API_REPLY_EMPTY);
    assert_null(carrel_api_reply_get_json(empty));
    carrel_api_reply_add_header(empty, "Set-Cookie", "a=1");
    carrel_api_reply_add_header(empty, "Set-Cookie", "b=2");
    assert_string_equal(carrel_api_reply_get_header(empty, "set-cookie"), "a=1");
    assert_null(carrel_api_reply_get_header(empty, "Location"));
    assert_int_equal(carrel_api_reply_get_kind(moved), CARREL_API_REPLY_REDIRECT);
    assert_string_equal(carrel_api_reply_get_header(moved, "Location"), "/v1/healthz");
}

static void
put_u32(GByteArray *b, guint32 v)
{
    guint8 le[4] = {v & 0xff, (v >> 8) & 0xff, (v >> 16) & 0xff, (v >> 24) & 0xff};

    g_byte_array_append(b, le, 4);
}

static void
put_u16(GByteArray *b, guint16 v)
{
    guint8 le[2] = {v & 0xff, (v >> 8) & 0xff};

    g_byte_array_append(b, le, 2);
}

/* A link message as spice-html5 sends it: header, SpiceLinkMess, one common and one channel cap. */
static GByteArray *
link_message(guint8 channel_type, guint32 common_caps)
{
    GByteArray *b = g_byte_array_new();

    g_byte_array_append(b, (const guint8 *)"REDQ", 4);
    put_u32(b, 2);
    put_u32(b, 2);
    put_u32(b, 18 + 8);
    put_u32(b, 0); /* connection id */
    g_byte_array_append(b, &channel_type, 1);
    g_byte_array_append(b, (const guint8 *)"\0", 1);
    put_u32(b, 1);  /* common caps */
    put_u32(b, 1);  /* channel caps */
    put_u32(b, 18); /* caps offset */
    put_u32(b, common_caps);
    put_u32(b, 0);
    return b;
}

#define SPICE_HTML5_CAPS (1u << 0 | 1u << 3) /* auth selection, mini header */

/* Mechanism + ticket, as spice-html5's send_ticket. */
static void
put_ticket(GByteArray *b)
{
    guint8 ticket[CARREL_SPICE_TICKET_SIZE];

    memset(ticket, 0xab, sizeof(ticket));
    put_u32(b, CARREL_SPICE_CAP_AUTH_SPICE);
    g_byte_array_append(b, ticket, sizeof(ticket));
}

static void
put_message(GByteArray *b, guint16 type, guint32 size, guint8 fill)
{
    put_u16(b, type);
    put_u32(b, size);
    for (guint32 i = 0; i < size; i++)
        g_byte_array_append(b, &fill, 1);
}

static void
test_parse_link(void **state)
{
    g_autoptr(GByteArray) msg = link_message(CARREL_SPICE_CHANNEL_INPUTS, SPICE_HTML5_CAPS);
    g_autoptr(GError) error = NULL;
    CarrelSpiceLink link = {0};

    assert_int_equal(carrel_spice_parse_link(msg->data, msg->len, &link, &error), 42);
    assert_int_equal(link.channel_type, CARREL_SPICE_CHANNEL_INPUTS);
    assert_true(link.auth_selection);
    assert_true(link.mini_header);
    /* Every truncation asks for more, never reads past the end. */
    for (guint len = 0; len < msg->len; len++) {
        g_autofree guint8 *copy = g_memdup2(msg->data, len);
        assert_int_equal(carrel_spice_parse_link(copy, len, &link, &error), 0);
        assert_null(error);
    }
}

static void
expect_refused(GByteArray *msg, int code)
{
    g_autoptr(GError) error = NULL;
    CarrelSpiceLink link = {0};

    assert_int_equal(carrel_spice_parse_link(msg->data, msg->len, &link, &error), -1);
    assert_true(g_error_matches(error, CARREL_ERROR, code));
}

static void
test_parse_link_hostile(void **state)
{
    g_autoptr(GByteArray) magic = link_message(1, 0);
    g_autoptr(GByteArray) version = link_message(1, 0);
    g_autoptr(GByteArray) huge = link_message(1, 0);
    g_autoptr(GByteArray) caps = link_message(1, 0);
    g_autoptr(GByteArray) offset = link_message(1, 0);
    g_autoptr(GByteArray) usb = link_message(9, 0);
    g_autoptr(GByteArray) record = link_message(6, 0);
    g_autoptr(GError) error = NULL;
    CarrelSpiceLink link = {0};

    magic->data[0] = 'G'; /* "GET /" is refused at its first byte */
    assert_int_equal(carrel_spice_parse_link(magic->data, 1, &link, &error), -1);
    g_clear_error(&error);
    expect_refused(magic, CARREL_ERROR_INVALID_ARG);
    version->data[4] = 3;
    expect_refused(version, CARREL_ERROR_INVALID_ARG);
    huge->data[14] = 0x10; /* size 1 MiB: refused from the header alone */
    assert_int_equal(carrel_spice_parse_link(huge->data, 16, &link, &error), -1);
    g_clear_error(&error);
    caps->data[16 + 6] = 0xff; /* 255 common caps */
    expect_refused(caps, CARREL_ERROR_INVALID_ARG);
    offset->data[16 + 14] = 40; /* caps beyond the message */
    expect_refused(offset, CARREL_ERROR_INVALID_ARG);
    expect_refused(usb, CARREL_ERROR_FORBIDDEN);
    expect_refused(record, CARREL_ERROR_FORBIDDEN);
}

static void
test_messages_acting_on_guest(void **state)
{
    /* Keys, modifiers, scancodes, motion, position, press, release. */
    static const guint16 acting[] = {101, 102, 103, 104, 111, 112, 113, 114, 200, 65535};

    for (gsize i = 0; i < G_N_ELEMENTS(acting); i++)
        assert_true(carrel_spice_msg_acts_on_guest(CARREL_SPICE_CHANNEL_INPUTS, acting[i]));
    /* ack_sync, ack, pong, migrate flush, disconnecting pass. */
    for (guint16 t = 1; t <= 6; t++)
        assert_false(carrel_spice_msg_acts_on_guest(CARREL_SPICE_CHANNEL_INPUTS, t));
    assert_true(carrel_spice_msg_acts_on_guest(CARREL_SPICE_CHANNEL_MAIN, 107));
    assert_false(carrel_spice_msg_acts_on_guest(CARREL_SPICE_CHANNEL_MAIN, 101));
    assert_false(carrel_spice_msg_acts_on_guest(CARREL_SPICE_CHANNEL_DISPLAY, 101));
}

typedef struct {
    gboolean allow;
    guint asked;
} Lease;

static gboolean
lease_allows(gpointer user_data)
{
    Lease *lease = user_data;

    lease->asked++;
    return lease->allow;
}

/* The stream an inputs channel sends: link, ticket, then key down (dropped when view-only), pong,
 * mouse motion. */
static GByteArray *
inputs_stream(void)
{
    GByteArray *b = link_message(CARREL_SPICE_CHANNEL_INPUTS, SPICE_HTML5_CAPS);

    put_ticket(b);
    put_message(b, 101, 4, 0x11); /* key down */
    put_message(b, 3, 0, 0);      /* pong */
    put_message(b, 111, 9, 0x22); /* mouse motion */
    put_message(b, 1, 4, 0x33);   /* ack sync */
    return b;
}

/* Feeds stream in chunks of step bytes and returns what would go to the server. */
static GByteArray *
filter_in_chunks(GByteArray *stream, gsize step, Lease *lease)
{
    g_autoptr(CarrelSpiceFilter) filter = carrel_spice_filter_new(lease_allows, lease);
    GByteArray *out = g_byte_array_new();

    for (gsize at = 0; at < stream->len; at += step) {
        g_autoptr(GError) error = NULL;
        gsize n = MIN(step, stream->len - at);
        if (!carrel_spice_filter_feed(filter, stream->data + at, n, out, &error))
            fail_msg("feed at %zu: %s", at, error->message);
    }
    assert_non_null(carrel_spice_filter_get_link(filter));
    assert_int_equal(carrel_spice_filter_get_dropped(filter), lease->allow ? 0 : 2);
    return out;
}

static void
test_filter_view_only(void **state)
{
    g_autoptr(GByteArray) stream = inputs_stream();
    /* What passes when view-only: link, ticket, pong and ack sync. */
    g_autoptr(GByteArray) expected = link_message(CARREL_SPICE_CHANNEL_INPUTS, SPICE_HTML5_CAPS);
    gsize steps[] = {1, 2, 5, 7, 64, 1000};

    put_ticket(expected);
    put_message(expected, 3, 0, 0);
    put_message(expected, 1, 4, 0x33);
    for (gsize i = 0; i < G_N_ELEMENTS(steps); i++) {
        Lease view = {.allow = FALSE};
        Lease control = {.allow = TRUE};
        g_autoptr(GByteArray) dropped = filter_in_chunks(stream, steps[i], &view);
        g_autoptr(GByteArray) passed = filter_in_chunks(stream, steps[i], &control);

        assert_int_equal(dropped->len, expected->len);
        assert_memory_equal(dropped->data, expected->data, expected->len);
        assert_int_equal(passed->len, stream->len);
        assert_memory_equal(passed->data, stream->data, stream->len);
        assert_int_equal(view.asked, 2);
    }
}

static void
test_filter_other_channels(void **state)
{
    g_autoptr(GByteArray) stream = link_message(CARREL_SPICE_CHANNEL_DISPLAY, SPICE_HTML5_CAPS);
    g_autoptr(GByteArray) out = g_byte_array_new();
    g_autoptr(CarrelSpiceFilter) filter = carrel_spice_filter_new(NULL, NULL);

    put_ticket(stream);
    put_message(stream, 101, 3, 1); /* display init */
    assert_true(carrel_spice_filter_feed(filter, stream->data, stream->len, out, NULL));
    assert_int_equal(out->len, stream->len);
    assert_int_equal(carrel_spice_filter_get_link(filter)->channel_type,
                     CARREL_SPICE_CHANNEL_DISPLAY);
}

static void
test_filter_full_header_and_no_selection(void **state)
{
    /* Without auth selection the ticket comes at once; without mini header, 18-byte headers. */
    g_autoptr(GByteArray) stream = link_message(CARREL_SPICE_CHANNEL_INPUTS, 0);
    g_autoptr(GByteArray) out = g_byte_array_new();
    g_autoptr(CarrelSpiceFilter) filter = carrel_spice_filter_new(NULL, NULL);
    guint8 ticket[CARREL_SPICE_TICKET_SIZE] = {0};
    gsize before;

    g_byte_array_append(stream, ticket, sizeof(ticket));
    before = stream->len;
    put_u32(stream, 1); /* serial */
    put_u32(stream, 0);
    put_u16(stream, 112); /* mouse position */
    put_u32(stream, 2);
    put_u32(stream, 0); /* sub list */
    g_byte_array_append(stream, (const guint8 *)"xy", 2);
    assert_true(carrel_spice_filter_feed(filter, stream->data, stream->len, out, NULL));
    assert_int_equal(out->len, before);
    assert_int_equal(carrel_spice_filter_get_dropped(filter), 1);
}

static void
test_filter_refusals(void **state)
{
    g_autoptr(GByteArray) sasl = link_message(CARREL_SPICE_CHANNEL_MAIN, SPICE_HTML5_CAPS);
    g_autoptr(GByteArray) http = g_byte_array_new();
    g_autoptr(GByteArray) out = g_byte_array_new();
    g_autoptr(CarrelSpiceFilter) f1 = carrel_spice_filter_new(NULL, NULL);
    g_autoptr(CarrelSpiceFilter) f2 = carrel_spice_filter_new(NULL, NULL);
    g_autoptr(GError) error = NULL;

    put_u32(sasl, 2); /* SASL */
    assert_false(carrel_spice_filter_feed(f1, sasl->data, sasl->len, out, &error));
    assert_true(g_error_matches(error, CARREL_ERROR, CARREL_ERROR_FORBIDDEN));
    g_clear_error(&error);
    /* A failed filter stays failed. */
    assert_false(carrel_spice_filter_feed(f1, (const guint8 *)"x", 1, out, &error));
    g_clear_error(&error);
    g_byte_array_append(http, (const guint8 *)"GET / HTTP/1.1\r\n", 16);
    assert_false(carrel_spice_filter_feed(f2, http->data, http->len, out, &error));
    assert_true(g_error_matches(error, CARREL_ERROR, CARREL_ERROR_INVALID_ARG));
    assert_null(carrel_spice_filter_get_link(f2));
}

static void
test_filter_display_init(void **state)
{
    g_autoptr(GByteArray) link = link_message(CARREL_SPICE_CHANNEL_DISPLAY, SPICE_HTML5_CAPS);
    g_autoptr(GByteArray) ticket = g_byte_array_new();
    g_autoptr(GByteArray) out = g_byte_array_new();
    g_autoptr(GByteArray) expected = g_byte_array_new();
    g_autoptr(CarrelSpiceFilter) display = carrel_spice_filter_new(NULL, NULL);
    g_autoptr(CarrelSpiceFilter) inputs = carrel_spice_filter_new(NULL, NULL);
    g_autoptr(GByteArray) inputs_link = link_message(CARREL_SPICE_CHANNEL_INPUTS, SPICE_HTML5_CAPS);
    static const guint8 init_body[14] = {1, 0, 0, 0xa0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0};

    /* Not before the ticket is through: the server would read it as the ticket. */
    assert_true(carrel_spice_filter_feed(display, link->data, link->len, out, NULL));
    assert_false(carrel_spice_filter_append_display_init(display, out));
    put_ticket(ticket);
    assert_true(carrel_spice_filter_feed(display, ticket->data, ticket->len - 1, out, NULL));
    assert_false(carrel_spice_filter_append_display_init(display, out));
    assert_true(carrel_spice_filter_feed(display, ticket->data + ticket->len - 1, 1, out, NULL));
    g_byte_array_set_size(out, 0);
    /* Right after it: DISPLAY_INIT as spice-html5 sends it, once. */
    assert_true(carrel_spice_filter_append_display_init(display, out));
    put_u16(expected, 101);
    put_u32(expected, 14);
    g_byte_array_append(expected, init_body, sizeof(init_body));
    assert_int_equal(out->len, expected->len);
    assert_memory_equal(out->data, expected->data, expected->len);
    assert_false(carrel_spice_filter_append_display_init(display, out));
    /* Never on other channels. */
    assert_true(carrel_spice_filter_feed(inputs, inputs_link->data, inputs_link->len, out, NULL));
    assert_true(carrel_spice_filter_feed(inputs, ticket->data, ticket->len, out, NULL));
    assert_false(carrel_spice_filter_append_display_init(inputs, out));
}

/* The ticket store's clock, moved by the tests. */
static gint64 fake_now = 1000000;

static gint64
fake_clock(void)
{
    return fake_now;
}

static void
assert_code(GError **error, int code)
{
    if (!*error)
        fail_msg("expected error %d, got success", code);
    if (!g_error_matches(*error, CARREL_ERROR, code))
        fail_msg("expected code %d, got %d: %s", code, (*error)->code, (*error)->message);
    g_clear_error(error);
}

static void
test_tickets_expiry(void **state)
{
    g_autoptr(CarrelConsoleTickets) t = carrel_console_tickets_new(fake_clock);
    g_autoptr(GError) error = NULL;
    g_autofree char *a = carrel_console_tickets_issue(t, "s-1", 5900, "pw", "alice", &error);
    g_autofree char *b = carrel_console_tickets_issue(t, "s-1", 5900, "pw", "alice", &error);
    g_autofree char *sid = NULL;
    guint port = 0;

    assert_non_null(a);
    assert_int_equal(strlen(a), 64); /* 256 bits */
    assert_string_not_equal(a, b);
    assert_true(carrel_console_tickets_check(t, a, "alice", &sid, &port, &error));
    assert_string_equal(sid, "s-1");
    assert_int_equal(port, 5900);
    assert_false(carrel_console_tickets_check(t, a, "bob", NULL, NULL, &error));
    assert_code(&error, CARREL_ERROR_FORBIDDEN);
    assert_false(carrel_console_tickets_check(t, "nope", "alice", NULL, NULL, &error));
    assert_code(&error, CARREL_ERROR_NOT_FOUND);
    assert_false(carrel_console_tickets_check(t, NULL, "alice", NULL, NULL, &error));
    assert_code(&error, CARREL_ERROR_NOT_FOUND);
    /* 10 s later an unused ticket is gone (410, also to a second link), later forgotten (404). */
    fake_now += CARREL_CONSOLE_TICKET_TTL_US - 1;
    assert_true(carrel_console_tickets_check(t, a, "alice", NULL, NULL, NULL));
    fake_now += 1;
    assert_false(carrel_console_tickets_check(t, a, "alice", NULL, NULL, &error));
    assert_code(&error, CARREL_ERROR_GONE);
    assert_false(carrel_console_tickets_link(t, b, "alice", CARREL_SPICE_CHANNEL_MAIN, &error));
    assert_code(&error, CARREL_ERROR_GONE);
    fake_now += CARREL_CONSOLE_TICKET_GONE_US;
    assert_false(carrel_console_tickets_check(t, a, "alice", NULL, NULL, &error));
    assert_code(&error, CARREL_ERROR_NOT_FOUND);
}

static void
test_tickets_main_once(void **state)
{
    g_autoptr(CarrelConsoleTickets) t = carrel_console_tickets_new(fake_clock);
    g_autoptr(GError) error = NULL;
    g_autofree char *a = carrel_console_tickets_issue(t, "s-2", 5901, "pw", "alice", NULL);

    /* Sub-channels need the main connection first. */
    assert_false(carrel_console_tickets_link(t, a, "alice", CARREL_SPICE_CHANNEL_DISPLAY, &error));
    assert_code(&error, CARREL_ERROR_WRONG_STATE);
    assert_true(carrel_console_tickets_link(t, a, "alice", CARREL_SPICE_CHANNEL_MAIN, NULL));
    /* A second main link with the same ticket: refused. */
    assert_false(carrel_console_tickets_link(t, a, "alice", CARREL_SPICE_CHANNEL_MAIN, &error));
    assert_code(&error, CARREL_ERROR_WRONG_STATE);
    /* Other channels while main is open, long after the ticket's 10 s, same principal only. */
    fake_now += 60 * G_USEC_PER_SEC;
    assert_true(carrel_console_tickets_check(t, a, "alice", NULL, NULL, NULL));
    assert_true(carrel_console_tickets_link(t, a, "alice", CARREL_SPICE_CHANNEL_DISPLAY, NULL));
    assert_true(carrel_console_tickets_link(t, a, "alice", CARREL_SPICE_CHANNEL_INPUTS, NULL));
    assert_false(carrel_console_tickets_link(t, a, "bob", CARREL_SPICE_CHANNEL_INPUTS, &error));
    assert_code(&error, CARREL_ERROR_FORBIDDEN);
    /* Main closed: the ticket opens nothing more, and is gone. */
    carrel_console_tickets_main_closed(t, a);
    assert_false(carrel_console_tickets_link(t, a, "alice", CARREL_SPICE_CHANNEL_CURSOR, &error));
    assert_code(&error, CARREL_ERROR_GONE);
    assert_false(carrel_console_tickets_check(t, a, "alice", NULL, NULL, &error));
    assert_code(&error, CARREL_ERROR_GONE);
}

static void
test_tickets_limit(void **state)
{
    g_autoptr(CarrelConsoleTickets) t = carrel_console_tickets_new(fake_clock);
    g_autoptr(GError) error = NULL;

    for (guint i = 0; i < CARREL_CONSOLE_TICKETS_MAX; i++) {
        g_autofree char *ticket = carrel_console_tickets_issue(t, "s-3", 5902, "pw", "a", NULL);
        assert_non_null(ticket);
    }
    assert_null(carrel_console_tickets_issue(t, "s-3", 5902, "pw", "a", &error));
    assert_code(&error, CARREL_ERROR_LIMIT);
    /* Expired ones are forgotten in time and make room again. */
    fake_now += CARREL_CONSOLE_TICKET_TTL_US + CARREL_CONSOLE_TICKET_GONE_US;
    {
        g_autofree char *ticket = carrel_console_tickets_issue(t, "s-3", 5902, "pw", "a", NULL);
        assert_non_null(ticket);
    }
}

#define SEC G_TIME_SPAN_SECOND

/* The token bucket: burst at once, then rate per second; Retry-After counts whole seconds. */
static void
test_bucket(void **state)
{
    CarrelApiBucket b = {0};
    gint64 t = 1000 * SEC;
    guint retry = 0;

    for (int i = 0; i < 5; i++)
        assert_true(carrel_api_bucket_take(&b, 2, 5, t, &retry));
    assert_int_equal(retry, 0);
    assert_false(carrel_api_bucket_take(&b, 2, 5, t, &retry));
    assert_int_equal(retry, 1);
    /* Half a second gives one request back at 2 per second, and only one. */
    t += SEC / 2;
    assert_true(carrel_api_bucket_take(&b, 2, 5, t, &retry));
    assert_false(carrel_api_bucket_take(&b, 2, 5, t, &retry));
    /* A long pause refills to burst, never beyond. */
    t += 3600 * SEC;
    for (int i = 0; i < 5; i++)
        assert_true(carrel_api_bucket_take(&b, 2, 5, t, &retry));
    assert_false(carrel_api_bucket_take(&b, 2, 5, t, &retry));
    /* A slow rate says how long to wait: one request in 10 s. */
    {
        CarrelApiBucket slow = {0};
        assert_true(carrel_api_bucket_take(&slow, 1, 1, t, &retry));
        assert_false(carrel_api_bucket_take(&slow, 1, 1, t, &retry));
        assert_int_equal(retry, 1);
    }
    /* Time going backwards (it is monotonic, but a caller may pass any) gives nothing back. */
    assert_false(carrel_api_bucket_take(&b, 2, 5, t - 10 * SEC, &retry));
    assert_true(retry >= 1);
}

/* Buckets are per key: one token's flood leaves another's alone. */
static void
test_rates_per_token(void **state)
{
    CarrelApiRates *rates = carrel_api_rates_new();
    gint64 t = 5 * SEC;
    guint retry = 0;

    for (int i = 0; i < 3; i++)
        assert_true(carrel_api_rates_take(rates, "t-a", 1, 3, t, &retry));
    assert_false(carrel_api_rates_take(rates, "t-a", 1, 3, t, &retry));
    assert_int_equal(retry, 1);
    assert_true(carrel_api_rates_take(rates, "t-b", 1, 3, t, &retry));
    t += SEC;
    assert_true(carrel_api_rates_take(rates, "t-a", 1, 3, t, &retry));
    carrel_api_rates_free(rates);
}

/* Kept texts: served for their key and generation only; a newer generation drops them all,
 * and a text made from an older one is never kept. */
static void
test_cache(void **state)
{
    CarrelApiCache *cache = carrel_api_cache_new();
    g_autoptr(GBytes) mine = g_bytes_new_static("mine", 4);
    g_autoptr(GBytes) all = g_bytes_new_static("all", 3);
    g_autoptr(GBytes) got = NULL;

    assert_null(carrel_api_cache_get(cache, "own:t-1 live", 5));
    carrel_api_cache_put(cache, "own:t-1 live", 5, mine);
    carrel_api_cache_put(cache, "* live", 5, all);
    got = carrel_api_cache_get(cache, "own:t-1 live", 5);
    assert_ptr_equal(got, mine);
    g_clear_pointer(&got, g_bytes_unref);
    assert_null(carrel_api_cache_get(cache, "own:t-2 live", 5));
    assert_null(carrel_api_cache_get(cache, "own:t-1 all", 5));
    /* A request that read generation 4 before a write: nothing for it. */
    assert_null(carrel_api_cache_get(cache, "* live", 4));
    /* The store moved on: everything kept goes, and an older text is not taken back. */
    assert_null(carrel_api_cache_get(cache, "* live", 6));
    carrel_api_cache_put(cache, "* live", 5, all);
    assert_null(carrel_api_cache_get(cache, "* live", 6));
    carrel_api_cache_put(cache, "* live", 6, all);
    got = carrel_api_cache_get(cache, "* live", 6);
    assert_ptr_equal(got, all);
    g_clear_pointer(&got, g_bytes_unref);
    /* Bounded: past its size it starts again, never grows. */
    for (guint i = 0; i < 1000; i++) {
        g_autofree char *key = g_strdup_printf("own:t-%u live", i);
        carrel_api_cache_put(cache, key, 6, mine);
    }
    got = carrel_api_cache_get(cache, "own:t-999 live", 6);
    assert_ptr_equal(got, mine);
    carrel_api_cache_free(cache);
}

/* The route table's matching: '*' takes one segment (decoded), the segment count must agree,
 * and a known path with another method is 405, an unknown one 404. */
static void
test_route_match(void **state)
{
    const struct {
        const char *method, *path, *pattern, *param;
        guint status;
    } want[] = {
        {"GET", "/v1/sessions", "/v1/sessions", NULL, 0},
        {"GET", "/v1/sessions/s-1", "/v1/sessions/*", "s-1", 0},
        {"POST", "/v1/sessions/my%20box/start", "/v1/sessions/*/start", "my box", 0},
        {"GET", "/v1/sessions/s-1/snapshots", "/v1/sessions/*/snapshots", "s-1", 0},
        {"GET", "/v1/sessions/", "/v1/sessions/*", "", 0},
        {"GET", "/v1/session", NULL, NULL, SOUP_STATUS_NOT_FOUND},
        {"GET", "/v1/sessionsx", NULL, NULL, SOUP_STATUS_NOT_FOUND},
        {"GET", "/v1", NULL, NULL, SOUP_STATUS_NOT_FOUND},
        {"GET", "/v1/sessions/s-1/start/now", NULL, NULL, SOUP_STATUS_NOT_FOUND},
        {"PATCH", "/v1/sessions", NULL, NULL, SOUP_STATUS_METHOD_NOT_ALLOWED},
        {"GET", "/v1/sessions/a%2Fb", NULL, NULL, SOUP_STATUS_BAD_REQUEST},
    };

    for (gsize i = 0; i < G_N_ELEMENTS(want); i++) {
        g_autoptr(GPtrArray) params = NULL;
        g_autoptr(GError) error = NULL;
        guint status = 0;
        const CarrelApiRoute *r =
            carrel_api_route_match(want[i].method, want[i].path, &params, &status, &error);

        if (!want[i].pattern) {
            if (r)
                fail_msg("%s %s matched %s", want[i].method, want[i].path, r->pattern);
            assert_int_equal(status, want[i].status);
            assert_non_null(error);
            continue;
        }
        if (!r)
            fail_msg("%s %s: %s", want[i].method, want[i].path, error->message);
        assert_string_equal(r->pattern, want[i].pattern);
        assert_int_equal(params->len, want[i].param ? 1 : 0);
        if (want[i].param)
            assert_string_equal(g_ptr_array_index(params, 0), want[i].param);
    }
}

/* Every route runs in a class: health inline, reads quick, VM operations long, exec exec. */
static void
test_route_classes(void **state)
{
    static const struct {
        const char *method;
        const char *path;
        CarrelApiClass klass;
    } want[] = {
        {"GET", "/v1/healthz", CARREL_API_CLASS_INLINE},
        {"GET", "/v1/sessions", CARREL_API_CLASS_QUICK},
        {"GET", "/v1/sessions/s-1", CARREL_API_CLASS_QUICK},
        {"POST", "/v1/sessions", CARREL_API_CLASS_LONG},
        {"POST", "/v1/sessions/s-1/fork", CARREL_API_CLASS_LONG},
        {"POST", "/v1/sessions/s-1/snapshots", CARREL_API_CLASS_LONG},
        {"POST", "/v1/sessions/s-1/revert", CARREL_API_CLASS_LONG},
        {"DELETE", "/v1/sessions/s-1", CARREL_API_CLASS_LONG},
        {"POST", "/v1/templates/t/warm", CARREL_API_CLASS_LONG},
        {"POST", "/v1/sessions/s-1/artifacts", CARREL_API_CLASS_LONG},
        {"POST", "/v1/sessions/s-1/exec", CARREL_API_CLASS_EXEC},
        {"POST", "/v1/sessions/s-1/computer", CARREL_API_CLASS_EXEC},
        {"POST", "/v1/test/hold", CARREL_API_CLASS_LONG},
        {"POST", "/v1/test/gate", CARREL_API_CLASS_INLINE},
    };
    CarrelApiRequest req = {0};

    for (const CarrelApiRoute *r = carrel_api_routes; r->method; r++) {
        CarrelApiClass klass = carrel_api_request_class(r, &req);
        assert_true(klass > CARREL_API_CLASS_BY_OP && klass < CARREL_API_CLASS_LAST);
        /* Inline routes run on the main loop: only those that never block. */
        if (klass == CARREL_API_CLASS_INLINE)
            assert_true(g_str_equal(r->pattern, "/v1/healthz") ||
                        g_str_equal(r->pattern, "/v1/test/gate"));
    }
    for (gsize i = 0; i < G_N_ELEMENTS(want); i++) {
        g_autoptr(GPtrArray) params = NULL;
        g_autoptr(GError) error = NULL;
        guint status = 0;
        const CarrelApiRoute *r =
            carrel_api_route_match(want[i].method, want[i].path, &params, &status, &error);

        assert_non_null(r);
        if (carrel_api_request_class(r, &req) != want[i].klass)
            fail_msg("%s %s runs as %s", want[i].method, want[i].path,
                     carrel_api_class_to_string(carrel_api_request_class(r, &req)));
    }
    for (int op = 0; op <= CARREL_OP_LAST; op++) {
        CarrelApiClass klass = carrel_api_class_of_op((CarrelOp)op);
        assert_true(klass >= CARREL_API_CLASS_QUICK && klass < CARREL_API_CLASS_LAST);
    }
}

/* POST /mcp runs in the class of the tool it calls; what cannot be read is quick. */
static void
test_mcp_class(void **state)
{
    static const struct {
        const char *body;
        CarrelApiClass klass;
    } want[] = {
        {"{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"tools/call\",\"params\":"
         "{\"name\":\"command_run\",\"arguments\":{}}}",
         CARREL_API_CLASS_EXEC},
        {"{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"tools/call\",\"params\":"
         "{\"name\":\"sandbox_create\",\"arguments\":{}}}",
         CARREL_API_CLASS_LONG},
        {"{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"tools/call\",\"params\":"
         "{\"name\":\"sandbox_list\",\"arguments\":{}}}",
         CARREL_API_CLASS_QUICK},
        {"{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"tools/list\"}", CARREL_API_CLASS_QUICK},
        {"not json", CARREL_API_CLASS_QUICK},
    };
    g_autoptr(GPtrArray) params = NULL;
    g_autoptr(GError) error = NULL;
    guint status = 0;
    const CarrelApiRoute *mcp = carrel_api_route_match("POST", "/mcp", &params, &status, &error);

    assert_non_null(mcp);
    for (gsize i = 0; i < G_N_ELEMENTS(want); i++) {
        CarrelApiRequest req = {0};

        req.raw_body = g_bytes_new_static(want[i].body, strlen(want[i].body));
        assert_int_equal(carrel_api_request_class(mcp, &req), want[i].klass);
        g_bytes_unref(req.raw_body);
    }
    /* Too big to read on the main loop: exec, the class that may wait longest. */
    {
        CarrelApiRequest req = {0};
        g_autofree char *big = g_strnfill(1024 * 1024, ' ');

        req.raw_body = g_bytes_new_take(g_steal_pointer(&big), 1024 * 1024);
        assert_int_equal(carrel_api_request_class(mcp, &req), CARREL_API_CLASS_EXEC);
        g_bytes_unref(req.raw_body);
    }
}

/* Range headers the recording's segments answer: one part, clamped; anything else is ignored. */
static void
test_parse_range(void **state)
{
    struct {
        const char *header;
        guint64 first, last;
    } good[] = {{"bytes=0-99", 0, 99},   {"bytes=100-", 100, 999},
                {"bytes=-10", 990, 999}, {"bytes=900-5000", 900, 999},
                {"bytes=-5000", 0, 999}, {"bytes=999-999", 999, 999}};
    const char *bad[] = {NULL,          "bytes=",        "bytes=-",     "bytes=5-1",
                         "bytes=1000-", "bytes=0-1,5-9", "items=0-1",   "bytes=a-b",
                         "bytes=-0",    "bytes=+1-2",    "bytes=1-2-3", "bytes= 1-2"};

    for (guint i = 0; i < G_N_ELEMENTS(good); i++) {
        guint64 first = 0, last = 0;
        assert_true(carrel_api_parse_range(good[i].header, 1000, &first, &last));
        assert_int_equal(first, good[i].first);
        assert_int_equal(last, good[i].last);
    }
    for (guint i = 0; i < G_N_ELEMENTS(bad); i++) {
        guint64 first = 0, last = 0;
        if (carrel_api_parse_range(bad[i], 1000, &first, &last))
            fail_msg("'%s' was taken as %" G_GUINT64_FORMAT "-%" G_GUINT64_FORMAT, bad[i], first,
                     last);
    }
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_error_status),
        cmocka_unit_test(test_bucket),
        cmocka_unit_test(test_rates_per_token),
        cmocka_unit_test(test_route_match),
        cmocka_unit_test(test_cache),
        cmocka_unit_test(test_route_classes),
        cmocka_unit_test(test_mcp_class),
        cmocka_unit_test(test_reply),
        cmocka_unit_test(test_parse_link),
        cmocka_unit_test(test_parse_link_hostile),
        cmocka_unit_test(test_messages_acting_on_guest),
        cmocka_unit_test(test_filter_view_only),
        cmocka_unit_test(test_filter_other_channels),
        cmocka_unit_test(test_filter_full_header_and_no_selection),
        cmocka_unit_test(test_filter_refusals),
        cmocka_unit_test(test_filter_display_init),
        cmocka_unit_test(test_tickets_expiry),
        cmocka_unit_test(test_tickets_main_once),
        cmocka_unit_test(test_tickets_limit),
        cmocka_unit_test(test_parse_range),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
