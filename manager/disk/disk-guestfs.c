/*
 * libguestfs through its C API: one appliance handle serves every operation of a task (inject,
 * extract, diff), because under TCG the appliance launch (~20 s) is the whole cost.
 *
 * Paths given here are guest paths under a disk's mountpoint in the appliance ("/" when one
 * disk is open). The appliance resolves symlinks against its own root, never the host's, but
 * still not where the guest meant: callers check parents with carrel_guestfs_check_parents.
 */
#include <glib/gstdio.h>
#include <guestfs.h>
#include <sys/stat.h>

#include "disk/disk.h"

struct _CarrelGuestfs {
    guestfs_h *g;
};

/* The appliance's last error as a GError with context. */
static void set_error(CarrelGuestfs *gfs, GError **error, const char *fmt, ...) G_GNUC_PRINTF(3, 4);

static void
set_error(CarrelGuestfs *gfs, GError **error, const char *fmt, ...)
{
    const char *last = guestfs_last_error(gfs->g);
    int err = guestfs_last_errno(gfs->g);
    g_autofree char *what = NULL;
    va_list ap;

    va_start(ap, fmt);
    what = g_strdup_vprintf(fmt, ap);
    va_end(ap);
    g_set_error(error, CARREL_ERROR, err == ENOENT ? CARREL_ERROR_NOT_FOUND : CARREL_ERROR_DISK,
                "%s: %s", what, last ? last : "libguestfs failed");
}

void
carrel_guestfs_close(CarrelGuestfs *gfs)
{
    if (!gfs)
        return;
    if (gfs->g) {
        /* shutdown flushes a writable disk and reports write errors; close alone would not. */
        (void)guestfs_shutdown(gfs->g);
        guestfs_close(gfs->g);
    }
    g_free(gfs);
}

static gboolean
add_disks(CarrelGuestfs *gfs, const CarrelGuestfsDisk *disks, guint n, gboolean writable,
          GError **error)
{
    for (guint i = 0; i < n; i++) {
        if (guestfs_add_drive_opts(gfs->g, disks[i].path, GUESTFS_ADD_DRIVE_OPTS_FORMAT,
                                   disks[i].format, GUESTFS_ADD_DRIVE_OPTS_READONLY,
                                   writable ? 0 : 1, -1) == -1) {
            set_error(gfs, error, "adding disk %s", disks[i].path);
            return FALSE;
        }
    }
    return TRUE;
}

/* The drive index (0-based) a device or partition name belongs to, or -1. */
static int
drive_of(CarrelGuestfs *gfs, const char *device)
{
    g_autofree char *dev = NULL;
    int index;

    if (!g_str_has_prefix(device, "/dev/"))
        return -1;
    dev = guestfs_part_to_dev(gfs->g, device);
    index = guestfs_device_index(gfs->g, dev ? dev : device);
    return index;
}

static void
free_strv(char **strv)
{
    g_strfreev(strv);
}

typedef struct {
    const char *mountpoint;
    const char *device;
} MountPair;

/* Parents before children: shortest mountpoint first. */
static gint
by_mountpoint_length(gconstpointer a, gconstpointer b)
{
    const MountPair *pa = a, *pb = b;

    return (gint)strlen(pa->mountpoint) - (gint)strlen(pb->mountpoint);
}

static gboolean
mount_one(CarrelGuestfs *gfs, const char *device, const char *at, gboolean writable, GError **error)
{
    int rc = writable ? guestfs_mount(gfs->g, device, at) : guestfs_mount_ro(gfs->g, device, at);

    if (rc == -1) {
        set_error(gfs, error, "mounting %s at %s", device, at);
        return FALSE;
    }
    return TRUE;
}

/* Mounts the filesystems of an inspected root that live on drive index, under prefix. */
static gboolean
mount_root(CarrelGuestfs *gfs, const char *root, int index, const char *prefix, gboolean writable,
           GError **error)
{
    char **pairs = guestfs_inspect_get_mountpoints(gfs->g, root);
    g_autoptr(GArray) order = g_array_new(FALSE, FALSE, sizeof(MountPair));
    gboolean ok = TRUE;

    if (!pairs) {
        set_error(gfs, error, "reading the mountpoints of %s", root);
        return FALSE;
    }
    for (guint i = 0; pairs[i] && pairs[i + 1]; i += 2) {
        MountPair pair = {pairs[i], pairs[i + 1]};
        /* Two copies of one disk (diff) share UUIDs: mount only what is on this drive. */
        if (drive_of(gfs, pairs[i + 1]) == index)
            g_array_append_val(order, pair);
    }
    g_array_sort(order, by_mountpoint_length);
    for (guint i = 0; ok && i < order->len; i++) {
        MountPair *pair = &g_array_index(order, MountPair, i);
        g_autofree char *at = g_build_filename(prefix, pair->mountpoint, NULL);
        ok = mount_one(gfs, pair->device, at, writable, error);
    }
    free_strv(pairs);
    return ok;
}

/* No OS found by inspection (a bare filesystem such as carrel's own templates): the largest
 * filesystem on the drive that is not swap. */
static char *
largest_filesystem(CarrelGuestfs *gfs, int index)
{
    char **fs = guestfs_list_filesystems(gfs->g);
    char *best = NULL;
    gint64 best_size = -1;

    for (guint i = 0; fs && fs[i] && fs[i + 1]; i += 2) {
        gint64 size;
        if (g_str_equal(fs[i + 1], "swap") || g_str_equal(fs[i + 1], "unknown") ||
            drive_of(gfs, fs[i]) != index)
            continue;
        size = guestfs_blockdev_getsize64(gfs->g, fs[i]);
        if (size > best_size) {
            g_free(best);
            best = g_strdup(fs[i]);
            best_size = size;
        }
    }
    free_strv(fs);
    return best;
}

static gboolean
mount_drive(CarrelGuestfs *gfs, char **roots, int index, const char *prefix, gboolean writable,
            GError **error)
{
    g_autofree char *device = NULL;

    for (guint i = 0; roots && roots[i]; i++)
        if (drive_of(gfs, roots[i]) == index)
            return mount_root(gfs, roots[i], index, prefix, writable, error);
    device = largest_filesystem(gfs, index);
    if (!device) {
        g_set_error(error, CARREL_ERROR, CARREL_ERROR_DISK,
                    "disk %d has no filesystem carrel can mount", index);
        return FALSE;
    }
    return mount_one(gfs, device, prefix, writable, error);
}

static gboolean
mount_all(CarrelGuestfs *gfs, const CarrelGuestfsDisk *disks, guint n, gboolean writable,
          GError **error)
{
    char **roots = guestfs_inspect_os(gfs->g);
    gboolean ok = TRUE;

    for (guint i = 0; ok && i < n; i++) {
        if (!g_str_equal(disks[i].mountpoint, "/") &&
            guestfs_mkmountpoint(gfs->g, disks[i].mountpoint) == -1) {
            set_error(gfs, error, "making mountpoint %s", disks[i].mountpoint);
            ok = FALSE;
        }
    }
    for (guint i = 0; ok && i < n; i++)
        ok = mount_drive(gfs, roots, (int)i, disks[i].mountpoint, writable, error);
    free_strv(roots);
    return ok;
}

CarrelGuestfs *
carrel_guestfs_open(const CarrelGuestfsDisk *disks, guint n, gboolean writable, gboolean force_tcg,
                    GError **error)
{
    g_autoptr(CarrelGuestfs) gfs = g_new0(CarrelGuestfs, 1);
    char *tcg[] = {(char *)"force_tcg", NULL};

    g_return_val_if_fail(n > 0, NULL);
    /* Environment parsing stays on: LIBGUESTFS_DEBUG=1 is how a locked disk's real cause shows. */
    gfs->g = guestfs_create_flags(GUESTFS_CREATE_NO_CLOSE_ON_EXIT);
    if (!gfs->g) {
        g_set_error(error, CARREL_ERROR, CARREL_ERROR_DISK, "cannot create a libguestfs handle");
        return NULL;
    }
    guestfs_set_error_handler(gfs->g, NULL, NULL);
    if (guestfs_set_backend(gfs->g, "direct") == -1 ||
        (force_tcg && guestfs_set_backend_settings(gfs->g, tcg) == -1)) {
        set_error(gfs, error, "configuring libguestfs");
        return NULL;
    }
    if (!add_disks(gfs, disks, n, writable, error))
        return NULL;
    if (guestfs_launch(gfs->g) == -1) {
        set_error(gfs, error, "launching the libguestfs appliance");
        return NULL;
    }
    if (!mount_all(gfs, disks, n, writable, error))
        return NULL;
    return g_steal_pointer(&gfs);
}

static CarrelDiskFileType
type_of_mode(gint64 mode)
{
    if (S_ISREG(mode))
        return CARREL_DISK_FILE_REGULAR;
    if (S_ISDIR(mode))
        return CARREL_DISK_FILE_DIR;
    if (S_ISLNK(mode))
        return CARREL_DISK_FILE_SYMLINK;
    return CARREL_DISK_FILE_OTHER;
}

static void
stat_from_statns(const struct guestfs_statns *st, CarrelGuestfsStat *ret)
{
    ret->type = type_of_mode(st->st_mode);
    ret->size = st->st_size > 0 ? (guint64)st->st_size : 0;
    ret->mode = (guint32)(st->st_mode & 07777);
    ret->uid = st->st_uid;
    ret->gid = st->st_gid;
    ret->mtime = st->st_mtime_sec;
    ret->nlink = st->st_nlink;
}

gboolean
carrel_guestfs_lstat(CarrelGuestfs *gfs, const char *path, CarrelGuestfsStat *ret_stat,
                     GError **error)
{
    struct guestfs_statns *st = guestfs_lstatns(gfs->g, path);

    if (!st) {
        if (guestfs_last_errno(gfs->g) == ENOENT)
            g_set_error(error, CARREL_ERROR, CARREL_ERROR_NOT_FOUND, "%s: not found", path);
        else
            set_error(gfs, error, "%s", path);
        return FALSE;
    }
    stat_from_statns(st, ret_stat);
    guestfs_free_statns(st);
    return TRUE;
}

gboolean
carrel_guestfs_check_parents(CarrelGuestfs *gfs, const char *root, const char *path, GError **error)
{
    g_auto(GStrv) parts = g_strsplit(path, "/", -1);
    g_autoptr(GString) at = g_string_new(root);
    guint n = g_strv_length(parts);

    /* Every component but the last must be a real directory, never a symlink. */
    for (guint i = 0; i + 1 < n; i++) {
        CarrelGuestfsStat st;
        if (!*parts[i])
            continue;
        if (at->len == 0 || at->str[at->len - 1] != '/')
            g_string_append_c(at, '/');
        g_string_append(at, parts[i]);
        if (!carrel_guestfs_lstat(gfs, at->str, &st, error))
            return FALSE;
        if (st.type != CARREL_DISK_FILE_DIR) {
            g_set_error(error, CARREL_ERROR, CARREL_ERROR_INVALID_ARG,
                        "%s is %s, not a directory: carrel never follows a guest's links", at->str,
                        st.type == CARREL_DISK_FILE_SYMLINK ? "a symbolic link" : "a file");
            return FALSE;
        }
    }
    return TRUE;
}

char *
carrel_guestfs_readlink(CarrelGuestfs *gfs, const char *path, GError **error)
{
    char *target = guestfs_readlink(gfs->g, path);
    char *copy;

    if (!target) {
        set_error(gfs, error, "reading link %s", path);
        return NULL;
    }
    copy = g_strdup(target);
    free(target);
    return copy;
}

gboolean
carrel_guestfs_download(CarrelGuestfs *gfs, const char *path, const char *host_path, GError **error)
{
    if (guestfs_download(gfs->g, path, host_path) == -1) {
        set_error(gfs, error, "copying out %s", path);
        return FALSE;
    }
    return TRUE;
}

gboolean
carrel_guestfs_tar_out(CarrelGuestfs *gfs, const char *dir, const char *host_tar, GError **error)
{
    if (guestfs_tar_out_opts(gfs->g, dir, host_tar, GUESTFS_TAR_OUT_OPTS_NUMERICOWNER, 1, -1) ==
        -1) {
        set_error(gfs, error, "archiving %s", dir);
        return FALSE;
    }
    return TRUE;
}

gboolean
carrel_guestfs_tar_in(CarrelGuestfs *gfs, const char *host_tar, const char *dir, GError **error)
{
    if (guestfs_tar_in_opts(gfs->g, host_tar, dir, -1) == -1) {
        set_error(gfs, error, "unpacking into %s", dir);
        return FALSE;
    }
    if (guestfs_sync(gfs->g) == -1) {
        set_error(gfs, error, "flushing %s", dir);
        return FALSE;
    }
    return TRUE;
}

GBytes *
carrel_guestfs_read(CarrelGuestfs *gfs, const char *path, gsize max, GError **error)
{
    CarrelGuestfsStat st;
    size_t len = 0;
    char *data;
    GBytes *bytes;

    if (!carrel_guestfs_lstat(gfs, path, &st, error))
        return NULL;
    if (st.type != CARREL_DISK_FILE_REGULAR || st.size > max) {
        g_set_error(error, CARREL_ERROR, CARREL_ERROR_LIMIT,
                    "%s is not a regular file of at most %" G_GSIZE_FORMAT " bytes", path, max);
        return NULL;
    }
    data = guestfs_read_file(gfs->g, path, &len);
    if (!data) {
        set_error(gfs, error, "reading %s", path);
        return NULL;
    }
    bytes = g_bytes_new(data, len);
    free(data);
    return bytes;
}

char *
carrel_guestfs_sha256(CarrelGuestfs *gfs, const char *path, GError **error)
{
    char *sum = guestfs_checksum(gfs->g, "sha256", path);
    char *copy;

    if (!sum) {
        set_error(gfs, error, "hashing %s", path);
        return NULL;
    }
    copy = g_strdup(sum);
    free(sum);
    return copy;
}

/* Names (relative to root) from find0's NUL-separated list, grouped by their directory. */
static GHashTable *
names_by_dir(const char *list, gsize len)
{
    GHashTable *by_dir =
        g_hash_table_new_full(g_str_hash, g_str_equal, g_free, (GDestroyNotify)g_ptr_array_unref);
    gsize at = 0;

    while (at < len) {
        const char *name = list + at;
        gsize n = strnlen(name, len - at);
        g_autofree char *copy = g_strndup(name, n);
        const char *slash = strrchr(copy, '/');
        g_autofree char *dir = slash ? g_strndup(copy, (gsize)(slash - copy)) : g_strdup("");
        GPtrArray *names = g_hash_table_lookup(by_dir, dir);

        at += n + 1;
        if (n == 0)
            continue;
        if (!names) {
            names = g_ptr_array_new_with_free_func(g_free);
            g_hash_table_insert(by_dir, g_strdup(dir), names);
        }
        g_ptr_array_add(names, g_strdup(slash ? slash + 1 : copy));
    }
    return by_dir;
}

/* One lstatnslist call per chunk of a directory's names: a round trip per file would cost
 * minutes under TCG. */
static gboolean
stat_dir(CarrelGuestfs *gfs, const char *root, const char *dir, GPtrArray *names, GHashTable *into,
         GError **error)
{
    g_autofree char *abs = g_build_filename(root, dir, NULL);

    for (guint start = 0; start < names->len; start += 512) {
        guint count = MIN(512u, names->len - start);
        g_autofree char **chunk = g_new0(char *, count + 1);
        struct guestfs_statns_list *list;

        for (guint i = 0; i < count; i++)
            chunk[i] = g_ptr_array_index(names, start + i);
        list = guestfs_lstatnslist(gfs->g, abs, chunk);
        if (!list) {
            set_error(gfs, error, "listing %s", abs);
            return FALSE;
        }
        for (guint i = 0; i < list->len && i < count; i++) {
            CarrelGuestfsStat *st = g_new0(CarrelGuestfsStat, 1);
            stat_from_statns(&list->val[i], st);
            g_hash_table_insert(
                into, *dir ? g_strdup_printf("%s/%s", dir, chunk[i]) : g_strdup(chunk[i]), st);
        }
        guestfs_free_statns_list(list);
    }
    return TRUE;
}

GHashTable *
carrel_guestfs_walk(CarrelGuestfs *gfs, const char *root, const char *scratch_dir, GError **error)
{
    g_autofree char *list_path = g_build_filename(scratch_dir, "find0.list", NULL);
    g_autofree char *list = NULL;
    gsize len = 0;
    g_autoptr(GHashTable) by_dir = NULL;
    g_autoptr(GHashTable) stats = NULL;
    GHashTableIter iter;
    gpointer key, value;

    if (guestfs_find0(gfs->g, root, list_path) == -1) {
        set_error(gfs, error, "listing %s", root);
        return NULL;
    }
    if (!g_file_get_contents(list_path, &list, &len, error))
        return NULL;
    (void)g_unlink(list_path);
    by_dir = names_by_dir(list, len);
    stats = g_hash_table_new_full(g_str_hash, g_str_equal, g_free, g_free);
    g_hash_table_iter_init(&iter, by_dir);
    while (g_hash_table_iter_next(&iter, &key, &value))
        if (!stat_dir(gfs, root, key, value, stats, error))
            return NULL;
    return g_steal_pointer(&stats);
}
