/*
 * libFuzzer harness for carrel-guest's parsers of guest text: /proc environ and cmdline blocks,
 * display names, URLs, the clipping/conversion of window titles and clipboard bytes, and the check
 * of typed text with its keysyms.
 * Not built by default. By hand, from the source root:
 *   clang -g -O1 -fsanitize=fuzzer,address,undefined -Iguest-tools \
 *     guest-tools/tests/fuzz-guest-text.c guest-tools/guest-text.c guest-tools/guest-proc.c \
 *     guest-tools/guest-json.c $(pkg-config --cflags --libs json-glib-1.0) -o fuzz-guest-text
 *   ./fuzz-guest-text -max_len=4096 CORPUS_DIR
 */
#include <stddef.h>
#include <stdint.h>

#include "guest.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void
check_utf8(const char *text, gsize max_chars)
{
    if (!g_utf8_validate(text, -1, NULL) || g_utf8_strlen(text, -1) > (glong)max_chars)
        __builtin_trap();
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const char *block = (const char *)data;
    g_autofree char *text = g_strndup(block, size);
    g_autofree char *display = carrel_guest_environ_lookup(block, size, "DISPLAY");
    g_auto(GStrv) argv = carrel_guest_split_nul(block, size, 256);
    g_autofree char *auth = carrel_guest_server_auth_from_argv((const char *const *)argv, 0);
    g_autofree char *clipped = carrel_guest_text_clip(block, (gssize)size, 512);
    g_autofree char *latin1 = carrel_guest_text_from_latin1(block, size);
    g_autofree char *back = NULL;
    gsize back_len = 0;
    gsize cut = carrel_guest_text_utf8_boundary(block, size, size / 2);
    int number = 0;

    if (display && strlen(display) > CARREL_GUEST_LIMIT_ENV_VALUE)
        __builtin_trap();
    if (g_strv_length(argv) > 256 || cut > size)
        __builtin_trap();
    check_utf8(clipped, 512);
    check_utf8(latin1, size);
    /* Latin-1 survives the round trip through UTF-8, up to the first NUL. */
    back = carrel_guest_text_to_latin1(latin1, &back_len);
    if (back_len != strnlen(block, size) || memcmp(back, block, back_len) != 0)
        __builtin_trap();
    if (carrel_guest_display_number(text, &number) && (number < 0 || number > 65535))
        __builtin_trap();
    carrel_guest_is_url(text);
    /* Accepted typed text is valid UTF-8 whose every character has a keysym. */
    if (carrel_guest_type_check(block, size, NULL)) {
        if (!g_utf8_validate(block, (gssize)size, NULL))
            __builtin_trap();
        for (const char *p = block; p < block + size; p = g_utf8_next_char(p)) {
            if (!carrel_guest_type_keysym(g_utf8_get_char(p)))
                __builtin_trap();
        }
    }
    return 0;
}
