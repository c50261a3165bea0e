/*
 * libFuzzer harness for screenshots as the guest and QEMU hand them over (untrusted): the strict
 * PPM parser, the PNG decoder and the readiness comparisons, then crop, scale and encoding of
 * whatever parsed, with sizes taken from the input (kept small so that runs stay fast).
 * Built with -Dfuzz=true and clang (see tests/fuzz/meson.build).
 */
#include <stddef.h>
#include <stdint.h>

#include "image/image.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* A result is valid PPM of the asked size, or there is an error: never both, never neither. */
static void
check_result(GBytes *out, GError *error, guint width, guint height)
{
    guint w = 0, h = 0;

    if ((out == NULL) == (error == NULL))
        __builtin_trap();
    if (out && (!carrel_image_ppm_parse(out, &w, &h, NULL, NULL) || w != width || h != height))
        __builtin_trap();
}

/* The encoders on a small image; PNG is lossless, so it must decode to the same bytes. */
static void
encode(GBytes *ppm, guint quality)
{
    g_autoptr(GBytes) png = carrel_image_encode_png(ppm, NULL);
    g_autoptr(GBytes) back = png ? carrel_image_png_to_ppm(png, NULL) : NULL;
    g_autoptr(GError) error = NULL;
    g_autoptr(GBytes) jpeg = carrel_image_encode_jpeg(ppm, quality, &error);

    if (!back || !g_bytes_equal(back, ppm))
        __builtin_trap();
    if ((jpeg != NULL) != (quality >= 1 && quality <= 100) || (jpeg == NULL) != (error != NULL))
        __builtin_trap();
}

static void
transform(GBytes *ppm, guint width, guint height, const guint8 *pixels)
{
    /* Regions and sizes from the first pixel bytes, sometimes outside the image on purpose. */
    guint x = pixels[0] % (width + 1), y = pixels[1] % (height + 1);
    guint cw = pixels[2] % (width + 2), ch = pixels[0] % (height + 2);
    guint sw = 1 + pixels[1] % 96, sh = 1 + pixels[2] % 96;
    gboolean inside =
        cw > 0 && ch > 0 && x < width && y < height && cw <= width - x && ch <= height - y;
    g_autoptr(GError) crop_error = NULL;
    g_autoptr(GError) scale_error = NULL;
    g_autoptr(GBytes) crop = carrel_image_crop(ppm, x, y, cw, ch, &crop_error);
    g_autoptr(GBytes) scaled = carrel_image_scale(ppm, sw, sh, &scale_error);

    check_result(crop, crop_error, cw, ch);
    check_result(scaled, scale_error, sw, sh);
    if ((crop != NULL) != inside || !scaled)
        __builtin_trap();
    encode(scaled, pixels[0] % 102); /* 0 and 101 are refused */
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    g_autoptr(GBytes) bytes = g_bytes_new(data, size);
    g_autoptr(GBytes) ppm = NULL;
    g_autoptr(GError) error = NULL;
    guint w = 0, h = 0;
    gsize offset = 0;
    gboolean valid = carrel_image_ppm_parse(bytes, &w, &h, &offset, NULL);

    /* A valid PPM always holds exactly its pixels after the header. */
    if (valid && (gsize)w * h * 3 != size - offset)
        __builtin_trap();
    (void)carrel_image_ppm_is_blank(bytes);
    if (valid && carrel_image_ppm_differs(bytes, bytes))
        __builtin_trap();
    ppm = carrel_image_to_ppm(bytes, &error);
    /* Exactly one of a result and an error, and a result is valid PPM. */
    if ((ppm == NULL) == (error == NULL))
        __builtin_trap();
    if (ppm && !carrel_image_ppm_parse(ppm, NULL, NULL, NULL, NULL))
        __builtin_trap();
    if (valid)
        transform(bytes, w, h, data + offset);
    return 0;
}
