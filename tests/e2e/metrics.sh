# e2e: GET /metrics on real VMs (issue 16). Around a warm create, a snapshot with memory, a
# revert and a destroy on `tiny`, the scrapes parse under the integration test's strict parser,
# each verb adds exactly one observation to its histogram (create from warm, restores of the warm
# state and of the snapshot's memory, snapshot, revert), a warm create takes longer than its
# restore alone, sessions by state follow, and free disk is there. Prints the observed times.
# Needs lib.sh (carrel, check, check_eq, SOCKET, STATE_DIR) and a warm `tiny`.
# shellcheck shell=bash

# scrape FILE: /metrics as the admin, over the socket, into FILE.
scrape() {
    curl -s -f --unix-socket "$SOCKET" -H "Authorization: Bearer $(cat "$STATE_DIR/admin.token")" \
        -o "$1" http://carrel/metrics
}

# metric FILE SERIES: the value of a sample (name and labels as written), 0 when absent; parsed
# by tests/integration/test-metrics.py's strict parser, which fails on a malformed text.
metric() {
    python3 - "$1" "$2" "$(dirname "${BASH_SOURCE[0]}")/../integration/test-metrics.py" <<'PY'
import importlib.util, sys
spec = importlib.util.spec_from_file_location("tm", sys.argv[3])
tm = importlib.util.module_from_spec(spec)
spec.loader.exec_module(tm)
with open(sys.argv[1], encoding="utf-8") as f:
    fams = tm.parse(f.read())
want = sys.argv[2]
for fam in fams.values():
    for name, labels, value in fam["samples"]:
        text = name + ("{" + ",".join(f'{k}="{v}"' for k, v in labels.items()) + "}"
                       if labels else "")
        if text == want:
            print(f"{value:g}")
            sys.exit(0)
print(0)
PY
}

metrics_checks() {
    local before="$E2E_DIR/metrics-before.txt" after="$E2E_DIR/metrics-after.txt" id
    local -a series=(
        'carrel_create_duration_seconds_count{from="warm"}'
        'carrel_restore_duration_seconds_count{from="warm"}'
        'carrel_restore_duration_seconds_count{from="snapshot"}'
        'carrel_snapshot_duration_seconds_count'
        'carrel_revert_duration_seconds_count'
    )
    # The snapshot writes its memory with QEMU running on; only the revert restores it.
    local -a grew=(1 1 1 1 1)
    check "GET /metrics answers the admin" scrape "$before"
    check "GET /metrics parses strictly" metric "$before" carrel_pool_members
    check "GET /metrics without a token is 401" test "$(curl -s -o /dev/null -w '%{http_code}' \
        --unix-socket "$SOCKET" http://carrel/metrics)" = 401
    id="$(carrel create --template tiny --name metrics --json 2>/dev/null | jq -r .id)"
    check "warm session for the metrics checks" test -n "$id" -a "$id" != null
    check "snapshot for the metrics checks" carrel snapshot "$id" m1
    check "revert for the metrics checks" carrel revert "$id" m1
    check "running sessions counted" test "$(scrape "$after" && metric "$after" \
        'carrel_sessions{state="running"}')" -ge 1
    for i in "${!series[@]}"; do
        check_eq "${series[$i]} grew by ${grew[$i]}" \
            "$(($(metric "$before" "${series[$i]}") + grew[i]))" "$(metric "$after" "${series[$i]}")"
    done
    check "a warm create takes longer than its restore" python3 -c \
        'import sys; a, b = map(float, sys.argv[1:]); sys.exit(0 if a > b > 0 else 1)' \
        "$(metric "$after" 'carrel_create_duration_seconds_sum{from="warm"}')" \
        "$(metric "$after" 'carrel_restore_duration_seconds_sum{from="warm"}')"
    check "free disk of the state dir" test "$(metric "$after" carrel_state_dir_free_bytes)" != 0
    # shellcheck disable=SC2016 # expanded by bash -c
    check "no session id in any label" bash -c '! grep -q "$1" "$2"' _ "$id" "$after"
    echo "metrics: create (warm) $(metric "$after" 'carrel_create_duration_seconds_sum{from="warm"}') s in total," \
        "snapshot $(metric "$after" carrel_snapshot_duration_seconds_sum) s," \
        "revert $(metric "$after" carrel_revert_duration_seconds_sum) s"
    carrel rm "$id" >/dev/null 2>&1
}
