#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <math.h>
#include <string.h>
#include <png.h>
#include <jpeglib.h>

#define CARREL_IMAGE_PRIV_H_ALLOW
#include "image/image-priv.h"

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
    /* The largest side alone is fine; a huge declared area is checked against the real length. */
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
    /* Declares more rows than its data holds. */
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

/* --- crop and scale ----------------------------------------------------------------------------
 */

typedef guint8 (*PixelFn)(guint x, guint y, guint channel);

static GBytes *
make_image(guint width, guint height, PixelFn fn)
{
    g_autofree char *header = g_strdup_printf("P6\n%u %u\n255\n", width, height);
    gsize header_len = strlen(header), len = header_len + (gsize)width * height * 3;
    guint8 *data = g_malloc(len);

    memcpy(data, header, header_len);
    for (guint y = 0; y < height; y++)
        for (guint x = 0; x < width; x++)
            for (guint c = 0; c < 3; c++)
                data[header_len + ((gsize)y * width + x) * 3 + c] = fn(x, y, c);
    return g_bytes_new_take(data, len);
}

/* The pixels of a valid PPM, with its size checked. */
static const guint8 *
pixels_of(GBytes *ppm, guint width, guint height)
{
    guint w = 0, h = 0;
    gsize offset = 0;

    assert_non_null(ppm);
    assert_true(carrel_image_ppm_parse(ppm, &w, &h, &offset, NULL));
    assert_int_equal(w, width);
    assert_int_equal(h, height);
    return (const guint8 *)g_bytes_get_data(ppm, NULL) + offset;
}

/* Every channel of every pixel of ppm (width x height) against a grey level per pixel. */
static void
assert_grey(GBytes *ppm, guint width, guint height, const guint8 *expected)
{
    const guint8 *p = pixels_of(ppm, width, height);

    for (gsize i = 0; i < (gsize)width * height; i++)
        for (int c = 0; c < 3; c++)
            if (p[i * 3 + c] != expected[i])
                fail_msg("pixel %zu channel %d is %u, expected %u", i, c, p[i * 3 + c],
                         expected[i]);
}

static guint8
gradient(guint x, guint y, guint c)
{
    return (guint8)(c == 0 ? x * 30 : c == 1 ? y * 50 : x + y * 7);
}

static void
assert_crop_refused(GBytes *ppm, guint x, guint y, guint w, guint h, const char *fragment)
{
    g_autoptr(GError) error = NULL;
    g_autoptr(GBytes) out = carrel_image_crop(ppm, x, y, w, h, &error);

    assert_null(out);
    assert_error(error, CARREL_ERROR_INVALID_ARG, fragment);
}

static void
test_crop(void **state)
{
    g_autoptr(GBytes) image = make_image(7, 5, gradient);
    g_autoptr(GBytes) part = carrel_image_crop(image, 2, 1, 3, 2, NULL);
    g_autoptr(GBytes) whole = carrel_image_crop(image, 0, 0, 7, 5, NULL);
    g_autoptr(GBytes) corner = carrel_image_crop(image, 6, 4, 1, 1, NULL);
    g_autoptr(GBytes) bad = g_bytes_new_static("P6\n2 2\n255\n123", 14);
    const guint8 *p = pixels_of(part, 3, 2);

    for (guint y = 0; y < 2; y++)
        for (guint x = 0; x < 3; x++)
            for (guint c = 0; c < 3; c++)
                assert_int_equal(p[(y * 3 + x) * 3 + c], gradient(x + 2, y + 1, c));
    assert_memory_equal(pixels_of(whole, 7, 5), pixels_of(image, 7, 5), 7 * 5 * 3);
    assert_memory_equal(pixels_of(corner, 1, 1), pixels_of(image, 7, 5) + (4 * 7 + 6) * 3, 3);
    assert_crop_refused(image, 0, 0, 0, 1, "7x5 image");
    assert_crop_refused(image, 0, 0, 1, 0, "7x5 image");
    assert_crop_refused(image, 5, 0, 3, 1, "crop region 3x1 at 5,0 is not inside the 7x5 image");
    assert_crop_refused(image, 7, 0, 1, 1, "7x5 image");
    assert_crop_refused(image, 0, 4, 1, 2, "7x5 image");
    assert_crop_refused(image, 0, 0, 8, 5, "7x5 image");
    /* Sums that would wrap around in 32 bits. */
    assert_crop_refused(image, 2, 0, G_MAXUINT - 1, 1, "7x5 image");
    assert_crop_refused(image, G_MAXUINT, G_MAXUINT, 2, 2, "7x5 image");
    assert_crop_refused(bad, 0, 0, 1, 1, "does not match");
    assert_crop_refused(NULL, 0, 0, 1, 1, "missing");
}

static guint8
checker_1px(guint x, guint y, guint c)
{
    return (x + y) % 2 ? 255 : 0;
}

static guint8
checker_2px(guint x, guint y, guint c)
{
    return (x / 2 + y / 2) % 2 ? 255 : 0;
}

static guint8
ramp_x(guint x, guint y, guint c)
{
    static const guint8 values[] = {0, 100, 200, 255};
    return values[x % 4];
}

static guint8
ramp_y(guint x, guint y, guint c)
{
    return ramp_x(y, x, c);
}

static guint8
thirds(guint x, guint y, guint c)
{
    return (guint8)(x * 90);
}

static guint8
pair(guint x, guint y, guint c)
{
    return (guint8)((x + y) * 200);
}

static guint8
bytes_ramp(guint x, guint y, guint c)
{
    return (guint8)(x % 256);
}

static GBytes *
scaled(GBytes *ppm, guint width, guint height)
{
    g_autoptr(GError) error = NULL;
    GBytes *out = carrel_image_scale(ppm, width, height, &error);

    if (!out)
        fail_msg("scale to %ux%u: %s", width, height, error->message);
    return out;
}

static void
test_scale_shrink(void **state)
{
    g_autoptr(GBytes) fine = make_image(4, 4, checker_1px);
    g_autoptr(GBytes) coarse = make_image(4, 4, checker_2px);
    g_autoptr(GBytes) three = make_image(3, 1, thirds);
    g_autoptr(GBytes) wide = make_image(1024, 1, bytes_ramp);
    g_autoptr(GBytes) a = scaled(fine, 2, 2);
    g_autoptr(GBytes) b = scaled(coarse, 2, 2);
    g_autoptr(GBytes) c = scaled(three, 2, 1);
    g_autoptr(GBytes) d = scaled(wide, 1, 1);
    g_autoptr(GBytes) e = scaled(fine, 1, 1);
    g_autoptr(GBytes) f = scaled(wide, 4, 1);
    static const guint8 half[] = {128, 128, 128, 128};
    static const guint8 blocks[] = {0, 255, 255, 0};
    static const guint8 third_weights[] = {30, 150};
    static const guint8 mean[] = {128};
    /* 1024 pixels of 0..255 four times over: each quarter averages to 127.5 */
    static const guint8 quarters[] = {128, 128, 128, 128};

    /* Box averages: 2 black + 2 white; whole blocks stay pure (nearest-neighbour would give
     * black or white for the fine one, never grey). */
    assert_grey(a, 2, 2, half);
    assert_grey(b, 2, 2, blocks);
    /* 3 -> 2: new pixel 0 covers 1.5 source pixels: 0 * 2/3 + 90 * 1/3, then 90 / 3 + 180 * 2/3 */
    assert_grey(c, 2, 1, third_weights);
    assert_grey(d, 1, 1, mean);
    assert_grey(e, 1, 1, mean);
    assert_grey(f, 4, 1, quarters);
}

static void
test_scale_grow_and_mixed(void **state)
{
    g_autoptr(GBytes) two = make_image(2, 1, pair);
    g_autoptr(GBytes) tall = make_image(1, 2, pair);
    g_autoptr(GBytes) row = make_image(4, 1, ramp_x);
    g_autoptr(GBytes) column = make_image(1, 4, ramp_y);
    g_autoptr(GBytes) image = make_image(7, 5, gradient);
    g_autoptr(GBytes) a = scaled(two, 4, 1);
    g_autoptr(GBytes) b = scaled(tall, 1, 4);
    g_autoptr(GBytes) c = scaled(row, 2, 3);
    g_autoptr(GBytes) d = scaled(column, 3, 2);
    g_autoptr(GBytes) same = scaled(image, 7, 5);
    g_autoptr(GBytes) e = scaled(two, 1, 1);
    /* Centres aligned: source x of new pixel i is (i + 0.5) / 2 - 0.5, clamped to the edges. */
    static const guint8 linear[] = {0, 50, 150, 200};
    static const guint8 shrunk_x[] = {50, 228, 50, 228, 50, 228};
    static const guint8 shrunk_y[] = {50, 50, 50, 228, 228, 228};
    static const guint8 mean[] = {100};

    assert_grey(a, 4, 1, linear);
    assert_grey(b, 1, 4, linear);
    /* One axis shrinks (box), the other grows (linear, here from a single row: copies). */
    assert_grey(c, 2, 3, shrunk_x);
    assert_grey(d, 3, 2, shrunk_y);
    assert_memory_equal(pixels_of(same, 7, 5), pixels_of(image, 7, 5), 7 * 5 * 3);
    assert_grey(e, 1, 1, mean);
}

static void
assert_scale_refused(GBytes *ppm, guint width, guint height, int code, const char *fragment)
{
    g_autoptr(GError) error = NULL;
    g_autoptr(GBytes) out = carrel_image_scale(ppm, width, height, &error);

    assert_null(out);
    assert_error(error, code, fragment);
}

static void
test_scale_refused(void **state)
{
    g_autoptr(GBytes) image = make_image(7, 5, gradient);
    g_autoptr(GBytes) bad = g_bytes_new_static("P6\n2 2\n255\n123", 14);

    assert_scale_refused(image, 0, 5, CARREL_ERROR_INVALID_ARG, "out of range");
    assert_scale_refused(image, 5, 0, CARREL_ERROR_INVALID_ARG, "out of range");
    assert_scale_refused(image, 16385, 1, CARREL_ERROR_INVALID_ARG, "out of range");
    /* Sides allowed, but 768 MiB of pixels: refused before anything is allocated. */
    assert_scale_refused(image, 16384, 16384, CARREL_ERROR_LIMIT, "exceeds");
    assert_scale_refused(bad, 1, 1, CARREL_ERROR_INVALID_ARG, "does not match");
    assert_scale_refused(NULL, 1, 1, CARREL_ERROR_INVALID_ARG, "missing");
}

static void
assert_fit(gboolean by_edge, guint width, guint height, double value, guint expected_w,
           guint expected_h)
{
    g_autoptr(GError) error = NULL;
    guint w = 0, h = 0;
    gboolean ok = by_edge ? carrel_image_fit_max_edge(width, height, (guint)value, &w, &h, &error)
                          : carrel_image_fit_factor(width, height, value, &w, &h, &error);

    if (!ok)
        fail_msg("fit %ux%u by %g: %s", width, height, value, error->message);
    if (w != expected_w || h != expected_h)
        fail_msg("fit %ux%u by %g: %ux%u, expected %ux%u", width, height, value, w, h, expected_w,
                 expected_h);
}

static void
assert_fit_refused(gboolean by_edge, guint width, guint height, double value, int code)
{
    g_autoptr(GError) error = NULL;
    guint w = 77, h = 77;
    gboolean ok = by_edge ? carrel_image_fit_max_edge(width, height, (guint)value, &w, &h, &error)
                          : carrel_image_fit_factor(width, height, value, &w, &h, &error);

    assert_false(ok);
    assert_error(error, code, NULL);
    assert_int_equal(w * 100 + h, 7777); /* outputs untouched */
}

static void
test_fit(void **state)
{
    assert_fit(TRUE, 1920, 1080, 1280, 1280, 720);
    assert_fit(TRUE, 1080, 1920, 1280, 720, 1280);
    assert_fit(TRUE, 1000, 1000, 500, 500, 500);
    assert_fit(TRUE, 1280, 800, 1024, 1024, 640);
    assert_fit(TRUE, 5, 3, 4, 4, 2);      /* 2.4 rounds down */
    assert_fit(TRUE, 3, 2, 2, 2, 1);      /* 1.33 */
    assert_fit(TRUE, 4, 3, 2, 2, 2);      /* 1.5 rounds up */
    assert_fit(TRUE, 1000, 1, 10, 10, 1); /* 0.01 is still one pixel */
    assert_fit(TRUE, 1, 16384, 100, 1, 100);
    /* Never larger than the image. */
    assert_fit(TRUE, 800, 600, 1280, 800, 600);
    assert_fit(TRUE, 1280, 800, 1280, 1280, 800);
    assert_fit_refused(TRUE, 1280, 800, 0, CARREL_ERROR_INVALID_ARG);
    assert_fit_refused(TRUE, 1280, 800, 16385, CARREL_ERROR_INVALID_ARG);
    assert_fit_refused(TRUE, 0, 800, 100, CARREL_ERROR_INVALID_ARG);
    assert_fit_refused(TRUE, 1280, 16385, 100, CARREL_ERROR_INVALID_ARG);

    assert_fit(FALSE, 1280, 800, 0.5, 640, 400);
    assert_fit(FALSE, 1280, 800, 1.0, 1280, 800);
    assert_fit(FALSE, 1280, 800, 4.0, 5120, 3200);
    assert_fit(FALSE, 3, 3, 0.5, 2, 2); /* 1.5 rounds up */
    assert_fit(FALSE, 1280, 800, 0.001, 1, 1);
    assert_fit(FALSE, 1, 1, 1e-300, 1, 1);
    assert_fit_refused(FALSE, 1280, 800, 0.0, CARREL_ERROR_INVALID_ARG);
    assert_fit_refused(FALSE, 1280, 800, -1.0, CARREL_ERROR_INVALID_ARG);
    assert_fit_refused(FALSE, 1280, 800, 4.01, CARREL_ERROR_INVALID_ARG);
    assert_fit_refused(FALSE, 1280, 800, NAN, CARREL_ERROR_INVALID_ARG);
    assert_fit_refused(FALSE, 1280, 800, INFINITY, CARREL_ERROR_INVALID_ARG);
    assert_fit_refused(FALSE, 0, 800, 1.0, CARREL_ERROR_INVALID_ARG);
    /* Sides within the limit, but over 64 MiB of pixels; then a side over 16384. */
    assert_fit_refused(FALSE, 4096, 4096, 4.0, CARREL_ERROR_LIMIT);
    assert_fit_refused(FALSE, 16384, 1, 2.0, CARREL_ERROR_LIMIT);
}

/* --- encoders ----------------------------------------------------------------------------------
 */

static guint8
noise(guint x, guint y, guint c)
{
    return (guint8)((x * 7919u + y * 104729u + c * 31u) * 2654435761u >> 24);
}

static guint8
flat(guint x, guint y, guint c)
{
    return (guint8)(0x30 + c * 0x20);
}

/* Decodes PNG with libpng itself, not through the module, into RGB8 pixels. */
static guint8 *
decode_png(GBytes *png, guint *ret_width, guint *ret_height)
{
    png_image image;
    gsize len = 0;
    const guint8 *data = g_bytes_get_data(png, &len);
    guint8 *pixels;

    memset(&image, 0, sizeof(image));
    image.version = PNG_IMAGE_VERSION;
    assert_true(png_image_begin_read_from_memory(&image, data, len));
    /* 8-bit RGB as written, no alpha, no palette. */
    assert_int_equal(image.format, PNG_FORMAT_RGB);
    pixels = g_malloc(PNG_IMAGE_SIZE(image));
    assert_true(png_image_finish_read(&image, NULL, pixels, 0, NULL));
    *ret_width = image.width;
    *ret_height = image.height;
    return pixels;
}

static void
test_encode_png(void **state)
{
    g_autoptr(GBytes) image = make_image(123, 45, noise);
    g_autoptr(GBytes) screen = make_image(1280, 800, flat);
    g_autoptr(GBytes) tiny = make_image(1, 1, flat);
    g_autoptr(GBytes) png = carrel_image_encode_png(image, NULL);
    g_autoptr(GBytes) screen_png = carrel_image_encode_png(screen, NULL);
    g_autoptr(GBytes) tiny_png = carrel_image_encode_png(tiny, NULL);
    g_autoptr(GBytes) back = NULL;
    g_autoptr(GBytes) bad = g_bytes_new_static("P6\n2 2\n255\n123", 14);
    g_autoptr(GBytes) none = NULL;
    g_autoptr(GError) error = NULL;
    g_autofree guint8 *pixels = NULL;
    g_autofree guint8 *tiny_pixels = NULL;
    guint width = 0, height = 0;

    assert_non_null(png);
    assert_memory_equal(g_bytes_get_data(png, NULL), "\x89PNG\r\n\x1a\n", 8);
    pixels = decode_png(png, &width, &height);
    assert_int_equal(width * 1000 + height, 123045);
    assert_memory_equal(pixels, pixels_of(image, 123, 45), 123 * 45 * 3);
    /* The module's own decoder agrees, byte for byte. */
    back = carrel_image_png_to_ppm(png, NULL);
    assert_memory_equal(pixels_of(back, 123, 45), pixels_of(image, 123, 45), 123 * 45 * 3);
    tiny_pixels = decode_png(tiny_png, &width, &height);
    assert_int_equal(width * 10 + height, 11);
    assert_memory_equal(tiny_pixels, pixels_of(tiny, 1, 1), 3);
    /* Compressed at all: 3 MB of one colour. */
    assert_non_null(screen_png);
    assert_true(g_bytes_get_size(screen_png) < 32 * 1024);
    none = carrel_image_encode_png(bad, &error);
    assert_null(none);
    assert_error(error, CARREL_ERROR_INVALID_ARG, "does not match");
}

/* libpng's longjmp path: an empty image makes it fail inside the encoder (leaks show under the
 * sanitizer build). */
static void
test_encode_png_failure(void **state)
{
    static const guint8 pixel[3] = {1, 2, 3};
    CarrelImageView empty = {0, 1, pixel};
    g_autoptr(GError) error = NULL;
    g_autoptr(GBytes) png = carrel_image_encode_png_view(&empty, &error);

    assert_null(png);
    assert_error(error, CARREL_ERROR_INTERNAL, "png encoding failed: ");
    assert_null(strchr(error->message, '\n'));
}

static void
on_test_jpeg_error(j_common_ptr cinfo)
{
    char message[JMSG_LENGTH_MAX];

    cinfo->err->format_message(cinfo, message);
    fail_msg("libjpeg: %s", message);
}

/* Decodes JPEG with libjpeg itself into RGB8 pixels; *ret_subsampled says whether any
 * component is stored at less than full resolution. */
static guint8 *
decode_jpeg(GBytes *jpeg, guint *ret_width, guint *ret_height, gboolean *ret_subsampled)
{
    struct jpeg_decompress_struct cinfo;
    struct jpeg_error_mgr err;
    gsize len = 0;
    const guint8 *data = g_bytes_get_data(jpeg, &len);
    guint8 *pixels;
    gboolean subsampled = FALSE;

    cinfo.err = jpeg_std_error(&err);
    err.error_exit = on_test_jpeg_error;
    jpeg_create_decompress(&cinfo);
    jpeg_mem_src(&cinfo, data, (unsigned long)len);
    assert_int_equal(jpeg_read_header(&cinfo, TRUE), JPEG_HEADER_OK);
    for (int i = 0; i < cinfo.num_components; i++)
        subsampled |= cinfo.comp_info[i].h_samp_factor != cinfo.max_h_samp_factor ||
                      cinfo.comp_info[i].v_samp_factor != cinfo.max_v_samp_factor;
    cinfo.out_color_space = JCS_RGB;
    jpeg_start_decompress(&cinfo);
    pixels = g_malloc((gsize)cinfo.output_width * cinfo.output_height * 3);
    while (cinfo.output_scanline < cinfo.output_height) {
        JSAMPROW row = pixels + (gsize)cinfo.output_scanline * cinfo.output_width * 3;
        jpeg_read_scanlines(&cinfo, &row, 1);
    }
    *ret_width = cinfo.output_width;
    *ret_height = cinfo.output_height;
    *ret_subsampled = subsampled;
    jpeg_finish_decompress(&cinfo);
    jpeg_destroy_decompress(&cinfo);
    return pixels;
}

/* A smooth image (JPEG's good case) with a coloured block: within tolerance after a round trip. */
static guint8
smooth(guint x, guint y, guint c)
{
    if (x >= 40 && x < 56 && y >= 16 && y < 32)
        return c == 0 ? 220 : 30; /* a red square */
    return (guint8)(c == 0 ? x * 2 : c == 1 ? y * 3 : 128);
}

static guint
max_difference(const guint8 *a, const guint8 *b, gsize len)
{
    guint worst = 0;

    for (gsize i = 0; i < len; i++)
        worst = MAX(worst, (guint)ABS((int)a[i] - (int)b[i]));
    return worst;
}

static void
assert_jpeg_refused(GBytes *ppm, guint quality, const char *fragment)
{
    g_autoptr(GError) error = NULL;
    g_autoptr(GBytes) jpeg = carrel_image_encode_jpeg(ppm, quality, &error);

    assert_null(jpeg);
    assert_error(error, CARREL_ERROR_INVALID_ARG, fragment);
}

static void
test_encode_jpeg(void **state)
{
    g_autoptr(GBytes) image = make_image(101, 67, smooth); /* not multiples of 8 */
    g_autoptr(GBytes) high = carrel_image_encode_jpeg(image, 95, NULL);
    g_autoptr(GBytes) low = carrel_image_encode_jpeg(image, 10, NULL);
    g_autoptr(GBytes) dot = make_image(1, 1, flat);
    g_autoptr(GBytes) tiny = carrel_image_encode_jpeg(dot, 1, NULL);
    g_autoptr(GBytes) bad = g_bytes_new_static("P6\n2 2\n255\n123", 14);
    g_autofree guint8 *pixels = NULL;
    g_autofree guint8 *tiny_pixels = NULL;
    const guint8 *data;
    guint width = 0, height = 0;
    gboolean subsampled = TRUE;

    assert_non_null(high);
    data = g_bytes_get_data(high, NULL);
    assert_int_equal(data[0], 0xff);
    assert_int_equal(data[1], 0xd8);
    assert_int_equal(data[g_bytes_get_size(high) - 2], 0xff);
    assert_int_equal(data[g_bytes_get_size(high) - 1], 0xd9);
    pixels = decode_jpeg(high, &width, &height, &subsampled);
    assert_int_equal(width * 1000 + height, 101067);
    assert_false(subsampled);
    assert_in_range(max_difference(pixels, pixels_of(image, 101, 67), 101 * 67 * 3), 0, 8);
    /* Lower quality, fewer bytes. */
    assert_non_null(low);
    assert_true(g_bytes_get_size(low) < g_bytes_get_size(high));
    /* Quality 1 (the lowest) and a single pixel still make a valid JPEG. */
    assert_non_null(tiny);
    tiny_pixels = decode_jpeg(tiny, &width, &height, &subsampled);
    assert_int_equal(width * 10 + height, 11);
    assert_jpeg_refused(image, 0, "jpeg quality 0 is out of range");
    assert_jpeg_refused(image, 101, "jpeg quality 101 is out of range");
    assert_jpeg_refused(image, G_MAXUINT, "out of range");
    assert_jpeg_refused(bad, 80, "does not match");
    assert_jpeg_refused(NULL, 80, "missing");
}

/* libjpeg's error_exit path (an empty image): longjmp, cleanup, an error, no leak. */
static void
test_encode_jpeg_failure(void **state)
{
    static const guint8 pixel[3] = {1, 2, 3};
    CarrelImageView empty = {1, 0, pixel};
    g_autoptr(GError) error = NULL;
    g_autoptr(GBytes) jpeg = carrel_image_encode_jpeg_view(&empty, 80, &error);

    assert_null(jpeg);
    assert_error(error, CARREL_ERROR_INTERNAL, "jpeg encoding failed: ");
    assert_null(strchr(error->message, '\n'));
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_ppm_parse),     cmocka_unit_test(test_ppm_blank_and_differs),
        cmocka_unit_test(test_png_decode),    cmocka_unit_test(test_png_hostile),
        cmocka_unit_test(test_to_ppm),        cmocka_unit_test(test_crop),
        cmocka_unit_test(test_scale_shrink),  cmocka_unit_test(test_scale_grow_and_mixed),
        cmocka_unit_test(test_scale_refused), cmocka_unit_test(test_fit),
        cmocka_unit_test(test_encode_png),    cmocka_unit_test(test_encode_png_failure),
        cmocka_unit_test(test_encode_jpeg),   cmocka_unit_test(test_encode_jpeg_failure),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
