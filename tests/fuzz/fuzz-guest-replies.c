/*
 * libFuzzer harness for what the guest and QEMU hand back (untrusted): guest-agent exec
 * and guest-file-* replies, the domain metadata scanner (screenshots: fuzz-image.c) and
 * carrel-guest proc's replies (conf-proc.c).
 * Built with -Dfuzz=true and clang (see tests/fuzz/meson.build).
 */
#include <stddef.h>
#include <stdint.h>

#define CARREL_HYPERVISOR_PRIV_H_ALLOW
#include "hypervisor/hypervisor-priv.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    g_autofree char *text = g_strndup((const char *)data, size);
    g_autofree char *name = NULL;
    g_autofree char *id = NULL;
    g_autofree char *instance = NULL;
    gint64 pid = 0;

    (void)carrel_hypervisor_agent_parse_pid(text, &pid, NULL);
    {
        g_auto(CarrelExecStatus) status = {0};
        (void)carrel_hypervisor_agent_parse_status(text, 4096, &status, NULL);
    }
    (void)carrel_hypervisor_scan_xml(text, &name, &id, &instance, NULL);
    {
        g_autoptr(GBytes) chunk = NULL;
        gint64 handle = 0;
        gboolean eof = FALSE;
        gsize count = 0;

        (void)carrel_hypervisor_agent_parse_file_handle(text, &handle, NULL);
        (void)carrel_hypervisor_agent_parse_file_read(text, 4096, &chunk, &eof, NULL);
        (void)carrel_hypervisor_agent_parse_file_write(text, 4096, &count, NULL);
    }
    {
        g_autoptr(JsonNode) node = carrel_conf_parse_json((const char *)data, size, NULL);
        g_autoptr(CarrelProcRead) read =
            node ? carrel_proc_read_from_guest(node, 0, 0, NULL) : NULL;
        g_autoptr(GPtrArray) list = node ? carrel_proc_list_from_guest(node, NULL) : NULL;
        g_autoptr(JsonNode) out = read ? carrel_proc_read_to_json(read) : NULL;

        (void)list;
        (void)out;
    }
    return 0;
}
