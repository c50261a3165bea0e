/*
 * Unit tests of core's kept screenshots on the fake hypervisor: a session keeps its newest ones
 * within a count and a byte budget (those of computer actions included), a pruned one's event
 * still names it and reading it says it was pruned, and a viewer's thumbnail is neither kept,
 * nor an event, nor activity. The fixture is core-fixture.c.
 */
#include "core-fixture.h"

static CarrelScreenshotRequest
png_request(void)
{
    CarrelScreenshotRequest req = {.quality = 80, .scale = 1.0};

    return req;
}

/* The screenshot names of a session's events after its creation, oldest first. */
static GPtrArray *
event_shots(Fixture *fx, const char *id)
{
    g_autoptr(GError) error = NULL;
    g_autoptr(GPtrArray) events =
        carrel_manager_session_events(fx->mgr, ADMIN, id, after_create(fx, id), 1000, &error);
    GPtrArray *names = g_ptr_array_new_with_free_func(g_free);

    assert_non_null(events);
    for (guint i = 0; i < events->len; i++) {
        CarrelEvent *ev = g_ptr_array_index(events, i);

        assert_non_null(ev->screenshot);
        g_ptr_array_add(names, g_strdup(ev->screenshot));
    }
    return names;
}

static gboolean
readable(Fixture *fx, const char *id, const char *name, GError **error)
{
    const char *type = NULL;
    g_autoptr(GBytes) data =
        carrel_manager_session_kept_screenshot(fx->mgr, ADMIN, id, name, &type, error);

    return data != NULL;
}

/* Over the count, the oldest go: their events keep the name, and reading one says "pruned". */
static void
test_prune_by_count(void **state)
{
    Fixture *fx = *state;
    g_autoptr(CarrelTemplate) tmpl G_GNUC_UNUSED = import(fx, "tiny");
    g_autoptr(GError) error = NULL;
    g_autoptr(CarrelSession) s = create(fx, "many", &error);
    CarrelScreenshotRequest req = png_request();
    g_autoptr(GPtrArray) names = NULL;
    g_autoptr(JsonNode) action = json_from_string("{\"action\":\"screenshot\"}", NULL);
    g_autoptr(JsonNode) reply = NULL;

    assert_non_null(s);
    fx->mgr->shots_max = 3;
    for (int i = 0; i < 5; i++) {
        g_autoptr(GBytes) image =
            carrel_manager_session_screenshot(fx->mgr, ADMIN, s->id, &req, &error);
        assert_non_null(image);
        /* Distinct modification times, so that "oldest" is not a tie on a coarse clock. */
        g_usleep(20 * 1000);
    }
    assert_int_equal(carrel_manager_count_kept_shots(fx->mgr, s, NULL), 3);
    names = event_shots(fx, s->id);
    assert_int_equal(names->len, 5);
    for (guint i = 0; i < 2; i++) {
        assert_false(readable(fx, s->id, g_ptr_array_index(names, i), &error));
        assert_true(g_error_matches(error, CARREL_ERROR, CARREL_ERROR_GONE));
        assert_non_null(strstr(error->message, "pruned"));
        g_clear_error(&error);
    }
    for (guint i = 2; i < 5; i++)
        assert_true(readable(fx, s->id, g_ptr_array_index(names, i), NULL));
    /* A name no event gave is not "pruned": it never was. */
    assert_false(readable(fx, s->id, "shot-0123456789ab.png", &error));
    assert_true(g_error_matches(error, CARREL_ERROR, CARREL_ERROR_NOT_FOUND));
    assert_null(strstr(error->message, "pruned"));
    g_clear_error(&error);

    /* A computer action's screenshot counts too: it is kept, and the oldest goes. */
    reply = carrel_manager_session_computer(fx->mgr, ADMIN, s->id, action, &error);
    assert_non_null(reply);
    assert_int_equal(carrel_manager_count_kept_shots(fx->mgr, s, NULL), 3);
    assert_false(readable(fx, s->id, g_ptr_array_index(names, 2), NULL));
    assert_true(readable(fx, s->id, g_ptr_array_index(names, 4), NULL));
}

/* Over the bytes, the oldest go too; the newest stays even when it alone is over. */
static void
test_prune_by_bytes(void **state)
{
    Fixture *fx = *state;
    g_autoptr(CarrelTemplate) tmpl G_GNUC_UNUSED = import(fx, "tiny");
    g_autoptr(GError) error = NULL;
    g_autoptr(CarrelSession) s = create(fx, "big", &error);
    CarrelScreenshotRequest req = png_request();
    g_autoptr(GBytes) first = NULL;
    g_autoptr(GPtrArray) names = NULL;
    guint64 size, bytes = 0;

    assert_non_null(s);
    first = carrel_manager_session_screenshot(fx->mgr, ADMIN, s->id, &req, &error);
    assert_non_null(first);
    size = g_bytes_get_size(first);
    /* Room for two of these images (they are the same picture, the same size). */
    fx->mgr->shots_max_bytes = 2 * size + size / 2;
    for (int i = 0; i < 4; i++) {
        g_autoptr(GBytes) image = NULL;

        g_usleep(20 * 1000);
        image = carrel_manager_session_screenshot(fx->mgr, ADMIN, s->id, &req, &error);
        assert_non_null(image);
    }
    assert_int_equal(carrel_manager_count_kept_shots(fx->mgr, s, &bytes), 2);
    assert_true(bytes <= fx->mgr->shots_max_bytes);
    names = event_shots(fx, s->id);
    assert_int_equal(names->len, 5);
    assert_false(readable(fx, s->id, g_ptr_array_index(names, 2), NULL));
    assert_true(readable(fx, s->id, g_ptr_array_index(names, 3), NULL));
    assert_true(readable(fx, s->id, g_ptr_array_index(names, 4), NULL));

    fx->mgr->shots_max_bytes = 1;
    {
        g_autoptr(GBytes) image = NULL;

        g_usleep(20 * 1000);
        image = carrel_manager_session_screenshot(fx->mgr, ADMIN, s->id, &req, &error);
        assert_non_null(image);
    }
    assert_int_equal(carrel_manager_count_kept_shots(fx->mgr, s, NULL), 1);
}

/* A thumbnail: the screen scaled down, for a reviewer's list; no file, no event, no activity. */
static void
test_thumbnail_not_recorded(void **state)
{
    Fixture *fx = *state;
    g_autoptr(CarrelTemplate) tmpl G_GNUC_UNUSED = import(fx, "tiny");
    g_autoptr(GError) error = NULL;
    g_autoptr(CarrelSession) s = create(fx, "thumb", &error);
    g_autoptr(GHashTable) query = g_hash_table_new(g_str_hash, g_str_equal);
    g_autoptr(GBytes) image = NULL;
    g_autoptr(GBytes) picture = g_bytes_new_static(core_fixture_picture, core_fixture_picture_len);
    g_autoptr(GPtrArray) events = NULL;
    CarrelScreenshotRequest req;
    CarrelPrincipal other = {
        .token_id = (char *)"t-other", .label = (char *)"other", .role = CARREL_ROLE_AGENT};
    gint64 activity;

    assert_non_null(s);
    carrel_hypervisor_fake_set_screen(fx->hv, picture);
    g_hash_table_insert(query, (char *)"thumbnail", (char *)"1");
    g_hash_table_insert(query, (char *)"format", (char *)"jpeg");
    assert_true(carrel_screenshot_request_parse(query, &req, &error));
    activity = carrel_store_event_last_ts(fx->mgr->store, s->id, NULL);
    assert_true(activity > 0);
    for (int i = 0; i < 3; i++) {
        g_clear_pointer(&image, g_bytes_unref);
        image = carrel_manager_session_screenshot(fx->mgr, ADMIN, s->id, &req, &error);
        assert_non_null(image);
    }
    assert_memory_equal(g_bytes_get_data(image, NULL), "\xff\xd8", 2);
    assert_int_equal(carrel_manager_count_kept_shots(fx->mgr, s, NULL), 0);
    events =
        carrel_manager_session_events(fx->mgr, ADMIN, s->id, after_create(fx, s->id), 100, &error);
    assert_int_equal(events->len, 0);
    assert_true(carrel_store_event_last_ts(fx->mgr->store, s->id, NULL) == activity);
    /* The door still decides who may look: another agent's session is not there for it. */
    assert_null(carrel_manager_session_screenshot(fx->mgr, &other, s->id, &req, &error));
    assert_true(g_error_matches(error, CARREL_ERROR, CARREL_ERROR_NOT_FOUND));
    g_clear_error(&error);
    /* A plain screenshot is an event, and activity. */
    g_clear_pointer(&image, g_bytes_unref);
    req = png_request();
    image = carrel_manager_session_screenshot(fx->mgr, ADMIN, s->id, &req, &error);
    assert_non_null(image);
    assert_true(carrel_store_event_last_ts(fx->mgr->store, s->id, NULL) > activity);
    assert_int_equal(carrel_manager_count_kept_shots(fx->mgr, s, NULL), 1);
}

/* A list left open polls thumbnails; the session's idle timeout acts anyway. Polled every
 * 100 ms, recorded screenshots would keep a 2 s idle timeout from ever acting. */
static void
test_thumbnails_not_activity(void **state)
{
    Fixture *fx = *state;
    g_autoptr(CarrelTemplate) tmpl G_GNUC_UNUSED = import(fx, "tiny");
    g_autoptr(GError) error = NULL;
    CarrelSessionRequest idle_req = {.template_name = (char *)"tiny",
                                     .name = (char *)"watched",
                                     .idle_timeout_s = 2,
                                     .expiry_action = (char *)"pause"};
    g_autoptr(CarrelSession) s = carrel_manager_session_create(fx->mgr, ADMIN, &idle_req, &error);
    g_autoptr(GHashTable) query = g_hash_table_new(g_str_hash, g_str_equal);
    g_autoptr(CarrelSession) after = NULL;
    CarrelScreenshotRequest req;
    gboolean paused = FALSE;

    assert_non_null(s);
    g_hash_table_insert(query, (char *)"thumbnail", (char *)"1");
    assert_true(carrel_screenshot_request_parse(query, &req, &error));
    for (int i = 0; i < 80 && !paused; i++) {
        g_autoptr(GBytes) image =
            carrel_manager_session_screenshot(fx->mgr, ADMIN, s->id, &req, NULL);
        g_autoptr(CarrelSession) now = NULL;

        (void)carrel_manager_watch(fx->mgr);
        now = carrel_manager_session_get(fx->mgr, ADMIN, s->id, &error);
        assert_non_null(now);
        paused = now->state == CARREL_SESSION_PAUSED;
        if (!paused)
            assert_non_null(image);
        g_usleep(100 * 1000);
    }
    after = carrel_manager_session_get(fx->mgr, ADMIN, s->id, &error);
    assert_int_equal(after->state, CARREL_SESSION_PAUSED);
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_prune_by_count, setup, teardown),
        cmocka_unit_test_setup_teardown(test_prune_by_bytes, setup, teardown),
        cmocka_unit_test_setup_teardown(test_thumbnail_not_recorded, setup, teardown),
        cmocka_unit_test_setup_teardown(test_thumbnails_not_activity, setup, teardown),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
