# Guest RAM in a file (carrel-qemu; core-warm.c, manager/daemon/carrel-qemu.c): the warm state's
# save holds the device state only, its clones map the RAM file privately, and nothing a clone
# does (writes, snapshots, reverts, forks of its snapshots) ever changes that file.
# shellcheck shell=bash

MEMFILE_RAM=""
MEMFILE_SUM=""

# memfile_checks CLONE: CLONE, a warm clone made as carrel-qemu.
memfile_checks() {
    local clone="$1" warm pid rss xml s forks fork_ids tokens t1 snap ram
    warm="$(carrel template show tiny --json | jq -c .warm)"
    check "the warm state keeps guest RAM in a file: its save is the device state alone" \
        json_true '.memory_in_file and .memory_bytes < 64 * 1048576' "$warm"
    MEMFILE_RAM="$(find "$STATE_DIR/templates" -path '*warm*' -name memory.ram | head -1)"
    pid="$(cat "/run/libvirt/qemu/carrel-$clone.pid" 2>/dev/null)"
    check_eq "the RAM file is QEMU's user's alone (0600)" "600 $(ps -o user= -p "${pid:-0}")" \
        "$(stat -c '%a %U' "$MEMFILE_RAM" 2>/dev/null)"
    MEMFILE_SUM="$(md5sum <"$MEMFILE_RAM")"
    xml="$("${VIRSH[@]}" dumpxml "carrel-$clone")"
    # shellcheck disable=SC2016 # expanded by bash -c
    check "a clone maps it privately, with free page reporting off" bash -c \
        'grep -q "value=.private:$2." <<<"$1" && ! grep -q freePageReporting <<<"$1"' _ "$xml" \
        "$MEMFILE_RAM"
    # It loaded no RAM: where a read of untouched memory allocates, a clone that loaded its
    # 512 MiB held all of it (and more) until its reclaim.
    rss="$(awk '/^VmRSS:/ {print int($2 / 1024)}' "/proc/${pid:-0}/status" 2>/dev/null)"
    check "a clone's QEMU holds less than its guest's RAM (${rss:-?} MiB < 512)" \
        test "${rss:-1000}" -lt 512

    # A snapshot of such a clone holds its RAM; revert and forks map the file again beneath it.
    s="$(carrel create --template tiny --name memfile --json 2>/dev/null | jq -r .id)"
    token_start "$s"
    sleep 1
    t1="$(token_of "$s")"
    check "snapshot of a clone that maps its RAM file" carrel snapshot "$s" m1
    token_stop "$s"
    # Its RAM goes into a file of the snapshot's own, its save keeps the device state.
    snap="$(carrel snapshots "$s" --json | jq -r '.snapshots[] | select(.name == "m1") | .id')"
    ram="$STATE_DIR/sessions/$s/$snap.ram"
    check_eq "the snapshot's RAM is a file of its own, QEMU's user's alone (0600)" \
        "600 $(ps -o user= -p "${pid:-0}")" "$(stat -c '%a %U' "$ram" 2>/dev/null)"
    # shellcheck disable=SC2016 # expanded by bash -c
    check "...its save holds the device state alone (under 64 MiB), no whole save is left" \
        bash -c 'test "$(stat -c %s "$1/memory.dev")" -lt 67108864 && ! test -e "$1/memory.save"' \
        _ "$STATE_DIR/sessions/$s/snapshots/$snap"
    carrel exec "$s" -- sh -c 'dd if=/dev/urandom of=/dev/shm/fill bs=1M count=64 2>/dev/null; rm -f /dev/shm/fill' >/dev/null 2>&1
    check "revert it" carrel revert "$s" m1
    sleep 1
    check_eq "after the revert its process runs with its memory (its token)" "$t1" \
        "$(token_of "$s")"
    check "...mapping the snapshot's RAM file privately" \
        grep -q "value=.private:$ram." <<<"$("${VIRSH[@]}" dumpxml "carrel-$s")"
    forks="$(carrel fork "$s" --snapshot m1 --count 2 --json 2>/dev/null | jq -r '.sessions[].id' | tr '\n' ' ')"
    read -r -a fork_ids <<<"$forks"
    check_eq "fork 2 from that snapshot" "2" "${#fork_ids[@]}"
    sleep 1
    tokens=""
    for f in "${fork_ids[@]}"; do tokens+="$(token_of "$f") "; done
    check_eq "each fork runs the snapshot's process with its token" "$t1 $t1 " "$tokens"
    check "...mapping the snapshot's RAM file privately" \
        grep -q "value=.private:$ram." <<<"$("${VIRSH[@]}" dumpxml "carrel-${fork_ids[0]}")"
    for f in "${fork_ids[@]}"; do carrel rm "$f" >/dev/null 2>&1; done
    # The session maps the file since its revert: deleting the snapshot leaves it to the session.
    carrel snapshot "$s" m1 --delete >/dev/null 2>&1
    check "a deleted snapshot's RAM file stays while a session maps it" test -s "$ram"
    carrel rm "$s" >/dev/null 2>&1
    check "...and goes with that session" test ! -e "$ram"
    memfile_unchanged
}

# memfile_unchanged: the RAM file is as it was saved, whatever its clones did since.
memfile_unchanged() {
    [ -n "$MEMFILE_RAM" ] || return 0
    check_eq "the warm state's RAM file is unchanged by its clones" "$MEMFILE_SUM" \
        "$(md5sum <"$MEMFILE_RAM" 2>/dev/null)"
}
