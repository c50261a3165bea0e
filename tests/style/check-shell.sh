#!/bin/bash
# Runs shellcheck over every shell script of the tree.
set -euo pipefail
root="${1:-$(cd "$(dirname "$0")/../.." && pwd)}"
cd "$root"
command -v shellcheck >/dev/null || { echo "shellcheck is missing (scripts/test installs it)"; exit 1; }
# Fuzz seeds and recorded bench runs (bench/results) are data, whatever their lines look like.
mapfile -t scripts < <(grep -rlE --exclude-dir=node_modules --exclude-dir=corpus --exclude-dir=results '^#!/bin/(ba)?sh' scripts tests templates bench data .ci 2>/dev/null)
# Sourced libraries have no shebang; they say "shellcheck shell=bash".
mapfile -t libs < <(grep -rl --exclude-dir=node_modules '^# shellcheck shell=bash' scripts tests templates bench data)
scripts+=("${libs[@]}")
shellcheck -x -e SC1091 "${scripts[@]}"
echo "shellcheck: ${#scripts[@]} scripts clean"
# One decision about the accelerator (carreld --probe-accel, scripts/lib/accel.sh): no script
# keys on whether /dev/kvm exists; on some hosts it does and a KVM guest hangs.
if grep -nE '(-[ecfrw]|exists?)[[:space:]]+/dev/kvm' "${scripts[@]}"; then
    echo "a script tests /dev/kvm: take carreld's decision (scripts/lib/accel.sh) instead"
    exit 1
fi
