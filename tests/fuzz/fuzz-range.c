/*
 * libFuzzer harness for the HTTP Range header a recording's segment download parses (a client's
 * text, untrusted): the first 8 bytes are the file's size, the rest the header. A range taken is
 * always inside the file and in order.
 */
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "api/api-priv.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    guint64 file = 0, first = 0, last = 0;
    g_autofree char *header = NULL;

    if (size < sizeof(file))
        return 0;
    memcpy(&file, data, sizeof(file));
    header = g_strndup((const char *)data + sizeof(file), size - sizeof(file));
    if (carrel_api_parse_range(header, file, &first, &last) && (first > last || last >= file))
        __builtin_trap();
    return 0;
}
