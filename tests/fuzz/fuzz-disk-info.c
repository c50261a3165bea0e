/*
 * libFuzzer harness for carrel_disk_info_parse (qemu-img info JSON, untrusted).
 * Not built by default. By hand, from the source root:
 *   clang -g -O1 -fsanitize=fuzzer,address,undefined -Imanager -I. \
 *     tests/fuzz/fuzz-disk-info.c manager/disk/disk-info.c manager/util/util-*.c \
 *     $(pkg-config --cflags --libs json-glib-1.0 gio-unix-2.0) -o fuzz-disk-info
 *   ./fuzz-disk-info -max_len=4096 CORPUS_DIR
 */
#include <stddef.h>
#include <stdint.h>

#include "disk/disk.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    g_autoptr(GError) error = NULL;
    g_autoptr(CarrelDiskInfo) info = carrel_disk_info_parse((const char *)data, size, &error);

    /* Exactly one of a result and an error, always. */
    if ((info == NULL) == (error == NULL))
        __builtin_trap();
    return 0;
}
