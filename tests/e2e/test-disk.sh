#!/bin/bash
# e2e, the disk part alone (tests/e2e/disk.sh; test-sessions.sh runs it too): build or reuse
# `tiny`, a session of the main carreld, then a guest of a second carreld that fills the host's
# disk. Needs root and qemu:///system; about 5-15 minutes under TCG.
set -uo pipefail
# shellcheck source=tests/e2e/lib.sh
source "$(dirname "$0")/lib.sh"
# shellcheck source=tests/e2e/disk.sh
source "$(dirname "$0")/disk.sh"
trap 'disk_cleanup; finish; exit $?' EXIT

start_with_tiny || exit 1
other="$(carrel create tiny --name e2e-other --json | jq -r .id)"
check_eq "a session of the main carreld runs" "running" "$(carrel show "$other" --json | jq -r .state)"
disk_checks "$other"
carrel rm "$other" >/dev/null
