# e2e: a guest that fills the host's disk. A second carreld keeps its state dir on a small loop
# ext4 (tiny's disk plus 1 GiB, no blocks reserved for root) and runs a cold tiny session that
# writes zeros (dd, O_DIRECT) past what the host's filesystem has free. QEMU pauses the guest on
# ENOSPC (error_policy='enospace'); that carreld shows `paused` with the reason "host disk full"
# and a `paused` event {"reason":"host_disk_full"} on the timeline (written with the disk full:
# the store's reserve is there for it), keeps answering (version, list, show, events) and refuses
# a create with 507 no_space, while a session of the main carreld keeps working. Once a file on
# the host is removed, resume runs the guest on and dd ends with every byte written.
# Needs lib.sh (check, check_eq, json_true, fail, remove_domains, VIRSH, E2E_DIR, CARREL_BIN, CARRELD_BIN), root
# (mount), and a running session of the main carreld (its id as $1).
# shellcheck shell=bash
# The checks hand values to `bash -c '...' _ ARGS`: expanded there, on purpose.
# shellcheck disable=SC2016

DISK_MNT="$E2E_DIR/disk-fs"
DISK_STATE="$DISK_MNT/state"
DISK_SOCK="$E2E_DIR/disk.sock"
DISK_PORT=$((E2E_PORT + 1))
DISK_PID=""

dcarrel() { CARREL_SOCKET="$DISK_SOCK" CARREL_STATE_DIR="$DISK_STATE" "$CARREL_BIN" "$@"; }

# disk_api METHOD PATH [BODY]: the disk carreld's API over TCP; prints the status, the body
# goes to $E2E_DIR/disk-api.out.
disk_api() {
    local args=(-s -o "$E2E_DIR/disk-api.out" -w '%{http_code}' -X "$1"
        -H "Authorization: Bearer $(cat "$DISK_STATE/admin.token")")
    [ -n "${3:-}" ] && args+=(-H 'Content-Type: application/json' --data "$3")
    curl "${args[@]}" "http://127.0.0.1:$DISK_PORT$2"
}

# Everything the part made goes, whatever happened: domains, carreld, the mount, the image.
disk_cleanup() {
    remove_domains "$DISK_STATE"
    if [ -n "$DISK_PID" ]; then
        kill "$DISK_PID" 2>/dev/null
        wait "$DISK_PID" 2>/dev/null
    fi
    DISK_PID=""
    mountpoint -q "$DISK_MNT" && umount "$DISK_MNT"
    rm -f "$E2E_DIR/disk-fs.img"
}

disk_start() {
    local tiny_disk="$1" size_mib
    # One session of tiny plus a bit: the imported disk, its overlay's first writes, the store,
    # the reserve, and the ballast removed later to make room.
    size_mib=$(($(stat -c %s "$tiny_disk") / 1048576 + 1024))
    truncate -s "${size_mib}M" "$E2E_DIR/disk-fs.img" &&
        mkfs.ext4 -q -F -m 0 "$E2E_DIR/disk-fs.img" && mkdir -p "$DISK_MNT" &&
        mount -o loop "$E2E_DIR/disk-fs.img" "$DISK_MNT" || return 1
    mkdir -p "$DISK_STATE" "$E2E_DIR/disk-cache"
    "$CARRELD_BIN" --state-dir "$DISK_STATE" --socket "$DISK_SOCK" --accel "${E2E_ACCEL:-auto}" \
        --listen "127.0.0.1:$DISK_PORT" --cache-dir "$E2E_DIR/disk-cache" \
        >"$E2E_DIR/disk-carreld.log" 2>&1 &
    DISK_PID=$!
    for _ in $(seq 1 600); do
        dcarrel version >/dev/null 2>&1 && return 0
        kill -0 "$DISK_PID" 2>/dev/null || break
        sleep 0.1
    done
    return 1
}

# Waits up to $2 seconds for the disk carreld's session $1 to be in state $3.
disk_wait_state() {
    for _ in $(seq 1 "$2"); do
        [ "$(dcarrel show "$1" --json 2>/dev/null | jq -r .state)" = "$3" ] && return 0
        sleep 1
    done
    return 1
}

disk_checks() {
    local other="$1" tiny id avail count show status events
    tiny="$(carrel template show tiny --json)"
    if ! disk_start "$(jq -r .disk <<<"$tiny")"; then
        fail "a carreld on a small loop filesystem starts"
        tail -20 "$E2E_DIR/disk-carreld.log" >&2
        disk_cleanup
        return
    fi
    check "the disk carreld keeps its reserve in its state dir" test -s "$DISK_STATE/disk-reserve"
    check "the disk carreld imports tiny" dcarrel template import tiny \
        --disk "$(jq -r .disk <<<"$tiny")" --format qcow2 --kernel "$(jq -r .kernel <<<"$tiny")" \
        --initrd "$(jq -r .initrd <<<"$tiny")" --cmdline "$(jq -r .cmdline <<<"$tiny")"
    id="$(dcarrel create tiny --cold --name e2e-fill --json 2>"$E2E_DIR/disk-create.err" |
        jq -r '.id // empty')"
    if [ -z "$id" ]; then
        # Nothing to fill: the rest would only wait for a session that is not there.
        fail "a cold session runs on the small filesystem ($(tail -1 "$E2E_DIR/disk-create.err"))"
        disk_cleanup
        return
    fi
    check_eq "a cold session runs on the small filesystem" "running" \
        "$(dcarrel show "$id" --json | jq -r .state)"
    check "the session's disk pauses on a full host disk (error_policy='enospace')" \
        grep -q "error_policy='enospace'" <<<"$("${VIRSH[@]}" dumpxml "carrel-$id")"
    # The ballast is the file removed later on the host to make room again.
    check "a 256 MiB ballast on the small filesystem" \
        fallocate -l 256M "$DISK_MNT/ballast"
    avail=$(($(df --output=avail -B1M "$DISK_MNT" | tail -1)))
    # More than the host has free, less than the ballast gives back.
    count=$((avail + 128))
    echo "e2e: the small filesystem has $avail MiB free; the guest writes $count MiB"
    check "the guest starts writing zeros (dd, O_DIRECT)" dcarrel exec "$id" -- sh -c \
        "nohup dd if=/dev/zero of=/fill bs=1M count=$count oflag=direct >/tmp/dd.log 2>&1 &"
    if disk_wait_state "$id" 900 paused; then
        pass "the session is paused once the host's disk is full"
    else
        fail "the session is paused once the host's disk is full (state: $(dcarrel show "$id" --json | jq -r .state))"
    fi
    show="$(dcarrel show "$id" --json)"
    check "...with the reason host disk full" json_true \
        '.state_reason | startswith("host disk full")' "$show"
    check_eq "...and QEMU says it paused on an I/O error" "paused (I/O error)" \
        "$("${VIRSH[@]}" domstate --reason "carrel-$id" | head -1)"
    # Full, but for the reserve if the store gave it up to write the pause (64 MiB).
    check "the host's filesystem is full (or holds only the given-up reserve)" \
        test "$(df --output=avail -B1M "$DISK_MNT" | tail -1 | tr -d ' ')" -le 96
    check "the disk carreld keeps answering: version" dcarrel version
    check "...list" dcarrel ls
    status="$(disk_api GET "/v1/sessions/$id/events?limit=1000")"
    events="$(cat "$E2E_DIR/disk-api.out")"
    check_eq "...the timeline" "200" "$status"
    check "no event lost: the pause is on the timeline with its reason" json_true \
        '[.events[] | select(.kind == "lifecycle" and .action == "paused" and .params.reason == "host_disk_full")] | length == 1' \
        "$events"
    status="$(disk_api POST /v1/sessions '{"template":"tiny","cold":true}')"
    check_eq "a create is refused early with 507" "507" "$status"
    check "...and code no_space" json_true '.error.code == "no_space"' \
        "$(cat "$E2E_DIR/disk-api.out")"
    check "the main carreld's session keeps working" carrel exec "$other" -- true
    check_eq "...and running" "running" "$(carrel show "$other" --json | jq -r .state)"
    grep -E "reserve|disk is full" "$E2E_DIR/disk-carreld.log" | sed 's/^/e2e: disk carreld: /'
    # Room again: resume retries the write that failed, and dd goes on to its end.
    rm -f "$DISK_MNT/ballast"
    check "resume after space is freed" dcarrel resume "$id"
    for _ in $(seq 1 300); do
        dcarrel exec "$id" -- pgrep -x dd >/dev/null 2>&1 || break
        sleep 1
    done
    check_eq "the session runs on after dd ended" "running" \
        "$(dcarrel show "$id" --json | jq -r .state)"
    check_eq "every byte dd wrote is in the guest's file" "$((count * 1048576))" \
        "$(dcarrel exec "$id" -- stat -c %s /fill 2>/dev/null)"
    status="$(disk_api GET "/v1/sessions/$id/events?limit=1000")"
    check "the resume is on the timeline too" json_true \
        '[.events[] | select(.kind == "lifecycle" and .action == "resume")] | length == 1' \
        "$(cat "$E2E_DIR/disk-api.out")"
    check "the session goes" dcarrel rm "$id"
    disk_cleanup
}
