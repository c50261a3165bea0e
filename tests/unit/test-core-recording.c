/*
 * Unit tests of core's screen recording on the fake hypervisor: a session under a policy with
 * [recording] enabled is recorded while it runs; pause and stop finish its segment (a valid
 * WebM with its sha256 listed), resume starts a new one, events inside a segment are indexed,
 * segment names are checked, a failure is an event that leaves the session running, and the
 * recording goes with the session. The fixture is core-fixture.c.
 */
#include <fcntl.h>
#include <unistd.h>

#include "core-fixture.h"

#define REC_POLICY "[recording]\nenabled=true\nfps=10\nsegment_s=10\nmax_mib=64\n"

/* A PPM screen of 64x48 in one grey. */
static GBytes *
screen_of(guint8 grey)
{
    const char *header = "P6\n64 48\n255\n";
    gsize hlen = strlen(header), len = hlen + 64 * 48 * 3;
    guint8 *data = g_malloc(len);

    memcpy(data, header, hlen);
    memset(data + hlen, grey, len - hlen);
    return g_bytes_new_take(data, len);
}

static void
show(Fixture *fx, guint8 grey)
{
    g_autoptr(GBytes) screen = screen_of(grey);

    carrel_hypervisor_fake_set_screen(fx->hv, screen);
    /* At 10 frames a second, a few frames of it. */
    g_usleep(350 * 1000);
}

static CarrelSession *
create_recorded(Fixture *fx, const char *name)
{
    CarrelSessionRequest req = {
        .template_name = (char *)"tiny", .name = (char *)name, .policy = (char *)"rec"};
    g_autoptr(GError) error = NULL;
    CarrelSession *s;

    assert_true(
        carrel_policy_set_add(fx->mgr->policies, "rec", REC_POLICY, strlen(REC_POLICY), &error));
    s = carrel_manager_session_create(fx->mgr, ADMIN, &req, &error);
    if (!s)
        fail_msg("create: %s", error->message);
    /* What the watcher does every round. */
    (void)carrel_manager_watch(fx->mgr);
    return s;
}

static JsonObject *
recording(Fixture *fx, const char *id, JsonNode **ret_node)
{
    g_autoptr(GError) error = NULL;

    *ret_node = carrel_manager_session_recording(fx->mgr, ADMIN, id, &error);
    if (!*ret_node)
        fail_msg("recording: %s", error->message);
    return json_node_get_object(*ret_node);
}

static JsonObject *
segment(JsonObject *rec, guint i)
{
    return json_array_get_object_element(json_object_get_array_member(rec, "segments"), i);
}

/* The recording once it lists a first segment: frames are encoded on a thread of their own,
 * later than show()'s few frames on a busy host (CI's sanitizer tier); at most 20 s. */
static JsonObject *
recording_with_segment(Fixture *fx, const char *id, JsonNode **ret_node)
{
    for (guint i = 0; i < 400; i++) {
        JsonObject *rec = recording(fx, id, ret_node);

        if (json_array_get_length(json_object_get_array_member(rec, "segments")) > 0)
            return rec;
        g_clear_pointer(ret_node, json_node_unref);
        g_usleep(50 * 1000);
    }
    fail_msg("no segment listed within 20 s");
    return NULL;
}

/* The segment is served: a WebM whose sha256 is the one listed. */
static void
assert_served(Fixture *fx, const char *id, JsonObject *seg)
{
    g_autoptr(GError) error = NULL;
    g_autofree char *sha = NULL;
    g_autofree char *path = carrel_manager_session_recording_segment(
        fx->mgr, ADMIN, id, json_object_get_string_member(seg, "name"), &sha, &error);
    g_autofree char *data = NULL;
    g_autofree char *actual = NULL;
    gsize len = 0;

    if (!path)
        fail_msg("segment: %s", error->message);
    assert_true(g_file_get_contents(path, &data, &len, NULL));
    assert_true(len > 4);
    assert_memory_equal(data, "\x1a\x45\xdf\xa3", 4);
    actual = carrel_util_sha256_file(path, NULL);
    assert_string_equal(actual, json_object_get_string_member(seg, "sha256"));
    assert_string_equal(sha, actual);
}

/* The evidence bundle holds each finished segment, its sha256 in the signed manifest the one
 * listed, and recording.json; the bundle verifies. */
static void
assert_exported(Fixture *fx, const char *id, JsonObject *rec)
{
    g_auto(CarrelTransfer) t = {0};
    g_autoptr(GError) error = NULL;
    g_autoptr(CarrelEvidenceReport) r = NULL;
    JsonArray *segs = json_object_get_array_member(rec, "segments");
    guint found = 0;
    gboolean index_found = FALSE;
    int fd;

    assert_true(carrel_manager_session_export(fx->mgr, ADMIN, id, &t, &error));
    fd = g_open(t.host_path, O_RDONLY | O_CLOEXEC, 0);
    assert_true(fd >= 0);
    r = carrel_evidence_verify(fd, NULL, &error);
    close(fd);
    assert_non_null(r);
    assert_true(carrel_evidence_report_ok(r));
    for (guint i = 0; i < r->manifest->files->len; i++) {
        const CarrelEvidenceFile *f = g_ptr_array_index(r->manifest->files, i);
        index_found |= g_str_equal(f->path, "recording.json");
        for (guint k = 0; k < json_array_get_length(segs); k++) {
            JsonObject *seg = json_array_get_object_element(segs, k);
            g_autofree char *member =
                g_strconcat("recording/", json_object_get_string_member(seg, "name"), NULL);
            if (!g_str_equal(f->path, member))
                continue;
            assert_string_equal(f->kind, "recording");
            assert_string_equal(f->sha256, json_object_get_string_member(seg, "sha256"));
            found++;
        }
    }
    assert_true(index_found);
    assert_int_equal(found, json_array_get_length(segs));
    (void)g_unlink(t.host_path);
}

static void
test_record_lifecycle(void **state)
{
    Fixture *fx = *state;
    g_autoptr(CarrelTemplate) tmpl G_GNUC_UNUSED = import(fx, "tiny");
    g_autoptr(GError) error = NULL;
    g_autoptr(CarrelSession) s = create_recorded(fx, "rec");
    g_autoptr(CarrelSession) after = NULL;
    g_autoptr(JsonNode) node = NULL;
    g_autoptr(GBytes) shot = NULL;
    CarrelScreenshotRequest req = {.quality = 80, .scale = 1.0};
    JsonObject *rec;
    JsonArray *events;
    gint64 shot_seq = 0;

    assert_true(carrel_manager_recording_active(fx->mgr, s->id));
    show(fx, 10);
    show(fx, 100);
    /* The fake has no VNC display: a screenshot every tick, counted (a loaded host's recorder
     * may be late for its ticks: up to 10 s). */
    rec = recording(fx, s->id, &node);
    for (int i = 0; i < 100 && json_object_get_int_member(rec, "screenshots") < 2; i++) {
        g_clear_pointer(&node, json_node_unref);
        g_usleep(100 * 1000);
        rec = recording(fx, s->id, &node);
    }
    assert_string_equal(json_object_get_string_member(rec, "changes_from"), "screenshots");
    assert_true(json_object_get_int_member(rec, "screenshots") >= 2);
    g_clear_pointer(&node, json_node_unref);
    /* An event while it records: the index maps it into the segment. */
    shot = carrel_manager_session_screenshot(fx->mgr, ADMIN, s->id, &req, &error);
    assert_non_null(shot);
    show(fx, 200);
    after = carrel_manager_session_pause(fx->mgr, ADMIN, s->id, &error);
    assert_non_null(after);
    g_clear_pointer(&after, carrel_session_free);
    assert_false(carrel_manager_recording_active(fx->mgr, s->id));

    rec = recording(fx, s->id, &node);
    assert_true(json_object_get_boolean_member(rec, "enabled"));
    assert_true(json_object_get_null_member(rec, "changes_from"));
    assert_true(json_object_get_null_member(rec, "screenshots"));
    assert_int_equal(json_object_get_int_member(rec, "fps"), 10);
    assert_int_equal(json_array_get_length(json_object_get_array_member(rec, "segments")), 1);
    assert_false(json_object_get_boolean_member(segment(rec, 0), "open"));
    assert_true(json_object_get_int_member(segment(rec, 0), "frames") >= 3);
    assert_true(json_object_get_int_member(segment(rec, 0), "duration_ms") > 0);
    assert_served(fx, s->id, segment(rec, 0));
    {
        g_autoptr(GPtrArray) evs =
            carrel_manager_session_events(fx->mgr, ADMIN, s->id, 0, 1000, &error);
        for (guint i = 0; i < evs->len; i++) {
            CarrelEvent *ev = g_ptr_array_index(evs, i);
            if (ev->screenshot)
                shot_seq = ev->seq;
        }
    }
    assert_true(shot_seq > 0);
    events = json_object_get_array_member(rec, "events");
    {
        gboolean found = FALSE;
        for (guint i = 0; i < json_array_get_length(events); i++) {
            JsonObject *e = json_array_get_object_element(events, i);
            if (json_object_get_int_member(e, "seq") != shot_seq)
                continue;
            found = TRUE;
            assert_string_equal(json_object_get_string_member(e, "segment"), "seg-000001.webm");
            assert_true(json_object_get_int_member(e, "offset_ms") > 0);
        }
        assert_true(found);
    }
    g_clear_pointer(&node, json_node_unref);

    /* Kept across the pause: a new segment after resume, finished by stop. */
    after = carrel_manager_session_resume(fx->mgr, ADMIN, s->id, &error);
    assert_non_null(after);
    g_clear_pointer(&after, carrel_session_free);
    assert_true(carrel_manager_recording_active(fx->mgr, s->id));
    show(fx, 50);
    after = carrel_manager_session_stop(fx->mgr, ADMIN, s->id, 0, &error);
    assert_non_null(after);
    assert_false(carrel_manager_recording_active(fx->mgr, s->id));
    rec = recording(fx, s->id, &node);
    assert_int_equal(json_array_get_length(json_object_get_array_member(rec, "segments")), 2);
    assert_string_equal(json_object_get_string_member(segment(rec, 1), "name"), "seg-000002.webm");
    assert_served(fx, s->id, segment(rec, 0));
    assert_served(fx, s->id, segment(rec, 1));
    assert_exported(fx, s->id, rec);
    /* A watcher round does not start it again for a stopped session. */
    (void)carrel_manager_watch(fx->mgr);
    assert_false(carrel_manager_recording_active(fx->mgr, s->id));
}

static void
test_segment_names(void **state)
{
    Fixture *fx = *state;
    g_autoptr(CarrelTemplate) tmpl G_GNUC_UNUSED = import(fx, "tiny");
    g_autoptr(CarrelSession) s = create_recorded(fx, "names");
    const char *bad[] = {"../x", "seg-1.webm/..", "../../state.db", "seg-000001.webm/",
                         "",     "index.json"};
    g_autoptr(GError) error = NULL;
    g_autofree char *path = NULL;
    g_autoptr(JsonNode) node = NULL;
    JsonObject *rec;

    for (guint i = 0; i < G_N_ELEMENTS(bad); i++) {
        g_autoptr(GError) e = NULL;
        assert_null(
            carrel_manager_session_recording_segment(fx->mgr, ADMIN, s->id, bad[i], NULL, &e));
        assert_true(g_error_matches(e, CARREL_ERROR, CARREL_ERROR_INVALID_ARG));
    }
    show(fx, 30);
    /* The segment being written is listed open, and not served. */
    rec = recording_with_segment(fx, s->id, &node);
    assert_true(json_object_get_boolean_member(segment(rec, 0), "open"));
    assert_true(json_object_get_null_member(segment(rec, 0), "sha256"));
    path = carrel_manager_session_recording_segment(fx->mgr, ADMIN, s->id, "seg-000001.webm", NULL,
                                                    &error);
    assert_null(path);
    assert_true(g_error_matches(error, CARREL_ERROR, CARREL_ERROR_NOT_FOUND));
    g_clear_error(&error);
    assert_null(carrel_manager_session_recording_segment(fx->mgr, ADMIN, s->id, "seg-000009.webm",
                                                         NULL, &error));
    assert_true(g_error_matches(error, CARREL_ERROR, CARREL_ERROR_NOT_FOUND));
}

/* Whether the events hold the recording's "failed", with its error. */
static gboolean
recording_failed(GPtrArray *events)
{
    for (guint i = 0; i < events->len; i++) {
        CarrelEvent *ev = g_ptr_array_index(events, i);

        if (g_str_equal(ev->kind, "recording") && g_str_equal(ev->action, "failed")) {
            assert_non_null(ev->error);
            return TRUE;
        }
    }
    return FALSE;
}

/* A recording that cannot be written ends with an event; the session runs on. */
static void
test_failure_leaves_session(void **state)
{
    Fixture *fx = *state;
    g_autoptr(CarrelTemplate) tmpl G_GNUC_UNUSED = import(fx, "tiny");
    g_autoptr(GError) error = NULL;
    CarrelSessionRequest req = {
        .template_name = (char *)"tiny", .name = (char *)"broken", .policy = (char *)"rec"};
    g_autoptr(CarrelSession) s = NULL;
    g_autoptr(CarrelSession) now = NULL;
    g_autoptr(GPtrArray) events = NULL;
    g_autofree char *dir = NULL;
    gboolean failed = FALSE;

    assert_true(
        carrel_policy_set_add(fx->mgr->policies, "rec", REC_POLICY, strlen(REC_POLICY), &error));
    s = carrel_manager_session_create(fx->mgr, ADMIN, &req, &error);
    assert_non_null(s);
    /* A file where the folder would be: the recorder cannot open it. */
    dir = carrel_manager_recording_dir(s);
    assert_true(g_file_set_contents(dir, "x", 1, NULL));
    /* Ended, and not started again by the next rounds while the session runs. The recorder
     * fails on a thread of its own: up to 20 s on a loaded host under ASan (300 ms was not). */
    for (guint round = 0; round < 400 && !failed; round++) {
        (void)carrel_manager_watch(fx->mgr);
        g_usleep(50 * 1000);
        g_clear_pointer(&events, g_ptr_array_unref);
        events = carrel_manager_session_events(fx->mgr, ADMIN, s->id, 0, 1000, &error);
        assert_non_null(events);
        failed = recording_failed(events);
    }
    assert_true(failed);
    now = carrel_store_session_get(fx->mgr->store, s->id, &error);
    assert_int_equal(now->state, CARREL_SESSION_RUNNING);
}

/* Destroyed with its session; a policy without [recording] records nothing. */
static void
test_destroy_and_off(void **state)
{
    Fixture *fx = *state;
    g_autoptr(CarrelTemplate) tmpl G_GNUC_UNUSED = import(fx, "tiny");
    g_autoptr(GError) error = NULL;
    g_autoptr(CarrelSession) s = create_recorded(fx, "gone");
    g_autoptr(CarrelSession) plain = create(fx, "plain", &error);
    g_autoptr(CarrelSession) after = NULL;
    g_autofree char *dir = carrel_manager_recording_dir(s);
    g_autofree char *plain_dir = carrel_manager_recording_dir(plain);
    g_autoptr(JsonNode) node = NULL;
    JsonObject *rec;

    (void)carrel_manager_watch(fx->mgr);
    assert_false(carrel_manager_recording_active(fx->mgr, plain->id));
    show(fx, 77);
    assert_true(g_file_test(dir, G_FILE_TEST_IS_DIR));
    assert_false(g_file_test(plain_dir, G_FILE_TEST_EXISTS));
    rec = recording(fx, plain->id, &node);
    assert_false(json_object_get_boolean_member(rec, "enabled"));
    assert_int_equal(json_array_get_length(json_object_get_array_member(rec, "segments")), 0);
    after = carrel_manager_session_destroy(fx->mgr, ADMIN, s->id, &error);
    assert_non_null(after);
    assert_false(carrel_manager_recording_active(fx->mgr, s->id));
    assert_false(g_file_test(dir, G_FILE_TEST_EXISTS));
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_record_lifecycle, setup, teardown),
        cmocka_unit_test_setup_teardown(test_segment_names, setup, teardown),
        cmocka_unit_test_setup_teardown(test_failure_leaves_session, setup, teardown),
        cmocka_unit_test_setup_teardown(test_destroy_and_off, setup, teardown),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
