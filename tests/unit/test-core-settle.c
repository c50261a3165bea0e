/*
 * The observation after an action waits for the screen to settle: the fake's screen draws new
 * frames a scripted number of screenshots after each HID event, and the returned frame is the
 * one after the action's effect, never one from before it. No assertion on how fast: only what
 * was returned, how many samples it took, and lower bounds the waits guarantee.
 */
#include "core-fixture.h"
#include "image/image.h"

static JsonNode *
act(Fixture *fx, const char *id, const char *json, GError **error)
{
    g_autoptr(JsonNode) body = json_from_string(json, NULL);

    assert_non_null(body);
    return carrel_manager_session_computer(fx->mgr, ADMIN, id, body, error);
}

/* The generation of the fake frame an observation object carries (-1: not a fake frame). */
static gint
generation_of(JsonObject *shot)
{
    gsize len = 0;
    g_autofree guchar *png = g_base64_decode(json_object_get_string_member(shot, "data"), &len);
    g_autoptr(GBytes) bytes = g_bytes_new(png, len);

    return carrel_hypervisor_fake_screen_generation(bytes);
}

static JsonObject *
final_shot(JsonNode *reply)
{
    JsonObject *obj = json_node_get_object(reply);

    assert_true(json_object_has_member(obj, "screenshot"));
    return json_object_get_object_member(obj, "screenshot");
}

static CarrelSession *
drawing_session(Fixture *fx, const char *name, guint delay, guint frames)
{
    g_autoptr(CarrelTemplate) tmpl G_GNUC_UNUSED = import(fx, "tiny");
    g_autoptr(GError) error = NULL;
    CarrelSession *s = create(fx, name, &error);

    if (!s)
        fail_msg("%s", error->message);
    carrel_hypervisor_fake_set_drawing(fx->hv, TRUE, delay, frames);
    return s;
}

/* The effect shows two samples after the click: those two frames (from before it) are not
 * returned; the changed one is, once a second sample shows it unchanged (quiet_ms 0). */
static void
test_returns_changed_frame(void **state)
{
    Fixture *fx = *state;
    g_autoptr(CarrelSession) s = drawing_session(fx, "late", 2, 1);
    g_autoptr(GError) error = NULL;
    g_autoptr(JsonNode) reply = act(fx, s->id,
                                    "{\"actions\":[{\"action\":\"left_click\",\"coordinate\":[1,"
                                    "1]}],\"settle\":{\"quiet_ms\":0,\"window_ms\":10000,"
                                    "\"max_ms\":10000}}",
                                    &error);
    JsonObject *shot;

    if (!reply)
        fail_msg("%s", error->message);
    shot = final_shot(reply);
    assert_int_equal(generation_of(shot), 1);
    assert_true(json_object_get_boolean_member(shot, "settled"));
    assert_true(json_object_get_boolean_member(shot, "changed"));
    /* Two old frames, the new one, and the same again for as long as the change took to come. */
    assert_true(json_object_get_int_member(shot, "samples") >= 4);
    assert_true(json_object_get_int_member(shot, "settled_ms") >= 0);
    assert_int_equal(json_object_get_int_member(json_node_get_object(reply), "settled_ms"),
                     json_object_get_int_member(shot, "settled_ms"));
    assert_true(
        json_object_has_member(json_object_get_object_member(shot, "timings"), "settle_ms"));
}

/* A screen drawing three frames in a row: the last is returned, not the first change. */
static void
test_waits_for_last_frame(void **state)
{
    Fixture *fx = *state;
    g_autoptr(CarrelSession) s = drawing_session(fx, "busy", 0, 3);
    g_autoptr(GError) error = NULL;
    g_autoptr(JsonNode) reply = act(fx, s->id,
                                    "{\"actions\":[{\"action\":\"key\",\"text\":\"a\"}],"
                                    "\"settle\":{\"quiet_ms\":40,\"window_ms\":10000,"
                                    "\"max_ms\":10000}}",
                                    &error);
    JsonObject *shot;

    if (!reply)
        fail_msg("%s", error->message);
    shot = final_shot(reply);
    assert_int_equal(generation_of(shot), 3);
    assert_true(json_object_get_boolean_member(shot, "settled"));
    /* Three new frames, then at least two more samples 20 ms apart for 40 ms of quiet. */
    assert_true(json_object_get_int_member(shot, "samples") >= 5);
    assert_true(json_object_get_int_member(shot, "settled_ms") >= 40);
}

/* A slow guest: its first change comes twelve samples after the key, and its second four samples
 * after the first. The quiet of 60 ms is shorter than that pause, but the wait for quiet is as
 * long as the guest took to react: the second frame is returned, not the first. */
static void
test_slow_guest_is_waited_for(void **state)
{
    Fixture *fx = *state;
    g_autoptr(CarrelSession) s = drawing_session(fx, "slow", 12, 2);
    g_autoptr(GError) error = NULL;
    g_autoptr(JsonNode) reply = NULL;
    JsonObject *shot;

    carrel_hypervisor_fake_set_drawing_gap(fx->hv, 4);
    reply = act(fx, s->id,
                "{\"actions\":[{\"action\":\"key\",\"text\":\"a\"}],"
                "\"settle\":{\"quiet_ms\":60,\"window_ms\":10000,\"max_ms\":10000}}",
                &error);
    if (!reply)
        fail_msg("%s", error->message);
    shot = final_shot(reply);
    assert_int_equal(generation_of(shot), 2);
    assert_true(json_object_get_boolean_member(shot, "settled"));
}

/* A screen that never stops changing: the cap returns the newest frame, not settled. */
static void
test_cap_is_not_settled(void **state)
{
    Fixture *fx = *state;
    g_autoptr(CarrelSession) s = drawing_session(fx, "video", 0, G_MAXUINT);
    g_autoptr(GError) error = NULL;
    g_autoptr(JsonNode) reply = act(fx, s->id,
                                    "{\"actions\":[{\"action\":\"key\",\"text\":\"a\"}],"
                                    "\"settle\":{\"window_ms\":50,\"max_ms\":200}}",
                                    &error);
    JsonObject *shot;

    if (!reply)
        fail_msg("%s", error->message);
    shot = final_shot(reply);
    assert_false(json_object_get_boolean_member(shot, "settled"));
    assert_false(json_object_get_boolean_member(json_node_get_object(reply), "settled"));
    assert_true(json_object_get_boolean_member(shot, "changed"));
    assert_true(json_object_get_int_member(shot, "settled_ms") >= 200);
    assert_int_equal(generation_of(shot), json_object_get_int_member(shot, "samples"));
}

/* An action with no visible effect returns once the window has passed, settled, unchanged. */
static void
test_no_change_returns_after_window(void **state)
{
    Fixture *fx = *state;
    g_autoptr(CarrelSession) s = drawing_session(fx, "still", 0, 0);
    g_autoptr(GError) error = NULL;
    g_autoptr(JsonNode) reply = act(fx, s->id,
                                    "{\"actions\":[{\"action\":\"mouse_move\",\"coordinate\":[2,"
                                    "2]}],\"settle\":{\"window_ms\":120}}",
                                    &error);
    JsonObject *shot;

    if (!reply)
        fail_msg("%s", error->message);
    shot = final_shot(reply);
    assert_true(json_object_get_boolean_member(shot, "settled"));
    assert_false(json_object_get_boolean_member(shot, "changed"));
    assert_int_equal(generation_of(shot), 0);
    assert_true(json_object_get_int_member(shot, "settled_ms") >= 120);
    assert_true(json_object_get_int_member(shot, "samples") >= 2);
}

/* An effect that comes 15 samples (at least 300 ms) after the last event: after a key press the
 * default window (1 s for keys) waits for it; after a pointer move the 250 ms window has passed
 * by then, and the unchanged screen is returned. */
static void
test_keys_wait_longer(void **state)
{
    Fixture *fx = *state;
    g_autoptr(CarrelSession) s = drawing_session(fx, "slow-echo", 15, 1);
    g_autoptr(GError) error = NULL;
    g_autoptr(JsonNode) typed = act(fx, s->id, "{\"action\":\"key\",\"text\":\"a\"}", &error);
    g_autoptr(JsonNode) moved = NULL;
    JsonObject *shot;

    if (!typed)
        fail_msg("%s", error->message);
    shot = final_shot(typed);
    assert_true(json_object_get_boolean_member(shot, "changed"));
    assert_int_equal(generation_of(shot), 1);
    moved = act(fx, s->id, "{\"action\":\"mouse_move\",\"coordinate\":[3,3]}", &error);
    if (!moved)
        fail_msg("%s", error->message);
    shot = final_shot(moved);
    assert_true(json_object_get_boolean_member(shot, "settled"));
    assert_false(json_object_get_boolean_member(shot, "changed"));
    assert_int_equal(generation_of(shot), 1);
}

/* The old fixed wait, for side-by-side benches: one look, nothing claimed settled. */
static void
test_fixed_wait(void **state)
{
    Fixture *fx = *state;
    g_autoptr(CarrelSession) s = drawing_session(fx, "fixed", 0, 1);
    g_autoptr(GError) error = NULL;
    g_autoptr(JsonNode) reply = act(fx, s->id,
                                    "{\"actions\":[{\"action\":\"key\",\"text\":\"a\"}],"
                                    "\"settle\":{\"fixed_ms\":60}}",
                                    &error);
    JsonObject *shot;

    if (!reply)
        fail_msg("%s", error->message);
    shot = final_shot(reply);
    assert_false(json_object_get_boolean_member(shot, "settled"));
    assert_true(json_object_get_boolean_member(shot, "changed"));
    assert_int_equal(json_object_get_int_member(shot, "samples"), 1);
    assert_true(json_object_get_int_member(shot, "settled_ms") >= 60);
}

/* observe "each": every action's observation settles on its own effect; a screenshot before any
 * input (and the reply of a look-only batch) carries no settle members. */
static void
test_each_action_settles(void **state)
{
    Fixture *fx = *state;
    g_autoptr(CarrelSession) s = drawing_session(fx, "each", 1, 1);
    g_autoptr(GError) error = NULL;
    g_autoptr(JsonNode) reply = act(fx, s->id,
                                    "{\"observe\":\"each\",\"actions\":[{\"action\":"
                                    "\"screenshot\"},{\"action\":\"key\",\"text\":\"a\"},{"
                                    "\"action\":\"key\",\"text\":\"b\"}],\"settle\":{\"quiet_ms\":"
                                    "0,\"window_ms\":10000,\"max_ms\":10000}}",
                                    &error);
    JsonArray *results;

    if (!reply)
        fail_msg("%s", error->message);
    results = json_object_get_array_member(json_node_get_object(reply), "results");
    assert_int_equal(json_array_get_length(results), 3);
    assert_false(json_object_has_member(
        json_object_get_object_member(json_array_get_object_element(results, 0), "output"),
        "settled_ms"));
    for (guint i = 1; i < 3; i++) {
        JsonObject *shot =
            json_object_get_object_member(json_array_get_object_element(results, i), "screenshot");

        assert_int_equal(generation_of(shot), (gint)i);
        assert_true(json_object_get_boolean_member(shot, "settled"));
        assert_true(json_object_get_int_member(shot, "samples") >= 3);
    }
}

/* A batch's observation compares with a frame taken just before its last input action: what
 * the earlier key drew (generation 1, seen by that frame) does not pass for the last key's
 * effect, which is the frame returned (generation 2). */
static void
test_reference_before_last_input(void **state)
{
    Fixture *fx = *state;
    g_autoptr(CarrelSession) s = drawing_session(fx, "two", 0, 1);
    g_autoptr(GError) error = NULL;
    guint before = carrel_hypervisor_fake_get_screenshots(fx->hv);
    g_autoptr(JsonNode) reply = act(fx, s->id,
                                    "{\"actions\":[{\"action\":\"key\",\"text\":\"a\"},{"
                                    "\"action\":\"key\",\"text\":\"b\"}],\"settle\":{"
                                    "\"quiet_ms\":0,\"window_ms\":10000,\"max_ms\":10000}}",
                                    &error);
    JsonObject *shot;
    gint64 samples;

    if (!reply)
        fail_msg("%s", error->message);
    shot = final_shot(reply);
    samples = json_object_get_int_member(shot, "samples");
    assert_int_equal(generation_of(shot), 2);
    /* Two at least: more when the time from the key to the first sample (the action's event
     * written between them, slow on a busy host) was longer than the 20 ms between samples. */
    assert_true(samples >= 2);
    /* The batch's first look and one reference, before the second key: none per key. */
    assert_int_equal(carrel_hypervisor_fake_get_screenshots(fx->hv) - before, 2 + samples);
}

/* The window after keys a request's settle gives. */
static guint
keys_window(const char *settle)
{
    g_autofree char *json = g_strdup_printf(
        "{\"actions\":[{\"action\":\"key\",\"text\":\"a\"}],\"settle\":%s}", settle);
    g_autoptr(JsonNode) body = json_from_string(json, NULL);
    g_autoptr(CarrelActionBatch) batch = carrel_action_batch_from_json(body, NULL);

    assert_non_null(batch);
    return batch->settle.keys_window_ms;
}

/* The request's settle members are checked: bad ones are refused before anything is sent. */
static void
test_settle_parse(void **state)
{
    static const char *const bad[] = {
        /* the window beyond the cap (parenthesised: one string in two lines) */
        ("{\"actions\":[{\"action\":\"key\",\"text\":\"a\"}],"
         "\"settle\":{\"window_ms\":500,\"max_ms\":100}}"),
        "{\"actions\":[{\"action\":\"key\",\"text\":\"a\"}],\"settle\":{\"wait\":1}}",
        "{\"actions\":[{\"action\":\"key\",\"text\":\"a\"}],\"settle\":{\"max_ms\":100000}}",
        "{\"actions\":[{\"action\":\"key\",\"text\":\"a\"}],\"settle\":300}",
    };
    g_autoptr(JsonNode) good = json_from_string(
        "{\"actions\":[{\"action\":\"key\",\"text\":\"a\"}],\"settle\":{\"quiet_ms\":10}}", NULL);
    g_autoptr(CarrelActionBatch) batch = carrel_action_batch_from_json(good, NULL);

    (void)state;
    assert_non_null(batch);
    assert_int_equal(batch->settle.quiet_ms, 10);
    assert_int_equal(batch->settle.window_ms, CARREL_SETTLE_WINDOW_MS);
    assert_int_equal(batch->settle.max_ms, CARREL_SETTLE_MAX_MS);
    assert_int_equal(batch->settle.fixed_ms, 0);
    assert_int_equal(batch->settle.keys_window_ms, CARREL_SETTLE_KEYS_WINDOW_MS);
    assert_int_equal(keys_window("{\"window_ms\":500}"), 500);
    assert_int_equal(keys_window("{\"max_ms\":600}"), 600);
    for (gsize i = 0; i < G_N_ELEMENTS(bad); i++) {
        g_autoptr(JsonNode) body = json_from_string(bad[i], NULL);
        g_autoptr(GError) error = NULL;
        g_autoptr(CarrelActionBatch) refused = carrel_action_batch_from_json(body, &error);

        assert_null(refused);
        assert_true(g_error_matches(error, CARREL_ERROR, CARREL_ERROR_INVALID_ARG));
        assert_non_null(strstr(error->message, "settle"));
    }
}

/* Equal pixels hash equally whatever the header's spacing; one changed byte changes the hash. */
static void
test_frame_hash(void **state)
{
    static const char a[] = "P6\n2 1\n255\n\x01\x02\x03\x04\x05\x06";
    static const char b[] = "P6 2 1 255\n\x01\x02\x03\x04\x05\x06";
    static const char c[] = "P6\n2 1\n255\n\x01\x02\x03\x04\x05\x07";
    g_autoptr(GBytes) pa = g_bytes_new_static(a, sizeof(a) - 1);
    g_autoptr(GBytes) pb = g_bytes_new_static(b, sizeof(b) - 1);
    g_autoptr(GBytes) pc = g_bytes_new_static(c, sizeof(c) - 1);
    g_autoptr(GBytes) junk = g_bytes_new_static("P5", 2);

    (void)state;
    assert_true(carrel_image_ppm_hash(pa) != 0);
    assert_true(carrel_image_ppm_hash(pa) == carrel_image_ppm_hash(pb));
    assert_true(carrel_image_ppm_hash(pa) != carrel_image_ppm_hash(pc));
    assert_true(carrel_image_ppm_hash(junk) == 0);
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_returns_changed_frame, setup, teardown),
        cmocka_unit_test_setup_teardown(test_waits_for_last_frame, setup, teardown),
        cmocka_unit_test_setup_teardown(test_slow_guest_is_waited_for, setup, teardown),
        cmocka_unit_test_setup_teardown(test_cap_is_not_settled, setup, teardown),
        cmocka_unit_test_setup_teardown(test_no_change_returns_after_window, setup, teardown),
        cmocka_unit_test_setup_teardown(test_keys_wait_longer, setup, teardown),
        cmocka_unit_test_setup_teardown(test_fixed_wait, setup, teardown),
        cmocka_unit_test_setup_teardown(test_each_action_settles, setup, teardown),
        cmocka_unit_test_setup_teardown(test_reference_before_last_input, setup, teardown),
        cmocka_unit_test(test_settle_parse),
        cmocka_unit_test(test_frame_hash),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
