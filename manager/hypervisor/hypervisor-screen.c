/*
 * Screenshots: PNG (what libvirt gives for QEMU >= 7.1) decoded to binary PPM (P6), a strict PPM
 * parser, and the pixel comparisons behind a "screen ready" check. The guest chooses the screen
 * size and QEMU encodes what the guest drew, so every image is untrusted input.
 */
#include <png.h>
#include <string.h>

#define CARREL_HYPERVISOR_PRIV_H_ALLOW
#include "hypervisor/hypervisor-priv.h"

#define PPM_MAX_DIGITS 5
#define PPM_MAXVAL 255

static gboolean
is_ppm_space(guint8 c)
{
    return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f';
}

/* Skips at least one whitespace character; FALSE when there is none. */
static gboolean
skip_space(const guint8 *data, gsize len, gsize *pos)
{
    gsize start = *pos;

    while (*pos < len && is_ppm_space(data[*pos]))
        (*pos)++;
    return *pos > start;
}

/* A decimal number of 1..PPM_MAX_DIGITS digits (no sign), so it cannot overflow. */
static gboolean
read_number(const guint8 *data, gsize len, gsize *pos, guint *ret_value)
{
    guint value = 0;
    gsize digits = 0;

    while (*pos < len && g_ascii_isdigit(data[*pos])) {
        if (++digits > PPM_MAX_DIGITS)
            return FALSE;
        value = value * 10 + (guint)(data[*pos] - '0');
        (*pos)++;
    }
    if (digits == 0)
        return FALSE;
    *ret_value = value;
    return TRUE;
}

static gboolean
parse_header(const guint8 *data, gsize len, guint *width, guint *height, gsize *offset,
             const char **problem)
{
    gsize pos = 2;
    guint maxval = 0;

    *problem = "header is malformed";
    if (len < 2 || data[0] != 'P' || data[1] != '6') {
        *problem = "is not binary PPM (P6)";
        return FALSE;
    }
    if (!skip_space(data, len, &pos) || !read_number(data, len, &pos, width) ||
        !skip_space(data, len, &pos) || !read_number(data, len, &pos, height) ||
        !skip_space(data, len, &pos) || !read_number(data, len, &pos, &maxval))
        return FALSE;
    /* Exactly one whitespace character ends the header: the next byte is already a pixel. */
    if (pos >= len || !is_ppm_space(data[pos]))
        return FALSE;
    pos++;
    if (maxval != PPM_MAXVAL) {
        *problem = "maxval is not 255";
        return FALSE;
    }
    if (*width == 0 || *height == 0 || *width > CARREL_HYPERVISOR_SCREEN_MAX_SIDE ||
        *height > CARREL_HYPERVISOR_SCREEN_MAX_SIDE) {
        *problem = "size is out of range";
        return FALSE;
    }
    /* Both sides are at most 16384, so the product fits easily in 64 bits. */
    if ((guint64)len - pos != (guint64)*width * *height * 3) {
        *problem = "pixel data does not match its size";
        return FALSE;
    }
    *offset = pos;
    return TRUE;
}

gboolean
carrel_hypervisor_ppm_parse(GBytes *ppm, guint *ret_width, guint *ret_height,
                            gsize *ret_pixels_offset, GError **error)
{
    const guint8 *data;
    gsize len = 0;
    guint width = 0, height = 0;
    gsize offset = 0;
    const char *problem = NULL;

    if (!ppm) {
        g_set_error(error, CARREL_ERROR, CARREL_ERROR_INVALID_ARG, "screenshot is missing");
        return FALSE;
    }
    data = g_bytes_get_data(ppm, &len);
    if (!parse_header(data, len, &width, &height, &offset, &problem)) {
        g_set_error(error, CARREL_ERROR, CARREL_ERROR_INVALID_ARG, "screenshot %s", problem);
        return FALSE;
    }
    if (ret_width)
        *ret_width = width;
    if (ret_height)
        *ret_height = height;
    if (ret_pixels_offset)
        *ret_pixels_offset = offset;
    return TRUE;
}

gboolean
carrel_hypervisor_ppm_is_blank(GBytes *ppm)
{
    gsize offset = 0, len = 0;
    const guint8 *data;

    if (!carrel_hypervisor_ppm_parse(ppm, NULL, NULL, &offset, NULL))
        return TRUE;
    data = g_bytes_get_data(ppm, &len);
    for (gsize i = offset + 3; i < len; i += 3) {
        if (memcmp(data + i, data + offset, 3) != 0)
            return FALSE;
    }
    return TRUE;
}

/* Changed pixels, counted up to a tenth of a percent past which the answer is settled. */
static gsize
count_changed(const guint8 *a, const guint8 *b, gsize pixels)
{
    gsize limit = pixels / 1000, changed = 0;

    for (gsize i = 0; i < pixels && changed <= limit; i++) {
        if (memcmp(a + i * 3, b + i * 3, 3) != 0)
            changed++;
    }
    return changed;
}

gboolean
carrel_hypervisor_ppm_differs(GBytes *a, GBytes *b)
{
    guint wa = 0, ha = 0, wb = 0, hb = 0;
    gsize oa = 0, ob = 0, len_a = 0, len_b = 0;
    const guint8 *da, *db;

    if (!carrel_hypervisor_ppm_parse(a, &wa, &ha, &oa, NULL) ||
        !carrel_hypervisor_ppm_parse(b, &wb, &hb, &ob, NULL))
        return TRUE;
    if (wa != wb || ha != hb)
        return TRUE;
    da = g_bytes_get_data(a, &len_a);
    db = g_bytes_get_data(b, &len_b);
    /* Same size, so the same number of pixel bytes; the headers may differ in whitespace. */
    return count_changed(da + oa, db + ob, (gsize)wa * ha) > (gsize)wa * ha / 1000;
}

static gboolean
is_png(GBytes *image)
{
    static const guint8 signature[8] = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1a, '\n'};
    gsize len = 0;
    const guint8 *data = g_bytes_get_data(image, &len);

    return len >= sizeof(signature) && memcmp(data, signature, sizeof(signature)) == 0;
}

/* The size check before any pixel is decoded: libpng has read the header only. */
static gboolean
check_png_size(const png_image *image, gsize header_len, GError **error)
{
    if (image->width == 0 || image->height == 0 ||
        image->width > CARREL_HYPERVISOR_SCREEN_MAX_SIDE ||
        image->height > CARREL_HYPERVISOR_SCREEN_MAX_SIDE) {
        g_set_error(error, CARREL_ERROR, CARREL_ERROR_INVALID_ARG,
                    "screenshot png size %ux%u is out of range", image->width, image->height);
        return FALSE;
    }
    if ((guint64)image->width * image->height * 3 + header_len > CARREL_HYPERVISOR_SCREENSHOT_MAX) {
        g_set_error(error, CARREL_ERROR, CARREL_ERROR_LIMIT,
                    "screenshot png of %ux%u exceeds %d bytes as ppm", image->width, image->height,
                    CARREL_HYPERVISOR_SCREENSHOT_MAX);
        return FALSE;
    }
    return TRUE;
}

static void
set_png_error(GError **error, const png_image *image)
{
    /* libpng's own words (never the image's text), kept on one line. */
    const char *message = carrel_util_is_clean_text(image->message) ? image->message : "?";

    g_set_error(error, CARREL_ERROR, CARREL_ERROR_INVALID_ARG, "screenshot png is invalid: %s",
                message);
}

GBytes *
carrel_hypervisor_png_to_ppm(GBytes *png, GError **error)
{
    png_image image;
    g_autofree char *header = NULL;
    gsize len = 0, header_len, ppm_len;
    const guint8 *data;
    guint8 *ppm;

    if (!png || !is_png(png)) {
        g_set_error(error, CARREL_ERROR, CARREL_ERROR_INVALID_ARG, "screenshot is not png");
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
    header = g_strdup_printf("P6\n%u %u\n255\n", image.width, image.height);
    header_len = strlen(header);
    if (!check_png_size(&image, header_len, error)) {
        png_image_free(&image);
        return NULL;
    }
    image.format = PNG_FORMAT_RGB;
    ppm_len = header_len + (gsize)image.width * image.height * 3;
    ppm = g_malloc(ppm_len);
    memcpy(ppm, header, header_len);
    /* Alpha, if any, is composited onto black; png_image_finish_read frees libpng's state. */
    if (!png_image_finish_read(&image, NULL, ppm + header_len, 0, NULL)) {
        set_png_error(error, &image);
        g_free(ppm);
        return NULL;
    }
    return g_bytes_new_take(ppm, ppm_len);
}

GBytes *
carrel_hypervisor_screen_to_ppm(GBytes *image, GError **error)
{
    if (image && is_png(image))
        return carrel_hypervisor_png_to_ppm(image, error);
    if (!carrel_hypervisor_ppm_parse(image, NULL, NULL, NULL, error))
        return NULL;
    return g_bytes_ref(image);
}
