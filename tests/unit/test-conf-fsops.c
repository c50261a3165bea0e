/* Unit: carrel-guest fs replies checked as untrusted input, and client paths (conf-fsops.c). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <string.h>

#include "conf/conf.h"

static JsonNode *
listing(const char *text, GError **error)
{
    g_autoptr(JsonNode) node = carrel_conf_parse_json(text, strlen(text), NULL);

    assert_non_null(node);
    return carrel_fs_listing_from_guest(node, "/d", error);
}

#define ENTRY(extra) "{\"type\":\"file\",\"size\":3,\"mode\":420,\"mtime\":5" extra "}"
#define LIST(entries) "{\"path\":\"/d\",\"entries\":[" entries "],\"truncated\":false}"

static void
test_clean_listing(void **state)
{
    g_autoptr(GError) error = NULL;
    g_autoptr(JsonNode) out =
        listing(LIST(ENTRY(",\"name\":\"a b\"") ",{\"name\":\"l\",\"type\":\"symlink\",\"size\":4,"
                                                "\"mode\":511,\"mtime\":1,\"target\":\"/etc\"}"),
                &error);
    g_autofree char *text = NULL;

    assert_non_null(out);
    text = json_to_string(out, FALSE);
    assert_string_equal(text, "{\"path\":\"/d\",\"entries\":[{\"name\":\"a b\",\"type\":\"file\","
                              "\"size\":3,\"mode\":\"0644\",\"mtime\":5},{\"name\":\"l\",\"type\":"
                              "\"symlink\",\"size\":4,\"mode\":\"0777\",\"mtime\":1,\"target\":"
                              "\"/etc\"}],\"truncated\":false}");
}

/* Names an honest guest may have come back null, escaped and explained, never raw. */
static void
test_escaped_names(void **state)
{
    g_autoptr(GError) error = NULL;
    /* "bad\nname" as text, and the bytes 'x' 0xff 'y' as base64 ("eP95"). */
    g_autoptr(JsonNode) out =
        listing(LIST(ENTRY(",\"name\":\"bad\\nname\"") "," ENTRY(
                    ",\"name_b64\":\"eP95\"") "," ENTRY(",\"name\":\"back\\\\slash\\u001b[31m\"")),
                &error);
    JsonArray *entries;
    JsonObject *e;

    assert_non_null(out);
    entries = json_object_get_array_member(json_node_get_object(out), "entries");
    e = json_array_get_object_element(entries, 0);
    assert_true(json_object_get_null_member(e, "name"));
    assert_string_equal(json_object_get_string_member(e, "name_escaped"), "bad\\x0aname");
    assert_non_null(strstr(json_object_get_string_member(e, "name_error"), "control"));
    e = json_array_get_object_element(entries, 1);
    assert_true(json_object_get_null_member(e, "name"));
    assert_string_equal(json_object_get_string_member(e, "name_escaped"), "x\\xffy");
    assert_non_null(strstr(json_object_get_string_member(e, "name_error"), "UTF-8"));
    e = json_array_get_object_element(entries, 2);
    assert_string_equal(json_object_get_string_member(e, "name_escaped"), "back\\\\slash\\x1b[31m");
}

/* Replies no honest guest gives are refused whole, with the entry and the reason. */
static void
test_hostile_listings(void **state)
{
    static const struct {
        const char *text;
        const char *fragment;
    } cases[] = {
        {LIST(ENTRY(",\"name\":\"a/b\"")), "'/'"},
        {LIST(ENTRY(",\"name\":\"..\"")), "'..'"},
        {LIST(ENTRY(",\"name\":\".\"")), "'.'"},
        {LIST(ENTRY(",\"name\":\"\"")), "empty"},
        {LIST(ENTRY(",\"name_b64\":\"YS9i\"")), "'/'"}, /* "a/b" */
        {LIST(ENTRY(",\"name_b64\":\"YQBi\"")), "NUL"}, /* "a\0b" */
        {LIST(ENTRY("")), "exactly one"},
        {LIST(ENTRY(",\"name\":\"a\",\"name_b64\":\"YQ==\"")), "exactly one"},
        {LIST(ENTRY(",\"name\":7")), "not a string"},
        {LIST(ENTRY(",\"name_b64\":\"!!!!\"")), "base64"},
        {LIST("{\"name\":\"a\",\"type\":\"fifo\",\"size\":1,\"mode\":1,\"mtime\":1}"), "'type'"},
        {LIST("{\"name\":\"a\",\"type\":\"file\",\"size\":-1,\"mode\":1,\"mtime\":1}"), "'size'"},
        {LIST("{\"name\":\"a\",\"type\":\"file\",\"size\":\"1\",\"mode\":1,\"mtime\":1}"),
         "'size'"},
        {LIST("{\"name\":\"a\",\"type\":\"file\",\"size\":1,\"mode\":4096,\"mtime\":1}"), "'mode'"},
        {LIST("{\"name\":\"a\",\"type\":\"file\",\"size\":1,\"mode\":1}"), "'mtime'"},
        {LIST(ENTRY(",\"name\":\"a\",\"target\":\"/x\"")), "only a symlink"},
        {LIST("7"), "not an object"},
        {"{\"entries\":{},\"truncated\":false}", "'entries'"},
        {"{\"entries\":[]}", "'truncated'"},
        {"[]", "not an object"},
    };

    for (guint i = 0; i < G_N_ELEMENTS(cases); i++) {
        g_autoptr(GError) error = NULL;
        g_autoptr(JsonNode) out = listing(cases[i].text, &error);

        assert_null(out);
        assert_true(g_error_matches(error, CARREL_ERROR, CARREL_ERROR_HYPERVISOR));
        if (!strstr(error->message, cases[i].fragment))
            fail_msg("case %u: '%s' not in '%s'", i, cases[i].fragment, error->message);
    }
}

static void
test_oversized(void **state)
{
    GString *text = g_string_new("{\"entries\":[");
    g_autofree char *long_name = g_strnfill(CARREL_FS_MAX_NAME_BYTES + 1, 'n');
    g_autofree char *long_list = NULL;
    g_autofree char *long_entry = NULL;
    g_autoptr(GError) error = NULL;
    g_autoptr(JsonNode) out = NULL;

    for (guint i = 0; i <= CARREL_FS_MAX_ENTRIES; i++)
        g_string_append_printf(text, "%s" ENTRY(",\"name\":\"f%u\""), i ? "," : "", i);
    g_string_append(text, "],\"truncated\":false}");
    long_list = g_string_free(text, FALSE);
    out = listing(long_list, &error);
    assert_null(out);
    assert_non_null(strstr(error->message, "more than 4096 entries"));
    g_clear_error(&error);
    long_entry = g_strdup_printf(LIST(ENTRY(",\"name\":\"%s\"")), long_name);
    out = listing(long_entry, &error);
    assert_null(out);
    assert_non_null(strstr(error->message, "longer than 255 bytes"));
}

static void
test_paths(void **state)
{
    static const char *const good[] = {"/", "/tmp", "/tmp/a b", "/home/agent/.config"};
    static const char *const bad[] = {NULL,          "",       "tmp",   "./x", "/tmp/", "/tmp//x",
                                      "/tmp/../etc", "/tmp/.", "/a\nb", "~/x"};

    for (guint i = 0; i < G_N_ELEMENTS(good); i++)
        assert_true(carrel_fs_check_path(good[i], NULL));
    for (guint i = 0; i < G_N_ELEMENTS(bad); i++) {
        g_autoptr(GError) error = NULL;

        assert_false(carrel_fs_check_path(bad[i], &error));
        assert_true(g_error_matches(error, CARREL_ERROR, CARREL_ERROR_INVALID_ARG));
    }
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_clean_listing),
        cmocka_unit_test(test_escaped_names),
        cmocka_unit_test(test_hostile_listings),
        cmocka_unit_test(test_oversized),
        cmocka_unit_test(test_paths),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
