/*
 * libFuzzer harness for carrel-guest a11y replies (untrusted guest output of the accessibility
 * route and click_element): the input as a tree under a few requests, as one element, and as an
 * element id.
 * Built with -Dfuzz=true and clang (see tests/fuzz/meson.build), then:
 *   ./build-fuzz/tests/fuzz/fuzz-a11y-replies -max_len=65536 CORPUS_DIR
 */
#include <stddef.h>
#include <stdint.h>

#include "conf/conf.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    g_autoptr(JsonNode) node = carrel_a11y_reply_parse((const char *)data, size, NULL);
    g_autofree char *id = g_strndup((const char *)data, size);
    CarrelA11yRequest deep = {.depth = CARREL_A11Y_MAX_DEPTH, .max_nodes = CARREL_A11Y_MAX_NODES};
    CarrelA11yRequest small = {.depth = 2, .max_nodes = 3, .model_width = 7, .model_height = 5};

    (void)carrel_a11y_check_id(id, NULL);
    if (node) {
        g_autoptr(JsonNode) one = carrel_a11y_node_from_guest(node, "0.1", NULL);
        guint x, y;

        json_node_unref(carrel_a11y_tree_from_guest(node, &deep, 0, 0, NULL));
        json_node_unref(carrel_a11y_tree_from_guest(node, &small, 1024, 768, NULL));
        if (one)
            (void)carrel_a11y_node_centre(one, 1024, 768, &x, &y, NULL);
    }
    return 0;
}
