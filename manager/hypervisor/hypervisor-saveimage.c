/*
 * libvirt's QEMU save image header: read, validate and rewrite the domain XML inside it, so one
 * saved memory state can be restored as many domains (each with its own name and UUID).
 *
 * Layout (libvirt src/qemu/qemu_saveimage.h, host byte order): a 16-byte magic, the 32-bit words
 * version, data_len, was_running, format, cookieOffset and 14 unused ones (92 bytes); then
 * data_len bytes holding the domain XML (NUL-terminated), the cookie XML at cookieOffset within
 * them and zero padding; then QEMU's migration stream. Everything read is validated: the file
 * could be damaged, or written by another program.
 */
#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define CARREL_HYPERVISOR_PRIV_H_ALLOW
#include "hypervisor/hypervisor-priv.h"

#define MAGIC_LEN 16
#define MAGIC_COMPLETE "LibvirtQemudSave"
#define MAGIC_PARTIAL "LibvirtQemudPart"
#define SUPPORTED_VERSION 2
#define OFFSET_VERSION 16
#define OFFSET_DATA_LEN 20
#define OFFSET_WAS_RUNNING 24
#define OFFSET_FORMAT 28
#define OFFSET_COOKIE 32
/* Room libvirt leaves after the XML, so that an edited XML may grow. */
#define CREATE_PADDING (64 * 1024)

G_STATIC_ASSERT(sizeof(MAGIC_COMPLETE) - 1 == MAGIC_LEN);
G_STATIC_ASSERT(sizeof(MAGIC_PARTIAL) - 1 == MAGIC_LEN);
G_STATIC_ASSERT(OFFSET_COOKIE + 4 + 14 * 4 == CARREL_SAVEIMAGE_HEADER_SIZE);

/* One image as read: the raw header (to keep the unused words) and the validated contents. */
typedef struct {
    guint8 raw[CARREL_SAVEIMAGE_HEADER_SIZE];
    CarrelSaveImageHeader header;
    char *xml;
    char *cookie;
} SaveImage;

static void
save_image_clear(SaveImage *img)
{
    g_clear_pointer(&img->xml, g_free);
    g_clear_pointer(&img->cookie, g_free);
}

G_DEFINE_AUTO_CLEANUP_CLEAR_FUNC(SaveImage, save_image_clear)

void
carrel_hypervisor_set_errno_error(GError **error, int errsv, const char *what)
{
    CarrelErrorCode code = CARREL_ERROR_HYPERVISOR;

    if (errsv == ENOENT)
        code = CARREL_ERROR_NOT_FOUND;
    else if (errsv == EEXIST)
        code = CARREL_ERROR_EXISTS;
    g_set_error(error, CARREL_ERROR, code, "%s: %s", what, g_strerror(errsv));
}

static guint32
get_u32(const guint8 *raw, gsize offset)
{
    guint32 value;

    memcpy(&value, raw + offset, sizeof(value));
    return value;
}

static void
put_u32(guint8 *raw, gsize offset, guint32 value)
{
    memcpy(raw + offset, &value, sizeof(value));
}

/* Reads exactly len bytes at offset; a short file is a truncated image. */
static gboolean
pread_exact(int fd, void *buf, gsize len, goffset offset, const char *what, GError **error)
{
    gsize done = 0;

    while (done < len) {
        ssize_t n = pread(fd, (guint8 *)buf + done, len - done, offset + (goffset)done);

        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0) {
            carrel_hypervisor_set_errno_error(error, errno, "reading save image");
            return FALSE;
        }
        if (n == 0) {
            g_set_error(error, CARREL_ERROR, CARREL_ERROR_INVALID_ARG,
                        "save image is truncated in its %s", what);
            return FALSE;
        }
        done += (gsize)n;
    }
    return TRUE;
}

static gboolean
pwrite_all(int fd, const void *buf, gsize len, goffset offset, GError **error)
{
    gsize done = 0;

    while (done < len) {
        ssize_t n = pwrite(fd, (const guint8 *)buf + done, len - done, offset + (goffset)done);

        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0) {
            carrel_hypervisor_set_errno_error(error, n < 0 ? errno : EIO, "writing save image");
            return FALSE;
        }
        done += (gsize)n;
    }
    return TRUE;
}

static gboolean
sync_fd(int fd, GError **error)
{
    if (fsync(fd) == 0)
        return TRUE;
    carrel_hypervisor_set_errno_error(error, errno, "syncing save image");
    return FALSE;
}

static gboolean
check_fixed_header(const SaveImage *img, GError **error)
{
    guint32 version = img->header.version;

    if (memcmp(img->raw, MAGIC_PARTIAL, MAGIC_LEN) == 0) {
        g_set_error(error, CARREL_ERROR, CARREL_ERROR_INVALID_ARG,
                    "save image is incomplete (the save did not finish)");
        return FALSE;
    }
    if (memcmp(img->raw, MAGIC_COMPLETE, MAGIC_LEN) != 0) {
        g_set_error(error, CARREL_ERROR, CARREL_ERROR_INVALID_ARG,
                    "not a libvirt QEMU save image (bad magic)");
        return FALSE;
    }
    /* libvirt writes host order and reads a swapped one back; carrel never moves images. */
    if (version != SUPPORTED_VERSION && GUINT32_SWAP_LE_BE(version) == SUPPORTED_VERSION) {
        g_set_error(error, CARREL_ERROR, CARREL_ERROR_UNSUPPORTED,
                    "save image was written with another byte order");
        return FALSE;
    }
    if (version != SUPPORTED_VERSION) {
        g_set_error(error, CARREL_ERROR, CARREL_ERROR_UNSUPPORTED,
                    "save image version '%u' is not supported", version);
        return FALSE;
    }
    /* A compressed stream would need a decompressor in the restore path: not ours. */
    if (img->header.format != 0) {
        g_set_error(error, CARREL_ERROR, CARREL_ERROR_UNSUPPORTED,
                    "save image format '%u' is compressed, not raw", img->header.format);
        return FALSE;
    }
    if (img->header.data_len == 0 || img->header.data_len > CARREL_SAVEIMAGE_MAX_DATA_LEN) {
        g_set_error(error, CARREL_ERROR, CARREL_ERROR_INVALID_ARG,
                    "save image data length '%u' is not between 1 and %d", img->header.data_len,
                    CARREL_SAVEIMAGE_MAX_DATA_LEN);
        return FALSE;
    }
    if (img->header.cookie_offset >= img->header.data_len) {
        g_set_error(error, CARREL_ERROR, CARREL_ERROR_INVALID_ARG,
                    "save image cookie offset '%u' is outside its data of %u bytes",
                    img->header.cookie_offset, img->header.data_len);
        return FALSE;
    }
    return TRUE;
}

/* The NUL-terminated UTF-8 string at the start of region, or NULL (error set). */
static char *
string_in_region(const char *region, gsize len, const char *what, GError **error)
{
    const char *end = memchr(region, '\0', len);

    if (!end) {
        g_set_error(error, CARREL_ERROR, CARREL_ERROR_INVALID_ARG,
                    "save image %s is not NUL-terminated", what);
        return NULL;
    }
    if (!g_utf8_validate(region, end - region, NULL)) {
        g_set_error(error, CARREL_ERROR, CARREL_ERROR_INVALID_ARG,
                    "save image %s is not valid UTF-8", what);
        return NULL;
    }
    return g_strdup(region);
}

static gboolean
read_data(int fd, SaveImage *img, GError **error)
{
    guint32 data_len = img->header.data_len;
    guint32 xml_region = img->header.cookie_offset ? img->header.cookie_offset : data_len;
    g_autofree char *data = NULL;
    struct stat st;

    if (fstat(fd, &st) < 0) {
        carrel_hypervisor_set_errno_error(error, errno, "inspecting save image");
        return FALSE;
    }
    if (!S_ISREG(st.st_mode)) {
        g_set_error(error, CARREL_ERROR, CARREL_ERROR_INVALID_ARG,
                    "save image is not a regular file");
        return FALSE;
    }
    /* Checked before allocating: data_len is bounded, but a short file is not worth reading. */
    if (st.st_size <= (goffset)CARREL_SAVEIMAGE_HEADER_SIZE + data_len) {
        g_set_error(error, CARREL_ERROR, CARREL_ERROR_INVALID_ARG,
                    "save image is truncated: %" G_GINT64_FORMAT " bytes leave no memory state "
                    "after %u bytes of data",
                    (gint64)st.st_size, data_len);
        return FALSE;
    }
    data = g_malloc(data_len);
    if (!pread_exact(fd, data, data_len, CARREL_SAVEIMAGE_HEADER_SIZE, "data", error))
        return FALSE;
    img->xml = string_in_region(data, xml_region, "domain xml", error);
    if (!img->xml)
        return FALSE;
    if (!*img->xml) {
        g_set_error(error, CARREL_ERROR, CARREL_ERROR_INVALID_ARG,
                    "save image domain xml is empty");
        return FALSE;
    }
    if (img->header.cookie_offset) {
        img->cookie = string_in_region(data + xml_region, data_len - xml_region, "cookie", error);
        if (!img->cookie)
            return FALSE;
    }
    return TRUE;
}

static gboolean
read_image(int fd, SaveImage *img, GError **error)
{
    if (!pread_exact(fd, img->raw, sizeof(img->raw), 0, "header", error))
        return FALSE;
    img->header.version = get_u32(img->raw, OFFSET_VERSION);
    img->header.data_len = get_u32(img->raw, OFFSET_DATA_LEN);
    img->header.was_running = get_u32(img->raw, OFFSET_WAS_RUNNING);
    img->header.format = get_u32(img->raw, OFFSET_FORMAT);
    img->header.cookie_offset = get_u32(img->raw, OFFSET_COOKIE);
    return check_fixed_header(img, error) && read_data(fd, img, error);
}

gboolean
carrel_hypervisor_saveimage_read_header(int fd, CarrelSaveImageHeader *ret_header, char **ret_xml,
                                        char **ret_cookie, GError **error)
{
    g_auto(SaveImage) img = {0};

    g_return_val_if_fail(fd >= 0, FALSE);
    if (!read_image(fd, &img, error))
        return FALSE;
    if (ret_header)
        *ret_header = img.header;
    if (ret_xml)
        *ret_xml = g_steal_pointer(&img.xml);
    if (ret_cookie)
        *ret_cookie = g_steal_pointer(&img.cookie);
    return TRUE;
}

/* The new data area: xml, NUL, cookie, NUL, zeros; NULL with LIMIT when it does not fit. */
static guint8 *
build_data(const SaveImage *img, const char *new_xml, guint32 *ret_cookie_offset, GError **error)
{
    gsize xml_size = strlen(new_xml) + 1;
    gsize cookie_size = img->cookie ? strlen(img->cookie) + 1 : 0;
    guint8 *data;

    if (xml_size + cookie_size > img->header.data_len) {
        g_set_error(error, CARREL_ERROR, CARREL_ERROR_LIMIT,
                    "domain xml of %" G_GSIZE_FORMAT " bytes and cookie of %" G_GSIZE_FORMAT
                    " bytes do not fit into the %u bytes of the save image",
                    xml_size, cookie_size, img->header.data_len);
        return NULL;
    }
    data = g_malloc0(img->header.data_len);
    memcpy(data, new_xml, xml_size);
    if (img->cookie)
        memcpy(data + xml_size, img->cookie, cookie_size);
    *ret_cookie_offset = img->cookie ? (guint32)xml_size : 0;
    return data;
}

static gboolean
check_new_xml(const char *new_xml, GError **error)
{
    if (new_xml && *new_xml && g_utf8_validate(new_xml, -1, NULL))
        return TRUE;
    g_set_error(error, CARREL_ERROR, CARREL_ERROR_INVALID_ARG,
                "new domain xml is empty or not valid UTF-8");
    return FALSE;
}

gboolean
carrel_hypervisor_saveimage_rewrite_xml(int fd, const char *new_xml, GError **error)
{
    g_auto(SaveImage) img = {0};
    g_autofree guint8 *data = NULL;
    guint32 cookie_offset = 0;

    g_return_val_if_fail(fd >= 0, FALSE);
    if (!check_new_xml(new_xml, error) || !read_image(fd, &img, error))
        return FALSE;
    data = build_data(&img, new_xml, &cookie_offset, error);
    if (!data)
        return FALSE;
    /*
     * Marked incomplete first: a crash while the data is half written then leaves an image
     * that libvirt and read_header refuse, instead of one whose XML and cookie offset disagree.
     */
    if (!pwrite_all(fd, MAGIC_PARTIAL, MAGIC_LEN, 0, error) || !sync_fd(fd, error))
        return FALSE;
    if (!pwrite_all(fd, data, img.header.data_len, CARREL_SAVEIMAGE_HEADER_SIZE, error))
        return FALSE;
    memcpy(img.raw, MAGIC_COMPLETE, MAGIC_LEN);
    put_u32(img.raw, OFFSET_COOKIE, cookie_offset);
    return pwrite_all(fd, img.raw, sizeof(img.raw), 0, error) && sync_fd(fd, error);
}

int
carrel_hypervisor_saveimage_open_as(const char *path, const char *new_xml, GBytes **ret_head,
                                    GError **error)
{
    g_auto(SaveImage) img = {0};
    g_autofree guint8 *data = NULL;
    guint32 cookie_offset = 0;
    GByteArray *head;
    int fd;

    /* An image a crash left half rewritten (by a carreld of before) is made whole first. */
    if (!check_new_xml(new_xml, error) || !carrel_hypervisor_saveimage_recover(path, error))
        return -1;
    fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
    if (fd < 0) {
        carrel_hypervisor_set_errno_error(error, errno, "opening");
        g_prefix_error(error, "save image '%s': ", path);
        return -1;
    }
    if (!read_image(fd, &img, error) ||
        !(data = build_data(&img, new_xml, &cookie_offset, error))) {
        close(fd);
        g_prefix_error(error, "save image '%s': ", path);
        return -1;
    }
    memcpy(img.raw, MAGIC_COMPLETE, MAGIC_LEN);
    put_u32(img.raw, OFFSET_COOKIE, cookie_offset);
    head = g_byte_array_sized_new(sizeof(img.raw) + img.header.data_len);
    g_byte_array_append(head, img.raw, sizeof(img.raw));
    g_byte_array_append(head, data, img.header.data_len);
    *ret_head = g_byte_array_free_to_bytes(head);
    if (lseek(fd, (off_t)(sizeof(img.raw) + img.header.data_len), SEEK_SET) < 0) {
        carrel_hypervisor_set_errno_error(error, errno, "seeking");
        g_clear_pointer(ret_head, g_bytes_unref);
        close(fd);
        return -1;
    }
    return fd;
}

char *
carrel_hypervisor_saveimage_get_xml(const char *path, GError **error)
{
    g_auto(SaveImage) img = {0};
    int fd;
    gboolean ok;

    g_return_val_if_fail(path != NULL, NULL);
    fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
    if (fd < 0) {
        carrel_hypervisor_set_errno_error(error, errno, "opening");
        g_prefix_error(error, "save image '%s': ", path);
        return NULL;
    }
    ok = read_image(fd, &img, error);
    close(fd);
    if (!ok) {
        g_prefix_error(error, "save image '%s': ", path);
        return NULL;
    }
    return g_steal_pointer(&img.xml);
}

/*
 * The journal of a header rewrite: the header and data as they were, beside the image. A
 * crash while the header is half rewritten leaves an image marked incomplete, which libvirt
 * refuses; the journal puts the old header back (saveimage_recover), and the image, whose
 * memory state was never touched, is whole again.
 */
static char *
journal_path(const char *path)
{
    return g_strconcat(path, ".journal", NULL);
}

static gboolean
write_journal(int fd, const char *journal, GError **error)
{
    g_auto(SaveImage) img = {0};
    g_autofree guint8 *old = NULL;
    gsize len;

    if (!read_image(fd, &img, error))
        return FALSE;
    len = CARREL_SAVEIMAGE_HEADER_SIZE + img.header.data_len;
    old = g_malloc(len);
    return pread_exact(fd, old, len, 0, "header", error) &&
           g_file_set_contents_full(journal, (const char *)old, (gssize)len,
                                    G_FILE_SET_CONTENTS_CONSISTENT | G_FILE_SET_CONTENTS_DURABLE,
                                    0600, error);
}

/* Puts a journal's header back over a half-rewritten image (or drops a journal whose rewrite
 * had finished). */
static gboolean
replay_journal(int fd, const char *journal, GError **error)
{
    g_auto(SaveImage) img = {0};
    g_autofree char *old = NULL;
    gsize len = 0;

    if (read_image(fd, &img, NULL))
        return TRUE;
    if (!g_file_get_contents(journal, &old, &len, error))
        return FALSE;
    if (len < CARREL_SAVEIMAGE_HEADER_SIZE || memcmp(old, MAGIC_COMPLETE, MAGIC_LEN) != 0) {
        g_set_error(error, CARREL_ERROR, CARREL_ERROR_INVALID_ARG,
                    "the journal of its header is damaged");
        return FALSE;
    }
    return pwrite_all(fd, old, len, 0, error) && sync_fd(fd, error);
}

static int
open_image_rw(const char *path, GError **error)
{
    /* No symlinks: the path is root's own state, and a link there would be someone's trick. */
    int fd = open(path, O_RDWR | O_CLOEXEC | O_NOFOLLOW);

    if (fd < 0) {
        carrel_hypervisor_set_errno_error(error, errno, "opening");
        g_prefix_error(error, "save image '%s': ", path);
    }
    return fd;
}

gboolean
carrel_hypervisor_saveimage_recover(const char *path, GError **error)
{
    g_autofree char *journal = journal_path(path);
    gboolean ok;
    int fd;

    if (!g_file_test(journal, G_FILE_TEST_EXISTS))
        return TRUE;
    if ((fd = open_image_rw(path, error)) < 0)
        return FALSE;
    ok = replay_journal(fd, journal, error);
    close(fd);
    if (!ok) {
        g_prefix_error(error, "save image '%s': ", path);
        return FALSE;
    }
    (void)unlink(journal);
    return TRUE;
}

gboolean
carrel_hypervisor_saveimage_rewrite_file(const char *path, const char *xml, GError **error)
{
    g_autofree char *journal = journal_path(path);
    gboolean ok;
    int fd;

    if (!check_new_xml(xml, error) || !carrel_hypervisor_saveimage_recover(path, error))
        return FALSE;
    if ((fd = open_image_rw(path, error)) < 0)
        return FALSE;
    ok = write_journal(fd, journal, error) &&
         carrel_hypervisor_saveimage_rewrite_xml(fd, xml, error);
    close(fd);
    if (!ok) {
        g_prefix_error(error, "save image '%s': ", path);
        return FALSE;
    }
    (void)unlink(journal);
    return TRUE;
}

gboolean
carrel_hypervisor_saveimage_create(const char *path, const char *xml, const char *cookie,
                                   GBytes *memory, GError **error)
{
    gsize xml_size = strlen(xml) + 1;
    gsize cookie_size = cookie ? strlen(cookie) + 1 : 0;
    gsize data_len = xml_size + cookie_size + CREATE_PADDING;
    guint8 raw[CARREL_SAVEIMAGE_HEADER_SIZE] = {0};
    g_autofree guint8 *data = NULL;
    gsize memory_len = 0;
    const void *memory_data = g_bytes_get_data(memory, &memory_len);
    gboolean ok;
    int fd;

    if (data_len > CARREL_SAVEIMAGE_MAX_DATA_LEN) {
        g_set_error(error, CARREL_ERROR, CARREL_ERROR_LIMIT, "domain xml is too large to save");
        return FALSE;
    }
    memcpy(raw, MAGIC_COMPLETE, MAGIC_LEN);
    put_u32(raw, OFFSET_VERSION, SUPPORTED_VERSION);
    put_u32(raw, OFFSET_DATA_LEN, (guint32)data_len);
    put_u32(raw, OFFSET_WAS_RUNNING, 1);
    put_u32(raw, OFFSET_COOKIE, cookie ? (guint32)xml_size : 0);
    data = g_malloc0(data_len);
    memcpy(data, xml, xml_size);
    if (cookie)
        memcpy(data + xml_size, cookie, cookie_size);
    fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
    if (fd < 0) {
        carrel_hypervisor_set_errno_error(error, errno, "creating save image");
        return FALSE;
    }
    ok = pwrite_all(fd, raw, sizeof(raw), 0, error) &&
         pwrite_all(fd, data, data_len, sizeof(raw), error) &&
         pwrite_all(fd, memory_data, memory_len, (goffset)(sizeof(raw) + data_len), error) &&
         sync_fd(fd, error);
    close(fd);
    if (!ok)
        unlink(path);
    return ok;
}
