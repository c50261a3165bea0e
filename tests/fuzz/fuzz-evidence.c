/*
 * libFuzzer harness for evidence bundles (untrusted: an auditor may be handed anything): the
 * whole input as a tar through carrel_evidence_verify (streamed from a memfd, never extracted),
 * and as manifest text and audit rows through their parsers. A report is always given, and it
 * only says ok with a manifest and a good signature.
 * Built with -Dfuzz=true and clang (see tests/fuzz/meson.build).
 */
#define _GNU_SOURCE
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "evidence/evidence.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void
check_verify(const uint8_t *data, size_t size)
{
    g_autoptr(CarrelEvidenceReport) r = NULL;
    g_autoptr(GError) error = NULL;
    int fd = memfd_create("bundle", MFD_CLOEXEC);

    if (fd < 0 || write(fd, data, size) != (ssize_t)size || lseek(fd, 0, SEEK_SET) != 0)
        __builtin_trap();
    r = carrel_evidence_verify(fd, "sha256:00", &error);
    close(fd);
    if (!r)
        __builtin_trap();
    if (carrel_evidence_report_ok(r) && (!r->manifest || !r->signature_ok || !r->key_pinned))
        __builtin_trap();
    for (guint i = 0; i < r->problems->len; i++) {
        const CarrelEvidenceProblem *p = g_ptr_array_index(r->problems, i);
        /* Names in a report are escaped: no control character reaches a terminal. */
        for (const char *c = p->file; c && *c; c++)
            if ((guchar)*c < 0x20)
                __builtin_trap();
    }
}

static void
check_parsers(const uint8_t *data, size_t size)
{
    g_autoptr(CarrelEvidenceManifest) m = NULL;
    g_autoptr(GError) error = NULL;
    gint64 rows = -1;

    m = carrel_evidence_manifest_parse((const char *)data, size, &error);
    if ((m == NULL) == (error == NULL))
        __builtin_trap();
    for (guint i = 0; m && i < m->files->len; i++) {
        const CarrelEvidenceFile *f = g_ptr_array_index(m->files, i);
        if (!carrel_evidence_check_name(f->path, NULL))
            __builtin_trap();
    }
    g_clear_error(&error);
    if (carrel_evidence_audit_check((const char *)data, size, "s-0123456789ab", &rows, &error) ==
        (error != NULL))
        __builtin_trap();
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    check_verify(data, size);
    check_parsers(data, size);
    return 0;
}
