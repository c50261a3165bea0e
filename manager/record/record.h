/*
 * record: a session's screen as a video. Frames (PPM, as carrel_hypervisor_screenshot gives
 * them, with their time) go into WebM/VP8 segments written by GStreamer, one folder per
 * session with an index (index.json). A frame equal to the previous one is not encoded; a
 * segment ends at its time limit, on a screen size change and when the caller closes it (pause,
 * hibernate, stop); the folder's segments stay under a byte budget, the oldest deleted first.
 * No logging, no libvirt.
 */
#pragma once

#include "util/util.h"

G_BEGIN_DECLS

/* The index's file name in a recording folder. */
#define CARREL_RECORD_INDEX "index.json"
/* Most segments an index lists (older ones are dropped first). */
#define CARREL_RECORD_MAX_SEGMENTS 4096

typedef struct {
    guint fps;          /* frames per second the caller looks at (sets the keyframe distance) */
    guint64 max_bytes;  /* most bytes the folder's segments hold together */
    guint64 segment_ms; /* longest segment */
} CarrelRecordLimits;

/* One segment as the index lists it. */
typedef struct {
    char *name;        /* "seg-NNNNNN.webm" */
    gint64 started_ms; /* Unix time of its first frame, ms */
    gint64 ended_ms;   /* when it was closed (0 while open) */
    guint frames;      /* frames encoded */
    guint64 bytes;
    char *sha256; /* hex, of the finished file (NULL while open) */
    gboolean open;
} CarrelRecordSegment;

void carrel_record_segment_free(CarrelRecordSegment *seg);
G_DEFINE_AUTOPTR_CLEANUP_FUNC(CarrelRecordSegment, carrel_record_segment_free)

typedef struct {
    GPtrArray *segments; /* CarrelRecordSegment, oldest first */
    guint dropped;       /* segments deleted to keep the budget */
    guint next;          /* number of the next segment */
} CarrelRecordIndex;

void carrel_record_index_free(CarrelRecordIndex *index);
G_DEFINE_AUTOPTR_CLEANUP_FUNC(CarrelRecordIndex, carrel_record_index_free)

/* The index of the recording in dir: empty when dir or its index does not exist; INVALID_ARG
 * when the index is malformed. */
CarrelRecordIndex *carrel_record_index_load(const char *dir, GError **error);
/* The finished segment called name, or NULL (open, dropped or unknown). Borrowed. */
const CarrelRecordSegment *carrel_record_index_finished(const CarrelRecordIndex *index,
                                                        const char *name);
/* TRUE for a segment's name exactly: "seg-" six digits ".webm" (no path can be made of it). */
gboolean carrel_record_name_ok(const char *name);

typedef struct _CarrelRecord CarrelRecord;

/*
 * Opens the recording in dir (created 0700 when absent), keeping the segments its index lists;
 * a segment left open by a writer that died is closed as it is (it may not be seekable).
 * INVALID_ARG for limits out of range, FAILED when GStreamer lacks an element.
 */
CarrelRecord *carrel_record_open(const char *dir, const CarrelRecordLimits *limits, GError **error);
/* Finishes the open segment (as carrel_record_close_segment at the last frame's time; errors
 * are lost: call that first to see them). */
void carrel_record_free(CarrelRecord *rec);
G_DEFINE_AUTOPTR_CLEANUP_FUNC(CarrelRecord, carrel_record_free)

/*
 * Adds the screen as it was at now_ms (Unix ms, not before the previous frame): binary PPM
 * (carrel_image_ppm_parse). A screen equal to the previous one is not encoded (*ret_encoded
 * FALSE, optional). Starts a segment when none is open, and a new one when the size changed or
 * the segment is at its time limit. INVALID_ARG for a bad image, FAILED when encoding failed
 * (the open segment is then abandoned).
 */
gboolean carrel_record_push_ppm(CarrelRecord *rec, GBytes *ppm, gint64 now_ms,
                                gboolean *ret_encoded, GError **error);
/* The same for packed RGB pixels (width * height * 3 bytes). */
gboolean carrel_record_push_rgb(CarrelRecord *rec, GBytes *rgb, guint width, guint height,
                                gint64 now_ms, gboolean *ret_encoded, GError **error);
/* Finishes the open segment at now_ms (its last frame lasts until then): the file is complete
 * and seekable, the index says so, and the oldest segments go beyond the budget. Nothing to
 * do when none is open. FAILED when GStreamer could not finish it (it is then deleted). */
gboolean carrel_record_close_segment(CarrelRecord *rec, gint64 now_ms, GError **error);
/* The index as it is now (a copy). */
CarrelRecordIndex *carrel_record_get_index(CarrelRecord *rec);

G_END_DECLS
