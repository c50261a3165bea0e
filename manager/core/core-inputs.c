/*
 * Task inputs: put into a new session before its agent starts. One tar is built on the host
 * (owners forced to the desktop user, modes kept, names sanitized) and unpacked at "/" in the
 * guest by GNU tar: by libguestfs into the overlay before a cold boot, or, after a warm
 * restore, through the agent. A disk under a saved memory state must never change behind the
 * guest kernel's back, so a restored guest unpacks the tar itself, with its own kernel.
 */
#include <glib/gstdio.h>
#include <utime.h>

#include "archive/archive.h"
#include "core/core-priv.h"
#include "disk/disk.h"

/* The desktop user: uid 1000 in carrel's templates and in most desktop distributions. */
#define DESKTOP_UID 1000

/* Reads an upload through the same rules the real build applies, into a scratch tar: a bad
 * upload is refused before any disk or VM work. */
static gboolean
check_upload(CarrelManager *mgr, const CarrelInput *input, GError **error)
{
    g_autofree char *path = carrel_manager_upload_path(mgr, input->upload);
    g_autofree char *scratch = g_strconcat(path, ".check", NULL);
    CarrelArchiveLimits limits = {CARREL_LIMIT_UPLOAD_BYTES, CARREL_LIMIT_EXTRACT_FILES * 10};
    g_autoptr(CarrelArchiveWriter) w = NULL;
    gboolean ok;

    if (!carrel_util_is_valid_name(input->upload + 2) ||
        !g_file_test(path, G_FILE_TEST_IS_REGULAR)) {
        g_set_error(error, CARREL_ERROR, CARREL_ERROR_NOT_FOUND,
                    "no upload '%s': never stored, used by a create already, or removed "
                    "unused after the upload TTL",
                    input->upload);
        return FALSE;
    }
    w = carrel_archive_writer_new(scratch, &limits, error);
    ok = w && carrel_archive_writer_add_tar(w, path, input->path, 0, 0, error);
    g_clear_pointer(&w, carrel_archive_writer_free);
    (void)g_unlink(scratch);
    if (!ok && error && *error) {
        (*error)->code = CARREL_ERROR_INVALID_ARG;
        g_prefix_error(error, "upload '%s': ", input->upload);
    }
    /* Taken by a create now: a whole TTL again, so the sweep leaves it until the create ends. */
    if (ok)
        (void)g_utime(path, NULL);
    return ok;
}

gboolean
carrel_manager_check_inputs(CarrelManager *mgr, GPtrArray *inputs, GError **error)
{
    for (guint i = 0; inputs && i < inputs->len; i++) {
        CarrelInput *input = g_ptr_array_index(inputs, i);
        if (input->upload && !check_upload(mgr, input, error))
            return FALSE;
    }
    return TRUE;
}

void
carrel_manager_forget_uploads(CarrelManager *mgr, GPtrArray *inputs)
{
    for (guint i = 0; inputs && i < inputs->len; i++) {
        CarrelInput *input = g_ptr_array_index(inputs, i);
        g_autofree char *path =
            input->upload ? carrel_manager_upload_path(mgr, input->upload) : NULL;
        if (path)
            (void)g_unlink(path);
    }
}

gboolean
carrel_passwd_find_uid(const char *text, gsize len, gint64 uid, gint64 *ret_gid)
{
    g_autofree char *copy = g_strndup(text, len);
    g_auto(GStrv) lines = g_strsplit(copy, "\n", -1);

    for (guint i = 0; lines[i]; i++) {
        g_auto(GStrv) f = g_strsplit(lines[i], ":", 7);
        guint64 u, g;
        if (g_strv_length(f) < 4 ||
            !g_ascii_string_to_unsigned(f[2], 10, 0, G_MAXUINT32, &u, NULL) ||
            !g_ascii_string_to_unsigned(f[3], 10, 0, G_MAXUINT32, &g, NULL) || (gint64)u != uid)
            continue;
        *ret_gid = (gint64)g;
        return TRUE;
    }
    return FALSE;
}

/* Owner of the inputs: the desktop user when the guest has one, else root. */
static void
desktop_owner(GBytes *passwd, gint64 *ret_uid, gint64 *ret_gid)
{
    gsize len = 0;
    const char *text = passwd ? g_bytes_get_data(passwd, &len) : NULL;

    *ret_uid = DESKTOP_UID;
    if (text && carrel_passwd_find_uid(text, len, DESKTOP_UID, ret_gid))
        return;
    *ret_uid = *ret_gid = 0;
}

static gboolean
add_input(CarrelManager *mgr, CarrelArchiveWriter *w, const CarrelInput *input, gint64 uid,
          gint64 gid, GError **error)
{
    g_autofree char *upload = NULL;
    gsize len = 0;
    const guint8 *data;

    if (input->content) {
        data = g_bytes_get_data(input->content, &len);
        return carrel_archive_writer_add_bytes(w, input->path, data, len, input->mode, uid, gid,
                                               error);
    }
    if (input->upload) {
        upload = carrel_manager_upload_path(mgr, input->upload);
        return carrel_archive_writer_add_tar(w, upload, input->path, uid, gid, error);
    }
    return carrel_archive_writer_add_local(w, input->host_path, input->path, uid, gid, error);
}

static gboolean
build_tar(CarrelManager *mgr, GPtrArray *inputs, const char *tar_path, GBytes *passwd,
          GError **error)
{
    CarrelArchiveLimits limits = {CARREL_LIMIT_UPLOAD_BYTES, CARREL_LIMIT_EXTRACT_FILES * 10};
    g_autoptr(CarrelArchiveWriter) w = carrel_archive_writer_new(tar_path, &limits, error);
    gint64 uid, gid;

    if (!w)
        return FALSE;
    desktop_owner(passwd, &uid, &gid);
    for (guint i = 0; i < inputs->len; i++) {
        CarrelInput *input = g_ptr_array_index(inputs, i);
        if (!add_input(mgr, w, input, uid, gid, error)) {
            g_prefix_error(error, "input '%s': ", input->path);
            return FALSE;
        }
    }
    return carrel_archive_writer_finish(w, error);
}

/* Before the first boot: one writable appliance on the new overlay. */
gboolean
carrel_manager_inject_cold(CarrelManager *mgr, const CarrelSession *session, GPtrArray *inputs,
                           GError **error)
{
    CarrelGuestfsDisk disk = {session->overlay_path, "qcow2", "/"};
    g_autofree char *tar = g_build_filename(session->dir, "inputs.tar", NULL);
    g_autoptr(CarrelGuestfs) gfs = NULL;
    g_autoptr(GBytes) passwd = NULL;
    gboolean ok;

    gfs = carrel_guestfs_open(&disk, 1, TRUE, mgr->accel == CARREL_ACCEL_TCG, error);
    if (!gfs)
        return FALSE;
    passwd = carrel_guestfs_read(gfs, "/etc/passwd", 1024 * 1024, NULL);
    ok = build_tar(mgr, inputs, tar, passwd, error) && carrel_guestfs_tar_in(gfs, tar, "/", error);
    (void)g_unlink(tar);
    return ok;
}

/* After a warm restore: the guest unpacks the tar with its own kernel, through the agent. */
gboolean
carrel_manager_inject_by_agent(CarrelManager *mgr, const CarrelSession *session, GPtrArray *inputs,
                               GError **error)
{
    g_autofree char *domain = carrel_session_domain_name(session->id);
    g_autofree char *tar = g_build_filename(session->dir, "inputs.tar", NULL);
    g_autofree char *guest_tar = g_strdup_printf("/tmp/carrel-inputs-%s.tar", session->id);
    const char *unpack[] = {"/bin/tar",
                            "--extract",
                            "--numeric-owner",
                            "--same-permissions",
                            "--no-overwrite-dir",
                            "--directory=/",
                            "--file",
                            guest_tar,
                            NULL};
    const char *rm[] = {"/bin/rm", "-f", guest_tar, NULL};
    CarrelGuestExec run_unpack = {.argv = unpack, .timeout_s = 300, .max_output = 64 * 1024};
    CarrelGuestExec run_rm = {.argv = rm, .timeout_s = 30, .max_output = 4096};
    g_auto(CarrelExecResult) result = {0};
    g_autoptr(GBytes) passwd = NULL;
    g_autoptr(GBytes) data = NULL;
    g_autofree char *contents = NULL;
    gsize len = 0;
    gboolean ok;

    (void)carrel_hypervisor_file_read(mgr->hv, domain, "/etc/passwd", 1024 * 1024, &passwd, NULL);
    ok = build_tar(mgr, inputs, tar, passwd, error) &&
         g_file_get_contents(tar, &contents, &len, error);
    (void)g_unlink(tar);
    if (!ok)
        return FALSE;
    if (len > CARREL_LIMIT_FILE_BYTES) {
        g_set_error(error, CARREL_ERROR, CARREL_ERROR_LIMIT,
                    "inputs of %" G_GSIZE_FORMAT " bytes are more than a restored session takes "
                    "through its agent (%d): create it with --cold",
                    len, CARREL_LIMIT_FILE_BYTES);
        return FALSE;
    }
    data = g_bytes_new_take(g_steal_pointer(&contents), len);
    ok = carrel_hypervisor_file_write(mgr->hv, domain, guest_tar, data, error) &&
         carrel_hypervisor_agent_exec(mgr->hv, domain, &run_unpack, &result, error);
    (void)carrel_hypervisor_agent_exec(mgr->hv, domain, &run_rm, NULL, NULL);
    if (ok && result.exit_code != 0) {
        GBytes *err = result.stderr_bytes;
        g_autofree char *msg = carrel_util_clean_text(err ? g_bytes_get_data(err, NULL) : "",
                                                      err ? g_bytes_get_size(err) : 0, 4096);
        g_set_error(error, CARREL_ERROR, CARREL_ERROR_HYPERVISOR,
                    "unpacking the inputs in the guest failed (exit %d): %s", result.exit_code,
                    msg);
        return FALSE;
    }
    return ok;
}
