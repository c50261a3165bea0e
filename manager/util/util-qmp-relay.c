/*
 * The monitor relay's decisions (for carrel-qemu), pure: no I/O.
 *
 * Why: right after QEMU starts, libvirt 9 reads the guest CPU's features with one qom-get per
 * boolean property of the CPU object (~400 on x86), and QEMU 7.2 reads its monitor one byte per
 * read(2). That was ~600 ms of every start, restore, revert and fork of `tiny` here (the
 * monitor thread alone ~530 ms of CPU). The answers depend only on the QEMU binary and its CPU,
 * machine and accelerator arguments: learned once from QEMU, they are given from then on by the
 * relay, and QEMU sees only the rest.
 *
 * Only exactly the lines libvirt writes are recognised, and only exactly QEMU's own replies
 * are learned (fixed strings, no JSON parser on what a guest-controlled QEMU writes); anything
 * else passes through unchanged. An answer goes to libvirt only where QEMU's stream is between
 * two lines, so it never cuts into an event.
 */
#include <stdlib.h>
#include <string.h>

#include "util/util.h"

#define QOM_GET_HEAD                                                                               \
    "{\"execute\":\"qom-get\",\"arguments\":{\"path\":\"/machine/unattached/device[0]\","          \
    "\"property\":\""
#define QOM_GET_MID "\"},\"id\":\""
#define QOM_GET_TAIL "\"}"
#define REPLY_TRUE "{\"return\": true, \"id\": \""
#define REPLY_FALSE "{\"return\": false, \"id\": \""
#define REPLY_TAIL "\"}"
/* Longer lines are not libvirt's qom-gets nor their replies; past it a stream is passed on. */
#define LINE_MAX_BYTES 4096

struct _CarrelQmpRelay {
    GHashTable *known;   /* property -> GINT_TO_POINTER(1 + value), what QEMU answered */
    GHashTable *learned; /* the same, learned here; NULL once saved or when nothing is */
    GString *client_line;
    GString *qemu_line;
    GString *to_qemu;
    GString *to_client;
    GString *held;    /* answers waiting for QEMU's stream to reach a line's end */
    char *pending_id; /* a forwarded CPU qom-get */
    char *pending_property;
    gboolean qemu_mid_line; /* the last byte passed on from QEMU was not a newline */
    gboolean client_raw;    /* a line too long: libvirt's bytes pass unread from then on */
    gboolean in_storm;      /* libvirt is reading the CPU's properties */
    gboolean storm_over;    /* and went on to another command since */
    guint answered;
};

static gboolean
is_token(const char *s, gsize len)
{
    if (len == 0 || len > 128)
        return FALSE;
    for (gsize i = 0; i < len; i++)
        if (!g_ascii_isalnum(s[i]) && s[i] != '-' && s[i] != '_' && s[i] != '.')
            return FALSE;
    return TRUE;
}

/* libvirt's qom-get of the CPU's property: *property and *id point into line. */
static gboolean
parse_qom_get(const char *line, gsize len, const char **property, gsize *property_len,
              const char **id, gsize *id_len)
{
    const char *p = line, *end = line + len, *mid;

    if (len > 0 && line[len - 1] == '\r')
        end--;
    if ((gsize)(end - p) < strlen(QOM_GET_HEAD) || strncmp(p, QOM_GET_HEAD, strlen(QOM_GET_HEAD)))
        return FALSE;
    p += strlen(QOM_GET_HEAD);
    mid = g_strstr_len(p, end - p, QOM_GET_MID);
    if (!mid || !is_token(p, mid - p))
        return FALSE;
    *property = p;
    *property_len = mid - p;
    p = mid + strlen(QOM_GET_MID);
    if ((gsize)(end - p) <= strlen(QOM_GET_TAIL) ||
        strncmp(end - strlen(QOM_GET_TAIL), QOM_GET_TAIL, strlen(QOM_GET_TAIL)))
        return FALSE;
    *id = p;
    *id_len = (end - strlen(QOM_GET_TAIL)) - p;
    return is_token(*id, *id_len);
}

CarrelQmpRelay *
carrel_qmp_relay_new(GHashTable *known)
{
    CarrelQmpRelay *r = g_new0(CarrelQmpRelay, 1);

    r->known = known ? g_hash_table_ref(known) : carrel_qmp_cache_new();
    /* What is known already is not learned again: a cache is written once. */
    r->learned = g_hash_table_size(r->known) ? NULL : carrel_qmp_cache_new();
    r->client_line = g_string_new(NULL);
    r->qemu_line = g_string_new(NULL);
    r->to_qemu = g_string_new(NULL);
    r->to_client = g_string_new(NULL);
    r->held = g_string_new(NULL);
    return r;
}

void
carrel_qmp_relay_free(CarrelQmpRelay *r)
{
    if (!r)
        return;
    g_hash_table_unref(r->known);
    if (r->learned)
        g_hash_table_unref(r->learned);
    g_string_free(r->client_line, TRUE);
    g_string_free(r->qemu_line, TRUE);
    g_string_free(r->to_qemu, TRUE);
    g_string_free(r->to_client, TRUE);
    g_string_free(r->held, TRUE);
    g_free(r->pending_id);
    g_free(r->pending_property);
    g_free(r);
}

GHashTable *
carrel_qmp_cache_new(void)
{
    return g_hash_table_new_full(g_str_hash, g_str_equal, g_free, NULL);
}

static void
answer(CarrelQmpRelay *r, gboolean value, const char *id, gsize id_len)
{
    GString *out = r->qemu_mid_line ? r->held : r->to_client;

    g_string_append(out, value ? REPLY_TRUE : REPLY_FALSE);
    g_string_append_len(out, id, id_len);
    g_string_append(out, REPLY_TAIL "\r\n");
    r->answered++;
}

static void
client_line(CarrelQmpRelay *r, const char *line, gsize len)
{
    const char *property, *id;
    gsize property_len, id_len;
    gpointer value;

    if (!parse_qom_get(line, len, &property, &property_len, &id, &id_len)) {
        /* The first other command after the CPU's ends what there is to learn. */
        if (r->in_storm)
            r->storm_over = TRUE;
        r->in_storm = FALSE;
        g_string_append_len(r->to_qemu, line, len);
        g_string_append_c(r->to_qemu, '\n');
        return;
    }
    {
        g_autofree char *name = g_strndup(property, property_len);

        r->in_storm = TRUE;
        value = g_hash_table_lookup(r->known, name);
        if (value && !r->pending_id) {
            answer(r, GPOINTER_TO_INT(value) - 1, id, id_len);
            return;
        }
        g_free(r->pending_id);
        g_free(r->pending_property);
        r->pending_id = g_strndup(id, id_len);
        r->pending_property = g_steal_pointer(&name);
    }
    g_string_append_len(r->to_qemu, line, len);
    g_string_append_c(r->to_qemu, '\n');
}

void
carrel_qmp_relay_client_input(CarrelQmpRelay *r, const char *data, gsize len)
{
    if (r->client_raw) {
        g_string_append_len(r->to_qemu, data, len);
        return;
    }
    for (gsize i = 0; i < len; i++) {
        if (data[i] != '\n') {
            g_string_append_c(r->client_line, data[i]);
            continue;
        }
        client_line(r, r->client_line->str, r->client_line->len);
        g_string_truncate(r->client_line, 0);
    }
    if (r->client_line->len > LINE_MAX_BYTES) {
        r->client_raw = TRUE;
        g_string_append_len(r->to_qemu, r->client_line->str, r->client_line->len);
        g_string_truncate(r->client_line, 0);
    }
}

/* QEMU's reply to the forwarded qom-get, exactly as QEMU writes it. */
static void
qemu_line(CarrelQmpRelay *r, const char *line, gsize len)
{
    gsize id_len = r->pending_id ? strlen(r->pending_id) : 0;
    gboolean value;
    const char *head;

    if (len > 0 && line[len - 1] == '\r')
        len--;
    if (!r->pending_id)
        return;
    if (len > strlen(REPLY_TRUE) && !strncmp(line, REPLY_TRUE, strlen(REPLY_TRUE)))
        value = TRUE, head = REPLY_TRUE;
    else if (len > strlen(REPLY_FALSE) && !strncmp(line, REPLY_FALSE, strlen(REPLY_FALSE)))
        value = FALSE, head = REPLY_FALSE;
    else {
        /* An error, or a non-boolean: the reply to it, unless an event came first. */
        if (g_strstr_len(line, len, r->pending_id) && !g_strstr_len(line, len, "\"event\""))
            g_clear_pointer(&r->pending_id, g_free);
        return;
    }
    if (len != strlen(head) + id_len + strlen(REPLY_TAIL) ||
        strncmp(line + strlen(head), r->pending_id, id_len) ||
        strncmp(line + strlen(head) + id_len, REPLY_TAIL, strlen(REPLY_TAIL)))
        return;
    if (r->learned)
        g_hash_table_insert(r->learned, g_strdup(r->pending_property), GINT_TO_POINTER(1 + value));
    g_clear_pointer(&r->pending_id, g_free);
}

void
carrel_qmp_relay_qemu_input(CarrelQmpRelay *r, const char *data, gsize len)
{
    for (gsize i = 0; i < len; i++) {
        g_string_append_c(r->to_client, data[i]);
        r->qemu_mid_line = data[i] != '\n';
        if (!r->qemu_mid_line && r->held->len) {
            g_string_append_len(r->to_client, r->held->str, r->held->len);
            g_string_truncate(r->held, 0);
        }
        if (!r->pending_id)
            continue;
        if (data[i] != '\n') {
            if (r->qemu_line->len <= LINE_MAX_BYTES)
                g_string_append_c(r->qemu_line, data[i]);
            continue;
        }
        qemu_line(r, r->qemu_line->str, r->qemu_line->len);
        g_string_truncate(r->qemu_line, 0);
    }
}

GString *
carrel_qmp_relay_to_qemu(CarrelQmpRelay *r)
{
    return r->to_qemu;
}

GString *
carrel_qmp_relay_to_client(CarrelQmpRelay *r)
{
    return r->to_client;
}

guint
carrel_qmp_relay_answered(CarrelQmpRelay *r)
{
    return r->answered;
}

gboolean
carrel_qmp_relay_storm_over(CarrelQmpRelay *r)
{
    return r->storm_over;
}

GHashTable *
carrel_qmp_relay_take_learned(CarrelQmpRelay *r)
{
    if (!r->learned || !r->storm_over || r->pending_id || g_hash_table_size(r->learned) == 0)
        return NULL;
    return g_steal_pointer(&r->learned);
}

static int
compare_names(const void *a, const void *b)
{
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

char *
carrel_qmp_cache_format(GHashTable *cache)
{
    guint n = 0;
    g_autofree const char **names = (const char **)g_hash_table_get_keys_as_array(cache, &n);
    GString *out = g_string_new(NULL);

    qsort(names, n, sizeof(*names), compare_names);
    for (guint i = 0; i < n; i++) {
        const char *name = names[i];

        g_string_append_printf(out, "%s %d\n", name,
                               GPOINTER_TO_INT(g_hash_table_lookup(cache, name)) - 1);
    }
    return g_string_free(out, FALSE);
}

GHashTable *
carrel_qmp_cache_parse(const char *text, GError **error)
{
    g_autoptr(GHashTable) cache = carrel_qmp_cache_new();
    g_auto(GStrv) lines = g_strsplit(text, "\n", -1);

    for (guint i = 0; lines[i]; i++) {
        const char *line = lines[i], *space = strchr(line, ' ');

        if (!*line && !lines[i + 1])
            break;
        if (!space || !is_token(line, space - line) ||
            (strcmp(space + 1, "0") && strcmp(space + 1, "1"))) {
            g_set_error(error, CARREL_ERROR, CARREL_ERROR_INVALID_ARG,
                        "line %u is not 'PROPERTY 0|1'", i + 1);
            return NULL;
        }
        g_hash_table_insert(cache, g_strndup(line, space - line),
                            GINT_TO_POINTER(1 + (space[1] == '1')));
    }
    return g_steal_pointer(&cache);
}
