/*
 * Golden test of the Prometheus text formatter: every tests/data/metrics/<case>.json, an object
 * {"families": [{"name", "type", "help", "labels": [...], "buckets": [...]}], "samples":
 * [{"name", "labels": [...], "value"}]}, declares its families in order into a fresh registry and
 * records each sample by its family's type (a counter adds, a gauge sets, a histogram observes);
 * carrel_metrics_format must then give <case>.txt exactly, or the declaration's error
 * <case>.err. Numbers are JSON numbers, or the strings "+Inf", "-Inf" and "NaN".
 * CARREL_TEST_REGENERATE=1 rewrites the expected files: review that diff.
 */
#include <math.h>

#include "util/util.h"
#include "tests/golden/golden.h"

static const char *const case_members[] = {"families", "samples", NULL};
static const char *const family_members[] = {"name", "type", "help", "labels", "buckets", NULL};
static const char *const sample_members[] = {"name", "labels", "value", NULL};

static double
number_of(JsonNode *node)
{
    const char *text;

    if (json_node_get_value_type(node) != G_TYPE_STRING)
        return json_node_get_double(node);
    text = json_node_get_string(node);
    if (g_str_equal(text, "+Inf"))
        return INFINITY;
    if (g_str_equal(text, "-Inf"))
        return -INFINITY;
    if (g_str_equal(text, "NaN"))
        return NAN;
    g_error("'%s' is not a number in the case file", text);
}

/* A NULL-terminated array of the strings of member (NULL when absent); freed with g_free only,
 * the strings are the JSON's. */
static const char **
strings_of(JsonObject *obj, const char *member)
{
    JsonArray *arr =
        json_object_has_member(obj, member) ? json_object_get_array_member(obj, member) : NULL;
    guint n = arr ? json_array_get_length(arr) : 0;
    const char **out;

    if (!arr)
        return NULL;
    out = g_new0(const char *, n + 1);
    for (guint i = 0; i < n; i++)
        out[i] = json_array_get_string_element(arr, i);
    return out;
}

static gboolean
declare(CarrelMetrics *metrics, JsonObject *f, GError **error)
{
    g_autofree const char **labels = NULL;
    g_autofree double *buckets = NULL;
    JsonArray *arr = NULL;
    guint n = 0;
    CarrelMetricType type;

    golden_check_members(f, family_members, "a metrics family");
    type = carrel_metric_type_from_string(json_object_get_string_member(f, "type"));
    labels = strings_of(f, "labels");
    if (json_object_has_member(f, "buckets")) {
        arr = json_object_get_array_member(f, "buckets");
        n = json_array_get_length(arr);
        buckets = g_new0(double, n + 1);
        for (guint i = 0; i < n; i++)
            buckets[i] = number_of(json_array_get_element(arr, i));
    }
    return carrel_metrics_declare(metrics, json_object_get_string_member(f, "name"), type,
                                  json_object_get_string_member(f, "help"), labels, buckets, n,
                                  error);
}

static void
record(CarrelMetrics *metrics, JsonObject *root, JsonObject *s)
{
    const char *name = json_object_get_string_member(s, "name");
    g_autofree const char **labels = strings_of(s, "labels");
    double v = number_of(json_object_get_member(s, "value"));
    JsonArray *families = json_object_get_array_member(root, "families");
    const char *type = NULL;

    golden_check_members(s, sample_members, "a metrics sample");
    for (guint i = 0; i < json_array_get_length(families); i++) {
        JsonObject *f = json_array_get_object_element(families, i);
        if (g_str_equal(json_object_get_string_member(f, "name"), name))
            type = json_object_get_string_member(f, "type");
    }
    if (!type)
        g_error("sample of undeclared family '%s' in the case file", name);
    switch (carrel_metric_type_from_string(type)) {
    case CARREL_METRIC_COUNTER:
        carrel_metrics_add(metrics, name, labels, v);
        break;
    case CARREL_METRIC_GAUGE:
        carrel_metrics_set(metrics, name, labels, v);
        break;
    case CARREL_METRIC_HISTOGRAM:
        carrel_metrics_observe(metrics, name, labels, v);
        break;
    case CARREL_METRIC_LAST:
    default:
        g_error("unknown type '%s' in the case file", type);
    }
}

static char *
generate(JsonObject *root, GError **error)
{
    g_autoptr(CarrelMetrics) metrics = carrel_metrics_new();
    JsonArray *families = json_object_get_array_member(root, "families");
    JsonArray *samples = json_object_has_member(root, "samples")
                             ? json_object_get_array_member(root, "samples")
                             : NULL;

    golden_check_members(root, case_members, "a metrics case");
    for (guint i = 0; i < json_array_get_length(families); i++) {
        if (!declare(metrics, json_array_get_object_element(families, i), error))
            return NULL;
    }
    for (guint i = 0; samples && i < json_array_get_length(samples); i++)
        record(metrics, root, json_array_get_object_element(samples, i));
    return carrel_metrics_format(metrics);
}

int
main(int argc, char **argv)
{
    return golden_main(argc, argv, "metrics", ".txt", generate);
}
