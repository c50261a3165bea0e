/*
 * The JSON member readers of the conf module (every error names the member) and its one parser of
 * template references, NAME@VERSION.
 */
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

static void
test_template_ref(void **state)
{
    g_autoptr(GError) error = NULL;
    char *name = NULL;
    guint version = 99;

    assert_true(carrel_template_ref_parse("tiny", &name, &version, &error));
    assert_string_equal(name, "tiny");
    assert_int_equal(version, 0);
    g_clear_pointer(&name, g_free);
    assert_true(carrel_template_ref_parse("tiny@12", &name, &version, &error));
    assert_string_equal(name, "tiny");
    assert_int_equal(version, 12);
    g_clear_pointer(&name, g_free);
    assert_true(carrel_template_ref_parse("ubuntu-24.04@4294967295", &name, &version, &error));
    assert_string_equal(name, "ubuntu-24.04");
    assert_int_equal(version, G_MAXUINT);
    g_clear_pointer(&name, g_free);
    assert_false(carrel_template_ref_parse("tiny@0", &name, &version, &error));
    assert_true(g_error_matches(error, CARREL_ERROR, CARREL_ERROR_INVALID_ARG));
    g_clear_error(&error);
    assert_false(carrel_template_ref_parse("tiny@", &name, &version, &error));
    g_clear_error(&error);
    assert_false(carrel_template_ref_parse("tiny@1x", &name, &version, &error));
    g_clear_error(&error);
    assert_false(carrel_template_ref_parse("@3", &name, &version, &error));
    g_clear_error(&error);
    assert_false(carrel_template_ref_parse("", &name, &version, &error));
    assert_null(name);
    assert_int_equal(version, G_MAXUINT);
}

/* Each refusal: its exact message, the same from the CLI, the API and session requests. */
static void
test_template_ref_refusals(void **state)
{
    static const char *const version_message =
        "template version must be a positive number, as in 'tiny@2'";
    static const char *const name_message =
        "invalid template name: use 1-63 of [a-z0-9._-], starting with a letter or digit";
    static const char *const required_message = "a template name is required: NAME or NAME@VERSION";
    static const struct {
        const char *text;
        const char *message;
    } cases[] = {
        {"a@b@3", "a template reference has one '@' at most: NAME or NAME@VERSION"},
        {"a@@3", "a template reference has one '@' at most: NAME or NAME@VERSION"},
        {"a@", version_message},
        {"a@0", version_message},
        {"a@x", version_message},
        {"a@+3", version_message},
        {"a@-3", version_message},
        {"a@ 3", version_message},
        {"a@3 ", version_message},
        {"a@0x3", version_message},
        {"a@4294967296", version_message},
        {"@3", required_message},
        {"@", required_message},
        {"", required_message},
        {NULL, required_message},
        {"../etc", name_message},
        {"A@3", name_message},
        {"a b@3", name_message},
    };

    for (gsize i = 0; i < G_N_ELEMENTS(cases); i++) {
        g_autoptr(GError) error = NULL;
        char *name = NULL;
        guint version = 7;

        if (carrel_template_ref_parse(cases[i].text, &name, &version, &error))
            fail_msg("'%s' was accepted", cases[i].text);
        assert_true(g_error_matches(error, CARREL_ERROR, CARREL_ERROR_INVALID_ARG));
        if (!g_str_equal(error->message, cases[i].message))
            fail_msg("'%s': '%s', expected '%s'", cases[i].text, error->message, cases[i].message);
        assert_null(name);
        assert_int_equal(version, 7);
    }
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_node_and_peek),
        cmocka_unit_test(test_strings),
        cmocka_unit_test(test_numbers),
        cmocka_unit_test(test_template_ref),
        cmocka_unit_test(test_template_ref_refusals),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
