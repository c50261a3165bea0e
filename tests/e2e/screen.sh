# A session's own screen size (issue 20) on `tiny`: carrel-guest screen sets it through XRandR
# after the boot or restore, screenshots have it, pointer coordinates map onto it, a snapshot
# revert keeps it; sizes out of range are refused before anything is made.
# shellcheck shell=bash

# png_size FILE: "WIDTHxHEIGHT" from the PNG's IHDR.
png_size() {
    local w h
    read -r w h < <(od -An -tu1 -j16 -N8 "$1" | awk '{ print $1*16777216 + $2*65536 + $3*256 + $4, $5*16777216 + $6*65536 + $7*256 + $8 }')
    echo "${w}x${h}"
}

# screen_pointer SESSION X Y: moves the pointer through the computer API, prints where X has it.
screen_pointer() {
    carrel "do" "$1" "{\"action\":\"mouse_move\",\"coordinate\":[$2,$3]}" >/dev/null
    carrel exec "$1" -- env DISPLAY=:0 xdotool getmouselocation 2>/dev/null | cut -d' ' -f1-2
}

# screen_session NAME WxH: a session of that size; checks its screenshots, the pointer at the
# corners, the guest's own view. Prints its id.
screen_session() {
    local name="$1" size="$2" id json png="$E2E_DIR/screen-$1.png" w h
    w="${size%x*}"
    h="${size#*x}"
    json="$(carrel create --template tiny --name "$name" --screen "$size" --json 2>/dev/null)"
    id="$(jq -r .id <<<"$json")"
    check_eq "create --screen $size: running, screen $size" "running $size" \
        "$(jq -r '"\(.state) \(.screen)"' <<<"$json")"
    check_eq "...carrel show says $size" "$size" "$(carrel show "$id" --json | jq -r .screen)"
    carrel screenshot "$id" -o "$png" >/dev/null 2>&1
    check_eq "...screenshots are $size" "$size" "$(png_size "$png")"
    check_eq "...the guest's X is $size" "$w $h" \
        "$(carrel exec "$id" -- env DISPLAY=:0 xdotool getdisplaygeometry 2>/dev/null)"
    check_eq "...screen_size answers $size" "$w $h" \
        "$(carrel "do" "$id" '{"action":"screen_size"}' --json | jq -r '"\(.screen.width) \(.screen.height)"')"
    check_eq "...the pointer lands on the last pixel" "x:$((w - 1)) y:$((h - 1))" \
        "$(screen_pointer "$id" $((w - 1)) $((h - 1)))"
    check_eq "...and on an inner one" "x:$((w / 3)) y:$((h / 2))" \
        "$(screen_pointer "$id" $((w / 3)) $((h / 2)))"
    carrel click "$id" "$w" 10 >/dev/null 2>&1
    check_eq "...a click one pixel past the right edge exits 8" "8" "$?"
    echo "$id" >"$E2E_DIR/screen-$name.id"
}

screen_checks() {
    local big small out code before
    before="$(carrel ls --json | jq '.sessions | length')"
    for bad in 10x10 100000x100; do
        out="$(carrel create --template tiny --screen "$bad" --json 2>/dev/null)"
        code=$?
        check_eq "create --screen $bad: invalid_argument, exit 8" "invalid_argument 8" \
            "$(jq -r .error.code <<<"$out") $code"
    done
    check_eq "...and nothing was created" "$before" "$(carrel ls --json | jq '.sessions | length')"

    screen_session screen-big 1280x800
    big="$(cat "$E2E_DIR/screen-screen-big.id")"
    screen_session screen-small 800x600
    small="$(cat "$E2E_DIR/screen-screen-small.id")"

    # A revert restores memory saved at 800x600: still 800x600, with input mapped to it.
    check "snapshot of the 800x600 session" carrel snapshot "$small" base
    carrel exec "$small" -- env DISPLAY=:0 xdotool mousemove 5 5 >/dev/null 2>&1
    check "revert" carrel revert "$small" base
    carrel screenshot "$small" -o "$E2E_DIR/screen-reverted.png" >/dev/null 2>&1
    check_eq "after the revert, screenshots are 800x600" "800x600" \
        "$(png_size "$E2E_DIR/screen-reverted.png")"
    check_eq "...and the pointer still lands on the right pixel" "x:700 y:500" \
        "$(screen_pointer "$small" 700 500)"
    # The other session kept its own size all along.
    carrel screenshot "$big" -o "$E2E_DIR/screen-big-again.png" >/dev/null 2>&1
    check_eq "the 1280x800 session is still 1280x800" "1280x800" \
        "$(png_size "$E2E_DIR/screen-big-again.png")"
    carrel rm "$big" >/dev/null 2>&1
    carrel rm "$small" >/dev/null 2>&1
}
