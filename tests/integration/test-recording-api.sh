#!/bin/bash
# Screen recording through carreld's HTTP API and the CLI, on libvirt's test driver (no VM; its
# screen is a still picture): a session under a policy with [recording] enabled is recorded,
# pause finishes its segment, the listing and the events index follow the API's contract, a
# download (CLI, checked against the listed sha256) is a WebM, one Range is answered with 206,
# hostile names are refused without reading anything, the evidence bundle holds the segment and
# verifies, and the recording goes with the session.
# Usage: test-recording-api.sh CARRELD CARREL
set -uo pipefail

carreld="$1"
carrel="$2"
tmp="$(mktemp -d --tmpdir carrel-recording.XXXXXX)"
export CARREL_SOCKET="$tmp/carreld.sock" CARREL_STATE_DIR="$tmp/state"
log="$tmp/carreld.log"
pid=""
passed=0
cleanup() {
    [ -z "$pid" ] || kill "$pid" 2>/dev/null
    [ -z "$pid" ] || wait "$pid" 2>/dev/null
    rm -rf "$tmp"
}
trap cleanup EXIT
fail() {
    printf 'FAIL: %s\n' "$*" >&2
    tail -20 "$log" >&2
    exit 1
}
ok() {
    passed=$((passed + 1))
    echo "ok - $*"
}
api() {
    curl -s --path-as-is --unix-socket "$CARREL_SOCKET" \
        -H "Authorization: Bearer $(cat "$CARREL_STATE_DIR/admin.token")" "$@"
}

mkdir -p "$tmp/policies"
printf '[recording]\nenabled=true\nfps=10\nsegment_s=10\nmax_mib=16\n' >"$tmp/policies/rec.policy"
"$carreld" --state-dir "$CARREL_STATE_DIR" --socket "$CARREL_SOCKET" --libvirt-uri test:///default \
    --accel tcg --policy-dir "$tmp/policies" >"$log" 2>&1 &
pid=$!
for _ in $(seq 1 100); do "$carrel" version >/dev/null 2>&1 && break; sleep 0.1; done
"$carrel" version >/dev/null 2>&1 || fail "carreld did not start"
qemu-img create -q -f qcow2 "$tmp/disk.qcow2" 64M
echo "not a kernel" >"$tmp/vmlinuz"
"$carrel" template import tiny --disk "$tmp/disk.qcow2" --format qcow2 --kernel "$tmp/vmlinuz" \
    --cmdline root=/dev/vda >/dev/null || fail "template import"
id="$("$carrel" create --template tiny --name rec --policy rec --json | jq -r .id)"
if [ -z "$id" ] || [ "$id" = null ]; then fail "create under the rec policy"; fi
plain="$("$carrel" create --template tiny --name plain --json | jq -r .id)"

active=""
for _ in $(seq 1 50); do
    active="$(api "http://carreld/v1/sessions/$id/recording" | jq -r .active)"
    [ "$active" = true ] && break
    sleep 0.2
done
[ "$active" = true ] || fail "the watcher did not start the recorder"
ok "a session under a recording policy is recorded"
[ "$(api "http://carreld/v1/sessions/$plain/recording" | jq -c '[.enabled, .active, .segments]')" = \
    '[false,false,[]]' ] || fail "a session under the default policy is recorded"
ok "one under the default policy is not"
sleep 1
api -o /dev/null "http://carreld/v1/sessions/$id/screenshot" || fail "a screenshot"
sleep 1
"$carrel" pause "$id" >/dev/null || fail "pause"
json="$(api "http://carreld/v1/sessions/$id/recording")"
jq -e '.enabled and (.active | not) and .fps == 10 and .dropped == 0
    and (.segments | length) == 1 and (.segments[0] | .name == "seg-000001.webm"
    and (.open | not) and .frames >= 1 and .duration_ms > 0 and .bytes > 0
    and .ended_ms - .started_ms == .duration_ms and (.sha256 | length) == 64)' <<<"$json" \
    >/dev/null || fail "the listing after pause: $json"
ok "pause finishes the segment: $(jq -c '.segments[0] | [.frames, .duration_ms, .bytes]' <<<"$json")"
seq="$(api "http://carreld/v1/sessions/$id/events?limit=1000" |
    jq '[.events[] | select(.action == "screenshot")] | last | .seq')"
jq -e --argjson seq "$seq" '[.events[] | select(.seq == $seq and .segment == "seg-000001.webm"
    and .offset_ms > 0)] | length == 1' <<<"$json" >/dev/null ||
    fail "the screenshot's event ($seq) is not in the events index: $json"
ok "the events index maps the screenshot's event into the segment"

"$carrel" recording "$id" "seg-000001.webm" -o "$tmp/seg.webm" >/dev/null ||
    fail "carrel recording ID NAME -o FILE"
[ "$(sha256sum "$tmp/seg.webm" | cut -d' ' -f1)" = "$(jq -r '.segments[0].sha256' <<<"$json")" ] ||
    fail "the download's sha256 is not the listed one"
[ "$(head -c 4 "$tmp/seg.webm" | od -An -tx1)" = " 1a 45 df a3" ] || fail "not a WebM"
ok "a download is the listed WebM"
grep -q '^seg-000001.webm' <<<"$("$carrel" recording "$id")" || fail "carrel recording ID lists it"
"$carrel" recording "$id" --json | jq -e '.segments | length == 1' >/dev/null ||
    fail "carrel recording ID --json"
ok "carrel recording lists it"
size="$(stat -c %s "$tmp/seg.webm")"
got="$(api -D "$tmp/headers" -o "$tmp/part" -w '%{http_code} %{size_download}' \
    -H 'Range: bytes=4-13' "http://carreld/v1/sessions/$id/recording/seg-000001.webm")"
[ "$got" = "206 10" ] || fail "a Range request: $got"
grep -qi "^content-range: bytes 4-13/$size" "$tmp/headers" || fail "Content-Range: $(cat "$tmp/headers")"
cmp -s "$tmp/part" <(tail -c +5 "$tmp/seg.webm" | head -c 10) || fail "the range's bytes"
got="$(api -o /dev/null -w '%{http_code}' -H 'Range: bytes=0-1,5-9' \
    "http://carreld/v1/sessions/$id/recording/seg-000001.webm")"
[ "$got" = 200 ] || fail "several ranges are answered whole: $got"
ok "one Range is answered with 206 and its bytes, several with the whole file"
ct="$(api -o /dev/null -w '%{content_type}' "http://carreld/v1/sessions/$id/recording/seg-000001.webm")"
[ "$ct" = video/webm ] || fail "content type $ct"
ok "served as video/webm"

for name in '../x' 'seg-1.webm/..' '..%2Findex.json' '..%2F..%2F..%2Fadmin.token' \
    'seg-000001.webm%2F..' 'index.json' '%2E%2E' 'seg-000002.webm'; do
    code="$(api -o "$tmp/hostile" -w '%{http_code}' "http://carreld/v1/sessions/$id/recording/$name")"
    case "$code" in 400 | 404) ;; *) fail "'$name' answered $code" ;; esac
    if grep -q "$(cat "$CARREL_STATE_DIR/admin.token")" "$tmp/hostile" ||
        [ "$(head -c 4 "$tmp/hostile" | od -An -tx1)" = " 1a 45 df a3" ]; then
        fail "'$name' served something"
    fi
done
ok "hostile segment names are refused (400 or 404) and serve nothing"

"$carrel" export "$id" -o "$tmp/bundle.tar" >/dev/null 2>&1 || fail "export"
# The listing read whole first: under pipefail, grep -q leaving early made tar's SIGPIPE a failure.
listing="$(tar -tf "$tmp/bundle.tar")" || fail "the bundle is not a tar"
grep -qx 'recording/seg-000001.webm' <<<"$listing" || fail "no segment in the bundle"
grep -qx 'recording.json' <<<"$listing" || fail "no recording.json in the bundle"
tar -xOf "$tmp/bundle.tar" manifest.json | jq -e --arg sha "$(jq -r '.segments[0].sha256' <<<"$json")" \
    '(.files[] | select(.path == "recording/seg-000001.webm") | .sha256 == $sha and .kind == "recording")
     and .recording.files == ["recording/seg-000001.webm", "recording.json"]' >/dev/null ||
    fail "the manifest: $(tar -xOf "$tmp/bundle.tar" manifest.json)"
"$carrel" verify "$tmp/bundle.tar" >/dev/null 2>&1 || fail "the bundle does not verify"
ok "the evidence bundle holds the segment with its sha256 and verifies"

"$carrel" resume "$id" >/dev/null || fail "resume"
sleep 1
"$carrel" rm "$id" >/dev/null || fail "rm"
[ ! -e "$CARREL_STATE_DIR/sessions/$id/recording" ] || fail "the recording outlived its session"
ok "the recording goes with its session"
echo "$passed passed, 0 failed"
