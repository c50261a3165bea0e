/*
 * carrel-qemu ARGS...: QEMU without transparent huge pages. libvirt starts it as a session's
 * emulator (<emulator> in the domain XML); it turns THP off for itself, which execve keeps, and
 * becomes CARREL_QEMU_BINARY with the same arguments.
 *
 * Why: QEMU asks for huge pages on guest RAM. Restoring a saved guest writes pages all over its
 * RAM, and each write into an untouched 2 MiB region makes the kernel allocate and zero the
 * whole region: a 512 MiB guest whose saved state is 150 MiB ends up with all 512 MiB zeroed
 * and resident, which was most of a warm create's CPU. With 4 KiB pages only the pages written
 * are allocated (bench/warm, bench/lifecycle's fork x4; README "Performance").
 */
#include <stdio.h>
#include <sys/prctl.h>
#include <unistd.h>

#include "carrel-config.h"

int
main(int argc, char **argv)
{
    (void)argc;
    /* Without it QEMU still runs, only slower to restore: say so in the domain's log. */
    if (prctl(PR_SET_THP_DISABLE, 1, 0, 0, 0) != 0)
        perror("carrel-qemu: turning transparent huge pages off");
    argv[0] = (char *)CARREL_QEMU_BINARY;
    execv(CARREL_QEMU_BINARY, argv);
    perror("carrel-qemu: starting " CARREL_QEMU_BINARY);
    return 127;
}
