#!/bin/bash
# e2e, libvirtd restarted under running sessions (libvirtd_restart_checks in crash.sh). Its own
# test, run alone after the halves: a libvirtd restart cuts whatever another carreld on this host
# is doing (a create half done), so it cannot run beside them. `tiny` from the cache.
set -uo pipefail
# shellcheck source=tests/e2e/lib.sh
source "$(dirname "$0")/lib.sh"
# shellcheck source=tests/e2e/crash.sh
source "$(dirname "$0")/crash.sh"
trap 'finish; exit $?' EXIT

start_with_tiny || exit 1
check "template warm tiny" carrel template warm tiny
timed libvirtd_restart_checks
exit 0
