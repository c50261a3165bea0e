#include <string.h>

#define CARREL_ARCHIVE_PRIV_H_ALLOW
#include "archive/archive-priv.h"

static const char *const type_names[] = {"file", "dir", "symlink", "hardlink", "other"};
G_STATIC_ASSERT(G_N_ELEMENTS(type_names) == CARREL_ARCHIVE_TYPE_LAST);

const char *
carrel_archive_type_to_string(CarrelArchiveType type)
{
    return carrel_util_enum_to_string(type_names, CARREL_ARCHIVE_TYPE_LAST, type);
}

CarrelArchiveType
carrel_archive_type_from_string(const char *name)
{
    return carrel_util_enum_from_string(type_names, CARREL_ARCHIVE_TYPE_LAST, name);
}

void
carrel_archive_entry_free(CarrelArchiveEntry *entry)
{
    if (!entry)
        return;
    g_free(entry->guest_path);
    g_free(entry->path);
    g_free(entry->sha256);
    g_free(entry->link_target);
    g_free(entry->skipped);
    g_free(entry);
}

char *
carrel_archive_escape(const char *text)
{
    GString *out = g_string_new(NULL);
    const char *p = text ? text : "";
    const char *end = p + strnlen(p, CARREL_LIMIT_GUEST_PATH);

    while (p < end) {
        guchar c = (guchar)*p;
        gunichar ch;

        if (c >= 0x20 && c < 0x7f) {
            if (c == '\\')
                g_string_append_c(out, '\\');
            g_string_append_c(out, (char)c);
            p++;
            continue;
        }
        /* Multi-byte UTF-8 is kept when valid and not a C1 control character. */
        ch = c >= 0x80 ? g_utf8_get_char_validated(p, end - p) : (gunichar)-1;
        if (ch != (gunichar)-1 && ch != (gunichar)-2 && ch >= 0xa0) {
            const char *next = g_utf8_next_char(p);
            g_string_append_len(out, p, next - p);
            p = next;
            continue;
        }
        g_string_append_printf(out, "\\x%02x", c);
        p++;
    }
    if (*end)
        g_string_append(out, "...");
    return g_string_free(out, FALSE);
}

CarrelArchiveLimits
carrel_archive_limits_resolve(const CarrelArchiveLimits *limits)
{
    CarrelArchiveLimits out = {CARREL_ARCHIVE_DEFAULT_MAX_BYTES,
                               CARREL_ARCHIVE_DEFAULT_MAX_ENTRIES};

    if (limits && limits->max_bytes)
        out.max_bytes = limits->max_bytes;
    if (limits && limits->max_entries)
        out.max_entries = limits->max_entries;
    return out;
}

CarrelArchiveType
carrel_archive_entry_type(struct archive_entry *entry)
{
    if (archive_entry_hardlink(entry))
        return CARREL_ARCHIVE_TYPE_HARDLINK;
    switch (archive_entry_filetype(entry)) {
    case AE_IFREG:
        return CARREL_ARCHIVE_TYPE_FILE;
    case AE_IFDIR:
        return CARREL_ARCHIVE_TYPE_DIR;
    case AE_IFLNK:
        return CARREL_ARCHIVE_TYPE_SYMLINK;
    default:
        return CARREL_ARCHIVE_TYPE_OTHER;
    }
}

void
carrel_archive_set_limit_error(GError **error, const char *what, guint64 value)
{
    g_set_error(error, CARREL_ERROR, CARREL_ERROR_LIMIT,
                "archive exceeds the limit of %" G_GUINT64_FORMAT " %s", value, what);
}

gboolean
carrel_archive_admit(const CarrelArchiveLimits *limits, guint64 used_bytes, guint used_entries,
                     const char *guest_path, guint64 size, guint entries, GError **error)
{
    guint64 max_bytes =
        limits && limits->max_bytes ? limits->max_bytes : CARREL_ARCHIVE_DEFAULT_MAX_BYTES;
    guint max_entries =
        limits && limits->max_entries ? limits->max_entries : CARREL_ARCHIVE_DEFAULT_MAX_ENTRIES;
    guint64 left_bytes = used_bytes < max_bytes ? max_bytes - used_bytes : 0;
    guint left_entries = used_entries < max_entries ? max_entries - used_entries : 0;
    g_autofree char *clean = carrel_archive_escape(guest_path);

    if (size > left_bytes) {
        g_set_error(error, CARREL_ERROR, CARREL_ERROR_LIMIT,
                    "'%s' is %" G_GUINT64_FORMAT
                    " bytes in the guest, more than the %" G_GUINT64_FORMAT
                    " bytes left of the limit of %" G_GUINT64_FORMAT ": nothing of it was copied",
                    clean, size, left_bytes, max_bytes);
        return FALSE;
    }
    if (entries > left_entries) {
        g_set_error(error, CARREL_ERROR, CARREL_ERROR_LIMIT,
                    "'%s' holds %u entries in the guest, more than the %u left of the limit of %u: "
                    "nothing of it was copied",
                    clean, entries, left_entries, max_entries);
        return FALSE;
    }
    return TRUE;
}

void
carrel_archive_set_error(GError **error, struct archive *a, const char *context)
{
    const char *msg = archive_error_string(a);
    g_autofree char *clean = carrel_archive_escape(msg ? msg : "unknown libarchive error");

    g_set_error(error, CARREL_ERROR, CARREL_ERROR_FAILED, "%s: %s", context, clean);
}

/* A name rule broken: INVALID_ARG naming the member, escaped. */
static void
set_name_error(GError **error, const char *member, const char *why)
{
    g_autofree char *clean = carrel_archive_escape(member);

    g_set_error(error, CARREL_ERROR, CARREL_ERROR_INVALID_ARG, "invalid member name '%s': %s",
                clean, why);
}

/* Appends the segments of name to out ("." and empty dropped); FALSE with an error otherwise. */
static gboolean
append_segments(GString *out, const char *name, GError **error)
{
    const char *p = name;

    while (*p) {
        const char *slash = strchr(p, '/');
        gsize len = slash ? (gsize)(slash - p) : strlen(p);

        if (len == 2 && p[0] == '.' && p[1] == '.') {
            set_name_error(error, name, "it has a '..' segment");
            return FALSE;
        }
        if (len > CARREL_ARCHIVE_SEGMENT_MAX) {
            set_name_error(error, name, "a segment is over 255 bytes");
            return FALSE;
        }
        if (len > 0 && !(len == 1 && p[0] == '.')) {
            g_string_append_c(out, '/');
            g_string_append_len(out, p, len);
        }
        p += len;
        while (*p == '/')
            p++;
    }
    return TRUE;
}

/* Whole-name checks: present, bounded, valid UTF-8, no control characters. */
static gboolean
check_name(const char *name, GError **error)
{
    if (!name || !*name) {
        set_name_error(error, "", "it is empty");
        return FALSE;
    }
    if (strnlen(name, CARREL_LIMIT_GUEST_PATH + 1) > CARREL_LIMIT_GUEST_PATH) {
        set_name_error(error, name, "it is over 4096 bytes");
        return FALSE;
    }
    if (!g_utf8_validate(name, -1, NULL)) {
        set_name_error(error, name, "it is not valid UTF-8");
        return FALSE;
    }
    for (const char *p = name; *p; p++) {
        if ((guchar)*p < 0x20 || (guchar)*p == 0x7f) {
            set_name_error(error, name, "it has a control character");
            return FALSE;
        }
    }
    return TRUE;
}

char *
carrel_archive_guest_path(const char *prefix, const char *member, GError **error)
{
    g_autoptr(GString) out = g_string_new(NULL);

    if (!prefix || prefix[0] != '/') {
        set_name_error(error, prefix, "the guest prefix is not absolute");
        return NULL;
    }
    if (!check_name(prefix, error) || !append_segments(out, prefix, error)) {
        g_prefix_error(error, "guest prefix: ");
        return NULL;
    }
    if (!check_name(member, error) || !append_segments(out, member, error))
        return NULL;
    if (out->len == 0)
        g_string_append_c(out, '/');
    if (out->len > CARREL_LIMIT_GUEST_PATH) {
        set_name_error(error, member, "the guest path is over 4096 bytes");
        return NULL;
    }
    return g_string_free(g_steal_pointer(&out), FALSE);
}
