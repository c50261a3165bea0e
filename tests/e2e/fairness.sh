# Fair concurrency on real guests (issue 16): while 4 long execs and 2 creates run, health, the
# session list and a session's details still answer (each request class has its own pool; health
# needs none), and the execs and creates all finish. Outcomes only: the curl time limit is there
# so that a hang fails instead of holding the tier.
# shellcheck shell=bash

fairness_checks() {
    local f i p alive=0 execs=() creates=() made
    f="$(carrel create --template tiny --name fair --json 2>/dev/null | jq -r .id)"
    check "session for the fairness checks" test -n "$f" -a "$f" != null
    for i in 1 2 3 4; do
        carrel exec "$f" -- sleep 20 >"$E2E_DIR/fair-exec-$i.out" 2>&1 &
        execs+=($!)
    done
    for i in 1 2; do
        carrel create --template tiny --json >"$E2E_DIR/fair-create-$i.json" 2>&1 &
        creates+=($!)
    done
    # Let the six requests reach carreld (not an assertion: the checks below are outcomes).
    sleep 3
    check "health answers while 4 execs and 2 creates run" \
        curl -fsS --max-time 10 "$E2E_URL/v1/healthz"
    check "...the session list too" carrel ls
    check "...and a session's details" carrel show "$f"
    for p in "${execs[@]}"; do kill -0 "$p" 2>/dev/null && alive=$((alive + 1)); done
    check_eq "...while the 4 execs were still running" "4" "$alive"
    for i in 1 2 3 4; do
        check "long exec $i finished" wait "${execs[$((i - 1))]}"
    done
    for i in 1 2; do
        check "create $i beside them finished" wait "${creates[$((i - 1))]}"
        made="$(jq -r .id "$E2E_DIR/fair-create-$i.json" 2>/dev/null)"
        check_eq "...running" "running" "$(jq -r .state "$E2E_DIR/fair-create-$i.json" 2>/dev/null)"
        [ -n "$made" ] && [ "$made" != null ] && carrel rm "$made" >/dev/null 2>&1
    done
    carrel rm "$f" >/dev/null 2>&1
}
