#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>
#include <glib/gstdio.h>
#include <pwd.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "disk/disk.h"

#define MIB (1024 * 1024)

typedef struct {
    char *dir;
} Tmp;

static int
tmp_setup(void **state)
{
    Tmp *t = g_new0(Tmp, 1);

    t->dir = g_dir_make_tmp("carrel-disk-XXXXXX", NULL);
    assert_non_null(t->dir);
    *state = t;
    return 0;
}

static int
tmp_teardown(void **state)
{
    Tmp *t = *state;

    carrel_util_remove_tree(t->dir, NULL);
    g_free(t->dir);
    g_free(t);
    return 0;
}

static char *
tmp_path(void **state, const char *name)
{
    Tmp *t = *state;

    return g_build_filename(t->dir, name, NULL);
}

static void
run_ok(const char *const *argv)
{
    g_autoptr(GError) error = NULL;

    if (!carrel_util_run(argv, 120, NULL, NULL, &error))
        fail_msg("%s", error->message);
}

static void
need_qemu_img(void)
{
    g_autofree char *img = g_find_program_in_path("qemu-img");
    g_autofree char *io = g_find_program_in_path("qemu-io");

    if (!img || !io) {
        print_message("qemu-img or qemu-io is not installed (apt install qemu-utils)\n");
        skip();
    }
}

static void
make_image(const char *path, const char *format, const char *size)
{
    const char *argv[] = {"qemu-img", "create", "-q", "-f", format, path, size, NULL};

    run_ok(argv);
}

static void
write_pattern(const char *path, const char *format)
{
    const char *argv[] = {"qemu-io", "-f", format, "-c", "write -P 0xab 0 1M", path, NULL};

    run_ok(argv);
}

static void
assert_error(const GError *error, CarrelErrorCode code, const char *part)
{
    assert_non_null(error);
    if (error->domain != CARREL_ERROR || error->code != (int)code)
        fail_msg("wrong error %d: %s", error->code, error->message);
    if (part && !strstr(error->message, part))
        fail_msg("'%s' not in '%s'", part, error->message);
}

static CarrelDiskInfo *
parse(const char *json)
{
    return carrel_disk_info_parse(json, strlen(json), NULL);
}

/* ---- parsing (pure) ---- */

static void
test_parse_good(void **state)
{
    const char *json = "{\"backing-filename-format\": \"qcow2\", \"virtual-size\": 67108864,"
                       " \"filename\": \"o.qcow2\", \"cluster-size\": 65536, \"format\": \"qcow2\","
                       " \"actual-size\": 200704, \"encrypted\": true, \"format-specific\": "
                       "{\"type\": \"qcow2\", \"data\": {\"compat\": \"1.1\", \"corrupt\": true,"
                       " \"data-file\": \"/dev/sda\", \"extended-l2\": false}},"
                       " \"backing-filename\": \"/etc/shadow\", \"dirty-flag\": false,"
                       " \"future-member\": [1, {\"x\": null}]}";
    g_autoptr(CarrelDiskInfo) info = parse(json);
    g_autoptr(CarrelDiskInfo) minimal = parse("{\"format\": \"raw\", \"virtual-size\": 0}");

    assert_non_null(info);
    assert_string_equal(info->format, "qcow2");
    assert_int_equal(info->virtual_size, 67108864);
    assert_int_equal(info->actual_size, 200704);
    assert_string_equal(info->backing_filename, "/etc/shadow");
    assert_string_equal(info->backing_format, "qcow2");
    assert_string_equal(info->data_file, "/dev/sda");
    assert_true(info->corrupt);
    assert_true(info->encrypted);

    assert_non_null(minimal);
    assert_string_equal(minimal->format, "raw");
    assert_int_equal(minimal->virtual_size, 0);
    assert_null(minimal->backing_filename);
    assert_null(minimal->data_file);
    assert_false(minimal->corrupt);
}

static const char *const bad_json[] = {
    "",
    " ",
    "null",
    "[]",
    "\"qcow2\"",
    "42",
    "{",
    "{}",
    "{\"format\": \"qcow2\"}",
    "{\"virtual-size\": 1}",
    "{\"format\": 1, \"virtual-size\": 1}",
    "{\"format\": null, \"virtual-size\": 1}",
    "{\"format\": \"\", \"virtual-size\": 1}",
    "{\"format\": \"qc\\now2\", \"virtual-size\": 1}",
    "{\"format\": \"qcow2qcow2qcow2qcow2qcow2qcow2qcow2\", \"virtual-size\": 1}",
    "{\"format\": [\"qcow2\"], \"virtual-size\": 1}",
    "{\"format\": \"qcow2\", \"virtual-size\": -1}",
    "{\"format\": \"qcow2\", \"virtual-size\": 1.5}",
    "{\"format\": \"qcow2\", \"virtual-size\": 1e30}",
    "{\"format\": \"qcow2\", \"virtual-size\": \"1024\"}",
    "{\"format\": \"qcow2\", \"virtual-size\": true}",
    "{\"format\": \"qcow2\", \"virtual-size\": null}",
    "{\"format\": \"qcow2\", \"virtual-size\": 99999999999999999999999999}",
    "{\"format\": \"qcow2\", \"virtual-size\": 1, \"actual-size\": \"big\"}",
    "{\"format\": \"qcow2\", \"virtual-size\": 1, \"actual-size\": -5}",
    "{\"format\": \"qcow2\", \"virtual-size\": 1, \"backing-filename\": 5}",
    "{\"format\": \"qcow2\", \"virtual-size\": 1, \"backing-filename\": \"\"}",
    "{\"format\": \"qcow2\", \"virtual-size\": 1, \"backing-filename\": \"/a\\u0000b\"}",
    "{\"format\": \"qcow2\\u0000x\", \"virtual-size\": 1}",
    "{\"format\": \"qcow2\", \"virtual-size\": 1, \"backing-filename\": \"/a\\nb\"}",
    "{\"format\": \"qcow2\", \"virtual-size\": 1, \"encrypted\": \"no\"}",
    "{\"format\": \"qcow2\", \"virtual-size\": 1, \"format-specific\": []}",
    "{\"format\": \"qcow2\", \"virtual-size\": 1, \"format-specific\": {\"data\": 3}}",
    "{\"format\": \"qcow2\", \"virtual-size\": 1, \"format-specific\": {\"data\": "
    "{\"corrupt\": \"yes\"}}}",
    "{\"format\": \"qcow2\", \"virtual-size\": 1, \"format-specific\": {\"data\": "
    "{\"data-file\": {}}}}",
    "{\"format\": \"qcow2\", \"virtual-size\": 1} trailing",
    "{\"format\": \"qcow2\", \"virtual-size\": 1,}",
    "{\"format\": \"\xff\xfe\", \"virtual-size\": 1}",
    "{\"format\": \"qcow2\", \"virtual-size\": 1, \"x\": "
    "[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[]]]]]]]"
    "]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]}",
};

static void
test_parse_bad(void **state)
{
    for (gsize i = 0; i < G_N_ELEMENTS(bad_json); i++) {
        g_autoptr(GError) error = NULL;
        g_autoptr(CarrelDiskInfo) info =
            carrel_disk_info_parse(bad_json[i], strlen(bad_json[i]), &error);

        if (info)
            fail_msg("accepted bad input %zu: %s", i, bad_json[i]);
        assert_error(error, CARREL_ERROR_INVALID_ARG, NULL);
    }
}

static void
test_parse_hostile_sizes(void **state)
{
    const char good[] = "{\"format\": \"raw\", \"virtual-size\": 512}";
    const char *prefix = "{\"format\": \"raw\", \"virtual-size\": 1, \"x\": \"";
    gsize huge_len = CARREL_LIMIT_BODY_BYTES + 1;
    g_autofree char *huge = g_malloc(huge_len);
    g_autofree char *deep = g_malloc(CARREL_LIMIT_BODY_BYTES);
    g_autoptr(GError) error = NULL;
    g_autoptr(CarrelDiskInfo) ok = NULL;

    /* Over the size limit, even though it is valid JSON padded with spaces. */
    memset(huge, ' ', huge_len);
    memcpy(huge, good, strlen(good));
    assert_null(carrel_disk_info_parse(huge, huge_len, &error));
    assert_error(error, CARREL_ERROR_INVALID_ARG, "over");
    g_clear_error(&error);
    /* A megabyte of '[' must be refused, not overflow the parser's stack. */
    memset(deep, '[', CARREL_LIMIT_BODY_BYTES);
    assert_null(carrel_disk_info_parse(deep, CARREL_LIMIT_BODY_BYTES, &error));
    assert_error(error, CARREL_ERROR_INVALID_ARG, "nested");
    g_clear_error(&error);
    /* Brackets inside strings do not count as nesting. */
    memset(deep, '[', 1000);
    memcpy(deep, prefix, strlen(prefix));
    memcpy(deep + 1000, "\"}", 2);
    ok = carrel_disk_info_parse(deep, 1002, &error);
    assert_non_null(ok);
    /* NUL inside the declared length. */
    assert_null(carrel_disk_info_parse(good, sizeof(good), &error));
    assert_error(error, CARREL_ERROR_INVALID_ARG, NULL);
    g_clear_error(&error);
    assert_null(carrel_disk_info_parse(NULL, 0, &error));
    assert_error(error, CARREL_ERROR_INVALID_ARG, NULL);
}

static void
test_parse_fuzzish(void **state)
{
    const char *base =
        "{\"format\": \"qcow2\", \"virtual-size\": 1048576, \"actual-size\": 4096,"
        " \"format-specific\": {\"type\": \"qcow2\", \"data\": {\"corrupt\": false}}}";
    gsize len = strlen(base);
    GRand *rand = g_rand_new_with_seed(42);

    /* Truncations and single-byte mutations: any answer is fine, crashing or leaking is not. */
    for (gsize cut = 0; cut < len; cut++) {
        g_autoptr(CarrelDiskInfo) info = carrel_disk_info_parse(base, cut, NULL);
        assert_null(info);
    }
    for (int i = 0; i < 5000; i++) {
        g_autofree char *copy = g_strdup(base);
        g_autoptr(GError) error = NULL;
        g_autoptr(CarrelDiskInfo) info = NULL;

        copy[g_rand_int_range(rand, 0, (gint32)len)] = (char)g_rand_int_range(rand, 1, 256);
        info = carrel_disk_info_parse(copy, len, &error);
        assert_true((info == NULL) != (error == NULL));
    }
    g_rand_free(rand);
}

static void
test_detect_format(void **state)
{
    guint8 head[512] = {0};

    assert_null(carrel_disk_detect_format(head, sizeof(head)));
    memcpy(head, "QFI\xfb\0\0\0\3", 8);
    assert_string_equal(carrel_disk_detect_format(head, sizeof(head)), "qcow2");
    assert_null(carrel_disk_detect_format(head, 3));
    memset(head, 0, sizeof(head));
    memcpy(head + 0x40, "\x7f\x10\xda\xbe", 4);
    assert_string_equal(carrel_disk_detect_format(head, sizeof(head)), "vdi");
    assert_null(carrel_disk_detect_format(head, 0x43));
    memset(head, 0, sizeof(head));
    memcpy(head, "# Disk DescriptorFile\n", 22);
    assert_string_equal(carrel_disk_detect_format(head, sizeof(head)), "vmdk");
    assert_null(carrel_disk_detect_format(NULL, 0));
}

static void
test_importable_pure(void **state)
{
    CarrelDiskInfo info = {.format = (char *)"qcow2", .virtual_size = MIB};
    g_autoptr(GError) error = NULL;

    assert_true(carrel_disk_check_importable(&info, "qcow2", 2 * MIB, &error));
    assert_false(carrel_disk_check_importable(&info, "vmdk", 2 * MIB, &error));
    assert_error(error, CARREL_ERROR_INVALID_ARG, "image format 'vmdk' is not supported");
    g_clear_error(&error);
    assert_false(carrel_disk_check_importable(&info, "raw", 2 * MIB, &error));
    assert_error(error, CARREL_ERROR_INVALID_ARG, "image is 'qcow2' but was declared 'raw'");
    g_clear_error(&error);
    info.virtual_size = 0;
    assert_false(carrel_disk_check_importable(&info, "qcow2", 2 * MIB, &error));
    assert_error(error, CARREL_ERROR_INVALID_ARG, "virtual size 0 bytes");
    g_clear_error(&error);
    info.virtual_size = MIB;
    info.corrupt = TRUE;
    assert_false(carrel_disk_check_importable(&info, "qcow2", 2 * MIB, &error));
    assert_error(error, CARREL_ERROR_INVALID_ARG, "marked corrupt");
    g_clear_error(&error);
    info.corrupt = FALSE;
    info.encrypted = TRUE;
    assert_false(carrel_disk_check_importable(&info, "qcow2", 2 * MIB, &error));
    assert_error(error, CARREL_ERROR_INVALID_ARG, "encrypted");
    g_clear_error(&error);
    info.encrypted = FALSE;
    info.data_file = (char *)"/dev/sda";
    assert_false(carrel_disk_check_importable(&info, "qcow2", 2 * MIB, &error));
    assert_error(error, CARREL_ERROR_INVALID_ARG, "external data file '/dev/sda'");
}

/* ---- real images ---- */

static void
test_info_read_real(void **state)
{
    g_autofree char *qcow2 = tmp_path(state, "a.qcow2");
    g_autofree char *raw = tmp_path(state, "a.raw");
    g_autoptr(CarrelDiskInfo) qinfo = NULL;
    g_autoptr(CarrelDiskInfo) rinfo = NULL;
    g_autoptr(GError) error = NULL;

    need_qemu_img();
    make_image(qcow2, "qcow2", "64M");
    make_image(raw, "raw", "32M");
    qinfo = carrel_disk_info_read(qcow2, "qcow2", &error);
    assert_non_null(qinfo);
    assert_string_equal(qinfo->format, "qcow2");
    assert_int_equal(qinfo->virtual_size, 64 * MIB);
    assert_null(qinfo->backing_filename);
    assert_false(qinfo->corrupt);
    assert_true(
        carrel_disk_check_importable(qinfo, "qcow2", CARREL_LIMIT_VIRTUAL_SIZE_BYTES, &error));
    assert_true(carrel_disk_check_consistent(qcow2, "qcow2", &error));

    rinfo = carrel_disk_info_read(raw, "raw", &error);
    assert_non_null(rinfo);
    assert_string_equal(rinfo->format, "raw");
    assert_int_equal(rinfo->virtual_size, 32 * MIB);
    assert_true(
        carrel_disk_check_importable(rinfo, "raw", CARREL_LIMIT_VIRTUAL_SIZE_BYTES, &error));
    assert_true(carrel_disk_check_consistent(raw, "raw", &error));
    assert_null(error);
}

static void
test_info_read_refusals(void **state)
{
    g_autofree char *qcow2 = tmp_path(state, "a.qcow2");
    g_autofree char *fifo = tmp_path(state, "fifo");
    g_autofree char *missing = tmp_path(state, "missing.qcow2");
    g_autoptr(GError) error = NULL;

    need_qemu_img();
    make_image(qcow2, "qcow2", "1M");
    assert_null(carrel_disk_info_read("a.qcow2", "qcow2", &error));
    assert_error(error, CARREL_ERROR_INVALID_ARG, "absolute");
    g_clear_error(&error);
    assert_null(carrel_disk_info_read("json:{\"file.filename\":\"/etc/passwd\"}", "raw", &error));
    assert_error(error, CARREL_ERROR_INVALID_ARG, "absolute");
    g_clear_error(&error);
    assert_null(carrel_disk_info_read(qcow2, "--help", &error));
    assert_error(error, CARREL_ERROR_INVALID_ARG, "image format '--help' is invalid");
    g_clear_error(&error);
    assert_null(carrel_disk_info_read(missing, "qcow2", &error));
    assert_error(error, CARREL_ERROR_NOT_FOUND, NULL);
    g_clear_error(&error);
    assert_int_equal(mkfifo(fifo, 0600), 0);
    assert_null(carrel_disk_info_read(fifo, "raw", &error));
    assert_error(error, CARREL_ERROR_INVALID_ARG, "not a regular file");
}

static void
test_refuse_backing_file(void **state)
{
    g_autofree char *base = tmp_path(state, "base.qcow2");
    g_autofree char *top = tmp_path(state, "top.qcow2");
    g_autofree char *expected = NULL;
    g_autoptr(CarrelDiskInfo) info = NULL;
    g_autoptr(GError) error = NULL;
    const char *argv[] = {"qemu-img", "create", "-q", "-f", "qcow2", "-F",
                          "qcow2",    "-b",     base, top,  NULL};

    need_qemu_img();
    make_image(base, "qcow2", "16M");
    run_ok(argv);
    info = carrel_disk_info_read(top, "qcow2", &error);
    assert_non_null(info);
    assert_false(
        carrel_disk_check_importable(info, "qcow2", CARREL_LIMIT_VIRTUAL_SIZE_BYTES, &error));
    expected = g_strdup_printf(
        "image has a backing file '%s': import a standalone image (qemu-img convert)", base);
    assert_error(error, CARREL_ERROR_INVALID_ARG, expected);
}

static void
test_refuse_wrong_declared_format(void **state)
{
    g_autofree char *qcow2 = tmp_path(state, "disk.qcow2");
    g_autofree char *raw = tmp_path(state, "disk.raw");
    g_autofree char *vmdk_text = tmp_path(state, "descriptor.raw");
    g_autoptr(GError) error = NULL;

    need_qemu_img();
    make_image(qcow2, "qcow2", "16M");
    make_image(raw, "raw", "16M");
    /* A raw file declared qcow2: qemu-img itself refuses it. */
    assert_null(carrel_disk_info_read(raw, "qcow2", &error));
    assert_error(error, CARREL_ERROR_INVALID_ARG, "not in qcow2 format");
    g_clear_error(&error);
    /* A qcow2 declared raw reads fine as raw, so carrel refuses its header itself. */
    assert_null(carrel_disk_info_read(qcow2, "raw", &error));
    assert_error(error, CARREL_ERROR_INVALID_ARG, "declared 'raw' but starts with a 'qcow2'");
    g_clear_error(&error);
    assert_false(carrel_disk_check_consistent(qcow2, "raw", &error));
    assert_error(error, CARREL_ERROR_INVALID_ARG, "'qcow2' header");
    g_clear_error(&error);
    assert_true(g_file_set_contents(vmdk_text, "# Disk DescriptorFile\nversion=1\n", -1, NULL));
    assert_null(carrel_disk_info_read(vmdk_text, "raw", &error));
    assert_error(error, CARREL_ERROR_INVALID_ARG, "'vmdk' header");
}

static void
test_refuse_oversized(void **state)
{
    g_autofree char *big = tmp_path(state, "big.qcow2");
    g_autofree char *empty = tmp_path(state, "empty.raw");
    g_autoptr(CarrelDiskInfo) info = NULL;
    g_autoptr(CarrelDiskInfo) zero = NULL;
    g_autoptr(GError) error = NULL;

    need_qemu_img();
    make_image(big, "qcow2", "3T");
    info = carrel_disk_info_read(big, "qcow2", &error);
    assert_non_null(info);
    assert_int_equal(info->virtual_size, G_GUINT64_CONSTANT(3) << 40);
    assert_false(
        carrel_disk_check_importable(info, "qcow2", CARREL_LIMIT_VIRTUAL_SIZE_BYTES, &error));
    assert_error(error, CARREL_ERROR_INVALID_ARG, "virtual size 3298534883328 bytes");
    g_clear_error(&error);

    assert_true(g_file_set_contents(empty, "", 0, NULL));
    zero = carrel_disk_info_read(empty, "raw", &error);
    assert_non_null(zero);
    assert_false(
        carrel_disk_check_importable(zero, "raw", CARREL_LIMIT_VIRTUAL_SIZE_BYTES, &error));
    assert_error(error, CARREL_ERROR_INVALID_ARG, "virtual size 0 bytes");
}

static void
test_refuse_data_file(void **state)
{
    g_autofree char *img = tmp_path(state, "ext.qcow2");
    g_autofree char *data = tmp_path(state, "ext.data");
    g_autofree char *opt = NULL;
    g_autoptr(CarrelDiskInfo) info = NULL;
    g_autoptr(GError) error = NULL;

    need_qemu_img();
    opt = g_strdup_printf("data_file=%s", data);
    {
        const char *argv[] = {"qemu-img", "create", "-q", "-f",  "qcow2",
                              "-o",       opt,      img,  "16M", NULL};
        run_ok(argv);
    }
    info = carrel_disk_info_read(img, "qcow2", &error);
    assert_non_null(info);
    assert_string_equal(info->data_file, data);
    assert_false(
        carrel_disk_check_importable(info, "qcow2", CARREL_LIMIT_VIRTUAL_SIZE_BYTES, &error));
    assert_error(error, CARREL_ERROR_INVALID_ARG, "external data file");
}

static void
truncate_to(const char *path, goffset size)
{
    assert_int_equal(truncate(path, size), 0);
}

static void
test_truncated_qcow2(void **state)
{
    g_autofree char *img = tmp_path(state, "cut.qcow2");
    g_autofree char *stub = tmp_path(state, "stub.qcow2");
    g_autoptr(CarrelDiskInfo) info = NULL;
    g_autoptr(GError) error = NULL;

    need_qemu_img();
    make_image(img, "qcow2", "64M");
    write_pattern(img, "qcow2");
    assert_true(carrel_disk_check_consistent(img, "qcow2", &error));
    /* Cut through the data clusters: the header still reads, the check must not. */
    truncate_to(img, 300000);
    info = carrel_disk_info_read(img, "qcow2", &error);
    assert_non_null(info);
    assert_false(carrel_disk_check_consistent(img, "qcow2", &error));
    assert_error(error, CARREL_ERROR_INVALID_ARG, "is damaged or truncated");
    g_clear_error(&error);

    /* Cut through the header itself: even info fails. */
    make_image(stub, "qcow2", "64M");
    truncate_to(stub, 50);
    assert_null(carrel_disk_info_read(stub, "qcow2", &error));
    assert_error(error, CARREL_ERROR_INVALID_ARG, NULL);
}

static void
test_raw_size_alignment(void **state)
{
    g_autofree char *odd = tmp_path(state, "odd.raw");
    g_autoptr(GError) error = NULL;

    assert_true(g_file_set_contents(odd, "just some bytes", -1, NULL));
    assert_false(carrel_disk_check_consistent(odd, "raw", &error));
    assert_error(error, CARREL_ERROR_INVALID_ARG, "not a positive multiple of 512");
    g_clear_error(&error);
    assert_false(carrel_disk_check_consistent(odd, "vmdk", &error));
    assert_error(error, CARREL_ERROR_INVALID_ARG, "not supported");
}

/* ---- overlays ---- */

static void
test_overlay(void **state)
{
    g_autofree char *base = tmp_path(state, "base.qcow2");
    g_autofree char *top = tmp_path(state, "top.qcow2");
    g_autoptr(CarrelDiskInfo) info = NULL;
    g_autoptr(GError) error = NULL;
    const char *read_argv[] = {"qemu-io",           "-r", "-f", "qcow2", "-c",
                               "read -P 0xab 0 1M", top,  NULL};
    GStatBuf st;

    need_qemu_img();
    make_image(base, "qcow2", "16M");
    write_pattern(base, "qcow2");
    assert_true(carrel_disk_create_overlay(top, base, "qcow2", &error));
    assert_null(error);
    assert_int_equal(g_stat(top, &st), 0);
    assert_int_equal(st.st_mode & 0777, 0600);

    info = carrel_disk_info_read(top, "qcow2", &error);
    assert_non_null(info);
    assert_string_equal(info->backing_filename, base);
    assert_string_equal(info->backing_format, "qcow2");
    assert_int_equal(info->virtual_size, 16 * MIB);
    /* The guest sees the template's data through the overlay. */
    run_ok(read_argv);
}

static void
test_overlay_raw_backing(void **state)
{
    g_autofree char *base = tmp_path(state, "base.raw");
    g_autofree char *top = tmp_path(state, "top.qcow2");
    g_autoptr(CarrelDiskInfo) info = NULL;
    g_autoptr(GError) error = NULL;

    need_qemu_img();
    make_image(base, "raw", "8M");
    assert_true(carrel_disk_create_overlay(top, base, "raw", &error));
    info = carrel_disk_info_read(top, "qcow2", &error);
    assert_non_null(info);
    assert_string_equal(info->backing_format, "raw");
}

static void
test_overlay_refusals(void **state)
{
    g_autofree char *base = tmp_path(state, "base.qcow2");
    g_autofree char *top = tmp_path(state, "top.qcow2");
    g_autofree char *missing = tmp_path(state, "missing.qcow2");
    g_autofree char *contents = NULL;
    g_autoptr(GError) error = NULL;

    need_qemu_img();
    make_image(base, "qcow2", "16M");
    assert_false(carrel_disk_create_overlay(top, "base.qcow2", "qcow2", &error));
    assert_error(error, CARREL_ERROR_INVALID_ARG,
                 "backing file path 'base.qcow2' must be an absolute path");
    g_clear_error(&error);
    assert_false(carrel_disk_create_overlay("top.qcow2", base, "qcow2", &error));
    assert_error(error, CARREL_ERROR_INVALID_ARG,
                 "overlay path 'top.qcow2' must be an absolute path");
    g_clear_error(&error);
    assert_false(carrel_disk_create_overlay(top, base, "vmdk", &error));
    assert_error(error, CARREL_ERROR_INVALID_ARG, "backing format 'vmdk' is not supported");
    g_clear_error(&error);
    assert_false(g_file_test(top, G_FILE_TEST_EXISTS));

    /* A missing backing file fails in qemu-img and leaves nothing behind. */
    assert_false(carrel_disk_create_overlay(top, missing, "qcow2", &error));
    assert_error(error, CARREL_ERROR_DISK, NULL);
    g_clear_error(&error);
    assert_false(g_file_test(top, G_FILE_TEST_EXISTS));

    /* An existing destination is refused and left untouched. */
    assert_true(g_file_set_contents(top, "precious", -1, NULL));
    assert_false(carrel_disk_create_overlay(top, base, "qcow2", &error));
    assert_error(error, CARREL_ERROR_EXISTS, "already exists");
    assert_true(g_file_get_contents(top, &contents, NULL, NULL));
    assert_string_equal(contents, "precious");
    g_clear_error(&error);
    /* So is a symlink planted there. */
    assert_int_equal(unlink(top), 0);
    assert_int_equal(symlink(missing, top), 0);
    assert_false(carrel_disk_create_overlay(top, base, "qcow2", &error));
    assert_error(error, CARREL_ERROR_EXISTS, NULL);
    assert_false(g_file_test(missing, G_FILE_TEST_EXISTS));
}

/*
 * What libvirt's dynamic ownership does on VM start, by hand: chown the images to the QEMU user.
 * The 0600 overlay must then be readable by that user, and not before.
 */
static void
test_overlay_mode_for_qemu_user(void **state)
{
    Tmp *t = *state;
    struct passwd *qemu_user = getpwnam("libvirt-qemu");
    g_autofree char *setpriv = g_find_program_in_path("setpriv");
    g_autofree char *base = tmp_path(state, "base.qcow2");
    g_autofree char *top = tmp_path(state, "top.qcow2");
    g_autofree char *uid = NULL;
    g_autofree char *gid = NULL;
    g_autoptr(GError) error = NULL;

    need_qemu_img();
    if (geteuid() != 0 || !qemu_user || !setpriv) {
        print_message("needs root, a libvirt-qemu user and setpriv\n");
        skip();
    }
    uid = g_strdup_printf("--reuid=%u", (unsigned)qemu_user->pw_uid);
    gid = g_strdup_printf("--regid=%u", (unsigned)qemu_user->pw_gid);
    {
        const char *argv[] = {setpriv, uid,     gid,  "--clear-groups",    "qemu-io", "-r",
                              "-f",    "qcow2", "-c", "read -P 0xab 0 1M", top,       NULL};
        assert_int_equal(chmod(t->dir, 0711), 0);
        make_image(base, "qcow2", "16M");
        write_pattern(base, "qcow2");
        assert_int_equal(chmod(base, 0600), 0);
        assert_true(carrel_disk_create_overlay(top, base, "qcow2", &error));
        assert_false(carrel_util_run(argv, 60, NULL, NULL, &error));
        g_clear_error(&error);
        assert_int_equal(chown(base, qemu_user->pw_uid, qemu_user->pw_gid), 0);
        assert_int_equal(chown(top, qemu_user->pw_uid, qemu_user->pw_gid), 0);
        run_ok(argv);
    }
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_parse_good),
        cmocka_unit_test(test_parse_bad),
        cmocka_unit_test(test_parse_hostile_sizes),
        cmocka_unit_test(test_parse_fuzzish),
        cmocka_unit_test(test_detect_format),
        cmocka_unit_test(test_importable_pure),
        cmocka_unit_test_setup_teardown(test_info_read_real, tmp_setup, tmp_teardown),
        cmocka_unit_test_setup_teardown(test_info_read_refusals, tmp_setup, tmp_teardown),
        cmocka_unit_test_setup_teardown(test_refuse_backing_file, tmp_setup, tmp_teardown),
        cmocka_unit_test_setup_teardown(test_refuse_wrong_declared_format, tmp_setup, tmp_teardown),
        cmocka_unit_test_setup_teardown(test_refuse_oversized, tmp_setup, tmp_teardown),
        cmocka_unit_test_setup_teardown(test_refuse_data_file, tmp_setup, tmp_teardown),
        cmocka_unit_test_setup_teardown(test_truncated_qcow2, tmp_setup, tmp_teardown),
        cmocka_unit_test_setup_teardown(test_raw_size_alignment, tmp_setup, tmp_teardown),
        cmocka_unit_test_setup_teardown(test_overlay, tmp_setup, tmp_teardown),
        cmocka_unit_test_setup_teardown(test_overlay_raw_backing, tmp_setup, tmp_teardown),
        cmocka_unit_test_setup_teardown(test_overlay_refusals, tmp_setup, tmp_teardown),
        cmocka_unit_test_setup_teardown(test_overlay_mode_for_qemu_user, tmp_setup, tmp_teardown),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
