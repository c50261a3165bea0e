#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <archive.h>
#include <archive_entry.h>
#include <fcntl.h>
#include <glib/gstdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include "archive/archive.h"

/* One member of a tar built by a test. */
typedef struct {
    const char *name;
    unsigned int filetype; /* AE_IFREG, AE_IFDIR, AE_IFLNK, AE_IFIFO, AE_IFCHR */
    unsigned int mode;
    const char *data;
    const char *symlink;
    const char *hardlink;
} Member;

/* A temp folder holding DIR ("dir"), a sentinel folder next to it and the tars. */
typedef struct {
    char *root;
    char *dir;
    char *sentinel;
} Fixture;

static int
setup(void **state)
{
    Fixture *f = g_new0(Fixture, 1);

    f->root = g_dir_make_tmp("carrel-archive-XXXXXX", NULL);
    f->dir = g_build_filename(f->root, "dir", NULL);
    f->sentinel = g_build_filename(f->root, "sentinel", NULL);
    g_mkdir(f->dir, 0700);
    g_mkdir(f->sentinel, 0700);
    *state = f;
    return 0;
}

static int
teardown(void **state)
{
    Fixture *f = *state;

    assert_true(carrel_util_remove_tree(f->root, NULL));
    g_free(f->root);
    g_free(f->dir);
    g_free(f->sentinel);
    g_free(f);
    return 0;
}

static char *
fixture_path(Fixture *f, const char *name)
{
    return g_build_filename(f->root, name, NULL);
}

/* Writes members as a tar; format is ARCHIVE_FORMAT_TAR_PAX_RESTRICTED or _GNUTAR. */
static char *
build_tar_format(Fixture *f, const char *name, const Member *members, gsize n, int format)
{
    char *path = fixture_path(f, name);
    struct archive *a = archive_write_new();

    assert_int_equal(archive_write_set_format(a, format), ARCHIVE_OK);
    assert_int_equal(archive_write_open_filename(a, path), ARCHIVE_OK);
    for (gsize i = 0; i < n; i++) {
        struct archive_entry *ae = archive_entry_new();
        gsize len = members[i].data ? strlen(members[i].data) : 0;
        int r;

        archive_entry_set_pathname(ae, members[i].name);
        archive_entry_set_filetype(ae, members[i].filetype);
        archive_entry_set_perm(ae, members[i].mode ? members[i].mode : 0644);
        archive_entry_set_uid(ae, 1000);
        archive_entry_set_gid(ae, 1001);
        archive_entry_set_mtime(ae, 1700000000, 0);
        archive_entry_set_size(ae, len);
        if (members[i].symlink)
            archive_entry_set_symlink(ae, members[i].symlink);
        if (members[i].hardlink)
            archive_entry_set_hardlink(ae, members[i].hardlink);
        if (members[i].filetype == AE_IFCHR)
            archive_entry_set_rdev(ae, makedev(1, 3));
        r = archive_write_header(a, ae);
        /* WARN: a name that is not UTF-8 is stored as raw bytes (pax hdrcharset=BINARY). */
        assert_true(r == ARCHIVE_OK || r == ARCHIVE_WARN);
        if (len)
            assert_int_equal(archive_write_data(a, members[i].data, len), (la_ssize_t)len);
        archive_entry_free(ae);
    }
    assert_int_equal(archive_write_close(a), ARCHIVE_OK);
    archive_write_free(a);
    return path;
}

static char *
build_tar(Fixture *f, const char *name, const Member *members, gsize n)
{
    return build_tar_format(f, name, members, n, ARCHIVE_FORMAT_TAR_PAX_RESTRICTED);
}

static const CarrelArchiveEntry *
lookup_entry(CarrelArchiveSink *sink, const char *guest_path)
{
    GPtrArray *entries = carrel_archive_sink_entries(sink);

    /* The last one with that path: a duplicate comes after the entry it repeats. */
    for (guint i = entries->len; i > 0; i--) {
        const CarrelArchiveEntry *e = entries->pdata[i - 1];
        if (g_str_equal(e->guest_path, guest_path))
            return e;
    }
    return NULL;
}

static const CarrelArchiveEntry *
find_entry(CarrelArchiveSink *sink, const char *guest_path)
{
    const CarrelArchiveEntry *e = lookup_entry(sink, guest_path);

    if (!e) {
        fail_msg("no entry '%s'", guest_path);
        abort();
    }
    return e;
}

static char *
read_under(const char *dir, const char *rel)
{
    g_autofree char *path = g_build_filename(dir, rel, NULL);
    char *contents = NULL;

    if (!g_file_get_contents(path, &contents, NULL, NULL))
        return NULL;
    return contents;
}

static gboolean
exists_under(const char *dir, const char *rel)
{
    g_autofree char *path = g_build_filename(dir, rel, NULL);
    struct stat st;

    return lstat(path, &st) == 0;
}

/* Counts entries under a directory, failing the test on any symlink, device or FIFO. */
static guint
count_tree(const char *path)
{
    g_autoptr(GDir) dir = g_dir_open(path, 0, NULL);
    const char *name;
    guint n = 0;

    assert_non_null(dir);
    while ((name = g_dir_read_name(dir))) {
        g_autofree char *child = g_build_filename(path, name, NULL);
        struct stat st;

        assert_int_equal(lstat(child, &st), 0);
        assert_true(S_ISREG(st.st_mode) || S_ISDIR(st.st_mode));
        assert_int_equal(st.st_mode & 07000, 0);
        n += 1 + (S_ISDIR(st.st_mode) ? count_tree(child) : 0);
    }
    return n;
}

static void
assert_name_ok(const char *prefix, const char *member, const char *expected)
{
    g_autoptr(GError) error = NULL;
    g_autofree char *got = carrel_archive_guest_path(prefix, member, &error);

    assert_null(error);
    assert_string_equal(got, expected);
}

static void
assert_name_refused(const char *prefix, const char *member)
{
    g_autoptr(GError) error = NULL;
    g_autofree char *got = carrel_archive_guest_path(prefix, member, &error);

    assert_null(got);
    assert_true(g_error_matches(error, CARREL_ERROR, CARREL_ERROR_INVALID_ARG));
    /* The message is clean text whatever the name held. */
    assert_true(carrel_util_is_clean_text(error->message));
}

static void
test_guest_path(void **state)
{
    g_autofree char *segment255 = g_strnfill(255, 'a');
    g_autofree char *segment256 = g_strnfill(256, 'a');
    g_autofree char *long_path = NULL;
    g_autofree char *expected = g_strconcat("/p/", segment255, NULL);
    GString *deep = g_string_new(NULL);

    assert_name_ok("/home/user/out", "./a/b", "/home/user/out/a/b");
    assert_name_ok("/home/user/out", "a//b/./c/", "/home/user/out/a/b/c");
    assert_name_ok("/home/user/out", ".", "/home/user/out");
    assert_name_ok("/", "/etc/passwd", "/etc/passwd");
    assert_name_ok("/", "./", "/");
    assert_name_ok("//x//", "y", "/x/y");
    assert_name_ok("/x", "caf\xc3\xa9", "/x/caf\xc3\xa9");
    assert_name_ok("/p", segment255, expected);
    assert_name_ok("/x", "..a/b..", "/x/..a/b..");
    assert_name_refused("/x", "../../etc/x");
    assert_name_refused("/x", "a/../b");
    assert_name_refused("/x", "..");
    assert_name_refused("/x", "");
    assert_name_refused("/x", NULL);
    assert_name_refused("/x", "a\nb");
    assert_name_refused("/x", "a\x7f");
    assert_name_refused("/x", "a\x1b[31m");
    assert_name_refused("/x", "\xff\xfe.txt");
    assert_name_refused("/x", "\xc0\xaf"); /* overlong "/" */
    assert_name_refused("/x", segment256);
    assert_name_refused("relative", "a");
    assert_name_refused("/x/../y", "a");
    assert_name_refused(NULL, "a");
    while (deep->len <= 4096)
        g_string_append(deep, "abcdefgh/");
    long_path = g_string_free(deep, FALSE);
    assert_name_refused("/x", long_path);
    /* Under 4096 as given, over 4096 once joined to the prefix. */
    long_path[4090] = '\0';
    assert_name_refused("/a-rather-long-prefix", long_path);
}

/* The sanitizer's promise on any input: an error, or a clean absolute path under the prefix. */
static void
check_sanitized(const char *prefix, const char *member)
{
    g_autoptr(GError) error = NULL;
    g_autofree char *got = carrel_archive_guest_path(prefix, member, &error);
    g_auto(GStrv) segments = NULL;

    if (!got) {
        assert_non_null(error);
        assert_true(carrel_util_is_clean_text(error->message));
        return;
    }
    assert_null(error);
    assert_true(g_str_has_prefix(got, prefix));
    assert_true(got[0] == '/');
    assert_true(strlen(got) <= CARREL_LIMIT_GUEST_PATH);
    assert_true(carrel_util_is_clean_text(got));
    assert_true(g_str_equal(got, prefix) || g_str_equal(prefix, "/") || got[strlen(prefix)] == '/');
    if (g_str_equal(got, "/"))
        return;
    segments = g_strsplit(got + 1, "/", -1);
    for (guint i = 0; segments[i]; i++) {
        assert_true(*segments[i]);
        assert_string_not_equal(segments[i], ".");
        assert_string_not_equal(segments[i], "..");
        assert_true(strlen(segments[i]) <= 255);
    }
}

static void
test_guest_path_property(void **state)
{
    static const char *const pieces[] = {"..",          ".",    "",     "a",    "b c",
                                         "caf\xc3\xa9", "\x01", "\x7f", "\xff", "\xe2\x82",
                                         "/",           "//",   "x\ny", "...",  ".a"};
    static const char *const prefixes[] = {"/", "/home/user/out", "/x"};
    const char *env_seed = g_getenv("CARREL_TEST_SEED"); /* to replay a failure */
    guint32 seed = env_seed ? (guint32)g_ascii_strtoull(env_seed, NULL, 10) : g_random_int();
    g_autoptr(GRand) rand = g_rand_new_with_seed(seed);

    print_message("seed %u (CARREL_TEST_SEED)\n", seed);
    for (guint i = 0; i < 20000; i++) {
        const char *prefix = prefixes[g_rand_int_range(rand, 0, G_N_ELEMENTS(prefixes))];
        g_autoptr(GString) member = g_string_new(NULL);
        guint n = g_rand_int_range(rand, 0, 12);

        if (i % 2) {
            /* Random bytes, NUL excluded (names are C strings). */
            for (guint j = 0; j < n * 3; j++)
                g_string_append_c(member, (char)g_rand_int_range(rand, 1, 256));
        } else {
            for (guint j = 0; j < n; j++) {
                if (j || g_rand_boolean(rand))
                    g_string_append_c(member, '/');
                g_string_append(member, pieces[g_rand_int_range(rand, 0, G_N_ELEMENTS(pieces))]);
            }
        }
        check_sanitized(prefix, member->str);
    }
}

static void
test_sink_files_and_dirs(void **state)
{
    Fixture *f = *state;
    const Member members[] = {
        {"./", AE_IFDIR, 0755},
        {"./docs/", AE_IFDIR, 0750},
        {"./docs/a.txt", AE_IFREG, 0640, "alpha"},
        {"./docs/deep/er/b.sh", AE_IFREG, 04755, "#!/bin/sh\n"},
        {"./empty", AE_IFREG, 0600, NULL},
        {"./caf\xc3\xa9 \xe2\x82\xac.txt", AE_IFREG, 0644, "utf8"},
    };
    g_autofree char *tar = build_tar(f, "t.tar", members, G_N_ELEMENTS(members));
    g_autoptr(GError) error = NULL;
    g_autoptr(CarrelArchiveSink) sink = carrel_archive_sink_new(f->dir, NULL, &error);
    g_autofree char *a = NULL;
    g_autofree char *a_path = g_build_filename(f->dir, "home/user/out/docs/a.txt", NULL);
    g_autofree char *b_path = g_build_filename(f->dir, "home/user/out/docs/deep/er/b.sh", NULL);
    g_autofree char *sha = carrel_util_sha256_string("alpha");
    const CarrelArchiveEntry *e;
    struct stat st;

    assert_non_null(sink);
    assert_true(carrel_archive_sink_add_tar(sink, tar, "/home/user/out", &error));
    assert_null(error);
    assert_int_equal(carrel_archive_sink_entries(sink)->len, 6);
    assert_int_equal(carrel_archive_sink_bytes(sink), 19);
    /* UTF-8 names arrive as they were, whatever the locale. */
    assert_true(exists_under(f->dir, "home/user/out/caf\xc3\xa9 \xe2\x82\xac.txt"));
    a = read_under(f->dir, "home/user/out/docs/a.txt");
    assert_string_equal(a, "alpha");
    e = find_entry(sink, "/home/user/out/docs/a.txt");
    assert_non_null(e);
    assert_int_equal(e->type, CARREL_ARCHIVE_TYPE_FILE);
    assert_string_equal(e->path, "home/user/out/docs/a.txt");
    assert_string_equal(e->sha256, sha);
    assert_int_equal(e->size, 5);
    assert_int_equal(e->mode, 0640);
    assert_int_equal(e->uid, 1000);
    assert_int_equal(e->gid, 1001);
    assert_int_equal(e->mtime, 1700000000);
    assert_null(e->skipped);
    assert_int_equal(stat(a_path, &st), 0);
    assert_int_equal(st.st_mode & 07777, 0640);
    assert_int_equal(st.st_mtime, 1700000000);
    /* setuid is recorded, never set on the host. */
    e = find_entry(sink, "/home/user/out/docs/deep/er/b.sh");
    assert_int_equal(e->mode, 04755);
    assert_int_equal(stat(b_path, &st), 0);
    assert_int_equal(st.st_mode & 07777, 0755);
    e = find_entry(sink, "/home/user/out/docs");
    assert_int_equal(e->type, CARREL_ARCHIVE_TYPE_DIR);
    assert_string_equal(e->path, "home/user/out/docs");
    assert_int_equal(e->mode, 0750);
    e = find_entry(sink, "/home/user/out/empty");
    assert_int_equal(e->size, 0);
    assert_string_equal(e->sha256,
                        "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
    assert_string_equal(carrel_archive_type_to_string(CARREL_ARCHIVE_TYPE_HARDLINK), "hardlink");
    assert_int_equal(carrel_archive_type_from_string("dir"), CARREL_ARCHIVE_TYPE_DIR);
    assert_int_equal(carrel_archive_type_from_string("nope"), CARREL_ARCHIVE_TYPE_LAST);
}

static void
assert_skipped(CarrelArchiveSink *sink, const char *guest_path, const char *reason_part)
{
    const CarrelArchiveEntry *e = find_entry(sink, guest_path);

    assert_null(e->path);
    assert_non_null(e->skipped);
    if (!strstr(e->skipped, reason_part))
        fail_msg("'%s': reason '%s' lacks '%s'", guest_path, e->skipped, reason_part);
}

static void
test_sink_hostile(void **state)
{
    Fixture *f = *state;
    g_autofree char *long_segment = g_strnfill(300, 'n');
    g_autofree char *long_member = g_strconcat("d/", long_segment, NULL);
    g_autofree char *long_guest = g_strconcat("/d/", long_segment, NULL);
    const Member members[] = {
        {"../../etc/x", AE_IFREG, 0644, "escape"},
        {"/etc/passwd", AE_IFREG, 0644, "root:x:0:0"},
        {"link", AE_IFLNK, 0777, NULL, "/etc/shadow"},
        {"up", AE_IFLNK, 0777, NULL, "../../.."},
        {"sentinel-link", AE_IFLNK, 0777, NULL, f->sentinel},
        {"link/evil", AE_IFREG, 0644, "through link"},
        {"up/evil", AE_IFREG, 0644, "through up"},
        {"sentinel-link/evil", AE_IFREG, 0644, "through sentinel"},
        {"hl", AE_IFREG, 0644, NULL, NULL, "etc/passwd"},
        {"fifo", AE_IFIFO, 0644},
        {"null", AE_IFCHR, 0666},
        {"a\nb\x1b[2J", AE_IFREG, 0644, "ctl"},
        {"bad\xff\xfe.txt", AE_IFREG, 0644, "utf8"},
        {long_member, AE_IFREG, 0644, "long"},
        {"dup.txt", AE_IFREG, 0644, "first"},
        {"dup.txt", AE_IFREG, 0644, "second"},
        {"plain", AE_IFREG, 0644, "file"},
        {"plain/below", AE_IFREG, 0644, "below a file"},
        {"fifo/below", AE_IFREG, 0644, "below a fifo"},
        {"after", AE_IFREG, 0644, "still here"},
    };
    g_autofree char *tar = build_tar(f, "evil.tar", members, G_N_ELEMENTS(members));
    g_autoptr(GError) error = NULL;
    g_autoptr(CarrelArchiveSink) sink = carrel_archive_sink_new(f->dir, NULL, &error);
    g_autofree char *passwd = NULL;
    g_autofree char *dup = NULL;
    g_autofree char *after = NULL;
    const CarrelArchiveEntry *e;

    assert_true(carrel_archive_sink_add_tar(sink, tar, "/", &error));
    assert_null(error);
    /* Every member is in the manifest, none lost. */
    assert_int_equal(carrel_archive_sink_entries(sink)->len, G_N_ELEMENTS(members));
    passwd = read_under(f->dir, "etc/passwd");
    assert_string_equal(passwd, "root:x:0:0");
    assert_skipped(sink, "../../etc/x", "'..'");
    assert_false(exists_under(f->root, "etc"));
    e = find_entry(sink, "/link");
    assert_int_equal(e->type, CARREL_ARCHIVE_TYPE_SYMLINK);
    assert_string_equal(e->link_target, "/etc/shadow");
    assert_null(e->path);
    assert_null(e->skipped);
    assert_string_equal(find_entry(sink, "/up")->link_target, "../../..");
    assert_skipped(sink, "/link/evil", "parent '/link' is a symlink");
    assert_skipped(sink, "/up/evil", "symlink");
    assert_skipped(sink, "/sentinel-link/evil", "symlink");
    e = find_entry(sink, "/hl");
    assert_int_equal(e->type, CARREL_ARCHIVE_TYPE_HARDLINK);
    assert_string_equal(e->link_target, "/etc/passwd");
    assert_null(e->path);
    assert_skipped(sink, "/fifo", "fifo");
    assert_int_equal(find_entry(sink, "/fifo")->type, CARREL_ARCHIVE_TYPE_OTHER);
    assert_skipped(sink, "/null", "device");
    assert_skipped(sink, "a\\x0ab\\x1b[2J", "control character");
    assert_skipped(sink, "bad\\xff\\xfe.txt", "UTF-8");
    assert_skipped(sink, long_member, "255");
    assert_null(lookup_entry(sink, long_guest));
    dup = read_under(f->dir, "dup.txt");
    assert_string_equal(dup, "first");
    assert_skipped(sink, "/dup.txt", "duplicate");
    assert_int_equal(carrel_archive_sink_entries(sink)->len, G_N_ELEMENTS(members));
    assert_skipped(sink, "/plain/below", "parent '/plain' is a file");
    assert_skipped(sink, "/fifo/below", "parent '/fifo' is a other");
    after = read_under(f->dir, "after");
    assert_string_equal(after, "still here");
    /* DIR holds only: etc, etc/passwd, dup.txt, plain, after; no symlink, fifo or device. */
    assert_int_equal(count_tree(f->dir), 5);
    assert_int_equal(count_tree(f->sentinel), 0);
    assert_int_equal(count_tree(f->root), 5 + 2 + 1); /* dir, sentinel, evil.tar */
}

/* A symlink already in DIR (not made by carrel) does not redirect a write either. */
static void
test_sink_planted_symlink(void **state)
{
    Fixture *f = *state;
    const Member members[] = {{"a/x", AE_IFREG, 0644, "x"}, {"b/y", AE_IFREG, 0644, "y"}};
    g_autofree char *tar = build_tar(f, "t.tar", members, G_N_ELEMENTS(members));
    g_autofree char *planted = g_build_filename(f->dir, "a", NULL);
    g_autofree char *planted_file = g_build_filename(f->dir, "b", NULL);
    g_autoptr(GError) error = NULL;
    g_autoptr(CarrelArchiveSink) sink = NULL;

    assert_int_equal(symlink(f->sentinel, planted), 0);
    assert_true(g_file_set_contents(planted_file, "", 0, NULL));
    sink = carrel_archive_sink_new(f->dir, NULL, &error);
    assert_true(carrel_archive_sink_add_tar(sink, tar, "/", &error));
    assert_skipped(sink, "/a/x", "'a' exists and is not a directory");
    assert_skipped(sink, "/b/y", "'b' exists and is not a directory");
    assert_int_equal(count_tree(f->sentinel), 0);
    /* DIR itself must not be a symlink. */
    g_clear_pointer(&sink, carrel_archive_sink_free);
    assert_null(carrel_archive_sink_new(planted, NULL, &error));
    assert_non_null(error);
}

static void
test_sink_byte_limit(void **state)
{
    Fixture *f = *state;
    g_autofree char *sixty = g_strnfill(60, 'x');
    const Member members[] = {
        {"one", AE_IFREG, 0644, sixty},
        {"two", AE_IFREG, 0644, sixty},
    };
    g_autofree char *tar = build_tar(f, "t.tar", members, G_N_ELEMENTS(members));
    CarrelArchiveLimits limits = {100, 0};
    g_autoptr(GError) error = NULL;
    g_autoptr(CarrelArchiveSink) sink = carrel_archive_sink_new(f->dir, &limits, &error);

    assert_false(carrel_archive_sink_add_tar(sink, tar, "/", &error));
    assert_true(g_error_matches(error, CARREL_ERROR, CARREL_ERROR_LIMIT));
    assert_non_null(strstr(error->message, "limit of 100 bytes"));
    assert_non_null(strstr(error->message, "'two'"));
    /* What was written stays; the refused file is not there, not even in part. */
    assert_true(exists_under(f->dir, "one"));
    assert_false(exists_under(f->dir, "two"));
    assert_int_equal(carrel_archive_sink_entries(sink)->len, 1);
    assert_int_equal(carrel_archive_sink_bytes(sink), 60);
}

/* The bytes actually read count too: a host file that is bigger than its stat said, or plainly
 * too big, is refused and removed. */
static void
test_sink_byte_limit_add_file(void **state)
{
    Fixture *f = *state;
    g_autofree char *src = fixture_path(f, "src");
    g_autofree char *big = g_strnfill(150, 'b');
    CarrelArchiveLimits limits = {100, 0};
    g_autoptr(GError) error = NULL;
    g_autoptr(CarrelArchiveSink) sink = carrel_archive_sink_new(f->dir, &limits, &error);

    assert_true(g_file_set_contents(src, big, -1, NULL));
    assert_false(carrel_archive_sink_add_file(sink, "/big", src, 0644, 0, 0, 0, &error));
    assert_true(g_error_matches(error, CARREL_ERROR, CARREL_ERROR_LIMIT));
    assert_false(exists_under(f->dir, "big"));
    assert_int_equal(carrel_archive_sink_bytes(sink), 0);
}

static void
test_sink_entry_limit(void **state)
{
    Fixture *f = *state;
    const Member members[] = {
        {"a", AE_IFREG, 0644, "1"}, {"../b", AE_IFREG, 0644, "2"}, {"c", AE_IFLNK, 0777, NULL, "a"},
        {"d", AE_IFREG, 0644, "4"}, {"e", AE_IFREG, 0644, "5"},
    };
    g_autofree char *tar = build_tar(f, "t.tar", members, G_N_ELEMENTS(members));
    CarrelArchiveLimits limits = {0, 3};
    g_autoptr(GError) error = NULL;
    g_autoptr(CarrelArchiveSink) sink = carrel_archive_sink_new(f->dir, &limits, &error);

    assert_false(carrel_archive_sink_add_tar(sink, tar, "/", &error));
    assert_true(g_error_matches(error, CARREL_ERROR, CARREL_ERROR_LIMIT));
    assert_non_null(strstr(error->message, "limit of 3 entries"));
    assert_int_equal(carrel_archive_sink_entries(sink)->len, 3);
    assert_false(exists_under(f->dir, "d"));
    g_clear_error(&error);
    assert_false(carrel_archive_sink_add_record(sink, "/z", CARREL_ARCHIVE_TYPE_DIR, NULL, 0755, 0,
                                                0, 0, &error));
    assert_true(g_error_matches(error, CARREL_ERROR, CARREL_ERROR_LIMIT));
}

static void
test_sink_broken_input(void **state)
{
    Fixture *f = *state;
    g_autofree char *big = g_strnfill(200000, 'z');
    const Member members[] = {{"ok", AE_IFREG, 0644, "fine"}, {"big", AE_IFREG, 0644, big}};
    g_autofree char *tar = build_tar(f, "t.tar", members, G_N_ELEMENTS(members));
    g_autofree char *garbage = fixture_path(f, "garbage.tar");
    g_autofree char *missing = fixture_path(f, "missing.tar");
    g_autoptr(GError) error = NULL;
    g_autoptr(CarrelArchiveSink) sink = carrel_archive_sink_new(f->dir, NULL, &error);
    g_autofree char *contents = NULL;
    gsize len = 0;

    assert_true(g_file_get_contents(tar, &contents, &len, NULL));
    assert_true(g_file_set_contents(tar, contents, 100000, NULL)); /* cut inside "big" */
    assert_false(carrel_archive_sink_add_tar(sink, tar, "/", &error));
    assert_true(g_error_matches(error, CARREL_ERROR, CARREL_ERROR_FAILED));
    assert_true(carrel_util_is_clean_text(error->message));
    /* The tar is the daemon's file: the caller decides whether its clients see the path. */
    assert_null(strstr(error->message, tar));
    assert_true(exists_under(f->dir, "ok"));
    assert_false(exists_under(f->dir, "big"));
    assert_int_equal(carrel_archive_sink_entries(sink)->len, 1);
    g_clear_error(&error);

    assert_true(g_file_set_contents(garbage, "\x01\x02not a tar at all\xff", -1, NULL));
    assert_false(carrel_archive_sink_add_tar(sink, garbage, "/", &error));
    assert_non_null(error);
    g_clear_error(&error);
    assert_false(carrel_archive_sink_add_tar(sink, missing, "/", &error));
    assert_non_null(error);
    g_clear_error(&error);
    assert_false(carrel_archive_sink_add_tar(sink, tar, "relative/prefix", &error));
    assert_int_equal(carrel_archive_sink_entries(sink)->len, 1);
}

/* GNU long names and the pax form carry the same hostile names: both are handled. */
static void
test_sink_gnutar_format(void **state)
{
    Fixture *f = *state;
    g_autofree char *deep = g_strnfill(200, 'd');
    g_autofree char *name = g_strconcat(deep, "/", deep, "/f", NULL);
    g_autofree char *rel = g_strconcat("out/", name, NULL);
    const Member members[] = {{name, AE_IFREG, 0644, "long"}, {"../x", AE_IFREG, 0644, "no"}};
    g_autofree char *tar =
        build_tar_format(f, "g.tar", members, G_N_ELEMENTS(members), ARCHIVE_FORMAT_TAR_GNUTAR);
    g_autoptr(GError) error = NULL;
    g_autoptr(CarrelArchiveSink) sink = carrel_archive_sink_new(f->dir, NULL, &error);
    g_autofree char *got = NULL;

    assert_true(carrel_archive_sink_add_tar(sink, tar, "/out", &error));
    got = read_under(f->dir, rel);
    assert_string_equal(got, "long");
    assert_skipped(sink, "../x", "'..'");
}

static void
test_sink_add_file_and_record(void **state)
{
    Fixture *f = *state;
    g_autofree char *src = fixture_path(f, "src");
    g_autofree char *link = fixture_path(f, "src-link");
    g_autofree char *sha = carrel_util_sha256_string("downloaded");
    g_autoptr(GError) error = NULL;
    g_autoptr(CarrelArchiveSink) sink = carrel_archive_sink_new(f->dir, NULL, &error);
    g_autofree char *got = NULL;
    const CarrelArchiveEntry *e;

    assert_true(g_file_set_contents(src, "downloaded", -1, NULL));
    assert_int_equal(symlink(src, link), 0);
    assert_true(carrel_archive_sink_add_file(sink, "/var/log/app.log", src, 0644, 5, 6, 7, &error));
    got = read_under(f->dir, "var/log/app.log");
    assert_string_equal(got, "downloaded");
    e = find_entry(sink, "/var/log/app.log");
    assert_string_equal(e->sha256, sha);
    assert_int_equal(e->uid, 5);
    /* The source must be a regular file, not a symlink to one. */
    assert_false(carrel_archive_sink_add_file(sink, "/x", link, 0644, 0, 0, 0, &error));
    assert_true(g_error_matches(error, CARREL_ERROR, CARREL_ERROR_INVALID_ARG));
    g_clear_error(&error);
    assert_true(carrel_archive_sink_add_file(sink, "/var/log/app.log", src, 0644, 0, 0, 0, &error));
    assert_skipped(sink, "/var/log/app.log", "duplicate");
    assert_true(carrel_archive_sink_add_record(sink, "/var/run/l", CARREL_ARCHIVE_TYPE_SYMLINK,
                                               "../x\n", 0777, 0, 0, 0, &error));
    e = find_entry(sink, "/var/run/l");
    assert_string_equal(e->link_target, "../x\\x0a");
    assert_false(exists_under(f->dir, "var/run/l"));
    assert_true(carrel_archive_sink_add_record(sink, "/srv/data", CARREL_ARCHIVE_TYPE_DIR, NULL,
                                               0755, 0, 0, 0, &error));
    assert_true(exists_under(f->dir, "srv/data"));
    assert_true(carrel_archive_sink_add_record(sink, "/x/../y", CARREL_ARCHIVE_TYPE_OTHER, NULL, 0,
                                               0, 0, 0, &error));
    assert_skipped(sink, "/x/../y", "'..'");
    assert_false(carrel_archive_sink_add_record(sink, "/f", CARREL_ARCHIVE_TYPE_FILE, NULL, 0, 0, 0,
                                                0, &error));
    assert_true(g_error_matches(error, CARREL_ERROR, CARREL_ERROR_INVALID_ARG));
}

/* Reads a tar with libarchive alone: "name type mode uid gid [uname:gname] target|" per member. */
static char *
describe_tar(const char *path)
{
    struct archive *a = archive_read_new();
    struct archive_entry *ae;
    GString *out = g_string_new(NULL);

    archive_read_support_format_tar(a);
    assert_int_equal(archive_read_open_filename(a, path, 10240), ARCHIVE_OK);
    while (archive_read_next_header(a, &ae) == ARCHIVE_OK) {
        const char *uname = archive_entry_uname(ae);
        const char *gname = archive_entry_gname(ae);
        const char *target = archive_entry_symlink(ae);

        g_string_append_printf(out, "%s %o %o %ld %ld [%s:%s] %s|", archive_entry_pathname(ae),
                               archive_entry_filetype(ae) >> 12, archive_entry_perm(ae),
                               (long)archive_entry_uid(ae), (long)archive_entry_gid(ae),
                               uname ? uname : "", gname ? gname : "", target ? target : "-");
    }
    archive_read_free(a);
    return g_string_free(out, FALSE);
}

/* A local tree: tree/ (0755) with f1 (0750), sub/f2, link -> f1, abs -> /etc/passwd. */
static char *
make_local_tree(Fixture *f)
{
    char *tree = fixture_path(f, "tree");
    g_autofree char *sub = g_build_filename(tree, "sub", NULL);
    g_autofree char *f1 = g_build_filename(tree, "f1", NULL);
    g_autofree char *f2 = g_build_filename(sub, "f2", NULL);
    g_autofree char *link = g_build_filename(tree, "link", NULL);
    g_autofree char *abs = g_build_filename(tree, "abs", NULL);

    assert_int_equal(g_mkdir(tree, 0755), 0);
    assert_int_equal(g_mkdir(sub, 0700), 0);
    assert_true(g_file_set_contents(f1, "one", -1, NULL));
    assert_int_equal(chmod(f1, 04750), 0);
    assert_true(g_file_set_contents(f2, "two", -1, NULL));
    assert_int_equal(symlink("f1", link), 0);
    assert_int_equal(symlink("/etc/passwd", abs), 0);
    return tree;
}

static void
test_writer_round_trip(void **state)
{
    Fixture *f = *state;
    g_autofree char *tree = make_local_tree(f);
    g_autofree char *out = fixture_path(f, "inputs.tar");
    const Member upload[] = {
        {"./", AE_IFDIR, 0777},
        {"./u/", AE_IFDIR, 0700},
        {"./u/data.csv", AE_IFREG, 06755, "1,2,3"},
        {"./u/alias", AE_IFLNK, 0777, NULL, "data.csv"},
    };
    g_autofree char *upload_tar = build_tar(f, "upload.tar", upload, G_N_ELEMENTS(upload));
    g_autoptr(GError) error = NULL;
    g_autoptr(CarrelArchiveWriter) w = carrel_archive_writer_new(out, NULL, &error);
    g_autoptr(CarrelArchiveSink) sink = NULL;
    g_autofree char *listing = NULL;
    g_autofree char *got = NULL;

    assert_non_null(w);
    assert_true(carrel_archive_writer_add_local(w, tree, "/home/user/in", 1000, 1000, &error));
    assert_true(carrel_archive_writer_add_bytes(w, "/home/user/in/extra.txt", (const guint8 *)"xyz",
                                                3, 0640, 1000, 1000, &error));
    assert_true(carrel_archive_writer_add_tar(w, upload_tar, "/srv/up", 2000, 2001, &error));
    assert_null(error);
    assert_true(carrel_archive_writer_finish(w, &error));

    /* Sorted tree walk; owners forced; permission bits only; no uname/gname; symlinks kept. */
    listing = describe_tar(out);
    assert_string_equal(listing, "home/user/in/ 4 755 1000 1000 [:] -|"
                                 "home/user/in/abs 12 777 1000 1000 [:] /etc/passwd|"
                                 "home/user/in/f1 10 750 1000 1000 [:] -|"
                                 "home/user/in/link 12 777 1000 1000 [:] f1|"
                                 "home/user/in/sub/ 4 700 1000 1000 [:] -|"
                                 "home/user/in/sub/f2 10 644 1000 1000 [:] -|"
                                 "home/user/in/extra.txt 10 640 1000 1000 [:] -|"
                                 "srv/up/u/ 4 700 2000 2001 [:] -|"
                                 "srv/up/u/data.csv 10 755 2000 2001 [:] -|"
                                 "srv/up/u/alias 12 777 2000 2001 [:] data.csv|");

    /* And back through the sink. */
    sink = carrel_archive_sink_new(f->dir, NULL, &error);
    assert_true(carrel_archive_sink_add_tar(sink, out, "/", &error));
    got = read_under(f->dir, "home/user/in/sub/f2");
    assert_string_equal(got, "two");
    g_free(got);
    got = read_under(f->dir, "srv/up/u/data.csv");
    assert_string_equal(got, "1,2,3");
    assert_string_equal(find_entry(sink, "/home/user/in/link")->link_target, "f1");
    assert_int_equal(find_entry(sink, "/srv/up/u/data.csv")->uid, 2000);
}

/* GNU tar, which extracts inputs in the guest, reads the writer's output with numeric owners. */
static void
test_writer_gnu_tar_reads_it(void **state)
{
    Fixture *f = *state;
    g_autofree char *out = fixture_path(f, "gnu.tar");
    g_autofree char *tar = g_find_program_in_path("tar");
    g_autoptr(GError) error = NULL;
    g_autoptr(CarrelArchiveWriter) w = carrel_archive_writer_new(out, NULL, &error);
    g_autofree char *listing = NULL;
    g_autofree char *extracted = g_build_filename(f->dir, "home/user/a.txt", NULL);
    struct stat st;

    if (!tar) {
        print_message("skipped: no GNU tar on PATH\n");
        return;
    }
    assert_true(carrel_archive_writer_add_bytes(w, "/home/user/a.txt", (const guint8 *)"a", 1, 0644,
                                                1234, 5678, &error));
    assert_true(carrel_archive_writer_finish(w, &error));
    {
        /* Without --numeric-owner: GNU tar shows numbers only when uname and gname are empty. */
        const char *argv[] = {tar, "-tvf", out, NULL};
        assert_true(carrel_util_run(argv, 30, &listing, NULL, &error));
    }
    assert_non_null(strstr(listing, "1234/5678"));
    assert_non_null(strstr(listing, " home/user/a.txt"));
    {
        const char *argv[] = {tar, "-xf", out, "-C", f->dir, NULL};
        assert_true(carrel_util_run(argv, 30, NULL, NULL, &error));
    }
    assert_int_equal(stat(extracted, &st), 0);
    assert_int_equal(st.st_mode & 07777, 0644);
    /* As root (the guest's case), GNU tar applies the numeric owner. */
    if (geteuid() == 0)
        assert_int_equal(st.st_uid, 1234);
}

static void
assert_upload_refused(Fixture *f, const Member *m, int code, const char *part)
{
    g_autofree char *out = fixture_path(f, "refused.tar");
    g_autofree char *tar = build_tar(f, "hostile.tar", m, 1);
    g_autoptr(GError) error = NULL;
    g_autoptr(CarrelArchiveWriter) w = carrel_archive_writer_new(out, NULL, &error);

    assert_false(carrel_archive_writer_add_tar(w, tar, "/in", 0, 0, &error));
    assert_true(g_error_matches(error, CARREL_ERROR, code));
    if (!strstr(error->message, part))
        fail_msg("'%s' lacks '%s'", error->message, part);
    /* The writer is not finished: freeing it removes the partial output. */
    g_clear_pointer(&w, carrel_archive_writer_free);
    assert_false(g_file_test(out, G_FILE_TEST_EXISTS));
}

static void
test_writer_hostile_upload(void **state)
{
    Fixture *f = *state;
    const Member dotdot = {"../../etc/cron.d/x", AE_IFREG, 0644, "evil"};
    const Member control = {"a\x1b]0;x\x07", AE_IFREG, 0644, "evil"};
    const Member abs_link = {"l", AE_IFLNK, 0777, NULL, "/etc/shadow"};
    const Member up_link = {"l", AE_IFLNK, 0777, NULL, "a/../../x"};
    const Member hard = {"h", AE_IFREG, 0644, NULL, NULL, "etc/passwd"};
    const Member fifo = {"p", AE_IFIFO, 0644};
    const Member dev = {"d", AE_IFCHR, 0644};

    assert_upload_refused(f, &dotdot, CARREL_ERROR_INVALID_ARG, "'..'");
    assert_upload_refused(f, &control, CARREL_ERROR_INVALID_ARG, "a\\x1b]0;x\\x07");
    assert_upload_refused(f, &abs_link, CARREL_ERROR_POLICY_DENIED, "relative");
    assert_upload_refused(f, &up_link, CARREL_ERROR_POLICY_DENIED, "'..'");
    assert_upload_refused(f, &hard, CARREL_ERROR_UNSUPPORTED, "hard link");
    assert_upload_refused(f, &fifo, CARREL_ERROR_UNSUPPORTED, "fifo");
    assert_upload_refused(f, &dev, CARREL_ERROR_UNSUPPORTED, "device");
}

static void
test_writer_refusals(void **state)
{
    Fixture *f = *state;
    g_autofree char *out = fixture_path(f, "w.tar");
    g_autofree char *fifo = fixture_path(f, "fifo");
    g_autofree char *tree = make_local_tree(f);
    CarrelArchiveLimits limits = {10, 5};
    g_autoptr(GError) error = NULL;
    g_autoptr(CarrelArchiveWriter) w = carrel_archive_writer_new(out, &limits, &error);
    const guint8 data[] = "0123456789abc";

    assert_int_equal(mkfifo(fifo, 0600), 0);
    assert_false(carrel_archive_writer_add_local(w, fifo, "/in/fifo", 0, 0, &error));
    assert_true(g_error_matches(error, CARREL_ERROR, CARREL_ERROR_UNSUPPORTED));
    g_clear_error(&error);
    assert_true(carrel_archive_writer_add_bytes(w, "/in/a", data, 4, 0644, 0, 0, &error));
    assert_false(carrel_archive_writer_add_bytes(w, "/in/a", data, 4, 0644, 0, 0, &error));
    assert_true(g_error_matches(error, CARREL_ERROR, CARREL_ERROR_EXISTS));
    g_clear_error(&error);
    assert_false(carrel_archive_writer_add_bytes(w, "/in/a/b", data, 1, 0644, 0, 0, &error));
    assert_true(g_error_matches(error, CARREL_ERROR, CARREL_ERROR_INVALID_ARG));
    g_clear_error(&error);
    /* "/in" was implied by "/in/a": a file there would clash in GNU tar; a directory is fine. */
    assert_false(carrel_archive_writer_add_bytes(w, "/in", data, 1, 0644, 0, 0, &error));
    assert_true(g_error_matches(error, CARREL_ERROR, CARREL_ERROR_EXISTS));
    g_clear_error(&error);
    assert_false(carrel_archive_writer_add_bytes(w, "/in/../x", data, 1, 0644, 0, 0, &error));
    assert_true(g_error_matches(error, CARREL_ERROR, CARREL_ERROR_INVALID_ARG));
    g_clear_error(&error);
    assert_false(carrel_archive_writer_add_bytes(w, "/in/n", data, 1, 0644, -1, 0, &error));
    assert_true(g_error_matches(error, CARREL_ERROR, CARREL_ERROR_INVALID_ARG));
    g_clear_error(&error);
    assert_false(carrel_archive_writer_add_bytes(w, "/in/big", data, 7, 0644, 0, 0, &error));
    assert_true(g_error_matches(error, CARREL_ERROR, CARREL_ERROR_LIMIT));
    assert_non_null(strstr(error->message, "limit of 10 bytes"));
    g_clear_error(&error);
    /* The tree has 6 entries: over the limit of 5 once "/in/a" is there. */
    assert_false(carrel_archive_writer_add_local(w, tree, "/t", 0, 0, &error));
    assert_true(g_error_matches(error, CARREL_ERROR, CARREL_ERROR_LIMIT));
    assert_non_null(strstr(error->message, "limit of 5 entries"));
    g_clear_error(&error);
    assert_true(carrel_archive_writer_finish(w, &error));
    assert_false(carrel_archive_writer_add_bytes(w, "/in/c", data, 1, 0644, 0, 0, &error));
    assert_true(g_error_matches(error, CARREL_ERROR, CARREL_ERROR_WRONG_STATE));
    g_clear_pointer(&w, carrel_archive_writer_free);
    assert_true(g_file_test(out, G_FILE_TEST_EXISTS));
}

/*
 * (e) The decision made before a file leaves a guest's disk: sizes as the guest states them (a
 * sparse file counts whole) against what the limits leave; a refusal names the file and its size.
 */
static void
test_admit(void **state)
{
    const CarrelArchiveLimits limits = {1000, 10};
    static const struct {
        guint64 used_bytes;
        guint used_entries;
        guint64 size;
        guint entries;
        gboolean ok;
    } cases[] = {
        {0, 0, 1000, 1, TRUE},   /* exactly the limit */
        {0, 0, 1001, 1, FALSE},  /* one byte over */
        {600, 1, 400, 1, TRUE},  /* what is left, exactly */
        {600, 1, 401, 1, FALSE}, /* one byte over what is left */
        {1200, 1, 1, 1, FALSE},  /* over already: not one byte more */
        {1000, 1, 0, 1, TRUE},   /* an empty file needs no bytes */
        {0, 9, 10, 1, TRUE},     /* the last entry */
        {0, 10, 10, 1, FALSE},   /* one entry over */
        {0, 0, G_MAXUINT64, 1, FALSE},
    };

    for (guint i = 0; i < G_N_ELEMENTS(cases); i++) {
        g_autoptr(GError) error = NULL;
        gboolean ok = carrel_archive_admit(&limits, cases[i].used_bytes, cases[i].used_entries,
                                           "/home/user/big file.iso", cases[i].size,
                                           cases[i].entries, &error);
        if (ok != cases[i].ok)
            fail_msg("case %u: admit gave %d", i, ok);
        if (ok)
            continue;
        assert_true(g_error_matches(error, CARREL_ERROR, CARREL_ERROR_LIMIT));
        assert_non_null(strstr(error->message, "'/home/user/big file.iso'"));
        assert_non_null(strstr(error->message, "nothing of it was copied"));
    }
    {
        g_autoptr(GError) error = NULL;
        assert_false(carrel_archive_admit(&limits, 0, 0, "/sparse", 5000000000, 1, &error));
        assert_non_null(strstr(error->message, "5000000000 bytes"));
    }
    {
        g_autoptr(GError) error = NULL;
        /* Hostile names are escaped in the message, as everywhere. */
        assert_false(carrel_archive_admit(NULL, 0, 0, "/a\nb", G_MAXUINT64, 1, &error));
        assert_null(strchr(error->message, '\n'));
    }
}

/* The sink's own count is what is left: after 60 bytes of 100, 40 more fit and 41 do not. */
static void
test_sink_admit(void **state)
{
    Fixture *f = *state;
    g_autofree char *src = g_build_filename(f->dir, "src", NULL);
    g_autofree char *out = g_build_filename(f->dir, "out", NULL);
    CarrelArchiveLimits limits = {100, 0};
    g_autoptr(GError) error = NULL;
    g_autoptr(CarrelArchiveSink) sink = NULL;
    g_autofree char *sixty = g_strnfill(60, 'x');

    assert_int_equal(g_mkdir(out, 0700), 0);
    assert_true(g_file_set_contents(src, sixty, -1, NULL));
    sink = carrel_archive_sink_new(out, &limits, &error);
    assert_non_null(sink);
    assert_true(carrel_archive_sink_add_file(sink, "/one", src, 0644, 0, 0, 0, &error));
    assert_true(carrel_archive_sink_admit(sink, "/two", 40, 1, &error));
    assert_false(carrel_archive_sink_admit(sink, "/two", 41, 1, &error));
    assert_non_null(strstr(error->message, "'/two' is 41 bytes"));
    assert_non_null(strstr(error->message, "40 bytes left"));
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_guest_path),
        cmocka_unit_test(test_guest_path_property),
        cmocka_unit_test_setup_teardown(test_sink_files_and_dirs, setup, teardown),
        cmocka_unit_test_setup_teardown(test_sink_hostile, setup, teardown),
        cmocka_unit_test_setup_teardown(test_sink_planted_symlink, setup, teardown),
        cmocka_unit_test_setup_teardown(test_sink_byte_limit, setup, teardown),
        cmocka_unit_test(test_admit),
        cmocka_unit_test_setup_teardown(test_sink_admit, setup, teardown),
        cmocka_unit_test_setup_teardown(test_sink_byte_limit_add_file, setup, teardown),
        cmocka_unit_test_setup_teardown(test_sink_entry_limit, setup, teardown),
        cmocka_unit_test_setup_teardown(test_sink_broken_input, setup, teardown),
        cmocka_unit_test_setup_teardown(test_sink_gnutar_format, setup, teardown),
        cmocka_unit_test_setup_teardown(test_sink_add_file_and_record, setup, teardown),
        cmocka_unit_test_setup_teardown(test_writer_round_trip, setup, teardown),
        cmocka_unit_test_setup_teardown(test_writer_gnu_tar_reads_it, setup, teardown),
        cmocka_unit_test_setup_teardown(test_writer_hostile_upload, setup, teardown),
        cmocka_unit_test_setup_teardown(test_writer_refusals, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
