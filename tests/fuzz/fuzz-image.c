/*
 * libFuzzer harness for screenshots as the guest and QEMU hand them over (untrusted): the strict
 * PPM parser, the PNG decoder and the readiness comparisons.
 * Built with -Dfuzz=true and clang (see tests/fuzz/meson.build).
 */
#include <stddef.h>
#include <stdint.h>

#include "image/image.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

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
    return 0;
}
