/*
 * evidence: writing a bundle. Members go out as they are added (a bundle may hold gigabytes of
 * artifacts, never in memory), each hashed on the way; the manifest comes last because it lists
 * them all, then its signature.
 */
#include <errno.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <string.h>
#include <unistd.h>

#include <archive.h>
#include <archive_entry.h>
#include <glib/gstdio.h>

#include "evidence/evidence.h"

#define CHUNK (64 * 1024)

struct _CarrelEvidenceWriter {
    struct archive *ar;
    gint64 mtime;
    GPtrArray *files; /* CarrelEvidenceFile */
    GHashTable *names;
    gboolean finished;
};

CarrelEvidenceWriter *
carrel_evidence_writer_new(int fd, gint64 mtime, GError **error)
{
    g_autoptr(CarrelEvidenceWriter) w = g_new0(CarrelEvidenceWriter, 1);

    w->mtime = mtime;
    w->files = g_ptr_array_new_with_free_func((GDestroyNotify)carrel_evidence_file_free);
    w->names = g_hash_table_new_full(g_str_hash, g_str_equal, g_free, NULL);
    w->ar = archive_write_new();
    /* pax: exact sizes beyond ustar's 8 GiB; block size 512 keeps the output free of padding
     * beyond the tar's own. */
    if (!w->ar || archive_write_set_format_pax_restricted(w->ar) != ARCHIVE_OK ||
        archive_write_set_bytes_per_block(w->ar, 512) != ARCHIVE_OK ||
        archive_write_open_fd(w->ar, fd) != ARCHIVE_OK) {
        g_set_error(error, CARREL_ERROR, CARREL_ERROR_FAILED, "bundle: %s",
                    w->ar ? archive_error_string(w->ar) : "out of memory");
        return NULL;
    }
    return g_steal_pointer(&w);
}

void
carrel_evidence_writer_free(CarrelEvidenceWriter *w)
{
    if (!w)
        return;
    if (w->ar)
        archive_write_free(w->ar);
    g_clear_pointer(&w->files, g_ptr_array_unref);
    g_clear_pointer(&w->names, g_hash_table_unref);
    g_free(w);
}

GPtrArray *
carrel_evidence_writer_files(CarrelEvidenceWriter *w)
{
    return w->files;
}

static gboolean
archive_failed(CarrelEvidenceWriter *w, const char *name, GError **error)
{
    g_set_error(error, CARREL_ERROR, CARREL_ERROR_DISK, "bundle member '%s': %s", name,
                archive_error_string(w->ar) ? archive_error_string(w->ar) : "write failed");
    return FALSE;
}

/* The header of a regular file member; refuses bad or repeated names. */
static gboolean
begin_member(CarrelEvidenceWriter *w, const char *name, guint64 size, GError **error)
{
    struct archive_entry *e;
    int rc;

    if (w->finished || !carrel_evidence_check_name(name, error))
        return w->finished ? archive_failed(w, name, error) : FALSE;
    if (!g_hash_table_add(w->names, g_strdup(name))) {
        g_set_error(error, CARREL_ERROR, CARREL_ERROR_EXISTS, "bundle member '%s' twice", name);
        return FALSE;
    }
    e = archive_entry_new();
    archive_entry_set_pathname(e, name);
    archive_entry_set_filetype(e, AE_IFREG);
    archive_entry_set_perm(e, 0644);
    archive_entry_set_size(e, (la_int64_t)size);
    archive_entry_set_mtime(e, w->mtime, 0);
    archive_entry_set_uid(e, 0);
    archive_entry_set_gid(e, 0);
    rc = archive_write_header(w->ar, e);
    archive_entry_free(e);
    return rc == ARCHIVE_OK || archive_failed(w, name, error);
}

static gboolean
write_data(CarrelEvidenceWriter *w, const char *name, const void *data, gsize len, GError **error)
{
    return len == 0 || archive_write_data(w->ar, data, len) == (la_ssize_t)len ||
           archive_failed(w, name, error);
}

static void
record(CarrelEvidenceWriter *w, const char *name, const char *kind, guint64 size, GChecksum *sum)
{
    CarrelEvidenceFile *f = g_new0(CarrelEvidenceFile, 1);

    f->path = g_strdup(name);
    f->kind = g_strdup(kind);
    f->size = size;
    f->sha256 = g_strdup(g_checksum_get_string(sum));
    g_ptr_array_add(w->files, f);
}

gboolean
carrel_evidence_writer_add_bytes(CarrelEvidenceWriter *w, const char *name, const char *kind,
                                 const void *data, gsize len, GError **error)
{
    g_autoptr(GChecksum) sum = g_checksum_new(G_CHECKSUM_SHA256);

    if (!begin_member(w, name, len, error) || !write_data(w, name, data, len, error))
        return FALSE;
    g_checksum_update(sum, data, len);
    record(w, name, kind, len, sum);
    return TRUE;
}

/* Copies exactly size bytes of fd: a file that shrank under us would leave a short member. */
static gboolean
copy_fd(CarrelEvidenceWriter *w, const char *name, int fd, guint64 size, GChecksum *sum,
        GError **error)
{
    g_autofree guint8 *buf = g_malloc(CHUNK);
    guint64 left = size;

    while (left > 0) {
        ssize_t n = read(fd, buf, (size_t)MIN(left, (guint64)CHUNK));

        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0) {
            g_set_error(error, CARREL_ERROR, CARREL_ERROR_DISK,
                        "bundle member '%s': its file ended early or could not be read", name);
            return FALSE;
        }
        if (!write_data(w, name, buf, (gsize)n, error))
            return FALSE;
        g_checksum_update(sum, buf, (gssize)n);
        left -= (guint64)n;
    }
    return TRUE;
}

gboolean
carrel_evidence_writer_add_file(CarrelEvidenceWriter *w, const char *name, const char *kind,
                                const char *host_path, GError **error)
{
    g_autoptr(GChecksum) sum = g_checksum_new(G_CHECKSUM_SHA256);
    int fd = g_open(host_path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC, 0);
    struct stat st;
    gboolean ok;

    if (fd < 0 || fstat(fd, &st) < 0 || !S_ISREG(st.st_mode)) {
        int saved = fd < 0 ? errno : EINVAL;
        if (fd >= 0)
            close(fd);
        g_set_error(error, CARREL_ERROR,
                    saved == ENOENT ? CARREL_ERROR_NOT_FOUND : CARREL_ERROR_DISK,
                    "bundle member '%s': %s", name, g_strerror(saved));
        return FALSE;
    }
    ok = begin_member(w, name, (guint64)st.st_size, error) &&
         copy_fd(w, name, fd, (guint64)st.st_size, sum, error);
    close(fd);
    if (ok)
        record(w, name, kind, (guint64)st.st_size, sum);
    return ok;
}

gboolean
carrel_evidence_writer_finish(CarrelEvidenceWriter *w, CarrelEvidenceManifest *m,
                              const CarrelEvidenceKey *key, GError **error)
{
    g_autofree char *text = NULL;
    g_autofree char *sig = NULL;

    g_ptr_array_extend_and_steal(m->files, g_steal_pointer(&w->files));
    w->files = g_ptr_array_new_with_free_func((GDestroyNotify)carrel_evidence_file_free);
    g_free(m->host_key);
    m->host_key = g_strdup(carrel_evidence_key_public(key));
    g_free(m->host_fingerprint);
    m->host_fingerprint = g_strdup(carrel_evidence_key_fingerprint(key));
    text = carrel_evidence_manifest_to_text(m);
    if (!(sig = carrel_evidence_key_sign(key, (const guint8 *)text, strlen(text), error)))
        return FALSE;
    if (!begin_member(w, CARREL_EVIDENCE_MANIFEST, strlen(text), error) ||
        !write_data(w, CARREL_EVIDENCE_MANIFEST, text, strlen(text), error) ||
        !begin_member(w, CARREL_EVIDENCE_SIGNATURE, strlen(sig) + 1, error) ||
        !write_data(w, CARREL_EVIDENCE_SIGNATURE, sig, strlen(sig), error) ||
        !write_data(w, CARREL_EVIDENCE_SIGNATURE, "\n", 1, error))
        return FALSE;
    w->finished = TRUE;
    if (archive_write_close(w->ar) != ARCHIVE_OK)
        return archive_failed(w, "(end)", error);
    return TRUE;
}
