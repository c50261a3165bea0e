/*
 * libFuzzer harness for tar streams from guests and uploads (untrusted): the path rules on the
 * first line of the input, then the whole input as a tar through the sink (into a fresh
 * directory) and through the writer's upload path, whose output must read back clean.
 * Built with -Dfuzz=true and clang (see tests/fuzz/meson.build).
 */
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <glib/gstdio.h>
#include <sys/stat.h>

#include "archive/archive.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static const CarrelArchiveLimits limits = {64 * 1024, 64};

/* An error, or an absolute clean path under the prefix without "", "." or ".." segments. */
static void
check_guest_path(const char *prefix, const char *member)
{
    g_autoptr(GError) error = NULL;
    g_autofree char *got = carrel_archive_guest_path(prefix, member, &error);
    g_auto(GStrv) segments = NULL;

    if ((got == NULL) == (error == NULL))
        __builtin_trap();
    if (!got)
        return;
    if (!g_str_has_prefix(got, prefix) || !carrel_util_is_clean_text(got) ||
        strlen(got) > CARREL_LIMIT_GUEST_PATH)
        __builtin_trap();
    segments = g_strsplit(got + 1, "/", -1);
    for (guint i = 0; segments[i] && !g_str_equal(got, "/"); i++)
        if (!*segments[i] || g_str_equal(segments[i], ".") || g_str_equal(segments[i], ".."))
            __builtin_trap();
}

/* DIR holds only regular files and directories, never setuid, setgid or sticky. */
static void
check_tree(const char *path)
{
    g_autoptr(GDir) dir = g_dir_open(path, 0, NULL);
    const char *name;

    if (!dir)
        __builtin_trap();
    while ((name = g_dir_read_name(dir))) {
        g_autofree char *child = g_build_filename(path, name, NULL);
        struct stat st;

        if (lstat(child, &st) < 0 || (!S_ISREG(st.st_mode) && !S_ISDIR(st.st_mode)) ||
            (st.st_mode & 07000))
            __builtin_trap();
        if (S_ISDIR(st.st_mode))
            check_tree(child);
    }
}

/* Extracts tar into a fresh dir; with must_be_clean, every entry must have been placed. */
static gboolean
extract(const char *root, const char *tar, gboolean must_be_clean)
{
    g_autofree char *dir = g_build_filename(root, "dir", NULL);
    g_autoptr(CarrelArchiveSink) sink = NULL;
    g_autoptr(GError) error = NULL;
    gboolean ok;
    GPtrArray *entries;

    carrel_util_remove_tree(dir, NULL);
    g_mkdir(dir, 0700);
    sink = carrel_archive_sink_new(dir, &limits, &error);
    ok = carrel_archive_sink_add_tar(sink, tar, "/out", &error);
    entries = carrel_archive_sink_entries(sink);
    if (ok == (error != NULL) || (error && !carrel_util_is_clean_text(error->message)) ||
        entries->len > limits.max_entries || carrel_archive_sink_bytes(sink) > limits.max_bytes)
        __builtin_trap();
    for (guint i = 0; i < entries->len; i++) {
        const CarrelArchiveEntry *e = entries->pdata[i];
        if (!carrel_util_is_clean_text(e->guest_path) ||
            (e->skipped && !carrel_util_is_clean_text(e->skipped)) ||
            (e->link_target && !carrel_util_is_clean_text(e->link_target)) ||
            (e->path && (e->skipped || e->path[0] == '/')) ||
            ((e->type == CARREL_ARCHIVE_TYPE_FILE) != (e->sha256 != NULL) && e->path) ||
            (must_be_clean && e->skipped))
            __builtin_trap();
    }
    check_tree(dir);
    if (must_be_clean && !ok)
        __builtin_trap();
    return ok;
}

static void
rewrite_upload(const char *root, const char *tar)
{
    g_autofree char *out = g_build_filename(root, "out.tar", NULL);
    g_autoptr(CarrelArchiveWriter) w = carrel_archive_writer_new(out, &limits, NULL);
    g_autoptr(GError) error = NULL;

    if (!w)
        __builtin_trap();
    if (!carrel_archive_writer_add_tar(w, tar, "/out", 1000, 1000, &error)) {
        if (!error || !carrel_util_is_clean_text(error->message))
            __builtin_trap();
        return;
    }
    if (!carrel_archive_writer_finish(w, NULL))
        __builtin_trap();
    /* What the writer accepted reads back without one refused entry. */
    extract(root, out, TRUE);
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static char *root;
    g_autofree char *tar = NULL;
    const uint8_t *newline = memchr(data, '\n', size);
    g_autofree char *member = g_strndup((const char *)data, newline ? newline - data : size);

    if (!root)
        root = g_dir_make_tmp("carrel-fuzz-archive-XXXXXX", NULL);
    check_guest_path("/", member);
    check_guest_path("/home/user/out", member);
    tar = g_build_filename(root, "in.tar", NULL);
    if (!g_file_set_contents(tar, (const char *)data, size, NULL))
        __builtin_trap();
    extract(root, tar, FALSE);
    rewrite_upload(root, tar);
    return 0;
}
