/*
 * Accelerator detection. /dev/kvm and libvirt's capabilities can both report KVM on hosts where
 * a KVM guest then hangs (broken nested virtualisation) or QEMU aborts on an MSR, so AUTO only
 * picks KVM after a probe kernel has really booted under it.
 */
#define _GNU_SOURCE /* strverscmp */
#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <unistd.h>

#define CARREL_HYPERVISOR_PRIV_H_ALLOW
#include "hypervisor/hypervisor-priv.h"

#define PROBE_DEFAULT_TIMEOUT_S 15
#define PROBE_MAX_OUTPUT (1024 * 1024)
#define PROBE_REASON_MAX 160
#define QEMU_PROGRAM "qemu-system-x86_64"

typedef struct {
    GCancellable *cancel;
    GString *text;
    char buf[4096];
    gboolean reading;  /* a read is in flight */
    gboolean finished; /* end of output, read error, proof of boot or too much output */
    gboolean booted;
    gboolean timed_out;
} ProbeState;

/*
 * "Linux version" is printed once the console is up; "VFS: " (filesystems registering) and the
 * final panic (no root fs) come after timers, interrupts and the initcalls ran: a hung or
 * half-working accelerator never gets that far.
 */
static gboolean
shows_boot(const char *text)
{
    const char *start = strstr(text, "Linux version");

    return start && (strstr(start, "VFS: ") || strstr(start, "Kernel panic"));
}

static void start_read(GInputStream *out, ProbeState *st);

static void
on_read(GObject *source, GAsyncResult *res, gpointer user_data)
{
    ProbeState *st = user_data;
    gssize n = g_input_stream_read_finish(G_INPUT_STREAM(source), res, NULL);

    st->reading = FALSE;
    if (n <= 0) {
        st->finished = TRUE;
        return;
    }
    g_string_append_len(st->text, st->buf, n);
    if (shows_boot(st->text->str))
        st->booted = TRUE;
    if (st->booted || st->text->len > PROBE_MAX_OUTPUT || st->timed_out) {
        st->finished = TRUE;
        return;
    }
    start_read(G_INPUT_STREAM(source), st);
}

static void
start_read(GInputStream *out, ProbeState *st)
{
    st->reading = TRUE;
    g_input_stream_read_async(out, st->buf, sizeof(st->buf), G_PRIORITY_DEFAULT, st->cancel,
                              on_read, st);
}

static gboolean
on_probe_timeout(gpointer user_data)
{
    ProbeState *st = user_data;

    st->timed_out = TRUE;
    return G_SOURCE_REMOVE;
}

/* The last non-empty line of QEMU's output, one short printable line (QEMU's error message). */
static char *
last_line(const char *text)
{
    g_auto(GStrv) lines = g_strsplit(text, "\n", -1);
    g_autofree char *line = NULL;
    guint n = g_strv_length(lines);

    while (n > 0 && !*g_strstrip(lines[n - 1]))
        n--;
    if (n == 0)
        return g_strdup("no output");
    line = g_strdup(lines[n - 1]);
    for (char *p = line; *p; p++) {
        if ((guchar)*p < 0x20 || *p == 0x7f)
            *p = ' ';
    }
    if (strlen(line) > PROBE_REASON_MAX)
        line[PROBE_REASON_MAX] = '\0';
    return g_utf8_make_valid(line, -1);
}

/* Runs the loop until the probe ends or the deadline passes; kills and reaps QEMU either way. */
static void
run_probe(GSubprocess *proc, GMainContext *ctx, ProbeState *st, guint timeout_s)
{
    GSource *timer = g_timeout_source_new_seconds(timeout_s);

    g_source_set_callback(timer, on_probe_timeout, st, NULL);
    g_source_attach(timer, ctx);
    start_read(g_subprocess_get_stdout_pipe(proc), st);
    while (!st->finished && !st->timed_out)
        g_main_context_iteration(ctx, TRUE);
    /* SIGKILL: a QEMU spinning in a broken KVM does not react to anything gentler. */
    g_subprocess_force_exit(proc);
    g_cancellable_cancel(st->cancel);
    while (st->reading)
        g_main_context_iteration(ctx, TRUE);
    while (!g_subprocess_wait(proc, NULL, NULL))
        ;
    g_source_destroy(timer);
    g_source_unref(timer);
}

static char *
describe_probe(const ProbeState *st, guint timeout_s, gint64 elapsed_us)
{
    g_autofree char *line = NULL;

    if (st->booted)
        return g_strdup_printf("kernel booted in %.1f s", (double)elapsed_us / G_USEC_PER_SEC);
    if (st->timed_out && strstr(st->text->str, "Linux version"))
        return g_strdup_printf("kernel started but did not finish booting within %u s", timeout_s);
    if (st->timed_out)
        return g_strdup_printf("no kernel output within %u s", timeout_s);
    if (st->text->len > PROBE_MAX_OUTPUT)
        return g_strdup("too much output without a finished boot");
    line = last_line(st->text->str);
    return g_strdup_printf("qemu exited: %s", line);
}

gboolean
carrel_hypervisor_probe_boot(const char *qemu, const char *accel, const char *cpu,
                             const char *kernel, guint timeout_s, char **ret_reason)
{
    const char *argv[] = {qemu,
                          "-accel",
                          accel,
                          "-cpu",
                          cpu,
                          "-machine",
                          "pc",
                          "-m",
                          "128",
                          "-nodefaults",
                          "-no-user-config",
                          "-display",
                          "none",
                          "-serial",
                          "stdio",
                          "-no-reboot",
                          "-kernel",
                          kernel,
                          "-append",
                          "console=ttyS0 panic=-1 loglevel=7",
                          NULL};
    g_autoptr(GMainContext) ctx = g_main_context_new();
    g_autoptr(GCancellable) cancel = g_cancellable_new();
    g_autoptr(GString) text = g_string_new(NULL);
    g_autoptr(GSubprocess) proc = NULL;
    g_autoptr(GError) local = NULL;
    ProbeState st = {.cancel = cancel, .text = text};
    gint64 started = g_get_monotonic_time();

    /* stdin stays /dev/null; stderr joins stdout so QEMU's own error is the last line. */
    proc = g_subprocess_newv(argv, G_SUBPROCESS_FLAGS_STDOUT_PIPE | G_SUBPROCESS_FLAGS_STDERR_MERGE,
                             &local);
    if (!proc) {
        if (ret_reason)
            *ret_reason = g_strdup_printf("cannot run '%s': %s", qemu, local->message);
        return FALSE;
    }
    g_main_context_push_thread_default(ctx);
    run_probe(proc, ctx, &st, timeout_s);
    g_main_context_pop_thread_default(ctx);
    if (ret_reason)
        *ret_reason = describe_probe(&st, timeout_s, g_get_monotonic_time() - started);
    return st.booted;
}

static char *
find_qemu(void)
{
    char *path = g_find_program_in_path(QEMU_PROGRAM);

    /* A daemon's PATH may be minimal; Debian installs QEMU here. */
    if (!path && g_file_test("/usr/bin/" QEMU_PROGRAM, G_FILE_TEST_IS_EXECUTABLE))
        path = g_strdup("/usr/bin/" QEMU_PROGRAM);
    return path;
}

/* The newest readable /boot/vmlinuz-*, or NULL. */
static char *
find_boot_kernel(void)
{
    g_autoptr(GDir) dir = g_dir_open("/boot", 0, NULL);
    g_autofree char *best = NULL;
    const char *entry;

    while (dir && (entry = g_dir_read_name(dir))) {
        g_autofree char *path = NULL;

        if (!g_str_has_prefix(entry, "vmlinuz-"))
            continue;
        path = g_build_filename("/boot", entry, NULL);
        if (access(path, R_OK) != 0 || !g_file_test(path, G_FILE_TEST_IS_REGULAR))
            continue;
        if (!best || strverscmp(path, best) > 0) {
            g_free(best);
            best = g_steal_pointer(&path);
        }
    }
    return g_steal_pointer(&best);
}

/* TRUE when KVM proved itself; otherwise *ret_why says why not. */
static gboolean
kvm_works(const char *probe_kernel, guint timeout_s, char **ret_why)
{
    g_autofree char *kernel = NULL;
    g_autofree char *qemu = NULL;
    int fd = open("/dev/kvm", O_RDWR | O_CLOEXEC);

    if (fd < 0) {
        *ret_why = g_strdup_printf("cannot open /dev/kvm: %s", g_strerror(errno));
        return FALSE;
    }
    close(fd);
    kernel = probe_kernel ? g_strdup(probe_kernel) : find_boot_kernel();
    if (!kernel) {
        *ret_why = g_strdup("no kernel to probe KVM with");
        return FALSE;
    }
    if (access(kernel, R_OK) != 0) {
        *ret_why = g_strdup_printf("kernel '%s' is not readable", kernel);
        return FALSE;
    }
    qemu = find_qemu();
    if (!qemu) {
        *ret_why = g_strdup(QEMU_PROGRAM " not found");
        return FALSE;
    }
    /* -cpu host: on some hosts exactly this aborts ("failed to set MSR"); better here than later.
     */
    return carrel_hypervisor_probe_boot(qemu, "kvm", "host", kernel, timeout_s, ret_why);
}

CarrelAccel
carrel_hypervisor_resolve_accel(CarrelAccel requested, const char *probe_kernel, guint timeout_s,
                                char **ret_reason)
{
    g_autofree char *why = NULL;
    CarrelAccel result;

    if (requested == CARREL_ACCEL_KVM || requested == CARREL_ACCEL_TCG) {
        if (ret_reason)
            *ret_reason = g_strdup_printf("%s requested", carrel_accel_to_string(requested));
        return requested;
    }
    if (requested != CARREL_ACCEL_AUTO) {
        if (ret_reason)
            *ret_reason = g_strdup("unknown accelerator requested; using tcg");
        return CARREL_ACCEL_TCG;
    }
    if (timeout_s == 0)
        timeout_s = PROBE_DEFAULT_TIMEOUT_S;
    result = kvm_works(probe_kernel, timeout_s, &why) ? CARREL_ACCEL_KVM : CARREL_ACCEL_TCG;
    if (ret_reason)
        *ret_reason =
            g_strdup_printf("kvm probe: %s; using %s", why, carrel_accel_to_string(result));
    return result;
}
