#!/bin/bash
# e2e, the process part alone (tests/e2e/procs.sh; test-sessions.sh runs it too): build or reuse
# `tiny`, then streamed and background commands on one session. Needs root and qemu:///system.
set -uo pipefail
# shellcheck source=tests/e2e/lib.sh
source "$(dirname "$0")/lib.sh"
# shellcheck source=tests/e2e/procs.sh
source "$(dirname "$0")/procs.sh"
trap 'finish; exit $?' EXIT

start_daemon || exit 1
E2E_ACCEL="$(carrel version --json | jq -r .server.accel)"
export CARREL_ACCEL="$E2E_ACCEL" E2E_ACCEL
check "template build tiny" carrel template build tiny
procs_checks
