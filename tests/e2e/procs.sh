# Streamed and background commands (issue 20, "Commands"): output arrives while the command
# runs, background processes are listed, read, fed input and killed, survive a carreld restart,
# and a client that closes its stream leaves nothing running in the guest.
# shellcheck shell=bash

# procs_wait_exited ID HANDLE: polls the process until it has exited (at most 30 s).
procs_wait_exited() {
    local state
    for _ in $(seq 1 30); do
        state="$(carrel logs "$1" "$2" --json 2>/dev/null | jq -r .state)"
        [ "$state" = exited ] && return 0
        sleep 1
    done
    return 1
}

# procs_guest_runs ID PATTERN: the guest's process list has a command line matching PATTERN.
procs_guest_runs() {
    carrel exec "$1" -- ps -eo args 2>/dev/null | grep -q -- "$2"
}

procs_checks() {
    local id out h code first end pid
    id="$(carrel create --template tiny --name procs --json 2>/dev/null | jq -r .id)"
    check "session for the process checks" test -n "$id" -a "$id" != null

    # Streaming: each event stamped as it arrives; line 1 must come well before the end (the
    # command sleeps 2 s twice after printing it), compared with each other, not a clock.
    out="$E2E_DIR/procs-stream.txt"
    # shellcheck disable=SC2016 # expanded by the guest's shell
    carrel exec "$id" --stream --json -- sh -c 'for i in 1 2 3; do echo $i; sleep 2; done' 2>/dev/null |
        while IFS= read -r line; do printf '%s %s\n' "$(date +%s.%N)" "$line"; done >"$out"
    check_eq "streamed: the three lines, then the end with exit code 0" "1 2 3 | 0" \
        "$(grep '"event":"stdout"' "$out" | cut -d' ' -f2- | jq -r .data | tr -d '\n' | sed 's/./& /g;s/ $//') | $(grep '"event":"exit"' "$out" | cut -d' ' -f2- | jq -r .exit_code)"
    first="$(grep '"event":"stdout"' "$out" | head -1 | cut -d' ' -f1)"
    end="$(grep '"event":"exit"' "$out" | cut -d' ' -f1)"
    check "streamed: line 1 arrived at least 2 s before the end record (first $first, end $end)" \
        awk -v a="${first:-0}" -v b="${end:-0}" 'BEGIN { exit !(a > 0 && b - a >= 2) }'
    check_eq "streamed without --json: the output as it was, the command's exit code as ours" \
        "out err 3" "$(carrel exec "$id" --stream -- sh -c 'echo out; echo err >&2; exit 3' 2>&1 | tr '\n' ' ')$(carrel exec "$id" --stream -- sh -c 'exit 3' >/dev/null 2>&1; echo $?)"

    # Background: listed, read, killed; then not running in the guest.
    h="$(carrel exec "$id" --background -- sleep 600 2>/dev/null)"
    check "background: a handle" grep -Eq '^p[0-9a-f]+$' <<<"$h"
    check_eq "background: listed as running" "running sleep 600" \
        "$(carrel ps "$id" --json | jq -r --arg h "$h" '.processes[] | select(.handle == $h) | "\(.state) \(.argv | join(" "))"')"
    check "background: running in the guest" procs_guest_runs "$id" "^sleep 600"
    # A carreld restart loses nothing: the guest keeps the list.
    pid="$DAEMON_PID"
    kill -KILL "$pid"
    wait "$pid" 2>/dev/null || true
    start_daemon
    check_eq "background: still listed after a carreld restart" "running" \
        "$(carrel ps "$id" --json | jq -r --arg h "$h" '.processes[] | select(.handle == $h) | .state')"
    check "background: kill" carrel kill "$id" "$h"
    check "background: exited after kill" procs_wait_exited "$id" "$h"
    check_eq "background: ended by TERM (128 + 15)" "143" "$(carrel logs "$id" "$h" --json | jq -r .exit_code)"
    check "background: not running in the guest any more (carrel exec ps)" \
        bash -c "! $CARREL_BIN exec $id -- ps -eo args | grep -q '^sleep 600'"

    # stdin to a background cat comes back in its output.
    h="$(carrel exec "$id" --background -- cat 2>/dev/null)"
    check "stdin: written and closed" bash -c "printf 'hello-stdin\n' | $CARREL_BIN stdin $id $h --close"
    check "stdin: cat ended at the end of its input" procs_wait_exited "$id" "$h"
    check_eq "stdin: what was written came back" "hello-stdin" "$(carrel logs "$id" "$h" 2>/dev/null)"

    # Bad input gets clear errors: unknown handle (3, not found), an exited process (4,
    # wrong state), a handle that is not one (8, invalid).
    carrel logs "$id" p0000dead >/dev/null 2>&1
    check_eq "unknown handle: not found" "3" "$?"
    carrel kill "$id" "$h" >/dev/null 2>&1
    check_eq "kill of an exited process: wrong state" "4" "$?"
    printf x | carrel stdin "$id" "$h" >/dev/null 2>&1
    check_eq "stdin to an exited process: wrong state" "4" "$?"
    carrel logs "$id" ../etc >/dev/null 2>&1
    check_eq "a handle that is not one: invalid" "8" "$?"
    code="$(carrel kill "$id" "$h" --json 2>/dev/null | jq -r .error.code)"
    check_eq "...and --json says which" "wrong_state" "$code"

    # A client that closes its stream: the process is killed in the guest.
    out="$E2E_DIR/procs-closed.txt"
    # The binary itself, not the carrel function: killing a subshell would leave the client.
    "$CARREL_BIN" exec "$id" --stream -- sh -c 'echo started; exec sleep 611' >"$out" 2>&1 &
    pid=$!
    for _ in $(seq 1 30); do grep -q started "$out" && break; sleep 1; done
    check "closed stream: the command had started" grep -q started "$out"
    kill "$pid"
    wait "$pid" 2>/dev/null || true
    for _ in $(seq 1 20); do procs_guest_runs "$id" "^sleep 611" || break; sleep 1; done
    check "closed stream: the process is not running in the guest" \
        bash -c "! $CARREL_BIN exec $id -- ps -eo args | grep -q '^sleep 611'"
    check_eq "closed stream: listed as exited" "exited" \
        "$(carrel ps "$id" --json | jq -r '[.processes[] | select(.argv | join(" ") | test("sleep 611"))] | last | .state')"
    carrel rm "$id" >/dev/null 2>&1
}
