/*
 * JPEG encoding with libjpeg (libjpeg-turbo's libjpeg 6.2 API), into a GByteArray through a
 * destination manager of our own. libjpeg reports errors by calling error_exit, which must not
 * return: ours longjmps back into encode_jpeg, which releases everything.
 */
#include <setjmp.h>
#include <stdio.h> /* jpeglib.h uses FILE and size_t without including their headers */
#include <jpeglib.h>

#define CARREL_IMAGE_PRIV_H_ALLOW
#include "image/image-priv.h"

#define JPEG_CHUNK 16384

/*
 * Everything libjpeg touches, on the heap: it is written between setjmp and a longjmp, so as a
 * local of the function calling setjmp its value would be indeterminate afterwards (C17 7.13.2.1).
 */
typedef struct {
    struct jpeg_compress_struct cinfo;
    struct jpeg_error_mgr err;
    struct jpeg_destination_mgr dest;
    jmp_buf jump;
    char message[JMSG_LENGTH_MAX];
    GByteArray *out;
    JOCTET buffer[JPEG_CHUNK];
} JpegJob;

static void
on_init_destination(j_compress_ptr cinfo)
{
    JpegJob *job = cinfo->client_data;

    job->dest.next_output_byte = job->buffer;
    job->dest.free_in_buffer = sizeof(job->buffer);
}

/* Called when the buffer is full (whatever free_in_buffer says). */
static boolean
on_empty_output_buffer(j_compress_ptr cinfo)
{
    JpegJob *job = cinfo->client_data;

    g_byte_array_append(job->out, job->buffer, sizeof(job->buffer));
    job->dest.next_output_byte = job->buffer;
    job->dest.free_in_buffer = sizeof(job->buffer);
    return TRUE;
}

static void
on_term_destination(j_compress_ptr cinfo)
{
    JpegJob *job = cinfo->client_data;

    g_byte_array_append(job->out, job->buffer,
                        (guint)(sizeof(job->buffer) - job->dest.free_in_buffer));
}

static void
on_error_exit(j_common_ptr cinfo)
{
    JpegJob *job = cinfo->client_data;

    job->err.format_message(cinfo, job->message);
    longjmp(job->jump, 1);
}

/* libjpeg's default prints warnings and traces on stderr; a library stays quiet. */
static void
on_output_message(j_common_ptr cinfo)
{
}

/*
 * Every libjpeg call that may fail, under the caller's setjmp. Chroma is kept at full
 * resolution (4:4:4 instead of libjpeg's 4:2:0): subsampling smears coloured text and one-pixel
 * UI lines, which is what a model reads in a screenshot. It costs 25-40 % more bytes at quality
 * 75-85 (measured on real UI screenshots), about the same encoding time.
 */
static void
compress_rows(struct jpeg_compress_struct *cinfo, const CarrelImageView *view, guint quality)
{
    cinfo->image_width = view->width;
    cinfo->image_height = view->height;
    cinfo->input_components = 3;
    cinfo->in_color_space = JCS_RGB;
    jpeg_set_defaults(cinfo);
    jpeg_set_quality(cinfo, (int)quality, TRUE);
    for (int i = 0; i < cinfo->num_components; i++) {
        cinfo->comp_info[i].h_samp_factor = 1;
        cinfo->comp_info[i].v_samp_factor = 1;
    }
    jpeg_start_compress(cinfo, TRUE);
    while (cinfo->next_scanline < cinfo->image_height) {
        /* libjpeg's row type is not const, but compression only reads the rows. */
        JSAMPROW row = (JSAMPROW)(view->pixels + (gsize)cinfo->next_scanline * view->width * 3);

        jpeg_write_scanlines(cinfo, &row, 1);
    }
    jpeg_finish_compress(cinfo);
}

/* This function changes none of its locals after setjmp; job is released by the caller. */
static gboolean
encode_jpeg(JpegJob *job, const CarrelImageView *view, guint quality, GError **error)
{
    job->cinfo.err = jpeg_std_error(&job->err);
    job->cinfo.client_data = job;
    job->err.error_exit = on_error_exit;
    job->err.output_message = on_output_message;
    if (setjmp(job->jump)) {
        /* Safe on a half-made object too: jpeg_create_compress clears its memory manager first. */
        jpeg_destroy_compress(&job->cinfo);
        g_set_error(error, CARREL_ERROR, CARREL_ERROR_INTERNAL, "jpeg encoding failed: %s",
                    job->message);
        return FALSE;
    }
    /* jpeg_create_compress keeps err and client_data, and clears the rest. */
    jpeg_create_compress(&job->cinfo);
    job->dest.init_destination = on_init_destination;
    job->dest.empty_output_buffer = on_empty_output_buffer;
    job->dest.term_destination = on_term_destination;
    job->cinfo.dest = &job->dest;
    compress_rows(&job->cinfo, view, quality);
    jpeg_destroy_compress(&job->cinfo);
    return TRUE;
}

GBytes *
carrel_image_encode_jpeg_view(const CarrelImageView *view, guint quality, GError **error)
{
    g_autoptr(GByteArray) out = g_byte_array_new();
    g_autofree JpegJob *job = NULL;

    if (quality < 1 || quality > 100) {
        g_set_error(error, CARREL_ERROR, CARREL_ERROR_INVALID_ARG,
                    "jpeg quality %u is out of range (1..100)", quality);
        return NULL;
    }
    job = g_new0(JpegJob, 1);
    job->out = out;
    if (!encode_jpeg(job, view, quality, error))
        return NULL;
    return g_byte_array_free_to_bytes(g_steal_pointer(&out));
}

GBytes *
carrel_image_encode_jpeg(GBytes *ppm, guint quality, GError **error)
{
    CarrelImageView view;

    if (!carrel_image_view(ppm, &view, error))
        return NULL;
    return carrel_image_encode_jpeg_view(&view, quality, error);
}
