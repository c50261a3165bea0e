/*
 * The libvirt backend's fast screenshot: QEMU's own PPM, written by QEMU straight into a memfd
 * of carreld's. virDomainScreenshot makes QEMU 7.2 encode PNG with libpng's defaults (zlib level
 * 6, adaptive filters: about 320 M instructions for a 1024x768 desktop, bench-image's "qemu"),
 * libvirt then copies it through a file and a stream, and carrel decodes it again to validate it
 * (about 48 M). A PPM costs QEMU a few copies, and carrel only its strict header check. The fd
 * travels with the QMP command (virDomainQemuMonitorCommandWithFiles, libvirt >= 8.2) into an fd
 * set, and screendump writes to /dev/fdset/N; the set is removed whatever happens.
 */
#define _GNU_SOURCE /* memfd_create */
#include <errno.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#define CARREL_HYPERVISOR_PRIV_H_ALLOW
#include "hypervisor/hypervisor-libvirt-priv.h"

/* QEMU's reply member "return" (an object or {}), or NULL with HYPERVISOR and QEMU's words. */
static JsonObject *
qmp_return(JsonNode *root, const char *what, GError **error)
{
    JsonObject *obj = root && JSON_NODE_HOLDS_OBJECT(root) ? json_node_get_object(root) : NULL;
    JsonNode *ret = obj ? json_object_get_member(obj, "return") : NULL;
    JsonObject *err = obj && json_object_has_member(obj, "error")
                          ? json_object_get_object_member(obj, "error")
                          : NULL;
    const char *desc = err ? json_object_get_string_member_with_default(err, "desc", "?") : NULL;

    if (ret && JSON_NODE_HOLDS_OBJECT(ret))
        return json_node_get_object(ret);
    g_set_error(error, CARREL_ERROR, CARREL_ERROR_HYPERVISOR, "QEMU refused %s: %s", what,
                desc && carrel_util_is_clean_text(desc) ? desc : "unreadable reply");
    return NULL;
}

static gboolean
qmp(virDomainPtr dom, const char *command, int fd, const char *what, gint64 *ret_fdset,
    GError **error)
{
    g_autoptr(JsonNode) root = NULL;
    char *reply = NULL;
    JsonObject *ret;
    int rc;

    rc = fd >= 0 ? virDomainQemuMonitorCommandWithFiles(dom, command, 1, &fd, NULL, NULL, &reply, 0)
                 : virDomainQemuMonitorCommand(dom, command, &reply, 0);
    if (rc < 0) {
        carrel_hypervisor_libvirt_set_error(error, what);
        return FALSE;
    }
    root = json_from_string(reply, NULL);
    free(reply);
    if (!(ret = qmp_return(root, what, error)))
        return FALSE;
    if (ret_fdset) {
        JsonNode *id = json_object_get_member(ret, "fdset-id");

        if (!id || json_node_get_value_type(id) != G_TYPE_INT64) {
            g_set_error(error, CARREL_ERROR, CARREL_ERROR_HYPERVISOR,
                        "QEMU's %s reply has no fdset-id", what);
            return FALSE;
        }
        *ret_fdset = json_node_get_int(id);
    }
    return TRUE;
}

/* The memfd's bytes, at most CARREL_HYPERVISOR_SCREENSHOT_MAX (QEMU writes what the guest's
 * screen size makes: untrusted). */
static GBytes *
read_memfd(int fd, GError **error)
{
    struct stat st;
    g_autofree guint8 *data = NULL;
    gsize done = 0;

    if (fstat(fd, &st) != 0) {
        g_set_error(error, CARREL_ERROR, CARREL_ERROR_INTERNAL, "reading the screen: %s",
                    g_strerror(errno));
        return NULL;
    }
    if (st.st_size <= 0 || st.st_size > CARREL_HYPERVISOR_SCREENSHOT_MAX) {
        g_set_error(error, CARREL_ERROR,
                    st.st_size <= 0 ? CARREL_ERROR_HYPERVISOR : CARREL_ERROR_LIMIT,
                    "screendump of %lld bytes is empty or exceeds %d bytes", (long long)st.st_size,
                    CARREL_HYPERVISOR_SCREENSHOT_MAX);
        return NULL;
    }
    data = g_malloc((gsize)st.st_size);
    while (done < (gsize)st.st_size) {
        ssize_t n = pread(fd, data + done, (gsize)st.st_size - done, (off_t)done);

        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0) {
            g_set_error(error, CARREL_ERROR, CARREL_ERROR_INTERNAL, "reading the screen: %s",
                        n < 0 ? g_strerror(errno) : "short read");
            return NULL;
        }
        done += (gsize)n;
    }
    return g_bytes_new_take(g_steal_pointer(&data), done);
}

/* A write-only descriptor of mem: QEMU hands out an fd set's member only for the access mode
 * screendump opens with (O_WRONLY). */
static int
open_write_end(int mem, GError **error)
{
    g_autofree char *path = g_strdup_printf("/proc/self/fd/%d", mem);
    int fd = open(path, O_WRONLY | O_CLOEXEC);

    if (fd < 0)
        g_set_error(error, CARREL_ERROR, CARREL_ERROR_INTERNAL, "opening the screen buffer: %s",
                    g_strerror(errno));
    return fd;
}

/* QEMU writes the screen into mem (through a write-only copy it keeps in an fd set). */
static gboolean
dump_into(virDomainPtr dom, int mem, GError **error)
{
    g_autofree char *dump = NULL;
    g_autofree char *remove = NULL;
    g_autoptr(GError) cleanup = NULL;
    gint64 fdset = -1;
    int wr = open_write_end(mem, error);
    gboolean ok;

    if (wr < 0)
        return FALSE;
    ok = qmp(dom, "{\"execute\":\"add-fd\"}", wr, "add-fd", &fdset, error);
    /* QEMU holds its own copy now; ours would only keep the buffer's write end open. */
    close(wr);
    if (!ok)
        return FALSE;
    dump = g_strdup_printf("{\"execute\":\"screendump\",\"arguments\":{\"filename\":"
                           "\"/dev/fdset/%" G_GINT64_FORMAT "\"}}",
                           fdset);
    ok = qmp(dom, dump, -1, "screendump", NULL, error);
    remove = g_strdup_printf(
        "{\"execute\":\"remove-fd\",\"arguments\":{\"fdset-id\":%" G_GINT64_FORMAT "}}", fdset);
    /* A set left behind holds one small fd in QEMU until it exits: not worth failing for. */
    if (!qmp(dom, remove, -1, "remove-fd", NULL, &cleanup))
        g_debug("screendump: %s", cleanup->message);
    return ok;
}

gboolean
carrel_hypervisor_libvirt_screendump(virDomainPtr dom, GBytes **ret_image, GError **error)
{
    int mem = memfd_create("carrel-screen", MFD_CLOEXEC);
    GBytes *image = NULL;

    if (mem < 0) {
        g_set_error(error, CARREL_ERROR, CARREL_ERROR_INTERNAL, "memfd_create: %s",
                    g_strerror(errno));
        return FALSE;
    }
    if (dump_into(dom, mem, error))
        image = read_memfd(mem, error);
    close(mem);
    if (!image)
        return FALSE;
    *ret_image = image;
    return TRUE;
}
