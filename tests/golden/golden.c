#include <string.h>
#include <unistd.h>

#include "tests/golden/golden.h"
#include "util/util.h"

typedef struct {
    char *json_path;
    char *out_path;
    char *err_path;
    GoldenGenerate generate;
} GoldenCase;

void
golden_check_members(JsonObject *root, const char *const *allowed, const char *path)
{
    g_autoptr(GList) members = json_object_get_members(root);

    for (GList *l = members; l; l = l->next) {
        if (!g_strv_contains(allowed, l->data))
            g_error("unknown member '%s' in %s", (const char *)l->data, path);
    }
}

static void
write_or_die(const char *path, const char *contents)
{
    g_autoptr(GError) error = NULL;

    g_file_set_contents(path, contents, -1, &error);
    g_assert_no_error(error);
}

static char *
error_text(const GError *error)
{
    return g_strdup_printf("%s: %s\n", carrel_error_code_to_string(error->code), error->message);
}

static void
regenerate(const GoldenCase *gc, const char *out, const GError *gen_error)
{
    if (gen_error) {
        g_autofree char *text = error_text(gen_error);
        write_or_die(gc->err_path, text);
        unlink(gc->out_path);
    } else {
        write_or_die(gc->out_path, out);
        unlink(gc->err_path);
    }
}

/* Reports the first line where actual and expected differ, then marks the test failed. */
static void
report_difference(const char *path, const char *actual, const char *expected)
{
    g_auto(GStrv) got = g_strsplit(actual, "\n", -1);
    g_auto(GStrv) want = g_strsplit(expected, "\n", -1);
    guint i = 0;

    while (got[i] && want[i] && g_str_equal(got[i], want[i]))
        i++;
    g_test_message("%s differs at line %u (CARREL_TEST_REGENERATE=1 rewrites it; review the diff)",
                   path, i + 1);
    g_test_message("  expected: %s", want[i] ? want[i] : "<end of file>");
    g_test_message("  actual:   %s", got[i] ? got[i] : "<end of output>");
    g_test_fail();
}

static void
check_error(const GoldenCase *gc, const GError *gen_error)
{
    g_autofree char *expected = NULL;
    g_autofree char *actual = NULL;
    g_autoptr(GError) error = NULL;

    g_file_get_contents(gc->err_path, &expected, NULL, &error);
    g_assert_no_error(error);
    if (!gen_error) {
        g_test_message("%s: expected an error, got output", gc->json_path);
        g_test_fail();
        return;
    }
    g_assert_true(gen_error->domain == CARREL_ERROR);
    actual = error_text(gen_error);
    if (!g_str_equal(actual, expected))
        report_difference(gc->err_path, actual, expected);
}

static void
check_expected(const GoldenCase *gc, const char *out, const GError *gen_error)
{
    g_autofree char *expected = NULL;
    g_autoptr(GError) error = NULL;

    if (g_file_test(gc->err_path, G_FILE_TEST_EXISTS)) {
        check_error(gc, gen_error);
        return;
    }
    if (gen_error) {
        g_test_message("%s: unexpected error: %s", gc->json_path, gen_error->message);
        g_test_fail();
        return;
    }
    if (!g_file_get_contents(gc->out_path, &expected, NULL, &error)) {
        g_test_message("%s (CARREL_TEST_REGENERATE=1 writes it)", error->message);
        g_test_fail();
        return;
    }
    if (!g_str_equal(out, expected))
        report_difference(gc->out_path, out, expected);
}

static void
test_case(gconstpointer data)
{
    const GoldenCase *gc = data;
    g_autoptr(JsonParser) parser = json_parser_new();
    g_autoptr(GError) error = NULL;
    g_autoptr(GError) gen_error = NULL;
    g_autofree char *out = NULL;
    JsonNode *root;

    json_parser_load_from_file(parser, gc->json_path, &error);
    g_assert_no_error(error);
    root = json_parser_get_root(parser);
    g_assert_true(root && JSON_NODE_HOLDS_OBJECT(root));
    out = gc->generate(json_node_get_object(root), &gen_error);
    g_assert_true((out == NULL) == (gen_error != NULL));
    if (g_strcmp0(g_getenv("CARREL_TEST_REGENERATE"), "1") == 0)
        regenerate(gc, out, gen_error);
    else
        check_expected(gc, out, gen_error);
}

static void
golden_case_free(gpointer data)
{
    GoldenCase *gc = data;

    g_free(gc->json_path);
    g_free(gc->out_path);
    g_free(gc->err_path);
    g_free(gc);
}

static gint
compare_names(gconstpointer a, gconstpointer b)
{
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

static GPtrArray *
add_cases(const char *dir_path, const char *subdir, const char *suffix, GoldenGenerate generate)
{
    g_autoptr(GError) error = NULL;
    g_autoptr(GDir) dir = g_dir_open(dir_path, 0, &error);
    g_autoptr(GPtrArray) names = g_ptr_array_new_with_free_func(g_free);
    GPtrArray *cases = g_ptr_array_new_with_free_func(golden_case_free);
    const char *entry;

    g_assert_no_error(error);
    while ((entry = g_dir_read_name(dir))) {
        if (g_str_has_suffix(entry, ".json"))
            g_ptr_array_add(names, g_strndup(entry, strlen(entry) - strlen(".json")));
    }
    g_ptr_array_sort(names, compare_names);
    for (guint i = 0; i < names->len; i++) {
        const char *name = g_ptr_array_index(names, i);
        GoldenCase *gc = g_new0(GoldenCase, 1);
        g_autofree char *base = g_build_filename(dir_path, name, NULL);
        g_autofree char *test_path = g_strdup_printf("/%s/%s", subdir, name);

        gc->json_path = g_strconcat(base, ".json", NULL);
        gc->out_path = g_strconcat(base, suffix, NULL);
        gc->err_path = g_strconcat(base, ".err", NULL);
        gc->generate = generate;
        g_ptr_array_add(cases, gc);
        g_test_add_data_func(test_path, gc, test_case);
    }
    return cases;
}

int
golden_main(int argc, char **argv, const char *subdir, const char *suffix, GoldenGenerate generate)
{
    const char *data_dir = g_getenv("CARREL_TEST_DATA");
    g_autofree char *dir_path = NULL;
    g_autoptr(GPtrArray) cases = NULL;

    g_test_init(&argc, &argv, NULL);
    if (!data_dir)
        g_error("CARREL_TEST_DATA is not set");
    dir_path = g_build_filename(data_dir, subdir, NULL);
    cases = add_cases(dir_path, subdir, suffix, generate);
    if (cases->len == 0)
        g_error("no cases in '%s'", dir_path);
    return g_test_run();
}
