# e2e: who may do what, on real VMs (issue 14). Agent A's own warm session; agent B cannot see
# or touch it through REST, MCP, a console ticket or the event stream; a reviewer watches and
# takes over but may not exec or destroy; during the lease agent A's revert, destroy and input
# get 409; a revoked token gets 401 at once, cookie included; the audit log names the actors
# (MCP included) and its chain breaks when state.db is edited; TLS for reviewers elsewhere.
# Needs lib.sh (carrel, check, E2E_URL, STATE_DIR) and review.sh (review_api).
# shellcheck shell=bash
# The checks hand values to `bash -c '...' _ ARGS`: expanded there, on purpose.
# shellcheck disable=SC2016

# mcp_call TOKEN TOOL ARGUMENTS_JSON: the tools/call reply of `carrel mcp` run as TOKEN.
mcp_call() {
    {
        echo '{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"e2e","version":"1"}}}'
        echo "{\"jsonrpc\":\"2.0\",\"id\":2,\"method\":\"tools/call\",\"params\":{\"name\":\"$2\",\"arguments\":$3}}"
    } | CARREL_TOKEN="$1" carrel mcp 2>/dev/null | sed -n 2p
}

# stream_first TOKEN: the first seconds of /v1/stream as TOKEN sees it.
stream_first() {
    curl -s -N --max-time 3 -H "Authorization: Bearer $1" "$E2E_URL/v1/stream" || true
}

trust_isolation() {
    local sa="$1" a_tok="$2" b_tok="$3" out
    CARREL_TOKEN="$b_tok" carrel show "$sa" >/dev/null 2>&1
    check_eq "agent B: agent A's session does not exist (exit 3)" "3" "$?"
    check "agent B's list has no trace of it" bash -c \
        '! CARREL_TOKEN="$1" "$2" ls --json | grep -q "$3"' _ "$b_tok" "$CARREL_BIN" "$sa"
    check "agent A's list has it" bash -c \
        'CARREL_TOKEN="$1" "$2" ls --json | grep -q "$3"' _ "$a_tok" "$CARREL_BIN" "$sa"
    for route in "POST /v1/sessions/$sa/exec" "DELETE /v1/sessions/$sa" \
        "POST /v1/sessions/$sa/console" "GET /v1/sessions/$sa/events" \
        "GET /v1/sessions/$sa/screenshot" "POST /v1/sessions/$sa/pause"; do
        out="$(review_api "${route% *}" "${route#* }" '{"argv":["true"]}' "$b_tok")"
        check_eq "agent B: ${route} answers 404" "404" "${out%% *}"
    done
    check "agent B through MCP: destroy is an error, the session does not exist" json_true \
        '.result.isError == true and (.result.content[0].text | test("does not exist"))' \
        "$(mcp_call "$b_tok" sandbox_destroy "{\"session\":\"$sa\"}")"
    check "agent B's event stream never shows it" bash -c \
        'out="$(cat)"; grep -q "event: sessions" <<<"$out" && ! grep -q "$1" <<<"$out"' _ "$sa" \
        < <(stream_first "$b_tok")
    check "agent A's event stream shows it" grep -q "$sa" < <(stream_first "$a_tok")
    check_eq "the session is still running after all that" "running" \
        "$(CARREL_TOKEN="$a_tok" carrel show "$sa" --json | jq -r .state)"
}

trust_reviewer_and_lease() {
    local sa="$1" a_tok="$2" r_tok="$3" out
    check_eq "the reviewer sees agent A's session" "agent-a" \
        "$(CARREL_TOKEN="$r_tok" carrel show "$sa" --json | jq -r .owner)"
    out="$(review_api GET "/v1/sessions/$sa/screenshot?format=jpeg&max_edge=200" '' "$r_tok")"
    check_eq "the reviewer takes a screenshot" "200" "${out%% *}"
    out="$(review_api POST "/v1/sessions/$sa/exec" '{"argv":["true"]}' "$r_tok")"
    check_eq "the reviewer's exec gets 403" "403" "${out%% *}"
    out="$(review_api DELETE "/v1/sessions/$sa" '' "$r_tok")"
    check_eq "the reviewer's destroy gets 403" "403" "${out%% *}"
    check "agent A snapshots its session" bash -c \
        'CARREL_TOKEN="$1" "$2" snapshot "$3" s1 >/dev/null' _ "$a_tok" "$CARREL_BIN" "$sa"
    check_eq "the reviewer takes over" "rita" \
        "$(CARREL_TOKEN="$r_tok" carrel control "$sa" take --json | jq -r .holder)"
    out="$(review_api POST "/v1/sessions/$sa/revert" '{"snapshot":"s1"}' "$a_tok")"
    check_eq "during the lease agent A's revert gets 409" "409" "${out%% *}"
    check "... naming who holds it" grep -q "human control: 'rita'" <<<"$out"
    out="$(review_api DELETE "/v1/sessions/$sa" '' "$a_tok")"
    check_eq "during the lease agent A's destroy gets 409" "409" "${out%% *}"
    out="$(review_api POST "/v1/sessions/$sa/computer" '{"action":"type","text":"x"}' "$a_tok")"
    check_eq "during the lease agent A's input gets 409" "409" "${out%% *}"
    check "during the lease agent A's MCP destroy is refused" json_true \
        '.result.isError == true and (.result.content[0].text | test("human control"))' \
        "$(mcp_call "$a_tok" sandbox_destroy "{\"session\":\"$sa\"}")"
    check_eq "the reviewer releases" "null" \
        "$(CARREL_TOKEN="$r_tok" carrel control "$sa" release --json | jq -r .holder)"
    out="$(review_api POST "/v1/sessions/$sa/revert" '{"snapshot":"s1"}' "$a_tok")"
    check_eq "after the release agent A reverts" "200" "${out%% *}"
}

trust_revocation() {
    local tok jar status
    tok="$(carrel token add temp-viewer --role reviewer --json | jq -r .token)"
    jar="$E2E_DIR/cookies.txt"
    status="$(curl -s -o /dev/null -w '%{http_code}' -c "$jar" -H "Origin: $E2E_URL" \
        -H 'Content-Type: application/json' --data "{\"token\":\"$tok\"}" "$E2E_URL/v1/login")"
    check_eq "a reviewer logs in to the console" "200" "$status"
    check_eq "... and the cookie lists sessions" "200" \
        "$(curl -s -o /dev/null -w '%{http_code}' -b "$jar" "$E2E_URL/v1/sessions")"
    check "revoke the token" carrel token revoke temp-viewer
    check_eq "the revoked token gets 401 at once" "401" \
        "$(curl -s -o /dev/null -w '%{http_code}' -H "Authorization: Bearer $tok" "$E2E_URL/v1/sessions")"
    check_eq "... and so does its console cookie" "401" \
        "$(curl -s -o /dev/null -w '%{http_code}' -b "$jar" "$E2E_URL/v1/sessions")"
    check_eq "token ls shows it revoked" "revoked" \
        "$(carrel token ls --json | jq -r '.tokens[] | select(.name == "temp-viewer") | .state')"
}

trust_audit_actors() {
    local sa="$1" a_tok="$2"
    check "MCP pause and resume by agent A" bash -c \
        'mcp() { { echo "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"initialize\",\"params\":{\"protocolVersion\":\"2025-06-18\",\"capabilities\":{},\"clientInfo\":{\"name\":\"e2e\",\"version\":\"1\"}}}";
                   echo "{\"jsonrpc\":\"2.0\",\"id\":2,\"method\":\"tools/call\",\"params\":{\"name\":\"$1\",\"arguments\":{\"session\":\"$2\"}}}"; } |
                 CARREL_TOKEN="$3" "$4" mcp | sed -n 2p | grep -q "\"isError\":false"; }
         mcp sandbox_pause "$1" "$2" "$3" && mcp sandbox_resume "$1" "$2" "$3"' _ "$sa" "$a_tok" "$CARREL_BIN"
    check "the audit log has agent A's create, with its actor" json_true \
        "[.entries[] | select(.session == \"$sa\" and .result == \"ok\")] | length == 1" \
        "$(carrel audit ls --principal agent-a --operation session.create --json)"
    check "the audit log has the MCP pause by agent A" json_true \
        "[.entries[] | select(.session == \"$sa\" and .result == \"ok\")] | length >= 1" \
        "$(carrel audit ls --principal agent-a --operation session.pause --json)"
    check "the timeline names agent A for the MCP pause" json_true \
        '[.events[] | select(.kind == "lifecycle" and .action == "pause" and .actor == "agent-a")] | length >= 1' \
        "$(review_api GET "/v1/sessions/$sa/events?limit=1000" | cut -d' ' -f2-)"
    check "the audit log has agent B's refusals" json_true \
        '[.entries[] | select(.result == "denied")] | length >= 5' \
        "$(carrel audit ls --principal agent-b --json)"
    check "no token in the audit log" bash -c '! "$1" audit export | grep -qF "$2"' _ \
        "$CARREL_BIN" "$a_tok"
}

# tamper_verify NAME SQL: a copy of state.db edited with SQL, checked by a carreld of its own
# (libvirt's test driver); prints what `carrel audit verify` said and returns its status.
tamper_verify() {
    local dir="$E2E_DIR/tamper-$1" pid status
    mkdir -p "$dir/state"
    cp "$STATE_DIR/admin.token" "$dir/state/"
    sqlite3 "$STATE_DIR/state.db" ".backup '$dir/state/state.db'"
    # No sessions or pools in the copy: its carreld must never act on this run's sessions (their
    # folders are the real ones). Only the audit table matters here.
    sqlite3 "$dir/state/state.db" "DELETE FROM pools; DELETE FROM sessions;
        DROP TRIGGER IF EXISTS audit_no_update; DROP TRIGGER IF EXISTS audit_no_delete; $2"
    "$CARRELD_BIN" --state-dir "$dir/state" --socket "$dir/s.sock" --libvirt-uri test:///default \
        --accel tcg >"$dir/log" 2>&1 &
    pid=$!
    for _ in $(seq 1 100); do [ -S "$dir/s.sock" ] && break; sleep 0.1; done
    CARREL_SOCKET="$dir/s.sock" CARREL_TOKEN_FILE="$dir/state/admin.token" \
        "$CARREL_BIN" audit verify 2>&1
    status=$?
    kill "$pid" 2>/dev/null
    wait "$pid" 2>/dev/null
    return "$status"
}

trust_audit_chain() {
    local out rows
    out="$(carrel audit verify)"
    check_eq "audit verify passes on this busy log (exit 0)" "0" "$?"
    rows="$(carrel audit verify --json | jq -r .rows)"
    echo "# audit log: $rows rows, intact"
    check "the log is busy (over 50 rows)" test "$rows" -gt 50
    out="$(tamper_verify edit "UPDATE audit SET operation = 'session.read' WHERE seq = 7")"
    check_eq "an edited row: verify exits 9" "9" "$?"
    check "... naming seq 7" grep -q "broken at seq 7" <<<"$out"
    out="$(tamper_verify delete "DELETE FROM audit WHERE seq = 12")"
    check_eq "a deleted row: verify exits 9" "9" "$?"
    check "... naming the row after it (13)" grep -q "broken at seq 13" <<<"$out"
    out="$(tamper_verify swap "UPDATE audit SET seq = -1 WHERE seq = 20;
        UPDATE audit SET seq = 20 WHERE seq = 21; UPDATE audit SET seq = 21 WHERE seq = -1")"
    check_eq "two swapped rows: verify exits 9" "9" "$?"
    check "... naming seq 20" grep -q "broken at seq 20" <<<"$out"
    check "the live log is untouched by all that" carrel audit verify
}

trust_checks() {
    local a_tok b_tok r_tok sa
    a_tok="$(carrel token add agent-a --role agent --json | jq -r .token)"
    b_tok="$(carrel token add agent-b --role agent --json | jq -r .token)"
    r_tok="$(carrel token add rita --role reviewer --json | jq -r .token)"
    check "tokens for two agents and a reviewer" test -n "$a_tok" -a -n "$b_tok" -a -n "$r_tok"
    sa="$(CARREL_TOKEN="$a_tok" carrel create --template tiny --name trust-a --json | jq -r .id)"
    check "agent A creates its own session" test "${sa:-null}" != null
    check_eq "... which it owns" "agent-a" "$(carrel show "$sa" --json | jq -r .owner)"
    trust_isolation "$sa" "$a_tok" "$b_tok"
    trust_reviewer_and_lease "$sa" "$a_tok" "$r_tok"
    trust_revocation
    trust_audit_actors "$sa" "$a_tok"
    check "agent A destroys its session" bash -c \
        'CARREL_TOKEN="$1" "$2" rm "$3" >/dev/null' _ "$a_tok" "$CARREL_BIN" "$sa"
    trust_audit_chain
    "$CARRELD_BIN" --state-dir "$E2E_DIR/plain" --socket "$E2E_DIR/plain.sock" \
        --libvirt-uri test:///default --listen "0.0.0.0:$((E2E_PORT + 1))" >"$E2E_DIR/plain.log" 2>&1
    check_eq "carreld refuses plain HTTP beyond loopback (exit 2)" "2" "$?"
    check "... and says to use TLS or an SSH tunnel" grep -q "tls-cert" "$E2E_DIR/plain.log"
}

# trust_tls SESSION: carreld again, with its TCP listener on TLS (a self-signed certificate made
# here, on loopback); the Firefox test logs in over https and watches the desktop; the cookie is
# Secure. Then carreld as before.
trust_tls() {
    local s="$1" port=$((E2E_PORT + 2)) url headers
    openssl req -x509 -newkey rsa:2048 -nodes -days 1 -subj /CN=127.0.0.1 \
        -addext subjectAltName=IP:127.0.0.1 -keyout "$E2E_DIR/tls.key" -out "$E2E_DIR/tls.crt" \
        >/dev/null 2>&1
    check "a self-signed certificate for the test" test -s "$E2E_DIR/tls.crt"
    restart_daemon --listen "127.0.0.1:$port" --tls-cert "$E2E_DIR/tls.crt" \
        --tls-key "$E2E_DIR/tls.key" || return
    url="https://127.0.0.1:$port"
    check "carreld says it listens with TLS" grep -q "listening on https://127.0.0.1:$port (TLS)" \
        "$DAEMON_LOG"
    headers="$(curl -s --cacert "$E2E_DIR/tls.crt" -D - -o /dev/null -H "Origin: $url" \
        -H 'Content-Type: application/json' --data "{\"token\":\"$(cat "$STATE_DIR/admin.token")\"}" \
        "$url/v1/login")"
    check "login over TLS sets a Secure, HttpOnly cookie" bash -c \
        'grep -qi "^set-cookie: carrel_session=.*HttpOnly.*Secure" <<<"$1"' _ "$headers"
    check "plain http to the TLS port gets nothing" bash -c \
        '! curl -s --max-time 5 -o /dev/null "http://127.0.0.1:$1/v1/healthz"' _ "$port"
    if browser_deps; then
        CARREL_URL="$url" CARREL_SESSION="$s" CARREL_TEST_OUT="$E2E_DIR/firefox-tls" \
            CARREL_ACCEPT_CERT=1 CARREL_TOKEN_FILE="$STATE_DIR/admin.token" \
            timeout 300 node "$BROWSER_TEST_DIR/firefox.test.mjs" >"$E2E_DIR/browser-tls.log" 2>&1
        browser_report "firefox over TLS" $? "$E2E_DIR/browser-tls.log"
    else
        fail "npm ci in tests/browser"
    fi
    restart_daemon
}
