#!/bin/bash
# A full disk under carreld (libvirt's test driver, no VM): its state dir on a 48 MiB tmpfs that
# is then filled to the last byte. carreld made its reserve (STATE/disk-reserve) at start; with
# the disk full, reads keep answering, writes of the store still land (the reserve is given up
# for them), an upload is refused with 507 no_space, and once there is room again the reserve
# comes back. Needs root (mount); skips (77) saying so without it. The tmpfs is unmounted on
# every way out.
# Usage: test-disk-full.sh CARRELD CARREL
set -uo pipefail

carreld="$1"
cli="$2"
tmp="$(mktemp -d --tmpdir carrel-disk-full.XXXXXX)"
mnt="$tmp/fs"
state="$mnt/state"
sock="$tmp/carreld.sock"
log="$tmp/carreld.log"
daemon_pid=""
cleanup() {
    [ -z "$daemon_pid" ] || kill "$daemon_pid" 2>/dev/null
    [ -z "$daemon_pid" ] || wait "$daemon_pid" 2>/dev/null
    mountpoint -q "$mnt" && umount "$mnt"
    rm -rf "$tmp"
}
trap cleanup EXIT
fail() {
    printf 'FAIL: %s\n' "$*" >&2
    tail -20 "$log" >&2
    exit 1
}
pass() { printf 'ok: %s\n' "$*"; }
carrel() { CARREL_SOCKET="$sock" CARREL_STATE_DIR="$state" "$cli" "$@"; }
# api METHOD PATH [FILE]: prints the status; the body goes to $tmp/reply.
api() {
    local args=(-s -o "$tmp/reply" -w '%{http_code}' --unix-socket "$sock" -X "$1"
        -H "Authorization: Bearer $(cat "$state/admin.token")")
    [ -z "${3:-}" ] || args+=(-H 'Content-Type: application/x-tar' --data-binary "@$3")
    curl "${args[@]}" "http://carreld$2"
}

if [ "$(id -u)" -ne 0 ]; then
    echo "SKIP: mounting a small tmpfs needs root"
    exit 77
fi
mkdir -p "$mnt"
if ! mount -t tmpfs -o size=48m,mode=0755 carrel-disk-full "$mnt"; then
    echo "SKIP: cannot mount a tmpfs here (a container without CAP_SYS_ADMIN?)"
    exit 77
fi
mkdir -p "$state"
"$carreld" --state-dir "$state" --socket "$sock" --libvirt-uri test:///default --accel auto \
    --disk-reserve 8 >"$log" 2>&1 &
daemon_pid=$!
for _ in $(seq 1 300); do
    carrel version >/dev/null 2>&1 && break
    sleep 0.1
done
carrel version >/dev/null 2>&1 || fail "carreld did not start"

reserve_bytes="$(($(stat -c %b "$state/disk-reserve") * $(stat -c %B "$state/disk-reserve")))"
[ "$reserve_bytes" -ge $((8 * 1048576)) ] || fail "the reserve holds $reserve_bytes bytes, not 8 MiB"
pass "carreld made its 8 MiB reserve at start"
tar -cf "$tmp/in.tar" -C "$tmp" carreld.log
[ "$(api POST /v1/uploads "$tmp/in.tar")" = 201 ] || fail "an upload with room: $(cat "$tmp/reply")"
pass "an upload with room is taken"

# Every byte of the tmpfs taken.
dd if=/dev/zero of="$mnt/fill" bs=64k >/dev/null 2>&1
[ "$(df --output=avail -B1 "$mnt" | tail -1 | tr -d ' ')" -lt 65536 ] || fail "the tmpfs is not full"
pass "the disk is full"

carrel ls >/dev/null || fail "carrel ls on a full disk"
[ "$(api GET /v1/sessions)" = 200 ] || fail "GET /v1/sessions on a full disk"
pass "reads keep answering on a full disk"
# Writes of the store need new pages (the WAL grows): the reserve is given up for them.
for i in $(seq 1 40); do
    carrel token add "agent-$i" --role agent >/dev/null 2>"$tmp/err" ||
        fail "token add $i on a full disk: $(cat "$tmp/err")"
done
pass "40 writes of the store on a full disk all land"
[ ! -e "$state/disk-reserve" ] || fail "the reserve was not given up"
grep -q "gave up the 8 MiB reserve" "$log" || fail "the log does not say the reserve was given up"
pass "the reserve was given up for them, and the log says so"
[ "$(api POST /v1/uploads "$tmp/in.tar")" = 507 ] || fail "an upload on a full disk: $(cat "$tmp/reply")"
jq -e '.error.code == "no_space"' "$tmp/reply" >/dev/null || fail "not no_space: $(cat "$tmp/reply")"
pass "an upload on a full disk is refused with 507 no_space"

# Room again: the watcher (every 2 s) makes the reserve again.
rm -f "$mnt/fill"
for _ in $(seq 1 100); do
    [ -e "$state/disk-reserve" ] && break
    sleep 0.2
done
[ -e "$state/disk-reserve" ] || fail "the reserve did not come back"
pass "the reserve comes back once there is room"
[ "$(api POST /v1/uploads "$tmp/in.tar")" = 201 ] || fail "an upload with room again: $(cat "$tmp/reply")"
pass "uploads are taken again"
