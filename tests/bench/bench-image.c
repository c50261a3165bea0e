/*
 * bench-image: where a screenshot's time goes on the host side, one stage at a time, on a real
 * screen (a PPM, e.g. from Xvfb -fbdir and xwdtopnm). Stages:
 *   qemu     the PNG QEMU 7.2 writes for libvirt's screenshot (libpng's defaults: zlib level 6,
 *            adaptive filters), what virDomainScreenshot hands over;
 *   decode   that PNG back to PPM (carrel_hypervisor_screenshot's validation of a PNG);
 *   parse    the strict PPM check alone (the validation when QEMU hands over PPM);
 *   hash     carrel_image_ppm_hash (one settle sample);
 *   encode   carrel_image_encode_png (what the API replies);
 *   base64   the encoded PNG as base64 (a computer observation carries it in JSON);
 *   level1   the same encoder at zlib level 1 without filters, for comparison;
 *   all      every stage once per round.
 * Usage: bench-image FILE.ppm STAGE [ROUNDS]  (prints ms per round and the output's size; run
 * under valgrind --tool=callgrind with ROUNDS 1 for instruction counts)
 */
#include <png.h>
#include <stdio.h>
#include <string.h>

#include "image/image.h"

typedef struct {
    GByteArray *out;
} Sink;

static void
on_write(png_structp png, png_bytep data, size_t len)
{
    g_byte_array_append(((Sink *)png_get_io_ptr(png))->out, data, (guint)len);
}

static void
on_flush(png_structp png)
{
}

/* level < 0: libpng's defaults, as QEMU's png_save leaves them. */
static GBytes *
encode_with(GBytes *ppm, int level, int filters)
{
    guint w = 0, h = 0;
    gsize off = 0;
    const guint8 *px;
    Sink sink = {g_byte_array_new()};
    png_structp png;
    png_infop info;

    if (!carrel_image_ppm_parse(ppm, &w, &h, &off, NULL))
        return NULL;
    px = (const guint8 *)g_bytes_get_data(ppm, NULL) + off;
    png = png_create_write_struct(PNG_LIBPNG_VER_STRING, NULL, NULL, NULL);
    info = png_create_info_struct(png);
    if (setjmp(png_jmpbuf(png))) {
        png_destroy_write_struct(&png, &info);
        return NULL;
    }
    png_set_write_fn(png, &sink, on_write, on_flush);
    png_set_IHDR(png, info, w, h, 8, PNG_COLOR_TYPE_RGB, PNG_INTERLACE_NONE,
                 PNG_COMPRESSION_TYPE_BASE, PNG_FILTER_TYPE_BASE);
    if (level >= 0) {
        png_set_compression_level(png, level);
        png_set_filter(png, PNG_FILTER_TYPE_BASE, filters);
    }
    png_write_info(png, info);
    for (guint y = 0; y < h; y++)
        png_write_row(png, px + (gsize)y * w * 3);
    png_write_end(png, NULL);
    png_destroy_write_struct(&png, &info);
    return g_byte_array_free_to_bytes(sink.out);
}

static gsize
run_stage(const char *stage, GBytes *ppm, GBytes *qemu_png, GBytes *our_png)
{
    g_autoptr(GBytes) out = NULL;

    if (g_str_equal(stage, "qemu"))
        out = encode_with(ppm, -1, 0);
    else if (g_str_equal(stage, "decode"))
        out = carrel_image_to_ppm(qemu_png, NULL);
    else if (g_str_equal(stage, "parse"))
        return carrel_image_ppm_parse(ppm, NULL, NULL, NULL, NULL);
    else if (g_str_equal(stage, "hash"))
        return (gsize)carrel_image_ppm_hash(ppm) & 1;
    else if (g_str_equal(stage, "encode"))
        out = carrel_image_encode_png(ppm, NULL);
    else if (g_str_equal(stage, "level1"))
        out = encode_with(ppm, 1, PNG_FILTER_NONE);
    else if (g_str_equal(stage, "base64")) {
        g_autofree char *b64 =
            g_base64_encode(g_bytes_get_data(our_png, NULL), g_bytes_get_size(our_png));
        return strlen(b64);
    }
    return out ? g_bytes_get_size(out) : 0;
}

int
main(int argc, char **argv)
{
    static const char *const every[] = {"qemu",   "decode", "parse",  "hash",
                                        "encode", "base64", "level1", NULL};
    g_autofree char *data = NULL;
    gsize len = 0;
    g_autoptr(GBytes) ppm = NULL;
    g_autoptr(GBytes) qemu_png = NULL;
    g_autoptr(GBytes) our_png = NULL;
    guint rounds = argc > 3 ? (guint)g_ascii_strtoull(argv[3], NULL, 10) : 20;

    if (argc < 3 || !g_file_get_contents(argv[1], &data, &len, NULL)) {
        fprintf(stderr, "usage: bench-image FILE.ppm STAGE|all [ROUNDS]\n");
        return 2;
    }
    ppm = g_bytes_new_take(g_steal_pointer(&data), len);
    if (!carrel_image_ppm_parse(ppm, NULL, NULL, NULL, NULL)) {
        fprintf(stderr, "%s is not binary ppm\n", argv[1]);
        return 2;
    }
    /* Only what the stage reads, so that callgrind's total is the stage's own cost. */
    if (g_str_equal(argv[2], "all") || g_str_equal(argv[2], "decode"))
        qemu_png = encode_with(ppm, -1, 0);
    if (g_str_equal(argv[2], "all") || g_str_equal(argv[2], "base64"))
        our_png = carrel_image_encode_png(ppm, NULL);
    for (guint s = 0; every[s]; s++) {
        gint64 t0;
        gsize size = 0;

        if (!g_str_equal(argv[2], "all") && !g_str_equal(argv[2], every[s]))
            continue;
        t0 = g_get_monotonic_time();
        for (guint r = 0; r < MAX(rounds, 1); r++)
            size = run_stage(every[s], ppm, qemu_png, our_png);
        printf("%-8s %8.2f ms/round  output %" G_GSIZE_FORMAT " bytes\n", every[s],
               (double)(g_get_monotonic_time() - t0) / 1000.0 / MAX(rounds, 1), size);
    }
    return 0;
}
