#!/bin/bash
# e2e, the evidence bundle part alone (tests/e2e/bundle.sh; test-sessions.sh runs it too): build
# or reuse `tiny`, then export a session's bundle and verify it, tampered copies too. Needs root
# and qemu:///system.
set -uo pipefail
# shellcheck source=tests/e2e/lib.sh
source "$(dirname "$0")/lib.sh"
# shellcheck source=tests/e2e/bundle.sh
source "$(dirname "$0")/bundle.sh"
trap 'finish; exit $?' EXIT

start_with_tiny || exit 1
bundle_checks
