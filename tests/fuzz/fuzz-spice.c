/*
 * libFuzzer harness for the console proxy's SPICE parsing (a viewer's bytes, untrusted): the
 * link parser, and the client stream filter fed in chunks whose sizes come from the input, with
 * the view-only decision flipping as the input says.
 */
#include <stddef.h>
#include <stdint.h>

#include "api/api-console-priv.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static gboolean
flip(gpointer user_data)
{
    guint *n = user_data;

    return (++*n & 1) != 0;
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    CarrelSpiceLink link;
    g_autoptr(GError) error = NULL;
    g_autoptr(GByteArray) out = g_byte_array_new();
    guint asked = 0;
    g_autoptr(CarrelSpiceFilter) filter = carrel_spice_filter_new(flip, &asked);
    gssize n = carrel_spice_parse_link(data, size, &link, &error);
    gsize at = 0;

    /* An error exactly when it says -1; a size never beyond the input. */
    if ((n < 0) != (error != NULL) || n > (gssize)size)
        __builtin_trap();
    g_clear_error(&error);
    while (at < size) {
        gsize chunk = 1 + data[at] % 64;
        chunk = MIN(chunk, size - at);
        if (!carrel_spice_filter_feed(filter, data + at, chunk, out, &error))
            break;
        at += chunk;
    }
    /* The filter only ever removes bytes. */
    if (out->len > size)
        __builtin_trap();
    return 0;
}
