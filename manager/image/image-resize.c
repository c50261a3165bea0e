/*
 * Crop and scale of PPM images. Scaling is separable: along each axis every new pixel is a
 * weighted sum of source pixels ("taps"), an area average (box filter) when that axis shrinks and
 * a linear interpolation when it grows. The sizes come from API callers and the images from
 * guests, so every size is checked and the work stays proportional to input plus output.
 */
#include <math.h>
#include <string.h>

#define CARREL_IMAGE_PRIV_H_ALLOW
#include "image/image-priv.h"

typedef struct {
    guint index;
    double weight;
} Tap;

/* The taps of new pixel i along one axis are taps[first[i]] .. taps[first[i + 1] - 1]. */
typedef struct {
    guint *first;
    Tap *taps;
} Axis;

static void
axis_clear(Axis *axis)
{
    g_clear_pointer(&axis->first, g_free);
    g_clear_pointer(&axis->taps, g_free);
}

G_DEFINE_AUTO_CLEANUP_CLEAR_FUNC(Axis, axis_clear)

/*
 * Shrinking: new pixel i covers source [i * src, (i + 1) * src) and source pixel j covers
 * [j * dst, (j + 1) * dst), both in units of 1/dst source pixels; each tap weighs its overlap.
 * Integer arithmetic, so the weights of a pixel are exact fractions that sum to one.
 */
static guint
add_box_taps(Tap *taps, guint n, guint i, guint src, guint dst)
{
    guint64 start = (guint64)i * src, end = (guint64)(i + 1) * src;

    for (guint64 j = start / dst; j * dst < end; j++) {
        guint64 lo = MAX(start, j * dst), hi = MIN(end, (j + 1) * dst);

        taps[n].index = (guint)j;
        taps[n].weight = (double)(hi - lo) / (double)src;
        n++;
    }
    return n;
}

/* Growing (or keeping) a side: pixel centres aligned, the source position of new pixel i is
 * ((2i + 1) * src - dst) / (2 * dst), clamped to the edge pixels. */
static guint
add_linear_taps(Tap *taps, guint n, guint i, guint src, guint dst)
{
    gint64 num = (gint64)(2 * (guint64)i + 1) * src - dst;
    gint64 den = 2 * (gint64)dst;
    guint64 j;

    if (num <= 0 || num >= (gint64)(src - 1) * den) {
        taps[n].index = num <= 0 ? 0 : src - 1;
        taps[n].weight = 1.0;
        return n + 1;
    }
    j = (guint64)(num / den);
    taps[n].index = (guint)j;
    taps[n].weight = 1.0 - (double)(num % den) / (double)den;
    n++;
    if (num % den != 0) {
        taps[n].index = (guint)j + 1;
        taps[n].weight = (double)(num % den) / (double)den;
        n++;
    }
    return n;
}

static void
axis_init(Axis *axis, guint src, guint dst)
{
    /* A box pixel has one tap per source pixel it touches (src + dst - 1 in all), a linear one
     * at most two. */
    guint n = 0;

    axis->first = g_new(guint, (gsize)dst + 1);
    axis->taps = g_new(Tap, (gsize)src + 2 * (gsize)dst);
    for (guint i = 0; i < dst; i++) {
        axis->first[i] = n;
        n = dst < src ? add_box_taps(axis->taps, n, i, src, dst)
                      : add_linear_taps(axis->taps, n, i, src, dst);
    }
    axis->first[dst] = n;
}

static guint8
to_byte(double value)
{
    if (value <= 0.0)
        return 0;
    if (value >= 255.0)
        return 255;
    return (guint8)(value + 0.5);
}

/* out[dst_w * 3] = one row resampled along x; in holds src_w * 3 channel values. */
static void
resample_row_bytes(const Axis *ax, guint dst_w, const guint8 *in, double *out)
{
    for (guint x = 0; x < dst_w; x++) {
        double r = 0, g = 0, b = 0;

        for (guint t = ax->first[x]; t < ax->first[x + 1]; t++) {
            const guint8 *p = in + (gsize)ax->taps[t].index * 3;
            double w = ax->taps[t].weight;

            r += w * p[0];
            g += w * p[1];
            b += w * p[2];
        }
        out[(gsize)x * 3] = r;
        out[(gsize)x * 3 + 1] = g;
        out[(gsize)x * 3 + 2] = b;
    }
}

static void
resample_row_doubles(const Axis *ax, guint dst_w, const double *in, guint8 *out)
{
    for (guint x = 0; x < dst_w; x++) {
        double r = 0, g = 0, b = 0;

        for (guint t = ax->first[x]; t < ax->first[x + 1]; t++) {
            const double *p = in + (gsize)ax->taps[t].index * 3;
            double w = ax->taps[t].weight;

            r += w * p[0];
            g += w * p[1];
            b += w * p[2];
        }
        out[(gsize)x * 3] = to_byte(r);
        out[(gsize)x * 3 + 1] = to_byte(g);
        out[(gsize)x * 3 + 2] = to_byte(b);
    }
}

/*
 * Height shrinks or stays: each new row first sums its source rows (each source row is read for
 * at most two new rows), then is resampled along x.
 */
static void
scale_rows_down(const CarrelImageView *src, const Axis *ax, const Axis *ay, guint dst_w,
                guint dst_h, guint8 *out)
{
    gsize src_stride = (gsize)src->width * 3;
    g_autofree double *row = g_new(double, src_stride);

    for (guint y = 0; y < dst_h; y++) {
        memset(row, 0, src_stride * sizeof(double));
        for (guint t = ay->first[y]; t < ay->first[y + 1]; t++) {
            const guint8 *in = src->pixels + (gsize)ay->taps[t].index * src_stride;
            double w = ay->taps[t].weight;

            for (gsize k = 0; k < src_stride; k++)
                row[k] += w * in[k];
        }
        resample_row_doubles(ax, dst_w, row, out + (gsize)y * dst_w * 3);
    }
}

/*
 * Height grows: each source row is resampled along x once, into one of two slots (the taps of
 * a new row are at most two consecutive source rows, in increasing order), then blended.
 */
static void
scale_rows_up(const CarrelImageView *src, const Axis *ax, const Axis *ay, guint dst_w, guint dst_h,
              guint8 *out)
{
    gsize dst_stride = (gsize)dst_w * 3;
    g_autofree double *slots = g_new(double, 2 * dst_stride);
    guint held[2] = {G_MAXUINT, G_MAXUINT};

    for (guint y = 0; y < dst_h; y++) {
        guint8 *o = out + (gsize)y * dst_stride;
        const double *rows[2] = {NULL, NULL};
        double weights[2] = {0, 0};
        guint k = 0;

        for (guint t = ay->first[y]; t < ay->first[y + 1]; t++, k++) {
            guint j = ay->taps[t].index, slot = j % 2;

            if (held[slot] != j) {
                resample_row_bytes(ax, dst_w, src->pixels + (gsize)j * src->width * 3,
                                   slots + slot * dst_stride);
                held[slot] = j;
            }
            rows[k] = slots + slot * dst_stride;
            weights[k] = ay->taps[t].weight;
        }
        if (k == 1)
            rows[1] = rows[0]; /* weights[1] is 0 */
        for (gsize c = 0; c < dst_stride; c++)
            o[c] = to_byte(weights[0] * rows[0][c] + weights[1] * rows[1][c]);
    }
}

GBytes *
carrel_image_scale(GBytes *ppm, guint width, guint height, GError **error)
{
    CarrelImageView src;
    g_auto(Axis) ax = {NULL, NULL};
    g_auto(Axis) ay = {NULL, NULL};
    guint8 *data, *pixels = NULL;
    gsize len = 0;

    if (!carrel_image_view(ppm, &src, error))
        return NULL;
    data = carrel_image_ppm_alloc(width, height, &len, &pixels, error);
    if (!data) {
        g_prefix_error(error, "scaling: ");
        return NULL;
    }
    axis_init(&ax, src.width, width);
    axis_init(&ay, src.height, height);
    if (height <= src.height)
        scale_rows_down(&src, &ax, &ay, width, height, pixels);
    else
        scale_rows_up(&src, &ax, &ay, width, height, pixels);
    return g_bytes_new_take(data, len);
}

GBytes *
carrel_image_crop(GBytes *ppm, guint x, guint y, guint width, guint height, GError **error)
{
    CarrelImageView src;
    guint8 *data, *pixels = NULL;
    gsize len = 0;

    if (!carrel_image_view(ppm, &src, error))
        return NULL;
    /* Written as subtractions so that no sum can wrap around. */
    if (width == 0 || height == 0 || x >= src.width || y >= src.height || width > src.width - x ||
        height > src.height - y) {
        g_set_error(error, CARREL_ERROR, CARREL_ERROR_INVALID_ARG,
                    "crop region %ux%u at %u,%u is not inside the %ux%u image", width, height, x, y,
                    src.width, src.height);
        return NULL;
    }
    data = carrel_image_ppm_alloc(width, height, &len, &pixels, error);
    if (!data)
        return NULL;
    for (guint row = 0; row < height; row++)
        memcpy(pixels + (gsize)row * width * 3, src.pixels + ((gsize)(y + row) * src.width + x) * 3,
               (gsize)width * 3);
    return g_bytes_new_take(data, len);
}

static gboolean
check_source_size(guint width, guint height, GError **error)
{
    if (width == 0 || height == 0 || width > CARREL_IMAGE_MAX_SIDE ||
        height > CARREL_IMAGE_MAX_SIDE) {
        g_set_error(error, CARREL_ERROR, CARREL_ERROR_INVALID_ARG,
                    "image size %ux%u is out of range (sides 1..%d)", width, height,
                    CARREL_IMAGE_MAX_SIDE);
        return FALSE;
    }
    return TRUE;
}

/* round(side * num / den), at least 1; exact in 64 bits for sides and edges up to 16384. */
static guint
scale_side(guint side, guint num, guint den)
{
    guint64 value = ((guint64)side * num * 2 + den) / ((guint64)den * 2);

    return value == 0 ? 1 : (guint)value;
}

gboolean
carrel_image_fit_max_edge(guint width, guint height, guint max_edge, guint *ret_width,
                          guint *ret_height, GError **error)
{
    guint longer = MAX(width, height), w = width, h = height;

    if (!check_source_size(width, height, error))
        return FALSE;
    if (max_edge == 0 || max_edge > CARREL_IMAGE_MAX_SIDE) {
        g_set_error(error, CARREL_ERROR, CARREL_ERROR_INVALID_ARG,
                    "max edge %u is out of range (1..%d)", max_edge, CARREL_IMAGE_MAX_SIDE);
        return FALSE;
    }
    if (longer > max_edge) {
        w = width == longer ? max_edge : scale_side(width, max_edge, longer);
        h = height == longer ? max_edge : scale_side(height, max_edge, longer);
    }
    *ret_width = w;
    *ret_height = h;
    return TRUE;
}

gboolean
carrel_image_fit_factor(guint width, guint height, double factor, guint *ret_width,
                        guint *ret_height, GError **error)
{
    double w, h;

    if (!check_source_size(width, height, error))
        return FALSE;
    /* Written so that NaN fails too. */
    if (!(factor > 0.0 && factor <= CARREL_IMAGE_MAX_FACTOR)) {
        g_set_error(error, CARREL_ERROR, CARREL_ERROR_INVALID_ARG,
                    "scale factor %g is out of range (over 0, at most %g)", factor,
                    CARREL_IMAGE_MAX_FACTOR);
        return FALSE;
    }
    w = MAX(1.0, floor(width * factor + 0.5));
    h = MAX(1.0, floor(height * factor + 0.5));
    if (!carrel_image_check_size((guint)w, (guint)h, NULL)) {
        g_set_error(error, CARREL_ERROR, CARREL_ERROR_LIMIT,
                    "%ux%u scaled by %g would be %ux%u, over %d per side or %d bytes as ppm", width,
                    height, factor, (guint)w, (guint)h, CARREL_IMAGE_MAX_SIDE,
                    CARREL_IMAGE_PPM_MAX);
        return FALSE;
    }
    *ret_width = (guint)w;
    *ret_height = (guint)h;
    return TRUE;
}
