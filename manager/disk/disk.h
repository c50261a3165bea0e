/*
 * disk: qcow2 and raw disk files. Inspection (disk-info.c), import checks (disk-check.c), qcow2
 * overlays (disk-overlay.c, qemu-img) and libguestfs access (disk-guestfs.c).
 */
#pragma once

#include "util/util.h"

G_BEGIN_DECLS

/* What qemu-img says of a disk file, parsed from `qemu-img info --output=json` (untrusted text). */
typedef struct {
    char *format;
    guint64 virtual_size;
    guint64 actual_size;
    char *backing_filename; /* NULL when none */
    char *backing_format;   /* "backing-filename-format", NULL when absent */
    char *data_file;        /* qcow2 external data file, NULL when none */
    gboolean corrupt;       /* qcow2 format-specific "corrupt" flag */
    gboolean encrypted;
} CarrelDiskInfo;

void carrel_disk_info_free(CarrelDiskInfo *info);
G_DEFINE_AUTOPTR_CLEANUP_FUNC(CarrelDiskInfo, carrel_disk_info_free)

/*
 * Pure parser of qemu-img's JSON; refuses input over 1 MiB, nesting deeper than 32, missing or
 * ill-typed members (CARREL_ERROR_INVALID_ARG). Unknown members are ignored.
 */
CarrelDiskInfo *carrel_disk_info_parse(const char *json, gsize len, GError **error);

/*
 * Name of the disk format whose magic starts head ("qcow2", "vmdk", ...), or NULL when head
 * looks like no format QEMU could probe. Pure; head is the first bytes of a file (512 suffice).
 */
const char *carrel_disk_detect_format(const guint8 *head, gsize len);

/*
 * Runs `qemu-img info --output=json -f FORMAT path` (format given, never probed)
 * and parses it. A file that is not of that format fails here, and so does a "raw" file that
 * starts with another format's magic (CARREL_ERROR_INVALID_ARG). path must be absolute and a
 * regular file. Without --force-share: a disk that a running VM writes is refused.
 */
CarrelDiskInfo *carrel_disk_info_read(const char *path, const char *format, GError **error);

/*
 * Checks that a disk file may become a template: format is "qcow2" or "raw" and matches info,
 * no backing file, no external data file, not encrypted, not corrupt, virtual size > 0 and
 * <= max_virtual_size. Every refusal is CARREL_ERROR_INVALID_ARG. Pure.
 */
gboolean carrel_disk_check_importable(const CarrelDiskInfo *info, const char *format,
                                      guint64 max_virtual_size, GError **error);

/*
 * Full check of a qcow2 file (`qemu-img check`): catches truncated or damaged files (leaked
 * clusters are harmless and accepted). A raw file must be a regular file whose size is a
 * multiple of 512 and that starts with no other format's magic. Run it only on a file that
 * carrel_disk_check_importable accepted: qemu-img check opens backing files.
 */
gboolean carrel_disk_check_consistent(const char *path, const char *format, GError **error);

/*
 * Creates a qcow2 overlay at path (absolute) backed by backing (absolute) with an explicit
 * backing format ("qcow2" or "raw"), mode 0600 (libvirt's dynamic ownership hands it to the
 * QEMU user while the VM runs). Refuses to overwrite an existing file (CARREL_ERROR_EXISTS).
 */
gboolean carrel_disk_create_overlay(const char *path, const char *backing,
                                    const char *backing_format, GError **error);

/* Makes a disk layer read-only (mode 0444): it backs other overlays from now on. */
gboolean carrel_disk_freeze(const char *path, GError **error);

/*
 * libguestfs (C API, direct backend). One handle = one appliance launch: open once per task and
 * run every operation on it. The appliance parses the guest's filesystems, never the host.
 */
typedef struct _CarrelGuestfs CarrelGuestfs;

typedef struct {
    const char *path;
    const char *format;     /* "qcow2" or "raw": never probed */
    const char *mountpoint; /* where its filesystems appear in the appliance: "/", "/base"... */
} CarrelGuestfsDisk;

typedef enum {
    CARREL_DISK_FILE_REGULAR,
    CARREL_DISK_FILE_DIR,
    CARREL_DISK_FILE_SYMLINK,
    CARREL_DISK_FILE_OTHER, /* device, FIFO, socket */
} CarrelDiskFileType;

typedef struct {
    CarrelDiskFileType type;
    guint64 size;
    guint32 mode; /* permission bits, setuid/setgid/sticky included */
    gint64 uid;
    gint64 gid;
    gint64 mtime;
    gint64 nlink;
} CarrelGuestfsStat;

/*
 * Launches an appliance over disks and mounts each disk's guest filesystems at its mountpoint:
 * those an inspected OS mounts (only the ones on that same disk), else its largest filesystem.
 * Read-only unless writable (read-only works on a disk QEMU has open; writable never does).
 * force_tcg where KVM is unusable.
 */
CarrelGuestfs *carrel_guestfs_open(const CarrelGuestfsDisk *disks, guint n, gboolean writable,
                                   gboolean force_tcg, GError **error);
void carrel_guestfs_close(CarrelGuestfs *gfs);
G_DEFINE_AUTOPTR_CLEANUP_FUNC(CarrelGuestfs, carrel_guestfs_close)

/* lstat (never follows); CARREL_ERROR_NOT_FOUND when path does not exist. */
gboolean carrel_guestfs_lstat(CarrelGuestfs *gfs, const char *path, CarrelGuestfsStat *ret_stat,
                              GError **error);
/* Every component of root + path but the last is a directory, not a symlink
 * (CARREL_ERROR_INVALID_ARG otherwise): the appliance would resolve a guest's absolute links
 * against its own root. */
gboolean carrel_guestfs_check_parents(CarrelGuestfs *gfs, const char *root, const char *path,
                                      GError **error);
char *carrel_guestfs_readlink(CarrelGuestfs *gfs, const char *path, GError **error);
/* Copies a regular file out to host_path (created by the appliance's client as this user). */
gboolean carrel_guestfs_download(CarrelGuestfs *gfs, const char *path, const char *host_path,
                                 GError **error);
/* A tar of dir's contents (members "./..." with numeric owners; symlinks kept as symlinks). */
gboolean carrel_guestfs_tar_out(CarrelGuestfs *gfs, const char *dir, const char *host_tar,
                                GError **error);
/* Unpacks host_tar into dir (as root: numeric owners and modes of the archive), then syncs. */
gboolean carrel_guestfs_tar_in(CarrelGuestfs *gfs, const char *host_tar, const char *dir,
                               GError **error);
/* A small regular file's bytes (at most max), e.g. /etc/passwd. */
GBytes *carrel_guestfs_read(CarrelGuestfs *gfs, const char *path, gsize max, GError **error);
char *carrel_guestfs_sha256(CarrelGuestfs *gfs, const char *path, GError **error);
/* Every file under root: relative path ("etc/passwd") -> CarrelGuestfsStat. scratch_dir is a
 * host directory for the appliance's list. */
GHashTable *carrel_guestfs_walk(CarrelGuestfs *gfs, const char *root, const char *scratch_dir,
                                GError **error);

G_END_DECLS
