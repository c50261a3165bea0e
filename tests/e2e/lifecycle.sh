# Pause, resume and hibernate (issue 6, first part) on a real guest: a counter process keeps its
# memory across 20 pause/resume cycles and across hibernate + a carreld restart + resume; a
# paused session's disk can be read (artifacts).
# shellcheck shell=bash

# The guest's counter (a shell loop writing /tmp/counter five times a second).
counter() {
    carrel exec "$1" -- cat /tmp/counter 2>/dev/null
}

lifecycle_checks() {
    local id before after ok=0 i sum pid
    id="$(carrel create --template tiny --name life --json 2>/dev/null | jq -r .id)"
    check "session for the lifecycle checks" test -n "$id" -a "$id" != null
    # shellcheck disable=SC2016 # expanded by the guest's shell
    carrel exec "$id" -- sh -c 'setsid sh -c "i=0; while :; do i=\$((i+1)); echo \$i > /tmp/counter; sleep 0.2; done" </dev/null >/dev/null 2>&1 &' >/dev/null 2>&1
    carrel exec "$id" -- sh -c 'head -c 200000 /dev/urandom > /home/user/keep.bin; sync' >/dev/null 2>&1
    sum="$(carrel exec "$id" -- sha256sum /home/user/keep.bin 2>/dev/null)"
    sleep 1
    before="$(counter "$id")"
    for i in $(seq 1 20); do
        if ! carrel pause "$id" >/dev/null 2>&1 ||
            [ "$("${VIRSH[@]}" domstate "carrel-$id" | head -1)" != paused ] ||
            ! carrel resume "$id" >/dev/null 2>&1; then
            break
        fi
        sleep 0.3
        after="$(counter "$id")"
        if [ -z "$after" ] || [ "$after" -le "${before:-0}" ]; then
            break
        fi
        before="$after"
        ok=$i
    done
    check_eq "20 pause/resume cycles, the counter advancing after each" "20" "$ok"
    check_eq "files intact after the cycles" "$sum" "$(carrel exec "$id" -- sha256sum /home/user/keep.bin 2>/dev/null)"

    # Paused: no guest commands, but the screen and the disk can be read.
    carrel pause "$id" >/dev/null 2>&1
    check_eq "a paused session says so" "paused" "$(carrel show "$id" --json | jq -r .state)"
    check "exec on a paused session is refused" bash -c "! $CARREL_BIN exec $id -- true"
    check "a paused session's screen can be read" carrel screenshot "$id" -o "$E2E_DIR/paused.png"
    carrel extract "$id" /home/user/keep.bin -o "$E2E_DIR/paused-x" --json >"$E2E_DIR/paused-x.json" 2>/dev/null
    check_eq "extraction from a paused session reads its disk" "disk $(cut -d' ' -f1 <<<"$sum")" \
        "$(jq -r .source "$E2E_DIR/paused-x.json") $(sha256sum <"$E2E_DIR/paused-x/home/user/keep.bin" | cut -d' ' -f1)"
    carrel resume "$id" >/dev/null 2>&1
    before="$(counter "$id")"

    # Hibernate: memory on disk, QEMU gone; survives a carreld restart; resume restores it.
    check "hibernate" carrel hibernate "$id"
    check_eq "hibernated: no domain, no QEMU" "gone none" \
        "$("${VIRSH[@]}" dominfo "carrel-$id" >/dev/null 2>&1 && echo defined || echo gone) $(pgrep -f "guest=carrel-$id" >/dev/null && echo qemu || echo none)"
    pid="$DAEMON_PID"
    kill -KILL "$pid"
    wait "$pid" 2>/dev/null || true
    start_daemon
    check_eq "still hibernated after a carreld restart" "hibernated" \
        "$(carrel show "$id" --json 2>/dev/null | jq -r .state)"
    check "resume a hibernated session" carrel resume "$id"
    sleep 1
    after="$(counter "$id")"
    check "the counter process lives on after hibernate (memory restored)" \
        test -n "$after" -a "${after:-0}" -gt "${before:-0}"
    check_eq "files intact after hibernate" "$sum" "$(carrel exec "$id" -- sha256sum /home/user/keep.bin 2>/dev/null)"
    guest_now="$(carrel exec "$id" -- date +%s 2>/dev/null)"
    check "clock is right after resume (within 5 s)" \
        test "$(($(date +%s) - ${guest_now:-0}))" -le 5 -a "$((${guest_now:-0} - $(date +%s)))" -le 5
    carrel rm "$id" >/dev/null 2>&1
}
