/*
 * util: what this host's kernel does with memory, probed.
 */
#include <errno.h>
#include <sys/mman.h>
#include <unistd.h>

#include "util/util.h"

/* The process's resident set, in bytes, or -1. */
static gssize
resident_bytes(GError **error)
{
    g_autofree char *text = NULL;
    g_auto(GStrv) fields = NULL;

    if (!g_file_get_contents("/proc/self/statm", &text, NULL, error))
        return -1;
    fields = g_strsplit(text, " ", 3);
    if (g_strv_length(fields) < 2) {
        g_set_error(error, CARREL_ERROR, CARREL_ERROR_FAILED, "/proc/self/statm: '%s'", text);
        return -1;
    }
    return (gssize)g_ascii_strtoull(fields[1], NULL, 10) * sysconf(_SC_PAGESIZE);
}

gboolean
carrel_util_reads_allocate(gsize probe_bytes, gboolean *ret_allocate, GError **error)
{
    long page = sysconf(_SC_PAGESIZE);
    volatile const char *area;
    gssize before, after;

    area = mmap(NULL, probe_bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (area == MAP_FAILED) {
        g_set_error(error, CARREL_ERROR, CARREL_ERROR_FAILED,
                    "mmap of %" G_GSIZE_FORMAT " bytes: %s", probe_bytes, g_strerror(errno));
        return FALSE;
    }
    before = resident_bytes(error);
    for (gsize off = 0; before >= 0 && off < probe_bytes; off += page)
        (void)area[off];
    after = before < 0 ? -1 : resident_bytes(error);
    munmap((void *)area, probe_bytes);
    if (after < 0)
        return FALSE;
    /* With the shared zero page the reads map nothing new; without it, each allocates. Other
     * threads' allocations meanwhile are far below half the probe. */
    *ret_allocate = after - before >= (gssize)probe_bytes / 2;
    return TRUE;
}
