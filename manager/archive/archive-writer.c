#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define CARREL_ARCHIVE_PRIV_H_ALLOW
#include "archive/archive-priv.h"

#define COPY_BUFFER (64 * 1024)
#define MAX_OWNER G_GINT64_CONSTANT(4294967294) /* (uid_t)-1 is "no change" */

struct _CarrelArchiveWriter {
    char *out_path;
    int fd;
    struct archive *a;
    CarrelArchiveLimits limits;
    GHashTable *seen; /* member name -> GINT_TO_POINTER(type + 1), IMPLICIT_DIR included */
    guint entries;
    guint64 bytes;
    gboolean finished;
    gboolean broken; /* a header or its data failed half-way: the tar is unusable */
};

/* What one member of the output is. */
typedef struct {
    const char *guest_path; /* sanitized */
    CarrelArchiveType type;
    guint32 mode;
    gint64 uid;
    gint64 gid;
    gint64 mtime;
    guint64 size;
    const char *link_target;
} Member;

static void
set_errno_error(GError **error, int saved, const char *what, const char *path)
{
    g_set_error(error, G_IO_ERROR, g_io_error_from_errno(saved), "%s '%s': %s", what, path,
                g_strerror(saved));
}

CarrelArchiveWriter *
carrel_archive_writer_new(const char *out_path, const CarrelArchiveLimits *limits, GError **error)
{
    CarrelArchiveWriter *w;
    int fd = open(out_path, O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0600);

    if (fd < 0) {
        set_errno_error(error, errno, "creating", out_path);
        return NULL;
    }
    w = g_new0(CarrelArchiveWriter, 1);
    w->out_path = g_strdup(out_path);
    w->fd = fd;
    w->limits = carrel_archive_limits_resolve(limits);
    w->seen = g_hash_table_new_full(g_str_hash, g_str_equal, g_free, NULL);
    w->a = archive_write_new();
    /* ustar headers, with pax extensions only for what ustar cannot say (long names, big
     * owners): GNU tar reads both. */
    if (archive_write_set_format_pax_restricted(w->a) != ARCHIVE_OK ||
        archive_write_open_fd(w->a, fd) != ARCHIVE_OK) {
        carrel_archive_set_error(error, w->a, "starting tar");
        carrel_archive_writer_free(w);
        return NULL;
    }
    return w;
}

void
carrel_archive_writer_free(CarrelArchiveWriter *w)
{
    if (!w)
        return;
    /* Not archive_write_fail: libarchive then skips its close and leaks the open state; an
     * unfinished output is removed below anyway. */
    archive_write_free(w->a);
    close(w->fd);
    if (!w->finished)
        (void)unlink(w->out_path);
    g_hash_table_unref(w->seen);
    g_free(w->out_path);
    g_free(w);
}

static gboolean
check_usable(CarrelArchiveWriter *w, GError **error)
{
    if (w->finished || w->broken) {
        g_set_error(error, CARREL_ERROR, CARREL_ERROR_WRONG_STATE, "tar '%s' is %s", w->out_path,
                    w->finished ? "already finished" : "broken by an earlier error");
        return FALSE;
    }
    return TRUE;
}

static gboolean
check_owner(gint64 uid, gint64 gid, GError **error)
{
    if (uid < 0 || uid > MAX_OWNER || gid < 0 || gid > MAX_OWNER) {
        g_set_error(error, CARREL_ERROR, CARREL_ERROR_INVALID_ARG,
                    "owner %" G_GINT64_FORMAT ":%" G_GINT64_FORMAT " is out of range", uid, gid);
        return FALSE;
    }
    return TRUE;
}

/* The parent of a member that had no entry of its own (GNU tar creates it). */
#define IMPLICIT_DIR CARREL_ARCHIVE_TYPE_LAST

/* What a member name is in this tar so far, -1 for nothing. */
static int
seen_type(CarrelArchiveWriter *w, const char *name)
{
    return GPOINTER_TO_INT(g_hash_table_lookup(w->seen, name)) - 1;
}

static void
mark_seen(CarrelArchiveWriter *w, const char *name, CarrelArchiveType type)
{
    g_hash_table_insert(w->seen, g_strdup(name), GINT_TO_POINTER(type + 1));
    for (const char *p = strchr(name, '/'); p; p = strchr(p + 1, '/')) {
        g_autofree char *parent = g_strndup(name, p - name);
        if (seen_type(w, parent) < 0)
            g_hash_table_insert(w->seen, g_steal_pointer(&parent),
                                GINT_TO_POINTER(IMPLICIT_DIR + 1));
    }
}

static gboolean
is_dir(int type)
{
    return type == CARREL_ARCHIVE_TYPE_DIR || type == IMPLICIT_DIR;
}

/*
 * Refuses what GNU tar would turn into a surprise: a second entry at one path (a file where a
 * directory was implied included), an entry below a file or symlink of this tar. TRUE with
 * *ret_skip for a directory that already has its entry.
 */
static gboolean
check_place(CarrelArchiveWriter *w, const Member *m, gboolean *ret_skip, GError **error)
{
    const char *name = m->guest_path + 1;
    int found = seen_type(w, name);

    *ret_skip = found == CARREL_ARCHIVE_TYPE_DIR && m->type == CARREL_ARCHIVE_TYPE_DIR;
    if (*ret_skip || (found == IMPLICIT_DIR && m->type == CARREL_ARCHIVE_TYPE_DIR))
        return TRUE;
    if (found >= 0) {
        g_set_error(error, CARREL_ERROR, CARREL_ERROR_EXISTS, "'%s' is already in the tar",
                    m->guest_path);
        return FALSE;
    }
    for (const char *p = strchr(name, '/'); p; p = strchr(p + 1, '/')) {
        g_autofree char *parent = g_strndup(name, p - name);
        found = seen_type(w, parent);
        if (found >= 0 && !is_dir(found)) {
            g_set_error(error, CARREL_ERROR, CARREL_ERROR_INVALID_ARG,
                        "'%s' is below '/%s', which is not a directory", m->guest_path, parent);
            return FALSE;
        }
    }
    return TRUE;
}

static gboolean
check_limits(CarrelArchiveWriter *w, const Member *m, GError **error)
{
    if (w->entries >= w->limits.max_entries) {
        carrel_archive_set_limit_error(error, "entries", w->limits.max_entries);
        return FALSE;
    }
    if (m->size > w->limits.max_bytes - w->bytes) {
        carrel_archive_set_limit_error(error, "bytes", w->limits.max_bytes);
        return FALSE;
    }
    return TRUE;
}

/*
 * Writes the header of one member (its data follows). No uname or gname, so GNU tar applies
 * the numeric owner; permission bits only. The root itself is never a member. *ret_written is
 * FALSE when nothing was written (the root, a directory already there): send no data then.
 */
static gboolean
write_header(CarrelArchiveWriter *w, const Member *m, gboolean *ret_written, GError **error)
{
    struct archive_entry *ae;
    gboolean skip = FALSE;
    int r;

    *ret_written = FALSE;
    if (m->guest_path[1] == '\0' && m->type == CARREL_ARCHIVE_TYPE_DIR)
        return TRUE;
    if (m->guest_path[1] == '\0') {
        g_set_error(error, CARREL_ERROR, CARREL_ERROR_INVALID_ARG, "only a directory can be '/'");
        return FALSE;
    }
    if (!check_usable(w, error) || !check_place(w, m, &skip, error) || skip ||
        !check_limits(w, m, error))
        return skip;
    ae = archive_entry_new();
    archive_entry_set_pathname(ae, m->guest_path + 1);
    archive_entry_set_filetype(ae, m->type == CARREL_ARCHIVE_TYPE_DIR       ? AE_IFDIR
                                   : m->type == CARREL_ARCHIVE_TYPE_SYMLINK ? AE_IFLNK
                                                                            : AE_IFREG);
    archive_entry_set_perm(ae, m->mode & 0777);
    archive_entry_set_uid(ae, m->uid);
    archive_entry_set_gid(ae, m->gid);
    archive_entry_set_mtime(ae, m->mtime, 0);
    archive_entry_set_size(ae, m->type == CARREL_ARCHIVE_TYPE_FILE ? (la_int64_t)m->size : 0);
    if (m->type == CARREL_ARCHIVE_TYPE_SYMLINK)
        archive_entry_set_symlink(ae, m->link_target);
    r = archive_write_header(w->a, ae);
    archive_entry_free(ae);
    if (r != ARCHIVE_OK) {
        w->broken = TRUE;
        carrel_archive_set_error(error, w->a, "writing tar header");
        g_prefix_error(error, "'%s': ", m->guest_path);
        return FALSE;
    }
    mark_seen(w, m->guest_path + 1, m->type);
    w->entries++;
    w->bytes += m->size;
    *ret_written = TRUE;
    return TRUE;
}

static gboolean
write_data(CarrelArchiveWriter *w, const guint8 *buf, gsize len, GError **error)
{
    while (len > 0) {
        la_ssize_t n = archive_write_data(w->a, buf, len);

        if (n <= 0) {
            w->broken = TRUE;
            carrel_archive_set_error(error, w->a, "writing tar data");
            return FALSE;
        }
        buf += n;
        len -= n;
    }
    return TRUE;
}

/* Guest paths given by the caller follow the member rules, so the tar never holds ".." or
 * control characters whatever the caller passed. */
static char *
sanitize(const char *guest_path, GError **error)
{
    return carrel_archive_guest_path("/", guest_path, error);
}

gboolean
carrel_archive_writer_add_bytes(CarrelArchiveWriter *w, const char *guest_path, const guint8 *data,
                                gsize len, guint32 mode, gint64 uid, gint64 gid, GError **error)
{
    g_autofree char *clean = sanitize(guest_path, error);
    Member m = {clean, CARREL_ARCHIVE_TYPE_FILE,           mode, uid,
                gid,   g_get_real_time() / G_USEC_PER_SEC, len,  NULL};
    gboolean written = FALSE;

    if (!clean || !check_owner(uid, gid, error) || !write_header(w, &m, &written, error))
        return FALSE;
    return !written || write_data(w, data, len, error);
}

/* Copies exactly m->size bytes of a local file; a file that changed size while read is an
 * error (the header already promised the size). */
static gboolean
copy_local_file(CarrelArchiveWriter *w, int fd, const Member *m, GError **error)
{
    g_autofree guint8 *buf = g_malloc(COPY_BUFFER);
    guint64 left = m->size;

    while (left > 0) {
        ssize_t n = read(fd, buf, MIN(left, COPY_BUFFER));

        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0) {
            w->broken = TRUE;
            g_set_error(error, CARREL_ERROR, CARREL_ERROR_FAILED, "'%s' changed while it was read",
                        m->guest_path);
            return FALSE;
        }
        if (!write_data(w, buf, n, error))
            return FALSE;
        left -= n;
    }
    return TRUE;
}

static gboolean add_local_node(CarrelArchiveWriter *w, int at, const char *name,
                               const char *guest_path, gint64 uid, gint64 gid, GError **error);

static int
compare_names(gconstpointer a, gconstpointer b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* The names in a directory, sorted so that a tar of one tree is always the same. */
static GPtrArray *
list_dir(int dir_fd, const char *guest_path, GError **error)
{
    int fd = fcntl(dir_fd, F_DUPFD_CLOEXEC, 0);
    DIR *dir = fd >= 0 ? fdopendir(fd) : NULL;
    GPtrArray *names = g_ptr_array_new_with_free_func(g_free);
    struct dirent *d;

    if (!dir) {
        set_errno_error(error, errno, "listing the local directory for", guest_path);
        if (fd >= 0)
            close(fd);
        g_ptr_array_unref(names);
        return NULL;
    }
    while ((d = readdir(dir)))
        if (!g_str_equal(d->d_name, ".") && !g_str_equal(d->d_name, ".."))
            g_ptr_array_add(names, g_strdup(d->d_name));
    closedir(dir);
    g_ptr_array_sort(names, compare_names);
    return names;
}

static gboolean
add_local_dir(CarrelArchiveWriter *w, int at, const char *name, Member *m, gint64 uid, gint64 gid,
              GError **error)
{
    g_autoptr(GPtrArray) names = NULL;
    gboolean written, ok = TRUE;
    int fd = openat(at, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);

    if (fd < 0) {
        set_errno_error(error, errno, "opening local directory for", m->guest_path);
        return FALSE;
    }
    names = list_dir(fd, m->guest_path, error);
    ok = names && write_header(w, m, &written, error);
    for (guint i = 0; ok && i < names->len; i++) {
        g_autofree char *child = carrel_archive_guest_path(m->guest_path, names->pdata[i], error);
        ok = child && add_local_node(w, fd, names->pdata[i], child, uid, gid, error);
    }
    close(fd);
    return ok;
}

static gboolean
add_local_file(CarrelArchiveWriter *w, int at, const char *name, Member *m, GError **error)
{
    struct stat st;
    gboolean written, ok;
    /* O_NONBLOCK: a FIFO swapped in after the lstat must not block the open. */
    int fd = openat(at, name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);

    if (fd < 0 || fstat(fd, &st) < 0 || !S_ISREG(st.st_mode)) {
        g_set_error(error, CARREL_ERROR, CARREL_ERROR_FAILED,
                    "local file for '%s' cannot be read as a regular file", m->guest_path);
        if (fd >= 0)
            close(fd);
        return FALSE;
    }
    m->size = st.st_size;
    ok = write_header(w, m, &written, error) && (!written || copy_local_file(w, fd, m, error));
    close(fd);
    return ok;
}

static gboolean
add_local_symlink(CarrelArchiveWriter *w, int at, const char *name, Member *m, GError **error)
{
    char target[CARREL_LIMIT_GUEST_PATH + 1];
    ssize_t n = readlinkat(at, name, target, sizeof(target));
    gboolean written;

    if (n < 0 || n > CARREL_LIMIT_GUEST_PATH || memchr(target, '\0', n)) {
        g_set_error(error, CARREL_ERROR, CARREL_ERROR_INVALID_ARG,
                    "local symlink for '%s' cannot be read or its target is too long",
                    m->guest_path);
        return FALSE;
    }
    target[n] = '\0';
    if (!carrel_util_is_clean_text(target)) {
        g_set_error(error, CARREL_ERROR, CARREL_ERROR_INVALID_ARG,
                    "local symlink for '%s' has control characters or invalid UTF-8",
                    m->guest_path);
        return FALSE;
    }
    m->link_target = target;
    return write_header(w, m, &written, error);
}

/* One local entry, never following a symlink; uid/gid -1 keep the local owner. */
static gboolean
add_local_node(CarrelArchiveWriter *w, int at, const char *name, const char *guest_path, gint64 uid,
               gint64 gid, GError **error)
{
    struct stat st;
    Member m = {guest_path, CARREL_ARCHIVE_TYPE_FILE, 0, uid, gid, 0, 0, NULL};

    if (fstatat(at, name, &st, AT_SYMLINK_NOFOLLOW) < 0) {
        set_errno_error(error, errno, "inspecting local file for", guest_path);
        return FALSE;
    }
    m.mode = st.st_mode & 0777;
    m.uid = uid < 0 ? (gint64)st.st_uid : uid;
    m.gid = gid < 0 ? (gint64)st.st_gid : gid;
    m.mtime = st.st_mtime;
    if (S_ISREG(st.st_mode))
        return add_local_file(w, at, name, &m, error);
    if (S_ISLNK(st.st_mode)) {
        m.type = CARREL_ARCHIVE_TYPE_SYMLINK;
        return add_local_symlink(w, at, name, &m, error);
    }
    if (S_ISDIR(st.st_mode)) {
        m.type = CARREL_ARCHIVE_TYPE_DIR;
        return add_local_dir(w, at, name, &m, uid, gid, error);
    }
    g_set_error(error, CARREL_ERROR, CARREL_ERROR_UNSUPPORTED,
                "local file for '%s' is a device, fifo or socket: only files, directories and "
                "symlinks can be inputs",
                guest_path);
    return FALSE;
}

gboolean
carrel_archive_writer_add_local(CarrelArchiveWriter *w, const char *local_path,
                                const char *guest_path, gint64 uid, gint64 gid, GError **error)
{
    g_autofree char *clean = sanitize(guest_path, error);

    if (!clean)
        return FALSE;
    if ((uid >= 0 || gid >= 0) && !check_owner(MAX(uid, 0), MAX(gid, 0), error))
        return FALSE;
    if (!add_local_node(w, AT_FDCWD, local_path, clean, uid, gid, error)) {
        g_prefix_error(error, "adding '%s': ", local_path);
        return FALSE;
    }
    return TRUE;
}

gboolean
carrel_archive_writer_finish(CarrelArchiveWriter *w, GError **error)
{
    if (!check_usable(w, error))
        return FALSE;
    if (archive_write_close(w->a) != ARCHIVE_OK || fsync(w->fd) < 0) {
        w->broken = TRUE;
        carrel_archive_set_error(error, w->a, "finishing tar");
        g_prefix_error(error, "'%s': ", w->out_path);
        return FALSE;
    }
    w->finished = TRUE;
    return TRUE;
}

/* A symlink from an upload is kept only when it can only point down: relative, no "..". */
static gboolean
check_upload_symlink(const char *guest_path, const char *target, GError **error)
{
    g_auto(GStrv) segments = NULL;

    if (!target || !*target || target[0] == '/' || strlen(target) > CARREL_LIMIT_GUEST_PATH ||
        !carrel_util_is_clean_text(target)) {
        g_set_error(error, CARREL_ERROR, CARREL_ERROR_POLICY_DENIED,
                    "symlink '%s' must have a relative target in clean text", guest_path);
        return FALSE;
    }
    segments = g_strsplit(target, "/", -1);
    for (guint i = 0; segments[i]; i++) {
        if (g_str_equal(segments[i], "..")) {
            g_set_error(error, CARREL_ERROR, CARREL_ERROR_POLICY_DENIED,
                        "symlink '%s' has a '..' in its target", guest_path);
            return FALSE;
        }
    }
    return TRUE;
}

static gboolean
copy_tar_data(CarrelArchiveWriter *w, struct archive *in, const Member *m, GError **error)
{
    g_autofree guint8 *buf = g_malloc(COPY_BUFFER);
    guint64 total = 0;

    for (;;) {
        la_ssize_t n = archive_read_data(in, buf, COPY_BUFFER);

        if (n < 0) {
            w->broken = TRUE;
            carrel_archive_set_error(error, in, "reading member data");
            return FALSE;
        }
        if (n == 0)
            break;
        total += n;
        /* libarchive never gives more than the header said; checked all the same. */
        if (total > m->size) {
            w->broken = TRUE;
            g_set_error(error, CARREL_ERROR, CARREL_ERROR_FAILED,
                        "member is longer than its header");
            return FALSE;
        }
        if (!write_data(w, buf, n, error))
            return FALSE;
    }
    return TRUE;
}

/* One member of an uploaded tar: files, directories and safe symlinks under guest_dir. */
static gboolean
add_upload_member(CarrelArchiveWriter *w, struct archive *in, struct archive_entry *ae,
                  const char *guest_dir, gint64 uid, gint64 gid, GError **error)
{
    g_autofree char *guest_path =
        carrel_archive_guest_path(guest_dir, archive_entry_pathname(ae), error);
    Member m = {guest_path,
                carrel_archive_entry_type(ae),
                archive_entry_perm(ae),
                uid,
                gid,
                archive_entry_mtime(ae),
                0,
                archive_entry_symlink(ae)};
    gboolean written;

    if (!guest_path)
        return FALSE;
    switch (m.type) {
    case CARREL_ARCHIVE_TYPE_FILE:
        m.size = archive_entry_size_is_set(ae) ? (guint64)archive_entry_size(ae) : 0;
        return write_header(w, &m, &written, error) &&
               (!written || copy_tar_data(w, in, &m, error));
    case CARREL_ARCHIVE_TYPE_DIR:
        /* guest_dir itself is the caller's: its owner and mode are not the upload's to set. */
        if (g_str_equal(guest_path, guest_dir))
            return TRUE;
        return write_header(w, &m, &written, error);
    case CARREL_ARCHIVE_TYPE_SYMLINK:
        return check_upload_symlink(guest_path, m.link_target, error) &&
               write_header(w, &m, &written, error);
    case CARREL_ARCHIVE_TYPE_HARDLINK:
    case CARREL_ARCHIVE_TYPE_OTHER:
    case CARREL_ARCHIVE_TYPE_LAST:
        break;
    }
    g_set_error(error, CARREL_ERROR, CARREL_ERROR_UNSUPPORTED,
                "'%s' is a %s: uploads hold only files, directories and symlinks", guest_path,
                m.type == CARREL_ARCHIVE_TYPE_HARDLINK ? "hard link" : "device, fifo or socket");
    return FALSE;
}

gboolean
carrel_archive_writer_add_tar(CarrelArchiveWriter *w, const char *tar_path, const char *guest_dir,
                              gint64 uid, gint64 gid, GError **error)
{
    g_autofree char *dir = sanitize(guest_dir, error);
    struct archive *in;
    struct archive_entry *ae;
    gboolean ok;
    int r = ARCHIVE_EOF;

    if (!dir || !check_owner(uid, gid, error))
        return FALSE;
    in = archive_read_new();
    archive_read_support_format_tar(in); /* plain tar only, as in the sink */
    ok = archive_read_open_filename(in, tar_path, COPY_BUFFER) == ARCHIVE_OK;
    if (!ok)
        carrel_archive_set_error(error, in, "opening tar");
    while (ok && ((r = archive_read_next_header(in, &ae)) == ARCHIVE_OK || r == ARCHIVE_WARN)) {
        ok = add_upload_member(w, in, ae, dir, uid, gid, error);
        if (!ok) {
            g_autofree char *clean = carrel_archive_escape(archive_entry_pathname(ae));
            g_prefix_error(error, "member '%s': ", clean);
        }
    }
    if (ok && r != ARCHIVE_EOF) {
        carrel_archive_set_error(error, in, "reading tar");
        ok = FALSE;
    }
    archive_read_free(in);
    if (!ok)
        g_prefix_error(error, "adding '%s': ", tar_path);
    return ok;
}
