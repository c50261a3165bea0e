/* The JSON member readers of the conf module: every error names the member. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <string.h>

#include "conf/conf-priv.h"

static JsonObject *
parse_object(const char *text)
{
    g_autoptr(GError) error = NULL;
    g_autoptr(JsonNode) node = carrel_conf_parse_json(text, strlen(text), &error);

    assert_non_null(node);
    assert_true(JSON_NODE_HOLDS_OBJECT(node));
    return json_object_ref(json_node_get_object(node));
}

static void
assert_error(GError *error, gint code, const char *message)
{
    assert_non_null(error);
    assert_true(g_error_matches(error, CARREL_ERROR, code));
    assert_string_equal(error->message, message);
}

static void
test_node_and_peek(void **state)
{
    g_autoptr(JsonObject) obj = parse_object("{\"s\":\"x\",\"n\":null,\"i\":3}");

    assert_non_null(carrel_conf_get_node(obj, "s"));
    assert_null(carrel_conf_get_node(obj, "n"));
    assert_null(carrel_conf_get_node(obj, "absent"));
    assert_null(carrel_conf_get_node(NULL, "s"));
    assert_true(carrel_conf_node_holds(carrel_conf_get_node(obj, "i"), G_TYPE_INT64));
    assert_false(carrel_conf_node_holds(carrel_conf_get_node(obj, "i"), G_TYPE_STRING));
    assert_false(carrel_conf_node_holds(NULL, G_TYPE_STRING));
    assert_string_equal(carrel_conf_peek_string(obj, "s"), "x");
    assert_null(carrel_conf_peek_string(obj, "i"));
    assert_null(carrel_conf_peek_string(obj, "n"));
}

static void
test_strings(void **state)
{
    g_autoptr(JsonObject) obj = parse_object("{\"s\":\"x\",\"n\":null,\"i\":3,\"t\":\"abcdef\"}");
    g_autoptr(GError) error = NULL;
    const char *ref = "untouched";
    g_autofree char *copy = NULL;

    assert_true(carrel_conf_get_string_ref(obj, "s", TRUE, &ref, &error));
    assert_string_equal(ref, "x");
    assert_true(carrel_conf_get_string_ref(obj, "n", FALSE, &ref, &error));
    assert_null(ref);
    assert_true(carrel_conf_get_string_ref(NULL, "s", FALSE, &ref, &error));
    assert_null(ref);
    assert_false(carrel_conf_get_string_ref(obj, "n", TRUE, &ref, &error));
    assert_error(error, CARREL_ERROR_INVALID_ARG, "'n' is required");
    g_clear_error(&error);
    assert_false(carrel_conf_get_string_ref(NULL, "body", TRUE, &ref, &error));
    assert_error(error, CARREL_ERROR_INVALID_ARG, "'body' is required");
    g_clear_error(&error);
    assert_false(carrel_conf_get_string(obj, "i", FALSE, &copy, &error));
    assert_error(error, CARREL_ERROR_INVALID_ARG, "'i' must be a string");
    g_clear_error(&error);
    assert_true(carrel_conf_get_text(obj, "t", TRUE, 6, &copy, &error));
    assert_string_equal(copy, "abcdef");
    g_clear_pointer(&copy, g_free);
    assert_false(carrel_conf_get_text(obj, "t", TRUE, 5, &copy, &error));
    assert_error(error, CARREL_ERROR_INVALID_ARG, "'t' is longer than 5 bytes");
    assert_null(copy);
}

static void
test_numbers(void **state)
{
    g_autoptr(JsonObject) obj =
        parse_object("{\"i\":3,\"f\":1.5,\"s\":\"3\",\"b\":true,\"a\":[\"x\",\"y\"],\"m\":[1]}");
    g_autoptr(GError) error = NULL;
    g_auto(GStrv) strings = NULL;
    gint64 i = 7;
    guint u = 7;
    gboolean b = FALSE;

    assert_true(carrel_conf_get_int(obj, "absent", 0, 10, &i, &error));
    assert_int_equal(i, 7);
    assert_true(carrel_conf_get_int(obj, "i", -5, 5, &i, &error));
    assert_int_equal(i, 3);
    assert_false(carrel_conf_get_int(obj, "i", 4, 5, &i, &error));
    assert_error(error, CARREL_ERROR_INVALID_ARG, "'i' must be an integer between 4 and 5");
    g_clear_error(&error);
    assert_false(carrel_conf_get_int(obj, "f", 0, 5, &i, &error));
    assert_error(error, CARREL_ERROR_INVALID_ARG, "'f' must be an integer between 0 and 5");
    g_clear_error(&error);
    assert_true(carrel_conf_get_uint(obj, "i", 1, 3, &u, &error));
    assert_int_equal(u, 3);
    assert_false(carrel_conf_get_uint(obj, "s", 1, 3, &u, &error));
    assert_error(error, CARREL_ERROR_INVALID_ARG, "'s' must be an integer");
    g_clear_error(&error);
    assert_true(carrel_conf_get_bool(obj, "b", &b, &error));
    assert_true(b);
    assert_false(carrel_conf_get_bool(obj, "i", &b, &error));
    assert_error(error, CARREL_ERROR_INVALID_ARG, "'i' must be true or false");
    g_clear_error(&error);
    assert_true(carrel_conf_get_string_array(obj, "a", 2, &strings, &error));
    assert_int_equal(g_strv_length(strings), 2);
    assert_false(carrel_conf_get_string_array(obj, "a", 1, &strings, &error));
    assert_error(error, CARREL_ERROR_LIMIT, "'a' has more than 1 items");
    g_clear_error(&error);
    assert_false(carrel_conf_get_string_array(obj, "m", 4, &strings, &error));
    assert_error(error, CARREL_ERROR_INVALID_ARG, "'m' must be an array of strings");
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_node_and_peek),
        cmocka_unit_test(test_strings),
        cmocka_unit_test(test_numbers),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
