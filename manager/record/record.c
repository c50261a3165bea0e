/*
 * A recording folder being written: which segment is open, the last frame (pushed once the next
 * one says how long it lasted), and the budget. One caller at a time (core's recorder thread).
 */
#include <glib/gstdio.h>

#include "image/image.h"
#include "record/record-priv.h"

struct _CarrelRecord {
    char *dir;
    CarrelRecordLimits limits;
    CarrelRecordIndex *index;
    CarrelRecordEncoder *enc; /* the open segment's pipeline, or NULL */
    CarrelRecordSegment *cur; /* the open segment (in index), or NULL */
    char *cur_path;
    guint width, height;
    GBytes *last;     /* the last frame's pixels (RGB) */
    gint64 last_ms;   /* when it was taken */
    gboolean pending; /* last is not in the encoder yet: its duration is not known */
};

static char *
segment_path(CarrelRecord *rec, const char *name)
{
    return g_build_filename(rec->dir, name, NULL);
}

static guint64
file_size(const char *path)
{
    GStatBuf st;

    return g_stat(path, &st) == 0 ? (guint64)st.st_size : 0;
}

/* A segment a dead writer left open: closed as it is (playable, maybe not seekable). */
static void
settle_leftover(CarrelRecord *rec, CarrelRecordSegment *seg)
{
    g_autofree char *path = segment_path(rec, seg->name);
    GStatBuf st;

    seg->open = FALSE;
    if (g_stat(path, &st) != 0)
        return;
    seg->bytes = (guint64)st.st_size;
    seg->ended_ms = MAX((gint64)st.st_mtime * 1000, seg->started_ms);
    g_free(seg->sha256);
    seg->sha256 = carrel_util_sha256_file(path, NULL);
}

static gboolean
limits_ok(const CarrelRecordLimits *limits, GError **error)
{
    if (limits->fps < 1 || limits->fps > 60 || limits->max_bytes == 0 || limits->segment_ms == 0) {
        g_set_error(error, CARREL_ERROR, CARREL_ERROR_INVALID_ARG,
                    "recording limits out of range (fps %u, max %" G_GUINT64_FORMAT
                    " bytes, segment %" G_GUINT64_FORMAT " ms)",
                    limits->fps, limits->max_bytes, limits->segment_ms);
        return FALSE;
    }
    return TRUE;
}

CarrelRecord *
carrel_record_open(const char *dir, const CarrelRecordLimits *limits, GError **error)
{
    g_autoptr(CarrelRecord) rec = NULL;
    g_autoptr(CarrelRecordIndex) index = NULL;

    if (!limits_ok(limits, error) || !carrel_record_gst_init(error))
        return NULL;
    if (g_mkdir_with_parents(dir, 0700) != 0) {
        int err = errno;
        g_set_error(error, CARREL_ERROR, CARREL_ERROR_FAILED, "creating '%s': %s", dir,
                    g_strerror(err));
        return NULL;
    }
    if (!(index = carrel_record_index_load(dir, error)))
        return NULL;
    rec = g_new0(CarrelRecord, 1);
    rec->dir = g_strdup(dir);
    rec->limits = *limits;
    rec->index = g_steal_pointer(&index);
    for (guint i = 0; i < rec->index->segments->len; i++) {
        CarrelRecordSegment *seg = g_ptr_array_index(rec->index->segments, i);
        if (seg->open)
            settle_leftover(rec, seg);
    }
    if (!carrel_record_index_save(rec->index, dir, error))
        return NULL;
    return g_steal_pointer(&rec);
}

void
carrel_record_free(CarrelRecord *rec)
{
    if (!rec)
        return;
    if (rec->cur)
        (void)carrel_record_close_segment(rec, rec->last_ms + 1000 / rec->limits.fps, NULL);
    carrel_record_encoder_free(rec->enc);
    carrel_record_index_free(rec->index);
    g_clear_pointer(&rec->last, g_bytes_unref);
    g_free(rec->cur_path);
    g_free(rec->dir);
    g_free(rec);
}

CarrelRecordIndex *
carrel_record_get_index(CarrelRecord *rec)
{
    return carrel_record_index_copy(rec->index);
}

/* Deletes the oldest finished segments while the folder holds more than its budget (counting
 * open_bytes of the open one) or more segments than an index lists. */
static void
keep_budget(CarrelRecord *rec, guint64 open_bytes)
{
    GPtrArray *segs = rec->index->segments;
    guint64 total = open_bytes;

    for (guint i = 0; i < segs->len; i++) {
        CarrelRecordSegment *seg = g_ptr_array_index(segs, i);
        if (!seg->open)
            total += seg->bytes;
    }
    while (segs->len > 0) {
        CarrelRecordSegment *oldest = g_ptr_array_index(segs, 0);
        g_autofree char *path = NULL;
        if (oldest->open ||
            (total <= rec->limits.max_bytes && segs->len <= CARREL_RECORD_MAX_SEGMENTS))
            break;
        path = segment_path(rec, oldest->name);
        (void)g_unlink(path);
        total -= MIN(total, oldest->bytes);
        rec->index->dropped++;
        g_ptr_array_remove_index(segs, 0);
    }
}

static gboolean
open_segment(CarrelRecord *rec, guint width, guint height, gint64 now_ms, GError **error)
{
    g_autoptr(CarrelRecordSegment) seg = g_new0(CarrelRecordSegment, 1);
    g_autofree char *path = NULL;

    if (rec->index->next > 999999) {
        g_set_error(error, CARREL_ERROR, CARREL_ERROR_LIMIT,
                    "recording '%s' has no segment "
                    "numbers left",
                    rec->dir);
        return FALSE;
    }
    seg->name = g_strdup_printf("seg-%06u.webm", rec->index->next);
    seg->started_ms = now_ms;
    seg->open = TRUE;
    path = segment_path(rec, seg->name);
    /* Every frame a keyframe: only changed screens are encoded, seconds apart, and the WebM
     * muxer starts a cluster at such a gap; Chromium seeking into a cluster that begins with a
     * delta frame fails to decode (PIPELINE_ERROR_DECODE, seen on the session page). */
    rec->enc = carrel_record_encoder_new(path, width, height, 1, error);
    if (!rec->enc)
        return FALSE;
    rec->index->next++;
    rec->width = width;
    rec->height = height;
    rec->cur_path = g_steal_pointer(&path);
    rec->cur = seg;
    g_ptr_array_add(rec->index->segments, g_steal_pointer(&seg));
    return carrel_record_index_save(rec->index, rec->dir, error);
}

/* Gives up the open segment after a failure: its file and its entry go. */
static void
abandon_segment(CarrelRecord *rec)
{
    g_clear_pointer(&rec->enc, carrel_record_encoder_free);
    (void)g_unlink(rec->cur_path);
    g_ptr_array_remove(rec->index->segments, rec->cur);
    rec->cur = NULL;
    rec->pending = FALSE;
    g_clear_pointer(&rec->cur_path, g_free);
    (void)carrel_record_index_save(rec->index, rec->dir, NULL);
}

/* The pending frame into the encoder, lasting until now_ms. */
static gboolean
flush_pending(CarrelRecord *rec, gint64 now_ms, GError **error)
{
    if (!rec->pending)
        return TRUE;
    rec->pending = FALSE;
    return carrel_record_encoder_push(rec->enc, rec->last,
                                      (guint64)(rec->last_ms - rec->cur->started_ms),
                                      (guint64)MAX(now_ms - rec->last_ms, 1), error);
}

/* The pending frame, and once more one frame's time before now_ms when it stood still for
 * longer: players take a WebM's end from its last block, so a still screen at the end of a
 * segment (an idle desktop takes no new frames) would otherwise be cut short. */
static gboolean
flush_last(CarrelRecord *rec, gint64 now_ms, GError **error)
{
    gint64 tail_ms = 1000 / rec->limits.fps;
    gint64 again_ms = now_ms - tail_ms;

    if (!rec->pending || again_ms - rec->last_ms < tail_ms)
        return flush_pending(rec, now_ms, error);
    if (!flush_pending(rec, again_ms, error))
        return FALSE;
    return carrel_record_encoder_push(
        rec->enc, rec->last, (guint64)(again_ms - rec->cur->started_ms), (guint64)tail_ms, error);
}

gboolean
carrel_record_close_segment(CarrelRecord *rec, gint64 now_ms, GError **error)
{
    CarrelRecordSegment *seg = rec->cur;

    if (!seg)
        return TRUE;
    now_ms = MAX(now_ms, rec->last_ms);
    if (!flush_last(rec, now_ms, error) || !carrel_record_encoder_finish(rec->enc, error)) {
        g_prefix_error(error, "closing segment '%s': ", seg->name);
        abandon_segment(rec);
        return FALSE;
    }
    g_clear_pointer(&rec->enc, carrel_record_encoder_free);
    seg->bytes = file_size(rec->cur_path);
    seg->sha256 = carrel_util_sha256_file(rec->cur_path, NULL);
    seg->ended_ms = now_ms;
    seg->open = FALSE;
    rec->cur = NULL;
    g_clear_pointer(&rec->cur_path, g_free);
    keep_budget(rec, 0);
    return carrel_record_index_save(rec->index, rec->dir, error);
}

/* Ends the open segment when the next frame must begin another: a new size, the time limit,
 * or a quarter of the budget reached (so the budget drops whole segments, never all). */
static gboolean
maybe_roll(CarrelRecord *rec, guint width, guint height, gint64 now_ms, GError **error)
{
    guint64 open_bytes;

    if (!rec->cur)
        return TRUE;
    open_bytes = file_size(rec->cur_path);
    if (width == rec->width && height == rec->height &&
        (guint64)(now_ms - rec->cur->started_ms) < rec->limits.segment_ms &&
        open_bytes < rec->limits.max_bytes / 4) {
        keep_budget(rec, open_bytes);
        return TRUE;
    }
    return carrel_record_close_segment(rec, now_ms, error);
}

gboolean
carrel_record_push_rgb(CarrelRecord *rec, GBytes *rgb, guint width, guint height, gint64 now_ms,
                       gboolean *ret_encoded, GError **error)
{
    if (width == 0 || height == 0 || width > CARREL_IMAGE_MAX_SIDE ||
        height > CARREL_IMAGE_MAX_SIDE || g_bytes_get_size(rgb) != (gsize)width * height * 3) {
        g_set_error(error, CARREL_ERROR, CARREL_ERROR_INVALID_ARG,
                    "a frame of %ux%u must be %ux%u RGB pixels", width, height, width, height);
        return FALSE;
    }
    now_ms = MAX(now_ms, rec->last_ms);
    if (!maybe_roll(rec, width, height, now_ms, error))
        return FALSE;
    /* An unchanged screen costs nothing: the pending frame simply lasts longer. */
    if (rec->cur && rec->last && g_bytes_equal(rec->last, rgb)) {
        if (ret_encoded)
            *ret_encoded = FALSE;
        return TRUE;
    }
    if (!rec->cur && !open_segment(rec, width, height, now_ms, error))
        return FALSE;
    if (!flush_pending(rec, now_ms, error)) {
        g_prefix_error(error, "segment '%s': ", rec->cur->name);
        abandon_segment(rec);
        return FALSE;
    }
    g_clear_pointer(&rec->last, g_bytes_unref);
    rec->last = g_bytes_ref(rgb);
    rec->last_ms = now_ms;
    rec->pending = TRUE;
    rec->cur->frames++;
    if (ret_encoded)
        *ret_encoded = TRUE;
    return TRUE;
}

gboolean
carrel_record_push_ppm(CarrelRecord *rec, GBytes *ppm, gint64 now_ms, gboolean *ret_encoded,
                       GError **error)
{
    guint width = 0, height = 0;
    gsize offset = 0;
    g_autoptr(GBytes) rgb = NULL;

    if (!carrel_image_ppm_parse(ppm, &width, &height, &offset, error))
        return FALSE;
    rgb = g_bytes_new_from_bytes(ppm, offset, (gsize)width * height * 3);
    return carrel_record_push_rgb(rec, rgb, width, height, now_ms, ret_encoded, error);
}
