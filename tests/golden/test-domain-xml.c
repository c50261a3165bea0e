/*
 * Golden test of the domain-XML builder: every tests/data/domain-xml/<case>.json (a
 * CarrelDomainSpec as JSON) must produce exactly <case>.xml, or, when <case>.err exists, fail
 * with exactly the error it holds ("code: message"). Every produced XML must also pass
 * virt-xml-validate. CARREL_TEST_REGENERATE=1 rewrites the expected files: review that diff.
 */
#include <string.h>
#include <unistd.h>

#include "hypervisor/hypervisor.h"
#include "tests/golden/golden.h"

static const char *const spec_members[] = {
    "domain_name",
    "session_id",
    "instance_id",
    "uuid",
    "accel",
    "vcpus",
    "memory_mib",
    "boot",
    "kernel_path",
    "initrd_path",
    "cmdline",
    "disk_path",
    "disk_format",
    "console_log_path",
    "tb_cache_mib",
    "genid",
    "mac",
    "network",
    "emulator",
    "memory_file",
    "memory_file_shared",
    "cpu_cache",
    NULL,
};

static const char *
get_string(JsonObject *obj, const char *member)
{
    return json_object_get_string_member_with_default(obj, member, NULL);
}

/* The spec points into obj, which must outlive it. */
static void
spec_from_json(JsonObject *obj, CarrelDomainSpec *spec)
{
    golden_check_members(obj, spec_members, "a domain-xml case");
    memset(spec, 0, sizeof(*spec));
    spec->domain_name = get_string(obj, "domain_name");
    spec->session_id = get_string(obj, "session_id");
    spec->instance_id = get_string(obj, "instance_id");
    spec->uuid = get_string(obj, "uuid");
    spec->accel = carrel_accel_from_string(get_string(obj, "accel"));
    spec->vcpus = (guint)json_object_get_int_member_with_default(obj, "vcpus", 0);
    spec->memory_mib = (guint)json_object_get_int_member_with_default(obj, "memory_mib", 0);
    spec->boot = carrel_boot_from_string(get_string(obj, "boot"));
    spec->kernel_path = get_string(obj, "kernel_path");
    spec->initrd_path = get_string(obj, "initrd_path");
    spec->cmdline = get_string(obj, "cmdline");
    spec->disk_path = get_string(obj, "disk_path");
    spec->disk_format = get_string(obj, "disk_format");
    spec->console_log_path = get_string(obj, "console_log_path");
    spec->tb_cache_mib = (guint)json_object_get_int_member_with_default(obj, "tb_cache_mib", 0);
    spec->genid = get_string(obj, "genid");
    spec->mac = get_string(obj, "mac");
    spec->network = get_string(obj, "network");
    spec->emulator = get_string(obj, "emulator");
    spec->memory_file = get_string(obj, "memory_file");
    spec->memory_file_shared =
        json_object_get_boolean_member_with_default(obj, "memory_file_shared", FALSE);
    spec->cpu_cache = get_string(obj, "cpu_cache");
}

/* Runs virt-xml-validate on xml; a missing validator is a failure, not a skip (CI has it). */
static void
validate_with_libvirt(const char *xml)
{
    g_autofree char *validator = g_find_program_in_path("virt-xml-validate");
    g_autofree char *tmp_path = NULL;
    g_autoptr(GError) error = NULL;
    int fd;

    if (!validator)
        g_error("virt-xml-validate not found: install libvirt-clients");
    fd = g_file_open_tmp("carrel-domain-XXXXXX.xml", &tmp_path, &error);
    g_assert_no_error(error);
    close(fd);
    g_file_set_contents(tmp_path, xml, -1, &error);
    g_assert_no_error(error);
    {
        const char *argv[] = {validator, tmp_path, "domain", NULL};
        gboolean ok = carrel_util_run(argv, 60, NULL, NULL, &error);

        unlink(tmp_path);
        if (!ok)
            g_test_message("virt-xml-validate: %s", error->message);
        g_assert_no_error(error);
    }
}

static char *
generate(JsonObject *root, GError **error)
{
    CarrelDomainSpec spec;
    char *xml;

    spec_from_json(root, &spec);
    xml = carrel_hypervisor_build_domain_xml(&spec, error);
    if (xml)
        validate_with_libvirt(xml);
    return xml;
}

int
main(int argc, char **argv)
{
    return golden_main(argc, argv, "domain-xml", ".xml", generate);
}
