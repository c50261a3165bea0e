#include <string.h>
#include <sys/random.h>

#include "util/util.h"

void
carrel_util_random_bytes(guint8 *buf, gsize len)
{
    gsize done = 0;

    while (done < len) {
        ssize_t n = getrandom(buf + done, len - done, 0);
        /* getrandom only fails before the pool is ready or on EINTR: both pass. */
        if (n > 0)
            done += (gsize)n;
    }
}

static char *
hex_random(gsize bytes)
{
    g_autofree guint8 *buf = g_malloc(bytes);
    GString *out = g_string_sized_new(bytes * 2);

    carrel_util_random_bytes(buf, bytes);
    for (gsize i = 0; i < bytes; i++)
        g_string_append_printf(out, "%02x", buf[i]);
    return g_string_free(out, FALSE);
}

char *
carrel_util_new_id(const char *prefix)
{
    g_autofree char *hex = hex_random(6);

    return g_strconcat(prefix, hex, NULL);
}

char *
carrel_util_new_token(void)
{
    return hex_random(32);
}

char *
carrel_util_sha256_string(const char *text)
{
    return g_compute_checksum_for_string(G_CHECKSUM_SHA256, text, -1);
}

char *
carrel_util_sha256_file(const char *path, GError **error)
{
    g_autoptr(GFile) file = g_file_new_for_path(path);
    g_autoptr(GFileInputStream) in = NULL;
    g_autoptr(GChecksum) sum = g_checksum_new(G_CHECKSUM_SHA256);
    g_autofree guint8 *buf = g_malloc(1024 * 1024);

    in = g_file_read(file, NULL, error);
    if (!in) {
        g_prefix_error(error, "hashing '%s': ", path);
        return NULL;
    }
    for (;;) {
        gssize n = g_input_stream_read(G_INPUT_STREAM(in), buf, 1024 * 1024, NULL, error);
        if (n < 0) {
            g_prefix_error(error, "hashing '%s': ", path);
            return NULL;
        }
        if (n == 0)
            break;
        g_checksum_update(sum, buf, n);
    }
    return g_strdup(g_checksum_get_string(sum));
}

gboolean
carrel_util_secure_equal(const char *a, const char *b)
{
    gsize la = strlen(a), lb = strlen(b);
    guint8 diff = la != lb;

    /* Walk the longer string completely so timing does not reveal the common prefix. */
    for (gsize i = 0; i < MAX(la, lb); i++) {
        guint8 ca = i < la ? (guint8)a[i] : 0;
        guint8 cb = i < lb ? (guint8)b[i] : 0;
        diff |= ca ^ cb;
    }
    return diff == 0;
}

gint64
carrel_util_now(void)
{
    return g_get_real_time() / G_USEC_PER_SEC;
}

char *
carrel_util_format_time(gint64 unix_seconds)
{
    g_autoptr(GDateTime) dt = g_date_time_new_from_unix_utc(unix_seconds);

    if (!dt)
        return g_strdup("1970-01-01T00:00:00Z");
    return g_date_time_format(dt, "%Y-%m-%dT%H:%M:%SZ");
}

gboolean
carrel_util_is_valid_name(const char *text)
{
    gsize len;

    if (!text)
        return FALSE;
    len = strlen(text);
    if (len == 0 || len > CARREL_LIMIT_NAME_LEN)
        return FALSE;
    if (!g_ascii_islower(text[0]) && !g_ascii_isdigit(text[0]))
        return FALSE;
    for (gsize i = 0; i < len; i++) {
        char c = text[i];
        if (!g_ascii_islower(c) && !g_ascii_isdigit(c) && c != '-' && c != '_' && c != '.')
            return FALSE;
    }
    return TRUE;
}

gboolean
carrel_util_is_clean_text(const char *text)
{
    if (!text || !g_utf8_validate(text, -1, NULL))
        return FALSE;
    for (const char *p = text; *p; p++) {
        if ((guchar)*p < 0x20 || *p == 0x7f)
            return FALSE;
    }
    return TRUE;
}

/* The code unit of \uXXXX at at (which points at the 'u'), or -1. */
static gint
unit_at(const char *at, gsize left)
{
    gint v = 0;

    if (left < 5 || at[0] != 'u')
        return -1;
    for (guint k = 1; k <= 4; k++) {
        if (!g_ascii_isxdigit(at[k]))
            return -1;
        v = v * 16 + g_ascii_xdigit_value(at[k]);
    }
    return v;
}

/*
 * How many characters the escape after a backslash spans (1, 5, or 11 for a surrogate pair), or
 * 0 when it is not one of JSON's: an unknown letter, \u without four hex digits, a surrogate
 * half without its other half.
 */
static gsize
escape_len(const char *at, gsize left)
{
    gint v, low;

    if (*at != 'u')
        return *at != '\0' && strchr("\"\\/bfnrt", *at) ? 1 : 0;
    v = unit_at(at, left);
    if (v < 0 || (v >= 0xdc00 && v <= 0xdfff))
        return 0;
    if (v < 0xd800 || v > 0xdbff)
        return 5;
    low = left > 6 && at[5] == '\\' ? unit_at(at + 6, left - 6) : -1;
    return low >= 0xdc00 && low <= 0xdfff ? 11 : 0;
}

/* A strict reading of JSON text (RFC 8259), bounded in depth: it only says whether json-glib
 * will parse the text without an error, since json-glib 1.6 leaks what it had built on many of
 * its errors (a value cut short in an array, a stray character after a member, ...). */
typedef struct {
    const char *p;
    const char *end;
    guint depth;
    guint max_depth;
} JsonScan;

static gboolean scan_value(JsonScan *s);

/* Whitespace, and NULs (strchr finds the terminator): callers may count it. */
static void
scan_space(JsonScan *s)
{
    while (s->p < s->end && strchr(" \t\n\r", *s->p))
        s->p++;
}

static gboolean
scan_word(JsonScan *s, const char *word)
{
    gsize n = strlen(word);

    if ((gsize)(s->end - s->p) < n || memcmp(s->p, word, n) != 0)
        return FALSE;
    s->p += n;
    return TRUE;
}

/* One or more digits. */
static gboolean
scan_digits(JsonScan *s)
{
    const char *start = s->p;

    while (s->p < s->end && g_ascii_isdigit(*s->p))
        s->p++;
    return s->p > start;
}

static gboolean
scan_number(JsonScan *s)
{
    if (s->p < s->end && *s->p == '-')
        s->p++;
    if (s->p < s->end && *s->p == '0')
        s->p++;
    else if (!scan_digits(s))
        return FALSE;
    if (s->p < s->end && *s->p == '.') {
        s->p++;
        if (!scan_digits(s))
            return FALSE;
    }
    if (s->p < s->end && (*s->p == 'e' || *s->p == 'E')) {
        s->p++;
        if (s->p < s->end && (*s->p == '+' || *s->p == '-'))
            s->p++;
        if (!scan_digits(s))
            return FALSE;
    }
    return TRUE;
}

/* A string from its opening quote: only JSON's escapes, no \u0000. */
static gboolean
scan_string(JsonScan *s)
{
    for (s->p++; s->p < s->end; s->p++) {
        gsize span;

        if (*s->p == '"') {
            s->p++;
            return TRUE;
        }
        if (*s->p != '\\')
            continue;
        s->p++;
        if (s->p >= s->end || (s->end - s->p > 4 && memcmp(s->p, "u0000", 5) == 0))
            return FALSE;
        span = escape_len(s->p, s->end - s->p);
        if (span == 0)
            return FALSE;
        s->p += span - 1;
    }
    return FALSE;
}

/* The members or items of an object or array, from its opening bracket. */
static gboolean
scan_container(JsonScan *s, char close)
{
    if (++s->depth > s->max_depth)
        return FALSE;
    s->p++;
    scan_space(s);
    if (s->p < s->end && *s->p == close) {
        s->p++;
        s->depth--;
        return TRUE;
    }
    for (;;) {
        if (close == '}') {
            if (s->p >= s->end || *s->p != '"' || !scan_string(s))
                return FALSE;
            scan_space(s);
            if (s->p >= s->end || *s->p != ':')
                return FALSE;
            s->p++;
        }
        if (!scan_value(s))
            return FALSE;
        if (s->p < s->end && *s->p == ',') {
            s->p++;
            scan_space(s);
            continue;
        }
        if (s->p < s->end && *s->p == close) {
            s->p++;
            s->depth--;
            return TRUE;
        }
        return FALSE;
    }
}

/* A value with the whitespace around it. */
static gboolean
scan_value(JsonScan *s)
{
    gboolean ok;

    scan_space(s);
    if (s->p >= s->end)
        return FALSE;
    switch (*s->p) {
    case '{':
        ok = scan_container(s, '}');
        break;
    case '[':
        ok = scan_container(s, ']');
        break;
    case '"':
        ok = scan_string(s);
        break;
    case 't':
        ok = scan_word(s, "true");
        break;
    case 'f':
        ok = scan_word(s, "false");
        break;
    case 'n':
        ok = scan_word(s, "null");
        break;
    default:
        ok = scan_number(s);
        break;
    }
    scan_space(s);
    return ok;
}

gboolean
carrel_util_json_structure_ok(const char *json, gsize len, guint max_depth)
{
    JsonScan s = {.p = json, .end = json + len, .max_depth = max_depth};

    /* No text at all is json-glib's "empty document", which it reports without a leak. */
    scan_space(&s);
    if (s.p == s.end)
        return TRUE;
    return scan_value(&s) && s.p == s.end;
}

const char *
carrel_util_enum_to_string(const char *const *names, int count, int value)
{
    return value >= 0 && value < count && names[value] ? names[value] : "unknown";
}

int
carrel_util_enum_from_string(const char *const *names, int count, const char *name)
{
    for (int i = 0; name && i < count; i++) {
        if (names[i] && g_str_equal(names[i], name))
            return i;
    }
    return count;
}

gboolean
carrel_util_check_guest_path(const char *path, GError **error)
{
    g_auto(GStrv) segments = NULL;

    if (!path || path[0] != '/' || strlen(path) > CARREL_LIMIT_GUEST_PATH ||
        !carrel_util_is_clean_text(path)) {
        g_set_error(error, CARREL_ERROR, CARREL_ERROR_INVALID_ARG,
                    "guest path must be absolute, at most %d bytes, without control characters",
                    CARREL_LIMIT_GUEST_PATH);
        return FALSE;
    }
    segments = g_strsplit(path, "/", -1);
    for (guint i = 0; segments[i]; i++) {
        if (g_str_equal(segments[i], ".") || g_str_equal(segments[i], "..")) {
            g_set_error(error, CARREL_ERROR, CARREL_ERROR_INVALID_ARG,
                        "guest path '%s' has a '%s' segment", path, segments[i]);
            return FALSE;
        }
    }
    return TRUE;
}

gboolean
carrel_util_is_base64(const char *text, gsize len)
{
    gsize pad = 0;

    if (len % 4 != 0)
        return FALSE;
    while (pad < 2 && pad < len && text[len - 1 - pad] == '=')
        pad++;
    for (gsize i = 0; i < len - pad; i++) {
        if (!g_ascii_isalnum(text[i]) && text[i] != '+' && text[i] != '/')
            return FALSE;
    }
    return TRUE;
}

char *
carrel_util_clean_text(const char *data, gsize len, gsize max)
{
    g_autofree char *valid = g_utf8_make_valid(data ? data : "", data ? (gssize)MIN(len, max) : 0);
    GString *out = g_string_sized_new(strlen(valid));

    for (const char *p = valid; *p; p++) {
        if (*p == '\n' && p[1])
            g_string_append(out, "; ");
        else if ((guchar)*p < 0x20 || *p == 0x7f)
            continue;
        else
            g_string_append_c(out, *p);
    }
    return g_string_free(out, FALSE);
}

gboolean
carrel_util_is_mac(const char *text)
{
    guint64 value = 0;

    if (!text || strlen(text) != 17)
        return FALSE;
    for (int i = 0; i < 17; i++) {
        char c = text[i];

        if (i % 3 == 2) {
            if (c != ':')
                return FALSE;
            continue;
        }
        if (!g_ascii_isdigit(c) && !(c >= 'a' && c <= 'f'))
            return FALSE;
        value = (value << 4) | (guint64)g_ascii_xdigit_value(c);
    }
    /* Bit 0 of the first octet marks multicast: a NIC address must be unicast. */
    return value != 0 && (value & (G_GUINT64_CONSTANT(1) << 40)) == 0;
}
