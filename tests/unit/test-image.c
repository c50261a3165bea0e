#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <string.h>
#include <png.h>

#include "image/image.h"

static void
assert_error(const GError *error, int code, const char *fragment)
{
    if (!error)
        fail_msg("expected error code %d, got success", code);
    if (error->domain != CARREL_ERROR || error->code != code)
        fail_msg("expected code %d, got %d: %s", code, error->code, error->message);
    if (fragment && !strstr(error->message, fragment))
        fail_msg("message '%s' lacks '%s'", error->message, fragment);
}

/* --- PPM parser, PNG decoder, readiness helpers ---------------------------------------- */

static GBytes *
make_ppm(guint width, guint height, guint8 fill)
{
    g_autofree char *header = g_strdup_printf("P6\n%u %u\n255\n", width, height);
    gsize header_len = strlen(header), len = header_len + (gsize)width * height * 3;
    guint8 *data = g_malloc(len);

    memcpy(data, header, header_len);
    memset(data + header_len, fill, len - header_len);
    return g_bytes_new_take(data, len);
}

static void
assert_ppm_refused(const char *text, gsize len, const char *fragment)
{
    g_autoptr(GBytes) bytes = g_bytes_new(text, len);
    g_autoptr(GError) error = NULL;
    guint width = 77;

    assert_false(carrel_image_ppm_parse(bytes, &width, NULL, NULL, &error));
    assert_error(error, CARREL_ERROR_INVALID_ARG, fragment);
    assert_int_equal(width, 77);
    assert_true(carrel_image_ppm_is_blank(bytes)); /* invalid counts as not ready */
}

static void
test_ppm_parse(void **state)
{
    g_autoptr(GBytes) ppm = make_ppm(4, 3, 0);
    g_autoptr(GError) error = NULL;
    guint width = 0, height = 0;
    gsize offset = 0;
    /* 2x1 pixels = 6 bytes of data after each header. */
    static const char tabs[] = "P6\t2\r\n1 \f255\n123456";
    g_autoptr(GBytes) spaced = g_bytes_new_static(tabs, sizeof(tabs) - 1);

    assert_true(carrel_image_ppm_parse(ppm, &width, &height, &offset, &error));
    assert_int_equal(width, 4);
    assert_int_equal(height, 3);
    assert_int_equal(offset, strlen("P6\n4 3\n255\n"));
    assert_true(carrel_image_ppm_parse(spaced, NULL, NULL, NULL, NULL));
    assert_ppm_refused("", 0, "not binary ppm");
    assert_ppm_refused("P3\n2 1\n255\n123456", 17, "not binary ppm");
    assert_ppm_refused("P6 # comment\n2 1\n255\n123456", 27, "malformed");
    assert_ppm_refused("P6\n-2 1\n255\n123456", 18, "malformed");
    assert_ppm_refused("P6\n+2 1\n255\n123456", 18, "malformed");
    assert_ppm_refused("P6\n000002 1\n255\n123456", 22, "malformed");
    assert_ppm_refused("P62 1\n255\n123456", 16, "malformed");
    assert_ppm_refused("P6\n2 1\n255123456", 16, "malformed");
    assert_ppm_refused("P6\n2 1\n255", 10, "malformed");
    assert_ppm_refused("P6\n2 1\n65535\n123456789012", 25, "maxval");
    assert_ppm_refused("P6\n0 1\n255\n", 11, "out of range");
    assert_ppm_refused("P6\n16385 1\n255\n", 15, "out of range");
    assert_ppm_refused("P6\n99999 99999\n255\n123", 22, "out of range");
    assert_ppm_refused("P6\n2 1\n255\n12345", 16, "does not match");
    assert_ppm_refused("P6\n2 1\n255\n1234567", 18, "does not match");
    /* The largest side alone is fine; a huge claimed area is checked against the real length. */
    assert_ppm_refused("P6\n16384 16384\n255\n123", 23, "does not match");
    assert_false(carrel_image_ppm_parse(NULL, NULL, NULL, NULL, NULL));
}

static void
set_pixel(GBytes **ppm, gsize index, guint8 value)
{
    gsize len = 0, offset = 0;
    guint8 *data = g_memdup2(g_bytes_get_data(*ppm, &len), g_bytes_get_size(*ppm));

    assert_true(carrel_image_ppm_parse(*ppm, NULL, NULL, &offset, NULL));
    data[offset + index] = value;
    g_bytes_unref(*ppm);
    *ppm = g_bytes_new_take(data, len);
}

static void
test_ppm_blank_and_differs(void **state)
{
    g_autoptr(GBytes) black = make_ppm(8, 6, 0);
    g_autoptr(GBytes) grey = make_ppm(8, 6, 0x80);
    g_autoptr(GBytes) other = make_ppm(8, 6, 0);
    g_autoptr(GBytes) smaller = make_ppm(6, 8, 0);
    g_autoptr(GBytes) spaced = NULL;
    g_autoptr(GBytes) bad = g_bytes_new_static("P6\n1 1\n255\n", 11);
    static const char spaced_text[] = "P6  8   6 255\n";
    g_autoptr(GByteArray) buf = g_byte_array_new();

    assert_true(carrel_image_ppm_is_blank(black));
    assert_true(carrel_image_ppm_is_blank(grey)); /* uniform, whatever the colour */
    assert_false(carrel_image_ppm_differs(black, other));
    assert_true(carrel_image_ppm_differs(black, grey));
    assert_true(carrel_image_ppm_differs(black, smaller)); /* same bytes, other shape */
    /* One channel of the last pixel is enough. */
    set_pixel(&other, 8 * 6 * 3 - 1, 1);
    assert_false(carrel_image_ppm_is_blank(other));
    assert_true(carrel_image_ppm_differs(black, other));
    /* On a real screen a blinking cursor (a few hundred pixels of 1024x768) is no change. */
    {
        g_autoptr(GBytes) screen = make_ppm(1024, 768, 0x20);
        g_autoptr(GBytes) blink = make_ppm(1024, 768, 0x20);
        g_autoptr(GBytes) moved = make_ppm(1024, 768, 0x20);

        for (int i = 0; i < 8 * 16; i++)
            set_pixel(&blink, (gsize)i * 3, 0xff);
        for (int i = 0; i < 800; i++) /* over 786, a tenth of a percent */
            set_pixel(&moved, (gsize)i * 3, 0xff);
        assert_false(carrel_image_ppm_differs(screen, blink));
        assert_true(carrel_image_ppm_differs(screen, moved));
    }
    /* Headers may differ in whitespace only. */
    g_byte_array_append(buf, (const guint8 *)spaced_text, sizeof(spaced_text) - 1);
    for (int i = 0; i < 8 * 6 * 3; i++) {
        guint8 zero = 0;
        g_byte_array_append(buf, &zero, 1);
    }
    spaced = g_bytes_new(buf->data, buf->len);
    assert_false(carrel_image_ppm_differs(black, spaced));
    assert_true(carrel_image_ppm_differs(black, bad));
    assert_true(carrel_image_ppm_differs(bad, bad));
}

static GBytes *
make_png(guint width, guint height, guint32 format, guint8 fill)
{
    png_image image;
    gsize channels = PNG_IMAGE_SAMPLE_CHANNELS(format);
    g_autofree guint8 *pixels = g_malloc((gsize)width * height * channels);
    png_alloc_size_t size = 0;
    guint8 *out;

    memset(pixels, fill, (gsize)width * height * channels);
    pixels[0] = (guint8)(fill + 1); /* not blank */
    memset(&image, 0, sizeof(image));
    image.version = PNG_IMAGE_VERSION;
    image.width = width;
    image.height = height;
    image.format = format;
    assert_true(png_image_write_to_memory(&image, NULL, &size, 0, pixels, 0, NULL));
    out = g_malloc(size);
    assert_true(png_image_write_to_memory(&image, out, &size, 0, pixels, 0, NULL));
    return g_bytes_new_take(out, size);
}

static guint32
crc32_of(const guint8 *data, gsize len)
{
    guint32 crc = 0xffffffffu;

    for (gsize i = 0; i < len; i++) {
        crc ^= data[i];
        for (int k = 0; k < 8; k++)
            crc = (crc >> 1) ^ (0xedb88320u & -(crc & 1));
    }
    return ~crc;
}

/* The PNG with its IHDR width and height replaced (CRC fixed, so only the size is hostile). */
static GBytes *
png_with_size(GBytes *png, guint32 width, guint32 height)
{
    gsize len = 0;
    guint8 *data = g_memdup2(g_bytes_get_data(png, &len), g_bytes_get_size(png));
    guint32 be_width = GUINT32_TO_BE(width), be_height = GUINT32_TO_BE(height), crc;

    /* signature (8), IHDR length (4), "IHDR" (4), width, height, 5 bytes, CRC */
    assert_memory_equal(data + 12, "IHDR", 4);
    memcpy(data + 16, &be_width, 4);
    memcpy(data + 20, &be_height, 4);
    crc = GUINT32_TO_BE(crc32_of(data + 12, 4 + 13));
    memcpy(data + 29, &crc, 4);
    return g_bytes_new_take(data, len);
}

static void
assert_png_refused(GBytes *png, int code, const char *fragment)
{
    g_autoptr(GError) error = NULL;
    g_autoptr(GBytes) ppm = carrel_image_png_to_ppm(png, &error);

    assert_null(ppm);
    assert_error(error, code, fragment);
    assert_null(strchr(error->message, '\n'));
}

static void
test_png_decode(void **state)
{
    g_autoptr(GBytes) rgb = make_png(5, 4, PNG_FORMAT_RGB, 0x40);
    g_autoptr(GBytes) rgba = make_png(5, 4, PNG_FORMAT_RGBA, 0x40);
    g_autoptr(GBytes) gray = make_png(3, 2, PNG_FORMAT_GRAY, 0x10);
    g_autoptr(GBytes) ppm = NULL;
    g_autoptr(GBytes) gray_ppm = NULL;
    g_autoptr(GBytes) rgba_ppm = NULL;
    g_autoptr(GError) error = NULL;
    guint width = 0, height = 0;
    gsize offset = 0;
    const guint8 *pixels;

    ppm = carrel_image_png_to_ppm(rgb, &error);
    assert_non_null(ppm);
    assert_true(carrel_image_ppm_parse(ppm, &width, &height, &offset, NULL));
    assert_int_equal(width, 5);
    assert_int_equal(height, 4);
    pixels = (const guint8 *)g_bytes_get_data(ppm, NULL) + offset;
    assert_int_equal(pixels[0], 0x41);
    assert_int_equal(pixels[1], 0x40);
    assert_false(carrel_image_ppm_is_blank(ppm));
    gray_ppm = carrel_image_png_to_ppm(gray, NULL);
    assert_non_null(gray_ppm);
    assert_true(carrel_image_ppm_parse(gray_ppm, &width, &height, NULL, NULL));
    assert_int_equal(width * 10 + height, 32);
    rgba_ppm = carrel_image_png_to_ppm(rgba, NULL);
    assert_non_null(rgba_ppm);
    assert_true(carrel_image_ppm_parse(rgba_ppm, NULL, NULL, NULL, NULL));
}

static void
test_png_hostile(void **state)
{
    g_autoptr(GBytes) rgb = make_png(5, 4, PNG_FORMAT_RGB, 0x40);
    gsize len = g_bytes_get_size(rgb);
    g_autoptr(GBytes) cut = g_bytes_new_from_bytes(rgb, 0, len - 20);
    g_autoptr(GBytes) signature_only = g_bytes_new_from_bytes(rgb, 0, 8);
    g_autoptr(GBytes) wide = png_with_size(rgb, 16385, 1);
    g_autoptr(GBytes) zero = png_with_size(rgb, 0, 4);
    g_autoptr(GBytes) huge = png_with_size(rgb, 16384, 16384);
    g_autoptr(GBytes) lying = png_with_size(rgb, 500, 400);
    g_autoptr(GBytes) absurd = png_with_size(rgb, 0x7fffffff, 0x7fffffff);
    g_autofree guint8 *flipped = g_memdup2(g_bytes_get_data(rgb, NULL), len);
    g_autoptr(GBytes) bad_crc = NULL;
    g_autoptr(GBytes) ppm = make_ppm(2, 2, 0);

    flipped[30] ^= 0xff; /* inside the IHDR CRC */
    bad_crc = g_bytes_new(flipped, len);
    assert_png_refused(cut, CARREL_ERROR_INVALID_ARG, "png is invalid");
    assert_png_refused(signature_only, CARREL_ERROR_INVALID_ARG, "png is invalid");
    assert_png_refused(bad_crc, CARREL_ERROR_INVALID_ARG, "png is invalid");
    assert_png_refused(zero, CARREL_ERROR_INVALID_ARG, NULL);
    assert_png_refused(wide, CARREL_ERROR_INVALID_ARG, "out of range");
    /* Refused from the header alone: 768 MiB of pixels are never allocated. */
    assert_png_refused(huge, CARREL_ERROR_LIMIT, "exceeds");
    assert_png_refused(absurd, CARREL_ERROR_INVALID_ARG, NULL);
    /* Claims more rows than its data holds. */
    assert_png_refused(lying, CARREL_ERROR_INVALID_ARG, "png is invalid");
    assert_png_refused(ppm, CARREL_ERROR_INVALID_ARG, "not png");
}

static void
test_to_ppm(void **state)
{
    g_autoptr(GBytes) png = make_png(5, 4, PNG_FORMAT_RGB, 0x40);
    g_autoptr(GBytes) ppm = make_ppm(2, 2, 0);
    g_autoptr(GBytes) bad = g_bytes_new_static("P6\n99999 1\n255\n", 15);
    g_autoptr(GBytes) from_png = carrel_image_to_ppm(png, NULL);
    g_autoptr(GBytes) from_ppm = carrel_image_to_ppm(ppm, NULL);
    g_autoptr(GBytes) none = NULL;
    g_autoptr(GError) error = NULL;
    guint width = 0;

    assert_non_null(from_png);
    assert_true(carrel_image_ppm_parse(from_png, &width, NULL, NULL, NULL));
    assert_int_equal(width, 5);
    assert_ptr_equal(from_ppm, ppm); /* valid PPM is passed through, not copied */
    none = carrel_image_to_ppm(bad, &error);
    assert_null(none);
    assert_error(error, CARREL_ERROR_INVALID_ARG, "out of range");
    g_clear_error(&error);
    assert_null(carrel_image_to_ppm(NULL, &error));
    assert_error(error, CARREL_ERROR_INVALID_ARG, "missing");
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_ppm_parse),  cmocka_unit_test(test_ppm_blank_and_differs),
        cmocka_unit_test(test_png_decode), cmocka_unit_test(test_png_hostile),
        cmocka_unit_test(test_to_ppm),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
