/*
 * The pure SPICE side of the console proxy: link messages, the client stream filter that keeps
 * a view-only viewer's keys and pointer from the guest, and remote-viewer files. Everything a
 * client sends is untrusted: sizes are checked before use and nothing is buffered beyond a link
 * message or a message header.
 */
#include <openssl/evp.h>
#include <openssl/rsa.h>
#include <openssl/x509.h>
#include <string.h>

#include "api/api-console-priv.h"

#define MINI_HEADER_SIZE 6  /* u16 type, u32 size */
#define FULL_HEADER_SIZE 18 /* u64 serial, u16 type, u32 size, u32 sub_list */
#define AUTH_MECHANISM_SIZE 4
#define MAX_CAPS 64

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

static gboolean
channel_allowed(guint8 type)
{
    return type == CARREL_SPICE_CHANNEL_MAIN || type == CARREL_SPICE_CHANNEL_DISPLAY ||
           type == CARREL_SPICE_CHANNEL_INPUTS || type == CARREL_SPICE_CHANNEL_CURSOR ||
           type == CARREL_SPICE_CHANNEL_PLAYBACK;
}

static gssize
link_invalid(GError **error, const char *why)
{
    g_set_error(error, CARREL_ERROR, CARREL_ERROR_INVALID_ARG, "not a SPICE link message: %s", why);
    return -1;
}

/* The SpiceLinkMess of size bytes at mess (the whole message is there). */
static gboolean
parse_mess(const guint8 *mess, guint32 size, CarrelSpiceLink *link, GError **error)
{
    guint32 n_common, n_channel, offset, common = 0;

    if (size < CARREL_SPICE_LINK_MESS_SIZE) {
        link_invalid(error, "too short");
        return FALSE;
    }
    link->connection_id = read_u32(mess);
    link->channel_type = mess[4];
    link->channel_id = mess[5];
    n_common = read_u32(mess + 6);
    n_channel = read_u32(mess + 10);
    offset = read_u32(mess + 14);
    if (n_common > MAX_CAPS || n_channel > MAX_CAPS || offset < CARREL_SPICE_LINK_MESS_SIZE ||
        offset > size || (size - offset) / 4 < n_common + n_channel) {
        link_invalid(error, "capabilities out of bounds");
        return FALSE;
    }
    if (n_common > 0)
        common = read_u32(mess + offset);
    link->auth_selection = (common >> CARREL_SPICE_CAP_AUTH_SELECTION) & 1;
    link->mini_header = (common >> CARREL_SPICE_CAP_MINI_HEADER) & 1;
    if (!channel_allowed(link->channel_type)) {
        g_set_error(error, CARREL_ERROR, CARREL_ERROR_FORBIDDEN,
                    "SPICE channel type %u is not carried by the console proxy",
                    link->channel_type);
        return FALSE;
    }
    return TRUE;
}

gssize
carrel_spice_parse_link(const guint8 *data, gsize len, CarrelSpiceLink *ret_link, GError **error)
{
    CarrelSpiceLink link = {0};
    guint32 size;

    /* Refuse a wrong magic as soon as its bytes are there (none yet: ask for more). */
    if (len == 0)
        return 0;
    if (memcmp(data, CARREL_SPICE_MAGIC, MIN(len, 4)) != 0)
        return link_invalid(error, "bad magic");
    if (len < CARREL_SPICE_LINK_HEADER_SIZE)
        return 0;
    if (read_u32(data + 4) != CARREL_SPICE_VERSION_MAJOR)
        return link_invalid(error, "unsupported major version");
    size = read_u32(data + 12);
    if (size > CARREL_SPICE_LINK_MAX - CARREL_SPICE_LINK_HEADER_SIZE)
        return link_invalid(error, "too large");
    if (len < CARREL_SPICE_LINK_HEADER_SIZE + size)
        return 0;
    if (!parse_mess(data + CARREL_SPICE_LINK_HEADER_SIZE, size, &link, error))
        return -1;
    *ret_link = link;
    return CARREL_SPICE_LINK_HEADER_SIZE + size;
}

gssize
carrel_spice_parse_link_reply(const guint8 *data, gsize len,
                              guint8 ret_key[CARREL_SPICE_PUBKEY_SIZE], GError **error)
{
    guint32 code;

    if (memcmp(data, CARREL_SPICE_MAGIC, MIN(len, 4)) != 0) {
        g_set_error(error, CARREL_ERROR, CARREL_ERROR_HYPERVISOR,
                    "the SPICE server's link reply has a bad magic");
        return -1;
    }
    if (len < CARREL_SPICE_LINK_REPLY_KEY_END)
        return 0;
    code = read_u32(data + CARREL_SPICE_LINK_HEADER_SIZE);
    if (read_u32(data + 4) != CARREL_SPICE_VERSION_MAJOR || code != 0) {
        g_set_error(error, CARREL_ERROR, CARREL_ERROR_HYPERVISOR,
                    "the SPICE server refused the link (version %u, error %u)", read_u32(data + 4),
                    code);
        return -1;
    }
    memcpy(ret_key, data + CARREL_SPICE_LINK_HEADER_SIZE + 4, CARREL_SPICE_PUBKEY_SIZE);
    return CARREL_SPICE_LINK_REPLY_KEY_END;
}

static gboolean
ticket_failed(EVP_PKEY *key, EVP_PKEY_CTX *ctx, GError **error, const char *why)
{
    EVP_PKEY_CTX_free(ctx);
    EVP_PKEY_free(key);
    g_set_error(error, CARREL_ERROR, CARREL_ERROR_INVALID_ARG, "SPICE ticket: %s", why);
    return FALSE;
}

gboolean
carrel_spice_encrypt_ticket(const guint8 key[CARREL_SPICE_PUBKEY_SIZE], const char *password,
                            guint8 ret_ticket[CARREL_SPICE_TICKET_SIZE], GError **error)
{
    const unsigned char *der = key;
    EVP_PKEY *pkey = d2i_PUBKEY(NULL, &der, CARREL_SPICE_PUBKEY_SIZE);
    EVP_PKEY_CTX *ctx = NULL;
    size_t out_len = 0;

    if (!pkey || EVP_PKEY_get_base_id(pkey) != EVP_PKEY_RSA ||
        EVP_PKEY_get_size(pkey) != CARREL_SPICE_TICKET_SIZE)
        return ticket_failed(pkey, NULL, error, "the server's key is not RSA-1024");
    ctx = EVP_PKEY_CTX_new(pkey, NULL);
    /* OAEP with SHA-1 and MGF1(SHA-1), OpenSSL's defaults: what spice-server decrypts. */
    if (!ctx || EVP_PKEY_encrypt_init(ctx) <= 0 ||
        EVP_PKEY_CTX_set_rsa_padding(ctx, RSA_PKCS1_OAEP_PADDING) <= 0 ||
        EVP_PKEY_encrypt(ctx, NULL, &out_len, (const unsigned char *)password,
                         strlen(password) + 1) <= 0 ||
        out_len != CARREL_SPICE_TICKET_SIZE)
        return ticket_failed(pkey, ctx, error, "cannot set up RSA-OAEP");
    if (EVP_PKEY_encrypt(ctx, ret_ticket, &out_len, (const unsigned char *)password,
                         strlen(password) + 1) <= 0)
        return ticket_failed(pkey, ctx, error, "the password does not fit the server's key");
    EVP_PKEY_CTX_free(ctx);
    EVP_PKEY_free(pkey);
    return TRUE;
}

gboolean
carrel_spice_msg_acts_on_guest(guint8 channel_type, guint16 msg_type)
{
    /* Default deny on the inputs channel: anything but the common messages (ack, pong...). */
    if (channel_type == CARREL_SPICE_CHANNEL_INPUTS)
        return msg_type >= CARREL_SPICE_MSGC_FIRST_CHANNEL;
    if (channel_type == CARREL_SPICE_CHANNEL_MAIN)
        return msg_type == CARREL_SPICE_MSGC_MAIN_AGENT_DATA;
    return FALSE;
}

typedef enum {
    FILTER_LINK,      /* buffering the link message */
    FILTER_MECHANISM, /* buffering the auth mechanism */
    FILTER_TICKET,    /* passing the encrypted ticket */
    FILTER_HEADER,    /* buffering a message header */
    FILTER_BODY,      /* passing or dropping a body */
    FILTER_FAILED,
} FilterState;

struct _CarrelSpiceFilter {
    FilterState state;
    CarrelSpiceMayAct may_act;
    CarrelSpiceMakeTicket make_ticket;
    CarrelSpiceTap tap;
    gpointer user_data;
    CarrelSpiceLink link;
    gboolean have_link;
    GByteArray *buf;   /* the link, mechanism or header being read */
    guint64 remaining; /* of the ticket or the body */
    gboolean dropping; /* the body belongs to a dropped message */
    guint64 dropped;
    guint64 messages; /* headers read after the ticket */
};

CarrelSpiceFilter *
carrel_spice_filter_new(CarrelSpiceMayAct may_act, gpointer user_data)
{
    CarrelSpiceFilter *filter = g_new0(CarrelSpiceFilter, 1);

    filter->may_act = may_act;
    filter->user_data = user_data;
    filter->buf = g_byte_array_new();
    return filter;
}

void
carrel_spice_filter_free(CarrelSpiceFilter *filter)
{
    if (!filter)
        return;
    g_byte_array_unref(filter->buf);
    g_free(filter);
}

void
carrel_spice_filter_set_make_ticket(CarrelSpiceFilter *filter, CarrelSpiceMakeTicket make_ticket)
{
    filter->make_ticket = make_ticket;
}

void
carrel_spice_filter_set_tap(CarrelSpiceFilter *filter, CarrelSpiceTap tap)
{
    filter->tap = tap;
}

const CarrelSpiceLink *
carrel_spice_filter_get_link(CarrelSpiceFilter *filter)
{
    return filter->have_link ? &filter->link : NULL;
}

guint64
carrel_spice_filter_get_dropped(CarrelSpiceFilter *filter)
{
    return filter->dropped;
}

static gsize
header_size(const CarrelSpiceFilter *filter)
{
    return filter->link.mini_header ? MINI_HEADER_SIZE : FULL_HEADER_SIZE;
}

/* Moves up to want - buf->len bytes into buf; returns how many were taken. */
static gsize
take(GByteArray *buf, gsize want, const guint8 *data, gsize len)
{
    gsize n = MIN(want - buf->len, len);

    g_byte_array_append(buf, data, (guint)n);
    return n;
}

static gboolean
step_link(CarrelSpiceFilter *filter, GByteArray *out, GError **error)
{
    gssize size =
        carrel_spice_parse_link(filter->buf->data, filter->buf->len, &filter->link, error);

    if (size <= 0)
        return size == 0;
    filter->have_link = TRUE;
    g_byte_array_append(out, filter->buf->data, (guint)size);
    g_byte_array_set_size(filter->buf, 0);
    if (filter->link.auth_selection) {
        filter->state = FILTER_MECHANISM;
    } else {
        filter->state = FILTER_TICKET;
        filter->remaining = CARREL_SPICE_TICKET_SIZE;
    }
    return TRUE;
}

static gboolean
step_mechanism(CarrelSpiceFilter *filter, GByteArray *out, GError **error)
{
    if (read_u32(filter->buf->data) != CARREL_SPICE_CAP_AUTH_SPICE) {
        g_set_error(error, CARREL_ERROR, CARREL_ERROR_FORBIDDEN,
                    "only SPICE ticket authentication goes through the console proxy");
        return FALSE;
    }
    g_byte_array_append(out, filter->buf->data, filter->buf->len);
    g_byte_array_set_size(filter->buf, 0);
    filter->state = FILTER_TICKET;
    filter->remaining = CARREL_SPICE_TICKET_SIZE;
    return TRUE;
}

static void
step_header(CarrelSpiceFilter *filter, GByteArray *out)
{
    const guint8 *h = filter->buf->data;
    gsize at = filter->link.mini_header ? 0 : 8;
    guint16 type = read_u16(h + at);

    filter->remaining = read_u32(h + at + 2);
    filter->messages++;
    /* Asked at the moment the message arrives: a lease taken or released counts at once. */
    filter->dropping = carrel_spice_msg_acts_on_guest(filter->link.channel_type, type) &&
                       !(filter->may_act && filter->may_act(filter->user_data));
    if (filter->dropping)
        filter->dropped++;
    else
        g_byte_array_append(out, h, filter->buf->len);
    if (!filter->dropping && filter->tap)
        filter->tap(filter->user_data, h, filter->buf->len);
    g_byte_array_set_size(filter->buf, 0);
    filter->state = FILTER_BODY;
}

/* Passes (or drops) up to remaining bytes; returns how many were consumed. */
static gsize
step_pass(CarrelSpiceFilter *filter, const guint8 *data, gsize len, GByteArray *out)
{
    gsize n = (gsize)MIN((guint64)len, filter->remaining);

    if (!filter->dropping)
        g_byte_array_append(out, data, (guint)n);
    /* Only a message's body: the ticket's bytes never reach the tap. */
    if (!filter->dropping && filter->tap && filter->state == FILTER_BODY && n > 0)
        filter->tap(filter->user_data, data, n);
    filter->remaining -= n;
    return n;
}

/* The viewer's ticket is read and dropped; once whole, the proxy's own goes in its place. */
static gssize
step_ticket(CarrelSpiceFilter *filter, const guint8 *data, gsize len, GByteArray *out,
            GError **error)
{
    gsize n = (gsize)MIN((guint64)len, filter->remaining);
    guint8 ticket[CARREL_SPICE_TICKET_SIZE];

    filter->remaining -= n;
    if (filter->remaining > 0)
        return (gssize)n;
    if (!filter->make_ticket(filter->user_data, ticket, error))
        return -1;
    g_byte_array_append(out, ticket, sizeof(ticket));
    memset(ticket, 0, sizeof(ticket));
    filter->state = FILTER_HEADER;
    return (gssize)n;
}

/* One step on data; returns how many bytes it consumed, or -1 on error. */
static gssize
filter_step(CarrelSpiceFilter *filter, const guint8 *data, gsize len, GByteArray *out,
            GError **error)
{
    gsize n;

    if (filter->state == FILTER_LINK) {
        /* Byte by byte until the header says the size, then the rest of the message. */
        guint want = filter->buf->len < CARREL_SPICE_LINK_HEADER_SIZE
                         ? CARREL_SPICE_LINK_HEADER_SIZE
                         : CARREL_SPICE_LINK_HEADER_SIZE + read_u32(filter->buf->data + 12);
        n = take(filter->buf, MIN(want, CARREL_SPICE_LINK_MAX), data, len);
        return step_link(filter, out, error) ? (gssize)n : -1;
    }
    if (filter->state == FILTER_MECHANISM) {
        n = take(filter->buf, AUTH_MECHANISM_SIZE, data, len);
        if (filter->buf->len == AUTH_MECHANISM_SIZE && !step_mechanism(filter, out, error))
            return -1;
        return (gssize)n;
    }
    if (filter->state == FILTER_HEADER) {
        n = take(filter->buf, header_size(filter), data, len);
        if (filter->buf->len == header_size(filter))
            step_header(filter, out);
        return (gssize)n;
    }
    if (filter->state == FILTER_TICKET && filter->make_ticket)
        return step_ticket(filter, data, len, out, error);
    /* FILTER_TICKET or FILTER_BODY */
    n = step_pass(filter, data, len, out);
    if (filter->remaining == 0)
        filter->state = FILTER_HEADER;
    return (gssize)n;
}

gboolean
carrel_spice_filter_feed(CarrelSpiceFilter *filter, const guint8 *data, gsize len, GByteArray *out,
                         GError **error)
{
    gsize at = 0;

    if (filter->state == FILTER_FAILED) {
        g_set_error(error, CARREL_ERROR, CARREL_ERROR_INVALID_ARG, "SPICE stream already failed");
        return FALSE;
    }
    /* A body of 0 bytes ends at once: loop until every byte is used and no step is pending. */
    while (at < len || (filter->state == FILTER_BODY && filter->remaining == 0)) {
        gssize n = filter_step(filter, data + at, len - at, out, error);
        if (n < 0) {
            filter->state = FILTER_FAILED;
            return FALSE;
        }
        at += (gsize)n;
    }
    return TRUE;
}

gboolean
carrel_spice_filter_append_display_init(CarrelSpiceFilter *filter, GByteArray *out)
{
    /* SpiceMsgcDisplayInit as spice-html5 fills it: pixmap cache 1 of 10 MiB, no glz window. */
    static const guint8 body[14] = {1, 0, 0, 0xa0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0};
    guint8 header[FULL_HEADER_SIZE] = {0};
    gsize at = filter->link.mini_header ? 0 : 8;

    if (!filter->have_link || filter->link.channel_type != CARREL_SPICE_CHANNEL_DISPLAY ||
        filter->state != FILTER_HEADER || filter->buf->len != 0 || filter->messages != 0)
        return FALSE;
    header[at] = CARREL_SPICE_MSGC_DISPLAY_INIT;
    header[at + 2] = sizeof(body);
    g_byte_array_append(out, header, (guint)header_size(filter));
    g_byte_array_append(out, body, sizeof(body));
    filter->messages++;
    return TRUE;
}

char *
carrel_spice_vv_file(const CarrelVvSpec *spec, GError **error)
{
    g_autoptr(GKeyFile) kf = g_key_file_new();
    const char *group = "virt-viewer";

    if (spec->port == 0 || spec->port > 65535 || !spec->password || !*spec->password) {
        g_set_error(error, CARREL_ERROR, CARREL_ERROR_INVALID_ARG,
                    "a console file needs a port and a password");
        return NULL;
    }
    g_key_file_set_string(kf, group, "type", "spice");
    g_key_file_set_string(kf, group, "host", "127.0.0.1");
    g_key_file_set_integer(kf, group, "port", (gint)spec->port);
    g_key_file_set_string(kf, group, "password", spec->password);
    /* The password is short-lived, but the file should not outlive its use either. */
    g_key_file_set_integer(kf, group, "delete-this-file", 1);
    g_key_file_set_string(kf, group, "title", spec->title ? spec->title : "carrel");
    g_key_file_set_string(kf, group, "release-cursor", "shift+f12");
    g_key_file_set_string(kf, group, "toggle-fullscreen", "shift+f11");
    g_key_file_set_string(kf, group, "secure-attention", "ctrl+alt+end");
    /* Files enter guests only through the audited API. */
    g_key_file_set_integer(kf, group, "enable-usbredir", 0);
    g_key_file_set_integer(kf, group, "enable-usb-autoshare", 0);
    return g_key_file_to_data(kf, NULL, NULL);
}
