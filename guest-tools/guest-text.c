/* Text helpers: everything a guest says is untrusted, so it is clipped and made valid UTF-8. */
#include "guest.h"

gboolean
carrel_guest_display_number(const char *display, int *ret_number)
{
    const char *colon;
    char *end = NULL;
    guint64 number;

    if (!display || strlen(display) > CARREL_GUEST_LIMIT_DISPLAY_LEN)
        return FALSE;
    colon = strrchr(display, ':');
    if (!colon || !g_ascii_isdigit(colon[1]))
        return FALSE;
    number = g_ascii_strtoull(colon + 1, &end, 10);
    if (number > 65535 || !end)
        return FALSE;
    if (*end == '.') {
        if (!g_ascii_isdigit(end[1]))
            return FALSE;
        for (end++; g_ascii_isdigit(*end); end++)
            ;
    }
    if (*end != '\0')
        return FALSE;
    if (ret_number)
        *ret_number = (int)number;
    return TRUE;
}

gsize
carrel_guest_text_utf8_boundary(const char *text, gsize len, gsize max_bytes)
{
    gsize cut = MIN(len, max_bytes);

    if (cut == len)
        return len;
    /* Back off over continuation bytes (10xxxxxx) to the start of the cut character. */
    while (cut > 0 && ((guchar)text[cut] & 0xC0) == 0x80)
        cut--;
    return cut;
}

char *
carrel_guest_text_clip(const char *text, gssize len, gsize max_chars)
{
    g_autofree char *valid = NULL;
    gsize n_bytes;

    if (!text)
        return g_strdup("");
    n_bytes = len < 0 ? strlen(text) : (gsize)len;
    /* No more than 4 bytes per character: avoids validating megabytes to keep a few. */
    n_bytes = carrel_guest_text_utf8_boundary(text, n_bytes, max_chars * 4);
    valid = g_utf8_make_valid(text, (gssize)n_bytes);
    if (g_utf8_strlen(valid, -1) <= (glong)max_chars)
        return g_steal_pointer(&valid);
    return g_utf8_substring(valid, 0, (glong)max_chars);
}

char *
carrel_guest_text_from_latin1(const char *text, gsize len)
{
    GString *out = g_string_sized_new(len + 1);

    for (gsize i = 0; i < len && text[i] != '\0'; i++)
        g_string_append_unichar(out, (guchar)text[i]);
    return g_string_free(out, FALSE);
}

gboolean
carrel_guest_is_url(const char *target)
{
    const char *p = target;

    if (!target || !g_ascii_isalpha(*p))
        return FALSE;
    for (p++; g_ascii_isalnum(*p) || *p == '+' || *p == '-' || *p == '.'; p++)
        ;
    /* "C:" style single letters are not schemes worth opening; "file:" and "http:" are. */
    return *p == ':' && p - target >= 2;
}

char *
carrel_guest_text_to_latin1(const char *utf8, gsize *ret_len)
{
    GString *out = g_string_new(NULL);

    for (const char *p = utf8; *p; p = g_utf8_next_char(p)) {
        gunichar c = g_utf8_get_char(p);

        g_string_append_c(out, c <= 0xFF ? (char)c : '?');
    }
    *ret_len = out->len;
    return g_string_free(out, FALSE);
}

gboolean
carrel_guest_type_check(const char *text, gsize len, GError **error)
{
    const char *end = NULL;
    guint position = 1;

    if (len > CARREL_GUEST_LIMIT_TYPE_BYTES) {
        g_set_error(error, CARREL_GUEST_ERROR, CARREL_GUEST_ERROR_LIMIT,
                    "typed text is larger than %d bytes", CARREL_GUEST_LIMIT_TYPE_BYTES);
        return FALSE;
    }
    /* With an explicit length, a NUL byte counts as invalid. */
    if (!g_utf8_validate(text, (gssize)len, &end)) {
        g_set_error(error, CARREL_GUEST_ERROR, CARREL_GUEST_ERROR_INVALID_ARG,
                    "typed text is not valid UTF-8 (or holds NUL bytes) at byte %" G_GSIZE_FORMAT,
                    (gsize)(end - text));
        return FALSE;
    }
    for (const char *p = text; p < text + len; p = g_utf8_next_char(p), position++) {
        gunichar c = g_utf8_get_char(p);

        if (!carrel_guest_type_keysym(c)) {
            g_set_error(error, CARREL_GUEST_ERROR, CARREL_GUEST_ERROR_INVALID_ARG,
                        "character %u of the text (U+%04X) cannot be typed: a control character",
                        position, c);
            return FALSE;
        }
    }
    return TRUE;
}

gulong
carrel_guest_type_keysym(gunichar c)
{
    if (c == '\n')
        return 0xff0d; /* XK_Return */
    if (c == '\t')
        return 0xff09; /* XK_Tab */
    if (c > 0x10FFFF || g_unichar_type(c) == G_UNICODE_CONTROL)
        return 0;
    /* Latin-1 keysyms are their code points; X11's keysymdef.h maps all other Unicode. */
    if ((c >= 0x20 && c <= 0x7e) || (c >= 0xa0 && c <= 0xff))
        return c;
    return 0x01000000UL | c;
}
