/*
 * libFuzzer harness for the computer action parser (untrusted client input): request bodies in
 * every supported format through carrel_conf_parse_json, carrel_action_batch_from_json and the
 * bounds check with scaling.
 * Built with -Dfuzz=true and clang (see tests/fuzz/meson.build), then:
 *   ./build-fuzz/tests/fuzz/fuzz-action -max_len=65536 CORPUS_DIR
 */
#include <stddef.h>
#include <stdint.h>

#include "conf/conf.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    g_autoptr(JsonNode) node = carrel_conf_parse_json((const char *)data, size, NULL);
    g_autoptr(CarrelActionBatch) batch = NULL;

    if (!node)
        return 0;
    batch = carrel_action_batch_from_json(node, NULL);
    if (batch)
        carrel_action_batch_check_bounds(batch, 1280, 800, NULL);
    return 0;
}
