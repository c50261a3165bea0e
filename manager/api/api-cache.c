/*
 * api: rendered replies kept for reuse. A session list is the most frequent read, and its text
 * depends only on what the store holds and on whose sessions the caller sees: it is kept per
 * scope and served again while the store's generation stays the same. Any write raises the
 * generation, and the first lookup that sees the new one drops every kept text, so a list
 * served is never older than the store. Core's door is still entered for every request.
 */
#include "api/api-priv.h"

/* Scopes kept at once (every owner's, and one per agent token that lists): past this, all go. */
#define CACHE_ENTRIES_MAX 64

struct _CarrelApiCache {
    GMutex lock;        /* workers of the quick pool look up and fill it at once */
    guint64 generation; /* of every text in texts */
    GHashTable *texts;  /* key -> GBytes */
};

CarrelApiCache *
carrel_api_cache_new(void)
{
    CarrelApiCache *cache = g_new0(CarrelApiCache, 1);

    g_mutex_init(&cache->lock);
    cache->texts =
        g_hash_table_new_full(g_str_hash, g_str_equal, g_free, (GDestroyNotify)g_bytes_unref);
    return cache;
}

void
carrel_api_cache_free(CarrelApiCache *cache)
{
    if (!cache)
        return;
    g_hash_table_unref(cache->texts);
    g_mutex_clear(&cache->lock);
    g_free(cache);
}

/* Moves the cache to generation when that is newer, dropping what older ones made. */
static void
advance(CarrelApiCache *cache, guint64 generation)
{
    if (generation <= cache->generation)
        return;
    g_hash_table_remove_all(cache->texts);
    cache->generation = generation;
}

GBytes *
carrel_api_cache_get(CarrelApiCache *cache, const char *key, guint64 generation)
{
    g_autoptr(GMutexLocker) locker G_GNUC_UNUSED = g_mutex_locker_new(&cache->lock);
    GBytes *text;

    advance(cache, generation);
    /* A request that read an older generation than the cache's finds nothing. */
    if (generation != cache->generation || !(text = g_hash_table_lookup(cache->texts, key)))
        return NULL;
    return g_bytes_ref(text);
}

void
carrel_api_cache_put(CarrelApiCache *cache, const char *key, guint64 generation, GBytes *text)
{
    g_autoptr(GMutexLocker) locker G_GNUC_UNUSED = g_mutex_locker_new(&cache->lock);

    advance(cache, generation);
    /* Made from a generation that is gone already: nobody may be served it. */
    if (generation != cache->generation)
        return;
    if (g_hash_table_size(cache->texts) >= CACHE_ENTRIES_MAX)
        g_hash_table_remove_all(cache->texts);
    g_hash_table_replace(cache->texts, g_strdup(key), g_bytes_ref(text));
}
