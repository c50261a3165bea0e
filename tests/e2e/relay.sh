#!/bin/bash
# Sourced by test-sessions.sh: carrel-qemu's monitor relay (manager/daemon/carrel-qemu-relay.c)
# answers libvirt's questions about the guest CPU from what an earlier QEMU answered.

relay_cpu_xml() { "${VIRSH[@]}" dumpxml "carrel-$1" | sed -n '/<cpu /,/<\/cpu>/p'; }
relay_log() { cat "/var/log/libvirt/qemu/carrel-$1.log" 2>/dev/null; }
relay_counts() { # "RELAYS QEMUS": those of this carreld's sessions (their environment says)
    local kind pid n
    for kind in qemu-relay qemu-system-x86; do
        n=0
        for pid in $(pgrep -x "$kind"); do
            grep -qz "^CARREL_QEMU_CPU_CACHE=$STATE_DIR/emulator/cpu$" "/proc/$pid/environ" \
                2>/dev/null && n=$((n + 1))
        done
        printf '%s ' "$n"
    done
}

relay_checks() {
    local dir user a b cache
    dir="$STATE_DIR/emulator/cpu"
    user="$(ps -o user= -p "$(cat "/run/libvirt/qemu/carrel-$1.pid" 2>/dev/null)")"
    check_eq "carreld keeps the CPU's answers in a folder of QEMU's user alone (0700)" \
        "700 $user" "$(stat -c '%a %U' "$dir" 2>/dev/null)"
    # Learned again from scratch: the first QEMU answers libvirt itself.
    rm -f "$dir"/*
    a="$(carrel create --template tiny --name relay-a --json 2>/dev/null | jq -r .id)"
    b="$(carrel create --template tiny --name relay-b --json 2>/dev/null | jq -r .id)"
    check "the first QEMU answered libvirt about its CPU, the relay learned it" \
        grep -Eq "carrel-qemu: learned [0-9]{3} CPU properties" <<<"$(relay_log "$a")"
    cache="$(find "$dir" -type f | head -1)"
    check_eq "...into a file of QEMU's user alone (0600)" "600 $user" \
        "$(stat -c '%a %U' "${cache:-/nonexistent}" 2>/dev/null)"
    check "the next QEMU's answers came from the relay" \
        grep -Eq "carrel-qemu: [0-9]{3} CPU properties answered from $cache" <<<"$(relay_log "$b")"
    check_eq "libvirt sees the same CPU either way" "$(relay_cpu_xml "$a")" "$(relay_cpu_xml "$b")"
    check "...and the relayed session works (exec)" carrel exec "$b" -- true
    # shellcheck disable=SC2016 # expanded by bash -c
    check "one relay per QEMU, one QEMU per domain" bash -c \
        'test "$(pgrep -fc "^/usr/bin/qemu-system-x86_64 -name guest=carrel-$1,")" = 1' _ "$b"
    check_eq "...as many relays as QEMUs of carreld's" "$(relay_counts | awk '{print $2, $2}')" \
        "$(relay_counts | awk '{print $1, $2}')"
    carrel rm "$a" >/dev/null 2>&1
    carrel rm "$b" >/dev/null 2>&1
    sleep 1
    check_eq "the relays end with their QEMUs" "$(relay_counts | awk '{print $2, $2}')" \
        "$(relay_counts | awk '{print $1, $2}')"
}
