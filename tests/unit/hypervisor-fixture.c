/* What the hypervisor's unit tests share: a domain XML and the error assertion. */
#include "hypervisor-fixture.h"

char *
make_xml(const char *name, const char *session_id)
{
    CarrelDomainSpec spec = {
        .domain_name = name,
        .session_id = session_id,
        .accel = CARREL_ACCEL_TCG,
        .vcpus = 1,
        .memory_mib = 512,
        .boot = CARREL_BOOT_DIRECT,
        .kernel_path = "/var/lib/carrel/templates/tiny/1/vmlinuz",
        .cmdline = "console=ttyS0",
        .disk_path = "/var/lib/carrel/sessions/x/disk.qcow2",
        .disk_format = "qcow2",
        .console_log_path = "/var/lib/carrel/sessions/x/console.log",
        .tb_cache_mib = 64,
    };
    g_autoptr(GError) error = NULL;
    char *xml = carrel_hypervisor_build_domain_xml(&spec, &error);

    if (!xml)
        fail_msg("building xml: %s", error->message);
    return xml;
}

void
assert_error(const GError *error, int code, const char *fragment)
{
    if (!error)
        fail_msg("expected error code %d, got success", code);
    if (error->domain != CARREL_ERROR || error->code != code)
        fail_msg("expected code %d, got %d: %s", code, error->code, error->message);
    if (fragment && !strstr(error->message, fragment))
        fail_msg("message '%s' lacks '%s'", error->message, fragment);
}
