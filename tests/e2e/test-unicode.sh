#!/bin/bash
# e2e, the Unicode typing part alone (tests/e2e/unicode.sh; test-sessions.sh runs it too): build
# or reuse `tiny` (with carrel-guest, libxtst6 and its UTF-8 terminal), one session, then every
# typing method into its terminal, read back byte for byte. Needs root and qemu:///system; about
# 3-10 minutes under TCG (most of it the template build when the recipe changed).
set -uo pipefail
# shellcheck source=tests/e2e/lib.sh
source "$(dirname "$0")/lib.sh"
# shellcheck source=tests/e2e/unicode.sh
source "$(dirname "$0")/unicode.sh"
trap 'finish; exit $?' EXIT

start_with_tiny || exit 1
s="$(carrel create tiny --name e2e-unicode --json | jq -r .id)"
check_eq "the session runs" "running" "$(carrel show "$s" --json | jq -r .state)"
# The desktop is up (the terminal mapped and focused) before anything is typed.
for _ in $(seq 1 60); do
    carrel exec "$s" -- test -e /run/user/1000/carrel-desktop-ready 2>/dev/null && break
    sleep 1
done
unicode_checks "$s"
carrel rm "$s" >/dev/null
