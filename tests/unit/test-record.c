#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <string.h>
#include <glib/gstdio.h>
#include <gst/gst.h>

#include "record/record.h"

typedef struct {
    char *dir;
} Fixture;

static int
setup(void **state)
{
    Fixture *f = g_new0(Fixture, 1);

    f->dir = g_dir_make_tmp("carrel-record-XXXXXX", NULL);
    *state = f;
    return f->dir ? 0 : -1;
}

static int
teardown(void **state)
{
    Fixture *f = *state;

    assert_true(carrel_util_remove_tree(f->dir, NULL));
    g_free(f->dir);
    g_free(f);
    return 0;
}

/* A binary PPM of one colour, with a square of another at (x, x). */
static GBytes *
make_ppm(guint width, guint height, guint8 fill, guint x)
{
    g_autofree char *header = g_strdup_printf("P6\n%u %u\n255\n", width, height);
    gsize header_len = strlen(header), len = header_len + (gsize)width * height * 3;
    guint8 *data = g_malloc(len);

    memcpy(data, header, header_len);
    memset(data + header_len, fill, len - header_len);
    for (guint y = x; y < MIN(x + 8, height); y++)
        memset(data + header_len + ((gsize)y * width + x) * 3, 255 - fill, 8 * 3);
    return g_bytes_new_take(data, len);
}

/* RGB noise (compresses badly: segments grow fast). */
static GBytes *
make_noise(guint width, guint height, GRand *rand)
{
    gsize len = (gsize)width * height * 3;
    guint8 *data = g_malloc(len);

    for (gsize i = 0; i < len; i++)
        data[i] = (guint8)g_rand_int(rand);
    return g_bytes_new_take(data, len);
}

typedef struct {
    guint frames;
    guint64 end_ns; /* pts + duration of the last decoded frame */
} Decoded;

static void
on_handoff(GstElement *sink, GstBuffer *buf, GstPad *pad, gpointer data)
{
    Decoded *d = data;

    d->frames++;
    if (GST_BUFFER_PTS_IS_VALID(buf))
        d->end_ns = GST_BUFFER_PTS(buf) +
                    (GST_BUFFER_DURATION_IS_VALID(buf) ? GST_BUFFER_DURATION(buf) : 0);
}

/* Demuxes and decodes a segment back with GStreamer: its frames and where the last one ends. */
static Decoded
decode(const char *path)
{
    g_autofree char *desc = g_strdup_printf(
        "filesrc location=\"%s\" ! matroskademux ! vp8dec ! fakesink name=out sync=false "
        "signal-handoffs=true",
        path);
    g_autoptr(GError) error = NULL;
    g_autoptr(GstElement) pipe = gst_parse_launch(desc, &error);
    g_autoptr(GstElement) sink = NULL;
    g_autoptr(GstBus) bus = NULL;
    g_autoptr(GstMessage) msg = NULL;
    Decoded d = {0};

    assert_non_null(pipe);
    sink = gst_bin_get_by_name(GST_BIN(pipe), "out");
    g_signal_connect(sink, "handoff", G_CALLBACK(on_handoff), &d);
    bus = gst_element_get_bus(pipe);
    gst_element_set_state(pipe, GST_STATE_PLAYING);
    msg = gst_bus_timed_pop_filtered(bus, 30 * GST_SECOND, GST_MESSAGE_EOS | GST_MESSAGE_ERROR);
    assert_non_null(msg);
    assert_int_equal(GST_MESSAGE_TYPE(msg), GST_MESSAGE_EOS);
    gst_element_set_state(pipe, GST_STATE_NULL);
    return d;
}

static char *
seg_path(Fixture *f, const CarrelRecordSegment *seg)
{
    return g_build_filename(f->dir, seg->name, NULL);
}

static void
assert_webm(const char *path)
{
    g_autofree char *data = NULL;
    gsize len = 0;

    assert_true(g_file_get_contents(path, &data, &len, NULL));
    assert_true(len > 4);
    /* EBML's magic number: every Matroska and WebM file starts with it. */
    assert_memory_equal(data, "\x1a\x45\xdf\xa3", 4);
}

static void
test_encode(void **state)
{
    Fixture *f = *state;
    CarrelRecordLimits limits = {.fps = 2, .max_bytes = 64 << 20, .segment_ms = 60000};
    g_autoptr(GError) error = NULL;
    g_autoptr(CarrelRecord) rec = carrel_record_open(f->dir, &limits, &error);
    g_autoptr(CarrelRecordIndex) index = NULL;
    const CarrelRecordSegment *seg;
    g_autofree char *path = NULL;
    g_autofree char *sha = NULL;
    guint fills[] = {10, 10, 60, 60, 60, 110, 160, 210};
    guint encoded = 0;
    Decoded d;

    assert_non_null(rec);
    for (guint i = 0; i < G_N_ELEMENTS(fills); i++) {
        g_autoptr(GBytes) ppm = make_ppm(64, 48, (guint8)fills[i], 4);
        gboolean enc = FALSE;
        assert_true(carrel_record_push_ppm(rec, ppm, 1000 + i * 500, &enc, &error));
        encoded += enc;
    }
    /* Unchanged screens are not encoded: 5 different ones of 8. */
    assert_int_equal(encoded, 5);
    index = carrel_record_get_index(rec);
    seg = g_ptr_array_index(index->segments, 0);
    assert_true(seg->open);
    assert_null(carrel_record_index_finished(index, seg->name));
    g_clear_pointer(&index, carrel_record_index_free);
    assert_true(carrel_record_close_segment(rec, 5000, &error));

    index = carrel_record_index_load(f->dir, &error);
    assert_non_null(index);
    assert_int_equal(index->segments->len, 1);
    seg = g_ptr_array_index(index->segments, 0);
    assert_string_equal(seg->name, "seg-000001.webm");
    assert_false(seg->open);
    assert_ptr_equal(carrel_record_index_finished(index, seg->name), seg);
    assert_int_equal(seg->started_ms, 1000);
    assert_int_equal(seg->ended_ms, 5000);
    assert_int_equal(seg->frames, 5);
    path = seg_path(f, seg);
    assert_webm(path);
    sha = carrel_util_sha256_file(path, NULL);
    assert_string_equal(seg->sha256, sha);
    d = decode(path);
    assert_int_equal(d.frames, 5);
    /* The last frame lasts until the close: 4 s from the first frame. */
    assert_true(d.end_ns >= 3900 * GST_MSECOND && d.end_ns <= 4100 * GST_MSECOND);
}

static void
test_roll(void **state)
{
    Fixture *f = *state;
    CarrelRecordLimits limits = {.fps = 4, .max_bytes = 64 << 20, .segment_ms = 2000};
    g_autoptr(GError) error = NULL;
    g_autoptr(CarrelRecord) rec = carrel_record_open(f->dir, &limits, &error);
    g_autoptr(CarrelRecordIndex) index = NULL;
    g_autoptr(GBytes) a = make_ppm(64, 48, 20, 0);
    g_autoptr(GBytes) b = make_ppm(64, 48, 90, 8);
    g_autoptr(GBytes) big = make_ppm(80, 64, 90, 8);

    assert_non_null(rec);
    assert_true(carrel_record_push_ppm(rec, a, 0, NULL, &error));
    assert_true(carrel_record_push_ppm(rec, b, 500, NULL, &error));
    /* A new size: a new segment. */
    assert_true(carrel_record_push_ppm(rec, big, 1000, NULL, &error));
    /* The time limit, even on an unchanged screen: a new segment, starting with that screen. */
    assert_true(carrel_record_push_ppm(rec, big, 3100, NULL, &error));
    assert_true(carrel_record_close_segment(rec, 3600, &error));
    /* Closing again does nothing. */
    assert_true(carrel_record_close_segment(rec, 3700, &error));
    index = carrel_record_get_index(rec);
    assert_int_equal(index->segments->len, 3);
    for (guint i = 0; i < 3; i++) {
        const CarrelRecordSegment *seg = g_ptr_array_index(index->segments, i);
        g_autofree char *path = seg_path(f, seg);
        guint want[] = {2, 1, 1};
        /* Decoded: the last screen once more just before the end, so that players see it
         * stand until then. */
        guint64 end_ms[] = {1000, 2100, 500};
        assert_false(seg->open);
        assert_int_equal(seg->frames, want[i]);
        assert_int_equal(decode(path).frames, want[i] + 1);
        assert_int_equal(decode(path).end_ns / 1000000, end_ms[i]);
    }
    assert_int_equal(((CarrelRecordSegment *)g_ptr_array_index(index->segments, 1))->ended_ms,
                     3100);
}

static guint64
bytes_on_disk(const char *dir)
{
    g_autoptr(GDir) d = g_dir_open(dir, 0, NULL);
    const char *name;
    guint64 total = 0;

    while ((name = g_dir_read_name(d))) {
        g_autofree char *path = g_build_filename(dir, name, NULL);
        GStatBuf st;
        if (g_str_has_suffix(name, ".webm") && g_stat(path, &st) == 0)
            total += (guint64)st.st_size;
    }
    return total;
}

static void
test_budget(void **state)
{
    Fixture *f = *state;
    CarrelRecordLimits limits = {.fps = 10, .max_bytes = 400 * 1024, .segment_ms = 2000};
    g_autoptr(GError) error = NULL;
    g_autoptr(CarrelRecord) rec = carrel_record_open(f->dir, &limits, &error);
    g_autoptr(CarrelRecordIndex) index = NULL;
    g_autoptr(GRand) rand = g_rand_new_with_seed(7);
    g_autofree char *first = NULL;
    guint64 listed = 0;

    assert_non_null(rec);
    for (guint i = 0; i < 120; i++) {
        g_autoptr(GBytes) noise = make_noise(160, 120, rand);
        assert_true(carrel_record_push_rgb(rec, noise, 160, 120, i * 100, NULL, &error));
    }
    assert_true(carrel_record_close_segment(rec, 12000, &error));
    index = carrel_record_index_load(f->dir, &error);
    assert_non_null(index);
    /* Noise fills the budget many times over: the oldest went, the newest stayed. */
    assert_true(index->dropped > 0);
    assert_true(index->segments->len > 0);
    first = g_strdup_printf("seg-%06u.webm", index->dropped + 1);
    assert_string_equal(((CarrelRecordSegment *)g_ptr_array_index(index->segments, 0))->name,
                        first);
    for (guint i = 0; i < index->segments->len; i++)
        listed += ((CarrelRecordSegment *)g_ptr_array_index(index->segments, i))->bytes;
    assert_true(listed <= limits.max_bytes);
    assert_int_equal(bytes_on_disk(f->dir), listed);
    {
        g_autofree char *gone = g_build_filename(f->dir, "seg-000001.webm", NULL);
        assert_false(g_file_test(gone, G_FILE_TEST_EXISTS));
    }
}

static void
test_reopen(void **state)
{
    Fixture *f = *state;
    CarrelRecordLimits limits = {.fps = 2, .max_bytes = 64 << 20, .segment_ms = 60000};
    g_autoptr(GError) error = NULL;
    g_autoptr(CarrelRecordIndex) index = NULL;
    g_autoptr(GBytes) a = make_ppm(32, 32, 20, 0);
    g_autoptr(GBytes) b = make_ppm(32, 32, 200, 8);
    CarrelRecord *rec = carrel_record_open(f->dir, &limits, &error);

    /* Freed with a segment open: it is finished, as after a pause. */
    assert_true(carrel_record_push_ppm(rec, a, 1000, NULL, &error));
    carrel_record_free(rec);
    rec = carrel_record_open(f->dir, &limits, &error);
    assert_non_null(rec);
    assert_true(carrel_record_push_ppm(rec, b, 9000, NULL, &error));
    assert_true(carrel_record_close_segment(rec, 9500, &error));
    carrel_record_free(rec);
    index = carrel_record_index_load(f->dir, &error);
    assert_int_equal(index->segments->len, 2);
    assert_string_equal(((CarrelRecordSegment *)g_ptr_array_index(index->segments, 1))->name,
                        "seg-000002.webm");
    assert_int_equal(((CarrelRecordSegment *)g_ptr_array_index(index->segments, 0))->ended_ms,
                     1500);
}

static void
test_leftover_and_bad_index(void **state)
{
    Fixture *f = *state;
    CarrelRecordLimits limits = {.fps = 2, .max_bytes = 1 << 20, .segment_ms = 10000};
    g_autofree char *index_path = g_build_filename(f->dir, CARREL_RECORD_INDEX, NULL);
    g_autofree char *seg = g_build_filename(f->dir, "seg-000004.webm", NULL);
    const char *left = "{\"next\":5,\"segments\":[{\"name\":\"seg-000004.webm\",\"started_at\":"
                       "7,\"open\":true}]}";
    const char *bad[] = {"[", "{\"segments\":[{\"name\":\"../x\"}]}",
                         "{\"segments\":[{\"name\":\"seg-1.webm/..\"}]}"};
    g_autoptr(GError) error = NULL;
    g_autoptr(CarrelRecord) rec = NULL;
    g_autoptr(CarrelRecordIndex) index = NULL;

    assert_true(g_file_set_contents(seg, "\x1a\x45\xdf\xa3partial", 11, NULL));
    assert_true(g_file_set_contents(index_path, left, -1, NULL));
    rec = carrel_record_open(f->dir, &limits, &error);
    assert_non_null(rec);
    index = carrel_record_get_index(rec);
    assert_false(((CarrelRecordSegment *)g_ptr_array_index(index->segments, 0))->open);
    assert_int_equal(((CarrelRecordSegment *)g_ptr_array_index(index->segments, 0))->bytes, 11);
    assert_int_equal(index->next, 5);
    g_clear_pointer(&rec, carrel_record_free);
    for (guint i = 0; i < G_N_ELEMENTS(bad); i++) {
        g_autoptr(GError) e = NULL;
        assert_true(g_file_set_contents(index_path, bad[i], -1, NULL));
        assert_null(carrel_record_index_load(f->dir, &e));
        assert_true(g_error_matches(e, CARREL_ERROR, CARREL_ERROR_INVALID_ARG));
    }
}

static void
test_names(void **state)
{
    const char *good[] = {"seg-000001.webm", "seg-999999.webm"};
    const char *bad[] = {"../x",
                         "seg-1.webm/..",
                         "seg-00001.webm",
                         "seg-0000001.webm",
                         "seg-00000a.webm",
                         "seg-000001.mkv",
                         "",
                         "/seg-000001.webm",
                         "index.json",
                         "seg-000001.webm/"};

    for (guint i = 0; i < G_N_ELEMENTS(good); i++)
        assert_true(carrel_record_name_ok(good[i]));
    for (guint i = 0; i < G_N_ELEMENTS(bad); i++)
        assert_false(carrel_record_name_ok(bad[i]));
    assert_false(carrel_record_name_ok(NULL));
}

static void
test_bad_frames(void **state)
{
    Fixture *f = *state;
    CarrelRecordLimits limits = {.fps = 2, .max_bytes = 1 << 20, .segment_ms = 10000};
    CarrelRecordLimits zero = {.fps = 0, .max_bytes = 1 << 20, .segment_ms = 10000};
    g_autoptr(GError) error = NULL;
    g_autoptr(CarrelRecord) rec = carrel_record_open(f->dir, &limits, &error);
    g_autoptr(GBytes) junk = g_bytes_new_static("P6\n2 2\n255\nxx", 13);

    assert_false(carrel_record_push_ppm(rec, junk, 0, NULL, &error));
    assert_true(g_error_matches(error, CARREL_ERROR, CARREL_ERROR_INVALID_ARG));
    g_clear_error(&error);
    assert_false(carrel_record_push_rgb(rec, junk, 100, 100, 0, NULL, &error));
    assert_true(g_error_matches(error, CARREL_ERROR, CARREL_ERROR_INVALID_ARG));
    g_clear_error(&error);
    assert_null(carrel_record_open(f->dir, &zero, &error));
    assert_true(g_error_matches(error, CARREL_ERROR, CARREL_ERROR_INVALID_ARG));
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_encode, setup, teardown),
        cmocka_unit_test_setup_teardown(test_roll, setup, teardown),
        cmocka_unit_test_setup_teardown(test_budget, setup, teardown),
        cmocka_unit_test_setup_teardown(test_reopen, setup, teardown),
        cmocka_unit_test_setup_teardown(test_leftover_and_bad_index, setup, teardown),
        cmocka_unit_test(test_names),
        cmocka_unit_test_setup_teardown(test_bad_frames, setup, teardown),
    };

    gst_init(NULL, NULL);
    return cmocka_run_group_tests(tests, NULL, NULL);
}
