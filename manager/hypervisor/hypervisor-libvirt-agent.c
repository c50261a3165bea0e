/*
 * The libvirt backend: the guest agent (qemu-ga through libvirt): ping, clock, filesystem freeze,
 * guest-exec and guest files. Every reply is the guest's, untrusted, and parsed in
 * hypervisor-agent.c.
 */
#include <stdlib.h>
#include <time.h>

#define CARREL_HYPERVISOR_PRIV_H_ALLOW
#include "hypervisor/hypervisor-libvirt-priv.h"

/* Longest response timeout a guest-ping may ask for. */
#define AGENT_MAX_TIMEOUT_S 300
/* guest-exec-status polling: every 10 ms for the first EXEC_POLL_FAST_US (most commands take
 * tens of milliseconds under TCG: a first wait of 50 ms made a `true` cost 1.25x a bare 10 ms
 * poll loop, and doubling from 10 ms saw a `true` that ended at ~55 ms only at ~100 ms), then
 * doubling up to EXEC_POLL_MAX_US. */
#define EXEC_POLL_MIN_US (10 * 1000)
#define EXEC_POLL_FAST_US (250 * 1000)
#define EXEC_POLL_MAX_US (200 * 1000)
/* How long past its deadline a guest program may take before the host kills it itself. */
#define EXEC_GRACE_S 5
/* How long the host then waits for the kill to show in guest-exec-status. */
#define EXEC_REAP_S 3
/* Guest and host clocks may disagree by this much about when the deadline passed. */
#define EXEC_SKEW_US (500 * 1000)
#define SIGKILL_NUMBER 9

/* The test driver runs no guest: its "agent" is ready whenever the domain runs. */
static gboolean
test_agent_ready(virDomainPtr dom, GError **error)
{
    if (virDomainIsActive(dom) == 1)
        return TRUE;
    virResetLastError();
    g_set_error(error, CARREL_ERROR, CARREL_ERROR_WRONG_STATE, "domain is not running");
    return FALSE;
}

gboolean
carrel_hypervisor_libvirt_agent_ping(CarrelHypervisor *hv, const char *name, guint timeout_s,
                                     GError **error)
{
    CarrelLibvirtBackend *be = hv->backend_data;
    g_autoptr(virDomain) dom = carrel_hypervisor_libvirt_lookup(be, name, error);
    char *reply;

    if (!dom)
        return FALSE;
    if (be->is_test)
        return test_agent_ready(dom, error);
    /* 0 would mean "do not wait"; the reply is the guest's, so it is not even looked at. */
    reply = virDomainQemuAgentCommand(dom, "{\"execute\":\"guest-ping\"}",
                                      (int)CLAMP(timeout_s, 1, AGENT_MAX_TIMEOUT_S), 0);
    if (!reply) {
        carrel_hypervisor_libvirt_set_error(error, "pinging guest agent");
        return FALSE;
    }
    free(reply);
    return TRUE;
}

gboolean
carrel_hypervisor_libvirt_fs_freeze(CarrelHypervisor *hv, const char *name, gboolean freeze,
                                    GError **error)
{
    CarrelLibvirtBackend *be = hv->backend_data;
    g_autoptr(virDomain) dom = NULL;
    int rc;

    if (carrel_hypervisor_libvirt_refuse_on_test(be, "guest-fsfreeze", error) ||
        !(dom = carrel_hypervisor_libvirt_lookup(be, name, error)))
        return FALSE;
    if (virDomainAgentSetResponseTimeout(dom, CARREL_HYPERVISOR_AGENT_TIMEOUT_S, 0) < 0) {
        carrel_hypervisor_libvirt_set_error(error, "setting guest agent timeout");
        return FALSE;
    }
    rc = freeze ? virDomainFSFreeze(dom, NULL, 0, 0) : virDomainFSThaw(dom, NULL, 0, 0);
    if (rc < 0) {
        carrel_hypervisor_libvirt_set_error(error, freeze ? "guest-fsfreeze-freeze"
                                                          : "guest-fsfreeze-thaw");
        return FALSE;
    }
    return TRUE;
}

gboolean
carrel_hypervisor_libvirt_set_time(CarrelHypervisor *hv, const char *name, GError **error)
{
    CarrelLibvirtBackend *be = hv->backend_data;
    g_autoptr(virDomain) dom = carrel_hypervisor_libvirt_lookup(be, name, error);
    struct timespec now;

    if (!dom)
        return FALSE;
    if (be->is_test)
        return test_agent_ready(dom, error);
    /* virDomainSetTime has no timeout argument; libvirt's default would wait forever. */
    if (virDomainAgentSetResponseTimeout(dom, CARREL_HYPERVISOR_AGENT_TIMEOUT_S, 0) < 0) {
        carrel_hypervisor_libvirt_set_error(error, "setting guest agent timeout");
        return FALSE;
    }
    clock_gettime(CLOCK_REALTIME, &now);
    if (virDomainSetTime(dom, (long long)now.tv_sec, (unsigned int)now.tv_nsec, 0) < 0) {
        carrel_hypervisor_libvirt_set_error(error, "setting guest time");
        return FALSE;
    }
    return TRUE;
}

/*
 * One agent command with carrel's response timeout; the reply is the guest's, untrusted. NULL
 * leaves libvirt's error for the caller.
 */
static char *
agent_send(virDomainPtr dom, const char *command)
{
    char *reply = virDomainQemuAgentCommand(dom, command, CARREL_HYPERVISOR_AGENT_TIMEOUT_S, 0);
    char *copy;

    if (!reply)
        return NULL;
    copy = g_strndup(reply, CARREL_HYPERVISOR_AGENT_REPLY_MAX + 1);
    free(reply);
    return copy; /* a longer reply stays longer than the limit: the parsers refuse it */
}

static char *
agent_command_full(virDomainPtr dom, const char *command, const char *what, gboolean guest_file,
                   GError **error)
{
    char *reply = agent_send(dom, command);

    if (!reply)
        carrel_hypervisor_libvirt_set_error_full(error, what, guest_file);
    return reply;
}

static char *
agent_command(virDomainPtr dom, const char *command, const char *what, GError **error)
{
    return agent_command_full(dom, command, what, FALSE, error);
}

static gboolean
exec_poll(virDomainPtr dom, gint64 pid, gsize max_output, CarrelExecStatus *status, GError **error)
{
    g_autofree char *command = carrel_hypervisor_agent_status_command(pid);
    g_autofree char *reply = agent_command(dom, command, "reading guest-exec status", error);

    carrel_exec_status_clear(status);
    return reply && carrel_hypervisor_agent_parse_status(reply, max_output, status, error);
}

/* Polls until the program ended or deadline (monotonic) passed. */
static gboolean
exec_wait(virDomainPtr dom, gint64 pid, gint64 deadline, gsize max_output, CarrelExecStatus *status,
          GError **error)
{
    gint64 interval = EXEC_POLL_MIN_US, fast_until = g_get_monotonic_time() + EXEC_POLL_FAST_US;

    for (;;) {
        gint64 now;

        if (!exec_poll(dom, pid, max_output, status, error))
            return FALSE;
        now = g_get_monotonic_time();
        if (status->exited || now >= deadline)
            return TRUE;
        g_usleep(MIN(interval, deadline - now));
        if (now >= fast_until)
            interval = MIN(interval * 2, EXEC_POLL_MAX_US);
    }
}

/* The guest missed its own deadline (stalled?): kill the group from here, reap it briefly. */
static void
exec_kill(virDomainPtr dom, gint64 pid, gsize max_output, CarrelExecStatus *status)
{
    g_autofree char *command = carrel_hypervisor_agent_kill_command(pid);
    g_autofree char *reply = agent_command(dom, command, "killing guest program", NULL);
    gint64 deadline = g_get_monotonic_time() + EXEC_REAP_S * G_USEC_PER_SEC;
    gint64 kill_pid = 0;

    if (!exec_wait(dom, pid, deadline, max_output, status, NULL))
        carrel_exec_status_clear(status);
    /* qemu-ga keeps every finished program until its status is read once. */
    if (reply && carrel_hypervisor_agent_parse_pid(reply, &kill_pid, NULL)) {
        g_auto(CarrelExecStatus) killer = {0};
        exec_wait(dom, kill_pid, g_get_monotonic_time() + EXEC_REAP_S * G_USEC_PER_SEC, 0, &killer,
                  NULL);
    }
}

void
carrel_hypervisor_libvirt_agent_forget(CarrelLibvirtBackend *be, const char *name)
{
    g_autoptr(GMutexLocker) locker G_GNUC_UNUSED = g_mutex_locker_new(&be->runner_lock);

    g_hash_table_remove(be->no_runner, name);
}

static gboolean
has_runner(CarrelLibvirtBackend *be, const char *name)
{
    g_autoptr(GMutexLocker) locker G_GNUC_UNUSED = g_mutex_locker_new(&be->runner_lock);

    return !g_hash_table_contains(be->no_runner, name);
}

static void
remember_no_runner(CarrelLibvirtBackend *be, const char *name)
{
    g_autoptr(GMutexLocker) locker G_GNUC_UNUSED = g_mutex_locker_new(&be->runner_lock);

    g_hash_table_add(be->no_runner, g_strdup(name));
}

/*
 * Starts run under carrel-run, or under timeout(1) where the guest has no carrel-run (learnt
 * from the first guest-exec that could not start it, then remembered). The pid is the program's.
 */
static gboolean
exec_start(CarrelLibvirtBackend *be, virDomainPtr dom, const char *name, const CarrelGuestExec *run,
           gint64 *ret_pid, GError **error)
{
    gboolean runner = has_runner(be, name);
    g_autofree char *command =
        carrel_hypervisor_agent_exec_command(run->argv, run->stdin_bytes, run->timeout_s, runner);
    g_autofree char *reply = agent_send(dom, command);

    if (!reply && runner && carrel_hypervisor_agent_runner_missing(virGetLastErrorMessage())) {
        remember_no_runner(be, name);
        virResetLastError();
        g_free(command);
        command = carrel_hypervisor_agent_exec_command(run->argv, run->stdin_bytes, run->timeout_s,
                                                       FALSE);
        reply = agent_send(dom, command);
    }
    if (!reply) {
        carrel_hypervisor_libvirt_set_error(error, "starting guest program");
        return FALSE;
    }
    return carrel_hypervisor_agent_parse_pid(reply, ret_pid, error);
}

gboolean
carrel_hypervisor_libvirt_agent_exec(CarrelHypervisor *hv, const char *name,
                                     const CarrelGuestExec *run, CarrelExecResult *ret_result,
                                     GError **error)
{
    CarrelLibvirtBackend *be = hv->backend_data;
    g_autoptr(virDomain) dom = NULL;
    g_auto(CarrelExecStatus) status = {0};
    gint64 started = g_get_monotonic_time(), pid = 0, elapsed;
    gint64 deadline = started + ((gint64)run->timeout_s + EXEC_GRACE_S) * G_USEC_PER_SEC;
    gboolean timed_out;

    if (carrel_hypervisor_libvirt_refuse_on_test(be, "guest-exec", error) ||
        !(dom = carrel_hypervisor_libvirt_lookup(be, name, error)))
        return FALSE;
    if (!exec_start(be, dom, name, run, &pid, error) ||
        !exec_wait(dom, pid, deadline, run->max_output, &status, error))
        return FALSE;
    if (!status.exited)
        exec_kill(dom, pid, run->max_output, &status);
    elapsed = g_get_monotonic_time() - started;
    /* The guest's wrapper kills with SIGKILL at the deadline; the host clock confirms it. */
    timed_out =
        !status.exited || (status.signal == SIGKILL_NUMBER &&
                           elapsed >= (gint64)run->timeout_s * G_USEC_PER_SEC - EXEC_SKEW_US);
    ret_result->exit_code = status.exited ? status.exit_code : -1;
    ret_result->stdout_bytes = status.out ? g_bytes_ref(status.out) : g_bytes_new(NULL, 0);
    ret_result->stderr_bytes = status.err ? g_bytes_ref(status.err) : g_bytes_new(NULL, 0);
    ret_result->truncated = status.truncated;
    ret_result->timed_out = timed_out;
    ret_result->duration_ms = elapsed / 1000;
    return TRUE;
}

static gboolean
file_open(virDomainPtr dom, const char *path, const char *mode, gint64 *ret_handle, GError **error)
{
    g_autofree char *command = carrel_hypervisor_agent_file_open_command(path, mode);
    g_autofree char *reply = agent_command_full(dom, command, "guest-file-open", TRUE, error);

    return reply && carrel_hypervisor_agent_parse_file_handle(reply, ret_handle, error);
}

static void
file_close(virDomainPtr dom, gint64 handle)
{
    g_autofree char *command = carrel_hypervisor_agent_file_close_command(handle);

    /* Best effort: a handle left open dies with qemu-ga; nothing to report to the caller. */
    g_free(agent_command(dom, command, "guest-file-close", NULL));
}

static gboolean
file_read_all(virDomainPtr dom, gint64 handle, guint64 max, CarrelHypervisorChunkFunc sink,
              gpointer sink_data, GError **error)
{
    guint64 total = 0;

    for (;;) {
        g_autofree char *command =
            carrel_hypervisor_agent_file_read_command(handle, CARREL_HYPERVISOR_FILE_CHUNK);
        g_autofree char *reply = agent_command(dom, command, "guest-file-read", error);
        g_autoptr(GBytes) chunk = NULL;
        gboolean eof = FALSE;

        if (!reply || !carrel_hypervisor_agent_parse_file_read(reply, CARREL_HYPERVISOR_FILE_CHUNK,
                                                               &chunk, &eof, error))
            return FALSE;
        total += g_bytes_get_size(chunk);
        if (total > max) {
            g_set_error(error, CARREL_ERROR, CARREL_ERROR_LIMIT,
                        "file is larger than %" G_GUINT64_FORMAT " bytes", max);
            return FALSE;
        }
        if (!sink(g_bytes_get_data(chunk, NULL), g_bytes_get_size(chunk), sink_data, error))
            return FALSE;
        /* A read of nothing without eof would loop forever on a lying agent. */
        if (eof || g_bytes_get_size(chunk) == 0)
            return TRUE;
    }
}

gboolean
carrel_hypervisor_libvirt_file_read(CarrelHypervisor *hv, const char *name, const char *path,
                                    guint64 max, CarrelHypervisorChunkFunc sink, gpointer sink_data,
                                    GError **error)
{
    CarrelLibvirtBackend *be = hv->backend_data;
    g_autoptr(virDomain) dom = NULL;
    gint64 handle = 0;
    gboolean ok;

    if (carrel_hypervisor_libvirt_refuse_on_test(be, "guest-file-read", error) ||
        !(dom = carrel_hypervisor_libvirt_lookup(be, name, error)) ||
        !file_open(dom, path, "r", &handle, error))
        return FALSE;
    ok = file_read_all(dom, handle, max, sink, sink_data, error);
    file_close(dom, handle);
    return ok;
}

static gboolean
file_write_all(virDomainPtr dom, gint64 handle, CarrelHypervisorSourceFunc source,
               gpointer source_data, GError **error)
{
    g_autofree guint8 *buf = g_malloc(CARREL_HYPERVISOR_FILE_CHUNK);

    for (;;) {
        gsize len = 0, done = 0;

        if (!source(buf, CARREL_HYPERVISOR_FILE_CHUNK, &len, source_data, error))
            return FALSE;
        if (len == 0)
            return TRUE;
        while (done < len) {
            gsize n = len - done, count = 0;
            g_autofree char *command =
                carrel_hypervisor_agent_file_write_command(handle, buf + done, n);
            g_autofree char *reply = agent_command(dom, command, "guest-file-write", error);

            if (!reply || !carrel_hypervisor_agent_parse_file_write(reply, n, &count, error))
                return FALSE;
            if (count == 0) {
                g_set_error(error, CARREL_ERROR, CARREL_ERROR_HYPERVISOR,
                            "guest agent wrote nothing (disk full?)");
                return FALSE;
            }
            done += count;
        }
    }
}

gboolean
carrel_hypervisor_libvirt_file_write(CarrelHypervisor *hv, const char *name, const char *path,
                                     CarrelHypervisorSourceFunc source, gpointer source_data,
                                     GError **error)
{
    CarrelLibvirtBackend *be = hv->backend_data;
    g_autoptr(virDomain) dom = NULL;
    gint64 handle = 0;
    gboolean ok;

    if (carrel_hypervisor_libvirt_refuse_on_test(be, "guest-file-write", error) ||
        !(dom = carrel_hypervisor_libvirt_lookup(be, name, error)) ||
        !file_open(dom, path, "w", &handle, error))
        return FALSE;
    ok = file_write_all(dom, handle, source, source_data, error);
    file_close(dom, handle);
    return ok;
}
