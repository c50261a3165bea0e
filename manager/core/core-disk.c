/*
 * core: the host's disk. carreld keeps a reserve, a preallocated file in its state dir, and gives
 * it up when the store finds the disk full, so state changes and the timeline can still be
 * written; the watcher makes it again once there is room. While the disk is low (the reserve
 * given up, or less free than the reserve's size), the verbs that would fill it are refused early
 * with NO_SPACE; reads keep working. The watcher also asks why QEMU paused a session (a write
 * that found the host's disk full) and pauses a session whose overlay holds more than its
 * policy's [resources] max_disk_gib.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include "core/core-priv.h"

#define RESERVE_FILE "disk-reserve"
#define MIB (G_GUINT64_CONSTANT(1024) * 1024)

/* Called with disk_lock held. */
static gboolean
reserve_make_locked(CarrelManager *mgr, GError **error)
{
    g_autofree char *tmp = g_strconcat(mgr->reserve_path, ".new", NULL);
    struct stat st;
    int fd, rc;

    if (mgr->reserve_held || mgr->reserve_bytes == 0)
        return TRUE;
    /* One left by a previous run counts when it is whole (allocated, not sparse). */
    if (lstat(mgr->reserve_path, &st) == 0 && S_ISREG(st.st_mode) &&
        (guint64)st.st_blocks * 512 >= mgr->reserve_bytes) {
        mgr->reserve_held = TRUE;
        return TRUE;
    }
    fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0600);
    if (fd < 0) {
        rc = errno;
        g_set_error(error, CARREL_ERROR, CARREL_ERROR_DISK, "making the disk reserve '%s': %s", tmp,
                    g_strerror(rc));
        return FALSE;
    }
    /* Allocated blocks, not a sparse file: giving it up must really free them. */
    rc = posix_fallocate(fd, 0, (off_t)mgr->reserve_bytes);
    close(fd);
    if (rc == 0 && rename(tmp, mgr->reserve_path) < 0)
        rc = errno;
    if (rc != 0) {
        (void)unlink(tmp);
        g_set_error(error, CARREL_ERROR, rc == ENOSPC ? CARREL_ERROR_NO_SPACE : CARREL_ERROR_DISK,
                    "making the disk reserve '%s' of %" G_GUINT64_FORMAT " MiB: %s",
                    mgr->reserve_path, mgr->reserve_bytes / MIB, g_strerror(rc));
        return FALSE;
    }
    mgr->reserve_held = TRUE;
    return TRUE;
}

void
carrel_manager_disk_init(CarrelManager *mgr, guint reserve_mib, guint low_mib)
{
    mgr->reserve_path = g_build_filename(mgr->state_dir, RESERVE_FILE, NULL);
    mgr->reserve_bytes = (guint64)reserve_mib * MIB;
    mgr->low_bytes = low_mib ? (guint64)low_mib * MIB : mgr->reserve_bytes;
}

gboolean
carrel_manager_disk_reserve(CarrelManager *mgr, GError **error)
{
    g_autoptr(GMutexLocker) locker G_GNUC_UNUSED = g_mutex_locker_new(&mgr->disk_lock);

    return reserve_make_locked(mgr, error);
}

gboolean
carrel_manager_disk_release(CarrelManager *mgr)
{
    g_autoptr(GMutexLocker) locker G_GNUC_UNUSED = g_mutex_locker_new(&mgr->disk_lock);

    if (!mgr->reserve_held)
        return FALSE;
    if (unlink(mgr->reserve_path) < 0 && errno != ENOENT)
        return FALSE;
    mgr->reserve_held = FALSE;
    g_warning("the host's disk is full: gave up the %" G_GUINT64_FORMAT
              " MiB reserve in '%s' so carreld's store can write; creates, snapshots and uploads "
              "are refused until there is room",
              mgr->reserve_bytes / MIB, mgr->state_dir);
    return TRUE;
}

/* Bytes free for carreld in its state dir, or G_MAXUINT64 when that cannot be told. */
static guint64
free_bytes(CarrelManager *mgr)
{
    struct statvfs vfs;

    if (statvfs(mgr->state_dir, &vfs) < 0)
        return G_MAXUINT64;
    return (guint64)vfs.f_bavail * vfs.f_frsize;
}

void
carrel_manager_disk_tend(CarrelManager *mgr)
{
    g_autoptr(GMutexLocker) locker G_GNUC_UNUSED = g_mutex_locker_new(&mgr->disk_lock);

    /* Made again only with room to spare, or the next write would take it straight back. */
    if (!mgr->reserve_held && free_bytes(mgr) >= mgr->reserve_bytes + mgr->low_bytes &&
        reserve_make_locked(mgr, NULL))
        g_message("there is room on the host's disk again: the %" G_GUINT64_FORMAT
                  " MiB reserve in '%s' is back",
                  mgr->reserve_bytes / MIB, mgr->state_dir);
}

gboolean
carrel_manager_disk_check(CarrelManager *mgr, const char *what, GError **error)
{
    guint64 avail;
    gboolean held;

    carrel_manager_disk_tend(mgr);
    g_mutex_lock(&mgr->disk_lock);
    held = mgr->reserve_held || mgr->reserve_bytes == 0;
    g_mutex_unlock(&mgr->disk_lock);
    avail = free_bytes(mgr);
    if (held && avail >= mgr->low_bytes)
        return TRUE;
    g_set_error(error, CARREL_ERROR, CARREL_ERROR_NO_SPACE,
                "the host's disk is low (%" G_GUINT64_FORMAT
                " MiB free in '%s', carreld keeps %" G_GUINT64_FORMAT
                " MiB): %s refused until there is room",
                avail == G_MAXUINT64 ? 0 : avail / MIB, mgr->state_dir, mgr->low_bytes / MIB, what);
    return FALSE;
}

const char *
carrel_manager_pause_reason_text(CarrelPauseReason reason)
{
    switch (reason) {
    case CARREL_PAUSE_NO_SPACE:
        return "host disk full: a write to the session's disk found no room on the host (free "
               "space there, then resume it)";
    case CARREL_PAUSE_IO_ERROR:
        return "disk I/O error on the host (see carreld's and libvirt's logs)";
    case CARREL_PAUSE_NONE:
    case CARREL_PAUSE_USER:
    case CARREL_PAUSE_LAST:
        break;
    }
    return NULL;
}

/* What the session's disk takes on the host: QEMU's word, else the overlay's blocks. */
static gboolean
disk_used(CarrelManager *mgr, const CarrelSession *session, guint64 *ret_bytes)
{
    g_autofree char *domain = carrel_session_domain_name(session->id);
    struct stat st;

    if (carrel_hypervisor_disk_allocation(mgr->hv, domain, ret_bytes, NULL))
        return TRUE;
    if (!session->overlay_path || stat(session->overlay_path, &st) < 0)
        return FALSE;
    *ret_bytes = (guint64)st.st_blocks * 512;
    return TRUE;
}

char *
carrel_manager_disk_over_limit(CarrelManager *mgr, const CarrelSession *session)
{
    const CarrelPolicy *policy = carrel_manager_session_policy(mgr, session, NULL);
    guint64 max = policy ? carrel_policy_max_disk_bytes(policy) : 0;
    guint64 used = 0;

    /* What the guest wrote, as the host holds it (a qcow2 overlay grows as it writes). */
    if (!max || !disk_used(mgr, session, &used) || used <= max)
        return NULL;
    return g_strdup_printf("disk limit: the session's disk holds %" G_GUINT64_FORMAT
                           " MiB, its policy '%s' allows %" G_GUINT64_FORMAT
                           " MiB ([resources] max_disk_gib)",
                           used / MIB, carrel_policy_get_name(policy), max / MIB);
}
