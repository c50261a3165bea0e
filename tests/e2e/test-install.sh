#!/bin/bash
# e2e, an installed carrel (tests/e2e/install.sh): `meson install --destdir` of this build, its
# carreld builds `tiny` from the installed recipe into an image cache of its own (a real build,
# never the shared cache) and boots a cold session of it. It needs no carreld of the build tree,
# so scripts/test runs it as a tier of its own beside the tiers before e2e, where the mmdebstrap
# of that build overlaps with work that only uses the CPU. Alone:
# meson test -C build --suite e2e-install. Needs root and qemu:///system.
set -uo pipefail
# shellcheck source=tests/e2e/lib.sh
source "$(dirname "$0")/lib.sh"
# shellcheck source=tests/e2e/install.sh
source "$(dirname "$0")/install.sh"
trap 'finish; exit $?' EXIT

timed install_checks
