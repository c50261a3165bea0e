/*
 * carrel-qemu ARGS...: QEMU as every session's emulator. libvirt starts it (<emulator> in the
 * domain XML); it decides transparent huge pages (THP) for itself, which execve keeps, and
 * becomes CARREL_QEMU_BINARY with the same arguments.
 *
 * Why: QEMU asks for huge pages on guest RAM. Where the kernel maps the shared zero page on a
 * read of untouched memory, restoring a saved guest allocates only what it writes, but with THP
 * each write into an untouched 2 MiB region makes the kernel allocate and zero the whole region:
 * a 512 MiB guest whose saved state is 150 MiB ends up with all 512 MiB zeroed and resident,
 * which was most of a warm create's CPU. There THP goes off (bench/warm, bench/lifecycle's fork
 * x4; README "Performance"). Where a read allocates (no shared zero page), QEMU's load reads
 * every page, so all of guest RAM is resident either way: there THP stays on, one fault per
 * 2 MiB instead of 512, and a warm create of `tiny` took 1.6-2.3 s instead of 3.2 s here.
 */
#include <stdio.h>
#include <sys/prctl.h>
#include <unistd.h>

#include "carrel-config.h"
#include "util/util.h"

/* This process has one thread: a small probe is exact, and costs ~250 faults. */
#define PROBE_BYTES (1024 * 1024)

int
main(int argc, char **argv)
{
    g_autoptr(GError) error = NULL;
    gboolean reads_allocate = FALSE;

    (void)argc;
    /* Unknown: THP off, as on most hosts. Either way QEMU runs; say why in the domain's log. */
    if (!carrel_util_reads_allocate(PROBE_BYTES, &reads_allocate, &error))
        fprintf(stderr, "carrel-qemu: probing memory: %s\n", error->message);
    if (!reads_allocate && prctl(PR_SET_THP_DISABLE, 1, 0, 0, 0) != 0)
        perror("carrel-qemu: turning transparent huge pages off");
    argv[0] = (char *)CARREL_QEMU_BINARY;
    execv(CARREL_QEMU_BINARY, argv);
    perror("carrel-qemu: starting " CARREL_QEMU_BINARY);
    return 127;
}
