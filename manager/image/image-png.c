/*
 * PNG: what libvirt hands over for QEMU >= 7.1, decoded to binary PPM with libpng's simplified
 * API under the module's size limits. Untrusted input: the guest drew it.
 */
#include <png.h>
#include <string.h>

#define CARREL_IMAGE_PRIV_H_ALLOW
#include "image/image-priv.h"

static gboolean
is_png(GBytes *image)
{
    static const guint8 signature[8] = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1a, '\n'};
    gsize len = 0;
    const guint8 *data = g_bytes_get_data(image, &len);

    return len >= sizeof(signature) && memcmp(data, signature, sizeof(signature)) == 0;
}

static void
set_png_error(GError **error, const png_image *image)
{
    /* libpng's own words (never the image's text), kept on one line. */
    const char *message = carrel_util_is_clean_text(image->message) ? image->message : "?";

    g_set_error(error, CARREL_ERROR, CARREL_ERROR_INVALID_ARG, "png is invalid: %s", message);
}

GBytes *
carrel_image_png_to_ppm(GBytes *png, GError **error)
{
    png_image image;
    gsize len = 0, ppm_len = 0;
    const guint8 *data;
    guint8 *ppm, *pixels = NULL;

    if (!png || !is_png(png)) {
        g_set_error(error, CARREL_ERROR, CARREL_ERROR_INVALID_ARG, "image is not png");
        return NULL;
    }
    data = g_bytes_get_data(png, &len);
    memset(&image, 0, sizeof(image));
    image.version = PNG_IMAGE_VERSION;
    /* The simplified API: no setjmp here, libpng reports through image.message. */
    if (!png_image_begin_read_from_memory(&image, data, len)) {
        set_png_error(error, &image);
        png_image_free(&image);
        return NULL;
    }
    /* Checked while libpng has read the header only: no pixel is decoded before. */
    ppm = carrel_image_ppm_alloc(image.width, image.height, &ppm_len, &pixels, error);
    if (!ppm) {
        g_prefix_error(error, "png: ");
        png_image_free(&image);
        return NULL;
    }
    image.format = PNG_FORMAT_RGB;
    /* Alpha, if any, is composited onto black; png_image_finish_read frees libpng's state. */
    if (!png_image_finish_read(&image, NULL, pixels, 0, NULL)) {
        set_png_error(error, &image);
        g_free(ppm);
        return NULL;
    }
    return g_bytes_new_take(ppm, ppm_len);
}

GBytes *
carrel_image_to_ppm(GBytes *image, GError **error)
{
    if (image && is_png(image))
        return carrel_image_png_to_ppm(image, error);
    if (!carrel_image_ppm_parse(image, NULL, NULL, NULL, error))
        return NULL;
    return g_bytes_ref(image);
}
