/*
 * libFuzzer harness for the computer action parser (untrusted client input): request bodies in
 * every supported format through carrel_conf_parse_json, carrel_action_batch_from_json, the
 * bounds check with scaling, and the HID plan of every action that passed.
 * Built with -Dfuzz=true and clang (see tests/fuzz/meson.build), then:
 *   ./build-fuzz/tests/fuzz/fuzz-action -max_len=65536 CORPUS_DIR
 */
#include <stddef.h>
#include <stdint.h>

#include "hypervisor/hypervisor.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    g_autoptr(JsonNode) node = carrel_conf_parse_json((const char *)data, size, NULL);
    g_autoptr(CarrelActionBatch) batch = NULL;
    CarrelPoint pointer = {0, 0};

    if (!node)
        return 0;
    batch = carrel_action_batch_from_json(node, NULL);
    if (!batch || !carrel_action_batch_check_bounds(batch, 1280, 800, NULL))
        return 0;
    for (guint i = 0; i < batch->actions->len; i++) {
        const CarrelAction *action = g_ptr_array_index(batch->actions, i);
        g_autoptr(GPtrArray) plan = NULL;

        /* Text typed by the guest (guest_keysyms, clipboard) is no key plan of the hypervisor. */
        if (action->kind == CARREL_ACTION_TYPE && action->method != CARREL_TYPE_METHOD_KEYS)
            continue;
        plan = carrel_hypervisor_hid_plan(action, 1280, 800, pointer, &pointer, NULL);
        /* Every other action that passed the parser and the bounds check has a plan. */
        if (!plan)
            __builtin_trap();
    }
    return 0;
}
