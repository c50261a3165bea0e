# Helpers for the e2e tier: a private carreld on qemu:///system, assertions, cleanup.
# shellcheck shell=bash

: "${CARREL_BUILD:?CARREL_BUILD must point at the build directory}"
CARREL_BIN="$CARREL_BUILD/manager/cli/carrel"
CARRELD_BIN="$CARREL_BUILD/manager/daemon/carreld"
VIRSH=(virsh -q -c qemu:///system)

E2E_DIR="$(mktemp -d /tmp/carrel-e2e-XXXXXX)"
chmod 0755 "$E2E_DIR"
STATE_DIR="$E2E_DIR/state"
SOCKET="$E2E_DIR/carreld.sock"
DAEMON_LOG="$E2E_DIR/carreld.log"
DAEMON_PID=""
export CARREL_SOCKET="$SOCKET" CARREL_STATE_DIR="$STATE_DIR"

E2E_SRC="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
export E2E_SRC
# carreld also listens on loopback TCP for the web console and the browser tests, on a port
# below the kernel's ephemeral range (32768 and up), which outgoing connections never take.
E2E_PORT="${E2E_PORT:-$((20000 + RANDOM % 12000))}"
E2E_URL="http://127.0.0.1:$E2E_PORT"
export E2E_URL
# The sessions half's carreld decision (its probe: 15 s where a /dev/kvm cannot run a guest),
# kept for this boot: the lifecycle half starts with it instead of probing again.
# shellcheck disable=SC2034 # read by test-sessions.sh and test-lifecycle.sh
E2E_ACCEL_FILE="/run/carrel-e2e-accel-$(cat /proc/sys/kernel/random/boot_id 2>/dev/null)"

PASSED=0
FAILED=0
FAILURES=()
PART_TIMES=()

# timed FUNCTION ARGS...: runs one part of a half and keeps its duration for the table that
# finish prints, so a slow CI run shows which part grew.
timed() {
    local start=$SECONDS rc=0
    "$@" || rc=$?
    PART_TIMES+=("$(printf '%-24s %5d s' "$1" $((SECONDS - start)))")
    return "$rc"
}

pass() { PASSED=$((PASSED + 1)); echo "ok - $*"; }
fail() {
    FAILED=$((FAILED + 1))
    FAILURES+=("$*")
    echo "not ok - $*"
}

# check DESCRIPTION COMMAND...: passes when the command succeeds.
check() {
    local what="$1"
    shift
    if "$@" >/dev/null 2>&1; then pass "$what"; else fail "$what"; fi
}

# check_eq DESCRIPTION EXPECTED ACTUAL
check_eq() {
    if [ "$2" = "$3" ]; then pass "$1"; else fail "$1 (expected '$2', got '$3')"; fi
}

carrel() { "$CARREL_BIN" "$@"; }

# json_true EXPR JSON: EXPR holds on JSON. Empty input fails (jq 1.6 -e alone passes it).
json_true() {
    [ -n "$2" ] && jq -e "$1" <<<"$2" >/dev/null
}

# shellcheck disable=SC2120 # extra carreld options are optional
# start_daemon [CARRELD OPTIONS...]: with E2E_EMULATOR set, every start (restarts included)
# passes --emulator "$E2E_EMULATOR" ("" for libvirt's own QEMU); unset, carreld's default.
start_daemon() {
    "$CARRELD_BIN" --state-dir "$STATE_DIR" --socket "$SOCKET" --accel "${E2E_ACCEL:-auto}" \
        --listen "127.0.0.1:$E2E_PORT" --test-hooks ${E2E_EMULATOR+--emulator "$E2E_EMULATOR"} \
        "$@" >>"$DAEMON_LOG" 2>&1 &
    DAEMON_PID=$!
    for _ in $(seq 1 600); do
        carrel version >/dev/null 2>&1 && return 0
        kill -0 "$DAEMON_PID" 2>/dev/null || break
        sleep 0.1
    done
    fail "carreld did not start"
    tail -20 "$DAEMON_LOG" >&2
    return 1
}

# restart_daemon [CARRELD OPTIONS...]: this run's carreld stopped (SIGTERM, drained) and
# started again with those options (none: the defaults again).
restart_daemon() {
    kill "$DAEMON_PID" 2>/dev/null
    wait "$DAEMON_PID" 2>/dev/null
    start_daemon "$@"
}

# start_with_tiny [CARRELD OPTIONS...]: this run's carreld, its accelerator decision exported
# (E2E_ACCEL, and CARREL_ACCEL for the scripts it runs), and `tiny` built or taken from the cache.
# shellcheck disable=SC2120 # extra carreld options are optional
start_with_tiny() {
    start_daemon "$@" || return 1
    E2E_ACCEL="$(carrel version --json | jq -r .server.accel)"
    export CARREL_ACCEL="$E2E_ACCEL" E2E_ACCEL
    check "template build tiny" carrel template build tiny
}

agent_ping() {
    "${VIRSH[@]}" qemu-agent-command --timeout 5 "$1" '{"execute":"guest-ping"}'
}

# remove_domains STATE: the domain of every session folder under a carreld's STATE, destroyed
# and undefined, whatever state it is in (a run's own carreld may be gone).
remove_domains() {
    local dir id
    for dir in "$1"/sessions/s-*; do
        [ -d "$dir" ] || continue
        id="$(basename "$dir")"
        "${VIRSH[@]}" destroy "carrel-$id" >/dev/null 2>&1 || true
        "${VIRSH[@]}" undefine "carrel-$id" >/dev/null 2>&1 || true
    done
}

finish() {
    local what
    # Remove every domain this run made, whatever happened.
    remove_domains "$STATE_DIR"
    if [ -n "$DAEMON_PID" ]; then kill "$DAEMON_PID" 2>/dev/null || true; fi
    if [ "$FAILED" -gt 0 ]; then
        echo "--- carreld log (last 40 lines) ---"
        tail -40 "$DAEMON_LOG" || true
    fi
    [ -n "${CARREL_TEST_KEEP:-}" ] || rm -rf "$E2E_DIR"
    if [ "${#PART_TIMES[@]}" -gt 0 ]; then
        echo "--- parts ---"
        printf '%s\n' "${PART_TIMES[@]}"
    fi
    echo "e2e: $PASSED passed, $FAILED failed in $SECONDS s"
    # Last, and on stderr too: meson's error log shows the tail of stderr, after stdout's.
    for what in "${FAILURES[@]}"; do echo "failed: $what"; done
    for what in "${FAILURES[@]}"; do echo "failed: $what"; done >&2
    # A run that checked nothing proves nothing: it fails too.
    [ "$FAILED" -eq 0 ] && [ "$PASSED" -gt 0 ]
}

# token_start ID: a guest process that keeps a random token in its memory only and rewrites it
# to /home/user/token five times a second (a restored memory state brings it back with it).
token_start() {
    # shellcheck disable=SC2016 # expanded by the guest's shell
    carrel exec "$1" -- sh -c 'setsid sh -c "tok=\$(cat /proc/sys/kernel/random/uuid); while :; do echo \$tok > /home/user/token; sleep 0.2; done" </dev/null >/dev/null 2>&1 &' >/dev/null 2>&1
}
# token_stop ID: that process gone, and its file.
token_stop() {
    carrel exec "$1" -- sh -c 'pkill -f "random/uui[d]"; sleep 0.5; rm -f /home/user/token' >/dev/null 2>&1
}
# token_of ID: the token the process wrote last.
token_of() {
    carrel exec "$1" -- cat /home/user/token 2>/dev/null
}
# The MACs of a session: every device-backed NIC in its guest, and its domain XML's.
guest_mac() { # the address of every device-backed NIC in the guest
    # shellcheck disable=SC2016 # expanded by the guest's shell
    carrel exec "$1" -- sh -c 'for d in /sys/class/net/*; do [ -e "$d/device" ] && cat "$d/address"; done'
}
xml_mac() {
    "${VIRSH[@]}" dumpxml "carrel-$1" | sed -n "s/.*<mac address='\([^']*\)'.*/\1/p"
}
