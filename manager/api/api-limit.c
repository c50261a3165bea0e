/*
 * api: failed credentials per source. A 256-bit token cannot be guessed, but nothing should
 * let a client try without end, nor fill the audit log with refusals at full speed: after
 * max_failures in window_s, a source gets 429 with Retry-After until its window moves on.
 */
#include "api/api-priv.h"

#define LIMITER_SOURCES_MAX 4096

struct _CarrelApiLimiter {
    GMutex lock;
    GHashTable *sources; /* source -> Window */
    guint max_failures;
    gint64 window_us;
};

typedef struct {
    gint64 start_us;
    guint failures;
} Window;

CarrelApiLimiter *
carrel_api_limiter_new(guint max_failures, guint window_s)
{
    CarrelApiLimiter *limiter = g_new0(CarrelApiLimiter, 1);

    g_mutex_init(&limiter->lock);
    limiter->sources = g_hash_table_new_full(g_str_hash, g_str_equal, g_free, g_free);
    limiter->max_failures = max_failures;
    limiter->window_us = (gint64)window_s * G_USEC_PER_SEC;
    return limiter;
}

void
carrel_api_limiter_free(CarrelApiLimiter *limiter)
{
    if (!limiter)
        return;
    g_hash_table_unref(limiter->sources);
    g_mutex_clear(&limiter->lock);
    g_free(limiter);
}

static gboolean
window_over(gpointer key, gpointer value, gpointer data)
{
    const CarrelApiLimiter *limiter = ((gpointer *)data)[0];
    gint64 now_us = *(gint64 *)((gpointer *)data)[1];

    return now_us - ((Window *)value)->start_us >= limiter->window_us;
}

gboolean
carrel_api_limiter_check(CarrelApiLimiter *limiter, const char *source, gint64 now_us,
                         guint *ret_retry_s)
{
    g_autoptr(GMutexLocker) locker G_GNUC_UNUSED = g_mutex_locker_new(&limiter->lock);
    Window *w = g_hash_table_lookup(limiter->sources, source);
    gint64 left_us;

    *ret_retry_s = 0;
    if (!w || w->failures < limiter->max_failures)
        return TRUE;
    left_us = w->start_us + limiter->window_us - now_us;
    if (left_us <= 0) {
        g_hash_table_remove(limiter->sources, source);
        return TRUE;
    }
    *ret_retry_s = (guint)((left_us + G_USEC_PER_SEC - 1) / G_USEC_PER_SEC);
    return FALSE;
}

void
carrel_api_limiter_fail(CarrelApiLimiter *limiter, const char *source, gint64 now_us)
{
    g_autoptr(GMutexLocker) locker G_GNUC_UNUSED = g_mutex_locker_new(&limiter->lock);
    Window *w = g_hash_table_lookup(limiter->sources, source);
    gpointer data[] = {limiter, &now_us};

    if (w && now_us - w->start_us >= limiter->window_us) {
        w->start_us = now_us;
        w->failures = 0;
    }
    if (!w) {
        /* Many sources at once: forget the finished windows first, then everything. */
        if (g_hash_table_size(limiter->sources) >= LIMITER_SOURCES_MAX)
            g_hash_table_foreach_remove(limiter->sources, window_over, data);
        if (g_hash_table_size(limiter->sources) >= LIMITER_SOURCES_MAX)
            g_hash_table_remove_all(limiter->sources);
        w = g_new0(Window, 1);
        w->start_us = now_us;
        g_hash_table_insert(limiter->sources, g_strdup(source), w);
    }
    w->failures++;
}

/*
 * Requests per token: a token bucket of burst requests, refilled at rate per second. A client
 * may send burst requests at once, then rate per second; beyond, 429 with Retry-After.
 */
gboolean
carrel_api_bucket_take(CarrelApiBucket *bucket, guint rate, guint burst, gint64 now_us,
                       guint *ret_retry_s)
{
    gint64 elapsed_us = now_us - bucket->last_us;

    *ret_retry_s = 0;
    if (bucket->last_us == 0) {
        bucket->tokens = burst;
    } else if (elapsed_us > 0) {
        bucket->tokens = MIN((double)burst, bucket->tokens + (double)elapsed_us * rate / 1e6);
    }
    bucket->last_us = MAX(bucket->last_us, now_us);
    if (bucket->tokens >= 1.0) {
        bucket->tokens -= 1.0;
        return TRUE;
    }
    /* The whole seconds until one request's worth has come back (at least 1). */
    *ret_retry_s = MAX(1u, (guint)((1.0 - bucket->tokens) / rate + 0.999999));
    return FALSE;
}

struct _CarrelApiRates {
    GHashTable *buckets; /* token id -> CarrelApiBucket */
};

CarrelApiRates *
carrel_api_rates_new(void)
{
    CarrelApiRates *rates = g_new0(CarrelApiRates, 1);

    rates->buckets = g_hash_table_new_full(g_str_hash, g_str_equal, g_free, g_free);
    return rates;
}

void
carrel_api_rates_free(CarrelApiRates *rates)
{
    if (!rates)
        return;
    g_hash_table_unref(rates->buckets);
    g_free(rates);
}

gboolean
carrel_api_rates_take(CarrelApiRates *rates, const char *key, guint rate, guint burst,
                      gint64 now_us, guint *ret_retry_s)
{
    CarrelApiBucket *bucket = g_hash_table_lookup(rates->buckets, key);

    if (!bucket) {
        /* Tokens are few (each is made by an admin), but forget them all rather than grow. */
        if (g_hash_table_size(rates->buckets) >= LIMITER_SOURCES_MAX)
            g_hash_table_remove_all(rates->buckets);
        bucket = g_new0(CarrelApiBucket, 1);
        g_hash_table_insert(rates->buckets, g_strdup(key), bucket);
    }
    return carrel_api_bucket_take(bucket, rate, burst, now_us, ret_retry_s);
}
