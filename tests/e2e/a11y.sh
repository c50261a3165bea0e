# The accessibility tree (issue 20, item 1) on a real session of tiny: carrel-demo (a GTK 3
# window) launched in the guest, its tree read through carrel a11y (REST), its buttons found with
# names and bounds on the screen, click_element in both modes changing its label, read back from
# the tree; an unknown element is not_found and changes nothing. tiny must have been built from
# this tree (at-spi2-core, python3-gi, carrel-demo, and carrel-guest with a11y).
# shellcheck shell=bash

# The first element (depth first) of a tree whose role and name match, as JSON ("null": none).
a11y_find() { # TREE_JSON ROLE NAME_REGEX
    jq -c --arg role "$2" --arg name "$3" \
        'first(.. | objects | select(has("role") and .role == $role and (.name | test($name))))
         // null' <<<"$1"
}

# The desktop's tree, polled until an element with ROLE and NAME_REGEX shows up (at most ~60 s:
# a GTK start under TCG is slow); prints the last tree.
a11y_wait_for() { # ID ROLE NAME_REGEX
    local tree=""
    for _ in $(seq 1 30); do
        tree="$(carrel a11y "$1" --desktop --json 2>/dev/null)"
        if [ "$(a11y_find "$tree" "$2" "$3")" != null ] && [ -n "$(a11y_find "$tree" "$2" "$3")" ]; then
            break
        fi
        sleep 2
    done
    printf '%s' "$tree"
}

a11y_do() { # ID ACTION_JSON: one action in a batch without screenshots; the reply's JSON
    carrel "do" "$1" "{\"actions\":[$2],\"observe\":\"none\"}" --json 2>/dev/null
}

a11y_checks() {
    local id tree inc reset label screen w h x code before app
    id="$(carrel create --template tiny --name a11y --json 2>/dev/null | jq -r .id)"
    check "a11y: create a session" test -n "$id" -a "$id" != null
    x="$(a11y_do "$id" '{"action":"launch","app":"/usr/local/bin/carrel-demo"}')"
    check "a11y: carrel-demo launched in the guest" json_true '.results[0].output.pid > 0' "$x"

    # The tree, with the buttons named and placed on the screen.
    tree="$(a11y_wait_for "$id" "push button" '^Increment$')"
    inc="$(a11y_find "$tree" "push button" '^Increment$')"
    reset="$(a11y_find "$tree" "push button" '^Reset$')"
    label="$(a11y_find "$tree" label '^Count: ')"
    check "a11y: the tree has carrel demo's window" json_true \
        '[.. | objects | select(.role? == "frame" and .name == "carrel demo")] | length == 1' "$tree"
    check "a11y: ...its Increment button" test "$inc" != null
    check "a11y: ...its Reset button" test "$reset" != null
    check_eq "a11y: ...and its label, Count: 0" "Count: 0" "$(jq -r .name <<<"$label")"
    screen="$(a11y_do "$id" '{"action":"screen_size"}')"
    w="$(jq -r .screen.width <<<"$screen")"
    h="$(jq -r .screen.height <<<"$screen")"
    for x in "$inc" "$reset"; do
        check "a11y: $(jq -r .name <<<"$x") has nonzero bounds inside the ${w}x${h} screen" \
            json_true ".bounds.width > 0 and .bounds.height > 0 and .bounds.x >= 0 and
                .bounds.y >= 0 and .bounds.x + .bounds.width <= $w and
                .bounds.y + .bounds.height <= $h" "$x"
    done
    check "a11y: the buttons have a default action, click" json_true '.action == "click"' "$inc"
    check "a11y: the tree says how big it is" json_true \
        '.count >= 5 and .truncated == false and .scope == "desktop" and .root.id == ""' "$tree"
    x="$(carrel a11y "$id" --desktop 2>/dev/null)"
    check "a11y: carrel a11y prints the button with its id" \
        grep -qF "[$(jq -r .id <<<"$inc")] push button \"Increment\" at " <<<"$x"
    x="$(carrel a11y "$id" --desktop --max-nodes 2 --json 2>/dev/null)"
    check "a11y: --max-nodes bounds the tree and says it was cut" json_true \
        '.count == 2 and .truncated == true' "$x"
    # --app: the desktop with carrel-demo's application only (found by its button's id), the
    # button at the same id as in the whole desktop's tree.
    app="$(jq -r --arg a "$(jq -r '.id | split(".")[0]' <<<"$inc")" \
        '.root.children[] | select(.id == $a) | .name' <<<"$tree")"
    x="$(carrel a11y "$id" --app "$app" --json 2>/dev/null)"
    check "a11y: --app '$app' has that application alone, the button at its id" json_true \
        "(.root.children | length) == 1 and .scope == \"desktop\" and
            ([.. | objects | select(.name? == \"Increment\") | .id] == [$(jq .id <<<"$inc")])" "$x"

    # click_element, mode click: the pointer clicks the button's centre.
    x="$(a11y_do "$id" "{\"action\":\"click_element\",\"element\":$(jq .id <<<"$inc")}")"
    check "a11y: click_element clicked inside the button" json_true \
        ".results[0].output.mode == \"click\" and .results[0].output.name == \"Increment\"" "$x"
    tree="$(a11y_wait_for "$id" label '^Count: 1$')"
    check_eq "a11y: ...and the label reads Count: 1" "Count: 1" \
        "$(jq -r .name <<<"$(a11y_find "$tree" label '^Count: ')")"
    # The pointer is over the demo now: twm gave it the focus, and the focused tree is its window.
    x="$(carrel a11y "$id" --json 2>/dev/null)"
    check "a11y: the focused scope is the demo's window" json_true \
        '.scope == "focused" and .root.role == "frame" and .root.name == "carrel demo"' "$x"

    # mode action: AT-SPI's DoAction, no pointer.
    x="$(a11y_do "$id" "{\"action\":\"click_element\",\"element\":$(jq .id <<<"$inc"),\"mode\":\"action\"}")"
    check "a11y: click_element mode action ran the button's click" json_true \
        '.results[0].output.mode == "action" and .results[0].output.done == true' "$x"
    tree="$(a11y_wait_for "$id" label '^Count: 2$')"
    check_eq "a11y: ...and the label reads Count: 2" "Count: 2" \
        "$(jq -r .name <<<"$(a11y_find "$tree" label '^Count: ')")"

    # Bad input: an element the tree does not have, a malformed id; nothing happens.
    code="$(a11y_do "$id" '{"action":"click_element","element":"0.999"}' | jq -r .error.code)"
    check_eq "a11y: an unknown element is not_found" "not_found" "$code"
    code="$(a11y_do "$id" '{"action":"click_element","element":"0.999","mode":"action"}' | jq -r .error.code)"
    check_eq "a11y: ...in mode action too" "not_found" "$code"
    code="$(a11y_do "$id" '{"action":"click_element","element":"../1"}' | jq -r .error.code)"
    check_eq "a11y: a malformed element id is invalid_argument" "invalid_argument" "$code"
    code="$(carrel a11y "$id" --depth 99 --json 2>/dev/null | jq -r .error.code)"
    check_eq "a11y: a depth past 32 is invalid_argument" "invalid_argument" "$code"
    tree="$(carrel a11y "$id" --desktop --json 2>/dev/null)"
    check_eq "a11y: ...and the label still reads Count: 2" "Count: 2" \
        "$(jq -r .name <<<"$(a11y_find "$tree" label '^Count: ')")"
    before="$(carrel show "$id" --json 2>/dev/null | jq -r .state)"
    check_eq "a11y: the session still runs" "running" "$before"
    check "a11y: rm" carrel rm "$id"
}
