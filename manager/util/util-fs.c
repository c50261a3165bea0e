#include <errno.h>
#include <fcntl.h>
#include <glib/gstdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "util/util.h"

gboolean
carrel_util_ensure_dir(const char *path, int mode, GError **error)
{
    struct stat st;

    if (g_mkdir_with_parents(path, mode) < 0) {
        int saved = errno;
        g_set_error(error, G_IO_ERROR, g_io_error_from_errno(saved), "creating directory '%s': %s",
                    path, g_strerror(saved));
        return FALSE;
    }
    if (lstat(path, &st) < 0 || !S_ISDIR(st.st_mode)) {
        g_set_error(error, CARREL_ERROR, CARREL_ERROR_INTERNAL, "'%s' is not a directory", path);
        return FALSE;
    }
    return TRUE;
}

static gboolean
remove_entry(const char *path, GError **error)
{
    struct stat st;

    if (lstat(path, &st) < 0) {
        if (errno == ENOENT)
            return TRUE;
        g_set_error(error, G_IO_ERROR, g_io_error_from_errno(errno), "inspecting '%s': %s", path,
                    g_strerror(errno));
        return FALSE;
    }
    /* Symlinks are unlinked, never followed: the tree may hold guest-made entries. */
    if (S_ISDIR(st.st_mode)) {
        g_autoptr(GDir) dir = g_dir_open(path, 0, error);
        const char *name;

        if (!dir)
            return FALSE;
        while ((name = g_dir_read_name(dir))) {
            g_autofree char *child = g_build_filename(path, name, NULL);
            if (!remove_entry(child, error))
                return FALSE;
        }
        if (rmdir(path) < 0) {
            g_set_error(error, G_IO_ERROR, g_io_error_from_errno(errno), "removing '%s': %s", path,
                        g_strerror(errno));
            return FALSE;
        }
        return TRUE;
    }
    if (unlink(path) < 0 && errno != ENOENT) {
        g_set_error(error, G_IO_ERROR, g_io_error_from_errno(errno), "removing '%s': %s", path,
                    g_strerror(errno));
        return FALSE;
    }
    return TRUE;
}

gboolean
carrel_util_remove_tree(const char *path, GError **error)
{
    return remove_entry(path, error);
}

static gboolean
copy_fd(int in_fd, int out_fd, const char *src, GError **error)
{
    g_autofree char *buf = g_malloc(1024 * 1024);

    for (;;) {
        ssize_t n = read(in_fd, buf, 1024 * 1024);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0) {
            g_set_error(error, G_IO_ERROR, g_io_error_from_errno(errno), "reading '%s': %s", src,
                        g_strerror(errno));
            return FALSE;
        }
        if (n == 0)
            return TRUE;
        for (ssize_t off = 0; off < n;) {
            ssize_t w = write(out_fd, buf + off, n - off);
            if (w < 0 && errno == EINTR)
                continue;
            if (w < 0) {
                g_set_error(error, CARREL_ERROR, CARREL_ERROR_DISK, "writing copy: %s",
                            g_strerror(errno));
                return FALSE;
            }
            off += w;
        }
    }
}

gboolean
carrel_util_copy_file(const char *src, const char *dest, int mode, GError **error)
{
    struct stat st;
    int in_fd, out_fd;
    gboolean ok;

    /* O_NOFOLLOW: a symlink given as a disk path is refused rather than chased. */
    in_fd = open(src, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
    if (in_fd < 0) {
        g_set_error(error, G_IO_ERROR, g_io_error_from_errno(errno), "opening '%s': %s", src,
                    g_strerror(errno));
        return FALSE;
    }
    if (fstat(in_fd, &st) < 0 || !S_ISREG(st.st_mode)) {
        close(in_fd);
        g_set_error(error, CARREL_ERROR, CARREL_ERROR_INVALID_ARG, "'%s' is not a regular file",
                    src);
        return FALSE;
    }
    out_fd = open(dest, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, mode);
    if (out_fd < 0) {
        int saved = errno;
        close(in_fd);
        g_set_error(error, CARREL_ERROR, CARREL_ERROR_DISK, "creating '%s': %s", dest,
                    g_strerror(saved));
        return FALSE;
    }
    ok = copy_fd(in_fd, out_fd, src, error);
    if (ok && (fsync(out_fd) < 0 || fchmod(out_fd, mode) < 0)) {
        g_set_error(error, CARREL_ERROR, CARREL_ERROR_DISK, "finishing '%s': %s", dest,
                    g_strerror(errno));
        ok = FALSE;
    }
    close(in_fd);
    close(out_fd);
    if (!ok)
        (void)unlink(dest);
    return ok;
}

gboolean
carrel_util_write_file(const char *path, const char *contents, gssize len, int mode, GError **error)
{
    if (!g_file_set_contents_full(path, contents, len,
                                  G_FILE_SET_CONTENTS_CONSISTENT | G_FILE_SET_CONTENTS_DURABLE,
                                  mode, error)) {
        g_prefix_error(error, "writing '%s': ", path);
        return FALSE;
    }
    return TRUE;
}

gboolean
carrel_util_write_new_file(const char *path, const char *contents, gssize len, int mode,
                           GError **error)
{
    /* CONSISTENT alone syncs only when it replaces a file with content; a new one is not. */
    if (!g_file_set_contents_full(path, contents, len, G_FILE_SET_CONTENTS_CONSISTENT, mode,
                                  error)) {
        g_prefix_error(error, "writing '%s': ", path);
        return FALSE;
    }
    return TRUE;
}
