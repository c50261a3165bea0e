#!/bin/bash
# carrel-guest a11y against a real accessibility stack on a private Xvfb: a D-Bus session bus,
# at-spi-bus-launcher (which puts AT_SPI_BUS on the root window) and the tiny template's
# carrel-demo (GTK 3), run as a desktop user ("nobody" when we are root); carrel-guest runs as
# the guest agent runs it (root, empty environment) and must find the bus and become that user.
# Fails (never skips) when a tool is missing: scripts/test installs them.
set -euo pipefail

guest="$(realpath "${1:?usage: test-guest-a11y.sh PATH-TO-carrel-guest PATH-TO-carrel-demo}")"
demo="$(realpath "${2:?usage: test-guest-a11y.sh PATH-TO-carrel-guest PATH-TO-carrel-demo}")"
launcher=/usr/libexec/at-spi-bus-launcher
passed=0
work=""
xvfb_pid=""

fail() {
	echo "FAIL: $*" >&2
	exit 1
}

ok() {
	passed=$((passed + 1))
	echo "ok - $*"
}

# Everything the session started carries CARREL_A11Y_TEST=$work in its environment (dbus
# activates the registry with it too): those processes, by pid, and Xvfb.
cleanup() {
	local p
	if [ -n "$work" ]; then
		for p in /proc/[0-9]*; do
			if tr '\0' '\n' 2>/dev/null <"$p/environ" | grep -qxF "CARREL_A11Y_TEST=$work"; then
				kill "${p#/proc/}" 2>/dev/null || true
			fi
		done
	fi
	if [ -n "$xvfb_pid" ]; then kill "$xvfb_pid" 2>/dev/null || true; fi
	wait 2>/dev/null || true
	[ -n "$work" ] && rm -rf "$work"
}
trap cleanup EXIT

for tool in Xvfb xauth mcookie xprop jq setpriv dbus-daemon "$launcher"; do
	command -v "$tool" >/dev/null || fail "'$tool' is missing (scripts/test installs it)"
done
/usr/bin/python3 -c 'import gi; gi.require_version("Gtk", "3.0"); from gi.repository import Gtk' ||
	fail "python3-gi with GTK 3 (gir1.2-gtk-3.0) is missing (scripts/test installs it)"

work="$(mktemp -d /tmp/carrel-guest-a11y.XXXXXX)"
chmod 0755 "$work"
if [ "$(id -u)" -eq 0 ]; then
	desktop_user=nobody
	as_user=(setpriv --reuid=nobody --regid=nogroup --clear-groups)
else
	desktop_user="$(id -un)"
	as_user=()
fi
mkdir -m 0700 "$work/run" "$work/home"
chown "$desktop_user" "$work/run" "$work/home"

display=""
for n in $(seq 90 190); do
	[ -e "/tmp/.X11-unix/X$n" ] || [ -e "/tmp/.X$n-lock" ] && continue
	: >"$work/xauth"
	xauth -q -f "$work/xauth" add ":$n" . "$(mcookie)"
	chmod 0644 "$work/xauth"
	# -noreset: the launcher's AT_SPI_BUS property must outlive its X connection.
	Xvfb ":$n" -screen 0 1024x768x24 -nolisten tcp -noreset -auth "$work/xauth" \
		>"$work/xvfb.log" 2>&1 &
	xvfb_pid=$!
	for _ in $(seq 1 100); do
		[ -S "/tmp/.X11-unix/X$n" ] && break
		kill -0 "$xvfb_pid" 2>/dev/null || break
		sleep 0.1
	done
	if [ -S "/tmp/.X11-unix/X$n" ] && kill -0 "$xvfb_pid" 2>/dev/null; then
		display=":$n"
		break
	fi
	kill "$xvfb_pid" 2>/dev/null || true
	xvfb_pid=""
done
[ -n "$display" ] || fail "could not start Xvfb on any display from :90 to :190"

# The session, as tiny's carrel-init and session script start it.
session_env=(env -i CARREL_A11Y_TEST="$work" HOME="$work/home" DISPLAY="$display"
	XAUTHORITY="$work/xauth" XDG_RUNTIME_DIR="$work/run" PATH=/usr/bin:/bin LANG=C.UTF-8
	DBUS_SESSION_BUS_ADDRESS="unix:path=$work/run/bus")
"${as_user[@]}" "${session_env[@]}" dbus-daemon --session --nofork \
	--address="unix:path=$work/run/bus" >"$work/dbus.log" 2>&1 &
for _ in $(seq 1 50); do [ -S "$work/run/bus" ] && break; sleep 0.1; done
"${as_user[@]}" "${session_env[@]}" "$launcher" --launch-immediately >"$work/launcher.log" 2>&1 &
"${as_user[@]}" "${session_env[@]}" /usr/bin/python3 "$demo" >"$work/demo.log" 2>&1 &

run_guest() { # carrel-guest as the guest agent runs it: root, no environment
	env -i "$guest" --display "$display" "$@"
}

# GTK registers with the registry once its window is up: poll the tree.
tree=""
for _ in $(seq 1 100); do
	tree="$(run_guest a11y tree --window all 2>/dev/null || true)"
	jq -e '[.. | objects | select(.name? == "Increment")] | length == 1' <<<"$tree" >/dev/null 2>&1 && break
	sleep 0.2
done
jq -e '[.. | objects | select(.role? == "frame" and .name == "carrel demo")] | length == 1' \
	<<<"$tree" >/dev/null || fail "no 'carrel demo' frame in the tree: $tree $(cat "$work/demo.log")"
ok "the desktop's tree has carrel demo's window"
inc="$(jq -c 'first(.. | objects | select(.role? == "push button" and .name == "Increment"))' <<<"$tree")"
label="$(jq -r 'first(.. | objects | select(.role? == "label")) | .id' <<<"$tree")"
jq -e '.bounds.width > 0 and .bounds.height > 0 and .bounds.x >= 0 and .bounds.y >= 0 and
	.bounds.x + .bounds.width <= 1024 and .bounds.y + .bounds.height <= 768 and
	.action == "click" and (.states | index("showing"))' <<<"$inc" >/dev/null ||
	fail "Increment's bounds, action or states: $inc"
ok "Increment has bounds on the screen, states and its default action"
jq -e '.root.id == "" and .scope == "desktop" and .truncated == false and .count >= 5' \
	<<<"$tree" >/dev/null || fail "the tree's frame: $(jq -c 'del(.root)' <<<"$tree")"
ok "the desktop's root, scope, count"

id="$(jq -r .id <<<"$inc")"
out="$(run_guest a11y action "$id")"
jq -e '.done == true and .action == "click"' <<<"$out" >/dev/null || fail "action: $out"
node=""
for _ in $(seq 1 20); do
	node="$(run_guest a11y node "$label")"
	[ "$(jq -r .node.name <<<"$node")" = "Count: 1" ] && break
	sleep 0.1
done
[ "$(jq -r .node.name <<<"$node")" = "Count: 1" ] || fail "the label after the action: $node"
ok "a11y action clicked Increment: the label reads Count: 1"

out="$(run_guest a11y tree --window all --max-nodes 3)"
jq -e '.count == 3 and .truncated == true' <<<"$out" >/dev/null || fail "--max-nodes 3: $out"
ok "--max-nodes bounds the tree and says so"
out="$(run_guest a11y tree --window all --depth 1)"
jq -e '.truncated == true and ([.. | objects | select(.role? == "frame")] | length == 0)' \
	<<<"$out" >/dev/null || fail "--depth 1: $out"
ok "--depth bounds the tree"

set +e
out="$(run_guest a11y action 0.999)"
code=$?
set -e
if [ "$code" -ne 1 ] || ! jq -e '.error.code == "not_found"' <<<"$out" >/dev/null; then
	fail "an unknown element: exit $code, $out"
fi
ok "an unknown element is not_found"
set +e
out="$(run_guest a11y node 1..2)"
code=$?
set -e
if [ "$code" -ne 2 ] || ! jq -e '.error.code == "invalid_argument"' <<<"$out" >/dev/null; then
	fail "a malformed id: exit $code, $out"
fi
ok "a malformed id is invalid_argument"
out="$(run_guest a11y node "$label")"
[ "$(jq -r .node.name <<<"$out")" = "Count: 1" ] || fail "nothing else was clicked: $out"
ok "...and nothing was done"

# Without the root window's property, the bus is found through the session bus (org.a11y.Bus),
# whose address the session's processes carry.
DISPLAY="$display" XAUTHORITY="$work/xauth" xprop -root -remove AT_SPI_BUS
out="$(run_guest a11y node "$label")"
[ "$(jq -r .node.name <<<"$out")" = "Count: 1" ] || fail "through the session bus: $out"
ok "without AT_SPI_BUS the session bus gives the accessibility bus"
echo "# $passed checks passed"
