/*
 * Golden test of the domain-XML builder: every tests/data/domain-xml/<case>.json (a
 * CarrelDomainSpec as JSON) must produce exactly <case>.xml, or, when <case>.err exists, fail
 * with exactly the error it holds ("code: message"). Every produced XML must also pass
 * virt-xml-validate. CARREL_TEST_REGENERATE=1 rewrites the expected files: review that diff.
 */
#include <string.h>
#include <unistd.h>

#include "hypervisor/hypervisor.h"

typedef struct {
    char *json_path;
    char *xml_path;
    char *err_path;
} GoldenCase;

static const char *const spec_members[] = {
    "domain_name",  "session_id",
    "instance_id",  "uuid",
    "accel",        "vcpus",
    "memory_mib",   "boot",
    "kernel_path",  "initrd_path",
    "cmdline",      "disk_path",
    "disk_format",  "console_log_path",
    "tb_cache_mib", "genid",
    NULL,
};

static const char *
get_string(JsonObject *obj, const char *member)
{
    return json_object_get_string_member_with_default(obj, member, NULL);
}

/* The spec points into obj, which must outlive it. */
static void
spec_from_json(JsonObject *obj, CarrelDomainSpec *spec)
{
    GList *members = json_object_get_members(obj);

    /* A typo in a case file must not silently test the default instead. */
    for (GList *l = members; l; l = l->next) {
        if (!g_strv_contains(spec_members, l->data))
            g_error("unknown member '%s' in case file", (const char *)l->data);
    }
    g_list_free(members);
    memset(spec, 0, sizeof(*spec));
    spec->domain_name = get_string(obj, "domain_name");
    spec->session_id = get_string(obj, "session_id");
    spec->instance_id = get_string(obj, "instance_id");
    spec->uuid = get_string(obj, "uuid");
    spec->accel = carrel_accel_from_string(get_string(obj, "accel"));
    spec->vcpus = (guint)json_object_get_int_member_with_default(obj, "vcpus", 0);
    spec->memory_mib = (guint)json_object_get_int_member_with_default(obj, "memory_mib", 0);
    spec->boot = carrel_boot_from_string(get_string(obj, "boot"));
    spec->kernel_path = get_string(obj, "kernel_path");
    spec->initrd_path = get_string(obj, "initrd_path");
    spec->cmdline = get_string(obj, "cmdline");
    spec->disk_path = get_string(obj, "disk_path");
    spec->disk_format = get_string(obj, "disk_format");
    spec->console_log_path = get_string(obj, "console_log_path");
    spec->tb_cache_mib = (guint)json_object_get_int_member_with_default(obj, "tb_cache_mib", 0);
    spec->genid = get_string(obj, "genid");
}

/* Runs virt-xml-validate on xml; a missing validator is a failure, not a skip (CI has it). */
static void
validate_with_libvirt(const char *xml)
{
    g_autofree char *validator = g_find_program_in_path("virt-xml-validate");
    g_autofree char *tmp_path = NULL;
    g_autoptr(GError) error = NULL;
    int fd;

    if (!validator)
        g_error("virt-xml-validate not found: install libvirt-clients");
    fd = g_file_open_tmp("carrel-domain-XXXXXX.xml", &tmp_path, &error);
    g_assert_no_error(error);
    close(fd);
    g_file_set_contents(tmp_path, xml, -1, &error);
    g_assert_no_error(error);
    {
        const char *argv[] = {validator, tmp_path, "domain", NULL};
        gboolean ok = carrel_util_run(argv, 60, NULL, NULL, &error);

        unlink(tmp_path);
        if (!ok)
            g_test_message("virt-xml-validate: %s", error->message);
        g_assert_no_error(error);
    }
}

static void
write_or_die(const char *path, const char *contents)
{
    g_autoptr(GError) error = NULL;

    g_file_set_contents(path, contents, -1, &error);
    g_assert_no_error(error);
}

static void
regenerate(const GoldenCase *gc, const char *xml, const GError *build_error)
{
    if (build_error) {
        g_autofree char *text = g_strdup_printf(
            "%s: %s\n", carrel_error_code_to_string(build_error->code), build_error->message);
        write_or_die(gc->err_path, text);
        unlink(gc->xml_path);
    } else {
        write_or_die(gc->xml_path, xml);
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
check_expected(const GoldenCase *gc, const char *xml, const GError *build_error)
{
    g_autofree char *expected = NULL;
    g_autofree char *actual = NULL;
    g_autoptr(GError) error = NULL;

    if (g_file_test(gc->err_path, G_FILE_TEST_EXISTS)) {
        g_file_get_contents(gc->err_path, &expected, NULL, &error);
        g_assert_no_error(error);
        if (!build_error) {
            g_test_message("%s: expected an error, got xml", gc->json_path);
            g_test_fail();
            return;
        }
        g_assert_true(build_error->domain == CARREL_ERROR);
        actual = g_strdup_printf("%s: %s\n", carrel_error_code_to_string(build_error->code),
                                 build_error->message);
        if (!g_str_equal(actual, expected))
            report_difference(gc->err_path, actual, expected);
        return;
    }
    if (build_error) {
        g_test_message("%s: unexpected error: %s", gc->json_path, build_error->message);
        g_test_fail();
        return;
    }
    if (!g_file_get_contents(gc->xml_path, &expected, NULL, &error)) {
        g_test_message("%s (CARREL_TEST_REGENERATE=1 writes it)", error->message);
        g_test_fail();
        return;
    }
    if (!g_str_equal(xml, expected))
        report_difference(gc->xml_path, xml, expected);
}

static void
test_case(gconstpointer data)
{
    const GoldenCase *gc = data;
    g_autoptr(JsonParser) parser = json_parser_new();
    g_autoptr(GError) error = NULL;
    g_autoptr(GError) build_error = NULL;
    g_autofree char *xml = NULL;
    CarrelDomainSpec spec;
    JsonNode *root;

    json_parser_load_from_file(parser, gc->json_path, &error);
    g_assert_no_error(error);
    root = json_parser_get_root(parser);
    g_assert_true(root && JSON_NODE_HOLDS_OBJECT(root));
    spec_from_json(json_node_get_object(root), &spec);

    xml = carrel_hypervisor_build_domain_xml(&spec, &build_error);
    g_assert_true((xml == NULL) == (build_error != NULL));
    if (xml)
        validate_with_libvirt(xml);
    if (g_strcmp0(g_getenv("CARREL_TEST_REGENERATE"), "1") == 0)
        regenerate(gc, xml, build_error);
    else
        check_expected(gc, xml, build_error);
}

static void
golden_case_free(gpointer data)
{
    GoldenCase *gc = data;

    g_free(gc->json_path);
    g_free(gc->xml_path);
    g_free(gc->err_path);
    g_free(gc);
}

static gint
compare_names(gconstpointer a, gconstpointer b)
{
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

/* Registers one test per <case>.json, sorted so the order is stable. */
static GPtrArray *
add_cases(const char *dir_path)
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
        g_autofree char *test_path = g_strdup_printf("/domain-xml/%s", name);

        gc->json_path = g_strconcat(base, ".json", NULL);
        gc->xml_path = g_strconcat(base, ".xml", NULL);
        gc->err_path = g_strconcat(base, ".err", NULL);
        g_ptr_array_add(cases, gc);
        g_test_add_data_func(test_path, gc, test_case);
    }
    return cases;
}

int
main(int argc, char **argv)
{
    const char *data_dir = g_getenv("CARREL_TEST_DATA");
    g_autofree char *dir_path = NULL;
    g_autoptr(GPtrArray) cases = NULL;

    g_test_init(&argc, &argv, NULL);
    if (!data_dir)
        g_error("CARREL_TEST_DATA is not set");
    dir_path = g_build_filename(data_dir, "domain-xml", NULL);
    cases = add_cases(dir_path);
    if (cases->len == 0)
        g_error("no cases in '%s'", dir_path);
    return g_test_run();
}
