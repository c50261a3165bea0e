# The interactive terminal (issue 20, item 2): carrel shell over GET /v1/sessions/{id}/shell, a
# login shell on a pseudo-terminal in the guest (carrel-guest proc start --pty). From a pipe,
# what carrel reads is typed into the guest's terminal: its output comes back, carrel exits with
# the shell's code, the terminal echoes what is typed, and a client that leaves leaves nothing
# running in the guest. An agent may not open one; a reviewer only with the control lease.
# shellcheck shell=bash

# shell_guest_runs ID PATTERN: the guest's process list has a command line matching PATTERN.
shell_guest_runs() {
    carrel exec "$1" -- ps -eo args 2>/dev/null | grep -q -- "$2"
}

# shell_running_handles ID: how many of the session's processes are shells still running.
shell_running_handles() {
    carrel ps "$1" --json | jq '[.processes[] | select(.argv == ["/bin/bash","-l"] and .state == "running")] | length'
}

shell_checks() {
    local id out code pid tok fifo
    id="$(carrel create --template tiny --name shell --json 2>/dev/null | jq -r .id)"
    check "session for the shell checks" test -n "$id" -a "$id" != null

    # From a pipe: typed in, echoed, run; the exit code is the shell's.
    out="$E2E_DIR/shell-out.txt"
    # shellcheck disable=SC2016 # expanded by the guest's shell
    printf 'echo hello-$((6*7))\nexit 3\n' | "$CARREL_BIN" shell "$id" >"$out" 2>&1
    code=$?
    check "shell: the command's output came back (hello-42)" grep -q 'hello-42' "$out"
    check_eq "shell: carrel exits with the shell's exit code" "3" "$code"
    # The terminal echoes what is typed: the command line itself, unexpanded, is in the output.
    # shellcheck disable=SC2016 # the literal text typed
    check "shell: the terminal echoed the typed line" grep -qF 'echo hello-$((6*7))' "$out"
    # Without the terminal's escapes (bash's bracketed-paste mode, the prompt's colours and
    # title) and carriage returns, one line of the output is the user's name.
    check "shell: it ran as the desktop user" \
        bash -c "printf 'id -un\nexit 0\n' | $CARREL_BIN shell $id | tr -d '\r' |
            sed -E 's/\x1b\[[0-9;?]*[a-zA-Z]//g; s/\x1b\][^\a]*\a//g' | grep -qx user"
    check_eq "shell: nothing left running from it" "0" "$(shell_running_handles "$id")"

    # A client that leaves: the shell and what it started are killed in the guest.
    out="$E2E_DIR/shell-left.txt"
    fifo="$E2E_DIR/shell-in"
    rm -f "$fifo"
    mkfifo "$fifo"
    # The binary itself, its input a FIFO we hold open: it waits for more, as a person would.
    "$CARREL_BIN" shell "$id" <"$fifo" >"$out" 2>&1 &
    pid=$!
    exec 7>"$fifo"
    printf 'echo started; sleep 612\n' >&7
    for _ in $(seq 1 30); do shell_guest_runs "$id" "^sleep 612" && break; sleep 1; done
    check "left: the shell's command was running" shell_guest_runs "$id" "^sleep 612"
    kill "$pid"
    wait "$pid" 2>/dev/null || true
    exec 7>&-
    for _ in $(seq 1 20); do shell_guest_runs "$id" "^sleep 612" || break; sleep 1; done
    check "left: the command is not running in the guest any more" \
        bash -c "! $CARREL_BIN exec $id -- ps -eo args | grep -q '^sleep 612'"
    check_eq "left: carrel ps shows no shell running" "0" "$(shell_running_handles "$id")"

    # Who may: an agent never (denied, 5); a reviewer only while holding the control lease.
    tok="$(carrel token add shell-agent --role agent --json | jq -r .token)"
    printf 'exit 0\n' | CARREL_TOKEN="$tok" "$CARREL_BIN" shell "$id" >/dev/null 2>&1
    check_eq "an agent's token is refused (denied)" "5" "$?"
    carrel token revoke shell-agent >/dev/null 2>&1
    tok="$(carrel token add shell-reviewer --role reviewer --json | jq -r .token)"
    printf 'exit 0\n' | CARREL_TOKEN="$tok" "$CARREL_BIN" shell "$id" >/dev/null 2>&1
    check_eq "a reviewer without the lease is refused (denied)" "5" "$?"
    check "the reviewer takes the control lease" \
        env CARREL_TOKEN="$tok" "$CARREL_BIN" control "$id" take
    printf 'exit 7\n' | CARREL_TOKEN="$tok" "$CARREL_BIN" shell "$id" >/dev/null 2>&1
    check_eq "...then opens a shell (its exit code 7)" "7" "$?"
    carrel control "$id" release >/dev/null 2>&1
    carrel token revoke shell-reviewer >/dev/null 2>&1
    carrel rm "$id" >/dev/null 2>&1
}
