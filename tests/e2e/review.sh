# e2e checks of what reviewers use, on a running tiny session: named tokens, the control lease
# against agent input (API, CLI, MCP), approvals through the test hook, the timeline naming
# people, and the console's static files (Debian's spice-html5 among them).
# shellcheck shell=bash

# api METHOD PATH [BODY] [TOKEN]: curl against carreld's TCP listener; prints "STATUS BODY".
review_api() {
    local method="$1" path="$2" body="${3:-}" token="${4:-$(cat "$STATE_DIR/admin.token")}"
    local args=(-s -o "$E2E_DIR/api.out" -w '%{http_code}' -X "$method" -H "Authorization: Bearer $token")
    [ -n "$body" ] && args+=(-H 'Content-Type: application/json' --data "$body")
    local status
    status="$(curl "${args[@]}" "$E2E_URL$path")"
    # A binary body (a screenshot) prints without its NUL bytes, which bash cannot hold.
    echo "$status $(tr -d '\0' <"$E2E_DIR/api.out")"
}

review_lease() {
    local s="$1" out mcp
    check_eq "take the control lease" "admin" "$(carrel control "$s" take --json | jq -r .holder)"
    check_eq "the session shows who holds it" "admin" "$(carrel show "$s" --json | jq -r .control.holder)"
    out="$(carrel type "$s" 'nope' 2>&1)"
    check_eq "CLI input during the lease exits 4 (conflict)" "4" "$?"
    check "... saying the session is under human control" grep -q "session under human control" <<<"$out"
    # API input waits whoever sends it, the holder's own token too: the person is at the console.
    out="$(review_api POST "/v1/sessions/$s/computer" '{"action":"left_click","coordinate":[10,10]}')"
    check_eq "input through the API gets 409" "409" "${out%% *}"
    check "... with the reason" grep -q "session under human control" <<<"$out"
    out="$(review_api GET "/v1/sessions/$s/screenshot?format=jpeg&max_edge=200")"
    check_eq "looking is still allowed during the lease" "200" "${out%% *}"
    mcp="$({
        echo '{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"e2e","version":"1"}}}'
        echo "{\"jsonrpc\":\"2.0\",\"id\":2,\"method\":\"tools/call\",\"params\":{\"name\":\"computer\",\"arguments\":{\"session\":\"$s\",\"action\":\"type\",\"text\":\"x\"}}}"
    } | carrel mcp 2>/dev/null | sed -n 2p)"
    check "MCP input during the lease is an error result naming human control" json_true \
        '.result.isError == true and (.result.content[0].text | test("session under human control"))' "$mcp"
    check_eq "release the lease" "null" "$(carrel control "$s" release --json | jq -r .holder)"
    check "input works again after release" carrel key "$s" shift
}

review_approvals() {
    local s="$1" out aid
    out="$(review_api POST /v1/test/approvals "{\"session_id\":\"$s\",\"action\":\"network.egress\",\"detail\":{\"host\":\"pypi.test\"}}")"
    check_eq "the test hook queues an approval" "201" "${out%% *}"
    aid="$(jq -r .id <<<"${out#* }")"
    check "the queue lists it" json_true "[.approvals[].id] | index(\"$aid\") != null" "$(carrel approvals --json)"
    check_eq "approve it with a reason" "approved admin because" \
        "$(carrel approve "$aid" --reason because --json | jq -r '"\(.state) \(.decided_by) \(.reason)"')"
    carrel deny "$aid" >/dev/null 2>&1
    check_eq "a decision is made once (exit 4)" "4" "$?"
    check "the queue is empty again" json_true "[.approvals[].id] | index(\"$aid\") == null" "$(carrel approvals --json)"
}

review_timeline() {
    local s="$1" out
    carrel pause "$s" >/dev/null && carrel resume "$s" >/dev/null
    out="$(review_api GET "/v1/sessions/$s/events?limit=1000")"
    check "the timeline names who paused" json_true \
        '[.events[] | select(.kind == "lifecycle" and .action == "pause" and .actor == "admin")] | length > 0' "${out#* }"
    check "the timeline has the lease and the approval" json_true \
        '([.events[] | select(.kind == "control")] | length >= 2) and ([.events[] | select(.kind == "approval")] | length >= 2)' "${out#* }"
    check "the timeline keeps the refused input with its error" json_true \
        '[.events[] | select(.kind == "action" and (.error // "" | test("human control")))] | length > 0' "${out#* }"
}

review_static() {
    local headers
    headers="$(curl -s -D - -o "$E2E_DIR/index.html" "$E2E_URL/")"
    check "carreld serves the console at / without a token" grep -q "200 OK" <<<"$headers"
    check "... with a strict content security policy" grep -qi "content-security-policy: default-src 'self'" <<<"$headers"
    check_eq "Debian's spice-html5 is served at /spice-html5/" "200" \
        "$(curl -s -o /dev/null -w '%{http_code}' "$E2E_URL/spice-html5/main.js")"
    check_eq "no API without a token or cookie" "401" \
        "$(curl -s -o /dev/null -w '%{http_code}' "$E2E_URL/v1/sessions")"
    check "the page references no remote host" bash -c \
        "! grep -rEq 'https?://' '$E2E_SRC/web-console' --include=*.html --include=*.css --include=*.js"
}

review_checks() {
    review_static
    check_eq "over the socket, carrel console asks carreld where its console is" \
        "$E2E_URL/session.html?id=$1" "$(carrel console "$1")"
    review_lease "$1"
    review_approvals "$1"
    review_timeline "$1"
}
