# Memory and disk bounds of files (issue 16) on real guests: an oversized or sparse file is
# refused from its size in the guest, before any copy (by the agent: du before tar, nothing
# packed in the guest's /tmp; from the disk: libguestfs stat before download, nothing under
# the extraction's folder); an artifact download streams with its Content-Length and sha256;
# an upload comes back whole after its create.
# shellcheck shell=bash

# Regular files under an extraction's folder on the host.
files_on_host() {
    find "$STATE_DIR/artifacts/$1/files" -type f 2>/dev/null | wc -l
}

# The daemon's admin token (the e2e daemon's own state dir).
files_token() {
    cat "$STATE_DIR/admin.token"
}

files_checks() {
    local dir="$E2E_DIR/files" id x xid aid size sum headers uploads
    mkdir -p "$dir"
    id="$(carrel create --template tiny --name files-bounds --json 2>/dev/null | jq -r .id)"
    check "create a session for the file bounds" test -n "$id" -a "$id" != null
    # A sparse 4 GiB file (a few KiB on disk), a 3 MiB file and a small one.
    carrel exec "$id" -- sh -c '
        set -e
        mkdir -p /home/user/big
        truncate -s 4G /home/user/big/sparse.img
        head -c 3145728 /dev/urandom > /home/user/big/blob.bin
        echo small > /home/user/small.txt
        sync' >/dev/null 2>&1

    # Running: the agent sizes with du first; tar never packs the file in the guest.
    x="$(carrel extract "$id" /home/user/big/sparse.img --max-mib 1 -o "$dir/run" --json 2>/dev/null)"
    check "agent: a sparse file over the limit is refused by its size, named in the error" \
        json_true '(.error | test("/home/user/big/sparse.img.* 4294967296 bytes")) and .count == 0' "$x"
    check_eq "agent: nothing of it was packed in the guest's /tmp" "0" \
        "$(carrel exec "$id" -- sh -c 'ls /tmp/carrel-x-*.tar 2>/dev/null | wc -l' 2>/dev/null | tr -d ' ')"
    check_eq "agent: nothing of it landed on the host" "0" "$(files_on_host "$(jq -r .id <<<"$x")")"

    # Under the limit (running: through the agent): the download streams with its length and the
    # manifest's sha256.
    x="$(carrel extract "$id" /home/user/small.txt /home/user/big/blob.bin --max-mib 8 -o "$dir/ok" --json 2>/dev/null)"
    aid="$(jq -r '.artifacts[] | select(.guest_path == "/home/user/big/blob.bin") | .id' <<<"$x")"
    size="$(jq -r '.artifacts[] | select(.guest_path == "/home/user/big/blob.bin") | .size' <<<"$x")"
    sum="$(jq -r '.artifacts[] | select(.guest_path == "/home/user/big/blob.bin") | .sha256' <<<"$x")"
    check_eq "the 3 MiB file came out whole" "3145728" "$size"
    headers="$(curl -sS --unix-socket "$SOCKET" -H "Authorization: Bearer $(files_token)" \
        -D - -o "$dir/blob.bin" "http://carrel/v1/artifacts/$aid" 2>/dev/null | tr -d '\r')"
    check_eq "download: Content-Length is the file's size" "3145728" \
        "$(grep -i '^content-length:' <<<"$headers" | awk '{print $2}')"
    check_eq "download: X-Carrel-Sha256 is the manifest's" "$sum" \
        "$(grep -i '^x-carrel-sha256:' <<<"$headers" | awk '{print $2}')"
    check_eq "download: the bytes hash to it" "$sum" "$(sha256sum "$dir/blob.bin" | cut -d' ' -f1)"
    check_eq "download by the CLI: same bytes" "$sum" \
        "$(carrel artifact "$aid" -o - 2>/dev/null | sha256sum | cut -d' ' -f1)"

    # Stopped: libguestfs stats each file of the folder before anything is downloaded.
    carrel stop "$id" >/dev/null 2>&1
    x="$(carrel extract "$id" /home/user/big --max-mib 2 -o "$dir/disk" --json 2>/dev/null)"
    xid="$(jq -r .id <<<"$x")"
    check_eq "disk: the extraction read the disk" "disk" "$(jq -r .source <<<"$x")"
    check "disk: a file over the limit is refused by its size in the guest, named in the error" \
        json_true '(.error | test("/home/user/big/(sparse.img|blob.bin)'"'"' is [0-9]+ bytes")) and .count == 0' "$x"
    check_eq "disk: nothing of the folder landed on the host" "0" "$(files_on_host "$xid")"

    # An upload is spooled to disk and used by its create, then removed (a warm create: the agent
    # puts it in; artifacts.sh has a cold create's, through libguestfs).
    mkdir -p "$dir/in/task"
    head -c 5242880 /dev/urandom >"$dir/in/task/data.bin"
    sum="$(sha256sum "$dir/in/task/data.bin" | cut -d' ' -f1)"
    uploads="$(find "$STATE_DIR/uploads" -type f 2>/dev/null | wc -l)"
    x="$(carrel create --template tiny --name files-upload \
        --input "$dir/in/task:/home/user/task" --json 2>/dev/null | jq -r .id)"
    check_eq "an uploaded input arrives whole" "$sum" \
        "$(carrel exec "$x" -- sha256sum /home/user/task/data.bin 2>/dev/null | cut -d' ' -f1)"
    check_eq "the used upload is gone from the state dir" "$uploads" \
        "$(find "$STATE_DIR/uploads" -type f 2>/dev/null | wc -l)"
    carrel rm "$x" >/dev/null 2>&1
    carrel rm "$id" >/dev/null 2>&1
}
