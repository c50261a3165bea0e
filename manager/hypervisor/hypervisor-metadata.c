/*
 * Reading carrel's metadata back out of domain XML. libvirt hands it back as text that anyone
 * with access to libvirt may have written, so it is parsed as untrusted input: bounded, with a
 * real parser, and only an id of the expected shape is believed.
 */
#include <string.h>

#define CARREL_HYPERVISOR_PRIV_H_ALLOW
#include "hypervisor/hypervisor-priv.h"

/* Longest text kept from one element; longer names or ids are not ours anyway. */
#define SCAN_MAX_TEXT 1024

typedef enum {
    COLLECT_NONE,
    COLLECT_NAME,
    COLLECT_ID,
    COLLECT_INSTANCE,
} ScanCollect;

typedef struct {
    guint depth;          /* of the element being read; the root is 1 */
    gboolean root_domain; /* the root is <domain> */
    guint session_depth;  /* depth of our <session>, 0 when outside */
    ScanCollect collect;
    GString *text;
    char *name;
    char *session_id;
    char *instance_id;
} ScanState;

static const char *
local_name(const char *element)
{
    const char *colon = strrchr(element, ':');

    return colon ? colon + 1 : element;
}

static gboolean
declares_session_ns(const char **attr_names, const char **attr_values)
{
    for (guint i = 0; attr_names[i]; i++) {
        gboolean is_xmlns =
            g_str_equal(attr_names[i], "xmlns") || g_str_has_prefix(attr_names[i], "xmlns:");
        if (is_xmlns && g_str_equal(attr_values[i], CARREL_XMLNS_SESSION))
            return TRUE;
    }
    return FALSE;
}

static void
on_start(GMarkupParseContext *ctx, const char *element, const char **attr_names,
         const char **attr_values, gpointer user_data, GError **error)
{
    ScanState *st = user_data;
    const char *local = local_name(element);

    st->depth++;
    if (st->depth == 1)
        st->root_domain = g_str_equal(element, "domain");
    if (st->depth == 2 && st->root_domain && g_str_equal(element, "name") && !st->name)
        st->collect = COLLECT_NAME;
    /*
     * Ours: a <session> declaring our namespace (inside a whole domain), or a root <session>
     * (what virDomainGetMetadata returns: libvirt chose it by our namespace, then dropped it).
     */
    if (!st->session_depth && !st->session_id && g_str_equal(local, "session") &&
        (st->depth == 1 || declares_session_ns(attr_names, attr_values)))
        st->session_depth = st->depth;
    if (st->session_depth && st->depth == st->session_depth + 1 && g_str_equal(local, "id") &&
        !st->session_id)
        st->collect = COLLECT_ID;
    if (st->session_depth && st->depth == st->session_depth + 1 && g_str_equal(local, "instance") &&
        !st->instance_id)
        st->collect = COLLECT_INSTANCE;
    if (st->collect != COLLECT_NONE)
        g_string_truncate(st->text, 0);
}

static void
on_end(GMarkupParseContext *ctx, const char *element, gpointer user_data, GError **error)
{
    ScanState *st = user_data;

    if (st->collect == COLLECT_NAME && st->depth == 2)
        st->name = g_strdup(st->text->str);
    if (st->collect == COLLECT_ID && st->depth == st->session_depth + 1) {
        if (carrel_hypervisor_is_session_id(st->text->str))
            st->session_id = g_strdup(st->text->str);
    }
    if (st->collect == COLLECT_INSTANCE && st->depth == st->session_depth + 1) {
        if (carrel_hypervisor_is_carrel_id(st->text->str, "i-"))
            st->instance_id = g_strdup(st->text->str);
    }
    if (st->depth == st->session_depth)
        st->session_depth = 0;
    st->collect = COLLECT_NONE;
    st->depth--;
}

static void
on_text(GMarkupParseContext *ctx, const char *text, gsize len, gpointer user_data, GError **error)
{
    ScanState *st = user_data;

    /* Bounded: a hostile element cannot make us keep more than SCAN_MAX_TEXT bytes. */
    if (st->collect != COLLECT_NONE && st->text->len + len <= SCAN_MAX_TEXT)
        g_string_append_len(st->text, text, (gssize)len);
}

static const GMarkupParser scan_parser = {
    .start_element = on_start,
    .end_element = on_end,
    .text = on_text,
};

gboolean
carrel_hypervisor_scan_xml(const char *xml, char **ret_name, char **ret_session_id,
                           char **ret_instance_id, GError **error)
{
    g_autoptr(GMarkupParseContext) ctx = NULL;
    g_autoptr(GError) local = NULL;
    g_autoptr(GString) text = g_string_new(NULL);
    ScanState st = {.text = text};
    gsize len = xml ? strnlen(xml, CARREL_HYPERVISOR_SCAN_MAX_BYTES + 1) : 0;
    gboolean ok;

    if (len == 0 || len > CARREL_HYPERVISOR_SCAN_MAX_BYTES) {
        g_set_error(error, CARREL_ERROR, CARREL_ERROR_INVALID_ARG,
                    "domain xml is empty or longer than %d bytes",
                    CARREL_HYPERVISOR_SCAN_MAX_BYTES);
        return FALSE;
    }
    ctx = g_markup_parse_context_new(&scan_parser, 0, &st, NULL);
    ok = g_markup_parse_context_parse(ctx, xml, (gssize)len, &local) &&
         g_markup_parse_context_end_parse(ctx, &local);
    if (!ok) {
        g_set_error(error, CARREL_ERROR, CARREL_ERROR_INVALID_ARG, "malformed domain xml: %s",
                    local->message);
        g_free(st.name);
        g_free(st.session_id);
        g_free(st.instance_id);
        return FALSE;
    }
    if (ret_name)
        *ret_name = g_steal_pointer(&st.name);
    if (ret_session_id)
        *ret_session_id = g_steal_pointer(&st.session_id);
    if (ret_instance_id)
        *ret_instance_id = g_steal_pointer(&st.instance_id);
    g_free(st.name);
    g_free(st.session_id);
    g_free(st.instance_id);
    return TRUE;
}

/* The first disk's source file: <domain><devices><disk device="disk"><source file=...>. */
typedef struct {
    guint depth;
    gboolean in_disk; /* inside the first <disk device="disk"> */
    gboolean done;
    char *source;
} DiskScan;

static void
on_disk_start(GMarkupParseContext *ctx, const char *element, const char **attr_names,
              const char **attr_values, gpointer user_data, GError **error)
{
    DiskScan *st = user_data;
    const char *device = NULL, *file = NULL;

    st->depth++;
    if (st->done)
        return;
    for (guint i = 0; attr_names[i]; i++) {
        if (g_str_equal(attr_names[i], "device"))
            device = attr_values[i];
        else if (g_str_equal(attr_names[i], "file"))
            file = attr_values[i];
    }
    if (st->depth == 3 && g_str_equal(element, "disk") && g_strcmp0(device, "disk") == 0)
        st->in_disk = TRUE;
    else if (st->depth == 4 && st->in_disk && g_str_equal(element, "source") && file &&
             g_path_is_absolute(file) && strlen(file) < SCAN_MAX_TEXT) {
        st->source = g_strdup(file);
        st->done = TRUE;
    }
}

static void
on_disk_end(GMarkupParseContext *ctx, const char *element, gpointer user_data, GError **error)
{
    DiskScan *st = user_data;

    if (st->depth == 3 && st->in_disk)
        st->done = TRUE; /* the first disk had no file source */
    st->depth--;
}

static const GMarkupParser disk_parser = {
    .start_element = on_disk_start,
    .end_element = on_disk_end,
};

char *
carrel_hypervisor_scan_disk_source(const char *xml)
{
    g_autoptr(GMarkupParseContext) ctx = NULL;
    DiskScan st = {0};
    gsize len = xml ? strnlen(xml, CARREL_HYPERVISOR_SCAN_MAX_BYTES + 1) : 0;
    gboolean ok;

    if (len == 0 || len > CARREL_HYPERVISOR_SCAN_MAX_BYTES)
        return NULL;
    ctx = g_markup_parse_context_new(&disk_parser, 0, &st, NULL);
    ok = g_markup_parse_context_parse(ctx, xml, (gssize)len, NULL) &&
         g_markup_parse_context_end_parse(ctx, NULL);
    if (!ok)
        g_clear_pointer(&st.source, g_free);
    return st.source;
}
