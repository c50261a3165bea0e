# e2e: the Python SDK (sdk/python) on real `tiny` sessions, and the agent loops of examples/
# driven by a scripted stand-in model (tests/e2e/standin-model.py) through the same SDK.
# Needs lib.sh (carrel, check, check_eq, pass, fail, E2E_DIR, E2E_SRC; CARREL_SOCKET and
# CARREL_STATE_DIR exported) and Debian's python3-httpx and python3-pytest.
# shellcheck shell=bash

SDK_PY=/usr/bin/python3

# The SDK's e2e pytest: its own session (create, screenshot, click, typing read back through
# commands.run, the terminal: Sandbox.shell echoes a typed line and exits 3, files,
# snapshot/revert, pause, async, kill).
sdk_pytest() {
    local log="$E2E_DIR/sdk-pytest.log"
    if PYTHONDONTWRITEBYTECODE=1 "$SDK_PY" -B -m pytest -p no:cacheprovider -q -rA \
        "$E2E_SRC/sdk/python/tests/e2e" >"$log" 2>&1; then
        pass "the Python SDK's e2e pytest on a tiny session ($(grep -Eo '[0-9]+ passed' "$log" | tail -1))"
    else
        fail "the Python SDK's e2e pytest on a tiny session (log: $log)"
        tail -40 "$log"
    fi
    check "...and it left no session behind" \
        json_true '[.sessions[] | select(.name == "e2e-sdk")] | length == 0' "$(carrel ls --json)"
}

# sdk_loop anthropic|openai: examples/NAME_computer_use.py against the stand-in model on a
# session of its own; the command the model "types" into the terminal must have run.
sdk_loop() {
    local api="$1" dir="$E2E_DIR/loop-$1" id port pid out i got="" log_json
    mkdir -p "$dir"
    id="$(carrel create tiny --name "e2e-loop-$api" --json | jq -r .id)"
    if [ -z "$id" ] || [ "$id" = null ]; then
        fail "a session for the $api loop"
        return
    fi
    pass "a session for the $api loop ($id)"
    "$SDK_PY" "$E2E_SRC/tests/e2e/standin-model.py" --port-file "$dir/port" --log "$dir/model.log" \
        --click 500,330 --command "echo loop-$api > /tmp/loop-$api.txt" 2>"$dir/model.err" &
    pid=$!
    for _ in $(seq 1 100); do [ -s "$dir/port" ] && break; sleep 0.1; done
    port="$(cat "$dir/port" 2>/dev/null)"
    check "the stand-in model listens" test -n "$port"
    out="$dir/loop.out"
    if [ "$api" = anthropic ]; then
        ANTHROPIC_BASE_URL="http://127.0.0.1:$port" ANTHROPIC_API_KEY=standin \
            PYTHONPATH="$E2E_SRC/sdk/python" PYTHONDONTWRITEBYTECODE=1 \
            "$SDK_PY" "$E2E_SRC/examples/anthropic_computer_use.py" --sandbox "$id" \
            "Open the terminal and write a file" >"$out" 2>&1
    else
        OPENAI_BASE_URL="http://127.0.0.1:$port/v1" OPENAI_API_KEY=standin \
            PYTHONPATH="$E2E_SRC/sdk/python" PYTHONDONTWRITEBYTECODE=1 \
            "$SDK_PY" "$E2E_SRC/examples/openai_computer_use.py" --sandbox "$id" \
            "Open the terminal and write a file" >"$out" 2>&1
    fi
    check_eq "the $api loop runs to the model's final answer" "0" "$?"
    [ -s "$out" ] && tail -3 "$out"
    log_json="$(jq -s . "$dir/model.log" 2>/dev/null)"
    check_eq "...the model asked for screenshot, click, type, key, screenshot, then finished" \
        "screenshot click type key screenshot done" \
        "$(jq -r '[.[] | select(.action) | .action] | join(" ")' <<<"$log_json" |
            sed -e 's/left_click/click/' -e 's/keypress/key/')"
    # shellcheck disable=SC2016 # expanded by the inner bash
    check "...no action was refused (no error went back to the model, none in the loop's log)" \
        bash -c 'jq -e "[.[] | select(.error)] | length == 0" <<<"$1" >/dev/null &&
            ! grep -q "action refused" "$2"' _ "$log_json" "$out"
    check "...and every result it got back held a PNG screenshot of the session" \
        json_true '[.[] | select(.action)][1:] | map(.png_bytes > 5000) | all' "$log_json"
    # A deadline, not a speed check: late in the e2e run, with other guests busy, the terminal
    # under TCG can take a while to run what was typed.
    for i in $(seq 1 60); do
        got="$(carrel exec "$id" -- cat "/tmp/loop-$api.txt" 2>"$dir/exec.err")"
        [ "$got" = "loop-$api" ] && break
        sleep 1
    done
    check_eq "...the command it typed into the terminal ran in the guest (after ${i}s)" \
        "loop-$api" "$got"
    [ "$got" = "loop-$api" ] || sdk_loop_diagnose "$id" "$dir"
    kill "$pid" 2>/dev/null
    wait "$pid" 2>/dev/null
    carrel rm "$id" >/dev/null 2>&1
}

# What tells a lost keystroke from a command that never ran or an agent that stopped answering:
# the last exec error, the guest's /tmp, the focused window, and what X's input driver said.
sdk_loop_diagnose() {
    local id="$1" dir="$2"
    echo "# the last exec's error: $(cat "$dir/exec.err" 2>/dev/null)"
    carrel exec "$id" -- sh -c 'ls -la /tmp; grep -iE "lagging|SYN_DROPPED|too slow" \
        /run/carrel/Xorg.0.log | tail -5' 2>&1 | sed 's/^/# guest: /'
    carrel show "$id" --json 2>&1 | jq -c '{state, reason}' | sed 's/^/# session: /'
    carrel "do" "$id" '{"action":"windows"}' 2>&1 |
        jq -c '[.results[0].output.windows[]? | select(.focused)]' |
        sed 's/^/# focused: /'
    carrel screenshot "$id" -o "$dir/last.png" >/dev/null 2>&1 && echo "# screen: $dir/last.png"
}

sdk_checks() {
    if ! "$SDK_PY" -c 'import httpx, pytest' 2>/dev/null; then
        fail "python3-httpx and python3-pytest are installed (scripts/lib/common.sh)"
        return
    fi
    sdk_pytest
    sdk_loop anthropic
    sdk_loop openai
}
