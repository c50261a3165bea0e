/* The hypervisor object, its dispatchers through the operations table, and the enum tables. */
#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define CARREL_HYPERVISOR_PRIV_H_ALLOW
#include "hypervisor/hypervisor-priv.h"

static const char *const accel_names[CARREL_ACCEL_LAST] = {
    [CARREL_ACCEL_AUTO] = "auto",
    [CARREL_ACCEL_KVM] = "kvm",
    [CARREL_ACCEL_TCG] = "tcg",
};

static const char *const domain_state_names[CARREL_DOMAIN_LAST] = {
    [CARREL_DOMAIN_RUNNING] = "running", [CARREL_DOMAIN_PAUSED] = "paused",
    [CARREL_DOMAIN_SHUTOFF] = "shutoff", [CARREL_DOMAIN_CRASHED] = "crashed",
    [CARREL_DOMAIN_OTHER] = "other",
};

static const char *const pause_reason_names[CARREL_PAUSE_LAST] = {
    [CARREL_PAUSE_NONE] = "none",
    [CARREL_PAUSE_USER] = "user",
    [CARREL_PAUSE_NO_SPACE] = "host_disk_full",
    [CARREL_PAUSE_IO_ERROR] = "io_error",
};

const char *
carrel_pause_reason_to_string(CarrelPauseReason reason)
{
    return carrel_util_enum_to_string(pause_reason_names, CARREL_PAUSE_LAST, (int)reason);
}

const char *
carrel_accel_to_string(CarrelAccel accel)
{
    return carrel_util_enum_to_string(accel_names, CARREL_ACCEL_LAST, (int)accel);
}

CarrelAccel
carrel_accel_from_string(const char *name)
{
    return (CarrelAccel)carrel_util_enum_from_string(accel_names, CARREL_ACCEL_LAST, name);
}

const char *
carrel_domain_state_to_string(CarrelDomainState state)
{
    return carrel_util_enum_to_string(domain_state_names, CARREL_DOMAIN_LAST, (int)state);
}

CarrelDomainState
carrel_domain_state_from_string(const char *name)
{
    return (CarrelDomainState)carrel_util_enum_from_string(domain_state_names, CARREL_DOMAIN_LAST,
                                                           name);
}

void
carrel_domain_info_free(CarrelDomainInfo *info)
{
    if (!info)
        return;
    g_free(info->disk_path);
    g_free(info->name);
    g_free(info->session_id);
    g_free(info->instance_id);
    g_free(info);
}

gboolean
carrel_hypervisor_is_session_id(const char *text)
{
    return carrel_hypervisor_is_carrel_id(text, "s-");
}

gboolean
carrel_hypervisor_is_carrel_id(const char *text, const char *prefix)
{
    if (!text || !g_str_has_prefix(text, prefix) || strlen(text) != 14)
        return FALSE;
    for (const char *p = text + 2; *p; p++) {
        if (!g_ascii_isdigit(*p) && !(*p >= 'a' && *p <= 'f'))
            return FALSE;
    }
    return TRUE;
}

CarrelHypervisor *
carrel_hypervisor_new_backend(const CarrelHypervisorOps *ops, const char *uri,
                              gpointer backend_data)
{
    CarrelHypervisor *hv = g_new0(CarrelHypervisor, 1);

    hv->ops = ops;
    hv->uri = g_strdup(uri);
    hv->backend_data = backend_data;
    hv->hid_wait_ms = CARREL_HID_ROOM_WAIT_MS;
    return hv;
}

void
carrel_hypervisor_free(CarrelHypervisor *hv)
{
    if (!hv)
        return;
    if (hv->ops && hv->ops->close)
        hv->ops->close(hv);
    g_free(hv->uri);
    g_free(hv->scratch_dir);
    g_free(hv);
}

void
carrel_hypervisor_set_scratch_dir(CarrelHypervisor *hv, const char *dir)
{
    g_return_if_fail(hv != NULL);
    g_free(hv->scratch_dir);
    hv->scratch_dir = g_strdup(dir);
}

const char *
carrel_hypervisor_get_scratch_dir(CarrelHypervisor *hv)
{
    g_return_val_if_fail(hv != NULL, NULL);
    return hv->scratch_dir ? hv->scratch_dir : g_get_tmp_dir();
}

gboolean
carrel_hypervisor_clear_scratch(CarrelHypervisor *hv, GError **error)
{
    g_autoptr(GDir) dir = NULL;
    const char *name;

    g_return_val_if_fail(hv != NULL && hv->scratch_dir != NULL, FALSE);
    dir = g_dir_open(hv->scratch_dir, 0, error);
    if (!dir) {
        g_prefix_error(error, "reading '%s': ", hv->scratch_dir);
        return FALSE;
    }
    while ((name = g_dir_read_name(dir))) {
        g_autofree char *path = g_build_filename(hv->scratch_dir, name, NULL);
        if (g_str_has_prefix(name, CARREL_HYPERVISOR_SCRATCH_PREFIX) &&
            !carrel_util_remove_tree(path, error))
            return FALSE;
    }
    return TRUE;
}

const char *
carrel_hypervisor_get_uri(CarrelHypervisor *hv)
{
    g_return_val_if_fail(hv != NULL, NULL);
    return hv->uri;
}

/* The name inside xml for error context, or NULL when it has none fit to print. */
static char *
name_of_xml(const char *xml)
{
    g_autofree char *name = NULL;

    if (!carrel_hypervisor_scan_xml(xml, &name, NULL, NULL, NULL) || !name)
        return NULL;
    if (!carrel_util_is_clean_text(name) || strlen(name) > CARREL_LIMIT_NAME_LEN)
        return NULL;
    return g_steal_pointer(&name);
}

/* Adds "domain 'NAME': " (or "domain xml: ") context for an op that takes xml. */
static void
prefix_xml_error(GError **error, const char *xml)
{
    g_autofree char *name = name_of_xml(xml);

    if (name)
        g_prefix_error(error, "domain '%s': ", name);
    else
        g_prefix_error(error, "domain xml: ");
}

gboolean
carrel_hypervisor_define_start(CarrelHypervisor *hv, const char *xml, GError **error)
{
    g_return_val_if_fail(hv != NULL && xml != NULL, FALSE);
    if (hv->ops->define_start(hv, xml, error))
        return TRUE;
    prefix_xml_error(error, xml);
    return FALSE;
}

gboolean
carrel_hypervisor_start(CarrelHypervisor *hv, const char *name, GError **error)
{
    g_return_val_if_fail(hv != NULL && name != NULL, FALSE);
    if (hv->ops->start(hv, name, error))
        return TRUE;
    g_prefix_error(error, "domain '%s': ", name);
    return FALSE;
}

gboolean
carrel_hypervisor_shutdown(CarrelHypervisor *hv, const char *name, guint timeout_s, GError **error)
{
    g_return_val_if_fail(hv != NULL && name != NULL, FALSE);
    if (hv->ops->shutdown(hv, name, timeout_s, error))
        return TRUE;
    g_prefix_error(error, "domain '%s': ", name);
    return FALSE;
}

gboolean
carrel_hypervisor_destroy(CarrelHypervisor *hv, const char *name, GError **error)
{
    g_return_val_if_fail(hv != NULL && name != NULL, FALSE);
    if (hv->ops->destroy(hv, name, error))
        return TRUE;
    g_prefix_error(error, "domain '%s': ", name);
    return FALSE;
}

gboolean
carrel_hypervisor_undefine(CarrelHypervisor *hv, const char *name, GError **error)
{
    g_return_val_if_fail(hv != NULL && name != NULL, FALSE);
    if (hv->ops->undefine(hv, name, error))
        return TRUE;
    g_prefix_error(error, "domain '%s': ", name);
    return FALSE;
}

gboolean
carrel_hypervisor_get_state(CarrelHypervisor *hv, const char *name, CarrelDomainState *ret_state,
                            GError **error)
{
    CarrelDomainState state = CARREL_DOMAIN_OTHER;

    g_return_val_if_fail(hv != NULL && name != NULL, FALSE);
    if (!hv->ops->get_state(hv, name, &state, error)) {
        g_prefix_error(error, "domain '%s': ", name);
        return FALSE;
    }
    if (ret_state)
        *ret_state = state;
    return TRUE;
}

gboolean
carrel_hypervisor_disk_allocation(CarrelHypervisor *hv, const char *name, guint64 *ret_bytes,
                                  GError **error)
{
    guint64 bytes = 0;

    g_return_val_if_fail(hv != NULL && name != NULL && ret_bytes != NULL, FALSE);
    if (!hv->ops->disk_allocation(hv, name, &bytes, error)) {
        g_prefix_error(error, "domain '%s': ", name);
        return FALSE;
    }
    *ret_bytes = bytes;
    return TRUE;
}

gboolean
carrel_hypervisor_cpu_time(CarrelHypervisor *hv, const char *name, guint64 *ret_ns, GError **error)
{
    guint64 ns = 0;

    g_return_val_if_fail(hv != NULL && name != NULL && ret_ns != NULL, FALSE);
    if (!hv->ops->cpu_time(hv, name, &ns, error)) {
        g_prefix_error(error, "domain '%s': ", name);
        return FALSE;
    }
    *ret_ns = ns;
    return TRUE;
}

gboolean
carrel_hypervisor_get_pause_reason(CarrelHypervisor *hv, const char *name,
                                   CarrelPauseReason *ret_reason, GError **error)
{
    CarrelPauseReason reason = CARREL_PAUSE_NONE;

    g_return_val_if_fail(hv != NULL && name != NULL && ret_reason != NULL, FALSE);
    if (!hv->ops->get_pause_reason(hv, name, &reason, error)) {
        g_prefix_error(error, "domain '%s': ", name);
        return FALSE;
    }
    *ret_reason = reason;
    return TRUE;
}

gboolean
carrel_hypervisor_agent_ping(CarrelHypervisor *hv, const char *name, guint timeout_s,
                             GError **error)
{
    g_return_val_if_fail(hv != NULL && name != NULL, FALSE);
    if (hv->ops->agent_ping(hv, name, timeout_s, error))
        return TRUE;
    g_prefix_error(error, "domain '%s': ", name);
    return FALSE;
}

GPtrArray *
carrel_hypervisor_list(CarrelHypervisor *hv, GError **error)
{
    GPtrArray *domains;

    g_return_val_if_fail(hv != NULL, NULL);
    domains = hv->ops->list(hv, error);
    if (!domains)
        g_prefix_error(error, "listing domains: ");
    return domains;
}

char *
carrel_hypervisor_describe(CarrelHypervisor *hv)
{
    g_return_val_if_fail(hv != NULL, NULL);
    return hv->ops->describe(hv);
}

gboolean
carrel_hypervisor_define(CarrelHypervisor *hv, const char *xml, GError **error)
{
    g_return_val_if_fail(hv != NULL && xml != NULL, FALSE);
    if (hv->ops->define(hv, xml, error))
        return TRUE;
    prefix_xml_error(error, xml);
    return FALSE;
}

gboolean
carrel_hypervisor_persist(CarrelHypervisor *hv, const char *name, GError **error)
{
    g_return_val_if_fail(hv != NULL && name != NULL, FALSE);
    if (hv->ops->persist(hv, name, error))
        return TRUE;
    g_prefix_error(error, "domain '%s': ", name);
    return FALSE;
}

gboolean
carrel_hypervisor_save(CarrelHypervisor *hv, const char *name, const char *path, GError **error)
{
    g_return_val_if_fail(hv != NULL && name != NULL && path != NULL, FALSE);
    if (hv->ops->save(hv, name, path, error))
        return TRUE;
    g_prefix_error(error, "domain '%s': ", name);
    return FALSE;
}

gboolean
carrel_hypervisor_snapshot_live(CarrelHypervisor *hv, const char *name, const char *memory_path,
                                const char *top_path, GError **error)
{
    g_return_val_if_fail(hv != NULL && name != NULL && memory_path != NULL && top_path != NULL,
                         FALSE);
    if (hv->ops->snapshot_live(hv, name, memory_path, top_path, error))
        return TRUE;
    g_prefix_error(error, "domain '%s': ", name);
    return FALSE;
}

gboolean
carrel_hypervisor_restore(CarrelHypervisor *hv, const char *path, const char *xml, GError **error)
{
    g_return_val_if_fail(hv != NULL && path != NULL && xml != NULL, FALSE);
    if (!g_path_is_absolute(path)) {
        g_set_error(error, CARREL_ERROR, CARREL_ERROR_INVALID_ARG,
                    "save image path '%s' is not absolute", path);
    } else if (hv->ops->restore(hv, path, xml, error)) {
        return TRUE;
    }
    prefix_xml_error(error, xml);
    return FALSE;
}

gboolean
carrel_hypervisor_set_time(CarrelHypervisor *hv, const char *name, GError **error)
{
    g_return_val_if_fail(hv != NULL && name != NULL, FALSE);
    if (hv->ops->set_time(hv, name, error))
        return TRUE;
    g_prefix_error(error, "domain '%s': ", name);
    return FALSE;
}

gboolean
carrel_hypervisor_pause(CarrelHypervisor *hv, const char *name, gboolean pause, GError **error)
{
    g_return_val_if_fail(hv != NULL && name != NULL, FALSE);
    if (hv->ops->pause(hv, name, pause, error))
        return TRUE;
    g_prefix_error(error, "domain '%s': %s: ", name, pause ? "pausing" : "resuming");
    return FALSE;
}

gboolean
carrel_hypervisor_set_balloon(CarrelHypervisor *hv, const char *name, guint target_mib,
                              guint timeout_s, guint *ret_actual_mib, GError **error)
{
    g_return_val_if_fail(hv != NULL && name != NULL && ret_actual_mib != NULL, FALSE);
    if (hv->ops->set_balloon(hv, name, target_mib, timeout_s, ret_actual_mib, error))
        return TRUE;
    g_prefix_error(error, "domain '%s': ", name);
    return FALSE;
}

static gboolean
qemu_owner(CarrelHypervisor *hv, guint *uid, guint *gid, GError **error)
{
    if (!hv->ops->qemu_owner) {
        g_set_error(error, CARREL_ERROR, CARREL_ERROR_UNSUPPORTED,
                    "this hypervisor runs no QEMU of its own");
        return FALSE;
    }
    if (!hv->ops->qemu_owner(hv, uid, gid, error)) {
        g_prefix_error(error, "the user QEMU runs as: ");
        return FALSE;
    }
    return TRUE;
}

gboolean
carrel_hypervisor_make_qemu_dir(CarrelHypervisor *hv, const char *path, GError **error)
{
    guint uid = 0, gid = 0;
    int fd;

    g_return_val_if_fail(hv != NULL && path != NULL, FALSE);
    if (!qemu_owner(hv, &uid, &gid, error))
        return FALSE;
    if (mkdir(path, 0700) != 0 && errno != EEXIST) {
        g_set_error(error, CARREL_ERROR, CARREL_ERROR_FAILED, "making '%s': %s", path,
                    g_strerror(errno));
        return FALSE;
    }
    fd = open(path, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0 || fchown(fd, uid, gid) != 0 || fchmod(fd, 0700) != 0) {
        g_set_error(error, CARREL_ERROR, CARREL_ERROR_FAILED, "making '%s' QEMU's: %s", path,
                    g_strerror(errno));
        if (fd >= 0)
            close(fd);
        return FALSE;
    }
    close(fd);
    return TRUE;
}

gboolean
carrel_hypervisor_make_qemu_file(CarrelHypervisor *hv, const char *path, GError **error)
{
    guint uid = 0, gid = 0;
    int fd;

    g_return_val_if_fail(hv != NULL && path != NULL, FALSE);
    if (!qemu_owner(hv, &uid, &gid, error))
        return FALSE;
    fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
    if (fd < 0 || fchown(fd, uid, gid) != 0) {
        g_set_error(error, CARREL_ERROR, CARREL_ERROR_FAILED, "making '%s': %s", path,
                    g_strerror(errno));
        if (fd >= 0) {
            close(fd);
            (void)unlink(path);
        }
        return FALSE;
    }
    close(fd);
    return TRUE;
}

gboolean
carrel_hypervisor_fs_freeze(CarrelHypervisor *hv, const char *name, gboolean freeze, GError **error)
{
    g_return_val_if_fail(hv != NULL && name != NULL, FALSE);
    if (hv->ops->fs_freeze(hv, name, freeze, error))
        return TRUE;
    g_prefix_error(error, "domain '%s': %s its filesystems: ", name,
                   freeze ? "freezing" : "thawing");
    return FALSE;
}

gboolean
carrel_hypervisor_ensure_network(CarrelHypervisor *hv, const char *name, const char *xml,
                                 char **ret_xml, GError **error)
{
    g_return_val_if_fail(hv != NULL && name != NULL && xml != NULL && ret_xml != NULL, FALSE);
    if (hv->ops->ensure_network(hv, name, xml, ret_xml, error))
        return TRUE;
    g_prefix_error(error, "network '%s': ", name);
    return FALSE;
}

gboolean
carrel_hypervisor_agent_exec(CarrelHypervisor *hv, const char *name, const CarrelGuestExec *run,
                             CarrelExecResult *ret_result, GError **error)
{
    g_auto(CarrelExecResult) result = {0};

    g_return_val_if_fail(hv != NULL && name != NULL && run != NULL, FALSE);
    if (!carrel_hypervisor_exec_check_args(run->argv, run->stdin_bytes, run->timeout_s,
                                           run->max_output, error) ||
        !hv->ops->agent_exec(hv, name, run, &result, error)) {
        g_prefix_error(error, "domain '%s': guest-exec: ", name);
        return FALSE;
    }
    if (ret_result) {
        *ret_result = result;
        result = (CarrelExecResult){0}; /* handed over */
    }
    return TRUE;
}

gboolean
carrel_hypervisor_screenshot(CarrelHypervisor *hv, const char *name, GBytes **ret_ppm,
                             guint *ret_width, guint *ret_height, GError **error)
{
    g_autoptr(GBytes) image = NULL;
    g_autoptr(GBytes) ppm = NULL;
    guint width = 0, height = 0;

    g_return_val_if_fail(hv != NULL && name != NULL, FALSE);
    if (!hv->ops->screenshot(hv, name, &image, error)) {
        g_prefix_error(error, "domain '%s': ", name);
        return FALSE;
    }
    /* Decoded and validated here for every backend: the guest chose the size and content. */
    if (!(ppm = carrel_image_to_ppm(image, error)) ||
        !carrel_image_ppm_parse(ppm, &width, &height, NULL, error)) {
        g_prefix_error(error, "domain '%s': screenshot: ", name);
        return FALSE;
    }
    if (ret_ppm)
        *ret_ppm = g_steal_pointer(&ppm);
    if (ret_width)
        *ret_width = width;
    if (ret_height)
        *ret_height = height;
    return TRUE;
}

static gboolean
append_chunk(const guint8 *data, gsize len, gpointer user_data, GError **error)
{
    g_byte_array_append(user_data, data, (guint)len);
    return TRUE;
}

gboolean
carrel_hypervisor_file_read(CarrelHypervisor *hv, const char *name, const char *path, gsize max,
                            GBytes **ret_data, GError **error)
{
    g_autoptr(GByteArray) data = g_byte_array_new();

    if (!g_path_is_absolute(path)) {
        g_set_error(error, CARREL_ERROR, CARREL_ERROR_INVALID_ARG,
                    "guest path '%s' is not absolute", path);
        return FALSE;
    }
    if (!hv->ops->file_read(hv, name, path, max, append_chunk, data, error)) {
        g_prefix_error(error, "domain '%s': reading '%s': ", name, path);
        return FALSE;
    }
    *ret_data = g_byte_array_free_to_bytes(g_steal_pointer(&data));
    return TRUE;
}

typedef struct {
    int fd;
    guint64 written;
    GChecksum *sha;
} FdSink;

static gboolean
write_chunk(const guint8 *data, gsize len, gpointer user_data, GError **error)
{
    FdSink *sink = user_data;
    gsize done = 0;

    while (done < len) {
        gssize n = write(sink->fd, data + done, len - done);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0) {
            int saved = errno;
            g_set_error(error, CARREL_ERROR, CARREL_ERROR_FAILED, "writing on the host: %s",
                        g_strerror(saved));
            return FALSE;
        }
        done += (gsize)n;
    }
    sink->written += len;
    if (sink->sha)
        g_checksum_update(sink->sha, data, len);
    return TRUE;
}

gboolean
carrel_hypervisor_file_read_fd(CarrelHypervisor *hv, const char *name, const char *path, int fd,
                               guint64 max, guint64 *ret_size, GError **error)
{
    return carrel_hypervisor_file_read_fd_sha(hv, name, path, fd, max, ret_size, NULL, error);
}

gboolean
carrel_hypervisor_file_read_fd_sha(CarrelHypervisor *hv, const char *name, const char *path, int fd,
                                   guint64 max, guint64 *ret_size, char **ret_sha256,
                                   GError **error)
{
    g_autoptr(GChecksum) sha = g_checksum_new(G_CHECKSUM_SHA256);
    FdSink sink = {.fd = fd, .sha = sha};
    gboolean ok;

    if (!g_path_is_absolute(path)) {
        g_set_error(error, CARREL_ERROR, CARREL_ERROR_INVALID_ARG,
                    "guest path '%s' is not absolute", path);
        return FALSE;
    }
    ok = hv->ops->file_read(hv, name, path, max, write_chunk, &sink, error);
    if (ret_size)
        *ret_size = sink.written;
    if (!ok)
        g_prefix_error(error, "domain '%s': reading '%s': ", name, path);
    else if (ret_sha256)
        *ret_sha256 = g_strdup(g_checksum_get_string(sha));
    return ok;
}

typedef struct {
    GBytes *data;
    gsize done;
} BytesSource;

static gboolean
bytes_source(guint8 *buf, gsize max, gsize *ret_len, gpointer user_data, GError **error)
{
    BytesSource *src = user_data;
    gsize len = 0;
    const guint8 *bytes = g_bytes_get_data(src->data, &len);
    gsize n = MIN(max, len - src->done);

    if (n)
        memcpy(buf, bytes + src->done, n);
    src->done += n;
    *ret_len = n;
    return TRUE;
}

gboolean
carrel_hypervisor_file_write(CarrelHypervisor *hv, const char *name, const char *path, GBytes *data,
                             GError **error)
{
    BytesSource src = {.data = data};

    if (!g_path_is_absolute(path)) {
        g_set_error(error, CARREL_ERROR, CARREL_ERROR_INVALID_ARG,
                    "guest path '%s' is not absolute", path);
        return FALSE;
    }
    if (!hv->ops->file_write(hv, name, path, bytes_source, &src, error)) {
        g_prefix_error(error, "domain '%s': writing '%s': ", name, path);
        return FALSE;
    }
    return TRUE;
}

typedef struct {
    int fd;
    guint64 left;
    GChecksum *sha;
} FdSource;

static gboolean
fd_source(guint8 *buf, gsize max, gsize *ret_len, gpointer user_data, GError **error)
{
    FdSource *src = user_data;
    gssize n;

    do
        n = read(src->fd, buf, (gsize)MIN((guint64)max, src->left));
    while (n < 0 && errno == EINTR);
    if (n < 0) {
        int saved = errno;
        g_set_error(error, CARREL_ERROR, CARREL_ERROR_FAILED, "reading on the host: %s",
                    g_strerror(saved));
        return FALSE;
    }
    /* Shorter than promised: the spool file changed under us; the guest file would be cut. */
    if (n == 0 && src->left > 0) {
        g_set_error(error, CARREL_ERROR, CARREL_ERROR_FAILED,
                    "the source ended %" G_GUINT64_FORMAT " bytes early", src->left);
        return FALSE;
    }
    src->left -= (guint64)n;
    if (src->sha)
        g_checksum_update(src->sha, buf, n);
    *ret_len = (gsize)n;
    return TRUE;
}

gboolean
carrel_hypervisor_file_write_fd(CarrelHypervisor *hv, const char *name, const char *path, int fd,
                                guint64 size, char **ret_sha256, GError **error)
{
    g_autoptr(GChecksum) sha = g_checksum_new(G_CHECKSUM_SHA256);
    FdSource src = {.fd = fd, .left = size, .sha = sha};

    if (!g_path_is_absolute(path)) {
        g_set_error(error, CARREL_ERROR, CARREL_ERROR_INVALID_ARG,
                    "guest path '%s' is not absolute", path);
        return FALSE;
    }
    if (!hv->ops->file_write(hv, name, path, fd_source, &src, error)) {
        g_prefix_error(error, "domain '%s': writing '%s': ", name, path);
        return FALSE;
    }
    if (ret_sha256)
        *ret_sha256 = g_strdup(g_checksum_get_string(sha));
    return TRUE;
}
