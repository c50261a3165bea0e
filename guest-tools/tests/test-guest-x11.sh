#!/bin/bash
# carrel-guest against a private Xvfb, set up like a template's desktop: twm and xterms run as a
# desktop user ("nobody" when we are root) with their own cookie, and carrel-guest runs as the
# guest agent runs it: no DISPLAY, no XAUTHORITY, no HOME.  It must find the cookie itself.
# Fails (never skips) when a tool is missing: scripts/test installs them.
set -euo pipefail

guest="$(realpath "${1:?usage: test-guest-x11.sh PATH-TO-carrel-guest}")"
passed=0
pids=()
logs=()
work=""

fail() {
	echo "FAIL: $*" >&2
	exit 1
}

ok() {
	passed=$((passed + 1))
	echo "ok - $*"
}

cleanup() {
	local pid
	for pid in "${pids[@]}"; do
		kill "$pid" 2>/dev/null || true
	done
	for pid in "${pids[@]}"; do
		wait "$pid" 2>/dev/null || true
	done
	rm -f "${logs[@]}"
	[ -n "$work" ] && rm -rf "$work"
}
trap cleanup EXIT

for tool in Xvfb xauth mcookie twm xterm xdotool xclip xprop jq setpriv; do
	command -v "$tool" >/dev/null || fail "'$tool' is missing (scripts/test installs it)"
done

work="$(mktemp -d /tmp/carrel-guest-test.XXXXXX)"
chmod 0755 "$work"
mkdir "$work/home"

# The desktop user: "nobody" as root (launch then has to switch users), else ourselves.
if [ "$(id -u)" -eq 0 ]; then
	desktop_user=nobody
	as_user=(setpriv --reuid=nobody --regid=nogroup --clear-groups)
else
	desktop_user="$(id -un)"
	as_user=()
fi
desktop_uid="$(id -u "$desktop_user")"
chown "$desktop_user" "$work/home"

# --- a free display number, and Xvfb on it with a cookie -----------------------------------
display=""
for n in $(seq 90 190); do
	[ -e "/tmp/.X11-unix/X$n" ] || [ -e "/tmp/.X$n-lock" ] && continue
	: >"$work/xauth"
	xauth -q -f "$work/xauth" add ":$n" . "$(mcookie)"
	Xvfb ":$n" -screen 0 1280x800x24 -nolisten tcp -noreset -auth "$work/xauth" \
		>"$work/xvfb.log" 2>&1 &
	xvfb_pid=$!
	for _ in $(seq 1 100); do
		[ -S "/tmp/.X11-unix/X$n" ] && break
		kill -0 "$xvfb_pid" 2>/dev/null || break
		sleep 0.1
	done
	if [ -S "/tmp/.X11-unix/X$n" ] && kill -0 "$xvfb_pid" 2>/dev/null; then
		display=":$n"
		pids+=("$xvfb_pid")
		break
	fi
	kill "$xvfb_pid" 2>/dev/null || true
	rm -f "$work/xauth"
done
[ -n "$display" ] || fail "could not start Xvfb on any display from :90 to :190"
echo "# Xvfb on $display (pid $xvfb_pid)"

# The session's own copy of the cookie, as a display manager gives the user.
cp "$work/xauth" "$work/user-xauth"
chown "$desktop_user" "$work/user-xauth"
session_env=(env -i "DISPLAY=$display" "XAUTHORITY=$work/user-xauth" "HOME=$work/home"
	PATH=/usr/bin:/bin LANG=C.UTF-8)
# Tools run by the test itself (xdotool, xclip) use root's view of the server.
export DISPLAY="$display" XAUTHORITY="$work/xauth"

# carrel-guest as the guest agent runs it; prints its JSON, returns its status.
guest() {
	env -i PATH=/usr/bin:/bin "$guest" --display "$display" "$@"
}

# Runs carrel-guest expecting success and a jq condition over its output.
expect() {
	local condition="$1" out
	shift
	out="$(guest "$@")" || fail "carrel-guest $* failed: $out"
	jq -e "$condition" >/dev/null <<<"$out" || fail "carrel-guest $*: '$condition' is false in: $out"
}

# Runs carrel-guest expecting a failure with an error code.
expect_error() {
	local code="$1" out status=0
	shift
	out="$(guest "$@")" || status=$?
	[ "$status" -ne 0 ] || fail "carrel-guest $* succeeded, expected error '$code': $out"
	jq -e --arg code "$code" '.error.code == $code and (.error.message | length > 0)' \
		>/dev/null <<<"$out" || fail "carrel-guest $*: expected error '$code', got: $out"
}

# Waits (bounded) until a window with this WM_CLASS instance is listed; prints it.
# Waits up to 30 s: a program started on a loaded 2-core machine (the VMs of other tiers) may
# take more than the 10 s this used to allow to map its first window.
wait_window() {
	local instance="$1" out deadline=$((SECONDS + 30)) log
	while [ "$SECONDS" -lt "$deadline" ]; do
		out="$(guest windows)" || fail "windows failed: $out"
		if jq -e --arg i "$instance" '.windows[] | select(.instance == $i)' <<<"$out" >/dev/null; then
			jq -c --arg i "$instance" '.windows[] | select(.instance == $i)' <<<"$out"
			return 0
		fi
		sleep 0.2
	done
	for log in "${logs[@]}" "$work/session.log"; do
		echo "--- $log" >&2
		tail -5 "$log" >&2 2>/dev/null || true
	done
	fail "no window '$instance' after 30 s: $out"
}

start_session_process() {
	"${as_user[@]}" "${session_env[@]}" "$@" >>"$work/session.log" 2>&1 &
	pids+=("$!")
	last_pid=$!
}

# --- before any window manager --------------------------------------------------------------
env -i "$guest" version | jq -e '.version == "0.1.0"' >/dev/null || fail "version"
expect_error display_unavailable --xauthority /dev/null windows
expect_error display_unavailable --xauthority /dev/null clipboard set text
expect_error invalid_argument windows extra
expect_error timeout ready --timeout 0.5
out="$(guest ready --timeout 0.5 || true)"
grep -q "no window manager" <<<"$out" || fail "ready without a window manager: $out"
expect '.windows == [] and .truncated == false' windows
expect '.text == ""' clipboard get
ok "errors, no window manager, empty clipboard"

# --- twm, placed and never grabbing the server (like the tiny template's twmrc) ------------
cat >"$work/twmrc" <<'EOF'
RandomPlacement
UsePPosition "on"
NoGrabServer
EOF
start_session_process twm -f "$work/twmrc"
expect '.ready == true and .wm == "twm" and .screen.width == 1280 and .screen.height == 800
	and (.waited_ms | type == "number") and .display == "'"$display"'"' ready --timeout 20
ok "ready sees twm"

# --- windows ---------------------------------------------------------------------------------
title='carrel "test" \ ✓ é'
start_session_process xterm -name carrel-test -title "$title" -geometry 80x24+40+30 -e sleep 600
xterm_pid=$last_pid
win="$(wait_window carrel-test)"
jq -e --arg t "$title" --argjson pid "$xterm_pid" '.title == $t and .class == "XTerm"
	and .pid == $pid and .visible == true and .width > 100 and .height > 100
	and .x >= 40 and .x < 1280 and .y >= 30 and .y < 800 and (.id | test("^0x[0-9a-f]+$"))' \
	<<<"$win" >/dev/null || fail "xterm window is wrong: $win"
ok "windows lists the xterm with title, class, pid and geometry"

start_session_process xterm -name carrel-two -title two -geometry 40x10+600+300 -e sleep 600
wait_window carrel-two >/dev/null
id1="$(jq -r .id <<<"$win")"
id2="$(guest windows | jq -r '.windows[] | select(.instance == "carrel-two") | .id')"
xdotool windowfocus --sync "$id1"
expect '[.windows[] | select(.focused)] | length == 1 and .[0].instance == "carrel-test"' windows
xdotool windowfocus --sync "$id2"
expect '[.windows[] | select(.focused)] | length == 1 and .[0].instance == "carrel-two"' windows
# Titles are the guest's text: clipped to 512 characters, control characters escaped.
long_title="$(printf 'é%.0s' $(seq 1 2000))"
xprop -id "$id2" -f _NET_WM_NAME 8u -set _NET_WM_NAME "$long_title"
expect '.windows[] | select(.instance == "carrel-two") | (.title | length) == 512' windows
xprop -id "$id2" -f _NET_WM_NAME 8u -set _NET_WM_NAME $'line\none\ttab "q"'
expect '.windows[] | select(.instance == "carrel-two") | .title == "line\none\ttab \"q\""' windows
xdotool windowminimize --sync "$id2"
expect '.windows[] | select(.instance == "carrel-two") | .visible == false' windows
ok "focus follows xdotool windowfocus; titles clipped and escaped; iconified is not visible"

# Windows appear and vanish while we list them: every listing must still be valid JSON.
(
	for _ in $(seq 1 15); do
		"${as_user[@]}" "${session_env[@]}" xterm -name churn -geometry 20x5+10+10 -e true \
			>/dev/null 2>&1 || true
	done
) &
churn=$!
pids+=("$churn")
for _ in $(seq 1 30); do
	expect '.windows | type == "array"' windows
done
wait "$churn" || true
ok "windows survives windows vanishing under it"

# --- clipboard -------------------------------------------------------------------------------
text=$'héllo "wörld" ✓\ttab\nline two'
marker="marker-$$-$RANDOM"
expect '.ok == true' clipboard set "$text"
CLIP="$text" expect '.text == env.CLIP and .truncated == false' clipboard get
[ "$(xclip -o -selection clipboard)" = "$text" ] || fail "xclip does not see the clipboard"
[ "$(xclip -o -selection primary)" = "$text" ] || fail "xclip does not see PRIMARY"
ok "clipboard set/get round trip, seen by xclip (CLIPBOARD and PRIMARY)"

head -c 300000 /dev/urandom | base64 >"$work/big.txt"
guest clipboard set --stdin <"$work/big.txt" | jq -e '.ok' >/dev/null || fail "set --stdin"
guest clipboard get | jq -j .text | cmp -s - "$work/big.txt" || fail "big text round trip"
CARREL_GUEST_TEST_INCR_BYTES=65536 "$guest" --display "$display" clipboard set --stdin \
	<"$work/big.txt" | jq -e '.ok' >/dev/null || fail "set with INCR"
guest clipboard get | jq -j .text | cmp -s - "$work/big.txt" || fail "INCR round trip"
xclip -o -selection clipboard | cmp -s - "$work/big.txt" || fail "xclip over INCR"
ok "400 KB clipboard, direct and INCR, read back by carrel-guest and xclip"

head -c 1100000 /dev/zero | tr '\0' a >"$work/huge.txt"
out="$(guest clipboard set --stdin <"$work/huge.txt" || true)"
jq -e '.error.code == "limit_exceeded"' <<<"$out" >/dev/null || fail "1.1 MB set: $out"
xclip -i -selection clipboard <"$work/huge.txt"
expect '.truncated == true and (.text | length) == 1048576' clipboard get
ok "clipboard is capped at 1 MiB both ways"

expect '.ok == true' clipboard set "$marker"
pgrep -f "$marker" >/dev/null || fail "no clipboard server for '$marker'"
printf other | xclip -i -selection clipboard
for _ in $(seq 1 50); do
	pgrep -f "$marker" >/dev/null || break
	sleep 0.1
done
pgrep -f "$marker" >/dev/null && fail "the clipboard server did not exit after losing CLIPBOARD"
expect '.text == "other"' clipboard get
ok "the clipboard server exits when another client takes CLIPBOARD"

# --- type ----------------------------------------------------------------------------------
# A terminal in a UTF-8 locale (session_env has LANG=C.UTF-8; -u8 for xterm's side) running a
# plain shell: what carrel-guest types must land in the file byte for byte, whether the keymap
# has the character (ASCII, through its own key and shift) or not (a spare keycode, remapped).
start_session_process xterm -u8 -name carrel-typing -title typing -geometry 80x10+100+400 \
	-e bash --norc --noprofile
wait_window carrel-typing >/dev/null
typing="$(guest windows | jq -r '.windows[] | select(.instance == "carrel-typing") | .id')"
xdotool mousemove --window "$typing" 50 50 windowraise "$typing" windowfocus --sync "$typing"
typed_file="$work/home/typed.txt"
for text in 'é' 'ß' '中文' '😀' 'naïve café 中文 😀 ok' 'Größe Ελληνικά русский ½ ✓ ~!@#$%^&*()_+{}|:"<>?'; do
	rm -f "$typed_file"
	expect '.typed > 0' type "printf %s '$text' > $typed_file"$'\n'
	for _ in $(seq 1 50); do
		[ -s "$typed_file" ] && break
		sleep 0.1
	done
	[ "$(cat "$typed_file" 2>/dev/null)" = "$text" ] ||
		fail "typed '$text', the file holds '$(cat "$typed_file" 2>/dev/null)'"
done
rm -f "$typed_file"
printf '%s\n' "printf %s 'stdin ✓' > $typed_file" | guest type --stdin | jq -e '.typed > 20' \
	>/dev/null || fail "type --stdin"
for _ in $(seq 1 50); do
	[ -s "$typed_file" ] && break
	sleep 0.1
done
[ "$(cat "$typed_file" 2>/dev/null)" = "stdin ✓" ] || fail "type --stdin did not type"
expect_error invalid_argument type $'a\x1bb'
expect_error invalid_argument type $'\xff'
ok "type: Latin-1, CJK, emoji and ASCII land in a UTF-8 terminal byte for byte; controls refused"

# --- launch and open -------------------------------------------------------------------------
out="$(guest launch xterm -name carrel-launched -title launched -e sleep 300)" ||
	fail "launch failed: $out"
launched_pid="$(jq -r .pid <<<"$out")"
pids+=("$launched_pid")
logs+=("$(jq -r .log <<<"$out")")
jq -e --arg u "$desktop_user" '.user == $u and (.program | endswith("/xterm"))
	and (.log | startswith("/tmp/carrel-launch-"))' <<<"$out" >/dev/null ||
	fail "launch output: $out"
[ "$(stat -c %u "/proc/$launched_pid")" = "$desktop_uid" ] || fail "launched as the wrong user"
[ "$(stat -c %u "$(jq -r .log <<<"$out")")" = "$desktop_uid" ] || fail "log not the user's"
win="$(wait_window carrel-launched)"
jq -e --argjson pid "$launched_pid" '.title == "launched" and .pid == $pid' <<<"$win" \
	>/dev/null || fail "launched window: $win"
ok "launch starts an xterm as '$desktop_user' that appears in windows"

if [ "$(id -u)" -eq 0 ]; then
	expect_error forbidden launch --user root xterm
fi
expect_error not_found launch no-such-program-carrel
expect_error not_found launch --user no-such-user-carrel xterm
expect_error not_found open /nonexistent/carrel
ok "launch refuses root, unknown programs and users; open refuses missing paths"

# --- an EWMH window manager, faked with xprop on top of twm (which sets none of this) --------
# xprop writes window ids as CARDINAL; carrel-guest accepts that as well as WINDOW.
xprop -root -f _NET_SUPPORTING_WM_CHECK 32x -set _NET_SUPPORTING_WM_CHECK "$id1"
xprop -id "$id1" -f _NET_SUPPORTING_WM_CHECK 32x -set _NET_SUPPORTING_WM_CHECK "$id1"
xprop -id "$id1" -f _NET_WM_NAME 8u -set _NET_WM_NAME "Fake WM ✓"
xprop -root -f _NET_CLIENT_LIST_STACKING 32x -set _NET_CLIENT_LIST_STACKING "$id2, $id1"
xprop -root -f _NET_ACTIVE_WINDOW 32x -set _NET_ACTIVE_WINDOW "$id2"
expect '.ready and .wm == "Fake WM ✓"' ready --timeout 5
expect '[.windows[].instance] == ["carrel-two", "carrel-test"]
	and ([.windows[] | select(.focused) | .instance] == ["carrel-two"])' windows
xprop -id "$id2" -f _NET_WM_WINDOW_TYPE 32a -set _NET_WM_WINDOW_TYPE _NET_WM_WINDOW_TYPE_DOCK
expect '[.windows[].instance] == ["carrel-test"]' windows
# A stale check window (not pointing to itself) means no EWMH window manager: back to the tree.
xprop -id "$id1" -f _NET_SUPPORTING_WM_CHECK 32x -set _NET_SUPPORTING_WM_CHECK 0
expect '.ready and .wm == "twm"' ready --timeout 5
expect '[.windows[].instance] | index("carrel-launched") != null' windows
ok "EWMH: wm name, _NET_CLIENT_LIST_STACKING order, _NET_ACTIVE_WINDOW, docks left out"

# --- screen: the display's size through XRandR, a CVT mode added when the output has none ----
expect '.width == 800 and .height == 600 and .previous.width == 1280 and .previous.height == 800' \
	screen 800x600
[ "$(xdotool getdisplaygeometry)" = "800 600" ] || fail "screen 800x600: $(xdotool getdisplaygeometry)"
# The pointer is held inside the new size: clicks at the last pixel land on it.
xdotool mousemove 5000 5000
[[ $(xdotool getmouselocation) == "x:799 y:599 "* ]] || fail "pointer: $(xdotool getmouselocation)"
expect '.width == 1000 and .height == 700 and .mode_created' screen 1000x700
[ "$(xdotool getdisplaygeometry)" = "1000 700" ] || fail "screen 1000x700: $(xdotool getdisplaygeometry)"
expect '.width == 1000 and .previous.width == 1000' screen 1000x700
expect_error invalid_argument screen 100x100
expect_error invalid_argument screen 9000x100
expect_error invalid_argument screen 1280
expect '.width == 1280 and .height == 800' screen 1280x800
[ "$(xdotool getdisplaygeometry)" = "1280 800" ] || fail "screen back: $(xdotool getdisplaygeometry)"
ok "screen shrinks, grows (new CVT mode), keeps the pointer inside, refuses bad sizes"

echo "# $passed checks passed"
