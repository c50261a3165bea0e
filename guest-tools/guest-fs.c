/*
 * fs list|stat|mkdir|remove|move: file operations that qemu-ga's guest-file-* calls cannot do,
 * run as root by carreld. Nothing follows a symlink except where a path's parent folders do
 * (as open(2) does): entries are lstat'ed, remove unlinks a link rather than its target, and a
 * recursive remove never leaves the tree it started in (openat/unlinkat on descriptors).
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "guest.h"

/* Deeper trees are refused by a recursive remove rather than exhausting descriptors. */
#define FS_REMOVE_MAX_DEPTH 256

static gboolean
fail_errno(int saved, const char *what, const char *path, GError **error)
{
    CarrelGuestErrorCode code = CARREL_GUEST_ERROR_FAILED;

    if (saved == ENOENT || saved == ENOTDIR)
        code = CARREL_GUEST_ERROR_NOT_FOUND;
    else if (saved == EEXIST)
        code = CARREL_GUEST_ERROR_EXISTS;
    else if (saved == ENOTEMPTY)
        code = CARREL_GUEST_ERROR_NOT_EMPTY;
    else if (saved == EACCES || saved == EPERM || saved == EROFS || saved == EBUSY)
        code = CARREL_GUEST_ERROR_FORBIDDEN;
    else if (saved == ENAMETOOLONG || saved == ELOOP || saved == EINVAL || saved == EXDEV)
        code = CARREL_GUEST_ERROR_INVALID_ARG;
    g_set_error(error, CARREL_GUEST_ERROR, code, "%s '%s': %s", what, path, g_strerror(saved));
    return FALSE;
}

static const char *
type_name(mode_t mode)
{
    if (S_ISREG(mode))
        return "file";
    if (S_ISDIR(mode))
        return "dir";
    if (S_ISLNK(mode))
        return "symlink";
    return "other";
}

static void
add_bytes_member(JsonBuilder *b, const char *key, const char *text)
{
    gsize len = strlen(text);

    if (g_utf8_validate(text, (gssize)len, NULL)) {
        json_builder_set_member_name(b, key);
        json_builder_add_string_value(b, text);
    } else {
        g_autofree char *key_b64 = g_strconcat(key, "_b64", NULL);
        g_autofree char *b64 = g_base64_encode((const guchar *)text, len);

        json_builder_set_member_name(b, key_b64);
        json_builder_add_string_value(b, b64);
    }
}

JsonNode *
carrel_guest_fs_entry_to_json(const char *name, const struct stat *st, const char *target)
{
    g_autoptr(JsonBuilder) b = carrel_guest_json_begin();

    add_bytes_member(b, "name", name);
    json_builder_set_member_name(b, "type");
    json_builder_add_string_value(b, type_name(st->st_mode));
    json_builder_set_member_name(b, "size");
    json_builder_add_int_value(b, (gint64)st->st_size);
    json_builder_set_member_name(b, "mode");
    json_builder_add_int_value(b, (gint64)(st->st_mode & 07777));
    json_builder_set_member_name(b, "mtime");
    json_builder_add_int_value(b, (gint64)st->st_mtime);
    if (target)
        add_bytes_member(b, "target", target);
    return carrel_guest_json_end(b);
}

/* The target of the symlink name in dirfd, or NULL (not a link, or unreadable). */
static char *
read_target(int dirfd, const char *name, const struct stat *st)
{
    char buf[CARREL_GUEST_LIMIT_PATH_LEN + 1];
    ssize_t n;

    if (!S_ISLNK(st->st_mode))
        return NULL;
    n = readlinkat(dirfd, name, buf, sizeof(buf) - 1);
    if (n < 0)
        return g_strdup("");
    buf[n] = '\0';
    return g_strdup(buf);
}

static int
compare_names(gconstpointer a, gconstpointer b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* The names in dir (without . and ..), sorted; at most the entry limit, *ret_cut otherwise. */
static GPtrArray *
read_names(DIR *dir, gboolean *ret_cut)
{
    GPtrArray *names = g_ptr_array_new_with_free_func(g_free);
    struct dirent *ent;

    *ret_cut = FALSE;
    while ((ent = readdir(dir))) {
        if (g_str_equal(ent->d_name, ".") || g_str_equal(ent->d_name, ".."))
            continue;
        if (names->len >= CARREL_GUEST_LIMIT_FS_ENTRIES) {
            *ret_cut = TRUE;
            break;
        }
        g_ptr_array_add(names, g_strdup(ent->d_name));
    }
    g_ptr_array_sort(names, compare_names);
    return names;
}

static JsonNode *
fs_list(const char *path, GError **error)
{
    g_autoptr(JsonBuilder) b = carrel_guest_json_begin();
    g_autoptr(GPtrArray) names = NULL;
    gboolean cut = FALSE;
    gsize budget = 0;
    int fd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    DIR *dir;

    if (fd < 0 || !(dir = fdopendir(fd))) {
        int saved = errno;
        if (fd >= 0)
            close(fd);
        fail_errno(saved, "listing", path, error);
        return NULL;
    }
    names = read_names(dir, &cut);
    json_builder_set_member_name(b, "path");
    json_builder_add_string_value(b, path);
    json_builder_set_member_name(b, "entries");
    json_builder_begin_array(b);
    for (guint i = 0; i < names->len; i++) {
        const char *name = g_ptr_array_index(names, i);
        g_autofree char *target = NULL;
        g_autoptr(JsonNode) entry = NULL;
        struct stat st;

        /* Gone since readdir: not listed. */
        if (fstatat(dirfd(dir), name, &st, AT_SYMLINK_NOFOLLOW) < 0)
            continue;
        target = read_target(dirfd(dir), name, &st);
        /* Worst case of one entry's JSON: base64 names and targets plus the fixed members. */
        budget += 4 * (strlen(name) + (target ? strlen(target) : 0)) / 3 + 160;
        if (budget > CARREL_GUEST_LIMIT_FS_JSON_BYTES) {
            cut = TRUE;
            break;
        }
        entry = carrel_guest_fs_entry_to_json(name, &st, target);
        json_builder_add_value(b, g_steal_pointer(&entry));
    }
    json_builder_end_array(b);
    json_builder_set_member_name(b, "truncated");
    json_builder_add_boolean_value(b, cut);
    closedir(dir);
    return carrel_guest_json_end(b);
}

static JsonNode *
fs_stat(const char *path, GError **error)
{
    g_autoptr(JsonBuilder) b = carrel_guest_json_begin();
    g_autofree char *name = g_path_get_basename(path);
    g_autofree char *target = NULL;
    struct stat st;

    if (lstat(path, &st) < 0) {
        fail_errno(errno, "stat", path, error);
        return NULL;
    }
    target = read_target(AT_FDCWD, path, &st);
    json_builder_set_member_name(b, "path");
    json_builder_add_string_value(b, path);
    json_builder_set_member_name(b, "entry");
    json_builder_add_value(b, carrel_guest_fs_entry_to_json(name, &st, target));
    return carrel_guest_json_end(b);
}

static JsonNode *
ok_json(const char *key, const char *path, const char *flag, gboolean value)
{
    g_autoptr(JsonBuilder) b = carrel_guest_json_begin();

    json_builder_set_member_name(b, key);
    json_builder_add_string_value(b, path);
    json_builder_set_member_name(b, flag);
    json_builder_add_boolean_value(b, value);
    return carrel_guest_json_end(b);
}

static gboolean
make_dir(const char *path, gboolean parents, gboolean *ret_created, GError **error)
{
    struct stat st;

    *ret_created = FALSE;
    if (mkdir(path, 0755) == 0) {
        *ret_created = TRUE;
        return TRUE;
    }
    if (errno == EEXIST && parents && stat(path, &st) == 0 && S_ISDIR(st.st_mode))
        return TRUE;
    if (errno == ENOENT && parents) {
        g_autofree char *parent = g_path_get_dirname(path);
        gboolean made = FALSE;

        if (g_str_equal(parent, path) || !make_dir(parent, TRUE, &made, error))
            return FALSE;
        return make_dir(path, FALSE, ret_created, error);
    }
    return fail_errno(errno, "creating directory", path, error);
}

/* Empties the directory open at fd (taken), depth levels below the start. */
static gboolean
empty_dir(int fd, const char *path, guint depth, GError **error)
{
    DIR *dir = fdopendir(fd);
    struct dirent *ent;
    gboolean ok = TRUE;

    if (!dir) {
        close(fd);
        return fail_errno(errno, "opening", path, error);
    }
    if (depth > FS_REMOVE_MAX_DEPTH) {
        closedir(dir);
        g_set_error(error, CARREL_GUEST_ERROR, CARREL_GUEST_ERROR_LIMIT,
                    "'%s' is nested deeper than %d levels", path, FS_REMOVE_MAX_DEPTH);
        return FALSE;
    }
    while (ok && (ent = readdir(dir))) {
        struct stat st;
        int child;

        if (g_str_equal(ent->d_name, ".") || g_str_equal(ent->d_name, ".."))
            continue;
        if (fstatat(dirfd(dir), ent->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0)
            continue;
        if (S_ISDIR(st.st_mode)) {
            /* O_NOFOLLOW: a directory swapped for a symlink meanwhile is not entered. */
            child =
                openat(dirfd(dir), ent->d_name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
            ok = child >= 0 ? empty_dir(child, path, depth + 1, error)
                            : fail_errno(errno, "opening a folder in", path, error);
            if (ok && unlinkat(dirfd(dir), ent->d_name, AT_REMOVEDIR) < 0)
                ok = fail_errno(errno, "removing a folder in", path, error);
        } else if (unlinkat(dirfd(dir), ent->d_name, 0) < 0) {
            ok = fail_errno(errno, "removing a file in", path, error);
        }
    }
    closedir(dir);
    return ok;
}

static gboolean
remove_path(const char *path, gboolean recursive, GError **error)
{
    struct stat st;
    int fd;

    if (lstat(path, &st) < 0)
        return fail_errno(errno, "removing", path, error);
    if (!S_ISDIR(st.st_mode))
        return unlink(path) == 0 || fail_errno(errno, "removing", path, error);
    if (rmdir(path) == 0)
        return TRUE;
    if ((errno != ENOTEMPTY && errno != EEXIST) || !recursive) {
        int saved = errno == EEXIST ? ENOTEMPTY : errno;
        if (saved == ENOTEMPTY) {
            g_set_error(error, CARREL_GUEST_ERROR, CARREL_GUEST_ERROR_NOT_EMPTY,
                        "directory '%s' is not empty (remove it recursively)", path);
            return FALSE;
        }
        return fail_errno(saved, "removing", path, error);
    }
    fd = open(path, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0)
        return fail_errno(errno, "opening", path, error);
    if (!empty_dir(fd, path, 0, error))
        return FALSE;
    return rmdir(path) == 0 || fail_errno(errno, "removing", path, error);
}

static gboolean
move_path(const char *from, const char *to, GError **error)
{
    /* NOREPLACE: a move never destroys what is at the destination. */
    if (renameat2(AT_FDCWD, from, AT_FDCWD, to, RENAME_NOREPLACE) == 0)
        return TRUE;
    if (errno == EXDEV) {
        g_set_error(error, CARREL_GUEST_ERROR, CARREL_GUEST_ERROR_INVALID_ARG,
                    "moving '%s' to '%s': they are on different filesystems", from, to);
        return FALSE;
    }
    return fail_errno(errno, "moving", from, error);
}

static gboolean
check_path(const char *path, GError **error)
{
    if (!g_path_is_absolute(path) || strlen(path) > CARREL_GUEST_LIMIT_PATH_LEN) {
        g_set_error(error, CARREL_GUEST_ERROR, CARREL_GUEST_ERROR_INVALID_ARG,
                    "path '%s' must be absolute and at most %d bytes", path,
                    CARREL_GUEST_LIMIT_PATH_LEN);
        return FALSE;
    }
    return TRUE;
}

JsonNode *
carrel_guest_cmd_fs(const CarrelGuestOptions *options, GError **error)
{
    const char *path = options->argv[0];
    gboolean created = FALSE;

    for (guint i = 0; options->argv[i]; i++) {
        if (!check_path(options->argv[i], error))
            return NULL;
    }
    if (options->command == CARREL_GUEST_COMMAND_FS_LIST)
        return fs_list(path, error);
    if (options->command == CARREL_GUEST_COMMAND_FS_STAT)
        return fs_stat(path, error);
    if (options->command == CARREL_GUEST_COMMAND_FS_MKDIR)
        return make_dir(path, options->parents, &created, error)
                   ? ok_json("path", path, "created", created)
                   : NULL;
    if (options->command == CARREL_GUEST_COMMAND_FS_REMOVE)
        return remove_path(path, options->recursive, error) ? ok_json("path", path, "removed", TRUE)
                                                            : NULL;
    if (options->command == CARREL_GUEST_COMMAND_FS_MOVE)
        return move_path(path, options->argv[1], error)
                   ? ok_json("path", options->argv[1], "moved", TRUE)
                   : NULL;
    g_set_error(error, CARREL_GUEST_ERROR, CARREL_GUEST_ERROR_INTERNAL, "not an fs command");
    return NULL;
}
