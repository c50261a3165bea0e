#!/bin/bash
# The fuzz tier: every libFuzzer harness (tests/fuzz/fuzz-*.c), as built in BUILD (clang,
# -Dfuzz=true, ASan+UBSan), runs
#   1. once over each input of its committed seed corpus, tests/fuzz/corpus/HARNESS/ (a
#      regression run: an input that once crashed stays there with its fix), then
#   2. for SECONDS of fuzzing from that corpus (new inputs go to a scratch corpus, never into the
#      tree).
# A crash, leak, timeout, out-of-memory or sanitizer report fails the tier. The input that caused
# it is kept under BUILD/fuzz-findings/ (the log in BUILD/fuzz-findings/logs/) and its path
# printed with the command that replays it.
# Prints each harness's executions and duration. Harnesses run side by side, one per CPU
# (CARREL_FUZZ_JOBS).
#
# Usage: tests/fuzz/run.sh BUILD [SECONDS]    (SECONDS: default $CARREL_FUZZ_SECONDS or 20)
set -euo pipefail
src="$(cd "$(dirname "$0")/../.." && pwd)"
build="$(cd "${1:?usage: run.sh BUILD [SECONDS]}" && pwd)"
seconds="${2:-${CARREL_FUZZ_SECONDS:-20}}"
findings="$build/fuzz-findings"
# Scratch corpora and the harnesses' own files (fuzz-archive writes and fsyncs trees) in memory:
# on a disk, fuzz-archive runs ten times fewer inputs.
tmp=/dev/shm
[ -d "$tmp" ] && [ -w "$tmp" ] || tmp=/var/tmp
work="$(mktemp -d "$tmp/carrel-fuzz-XXXXXX")"
trap 'rm -rf "$work"' EXIT
mkdir -p "$findings"

# halt_on_error: a UBSan report stops the run like a crash (libFuzzer keeps the input).
export ASAN_OPTIONS="detect_leaks=1:${ASAN_OPTIONS:-}"
export UBSAN_OPTIONS="halt_on_error=1:print_stacktrace=1:${UBSAN_OPTIONS:-}"
export G_SLICE=always-malloc G_DEBUG=gc-friendly

# report NAME LOG MARKER: the sanitizer's report and every input kept since MARKER; the log is
# kept in FINDINGS/logs/.
report() {
    local name="$1" log="$2" marker="$3" found kept
    kept="$findings/logs/$name-$(date +%Y%m%d-%H%M%S).log"
    mkdir -p "$findings/logs"
    cp "$log" "$kept"
    echo "---- $name: last lines of its log ($kept) ----"
    grep -v '^#[0-9]' "$log" | tail -40
    echo "----"
    found="$(find "$findings" -maxdepth 1 -type f -name "$name-*" -newer "$marker" | sort)"
    [ -n "$found" ] || return 0
    while read -r f; do
        # GLib has no frame pointers: the replay unwinds slowly, for the whole stack.
        echo "---- $name: the kept input replayed, full stacks ----"
        ASAN_OPTIONS="fast_unwind_on_malloc=0:$ASAN_OPTIONS" "$build/tests/fuzz/$name" "$f" 2>&1 |
            grep -vE '^(INFO|Running|Executed|\*\*\*)' | head -60 || true
        echo "$name: failing input kept: $f"
        echo "$name:   replay: G_SLICE=always-malloc $build/tests/fuzz/$name $f"
    done <<<"$found"
}

# run_harness NAME: 0 when both runs are clean.
run_harness() {
    local name="$1" exe="$build/tests/fuzz/$1" corpus="$src/tests/fuzz/corpus/$1"
    local log="$work/$name.log" marker="$work/$name.start" start execs cov seeds status=0
    local -a inputs
    if [ ! -x "$exe" ]; then
        echo "$name: not built in $build (configure it with -Dfuzz=true and CC=clang)"
        return 1
    fi
    mapfile -t inputs < <(find "$corpus" -maxdepth 1 -type f 2>/dev/null | sort)
    if [ "${#inputs[@]}" -eq 0 ]; then
        echo "$name: no seed corpus in tests/fuzz/corpus/$name/"
        return 1
    fi
    touch "$marker"
    mkdir -p "$work/$name-corpus" "$work/$name-tmp"
    start=$SECONDS
    # The regression run: each seed once, as libFuzzer runs files given by name.
    TMPDIR="$work/$name-tmp" "$exe" -timeout=20 -artifact_prefix="$findings/$name-" \
        "${inputs[@]}" >"$log" 2>&1 || status=$?
    if [ "$status" -ne 0 ]; then
        echo "$name: FAILED on its seed corpus (exit $status)," \
            "at $(sed -n 's/^Running: //p' "$log" | tail -1)"
        report "$name" "$log" "$marker"
        return 1
    fi
    seeds=$((SECONDS - start))
    start=$SECONDS
    # The first corpus folder receives the new inputs: the scratch one.
    TMPDIR="$work/$name-tmp" "$exe" -max_total_time="$seconds" -timeout=20 -rss_limit_mb=2048 \
        -print_final_stats=1 -artifact_prefix="$findings/$name-" \
        "$work/$name-corpus" "$corpus" >"$log" 2>&1 || status=$?
    execs="$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -1)"
    cov="$(grep -o 'cov: [0-9]*' "$log" | tail -1 | cut -d' ' -f2)"
    if [ "$status" -ne 0 ]; then
        echo "$name: FAILED after ${execs:-?} executions in $((SECONDS - start)) s (exit $status)"
        report "$name" "$log" "$marker"
        return 1
    fi
    printf '%-20s %3d seeds clean in %2d s; %9s executions in %3d s, coverage %s, %d new inputs\n' \
        "$name" "${#inputs[@]}" "$seeds" "$execs" $((SECONDS - start)) "${cov:-?}" \
        "$(find "$work/$name-corpus" -type f | wc -l)"
    rm -rf "$work/$name-corpus" "$work/$name-tmp"
}

# run_one NAME: run_harness in the background, its output and exit status kept under $work.
run_one() {
    local status=0
    run_harness "$1" >"$work/$1.out" 2>&1 || status=$?
    echo "$status" >"$work/$1.rc"
}

# Each harness is one process on one core: CARREL_FUZZ_JOBS (the CPUs) of them at once, each
# still fuzzing for SECONDS. Their output is printed in order once all have ended.
jobs_max="${CARREL_FUZZ_JOBS:-$(nproc)}"
names=()
for harness in "$src"/tests/fuzz/fuzz-*.c; do
    names+=("$(basename "$harness" .c)")
    while [ "$(jobs -rp | wc -l)" -ge "$jobs_max" ]; do wait -n || true; done
    run_one "${names[-1]}" &
done
wait
failed=()
total=${#names[@]}
for name in "${names[@]}"; do
    cat "$work/$name.out"
    [ "$(cat "$work/$name.rc" 2>/dev/null)" = 0 ] || failed+=("$name")
done
if [ "${#failed[@]}" -gt 0 ]; then
    echo "fuzz: ${#failed[@]} of $total harnesses failed: ${failed[*]}"
    echo "fix the bug, then add the kept input to tests/fuzz/corpus/HARNESS/"
    exit 1
fi
echo "fuzz: $total harnesses clean, ${seconds} s each"
