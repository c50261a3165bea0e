#!/bin/bash
# carreld keeps no descriptor for a connection its client closed (libvirt's test driver, no VM).
# libsoup 3.2 would keep each keep-alive connection that a client closes while idle for ever
# (every CLI command leaves one); api-reaper.c closes them. 60 clients (health, and session
# lists with a token) each open and close a connection; carreld's open descriptors come back to
# where they were. A connection kept alive over several requests still serves all of them.
# Usage: test-fds.sh CARRELD
set -uo pipefail

carreld="$1"
tmp="$(mktemp -d --tmpdir carrel-fds.XXXXXX)"
sock="$tmp/carreld.sock"
log="$tmp/carreld.log"
pid=""
cleanup() {
    [ -z "$pid" ] || kill "$pid" 2>/dev/null
    [ -z "$pid" ] || wait "$pid" 2>/dev/null
    rm -rf "$tmp"
}
trap cleanup EXIT
fail() {
    printf 'FAIL: %s\n' "$*" >&2
    tail -20 "$log" >&2
    exit 1
}
fds() { find "/proc/$pid/fd" -mindepth 1 2>/dev/null | wc -l; }

"$carreld" --state-dir "$tmp/state" --socket "$sock" --libvirt-uri test:///default --accel tcg \
    >"$log" 2>&1 &
pid=$!
for _ in $(seq 1 100); do
    curl -sf --unix-socket "$sock" http://carrel/v1/healthz >/dev/null 2>&1 && break
    sleep 0.1
done
sleep 3 # the first probe's connection is reaped too
base="$(fds)"
token="$(cat "$tmp/state/admin.token")"
for _ in $(seq 1 30); do
    curl -sf --unix-socket "$sock" http://carrel/v1/healthz >/dev/null || fail "health did not answer"
    curl -sf -H "Authorization: Bearer $token" --unix-socket "$sock" http://carrel/v1/sessions \
        >/dev/null || fail "a session list did not answer"
done
[ "$(fds)" -ge $((base + 20)) ] || echo "note: libsoup closed some connections itself"
settled=""
for _ in $(seq 1 30); do
    if [ "$(fds)" -le $((base + 1)) ]; then settled=1; break; fi
    sleep 0.5
done
[ -n "$settled" ] || fail "carreld holds $(fds) descriptors after 60 closed connections, $base before"
echo "ok - 60 closed connections leave no descriptor ($base before, $(fds) after)"
# Keep-alive still works: one curl, three requests, one connection.
n="$(curl -s --unix-socket "$sock" -w '%{num_connects}\n' -o /dev/null -o /dev/null -o /dev/null \
    http://carrel/v1/healthz http://carrel/v1/healthz http://carrel/v1/healthz |
    awk '{ s += $1 } END { print s }')"
[ "$n" = 1 ] || fail "three requests on a kept-alive connection took $n connections"
echo "ok - a kept-alive connection serves several requests"
