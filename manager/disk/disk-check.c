#include <errno.h>
#include <fcntl.h>
#include <glib/gstdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define CARREL_DISK_PRIV_H_ALLOW
#include "disk/disk-priv.h"

/* QEMU's probing reads this many bytes; a "raw" disk must look like nothing in them. */
#define DISK_PROBE_BYTES 512

/* qemu-img check's documented exit statuses. */
#define CHECK_OK 0
#define CHECK_ERRORS 1
#define CHECK_CORRUPT 2
#define CHECK_LEAKS 3
#define CHECK_UNSUPPORTED 63

gboolean
carrel_disk_check_path(const char *path, const char *what, GError **error)
{
    if (!path || !g_path_is_absolute(path) || !carrel_util_is_clean_text(path)) {
        g_set_error(error, CARREL_ERROR, CARREL_ERROR_INVALID_ARG,
                    "%s path '%s' must be an absolute path without control characters", what,
                    path && g_utf8_validate(path, -1, NULL) ? path : "(invalid)");
        return FALSE;
    }
    return TRUE;
}

gboolean
carrel_disk_is_supported_format(const char *format)
{
    return format && (g_str_equal(format, "qcow2") || g_str_equal(format, "raw"));
}

static gboolean
check_format_name(const char *format, GError **error)
{
    /* It becomes an argument of qemu-img: only a plain driver name may pass. */
    if (!format || !*format || strlen(format) > 32 || format[0] == '-' ||
        strspn(format, "abcdefghijklmnopqrstuvwxyz0123456789-_") != strlen(format)) {
        g_set_error(error, CARREL_ERROR, CARREL_ERROR_INVALID_ARG, "image format '%s' is invalid",
                    format && carrel_util_is_clean_text(format) ? format : "(invalid)");
        return FALSE;
    }
    return TRUE;
}

static gboolean
stat_regular(const char *path, GStatBuf *ret_st, GError **error)
{
    GStatBuf st;

    if (g_stat(path, &st) < 0) {
        int saved = errno;
        g_set_error(error, CARREL_ERROR,
                    saved == ENOENT ? CARREL_ERROR_NOT_FOUND : CARREL_ERROR_INVALID_ARG,
                    "image '%s' cannot be read: %s", path, g_strerror(saved));
        return FALSE;
    }
    /* A FIFO or a device would hang qemu-img or expose a host disk. */
    if (!S_ISREG(st.st_mode)) {
        g_set_error(error, CARREL_ERROR, CARREL_ERROR_INVALID_ARG,
                    "image '%s' is not a regular file", path);
        return FALSE;
    }
    *ret_st = st;
    return TRUE;
}

static gboolean
check_raw_header(const char *path, GError **error)
{
    guint8 head[DISK_PROBE_BYTES];
    gsize got = 0;
    const char *looks_like;
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY);

    if (fd < 0) {
        int saved = errno;
        g_set_error(error, CARREL_ERROR, CARREL_ERROR_INVALID_ARG, "image '%s' cannot be read: %s",
                    path, g_strerror(saved));
        return FALSE;
    }
    while (got < sizeof(head)) {
        ssize_t n = read(fd, head + got, sizeof(head) - got);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            break;
        got += (gsize)n;
    }
    close(fd);
    looks_like = carrel_disk_detect_format(head, got);
    if (looks_like) {
        g_set_error(error, CARREL_ERROR, CARREL_ERROR_INVALID_ARG,
                    "image '%s' is declared 'raw' but starts with a '%s' header: declare its real "
                    "format, or convert it (a raw image must not look like another format)",
                    path, looks_like);
        return FALSE;
    }
    return TRUE;
}

/*
 * Runs qemu-img; a non-zero exit becomes exit_code (what it means depends on the caller),
 * a missing program CARREL_ERROR_DISK, a timeout stays CARREL_ERROR_TIMEOUT.
 */
static gboolean
run_qemu_img(const char *const *argv, guint timeout_s, CarrelErrorCode exit_code, char **ret_stdout,
             GError **error)
{
    g_autoptr(GError) local = NULL;

    if (carrel_util_run(argv, timeout_s, ret_stdout, NULL, &local))
        return TRUE;
    if (local->domain == CARREL_ERROR && local->code == CARREL_ERROR_TIMEOUT) {
        g_propagate_error(error, g_steal_pointer(&local));
        return FALSE;
    }
    g_set_error_literal(error, CARREL_ERROR,
                        local->domain == CARREL_ERROR ? exit_code : CARREL_ERROR_DISK,
                        local->message);
    return FALSE;
}

CarrelDiskInfo *
carrel_disk_info_read(const char *path, const char *format, GError **error)
{
    const char *argv[] = {"qemu-img", "info", "--output=json", "-f", format, path, NULL};
    g_autofree char *out = NULL;
    CarrelDiskInfo *info;
    GStatBuf st;

    if (!carrel_disk_check_path(path, "image", error) || !check_format_name(format, error) ||
        !stat_regular(path, &st, error))
        return NULL;
    if (g_str_equal(format, "raw") && !check_raw_header(path, error))
        return NULL;
    /*
     * No --force-share: qemu-img then takes QEMU's shared read lock, so a disk that a running
     * VM writes is refused rather than read half-written. -f is given, so nothing is probed,
     * and info opens no backing file.
     */
    if (!run_qemu_img(argv, CARREL_DISK_INFO_TIMEOUT_S, CARREL_ERROR_INVALID_ARG, &out, error)) {
        g_prefix_error(error, "reading image '%s' as '%s': ", path, format);
        return NULL;
    }
    info = carrel_disk_info_parse(out, strlen(out), error);
    if (!info) {
        g_prefix_error(error, "reading image '%s': ", path);
        return NULL;
    }
    return info;
}

static gboolean
check_links(const CarrelDiskInfo *info, GError **error)
{
    /* Backing and data files name host paths: an imported disk must be self-contained. */
    if (info->backing_filename) {
        g_set_error(error, CARREL_ERROR, CARREL_ERROR_INVALID_ARG,
                    "image has a backing file '%s': import a standalone image (qemu-img convert)",
                    info->backing_filename);
        return FALSE;
    }
    if (info->data_file) {
        g_set_error(error, CARREL_ERROR, CARREL_ERROR_INVALID_ARG,
                    "image has an external data file '%s': import a standalone image "
                    "(qemu-img convert)",
                    info->data_file);
        return FALSE;
    }
    return TRUE;
}

gboolean
carrel_disk_check_importable(const CarrelDiskInfo *info, const char *format,
                             guint64 max_virtual_size, GError **error)
{
    if (!carrel_disk_is_supported_format(format)) {
        g_set_error(error, CARREL_ERROR, CARREL_ERROR_INVALID_ARG,
                    "image format '%s' is not supported: use 'qcow2' or 'raw'",
                    format && carrel_util_is_clean_text(format) ? format : "(invalid)");
        return FALSE;
    }
    if (!info->format || !g_str_equal(info->format, format)) {
        g_set_error(error, CARREL_ERROR, CARREL_ERROR_INVALID_ARG,
                    "image is '%s' but was declared '%s'", info->format ? info->format : "unknown",
                    format);
        return FALSE;
    }
    if (!check_links(info, error))
        return FALSE;
    if (info->encrypted) {
        g_set_error(error, CARREL_ERROR, CARREL_ERROR_INVALID_ARG,
                    "image is encrypted: import an unencrypted image");
        return FALSE;
    }
    if (info->corrupt) {
        g_set_error(error, CARREL_ERROR, CARREL_ERROR_INVALID_ARG,
                    "image is marked corrupt: repair it (qemu-img check -r all) or convert it");
        return FALSE;
    }
    if (info->virtual_size == 0 || info->virtual_size > max_virtual_size) {
        g_set_error(error, CARREL_ERROR, CARREL_ERROR_INVALID_ARG,
                    "image virtual size %" G_GUINT64_FORMAT
                    " bytes is outside 1..%" G_GUINT64_FORMAT " bytes",
                    info->virtual_size, max_virtual_size);
        return FALSE;
    }
    return TRUE;
}

/* First non-empty line of qemu-img check's report ("16 errors were found on the image."). */
static char *
check_summary(const char *out, const char *err)
{
    const char *texts[] = {out, err};

    for (gsize t = 0; t < G_N_ELEMENTS(texts); t++) {
        g_auto(GStrv) lines = g_strsplit(texts[t] ? texts[t] : "", "\n", 64);
        for (char **l = lines; *l; l++) {
            g_strstrip(*l);
            if (**l)
                return g_utf8_make_valid(*l, -1);
        }
    }
    return g_strdup("no details");
}

static gboolean
check_qcow2(const char *path, GError **error)
{
    const char *argv[] = {"qemu-img", "check", "-f", "qcow2", path, NULL};
    g_autofree char *out = NULL;
    g_autofree char *err = NULL;
    g_autofree char *summary = NULL;
    int status = -1;

    if (!carrel_util_run_status(argv, CARREL_DISK_CHECK_TIMEOUT_S, &status, &out, &err, error))
        return FALSE;
    /* Leaked clusters waste space but never hand wrong data to the guest. */
    if (status == CHECK_OK || status == CHECK_LEAKS)
        return TRUE;
    summary = check_summary(out, err);
    if (status == CHECK_CORRUPT || status == CHECK_ERRORS || status == CHECK_UNSUPPORTED) {
        g_set_error(error, CARREL_ERROR, CARREL_ERROR_INVALID_ARG,
                    "image '%s' is damaged or truncated: qemu-img check: %s", path, summary);
        return FALSE;
    }
    g_set_error(error, CARREL_ERROR, CARREL_ERROR_DISK,
                "qemu-img check of '%s' exited with status %d: %s", path, status, summary);
    return FALSE;
}

gboolean
carrel_disk_check_consistent(const char *path, const char *format, GError **error)
{
    GStatBuf st;

    if (!carrel_disk_check_path(path, "image", error) || !stat_regular(path, &st, error))
        return FALSE;
    if (g_strcmp0(format, "qcow2") == 0)
        return check_qcow2(path, error);
    if (g_strcmp0(format, "raw") == 0) {
        if (!check_raw_header(path, error))
            return FALSE;
        /* Nothing to check inside a raw disk; a size off the sector grid means a cut copy. */
        if (st.st_size == 0 || st.st_size % 512 != 0) {
            g_set_error(error, CARREL_ERROR, CARREL_ERROR_INVALID_ARG,
                        "raw image '%s' is %" G_GINT64_FORMAT
                        " bytes, not a positive multiple of 512: truncated?",
                        path, (gint64)st.st_size);
            return FALSE;
        }
        return TRUE;
    }
    g_set_error(error, CARREL_ERROR, CARREL_ERROR_INVALID_ARG,
                "image format '%s' is not supported: use 'qcow2' or 'raw'",
                format && carrel_util_is_clean_text(format) ? format : "(invalid)");
    return FALSE;
}
