#include <errno.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>
#include <glib/gstdio.h>

#define CARREL_DISK_PRIV_H_ALLOW
#include "disk/disk-priv.h"

/*
 * Owner read/write only: the overlay holds everything the guest wrote. libvirt's dynamic
 * ownership chowns it to the QEMU user (libvirt-qemu on Debian) while the VM runs and gives it
 * back afterwards, so the owner bits are all QEMU needs.
 */
#define OVERLAY_MODE 0600

/*
 * Reserves path with O_EXCL before qemu-img runs: an existing file (or a symlink planted there)
 * is refused atomically, and the mode is set before any byte is written.
 */
static gboolean
reserve_path(const char *path, GError **error)
{
    int fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, OVERLAY_MODE);

    if (fd < 0) {
        int saved = errno;
        if (saved == EEXIST)
            g_set_error(error, CARREL_ERROR, CARREL_ERROR_EXISTS, "overlay '%s' already exists",
                        path);
        else
            g_set_error(error, CARREL_ERROR, CARREL_ERROR_DISK, "creating overlay '%s': %s", path,
                        g_strerror(saved));
        return FALSE;
    }
    /* The umask may have cleared bits of OVERLAY_MODE. */
    if (fchmod(fd, OVERLAY_MODE) < 0) {
        int saved = errno;
        close(fd);
        (void)unlink(path);
        g_set_error(error, CARREL_ERROR, CARREL_ERROR_DISK, "setting the mode of overlay '%s': %s",
                    path, g_strerror(saved));
        return FALSE;
    }
    close(fd);
    return TRUE;
}

gboolean
carrel_disk_create_overlay(const char *path, const char *backing, const char *backing_format,
                           GError **error)
{
    /* -F records the backing format in the overlay, so QEMU never probes the backing file. */
    const char *argv[] = {"qemu-img",     "create", "-q",    "-f", "qcow2", "-F",
                          backing_format, "-b",     backing, path, NULL};
    g_autoptr(GError) local = NULL;

    if (!carrel_disk_check_path(path, "overlay", error) ||
        !carrel_disk_check_path(backing, "backing file", error))
        return FALSE;
    if (!carrel_disk_is_supported_format(backing_format)) {
        g_set_error(error, CARREL_ERROR, CARREL_ERROR_INVALID_ARG,
                    "backing format '%s' is not supported: use 'qcow2' or 'raw'",
                    backing_format && carrel_util_is_clean_text(backing_format) ? backing_format
                                                                                : "(invalid)");
        return FALSE;
    }
    if (!reserve_path(path, error))
        return FALSE;
    if (!carrel_util_run(argv, CARREL_DISK_CREATE_TIMEOUT_S, NULL, NULL, &local)) {
        (void)unlink(path);
        g_set_error(error, CARREL_ERROR,
                    g_error_matches(local, CARREL_ERROR, CARREL_ERROR_TIMEOUT)
                        ? CARREL_ERROR_TIMEOUT
                        : CARREL_ERROR_DISK,
                    "creating overlay '%s' on '%s': %s", path, backing, local->message);
        return FALSE;
    }
    return TRUE;
}

gboolean
carrel_disk_freeze(const char *path, GError **error)
{
    /* A layer others stand on is never written again: read-only for everyone, root included
     * by convention (QEMU opens backing files read-only). */
    if (g_chmod(path, 0444) < 0) {
        int saved = errno;
        g_set_error(error, CARREL_ERROR, CARREL_ERROR_DISK, "freezing '%s': %s", path,
                    g_strerror(saved));
        return FALSE;
    }
    return TRUE;
}
