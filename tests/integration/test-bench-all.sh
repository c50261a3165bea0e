#!/bin/bash
# bench/all, bench/report and bench/chart on canned bench outputs (tests/data/bench/*.log, in the
# formats the benches print; no VM, no carreld): stand-in benches print them, one fails and one
# prints no JSON. Checks the results file (each bench's JSON found, also jq's multi-line one and
# one followed by another line; the failed benches recorded with their log's tail; every goal's
# status and why), bench/report's table against tests/data/bench/report.md
# (CARREL_TEST_REGENERATE=1 rewrites it), the README block between its markers (the rest kept),
# and the chart being a PNG (gnuplot is in CARREL_PACKAGES: missing, this fails).
# The machine's accelerator comes from a carreld that answers (one on libvirt's test driver
# here), else from the benches' reports, else from scripts/lib/accel.sh (CARREL_ACCEL here: no
# probe boot).
# Usage: test-bench-all.sh SOURCE_ROOT BUILD_ROOT
set -uo pipefail

src="$1"
build="$2"
data="$src/tests/data/bench"
tmp="$(mktemp -d --tmpdir carrel-bench-all.XXXXXX)"
pid=""
cleanup() {
    [ -z "$pid" ] || kill "$pid" 2>/dev/null
    [ -z "$pid" ] || wait "$pid" 2>/dev/null
    [ -n "${KEEP:-}" ] || rm -rf "$tmp"
}
trap cleanup EXIT
fail() {
    printf 'FAIL: %s\n' "$*" >&2
    exit 1
}
command -v gnuplot >/dev/null || fail "gnuplot is missing (apt-get install gnuplot-nox)"
# check NAME JQ_FILTER FILE: the filter is true of the file.
check() {
    jq -e "$2" "$3" >/dev/null || fail "$1: $(jq -c "$2" "$3" 2>&1)"
}

# Stand-in benches: each prints its canned output and notes its arguments; sdk exits 1.
mkdir -p "$tmp/benches"
printf '{"bench":"reporter","accel":"kvm"}\n' >"$tmp/reporter.log"
for name in warm computer lifecycle exec-stream console api sdk quiet recording density reporter; do
    status=0
    [ "$name" = sdk ] && status=1
    printf '#!/bin/bash\necho "$*" >"%s/args-%s"\ncat "%s/%s.log"\nexit %d\n' \
        "$tmp" "$name" "$([ "$name" = reporter ] && echo "$tmp" || echo "$data")" "$name" "$status" \
        >"$tmp/benches/$name"
    chmod +x "$tmp/benches/$name"
done
printf '# carrel\n\n## Benchmarks\n\nHow to run.\n\n<!-- bench:begin -->\nno run recorded yet\n<!-- bench:end -->\n\nAfter the table.\n' \
    >"$tmp/README.md"
cp "$tmp/README.md" "$tmp/README.orig"

# run_all NAME [ARGS]: bench/all with the stand-in benches, no carreld at CARREL_SOCKET unless
# the caller has started one (sock, state), and no carreld to probe the accelerator with
# (CARREL_ACCEL: accel, or empty). The host's zero page as zero_page says (yes, no; empty: the
# probe's), unset: yes.
run_all() {
    env -u CARREL_URL -u CARREL_TOKEN CARREL_SOCKET="${sock:-$tmp/none.sock}" \
        CARREL_STATE_DIR="${state:-$tmp/none}" CARREL_ACCEL="${accel:-}" \
        CARREL_BENCH_ZERO_PAGE="${zero_page-yes}" \
        CARRELD_BIN="$tmp/no-carreld" CARREL_BUILD="$build" CARREL_BENCH_DIR="$tmp/benches" \
        CARREL_BENCH_RESULTS="$tmp/$1" CARREL_BENCH_README="$tmp/README.md" \
        "$src/bench/all" "${@:2}" >"$tmp/$1.out" 2>"$tmp/$1.err"
}
results_of() {
    find "$tmp/$1" -maxdepth 1 -name '*.json'
}

# 1. The quick set with a failing bench and a silent one: exit 1, every bench run.
accel=kvm run_all results --update-readme warm:3 computer lifecycle:5 exec-stream console api sdk quiet \
    density
status=$?
[ "$status" -eq 1 ] || { cat "$tmp/results.err"; fail "bench/all exited $status, not 1"; }
mapfile -t found < <(results_of results)
[ "${#found[@]}" -eq 1 ] || fail "expected one results file, found ${#found[@]}"
res="${found[0]}"
stamp="$(basename "$res" .json)"
[[ "$stamp" =~ ^[0-9]{4}-[0-9]{2}-[0-9]{2}-[0-9]{6}$ ]] || fail "results file named '$stamp'"
[ "$(cat "$tmp/args-lifecycle")" = 5 ] || fail "lifecycle:5 ran with '$(cat "$tmp/args-lifecycle")'"
[ -z "$(cat "$tmp/args-computer")" ] || fail "computer ran with arguments"
for name in warm sdk quiet; do
    cmp -s "$tmp/results/$stamp/$name.log" "$data/$name.log" || fail "$name.log not kept as printed"
done
grep -q 'sdk: FAILED (exit 1)' "$tmp/results.err" || fail "the failure is not reported"
grep -q '    AssertionError' "$tmp/results.err" || fail "the failed bench's log tail is not shown"

check "top level" '(.date | test("^[0-9-]+T[0-9:]+Z$")) and (.commit | length > 0)
    and (.benches | keys == ["api","computer","console","density","exec-stream","lifecycle","quiet","sdk","warm"])' "$res"
check "machine" '.machine | (.cpus | type == "number") and (.mem_gib > 0) and (.kernel | length > 0)
    and (.cpu_model | length > 0) and .accel == "kvm" and .zero_page == true' "$res"
check "results found" '.benches | .warm.result.cold_median_ms == 24097 and .api.result.rps.sessions == 11234
    and .computer.result.exec.carrel_p50_ms == 118.3 and .console.result.first_frame.ratio_p50 == 0.82' "$res"
check "jq's multi-line object" '.benches."exec-stream" | .ok and .result.ratio == 22.9 and .result.rounds == 10' "$res"
check "object before another line" '.benches.lifecycle | .ok and .result.fork4_ms == 27532 and .args == ["5"]' "$res"
check "failed bench" '.benches.sdk | (.ok | not) and .exit_status == 1 and .result == null
    and .log_tail[-1] == "AssertionError" and .reason == "exited with status 1; no JSON object in its output"' "$res"
check "silent bench" '.benches.quiet | (.ok | not) and .exit_status == 0 and .result == null
    and (.reason | test("no JSON"))' "$res"
check "durations" '[.benches[] | .seconds | type == "number" and . >= 0] | all' "$res"

# Every goal of bench/goals.json, once, in its order.
check "goal ids" "[.goals[].id] == $(jq -c '[.goals[].id]' "$src/bench/goals.json")" "$res"
check "goal statuses" '[.goals[] | {(.id): .status}] | add == {
    "warm-vs-cold": "missed", "warm-vs-restore": "missed", "snapshot": "missed",
    "revert": "met", "fork4": "missed", "pool-claim": "missed", "screenshot": "not measured",
    "screenshot-vs-virsh": "not measured", "exec": "met", "density": "not measured",
    "density-exec": "not measured",
    "recording-exec": "not measured", "recording-idle-cpu": "not measured", "settle": "not measured"}' "$res"
check "ratio goal" '.goals[] | select(.id == "warm-vs-cold") | .measured == 9467 and .baseline == 24097
    and .ratio == 2.545 and .target == 10 and .op == ">=" and (has("reason") | not)' "$res"
check "a goal on nested figures" '.goals[] | select(.id == "fork4") | .measured == 27532 and .baseline == 9467
    and .ratio == 2.908' "$res"
# A reason whose rule is a figure of the run, with the run's figures in its words.
check "a miss explained by the run's figures" '.goals[] | select(.id == "fork4") | .reason
    | test("took 9,120 ms of CPU .* in 9,467 ms, .* at least 18,240 ms on 2 cores, 1.93x one warm create at best; fork x4 took 51,210 ms")' "$res"
check "a second reason of the same miss" '.goals[] | select(.id == "fork4") | .reason
    | test("51,210 ms of CPU; libvirt and QEMU alone .* at once took 25,010 ms against one in 8,020 ms, 3.12x")' "$res"
# ... and one whose figure says otherwise names nothing.
python3 - "$src/bench" "$res" <<'EOF' || fail "a missed_because rule whose figure does not hold gave a reason"
import json, sys
sys.path.insert(0, sys.argv[1])
import benchlib
with open(sys.argv[2], encoding="utf-8") as f:
    res = json.load(f)
with open(sys.argv[1] + "/goals.json", encoding="utf-8") as f:
    goal = next(g for g in json.load(f)["goals"] if g["id"] == "fork4")
res["benches"]["lifecycle"]["result"]["fork"]["floor_ratio"] = 1.2
res["benches"]["lifecycle"]["result"]["fork"]["bare_ratio_paired"] = 1.9
out = benchlib.evaluate(goal, res["benches"], {"zero_page": True})
assert out["status"] == "missed" and "reason" not in out, out
EOF
check "met below its ratio" '.goals[] | select(.id == "exec") | .ratio == 0.675' "$res"
check "absolute goal" '.goals[] | select(.id == "snapshot") | .measured == 5258.2 and (has("ratio") | not)' "$res"
check "not measured: failed bench" '.goals[] | select(.id == "screenshot") | .reason == "bench/sdk failed"' "$res"
check "not measured: no figure" '.goals[] | select(.id == "settle")
    | .reason == "bench/computer reports no click.settled_p50_ms"' "$res"
check "value over baseline" '.goals[] | select(.id == "warm-vs-restore") | .measured == 9467
    and .baseline == 4123 and .ratio == 2.296' "$res"
check "not measured: a smaller run" '.goals[] | select(.id == "density") | .measured == 341
    and .reason == "bench/density ran with sessions 12; the goal needs 40"' "$res"
grep -qE '^revert +5,549 ms +5,426 +1\.02x +value/baseline <= 1\.2 +met$' "$tmp/results.out" ||
    { cat "$tmp/results.out"; fail "bench/all's goal table lacks the revert row"; }
grep -qE '^warm-vs-cold .* MISSED$' "$tmp/results.out" || fail "a missed goal is not MISSED"

# 2. bench/report's table, from the run with its date, commit and machine fixed.
jq '.date = "2026-12-02T07:00:00Z" | .commit = "abc1234"
    | .machine = {"cpus": 2, "mem_gib": 23.5, "kernel": "6.1.0-28-amd64",
                  "cpu_model": "Intel Xeon Processor (Skylake)", "accel": "tcg"}
    | .benches[].log |= sub("^[^/]+/"; "RUN/")' "$res" \
    >"$tmp/fixed.json"
"$src/bench/report" "$tmp/fixed.json" >"$tmp/report.md" || fail "bench/report failed"
if [ -n "${CARREL_TEST_REGENERATE:-}" ]; then
    cp "$tmp/report.md" "$data/report.md"
fi
diff -u "$data/report.md" "$tmp/report.md" || fail "bench/report differs from tests/data/bench/report.md"

# 3. The README: the block between the markers rewritten, the rest kept; again gives the same.
sed -n '/<!-- bench:end -->/,$p' "$tmp/README.md" | tail -n +2 >"$tmp/after"
[ "$(sed -n '1,/<!-- bench:begin -->/p' "$tmp/README.md")" = \
    "$(sed -n '1,/<!-- bench:begin -->/p' "$tmp/README.orig")" ] || fail "README changed before the table"
[ "$(cat "$tmp/after")" = "$(printf '\nAfter the table.')" ] || fail "README changed after the table"
grep -q 'no run recorded yet' "$tmp/README.md" && fail "the README still says no run is recorded"
grep -qF "![carrel vs its baselines," "$tmp/README.md" || fail "no chart in the README"
grep -qF "](results/$stamp.png)" "$tmp/README.md" || fail "the chart's path is not relative"
grep -qF "commit \`$(jq -r .commit "$res")\`" "$tmp/README.md" || fail "the README does not name the commit"
grep -qF '| exec round trip <= 1.2x raw guest-exec + status polling | 118.3 ms | 175.3 ms | 0.68x |' \
    "$tmp/README.md" || fail "the README's table lacks the exec goal"
cp "$tmp/README.md" "$tmp/README.once"
"$src/bench/report" --readme "$res" "$tmp/README.md" || fail "bench/report --readme failed"
cmp -s "$tmp/README.md" "$tmp/README.once" || fail "a second rewrite changed the README"
printf 'no markers\n' >"$tmp/plain.md"
"$src/bench/report" --readme "$res" "$tmp/plain.md" 2>/dev/null && fail "a README without markers was accepted"

# 4. The chart: a PNG, also for a run where nothing could be compared.
png="$tmp/results/$stamp.png"
[ "$(head -c 8 "$png" | od -An -tx1 | tr -d ' \n')" = 89504e470d0a1a0a ] || fail "$png is not a PNG"
jq '.benches[].ok = false' "$res" >"$tmp/none.json"
"$src/bench/chart" "$tmp/none.json" "$tmp/none.png" || fail "bench/chart failed on a run without figures"
[ "$(head -c 4 "$tmp/none.png" | od -An -tx1 | tr -d ' \n')" = 89504e47 ] || fail "none.png is not a PNG"

# bench/recording's issue 19 goals: the idle desktop's CPU on vs off, and exec on vs off.
accel=kvm run_all rec recording || { cat "$tmp/rec.err"; fail "bench/all recording failed"; }
check "recording goals" '[.goals[] | select(.id | startswith("recording-")) | {(.id): [.status, .ratio]}]
    | add == {"recording-exec": ["met", 1.039], "recording-idle-cpu": ["met", 1.025]}' "$(results_of rec)"
check "recording's idle CPU figures" '.goals[] | select(.id == "recording-idle-cpu")
    | .measured == 2.46 and .baseline == 2.4 and .target == 1.05 and .op == "<="' "$(results_of rec)"
"$src/bench/report" "$(results_of rec)" >"$tmp/rec.md" || fail "bench/report failed on the recording run"
grep -qF '| QEMU + carreld CPU, scrolling xterm, recording on vs off (bench/recording) | 26.25 s/min | 21.3 s/min |' \
    "$tmp/rec.md" || { cat "$tmp/rec.md"; fail "the report lacks the scrolling xterm's CPU side by side"; }

# A host whose reads of untouched memory allocate: the misses its goals name say why, and the
# report's machine line says so.
zero_page=no accel=kvm run_all nozero warm:3 lifecycle:5 || { cat "$tmp/nozero.err"; fail "bench/all nozero failed"; }
# (A fork maps its snapshot's RAM file as a warm create maps its template's: the zero page is no
# reason of fork x4's.)
check "misses on a host without a zero page" '.machine.zero_page == false and ([.goals[]
    | select(.id == "warm-vs-cold") | .status == "missed"
      and (.reason | test("no shared zero page"))] == [true])
    and (.goals[] | select(.id == "fork4") | .status == "missed"
      and (.reason // "" | test("zero page") | not))
    and (.goals[] | select(.id == "revert") | .status == "met" and (has("reason") | not))' \
    "$(results_of nozero)"
"$src/bench/report" "$(results_of nozero)" >"$tmp/nozero.md" || fail "bench/report failed on nozero"
grep -qF 'MISSED (on this host a read of untouched memory allocates it (no shared zero page)' \
    "$tmp/nozero.md" || { cat "$tmp/nozero.md"; fail "the report does not say why the goal was missed"; }
grep -qF ', no shared zero page (a read of untouched memory allocates it)' "$tmp/nozero.md" ||
    fail "the report's machine line does not name the missing zero page"

# A density run that stopped short (host memory): the goal's reason says where it stopped.
mv "$tmp/benches/density" "$tmp/density.canned"
printf '#!/bin/bash\necho %s\n' \
    "'{\"bench\":\"density\",\"asked\":40,\"sessions\":30,\"stopped\":\"host memory: 2674 MB available after 30 sessions\",\"rss_max_mb\":719,\"exec\":{\"p50_ms\":148.5}}'" \
    >"$tmp/benches/density"
chmod +x "$tmp/benches/density"
run_all stopped density:40,60 || { cat "$tmp/stopped.err"; fail "bench/all density (stopped) failed"; }
check "a stopped density run" '.goals[] | select(.id == "density") | .status == "not measured"
    and .reason == "bench/density ran with sessions 30; the goal needs 40 (it stopped: host memory: 2674 MB available after 30 sessions)"' \
    "$(results_of stopped)"
mv "$tmp/density.canned" "$tmp/benches/density"

# A bench that exits 0 without its JSON fails the run.
run_all silent quiet && fail "bench/all exited 0 when a bench printed no JSON"

# 5. A run where all went well exits 0; goals of benches not run say so. The accelerator from
# the carreld that answers, then (none answering) from a bench's report.
sock="$tmp/carreld.sock"
"$build/manager/daemon/carreld" --state-dir "$tmp/state" --socket "$sock" \
    --libvirt-uri test:///default --accel tcg >"$tmp/carreld.log" 2>&1 &
pid=$!
for _ in $(seq 1 100); do
    curl -sf --unix-socket "$sock" http://carrel/v1/healthz >/dev/null 2>&1 && break
    sleep 0.1
done
zero_page="" state="$tmp/state" run_all one warm ||
    { cat "$tmp/one.err"; fail "bench/all warm failed"; }
check "not run" '.goals[] | select(.id == "snapshot") | .status == "not measured"
    and .reason == "bench/lifecycle was not run"' "$(results_of one)"
check "accel from carreld" '.machine.accel == "tcg"' "$(results_of one)"
check "the zero page probed" '.machine.zero_page | type == "boolean"' "$(results_of one)"
sock=""
run_all reported reporter || fail "bench/all reporter failed"
check "accel from a bench" '.machine.accel == "kvm" and .benches.reporter.ok' "$(results_of reported)"
echo "bench/all, bench/report, bench/chart: ok"
