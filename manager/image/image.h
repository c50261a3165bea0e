/*
 * image: screenshots as binary PPM (P6, maxval 255, RGB), the form carrel_hypervisor_screenshot
 * returns. A strict parser and a PNG decoder for untrusted images (the guest chooses the screen
 * size and what it shows), the comparisons behind a "screen ready" check, and the conversions the
 * screenshot API makes. Pure: no I/O, no logging.
 */
#pragma once

#include "util/util.h"

G_BEGIN_DECLS

/* Largest width or height of an image accepted or produced. */
#define CARREL_IMAGE_MAX_SIDE 16384
/* Largest PPM (header and pixels) this module produces, by decoding or resizing. */
#define CARREL_IMAGE_PPM_MAX (64 * 1024 * 1024)
/* Largest factor carrel_image_fit_factor accepts (a zoom into a crop, not a way to grow memory). */
#define CARREL_IMAGE_MAX_FACTOR 4.0

/*
 * Strict parser of binary PPM as QEMU writes it: "P6", whitespace, width, whitespace, height,
 * whitespace, maxval 255, one whitespace character, then exactly width * height * 3 bytes.
 * No comments, no signs, at most 5 digits per number, sides 1..CARREL_IMAGE_MAX_SIDE, no
 * trailing bytes. INVALID_ARG otherwise. Every output is optional.
 */
gboolean carrel_image_ppm_parse(GBytes *ppm, guint *ret_width, guint *ret_height,
                                gsize *ret_pixels_offset, GError **error);

/* TRUE when every pixel of ppm has the same colour (also when ppm is not valid PPM): a screen
 * that is not ready yet. */
gboolean carrel_image_ppm_is_blank(GBytes *ppm);

/* TRUE when the two images differ in size or in more than a tenth of a percent of their pixels
 * (also when either is not valid PPM): with two screenshots some time apart, FALSE means the
 * screen stopped changing; a blinking text cursor does not count as change. */
gboolean carrel_image_ppm_differs(GBytes *a, GBytes *b);

/*
 * A 64-bit hash of ppm's pixels (not its header), for telling frames apart while a screen
 * settles: equal pixels give equal hashes, and any change of a pixel almost surely changes it
 * (unlike carrel_image_ppm_differs, one changed character counts). 0 when ppm is not valid PPM.
 * Four independent lanes of 64-bit words, so the multiplications overlap: a 1024x768 frame costs
 * about as much as copying it.
 */
guint64 carrel_image_ppm_hash(GBytes *ppm);

/*
 * Decodes an untrusted PNG (any colour type; alpha composited onto black) to binary PPM.
 * INVALID_ARG when malformed or a side is outside 1..CARREL_IMAGE_MAX_SIDE, LIMIT when the PPM
 * would exceed CARREL_IMAGE_PPM_MAX; the size is checked before any pixel is decoded.
 */
GBytes *carrel_image_png_to_ppm(GBytes *png, GError **error);

/* An untrusted PNG or PPM (told apart by content) as validated PPM: PNG is decoded as by
 * carrel_image_png_to_ppm, PPM is checked by carrel_image_ppm_parse and returned as is. */
GBytes *carrel_image_to_ppm(GBytes *image, GError **error);

/*
 * The width x height region of ppm whose top-left pixel is (x, y), as a new PPM. INVALID_ARG
 * when ppm is malformed, the region is empty or it is not inside the image (the message says the
 * image size).
 */
GBytes *carrel_image_crop(GBytes *ppm, guint x, guint y, guint width, guint height, GError **error);

/*
 * ppm resized to width x height. Each axis on its own: shrinking averages the source area each
 * new pixel covers (a box filter, which keeps thin text legible where nearest-neighbour drops
 * strokes), enlarging interpolates linearly between pixel centres, an unchanged side is copied.
 * INVALID_ARG when ppm is malformed or a side is outside 1..CARREL_IMAGE_MAX_SIDE, LIMIT when the
 * result would exceed CARREL_IMAGE_PPM_MAX.
 */
GBytes *carrel_image_scale(GBytes *ppm, guint width, guint height, GError **error);

/*
 * The size of a width x height image whose longer side is at most max_edge, keeping its aspect
 * ratio (rounded, each side at least 1); never larger than the image. INVALID_ARG when a side or
 * max_edge is outside 1..CARREL_IMAGE_MAX_SIDE.
 */
gboolean carrel_image_fit_max_edge(guint width, guint height, guint max_edge, guint *ret_width,
                                   guint *ret_height, GError **error);

/*
 * The size of a width x height image scaled by factor (0 < factor <= CARREL_IMAGE_MAX_FACTOR),
 * each side rounded and at least 1. INVALID_ARG when a side or the factor is out of range,
 * LIMIT when the result would exceed CARREL_IMAGE_MAX_SIDE or CARREL_IMAGE_PPM_MAX.
 */
gboolean carrel_image_fit_factor(guint width, guint height, double factor, guint *ret_width,
                                 guint *ret_height, GError **error);

/*
 * ppm as PNG (8-bit RGB), compressed for speed: a screenshot is encoded on every agent step.
 * INVALID_ARG when ppm is malformed; INTERNAL if libpng fails.
 */
GBytes *carrel_image_encode_png(GBytes *ppm, GError **error);

/*
 * ppm as baseline JPEG at quality 1..100 (libjpeg's scale), chroma not subsampled so that
 * coloured text stays legible. INVALID_ARG when the quality is out of range or ppm is malformed;
 * INTERNAL if libjpeg fails.
 */
GBytes *carrel_image_encode_jpeg(GBytes *ppm, guint quality, GError **error);

G_END_DECLS
