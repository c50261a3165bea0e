/* image: internals shared by the module's own files; not for other modules. */
#pragma once

#ifndef CARREL_IMAGE_PRIV_H_ALLOW
#error "image-priv.h is private to the image module"
#endif

#include "image/image.h"

/* A parsed PPM: its size and where its rows start (width * 3 bytes each, no padding). */
typedef struct {
    guint width;
    guint height;
    const guint8 *pixels;
} CarrelImageView;

/* Parses ppm as carrel_image_ppm_parse does and points *ret_view into its bytes, which must
 * outlive the view. */
gboolean carrel_image_view(GBytes *ppm, CarrelImageView *ret_view, GError **error);

/* Whether a width x height image fits the module's limits: INVALID_ARG when a side is outside
 * 1..CARREL_IMAGE_MAX_SIDE, LIMIT when its PPM would exceed CARREL_IMAGE_PPM_MAX. */
gboolean carrel_image_check_size(guint width, guint height, GError **error);

/*
 * A new PPM buffer of width x height with the header written and the pixels left for the caller
 * to fill (at *ret_pixels) before handing the *ret_len bytes to g_bytes_new_take. INVALID_ARG
 * when a side is outside 1..CARREL_IMAGE_MAX_SIDE, LIMIT when it exceeds CARREL_IMAGE_PPM_MAX;
 * nothing is allocated then.
 */
guint8 *carrel_image_ppm_alloc(guint width, guint height, gsize *ret_len, guint8 **ret_pixels,
                               GError **error);

/* The encoders behind carrel_image_encode_png and _jpeg, on a view that is not checked here (so
 * that a test can drive the encoder's own error path with an impossible size). */
GBytes *carrel_image_encode_png_view(const CarrelImageView *view, GError **error);
GBytes *carrel_image_encode_jpeg_view(const CarrelImageView *view, guint quality, GError **error);
