# Evidence bundles (issue 19, item 5) on a real guest: a session that clicked, typed, took a
# screenshot and had a file extracted is exported; `carrel verify` passes offline pinned to the
# host key that `carrel version --json` shows, and names the file when one byte of a
# screenshot, an artifact or the timeline is flipped in a copy of the tar. A destroyed session
# still exports. The host key is 0600 and never in carreld's log.
# shellcheck shell=bash

# bundle_flip TAR MEMBER OUT: a copy of TAR with one byte in the middle of MEMBER's data flipped
# (the tar is uncompressed: Python's tarfile gives the member's data offset).
bundle_flip() {
    /usr/bin/python3 - "$1" "$2" "$3" <<'PY'
import shutil, sys, tarfile
src, member, out = sys.argv[1:4]
with tarfile.open(src, "r:") as t:
    info = t.getmember(member)
    offset = info.offset_data + info.size // 2
shutil.copyfile(src, out)
with open(out, "r+b") as f:
    f.seek(offset)
    byte = f.read(1)
    f.seek(offset)
    f.write(bytes([byte[0] ^ 0x01]))
PY
}

# bundle_member TAR KIND: the first member of that kind in the bundle's manifest.
bundle_member() {
    tar -xOf "$1" manifest.json | jq -r --arg k "$2" '[.files[] | select(.kind == $k)][0].path'
}

bundle_checks() {
    local id fp pub dir tar report shot art member copy
    dir="$E2E_DIR/bundle"
    mkdir -p "$dir"
    fp="$(carrel version --json | jq -r .server.host_key.fingerprint)"
    pub="$(carrel version --json | jq -r .server.host_key.public_key)"
    check "the host key's fingerprint is shown (carrel version --json)" \
        grep -Eq '^sha256:[0-9a-f]{64}$' <<<"$fp"
    check_eq "the host key file is 0600" "600" "$(stat -c %a "$STATE_DIR/host-key.pem")"
    check "the host key is never in carreld's log" bash -c "! grep -q 'PRIVATE KEY' '$DAEMON_LOG'"

    id="$(carrel create --template tiny --name bundle --json 2>/dev/null | jq -r .id)"
    check "session for the bundle checks" test -n "$id" -a "$id" != null
    check "an action: a click" carrel click "$id" 20 20
    check "an action: typing" carrel type "$id" "evidence"
    check "a screenshot, kept for the timeline" carrel screenshot "$id" -o "$dir/shot.png"
    carrel exec "$id" -- sh -c 'mkdir -p /home/user/out && echo evidence > /home/user/out/e.txt' \
        >/dev/null 2>&1
    check "an artifact extracted" carrel extract "$id" /home/user/out -o "$dir/extracted"

    tar="$dir/bundle.tar"
    check "export writes the bundle" carrel export "$id" -o "$tar"
    check "the bundle is a plain tar with manifest and signature" bash -c \
        "tar -tf '$tar' | grep -qx manifest.json && tar -tf '$tar' | grep -qx manifest.sig"
    report="$(carrel verify "$tar" --key "$fp" --json)"
    check_eq "verify passes, pinned to the host key" "0" "$?"
    check "...with the signature, the key and audit rows" json_true \
        '.ok and .signature_ok and .key_pinned and .audit_rows >= 3 and .problems == []' "$report"
    check "verify passes pinned by the public key itself too" carrel verify "$tar" --key "$pub"
    carrel verify "$tar" --key "sha256:0000" >/dev/null 2>&1
    check_eq "verify against another key fails (exit 10)" "10" "$?"
    check "export is audited" json_true '[.entries[] | select(.result == "ok")] | length >= 1' \
        "$(carrel audit ls --session "$id" --operation session.export --json)"
    check "carrel export -o - streams the same kind of bundle to stdout" bash -c \
        "$CARREL_BIN export '$id' -o - | $CARREL_BIN verify - --key '$fp' >/dev/null"

    shot="$(bundle_member "$tar" screenshot)"
    art="$(bundle_member "$tar" artifact)"
    check "the bundle holds a screenshot and an artifact" test "$shot" != null -a "$art" != null
    for member in "$shot" "$art" timeline.jsonl; do
        copy="$dir/flipped-$(tr / _ <<<"$member").tar"
        bundle_flip "$tar" "$member" "$copy"
        report="$(carrel verify "$copy" --key "$fp" --json)"
        check_eq "a flipped byte in $member: verify fails (exit 10)" "10" "$?"
        check "...and names $member as changed" json_true \
            "[.problems[] | select(.kind == \"changed\" and .file == \"$member\")] | length == 1" \
            "$report"
    done

    carrel rm "$id" >/dev/null 2>&1
    check "a destroyed session still exports" carrel export "$id" -o "$dir/destroyed.tar"
    check "...and verifies, its state destroyed" json_true \
        '.ok' "$(carrel verify "$dir/destroyed.tar" --key "$fp" --json)"
    check_eq "...the manifest says destroyed" "destroyed" \
        "$(tar -xOf "$dir/destroyed.tar" manifest.json | jq -r .session.state)"
}
