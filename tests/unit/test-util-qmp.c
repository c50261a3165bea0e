/* util's monitor relay (util-qmp-relay.c) and carrel-qemu's argv for it (util-qemu.c). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <string.h>

#include <cmocka.h>

#include "util/util.h"

#define CPU_GET(prop, id)                                                                          \
    "{\"execute\":\"qom-get\",\"arguments\":{\"path\":\"/machine/unattached/device[0]\","          \
    "\"property\":\"" prop "\"},\"id\":\"" id "\"}\r\n"
#define OTHER "{\"execute\":\"query-iothreads\",\"id\":\"libvirt-9\"}\r\n"
#define EVENT "{\"timestamp\": {\"seconds\": 1, \"microseconds\": 2}, \"event\": \"RESUME\"}\r\n"

static void
client(CarrelQmpRelay *r, const char *text)
{
    carrel_qmp_relay_client_input(r, text, strlen(text));
}

static void
qemu(CarrelQmpRelay *r, const char *text)
{
    carrel_qmp_relay_qemu_input(r, text, strlen(text));
}

/* Empties a relay's output, returning what it held. */
static char *
take(GString *out)
{
    char *text = g_strdup(out->str);

    g_string_truncate(out, 0);
    return text;
}

static GHashTable *
cache_of(const char *text)
{
    g_autoptr(GError) error = NULL;
    GHashTable *cache = carrel_qmp_cache_parse(text, &error);

    assert_null(error);
    return cache;
}

/* Without a cache everything reaches QEMU and passes back unchanged; the boolean answers are
 * learned, the rest (an error, a list) is not, and only once libvirt went on. */
static void
test_learns(void **state)
{
    g_autoptr(CarrelQmpRelay) r = carrel_qmp_relay_new(NULL);
    g_autoptr(GHashTable) learned = NULL;
    g_autofree char *text = NULL;
    g_autofree char *to_qemu = NULL;
    g_autofree char *to_client = NULL;

    (void)state;
    client(r, CPU_GET("sse4.1", "libvirt-7"));
    qemu(r, "{\"return\": true, \"id\": \"libvirt-7\"}\r\n");
    client(r, CPU_GET("avx", "libvirt-8"));
    /* An event before the reply is passed on and is no answer. */
    qemu(r, EVENT "{\"return\": false, \"id\": \"libvirt-8\"}\r\n");
    client(r, CPU_GET("bogus", "libvirt-9"));
    qemu(r,
         "{\"id\": \"libvirt-9\", \"error\": {\"class\": \"GenericError\", \"desc\": \"x\"}}\r\n");
    client(r, CPU_GET("unavailable-features", "libvirt-10"));
    qemu(r, "{\"return\": [], \"id\": \"libvirt-10\"}\r\n");
    assert_null(carrel_qmp_relay_take_learned(r));
    assert_false(carrel_qmp_relay_storm_over(r));
    client(r, OTHER);
    assert_true(carrel_qmp_relay_storm_over(r));
    to_qemu = take(carrel_qmp_relay_to_qemu(r));
    assert_string_equal(to_qemu, CPU_GET("sse4.1", "libvirt-7") CPU_GET("avx", "libvirt-8")
                                     CPU_GET("bogus", "libvirt-9")
                                         CPU_GET("unavailable-features", "libvirt-10") OTHER);
    to_client = take(carrel_qmp_relay_to_client(r));
    assert_string_equal(to_client,
                        "{\"return\": true, \"id\": \"libvirt-7\"}\r\n" EVENT
                        "{\"return\": false, \"id\": \"libvirt-8\"}\r\n"
                        "{\"id\": \"libvirt-9\", \"error\": {\"class\": \"GenericError\", "
                        "\"desc\": \"x\"}}\r\n{\"return\": [], \"id\": \"libvirt-10\"}\r\n");
    assert_int_equal(carrel_qmp_relay_answered(r), 0);
    learned = carrel_qmp_relay_take_learned(r);
    assert_non_null(learned);
    text = carrel_qmp_cache_format(learned);
    assert_string_equal(text, "avx 0\nsse4.1 1\n");
    assert_null(carrel_qmp_relay_take_learned(r));
}

/* With a cache, known properties are answered exactly as QEMU would, with libvirt's id; an
 * unknown one, and every other command, still goes to QEMU; nothing is learned. */
static void
test_answers(void **state)
{
    g_autoptr(GHashTable) known = cache_of("avx 0\nsse4.1 1\n");
    g_autoptr(CarrelQmpRelay) r = carrel_qmp_relay_new(known);
    g_autofree char *to_qemu = NULL;
    g_autofree char *to_client = NULL;

    (void)state;
    /* Split anywhere: a line is a line once its newline came. */
    client(r, "{\"execute\":\"qom-get\",\"arguments\":{\"path\":\"/machine/unat");
    client(r, "tached/device[0]\",\"property\":\"sse4.1\"},\"id\":\"libvirt-7\"}\r\n");
    client(r, CPU_GET("avx", "libvirt-8"));
    client(r, CPU_GET("pmu", "libvirt-9"));
    qemu(r, "{\"return\": true, \"id\": \"libvirt-9\"}\r\n");
    client(r, OTHER);
    to_client = take(carrel_qmp_relay_to_client(r));
    assert_string_equal(to_client, "{\"return\": true, \"id\": \"libvirt-7\"}\r\n"
                                   "{\"return\": false, \"id\": \"libvirt-8\"}\r\n"
                                   "{\"return\": true, \"id\": \"libvirt-9\"}\r\n");
    to_qemu = take(carrel_qmp_relay_to_qemu(r));
    assert_string_equal(to_qemu, CPU_GET("pmu", "libvirt-9") OTHER);
    assert_int_equal(carrel_qmp_relay_answered(r), 2);
    assert_null(carrel_qmp_relay_take_learned(r));
}

/* An answer never cuts into a line of QEMU's: it waits for that line's end. */
static void
test_answer_waits_for_line_end(void **state)
{
    g_autoptr(GHashTable) known = cache_of("avx 1\n");
    g_autoptr(CarrelQmpRelay) r = carrel_qmp_relay_new(known);
    g_autofree char *half = NULL;
    g_autofree char *whole = NULL;

    (void)state;
    qemu(r, "{\"event\": \"RESU");
    client(r, CPU_GET("avx", "libvirt-3"));
    half = take(carrel_qmp_relay_to_client(r));
    assert_string_equal(half, "{\"event\": \"RESU");
    qemu(r, "ME\"}\r\n");
    whole = take(carrel_qmp_relay_to_client(r));
    assert_string_equal(whole, "ME\"}\r\n{\"return\": true, \"id\": \"libvirt-3\"}\r\n");
}

/* Lines not exactly libvirt's CPU qom-get pass through: another path, extra members, a quote
 * in the name, and a line too long to be one (which turns the relay into a pipe). */
static void
test_passes_the_rest(void **state)
{
    static const char *const lines[] = {
        "{\"execute\":\"qom-get\",\"arguments\":{\"path\":\"/machine/peripheral/vcpu0\","
        "\"property\":\"avx\"},\"id\":\"libvirt-1\"}\r\n",
        "{\"execute\":\"qom-get\",\"arguments\":{\"path\":\"/machine/unattached/device[0]\","
        "\"property\":\"avx\",\"x\":1},\"id\":\"libvirt-2\"}\r\n",
        "{\"execute\":\"qom-get\",\"arguments\":{\"path\":\"/machine/unattached/device[0]\","
        "\"property\":\"av\\\"x\"},\"id\":\"libvirt-3\"}\r\n",
        "{\"execute\":\"qom-get\",\"arguments\":{\"path\":\"/machine/unattached/device[0]\","
        "\"property\":\"avx\"},\"id\":\"libvirt-4\"} \r\n",
        "garbage\n",
        "\n",
    };
    g_autoptr(GHashTable) known = cache_of("avx 1\n");
    g_autoptr(CarrelQmpRelay) r = carrel_qmp_relay_new(known);
    g_autoptr(GString) expected = g_string_new(NULL);
    g_autoptr(GString) long_line = g_string_new(NULL);
    g_autofree char *to_qemu = NULL;

    (void)state;
    for (guint i = 0; i < G_N_ELEMENTS(lines); i++) {
        client(r, lines[i]);
        g_string_append(expected, lines[i]);
    }
    g_string_append(long_line, "{\"execute\":\"x\",\"arguments\":\"");
    for (guint i = 0; i < 5000; i++)
        g_string_append_c(long_line, 'a');
    client(r, long_line->str);
    g_string_append(expected, long_line->str);
    /* A pipe from then on, even for a qom-get it knows. */
    client(r, "\"}\r\n" CPU_GET("avx", "libvirt-5"));
    g_string_append(expected, "\"}\r\n" CPU_GET("avx", "libvirt-5"));
    to_qemu = take(carrel_qmp_relay_to_qemu(r));
    assert_string_equal(to_qemu, expected->str);
    assert_int_equal(carrel_qmp_relay_answered(r), 0);
    assert_int_equal(carrel_qmp_relay_to_client(r)->len, 0);
}

/* A reply that is not exactly QEMU's to the pending id teaches nothing. */
static void
test_learns_only_exact_replies(void **state)
{
    static const char *const replies[] = {
        "{\"return\": true, \"id\": \"libvirt-70\"}\r\n",
        "{\"return\": true, \"id\": \"libvirt-7\", \"x\": 1}\r\n",
        "{\"return\":true,\"id\":\"libvirt-7\"}\r\n",
    };

    (void)state;
    for (guint i = 0; i < G_N_ELEMENTS(replies); i++) {
        g_autoptr(CarrelQmpRelay) r = carrel_qmp_relay_new(NULL);

        client(r, CPU_GET("avx", "libvirt-7"));
        qemu(r, replies[i]);
        client(r, OTHER);
        assert_null(carrel_qmp_relay_take_learned(r));
    }
}

static void
test_cache_text(void **state)
{
    static const char *const bad[] = {"avx 2\n", "avx\n", "a\"v 1\n", " 1\n", "avx 1 \n"};
    g_autoptr(GHashTable) empty = cache_of("");

    (void)state;
    assert_int_equal(g_hash_table_size(empty), 0);
    for (guint i = 0; i < G_N_ELEMENTS(bad); i++) {
        g_autoptr(GError) error = NULL;

        assert_null(carrel_qmp_cache_parse(bad[i], &error));
        assert_true(g_error_matches(error, CARREL_ERROR, CARREL_ERROR_INVALID_ARG));
    }
}

static void
test_monitor_args(void **state)
{
    const char *argv[] = {"qemu",
                          "-name",
                          "guest=x",
                          "-chardev",
                          "socket,id=charmonitor,fd=31,server=on,wait=off",
                          "-mon",
                          "chardev=charmonitor,id=monitor,mode=control",
                          NULL};
    const char *other[] = {"qemu", "-chardev", "socket,id=charmonitor,path=/m.sock,server=on",
                           NULL};
    g_auto(GStrv) out = NULL;
    int listen_fd = -1;

    (void)state;
    assert_true(carrel_util_qemu_monitor_args(argv, 5, &out, &listen_fd));
    assert_int_equal(listen_fd, 31);
    assert_int_equal(g_strv_length(out), 7);
    assert_string_equal(out[4], "socket,id=charmonitor,fd=5,server=on,wait=off");
    assert_string_equal(out[6], "chardev=charmonitor,id=monitor,mode=control");
    g_clear_pointer(&out, g_strfreev);
    listen_fd = -1;
    assert_false(carrel_util_qemu_monitor_args(other, 5, &out, &listen_fd));
    assert_null(out);
    assert_int_equal(listen_fd, -1);
}

/* The key changes with the binary and every CPU-shaping argument, not with the rest. */
static void
test_cpu_key(void **state)
{
    const char *a[] = {"qemu", "-cpu", "qemu64", "-machine", "pc", "-m", "512", NULL};
    const char *b[] = {"qemu", "-cpu", "qemu64", "-machine", "pc", "-m", "1024", NULL};
    const char *c[] = {"qemu", "-cpu", "qemu64,+avx", "-machine", "pc", "-m", "512", NULL};
    const char *d[] = {"qemu", "-cpu", "qemu64", "-machine", "pc", "-smp", "2", NULL};
    g_autofree char *ka = carrel_util_qemu_cpu_key(a, "/usr/bin/qemu:1:2:3:4");
    g_autofree char *kb = carrel_util_qemu_cpu_key(b, "/usr/bin/qemu:1:2:3:4");
    g_autofree char *kc = carrel_util_qemu_cpu_key(c, "/usr/bin/qemu:1:2:3:4");
    g_autofree char *kd = carrel_util_qemu_cpu_key(d, "/usr/bin/qemu:1:2:3:4");
    g_autofree char *ke = carrel_util_qemu_cpu_key(a, "/usr/bin/qemu:1:2:3:5");

    (void)state;
    assert_int_equal(strlen(ka), 64);
    assert_string_equal(ka, kb);
    assert_string_not_equal(ka, kc);
    assert_string_not_equal(ka, kd);
    assert_string_not_equal(ka, ke);
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_learns),
        cmocka_unit_test(test_answers),
        cmocka_unit_test(test_answer_waits_for_line_end),
        cmocka_unit_test(test_passes_the_rest),
        cmocka_unit_test(test_learns_only_exact_replies),
        cmocka_unit_test(test_cache_text),
        cmocka_unit_test(test_monitor_args),
        cmocka_unit_test(test_cpu_key),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
