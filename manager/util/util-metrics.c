/*
 * util: the metrics registry and its Prometheus text formatter (util-metrics.h). One lock guards
 * the whole registry: updates are a hash lookup and an addition, and a scrape copies nothing
 * while it writes.
 */
#include <math.h>
#include <string.h>

#include "util/util.h"

static const char *const type_names[CARREL_METRIC_LAST] = {
    [CARREL_METRIC_COUNTER] = "counter",
    [CARREL_METRIC_GAUGE] = "gauge",
    [CARREL_METRIC_HISTOGRAM] = "histogram",
};

typedef struct {
    GStrv values;    /* one per label name of the family, valid UTF-8 */
    double value;    /* counter, gauge */
    guint64 *counts; /* histogram: observations per bucket, not cumulative; [n_buckets] is +Inf */
    double sum;
    guint64 count;
} Series;

typedef struct {
    char *name;
    char *help;
    CarrelMetricType type;
    GStrv labels;
    guint n_labels;
    double *buckets;
    guint n_buckets;
    GHashTable *series; /* key of the label values -> Series */
    guint64 dropped;    /* label sets refused over CARREL_METRICS_SERIES_MAX */
} Family;

struct _CarrelMetrics {
    GMutex lock;
    GPtrArray *families; /* of Family, in the order declared */
    GHashTable *by_name; /* name -> Family (borrowed from families) */
};

const char *
carrel_metric_type_to_string(CarrelMetricType type)
{
    return carrel_util_enum_to_string(type_names, CARREL_METRIC_LAST, (int)type);
}

CarrelMetricType
carrel_metric_type_from_string(const char *name)
{
    return (CarrelMetricType)carrel_util_enum_from_string(type_names, CARREL_METRIC_LAST, name);
}

static void
series_free(gpointer data)
{
    Series *s = data;

    g_strfreev(s->values);
    g_free(s->counts);
    g_free(s);
}

static void
family_free(gpointer data)
{
    Family *f = data;

    g_free(f->name);
    g_free(f->help);
    g_strfreev(f->labels);
    g_free(f->buckets);
    g_hash_table_unref(f->series);
    g_free(f);
}

CarrelMetrics *
carrel_metrics_new(void)
{
    CarrelMetrics *metrics = g_new0(CarrelMetrics, 1);

    g_mutex_init(&metrics->lock);
    metrics->families = g_ptr_array_new_with_free_func(family_free);
    metrics->by_name = g_hash_table_new(g_str_hash, g_str_equal);
    return metrics;
}

void
carrel_metrics_free(CarrelMetrics *metrics)
{
    if (!metrics)
        return;
    g_hash_table_unref(metrics->by_name);
    g_ptr_array_unref(metrics->families);
    g_mutex_clear(&metrics->lock);
    g_free(metrics);
}

/* [a-zA-Z_:][a-zA-Z0-9_:]*, or without ':' for label names. */
static gboolean
name_ok(const char *name, gboolean colon)
{
    if (!name || !(g_ascii_isalpha(name[0]) || name[0] == '_' || (colon && name[0] == ':')))
        return FALSE;
    for (const char *p = name + 1; *p; p++) {
        if (!g_ascii_isalnum(*p) && *p != '_' && !(colon && *p == ':'))
            return FALSE;
    }
    return TRUE;
}

static gboolean
check_labels(const char *name, const char *const *labels, GError **error)
{
    guint n = labels ? g_strv_length((char **)labels) : 0;

    if (n > CARREL_METRICS_LABELS_MAX) {
        g_set_error(error, CARREL_ERROR, CARREL_ERROR_INVALID_ARG,
                    "metric '%s' has more than %d labels", name, CARREL_METRICS_LABELS_MAX);
        return FALSE;
    }
    for (guint i = 0; i < n; i++) {
        /* "le" is the histograms' own; "__" names are reserved by Prometheus. */
        if (!name_ok(labels[i], FALSE) || g_str_equal(labels[i], "le") ||
            g_str_has_prefix(labels[i], "__")) {
            g_set_error(error, CARREL_ERROR, CARREL_ERROR_INVALID_ARG,
                        "metric '%s' has an invalid label name '%s'", name, labels[i]);
            return FALSE;
        }
        for (guint j = 0; j < i; j++) {
            if (g_str_equal(labels[i], labels[j])) {
                g_set_error(error, CARREL_ERROR, CARREL_ERROR_INVALID_ARG,
                            "metric '%s' has the label '%s' twice", name, labels[i]);
                return FALSE;
            }
        }
    }
    return TRUE;
}

static gboolean
check_buckets(const char *name, CarrelMetricType type, const double *buckets, guint n,
              GError **error)
{
    if (type != CARREL_METRIC_HISTOGRAM) {
        if (n == 0)
            return TRUE;
        g_set_error(error, CARREL_ERROR, CARREL_ERROR_INVALID_ARG,
                    "metric '%s' is no histogram and takes no buckets", name);
        return FALSE;
    }
    if (n == 0 || n > CARREL_METRICS_BUCKETS_MAX || !buckets) {
        g_set_error(error, CARREL_ERROR, CARREL_ERROR_INVALID_ARG,
                    "histogram '%s' needs 1 to %d buckets", name, CARREL_METRICS_BUCKETS_MAX);
        return FALSE;
    }
    for (guint i = 0; i < n; i++) {
        if (!isfinite(buckets[i]) || (i > 0 && buckets[i] <= buckets[i - 1])) {
            g_set_error(error, CARREL_ERROR, CARREL_ERROR_INVALID_ARG,
                        "histogram '%s' needs finite buckets in increasing order", name);
            return FALSE;
        }
    }
    return TRUE;
}

/* TRUE when f was declared with exactly this definition. */
static gboolean
same_family(const Family *f, CarrelMetricType type, const char *help, const char *const *labels,
            const double *buckets, guint n_buckets)
{
    guint n = labels ? g_strv_length((char **)labels) : 0;

    if (f->type != type || !g_str_equal(f->help, help) || f->n_labels != n ||
        f->n_buckets != n_buckets)
        return FALSE;
    for (guint i = 0; i < n; i++) {
        if (!g_str_equal(f->labels[i], labels[i]))
            return FALSE;
    }
    return n_buckets == 0 || memcmp(f->buckets, buckets, n_buckets * sizeof(double)) == 0;
}

gboolean
carrel_metrics_declare(CarrelMetrics *metrics, const char *name, CarrelMetricType type,
                       const char *help, const char *const *label_names, const double *buckets,
                       guint n_buckets, GError **error)
{
    g_autoptr(GMutexLocker) locker G_GNUC_UNUSED = g_mutex_locker_new(&metrics->lock);
    Family *f;

    if (!name_ok(name, TRUE) || (int)type < 0 || type >= CARREL_METRIC_LAST || !help ||
        !carrel_util_is_clean_text(help)) {
        g_set_error(error, CARREL_ERROR, CARREL_ERROR_INVALID_ARG,
                    "invalid metric '%s': a name of [a-zA-Z0-9_:], a type and one line of help",
                    name ? name : "(null)");
        return FALSE;
    }
    if (!check_labels(name, label_names, error) ||
        !check_buckets(name, type, buckets, n_buckets, error))
        return FALSE;
    f = g_hash_table_lookup(metrics->by_name, name);
    if (f) {
        if (same_family(f, type, help, label_names, buckets, n_buckets))
            return TRUE;
        g_set_error(error, CARREL_ERROR, CARREL_ERROR_INVALID_ARG,
                    "metric '%s' is already declared otherwise", name);
        return FALSE;
    }
    f = g_new0(Family, 1);
    f->name = g_strdup(name);
    f->help = g_strdup(help);
    f->type = type;
    f->labels = g_strdupv((char **)label_names);
    f->n_labels = f->labels ? g_strv_length(f->labels) : 0;
    f->buckets = n_buckets ? g_memdup2(buckets, n_buckets * sizeof(double)) : NULL;
    f->n_buckets = n_buckets;
    f->series = g_hash_table_new_full(g_str_hash, g_str_equal, g_free, series_free);
    g_ptr_array_add(metrics->families, f);
    g_hash_table_insert(metrics->by_name, f->name, f);
    return TRUE;
}

/* The values as recorded (valid UTF-8), or NULL when their number is not the family's. */
static GStrv
clean_values(const Family *f, const char *const *values)
{
    guint n = values ? g_strv_length((char **)values) : 0;
    GStrv out;

    if (n != f->n_labels)
        return NULL;
    out = g_new0(char *, n + 1);
    for (guint i = 0; i < n; i++)
        out[i] = g_utf8_make_valid(values[i], -1);
    return out;
}

/* Unambiguous whatever the values hold: each is preceded by its length. */
static char *
series_key(char *const *values)
{
    GString *key = g_string_new(NULL);

    for (guint i = 0; values[i]; i++)
        g_string_append_printf(key, "%" G_GSIZE_FORMAT ":%s", strlen(values[i]), values[i]);
    return g_string_free(key, FALSE);
}

/* The series of name for values (made on first use), or NULL: a programming error, or the
 * family is full. Called with the lock held. */
static Series *
series_for(CarrelMetrics *metrics, const char *name, CarrelMetricType type,
           const char *const *values)
{
    Family *f = g_hash_table_lookup(metrics->by_name, name);
    g_auto(GStrv) clean = NULL;
    g_autofree char *key = NULL;
    Series *s;

    g_return_val_if_fail(f != NULL && f->type == type, NULL);
    clean = clean_values(f, values);
    g_return_val_if_fail(clean != NULL, NULL);
    key = series_key(clean);
    s = g_hash_table_lookup(f->series, key);
    if (s)
        return s;
    if (g_hash_table_size(f->series) >= CARREL_METRICS_SERIES_MAX) {
        f->dropped++;
        return NULL;
    }
    s = g_new0(Series, 1);
    s->values = g_steal_pointer(&clean);
    if (type == CARREL_METRIC_HISTOGRAM)
        s->counts = g_new0(guint64, f->n_buckets + 1);
    g_hash_table_insert(f->series, g_steal_pointer(&key), s);
    return s;
}

void
carrel_metrics_add(CarrelMetrics *metrics, const char *name, const char *const *label_values,
                   double v)
{
    g_autoptr(GMutexLocker) locker = NULL;
    Series *s;

    g_return_if_fail(isfinite(v) && v >= 0);
    locker = g_mutex_locker_new(&metrics->lock);
    s = series_for(metrics, name, CARREL_METRIC_COUNTER, label_values);
    if (s)
        s->value += v;
}

void
carrel_metrics_set(CarrelMetrics *metrics, const char *name, const char *const *label_values,
                   double v)
{
    g_autoptr(GMutexLocker) locker G_GNUC_UNUSED = g_mutex_locker_new(&metrics->lock);
    Series *s = series_for(metrics, name, CARREL_METRIC_GAUGE, label_values);

    if (s)
        s->value = v;
}

void
carrel_metrics_observe(CarrelMetrics *metrics, const char *name, const char *const *label_values,
                       double v)
{
    g_autoptr(GMutexLocker) locker = NULL;
    Family *f;
    Series *s;
    guint i = 0;

    g_return_if_fail(!isnan(v));
    locker = g_mutex_locker_new(&metrics->lock);
    s = series_for(metrics, name, CARREL_METRIC_HISTOGRAM, label_values);
    if (!s)
        return;
    f = g_hash_table_lookup(metrics->by_name, name);
    while (i < f->n_buckets && v > f->buckets[i])
        i++;
    s->counts[i]++;
    s->sum += v;
    s->count++;
}

void
carrel_metrics_append_number(GString *out, double v)
{
    char buf[G_ASCII_DTOSTR_BUF_SIZE];

    if (isnan(v)) {
        g_string_append(out, "NaN");
        return;
    }
    if (isinf(v)) {
        g_string_append(out, v > 0 ? "+Inf" : "-Inf");
        return;
    }
    /* Counts and byte sizes read best without an exponent (and -0 is 0). */
    if (v == trunc(v) && fabs(v) < 1e15) {
        g_string_append_printf(out, "%" G_GINT64_FORMAT, (gint64)v);
        return;
    }
    for (int precision = 1; precision <= 17; precision++) {
        static const char *const formats[] = {"%.1g",  "%.2g",  "%.3g",  "%.4g",  "%.5g",  "%.6g",
                                              "%.7g",  "%.8g",  "%.9g",  "%.10g", "%.11g", "%.12g",
                                              "%.13g", "%.14g", "%.15g", "%.16g", "%.17g"};
        g_ascii_formatd(buf, sizeof(buf), formats[precision - 1], v);
        if (g_ascii_strtod(buf, NULL) == v)
            break;
    }
    g_string_append(out, buf);
}

/* Backslash, double quote and line feed escaped (label values); help escapes no quote. */
static void
append_escaped(GString *out, const char *text, gboolean quote)
{
    for (const char *p = text; *p; p++) {
        if (*p == '\\')
            g_string_append(out, "\\\\");
        else if (*p == '\n')
            g_string_append(out, "\\n");
        else if (quote && *p == '"')
            g_string_append(out, "\\\"");
        else
            g_string_append_c(out, *p);
    }
}

/* {a="x",b="y"} with le last when not NULL; nothing for no labels at all. */
static void
append_labels(GString *out, const Family *f, const Series *s, const char *le)
{
    if (f->n_labels == 0 && !le)
        return;
    g_string_append_c(out, '{');
    for (guint i = 0; i < f->n_labels; i++) {
        g_string_append_printf(out, "%s%s=\"", i ? "," : "", f->labels[i]);
        append_escaped(out, s->values[i], TRUE);
        g_string_append_c(out, '"');
    }
    if (le)
        g_string_append_printf(out, "%sle=\"%s\"", f->n_labels ? "," : "", le);
    g_string_append_c(out, '}');
}

static void
append_sample(GString *out, const Family *f, const Series *s, const char *suffix, const char *le,
              double v)
{
    g_string_append(out, f->name);
    g_string_append(out, suffix);
    append_labels(out, f, s, le);
    g_string_append_c(out, ' ');
    carrel_metrics_append_number(out, v);
    g_string_append_c(out, '\n');
}

/* Cumulative buckets: each counts every observation up to its bound, +Inf all of them. */
static void
append_histogram(GString *out, const Family *f, const Series *s)
{
    guint64 cumulative = 0;

    for (guint i = 0; i <= f->n_buckets; i++) {
        g_autoptr(GString) le = g_string_new(NULL);
        if (i < f->n_buckets)
            carrel_metrics_append_number(le, f->buckets[i]);
        else
            g_string_append(le, "+Inf");
        cumulative += s->counts[i];
        append_sample(out, f, s, "_bucket", le->str, (double)cumulative);
    }
    append_sample(out, f, s, "_sum", NULL, s->sum);
    append_sample(out, f, s, "_count", NULL, (double)s->count);
}

static gint
compare_series(gconstpointer a, gconstpointer b)
{
    const Series *x = *(Series *const *)a;
    const Series *y = *(Series *const *)b;

    for (guint i = 0; x->values[i] && y->values[i]; i++) {
        int c = strcmp(x->values[i], y->values[i]);
        if (c)
            return c;
    }
    return 0;
}

static void
append_family(GString *out, const Family *f)
{
    g_autoptr(GPtrArray) sorted = g_ptr_array_sized_new(g_hash_table_size(f->series));
    GHashTableIter iter;
    gpointer s;

    g_string_append_printf(out, "# HELP %s ", f->name);
    append_escaped(out, f->help, FALSE);
    g_string_append_printf(out, "\n# TYPE %s %s\n", f->name, carrel_metric_type_to_string(f->type));
    g_hash_table_iter_init(&iter, f->series);
    while (g_hash_table_iter_next(&iter, NULL, &s))
        g_ptr_array_add(sorted, s);
    g_ptr_array_sort(sorted, compare_series);
    for (guint i = 0; i < sorted->len; i++) {
        const Series *one = g_ptr_array_index(sorted, i);
        if (f->type == CARREL_METRIC_HISTOGRAM)
            append_histogram(out, f, one);
        else
            append_sample(out, f, one, "", NULL, one->value);
    }
    /* A comment, which parsers skip: a person reading the page learns that something is off. */
    if (f->dropped)
        g_string_append_printf(out,
                               "# %s: %" G_GUINT64_FORMAT " label sets over the limit of %d "
                               "were not recorded\n",
                               f->name, f->dropped, CARREL_METRICS_SERIES_MAX);
}

char *
carrel_metrics_format(CarrelMetrics *metrics)
{
    g_autoptr(GMutexLocker) locker G_GNUC_UNUSED = g_mutex_locker_new(&metrics->lock);
    GString *out = g_string_new(NULL);

    for (guint i = 0; i < metrics->families->len; i++)
        append_family(out, g_ptr_array_index(metrics->families, i));
    return g_string_free(out, FALSE);
}
