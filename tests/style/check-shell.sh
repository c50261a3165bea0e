#!/bin/bash
# Runs shellcheck over every shell script of the tree.
set -euo pipefail
root="${1:-$(cd "$(dirname "$0")/../.." && pwd)}"
cd "$root"
command -v shellcheck >/dev/null || { echo "shellcheck is missing (scripts/test installs it)"; exit 1; }
mapfile -t scripts < <(grep -rlE --exclude-dir=node_modules '^#!/bin/(ba)?sh' scripts tests templates bench .ci 2>/dev/null)
scripts+=(scripts/lib/common.sh tests/e2e/lib.sh tests/e2e/browser.sh)
shellcheck -x -e SC1091 "${scripts[@]}"
echo "shellcheck: ${#scripts[@]} scripts clean"
