/*
 * libFuzzer harness for carrel-guest fs replies (untrusted guest output of the /fs routes): the
 * input as a listing and as one entry, and as a client path.
 * Built with -Dfuzz=true and clang (see tests/fuzz/meson.build), then:
 *   ./build-fuzz/tests/fuzz/fuzz-fs-replies -max_len=65536 CORPUS_DIR
 */
#include <stddef.h>
#include <stdint.h>

#include "conf/conf.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    g_autoptr(JsonNode) node = carrel_conf_parse_json((const char *)data, size, NULL);
    g_autofree char *path = g_strndup((const char *)data, size);
    g_autofree char *escaped = carrel_fs_escape_name(data, size);

    (void)carrel_fs_check_path(path, NULL);
    if (node) {
        json_node_unref(carrel_fs_listing_from_guest(node, "/fuzz", NULL));
        json_node_unref(carrel_fs_entry_from_guest(node, 0, NULL));
    }
    return escaped ? 0 : 1;
}
