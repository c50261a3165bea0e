/* carrel-guest fs: its parsing and what it prints, in a temporary folder of the build host. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <glib/gstdio.h>
#include <unistd.h>

#include "guest.h"

static CarrelGuestOptions *
parse(GError **error, ...)
{
    g_autoptr(GPtrArray) args = g_ptr_array_new();
    va_list ap;
    const char *arg;

    g_ptr_array_add(args, (char *)"carrel-guest");
    va_start(ap, error);
    while ((arg = va_arg(ap, const char *)))
        g_ptr_array_add(args, (char *)arg);
    va_end(ap);
    return carrel_guest_options_parse((int)args->len, (char **)args->pdata, error);
}

/* Runs one fs command line; the JSON it prints (as text), or NULL with *ret_error. */
static char *
run(GError **ret_error, const char *word, const char *a, const char *b, const char *c)
{
    g_autoptr(GError) error = NULL;
    g_autoptr(CarrelGuestOptions) options = parse(&error, "fs", word, a, b, c, NULL);
    g_autoptr(JsonNode) node = NULL;

    assert_non_null(options);
    node = carrel_guest_cmd_fs(options, ret_error);
    return node ? carrel_guest_json_to_string(node) : NULL;
}

static void
test_parse(void **state)
{
    g_autoptr(GError) error = NULL;
    g_autoptr(CarrelGuestOptions) mk = parse(&error, "fs", "mkdir", "--parents", "/a/b", NULL);
    g_autoptr(CarrelGuestOptions) rm = NULL, bad = NULL, mv = NULL;

    assert_non_null(mk);
    assert_int_equal(mk->command, CARREL_GUEST_COMMAND_FS_MKDIR);
    assert_true(mk->parents);
    assert_string_equal(carrel_guest_command_to_string(mk->command), "fs mkdir");
    rm = parse(&error, "fs", "remove", "/a", "--recursive", NULL);
    assert_non_null(rm);
    assert_true(rm->recursive);
    /* --recursive belongs to remove only; move takes exactly two paths. */
    bad = parse(&error, "fs", "mkdir", "--recursive", "/a", NULL);
    assert_null(bad);
    assert_true(g_error_matches(error, CARREL_GUEST_ERROR, CARREL_GUEST_ERROR_INVALID_ARG));
    g_clear_error(&error);
    mv = parse(&error, "fs", "move", "/a", NULL);
    assert_null(mv);
    assert_true(g_error_matches(error, CARREL_GUEST_ERROR, CARREL_GUEST_ERROR_INVALID_ARG));
    g_clear_error(&error);
    assert_null(parse(&error, "fs", "chmod", "/a", NULL));
    assert_true(g_error_matches(error, CARREL_GUEST_ERROR, CARREL_GUEST_ERROR_INVALID_ARG));
    assert_non_null(strstr(error->message, "fs list"));
}

static void
test_entry_names(void **state)
{
    struct stat st = {.st_mode = S_IFREG | 0640, .st_size = 7, .st_mtime = 1700000000};
    g_autoptr(JsonNode) plain = carrel_guest_fs_entry_to_json("a\nb", &st, NULL);
    g_autoptr(JsonNode) raw = carrel_guest_fs_entry_to_json("x\xffy", &st, NULL);
    g_autofree char *plain_text = carrel_guest_json_to_string(plain);
    g_autofree char *raw_text = carrel_guest_json_to_string(raw);

    assert_string_equal(plain_text, "{\"name\":\"a\\nb\",\"type\":\"file\",\"size\":7,"
                                    "\"mode\":416,\"mtime\":1700000000}\n");
    /* Not UTF-8: the bytes go as base64, never as broken JSON. */
    assert_string_equal(raw_text, "{\"name_b64\":\"eP95\",\"type\":\"file\",\"size\":7,"
                                  "\"mode\":416,\"mtime\":1700000000}\n");
}

static void
test_operations(void **state)
{
    g_autofree char *dir = g_dir_make_tmp("carrel-guest-fs-XXXXXX", NULL);
    g_autofree char *deep = g_build_filename(dir, "p", "q", NULL);
    g_autofree char *top = g_build_filename(dir, "p", NULL);
    g_autofree char *moved = g_build_filename(dir, "m", NULL);
    g_autofree char *link = g_build_filename(dir, "link", NULL);
    g_autofree char *out = NULL;
    g_autoptr(GError) error = NULL;

    assert_non_null(dir);
    g_free(run(&error, "mkdir", "--parents", deep, NULL));
    assert_null(error);
    assert_true(g_file_test(deep, G_FILE_TEST_IS_DIR));
    assert_int_equal(symlink(dir, link), 0);
    out = run(&error, "list", dir, NULL, NULL);
    assert_non_null(out);
    assert_non_null(strstr(out, "\"name\":\"link\",\"type\":\"symlink\""));
    assert_non_null(strstr(out, "\"name\":\"p\",\"type\":\"dir\""));
    /* Not empty without --recursive: its own code. */
    assert_null(run(&error, "remove", top, NULL, NULL));
    assert_true(g_error_matches(error, CARREL_GUEST_ERROR, CARREL_GUEST_ERROR_NOT_EMPTY));
    g_clear_error(&error);
    /* A move never replaces what is there. */
    assert_null(run(&error, "move", top, link, NULL));
    assert_true(g_error_matches(error, CARREL_GUEST_ERROR, CARREL_GUEST_ERROR_EXISTS));
    g_clear_error(&error);
    g_free(run(&error, "move", top, moved, NULL));
    assert_null(error);
    /* The link is removed, not the folder it points to. */
    g_free(run(&error, "remove", link, NULL, NULL));
    assert_null(error);
    assert_true(g_file_test(dir, G_FILE_TEST_IS_DIR));
    g_free(run(&error, "remove", "--recursive", moved, NULL));
    assert_null(error);
    assert_false(g_file_test(moved, G_FILE_TEST_EXISTS));
    assert_null(run(&error, "stat", moved, NULL, NULL));
    assert_true(g_error_matches(error, CARREL_GUEST_ERROR, CARREL_GUEST_ERROR_NOT_FOUND));
    assert_int_equal(g_rmdir(dir), 0);
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_parse),
        cmocka_unit_test(test_entry_names),
        cmocka_unit_test(test_operations),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
