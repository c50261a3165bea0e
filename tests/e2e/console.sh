# The console on a running `tiny` session: tickets, the websocket proxy to the guest's SPICE
# server (a real SPICE link and authentication through it), refusals, and .vv files.
# shellcheck shell=bash
#
# Needs carreld on TCP: start it with `start_daemon --listen "$E2E_LISTEN"` (E2E_LISTEN is
# 127.0.0.1:PORT, a free port) and keep E2E_LISTEN exported when calling console_checks.

CONSOLE_CLIENT="$(dirname "${BASH_SOURCE[0]}")/console-client.py"

# console_api METHOD PATH [BODY]: the HTTP status of an admin request on carreld's TCP address.
console_api() {
    local token
    token="$(cat "$STATE_DIR/admin.token")"
    curl -s -o "$E2E_DIR/console-reply" -w '%{http_code}' -X "$1" \
        -H "Authorization: Bearer $token" -H 'Content-Type: application/json' \
        ${3:+--data "$3"} "http://$E2E_LISTEN$2"
}

console_client() {
    /usr/bin/python3 "$CONSOLE_CLIENT" "http://$E2E_LISTEN" "$(cat "$STATE_DIR/admin.token")" "$@"
}

# console_input SESSION: keys typed through the proxy reach the guest only with the lease. The
# guest's focused window must be its terminal (as for computer_keyboard).
console_input() {
    local s="$1" out
    out="$(console_client "$s" type $'touch /tmp/cvo1\n' 2>&1)"
    echo "console type (view-only): $out"
    # shellcheck disable=SC2016 # expanded by the inner bash
    check "view-only viewer: main and inputs channels open" \
        bash -c 'grep -qw auth=0 <<<"$1" && grep -qw inputs_auth=0 <<<"$1"' _ "$out"
    check_eq "take the control lease" "200" \
        "$(console_api POST "/v1/sessions/$s/control" '{"action":"take"}')"
    out="$(console_client "$s" type $'touch /tmp/cvo2\n' 2>&1)"
    echo "console type (lease): $out"
    check_eq "release the control lease" "200" \
        "$(console_api POST "/v1/sessions/$s/control" '{"action":"release"}')"
    check "keys of the lease holder reach the guest through the proxy" \
        carrel exec "$s" -- test -e /tmp/cvo2
    # shellcheck disable=SC2016 # expanded by the inner bash
    check "keys of a view-only viewer are dropped by the proxy" \
        bash -c '! "$1" exec "$2" -- test -e /tmp/cvo1' _ "$CARREL_BIN" "$s"
}

# console_checks SESSION_ID
console_checks() {
    local s="$1" out vv
    if [ -z "${E2E_LISTEN:-}" ]; then
        fail "console checks need carreld on TCP (E2E_LISTEN)"
        return
    fi
    out="$(console_client "$s" link 2>&1)"
    echo "console link: $out"
    check "a ticket without the lease is view-only" grep -qw 'view_only=true' <<<"$out"
    check "SPICE link reply (REDQ, no error) through the proxy" grep -qw 'link=0' <<<"$out"
    check "SPICE authentication with the short-lived password" grep -qw 'auth=0' <<<"$out"
    check "a display channel on the same ticket while main is open, drawing" \
        grep -qw 'display=shown' <<<"$out"
    check "a second main link with the same ticket is refused (1008)" \
        grep -qw 'reuse=closed1008' <<<"$out"
    check "the ticket is gone once its main channel closed (410)" \
        grep -qw 'after_close=410' <<<"$out"
    check_eq "an expired ticket is refused (410)" "410" "$(console_client "$s" expired 2>&1)"
    check_eq "SPICE itself refuses a wrong password (7: permission denied)" "7" \
        "$(console_client "$s" badpw 2>&1)"
    check_eq "no cookie 401, foreign or missing Origin 403, unknown ticket 404" \
        "nocookie=401 foreign=403 noorigin=403 unknown=404" "$(console_client "$s" refusals 2>&1)"
    check "the proxy never logs tickets" bash -c "! grep -Eq 'console/[0-9a-f]{64}' '$DAEMON_LOG'"

    check_eq "console.vv without the lease is 409" "409" \
        "$(console_api GET "/v1/sessions/$s/console.vv")"
    check_eq "take the control lease" "200" \
        "$(console_api POST "/v1/sessions/$s/control" '{"action":"take"}')"
    check_eq "console.vv with the lease is 200" "200" \
        "$(console_api GET "/v1/sessions/$s/console.vv")"
    vv="$(cat "$E2E_DIR/console-reply")"
    # shellcheck disable=SC2016 # expanded by the inner bash
    check "the .vv file points remote-viewer at SPICE on 127.0.0.1 with a password" \
        bash -c 'grep -qx "\[virt-viewer\]" <<<"$1" && grep -qx "host=127.0.0.1" <<<"$1" &&
                 grep -Eqx "password=[0-9a-f]{32}" <<<"$1" && grep -qx "delete-this-file=1" <<<"$1"' \
        _ "$vv"
    check "carrel console --vv writes the file" \
        env CARREL_URL="http://$E2E_LISTEN" "$CARREL_BIN" console "$s" --vv "$E2E_DIR/c.vv"
    check "...a remote-viewer file" grep -qx 'type=spice' "$E2E_DIR/c.vv"
    out="$(console_client "$s" link 2>&1)"
    check "with the lease the ticket is not view-only" grep -qw 'view_only=false' <<<"$out"
    check_eq "release the control lease" "200" \
        "$(console_api POST "/v1/sessions/$s/control" '{"action":"release"}')"
    check_eq "carrel console prints the page URL" "http://$E2E_LISTEN/session.html?id=$s" \
        "$(CARREL_URL="http://$E2E_LISTEN" "$CARREL_BIN" console "$s")"
    console_input "$s"
    # spice-server 0.15 crashed QEMU once when a client skipped ATTACH_CHANNELS: keep an eye on it.
    check_eq "the session still runs after the console checks" "running" \
        "$(carrel show "$s" --json | jq -r .state)"
}
