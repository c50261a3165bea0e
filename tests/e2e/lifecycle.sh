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
        # Under load the guest may need a moment to run its loop again.
        for _ in $(seq 1 25); do
            after="$(counter "$id")"
            [ -n "$after" ] && [ "$after" -gt "${before:-0}" ] && break
            sleep 0.2
        done
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

# Where a read of untouched memory allocates it (carreld's probe at start), QEMU's load of the
# memory state makes all of guest RAM resident: a new clone's memory-reclaim job (after create
# returns) must give its guest's free memory back. This half runs as libvirt's own QEMU, whose
# warm states keep RAM in the save image; carrel-qemu's map a RAM file instead (memfile.sh).
reclaim_checks() {
    local r r_pid r_first r_now
    grep -q "memory: a read of untouched memory allocates it here" "$DAEMON_LOG" || return 0
    r="$(carrel create --template tiny --name reclaimed --json | jq -r .id)"
    r_pid="$(cat "/run/libvirt/qemu/carrel-$r.pid" 2>/dev/null)"
    r_first="$(awk '/^VmRSS:/ {print int($2 / 1024)}' "/proc/$r_pid/status" 2>/dev/null)"
    r_now="$r_first"
    for _ in $(seq 1 120); do
        r_now="$(awk '/^VmRSS:/ {print int($2 / 1024)}' "/proc/$r_pid/status" 2>/dev/null)"
        [ "${r_now:-0}" -gt 0 ] && [ "$r_now" -le $((${r_first:-0} - 128)) ] && break
        sleep 1
    done
    if [ "${r_now:-0}" -gt 0 ] && [ "$r_now" -le $((${r_first:-0} - 128)) ]; then
        pass "where reads allocate, a warm clone's memory reclaim gives memory back (${r_first} -> ${r_now} MiB)"
    else
        fail "where reads allocate, a warm clone's memory reclaim gives memory back (${r_first:-?} -> ${r_now:-?} MiB in 120 s)"
    fi
    check_eq "the reclaimed clone still answers" "ok" "$(carrel exec "$r" -- echo ok)"
    carrel rm "$r" >/dev/null 2>&1
}

# Snapshots with memory (issue 6): a tree of two snapshots, reverted to in any order.
snapshot_checks() {
    local id t1 tree forks fork_ids
    id="$(carrel create --template tiny --name snaps --json 2>/dev/null | jq -r .id)"
    token_start "$id"
    carrel exec "$id" -- sh -c 'echo A > /home/user/a; sync' >/dev/null 2>&1
    sleep 1
    t1="$(token_of "$id")"
    check "snapshot s1 of a running session" carrel snapshot "$id" s1
    check_eq "the session runs on after the snapshot" "running" "$(carrel show "$id" --json | jq -r .state)"
    token_stop "$id"
    carrel exec "$id" -- sh -c 'echo B > /home/user/b; sync' >/dev/null 2>&1
    check "snapshot s2" carrel snapshot "$id" s2
    check "a taken name is refused" bash -c "! $CARREL_BIN snapshot $id s2"

    check "revert to s1" carrel revert "$id" s1
    sleep 1
    check_eq "at s1: A present, B absent" "A absent" \
        "$(carrel exec "$id" -- cat /home/user/a 2>/dev/null) $(carrel exec "$id" -- test -e /home/user/b 2>/dev/null && echo present || echo absent)"
    check_eq "at s1: the process runs again with its memory (its token)" "$t1" "$(token_of "$id")"
    check "revert to s2" carrel revert "$id" s2
    check_eq "at s2: B present, the process gone" "B gone" \
        "$(carrel exec "$id" -- cat /home/user/b 2>/dev/null) $(carrel exec "$id" -- pgrep -f "random/uui[d]" >/dev/null 2>&1 && echo running || echo gone)"
    check "revert to s1 again" carrel revert "$id" s1
    sleep 1
    check_eq "at s1 again: B absent, the same token" "absent $t1" \
        "$(carrel exec "$id" -- test -e /home/user/b 2>/dev/null && echo present || echo absent) $(token_of "$id")"
    tree="$(carrel snapshots "$id" --json 2>/dev/null)"
    check "the snapshots form a tree: s2's parent is s1, both with memory" json_true \
        '(.snapshots | length == 2) and .snapshots[1].parent == .snapshots[0].id and all(.snapshots[]; .memory)' "$tree"
    check "every disk layer passes qemu-img check" bash -c \
        "for f in \$(find '$STATE_DIR/sessions/$id' -name '*.qcow2'); do qemu-img check -U -q \"\$f\" || exit 1; done"
    # s2 is a leaf nothing stands on (the session descends from s1): its layer goes too.
    check "delete snapshot s2: memory and layer go" json_true '.layer_kept == false' \
        "$(carrel snapshot "$id" s2 --delete --json 2>/dev/null)"
    check "s1 is still there, and every chain still checks" bash -c \
        "[ \"\$($CARREL_BIN snapshots $id --json | jq -r '[.snapshots[].name] | join(\" \")')\" = s1 ] && for f in \$(find '$STATE_DIR/sessions/$id' -name '*.qcow2'); do qemu-img check -U -q \"\$f\" || exit 1; done"

    # Fork 3 from s1: all run side by side from s1's memory, each writes on its own disk.
    forks="$(carrel fork "$id" --snapshot s1 --count 3 --json 2>/dev/null | jq -r '.sessions[].id' | tr '\n' ' ')"
    read -r -a fork_ids <<<"$forks"
    check_eq "fork 3 from s1" "3" "${#fork_ids[@]}"
    local f states="" tokens="" own=""
    for f in "${fork_ids[@]}"; do
        states+="$("${VIRSH[@]}" domstate "carrel-$f" | head -1) "
        tokens+="$(token_of "$f") "
        carrel exec "$f" -- sh -c "echo $f > /home/user/fork.txt" >/dev/null 2>&1
    done
    for f in "${fork_ids[@]}"; do
        own+="$([ "$(carrel exec "$f" -- cat /home/user/fork.txt 2>/dev/null)" = "$f" ] && echo own || echo other) "
    done
    check_eq "the forks run side by side" "running running running " "$states"
    check_eq "each fork runs s1's process with its memory" "$t1 $t1 $t1 " "$tokens"
    check_eq "writes in the forks are independent" "own own own " "$own"
    local macs="" mac_ok=""
    for f in "$id" "${fork_ids[@]}"; do macs+="$(xml_mac "$f")"$'\n'; done
    for f in "${fork_ids[@]}"; do
        mac_ok+="$([ "$(guest_mac "$f")" = "$(xml_mac "$f")" ] && echo same || echo differs) "
    done
    check_eq "the origin and its forks have four different MACs" "4" "$(sort -u <<<"$macs" | grep -c .)"
    check_eq "each fork's guest took its own MAC" "same same same " "$mac_ok"
    check "the origin cannot go while its forks stand on its snapshots" \
        bash -c "! $CARREL_BIN rm $id"
    for f in "${fork_ids[@]}"; do carrel rm "$f" >/dev/null 2>&1; done
    carrel rm "$id" >/dev/null 2>&1
}

# Waits up to $3 seconds for a session's state to be $2.
wait_state_for() {
    for _ in $(seq 1 "$3"); do
        [ "$(carrel show "$1" --json 2>/dev/null | jq -r .state)" = "$2" ] && return 0
        sleep 1
    done
    return 1
}

# Why a TTL's destroy left no extraction: what carrel said, and the session's audit rows.
ttl_evidence() {
    echo "artifacts of $1: $2"
    carrel audit ls --session "$1" --json 2>&1 |
        jq -c '.entries[]?' 2>&1 | tail -20
}

# Time limits: a TTL destroys (collecting first), an idle timeout hibernates, and a TTL set
# before a carreld restart still acts after it.
timeout_checks() {
    local a b c pid
    a="$(carrel create --template tiny --name ttl-a --ttl 10 --on-expiry destroy \
        --artifact /etc/hostname --json 2>/dev/null | jq -r .id)"
    b="$(carrel create --template tiny --name idle-b --idle 10 --on-expiry hibernate \
        --json 2>/dev/null | jq -r .id)"
    c="$(carrel create --template tiny --name ttl-c --ttl 20 --on-expiry pause \
        --json 2>/dev/null | jq -r .id)"
    pid="$DAEMON_PID"
    kill -KILL "$pid"
    wait "$pid" 2>/dev/null || true
    start_daemon
    check "a TTL destroys the session" wait_state_for "$a" destroyed 120
    local arts
    arts="$(carrel artifacts "$a" --json 2>&1)"
    check "...after collecting its exit artifacts" json_true \
        '[.extractions[] | select(.reason == "destroy")] | length == 1' "$arts"
    json_true '[.extractions[] | select(.reason == "destroy")] | length == 1' "$arts" ||
        ttl_evidence "$a" "$arts" >&2
    check "an idle timeout hibernates the session" wait_state_for "$b" hibernated 120
    check "a TTL set before a carreld restart pauses after it" wait_state_for "$c" paused 120
    carrel rm "$b" "$c" >/dev/null 2>&1
}

# A pool's ready count (0 when there is no such pool).
pool_ready() {
    carrel template pool --json 2>/dev/null | jq -r --arg t "$1" '[.pools[] | select(.template == $t) | .ready] | add // 0'
}

wait_pool_ready() {
    for _ in $(seq 1 150); do
        [ "$(pool_ready "$1")" -ge "$2" ] && return 0
        sleep 1
    done
    return 1
}

# Warm pool: paused sessions kept ready and unlisted; a create takes one, the pool refills.
pool_checks() {
    local before s
    check "set a warm pool of 1 for tiny" carrel template pool tiny --size 1
    check "the pool fills" wait_pool_ready tiny 1
    before="$(carrel ls --json | jq '.sessions | length')"
    s="$(carrel create --template tiny --name pooled --json 2>/dev/null)"
    check "a create takes the pool member" json_true '.from_pool and .state == "running"' "$s"
    check_eq "pool members are not listed; the taken one is" "$((before + 1))" \
        "$(carrel ls --json | jq '.sessions | length')"
    check_eq "the taken session runs commands" "ok" \
        "$(carrel exec pooled -- echo ok 2>/dev/null)"
    check "the pool refills in the background" wait_pool_ready tiny 1
    carrel template pool tiny --size 0 >/dev/null 2>&1
    carrel rm pooled >/dev/null 2>&1
}
