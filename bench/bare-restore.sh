# What bench/warm and bench/lifecycle share: the bare baseline of a warm create, the template's
# warm save image restored by hand with `virsh restore --xml` on a fresh overlay of its frozen
# disk layer, until `virsh qemu-agent-command guest-ping` answers. For several at once (the
# baseline of a fork), copies of the image with a domain name and UUID of their own: libvirt
# restores an image only under the UUID saved in its header, so each copy's header has another,
# of the same length, written in place (the image's data is not touched).
# shellcheck shell=bash

# bare_setup STATE_DIR WORK COPIES: the warm image's facts, and COPIES copies of it under WORK
# (bare_restore 0 is the image itself, under the name saved in it: the warm session's domain,
# long gone).
bare_setup() {
    local state="$1" i name uuid
    BARE_WORK="$2"
    BARE_MEM="$(find "$state" -path '*warm*' -name memory.save | head -1)"
    [ -n "$BARE_MEM" ] || die "no warm save image under $state"
    BARE_XML="$(virsh -q save-image-dumpxml "$BARE_MEM")"
    # The disk the saved domain names, in the folder it was saved in (renamed since).
    BARE_DISK="$(sed -n "s|.*<source file='\([^']*\)'.*|\1|p" <<<"$BARE_XML" | head -1)"
    BARE_NAMES=("$(sed -n 's|.*<name>\([^<]*\)</name>.*|\1|p' <<<"$BARE_XML" | head -1)")
    BARE_UUIDS=("$(sed -n 's|.*<uuid>\([^<]*\)</uuid>.*|\1|p' <<<"$BARE_XML" | head -1)")
    BARE_IMAGES=("$BARE_MEM")
    for i in $(seq 1 "$3"); do
        name="bench-bare-$(printf '%0*d' $((${#BARE_NAMES[0]} - 11)) "$i")"
        uuid="${BARE_UUIDS[0]:0:24}$(printf '%012x' "$i")"
        BARE_NAMES+=("$name")
        BARE_UUIDS+=("$uuid")
        BARE_IMAGES+=("$BARE_WORK/bare-image-$i.save")
        python3 - "$BARE_MEM" "${BARE_IMAGES[$i]}" "${BARE_NAMES[0]}" "$name" "${BARE_UUIDS[0]}" \
            "$uuid" <<'EOF'
import sys
src, dst, old_name, name, old_uuid, uuid = sys.argv[1:]
assert len(old_name) == len(name) and len(old_uuid) == len(uuid)
with open(src, "rb") as f:
    data = f.read()
# The header (its XML and its migration cookie) is at the start; the stream after it is QEMU's.
head, rest = data[: 1 << 20], data[1 << 20 :]
assert old_uuid.encode() in head
head = head.replace(old_name.encode(), name.encode()).replace(old_uuid.encode(), uuid.encode())
with open(dst, "wb") as f:
    f.write(head + rest)
EOF
    done
}

# bare_restore I: ms from `virsh restore` of copy I (0: the image) on its own overlay to the first
# guest-ping answered; the domain keeps running (bare_destroy).
bare_restore() {
    local i="$1" dir="$BARE_WORK/bare-$1" saved_dir t0
    saved_dir="$(dirname "$BARE_DISK")"
    rm -rf "$dir"
    mkdir -p "$dir"
    qemu-img create -q -f qcow2 -b "$(dirname "$BARE_MEM")/disk.qcow2" -F qcow2 "$dir/disk.qcow2"
    # The disk; guest RAM in the warm state's file, mapped privately as carrel's clones map it
    # (when the state has one: carrel-qemu); then the serial log and whatever else was in the
    # folder the state was saved in; the copy's own name and UUID.
    sed -e "s|$BARE_DISK|$dir/disk.qcow2|" \
        -e "s|shared:$saved_dir/memory.ram|private:$(dirname "$BARE_MEM")/memory.ram|" \
        -e "s|$saved_dir/|$dir/|g" -e "s|<name>[^<]*</name>|<name>${BARE_NAMES[$i]}</name>|" \
        -e "s|<uuid>[^<]*</uuid>|<uuid>${BARE_UUIDS[$i]}</uuid>|" <<<"$BARE_XML" >"$dir/domain.xml"
    t0=$(date +%s%3N)
    virsh -q restore "${BARE_IMAGES[$i]}" --xml "$dir/domain.xml" >/dev/null || return 1
    # One call that waits for the agent, as carreld's own wait does; again only if it failed.
    until virsh -q qemu-agent-command "${BARE_NAMES[$i]}" --timeout 30 \
        '{"execute":"guest-ping"}' >/dev/null 2>&1; do
        [ $(($(date +%s%3N) - t0)) -lt 120000 ] || return 1
        sleep 0.01
    done
    echo $(($(date +%s%3N) - t0))
}

bare_destroy() {
    virsh -q destroy "${BARE_NAMES[$1]}" >/dev/null 2>&1 || true
    rm -rf "$BARE_WORK/bare-$1"
}
