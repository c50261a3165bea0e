#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define CARREL_ARCHIVE_PRIV_H_ALLOW
#include "archive/archive-priv.h"

#define COPY_BUFFER (64 * 1024)

struct _CarrelArchiveSink {
    char *dir;
    int dir_fd;
    CarrelArchiveLimits limits;
    GPtrArray *entries;
    GHashTable *seen; /* guest path -> GINT_TO_POINTER(type + 1) of every placed entry */
    guint64 bytes;
};

gboolean
carrel_archive_sink_admit(CarrelArchiveSink *sink, const char *guest_path, guint64 size,
                          guint entries, GError **error)
{
    return carrel_archive_admit(&sink->limits, sink->bytes, sink->entries->len, guest_path, size,
                                entries, error);
}

/* Where the bytes of a regular file come from: a tar member or a host file. */
typedef gssize (*ReadFunc)(gpointer source, guint8 *buf, gsize len, GError **error);

static void
set_errno_error(GError **error, int saved, const char *what, const char *path)
{
    g_set_error(error, G_IO_ERROR, g_io_error_from_errno(saved), "%s '%s': %s", what, path,
                g_strerror(saved));
}

CarrelArchiveSink *
carrel_archive_sink_new(const char *dir, const CarrelArchiveLimits *limits, GError **error)
{
    CarrelArchiveSink *sink;
    int fd = open(dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);

    if (fd < 0) {
        set_errno_error(error, errno, "opening directory", dir);
        return NULL;
    }
    sink = g_new0(CarrelArchiveSink, 1);
    sink->dir = g_strdup(dir);
    sink->dir_fd = fd;
    sink->limits = carrel_archive_limits_resolve(limits);
    sink->entries = g_ptr_array_new_with_free_func((GDestroyNotify)carrel_archive_entry_free);
    sink->seen = g_hash_table_new_full(g_str_hash, g_str_equal, g_free, NULL);
    return sink;
}

void
carrel_archive_sink_free(CarrelArchiveSink *sink)
{
    if (!sink)
        return;
    close(sink->dir_fd);
    g_ptr_array_unref(sink->entries);
    g_hash_table_unref(sink->seen);
    g_free(sink->dir);
    g_free(sink);
}

GPtrArray *
carrel_archive_sink_entries(CarrelArchiveSink *sink)
{
    return sink->entries;
}

guint64
carrel_archive_sink_bytes(CarrelArchiveSink *sink)
{
    return sink->bytes;
}

static CarrelArchiveEntry *
entry_new(CarrelArchiveType type, guint32 mode, gint64 uid, gint64 gid, gint64 mtime)
{
    CarrelArchiveEntry *entry = g_new0(CarrelArchiveEntry, 1);

    entry->type = type;
    entry->mode = mode & 07777;
    entry->uid = uid;
    entry->gid = gid;
    entry->mtime = mtime;
    return entry;
}

/* Every entry counts, skipped ones too: a tar of a million hostile names is bounded as well. */
static gboolean
check_entry_limit(CarrelArchiveSink *sink, GError **error)
{
    if (sink->entries->len >= sink->limits.max_entries) {
        carrel_archive_set_limit_error(error, "entries", sink->limits.max_entries);
        return FALSE;
    }
    return TRUE;
}

/* Records an entry whose name was refused; guest_path keeps the name as escaped text. */
static void
record_refused(CarrelArchiveSink *sink, CarrelArchiveEntry *entry, const char *name,
               GError *name_error)
{
    entry->guest_path = carrel_archive_escape(name);
    entry->skipped = g_strdup(name_error->message);
    g_ptr_array_add(sink->entries, entry);
}

/* A reason when an ancestor of guest_path was placed as something other than a directory (a
 * symlink "link" followed by "link/evil" lands nowhere). */
static char *
parent_reason(CarrelArchiveSink *sink, const char *guest_path)
{
    for (const char *p = strchr(guest_path + 1, '/'); p; p = strchr(p + 1, '/')) {
        g_autofree char *parent = g_strndup(guest_path, p - guest_path);
        gpointer found = g_hash_table_lookup(sink->seen, parent);

        if (found && GPOINTER_TO_INT(found) - 1 != CARREL_ARCHIVE_TYPE_DIR)
            return g_strdup_printf(
                "parent '%s' is a %s, not a directory", parent,
                carrel_archive_type_to_string((CarrelArchiveType)(GPOINTER_TO_INT(found) - 1)));
    }
    return NULL;
}

/* Opens (creating it 0700 when missing) the directory name under at, never following a
 * symlink. -1 with *ret_reason when something else is in the way, -1 with an error on I/O. */
static int
open_dir_at(int at, const char *name, const char *rel, char **ret_reason, GError **error)
{
    int fd = openat(at, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);

    if (fd < 0 && errno == ENOENT) {
        if (mkdirat(at, name, 0700) < 0 && errno != EEXIST) {
            set_errno_error(error, errno, "creating directory", rel);
            return -1;
        }
        fd = openat(at, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    }
    if (fd < 0 && (errno == ENOTDIR || errno == ELOOP)) {
        *ret_reason = g_strdup_printf("'%s' exists and is not a directory", rel);
        return -1;
    }
    if (fd < 0)
        set_errno_error(error, errno, "opening directory", rel);
    return fd;
}

/* Walks DIR to the parent of rel one component at a time, relative to directory fds, so that
 * nothing in DIR can redirect the walk. Same returns as open_dir_at. */
static int
open_parent(CarrelArchiveSink *sink, const char *rel, char **ret_reason, GError **error)
{
    g_autofree char *walked = g_strdup(rel);
    int fd = fcntl(sink->dir_fd, F_DUPFD_CLOEXEC, 0);
    char *p = walked;
    char *slash;

    if (fd < 0) {
        set_errno_error(error, errno, "opening directory", sink->dir);
        return -1;
    }
    while ((slash = strchr(p, '/'))) {
        int next;

        *slash = '\0';
        next = open_dir_at(fd, p, walked, ret_reason, error);
        close(fd);
        if (next < 0)
            return -1;
        fd = next;
        *slash = '/';
        p = slash + 1;
    }
    return fd;
}

static const char *
base_name(const char *rel)
{
    const char *slash = strrchr(rel, '/');

    return slash ? slash + 1 : rel;
}

static gboolean
place_dir(CarrelArchiveSink *sink, const char *rel, char **ret_reason, GError **error)
{
    int parent, fd;

    if (!*rel)
        return TRUE; /* DIR itself */
    parent = open_parent(sink, rel, ret_reason, error);
    if (parent < 0)
        return *ret_reason != NULL;
    fd = open_dir_at(parent, base_name(rel), rel, ret_reason, error);
    close(parent);
    if (fd < 0)
        return *ret_reason != NULL;
    close(fd);
    return TRUE;
}

static gboolean
write_all(int fd, const guint8 *buf, gsize len, const char *rel, GError **error)
{
    while (len > 0) {
        ssize_t n = write(fd, buf, len);

        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0) {
            set_errno_error(error, errno, "writing", rel);
            return FALSE;
        }
        buf += n;
        len -= n;
    }
    return TRUE;
}

/* Copies and hashes, counting the bytes actually read against max_bytes (a header may lie, a
 * host file may grow). */
static gboolean
copy_data(CarrelArchiveSink *sink, int out_fd, ReadFunc read_fn, gpointer source,
          CarrelArchiveEntry *entry, GError **error)
{
    g_autofree guint8 *buf = g_malloc(COPY_BUFFER);
    g_autoptr(GChecksum) sum = g_checksum_new(G_CHECKSUM_SHA256);
    guint64 total = 0;

    for (;;) {
        gssize n = read_fn(source, buf, COPY_BUFFER, error);

        if (n < 0)
            return FALSE;
        if (n == 0)
            break;
        total += n;
        if (total > sink->limits.max_bytes - sink->bytes) {
            carrel_archive_set_limit_error(error, "bytes", sink->limits.max_bytes);
            return FALSE;
        }
        if (!write_all(out_fd, buf, n, entry->path, error))
            return FALSE;
        g_checksum_update(sum, buf, n);
    }
    entry->size = total;
    entry->sha256 = g_strdup(g_checksum_get_string(sum));
    return TRUE;
}

/* Sets the guest's permission bits (never setuid, setgid or sticky) and mtime; no chown. */
static gboolean
finish_file(int fd, const CarrelArchiveEntry *entry, GError **error)
{
    struct timespec times[2] = {{0, UTIME_OMIT}, {entry->mtime, 0}};

    if (fchmod(fd, entry->mode & 0777) < 0) {
        set_errno_error(error, errno, "setting the mode of", entry->path);
        return FALSE;
    }
    (void)futimens(fd, times); /* best effort: the manifest keeps the mtime */
    return TRUE;
}

static gboolean
place_file(CarrelArchiveSink *sink, CarrelArchiveEntry *entry, ReadFunc read_fn, gpointer source,
           char **ret_reason, GError **error)
{
    const char *name = base_name(entry->path);
    int parent = open_parent(sink, entry->path, ret_reason, error);
    int fd;
    gboolean ok;

    if (parent < 0)
        return *ret_reason != NULL;
    fd = openat(parent, name, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
    if (fd < 0) {
        int saved = errno;
        close(parent);
        if (saved == EEXIST) {
            *ret_reason = g_strdup_printf("'%s' already exists", entry->path);
            return TRUE;
        }
        set_errno_error(error, saved, "creating", entry->path);
        return FALSE;
    }
    ok = copy_data(sink, fd, read_fn, source, entry, error) && finish_file(fd, entry, error);
    close(fd);
    /* A partly written file would look complete to whoever reads DIR: remove it. */
    if (!ok)
        (void)unlinkat(parent, name, 0);
    close(parent);
    if (ok)
        sink->bytes += entry->size;
    return ok;
}

static const char *
record_only_reason(CarrelArchiveType type)
{
    if (type == CARREL_ARCHIVE_TYPE_OTHER)
        return "device, fifo or socket: recorded, never created";
    return NULL; /* symlinks and hard links are records by design, not skipped entries */
}

/*
 * Places one entry whose guest_path is sanitized: refuses duplicates and entries below a
 * non-directory, then creates directories and regular files under DIR. The entry is recorded
 * in every case but an error.
 */
static gboolean
place(CarrelArchiveSink *sink, CarrelArchiveEntry *entry, guint64 header_size, ReadFunc read_fn,
      gpointer source, GError **error)
{
    g_autoptr(CarrelArchiveEntry) owned = entry;
    g_autofree char *reason = NULL;
    const char *rel = entry->guest_path + 1;
    gboolean placed =
        entry->type == CARREL_ARCHIVE_TYPE_FILE || entry->type == CARREL_ARCHIVE_TYPE_DIR;

    if (g_hash_table_contains(sink->seen, entry->guest_path))
        reason = g_strdup("duplicate entry");
    if (!reason)
        reason = parent_reason(sink, entry->guest_path);
    if (!reason && placed && !*rel && entry->type != CARREL_ARCHIVE_TYPE_DIR)
        reason = g_strdup("only a directory can be the root");
    if (!reason && entry->type == CARREL_ARCHIVE_TYPE_FILE &&
        header_size > sink->limits.max_bytes - sink->bytes) {
        carrel_archive_set_limit_error(error, "bytes", sink->limits.max_bytes);
        return FALSE;
    }
    if (!reason && placed) {
        entry->path = g_strdup(*rel ? rel : ".");
        if (entry->type == CARREL_ARCHIVE_TYPE_DIR
                ? !place_dir(sink, rel, &reason, error)
                : !place_file(sink, entry, read_fn, source, &reason, error))
            return FALSE;
    }
    if (reason)
        g_clear_pointer(&entry->path, g_free);
    entry->skipped = reason ? g_steal_pointer(&reason) : g_strdup(record_only_reason(entry->type));
    g_hash_table_insert(sink->seen, g_strdup(entry->guest_path), GINT_TO_POINTER(entry->type + 1));
    g_ptr_array_add(sink->entries, g_steal_pointer(&owned));
    return TRUE;
}

static gssize
read_tar_data(gpointer source, guint8 *buf, gsize len, GError **error)
{
    la_ssize_t n = archive_read_data(source, buf, len);

    if (n < 0)
        carrel_archive_set_error(error, source, "reading member data");
    return n;
}

/* One tar member: recorded with its sanitized name, or as refused with the reason. */
static gboolean
add_tar_member(CarrelArchiveSink *sink, struct archive *a, struct archive_entry *ae,
               const char *prefix, GError **error)
{
    CarrelArchiveEntry *entry;
    g_autoptr(GError) name_error = NULL;
    const char *name = archive_entry_pathname(ae);
    const char *target = archive_entry_symlink(ae);
    const char *hardlink = archive_entry_hardlink(ae);

    if (!check_entry_limit(sink, error))
        return FALSE;
    entry = entry_new(carrel_archive_entry_type(ae), archive_entry_perm(ae), archive_entry_uid(ae),
                      archive_entry_gid(ae), archive_entry_mtime(ae));
    if (entry->type == CARREL_ARCHIVE_TYPE_SYMLINK)
        entry->link_target = carrel_archive_escape(target);
    if (entry->type == CARREL_ARCHIVE_TYPE_HARDLINK) {
        /* A hard link names another member: shown as that member's guest path when valid. */
        entry->link_target = carrel_archive_guest_path(prefix, hardlink, NULL);
        if (!entry->link_target)
            entry->link_target = carrel_archive_escape(hardlink);
    }
    entry->guest_path = carrel_archive_guest_path(prefix, name, &name_error);
    if (!entry->guest_path) {
        record_refused(sink, entry, name, name_error);
        return TRUE;
    }
    if (!place(sink, entry, archive_entry_size_is_set(ae) ? (guint64)archive_entry_size(ae) : 0,
               read_tar_data, a, error)) {
        g_autofree char *clean = carrel_archive_escape(name);
        g_prefix_error(error, "member '%s': ", clean);
        return FALSE;
    }
    return TRUE;
}

gboolean
carrel_archive_sink_add_tar(CarrelArchiveSink *sink, const char *tar_path, const char *guest_prefix,
                            GError **error)
{
    /* A bad prefix is the caller's error, not one refused member after another. */
    g_autofree char *prefix = carrel_archive_guest_path(guest_prefix, ".", error);
    struct archive *a;
    struct archive_entry *ae;
    gboolean ok = TRUE;
    int r = ARCHIVE_EOF;

    if (!prefix)
        return FALSE;
    a = archive_read_new();
    /* Plain tar only: no decompression filter, so no external program and no bomb. */
    archive_read_support_format_tar(a);
    if (archive_read_open_filename(a, tar_path, COPY_BUFFER) != ARCHIVE_OK) {
        carrel_archive_set_error(error, a, "opening tar");
        ok = FALSE;
    }
    while (ok && ((r = archive_read_next_header(a, &ae)) == ARCHIVE_OK || r == ARCHIVE_WARN))
        ok = add_tar_member(sink, a, ae, prefix, error);
    if (ok && r != ARCHIVE_EOF) {
        carrel_archive_set_error(error, a, "reading tar");
        ok = FALSE;
    }
    archive_read_free(a);
    return ok;
}

static gssize
read_fd(gpointer source, guint8 *buf, gsize len, GError **error)
{
    ssize_t n;

    do
        n = read(GPOINTER_TO_INT(source), buf, len);
    while (n < 0 && errno == EINTR);
    if (n < 0)
        set_errno_error(error, errno, "reading", "source file");
    return n;
}

/* Sanitizes a guest path given by a caller (it came from the guest) into entry->guest_path;
 * FALSE when it was refused, and then the entry is recorded as such. */
static gboolean
sanitize_or_record(CarrelArchiveSink *sink, CarrelArchiveEntry *entry, const char *guest_path)
{
    g_autoptr(GError) name_error = NULL;
    char *clean = carrel_archive_guest_path("/", guest_path, &name_error);

    if (!clean) {
        record_refused(sink, entry, guest_path, name_error);
        return FALSE;
    }
    entry->guest_path = clean;
    return TRUE;
}

gboolean
carrel_archive_sink_add_file(CarrelArchiveSink *sink, const char *guest_path, const char *src_path,
                             guint32 mode, gint64 uid, gint64 gid, gint64 mtime, GError **error)
{
    CarrelArchiveEntry *entry;
    struct stat st;
    int fd;
    gboolean ok;

    if (!check_entry_limit(sink, error))
        return FALSE;
    fd = open(src_path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0 || fstat(fd, &st) < 0 || !S_ISREG(st.st_mode)) {
        g_set_error(error, CARREL_ERROR, CARREL_ERROR_INVALID_ARG,
                    "'%s' is not a readable regular file", src_path);
        if (fd >= 0)
            close(fd);
        return FALSE;
    }
    entry = entry_new(CARREL_ARCHIVE_TYPE_FILE, mode, uid, gid, mtime);
    ok = !sanitize_or_record(sink, entry, guest_path) ||
         place(sink, entry, (guint64)st.st_size, read_fd, GINT_TO_POINTER(fd), error);
    close(fd);
    return ok;
}

gboolean
carrel_archive_sink_add_record(CarrelArchiveSink *sink, const char *guest_path,
                               CarrelArchiveType type, const char *link_target, guint32 mode,
                               gint64 uid, gint64 gid, gint64 mtime, GError **error)
{
    CarrelArchiveEntry *entry;

    if (type == CARREL_ARCHIVE_TYPE_FILE || (guint)type >= CARREL_ARCHIVE_TYPE_LAST) {
        g_set_error(error, CARREL_ERROR, CARREL_ERROR_INVALID_ARG,
                    "a record cannot be of type '%s' (regular files need their contents)",
                    carrel_archive_type_to_string(type));
        return FALSE;
    }
    if (!check_entry_limit(sink, error))
        return FALSE;
    entry = entry_new(type, mode, uid, gid, mtime);
    if (link_target)
        entry->link_target = carrel_archive_escape(link_target);
    return !sanitize_or_record(sink, entry, guest_path) || place(sink, entry, 0, NULL, NULL, error);
}
