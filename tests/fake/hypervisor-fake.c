/*
 * The fake backend: domains live in a hash table inside the object, with the same semantics as
 * the libvirt backend (errors, idempotent destroy/undefine, transient domains), so core's unit
 * tests exercise the real contract without libvirt.
 */
#include <string.h>

#define CARREL_HYPERVISOR_BACKEND_H_ALLOW
#include "hypervisor/hypervisor-backend.h"
#include "tests/fake/hypervisor-fake-priv.h"

/* What the fake's save images hold: a CPU cookie like libvirt's and a stand-in memory state. */
#define FAKE_COOKIE                                                                                \
    "<qemu-save-cookie>\n  <cpu mode='custom' match='exact'/>\n</qemu-save-cookie>\n"
#define FAKE_MEMORY "carrel fake memory state\n"
/* The fake's default screen: black, 4x3, as PPM. */
#define FAKE_SCREEN_WIDTH 4
#define FAKE_SCREEN_HEIGHT 3

static const char *const fake_op_names[] = {
    "define_start",    "start",         "shutdown",       "destroy",
    "undefine",        "get_state",     "agent_ping",     "list",
    "define",          "save",          "restore",        "set_time",
    "agent_exec",      "screenshot",    "file_read",      "file_write",
    "hid_send",        "fs_freeze",     "pause",          "ensure_network",
    "set_balloon",     "spice_info",    "spice_password", "get_pause_reason",
    "disk_allocation", "snapshot_live", "cpu_time",
};

static void
fake_domain_free(gpointer data)
{
    FakeDomain *dom = data;

    g_free(dom->session_id);
    g_free(dom->instance_id);
    g_free(dom->xml);
    g_free(dom->spice_password);
    g_free(dom);
}

/* The domain described by xml (state and persistence left to the caller). */
static FakeDomain *
parse_domain(const char *xml, char **ret_name, GError **error)
{
    g_autofree char *name = NULL;
    FakeDomain *dom = g_new0(FakeDomain, 1);

    if (!carrel_hypervisor_scan_xml(xml, &name, &dom->session_id, &dom->instance_id, error)) {
        fake_domain_free(dom);
        return NULL;
    }
    if (!name || !*name) {
        g_set_error(error, CARREL_ERROR, CARREL_ERROR_HYPERVISOR, "domain xml has no name");
        fake_domain_free(dom);
        return NULL;
    }
    dom->xml = g_strdup(xml);
    *ret_name = g_steal_pointer(&name);
    return dom;
}

/* Called with the lock held: TRUE (and error set) when op was told to fail now. */
gboolean
fake_take_failure(FakeBackend *be, const char *op, GError **error)
{
    if (!g_hash_table_remove(be->fail_next, op))
        return FALSE;
    g_set_error(error, CARREL_ERROR, CARREL_ERROR_HYPERVISOR, "%s: injected failure", op);
    return TRUE;
}

/* Called with the lock held. */
FakeDomain *
fake_find_domain(FakeBackend *be, const char *name, GError **error)
{
    FakeDomain *dom = g_hash_table_lookup(be->domains, name);

    if (!dom)
        g_set_error(error, CARREL_ERROR, CARREL_ERROR_NOT_FOUND, "domain does not exist");
    return dom;
}

/* Called with the lock held: a transient domain disappears when it stops, as in libvirt. */
static void
power_off(FakeBackend *be, const char *name, FakeDomain *dom)
{
    dom->state = CARREL_DOMAIN_SHUTOFF;
    if (!dom->persistent)
        g_hash_table_remove(be->domains, name);
}

/* Called with the lock held: QEMU starts, with a new run id and no SPICE password. */
static void
run(FakeBackend *be, FakeDomain *dom)
{
    dom->state = CARREL_DOMAIN_RUNNING;
    dom->paused_by = CARREL_PAUSE_NONE;
    dom->run_id = ++be->next_run_id;
    g_clear_pointer(&dom->spice_password, g_free);
    dom->spice_valid_until = 0;
    /* A boot or a restore shows the image's size until carrel-guest screen sets another. */
    dom->screen_width = dom->screen_height = 0;
}

static gboolean
fake_define_start(CarrelHypervisor *hv, const char *xml, GError **error)
{
    FakeBackend *be = hv->backend_data;
    g_autoptr(GMutexLocker) locker G_GNUC_UNUSED = g_mutex_locker_new(&be->lock);
    g_autofree char *name = NULL;
    FakeDomain *dom;

    if (fake_take_failure(be, "define_start", error))
        return FALSE;
    dom = parse_domain(xml, &name, error);
    if (!dom) {
        g_prefix_error(error, "defining: ");
        return FALSE;
    }
    if (g_hash_table_contains(be->domains, name)) {
        fake_domain_free(dom);
        g_set_error(error, CARREL_ERROR, CARREL_ERROR_EXISTS, "domain already exists");
        return FALSE;
    }
    run(be, dom);
    dom->persistent = TRUE;
    g_hash_table_insert(be->domains, g_steal_pointer(&name), dom);
    return TRUE;
}

static gboolean
fake_start(CarrelHypervisor *hv, const char *name, GError **error)
{
    FakeBackend *be = hv->backend_data;
    g_autoptr(GMutexLocker) locker G_GNUC_UNUSED = g_mutex_locker_new(&be->lock);
    FakeDomain *dom;

    if (fake_take_failure(be, "start", error) || !(dom = fake_find_domain(be, name, error)))
        return FALSE;
    if (dom->state != CARREL_DOMAIN_SHUTOFF && dom->state != CARREL_DOMAIN_CRASHED) {
        g_set_error(error, CARREL_ERROR, CARREL_ERROR_WRONG_STATE, "starting: domain is %s",
                    carrel_domain_state_to_string(dom->state));
        return FALSE;
    }
    run(be, dom);
    return TRUE;
}

static gboolean
fake_shutdown(CarrelHypervisor *hv, const char *name, guint timeout_s, GError **error)
{
    FakeBackend *be = hv->backend_data;
    g_autoptr(GMutexLocker) locker G_GNUC_UNUSED = g_mutex_locker_new(&be->lock);
    FakeDomain *dom;

    if (fake_take_failure(be, "shutdown", error) || !(dom = fake_find_domain(be, name, error)))
        return FALSE;
    if (dom->state == CARREL_DOMAIN_PAUSED) {
        /* A paused guest cannot react to the request: it times out, as a real one would. */
        g_set_error(error, CARREL_ERROR, CARREL_ERROR_TIMEOUT,
                    "guest did not power off within %u s", timeout_s);
        return FALSE;
    }
    if (dom->state != CARREL_DOMAIN_CRASHED)
        power_off(be, name, dom);
    return TRUE;
}

static gboolean
fake_destroy(CarrelHypervisor *hv, const char *name, GError **error)
{
    FakeBackend *be = hv->backend_data;
    g_autoptr(GMutexLocker) locker G_GNUC_UNUSED = g_mutex_locker_new(&be->lock);
    FakeDomain *dom;

    if (fake_take_failure(be, "destroy", error) || !(dom = fake_find_domain(be, name, error)))
        return FALSE;
    if (dom->state != CARREL_DOMAIN_CRASHED)
        power_off(be, name, dom);
    return TRUE;
}

static gboolean
fake_undefine(CarrelHypervisor *hv, const char *name, GError **error)
{
    FakeBackend *be = hv->backend_data;
    g_autoptr(GMutexLocker) locker G_GNUC_UNUSED = g_mutex_locker_new(&be->lock);
    FakeDomain *dom;

    if (fake_take_failure(be, "undefine", error))
        return FALSE;
    dom = g_hash_table_lookup(be->domains, name);
    if (!dom)
        return TRUE;
    if (dom->state == CARREL_DOMAIN_SHUTOFF || dom->state == CARREL_DOMAIN_CRASHED)
        g_hash_table_remove(be->domains, name);
    else
        dom->persistent = FALSE; /* keeps running, gone once it stops */
    return TRUE;
}

static gboolean
fake_get_state(CarrelHypervisor *hv, const char *name, CarrelDomainState *ret_state, GError **error)
{
    FakeBackend *be = hv->backend_data;
    g_autoptr(GMutexLocker) locker G_GNUC_UNUSED = g_mutex_locker_new(&be->lock);
    FakeDomain *dom;

    if (fake_take_failure(be, "get_state", error) || !(dom = fake_find_domain(be, name, error)))
        return FALSE;
    *ret_state = dom->state;
    return TRUE;
}

static gboolean
fake_get_pause_reason(CarrelHypervisor *hv, const char *name, CarrelPauseReason *ret_reason,
                      GError **error)
{
    FakeBackend *be = hv->backend_data;
    g_autoptr(GMutexLocker) locker G_GNUC_UNUSED = g_mutex_locker_new(&be->lock);
    FakeDomain *dom;

    if (fake_take_failure(be, "get_pause_reason", error) ||
        !(dom = fake_find_domain(be, name, error)))
        return FALSE;
    *ret_reason = dom->state != CARREL_DOMAIN_PAUSED    ? CARREL_PAUSE_NONE
                  : dom->paused_by != CARREL_PAUSE_NONE ? dom->paused_by
                                                        : CARREL_PAUSE_USER;
    return TRUE;
}

static gboolean
fake_disk_allocation(CarrelHypervisor *hv, const char *name, guint64 *ret_bytes, GError **error)
{
    FakeBackend *be = hv->backend_data;
    g_autoptr(GMutexLocker) locker G_GNUC_UNUSED = g_mutex_locker_new(&be->lock);
    FakeDomain *dom;

    if (fake_take_failure(be, "disk_allocation", error) ||
        !(dom = fake_find_domain(be, name, error)))
        return FALSE;
    if (dom->state != CARREL_DOMAIN_RUNNING && dom->state != CARREL_DOMAIN_PAUSED) {
        g_set_error(error, CARREL_ERROR, CARREL_ERROR_WRONG_STATE, "domain is not running");
        return FALSE;
    }
    if (!dom->allocation) {
        g_set_error(error, CARREL_ERROR, CARREL_ERROR_UNSUPPORTED, "no allocation scripted");
        return FALSE;
    }
    *ret_bytes = dom->allocation;
    return TRUE;
}

/* Called with the lock held: the domain, when its guest agent would answer op now. */
static FakeDomain *
agent_domain(FakeBackend *be, const char *op, const char *name, GError **error)
{
    FakeDomain *dom;

    if (fake_take_failure(be, op, error) || !(dom = fake_find_domain(be, name, error)))
        return NULL;
    if (dom->state != CARREL_DOMAIN_RUNNING) {
        g_set_error(error, CARREL_ERROR, CARREL_ERROR_WRONG_STATE, "domain is not running");
        return NULL;
    }
    if (be->agent_silent) {
        g_set_error(error, CARREL_ERROR, CARREL_ERROR_TIMEOUT, "guest agent is not responding");
        return NULL;
    }
    return dom;
}

static gboolean
fake_agent_ping(CarrelHypervisor *hv, const char *name, guint timeout_s, GError **error)
{
    FakeBackend *be = hv->backend_data;
    g_autoptr(GMutexLocker) locker G_GNUC_UNUSED = g_mutex_locker_new(&be->lock);

    return agent_domain(be, "agent_ping", name, error) != NULL;
}

static gboolean
fake_define(CarrelHypervisor *hv, const char *xml, GError **error)
{
    FakeBackend *be = hv->backend_data;
    g_autoptr(GMutexLocker) locker G_GNUC_UNUSED = g_mutex_locker_new(&be->lock);
    g_autofree char *name = NULL;
    FakeDomain *dom, *old;

    if (fake_take_failure(be, "define", error))
        return FALSE;
    dom = parse_domain(xml, &name, error);
    if (!dom) {
        g_prefix_error(error, "defining: ");
        return FALSE;
    }
    /* Redefining keeps the state: a running transient domain becomes persistent, as in libvirt. */
    old = g_hash_table_lookup(be->domains, name);
    dom->state = old ? old->state : CARREL_DOMAIN_SHUTOFF;
    dom->persistent = TRUE;
    g_hash_table_replace(be->domains, g_steal_pointer(&name), dom);
    return TRUE;
}

static gboolean
fake_persist(CarrelHypervisor *hv, const char *name, GError **error)
{
    FakeBackend *be = hv->backend_data;
    g_autoptr(GMutexLocker) locker G_GNUC_UNUSED = g_mutex_locker_new(&be->lock);
    FakeDomain *dom = fake_find_domain(be, name, error);

    if (!dom)
        return FALSE;
    dom->persistent = TRUE;
    return TRUE;
}

static gboolean
fake_save(CarrelHypervisor *hv, const char *name, const char *path, GError **error)
{
    FakeBackend *be = hv->backend_data;
    g_autoptr(GMutexLocker) locker G_GNUC_UNUSED = g_mutex_locker_new(&be->lock);
    g_autoptr(GBytes) memory = g_bytes_new_static(FAKE_MEMORY, strlen(FAKE_MEMORY));
    FakeDomain *dom;

    if (fake_take_failure(be, "save", error) || !(dom = fake_find_domain(be, name, error)))
        return FALSE;
    if (dom->state != CARREL_DOMAIN_RUNNING && dom->state != CARREL_DOMAIN_PAUSED) {
        g_set_error(error, CARREL_ERROR, CARREL_ERROR_WRONG_STATE, "saving: domain is %s",
                    carrel_domain_state_to_string(dom->state));
        return FALSE;
    }
    if (!g_path_is_absolute(path)) {
        g_set_error(error, CARREL_ERROR, CARREL_ERROR_INVALID_ARG, "save path '%s' is not absolute",
                    path);
        return FALSE;
    }
    if (!carrel_hypervisor_saveimage_create(path, dom->xml, FAKE_COOKIE, memory, error)) {
        g_prefix_error(error, "saving: ");
        return FALSE;
    }
    power_off(be, name, dom);
    return TRUE;
}

/* The domain's disk source moved to top (paths as carrel writes them: no quote to escape). */
static gboolean
move_disk(FakeDomain *dom, const char *top, GError **error)
{
    g_autofree char *old = carrel_hypervisor_scan_disk_source(dom->xml);
    g_autofree char *from = old ? g_strdup_printf("<source file='%s'/>", old) : NULL;
    g_autofree char *to = g_strdup_printf("<source file='%s'/>", top);
    g_auto(GStrv) parts = from ? g_strsplit(dom->xml, from, 2) : NULL;

    if (!parts || g_strv_length(parts) != 2) {
        g_set_error(error, CARREL_ERROR, CARREL_ERROR_HYPERVISOR, "the domain has no disk to move");
        return FALSE;
    }
    g_free(dom->xml);
    dom->xml = g_strjoin(to, parts[0], parts[1], NULL);
    return TRUE;
}

static gboolean
fake_snapshot_live(CarrelHypervisor *hv, const char *name, const char *memory_path,
                   const char *top_path, GError **error)
{
    FakeBackend *be = hv->backend_data;
    g_autoptr(GMutexLocker) locker G_GNUC_UNUSED = g_mutex_locker_new(&be->lock);
    g_autoptr(GBytes) memory = g_bytes_new_static(FAKE_MEMORY, strlen(FAKE_MEMORY));
    FakeDomain *dom;

    if (fake_take_failure(be, "snapshot_live", error) || !(dom = fake_find_domain(be, name, error)))
        return FALSE;
    if (dom->state != CARREL_DOMAIN_RUNNING && dom->state != CARREL_DOMAIN_PAUSED) {
        g_set_error(error, CARREL_ERROR, CARREL_ERROR_WRONG_STATE, "snapshot: domain is %s",
                    carrel_domain_state_to_string(dom->state));
        return FALSE;
    }
    if (!g_path_is_absolute(memory_path) || !g_file_test(top_path, G_FILE_TEST_IS_REGULAR)) {
        g_set_error(error, CARREL_ERROR, CARREL_ERROR_INVALID_ARG,
                    "snapshot: '%s' is not absolute or '%s' is no file", memory_path, top_path);
        return FALSE;
    }
    if (!carrel_hypervisor_saveimage_create(memory_path, dom->xml, FAKE_COOKIE, memory, error)) {
        g_prefix_error(error, "snapshot: ");
        return FALSE;
    }
    return move_disk(dom, top_path, error);
}

static gboolean
fake_restore(CarrelHypervisor *hv, const char *path, const char *xml, GError **error)
{
    FakeBackend *be = hv->backend_data;
    g_autoptr(GMutexLocker) locker G_GNUC_UNUSED = g_mutex_locker_new(&be->lock);
    g_autofree char *name = NULL;
    FakeDomain *dom;

    fake_hold(be, &be->restore);
    if (fake_take_failure(be, "restore", error))
        return FALSE;
    dom = parse_domain(xml, &name, error);
    if (!dom)
        return FALSE;
    if (g_hash_table_contains(be->domains, name)) {
        fake_domain_free(dom);
        g_set_error(error, CARREL_ERROR, CARREL_ERROR_EXISTS, "domain already exists");
        return FALSE;
    }
    /* The same file work as the real backend (it reads the image, with xml in its header),
     * so core's handling of the files is exercised. */
    {
        g_autoptr(GBytes) head = NULL;
        int fd = carrel_hypervisor_saveimage_open_as(path, xml, &head, error);
        if (fd < 0) {
            fake_domain_free(dom);
            return FALSE;
        }
        close(fd);
    }
    run(be, dom);
    dom->persistent = FALSE;
    g_hash_table_insert(be->domains, g_steal_pointer(&name), dom);
    return TRUE;
}

static gboolean
fake_pause(CarrelHypervisor *hv, const char *name, gboolean pause, GError **error)
{
    FakeBackend *be = hv->backend_data;
    g_autoptr(GMutexLocker) locker G_GNUC_UNUSED = g_mutex_locker_new(&be->lock);
    FakeDomain *dom;

    if (fake_take_failure(be, "pause", error) || !(dom = fake_find_domain(be, name, error)))
        return FALSE;
    if (dom->state != (pause ? CARREL_DOMAIN_RUNNING : CARREL_DOMAIN_PAUSED)) {
        g_set_error(error, CARREL_ERROR, CARREL_ERROR_WRONG_STATE, "the domain is %s",
                    carrel_domain_state_to_string(dom->state));
        return FALSE;
    }
    dom->state = pause ? CARREL_DOMAIN_PAUSED : CARREL_DOMAIN_RUNNING;
    dom->paused_by = pause ? CARREL_PAUSE_USER : CARREL_PAUSE_NONE;
    return TRUE;
}

static gboolean
fake_fs_freeze(CarrelHypervisor *hv, const char *name, gboolean freeze, GError **error)
{
    FakeBackend *be = hv->backend_data;
    g_autoptr(GMutexLocker) locker G_GNUC_UNUSED = g_mutex_locker_new(&be->lock);

    return agent_domain(be, "fs_freeze", name, error) != NULL;
}

static gboolean
fake_set_time(CarrelHypervisor *hv, const char *name, GError **error)
{
    FakeBackend *be = hv->backend_data;
    g_autoptr(GMutexLocker) locker G_GNUC_UNUSED = g_mutex_locker_new(&be->lock);

    if (be->restore.in_flight > 0)
        be->agent_beside++;
    return agent_domain(be, "set_time", name, error) != NULL;
}

/* The first max_output bytes of text; *truncated set when there were more. */
static GBytes *
cut_output(const char *text, gsize max_output, gboolean *truncated)
{
    gsize len = text ? strlen(text) : 0;

    if (len > max_output)
        *truncated = TRUE;
    return g_bytes_new(text, MIN(len, max_output));
}

static gboolean
fake_agent_exec(CarrelHypervisor *hv, const char *name, const CarrelGuestExec *run,
                CarrelExecResult *ret_result, GError **error)
{
    FakeBackend *be = hv->backend_data;
    g_autoptr(GMutexLocker) locker G_GNUC_UNUSED = g_mutex_locker_new(&be->lock);
    gboolean truncated = FALSE;
    FakeDomain *dom;

    if (!(dom = agent_domain(be, "agent_exec", name, error)))
        return FALSE;
    if (be->restore.in_flight > 0)
        be->agent_beside++;
    g_strfreev(be->exec_argv);
    be->exec_argv = g_strdupv((char **)run->argv);
    g_clear_pointer(&be->exec_stdin, g_bytes_unref);
    be->exec_stdin = run->stdin_bytes ? g_bytes_ref(run->stdin_bytes) : NULL;
    if (fake_guest_screen(be, dom, run, ret_result) || fake_terminal_exec(be, run, ret_result))
        return TRUE;
    ret_result->stdout_bytes =
        cut_output(be->exec_hang ? NULL : be->exec_stdout, run->max_output, &truncated);
    ret_result->stderr_bytes =
        cut_output(be->exec_hang ? NULL : be->exec_stderr, run->max_output, &truncated);
    ret_result->exit_code = be->exec_hang ? 128 + 9 : be->exec_code;
    ret_result->truncated = truncated;
    ret_result->timed_out = be->exec_hang;
    return TRUE;
}

static GBytes *
default_screen(void)
{
    g_autofree char *header =
        g_strdup_printf("P6\n%d %d\n255\n", FAKE_SCREEN_WIDTH, FAKE_SCREEN_HEIGHT);
    gsize header_len = strlen(header);
    gsize len = header_len + FAKE_SCREEN_WIDTH * FAKE_SCREEN_HEIGHT * 3;
    guint8 *data = g_malloc0(len);

    memcpy(data, header, header_len);
    return g_bytes_new_take(data, len);
}

static gboolean
fake_screenshot(CarrelHypervisor *hv, const char *name, GBytes **ret_image, GError **error)
{
    FakeBackend *be = hv->backend_data;
    g_autoptr(GMutexLocker) locker G_GNUC_UNUSED = g_mutex_locker_new(&be->lock);
    FakeDomain *dom;

    if (fake_take_failure(be, "screenshot", error) || !(dom = fake_find_domain(be, name, error)))
        return FALSE;
    if (dom->state != CARREL_DOMAIN_RUNNING && dom->state != CARREL_DOMAIN_PAUSED) {
        g_set_error(error, CARREL_ERROR, CARREL_ERROR_WRONG_STATE, "domain is not running");
        return FALSE;
    }
    be->screenshots++;
    if (be->drawing)
        *ret_image = fake_drawing_screen(be);
    else if (dom->screen_width)
        *ret_image = fake_sized_screen(dom->screen_width, dom->screen_height);
    else
        *ret_image = be->screen ? g_bytes_ref(be->screen) : default_screen();
    return TRUE;
}

static gboolean
fake_file_read(CarrelHypervisor *hv, const char *name, const char *path, guint64 max,
               CarrelHypervisorChunkFunc sink, gpointer sink_data, GError **error)
{
    FakeBackend *be = hv->backend_data;
    g_autoptr(GMutexLocker) locker G_GNUC_UNUSED = g_mutex_locker_new(&be->lock);
    GBytes *data;

    if (!agent_domain(be, "file_read", name, error))
        return FALSE;
    data = g_hash_table_lookup(be->files, path);
    if (!data)
        data = be->read_fallback;
    if (!data) {
        g_set_error(error, CARREL_ERROR, CARREL_ERROR_NOT_FOUND, "no such file in the guest");
        return FALSE;
    }
    if (g_bytes_get_size(data) > max) {
        g_set_error(error, CARREL_ERROR, CARREL_ERROR_LIMIT,
                    "file is larger than %" G_GUINT64_FORMAT " bytes", max);
        return FALSE;
    }
    return sink(g_bytes_get_data(data, NULL), g_bytes_get_size(data), sink_data, error);
}

static gboolean
fake_file_write(CarrelHypervisor *hv, const char *name, const char *path,
                CarrelHypervisorSourceFunc source, gpointer source_data, GError **error)
{
    FakeBackend *be = hv->backend_data;
    g_autoptr(GMutexLocker) locker G_GNUC_UNUSED = g_mutex_locker_new(&be->lock);
    g_autoptr(GByteArray) data = g_byte_array_new();
    guint8 buf[CARREL_HYPERVISOR_FILE_CHUNK];
    gsize len = 0;

    if (!agent_domain(be, "file_write", name, error))
        return FALSE;
    /* Taken in chunks as the real backend does, so a source is exercised the same way. */
    do {
        if (!source(buf, sizeof(buf), &len, source_data, error))
            return FALSE;
        g_byte_array_append(data, buf, (guint)len);
    } while (len > 0);
    g_hash_table_replace(be->files, g_strdup(path),
                         g_byte_array_free_to_bytes(g_steal_pointer(&data)));
    return TRUE;
}

static gint
compare_info(gconstpointer a, gconstpointer b)
{
    const CarrelDomainInfo *ia = *(const CarrelDomainInfo *const *)a;
    const CarrelDomainInfo *ib = *(const CarrelDomainInfo *const *)b;

    return g_strcmp0(ia->name, ib->name);
}

static GPtrArray *
fake_list(CarrelHypervisor *hv, GError **error)
{
    FakeBackend *be = hv->backend_data;
    g_autoptr(GMutexLocker) locker G_GNUC_UNUSED = g_mutex_locker_new(&be->lock);
    GPtrArray *infos;
    GHashTableIter iter;
    gpointer key, value;

    if (fake_take_failure(be, "list", error))
        return NULL;
    infos = g_ptr_array_new_with_free_func((GDestroyNotify)carrel_domain_info_free);
    g_hash_table_iter_init(&iter, be->domains);
    while (g_hash_table_iter_next(&iter, &key, &value)) {
        FakeDomain *dom = value;
        CarrelDomainInfo *info;

        if (!dom->session_id)
            continue; /* like libvirt: only domains with carrel's metadata */
        info = g_new0(CarrelDomainInfo, 1);
        info->name = g_strdup(key);
        info->session_id = g_strdup(dom->session_id);
        info->instance_id = g_strdup(dom->instance_id);
        info->state = dom->state;
        info->persistent = dom->persistent;
        info->disk_path = carrel_hypervisor_scan_disk_source(dom->xml);
        g_ptr_array_add(infos, info);
    }
    /* Stable order for tests. */
    g_ptr_array_sort(infos, compare_info);
    return infos;
}

static char *
fake_describe(CarrelHypervisor *hv)
{
    return g_strdup("fake hypervisor");
}

static void
fake_close(CarrelHypervisor *hv)
{
    FakeBackend *be = hv->backend_data;

    if (!be)
        return;
    g_hash_table_unref(be->domains);
    g_hash_table_unref(be->fail_next);
    g_hash_table_unref(be->files);
    g_clear_pointer(&be->read_fallback, g_bytes_unref);
    g_ptr_array_unref(be->hid_sent);
    g_hash_table_unref(be->networks);
    g_free(be->exec_stdout);
    g_free(be->exec_stderr);
    g_strfreev(be->exec_argv);
    fake_terminal_free(be->terminal);
    g_clear_pointer(&be->exec_stdin, g_bytes_unref);
    g_clear_pointer(&be->screen, g_bytes_unref);
    g_mutex_clear(&be->lock);
    g_cond_clear(&be->held);
    g_free(be);
    hv->backend_data = NULL;
}

static gboolean
fake_ensure_network(CarrelHypervisor *hv, const char *name, const char *xml, char **ret_xml,
                    GError **error)
{
    FakeBackend *be = hv->backend_data;
    g_autoptr(GMutexLocker) locker G_GNUC_UNUSED = g_mutex_locker_new(&be->lock);

    if (fake_take_failure(be, "ensure_network", error))
        return FALSE;
    if (!g_hash_table_contains(be->networks, name))
        g_hash_table_insert(be->networks, g_strdup(name), g_strdup(xml));
    *ret_xml = g_strdup(g_hash_table_lookup(be->networks, name));
    return TRUE;
}

/* Called with the lock held: a domain whose QEMU runs (SPICE is there while paused too). */
static FakeDomain *
find_live_domain(FakeBackend *be, const char *name, GError **error)
{
    FakeDomain *dom = fake_find_domain(be, name, error);

    if (dom && dom->state != CARREL_DOMAIN_RUNNING && dom->state != CARREL_DOMAIN_PAUSED) {
        g_set_error(error, CARREL_ERROR, CARREL_ERROR_WRONG_STATE, "domain is not running");
        return NULL;
    }
    return dom;
}

static gboolean
fake_spice_info(CarrelHypervisor *hv, const char *name, CarrelSpiceInfo *ret_info, GError **error)
{
    FakeBackend *be = hv->backend_data;
    g_autoptr(GMutexLocker) locker G_GNUC_UNUSED = g_mutex_locker_new(&be->lock);
    FakeDomain *dom = NULL;

    if (fake_take_failure(be, "spice_info", error) || !(dom = find_live_domain(be, name, error)))
        return FALSE;
    ret_info->port = 5900 + (guint)(dom->run_id % 1000);
    ret_info->run_id = dom->run_id;
    return TRUE;
}

static gboolean
fake_spice_password(CarrelHypervisor *hv, const char *name, const char *password,
                    gint64 valid_until, GError **error)
{
    FakeBackend *be = hv->backend_data;
    g_autoptr(GMutexLocker) locker G_GNUC_UNUSED = g_mutex_locker_new(&be->lock);
    FakeDomain *dom = NULL;

    if (fake_take_failure(be, "spice_password", error) ||
        !(dom = find_live_domain(be, name, error)))
        return FALSE;
    g_free(dom->spice_password);
    dom->spice_password = g_strdup(password);
    dom->spice_valid_until = valid_until;
    return TRUE;
}

static const CarrelHypervisorOps fake_ops = {
    .define_start = fake_define_start,
    .start = fake_start,
    .shutdown = fake_shutdown,
    .destroy = fake_destroy,
    .undefine = fake_undefine,
    .get_state = fake_get_state,
    .get_pause_reason = fake_get_pause_reason,
    .disk_allocation = fake_disk_allocation,
    .cpu_time = fake_cpu_time,
    .qemu_owner = fake_qemu_owner,
    .agent_ping = fake_agent_ping,
    .list = fake_list,
    .describe = fake_describe,
    .close = fake_close,
    .define = fake_define,
    .persist = fake_persist,
    .save = fake_save,
    .snapshot_live = fake_snapshot_live,
    .restore = fake_restore,
    .set_time = fake_set_time,
    .fs_freeze = fake_fs_freeze,
    .pause = fake_pause,
    .agent_exec = fake_agent_exec,
    .screenshot = fake_screenshot,
    .file_read = fake_file_read,
    .file_write = fake_file_write,
    .hid_send = fake_hid_send,
    .hid_room = fake_hid_room,
    .ensure_network = fake_ensure_network,
    .set_balloon = fake_set_balloon,
    .spice_info = fake_spice_info,
    .spice_password = fake_spice_password,
};

CarrelHypervisor *
carrel_hypervisor_new_fake(void)
{
    FakeBackend *be = g_new0(FakeBackend, 1);

    g_mutex_init(&be->lock);
    g_cond_init(&be->held);
    be->domains = g_hash_table_new_full(g_str_hash, g_str_equal, g_free, fake_domain_free);
    be->fail_next = g_hash_table_new_full(g_str_hash, g_str_equal, g_free, NULL);
    be->files =
        g_hash_table_new_full(g_str_hash, g_str_equal, g_free, (GDestroyNotify)g_bytes_unref);
    be->hid_sent = g_ptr_array_new_with_free_func(g_free);
    be->hid_room = -1;
    be->networks = g_hash_table_new_full(g_str_hash, g_str_equal, g_free, g_free);
    return carrel_hypervisor_new_backend(&fake_ops, "fake://", be);
}

static FakeBackend *
fake_backend_of(CarrelHypervisor *hv)
{
    g_return_val_if_fail(hv != NULL && hv->ops == &fake_ops, NULL);
    return hv->backend_data;
}

void
carrel_hypervisor_fake_fail_next(CarrelHypervisor *hv, const char *op)
{
    FakeBackend *be = fake_backend_of(hv);
    gboolean known = FALSE;

    g_return_if_fail(be != NULL && op != NULL);
    for (gsize i = 0; i < G_N_ELEMENTS(fake_op_names); i++)
        known = known || g_str_equal(fake_op_names[i], op);
    g_return_if_fail(known);
    g_mutex_lock(&be->lock);
    g_hash_table_add(be->fail_next, g_strdup(op));
    g_mutex_unlock(&be->lock);
}

gboolean
carrel_hypervisor_fake_set_state(CarrelHypervisor *hv, const char *name, CarrelDomainState state)
{
    FakeBackend *be = fake_backend_of(hv);
    g_autoptr(GMutexLocker) locker G_GNUC_UNUSED = NULL;
    FakeDomain *dom;

    g_return_val_if_fail(be != NULL && name != NULL, FALSE);
    g_return_val_if_fail((int)state >= 0 && state < CARREL_DOMAIN_LAST, FALSE);
    locker = g_mutex_locker_new(&be->lock);
    dom = g_hash_table_lookup(be->domains, name);
    if (!dom)
        return FALSE;
    dom->state = state;
    dom->paused_by = CARREL_PAUSE_NONE;
    if ((state == CARREL_DOMAIN_SHUTOFF || state == CARREL_DOMAIN_CRASHED) && !dom->persistent)
        g_hash_table_remove(be->domains, name);
    return TRUE;
}

gboolean
carrel_hypervisor_fake_pause_for(CarrelHypervisor *hv, const char *name, CarrelPauseReason reason)
{
    FakeBackend *be = fake_backend_of(hv);
    g_autoptr(GMutexLocker) locker G_GNUC_UNUSED = NULL;
    FakeDomain *dom;

    g_return_val_if_fail(be != NULL && name != NULL, FALSE);
    g_return_val_if_fail(reason > CARREL_PAUSE_NONE && reason < CARREL_PAUSE_LAST, FALSE);
    locker = g_mutex_locker_new(&be->lock);
    dom = g_hash_table_lookup(be->domains, name);
    if (!dom || dom->state != CARREL_DOMAIN_RUNNING)
        return FALSE;
    dom->state = CARREL_DOMAIN_PAUSED;
    dom->paused_by = reason;
    return TRUE;
}

gboolean
carrel_hypervisor_fake_set_disk_allocation(CarrelHypervisor *hv, const char *name, guint64 bytes)
{
    FakeBackend *be = fake_backend_of(hv);
    g_autoptr(GMutexLocker) locker G_GNUC_UNUSED = NULL;
    FakeDomain *dom;

    g_return_val_if_fail(be != NULL && name != NULL, FALSE);
    locker = g_mutex_locker_new(&be->lock);
    dom = g_hash_table_lookup(be->domains, name);
    if (!dom)
        return FALSE;
    dom->allocation = bytes;
    return TRUE;
}

void
carrel_hypervisor_fake_set_agent_silent(CarrelHypervisor *hv, gboolean silent)
{
    FakeBackend *be = fake_backend_of(hv);
    g_autoptr(GMutexLocker) locker G_GNUC_UNUSED = NULL;

    g_return_if_fail(be != NULL);
    locker = g_mutex_locker_new(&be->lock);
    be->agent_silent = silent;
}

void
carrel_hypervisor_fake_set_exec_result(CarrelHypervisor *hv, int exit_code, const char *stdout_text,
                                       const char *stderr_text)
{
    FakeBackend *be = fake_backend_of(hv);
    g_autoptr(GMutexLocker) locker G_GNUC_UNUSED = NULL;

    g_return_if_fail(be != NULL);
    locker = g_mutex_locker_new(&be->lock);
    be->exec_code = exit_code;
    g_free(be->exec_stdout);
    be->exec_stdout = g_strdup(stdout_text);
    g_free(be->exec_stderr);
    be->exec_stderr = g_strdup(stderr_text);
}

void
carrel_hypervisor_fake_set_exec_hang(CarrelHypervisor *hv, gboolean hang)
{
    FakeBackend *be = fake_backend_of(hv);
    g_autoptr(GMutexLocker) locker G_GNUC_UNUSED = NULL;

    g_return_if_fail(be != NULL);
    locker = g_mutex_locker_new(&be->lock);
    be->exec_hang = hang;
}

char **
carrel_hypervisor_fake_get_exec_argv(CarrelHypervisor *hv)
{
    FakeBackend *be = fake_backend_of(hv);
    g_autoptr(GMutexLocker) locker G_GNUC_UNUSED = NULL;

    g_return_val_if_fail(be != NULL, NULL);
    locker = g_mutex_locker_new(&be->lock);
    return g_strdupv(be->exec_argv);
}

GBytes *
carrel_hypervisor_fake_get_exec_stdin(CarrelHypervisor *hv)
{
    FakeBackend *be = fake_backend_of(hv);
    g_autoptr(GMutexLocker) locker G_GNUC_UNUSED = NULL;

    g_return_val_if_fail(be != NULL, NULL);
    locker = g_mutex_locker_new(&be->lock);
    return be->exec_stdin ? g_bytes_ref(be->exec_stdin) : NULL;
}

void
carrel_hypervisor_fake_set_screen(CarrelHypervisor *hv, GBytes *image)
{
    FakeBackend *be = fake_backend_of(hv);
    g_autoptr(GMutexLocker) locker G_GNUC_UNUSED = NULL;

    g_return_if_fail(be != NULL);
    locker = g_mutex_locker_new(&be->lock);
    g_clear_pointer(&be->screen, g_bytes_unref);
    be->screen = image ? g_bytes_ref(image) : NULL;
}

void
carrel_hypervisor_fake_set_read_fallback(CarrelHypervisor *hv, GBytes *data)
{
    FakeBackend *be = fake_backend_of(hv);
    g_autoptr(GMutexLocker) locker G_GNUC_UNUSED = NULL;

    g_return_if_fail(be != NULL);
    locker = g_mutex_locker_new(&be->lock);
    g_clear_pointer(&be->read_fallback, g_bytes_unref);
    be->read_fallback = data ? g_bytes_ref(data) : NULL;
}

void
carrel_hypervisor_fake_set_network(CarrelHypervisor *hv, const char *name, const char *xml)
{
    FakeBackend *be = fake_backend_of(hv);

    g_return_if_fail(be != NULL && name != NULL && xml != NULL);
    g_mutex_lock(&be->lock);
    g_hash_table_insert(be->networks, g_strdup(name), g_strdup(xml));
    g_mutex_unlock(&be->lock);
}

char *
carrel_hypervisor_fake_get_spice_password(CarrelHypervisor *hv, const char *name,
                                          gint64 *ret_valid_until)
{
    FakeBackend *be = fake_backend_of(hv);
    g_autoptr(GMutexLocker) locker G_GNUC_UNUSED = NULL;
    FakeDomain *dom;

    g_return_val_if_fail(be != NULL, NULL);
    locker = g_mutex_locker_new(&be->lock);
    dom = g_hash_table_lookup(be->domains, name);
    if (!dom || !dom->spice_password)
        return NULL;
    if (ret_valid_until)
        *ret_valid_until = dom->spice_valid_until;
    return g_strdup(dom->spice_password);
}
