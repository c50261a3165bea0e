#!/bin/bash
# check-tests.sh must fail on what it is there to catch: run on a copy of the tree with an
# unregistered unit test, with an e2e part's checks no longer called, and with a fuzz harness's
# seed corpus gone.
# Usage: check-tests-selftest.sh SOURCE_ROOT BUILD_ROOT
set -uo pipefail

src="$1"
build="$2"
check="$src/tests/style/check-tests.sh"
work="$(mktemp -d /tmp/carrel-check-tests-XXXXXX)"
trap 'rm -rf "$work"' EXIT
bad=0

copy() {
    rm -rf "${work:?}/tree" && mkdir "$work/tree" && cp -r "$src/tests" "$src/guest-tools" "$work/tree/"
}

copy
if ! "$check" "$work/tree" "$build" >"$work/out" 2>&1; then
    echo "the unchanged copy fails:"; cat "$work/out"; bad=1
fi
touch "$work/tree/tests/unit/test-unregistered.c"
if "$check" "$work/tree" "$build" >"$work/out" 2>&1 ||
    ! grep -q '^tests/unit/test-unregistered.c: no registered test runs it' "$work/out"; then
    echo "an unregistered unit test went unnoticed:"; cat "$work/out"; bad=1
fi
copy
sed -i 's/^\([[:space:]]*\)\(timed \)\{0,1\}egress_checks$/\1true/' "$work/tree/tests/e2e/test-sessions.sh"
if "$check" "$work/tree" "$build" >"$work/out" 2>&1 ||
    ! grep -q 'egress_checks is never called' "$work/out"; then
    echo "an e2e part no longer called went unnoticed:"; cat "$work/out"; bad=1
fi
copy
rm -r "$work/tree/tests/fuzz/corpus/fuzz-spice"
if "$check" "$work/tree" "$build" >"$work/out" 2>&1 ||
    ! grep -q '^tests/fuzz/fuzz-spice.c: no seed corpus' "$work/out"; then
    echo "a fuzz harness without a seed corpus went unnoticed:"; cat "$work/out"; bad=1
fi
[ "$bad" -eq 0 ] &&
    echo "check-tests.sh catches an unregistered test, an uncalled e2e part and a fuzz harness without a corpus"
exit "$bad"
