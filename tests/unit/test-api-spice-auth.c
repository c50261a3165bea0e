/*
 * The console proxy authenticates to SPICE itself: the server's key read from its link reply
 * (in any chunking, hostile replies refused), the password encrypted with RSA-OAEP so that the
 * matching private key gives it back, and the filter sending the proxy's ticket in place of
 * the viewer's. The ticket store keeps the password for its own principal only.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <openssl/evp.h>
#include <openssl/rsa.h>
#include <openssl/x509.h>
#include <string.h>

#include "api/api-console-priv.h"

static void
put_u32(GByteArray *b, guint32 v)
{
    guint8 le[4] = {v & 0xff, (v >> 8) & 0xff, (v >> 16) & 0xff, (v >> 24) & 0xff};

    g_byte_array_append(b, le, 4);
}

/* An RSA-1024 key pair as spice-server makes one per link. */
static EVP_PKEY *
new_key(void)
{
    EVP_PKEY *key = EVP_RSA_gen(1024);

    assert_non_null(key);
    return key;
}

/* The DER public key of key, 162 bytes as in a link reply. */
static void
public_der(EVP_PKEY *key, guint8 der[CARREL_SPICE_PUBKEY_SIZE])
{
    unsigned char *p = der;

    assert_int_equal(i2d_PUBKEY(key, NULL), CARREL_SPICE_PUBKEY_SIZE);
    assert_int_equal(i2d_PUBKEY(key, &p), CARREL_SPICE_PUBKEY_SIZE);
}

/* A link reply: header, error code, the key, no capabilities. */
static GByteArray *
link_reply(const guint8 der[CARREL_SPICE_PUBKEY_SIZE], guint32 code)
{
    GByteArray *b = g_byte_array_new();

    g_byte_array_append(b, (const guint8 *)"REDQ", 4);
    put_u32(b, 2);
    put_u32(b, 2);
    put_u32(b, 4 + CARREL_SPICE_PUBKEY_SIZE + 12);
    put_u32(b, code);
    g_byte_array_append(b, der, CARREL_SPICE_PUBKEY_SIZE);
    put_u32(b, 0);
    put_u32(b, 0);
    put_u32(b, 4 + CARREL_SPICE_PUBKEY_SIZE + 12);
    return b;
}

/* What the private half of key makes of ticket. */
static char *
decrypt(EVP_PKEY *key, const guint8 *ticket)
{
    EVP_PKEY_CTX *ctx = EVP_PKEY_CTX_new(key, NULL);
    unsigned char out[CARREL_SPICE_TICKET_SIZE];
    size_t len = sizeof(out);

    assert_int_equal(EVP_PKEY_decrypt_init(ctx), 1);
    assert_int_equal(EVP_PKEY_CTX_set_rsa_padding(ctx, RSA_PKCS1_OAEP_PADDING), 1);
    assert_int_equal(EVP_PKEY_decrypt(ctx, out, &len, ticket, CARREL_SPICE_TICKET_SIZE), 1);
    EVP_PKEY_CTX_free(ctx);
    /* The password with its terminating NUL, as spice-gtk sends it. */
    assert_true(len > 0 && out[len - 1] == '\0');
    return g_strndup((const char *)out, len - 1);
}

static void
test_link_reply(void **state)
{
    EVP_PKEY *key = new_key();
    guint8 der[CARREL_SPICE_PUBKEY_SIZE], got[CARREL_SPICE_PUBKEY_SIZE];
    g_autoptr(GByteArray) reply = NULL;
    g_autoptr(GByteArray) refused = NULL;
    g_autoptr(GError) error = NULL;

    public_der(key, der);
    reply = link_reply(der, 0);
    /* Short of the key: more bytes needed; then the key, whatever follows. */
    for (gsize len = 0; len < CARREL_SPICE_LINK_REPLY_KEY_END; len++)
        assert_int_equal(carrel_spice_parse_link_reply(reply->data, len, got, &error), 0);
    assert_int_equal(carrel_spice_parse_link_reply(reply->data, reply->len, got, &error),
                     CARREL_SPICE_LINK_REPLY_KEY_END);
    assert_memory_equal(got, der, sizeof(der));
    /* An error reply, a wrong magic (seen at the first byte), another major version. */
    refused = link_reply(der, 7);
    assert_int_equal(carrel_spice_parse_link_reply(refused->data, refused->len, got, &error), -1);
    g_clear_error(&error);
    assert_int_equal(carrel_spice_parse_link_reply((const guint8 *)"X", 1, got, &error), -1);
    g_clear_error(&error);
    reply->data[4] = 3;
    assert_int_equal(carrel_spice_parse_link_reply(reply->data, reply->len, got, &error), -1);
    EVP_PKEY_free(key);
}

static void
test_encrypt(void **state)
{
    EVP_PKEY *key = new_key();
    guint8 der[CARREL_SPICE_PUBKEY_SIZE], ticket[CARREL_SPICE_TICKET_SIZE];
    guint8 garbage[CARREL_SPICE_PUBKEY_SIZE];
    g_autofree char *plain = NULL;
    g_autofree char *long_pw = g_strnfill(200, 'x');
    g_autoptr(GError) error = NULL;

    public_der(key, der);
    assert_true(
        carrel_spice_encrypt_ticket(der, "0123456789abcdef0123456789abcdef", ticket, &error));
    plain = decrypt(key, ticket);
    assert_string_equal(plain, "0123456789abcdef0123456789abcdef");
    /* Too long for RSA-1024 with OAEP (86 bytes at most); a key that is not one. */
    assert_false(carrel_spice_encrypt_ticket(der, long_pw, ticket, &error));
    assert_true(g_error_matches(error, CARREL_ERROR, CARREL_ERROR_INVALID_ARG));
    g_clear_error(&error);
    memset(garbage, 0x42, sizeof(garbage));
    assert_false(carrel_spice_encrypt_ticket(garbage, "pw", ticket, &error));
    assert_true(g_error_matches(error, CARREL_ERROR, CARREL_ERROR_INVALID_ARG));
    EVP_PKEY_free(key);
}

typedef struct {
    guint made;
    gboolean fail;
} Maker;

static gboolean
make(gpointer user_data, guint8 ret_ticket[CARREL_SPICE_TICKET_SIZE], GError **error)
{
    Maker *m = user_data;

    m->made++;
    if (m->fail) {
        g_set_error(error, CARREL_ERROR, CARREL_ERROR_INVALID_ARG, "no key");
        return FALSE;
    }
    memset(ret_ticket, 0x5a, CARREL_SPICE_TICKET_SIZE);
    return TRUE;
}

/* A main channel's link without auth selection or mini header, its ticket, then one message. */
static GByteArray *
main_stream(guint8 ticket_fill)
{
    GByteArray *b = g_byte_array_new();
    guint8 ticket[CARREL_SPICE_TICKET_SIZE];
    guint8 type = CARREL_SPICE_CHANNEL_MAIN;

    g_byte_array_append(b, (const guint8 *)"REDQ", 4);
    put_u32(b, 2);
    put_u32(b, 2);
    put_u32(b, 18);
    put_u32(b, 0);
    g_byte_array_append(b, &type, 1);
    g_byte_array_append(b, (const guint8 *)"\0", 1);
    put_u32(b, 0);
    put_u32(b, 0);
    put_u32(b, 18);
    memset(ticket, ticket_fill, sizeof(ticket));
    g_byte_array_append(b, ticket, sizeof(ticket));
    /* full header: serial, type 3 (pong), size 0, sub list */
    put_u32(b, 1);
    put_u32(b, 0);
    g_byte_array_append(b, (const guint8 *)"\3\0", 2);
    put_u32(b, 0);
    put_u32(b, 0);
    return b;
}

static void
test_filter_replaces_ticket(void **state)
{
    g_autoptr(GByteArray) stream = main_stream(0xab);
    g_autoptr(GByteArray) expected = main_stream(0x5a);
    gsize steps[] = {1, 3, 50, 200, 4096};

    for (gsize i = 0; i < G_N_ELEMENTS(steps); i++) {
        Maker m = {0};
        g_autoptr(CarrelSpiceFilter) filter = carrel_spice_filter_new(NULL, &m);
        g_autoptr(GByteArray) out = g_byte_array_new();

        carrel_spice_filter_set_make_ticket(filter, make);
        for (gsize at = 0; at < stream->len; at += steps[i])
            assert_true(carrel_spice_filter_feed(filter, stream->data + at,
                                                 MIN(steps[i], stream->len - at), out, NULL));
        /* The viewer's ticket never reaches the server: the proxy's does, once. */
        assert_int_equal(m.made, 1);
        assert_int_equal(out->len, expected->len);
        assert_memory_equal(out->data, expected->data, expected->len);
    }
    /* No ticket to give: the stream fails there and nothing of the ticket went out. */
    {
        Maker m = {.fail = TRUE};
        g_autoptr(CarrelSpiceFilter) filter = carrel_spice_filter_new(NULL, &m);
        g_autoptr(GByteArray) out = g_byte_array_new();
        g_autoptr(GError) error = NULL;

        carrel_spice_filter_set_make_ticket(filter, make);
        assert_false(carrel_spice_filter_feed(filter, stream->data, stream->len, out, &error));
        assert_true(g_error_matches(error, CARREL_ERROR, CARREL_ERROR_INVALID_ARG));
        assert_int_equal(out->len, CARREL_SPICE_LINK_HEADER_SIZE + 18);
    }
}

static void
test_ticket_password(void **state)
{
    g_autoptr(CarrelConsoleTickets) t = carrel_console_tickets_new(NULL);
    g_autofree char *ticket = carrel_console_tickets_issue(t, "s-1", 5900, "secret", "alice", NULL);
    g_autofree char *pw = NULL;
    g_autoptr(GError) error = NULL;

    pw = carrel_console_tickets_password(t, ticket, "alice", &error);
    assert_string_equal(pw, "secret");
    assert_null(carrel_console_tickets_password(t, ticket, "mallory", &error));
    assert_true(g_error_matches(error, CARREL_ERROR, CARREL_ERROR_FORBIDDEN));
    g_clear_error(&error);
    assert_null(carrel_console_tickets_password(t, "nope", "alice", &error));
    assert_true(g_error_matches(error, CARREL_ERROR, CARREL_ERROR_NOT_FOUND));
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_link_reply),
        cmocka_unit_test(test_encrypt),
        cmocka_unit_test(test_filter_replaces_ticket),
        cmocka_unit_test(test_ticket_password),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
