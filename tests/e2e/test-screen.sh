#!/bin/bash
# e2e, the screen-size part alone (tests/e2e/screen.sh; test-sessions.sh runs it too): build or
# reuse `tiny`, then sessions of their own sizes. Needs root and qemu:///system.
set -uo pipefail
# shellcheck source=tests/e2e/lib.sh
source "$(dirname "$0")/lib.sh"
# shellcheck source=tests/e2e/screen.sh
source "$(dirname "$0")/screen.sh"
trap 'finish; exit $?' EXIT

start_with_tiny || exit 1
screen_checks
