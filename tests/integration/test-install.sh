#!/bin/bash
# The install: `meson install --destdir` from this build, checked against
# tests/data/install/files.txt; both man pages render without a warning and say everything their
# program's --help says; the completion knows every command; and the installed carreld, started
# from the destdir, serves the installed web console and takes its recipes, policies and helpers
# from there, never from the source tree.
#
# The build's prefix paths are compiled in and name the final prefix, not the destdir, so the
# destdir's carreld is pointed at its files with --data-dir and --libexec-dir (the two options an
# admin with a relocated tree would use). Without them the same binary is shown to look under the
# compiled-in prefix and not in the source tree, which is the rule an installed carreld follows.
# Building `tiny` from the installed recipe needs mmdebstrap and real VMs: the e2e tier's.
# Usage: test-install.sh SOURCE_ROOT BUILD_ROOT PREFIX
set -euo pipefail

src="$1"
build="$2"
prefix="$3"
tmp="$(mktemp -d --tmpdir carrel-install.XXXXXX)"
daemon_pid=""
cleanup() {
    [ -z "$daemon_pid" ] || kill "$daemon_pid" 2>/dev/null || true
    [ -z "$daemon_pid" ] || wait "$daemon_pid" 2>/dev/null || true
    rm -rf "$tmp"
}
trap cleanup EXIT
fail() { printf 'FAIL: %s\n' "$*" >&2; exit 1; }
pass() { printf 'ok: %s\n' "$*"; }

dest="$tmp/dest"
root="$dest$prefix"
meson install -C "$build" --no-rebuild --destdir "$dest" --quiet >"$tmp/install.log" 2>&1 ||
    { cat "$tmp/install.log" >&2; fail "meson install --destdir failed"; }

# --- the file list -------------------------------------------------------------------------
expected_files() {
    local line kind from to
    while IFS= read -r line; do
        case "$line" in '' | '#'*) continue ;; esac
        read -r kind from to <<<"$line"
        if [ "$kind" = tree ]; then
            (cd "$src/$from" && find . \( -type f -o -type l \) | sed "s|^\.|$to|")
        else
            printf '%s\n' "$line"
        fi
    done <"$src/tests/data/install/files.txt" | sort
}
expected_files >"$tmp/expected"
(cd "$dest" && find . \( -type f -o -type l \) | sed -e 's|^\.||' -e "s|^$prefix/|PREFIX/|") |
    sort >"$tmp/actual"
diff -u "$tmp/expected" "$tmp/actual" ||
    fail "installed files differ from tests/data/install/files.txt (- expected, + installed)"
# Recipes and their overlays keep their exec bits (build scripts, hooks, init).
while IFS= read -r f; do
    rel="${f#"$root/share/carrel/"}"
    [ -x "$src/$rel" ] || fail "$rel is executable once installed but not in the tree"
done < <(find "$root/share/carrel" -type f -perm -u+x)
while IFS= read -r f; do
    [ -x "$root/share/carrel/$f" ] || fail "$f lost its exec bit in the install"
done < <(cd "$src" && find templates -type f -perm -u+x)
pass "$(wc -l <"$tmp/actual") files installed, as listed"

# --- man pages: render cleanly, and hold every line of --help --------------------------------
# Lines are compared with runs of blanks squeezed: a page wraps, justifies and re-indents.
squeeze() { tr -s ' \t\n' '   ' | sed -e 's/\xe2\x80\x90/-/g' -e "s/\xe2\x80\x99/'/g"; }
check_page() {
    local page="$1" program="$2" err="$tmp/man.err" text line missing=0
    text="$(LC_ALL=C.UTF-8 MANWIDTH=1000 man --warnings -E UTF-8 -l "$page" 2>"$err" | squeeze)"
    [ ! -s "$err" ] || { cat "$err" >&2; fail "man -l $page warns"; }
    [ -n "$text" ] || fail "man -l $page printed nothing"
    while IFS= read -r line; do
        # Section titles become the page's own headings (Usage: -> SYNOPSIS...).
        [[ $line =~ ^[A-Z][A-Za-z\ ]*(\ \(.*\))?:$ ]] && continue
        line="${line#Usage: }"
        line="$(printf '%s' "$line" | squeeze)"
        line="${line# }"
        [ -n "$line" ] || continue
        if [[ $text != *"$line"* ]]; then
            printf 'not in %s: %s\n' "$(basename "$page")" "$line" >&2
            missing=1
        fi
    done < <(LC_ALL=C.UTF-8 "$program" --help)
    [ "$missing" = 0 ] || fail "$(basename "$page") drifted from $(basename "$program") --help"
}
check_page "$root/share/man/man1/carrel.1" "$root/bin/carrel"
check_page "$root/share/man/man8/carreld.8" "$root/sbin/carreld"
pass "man -l renders carrel(1) and carreld(8) without warnings, each with all of its --help"

# --- bash completion: every command of the help --------------------------------------------
completion="$root/share/bash-completion/completions/carrel"
bash -n "$completion" || fail "the completion is not valid bash"
commands="$(sed -n '/^ *local commands="/,/"$/p' "$completion" | sed -e 's/.*commands="//' -e 's/"$//')"
while read -r word; do
    [[ " $(tr -s ' \n' '  ' <<<"$commands") " == *" $word "* ]] ||
        fail "the completion lacks the command '$word'"
done < <("$root/bin/carrel" --help | sed -n '/^Commands:/,/^$/s/^  \([a-z|-]*\) .*/\1/p' |
    tr '|' '\n' | sort -u)
pass "the completion offers every command of carrel --help"

# --- the unit: the sbin path of this prefix -------------------------------------------------
unit="$root/lib/systemd/system/carreld.service"
grep -qx "ExecStart=$prefix/sbin/carreld \$CARRELD_OPTIONS" "$unit" ||
    fail "carreld.service does not start $prefix/sbin/carreld"
if command -v systemd-analyze >/dev/null &&
    exposure="$(systemd-analyze security --offline=true "$unit" 2>/dev/null | tail -1)"; then
    pass "carreld.service: ${exposure#→ }"
fi

# carreld's own messages (a sanitizer build's reports name source files too).
own_lines() { grep -E '^(\*\* Message|carreld:)' "$1" || true; }

# --- the installed carreld, without directions: the prefix, never the source tree -------------
state="$tmp/state"
timeout 20 "$root/sbin/carreld" --state-dir "$tmp/state0" --socket "$tmp/sock0" \
    --libvirt-uri test:///default >"$tmp/bare.log" 2>&1 || true
grep -qF "recipes: $prefix/share/carrel/templates; web console: $prefix/share/carrel/web-console;" \
    "$tmp/bare.log" || { cat "$tmp/bare.log" >&2; fail "the installed carreld does not look under $prefix"; }
! own_lines "$tmp/bare.log" | grep -F "$src/" || fail "the installed carreld named the source tree"
pass "the installed carreld looks under $prefix/share/carrel, not in the source tree"

# --- the installed carreld, pointed at the destdir: it serves the installed console ----------
"$root/sbin/carreld" --state-dir "$state" --socket "$tmp/sock" --libvirt-uri test:///default \
    --listen 127.0.0.1:0 --data-dir "$root/share/carrel" --libexec-dir "$root/libexec/carrel" \
    >"$tmp/carreld.log" 2>&1 &
daemon_pid=$!
for _ in $(seq 1 150); do
    [ -s "$state/web.url" ] && break
    kill -0 "$daemon_pid" 2>/dev/null || { cat "$tmp/carreld.log" >&2; fail "carreld exited"; }
    sleep 0.1
done
[ -s "$state/web.url" ] || { cat "$tmp/carreld.log" >&2; fail "carreld wrote no web.url"; }
url="$(cat "$state/web.url")"
curl -sf "$url/" -o "$tmp/index.html" || fail "GET $url/ failed"
cmp -s "$tmp/index.html" "$root/share/carrel/web-console/index.html" ||
    fail "GET / is not the installed index.html"
curl -sf "$url/assets/app.css" -o "$tmp/app.css" || fail "GET /assets/app.css failed"
cmp -s "$tmp/app.css" "$root/share/carrel/web-console/assets/app.css" ||
    fail "GET /assets/app.css is not the installed one"
pass "the installed carreld serves the installed web console at $url/"

log="$tmp/carreld.log"
grep -qF "recipes: $root/share/carrel/templates; web console: $root/share/carrel/web-console; carrel-guest: $root/libexec/carrel/carrel-guest; egress helper: $root/libexec/carrel/carrel-egress-helper" \
    "$log" || { cat "$log" >&2; fail "carreld does not use the installed recipes and helpers"; }
grep -qF "policies: default, small (from $root/share/carrel/policies)" "$log" ||
    { cat "$log" >&2; fail "carreld does not load the installed policies"; }
! grep -qF "no carrel-guest" "$log" || fail "carreld did not find the installed carrel-guest"
! own_lines "$log" | grep -F "$src/" || fail "the installed carreld named the source tree"
# The installed CLI against it, with the token carreld wrote.
"$root/bin/carrel" --socket "$tmp/sock" --token-file "$state/admin.token" policy ls \
    >"$tmp/policies" || fail "the installed carrel cannot list policies"
grep -q small "$tmp/policies" || fail "carrel policy ls does not list the installed 'small'"
pass "recipes, policies, carrel-guest and the egress helper come from the install"
echo "install: 7 passed, 0 failed"
