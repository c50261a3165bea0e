/*
 * A person's input on the console, read by the proxy: the inputs channel's messages parsed in
 * every chunking with either header, hostile sizes refused without losing the stream, the
 * filter's tap seeing exactly the messages that pass, and the recorder turning input into
 * click, keys and type events (a table of cases).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <string.h>

#include "api/api-console-priv.h"

static void
put_u16(GByteArray *b, guint16 v)
{
    guint8 le[2] = {v & 0xff, v >> 8};

    g_byte_array_append(b, le, 2);
}

static void
put_u32(GByteArray *b, guint32 v)
{
    guint8 le[4] = {v & 0xff, (v >> 8) & 0xff, (v >> 16) & 0xff, (v >> 24) & 0xff};

    g_byte_array_append(b, le, 4);
}

/* A message header: mini (type, size) or full (serial, type, size, sub_list). */
static void
put_header(GByteArray *b, gboolean mini, guint16 type, guint32 size)
{
    if (!mini) {
        put_u32(b, 7);
        put_u32(b, 0);
    }
    put_u16(b, type);
    put_u32(b, size);
    if (!mini)
        put_u32(b, 0);
}

static void
put_key(GByteArray *b, gboolean mini, gboolean down, guint32 code)
{
    put_header(b, mini, down ? CARREL_SPICE_MSGC_INPUTS_KEY_DOWN : CARREL_SPICE_MSGC_INPUTS_KEY_UP,
               4);
    put_u32(b, code);
}

static void
put_position(GByteArray *b, gboolean mini, guint32 x, guint32 y)
{
    put_header(b, mini, CARREL_SPICE_MSGC_INPUTS_MOUSE_POSITION, 11);
    put_u32(b, x);
    put_u32(b, y);
    put_u16(b, 0);
    g_byte_array_append(b, (const guint8 *)"", 1);
}

static void
put_press(GByteArray *b, gboolean mini, gboolean press, guint8 button)
{
    put_header(
        b, mini,
        press ? CARREL_SPICE_MSGC_INPUTS_MOUSE_PRESS : CARREL_SPICE_MSGC_INPUTS_MOUSE_RELEASE, 3);
    g_byte_array_append(b, &button, 1);
    put_u16(b, press ? 1 : 0);
}

/* Six messages of every kind read, and one of another type (an ack) skipped. */
static GByteArray *
sample_stream(gboolean mini)
{
    GByteArray *b = g_byte_array_new();

    put_position(b, mini, 640, 400);
    put_press(b, mini, TRUE, 1);
    put_press(b, mini, FALSE, 1);
    put_header(b, mini, 1 /* ACK_SYNC */, 4);
    put_u32(b, 9);
    put_key(b, mini, TRUE, 0x1e);
    put_key(b, mini, FALSE, 0x9e);
    put_header(b, mini, CARREL_SPICE_MSGC_INPUTS_KEY_MODIFIERS, 2);
    put_u16(b, 4);
    put_header(b, mini, CARREL_SPICE_MSGC_INPUTS_MOUSE_MOTION, 10);
    put_u32(b, (guint32)-3);
    put_u32(b, 5);
    put_u16(b, 0);
    return b;
}

static void
check_sample(GArray *in)
{
    const CarrelSpiceInput *v = &g_array_index(in, CarrelSpiceInput, 0);

    assert_int_equal(in->len, 7);
    assert_int_equal(v[0].type, CARREL_SPICE_INPUT_MOUSE_POSITION);
    assert_int_equal(v[0].x, 640);
    assert_int_equal(v[0].y, 400);
    assert_int_equal(v[1].type, CARREL_SPICE_INPUT_MOUSE_PRESS);
    assert_int_equal(v[1].button, 1);
    assert_int_equal(v[1].buttons, 1);
    assert_int_equal(v[2].type, CARREL_SPICE_INPUT_MOUSE_RELEASE);
    assert_int_equal(v[3].type, CARREL_SPICE_INPUT_KEY_DOWN);
    assert_int_equal(v[3].code, 0x1e);
    assert_int_equal(v[4].type, CARREL_SPICE_INPUT_KEY_UP);
    assert_int_equal(v[4].code, 0x9e);
    assert_int_equal(v[5].type, CARREL_SPICE_INPUT_KEY_MODIFIERS);
    assert_int_equal(v[5].modifiers, 4);
    assert_int_equal(v[6].type, CARREL_SPICE_INPUT_MOUSE_MOTION);
    assert_int_equal(v[6].x, -3);
    assert_int_equal(v[6].y, 5);
}

/* Every split into two pieces, and every piece size from 1 up, with both headers. */
static void
test_parser_every_chunking(void **state)
{
    for (int mini = 0; mini < 2; mini++) {
        g_autoptr(GByteArray) s = sample_stream(mini);

        for (gsize cut = 0; cut <= s->len; cut++) {
            g_autoptr(CarrelSpiceInputParser) p = carrel_spice_input_parser_new(mini);
            g_autoptr(GArray) in = g_array_new(FALSE, FALSE, sizeof(CarrelSpiceInput));

            carrel_spice_input_parser_feed(p, s->data, cut, in);
            carrel_spice_input_parser_feed(p, s->data + cut, s->len - cut, in);
            check_sample(in);
            assert_int_equal(carrel_spice_input_parser_get_refused(p), 0);
        }
        for (gsize step = 1; step <= s->len; step++) {
            g_autoptr(CarrelSpiceInputParser) p = carrel_spice_input_parser_new(mini);
            g_autoptr(GArray) in = g_array_new(FALSE, FALSE, sizeof(CarrelSpiceInput));

            for (gsize at = 0; at < s->len; at += step)
                carrel_spice_input_parser_feed(p, s->data + at, MIN(step, s->len - at), in);
            check_sample(in);
        }
    }
}

/* Sizes no client sends are skipped whole, counted, and the next message is read. */
static void
test_parser_hostile_sizes(void **state)
{
    g_autoptr(CarrelSpiceInputParser) p = carrel_spice_input_parser_new(TRUE);
    g_autoptr(GArray) in = g_array_new(FALSE, FALSE, sizeof(CarrelSpiceInput));
    g_autoptr(GByteArray) b = g_byte_array_new();
    guint8 junk[64] = {0};

    /* Too long for a key, too short for a position: both skipped. */
    put_header(b, TRUE, CARREL_SPICE_MSGC_INPUTS_KEY_DOWN, 64);
    g_byte_array_append(b, junk, 64);
    put_header(b, TRUE, CARREL_SPICE_MSGC_INPUTS_MOUSE_POSITION, 2);
    g_byte_array_append(b, junk, 2);
    put_key(b, TRUE, TRUE, 0x10);
    carrel_spice_input_parser_feed(p, b->data, b->len, in);
    assert_int_equal(in->len, 1);
    assert_int_equal(g_array_index(in, CarrelSpiceInput, 0).code, 0x10);
    assert_int_equal(carrel_spice_input_parser_get_refused(p), 2);

    /* A body of 4 GiB: everything after is its body (as the server reads it), nothing read. */
    g_byte_array_set_size(b, 0);
    put_header(b, TRUE, CARREL_SPICE_MSGC_INPUTS_KEY_DOWN, G_MAXUINT32);
    for (int i = 0; i < 1000; i++)
        put_key(b, TRUE, TRUE, 0x10);
    carrel_spice_input_parser_feed(p, b->data, b->len, in);
    assert_int_equal(in->len, 1);
    assert_int_equal(carrel_spice_input_parser_get_refused(p), 3);
}

static guint tapped_calls;

static void
tap(gpointer user_data, const guint8 *data, gsize len)
{
    g_byte_array_append(user_data, data, (guint)len);
    tapped_calls++;
}

static gboolean
allow(gpointer user_data)
{
    return TRUE;
}

/* An inputs channel's link message with the mini-header capability. */
static void
put_link(GByteArray *b)
{
    g_byte_array_append(b, (const guint8 *)"REDQ", 4);
    put_u32(b, 2);
    put_u32(b, 2);
    put_u32(b, 18 + 4);
    put_u32(b, 1);
    g_byte_array_append(b, (const guint8[]){CARREL_SPICE_CHANNEL_INPUTS, 0}, 2);
    put_u32(b, 1);
    put_u32(b, 0);
    put_u32(b, 18);
    put_u32(b, 1 << CARREL_SPICE_CAP_MINI_HEADER);
}

/* The filter forwards every byte and taps the messages after the ticket, never the ticket. */
static void
test_filter_tap(void **state)
{
    g_autoptr(GByteArray) s = g_byte_array_new();
    g_autoptr(GByteArray) msgs = sample_stream(TRUE);
    guint8 ticket[CARREL_SPICE_TICKET_SIZE];
    gsize head;

    memset(ticket, 0xab, sizeof(ticket));
    put_link(s);
    g_byte_array_append(s, ticket, sizeof(ticket));
    head = s->len;
    g_byte_array_append(s, msgs->data, msgs->len);
    for (gsize step = 1; step <= s->len; step += 7) {
        g_autoptr(GByteArray) tapped = g_byte_array_new();
        g_autoptr(GByteArray) out = g_byte_array_new();
        g_autoptr(CarrelSpiceFilter) f = carrel_spice_filter_new(allow, tapped);

        carrel_spice_filter_set_tap(f, tap);
        for (gsize at = 0; at < s->len; at += step)
            assert_true(
                carrel_spice_filter_feed(f, s->data + at, MIN(step, s->len - at), out, NULL));
        assert_int_equal(out->len, s->len);
        assert_memory_equal(out->data, s->data, s->len);
        assert_int_equal(tapped->len, s->len - head);
        assert_memory_equal(tapped->data, msgs->data, msgs->len);
    }
    assert_true(tapped_calls > 0);
}

/* ---- the recorder ---- */

typedef struct {
    const char *what;
    const char *inputs; /* "P x y" position, "M" motion, "C b" press, "R b" release, "D code",
                           "U code" (hex), "L mods", "T ms" (time passes) */
    const char *events; /* action:params JSON, one per line */
} RecorderCase;

static const RecorderCase cases[] = {
    {"a click where the pointer is", "P 120 45; C 1; R 1",
     "click:{\"x\":120,\"y\":45,\"button\":\"left\"}\n"},
    {"right click after relative motion has no position", "P 5 5; M; C 3",
     "click:{\"x\":null,\"y\":null,\"button\":\"right\"}\n"},
    {"the wheel is not a click", "P 1 1; C 4; C 5", ""},
    {"typed text with shift, flushed after a second",
     "D 2a; D 23; U a3; U aa; D 12; D 26; D 26; D 18; T 1000", "type:{\"text\":\"Hello\"}\n"},
    {"typing waits less than a second", "D 1e; T 900", ""},
    {"ctrl+c is a combination and flushes typing first", "D 1e; D 1d; D 2e; U ae; U 9d",
     "type:{\"text\":\"a\"}\nkeys:{\"combo\":\"ctrl+c\"}\n"},
    {"ctrl+shift+t", "D 1d; D 2a; D 14", "keys:{\"combo\":\"ctrl+shift+t\"}\n"},
    {"enter and tab are keys", "D 1e; D 1c; D 0f",
     "type:{\"text\":\"a\"}\nkeys:{\"combo\":\"enter\"}\nkeys:{\"combo\":\"tab\"}\n"},
    {"extended arrows, delete, right ctrl", "D 48e0; D 53e0; D 1de0; D 2e",
     "keys:{\"combo\":\"up\"}\nkeys:{\"combo\":\"delete\"}\nkeys:{\"combo\":\"ctrl+c\"}\n"},
    {"right ctrl released is no longer held", "D 1de0; U 9de0; D 2e; T 1000",
     "type:{\"text\":\"c\"}\n"},
    {"escape and F5, shift+tab", "D 01; D 3f; D 2a; D 0f",
     "keys:{\"combo\":\"escape\"}\nkeys:{\"combo\":\"f5\"}\nkeys:{\"combo\":\"shift+tab\"}\n"},
    {"caps lock from the key and from the lock state",
     "D 3a; D 1e; D 2a; D 1e; U aa; L 0; D 1e; T 1000", "type:{\"text\":\"Aaa\"}\n"},
    {"backspace edits typed text, alone it is a key", "D 1e; D 30; D 0e; T 1000; D 0e",
     "type:{\"text\":\"a\"}\nkeys:{\"combo\":\"backspace\"}\n"},
    {"a click flushes typing and carries held modifiers", "D 39; D 1e; P 3 4; D 1d; C 1",
     "type:{\"text\":\" "
     "a\"}\nclick:{\"x\":3,\"y\":4,\"button\":\"left\",\"modifiers\":[\"ctrl\"]}\n"},
    {"punctuation and digits through the US layout",
     "D 2a; D 02; D 0b; U aa; D 0c; D 35; D 4e; T 1000", "type:{\"text\":\"!)-/+\"}\n"},
    {"super+l and alt+f4", "D 5be0; D 26; U dbe0; D 38; D 3e",
     "keys:{\"combo\":\"super+l\"}\nkeys:{\"combo\":\"alt+f4\"}\n"},
};

static void
feed_case(CarrelSpiceRecorder *rec, const char *inputs, GPtrArray *events)
{
    g_auto(GStrv) steps = g_strsplit(inputs, ";", -1);
    gint64 now = 1000000;

    for (guint i = 0; steps[i]; i++) {
        g_auto(GStrv) w = g_strsplit(g_strstrip(steps[i]), " ", -1);
        CarrelSpiceInput in = {0};

        now += 10000;
        switch (w[0][0]) {
        case 'P':
            in.type = CARREL_SPICE_INPUT_MOUSE_POSITION;
            in.x = g_ascii_strtoll(w[1], NULL, 10);
            in.y = g_ascii_strtoll(w[2], NULL, 10);
            break;
        case 'M':
            in.type = CARREL_SPICE_INPUT_MOUSE_MOTION;
            break;
        case 'C':
        case 'R':
            in.type =
                w[0][0] == 'C' ? CARREL_SPICE_INPUT_MOUSE_PRESS : CARREL_SPICE_INPUT_MOUSE_RELEASE;
            in.button = (guint8)g_ascii_strtoull(w[1], NULL, 10);
            break;
        case 'D':
        case 'U':
            in.type = w[0][0] == 'D' ? CARREL_SPICE_INPUT_KEY_DOWN : CARREL_SPICE_INPUT_KEY_UP;
            in.code = (guint32)g_ascii_strtoull(w[1], NULL, 16);
            break;
        case 'L':
            in.type = CARREL_SPICE_INPUT_KEY_MODIFIERS;
            in.modifiers = (guint16)g_ascii_strtoull(w[1], NULL, 10);
            break;
        case 'T':
            now += g_ascii_strtoll(w[1], NULL, 10) * 1000;
            carrel_spice_recorder_tick(rec, now, events);
            continue;
        default:
            fail_msg("bad step '%s'", steps[i]);
        }
        carrel_spice_recorder_feed(rec, &in, now, events);
    }
}

static char *
events_text(GPtrArray *events)
{
    GString *text = g_string_new(NULL);

    for (guint i = 0; i < events->len; i++) {
        const CarrelPersonEvent *ev = g_ptr_array_index(events, i);
        g_autoptr(JsonGenerator) gen = json_generator_new();
        g_autofree char *params = NULL;

        json_generator_set_root(gen, ev->params);
        params = json_generator_to_data(gen, NULL);
        g_string_append_printf(text, "%s:%s\n", ev->action, params);
    }
    return g_string_free(text, FALSE);
}

static void
test_recorder_table(void **state)
{
    for (guint i = 0; i < G_N_ELEMENTS(cases); i++) {
        g_autoptr(CarrelSpiceRecorder) rec = carrel_spice_recorder_new();
        g_autoptr(GPtrArray) events =
            g_ptr_array_new_with_free_func((GDestroyNotify)carrel_person_event_free);
        g_autofree char *got = NULL;

        feed_case(rec, cases[i].inputs, events);
        got = events_text(events);
        if (!g_str_equal(got, cases[i].events))
            fail_msg("%s:\nwant:\n%sgot:\n%s", cases[i].what, cases[i].events, got);
    }
}

/* Typed text waiting at the end is flushed; its event starts at its first key. */
static void
test_recorder_flush(void **state)
{
    g_autoptr(CarrelSpiceRecorder) rec = carrel_spice_recorder_new();
    g_autoptr(GPtrArray) events =
        g_ptr_array_new_with_free_func((GDestroyNotify)carrel_person_event_free);
    CarrelSpiceInput key = {.type = CARREL_SPICE_INPUT_KEY_DOWN, .code = 0x1e};
    const CarrelPersonEvent *ev;

    carrel_spice_recorder_feed(rec, &key, 500, events);
    carrel_spice_recorder_feed(rec, &key, 700, events);
    assert_true(carrel_spice_recorder_pending(rec));
    carrel_spice_recorder_flush(rec, events);
    assert_false(carrel_spice_recorder_pending(rec));
    assert_int_equal(events->len, 1);
    ev = g_ptr_array_index(events, 0);
    assert_string_equal(ev->action, "type");
    assert_int_equal(ev->started_us, 500);
}

/* A console that sends events faster than the rate loses the excess, counted; time refills. */
static void
test_recorder_rate(void **state)
{
    g_autoptr(CarrelSpiceRecorder) rec = carrel_spice_recorder_new();
    g_autoptr(GPtrArray) events =
        g_ptr_array_new_with_free_func((GDestroyNotify)carrel_person_event_free);
    CarrelSpiceInput enter = {.type = CARREL_SPICE_INPUT_KEY_DOWN, .code = 0x1c};

    for (int i = 0; i < 1000; i++)
        carrel_spice_recorder_feed(rec, &enter, 1000, events);
    assert_int_equal(events->len, CARREL_PERSON_EVENT_BURST);
    assert_int_equal(carrel_spice_recorder_get_suppressed(rec), 1000 - CARREL_PERSON_EVENT_BURST);
    carrel_spice_recorder_feed(rec, &enter, 1000 + G_USEC_PER_SEC, events);
    assert_int_equal(events->len, CARREL_PERSON_EVENT_BURST + 1);
}

/* Typed text is cut into events of at most CARREL_PERSON_TYPE_MAX characters. */
static void
test_recorder_long_text(void **state)
{
    g_autoptr(CarrelSpiceRecorder) rec = carrel_spice_recorder_new();
    g_autoptr(GPtrArray) events =
        g_ptr_array_new_with_free_func((GDestroyNotify)carrel_person_event_free);
    CarrelSpiceInput key = {.type = CARREL_SPICE_INPUT_KEY_DOWN, .code = 0x1e};

    for (int i = 0; i < CARREL_PERSON_TYPE_MAX + 5; i++)
        carrel_spice_recorder_feed(rec, &key, 1000 + i, events);
    carrel_spice_recorder_flush(rec, events);
    assert_int_equal(events->len, 2);
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_parser_every_chunking),
        cmocka_unit_test(test_parser_hostile_sizes),
        cmocka_unit_test(test_filter_tap),
        cmocka_unit_test(test_recorder_table),
        cmocka_unit_test(test_recorder_flush),
        cmocka_unit_test(test_recorder_rate),
        cmocka_unit_test(test_recorder_long_text),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
