#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <string.h>

#include "policy/policy.h"

static void
test_default(void **state)
{
    g_autoptr(CarrelPolicy) p = carrel_policy_new_default();
    g_autoptr(GError) error = NULL;

    assert_true(carrel_policy_check_resources(p, 4, 8192, NULL));
    assert_false(carrel_policy_check_resources(p, 5, 1024, &error));
    assert_true(g_error_matches(error, CARREL_ERROR, CARREL_ERROR_POLICY_DENIED));
    assert_non_null(strstr(error->message, "at most 4"));
    g_clear_error(&error);
    assert_false(carrel_policy_check_resources(p, 1, 8193, &error));
    assert_true(g_error_matches(error, CARREL_ERROR, CARREL_ERROR_POLICY_DENIED));
}

static void
test_load(void **state)
{
    const char *text = "[resources]\nmax_vcpus=2\nmax_memory_mib=2048\n";
    g_autoptr(CarrelPolicy) p = carrel_policy_load_data(text, strlen(text), NULL);

    assert_non_null(p);
    assert_true(carrel_policy_check_resources(p, 2, 2048, NULL));
    assert_false(carrel_policy_check_resources(p, 3, 1024, NULL));
    assert_false(carrel_policy_check_resources(p, 1, 4096, NULL));
}

static void
test_load_refusals(void **state)
{
    const char *bad[] = {
        "[resources]\nmax_vcpus=0\n",       "[resources]\nmax_vcpus=many\n",
        "[resources]\nmax_vcpus=1000\n",    "not a key file",
        "[resources]\nmax_memory_mib=-5\n",
    };

    for (gsize i = 0; i < G_N_ELEMENTS(bad); i++) {
        g_autoptr(GError) error = NULL;
        g_autoptr(CarrelPolicy) p = carrel_policy_load_data(bad[i], strlen(bad[i]), &error);
        assert_null(p);
        assert_true(g_error_matches(error, CARREL_ERROR, CARREL_ERROR_INVALID_ARG));
    }
}

static void
test_exit_paths(void **state)
{
    const char *text = "[artifacts]\npaths=/home/agent/out;/tmp/result.json\n";
    const char *bad[] = {"[artifacts]\npaths=relative/x\n", "[artifacts]\npaths=/a/../b\n",
                         "[artifacts]\npaths=/\n"};
    g_autoptr(CarrelPolicy) p = carrel_policy_load_data(text, strlen(text), NULL);
    g_autoptr(CarrelPolicy) none = carrel_policy_new_default();
    char *requested[] = {(char *)"/tmp/result.json", (char *)"/home/agent/log", NULL};
    g_auto(GStrv) merged = NULL;
    g_auto(GStrv) only = NULL;

    assert_non_null(p);
    merged = carrel_policy_exit_paths(p, requested);
    /* The policy's first, then the request's, each once. */
    assert_int_equal(g_strv_length(merged), 3);
    assert_string_equal(merged[0], "/home/agent/out");
    assert_string_equal(merged[1], "/tmp/result.json");
    assert_string_equal(merged[2], "/home/agent/log");
    only = carrel_policy_exit_paths(none, NULL);
    assert_int_equal(g_strv_length(only), 0);
    for (guint i = 0; i < G_N_ELEMENTS(bad); i++) {
        g_autoptr(GError) error = NULL;
        g_autoptr(CarrelPolicy) refused = carrel_policy_load_data(bad[i], strlen(bad[i]), &error);
        assert_null(refused);
        assert_non_null(strstr(error->message, "[artifacts] paths"));
    }
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_default),
        cmocka_unit_test(test_load),
        cmocka_unit_test(test_load_refusals),
        cmocka_unit_test(test_exit_paths),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
