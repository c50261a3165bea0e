/*
 * Unit tests of the migration stream split of the hypervisor module, on synthetic streams laid
 * out as QEMU 7.2 writes a save of a guest whose RAM maps a file (hypervisor-migstream.c): what
 * the device stream keeps, which pages come out and in what order, and the streams it refuses.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <string.h>

#define CARREL_HYPERVISOR_PRIV_H_ALLOW
#include "hypervisor/hypervisor-priv.h"

#define PAGE 4096

/* A stream being built, and the bytes of it the device stream must keep. */
typedef struct {
    GByteArray *all;
    GByteArray *kept;
} Built;

static void
put(Built *b, gboolean keep, const void *data, gsize len)
{
    g_byte_array_append(b->all, data, (guint)len);
    if (keep)
        g_byte_array_append(b->kept, data, (guint)len);
}

static void
put_u8(Built *b, gboolean keep, guint8 v)
{
    put(b, keep, &v, 1);
}

static void
put_be32(Built *b, gboolean keep, guint32 v)
{
    guint8 raw[4] = {(guint8)(v >> 24), (guint8)(v >> 16), (guint8)(v >> 8), (guint8)v};

    put(b, keep, raw, 4);
}

static void
put_be64(Built *b, gboolean keep, guint64 v)
{
    put_be32(b, keep, (guint32)(v >> 32));
    put_be32(b, keep, (guint32)v);
}

static void
put_name(Built *b, gboolean keep, const char *name)
{
    put_u8(b, keep, (guint8)strlen(name));
    put(b, keep, name, strlen(name));
}

/* A page record: name unless continuing, then a page of byte (PAGE) or a fill byte (ZERO). */
static void
put_page(Built *b, gboolean keep, const char *block, guint64 offset, gboolean zero, guint8 byte)
{
    guint8 page[PAGE];

    put_be64(b, keep, offset | (zero ? 0x02 : 0x08) | (block ? 0 : 0x20));
    if (block)
        put_name(b, keep, block);
    if (zero) {
        put_u8(b, keep, byte);
        return;
    }
    memset(page, byte, sizeof(page));
    put(b, keep, page, sizeof(page));
}

static void
put_end_of_part(Built *b, guint32 id)
{
    put_be64(b, TRUE, 0x10);
    put_u8(b, TRUE, 0x7e);
    put_be32(b, TRUE, id);
}

/* The header, the configuration (capabilities as given) and the RAM's START with its block list:
 * pc.ram of two pages, vga of one. */
static void
put_start(Built *b, const char *capability)
{
    put_be32(b, TRUE, 0x5145564d);
    put_be32(b, TRUE, 3);
    put_u8(b, TRUE, 0x07);
    put_be32(b, TRUE, 13);
    put(b, TRUE, "pc-i440fx-7.2", 13);
    put_u8(b, TRUE, 0x05);
    put_name(b, TRUE, "configuration/capabilities");
    put_be32(b, TRUE, 1);
    put_be32(b, TRUE, 1);
    put_name(b, TRUE, capability);
    put_u8(b, TRUE, 0x01);
    put_be32(b, TRUE, 3);
    put_name(b, TRUE, "ram");
    put_be32(b, TRUE, 0);
    put_be32(b, TRUE, 4);
    put_be64(b, TRUE, (3 * PAGE) | 0x04);
    put_name(b, TRUE, "pc.ram");
    put_be64(b, TRUE, 2 * PAGE);
    put_be64(b, TRUE, 0);
    put_name(b, TRUE, "vga");
    put_be64(b, TRUE, PAGE);
    put_be64(b, TRUE, 0);
}

/*
 * A whole stream: START (pc.ram page 0; vga page 0; pc.ram page 1 as zero), a PART that begins
 * by continuing pc.ram (page 1 sent again with data, page 0 filled), END, device bytes.
 */
static Built
good_stream(void)
{
    Built b = {g_byte_array_new(), g_byte_array_new()};

    put_start(&b, "x-ignore-shared");
    put_page(&b, FALSE, "pc.ram", 0, FALSE, 0xa1);
    put_page(&b, TRUE, "vga", 0, FALSE, 0xb1);
    put_page(&b, FALSE, "pc.ram", PAGE, TRUE, 0);
    put_end_of_part(&b, 3);
    put_u8(&b, TRUE, 0x02);
    put_be32(&b, TRUE, 3);
    put_page(&b, FALSE, NULL, PAGE, FALSE, 0xa2);
    put_page(&b, FALSE, NULL, 0, TRUE, 0x5c);
    put_end_of_part(&b, 3);
    put_u8(&b, TRUE, 0x03);
    put_be32(&b, TRUE, 3);
    put_page(&b, TRUE, "vga", 0, TRUE, 0);
    put_end_of_part(&b, 3);
    put(&b, TRUE,
        "\x04"
        "device-state\x00",
        14);
    return b;
}

static void
built_clear(Built *b)
{
    g_byte_array_unref(b->all);
    g_byte_array_unref(b->kept);
}

/* What the split passed on, one line per page: "OFFSET page BYTE" or "OFFSET fill BYTE". */
static gboolean
record_page(guint64 block_size, guint64 offset, const guint8 *page, guint8 fill, gpointer user_data,
            GError **error)
{
    GString *log = user_data;

    (void)error;
    assert_int_equal(block_size, 2 * PAGE);
    g_string_append_printf(log, "%" G_GUINT64_FORMAT " %s %02x\n", offset, page ? "page" : "fill",
                           page ? page[0] : fill);
    /* A page passed on is whole. */
    if (page)
        assert_int_equal(page[PAGE - 1], page[0]);
    return TRUE;
}

static gboolean
split(const GByteArray *stream, GByteArray *out, GString *log, GError **error)
{
    guint64 size = 0;
    gboolean ok = carrel_hypervisor_migstream_split(stream->data, stream->len, "pc.ram", out, &size,
                                                    record_page, log, error);

    if (ok)
        assert_int_equal(size, 2 * PAGE);
    return ok;
}

/* The block's pages come out in stream order, the rest is kept byte for byte. */
static void
test_split_keeps_the_rest(void **state)
{
    Built b = good_stream();
    g_autoptr(GByteArray) out = g_byte_array_new();
    g_autoptr(GString) log = g_string_new(NULL);
    g_autoptr(GError) error = NULL;

    (void)state;
    if (!split(b.all, out, log, &error))
        fail_msg("%s", error->message);
    assert_string_equal(log->str, "0 page a1\n4096 fill 00\n4096 page a2\n0 fill 5c\n");
    assert_int_equal(out->len, b.kept->len);
    assert_memory_equal(out->data, b.kept->data, out->len);
    built_clear(&b);
}

/* A page callback's error stops the split and is what the caller gets. */
static gboolean
refuse_page(guint64 block_size, guint64 offset, const guint8 *page, guint8 fill, gpointer user_data,
            GError **error)
{
    (void)block_size, (void)offset, (void)page, (void)fill, (void)user_data;
    g_set_error(error, CARREL_ERROR, CARREL_ERROR_FAILED, "disk full");
    return FALSE;
}

static void
test_page_error_stops(void **state)
{
    Built b = good_stream();
    g_autoptr(GByteArray) out = g_byte_array_new();
    g_autoptr(GError) error = NULL;
    guint64 size = 0;

    (void)state;
    assert_false(carrel_hypervisor_migstream_split(b.all->data, b.all->len, "pc.ram", out, &size,
                                                   refuse_page, NULL, &error));
    assert_true(g_error_matches(error, CARREL_ERROR, CARREL_ERROR_FAILED));
    built_clear(&b);
}

/* Refused: a stream must say what is wrong, and where. */
static void
expect_unsupported(const GByteArray *stream, const char *message)
{
    g_autoptr(GByteArray) out = g_byte_array_new();
    g_autoptr(GString) log = g_string_new(NULL);
    g_autoptr(GError) error = NULL;

    assert_false(split(stream, out, log, &error));
    assert_true(g_error_matches(error, CARREL_ERROR, CARREL_ERROR_UNSUPPORTED));
    if (!strstr(error->message, message))
        fail_msg("'%s' does not say '%s'", error->message, message);
}

static void
test_refuses_without_ignore_shared(void **state)
{
    Built b = {g_byte_array_new(), g_byte_array_new()};

    (void)state;
    put_start(&b, "x-other");
    put_end_of_part(&b, 3);
    expect_unsupported(b.all, "without x-ignore-shared");
    built_clear(&b);
}

/* Cut anywhere before the RAM's end, the stream is refused, never read beyond its end. */
static void
test_refuses_truncated(void **state)
{
    Built b = good_stream();

    (void)state;
    for (guint cut = 0; cut < b.all->len - 14; cut += 7) {
        g_autoptr(GByteArray) part = g_byte_array_new();
        g_autoptr(GByteArray) out = g_byte_array_new();
        g_autoptr(GString) log = g_string_new(NULL);
        g_autoptr(GError) error = NULL;

        g_byte_array_append(part, b.all->data, cut);
        assert_false(split(part, out, log, &error));
        assert_non_null(error);
    }
    built_clear(&b);
}

static void
test_refuses_unknown_records(void **state)
{
    Built xbzrle = {g_byte_array_new(), g_byte_array_new()};
    Built outside = {g_byte_array_new(), g_byte_array_new()};
    Built other = {g_byte_array_new(), g_byte_array_new()};
    Built orphan = {g_byte_array_new(), g_byte_array_new()};

    (void)state;
    put_start(&xbzrle, "x-ignore-shared");
    put_be64(&xbzrle, TRUE, 0x40);
    expect_unsupported(xbzrle.all, "a RAM record of a kind");
    /* A page beyond the block's two. */
    put_start(&outside, "x-ignore-shared");
    put_page(&outside, FALSE, "pc.ram", 2 * PAGE, FALSE, 1);
    expect_unsupported(outside.all, "outside the RAM block");
    /* Another iterative section before the RAM's end. */
    put_start(&other, "x-ignore-shared");
    put_end_of_part(&other, 3);
    put_u8(&other, TRUE, 0x02);
    put_be32(&other, TRUE, 9);
    expect_unsupported(other.all, "other than RAM's");
    /* A first page that continues nothing. */
    put_start(&orphan, "x-ignore-shared");
    put_page(&orphan, FALSE, NULL, 0, FALSE, 1);
    expect_unsupported(orphan.all, "continues no block");
    built_clear(&xbzrle);
    built_clear(&outside);
    built_clear(&other);
    built_clear(&orphan);
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_split_keeps_the_rest),
        cmocka_unit_test(test_page_error_stops),
        cmocka_unit_test(test_refuses_without_ignore_shared),
        cmocka_unit_test(test_refuses_truncated),
        cmocka_unit_test(test_refuses_unknown_records),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
