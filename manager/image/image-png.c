/*
 * PNG: what libvirt hands over for QEMU >= 7.1, decoded to binary PPM with libpng's simplified
 * API under the module's size limits (untrusted input: the guest drew it), and what the
 * screenshot API returns, encoded with libpng's full API for its compression settings.
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

/*
 * zlib level 3 without row filters (libpng's own PNG_IMAGE_FLAG_FAST preset, chosen explicitly
 * here). Measured on real screenshots of flat UI and text (1300x900 to 3013x1561): no filter is
 * both smaller and faster than any of them there (1300x900: 132 KiB in 7 ms against 141 KiB in
 * 28 ms for libpng's default, level 6 with adaptive filters); level 3 costs what level 1 does
 * for a few percent less; level 6 saves 10-25 % more for 2-4 times the time, the wrong trade for
 * an image a model waits for on every step. Photos and smooth wallpapers compress ~15 % worse
 * without filters, a rare case on a working desktop.
 */
#define PNG_ZLIB_LEVEL 3
#define PNG_ROW_FILTERS PNG_FILTER_NONE

/* On the heap: libpng writes to it between setjmp and longjmp. */
typedef struct {
    GByteArray *out;
    char message[128];
} PngSink;

static void
on_png_write(png_structp png, png_bytep data, size_t len)
{
    PngSink *sink = png_get_io_ptr(png);

    g_byte_array_append(sink->out, data, (guint)len);
}

static void
on_png_flush(png_structp png)
{
}

static void
on_png_error(png_structp png, png_const_charp message)
{
    PngSink *sink = png_get_error_ptr(png);

    g_strlcpy(sink->message, message, sizeof(sink->message));
    png_longjmp(png, 1);
}

/* Warnings are dropped: libpng's default prints them on stderr. */
static void
on_png_warning(png_structp png, png_const_charp message)
{
}

/* Every libpng call that may fail, under the caller's setjmp. */
static void
write_png(png_structp png, png_infop info, const CarrelImageView *view)
{
    png_set_IHDR(png, info, view->width, view->height, 8, PNG_COLOR_TYPE_RGB, PNG_INTERLACE_NONE,
                 PNG_COMPRESSION_TYPE_DEFAULT, PNG_FILTER_TYPE_DEFAULT);
    png_set_compression_level(png, PNG_ZLIB_LEVEL);
    png_set_filter(png, PNG_FILTER_TYPE_BASE, PNG_ROW_FILTERS);
    png_write_info(png, info);
    for (guint y = 0; y < view->height; y++)
        png_write_row(png, view->pixels + (gsize)y * view->width * 3);
    png_write_end(png, NULL);
}

/*
 * libpng's errors longjmp back here: this function changes none of its locals after setjmp, so
 * each holds its value after a longjmp; the caller owns everything else.
 */
static gboolean
encode_png(const CarrelImageView *view, PngSink *sink, GError **error)
{
    png_structp png =
        png_create_write_struct(PNG_LIBPNG_VER_STRING, sink, on_png_error, on_png_warning);
    png_infop info = png ? png_create_info_struct(png) : NULL;

    if (!info) {
        png_destroy_write_struct(&png, NULL);
        g_set_error(error, CARREL_ERROR, CARREL_ERROR_INTERNAL, "cannot start the png encoder");
        return FALSE;
    }
    png_set_write_fn(png, sink, on_png_write, on_png_flush);
    if (setjmp(png_jmpbuf(png))) {
        png_destroy_write_struct(&png, &info);
        g_set_error(error, CARREL_ERROR, CARREL_ERROR_INTERNAL, "png encoding failed: %s",
                    sink->message);
        return FALSE;
    }
    write_png(png, info, view);
    png_destroy_write_struct(&png, &info);
    return TRUE;
}

GBytes *
carrel_image_encode_png_view(const CarrelImageView *view, GError **error)
{
    g_autoptr(GByteArray) out = g_byte_array_new();
    g_autofree PngSink *sink = g_new0(PngSink, 1);

    sink->out = out;
    if (!encode_png(view, sink, error))
        return NULL;
    return g_byte_array_free_to_bytes(g_steal_pointer(&out));
}

GBytes *
carrel_image_encode_png(GBytes *ppm, GError **error)
{
    CarrelImageView view;

    if (!carrel_image_view(ppm, &view, error))
        return NULL;
    return carrel_image_encode_png_view(&view, error);
}
