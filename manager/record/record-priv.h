/* record: internals shared by the module's files. */
#pragma once

#include "conf/conf.h"
#include "record/record.h"

CarrelRecordIndex *carrel_record_index_new(void);
CarrelRecordIndex *carrel_record_index_copy(const CarrelRecordIndex *index);
/* Writes dir's index.json atomically. */
gboolean carrel_record_index_save(const CarrelRecordIndex *index, const char *dir, GError **error);

/*
 * One segment being written (record-encoder.c): appsrc ! videoconvert ! vp8enc ! webmmux !
 * filesink, frames of one size in packed RGB, timestamps in ms from the segment's start.
 */
typedef struct _CarrelRecordEncoder CarrelRecordEncoder;

/* Initializes GStreamer once; FAILED when an element the encoder needs is missing. */
gboolean carrel_record_gst_init(GError **error);
CarrelRecordEncoder *carrel_record_encoder_new(const char *path, guint width, guint height,
                                               guint keyframe_dist, GError **error);
/* Pushes one frame shown from pts_ms for duration_ms. FAILED when the pipeline reported an
 * error. */
gboolean carrel_record_encoder_push(CarrelRecordEncoder *enc, GBytes *rgb, guint64 pts_ms,
                                    guint64 duration_ms, GError **error);
/* Ends the stream and waits until the muxer wrote the file's end (its cues: seekable). */
gboolean carrel_record_encoder_finish(CarrelRecordEncoder *enc, GError **error);
/* Stops the pipeline (after finish, or to abandon it). */
void carrel_record_encoder_free(CarrelRecordEncoder *enc);
G_DEFINE_AUTOPTR_CLEANUP_FUNC(CarrelRecordEncoder, carrel_record_encoder_free)
