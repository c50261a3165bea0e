#!/bin/bash
# e2e, the shell part alone (tests/e2e/shell.sh; test-sessions.sh runs it too): build or reuse
# `tiny`, then carrel shell on one session. Needs root and qemu:///system.
set -uo pipefail
# shellcheck source=tests/e2e/lib.sh
source "$(dirname "$0")/lib.sh"
# shellcheck source=tests/e2e/shell.sh
source "$(dirname "$0")/shell.sh"
trap 'finish; exit $?' EXIT

start_with_tiny || exit 1
shell_checks
