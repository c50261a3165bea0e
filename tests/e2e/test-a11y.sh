#!/bin/bash
# e2e, the accessibility part alone (tests/e2e/a11y.sh; test-sessions.sh runs it too): build or
# reuse `tiny`, then the AT-SPI tree and click_element on carrel-demo. Needs root and
# qemu:///system.
set -uo pipefail
# shellcheck source=tests/e2e/lib.sh
source "$(dirname "$0")/lib.sh"
# shellcheck source=tests/e2e/a11y.sh
source "$(dirname "$0")/a11y.sh"
trap 'finish; exit $?' EXIT

start_with_tiny || exit 1
a11y_checks
