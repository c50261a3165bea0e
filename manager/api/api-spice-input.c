/*
 * The client messages of a SPICE inputs channel, read as the proxy passes them on: keys, lock
 * state and the pointer. A pure incremental parser of untrusted bytes: it holds at most a header
 * and CARREL_SPICE_INPUT_BODY_MAX bytes of body, whatever sizes the headers claim, and it never
 * stops the stream (what it cannot read is skipped; the server still gets every byte).
 */
#include <string.h>

#include "api/api-console-priv.h"

#define MINI_HEADER_SIZE 6  /* u16 type, u32 size */
#define FULL_HEADER_SIZE 18 /* u64 serial, u16 type, u32 size, u32 sub_list */

struct _CarrelSpiceInputParser {
    gboolean mini_header;
    guint8 header[FULL_HEADER_SIZE];
    gsize header_len;
    guint16 type;
    guint64 remaining; /* of the body being read or skipped */
    guint8 body[CARREL_SPICE_INPUT_BODY_MAX];
    gsize body_len;
    gboolean reading; /* the body is read (else skipped) */
    guint64 refused;
};

static guint32
read_u32(const guint8 *p)
{
    return (guint32)p[0] | (guint32)p[1] << 8 | (guint32)p[2] << 16 | (guint32)p[3] << 24;
}

static guint16
read_u16(const guint8 *p)
{
    return (guint16)(p[0] | p[1] << 8);
}

CarrelSpiceInputParser *
carrel_spice_input_parser_new(gboolean mini_header)
{
    CarrelSpiceInputParser *parser = g_new0(CarrelSpiceInputParser, 1);

    parser->mini_header = mini_header;
    return parser;
}

void
carrel_spice_input_parser_free(CarrelSpiceInputParser *parser)
{
    g_free(parser);
}

guint64
carrel_spice_input_parser_get_refused(const CarrelSpiceInputParser *parser)
{
    return parser->refused;
}

/* The least body a message of that type has, or 0 for a type not read. */
static gsize
body_min(guint16 type)
{
    switch (type) {
    case CARREL_SPICE_MSGC_INPUTS_KEY_DOWN:
    case CARREL_SPICE_MSGC_INPUTS_KEY_UP:
        return 4; /* u32 scancode */
    case CARREL_SPICE_MSGC_INPUTS_KEY_MODIFIERS:
        return 2; /* u16 lock state */
    case CARREL_SPICE_MSGC_INPUTS_MOUSE_MOTION:
    case CARREL_SPICE_MSGC_INPUTS_MOUSE_POSITION:
        return 10; /* two 32-bit values, u16 buttons (a position adds a u8 display id) */
    case CARREL_SPICE_MSGC_INPUTS_MOUSE_PRESS:
    case CARREL_SPICE_MSGC_INPUTS_MOUSE_RELEASE:
        return 3; /* u8 button, u16 buttons */
    default:
        return 0;
    }
}

static void
decode(guint16 type, const guint8 *b, GArray *ret_inputs)
{
    CarrelSpiceInput in = {0};

    switch (type) {
    case CARREL_SPICE_MSGC_INPUTS_KEY_DOWN:
    case CARREL_SPICE_MSGC_INPUTS_KEY_UP:
        in.type = type == CARREL_SPICE_MSGC_INPUTS_KEY_DOWN ? CARREL_SPICE_INPUT_KEY_DOWN
                                                            : CARREL_SPICE_INPUT_KEY_UP;
        in.code = read_u32(b);
        break;
    case CARREL_SPICE_MSGC_INPUTS_KEY_MODIFIERS:
        in.type = CARREL_SPICE_INPUT_KEY_MODIFIERS;
        in.modifiers = read_u16(b);
        break;
    case CARREL_SPICE_MSGC_INPUTS_MOUSE_POSITION:
        in.type = CARREL_SPICE_INPUT_MOUSE_POSITION;
        in.x = read_u32(b);
        in.y = read_u32(b + 4);
        in.buttons = read_u16(b + 8);
        break;
    case CARREL_SPICE_MSGC_INPUTS_MOUSE_MOTION:
        in.type = CARREL_SPICE_INPUT_MOUSE_MOTION;
        in.x = (gint32)read_u32(b);
        in.y = (gint32)read_u32(b + 4);
        in.buttons = read_u16(b + 8);
        break;
    case CARREL_SPICE_MSGC_INPUTS_MOUSE_PRESS:
    case CARREL_SPICE_MSGC_INPUTS_MOUSE_RELEASE:
        in.type = type == CARREL_SPICE_MSGC_INPUTS_MOUSE_PRESS ? CARREL_SPICE_INPUT_MOUSE_PRESS
                                                               : CARREL_SPICE_INPUT_MOUSE_RELEASE;
        in.button = b[0];
        in.buttons = read_u16(b + 1);
        break;
    default:
        return;
    }
    g_array_append_val(ret_inputs, in);
}

/* A whole header is in: read the body or skip it. */
static void
start_body(CarrelSpiceInputParser *parser)
{
    gsize at = parser->mini_header ? 0 : 8;
    gsize least;

    parser->type = read_u16(parser->header + at);
    parser->remaining = read_u32(parser->header + at + 2);
    parser->header_len = 0;
    parser->body_len = 0;
    least = body_min(parser->type);
    parser->reading =
        least > 0 && parser->remaining >= least && parser->remaining <= CARREL_SPICE_INPUT_BODY_MAX;
    if (least > 0 && !parser->reading)
        parser->refused++;
}

/* The body was read whole. */
static void
end_body(CarrelSpiceInputParser *parser, GArray *ret_inputs)
{
    if (parser->reading)
        decode(parser->type, parser->body, ret_inputs);
    parser->reading = FALSE;
}

void
carrel_spice_input_parser_feed(CarrelSpiceInputParser *parser, const guint8 *data, gsize len,
                               GArray *ret_inputs)
{
    gsize hsize = parser->mini_header ? MINI_HEADER_SIZE : FULL_HEADER_SIZE;
    gsize at = 0;

    while (at < len) {
        if (parser->remaining == 0) {
            gsize n = MIN(hsize - parser->header_len, len - at);

            memcpy(parser->header + parser->header_len, data + at, n);
            parser->header_len += n;
            at += n;
            if (parser->header_len < hsize)
                return;
            start_body(parser);
            /* A message without a body ends with its header. */
            if (parser->remaining == 0)
                end_body(parser, ret_inputs);
            continue;
        }
        {
            gsize n = (gsize)MIN((guint64)(len - at), parser->remaining);

            if (parser->reading) {
                memcpy(parser->body + parser->body_len, data + at, n);
                parser->body_len += n;
            }
            parser->remaining -= n;
            at += n;
            if (parser->remaining == 0)
                end_body(parser, ret_inputs);
        }
    }
}
