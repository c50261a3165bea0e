/*
 * A save image split into its device state and a RAM file (hypervisor-migstream.c says why):
 * the image is read through one mapping, the RAM's pages written in runs of consecutive pages,
 * each run in one pwritev, and pages the save has as zero left as holes.
 */
#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <unistd.h>

#include <glib/gstdio.h>

#define CARREL_HYPERVISOR_PRIV_H_ALLOW
#include "hypervisor/hypervisor-priv.h"

/* libvirt's name for the guest's RAM without NUMA (the block carrel-qemu puts into a file). */
#define RAM_BLOCK "pc.ram"
#define PAGE 4096U
/* Pages gathered for one pwritev (IOV_MAX is 1024). */
#define RUN_PAGES 256

typedef struct {
    int fd;
    guint8 *written; /* a bit per page that holds data: a zero page must overwrite it */
    guint64 block_size;
    guint64 run_offset; /* where the gathered run starts */
    struct iovec run[RUN_PAGES];
    guint run_len;
    guint8 fill_page[PAGE];
} RamFile;

static gboolean
write_at(int fd, const struct iovec *iov, guint count, guint64 offset, GError **error)
{
    struct iovec rest[RUN_PAGES];
    guint n = count;

    memcpy(rest, iov, count * sizeof(*iov));
    for (guint first = 0; first < n;) {
        ssize_t done = pwritev(fd, rest + first, (int)(n - first), (off_t)offset);

        if (done < 0 && errno == EINTR)
            continue;
        if (done <= 0) {
            carrel_hypervisor_set_errno_error(error, done < 0 ? errno : EIO, "writing RAM file");
            return FALSE;
        }
        offset += (guint64)done;
        /* A short write: skip what went, resume inside the vector it stopped in. */
        while (first < n && (gsize)done >= rest[first].iov_len)
            done -= (ssize_t)rest[first++].iov_len;
        if (first < n) {
            rest[first].iov_base = (guint8 *)rest[first].iov_base + done;
            rest[first].iov_len -= (gsize)done;
        }
    }
    return TRUE;
}

static gboolean
flush_run(RamFile *ram, GError **error)
{
    gboolean ok =
        ram->run_len == 0 || write_at(ram->fd, ram->run, ram->run_len, ram->run_offset, error);

    ram->run_len = 0;
    return ok;
}

static gboolean
page_written(const RamFile *ram, guint64 offset)
{
    guint64 i = offset / PAGE;

    return (ram->written[i / 8] >> (i % 8)) & 1;
}

static gboolean
take_page(guint64 block_size, guint64 offset, const guint8 *page, guint8 fill, gpointer user_data,
          GError **error)
{
    RamFile *ram = user_data;
    guint64 i = offset / PAGE;

    if (!ram->written) {
        ram->block_size = block_size;
        ram->written = g_malloc0((gsize)(block_size / PAGE / 8 + 1));
    }
    /* A zero page of a hole stays a hole (the file starts as one). */
    if (!page && fill == 0 && !page_written(ram, offset))
        return TRUE;
    if (!page) {
        /* Rare (a page the guest filled, or zeroed after it was sent): on its own. */
        memset(ram->fill_page, fill, PAGE);
        if (!flush_run(ram, error) ||
            !write_at(ram->fd, &(struct iovec){ram->fill_page, PAGE}, 1, offset, error))
            return FALSE;
    } else {
        if (ram->run_len == RUN_PAGES ||
            (ram->run_len > 0 && ram->run_offset + (guint64)ram->run_len * PAGE != offset)) {
            if (!flush_run(ram, error))
                return FALSE;
        }
        if (ram->run_len == 0)
            ram->run_offset = offset;
        ram->run[ram->run_len++] = (struct iovec){(void *)page, PAGE};
    }
    ram->written[i / 8] |= (guint8)(1U << (i % 8));
    return TRUE;
}

/* The image mapped, and where QEMU's stream starts in it. */
static const guint8 *
map_image(int fd, gsize *ret_size, gsize *ret_stream, GError **error)
{
    CarrelSaveImageHeader header;
    struct stat st;
    void *map;

    if (!carrel_hypervisor_saveimage_read_header(fd, &header, NULL, NULL, error))
        return NULL;
    if (fstat(fd, &st) < 0) {
        carrel_hypervisor_set_errno_error(error, errno, "inspecting");
        return NULL;
    }
    /* Read once, front to back, just after it was written: already in the page cache. */
    map = mmap(NULL, (gsize)st.st_size, PROT_READ, MAP_PRIVATE | MAP_POPULATE, fd, 0);
    if (map == MAP_FAILED) {
        carrel_hypervisor_set_errno_error(error, errno, "mapping");
        return NULL;
    }
    *ret_size = (gsize)st.st_size;
    *ret_stream = CARREL_SAVEIMAGE_HEADER_SIZE + header.data_len;
    return map;
}

static gboolean
write_device(const char *path, const guint8 *head, gsize head_len, GByteArray *stream,
             GError **error)
{
    int fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0600);
    struct iovec iov[2] = {{(void *)head, head_len}, {stream->data, stream->len}};
    gboolean ok;

    if (fd < 0) {
        carrel_hypervisor_set_errno_error(error, errno, "creating the device state");
        return FALSE;
    }
    ok = write_at(fd, iov, 2, 0, error);
    close(fd);
    return ok;
}

/* The split with the image mapped and the RAM file open. */
static gboolean
split_mapped(const guint8 *image, gsize size, gsize stream_at, RamFile *ram,
             const char *device_path, GError **error)
{
    g_autoptr(GByteArray) device = g_byte_array_new();
    guint64 block_size = 0;

    if (stream_at >= size) {
        g_set_error(error, CARREL_ERROR, CARREL_ERROR_INVALID_ARG, "no memory state");
        return FALSE;
    }
    if (!carrel_hypervisor_migstream_split(image + stream_at, size - stream_at, RAM_BLOCK, device,
                                           &block_size, take_page, ram, error) ||
        !flush_run(ram, error))
        return FALSE;
    if (ftruncate(ram->fd, (off_t)block_size) < 0) {
        carrel_hypervisor_set_errno_error(error, errno, "sizing the RAM file");
        return FALSE;
    }
    return write_device(device_path, image, stream_at, device, error);
}

gboolean
carrel_hypervisor_saveimage_split_ram(CarrelHypervisor *hv, const char *save_path,
                                      const char *device_path, const char *ram_path, GError **error)
{
    RamFile ram = {.fd = -1};
    const guint8 *image = NULL;
    gsize size = 0, stream_at = 0;
    gboolean ok = FALSE;
    int fd;

    g_return_val_if_fail(hv != NULL && save_path != NULL && device_path != NULL, FALSE);
    g_return_val_if_fail(ram_path != NULL, FALSE);
    fd = open(save_path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
    if (fd < 0)
        carrel_hypervisor_set_errno_error(error, errno, "opening");
    else if ((image = map_image(fd, &size, &stream_at, error)) &&
             carrel_hypervisor_make_qemu_file(hv, ram_path, error)) {
        ram.fd = open(ram_path, O_WRONLY | O_CLOEXEC | O_NOFOLLOW);
        if (ram.fd < 0)
            carrel_hypervisor_set_errno_error(error, errno, "opening the RAM file");
        else
            ok = split_mapped(image, size, stream_at, &ram, device_path, error);
    }
    if (ram.fd >= 0)
        close(ram.fd);
    if (image)
        munmap((void *)image, size);
    if (fd >= 0)
        close(fd);
    g_free(ram.written);
    if (!ok) {
        (void)g_unlink(ram_path);
        (void)g_unlink(device_path);
        g_prefix_error(error, "splitting save image '%s': ", save_path);
    }
    return ok;
}
