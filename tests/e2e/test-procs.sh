#!/bin/bash
# e2e, the process part alone (tests/e2e/procs.sh; test-sessions.sh runs it too): build or reuse
# `tiny`, then streamed and background commands on one session. Needs root and qemu:///system.
set -uo pipefail
# shellcheck source=tests/e2e/lib.sh
source "$(dirname "$0")/lib.sh"
# shellcheck source=tests/e2e/procs.sh
source "$(dirname "$0")/procs.sh"
trap 'finish; exit $?' EXIT

start_with_tiny || exit 1
procs_checks
