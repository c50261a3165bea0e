# What bench/load and bench/cycles share: their own carreld in a scratch state dir, on
# qemu:///system (or CARREL_BENCH_URI, e.g. test:///default for a smoke run), `tiny` built and
# warmed, the admin token, and a cleanup that destroys every session it made.
# shellcheck shell=bash
# shellcheck source=scripts/lib/common.sh
source "$(dirname "${BASH_SOURCE[0]}")/../scripts/lib/common.sh"

BENCH_URI="${CARREL_BENCH_URI:-qemu:///system}"

now_us() { date +%s%6N; }
# pct "US US ..." P: the P-th percentile of the samples (microseconds), in ms.
pct() {
    tr ' ' '\n' <<<"$1" | grep . | sort -n |
        awk -v p="$2" '{a[NR]=$1} END {i=int(NR*p/100+0.999); if (i<1) i=1; printf "%.1f", a[i]/1000}'
}
CARREL="$CARREL_ROOT/build/manager/cli/carrel"

# bench_start NAME [CARRELD_OPTION...]: WORK, CARREL_SOCKET, CARREL_STATE_DIR, DAEMON (carreld's
# pid) and TOKEN set; carreld answering. Cleanup on exit. "@WORK@" in an option stands for WORK;
# BENCH_PRE (a function name), when set, runs once WORK exists, before carreld starts (to write
# the files such options name).
bench_start() {
    local opts=() opt
    WORK="$(mktemp -d "/var/tmp/carrel-bench-$1-XXXXXX")"
    shift
    chmod 0755 "$WORK"
    for opt in "$@"; do opts+=("${opt//@WORK@/$WORK}"); done
    [ -z "${BENCH_PRE:-}" ] || "$BENCH_PRE"
    export CARREL_SOCKET="$WORK/carreld.sock" CARREL_STATE_DIR="$WORK/state"
    "$CARREL_ROOT/build/manager/daemon/carreld" --state-dir "$CARREL_STATE_DIR" \
        --socket "$CARREL_SOCKET" --libvirt-uri "$BENCH_URI" \
        --accel "${CARREL_ACCEL_MODE:-auto}" "${opts[@]}" >"$WORK/carreld.log" 2>&1 &
    DAEMON=$!
    trap bench_cleanup EXIT
    for _ in $(seq 1 300); do "$CARREL" version >/dev/null 2>&1 && break; sleep 0.1; done
    "$CARREL" version >/dev/null 2>&1 || { tail -20 "$WORK/carreld.log" >&2; die "carreld did not start"; }
    # shellcheck disable=SC2034 # read by the scripts that source this
    TOKEN="$(cat "$CARREL_STATE_DIR/admin.token")"
}

bench_cleanup() {
    local rc=$? id
    for id in $("$CARREL" ls --json 2>/dev/null | jq -r '.sessions[].id'); do
        "$CARREL" rm "$id" >/dev/null 2>&1 || true
    done
    kill "$DAEMON" 2>/dev/null || true
    wait "$DAEMON" 2>/dev/null || true
    # A bench that stopped on an error keeps its carreld log and says so.
    if [ "$rc" -ne 0 ]; then
        tail -20 "$WORK/carreld.log" >&2
        log "the bench stopped on an error (exit $rc): kept $WORK"
    elif [ -n "${CARREL_BENCH_KEEP:-}" ]; then
        log "kept $WORK"
    else
        rm -rf "$WORK"
    fi
}

# bench_tiny: `tiny` built and warm. On the test driver (no QEMU) an imported stand-in instead: a
# small qcow2 and a file in place of a kernel, as the SDK's integration tests do.
bench_tiny() {
    if [ "$BENCH_URI" = test:///default ]; then
        qemu-img create -q -f qcow2 "$WORK/disk.qcow2" 64M
        echo "not a kernel" >"$WORK/vmlinuz"
        "$CARREL" template import tiny --disk "$WORK/disk.qcow2" --format qcow2 --kernel "$WORK/vmlinuz" \
            --cmdline root=/dev/vda >/dev/null
        return
    fi
    "$CARREL" template build tiny >/dev/null
    "$CARREL" template warm tiny >/dev/null
}
