/*
 * libFuzzer harness for the parsers of API request bodies (untrusted client input): session
 * create, exec and template import requests, the typed requests of conf-requests.h and the
 * shell websocket's control messages (conf-proc.h), through
 * carrel_conf_parse_json, and the same bytes
 * as a template reference (NAME@VERSION, a URL path segment).
 * Built with -Dfuzz=true and clang (see tests/fuzz/meson.build), then:
 *   ./build-fuzz/tests/fuzz/fuzz-api-bodies -max_len=65536 CORPUS_DIR
 */
#include <stddef.h>
#include <stdint.h>

#include "conf/conf.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    g_autoptr(JsonNode) node = carrel_conf_parse_json((const char *)data, size, NULL);
    g_autofree char *text = g_strndup((const char *)data, size);
    g_autofree char *name = NULL;
    guint version = 0;

    carrel_template_ref_parse(text, &name, &version, NULL);
    if (node) {
        /* Parsed and freed: what matters is that no input crashes or leaks. */
        carrel_session_request_free(carrel_session_request_from_json(node, NULL));
        carrel_exec_request_free(carrel_exec_request_from_json(node, NULL));
        carrel_template_import_free(carrel_template_import_from_json(node, NULL));
        carrel_login_request_free(carrel_login_request_from_json(node, NULL));
        carrel_token_request_free(carrel_token_request_from_json(node, NULL));
        carrel_control_request_free(carrel_control_request_from_json(node, NULL));
        carrel_decision_request_free(carrel_decision_request_from_json(node, NULL));
        carrel_approval_ask_free(carrel_approval_ask_from_json(node, NULL));
        carrel_warm_request_free(carrel_warm_request_from_json(node, NULL));
        carrel_pool_request_free(carrel_pool_request_from_json(node, NULL));
        carrel_snapshot_request_free(carrel_snapshot_request_from_json(node, NULL));
        carrel_snapshot_request_free(carrel_revert_request_from_json(node, NULL));
        carrel_fork_request_free(carrel_fork_request_from_json(node, NULL));
        carrel_stop_request_free(carrel_stop_request_from_json(node, NULL));
        carrel_shell_control_free(carrel_shell_control_from_json(node, NULL));
    }
    return 0;
}
