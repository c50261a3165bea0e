/*
 * The libvirt backend's restore of a save image as another domain. libvirt refuses an edited
 * XML with another UUID, so the image must carry the new domain's XML in its own header. Instead
 * of rewriting the shared file (which made every restore of one image wait for the one before),
 * each restore reads from a FIFO of its own: a thread writes the header with the new XML, then
 * splices the image's memory stream after it. libvirt reads the header from the FIFO and hands
 * it to QEMU as its incoming migration, as it does for compressed images. The image is only
 * read, so a warm state or a snapshot can be restored as many domains at once.
 */
#define _GNU_SOURCE /* splice, F_SETPIPE_SZ */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <glib/gstdio.h>

#define CARREL_HYPERVISOR_PRIV_H_ALLOW
#include "hypervisor/hypervisor-libvirt-priv.h"

/* What one splice moves at most, and the pipe's size (the kernel may give less). */
#define FEED_CHUNK (1024 * 1024)
/* How often the writer looks whether libvirt opened the FIFO yet. */
#define FEED_OPEN_POLL_US 2000

typedef struct {
    char *fifo;
    int src;      /* the image, positioned at its memory stream */
    GBytes *head; /* header and data area with the new XML */
    gint stop;    /* the restore is over: a writer still waiting to open gives up */
    int errsv;    /* the writer's failure (errno), 0 when it wrote everything */
} Feed;

static int
open_writer(Feed *feed)
{
    for (;;) {
        int fd = open(feed->fifo, O_WRONLY | O_NONBLOCK | O_CLOEXEC);
        if (fd >= 0) {
            /* Blocking from here: libvirt and QEMU read at their pace. */
            (void)fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) & ~O_NONBLOCK);
            (void)fcntl(fd, F_SETPIPE_SZ, FEED_CHUNK);
            return fd;
        }
        if (errno != ENXIO || g_atomic_int_get(&feed->stop))
            return -1;
        g_usleep(FEED_OPEN_POLL_US);
    }
}

static gboolean
write_all(int fd, const guint8 *buf, gsize len)
{
    while (len > 0) {
        ssize_t n = write(fd, buf, len);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            return FALSE;
        buf += n;
        len -= (gsize)n;
    }
    return TRUE;
}

static gboolean
splice_rest(int src, int fd)
{
    for (;;) {
        ssize_t n = splice(src, NULL, fd, NULL, FEED_CHUNK, SPLICE_F_MOVE | SPLICE_F_MORE);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            return n == 0;
    }
}

static gpointer
feed_thread(gpointer data)
{
    Feed *feed = data;
    sigset_t pipe_only;
    gsize len;
    const guint8 *head = g_bytes_get_data(feed->head, &len);
    int fd;

    /* A reader that went away (QEMU refused the stream) is EPIPE here, not a signal. */
    sigemptyset(&pipe_only);
    sigaddset(&pipe_only, SIGPIPE);
    pthread_sigmask(SIG_BLOCK, &pipe_only, NULL);
    fd = open_writer(feed);
    if (fd < 0) {
        feed->errsv = g_atomic_int_get(&feed->stop) ? ECANCELED : errno;
        return NULL;
    }
    if (!write_all(fd, head, len) || !splice_rest(feed->src, fd))
        feed->errsv = errno ? errno : EIO;
    close(fd);
    return NULL;
}

/* A private folder in the scratch folder with the FIFO, or NULL. */
static char *
make_fifo(CarrelHypervisor *hv, char **ret_dir, GError **error)
{
    g_autofree char *dir = g_build_filename(carrel_hypervisor_get_scratch_dir(hv),
                                            CARREL_HYPERVISOR_SCRATCH_PREFIX "XXXXXX", NULL);
    g_autofree char *fifo = NULL;

    if (!g_mkdtemp_full(dir, 0700)) {
        carrel_hypervisor_set_errno_error(error, errno, "restoring: making a scratch folder");
        return NULL;
    }
    fifo = g_build_filename(dir, "memory.fifo", NULL);
    if (mkfifo(fifo, 0600) < 0) {
        carrel_hypervisor_set_errno_error(error, errno, "restoring: making a FIFO");
        (void)g_rmdir(dir);
        return NULL;
    }
    *ret_dir = g_steal_pointer(&dir);
    return g_steal_pointer(&fifo);
}

static gboolean
restore_through(CarrelLibvirtBackend *be, Feed *feed, GError **error)
{
    GThread *writer = g_thread_new("carrel-restore-feed", feed_thread, feed);
    int rc = virDomainRestoreFlags(carrel_hypervisor_libvirt_conn(be), feed->fifo, NULL,
                                   VIR_DOMAIN_SAVE_RUNNING);

    if (rc < 0)
        carrel_hypervisor_libvirt_set_error(error, "restoring");
    g_atomic_int_set(&feed->stop, 1);
    g_thread_join(writer);
    /* libvirt returns once QEMU has the whole stream: a writer that failed made it fail too. */
    if (rc == 0 && feed->errsv) {
        carrel_hypervisor_set_errno_error(error, feed->errsv, "restoring: feeding the image");
        return FALSE;
    }
    return rc == 0;
}

gboolean
carrel_hypervisor_libvirt_restore(CarrelHypervisor *hv, const char *path, const char *xml,
                                  GError **error)
{
    CarrelLibvirtBackend *be = hv->backend_data;
    g_autoptr(virDomain) old = NULL;
    g_autoptr(GBytes) head = NULL;
    g_autofree char *name = NULL;
    g_autofree char *dir = NULL;
    Feed feed = {.src = -1};
    gboolean ok;

    if (carrel_hypervisor_libvirt_refuse_on_test(be, "restoring", error))
        return FALSE;
    if (!carrel_hypervisor_scan_xml(xml, &name, NULL, NULL, error))
        return FALSE;
    if (!name || !*name) {
        g_set_error(error, CARREL_ERROR, CARREL_ERROR_INVALID_ARG, "domain xml has no name");
        return FALSE;
    }
    old = virDomainLookupByName(carrel_hypervisor_libvirt_conn(be), name);
    if (old) {
        g_set_error(error, CARREL_ERROR, CARREL_ERROR_EXISTS, "domain already exists");
        return FALSE;
    }
    virResetLastError();
    feed.src = carrel_hypervisor_saveimage_open_as(path, xml, &head, error);
    if (feed.src < 0)
        return FALSE;
    feed.head = head;
    feed.fifo = make_fifo(hv, &dir, error);
    ok = feed.fifo && restore_through(be, &feed, error);
    close(feed.src);
    if (feed.fifo) {
        (void)g_unlink(feed.fifo);
        (void)g_rmdir(dir);
    }
    g_free(feed.fifo);
    return ok;
}
