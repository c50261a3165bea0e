/*
 * Unit tests of the save-image header code of the hypervisor module, on synthetic files: the
 * layout of libvirt's QEMU save images (src/qemu/qemu_saveimage.h), good and damaged.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <fcntl.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define CARREL_HYPERVISOR_PRIV_H_ALLOW
#include "hypervisor/hypervisor-priv.h"

#define HEADER CARREL_SAVEIMAGE_HEADER_SIZE
#define OLD_XML "<domain type='qemu'>\n  <name>carrel-s-000000000001</name>\n</domain>\n"
#define NEW_XML "<domain type='qemu'>\n  <name>carrel-s-000000000002</name>\n</domain>\n"
#define COOKIE "<qemu-save-cookie>\n  <cpu mode='custom'/>\n</qemu-save-cookie>\n"

typedef struct {
    char *dir;
    char *path;
} Fixture;

/* A synthetic image: header fields, then data (xml, cookie, padding to data_len), memory. */
typedef struct {
    const char *magic;
    guint32 version;
    guint32 data_len;
    guint32 format;
    const char *xml;    /* written with its NUL */
    const char *cookie; /* NULL: none (cookie offset 0) */
    gsize memory_len;   /* bytes of memory stream (a recognisable pattern) */
    gboolean no_nuls;   /* fill the data with 'x' instead of NULs after the strings */
} Synthetic;

static guint8
memory_byte(gsize i)
{
    return (guint8)(i * 7 + 3);
}

static GBytes *
synthesize(const Synthetic *syn)
{
    GByteArray *out = g_byte_array_new();
    guint8 header[HEADER] = {0};
    gsize xml_size = strlen(syn->xml) + 1;
    guint32 cookie_offset = syn->cookie ? (guint32)xml_size : 0;
    guint32 words[5] = {syn->version, syn->data_len, 1, syn->format, cookie_offset};
    g_autofree guint8 *data = g_malloc0(MAX(syn->data_len, 1)); /* never NULL for memcpy */

    memcpy(header, syn->magic, 16);
    memcpy(header + 16, words, sizeof(words));
    g_byte_array_append(out, header, sizeof(header));
    if (syn->no_nuls)
        memset(data, 'x', syn->data_len);
    memcpy(data, syn->xml, MIN(xml_size, syn->data_len));
    if (syn->cookie && xml_size < syn->data_len)
        memcpy(data + xml_size, syn->cookie,
               MIN(strlen(syn->cookie) + 1, syn->data_len - xml_size));
    g_byte_array_append(out, data, syn->data_len);
    for (gsize i = 0; i < syn->memory_len; i++) {
        guint8 b = memory_byte(i);
        g_byte_array_append(out, &b, 1);
    }
    return g_byte_array_free_to_bytes(out);
}

static Synthetic
good_image(void)
{
    Synthetic syn = {
        .magic = "LibvirtQemudSave",
        .version = 2,
        .data_len = 4096,
        .format = 0,
        .xml = OLD_XML,
        .cookie = COOKIE,
        .memory_len = 10000,
    };
    return syn;
}

static void
write_image(const Fixture *fx, GBytes *bytes)
{
    g_autoptr(GError) error = NULL;

    unlink(fx->path);
    if (!g_file_set_contents(fx->path, g_bytes_get_data(bytes, NULL), g_bytes_get_size(bytes),
                             &error))
        fail_msg("writing image: %s", error->message);
}

static int
setup(void **state)
{
    Fixture *fx = g_new0(Fixture, 1);

    fx->dir = g_dir_make_tmp("carrel-saveimage-XXXXXX", NULL);
    assert_non_null(fx->dir);
    fx->path = g_build_filename(fx->dir, "warm.save", NULL);
    *state = fx;
    return 0;
}

static int
teardown(void **state)
{
    Fixture *fx = *state;

    carrel_util_remove_tree(fx->dir, NULL);
    g_free(fx->dir);
    g_free(fx->path);
    g_free(fx);
    return 0;
}

static void
assert_error(const GError *error, int code, const char *fragment)
{
    if (!error)
        fail_msg("expected error code %d, got success", code);
    if (error->domain != CARREL_ERROR || error->code != code)
        fail_msg("expected code %d, got %d: %s", code, error->code, error->message);
    if (fragment && !strstr(error->message, fragment))
        fail_msg("message '%s' lacks '%s'", error->message, fragment);
}

/* Reads the header of fx->path; FALSE with *error on failure. */
static gboolean
read_file_header(const Fixture *fx, CarrelSaveImageHeader *header, char **xml, char **cookie,
                 GError **error)
{
    int fd = open(fx->path, O_RDONLY | O_CLOEXEC);
    gboolean ok;

    assert_true(fd >= 0);
    ok = carrel_hypervisor_saveimage_read_header(fd, header, xml, cookie, error);
    close(fd);
    return ok;
}

static void
assert_refused(const Fixture *fx, const Synthetic *syn, int code, const char *fragment)
{
    g_autoptr(GBytes) bytes = synthesize(syn);
    g_autoptr(GError) error = NULL;
    g_autofree char *xml = NULL;

    write_image(fx, bytes);
    assert_false(read_file_header(fx, NULL, &xml, NULL, &error));
    assert_error(error, code, fragment);
    assert_null(xml); /* outputs untouched on failure */
}

static void
test_read_good(void **state)
{
    Fixture *fx = *state;
    Synthetic syn = good_image();
    g_autoptr(GBytes) bytes = synthesize(&syn);
    g_autoptr(GError) error = NULL;
    g_autofree char *xml = NULL;
    g_autofree char *cookie = NULL;
    g_autofree char *via_path = NULL;
    CarrelSaveImageHeader header = {0};

    write_image(fx, bytes);
    if (!read_file_header(fx, &header, &xml, &cookie, &error))
        fail_msg("read: %s", error->message);
    assert_int_equal(header.version, 2);
    assert_int_equal(header.data_len, 4096);
    assert_int_equal(header.was_running, 1);
    assert_int_equal(header.format, 0);
    assert_int_equal(header.cookie_offset, strlen(OLD_XML) + 1);
    assert_string_equal(xml, OLD_XML);
    assert_string_equal(cookie, COOKIE);
    via_path = carrel_hypervisor_saveimage_get_xml(fx->path, &error);
    assert_non_null(via_path);
    assert_string_equal(via_path, OLD_XML);
}

static void
test_read_without_cookie(void **state)
{
    Fixture *fx = *state;
    Synthetic syn = good_image();
    g_autoptr(GBytes) bytes = NULL;
    g_autofree char *cookie = g_strdup("untouched");
    g_autofree char *xml = NULL;
    CarrelSaveImageHeader header = {0};

    syn.cookie = NULL;
    bytes = synthesize(&syn);
    write_image(fx, bytes);
    g_clear_pointer(&cookie, g_free);
    assert_true(read_file_header(fx, &header, &xml, &cookie, NULL));
    assert_int_equal(header.cookie_offset, 0);
    assert_null(cookie);
    assert_string_equal(xml, OLD_XML);
}

static void
test_read_refuses_damage(void **state)
{
    Fixture *fx = *state;
    Synthetic syn;

    syn = good_image();
    syn.magic = "LibvirtQemudPart";
    assert_refused(fx, &syn, CARREL_ERROR_INVALID_ARG, "incomplete");
    syn = good_image();
    syn.magic = "LibvirtQemudSavX";
    assert_refused(fx, &syn, CARREL_ERROR_INVALID_ARG, "bad magic");
    syn = good_image();
    syn.version = 3;
    assert_refused(fx, &syn, CARREL_ERROR_UNSUPPORTED, "version '3'");
    syn = good_image();
    syn.version = GUINT32_SWAP_LE_BE(2);
    assert_refused(fx, &syn, CARREL_ERROR_UNSUPPORTED, "byte order");
    syn = good_image();
    syn.format = 5; /* zstd */
    assert_refused(fx, &syn, CARREL_ERROR_UNSUPPORTED, "compressed");
    syn = good_image();
    syn.data_len = 0;
    assert_refused(fx, &syn, CARREL_ERROR_INVALID_ARG, "data length '0'");
    /* The XML fills its whole region: no NUL, so it would run into the cookie. */
    syn = good_image();
    syn.cookie = NULL;
    syn.data_len = (guint32)strlen(OLD_XML);
    assert_refused(fx, &syn, CARREL_ERROR_INVALID_ARG, "domain xml is not NUL-terminated");
    syn = good_image();
    syn.xml = "";
    syn.cookie = NULL;
    assert_refused(fx, &syn, CARREL_ERROR_INVALID_ARG, "domain xml is empty");
    syn = good_image();
    syn.xml = "<domain>\xff</domain>";
    assert_refused(fx, &syn, CARREL_ERROR_INVALID_ARG, "not valid UTF-8");
    /* A cookie running to the end of the data without its NUL. */
    syn = good_image();
    syn.data_len = (guint32)(strlen(OLD_XML) + 1 + strlen(COOKIE));
    syn.no_nuls = TRUE;
    assert_refused(fx, &syn, CARREL_ERROR_INVALID_ARG, "cookie is not NUL-terminated");
    syn = good_image();
    syn.memory_len = 0;
    assert_refused(fx, &syn, CARREL_ERROR_INVALID_ARG, "no memory state");
}

/* Hand-patched headers: fields the synthesizer keeps consistent. */
static void
test_read_refuses_bad_fields(void **state)
{
    Fixture *fx = *state;
    Synthetic syn = good_image();
    g_autoptr(GBytes) bytes = synthesize(&syn);
    gsize len = 0;
    g_autofree guint8 *raw = g_memdup2(g_bytes_get_data(bytes, &len), g_bytes_get_size(bytes));
    g_autoptr(GBytes) patched = NULL;
    g_autoptr(GError) error = NULL;
    guint32 value;

    /* data_len beyond the bound: refused before any allocation. */
    value = CARREL_SAVEIMAGE_MAX_DATA_LEN + 1;
    memcpy(raw + 20, &value, 4);
    patched = g_bytes_new(raw, len);
    write_image(fx, patched);
    assert_false(read_file_header(fx, NULL, NULL, NULL, &error));
    assert_error(error, CARREL_ERROR_INVALID_ARG, "data length");
    g_clear_error(&error);
    g_clear_pointer(&patched, g_bytes_unref);
    /* data_len within the bound but beyond the file. */
    value = 1024 * 1024;
    memcpy(raw + 20, &value, 4);
    patched = g_bytes_new(raw, len);
    write_image(fx, patched);
    assert_false(read_file_header(fx, NULL, NULL, NULL, &error));
    assert_error(error, CARREL_ERROR_INVALID_ARG, "truncated");
    g_clear_error(&error);
    g_clear_pointer(&patched, g_bytes_unref);
    /* cookie offset at or past the end of the data. */
    value = 4096;
    memcpy(raw + 20, &value, 4);
    memcpy(raw + 32, &value, 4);
    patched = g_bytes_new(raw, len);
    write_image(fx, patched);
    assert_false(read_file_header(fx, NULL, NULL, NULL, &error));
    assert_error(error, CARREL_ERROR_INVALID_ARG, "cookie offset '4096'");
}

static void
test_read_truncated(void **state)
{
    Fixture *fx = *state;
    Synthetic syn = good_image();
    g_autoptr(GBytes) bytes = synthesize(&syn);
    g_autoptr(GError) error = NULL;
    gsize cuts[] = {0, 10, HEADER - 1, HEADER, HEADER + 100, HEADER + 4096};

    for (gsize i = 0; i < G_N_ELEMENTS(cuts); i++) {
        g_autoptr(GBytes) part = g_bytes_new_from_bytes(bytes, 0, cuts[i]);

        write_image(fx, part);
        assert_false(read_file_header(fx, NULL, NULL, NULL, &error));
        assert_error(error, CARREL_ERROR_INVALID_ARG, "truncated");
        g_clear_error(&error);
    }
}

static void
test_read_not_regular(void **state)
{
    g_autoptr(GError) error = NULL;
    int fds[2];

    assert_int_equal(pipe(fds), 0);
    close(fds[1]);
    /* pread on a pipe fails; either way nothing is trusted. */
    assert_false(carrel_hypervisor_saveimage_read_header(fds[0], NULL, NULL, NULL, &error));
    assert_non_null(error);
    close(fds[0]);
}

/* Checks the whole file after a rewrite: header fields, data layout, untouched memory. */
static void
assert_rewritten(const Fixture *fx, const char *new_xml, const char *cookie, gsize memory_len)
{
    g_autofree guint8 *raw = NULL;
    gsize len = 0, xml_size = strlen(new_xml) + 1;
    guint32 data_len, cookie_offset;

    assert_true(g_file_get_contents(fx->path, (char **)&raw, &len, NULL));
    assert_memory_equal(raw, "LibvirtQemudSave", 16);
    memcpy(&data_len, raw + 20, 4);
    memcpy(&cookie_offset, raw + 32, 4);
    assert_int_equal(data_len, 4096); /* never changes: the memory stream stays in place */
    assert_int_equal(len, HEADER + data_len + memory_len);
    assert_memory_equal(raw + HEADER, new_xml, xml_size);
    if (cookie) {
        assert_int_equal(cookie_offset, xml_size);
        assert_memory_equal(raw + HEADER + xml_size, cookie, strlen(cookie) + 1);
        xml_size += strlen(cookie) + 1;
    } else {
        assert_int_equal(cookie_offset, 0);
    }
    for (gsize i = HEADER + xml_size; i < HEADER + data_len; i++) {
        if (raw[i] != 0)
            fail_msg("padding byte %" G_GSIZE_FORMAT " is %u", i, raw[i]);
    }
    for (gsize i = 0; i < memory_len; i++) {
        if (raw[HEADER + data_len + i] != memory_byte(i))
            fail_msg("memory byte %" G_GSIZE_FORMAT " changed", i);
    }
}

static void
test_rewrite_moves_cookie(void **state)
{
    Fixture *fx = *state;
    Synthetic syn = good_image();
    g_autoptr(GBytes) bytes = synthesize(&syn);
    g_autoptr(GError) error = NULL;
    g_autofree char *longer = g_strdup_printf("<domain type='qemu'>\n  <name>carrel-s-0000000000"
                                              "02</name>\n  <uuid>%s</uuid>\n%s</domain>\n",
                                              "6f1c2a7e-3b4d-4e5f-8a9b-0c1d2e3f4a5b",
                                              "  <description>a longer xml</description>\n");
    const char *shorter = "<domain type='qemu'><name>c</name></domain>";
    g_autofree char *cookie = NULL;
    g_autofree char *xml = NULL;

    write_image(fx, bytes);
    if (!carrel_hypervisor_saveimage_rewrite_file(fx->path, longer, &error))
        fail_msg("rewrite: %s", error->message);
    assert_rewritten(fx, longer, COOKIE, syn.memory_len);
    /* Shrinking clears what the longer XML left behind. */
    assert_true(carrel_hypervisor_saveimage_rewrite_file(fx->path, shorter, NULL));
    assert_rewritten(fx, shorter, COOKIE, syn.memory_len);
    assert_true(read_file_header(fx, NULL, &xml, &cookie, NULL));
    assert_string_equal(xml, shorter);
    assert_string_equal(cookie, COOKIE);
}

/* A restore's view of the image (head with the new XML, then the memory stream from the fd)
 * is byte for byte what a rewrite leaves, and the image itself is not touched. */
static void
test_open_as_reads_only(void **state)
{
    Fixture *fx = *state;
    Synthetic syn = good_image();
    g_autoptr(GBytes) bytes = synthesize(&syn);
    g_autoptr(GBytes) head = NULL;
    g_autoptr(GByteArray) seen = g_byte_array_new();
    g_autoptr(GError) error = NULL;
    g_autofree guint8 *after = NULL;
    g_autofree guint8 *rewritten = NULL;
    gsize after_len = 0, rewritten_len = 0;
    guint8 buf[512];
    ssize_t n;
    int fd;

    write_image(fx, bytes);
    fd = carrel_hypervisor_saveimage_open_as(fx->path, NEW_XML, &head, &error);
    if (fd < 0)
        fail_msg("open_as: %s", error->message);
    g_byte_array_append(seen, g_bytes_get_data(head, NULL), g_bytes_get_size(head));
    while ((n = read(fd, buf, sizeof(buf))) > 0)
        g_byte_array_append(seen, buf, (guint)n);
    close(fd);
    assert_true(g_file_get_contents(fx->path, (char **)&after, &after_len, NULL));
    assert_int_equal(after_len, g_bytes_get_size(bytes));
    assert_memory_equal(after, g_bytes_get_data(bytes, NULL), after_len);
    assert_true(carrel_hypervisor_saveimage_rewrite_file(fx->path, NEW_XML, NULL));
    assert_true(g_file_get_contents(fx->path, (char **)&rewritten, &rewritten_len, NULL));
    assert_int_equal(seen->len, rewritten_len);
    assert_memory_equal(seen->data, rewritten, rewritten_len);
    /* An XML that does not fit is refused before anything is read further. */
    {
        g_autofree char *huge = g_strnfill(8192, 'x');
        g_autoptr(GBytes) none = NULL;
        g_autoptr(GError) too_long = NULL;
        assert_int_equal(carrel_hypervisor_saveimage_open_as(fx->path, huge, &none, &too_long), -1);
        assert_true(g_error_matches(too_long, CARREL_ERROR, CARREL_ERROR_LIMIT));
        assert_null(none);
    }
}

static void
test_rewrite_without_cookie(void **state)
{
    Fixture *fx = *state;
    Synthetic syn = good_image();
    g_autoptr(GBytes) bytes = NULL;

    syn.cookie = NULL;
    bytes = synthesize(&syn);
    write_image(fx, bytes);
    assert_true(carrel_hypervisor_saveimage_rewrite_file(fx->path, "<domain>new</domain>", NULL));
    assert_rewritten(fx, "<domain>new</domain>", NULL, syn.memory_len);
}

static void
test_rewrite_too_long(void **state)
{
    Fixture *fx = *state;
    Synthetic syn = good_image();
    g_autoptr(GBytes) bytes = synthesize(&syn);
    g_autoptr(GError) error = NULL;
    gsize fits = 4096 - (strlen(COOKIE) + 1) - 1;
    g_autofree char *exact = g_strnfill(fits, 'x');
    g_autofree char *over = g_strnfill(fits + 1, 'x');
    g_autofree guint8 *before = NULL;
    g_autofree guint8 *after = NULL;
    gsize before_len = 0, after_len = 0;

    write_image(fx, bytes);
    assert_true(g_file_get_contents(fx->path, (char **)&before, &before_len, NULL));
    assert_false(carrel_hypervisor_saveimage_rewrite_file(fx->path, over, &error));
    assert_error(error, CARREL_ERROR_LIMIT, "do not fit into the 4096 bytes");
    assert_true(g_str_has_prefix(error->message, "save image '"));
    /* Refused before anything was written. */
    assert_true(g_file_get_contents(fx->path, (char **)&after, &after_len, NULL));
    assert_int_equal(before_len, after_len);
    assert_memory_equal(before, after, before_len);
    /* The largest XML that fits, fits exactly. */
    assert_true(carrel_hypervisor_saveimage_rewrite_file(fx->path, exact, NULL));
    assert_rewritten(fx, exact, COOKIE, syn.memory_len);
}

static void
test_rewrite_refuses(void **state)
{
    Fixture *fx = *state;
    Synthetic syn = good_image();
    g_autoptr(GBytes) bytes = NULL;
    g_autoptr(GError) error = NULL;
    g_autofree char *link = g_build_filename(fx->dir, "link.save", NULL);

    syn.magic = "LibvirtQemudPart";
    bytes = synthesize(&syn);
    write_image(fx, bytes);
    assert_false(carrel_hypervisor_saveimage_rewrite_file(fx->path, "<domain/>", &error));
    assert_error(error, CARREL_ERROR_INVALID_ARG, "incomplete");
    g_clear_error(&error);
    assert_false(carrel_hypervisor_saveimage_rewrite_file(fx->path, "", &error));
    assert_error(error, CARREL_ERROR_INVALID_ARG, "empty");
    g_clear_error(&error);
    assert_false(carrel_hypervisor_saveimage_rewrite_file(fx->path, "<d>\xc3</d>", &error));
    assert_error(error, CARREL_ERROR_INVALID_ARG, "UTF-8");
    g_clear_error(&error);
    /* Never through a symlink. */
    assert_int_equal(symlink(fx->path, link), 0);
    assert_false(carrel_hypervisor_saveimage_rewrite_file(link, "<domain/>", &error));
    assert_error(error, CARREL_ERROR_HYPERVISOR, "opening");
    g_clear_error(&error);
    assert_null(carrel_hypervisor_saveimage_get_xml(link, &error));
    assert_error(error, CARREL_ERROR_HYPERVISOR, NULL);
    g_clear_error(&error);
    assert_false(carrel_hypervisor_saveimage_rewrite_file("/nonexistent/x.save", "<d/>", &error));
    assert_error(error, CARREL_ERROR_NOT_FOUND, "save image '/nonexistent/x.save': ");
}

/* A crash in the middle of a header rewrite: the journal puts the old header back. */
static void
test_recover_from_journal(void **state)
{
    Fixture *fx = *state;
    Synthetic syn = good_image();
    g_autoptr(GBytes) good = synthesize(&syn);
    g_autofree char *journal = g_strconcat(fx->path, ".journal", NULL);
    g_autofree char *damaged = NULL;
    g_autofree char *xml = NULL;
    g_autoptr(GError) error = NULL;
    gsize len = g_bytes_get_size(good);

    /* What rewrite_file journals: the header and the data as they were. */
    assert_true(
        g_file_set_contents(journal, g_bytes_get_data(good, NULL), HEADER + syn.data_len, NULL));
    damaged = g_memdup2(g_bytes_get_data(good, NULL), len);
    memcpy(damaged, "LibvirtQemudPart", 16);
    memset(damaged + HEADER, 'z', 100); /* the new XML half written */
    assert_true(g_file_set_contents(fx->path, damaged, (gssize)len, NULL));
    assert_null(carrel_hypervisor_saveimage_get_xml(fx->path, &error));
    assert_error(error, CARREL_ERROR_INVALID_ARG, "incomplete");
    g_clear_error(&error);

    assert_true(carrel_hypervisor_saveimage_recover(fx->path, &error));
    assert_false(g_file_test(journal, G_FILE_TEST_EXISTS));
    xml = carrel_hypervisor_saveimage_get_xml(fx->path, &error);
    assert_non_null(xml);
    assert_string_equal(xml, OLD_XML);
    /* Nothing to do without a journal; a rewrite leaves none behind. */
    assert_true(carrel_hypervisor_saveimage_recover(fx->path, &error));
    assert_true(carrel_hypervisor_saveimage_rewrite_file(fx->path, NEW_XML, &error));
    assert_false(g_file_test(journal, G_FILE_TEST_EXISTS));
}

/* A journal left after the rewrite had finished is dropped, the new header kept. */
static void
test_recover_finished_rewrite(void **state)
{
    Fixture *fx = *state;
    Synthetic syn = good_image();
    g_autoptr(GBytes) good = synthesize(&syn);
    g_autofree char *journal = g_strconcat(fx->path, ".journal", NULL);
    g_autofree char *xml = NULL;
    g_autoptr(GError) error = NULL;

    write_image(fx, good);
    assert_true(carrel_hypervisor_saveimage_rewrite_file(fx->path, NEW_XML, &error));
    assert_true(
        g_file_set_contents(journal, g_bytes_get_data(good, NULL), HEADER + syn.data_len, NULL));
    assert_true(carrel_hypervisor_saveimage_recover(fx->path, &error));
    assert_false(g_file_test(journal, G_FILE_TEST_EXISTS));
    xml = carrel_hypervisor_saveimage_get_xml(fx->path, &error);
    assert_string_equal(xml, NEW_XML);
}

static void
test_create_round_trip(void **state)
{
    Fixture *fx = *state;
    g_autoptr(GBytes) memory = g_bytes_new_static("MEMORY", 6);
    g_autoptr(GError) error = NULL;
    g_autofree char *xml = NULL;
    g_autofree char *cookie = NULL;
    CarrelSaveImageHeader header = {0};
    struct stat st;

    if (!carrel_hypervisor_saveimage_create(fx->path, OLD_XML, COOKIE, memory, &error))
        fail_msg("create: %s", error->message);
    assert_int_equal(stat(fx->path, &st), 0);
    assert_int_equal(st.st_mode & 07777, 0600);
    assert_true(read_file_header(fx, &header, &xml, &cookie, NULL));
    assert_int_equal(header.data_len, strlen(OLD_XML) + 1 + strlen(COOKIE) + 1 + 64 * 1024);
    assert_string_equal(xml, OLD_XML);
    assert_string_equal(cookie, COOKIE);
    /* Never over an existing file. */
    assert_false(carrel_hypervisor_saveimage_create(fx->path, OLD_XML, NULL, memory, &error));
    assert_error(error, CARREL_ERROR_EXISTS, NULL);
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_read_good, setup, teardown),
        cmocka_unit_test_setup_teardown(test_read_without_cookie, setup, teardown),
        cmocka_unit_test_setup_teardown(test_read_refuses_damage, setup, teardown),
        cmocka_unit_test_setup_teardown(test_read_refuses_bad_fields, setup, teardown),
        cmocka_unit_test_setup_teardown(test_read_truncated, setup, teardown),
        cmocka_unit_test(test_read_not_regular),
        cmocka_unit_test_setup_teardown(test_rewrite_moves_cookie, setup, teardown),
        cmocka_unit_test_setup_teardown(test_rewrite_without_cookie, setup, teardown),
        cmocka_unit_test_setup_teardown(test_open_as_reads_only, setup, teardown),
        cmocka_unit_test_setup_teardown(test_rewrite_too_long, setup, teardown),
        cmocka_unit_test_setup_teardown(test_rewrite_refuses, setup, teardown),
        cmocka_unit_test_setup_teardown(test_create_round_trip, setup, teardown),
        cmocka_unit_test_setup_teardown(test_recover_from_journal, setup, teardown),
        cmocka_unit_test_setup_teardown(test_recover_finished_rewrite, setup, teardown),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
