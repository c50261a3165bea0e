# The web console in real headless Chromium (Debian's chromium, playwright-core from npm) against
# this run's carreld and a running `tiny` session. Needs carreld on loopback TCP (lib.sh's
# start_daemon: --listen 127.0.0.1:$E2E_PORT, E2E_URL) with --test-hooks (the approvals check).
# shellcheck shell=bash

BROWSER_TEST_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")/../browser" && pwd)"

# browser_deps: node_modules for tests/browser, installed once per package-lock.json into
# /var/cache/carrel/npm-<hash> (CARREL_CACHE_DIR) and linked into the test folder.
browser_deps() {
    local cache hash dir
    cache="${CARREL_CACHE_DIR:-/var/cache/carrel}"
    hash="$(sha256sum "$BROWSER_TEST_DIR/package-lock.json" | cut -c1-16)"
    dir="$cache/npm-$hash"
    if [ ! -f "$dir/.complete" ]; then
        rm -rf "$dir"
        mkdir -p "$dir"
        cp "$BROWSER_TEST_DIR/package.json" "$BROWSER_TEST_DIR/package-lock.json" "$dir/"
        # Never a browser download: the tests drive Debian's /usr/bin/chromium.
        (cd "$dir" && PLAYWRIGHT_SKIP_BROWSER_DOWNLOAD=1 npm ci --no-audit --no-fund >npm.log 2>&1) ||
            { tail -20 "$dir/npm.log" >&2; return 1; }
        touch "$dir/.complete"
    fi
    # A symlink, so the repo holds no copy (node_modules/ is ignored by git).
    if [ "$(readlink "$BROWSER_TEST_DIR/node_modules" 2>/dev/null)" != "$dir/node_modules" ]; then
        rm -rf "$BROWSER_TEST_DIR/node_modules"
        ln -s "$dir/node_modules" "$BROWSER_TEST_DIR/node_modules"
    fi
}

# browser_report PREFIX STATUS LOG: each ok / not ok line of LOG becomes a pass or fail.
browser_report() {
    local prefix="$1" rc="$2" log="$3" line
    while IFS= read -r line; do
        case "$line" in
        "ok - "*) pass "$prefix: ${line#ok - }" ;;
        "not ok - "*) fail "$prefix: ${line#not ok - }" ;;
        "#"*) echo "$line" ;;
        esac
    done <"$log"
    if [ "$rc" -ne 0 ] && ! grep -q '^not ok - ' "$log"; then
        fail "$prefix test exited $rc"
        tail -20 "$log" >&2
    fi
}

# browser_guest_evidence SESSION: what the guest said while a browser test failed: the end of its
# serial console (kernel messages, carrel-init's log) and of its services' logs.
browser_guest_evidence() {
    echo "--- $1: serial console (last 30 lines) ---"
    tail -30 "$STATE_DIR/sessions/$1/console.log" 2>&1
    echo "--- $1: /run/carrel logs (last 10 lines each) ---"
    # shellcheck disable=SC2016 # expanded by the guest's shell
    carrel exec "$1" -- sh -c 'uptime; free -m; for f in /run/carrel/*.log; do echo "== $f"; grep -v dbus-core "$f" | tail -10; done' 2>&1 | tail -80
}

# browser_out_dir: prints where this run's screenshots go: CARREL_TEST_OUT/browser, or a new
# folder under /var/tmp/carrel-test-output (outside the repo, kept after the run for review).
browser_out_dir() {
    local out shared=/var/tmp/carrel-test-output
    if [ -n "${CARREL_TEST_OUT:-}" ]; then
        echo "$CARREL_TEST_OUT/browser"
        return
    fi
    # The shared folder must be ours alone (a folder someone else made first could redirect
    # root's writes); each run gets a new folder in it from mktemp.
    [ -e "$shared" ] || [ -L "$shared" ] || mkdir -m 0755 "$shared"
    if [ -L "$shared" ] || [ ! -O "$shared" ] || [ -n "$(find "$shared" -maxdepth 0 -perm /022)" ]; then
        echo "$shared is not root's alone: no browser screenshots there" >&2
        return 1
    fi
    out="$(mktemp -d "$shared/$(date +%Y%m%d-%H%M%S)-XXXXXX")" || return 1
    chmod 0755 "$out"
    echo "$out/browser"
}

# browser_ready: node, the browsers and tests/browser's node_modules are there (a fail if not).
browser_ready() {
    if [ -z "${E2E_URL:-${CARREL_URL:-}}" ]; then
        fail "browser tests need carreld on TCP (--listen, E2E_URL)"
        return 1
    fi
    if ! command -v node >/dev/null || [ ! -x "${CHROMIUM:-/usr/bin/chromium}" ] ||
        [ ! -x "${FIREFOX:-/usr/bin/firefox-esr}" ]; then
        fail "browser tests need node, chromium and firefox-esr (scripts/lib/common.sh installs them)"
        return 1
    fi
    if ! browser_deps; then
        fail "npm ci in tests/browser"
        return 1
    fi
    pass "browser test dependencies (playwright-core) installed"
}

# browser_checks SESSION_ID: runs tests/browser/pages.test.mjs (mock server) and console.test.mjs
# (this carreld, this session); each of their lines becomes a pass or fail of this harness.
browser_checks() {
    local s="$1" out log url
    if ! out="$(browser_out_dir)"; then
        fail "no folder for browser screenshots"
        return
    fi
    log="$E2E_DIR/browser-test.log"
    url="${E2E_URL:-${CARREL_URL:-}}"
    mkdir -p "$out"
    browser_ready || return
    # The pages against the mock server (controls and dialogs the real run does not press), then
    # the console against this run's carreld and session.
    CARREL_TEST_OUT="$out/pages" timeout 300 node "$BROWSER_TEST_DIR/pages.test.mjs" \
        >"$E2E_DIR/browser-pages.log" 2>&1
    browser_report "pages" $? "$E2E_DIR/browser-pages.log"
    # The recording player's test (recording.test.mjs) against the mock server, with a WebM made
    # by GStreamer; the recording part runs it against a real recording.
    CARREL_TEST_OUT="$out/recording-mock" timeout 120 node "$BROWSER_TEST_DIR/recording-mock.mjs" \
        >"$E2E_DIR/browser-recording-mock.log" 2>&1
    browser_report "recording page (mock)" $? "$E2E_DIR/browser-recording-mock.log"
    # CARREL_URL only for node: the CLI of the other checks keeps using the socket.
    CARREL_URL="$url" CARREL_SESSION="$s" CARREL_TEST_OUT="$out" \
        CARREL_TOKEN_FILE="${CARREL_TOKEN_FILE:-$STATE_DIR/admin.token}" CARREL_BIN="${CARREL_BIN:-}" \
        timeout 900 node "$BROWSER_TEST_DIR/console.test.mjs" >"$log" 2>&1
    browser_report "browser" $? "$log"
    # Take-overs again and again: new browsers closed without releasing, after pause, hibernate.
    CARREL_URL="$url" CARREL_SESSION="$s" CARREL_TEST_OUT="$out/takeover" \
        CARREL_TOKEN_FILE="${CARREL_TOKEN_FILE:-$STATE_DIR/admin.token}" \
        timeout 900 node "$BROWSER_TEST_DIR/takeover.test.mjs" >"$E2E_DIR/browser-takeover.log" 2>&1
    browser_report "take-over" $? "$E2E_DIR/browser-takeover.log"
    if grep -q '^not ok - ' "$E2E_DIR/browser-takeover.log"; then
        browser_guest_evidence "$s" >&2
        echo "--- what the failing pages asked for and were told ---" >&2
        grep -E '^# ' "$E2E_DIR/browser-takeover.log" | tail -70 >&2
        echo "--- carreld's console and page lines for $s (last 60) ---" >&2
        grep -E "console: session $s|$s.*(hibernat|resum|restor)|(GET|POST) (/v1/whoami|/v1/login|/v1/stream|/v1/sessions/$s(/control|/console)?) " \
            "$DAEMON_LOG" | tail -60 >&2
        echo "--- the take-over checks that failed ---" >&2
        grep -E '^not ok - ' "$E2E_DIR/browser-takeover.log" >&2
    fi
    # The same console in Firefox ESR (puppeteer-core over WebDriver BiDi): login, list, desktop.
    CARREL_URL="$url" CARREL_SESSION="$s" CARREL_TEST_OUT="$out/firefox" \
        CARREL_TOKEN_FILE="${CARREL_TOKEN_FILE:-$STATE_DIR/admin.token}" \
        timeout 300 node "$BROWSER_TEST_DIR/firefox.test.mjs" >"$E2E_DIR/browser-firefox.log" 2>&1
    browser_report "firefox" $? "$E2E_DIR/browser-firefox.log"
    echo "# browser screenshots: $out"
}

# browser_recording_checks SESSION_ID: tests/browser/recording.test.mjs against this carreld: the
# session page plays SESSION_ID's finished recording, an event's Play button seeks to it, the
# download is the listed WebM.
browser_recording_checks() {
    local s="$1" out log="$E2E_DIR/browser-recording.log"
    if ! out="$(browser_out_dir)"; then
        fail "no folder for browser screenshots"
        return
    fi
    mkdir -p "$out/recording"
    browser_ready || return
    CARREL_URL="${E2E_URL:-${CARREL_URL:-}}" CARREL_SESSION="$s" CARREL_TEST_OUT="$out/recording" \
        CARREL_TOKEN_FILE="${CARREL_TOKEN_FILE:-$STATE_DIR/admin.token}" \
        timeout 300 node "$BROWSER_TEST_DIR/recording.test.mjs" >"$log" 2>&1
    browser_report "recording page" $? "$log"
    echo "# recording page screenshots: $out/recording"
}
