/*
 * util: a registry of metrics (included by util.h). Counters, gauges and histograms with labels,
 * safe to update from any thread, and a formatter that writes them as Prometheus text exposition
 * (version 0.0.4) without any I/O. The label names of a family are fixed when it is declared;
 * callers keep the label values bounded (route patterns, states, error codes: never ids).
 */
#pragma once

#ifndef CARREL_UTIL_H_INSIDE
#error "include util/util.h, not util-metrics.h"
#endif

G_BEGIN_DECLS

typedef enum {
    CARREL_METRIC_COUNTER,
    CARREL_METRIC_GAUGE,
    CARREL_METRIC_HISTOGRAM,
    CARREL_METRIC_LAST
} CarrelMetricType;

/* "counter", "gauge", "histogram"; from_string gives CARREL_METRIC_LAST for other names. */
const char *carrel_metric_type_to_string(CarrelMetricType type);
CarrelMetricType carrel_metric_type_from_string(const char *name);

/* Series one family keeps: a backstop for label values that turn out unbounded; further label
 * sets are not recorded (and counted in the family's dropped series). */
#define CARREL_METRICS_SERIES_MAX 1024
/* Label names of one family, and buckets of one histogram. */
#define CARREL_METRICS_LABELS_MAX 8
#define CARREL_METRICS_BUCKETS_MAX 64

typedef struct _CarrelMetrics CarrelMetrics;

CarrelMetrics *carrel_metrics_new(void);
void carrel_metrics_free(CarrelMetrics *metrics);
G_DEFINE_AUTOPTR_CLEANUP_FUNC(CarrelMetrics, carrel_metrics_free)

/*
 * Declares a family: name and label names as Prometheus allows them ([a-zA-Z_:][a-zA-Z0-9_:]*,
 * labels without ':' and not "le" or "__*"), help as one line of clean text, label_names
 * NULL-terminated (NULL: none). A histogram needs buckets: finite upper bounds in increasing
 * order (+Inf is implicit); other types take none. Families are written in the order they were
 * declared. Declaring a name again with the same type, labels and buckets is a no-op (api and
 * core may both declare what they share); anything else is INVALID_ARG.
 */
gboolean carrel_metrics_declare(CarrelMetrics *metrics, const char *name, CarrelMetricType type,
                                const char *help, const char *const *label_names,
                                const double *buckets, guint n_buckets, GError **error);

/*
 * Recording: label_values NULL-terminated, one per label name of the family (NULL when it has
 * none); a value that is not valid UTF-8 is recorded with replacement characters. Recording on
 * an undeclared name, with the wrong type or the wrong number of values is a programming error
 * (g_return_if_fail).
 */
/* Adds v (>= 0, finite) to a counter. */
void carrel_metrics_add(CarrelMetrics *metrics, const char *name, const char *const *label_values,
                        double v);
/* Sets a gauge. */
void carrel_metrics_set(CarrelMetrics *metrics, const char *name, const char *const *label_values,
                        double v);
/* Observes v in a histogram: the first bucket whose bound is >= v, its sum and count. */
void carrel_metrics_observe(CarrelMetrics *metrics, const char *name,
                            const char *const *label_values, double v);

/*
 * The text exposition of every family: "# HELP" and "# TYPE" lines, then its series sorted by
 * label values; histograms as cumulative _bucket{le} series ending with le="+Inf", then _sum and
 * _count. Label values and help are escaped as the format says. A family without series is
 * written with its HELP and TYPE only.
 */
char *carrel_metrics_format(CarrelMetrics *metrics);

/* A number as the exposition writes it: "+Inf", "-Inf", "NaN", integers without a fraction,
 * others in the shortest form that reads back to the same double. */
void carrel_metrics_append_number(GString *out, double v);

G_END_DECLS
