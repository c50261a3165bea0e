#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <png.h>
#include <sys/stat.h>
#include <unistd.h>

#define CARREL_HYPERVISOR_PRIV_H_ALLOW
#include "hypervisor/hypervisor-priv.h"
#include "tests/fake/hypervisor-fake.h"

#define TEST_URI "test:///default"

static char *
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

static void
assert_error(const GError *error, int code, const char *fragment)
{
    if (!error)
        fail_msg("expected error code %d, got success", code);
    if (error->domain != CARREL_ERROR || error->code != code)
        fail_msg("expected code %d, got %d: %s", code, error->code, error->message);
    if (fragment && !strstr(error->message, fragment))
        fail_msg("message '%s' lacks '%s'", error->message, fragment);
}

static void
assert_state(CarrelHypervisor *hv, const char *name, CarrelDomainState expected)
{
    g_autoptr(GError) error = NULL;
    CarrelDomainState state = CARREL_DOMAIN_LAST;

    if (!carrel_hypervisor_get_state(hv, name, &state, &error))
        fail_msg("get_state '%s': %s", name, error->message);
    assert_string_equal(carrel_domain_state_to_string(state),
                        carrel_domain_state_to_string(expected));
}

static void
assert_absent(CarrelHypervisor *hv, const char *name)
{
    g_autoptr(GError) error = NULL;
    CarrelDomainState state = CARREL_DOMAIN_LAST;
    g_autofree char *prefix = g_strdup_printf("domain '%s': ", name);

    assert_false(carrel_hypervisor_get_state(hv, name, &state, &error));
    assert_error(error, CARREL_ERROR_NOT_FOUND, prefix);
    assert_int_equal(state, CARREL_DOMAIN_LAST); /* ret_state untouched on failure */
}

/* The session id list() reports for name, or NULL when name is not listed (never a crash). */
static char *
listed_session(CarrelHypervisor *hv, const char *name)
{
    g_autoptr(GError) error = NULL;
    g_autoptr(GPtrArray) domains = carrel_hypervisor_list(hv, &error);

    if (!domains)
        fail_msg("list: %s", error->message);
    for (guint i = 0; i < domains->len; i++) {
        CarrelDomainInfo *info = g_ptr_array_index(domains, i);
        assert_non_null(info->session_id);
        if (g_str_equal(info->name, name))
            return g_strdup(info->session_id);
    }
    return NULL;
}

static void
test_enum_tables(void **state)
{
    for (int i = 0; i < CARREL_ACCEL_LAST; i++)
        assert_int_equal(carrel_accel_from_string(carrel_accel_to_string(i)), i);
    for (int i = 0; i < CARREL_DOMAIN_LAST; i++)
        assert_int_equal(carrel_domain_state_from_string(carrel_domain_state_to_string(i)), i);
    assert_string_equal(carrel_accel_to_string(CARREL_ACCEL_TCG), "tcg");
    assert_string_equal(carrel_domain_state_to_string(CARREL_DOMAIN_SHUTOFF), "shutoff");
    assert_int_equal(carrel_accel_from_string("KVM"), CARREL_ACCEL_LAST);
    assert_int_equal(carrel_accel_from_string(NULL), CARREL_ACCEL_LAST);
    assert_int_equal(carrel_domain_state_from_string("bogus"), CARREL_DOMAIN_LAST);
    assert_string_equal(carrel_accel_to_string(CARREL_ACCEL_LAST), "unknown");
    assert_string_equal(carrel_domain_state_to_string((CarrelDomainState)-1), "unknown");
}

static void
test_session_id_shape(void **state)
{
    assert_true(carrel_hypervisor_is_session_id("s-0123456789ab"));
    assert_false(carrel_hypervisor_is_session_id("s-0123456789AB"));
    assert_false(carrel_hypervisor_is_session_id("s-0123456789a"));
    assert_false(carrel_hypervisor_is_session_id("s-0123456789abc"));
    assert_false(carrel_hypervisor_is_session_id("x-0123456789ab"));
    assert_false(carrel_hypervisor_is_session_id("s-0123456789ag"));
    assert_false(carrel_hypervisor_is_session_id(NULL));
}

static void
test_scan_xml(void **state)
{
    g_autofree char *xml = make_xml("carrel-s-00000000000a", "s-00000000000a");
    g_autofree char *name = NULL;
    g_autofree char *id = NULL;
    g_autofree char *other = NULL;
    g_autoptr(GError) error = NULL;
    g_autofree char *huge = g_strnfill(CARREL_HYPERVISOR_SCAN_MAX_BYTES + 1, ' ');

    assert_true(carrel_hypervisor_scan_xml(xml, &name, &id, NULL, NULL));
    assert_string_equal(name, "carrel-s-00000000000a");
    assert_string_equal(id, "s-00000000000a");
    g_clear_pointer(&id, g_free);
    /* The shape libvirt's virDomainGetMetadata returns (selected by namespace, then dropped). */
    assert_true(carrel_hypervisor_scan_xml("<session>\n  <id>s-00000000000b</id>\n</session>\n",
                                           NULL, &id, NULL, NULL));
    assert_string_equal(id, "s-00000000000b");
    g_clear_pointer(&id, g_free);
    /* The instance id comes back when present and well-formed, never otherwise. */
    assert_true(carrel_hypervisor_scan_xml("<session><id>s-00000000000b</id>"
                                           "<instance>i-0123456789ab</instance></session>",
                                           NULL, &id, &other, NULL));
    assert_string_equal(other, "i-0123456789ab");
    g_clear_pointer(&other, g_free);
    assert_true(carrel_hypervisor_scan_xml("<session><id>s-00000000000b</id>"
                                           "<instance>i-../../x</instance></session>",
                                           NULL, NULL, &other, NULL));
    assert_null(other);
    /* Another namespace, a bad id and an id outside <session> are not believed. */
    assert_true(carrel_hypervisor_scan_xml("<domain><name>n</name><metadata><x:session "
                                           "xmlns:x='urn:other'><x:id>s-00000000000c</x:id>"
                                           "</x:session></metadata></domain>",
                                           NULL, &other, NULL, NULL));
    assert_null(other);
    assert_true(carrel_hypervisor_scan_xml("<x:session xmlns:x='" CARREL_XMLNS_SESSION
                                           "'><x:id>s-0000000000\n0c</x:id></x:session>",
                                           NULL, &other, NULL, NULL));
    assert_null(other);
    assert_true(carrel_hypervisor_scan_xml("<domain><name>n</name><id>s-00000000000c</id></domain>",
                                           NULL, &other, NULL, NULL));
    assert_null(other);
    assert_false(carrel_hypervisor_scan_xml("<domain><name>", NULL, NULL, NULL, &error));
    assert_error(error, CARREL_ERROR_INVALID_ARG, "malformed");
    g_clear_error(&error);
    assert_false(carrel_hypervisor_scan_xml(huge, NULL, NULL, NULL, &error));
    assert_error(error, CARREL_ERROR_INVALID_ARG, "longer than");
}

static void
test_fake_lifecycle(void **state)
{
    g_autoptr(CarrelHypervisor) hv = carrel_hypervisor_new_fake();
    g_autofree char *xml = make_xml("carrel-s-0000000000f1", "s-0000000000f1");
    g_autofree char *listed = NULL;
    g_autofree char *desc = carrel_hypervisor_describe(hv);
    g_autoptr(GError) error = NULL;
    const char *name = "carrel-s-0000000000f1";

    assert_string_equal(carrel_hypervisor_get_uri(hv), "fake://");
    assert_non_null(desc);
    assert_true(carrel_hypervisor_define_start(hv, xml, NULL));
    assert_false(carrel_hypervisor_define_start(hv, xml, &error));
    assert_error(error, CARREL_ERROR_EXISTS, "domain 'carrel-s-0000000000f1': ");
    g_clear_error(&error);
    assert_state(hv, name, CARREL_DOMAIN_RUNNING);
    listed = listed_session(hv, name);
    assert_non_null(listed);
    assert_string_equal(listed, "s-0000000000f1");
    assert_true(carrel_hypervisor_agent_ping(hv, name, 1, NULL));
    assert_true(carrel_hypervisor_shutdown(hv, name, 1, NULL));
    assert_state(hv, name, CARREL_DOMAIN_SHUTOFF);
    assert_false(carrel_hypervisor_agent_ping(hv, name, 1, &error));
    assert_error(error, CARREL_ERROR_WRONG_STATE, NULL);
    g_clear_error(&error);
    assert_true(carrel_hypervisor_start(hv, name, NULL));
    assert_false(carrel_hypervisor_start(hv, name, &error));
    assert_error(error, CARREL_ERROR_WRONG_STATE, NULL);
    g_clear_error(&error);
    assert_true(carrel_hypervisor_destroy(hv, name, NULL));
    assert_true(carrel_hypervisor_destroy(hv, name, NULL));
    assert_state(hv, name, CARREL_DOMAIN_SHUTOFF);
    assert_true(carrel_hypervisor_undefine(hv, name, NULL));
    assert_absent(hv, name);
    assert_true(carrel_hypervisor_undefine(hv, name, NULL));
    assert_false(carrel_hypervisor_destroy(hv, name, &error));
    assert_error(error, CARREL_ERROR_NOT_FOUND, NULL);
}

static void
test_fake_transient(void **state)
{
    g_autoptr(CarrelHypervisor) hv = carrel_hypervisor_new_fake();
    g_autofree char *xml = make_xml("carrel-s-0000000000f2", "s-0000000000f2");
    g_autofree char *listed = NULL;
    const char *name = "carrel-s-0000000000f2";

    /* Undefined while running: it keeps running (and listed) until it stops, as in libvirt. */
    assert_true(carrel_hypervisor_define_start(hv, xml, NULL));
    assert_true(carrel_hypervisor_undefine(hv, name, NULL));
    assert_state(hv, name, CARREL_DOMAIN_RUNNING);
    listed = listed_session(hv, name);
    assert_non_null(listed);
    assert_string_equal(listed, "s-0000000000f2");
    assert_true(carrel_hypervisor_destroy(hv, name, NULL));
    assert_absent(hv, name);
}

static void
test_fake_fail_next(void **state)
{
    g_autoptr(CarrelHypervisor) hv = carrel_hypervisor_new_fake();
    g_autofree char *xml = make_xml("carrel-s-0000000000f3", "s-0000000000f3");
    g_autoptr(GError) error = NULL;
    g_autoptr(GPtrArray) domains = NULL;
    const char *name = "carrel-s-0000000000f3";

    carrel_hypervisor_fake_fail_next(hv, "define_start");
    assert_false(carrel_hypervisor_define_start(hv, xml, &error));
    assert_error(error, CARREL_ERROR_HYPERVISOR, "domain 'carrel-s-0000000000f3': ");
    g_clear_error(&error);
    assert_absent(hv, name);                                    /* the failed call made nothing */
    assert_true(carrel_hypervisor_define_start(hv, xml, NULL)); /* only once */

    carrel_hypervisor_fake_fail_next(hv, "list");
    assert_null(carrel_hypervisor_list(hv, &error));
    assert_error(error, CARREL_ERROR_HYPERVISOR, "listing domains: ");
    g_clear_error(&error);
    domains = carrel_hypervisor_list(hv, NULL);
    assert_non_null(domains);
    assert_int_equal(domains->len, 1);

    carrel_hypervisor_fake_fail_next(hv, "destroy");
    assert_false(carrel_hypervisor_destroy(hv, name, &error));
    assert_error(error, CARREL_ERROR_HYPERVISOR, NULL);
    assert_state(hv, name, CARREL_DOMAIN_RUNNING);

    assert_true(carrel_hypervisor_fake_set_state(hv, name, CARREL_DOMAIN_CRASHED));
    assert_state(hv, name, CARREL_DOMAIN_CRASHED);
    assert_false(
        carrel_hypervisor_fake_set_state(hv, "carrel-s-000000000000", CARREL_DOMAIN_PAUSED));
}

/* Runs fn with stderr sent to a file and returns what was written there. */
static char *
capture_stderr(void (*fn)(gpointer), gpointer data)
{
    g_autofree char *path = NULL;
    char *contents = NULL;
    int saved, fd;

    fd = g_file_open_tmp("carrel-stderr-XXXXXX", &path, NULL);
    assert_true(fd >= 0);
    fflush(stderr);
    saved = dup(2);
    assert_true(saved >= 0);
    assert_true(dup2(fd, 2) == 2);
    fn(data);
    fflush(stderr);
    assert_true(dup2(saved, 2) == 2);
    close(saved);
    close(fd);
    assert_true(g_file_get_contents(path, &contents, NULL, NULL));
    unlink(path);
    return contents;
}

static void
libvirt_errors(gpointer data)
{
    CarrelHypervisor *hv = data;
    g_autoptr(GError) error = NULL;
    g_autoptr(CarrelHypervisor) bad = NULL;

    assert_false(carrel_hypervisor_define_start(hv, "<domain type='qemu'><name>x</name>", &error));
    assert_error(error, CARREL_ERROR_HYPERVISOR, "domain xml: defining: ");
    assert_null(strchr(error->message, '\n'));
    /* libvirt's own words are kept (its XML parser's complaint). */
    assert_true(strlen(error->message) > strlen("domain xml: defining: ") + 5);
    g_clear_error(&error);
    assert_false(carrel_hypervisor_define_start(
        hv, "<domain type='qemu'><name>carrel-x</name><memory>1</memory></domain>", &error));
    assert_error(error, CARREL_ERROR_HYPERVISOR, "domain 'carrel-x': defining: ");
    g_clear_error(&error);
    bad = carrel_hypervisor_open_libvirt("bogus:///nowhere", &error);
    assert_null(bad);
    assert_error(error, CARREL_ERROR_HYPERVISOR, "libvirt 'bogus:///nowhere': connecting: ");
}

static void
test_libvirt_errors_are_quiet(void **state)
{
    g_autoptr(GError) error = NULL;
    g_autoptr(CarrelHypervisor) hv = carrel_hypervisor_open_libvirt(TEST_URI, &error);
    g_autofree char *printed = NULL;

    if (!hv)
        fail_msg("open: %s", error->message);
    printed = capture_stderr(libvirt_errors, hv);
    assert_string_equal(printed, "");
}

static void
test_libvirt_lifecycle(void **state)
{
    g_autoptr(GError) error = NULL;
    g_autoptr(CarrelHypervisor) hv = carrel_hypervisor_open_libvirt(TEST_URI, &error);
    g_autofree char *xml = make_xml("carrel-s-0000000000a1", "s-0000000000a1");
    g_autofree char *listed = NULL;
    g_autofree char *desc = NULL;
    const char *name = "carrel-s-0000000000a1";

    if (!hv)
        fail_msg("open: %s", error->message);
    assert_string_equal(carrel_hypervisor_get_uri(hv), TEST_URI);
    desc = carrel_hypervisor_describe(hv);
    assert_true(g_str_has_prefix(desc, "libvirt ") && strstr(desc, ", TEST "));
    if (!carrel_hypervisor_define_start(hv, xml, &error))
        fail_msg("define_start: %s", error->message);
    assert_state(hv, name, CARREL_DOMAIN_RUNNING);
    assert_false(carrel_hypervisor_define_start(hv, xml, &error));
    assert_error(error, CARREL_ERROR_EXISTS, "domain 'carrel-s-0000000000a1': ");
    g_clear_error(&error);
    listed = listed_session(hv, name);
    assert_non_null(listed);
    assert_string_equal(listed, "s-0000000000a1");
    assert_null(listed_session(hv, "test")); /* the driver's own domain has no metadata */
    assert_true(carrel_hypervisor_agent_ping(hv, name, 1, NULL));
    assert_true(carrel_hypervisor_destroy(hv, name, NULL));
    assert_state(hv, name, CARREL_DOMAIN_SHUTOFF);
    assert_true(carrel_hypervisor_destroy(hv, name, NULL)); /* already off */
    assert_false(carrel_hypervisor_agent_ping(hv, name, 1, &error));
    assert_error(error, CARREL_ERROR_WRONG_STATE, NULL);
    g_clear_error(&error);
    assert_true(carrel_hypervisor_start(hv, name, NULL));
    assert_state(hv, name, CARREL_DOMAIN_RUNNING);
    if (!carrel_hypervisor_shutdown(hv, name, 5, &error))
        fail_msg("shutdown: %s", error->message);
    assert_state(hv, name, CARREL_DOMAIN_SHUTOFF);
    assert_true(carrel_hypervisor_undefine(hv, name, NULL));
    assert_absent(hv, name);
    assert_true(carrel_hypervisor_undefine(hv, name, NULL)); /* absent is success */
    assert_false(carrel_hypervisor_start(hv, name, &error));
    assert_error(error, CARREL_ERROR_NOT_FOUND, NULL);
}

static void
test_libvirt_undefine_running(void **state)
{
    g_autoptr(GError) error = NULL;
    g_autoptr(CarrelHypervisor) hv = carrel_hypervisor_open_libvirt(TEST_URI, &error);
    g_autofree char *xml = make_xml("carrel-s-0000000000a2", "s-0000000000a2");
    g_autofree char *listed = NULL;
    const char *name = "carrel-s-0000000000a2";

    if (!hv || !carrel_hypervisor_define_start(hv, xml, &error))
        fail_msg("setup: %s", error->message);
    /* A running domain becomes transient: still listed through its live metadata. */
    assert_true(carrel_hypervisor_undefine(hv, name, NULL));
    assert_state(hv, name, CARREL_DOMAIN_RUNNING);
    listed = listed_session(hv, name);
    assert_non_null(listed);
    assert_string_equal(listed, "s-0000000000a2");
    assert_true(carrel_hypervisor_undefine(hv, name, NULL));
    assert_true(carrel_hypervisor_destroy(hv, name, NULL));
    assert_absent(hv, name);
}

static void
test_accel_explicit(void **state)
{
    g_autofree char *reason = NULL;

    assert_int_equal(carrel_hypervisor_resolve_accel(CARREL_ACCEL_TCG, NULL, 1, &reason),
                     CARREL_ACCEL_TCG);
    assert_string_equal(reason, "tcg requested");
    g_clear_pointer(&reason, g_free);
    assert_int_equal(carrel_hypervisor_resolve_accel(CARREL_ACCEL_KVM, NULL, 1, &reason),
                     CARREL_ACCEL_KVM);
    assert_string_equal(reason, "kvm requested");
    assert_int_equal(carrel_hypervisor_resolve_accel(CARREL_ACCEL_TCG, NULL, 1, NULL),
                     CARREL_ACCEL_TCG);
}

static void
test_accel_auto_without_kernel(void **state)
{
    g_autofree char *reason = NULL;
    gint64 started = g_get_monotonic_time();
    CarrelAccel accel;

    accel = carrel_hypervisor_resolve_accel(CARREL_ACCEL_AUTO, "/nonexistent/vmlinuz", 5, &reason);
    assert_int_equal(accel, CARREL_ACCEL_TCG);
    assert_non_null(reason);
    print_message("auto: %s\n", reason);
    assert_true(g_str_has_prefix(reason, "kvm probe: "));
    assert_true(g_str_has_suffix(reason, "; using tcg"));
    /* Without /dev/kvm the probe stops there; with it, the missing kernel stops it. */
    assert_true(strstr(reason, "/dev/kvm") || strstr(reason, "'/nonexistent/vmlinuz'"));
    assert_null(strchr(reason, '\n'));
    assert_true(g_get_monotonic_time() - started < 2 * G_USEC_PER_SEC);
}

/* A stand-in for QEMU: a shell script with the given body. */
static char *
write_fake_qemu(const char *body)
{
    g_autofree char *dir = g_dir_make_tmp("carrel-qemu-XXXXXX", NULL);
    g_autofree char *script = g_strdup_printf("#!/bin/sh\n%s\n", body);
    char *path;

    assert_non_null(dir);
    path = g_build_filename(dir, "qemu", NULL);
    assert_true(g_file_set_contents(path, script, -1, NULL));
    assert_int_equal(chmod(path, 0700), 0);
    return path;
}

static void
remove_fake_qemu(const char *path)
{
    g_autofree char *dir = g_path_get_dirname(path);

    unlink(path);
    rmdir(dir);
}

static void
assert_probe(const char *body, guint timeout_s, const char *fragment, gint64 max_us)
{
    g_autofree char *qemu = write_fake_qemu(body);
    g_autofree char *reason = NULL;
    gint64 started = g_get_monotonic_time();
    gboolean booted;

    booted = carrel_hypervisor_probe_boot(qemu, "kvm", "host", "/k", timeout_s, &reason);
    remove_fake_qemu(qemu);
    assert_false(booted);
    assert_non_null(reason);
    if (!strstr(reason, fragment))
        fail_msg("reason '%s' lacks '%s'", reason, fragment);
    if (g_get_monotonic_time() - started > max_us)
        fail_msg("probe took %" G_GINT64_FORMAT " us", g_get_monotonic_time() - started);
}

static void
test_probe_never_hangs(void **state)
{
    /* A QEMU spinning in a broken KVM prints nothing: killed at the deadline. */
    assert_probe("exec sleep 60", 1, "no kernel output within 1 s", 4 * G_USEC_PER_SEC);
    assert_probe("echo 'Linux version 6.1'; exec sleep 60", 1,
                 "kernel started but did not finish booting within 1 s", 4 * G_USEC_PER_SEC);
    /* The abort seen with -cpu host on nested KVM. */
    assert_probe("echo 'qemu-system-x86_64: error: failed to set MSR 0x10a to 0x0' >&2; exit 1", 5,
                 "qemu exited: qemu-system-x86_64: error: failed to set MSR 0x10a",
                 G_USEC_PER_SEC * 4);
    assert_probe("exit 0", 5, "qemu exited: no output", G_USEC_PER_SEC * 4);
    assert_probe("echo 'VFS: early'; echo 'Linux version 6.1'; exit 0", 5, "qemu exited",
                 G_USEC_PER_SEC * 4);
}

static void
test_probe_detects_boot(void **state)
{
    g_autofree char *qemu = write_fake_qemu(
        "echo '[0.0] Linux version 6.1'; echo '[1.6] VFS: Disk quotas'; exec sleep 60");
    g_autofree char *reason = NULL;

    /* QEMU is killed as soon as the boot is proven, not left to run. */
    assert_true(carrel_hypervisor_probe_boot(qemu, "kvm", "host", "/k", 10, &reason));
    remove_fake_qemu(qemu);
    assert_true(g_str_has_prefix(reason, "kernel booted in "));
}

/* The real thing under TCG: proves the markers match what a real kernel prints. */
static void
test_probe_real_kernel_tcg(void **state)
{
    g_autofree char *qemu = g_find_program_in_path("qemu-system-x86_64");
    g_autoptr(GDir) dir = g_dir_open("/boot", 0, NULL);
    g_autofree char *kernel = NULL;
    g_autofree char *reason = NULL;
    const char *entry;

    while (dir && (entry = g_dir_read_name(dir))) {
        g_autofree char *path = g_build_filename("/boot", entry, NULL);
        if (g_str_has_prefix(entry, "vmlinuz-") && access(path, R_OK) == 0) {
            g_free(kernel);
            kernel = g_steal_pointer(&path);
        }
    }
    if (!qemu || !kernel) {
        print_message("skipped: needs qemu-system-x86_64 and a readable /boot/vmlinuz-*\n");
        skip();
    }
    if (!carrel_hypervisor_probe_boot(qemu, "tcg", "qemu64", kernel, 60, &reason))
        fail_msg("tcg probe of '%s' failed: %s", kernel, reason);
    print_message("tcg probe: %s\n", reason);
}

/* --- screenshots (the fake hands over PNG, as libvirt does) ------------------------------- */

static GBytes *
make_png(guint width, guint height, guint32 format, guint8 fill)
{
    png_image image;
    gsize channels = PNG_IMAGE_SAMPLE_CHANNELS(format);
    g_autofree guint8 *pixels = g_malloc((gsize)width * height * channels);
    png_alloc_size_t size = 0;
    guint8 *out;

    memset(pixels, fill, (gsize)width * height * channels);
    pixels[0] = (guint8)(fill + 1); /* not blank */
    memset(&image, 0, sizeof(image));
    image.version = PNG_IMAGE_VERSION;
    image.width = width;
    image.height = height;
    image.format = format;
    assert_true(png_image_write_to_memory(&image, NULL, &size, 0, pixels, 0, NULL));
    out = g_malloc(size);
    assert_true(png_image_write_to_memory(&image, out, &size, 0, pixels, 0, NULL));
    return g_bytes_new_take(out, size);
}

/* --- guest agent: commands and untrusted replies ----------------------------------------- */

static JsonObject *
parse_object(JsonParser *parser, const char *json)
{
    JsonNode *root;

    assert_true(json_parser_load_from_data(parser, json, -1, NULL));
    root = json_parser_get_root(parser);
    assert_true(JSON_NODE_HOLDS_OBJECT(root));
    return json_node_get_object(root);
}

static void
test_agent_commands(void **state)
{
    const char *argv[] = {"-rf", "a \"b\"\n", "é", NULL};
    g_autoptr(GBytes) input = g_bytes_new_static("\0\1binary", 8);
    g_autofree char *exec = carrel_hypervisor_agent_exec_command(argv, input, 30);
    g_autofree char *status = carrel_hypervisor_agent_status_command(1234);
    g_autofree char *kill = carrel_hypervisor_agent_kill_command(77);
    g_autoptr(JsonParser) parser = json_parser_new();
    g_autoptr(JsonParser) parser2 = json_parser_new();
    JsonObject *root, *args;
    JsonArray *arg;
    g_autofree guchar *decoded = NULL;
    gsize decoded_len = 0;

    root = parse_object(parser, exec);
    assert_string_equal(json_object_get_string_member(root, "execute"), "guest-exec");
    args = json_object_get_object_member(root, "arguments");
    assert_string_equal(json_object_get_string_member(args, "path"), "timeout");
    assert_true(json_object_get_boolean_member(args, "capture-output"));
    arg = json_object_get_array_member(args, "arg");
    assert_int_equal(json_array_get_length(arg), 5);
    assert_string_equal(json_array_get_string_element(arg, 0), "--signal=KILL");
    assert_string_equal(json_array_get_string_element(arg, 1), "30");
    /* A program name that looks like an option stays the program: timeout stops at "30". */
    assert_string_equal(json_array_get_string_element(arg, 2), "-rf");
    assert_string_equal(json_array_get_string_element(arg, 3), "a \"b\"\n");
    assert_string_equal(json_array_get_string_element(arg, 4), "é");
    decoded = g_base64_decode(json_object_get_string_member(args, "input-data"), &decoded_len);
    assert_int_equal(decoded_len, 8);
    assert_memory_equal(decoded, "\0\1binary", 8);
    assert_string_equal(status, "{\"execute\":\"guest-exec-status\",\"arguments\":{\"pid\":1234}}");
    root = parse_object(parser2, kill);
    args = json_object_get_object_member(root, "arguments");
    assert_string_equal(json_object_get_string_member(args, "path"), "/bin/sh");
    arg = json_object_get_array_member(args, "arg");
    assert_string_equal(json_array_get_string_element(arg, 3), "77");
    assert_false(json_object_has_member(args, "capture-output"));
}

static void
test_agent_exec_args(void **state)
{
    const char *ok[] = {"true", NULL};
    const char *empty[] = {"", NULL};
    const char *latin1[] = {"echo", "\xe9", NULL};
    g_autoptr(GPtrArray) many = g_ptr_array_new();
    g_autofree char *long_arg = g_strnfill(CARREL_HYPERVISOR_EXEC_MAX_ARGV_BYTES, 'a');
    const char *too_long[] = {"echo", long_arg, NULL};
    g_autoptr(GBytes) big_input = g_bytes_new_take(g_malloc0(CARREL_HYPERVISOR_EXEC_MAX_INPUT + 1),
                                                   CARREL_HYPERVISOR_EXEC_MAX_INPUT + 1);
    g_autoptr(GError) error = NULL;

    for (int i = 0; i <= CARREL_HYPERVISOR_EXEC_MAX_ARGS; i++)
        g_ptr_array_add(many, (gpointer) "x");
    g_ptr_array_add(many, NULL);
    assert_true(carrel_hypervisor_exec_check_args(ok, NULL, 1, 0, NULL));
    assert_true(carrel_hypervisor_exec_check_args(ok, NULL, CARREL_HYPERVISOR_EXEC_MAX_TIMEOUT_S,
                                                  CARREL_HYPERVISOR_EXEC_MAX_OUTPUT, NULL));
#define REFUSED(argv, input, timeout, max, fragment)                                               \
    do {                                                                                           \
        assert_false(carrel_hypervisor_exec_check_args(argv, input, timeout, max, &error));        \
        assert_error(error, CARREL_ERROR_INVALID_ARG, fragment);                                   \
        g_clear_error(&error);                                                                     \
    } while (0)
    REFUSED(NULL, NULL, 1, 0, "program name");
    REFUSED(empty, NULL, 1, 0, "program name");
    REFUSED(latin1, NULL, 1, 0, "argument 1 is not valid UTF-8");
    REFUSED((const char *const *)many->pdata, NULL, 1, 0, "exceed");
    REFUSED(too_long, NULL, 1, 0, "exceed");
    REFUSED(ok, big_input, 1, 0, "standard input");
    REFUSED(ok, NULL, 0, 0, "timeout '0'");
    REFUSED(ok, NULL, CARREL_HYPERVISOR_EXEC_MAX_TIMEOUT_S + 1, 0, "timeout");
    REFUSED(ok, NULL, 1, CARREL_HYPERVISOR_EXEC_MAX_OUTPUT + 1, "output limit");
#undef REFUSED
}

static void
assert_pid_refused(const char *reply, int code, const char *fragment)
{
    g_autoptr(GError) error = NULL;
    gint64 pid = -5;

    assert_false(carrel_hypervisor_agent_parse_pid(reply, &pid, &error));
    assert_error(error, code, fragment);
    assert_int_equal(pid, -5);
}

static void
test_agent_parse_pid(void **state)
{
    g_autofree char *brackets = g_strnfill(5000, '[');
    g_autofree char *deep = g_strdup_printf("{\"return\":%s}", brackets);
    g_autofree char *big = g_strnfill(CARREL_HYPERVISOR_AGENT_REPLY_MAX + 1, ' ');
    gint64 pid = 0;

    assert_true(carrel_hypervisor_agent_parse_pid("{\"return\": {\"pid\": 4242}}", &pid, NULL));
    assert_int_equal(pid, 4242);
    assert_pid_refused("{\"return\": {}}", CARREL_ERROR_INVALID_ARG, "no 'pid'");
    assert_pid_refused("{\"return\": {\"pid\": 0}}", CARREL_ERROR_INVALID_ARG, "out of range");
    assert_pid_refused("{\"return\": {\"pid\": -1}}", CARREL_ERROR_INVALID_ARG, "out of range");
    assert_pid_refused("{\"return\": {\"pid\": 4294967296}}", CARREL_ERROR_INVALID_ARG, "range");
    assert_pid_refused("{\"return\": {\"pid\": \"7\"}}", CARREL_ERROR_INVALID_ARG, "is not a");
    assert_pid_refused("{\"return\": {\"pid\": 7.5}}", CARREL_ERROR_INVALID_ARG, "is not a");
    assert_pid_refused("{\"return\": [7]}", CARREL_ERROR_INVALID_ARG, "no 'return' object");
    assert_pid_refused("[]", CARREL_ERROR_INVALID_ARG, "no 'return'");
    assert_pid_refused("{\"return\": {\"pid\": 7}", CARREL_ERROR_INVALID_ARG, "not JSON");
    assert_pid_refused("", CARREL_ERROR_INVALID_ARG, "empty");
    assert_pid_refused(NULL, CARREL_ERROR_INVALID_ARG, "empty");
    assert_pid_refused("{\"return\": {\"pid\": 7, \"x\": \"\\u0000\"}}", CARREL_ERROR_INVALID_ARG,
                       "NUL");
    assert_pid_refused(deep, CARREL_ERROR_INVALID_ARG, "nested too deep");
    assert_pid_refused(big, CARREL_ERROR_LIMIT, "exceeds");
}

/* guest-file-* replies are the guest's words: every inconsistency is refused. */
static void
test_agent_file_replies(void **state)
{
    g_autoptr(GError) error = NULL;
    g_autoptr(GBytes) data = NULL;
    g_autofree char *open_cmd = carrel_hypervisor_agent_file_open_command("/tmp/\"x", "r");
    g_autofree char *write_cmd =
        carrel_hypervisor_agent_file_write_command(1000, (guint8 *)"hi", 2);
    gint64 handle = 0;
    gboolean eof = FALSE;
    gsize count = 0;

    assert_string_equal(open_cmd, "{\"execute\":\"guest-file-open\",\"arguments\":"
                                  "{\"path\":\"/tmp/\\\"x\",\"mode\":\"r\"}}");
    assert_non_null(strstr(write_cmd, "\"buf-b64\":\"aGk=\""));
    assert_true(carrel_hypervisor_agent_parse_file_handle("{\"return\": 1000}", &handle, NULL));
    assert_int_equal(handle, 1000);
    assert_false(carrel_hypervisor_agent_parse_file_handle("{\"return\": 0}", &handle, &error));
    assert_error(error, CARREL_ERROR_INVALID_ARG, "file handle");
    g_clear_error(&error);
    assert_false(carrel_hypervisor_agent_parse_file_handle("{\"return\": \"7\"}", &handle, &error));
    g_clear_error(&error);
    /* A failed open: a missing file is NOT_FOUND; a path that only names the words is not. */
    assert_int_equal(carrel_hypervisor_agent_file_open_code(
                         CARREL_ERROR_HYPERVISOR,
                         "internal error: unable to execute QEMU agent command 'guest-file-open': "
                         "failed to open file '/x' (mode: 'r'): No such file or directory"),
                     CARREL_ERROR_NOT_FOUND);
    assert_int_equal(carrel_hypervisor_agent_file_open_code(
                         CARREL_ERROR_HYPERVISOR,
                         "internal error: unable to execute QEMU agent command 'guest-file-open': "
                         "failed to open file '/No such file or directory' (mode: 'r'): "
                         "Permission denied"),
                     CARREL_ERROR_HYPERVISOR);
    assert_int_equal(carrel_hypervisor_agent_file_open_code(CARREL_ERROR_TIMEOUT,
                                                            "guest agent is not responding: "
                                                            "No such file or directory"),
                     CARREL_ERROR_TIMEOUT);
    assert_int_equal(carrel_hypervisor_agent_file_open_code(CARREL_ERROR_HYPERVISOR, NULL),
                     CARREL_ERROR_HYPERVISOR);

    assert_true(carrel_hypervisor_agent_parse_file_read(
        "{\"return\": {\"count\": 2, \"buf-b64\": \"aGk=\", \"eof\": true}}", 16, &data, &eof,
        NULL));
    assert_int_equal(g_bytes_get_size(data), 2);
    assert_true(eof);
    /* The count must match the data, the data must fit what was asked, base64 must be padded. */
    assert_false(carrel_hypervisor_agent_parse_file_read(
        "{\"return\": {\"count\": 3, \"buf-b64\": \"aGk=\", \"eof\": true}}", 16, &data, &eof,
        &error));
    assert_error(error, CARREL_ERROR_INVALID_ARG, "inconsistent");
    g_clear_error(&error);
    assert_false(carrel_hypervisor_agent_parse_file_read(
        "{\"return\": {\"count\": 2, \"buf-b64\": \"aGk=\", \"eof\": true}}", 1, &data, &eof,
        &error));
    g_clear_error(&error);
    assert_false(carrel_hypervisor_agent_parse_file_read(
        "{\"return\": {\"count\": 2, \"buf-b64\": \"aGk\", \"eof\": true}}", 16, &data, &eof,
        &error));
    assert_error(error, CARREL_ERROR_INVALID_ARG, "base64");
    g_clear_error(&error);
    assert_true(
        carrel_hypervisor_agent_parse_file_write("{\"return\": {\"count\": 2}}", 2, &count, NULL));
    assert_int_equal(count, 2);
    assert_false(carrel_hypervisor_agent_parse_file_write("{\"return\": {\"count\": 3}}", 2, &count,
                                                          &error));
    assert_error(error, CARREL_ERROR_INVALID_ARG, "out of range");
}

static void
assert_status_refused(const char *reply, const char *fragment)
{
    g_auto(CarrelExecStatus) status = {0};
    g_autoptr(GError) error = NULL;

    assert_false(carrel_hypervisor_agent_parse_status(reply, 100, &status, &error));
    assert_error(error, CARREL_ERROR_INVALID_ARG, fragment);
    assert_null(status.out);
}

static void
test_agent_parse_status(void **state)
{
    g_auto(CarrelExecStatus) status = {0};
    g_autoptr(GError) error = NULL;
    g_autofree char *encoded = g_base64_encode((const guchar *)"0123456789", 10);
    g_autofree char *reply = g_strdup_printf("{\"return\": {\"exited\": true, \"exitcode\": 3, "
                                             "\"out-data\": \"%s\", \"err-data\": \"ZXJy\"}}",
                                             encoded);

    assert_true(carrel_hypervisor_agent_parse_status("{\"return\": {\"exited\": false}}", 100,
                                                     &status, NULL));
    assert_false(status.exited);
    carrel_exec_status_clear(&status);
    if (!carrel_hypervisor_agent_parse_status(reply, 100, &status, &error))
        fail_msg("parse: %s", error->message);
    assert_true(status.exited);
    assert_int_equal(status.exit_code, 3);
    assert_int_equal(status.signal, 0);
    assert_int_equal(g_bytes_get_size(status.out), 10);
    assert_memory_equal(g_bytes_get_data(status.out, NULL), "0123456789", 10);
    assert_int_equal(g_bytes_get_size(status.err), 3);
    assert_false(status.truncated);
    carrel_exec_status_clear(&status);
    /* Cut to max_output, at every length (decoding stops early). */
    for (gsize max = 0; max <= 11; max++) {
        assert_true(carrel_hypervisor_agent_parse_status(reply, max, &status, NULL));
        assert_int_equal(g_bytes_get_size(status.out), MIN(max, 10));
        assert_memory_equal(g_bytes_get_data(status.out, NULL), "0123456789", MIN(max, 10));
        assert_int_equal(status.truncated, max < 10);
        carrel_exec_status_clear(&status);
    }
    assert_true(carrel_hypervisor_agent_parse_status(
        "{\"return\": {\"exited\": true, \"signal\": 9}}", 100, &status, NULL));
    assert_int_equal(status.exit_code, 137);
    assert_int_equal(status.signal, 9);
    assert_int_equal(g_bytes_get_size(status.out), 0);
    carrel_exec_status_clear(&status);
    assert_true(carrel_hypervisor_agent_parse_status(
        "{\"return\": {\"exited\": true, \"out-truncated\": true}}", 100, &status, NULL));
    assert_int_equal(status.exit_code, -1);
    assert_true(status.truncated);
    carrel_exec_status_clear(&status);
    assert_status_refused("{\"return\": {\"exited\": 1}}", "'exited' is not a");
    assert_status_refused("{\"return\": {\"exited\": true, \"exitcode\": 256}}", "out of range");
    assert_status_refused("{\"return\": {\"exited\": true, \"exitcode\": -1}}", "out of range");
    assert_status_refused("{\"return\": {\"exited\": true, \"signal\": 0}}", "out of range");
    assert_status_refused("{\"return\": {\"exited\": true, \"exitcode\": \"0\"}}", "is not a");
    assert_status_refused("{\"return\": {\"exited\": true, \"out-data\": 5}}", "is not a");
    assert_status_refused("{\"return\": {\"exited\": true, \"out-data\": \"abc\"}}", "not base64");
    assert_status_refused("{\"return\": {\"exited\": true, \"out-data\": \"ab=c\"}}", "base64");
    assert_status_refused("{\"return\": {\"exited\": true, \"out-data\": \"a===\"}}", "base64");
    assert_status_refused("{\"return\": {\"exited\": true, \"err-data\": \"ab\\nc\"}}", "base64");
    assert_status_refused("{\"return\": {\"exited\": true, \"err-truncated\": \"no\"}}",
                          "is not a");
}

/* --- the new ops: fake backend --------------------------------------------------------------- */

/* Clones carry a UUID (derived from the session id here) and a genid of their own. */
static char *
make_clone_xml(const char *name, const char *session_id, const char *genid)
{
    g_autofree char *uuid = g_strconcat("00000000-0000-4000-8000-", session_id + 2, NULL);
    CarrelDomainSpec spec = {
        .domain_name = name,
        .session_id = session_id,
        .uuid = uuid,
        .accel = CARREL_ACCEL_TCG,
        .vcpus = 1,
        .memory_mib = 512,
        .boot = CARREL_BOOT_DIRECT,
        .kernel_path = "/var/lib/carrel/templates/tiny/1/vmlinuz",
        .disk_path = "/var/lib/carrel/sessions/x/disk.qcow2",
        .disk_format = "qcow2",
        .console_log_path = "/var/lib/carrel/sessions/x/console.log",
        .genid = genid,
    };
    g_autoptr(GError) error = NULL;
    char *xml = carrel_hypervisor_build_domain_xml(&spec, &error);

    if (!xml)
        fail_msg("building xml: %s", error->message);
    return xml;
}

static void
test_genid(void **state)
{
    g_autofree char *xml = make_clone_xml("carrel-s-0000000000c1", "s-0000000000c1",
                                          "0a6e3b5c-9d1f-4c2e-8b7a-5f4e3d2c1b0a");
    g_autofree char *plain = make_xml("carrel-s-0000000000c1", "s-0000000000c1");
    g_autoptr(GError) error = NULL;
    CarrelDomainSpec spec = {0};

    assert_non_null(strstr(xml, "  <genid>0a6e3b5c-9d1f-4c2e-8b7a-5f4e3d2c1b0a</genid>\n"));
    assert_null(strstr(plain, "genid"));
    spec.domain_name = "carrel-s-0000000000c1";
    spec.session_id = "s-0000000000c1";
    spec.genid = "0a6e3b5c-9d1f-4c2e-8b7a-5f4e3d2c1b0a</genid><x>";
    assert_null(carrel_hypervisor_build_domain_xml(&spec, &error));
    assert_error(error, CARREL_ERROR_INVALID_ARG, "genid");
}

static void
test_fake_define(void **state)
{
    g_autoptr(CarrelHypervisor) hv = carrel_hypervisor_new_fake();
    g_autofree char *xml = make_xml("carrel-s-0000000000d1", "s-0000000000d1");
    g_autoptr(GError) error = NULL;
    const char *name = "carrel-s-0000000000d1";

    /* Defined, not started; redefining is fine. */
    assert_true(carrel_hypervisor_define(hv, xml, NULL));
    assert_state(hv, name, CARREL_DOMAIN_SHUTOFF);
    assert_true(carrel_hypervisor_define(hv, xml, NULL));
    assert_true(carrel_hypervisor_start(hv, name, NULL));
    assert_true(carrel_hypervisor_define(hv, xml, NULL));
    assert_state(hv, name, CARREL_DOMAIN_RUNNING);
    /* A running transient domain becomes persistent: it outlives its stop. */
    assert_true(carrel_hypervisor_undefine(hv, name, NULL));
    assert_true(carrel_hypervisor_define(hv, xml, NULL));
    assert_true(carrel_hypervisor_destroy(hv, name, NULL));
    assert_state(hv, name, CARREL_DOMAIN_SHUTOFF);
    carrel_hypervisor_fake_fail_next(hv, "define");
    assert_false(carrel_hypervisor_define(hv, xml, &error));
    assert_error(error, CARREL_ERROR_HYPERVISOR, "domain 'carrel-s-0000000000d1': ");
    g_clear_error(&error);
    assert_false(carrel_hypervisor_define(hv, "<domain>", &error));
    assert_error(error, CARREL_ERROR_INVALID_ARG, "domain xml: defining: ");
}

#define FAKE_BASE "carrel-s-0000000000e0"
#define FAKE_CLONE_A "carrel-s-0000000000e1"
#define FAKE_CLONE_B "carrel-s-0000000000e2"

/* Starts the warm template's domain on the fake and saves it to dir/warm.save. */
static char *
fake_save_base(CarrelHypervisor *hv, const char *dir, char **ret_base_xml)
{
    char *path = g_build_filename(dir, "warm.save", NULL);
    g_autofree char *base =
        make_clone_xml(FAKE_BASE, "s-0000000000e0", "00000000-0000-4000-8000-000000000000");
    g_autoptr(GError) error = NULL;

    assert_true(carrel_hypervisor_define_start(hv, base, NULL));
    if (!carrel_hypervisor_save(hv, FAKE_BASE, path, &error))
        fail_msg("save: %s", error->message);
    if (ret_base_xml)
        *ret_base_xml = g_steal_pointer(&base);
    return path;
}

static void
test_fake_save(void **state)
{
    g_autoptr(CarrelHypervisor) hv = carrel_hypervisor_new_fake();
    g_autofree char *dir = g_dir_make_tmp("carrel-hv-XXXXXX", NULL);
    g_autofree char *base = NULL;
    g_autofree char *path = fake_save_base(hv, dir, &base);
    g_autofree char *in_image = NULL;
    g_autoptr(GError) error = NULL;
    struct stat st;

    assert_int_equal(stat(path, &st), 0);
    assert_int_equal(st.st_mode & 07777, 0600);
    assert_state(hv, FAKE_BASE, CARREL_DOMAIN_SHUTOFF);
    in_image = carrel_hypervisor_saveimage_get_xml(path, NULL);
    assert_string_equal(in_image, base);
    /* Not running any more. */
    assert_false(carrel_hypervisor_save(hv, FAKE_BASE, path, &error));
    assert_error(error, CARREL_ERROR_WRONG_STATE, "domain 'carrel-s-0000000000e0': ");
    g_clear_error(&error);
    assert_true(carrel_hypervisor_start(hv, FAKE_BASE, NULL));
    assert_false(carrel_hypervisor_save(hv, FAKE_BASE, "relative.save", &error));
    assert_error(error, CARREL_ERROR_INVALID_ARG, "not absolute");
    g_clear_error(&error);
    /* Never over an existing file. */
    assert_false(carrel_hypervisor_save(hv, FAKE_BASE, path, &error));
    assert_error(error, CARREL_ERROR_EXISTS, NULL);
    assert_state(hv, FAKE_BASE, CARREL_DOMAIN_RUNNING);
    carrel_util_remove_tree(dir, NULL);
}

static void
test_fake_restore_clones(void **state)
{
    g_autoptr(CarrelHypervisor) hv = carrel_hypervisor_new_fake();
    g_autofree char *dir = g_dir_make_tmp("carrel-hv-XXXXXX", NULL);
    g_autofree char *path = fake_save_base(hv, dir, NULL);
    g_autofree char *clone_a =
        make_clone_xml(FAKE_CLONE_A, "s-0000000000e1", "00000000-0000-4000-8000-000000000001");
    g_autofree char *clone_b =
        make_clone_xml(FAKE_CLONE_B, "s-0000000000e2", "00000000-0000-4000-8000-000000000002");
    g_autofree char *in_image = NULL;
    g_autofree char *listed = NULL;
    g_autoptr(GError) error = NULL;

    /* Two clones from one image, running side by side, each transient. */
    if (!carrel_hypervisor_restore(hv, path, clone_a, &error))
        fail_msg("restore: %s", error->message);
    assert_true(carrel_hypervisor_restore(hv, path, clone_b, NULL));
    assert_state(hv, FAKE_CLONE_A, CARREL_DOMAIN_RUNNING);
    assert_state(hv, FAKE_CLONE_B, CARREL_DOMAIN_RUNNING);
    listed = listed_session(hv, FAKE_CLONE_B);
    assert_string_equal(listed, "s-0000000000e2");
    in_image = carrel_hypervisor_saveimage_get_xml(path, NULL);
    assert_string_equal(in_image, clone_b);
    assert_true(carrel_hypervisor_set_time(hv, FAKE_CLONE_A, NULL));
    assert_false(carrel_hypervisor_restore(hv, path, clone_a, &error));
    assert_error(error, CARREL_ERROR_EXISTS, "domain 'carrel-s-0000000000e1': ");
    g_clear_error(&error);
    /* Made persistent by define; B stays transient and vanishes when stopped. */
    assert_true(carrel_hypervisor_define(hv, clone_a, NULL));
    assert_true(carrel_hypervisor_destroy(hv, FAKE_CLONE_A, NULL));
    assert_state(hv, FAKE_CLONE_A, CARREL_DOMAIN_SHUTOFF);
    assert_true(carrel_hypervisor_destroy(hv, FAKE_CLONE_B, NULL));
    assert_absent(hv, FAKE_CLONE_B);
    carrel_util_remove_tree(dir, NULL);
}

static void
test_fake_restore_refused(void **state)
{
    g_autoptr(CarrelHypervisor) hv = carrel_hypervisor_new_fake();
    g_autofree char *dir = g_dir_make_tmp("carrel-hv-XXXXXX", NULL);
    g_autofree char *path = fake_save_base(hv, dir, NULL);
    g_autofree char *clone =
        make_clone_xml(FAKE_CLONE_B, "s-0000000000e2", "00000000-0000-4000-8000-000000000002");
    g_autoptr(GError) error = NULL;

    assert_false(carrel_hypervisor_restore(hv, "warm.save", clone, &error));
    assert_error(error, CARREL_ERROR_INVALID_ARG, "not absolute");
    g_clear_error(&error);
    carrel_hypervisor_fake_fail_next(hv, "restore");
    assert_false(carrel_hypervisor_restore(hv, path, clone, &error));
    assert_error(error, CARREL_ERROR_HYPERVISOR, "injected");
    g_clear_error(&error);
    /* A damaged image: nothing is made. */
    assert_int_equal(truncate(path, 50), 0);
    assert_false(carrel_hypervisor_restore(hv, path, clone, &error));
    assert_error(error, CARREL_ERROR_INVALID_ARG, "truncated");
    assert_absent(hv, FAKE_CLONE_B);
    carrel_util_remove_tree(dir, NULL);
}

static void
test_fake_agent_exec(void **state)
{
    g_autoptr(CarrelHypervisor) hv = carrel_hypervisor_new_fake();
    g_autofree char *xml = make_xml("carrel-s-0000000000e5", "s-0000000000e5");
    const char *name = "carrel-s-0000000000e5";
    const char *argv[] = {"uname", "-a", NULL};
    g_autoptr(GBytes) out = NULL;
    g_autoptr(GBytes) err = NULL;
    g_auto(GStrv) seen = NULL;
    gboolean truncated = TRUE, timed_out = TRUE;
    int code = -7;

    assert_true(carrel_hypervisor_define_start(hv, xml, NULL));
    assert_null(carrel_hypervisor_fake_get_exec_argv(hv));
    assert_true(carrel_hypervisor_agent_exec(hv, name, argv, NULL, 5, 100, &code, &out, &err,
                                             &truncated, &timed_out, NULL));
    assert_int_equal(code, 0);
    assert_int_equal(g_bytes_get_size(out), 0);
    assert_false(truncated || timed_out);
    seen = carrel_hypervisor_fake_get_exec_argv(hv);
    assert_string_equal(seen[0], "uname");
    assert_string_equal(seen[1], "-a");
    assert_null(seen[2]);
    g_clear_pointer(&out, g_bytes_unref);
    g_clear_pointer(&err, g_bytes_unref);
    carrel_hypervisor_fake_set_exec_result(hv, 2, "Linux carrel\n", "warning\n");
    assert_true(carrel_hypervisor_agent_exec(hv, name, argv, NULL, 5, 5, &code, &out, &err,
                                             &truncated, NULL, NULL));
    assert_int_equal(code, 2);
    assert_int_equal(g_bytes_get_size(out), 5);
    assert_memory_equal(g_bytes_get_data(out, NULL), "Linux", 5);
    assert_true(truncated);
    carrel_hypervisor_fake_set_exec_hang(hv, TRUE);
    assert_true(carrel_hypervisor_agent_exec(hv, name, argv, NULL, 5, 100, &code, NULL, NULL, NULL,
                                             &timed_out, NULL));
    assert_true(timed_out);
    assert_int_equal(code, 137);
}

static void
test_fake_agent_exec_errors(void **state)
{
    g_autoptr(CarrelHypervisor) hv = carrel_hypervisor_new_fake();
    g_autofree char *xml = make_xml("carrel-s-0000000000e7", "s-0000000000e7");
    const char *name = "carrel-s-0000000000e7";
    const char *argv[] = {"true", NULL};
    g_autoptr(GError) error = NULL;

    assert_true(carrel_hypervisor_define_start(hv, xml, NULL));
    /* Arguments are checked before any backend sees them. */
    assert_false(carrel_hypervisor_agent_exec(hv, name, argv, NULL, 0, 100, NULL, NULL, NULL, NULL,
                                              NULL, &error));
    assert_error(error, CARREL_ERROR_INVALID_ARG, "domain 'carrel-s-0000000000e7': guest-exec: ");
    g_clear_error(&error);
    carrel_hypervisor_fake_set_agent_silent(hv, TRUE);
    assert_false(carrel_hypervisor_agent_exec(hv, name, argv, NULL, 5, 100, NULL, NULL, NULL, NULL,
                                              NULL, &error));
    assert_error(error, CARREL_ERROR_TIMEOUT, NULL);
    g_clear_error(&error);
    assert_false(carrel_hypervisor_set_time(hv, name, &error));
    assert_error(error, CARREL_ERROR_TIMEOUT, NULL);
    g_clear_error(&error);
    carrel_hypervisor_fake_set_agent_silent(hv, FALSE);
    carrel_hypervisor_fake_fail_next(hv, "agent_exec");
    assert_false(carrel_hypervisor_agent_exec(hv, name, argv, NULL, 5, 100, NULL, NULL, NULL, NULL,
                                              NULL, &error));
    assert_error(error, CARREL_ERROR_HYPERVISOR, NULL);
    g_clear_error(&error);
    assert_true(carrel_hypervisor_destroy(hv, name, NULL));
    assert_false(carrel_hypervisor_agent_exec(hv, name, argv, NULL, 5, 100, NULL, NULL, NULL, NULL,
                                              NULL, &error));
    assert_error(error, CARREL_ERROR_WRONG_STATE, NULL);
}

static void
test_fake_screenshot(void **state)
{
    g_autoptr(CarrelHypervisor) hv = carrel_hypervisor_new_fake();
    g_autofree char *xml = make_xml("carrel-s-0000000000e6", "s-0000000000e6");
    const char *name = "carrel-s-0000000000e6";
    g_autoptr(GBytes) shot = NULL;
    g_autoptr(GBytes) png = make_png(7, 5, PNG_FORMAT_RGB, 0x20);
    g_autoptr(GBytes) hostile = g_bytes_new_static("P6\n99999 1\n255\n", 15);
    g_autoptr(GError) error = NULL;
    guint width = 0, height = 0;

    assert_false(carrel_hypervisor_screenshot(hv, name, &shot, NULL, NULL, &error));
    assert_error(error, CARREL_ERROR_NOT_FOUND, NULL);
    g_clear_error(&error);
    assert_true(carrel_hypervisor_define_start(hv, xml, NULL));
    assert_true(carrel_hypervisor_screenshot(hv, name, &shot, &width, &height, NULL));
    assert_int_equal(width, 4);
    assert_int_equal(height, 3);
    assert_true(carrel_image_ppm_is_blank(shot));
    g_clear_pointer(&shot, g_bytes_unref);
    /* PNG, as libvirt hands it over, comes back as PPM. */
    carrel_hypervisor_fake_set_screen(hv, png);
    assert_true(carrel_hypervisor_screenshot(hv, name, &shot, &width, &height, NULL));
    assert_int_equal(width * 10 + height, 75);
    assert_true(carrel_image_ppm_parse(shot, NULL, NULL, NULL, NULL));
    assert_false(carrel_image_ppm_is_blank(shot));
    carrel_hypervisor_fake_set_screen(hv, hostile);
    width = 1;
    assert_false(carrel_hypervisor_screenshot(hv, name, NULL, &width, NULL, &error));
    assert_error(error, CARREL_ERROR_INVALID_ARG, "domain 'carrel-s-0000000000e6': screenshot");
    assert_int_equal(width, 1);
    carrel_hypervisor_fake_set_screen(hv, NULL);
    assert_true(carrel_hypervisor_screenshot(hv, name, NULL, NULL, NULL, NULL));
}

/* --- the new ops: libvirt's test driver ------------------------------------------------------ */

static void
test_libvirt_define(void **state)
{
    g_autoptr(GError) error = NULL;
    g_autoptr(CarrelHypervisor) hv = carrel_hypervisor_open_libvirt(TEST_URI, &error);
    g_autofree char *xml = make_clone_xml("carrel-s-0000000000b1", "s-0000000000b1",
                                          "0a6e3b5c-9d1f-4c2e-8b7a-5f4e3d2c1b0a");
    const char *name = "carrel-s-0000000000b1";

    if (!hv)
        fail_msg("open: %s", error->message);
    if (!carrel_hypervisor_define(hv, xml, &error))
        fail_msg("define: %s", error->message);
    assert_state(hv, name, CARREL_DOMAIN_SHUTOFF);
    assert_true(carrel_hypervisor_define(hv, xml, NULL)); /* redefined */
    assert_true(carrel_hypervisor_start(hv, name, NULL));
    /* A running transient domain becomes persistent again. */
    assert_true(carrel_hypervisor_undefine(hv, name, NULL));
    assert_true(carrel_hypervisor_define(hv, xml, NULL));
    assert_true(carrel_hypervisor_destroy(hv, name, NULL));
    assert_state(hv, name, CARREL_DOMAIN_SHUTOFF);
    assert_true(carrel_hypervisor_undefine(hv, name, NULL));
    assert_false(carrel_hypervisor_define(hv, "<domain type='qemu'><name>x</name>", &error));
    assert_error(error, CARREL_ERROR_HYPERVISOR, "domain xml: defining: ");
}

static void
test_libvirt_guest_ops(void **state)
{
    g_autoptr(GError) error = NULL;
    g_autoptr(CarrelHypervisor) hv = carrel_hypervisor_open_libvirt(TEST_URI, &error);
    g_autofree char *xml = make_xml("carrel-s-0000000000b2", "s-0000000000b2");
    const char *name = "carrel-s-0000000000b2";
    const char *argv[] = {"true", NULL};
    g_autoptr(GBytes) shot = NULL;
    guint width = 0, height = 0;

    if (!hv || !carrel_hypervisor_define_start(hv, xml, &error))
        fail_msg("setup: %s", error->message);
    assert_true(carrel_hypervisor_set_time(hv, name, NULL));
    assert_false(carrel_hypervisor_agent_exec(hv, name, argv, NULL, 5, 100, NULL, NULL, NULL, NULL,
                                              NULL, &error));
    assert_error(error, CARREL_ERROR_UNSUPPORTED, "test driver");
    g_clear_error(&error);
    assert_false(carrel_hypervisor_save(hv, name, "/nonexistent/warm.save", &error));
    assert_error(error, CARREL_ERROR_UNSUPPORTED, "domain 'carrel-s-0000000000b2': ");
    g_clear_error(&error);
    assert_false(carrel_hypervisor_restore(hv, "/nonexistent/warm.save", xml, &error));
    assert_error(error, CARREL_ERROR_UNSUPPORTED, NULL);
    g_clear_error(&error);
    /* The test driver's screenshot is a PNG: the stream path and the decoder, end to end. */
    if (!carrel_hypervisor_screenshot(hv, name, &shot, &width, &height, &error))
        fail_msg("screenshot: %s", error->message);
    assert_true(width > 0 && height > 0);
    assert_int_equal(g_bytes_get_size(shot), strlen("P6\n") + (width >= 1000 ? 4 : 3) + 1 +
                                                 (height >= 1000 ? 4 : 3) + strlen("\n255\n") +
                                                 (gsize)width * height * 3);
    assert_true(carrel_hypervisor_destroy(hv, name, NULL));
    assert_false(carrel_hypervisor_set_time(hv, name, &error));
    assert_error(error, CARREL_ERROR_WRONG_STATE, NULL);
    g_clear_error(&error);
    assert_true(carrel_hypervisor_undefine(hv, name, NULL));
    assert_false(carrel_hypervisor_set_time(hv, name, &error));
    assert_error(error, CARREL_ERROR_NOT_FOUND, NULL);
}

static CarrelAction *
action_new(CarrelActionKind kind)
{
    CarrelAction *action = g_new0(CarrelAction, 1);

    action->kind = kind;
    return action;
}

static void
assert_plan_refused(const CarrelAction *action, guint width, guint height, const char *fragment)
{
    g_autoptr(GError) error = NULL;
    g_autoptr(GPtrArray) plan =
        carrel_hypervisor_input_plan(action, width, height, (CarrelPoint){0, 0}, NULL, &error);

    assert_null(plan);
    assert_true(g_error_matches(error, CARREL_ERROR, CARREL_ERROR_INVALID_ARG));
    if (!strstr(error->message, fragment))
        fail_msg("message '%s' lacks '%s'", error->message, fragment);
}

static char *
plan_text(const CarrelAction *action, guint width, guint height, CarrelPoint pointer,
          CarrelPoint *ret_pointer)
{
    g_autoptr(GError) error = NULL;
    g_autoptr(GPtrArray) plan =
        carrel_hypervisor_input_plan(action, width, height, pointer, ret_pointer, &error);

    if (!plan)
        fail_msg("plan: %s", error->message);
    return carrel_hypervisor_input_plan_to_text(plan);
}

static void
test_input_plan_abs(void **state)
{
    g_autoptr(CarrelAction) move = action_new(CARREL_ACTION_MOUSE_MOVE);
    CarrelPoint pointer = {0, 0};
    g_autofree char *text = NULL;
    g_autofree char *last = NULL;

    move->has_point = TRUE;
    move->point = (CarrelPoint){1, 2};
    text = plan_text(move, 3, 5, pointer, &pointer);
    /* round(1 * 32767 / 2) = 16384 (16383.5 rounds up), round(2 * 32767 / 4) = 16384 */
    assert_string_equal(text, "{\"events\":[{\"type\":\"abs\",\"data\":{\"axis\":\"x\",\"value\":"
                              "16384}},{\"type\":\"abs\",\"data\":{\"axis\":\"y\",\"value\":"
                              "16384}}]}\n");
    assert_int_equal(pointer.x, 1);
    assert_int_equal(pointer.y, 2);
    move->point = (CarrelPoint){16383, 16383};
    last = plan_text(move, CARREL_HYPERVISOR_SCREEN_MAX_SIDE, CARREL_HYPERVISOR_SCREEN_MAX_SIDE,
                     pointer, NULL);
    assert_non_null(strstr(last, "\"value\":32767}},{\"type\":\"abs\",\"data\":{\"axis\":\"y\","
                                 "\"value\":32767}}"));
}

static void
test_input_plan_steps(void **state)
{
    g_autoptr(CarrelAction) wait = action_new(CARREL_ACTION_WAIT);
    g_autoptr(CarrelAction) shot = action_new(CARREL_ACTION_SCREENSHOT);
    g_autoptr(CarrelAction) click = action_new(CARREL_ACTION_CLICK);
    g_autoptr(GPtrArray) plan = NULL;
    g_autoptr(GPtrArray) empty = NULL;
    g_autofree char *command = NULL;
    g_autofree char *text = NULL;
    CarrelPoint pointer = {0, 0};

    wait->duration_ms = 250;
    plan = carrel_hypervisor_input_plan(wait, 1280, 800, pointer, NULL, NULL);
    assert_int_equal(plan->len, 1);
    assert_null(((CarrelInputStep *)g_ptr_array_index(plan, 0))->arguments);
    assert_int_equal(((CarrelInputStep *)g_ptr_array_index(plan, 0))->delay_ms, 250);
    assert_null(carrel_hypervisor_input_command(g_ptr_array_index(plan, 0)));
    empty = carrel_hypervisor_input_plan(shot, 1280, 800, pointer, NULL, NULL);
    assert_int_equal(empty->len, 0);

    /* A click where the pointer is: no move; the pointer stays, clamped to a smaller screen. */
    click->count = 1;
    text = plan_text(click, 100, 100, (CarrelPoint){500, 50}, &pointer);
    assert_null(strstr(text, "abs"));
    assert_int_equal(pointer.x, 99);
    assert_int_equal(pointer.y, 50);
    g_clear_pointer(&plan, g_ptr_array_unref);
    plan = carrel_hypervisor_input_plan(click, 100, 100, pointer, NULL, NULL);
    command = carrel_hypervisor_input_command(g_ptr_array_index(plan, 0));
    assert_string_equal(command, "{\"execute\":\"input-send-event\",\"arguments\":{\"events\":"
                                 "[{\"type\":\"btn\",\"data\":{\"down\":true,\"button\":"
                                 "\"left\"}}]}}");
}

static void
test_input_plan_refusals(void **state)
{
    g_autoptr(CarrelAction) click = action_new(CARREL_ACTION_CLICK);
    g_autoptr(CarrelAction) key = action_new(CARREL_ACTION_KEY);
    g_autoptr(CarrelAction) type = action_new(CARREL_ACTION_TYPE);
    g_autoptr(CarrelAction) drag = action_new(CARREL_ACTION_DRAG);
    g_autoptr(CarrelAction) scroll = action_new(CARREL_ACTION_SCROLL);
    g_autoptr(CarrelAction) move = action_new(CARREL_ACTION_MOUSE_MOVE);
    g_autoptr(CarrelAction) bogus = action_new(CARREL_ACTION_LAST);
    CarrelPoint one = {1, 1};

    click->count = 1;
    assert_plan_refused(click, 0, 800, "screen size 0x800 is not valid");
    assert_plan_refused(click, 1280, CARREL_HYPERVISOR_SCREEN_MAX_SIDE + 1, "is not valid");
    click->has_point = TRUE;
    click->point = (CarrelPoint){1280, 0};
    assert_plan_refused(click, 1280, 800, "point (1280, 0) is off the screen (1280x800)");
    click->point = (CarrelPoint){0, 0};
    click->count = 4;
    assert_plan_refused(click, 1280, 800, "click action is not valid");
    click->count = 1;
    click->modifiers = g_strsplit("ctrl x\"}]}", " ", -1);
    assert_plan_refused(click, 1280, 800, "key 'x\\\"}]}' is not a QKeyCode");

    assert_plan_refused(key, 1280, 800, "key action is not valid");
    key->combos = g_ptr_array_new_with_free_func((GDestroyNotify)g_strfreev);
    g_ptr_array_add(key->combos, g_strdupv((char *[]){NULL}));
    assert_plan_refused(key, 1280, 800, "a key combination must have 1 to 8 keys");
    assert_plan_refused(type, 1280, 800, "type action is not valid");
    type->text = g_strdup("\xc3\xa9");
    assert_plan_refused(type, 1280, 800, "cannot be typed");

    assert_plan_refused(drag, 1280, 800, "drag action is not valid");
    drag->path = g_array_new(FALSE, TRUE, sizeof(CarrelPoint));
    g_array_append_val(drag->path, one);
    assert_plan_refused(drag, 1280, 800, "drag action is not valid");
    drag->path_from_pointer = TRUE;
    g_array_index(drag->path, CarrelPoint, 0).y = 800;
    assert_plan_refused(drag, 1280, 800, "point (1, 800) is off the screen");

    assert_plan_refused(scroll, 1280, 800, "scroll action is not valid");
    scroll->dy = CARREL_ACTION_MAX_SCROLL + 1;
    assert_plan_refused(scroll, 1280, 800, "scroll action is not valid");
    assert_plan_refused(move, 1280, 800, "mouse_move action is not valid");
    assert_plan_refused(bogus, 1280, 800, "unknown action kind");
}

/* A live domain XML as libvirt 9.0 shows a running carrel domain (shortened). */
static const char live_spice_xml[] =
    "<domain type='qemu' id='7'>\n"
    "  <name>carrel-s-0000000000a1</name>\n"
    "  <devices>\n"
    "    <graphics type='vnc' port='5901'/>\n"
    "    <graphics type='spice' port='5903' autoport='yes' listen='127.0.0.1' passwd='old'>\n"
    "      <listen type='address' address='127.0.0.1'/>\n"
    "      <image compression='off'/>\n"
    "      <filetransfer enable='no'/>\n"
    "    </graphics>\n"
    "  </devices>\n"
    "</domain>\n";

static void
test_spice_scan(void **state)
{
    CarrelSpiceInfo info = {0};
    g_autofree char *graphics = NULL;
    g_autoptr(GError) error = NULL;

    assert_true(carrel_hypervisor_spice_scan(live_spice_xml, "pw<&'", 1893456000, &info, &graphics,
                                             &error));
    assert_null(error);
    assert_int_equal(info.port, 5903);
    assert_int_equal(info.run_id, 7);
    assert_string_equal(graphics,
                        "<graphics type='spice' port='5903' autoport='yes' listen='127.0.0.1' "
                        "passwd='pw&lt;&amp;&apos;' passwdValidTo='2030-01-01T00:00:00' "
                        "connected='keep'><listen type='address' address='127.0.0.1'></listen>"
                        "<image compression='off'></image><filetransfer enable='no'>"
                        "</filetransfer></graphics>");
    /* Inactive: no id, port -1. */
    assert_true(carrel_hypervisor_spice_scan(
        "<domain><devices><graphics type='spice' port='-1' autoport='yes'/></devices></domain>",
        NULL, 0, &info, NULL, NULL));
    assert_int_equal(info.port, 0);
    assert_int_equal(info.run_id, -1);
    /* No SPICE (a <graphics> outside <devices> does not count), two, malformed. */
    assert_false(carrel_hypervisor_spice_scan(
        "<domain id='1'><graphics type='spice' port='5900'/><devices/></domain>", NULL, 0, &info,
        NULL, &error));
    assert_error(error, CARREL_ERROR_UNSUPPORTED, NULL);
    g_clear_error(&error);
    assert_false(carrel_hypervisor_spice_scan("<domain id='1'><devices><graphics type='spice'/>"
                                              "<graphics type='spice'/></devices></domain>",
                                              NULL, 0, &info, NULL, &error));
    assert_error(error, CARREL_ERROR_HYPERVISOR, NULL);
    g_clear_error(&error);
    assert_false(carrel_hypervisor_spice_scan("<domain><devices>", NULL, 0, NULL, NULL, &error));
    assert_non_null(error);
}

static void
test_fake_spice(void **state)
{
    g_autoptr(CarrelHypervisor) hv = carrel_hypervisor_new_fake();
    g_autofree char *xml = make_xml("carrel-s-0000000000f5", "s-0000000000f5");
    g_autofree char *pw = NULL;
    g_autoptr(GError) error = NULL;
    const char *name = "carrel-s-0000000000f5";
    CarrelSpiceInfo first = {0}, second = {0};
    gint64 until = 0;

    assert_true(carrel_hypervisor_define_start(hv, xml, NULL));
    assert_true(carrel_hypervisor_spice_info(hv, name, &first, NULL));
    assert_true(first.port > 0);
    assert_true(carrel_hypervisor_spice_password(hv, name, "secret", 1234, NULL));
    pw = carrel_hypervisor_fake_get_spice_password(hv, name, &until);
    assert_string_equal(pw, "secret");
    assert_int_equal(until, 1234);
    assert_false(carrel_hypervisor_spice_password(hv, name, "", 1234, &error));
    assert_error(error, CARREL_ERROR_INVALID_ARG, NULL);
    g_clear_error(&error);
    /* A new QEMU: a new run id and no password. */
    assert_true(carrel_hypervisor_destroy(hv, name, NULL));
    assert_false(carrel_hypervisor_spice_info(hv, name, &second, &error));
    assert_error(error, CARREL_ERROR_WRONG_STATE, "domain 'carrel-s-0000000000f5': ");
    g_clear_error(&error);
    assert_true(carrel_hypervisor_start(hv, name, NULL));
    assert_true(carrel_hypervisor_spice_info(hv, name, &second, NULL));
    assert_true(second.run_id != first.run_id);
    assert_null(carrel_hypervisor_fake_get_spice_password(hv, name, NULL));
}

static void
test_libvirt_spice_on_test_driver(void **state)
{
    g_autoptr(GError) error = NULL;
    g_autoptr(CarrelHypervisor) hv = carrel_hypervisor_open_libvirt(TEST_URI, &error);
    g_autofree char *xml = make_xml("carrel-s-0000000000f6", "s-0000000000f6");
    CarrelSpiceInfo info = {0};

    assert_non_null(hv);
    assert_true(carrel_hypervisor_define_start(hv, xml, NULL));
    /* The test driver runs no QEMU: SPICE never listens and passwords cannot be set. */
    assert_false(carrel_hypervisor_spice_info(hv, "carrel-s-0000000000f6", &info, &error));
    assert_error(error, CARREL_ERROR_WRONG_STATE, NULL);
    g_clear_error(&error);
    assert_false(carrel_hypervisor_spice_password(hv, "carrel-s-0000000000f6", "pw", 1, &error));
    assert_error(error, CARREL_ERROR_UNSUPPORTED, NULL);
    assert_true(carrel_hypervisor_destroy(hv, "carrel-s-0000000000f6", NULL));
    assert_true(carrel_hypervisor_undefine(hv, "carrel-s-0000000000f6", NULL));
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_enum_tables),
        cmocka_unit_test(test_session_id_shape),
        cmocka_unit_test(test_scan_xml),
        cmocka_unit_test(test_fake_lifecycle),
        cmocka_unit_test(test_fake_transient),
        cmocka_unit_test(test_fake_fail_next),
        cmocka_unit_test(test_libvirt_errors_are_quiet),
        cmocka_unit_test(test_libvirt_lifecycle),
        cmocka_unit_test(test_libvirt_undefine_running),
        cmocka_unit_test(test_accel_explicit),
        cmocka_unit_test(test_accel_auto_without_kernel),
        cmocka_unit_test(test_probe_never_hangs),
        cmocka_unit_test(test_probe_detects_boot),
        cmocka_unit_test(test_probe_real_kernel_tcg),
        cmocka_unit_test(test_agent_commands),
        cmocka_unit_test(test_agent_exec_args),
        cmocka_unit_test(test_agent_parse_pid),
        cmocka_unit_test(test_agent_file_replies),
        cmocka_unit_test(test_agent_parse_status),
        cmocka_unit_test(test_genid),
        cmocka_unit_test(test_fake_define),
        cmocka_unit_test(test_fake_save),
        cmocka_unit_test(test_fake_restore_clones),
        cmocka_unit_test(test_fake_restore_refused),
        cmocka_unit_test(test_fake_agent_exec),
        cmocka_unit_test(test_fake_agent_exec_errors),
        cmocka_unit_test(test_fake_screenshot),
        cmocka_unit_test(test_libvirt_define),
        cmocka_unit_test(test_libvirt_guest_ops),
        cmocka_unit_test(test_input_plan_abs),
        cmocka_unit_test(test_input_plan_steps),
        cmocka_unit_test(test_input_plan_refusals),
        cmocka_unit_test(test_spice_scan),
        cmocka_unit_test(test_fake_spice),
        cmocka_unit_test(test_libvirt_spice_on_test_driver),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
