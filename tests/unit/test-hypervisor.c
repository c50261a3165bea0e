/* hypervisor: domains on the fake and on libvirt's test driver (lifecycle, listing, define,
 * save and restore), the XML scanner, accelerator choice and the boot probe. */
#include <fcntl.h>
#include <stdio.h>
#include <sys/stat.h>
#include <unistd.h>

#include "hypervisor-fixture.h"

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

static CarrelPauseReason
pause_reason(CarrelHypervisor *hv, const char *name)
{
    g_autoptr(GError) error = NULL;
    CarrelPauseReason why = CARREL_PAUSE_LAST;

    if (!carrel_hypervisor_get_pause_reason(hv, name, &why, &error))
        fail_msg("get_pause_reason '%s': %s", name, error->message);
    return why;
}

/* Why a domain is paused: not at all, asked for, or (the fake stands in for QEMU) a full disk. */
static void
test_pause_reasons(void **state)
{
    g_autoptr(GError) error = NULL;
    g_autoptr(CarrelHypervisor) lv = carrel_hypervisor_open_libvirt(TEST_URI, &error);
    g_autoptr(CarrelHypervisor) fake = carrel_hypervisor_new_fake();
    CarrelHypervisor *both[] = {lv, fake};
    const char *name = "carrel-s-0000000000b1";
    g_autofree char *xml = make_xml(name, "s-0000000000b1");
    CarrelPauseReason why;
    guint64 bytes = 0;

    assert_string_equal(carrel_pause_reason_to_string(CARREL_PAUSE_NO_SPACE), "host_disk_full");
    for (gsize i = 0; i < G_N_ELEMENTS(both); i++) {
        CarrelHypervisor *hv = both[i];
        assert_non_null(hv);
        assert_true(carrel_hypervisor_define_start(hv, xml, NULL));
        assert_int_equal(pause_reason(hv, name), CARREL_PAUSE_NONE);
        /* Neither the test driver nor an unscripted fake can tell a disk's allocation. */
        assert_false(carrel_hypervisor_disk_allocation(hv, name, &bytes, &error));
        assert_error(error, CARREL_ERROR_UNSUPPORTED, NULL);
        g_clear_error(&error);
        assert_true(carrel_hypervisor_pause(hv, name, TRUE, NULL));
        assert_int_equal(pause_reason(hv, name), CARREL_PAUSE_USER);
        assert_true(carrel_hypervisor_pause(hv, name, FALSE, NULL));
        assert_int_equal(pause_reason(hv, name), CARREL_PAUSE_NONE);
        assert_true(carrel_hypervisor_destroy(hv, name, NULL));
        assert_true(carrel_hypervisor_undefine(hv, name, NULL));
        assert_false(carrel_hypervisor_get_pause_reason(hv, name, &why, &error));
        assert_error(error, CARREL_ERROR_NOT_FOUND, "domain 'carrel-s-0000000000b1': ");
        g_clear_error(&error);
    }
    /* QEMU's own pause on ENOSPC, as the fake plays it; a resume clears it. */
    assert_true(carrel_hypervisor_define_start(fake, xml, NULL));
    assert_true(carrel_hypervisor_fake_pause_for(fake, name, CARREL_PAUSE_NO_SPACE));
    assert_int_equal(pause_reason(fake, name), CARREL_PAUSE_NO_SPACE);
    assert_true(carrel_hypervisor_fake_set_disk_allocation(fake, name, 12345));
    assert_true(carrel_hypervisor_disk_allocation(fake, name, &bytes, NULL));
    assert_int_equal(bytes, 12345);
    assert_false(carrel_hypervisor_fake_pause_for(fake, name, CARREL_PAUSE_IO_ERROR));
    assert_true(carrel_hypervisor_pause(fake, name, FALSE, NULL));
    assert_int_equal(pause_reason(fake, name), CARREL_PAUSE_NONE);
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
    /* Restores only read the image: it still holds the saved domain's XML. */
    in_image = carrel_hypervisor_saveimage_get_xml(path, NULL);
    assert_null(strstr(in_image, "carrel-s-0000000000e2"));
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

/* The live snapshot's XML: memory and vda external, hostile paths escaped. */
static void
test_snapshot_xml(void **state)
{
    g_autofree char *xml =
        carrel_hypervisor_build_snapshot_xml("/s/p-1/memory.save", "/s/a'<&.qcow2");

    (void)state;
    assert_string_equal(xml,
                        "<domainsnapshot><memory snapshot='external' file='/s/p-1/memory.save'/>"
                        "<disks><disk name='vda' snapshot='external' type='file'>"
                        "<source file='/s/a&apos;&lt;&amp;.qcow2'/></disk></disks>"
                        "</domainsnapshot>");
}

/* The user QEMU runs as, from libvirt's capabilities: the DAC model's label for qemu. */
static void
test_parse_qemu_owner(void **state)
{
    static const char caps[] = "<capabilities><host>"
                               "<secmodel><model>none</model><doi>0</doi></secmodel>"
                               "<secmodel><model>dac</model><doi>0</doi>"
                               "<baselabel type='kvm'>+1:+2</baselabel>"
                               "<baselabel type='qemu'>+64055:+64056</baselabel>"
                               "</secmodel></host></capabilities>";
    static const char *const refused[] = {
        "<capabilities><host><secmodel><model>none</model></secmodel></host></capabilities>",
        "<secmodel><model>dac</model><baselabel type='qemu'>root</baselabel></secmodel>",
        "<secmodel><model>dac</model><baselabel type='qemu'>+1:+2:+3</baselabel></secmodel>",
        NULL,
    };
    static const char confined[] = "<secmodel><model>apparmor</model></secmodel>"
                                   "<secmodel><model>dac</model>"
                                   "<baselabel type='qemu'>+1:+2</baselabel></secmodel>";
    g_autoptr(GError) error = NULL;
    guint uid = 0, gid = 0;

    assert_true(carrel_hypervisor_parse_qemu_owner(caps, &uid, &gid, &error));
    assert_int_equal(uid, 64055);
    assert_int_equal(gid, 64056);
    for (guint i = 0; refused[i]; i++) {
        assert_false(carrel_hypervisor_parse_qemu_owner(refused[i], &uid, &gid, &error));
        assert_true(g_error_matches(error, CARREL_ERROR, CARREL_ERROR_FAILED));
        g_clear_error(&error);
    }
    assert_false(carrel_hypervisor_parse_qemu_owner(confined, &uid, &gid, &error));
    assert_true(g_error_matches(error, CARREL_ERROR, CARREL_ERROR_UNSUPPORTED));
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_enum_tables),
        cmocka_unit_test(test_pause_reasons),
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
        cmocka_unit_test(test_genid),
        cmocka_unit_test(test_fake_define),
        cmocka_unit_test(test_fake_save),
        cmocka_unit_test(test_fake_restore_clones),
        cmocka_unit_test(test_fake_restore_refused),
        cmocka_unit_test(test_libvirt_define),
        cmocka_unit_test(test_snapshot_xml),
        cmocka_unit_test(test_parse_qemu_owner),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
