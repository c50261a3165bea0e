#!/bin/bash
# Tests cannot vanish: every test file on disk is registered, as meson's build description says
# (BUILD/meson-info), not as a file name in a meson.build happens to read.
#   - each C test source (tests/{unit,golden,integration}/test-*.c, guest-tools/tests/test-*.c)
#     is compiled into an executable that a registered test runs;
#   - each test script (tests/*/test-*.sh, guest-tools/tests/test-*.sh) is a registered test;
#   - each e2e part (tests/e2e/*.sh defining a NAME_checks function) is sourced by a registered
#     e2e script, and each NAME_checks function is called (there or by another part);
#   - each browser test (tests/browser/*.test.mjs) is run by tests/e2e/browser.sh;
#   - each fuzz harness (tests/fuzz/fuzz-*.c) is built with -Dfuzz=true and has a seed corpus.
# Usage: check-tests.sh SOURCE_ROOT BUILD_ROOT (SOURCE_ROOT may be a copy of the tree: paths
# are compared relative to each root).
set -euo pipefail

src="$1"
build="$2"
info="$build/meson-info"
for f in intro-targets.json intro-tests.json meson-info.json; do
    [ -r "$info/$f" ] || { echo "no $info/$f: configure the build first"; exit 1; }
done
built_src="$(jq -r '.directories.source' "$info/meson-info.json")"
built_out="$(jq -r '.directories.build' "$info/meson-info.json")"

# Paths relative to the build's source root: the programs tests run and the sources behind them.
rel() { sed -e "s|^$built_src/||" -e "s|^$built_out/|BUILD/|"; }
mapfile -t commands < <(jq -r '.[].cmd[]' "$info/intro-tests.json")
registered="$(
    printf '%s\n' "${commands[@]}" | rel
    jq -r --argjson cmds "$(printf '%s\n' "${commands[@]}" | jq -R . | jq -s .)" \
        '.[] | select(any(.filename[]; . as $f | $cmds | index($f))) | .target_sources[]?.sources[]?' \
        "$info/intro-targets.json" | rel
)"

bad=0
cd "$src"
shopt -s nullglob
for f in tests/unit/test-*.c tests/golden/test-*.c tests/integration/test-*.c \
    guest-tools/tests/test-*.c tests/*/test-*.sh guest-tools/tests/test-*.sh; do
    if ! grep -qxF "$f" <<<"$registered"; then
        echo "$f: no registered test runs it (name it in its meson.build)"
        bad=1
    fi
done

# The e2e parts: sourced by a registered script, and their checks called there.
mapfile -t scripts < <(grep -x 'tests/e2e/test-.*\.sh' <<<"$registered" || true)
for part in tests/e2e/*.sh; do
    case "$(basename "$part")" in test-*) continue ;; esac
    mapfile -t fns < <(sed -n 's/^\([a-z_]*_checks\)() {$/\1/p' "$part")
    [ "${#fns[@]}" -gt 0 ] || continue
    if [ "${#scripts[@]}" -eq 0 ] ||
        ! grep -qF "source \"\$(dirname \"\$0\")/$(basename "$part")\"" "${scripts[@]}"; then
        echo "$part: no registered e2e script sources it"
        bad=1
        continue
    fi
    for fn in "${fns[@]}"; do
        # Called by a registered script (itself or through lib.sh's timed), or by another
        # part's checks.
        if ! grep -qE "^[[:space:]]*(timed[[:space:]]+)?$fn([[:space:]]|\$)" "${scripts[@]}" \
            tests/e2e/*.sh; then
            echo "$part: $fn is never called"
            bad=1
        fi
    done
done

# The fuzz harnesses: each is built by tests/fuzz/meson.build (only with -Dfuzz=true, so not in
# the build described above) and has a seed corpus for the fuzz tier; each corpus has a harness.
for h in tests/fuzz/fuzz-*.c; do
    name="$(basename "$h" .c)"
    if ! grep -qF "'$name'" tests/fuzz/meson.build; then
        echo "$h: tests/fuzz/meson.build does not build it"
        bad=1
    fi
    if [ -z "$(find "tests/fuzz/corpus/$name" -maxdepth 1 -type f 2>/dev/null)" ]; then
        echo "$h: no seed corpus in tests/fuzz/corpus/$name/"
        bad=1
    fi
done
for d in tests/fuzz/corpus/*/; do
    if [ ! -f "tests/fuzz/$(basename "$d").c" ]; then
        echo "${d%/}: no harness tests/fuzz/$(basename "$d").c"
        bad=1
    fi
done

for t in tests/browser/*.test.mjs; do
    if ! grep -qF "$(basename "$t")" tests/e2e/browser.sh; then
        echo "$t: tests/e2e/browser.sh does not run it"
        bad=1
    fi
done
exit "$bad"
