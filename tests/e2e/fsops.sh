# File operations in a guest (issue 20, item 3) on a real session of tiny: carrel fs against
# what the guest itself says (ls -la, test, sha256sum through carrel exec), hostile names,
# clear errors for bad input, and a 100 MiB round trip streamed both ways with its sha256.
# tiny must have been built with this tree's carrel-guest (fs commands).
# shellcheck shell=bash

# "name type size" lines of a directory as `ls -la` shows them in the guest (names without
# spaces), sorted; . and .. left out.
fsops_ls_guest() {
    carrel exec "$1" -- sh -c "LC_ALL=C ls -la --time-style=+%s '$2'" 2>/dev/null |
        awk 'NR > 1 && $7 != "." && $7 != ".." {
            t = substr($1, 1, 1); type = t == "d" ? "dir" : t == "l" ? "symlink" : t == "-" ? "file" : "other"
            print $7, type, $5 }' | sort
}

# The same lines from carrel fs ls --json.
fsops_ls_carrel() {
    carrel fs "$1" ls "$2" --json 2>/dev/null |
        jq -r '.entries[] | "\(.name) \(.type) \(.size)"' | sort
}

fsops_token() {
    cat "$STATE_DIR/admin.token"
}

fsops_checks() {
    local dir="$E2E_DIR/fsops" id x code local_sum guest_sum reply_sum header_sum
    mkdir -p "$dir"
    id="$(carrel create --template tiny --name fsops --json 2>/dev/null | jq -r .id)"
    check "fsops: create a session" test -n "$id" -a "$id" != null

    # A listing matches ls -la in the guest: names, types, sizes.
    carrel exec "$id" -- sh -c '
        set -e
        mkdir -p /home/user/fsls/sub
        head -c 12345 /dev/urandom > /home/user/fsls/data.bin
        echo hello > /home/user/fsls/hello.txt
        ln -s /etc/hostname /home/user/fsls/link
        mkfifo /home/user/fsls/pipe' >/dev/null 2>&1
    check_eq "fsops: the listing matches ls -la in the guest (names, types, sizes)" \
        "$(fsops_ls_guest "$id" /home/user/fsls)" "$(fsops_ls_carrel "$id" /home/user/fsls)"
    x="$(carrel fs "$id" ls /home/user/fsls --json 2>/dev/null)"
    check "fsops: the symlink's target, mode as octal text, mtime as seconds" json_true \
        '(.entries[] | select(.name == "link") | .target == "/etc/hostname") and
         (.entries[] | select(.name == "hello.txt") | (.mode | test("^0[0-7]{3}$")) and .mtime > 1600000000)' "$x"
    x="$(carrel fs "$id" stat /home/user/fsls/data.bin --json 2>/dev/null)"
    check "fsops: stat gives the file's size" json_true '.entry.size == 12345 and .entry.type == "file"' "$x"

    # mkdir, move and remove, each checked in the guest.
    carrel fs "$id" mkdir -p /home/user/fsnew/a/b >/dev/null 2>&1
    check "fsops: mkdir -p made the tree" carrel exec "$id" -- test -d /home/user/fsnew/a/b
    carrel fs "$id" mv /home/user/fsls/hello.txt /home/user/fsnew/moved.txt >/dev/null 2>&1
    check "fsops: mv moved the file" carrel exec "$id" -- sh -c \
        'test -f /home/user/fsnew/moved.txt && test ! -e /home/user/fsls/hello.txt'
    code="$(carrel fs "$id" mv /home/user/fsls/data.bin /home/user/fsnew/moved.txt --json 2>/dev/null | jq -r .error.code)"
    check_eq "fsops: mv onto an existing path is refused" "exists" "$code"
    code="$(carrel fs "$id" rm /home/user/fsnew --json 2>/dev/null | jq -r .error.code)"
    check_eq "fsops: rm of a non-empty directory without -r is refused" "wrong_state" "$code"
    check "fsops: ...and it is still there" carrel exec "$id" -- test -d /home/user/fsnew/a/b
    carrel fs "$id" rm /home/user/fsls/link >/dev/null 2>&1
    check "fsops: rm of a symlink removes the link, not its target" carrel exec "$id" -- sh -c \
        'test ! -L /home/user/fsls/link && test -f /etc/hostname'
    carrel fs "$id" rm -r /home/user/fsnew >/dev/null 2>&1
    check "fsops: rm -r removed the tree" carrel exec "$id" -- test ! -e /home/user/fsnew

    # Hostile names, made in the guest: returned escaped and marked, never raw.
    # shellcheck disable=SC2016 # expanded by the guest's shell
    carrel exec "$id" -- sh -c '
        mkdir -p /home/user/fsbad && cd /home/user/fsbad &&
        touch "$(printf "bad\nname")" "$(printf "x\377y")" "$(printf "esc\033[31m")" plain' \
        >/dev/null 2>&1
    x="$(carrel fs "$id" ls /home/user/fsbad --json 2>/dev/null)"
    check "fsops: a name with a newline comes back escaped, with the reason" json_true \
        '[.entries[] | select(.name == null and .name_escaped == "bad\\x0aname" and (.name_error | test("control")))] | length == 1' "$x"
    check "fsops: a name that is not UTF-8 comes back escaped, with the reason" json_true \
        '[.entries[] | select(.name == null and .name_escaped == "x\\xffy" and (.name_error | test("UTF-8")))] | length == 1' "$x"
    check "fsops: an escape sequence in a name never reaches the output raw" json_true \
        '([.entries[] | select(.name_escaped == "esc\\x1b[31m")] | length == 1) and (tostring | test("\u001b") | not)' "$x"
    check "fsops: the plain name is listed as is" json_true '[.entries[] | select(.name == "plain")] | length == 1' "$x"
    # shellcheck disable=SC2016 # expanded by the inner bash
    check "fsops: the terminal listing shows no raw escape" bash -c \
        '! "$1" fs "$2" ls /home/user/fsbad 2>/dev/null | grep -q "$(printf "\033")"' _ "$CARREL_BIN" "$id"

    # Bad input: clear errors, each with its code.
    x="$(carrel fs "$id" ls home/user --json 2>/dev/null)"
    check "fsops: a relative path is refused as not absolute" json_true \
        '.error.code == "invalid_argument" and (.error.message | test("not absolute"))' "$x"
    x="$(carrel fs "$id" ls /home/user/../etc --json 2>/dev/null)"
    check "fsops: a '..' segment is refused" json_true '.error.code == "invalid_argument"' "$x"
    x="$(carrel fs "$id" stat /home/user/no-such-file --json 2>/dev/null)"
    check "fsops: a missing path is not_found, naming it" json_true \
        '.error.code == "not_found" and (.error.message | test("no-such-file"))' "$x"
    carrel fs "$id" stat /home/user/no-such-file >/dev/null 2>&1
    check_eq "fsops: ...with the not-found exit code" "3" "$?"

    # 100 MiB round trip, streamed both ways: the same sha256 on the host, in the guest and in
    # carreld's replies (upload JSON, download header).
    head -c 104857600 /dev/urandom > "$dir/big.bin"
    local_sum="$(sha256sum "$dir/big.bin" | awk '{print $1}')"
    x="$(carrel cp --json "$dir/big.bin" "$id:/home/user/big.bin" 2>/dev/null)"
    check_eq "fsops: upload of 100 MiB: the reply's sha256 is the file's" "$local_sum" "$(jq -r .sha256 <<<"$x")"
    check_eq "fsops: upload of 100 MiB: all bytes" "104857600" "$(jq -r .bytes <<<"$x")"
    guest_sum="$(carrel exec "$id" -- sha256sum /home/user/big.bin 2>/dev/null | awk '{print $1}')"
    check_eq "fsops: upload of 100 MiB: sha256sum in the guest agrees" "$local_sum" "$guest_sum"
    x="$(carrel cp --json "$id:/home/user/big.bin" "$dir/back.bin" 2>/dev/null)"
    reply_sum="$(jq -r .sha256 <<<"$x")"
    check_eq "fsops: download of 100 MiB: same sha256 as uploaded" "$local_sum" "$reply_sum"
    check_eq "fsops: download of 100 MiB: the file on the host agrees" "$local_sum" \
        "$(sha256sum "$dir/back.bin" | awk '{print $1}')"
    # The header itself, read raw on a small file: `carrel cp` above already refused a download
    # whose X-Carrel-Sha256 differed from the bytes it got (cli-cp.c), and a second 100 MiB
    # download cost ~30 s.
    head -c 65536 /dev/urandom >"$dir/small.bin"
    carrel cp "$dir/small.bin" "$id:/home/user/small.bin" >/dev/null 2>&1
    header_sum="$(curl -sS --unix-socket "$SOCKET" -H "Authorization: Bearer $(fsops_token)" \
        -D - -o /dev/null "http://carrel/v1/sessions/$id/files?path=/home/user/small.bin" 2>/dev/null |
        tr -d '\r' | grep -i '^x-carrel-sha256:' | awk '{print $2}')"
    check_eq "fsops: a download's X-Carrel-Sha256 is the file's" \
        "$(sha256sum "$dir/small.bin" | awk '{print $1}')" "$header_sum"
    rm -f "$dir/big.bin" "$dir/back.bin" "$dir/small.bin"

    carrel rm "$id" >/dev/null 2>&1
}
