# Slow tier, `desktop` only: the applications an agent opens first work out of the box. Each
# launcher of the dock is clicked through the computer API (carrel click); its window (terminal,
# Thunar, Firefox, Mousepad) must appear in carrel-guest's window list within a bound, while no
# window asks "Choose Preferred Application" and Firefox shows no first-run, welcome, what's-new
# or restore-session page; each window is then closed. Then xdg-open (carrel-guest open) opens a
# URL through Xfce's preferred web browser (the path that asked which browser to use before) and
# a local page, whose heading Firefox shows in its window title. The time to each window is
# printed (no assertion on it: under TCG it depends on the host's load).
# shellcheck shell=bash

# Titles that mean an application asked something instead of opening: Xfce's chooser,
# Firefox's first-run, onboarding, post-update, privacy notice, import and restore pages, and
# "Close Firefox" (a new Firefox that found an old one still running and not answering).
DESK_BAD_TITLES='Preferred Application|Welcome to|Privacy Notice|What.s New|Restore Session|Import (Browser )?Data|Make Firefox|default browser|Close Firefox|not responding'

desk_x() {
    local s="$1"
    shift
    carrel exec "$s" -- env DISPLAY=:0 "$@"
}

desk_windows() {
    carrel exec "$1" -- /usr/local/bin/carrel-guest windows 2>/dev/null
}

# The dock's window: "X Y WIDTH HEIGHT", once it is shown (it hides while a window covers it).
# It is xfce4-panel's panel-2 (templates/desktop/rootfs/etc/xdg/xfce4/xfconf/
# xfce-perchannel-xml/xfce4-panel.xml): size 48, at the bottom of the screen; its window is a
# pixel taller and two wider (the panel's border on the sides that do not touch the screen's
# edge: 354x49 for the template's plugins). carrel-guest's window list leaves panels out, so
# xdotool finds it in the guest.
desk_dock() {
    # shellcheck disable=SC2016 # expanded by the guest's shell
    desk_x "$1" sh -c '
        screen_h=$(xdotool getdisplaygeometry | cut -d" " -f2)
        for w in $(xdotool search --onlyvisible --class xfce4-panel); do
            eval "$(xdotool getwindowgeometry --shell "$w")"
            if [ "$HEIGHT" -ge 48 ] && [ "$HEIGHT" -le 52 ] && [ $((Y + HEIGHT)) = "$screen_h" ]; then
                echo "$X $Y $WIDTH $HEIGHT"
                exit 0
            fi
        done
        exit 1' 2>/dev/null
}

desk_wait_dock() {
    local geometry bottom
    bottom="$(desk_x "$1" xdotool getdisplaygeometry 2>/dev/null | awk '{ print $1 / 2, $2 - 1 }')"
    for _ in $(seq 1 30); do
        if geometry="$(desk_dock "$1")" && [ -n "$geometry" ]; then
            echo "$geometry"
            return 0
        fi
        # The dock comes back when the pointer reaches the bottom edge as well.
        # shellcheck disable=SC2086 # X and Y
        [ -n "$bottom" ] && carrel "do" "$1" "$(printf '{"action":"mouse_move","coordinate":[%d,%d]}' $bottom)" \
            >/dev/null 2>&1
        sleep 1
    done
    return 1
}

# desk_launcher_xy "X Y W H" K: the centre of the dock's K-th launcher (0 terminal, 1 file
# manager, 2 web browser, 3 text editor). The dock's plugins, left to right: show desktop,
# separator, the four launchers, app finder, separator, folders: seven square 48 px buttons and
# two separators (8 px each) sharing what is left of its width, borders included (a pixel off
# at most). Checked with the template's rootfs and xfce4-panel 4.18 under Xvfb: the dock was
# 354x49 at 463,751 of 1280x800, and clicks at what this gives (544, 592, 640 and 688, y 776)
# opened the terminal, Thunar, Firefox and Mousepad.
desk_launcher_xy() {
    local x y w h k="$2" size=48 sep
    read -r x y w h <<<"$1"
    sep=$(((w - 7 * size) / 2))
    echo "$((x + size + sep + k * size + size / 2)) $((y + h - size / 2))"
}

# desk_wait_window SESSION CLASS_RE TITLE_RE BOUND_S: waits for a new window (one not listed in
# DESK_BEFORE) whose class and title match, and sets DESK_FOUND to its JSON (not a subshell:
# DESK_BAD, the first window seen meanwhile with a title of DESK_BAD_TITLES, must survive).
desk_wait_window() {
    local s="$1" class="$2" title="$3" bound="$4" start=$SECONDS windows found bad
    DESK_FOUND=""
    while :; do
        windows="$(desk_windows "$s")"
        bad="$(jq -r --arg re "$DESK_BAD_TITLES" \
            '[.windows[] | select(.title | test($re; "i")) | .title] | first // empty' \
            <<<"$windows" 2>/dev/null)"
        [ -n "$bad" ] && [ -z "$DESK_BAD" ] && DESK_BAD="$bad"
        found="$(jq -c --argjson before "$DESK_BEFORE" --arg class "$class" --arg title "$title" \
            '[.windows[] | select((.id as $id | $before | index($id) | not) and
                (.class // "" | test($class; "i")) and (.title | test($title; "i")))] | first // empty' \
            <<<"$windows" 2>/dev/null)"
        if [ -n "$found" ]; then
            DESK_FOUND="$found"
            return 0
        fi
        [ $((SECONDS - start)) -lt "$bound" ] || return 1
        sleep 2
    done
}

desk_remember_windows() {
    DESK_BEFORE="$(desk_windows "$1" | jq -c '[.windows[].id]' 2>/dev/null)"
    [ -n "$DESK_BEFORE" ] || DESK_BEFORE='[]'
}

# desk_close SESSION WINDOW_JSON: alt+F4 through the computer API on the activated window (as a
# user would close it), then up to 30 s for its process to end too (a Firefox still shutting
# down would answer the next start with "Firefox is already running"). Fails if the window
# stays; its process is killed then.
desk_close() {
    local s="$1" id pid
    id="$(jq -r .id <<<"$2")"
    pid="$(jq -r '.pid // empty' <<<"$2")"
    desk_x "$s" timeout 10 xdotool windowactivate --sync "$id" >/dev/null 2>&1
    carrel key "$s" alt+F4 >/dev/null 2>&1
    for _ in $(seq 1 15); do
        if desk_windows "$s" | jq -e --arg id "$id" '[.windows[] | select(.id == $id)] | length == 0' \
            >/dev/null 2>&1; then
            for _ in $(seq 1 15); do
                if [ -z "$pid" ] || ! carrel exec "$s" -- kill -0 "$pid" >/dev/null 2>&1; then
                    break
                fi
                sleep 2
            done
            return 0
        fi
        sleep 2
    done
    [ -n "$pid" ] && carrel exec "$s" -- kill "$pid" >/dev/null 2>&1
    return 1
}

# desk_a11y_names SESSION: the names of the applications registered on the session's AT-SPI bus
# (its registry's children), one a line: what a reader of the accessibility tree would find.
desk_a11y_names() {
    # shellcheck disable=SC2016 # expanded by the guest's shell
    carrel exec "$1" -- runuser -u agent -- env DBUS_SESSION_BUS_ADDRESS=unix:path=/run/user/1000/bus sh -c '
        addr=$(dbus-send --session --print-reply=literal --dest=org.a11y.Bus /org/a11y/bus \
            org.a11y.Bus.GetAddress | tr -d " ") || exit 1
        dbus-send --bus="$addr" --print-reply --dest=org.a11y.atspi.Registry \
            /org/a11y/atspi/accessible/root org.a11y.atspi.Accessible.GetChildren |
            awk '\''/string "/ { sub(/.*string "/, ""); sub(/"$/, ""); bus = $0 }
                /object path "/ { sub(/.*object path "/, ""); sub(/"$/, ""); print bus, $0 }'\'' |
            while read -r bus path; do
                dbus-send --bus="$addr" --print-reply=literal --dest="$bus" "$path" \
                    org.freedesktop.DBus.Properties.Get string:org.a11y.atspi.Accessible string:Name |
                    sed "s/^ *variant *//"
                echo
            done' 2>/dev/null
}

# desk_a11y_status SESSION: org.a11y.Status's IsEnabled and ScreenReaderEnabled on the session's
# bus, as the desktop user.
desk_a11y_status() {
    # shellcheck disable=SC2016 # expanded by the guest's shell
    carrel exec "$1" -- runuser -u agent -- env DBUS_SESSION_BUS_ADDRESS=unix:path=/run/user/1000/bus sh -c '
        for p in IsEnabled ScreenReaderEnabled; do
            printf "%s=" "$p"
            dbus-send --session --print-reply=literal --dest=org.a11y.Bus /org/a11y/bus \
                org.freedesktop.DBus.Properties.Get string:org.a11y.Status string:"$p" | tr -d "\n"
            echo
        done' 2>&1
}

desk_close_all() {
    local w
    while read -r w; do
        [ -n "$w" ] && desk_close "$1" "$w" </dev/null
    done < <(desk_windows "$1" | jq -c '.windows[]' 2>/dev/null)
}

# desk_open_check SESSION NAME CLASS_RE TITLE_RE BOUND_S COMMAND...: runs COMMAND (something
# that opens a window), then checks the window came, and nothing that asks.
desk_open_check() {
    local s="$1" name="$2" class="$3" title="$4" bound="$5" start window names
    shift 5
    desk_remember_windows "$s"
    DESK_BAD=""
    start=$SECONDS
    "$@" >/dev/null 2>&1
    desk_wait_window "$s" "$class" "$title" "$bound"
    window="$DESK_FOUND"
    if [ -n "$window" ]; then
        echo "desktop-apps: $name: window '$(jq -r .title <<<"$window")' after $((SECONDS - start)) s"
        pass "$name opens its window (class $class) within $bound s"
    else
        fail "$name opens its window (class $class) within $bound s; windows: $(desk_windows "$s" |
            jq -c '[.windows[] | {class, title}]' 2>/dev/null)"
    fi
    # Firefox replaces its first title by the page's once a tab loads: look again a bit later.
    # It must also have registered with the accessibility bus (at-spi2-core): the tree another
    # change reads.
    if [ -n "$window" ] && [[ $class == firefox ]]; then
        sleep 5
        desk_wait_window "$s" 'x^' '' 0
        names="$(desk_a11y_names "$s")"
        check "$name: Firefox is on the accessibility bus (registered: $(tr '\n' ',' <<<"$names"))" \
            grep -qi firefox <<<"$names"
    fi
    if [ -n "$window" ] && [ -n "${DESK_HEADING:-}" ]; then
        desk_heading_check "$s" "$name" "$DESK_HEADING"
    fi
    check_eq "$name: no window asks first (Preferred Application, first-run, welcome...)" "" "$DESK_BAD"
    if [ -n "$window" ]; then
        check "$name: its window closes" desk_close "$s" "$window"
    fi
}

# The page's heading in Firefox's accessibility tree, read through carrel a11y (the focused
# window's tree, deep enough for a web document), polled while Firefox builds it under TCG.
desk_heading_check() { # ID NAME HEADING
    local tree found="" start=$SECONDS i scope=()
    for i in $(seq 1 20); do
        # The focused window's tree, and every other round the desktop's with Firefox alone
        # (--app: if Firefox is not the window the guest reports as focused).
        scope=()
        [ $((i % 2)) = 0 ] && scope=(--app Firefox)
        tree="$(carrel a11y "$1" "${scope[@]}" --depth 32 --max-nodes 5000 --json 2>/dev/null)"
        found="$(jq -r --arg t "$3" 'first(.. | objects | select(.role? == "heading" and
            ((.name // "") | contains($t))) | .name) // empty' <<<"$tree" 2>/dev/null)"
        [ -n "$found" ] && break
        sleep 3
    done
    echo "desktop-apps: $2: heading in the accessibility tree after $((SECONDS - start)) s: '$found'"
    if [ -z "$found" ]; then
        # What the tree did hold: its size, whether it was cut, the applications and roles.
        carrel a11y "$1" --desktop --depth 32 --max-nodes 5000 --json >"$E2E_DIR/a11y-desk.json" \
            2>"$E2E_DIR/a11y-desk.err"
        echo "desktop-apps: carrel a11y said: $(head -c 300 "$E2E_DIR/a11y-desk.err")"
        jq -c '{count, truncated, apps: [.root.children[]? | .name],
                roles: ([.. | objects | .role? // empty] | group_by(.) |
                        map({(.[0]): length}) | add)}' "$E2E_DIR/a11y-desk.json" 2>&1 | head -c 1500
        echo
        # The focused window's tree (Firefox's, if it is the active one): how deep it went and
        # whether a document was reached at all (carrel-guest walks documents first).
        carrel a11y "$1" --depth 32 --max-nodes 5000 --json >"$E2E_DIR/a11y-focused.json" 2>&1
        echo "desktop-apps: the focused window's tree: $(jq -c '{count, truncated,
            root: .root.name, deepest: ([.. | objects | .id? // empty | split(".") | length] | max),
            documents: [.. | objects | select(.role? // "" | startswith("document")) |
                {id, name, children: (.children | length)}]}' "$E2E_DIR/a11y-focused.json" 2>&1 |
            head -c 1500)"
        # Whether the bus tells applications that accessibility is on (Firefox asks it when
        # GNOME_ACCESSIBILITY is not in its environment).
        echo "desktop-apps: org.a11y.Status: $(desk_a11y_status "$1" | tr -s ' \n' ' ')"
    fi
    check "$2: Firefox's accessibility tree holds the page's heading (carrel a11y)" test -n "$found"
    # The whole desktop's tree: every application, also the panel's hidden buttons that AT-SPI
    # places at INT_MIN (once refused the whole tree), and the page among them.
    check "$2: the whole desktop's tree answers and holds the page's heading" sh -c \
        "carrel a11y '$1' --desktop --depth 32 --max-nodes 5000 --json | jq -e --arg t '$3' \
            '[.. | objects | select(.role? == \"heading\" and ((.name // \"\") | contains(\$t)))]
            | length > 0' >/dev/null"
}

desktop_apps_checks() {
    local s="$1" url="${2:-}" url_title="${3:-}" dock k xy name class bound
    local names=(terminal "file manager" "web browser" "text editor")
    local classes=(terminal thunar firefox mousepad)
    local bounds=(90 90 240 90)
    # Start from an empty desktop: windows of earlier checks would cover the dock.
    desk_close_all "$s"
    check "the session's D-Bus has the accessibility bus (at-spi2-core)" carrel exec "$s" -- \
        runuser -u agent -- env DBUS_SESSION_BUS_ADDRESS=unix:path=/run/user/1000/bus \
        dbus-send --session --print-reply --dest=org.a11y.Bus /org/a11y/bus org.a11y.Bus.GetAddress
    for k in 0 1 2 3; do
        name="dock launcher: ${names[$k]}"
        class="${classes[$k]}"
        bound="${bounds[$k]}"
        if ! dock="$(desk_wait_dock "$s")"; then
            fail "$name: the dock is shown (xfce4-panel, 48 px, at the bottom)"
            continue
        fi
        xy="$(desk_launcher_xy "$dock" "$k")"
        echo "desktop-apps: dock at $dock, clicking ${names[$k]} at $xy"
        # shellcheck disable=SC2086 # X and Y
        desk_open_check "$s" "$name" "$class" '' "$bound" carrel click "$s" $xy
    done
    # xdg-open under Xfce hands URLs to "exo-open", i.e. to the preferred web browser of
    # helpers.rc: the path that asked "Choose Preferred Application" before.
    if [ -n "$url" ]; then
        desk_open_check "$s" "xdg-open $url" firefox "$url_title" 240 \
            carrel exec "$s" -- /usr/local/bin/carrel-guest open "$url"
    fi
    # A local page (text/html: mimeapps.list) shows its heading in Firefox's window title.
    carrel exec "$s" -- sh -c 'printf "%s\n" "<!doctype html><meta charset=utf-8>" \
        "<title>carrel heading check</title><h1>carrel heading check</h1>" \
        >/home/agent/carrel-heading.html && chown agent:agent /home/agent/carrel-heading.html' \
        >/dev/null 2>&1
    DESK_HEADING='carrel heading check'
    desk_open_check "$s" "a local page in Firefox" firefox 'carrel heading check' 240 \
        carrel exec "$s" -- /usr/local/bin/carrel-guest open /home/agent/carrel-heading.html
    DESK_HEADING=""
}
