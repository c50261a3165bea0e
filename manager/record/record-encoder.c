/*
 * A segment's GStreamer pipeline: appsrc ! videoconvert ! vp8enc ! webmmux ! filesink. Frames
 * carry their own timestamps (variable frame rate: only changed screens are pushed), and the
 * stream is ended with EOS and waited for, so the muxer writes its cues and the file seeks.
 */
#include <gst/app/gstappsrc.h>
#include <gst/gst.h>

#include "record/record-priv.h"

/* How long finishing a segment may take (the encoder drains its queue first). */
#define FINISH_TIMEOUT_S 60

struct _CarrelRecordEncoder {
    GstElement *pipeline;
    GstElement *src;
    GstBus *bus;
    char *path;
    gsize frame_bytes;
};

static const char *const elements[] = {"appsrc", "videoconvert", "vp8enc", "webmmux", "filesink"};

static gpointer
init_once(gpointer data)
{
    GError **slot = data;

    if (!gst_init_check(NULL, NULL, slot))
        return NULL;
    for (guint i = 0; i < G_N_ELEMENTS(elements); i++) {
        g_autoptr(GstElementFactory) f = gst_element_factory_find(elements[i]);
        if (!f) {
            g_set_error(slot, CARREL_ERROR, CARREL_ERROR_FAILED,
                        "GStreamer has no element '%s' (gstreamer1.0-plugins-base and -good)",
                        elements[i]);
            return NULL;
        }
    }
    return GINT_TO_POINTER(1);
}

gboolean
carrel_record_gst_init(GError **error)
{
    static GOnce once = G_ONCE_INIT;
    static GError *failure = NULL;

    g_once(&once, init_once, &failure);
    if (!once.retval) {
        g_propagate_error(error, g_error_copy(failure));
        return FALSE;
    }
    return TRUE;
}

/* The first error the pipeline posted (without waiting), as FAILED; TRUE when none. */
static gboolean
check_bus(CarrelRecordEncoder *enc, GstClockTime wait, gboolean *ret_eos, GError **error)
{
    g_autoptr(GstMessage) msg =
        gst_bus_timed_pop_filtered(enc->bus, wait, GST_MESSAGE_ERROR | GST_MESSAGE_EOS);
    g_autoptr(GError) gerr = NULL;

    if (!msg)
        return TRUE;
    if (GST_MESSAGE_TYPE(msg) == GST_MESSAGE_EOS) {
        if (ret_eos)
            *ret_eos = TRUE;
        return TRUE;
    }
    gst_message_parse_error(msg, &gerr, NULL);
    g_set_error(error, CARREL_ERROR, CARREL_ERROR_FAILED, "encoding '%s': %s", enc->path,
                gerr ? gerr->message : "unknown GStreamer error");
    return FALSE;
}

static GstElement *
make(const char *factory, GError **error)
{
    GstElement *e = gst_element_factory_make(factory, NULL);

    if (!e)
        g_set_error(error, CARREL_ERROR, CARREL_ERROR_FAILED,
                    "GStreamer could not make a '%s' element", factory);
    return e;
}

/* Screen content: realtime speed, good quality on text, a keyframe at least every
 * keyframe_dist frames so a player can seek. */
static void
configure(GstElement *src, GstElement *vp8, GstElement *sink, const char *path, guint width,
          guint height, guint keyframe_dist, gsize frame_bytes)
{
    g_autoptr(GstCaps) caps = gst_caps_new_simple(
        "video/x-raw", "format", G_TYPE_STRING, "RGB", "width", G_TYPE_INT, (int)width, "height",
        G_TYPE_INT, (int)height, "framerate", GST_TYPE_FRACTION, 0, 1, NULL);

    /* Blocks the caller when 4 frames wait: memory stays bounded if encoding falls behind. */
    g_object_set(src, "caps", caps, "format", GST_FORMAT_TIME, "is-live", FALSE, "block", TRUE,
                 "max-bytes", (guint64)frame_bytes * 4, NULL);
    gst_util_set_object_arg(G_OBJECT(vp8), "end-usage", "vbr");
    g_object_set(vp8, "deadline", (gint64)1, "cpu-used", 8, "threads", 1, "keyframe-max-dist",
                 (int)keyframe_dist, "target-bitrate", 1000000, "min-quantizer", 4, "max-quantizer",
                 40, NULL);
    gst_util_set_object_arg(G_OBJECT(vp8), "timebase", "1/1000");
    g_object_set(sink, "location", path, "sync", FALSE, "async", FALSE, NULL);
}

CarrelRecordEncoder *
carrel_record_encoder_new(const char *path, guint width, guint height, guint keyframe_dist,
                          GError **error)
{
    g_autoptr(CarrelRecordEncoder) enc = g_new0(CarrelRecordEncoder, 1);
    GstElement *e[G_N_ELEMENTS(elements)] = {NULL};

    if (!carrel_record_gst_init(error))
        return NULL;
    enc->path = g_strdup(path);
    enc->frame_bytes = (gsize)width * height * 3;
    enc->pipeline = gst_pipeline_new(NULL);
    for (guint i = 0; i < G_N_ELEMENTS(elements); i++) {
        if (!(e[i] = make(elements[i], error)))
            return NULL;
        gst_bin_add(GST_BIN(enc->pipeline), e[i]);
    }
    enc->src = gst_object_ref(e[0]);
    configure(e[0], e[2], e[4], path, width, height, MAX(keyframe_dist, 1), enc->frame_bytes);
    if (!gst_element_link_many(e[0], e[1], e[2], e[3], e[4], NULL)) {
        g_set_error(error, CARREL_ERROR, CARREL_ERROR_FAILED, "GStreamer could not link %s",
                    "appsrc ! videoconvert ! vp8enc ! webmmux ! filesink");
        return NULL;
    }
    enc->bus = gst_element_get_bus(enc->pipeline);
    if (gst_element_set_state(enc->pipeline, GST_STATE_PLAYING) == GST_STATE_CHANGE_FAILURE) {
        g_autoptr(GError) local = NULL;
        if (check_bus(enc, 0, NULL, &local))
            g_set_error(error, CARREL_ERROR, CARREL_ERROR_FAILED,
                        "encoding '%s': the pipeline did not start", path);
        else
            g_propagate_error(error, g_steal_pointer(&local));
        return NULL;
    }
    return g_steal_pointer(&enc);
}

gboolean
carrel_record_encoder_push(CarrelRecordEncoder *enc, GBytes *rgb, guint64 pts_ms,
                           guint64 duration_ms, GError **error)
{
    GstBuffer *buf;

    if (g_bytes_get_size(rgb) != enc->frame_bytes) {
        g_set_error(error, CARREL_ERROR, CARREL_ERROR_INVALID_ARG,
                    "a frame of %zu bytes for a segment of %zu-byte frames", g_bytes_get_size(rgb),
                    enc->frame_bytes);
        return FALSE;
    }
    if (!check_bus(enc, 0, NULL, error))
        return FALSE;
    buf = gst_buffer_new_wrapped_bytes(rgb);
    GST_BUFFER_PTS(buf) = pts_ms * GST_MSECOND;
    GST_BUFFER_DURATION(buf) = MAX(duration_ms, 1) * GST_MSECOND;
    /* push_buffer takes buf, also when it fails. */
    if (gst_app_src_push_buffer(GST_APP_SRC(enc->src), buf) != GST_FLOW_OK) {
        if (check_bus(enc, 0, NULL, error))
            g_set_error(error, CARREL_ERROR, CARREL_ERROR_FAILED,
                        "encoding '%s': the pipeline refused a frame", enc->path);
        return FALSE;
    }
    return TRUE;
}

gboolean
carrel_record_encoder_finish(CarrelRecordEncoder *enc, GError **error)
{
    gboolean eos = FALSE;

    gst_app_src_end_of_stream(GST_APP_SRC(enc->src));
    if (!check_bus(enc, FINISH_TIMEOUT_S * GST_SECOND, &eos, error))
        return FALSE;
    if (!eos) {
        g_set_error(error, CARREL_ERROR, CARREL_ERROR_TIMEOUT,
                    "encoding '%s': the segment did not finish within %d s", enc->path,
                    FINISH_TIMEOUT_S);
        return FALSE;
    }
    return TRUE;
}

void
carrel_record_encoder_free(CarrelRecordEncoder *enc)
{
    if (!enc)
        return;
    if (enc->pipeline)
        gst_element_set_state(enc->pipeline, GST_STATE_NULL);
    g_clear_pointer(&enc->bus, gst_object_unref);
    g_clear_pointer(&enc->src, gst_object_unref);
    g_clear_pointer(&enc->pipeline, gst_object_unref);
    g_free(enc->path);
    g_free(enc);
}
