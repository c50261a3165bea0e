/*
 * Binary PPM (P6): a strict parser, the buffer every new image starts from, and the pixel
 * comparisons behind a "screen ready" check. The guest chooses the screen size and QEMU encodes
 * what the guest drew, so every image is untrusted input.
 */
#include <string.h>

#define CARREL_IMAGE_PRIV_H_ALLOW
#include "image/image-priv.h"

#define PPM_MAX_DIGITS 5
#define PPM_MAXVAL 255
/* "P6\n16384 16384\n255\n": the size check counts the longest header, whatever the sides. */
#define PPM_HEADER_MAX 19

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

/* The syntax of the header; *pos ends on the first pixel byte. */
static gboolean
read_header(const guint8 *data, gsize len, guint *width, guint *height, guint *maxval, gsize *pos,
            GError **error)
{
    if (len < 2 || data[0] != 'P' || data[1] != '6') {
        g_set_error(error, CARREL_ERROR, CARREL_ERROR_INVALID_ARG, "image is not binary ppm (p6)");
        return FALSE;
    }
    *pos = 2;
    /* Exactly one whitespace character ends the header: the next byte is already a pixel. */
    if (!skip_space(data, len, pos) || !read_number(data, len, pos, width) ||
        !skip_space(data, len, pos) || !read_number(data, len, pos, height) ||
        !skip_space(data, len, pos) || !read_number(data, len, pos, maxval) || *pos >= len ||
        !is_ppm_space(data[*pos])) {
        g_set_error(error, CARREL_ERROR, CARREL_ERROR_INVALID_ARG, "ppm header is malformed");
        return FALSE;
    }
    (*pos)++;
    return TRUE;
}

static gboolean
parse_header(const guint8 *data, gsize len, guint *ret_width, guint *ret_height, gsize *ret_offset,
             GError **error)
{
    guint width = 0, height = 0, maxval = 0;
    gsize pos = 0;

    if (!read_header(data, len, &width, &height, &maxval, &pos, error))
        return FALSE;
    if (maxval != PPM_MAXVAL) {
        g_set_error(error, CARREL_ERROR, CARREL_ERROR_INVALID_ARG, "ppm maxval %u is not 255",
                    maxval);
        return FALSE;
    }
    if (width == 0 || height == 0 || width > CARREL_IMAGE_MAX_SIDE ||
        height > CARREL_IMAGE_MAX_SIDE) {
        g_set_error(error, CARREL_ERROR, CARREL_ERROR_INVALID_ARG,
                    "ppm size %ux%u is out of range (sides 1..%d)", width, height,
                    CARREL_IMAGE_MAX_SIDE);
        return FALSE;
    }
    /* Both sides are at most 16384, so the product fits easily in 64 bits. */
    if ((guint64)len - pos != (guint64)width * height * 3) {
        g_set_error(error, CARREL_ERROR, CARREL_ERROR_INVALID_ARG,
                    "ppm pixel data of %" G_GSIZE_FORMAT " bytes does not match its size %ux%u",
                    len - pos, width, height);
        return FALSE;
    }
    *ret_width = width;
    *ret_height = height;
    *ret_offset = pos;
    return TRUE;
}

gboolean
carrel_image_ppm_parse(GBytes *ppm, guint *ret_width, guint *ret_height, gsize *ret_pixels_offset,
                       GError **error)
{
    const guint8 *data;
    gsize len = 0;
    guint width = 0, height = 0;
    gsize offset = 0;

    if (!ppm) {
        g_set_error(error, CARREL_ERROR, CARREL_ERROR_INVALID_ARG, "image is missing");
        return FALSE;
    }
    data = g_bytes_get_data(ppm, &len);
    if (!parse_header(data, len, &width, &height, &offset, error))
        return FALSE;
    if (ret_width)
        *ret_width = width;
    if (ret_height)
        *ret_height = height;
    if (ret_pixels_offset)
        *ret_pixels_offset = offset;
    return TRUE;
}

gboolean
carrel_image_view(GBytes *ppm, CarrelImageView *ret_view, GError **error)
{
    guint width = 0, height = 0;
    gsize offset = 0;

    if (!carrel_image_ppm_parse(ppm, &width, &height, &offset, error))
        return FALSE;
    ret_view->width = width;
    ret_view->height = height;
    ret_view->pixels = (const guint8 *)g_bytes_get_data(ppm, NULL) + offset;
    return TRUE;
}

gboolean
carrel_image_check_size(guint width, guint height, GError **error)
{
    if (width == 0 || height == 0 || width > CARREL_IMAGE_MAX_SIDE ||
        height > CARREL_IMAGE_MAX_SIDE) {
        g_set_error(error, CARREL_ERROR, CARREL_ERROR_INVALID_ARG,
                    "image size %ux%u is out of range (sides 1..%d)", width, height,
                    CARREL_IMAGE_MAX_SIDE);
        return FALSE;
    }
    if ((guint64)width * height * 3 + PPM_HEADER_MAX > CARREL_IMAGE_PPM_MAX) {
        g_set_error(error, CARREL_ERROR, CARREL_ERROR_LIMIT,
                    "image of %ux%u exceeds %d bytes as ppm", width, height, CARREL_IMAGE_PPM_MAX);
        return FALSE;
    }
    return TRUE;
}

guint8 *
carrel_image_ppm_alloc(guint width, guint height, gsize *ret_len, guint8 **ret_pixels,
                       GError **error)
{
    g_autofree char *header = NULL;
    gsize header_len, len;
    guint8 *data;

    if (!carrel_image_check_size(width, height, error))
        return NULL;
    header = g_strdup_printf("P6\n%u %u\n255\n", width, height);
    header_len = strlen(header);
    len = header_len + (gsize)width * height * 3;
    data = g_malloc(len);
    memcpy(data, header, header_len);
    *ret_len = len;
    *ret_pixels = data + header_len;
    return data;
}

gboolean
carrel_image_ppm_is_blank(GBytes *ppm)
{
    CarrelImageView view;
    gsize bytes;

    if (!carrel_image_view(ppm, &view, NULL))
        return TRUE;
    bytes = (gsize)view.width * view.height * 3;
    for (gsize i = 3; i < bytes; i += 3) {
        if (memcmp(view.pixels + i, view.pixels, 3) != 0)
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
carrel_image_ppm_differs(GBytes *a, GBytes *b)
{
    CarrelImageView va, vb;
    gsize pixels;

    if (!carrel_image_view(a, &va, NULL) || !carrel_image_view(b, &vb, NULL))
        return TRUE;
    if (va.width != vb.width || va.height != vb.height)
        return TRUE;
    /* Same size, so the same number of pixel bytes; the headers may differ in whitespace. */
    pixels = (gsize)va.width * va.height;
    return count_changed(va.pixels, vb.pixels, pixels) > pixels / 1000;
}

/* A 64-bit odd constant from splitmix64, and its finaliser: each lane's state mixes its words. */
#define HASH_PRIME G_GUINT64_CONSTANT(0x9e3779b97f4a7c15)

static guint64
hash_mix(guint64 h)
{
    h ^= h >> 30;
    h *= G_GUINT64_CONSTANT(0xbf58476d1ce4e5b9);
    h ^= h >> 27;
    h *= G_GUINT64_CONSTANT(0x94d049bb133111eb);
    return h ^ (h >> 31);
}

guint64
carrel_image_ppm_hash(GBytes *ppm)
{
    CarrelImageView view;
    guint64 lane[4] = {1, 2, 3, 4}, word, h;
    gsize bytes, i = 0;

    if (!carrel_image_view(ppm, &view, NULL))
        return 0;
    bytes = (gsize)view.width * view.height * 3;
    for (; i + 32 <= bytes; i += 32) {
        for (guint l = 0; l < 4; l++) {
            memcpy(&word, view.pixels + i + l * 8, 8);
            lane[l] = (lane[l] ^ word) * HASH_PRIME;
        }
    }
    for (; i < bytes; i++)
        lane[0] = (lane[0] ^ view.pixels[i]) * HASH_PRIME;
    h = hash_mix(lane[0]) ^ hash_mix(lane[1] + 1) ^ hash_mix(lane[2] + 2) ^ hash_mix(lane[3] + 3);
    h ^= hash_mix(bytes);
    /* 0 stays the answer for "not an image". */
    return h ? h : 1;
}
