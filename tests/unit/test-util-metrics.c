/*
 * Unit: the metrics registry (util-metrics.c). What the text says for escaping, histogram
 * buckets (cumulative, +Inf, _sum and _count), label sets over the cap, invalid UTF-8 and
 * concurrent updates; the golden test (tests/data/metrics) pins the whole text.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <math.h>
#include <string.h>

#include "util/util.h"

/* The value of the sample line that starts with series (name and labels as written), or NULL
 * when the text has no such line. */
static char *
sample(const char *text, const char *series)
{
    g_auto(GStrv) lines = g_strsplit(text, "\n", -1);
    g_autofree char *prefix = g_strconcat(series, " ", NULL);

    for (guint i = 0; lines[i]; i++) {
        if (g_str_has_prefix(lines[i], prefix))
            return g_strdup(lines[i] + strlen(prefix));
    }
    return NULL;
}

static void
assert_sample(const char *text, const char *series, const char *want)
{
    g_autofree char *got = sample(text, series);

    if (!got || !g_str_equal(got, want))
        fail_msg("%s: want %s, got %s in:\n%s", series, want, got ? got : "(no line)", text);
}

static CarrelMetrics *
registry_with(const char *name, CarrelMetricType type, const char *const *labels,
              const double *buckets, guint n)
{
    CarrelMetrics *m = carrel_metrics_new();
    g_autoptr(GError) error = NULL;

    assert_true(carrel_metrics_declare(m, name, type, "h", labels, buckets, n, &error));
    assert_null(error);
    return m;
}

static void
test_label_escaping(void **state)
{
    const char *labels[] = {"v", NULL};
    const char *odd[] = {"a\\b\"c\nd", NULL};
    g_autoptr(CarrelMetrics) m = registry_with("x_total", CARREL_METRIC_COUNTER, labels, NULL, 0);
    g_autofree char *text = NULL;

    carrel_metrics_add(m, "x_total", odd, 2);
    text = carrel_metrics_format(m);
    /* Backslash, quote and line feed escaped; the sample stays on one line. */
    assert_sample(text, "x_total{v=\"a\\\\b\\\"c\\nd\"}", "2");
    assert_null(strstr(text, "c\nd"));
}

static void
test_help_escaping(void **state)
{
    g_autoptr(CarrelMetrics) m = carrel_metrics_new();
    g_autoptr(GError) error = NULL;
    g_autofree char *text = NULL;

    assert_true(
        carrel_metrics_declare(m, "y", CARREL_METRIC_GAUGE, "a \\ b", NULL, NULL, 0, &error));
    text = carrel_metrics_format(m);
    assert_string_equal(text, "# HELP y a \\\\ b\n# TYPE y gauge\n");
    /* Help is one line: a line feed would end the comment early. */
    assert_false(
        carrel_metrics_declare(m, "z", CARREL_METRIC_GAUGE, "two\nlines", NULL, NULL, 0, &error));
    assert_true(g_error_matches(error, CARREL_ERROR, CARREL_ERROR_INVALID_ARG));
}

static void
test_histogram_buckets(void **state)
{
    static const double buckets[] = {0.5, 1, 10};
    static const double seen[] = {0.1, 0.5, 0.75, 1, 3, 11, 200};
    g_autoptr(CarrelMetrics) m =
        registry_with("d_seconds", CARREL_METRIC_HISTOGRAM, NULL, buckets, G_N_ELEMENTS(buckets));
    g_autofree char *text = NULL;

    for (guint i = 0; i < G_N_ELEMENTS(seen); i++)
        carrel_metrics_observe(m, "d_seconds", NULL, seen[i]);
    text = carrel_metrics_format(m);
    /* Cumulative, a bound counts what equals it, +Inf counts everything. */
    assert_sample(text, "d_seconds_bucket{le=\"0.5\"}", "2");
    assert_sample(text, "d_seconds_bucket{le=\"1\"}", "4");
    assert_sample(text, "d_seconds_bucket{le=\"10\"}", "5");
    assert_sample(text, "d_seconds_bucket{le=\"+Inf\"}", "7");
    assert_sample(text, "d_seconds_sum", "216.35");
    assert_sample(text, "d_seconds_count", "7");
    /* +Inf is the last bucket, after the finite ones. */
    assert_true(strstr(text, "le=\"10\"") < strstr(text, "le=\"+Inf\""));
}

static void
test_histogram_labels(void **state)
{
    static const double buckets[] = {1};
    const char *labels[] = {"from", NULL};
    const char *warm[] = {"warm", NULL};
    const char *cold[] = {"cold", NULL};
    g_autoptr(CarrelMetrics) m =
        registry_with("c_seconds", CARREL_METRIC_HISTOGRAM, labels, buckets, 1);
    g_autofree char *text = NULL;

    carrel_metrics_observe(m, "c_seconds", warm, 0.5);
    carrel_metrics_observe(m, "c_seconds", cold, 5);
    carrel_metrics_observe(m, "c_seconds", cold, 7);
    text = carrel_metrics_format(m);
    /* le comes after the family's own labels; each label set has its own buckets. */
    assert_sample(text, "c_seconds_bucket{from=\"warm\",le=\"1\"}", "1");
    assert_sample(text, "c_seconds_bucket{from=\"cold\",le=\"1\"}", "0");
    assert_sample(text, "c_seconds_bucket{from=\"cold\",le=\"+Inf\"}", "2");
    assert_sample(text, "c_seconds_sum{from=\"cold\"}", "12");
    assert_sample(text, "c_seconds_count{from=\"warm\"}", "1");
}

static void
test_counter_and_gauge(void **state)
{
    const char *labels[] = {"state", NULL};
    const char *running[] = {"running", NULL};
    g_autoptr(CarrelMetrics) m = registry_with("s", CARREL_METRIC_GAUGE, labels, NULL, 0);
    g_autoptr(GError) error = NULL;
    g_autofree char *text = NULL;

    assert_true(
        carrel_metrics_declare(m, "n_total", CARREL_METRIC_COUNTER, "h", NULL, NULL, 0, &error));
    carrel_metrics_set(m, "s", running, 4);
    carrel_metrics_set(m, "s", running, 2);
    carrel_metrics_add(m, "n_total", NULL, 1);
    carrel_metrics_add(m, "n_total", NULL, 0.5);
    text = carrel_metrics_format(m);
    /* A gauge holds the last value, a counter the sum. */
    assert_sample(text, "s{state=\"running\"}", "2");
    assert_sample(text, "n_total", "1.5");
    assert_non_null(strstr(text, "# TYPE n_total counter\n"));
}

static void
test_invalid_utf8(void **state)
{
    const char *labels[] = {"v", NULL};
    const char *bad[] = {"a\xff", NULL};
    g_autoptr(CarrelMetrics) m = registry_with("u_total", CARREL_METRIC_COUNTER, labels, NULL, 0);
    g_autofree char *text = NULL;

    carrel_metrics_add(m, "u_total", bad, 1);
    carrel_metrics_add(m, "u_total", bad, 1);
    text = carrel_metrics_format(m);
    assert_true(g_utf8_validate(text, -1, NULL));
    /* One series, its value with the replacement character. */
    assert_sample(text, "u_total{v=\"a\xef\xbf\xbd\"}", "2");
}

static void
test_series_cap(void **state)
{
    const char *labels[] = {"v", NULL};
    g_autoptr(CarrelMetrics) m = registry_with("c_total", CARREL_METRIC_COUNTER, labels, NULL, 0);
    g_autofree char *text = NULL;
    g_auto(GStrv) lines = NULL;
    guint samples = 0;

    for (guint i = 0; i < CARREL_METRICS_SERIES_MAX + 5; i++) {
        g_autofree char *v = g_strdup_printf("%u", i);
        const char *values[] = {v, NULL};
        carrel_metrics_add(m, "c_total", values, 1);
    }
    text = carrel_metrics_format(m);
    lines = g_strsplit(text, "\n", -1);
    for (guint i = 0; lines[i]; i++)
        samples += g_str_has_prefix(lines[i], "c_total{");
    assert_int_equal(samples, CARREL_METRICS_SERIES_MAX);
    assert_non_null(strstr(text, "# c_total: 5 label sets over the limit"));
    /* Series that exist still count. */
    {
        const char *first[] = {"0", NULL};
        g_autofree char *again = NULL;
        carrel_metrics_add(m, "c_total", first, 1);
        again = carrel_metrics_format(m);
        assert_sample(again, "c_total{v=\"0\"}", "2");
    }
}

static void
test_declare_checks(void **state)
{
    static const double good[] = {1, 2};
    static const double flat[] = {1, 1};
    const double nan_bucket[] = {NAN};
    const char *le[] = {"le", NULL};
    const char *reserved[] = {"__name", NULL};
    const char *twice[] = {"a", "a", NULL};
    const char *dash[] = {"a-b", NULL};
    const char *a[] = {"a", NULL};
    const char *b[] = {"b", NULL};
    g_autoptr(CarrelMetrics) m = carrel_metrics_new();
    struct {
        const char *name;
        CarrelMetricType type;
        const char *const *labels;
        const double *buckets;
        guint n;
    } bad[] = {
        {"1abc", CARREL_METRIC_GAUGE, NULL, NULL, 0},
        {"", CARREL_METRIC_GAUGE, NULL, NULL, 0},
        {"a b", CARREL_METRIC_GAUGE, NULL, NULL, 0},
        {"h", CARREL_METRIC_HISTOGRAM, NULL, NULL, 0},
        {"h", CARREL_METRIC_HISTOGRAM, NULL, flat, 2},
        {"h", CARREL_METRIC_HISTOGRAM, NULL, nan_bucket, 1},
        {"h", CARREL_METRIC_HISTOGRAM, le, good, 2},
        {"g", CARREL_METRIC_GAUGE, reserved, NULL, 0},
        {"g", CARREL_METRIC_GAUGE, twice, NULL, 0},
        {"g", CARREL_METRIC_GAUGE, dash, NULL, 0},
        {"g", CARREL_METRIC_LAST, NULL, NULL, 0},
    };

    for (guint i = 0; i < G_N_ELEMENTS(bad); i++) {
        g_autoptr(GError) error = NULL;
        if (carrel_metrics_declare(m, bad[i].name, bad[i].type, "h", bad[i].labels, bad[i].buckets,
                                   bad[i].n, &error))
            fail_msg("case %u ('%s') was accepted", i, bad[i].name);
        assert_true(g_error_matches(error, CARREL_ERROR, CARREL_ERROR_INVALID_ARG));
    }
    /* Nothing of the refused declarations remains. */
    {
        g_autofree char *text = carrel_metrics_format(m);
        assert_string_equal(text, "");
    }
    /* The same definition again is fine; another one under the name is not. */
    assert_true(carrel_metrics_declare(m, "h", CARREL_METRIC_HISTOGRAM, "h", a, good, 2, NULL));
    assert_true(carrel_metrics_declare(m, "h", CARREL_METRIC_HISTOGRAM, "h", a, good, 2, NULL));
    assert_false(carrel_metrics_declare(m, "h", CARREL_METRIC_HISTOGRAM, "h", b, good, 2, NULL));
    assert_false(carrel_metrics_declare(m, "h", CARREL_METRIC_HISTOGRAM, "h", a, good, 1, NULL));
    assert_false(carrel_metrics_declare(m, "h", CARREL_METRIC_GAUGE, "h", a, NULL, 0, NULL));
}

#define THREADS 4
#define ADDS 20000

static gpointer
add_many(gpointer data)
{
    CarrelMetrics *m = data;
    static const double buckets[] = {1};
    const char *labels[] = {"route", NULL};
    const char *values[] = {"/v1/x", NULL};

    for (guint i = 0; i < ADDS; i++) {
        carrel_metrics_add(m, "r_total", values, 1);
        carrel_metrics_observe(m, "t_seconds", NULL, 0.5);
        /* Declaring what exists races nothing either. */
        if (i % 1000 == 0)
            g_assert_true(carrel_metrics_declare(m, "r_total", CARREL_METRIC_COUNTER, "h", labels,
                                                 NULL, 0, NULL));
        if (i % 1000 == 0)
            g_assert_true(carrel_metrics_declare(m, "t_seconds", CARREL_METRIC_HISTOGRAM, "h", NULL,
                                                 buckets, 1, NULL));
    }
    return NULL;
}

static void
test_threads(void **state)
{
    static const double buckets[] = {1};
    const char *labels[] = {"route", NULL};
    g_autoptr(CarrelMetrics) m = registry_with("r_total", CARREL_METRIC_COUNTER, labels, NULL, 0);
    GThread *threads[THREADS];
    g_autofree char *text = NULL;
    g_autofree char *total = g_strdup_printf("%d", THREADS * ADDS);

    assert_true(carrel_metrics_declare(m, "t_seconds", CARREL_METRIC_HISTOGRAM, "h", NULL, buckets,
                                       1, NULL));
    for (guint i = 0; i < THREADS; i++)
        threads[i] = g_thread_new("metrics", add_many, m);
    for (guint i = 0; i < THREADS; i++)
        g_thread_join(threads[i]);
    text = carrel_metrics_format(m);
    /* No update lost. */
    assert_sample(text, "r_total{route=\"/v1/x\"}", total);
    assert_sample(text, "t_seconds_count", total);
    assert_sample(text, "t_seconds_bucket{le=\"1\"}", total);
}

static void
test_numbers(void **state)
{
    static const struct {
        double v;
        const char *text;
    } cases[] = {
        {0, "0"},           {-0.0, "0"},         {42, "42"},
        {-7, "-7"},         {0.05, "0.05"},      {2.5, "2.5"},
        {1e15, "1e+15"},    {1e-3, "0.001"},     {0.1 + 0.2, "0.30000000000000004"},
        {INFINITY, "+Inf"}, {-INFINITY, "-Inf"},
    };

    for (guint i = 0; i < G_N_ELEMENTS(cases); i++) {
        g_autoptr(GString) out = g_string_new(NULL);
        carrel_metrics_append_number(out, cases[i].v);
        assert_string_equal(out->str, cases[i].text);
        /* Every finite figure reads back as the same double. */
        if (isfinite(cases[i].v))
            assert_true(g_ascii_strtod(out->str, NULL) == cases[i].v);
    }
    {
        g_autoptr(GString) out = g_string_new(NULL);
        carrel_metrics_append_number(out, NAN);
        assert_string_equal(out->str, "NaN");
    }
}

static void
test_type_names(void **state)
{
    for (int t = 0; t < CARREL_METRIC_LAST; t++)
        assert_int_equal(carrel_metric_type_from_string(carrel_metric_type_to_string(t)), t);
    assert_int_equal(carrel_metric_type_from_string("summary"), CARREL_METRIC_LAST);
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_label_escaping),    cmocka_unit_test(test_help_escaping),
        cmocka_unit_test(test_histogram_buckets), cmocka_unit_test(test_histogram_labels),
        cmocka_unit_test(test_counter_and_gauge), cmocka_unit_test(test_invalid_utf8),
        cmocka_unit_test(test_series_cap),        cmocka_unit_test(test_declare_checks),
        cmocka_unit_test(test_threads),           cmocka_unit_test(test_numbers),
        cmocka_unit_test(test_type_names),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
