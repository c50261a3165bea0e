/* conf: screen sizes ("WxH"), a template's defaults from its recipe and the create's shape. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <string.h>

#include "conf/conf.h"

static void
test_parse_accepts(void **state)
{
    static const struct {
        const char *text;
        guint width, height;
    } cases[] = {
        {"640x480", 640, 480},   {"800x600", 800, 600},     {"1280x800", 1280, 800},
        {"1024x768", 1024, 768}, {"1920x1200", 1920, 1200},
    };

    (void)state;
    for (gsize i = 0; i < G_N_ELEMENTS(cases); i++) {
        g_autoptr(GError) error = NULL;
        g_autofree char *back = NULL;
        guint w = 0, h = 0;

        if (!carrel_screen_size_parse(cases[i].text, &w, &h, &error))
            fail_msg("'%s': %s", cases[i].text, error->message);
        assert_int_equal(w, cases[i].width);
        assert_int_equal(h, cases[i].height);
        back = carrel_screen_size_format(w, h);
        assert_string_equal(back, cases[i].text);
    }
}

/* Malformed text and sizes out of range are INVALID_ARG; the outputs stay as they were. */
static void
test_parse_refuses(void **state)
{
    static const char *const bad[] = {
        "",           "x",           "1280",      "1280x",      "x800",       "1280X800",
        "1280*800",   " 1280x800",   "1280x800 ", "+1280x800",  "-640x480",   "01280x800",
        "1280x0800",  "1280x800x2",  "0x0",       "1280x800\n", "12800000x8", "10x10",
        "100000x100", "639x480",     "640x479",   "1921x1200",  "1920x1201",  "1284x800",
        "4096x2160",  "99999x99999",
    };

    (void)state;
    for (gsize i = 0; i < G_N_ELEMENTS(bad); i++) {
        g_autoptr(GError) error = NULL;
        guint w = 7, h = 9;

        if (carrel_screen_size_parse(bad[i], &w, &h, &error))
            fail_msg("'%s' was accepted", bad[i]);
        assert_true(g_error_matches(error, CARREL_ERROR, CARREL_ERROR_INVALID_ARG));
        assert_int_equal(w, 7);
        assert_int_equal(h, 9);
    }
    assert_null(carrel_screen_size_format(0, 600));
    /* Too large is a range error, whatever the number of digits. */
    {
        g_autoptr(GError) error = NULL;
        guint w = 0, h = 0;

        assert_false(carrel_screen_size_parse("100000x100", &w, &h, &error));
        assert_non_null(strstr(error->message, "out of range"));
    }
}

static CarrelSessionRequest *
request(const char *json, GError **error)
{
    g_autoptr(JsonNode) node = carrel_conf_parse_json(json, strlen(json), NULL);

    assert_non_null(node);
    return carrel_session_request_from_json(node, error);
}

static void
test_request_screen(void **state)
{
    g_autoptr(CarrelSessionRequest) req = NULL;
    g_autoptr(GError) error = NULL;

    (void)state;
    req = request("{\"template\":\"tiny\",\"screen\":\"1280x800\"}", &error);
    assert_non_null(req);
    assert_int_equal(req->screen_width, 1280);
    assert_int_equal(req->screen_height, 800);
    g_clear_pointer(&req, carrel_session_request_free);
    req = request("{\"template\":\"tiny\"}", &error);
    assert_non_null(req);
    assert_int_equal(req->screen_width, 0);
    g_clear_pointer(&req, carrel_session_request_free);

    assert_null(request("{\"template\":\"tiny\",\"screen\":\"10x10\"}", &error));
    assert_true(g_error_matches(error, CARREL_ERROR, CARREL_ERROR_INVALID_ARG));
    assert_non_null(strstr(error->message, "'screen'"));
    assert_non_null(strstr(error->message, "640x480 to 1920x1200"));
    g_clear_error(&error);
    assert_null(
        request("{\"template\":\"tiny\",\"screen\":{\"width\":800,\"height\":600}}", &error));
    assert_true(g_error_matches(error, CARREL_ERROR, CARREL_ERROR_INVALID_ARG));
}

static JsonNode *
recipe(const char *json)
{
    JsonNode *node = carrel_conf_parse_json(json, strlen(json), NULL);

    assert_non_null(node);
    return node;
}

static void
test_recipe_defaults(void **state)
{
    static const char *const bad[] = {
        "{\"defaults\":7}",
        "{\"defaults\":{\"vcpus\":0}}",
        "{\"defaults\":{\"vcpus\":17}}",
        "{\"defaults\":{\"memory_mib\":64}}",
        "{\"defaults\":{\"memory_mib\":\"2048\"}}",
        "{\"defaults\":{\"screen\":\"4000x3000\"}}",
        "{\"defaults\":{\"screen\":1280}}",
        "{\"defaults\":{\"disk_gib\":4}}",
    };
    g_autoptr(CarrelTemplate) t = carrel_template_new();
    g_autoptr(JsonNode) full = recipe("{\"name\":\"desktop\",\"defaults\":{\"vcpus\":2,"
                                      "\"memory_mib\":2048,\"screen\":\"1280x800\"}}");
    g_autoptr(JsonNode) none = recipe("{\"name\":\"tiny\"}");
    g_autoptr(GError) error = NULL;

    (void)state;
    assert_true(carrel_template_defaults_from_recipe(full, t, &error));
    assert_int_equal(t->default_vcpus, 2);
    assert_int_equal(t->default_memory_mib, 2048);
    assert_int_equal(t->default_screen_width, 1280);
    assert_int_equal(t->default_screen_height, 800);
    g_clear_pointer(&t, carrel_template_free);
    t = carrel_template_new();
    assert_true(carrel_template_defaults_from_recipe(none, t, &error));
    assert_true(carrel_template_defaults_from_recipe(NULL, t, &error));
    assert_int_equal(t->default_vcpus + t->default_memory_mib + t->default_screen_width, 0);
    for (gsize i = 0; i < G_N_ELEMENTS(bad); i++) {
        g_autoptr(JsonNode) node = recipe(bad[i]);
        g_autoptr(GError) local = NULL;

        if (carrel_template_defaults_from_recipe(node, t, &local))
            fail_msg("'%s' was accepted", bad[i]);
        assert_true(g_error_matches(local, CARREL_ERROR, CARREL_ERROR_INVALID_ARG));
        assert_int_equal(t->default_vcpus + t->default_memory_mib + t->default_screen_width, 0);
    }
}

/* The request's values, else the template's defaults, else carreld's. */
static void
test_shape_order(void **state)
{
    CarrelTemplate plain = {0};
    CarrelTemplate desktop = {.default_vcpus = 2,
                              .default_memory_mib = 2048,
                              .default_screen_width = 1280,
                              .default_screen_height = 800};
    CarrelSessionRequest none = {0};
    CarrelSessionRequest own = {
        .vcpus = 4, .memory_mib = 512, .screen_width = 800, .screen_height = 600};
    CarrelSessionRequest half = {.memory_mib = 4096};
    CarrelSessionShape shape = {0};

    (void)state;
    carrel_session_resolve_shape(&none, &plain, &shape);
    assert_int_equal(shape.vcpus, CARREL_DEFAULT_VCPUS);
    assert_int_equal(shape.memory_mib, CARREL_DEFAULT_MEMORY_MIB);
    assert_int_equal(shape.screen_width, 0);
    assert_false(shape.vcpus_explicit || shape.memory_explicit);

    carrel_session_resolve_shape(&none, &desktop, &shape);
    assert_int_equal(shape.vcpus, 2);
    assert_int_equal(shape.memory_mib, 2048);
    assert_int_equal(shape.screen_width, 1280);
    assert_int_equal(shape.screen_height, 800);
    assert_false(shape.vcpus_explicit || shape.memory_explicit);

    carrel_session_resolve_shape(&own, &desktop, &shape);
    assert_int_equal(shape.vcpus, 4);
    assert_int_equal(shape.memory_mib, 512);
    assert_int_equal(shape.screen_width, 800);
    assert_int_equal(shape.screen_height, 600);
    assert_true(shape.vcpus_explicit && shape.memory_explicit);

    carrel_session_resolve_shape(&half, &desktop, &shape);
    assert_int_equal(shape.vcpus, 2);
    assert_int_equal(shape.memory_mib, 4096);
    assert_false(shape.vcpus_explicit);
    assert_true(shape.memory_explicit);
}

/* Template JSON shows its defaults: {} without any. */
static void
test_template_json(void **state)
{
    CarrelTemplate t = {.name = (char *)"desktop",
                        .version = 1,
                        .sha256 = (char *)"ab",
                        .format = (char *)"qcow2",
                        .default_vcpus = 2,
                        .default_memory_mib = 2048};
    g_autoptr(JsonNode) with = NULL;
    g_autoptr(JsonNode) without = NULL;
    JsonObject *d;

    (void)state;
    with = carrel_template_to_json(&t, 0);
    d = json_object_get_object_member(json_node_get_object(with), "defaults");
    assert_int_equal(json_object_get_int_member(d, "vcpus"), 2);
    assert_int_equal(json_object_get_int_member(d, "memory_mib"), 2048);
    assert_false(json_object_has_member(d, "screen"));
    t.default_vcpus = t.default_memory_mib = 0;
    without = carrel_template_to_json(&t, 0);
    d = json_object_get_object_member(json_node_get_object(without), "defaults");
    assert_int_equal(json_object_get_size(d), 0);
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_parse_accepts),  cmocka_unit_test(test_parse_refuses),
        cmocka_unit_test(test_request_screen), cmocka_unit_test(test_recipe_defaults),
        cmocka_unit_test(test_shape_order),    cmocka_unit_test(test_template_json),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
