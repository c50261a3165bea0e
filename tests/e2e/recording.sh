# e2e: screen recording by carreld (issue 19) on a warm `tiny`. A session under a policy with
# [recording] enabled (fps 4, segment_s 10) is recorded while it runs: typing into its xterm,
# a pause and a resume, then a stop. Then: at least two finished segments, each a WebM that
# GStreamer reads with a duration; the typing's event is in the events index; a download's
# sha256 is the listed one; hostile segment names are refused and read nothing outside.
# Then the session page plays it in Chromium (tests/browser/recording.test.mjs).
# Needs lib.sh (carrel, check, check_eq, json_true), browser.sh (browser_recording_checks) and a
# carreld started with --policy-dir "$RECORDING_POLICIES" (recording_policies writes it) and
# --listen (lib.sh's start_daemon: E2E_URL).
# shellcheck shell=bash

RECORDING_POLICIES="$E2E_DIR/rec-policies"

# recording_policies: the policy folder of the recording part: the shipped default, and `rec`.
recording_policies() {
    mkdir -p "$RECORDING_POLICIES"
    # Every shipped policy: the sessions of the half that runs this may name any of them.
    cp "$E2E_SRC"/policies/*.policy "$RECORDING_POLICIES/"
    printf '[recording]\nenabled=true\nfps=4\nsegment_s=10\nmax_mib=64\n' \
        >"$RECORDING_POLICIES/rec.policy"
}

recording_api() {
    curl -s --path-as-is --unix-socket "$SOCKET" \
        -H "Authorization: Bearer $(cat "$STATE_DIR/admin.token")" "$@"
}

# recording_duration_ok FILE: GStreamer reads FILE as a seekable WebM with a duration above zero.
recording_duration_ok() {
    local out
    out="$(gst-discoverer-1.0 "$1" 2>&1)" || return 1
    grep -q 'container #0: WebM' <<<"$out" || return 1
    grep -q 'Seekable: yes' <<<"$out" || return 1
    sed -n 's/^ *Duration: \([0-9]*\):\([0-9]*\):\([0-9.]*\)$/\1 \2 \3/p' <<<"$out" |
        awk '{ exit !($1 * 3600 + $2 * 60 + $3 > 0) }'
}

# recording_hostile SESSION NAME: the name is refused (400 or 404) and no video comes back.
recording_hostile() {
    local code
    code="$(recording_api -o "$E2E_DIR/hostile.out" -w '%{http_code}' \
        "http://carreld/v1/sessions/$1/recording/$2")"
    check "a hostile segment name '$2' is refused ($code)" test "$code" = 400 -o "$code" = 404
    check "...and nothing was served for it" bash -c \
        "! head -c 4 '$E2E_DIR/hostile.out' | od -An -tx1 | grep -q '1a 45 df a3'"
}

# recording_active ID: within 30 s, the session's recorder runs and has a segment.
recording_active() {
    local _
    for _ in $(seq 1 30); do
        json_true '.enabled and .active and (.segments | length) >= 1' \
            "$(recording_api "http://carreld/v1/sessions/$1/recording")" && return 0
        sleep 1
    done
    return 1
}

# recording_shots ID: screenshots the session's recorder has taken.
recording_shots() {
    recording_api "http://carreld/v1/sessions/$1/recording" | jq -r '.screenshots // -1'
}

# An idle screen costs no screenshots: the recorder hears of changes from the VNC display.
recording_idle_checks() {
    local before after
    check_eq "...which hears of screen changes from the domain's VNC display" "display" \
        "$(recording_api "http://carreld/v1/sessions/$1/recording" | jq -r .changes_from)"
    check "...whose socket only root can reach" recording_vnc_private "carrel-$1"
    sleep 3
    before="$(recording_shots "$1")"
    sleep 8
    after="$(recording_shots "$1")"
    # 8 s at fps 4 would be 32 screenshots by polling; a cursor or clock may change once.
    check "an idle screen took at most 1 screenshot in 8 s ($before, then $after)" \
        test "$((after - before))" -le 1 -a "$before" -ge 1
    carrel type "$1" $'echo changed\n' >/dev/null
    sleep 2
    check "...and a change takes one again ($after, then $(recording_shots "$1"))" \
        test "$(recording_shots "$1")" -gt "$after"
}

# recording_vnc_private DOMAIN: its VNC display is a unix socket (no port), in a folder others
# cannot enter.
recording_vnc_private() {
    local xml path
    xml="$("${VIRSH[@]}" dumpxml "$1")"
    path="$(sed -n "s/.*<listen type='socket' socket='\([^']*\)'.*/\1/p" <<<"$xml" | head -1)"
    [ -S "$path" ] || return 1
    grep -q "<graphics type='vnc' port=" <<<"$xml" && return 1
    [ "$(stat -c %A "$(dirname "$path")" | cut -c8-10)" = "---" ]
}

recording_checks() {
    local id json seq seg n name listed got i
    json="$(carrel create --template tiny --name e2e-rec --policy rec --json 2>/dev/null)"
    id="$(jq -r .id <<<"$json")"
    check_eq "a session under the rec policy runs" "running rec" \
        "$(jq -r '"\(.state) \(.policy)"' <<<"$json")"
    # The watcher starts the recorder within a round (2 s; longer while the guest catches up
    # on a loaded host).
    check "...and is being recorded" recording_active "$id"
    recording_idle_checks "$id"
    carrel type "$id" $'echo recorded-by-carreld\n' >/dev/null
    seq="$(recording_api "http://carreld/v1/sessions/$id/events?limit=1000" |
        jq '[.events[] | select(.action == "type")] | last | .seq')"
    sleep 3
    check "pause" carrel pause "$id"
    check_eq "...finishes the segment" "false" \
        "$(recording_api "http://carreld/v1/sessions/$id/recording" | jq -r '.segments | last | .open')"
    check "resume" carrel resume "$id"
    sleep 4
    carrel type "$id" $'echo again\n' >/dev/null
    sleep 3
    check "stop" carrel stop "$id"
    json="$(recording_api "http://carreld/v1/sessions/$id/recording")"
    n="$(jq '[.segments[] | select(.open | not)] | length' <<<"$json")"
    check "at least two finished segments (got $n)" test "${n:-0}" -ge 2
    check "none is left open after stop" json_true '[.segments[] | select(.open)] | length == 0' "$json"
    check "the typing's event (seq $seq) is in the events index" json_true \
        "[.events[] | select(.seq == $seq)] | length == 1" "$json"
    seg="$(jq -r ".events[] | select(.seq == $seq) | .segment" <<<"$json")"
    check "...in a finished segment ($seg), at an offset inside it" json_true \
        "(.events[] | select(.seq == $seq)) as \$e | (.segments[] | select(.name == \$e.segment)) as \$s | \$e.offset_ms >= 0 and \$e.offset_ms <= \$s.duration_ms" \
        "$json"
    for i in $(seq 0 $((n - 1))); do
        name="$(jq -r ".segments[$i].name" <<<"$json")"
        listed="$(jq -r ".segments[$i].sha256" <<<"$json")"
        check "carrel recording downloads $name" carrel recording "$id" "$name" \
            -o "$E2E_DIR/$name"
        check_eq "...its sha256 is the listed one" "$listed" \
            "$(sha256sum "$E2E_DIR/$name" | cut -d' ' -f1)"
        check_eq "...it is a WebM (EBML magic)" " 1a 45 df a3" \
            "$(head -c 4 "$E2E_DIR/$name" | od -An -tx1)"
        check "...GStreamer reads it, with a duration above zero" \
            recording_duration_ok "$E2E_DIR/$name"
    done
    got="$(recording_api -o /dev/null -w '%{http_code} %{size_download}' -H 'Range: bytes=0-99' \
        "http://carreld/v1/sessions/$id/recording/seg-000001.webm")"
    check_eq "a Range request is answered with its 100 bytes (206)" "206 100" "$got"
    check "carrel recording lists them" bash -c \
        "'$CARREL_BIN' recording '$id' | grep -q seg-000002.webm"
    for name in '../x' 'seg-1.webm/..' '..%2F..%2Fstate.db' 'seg-000001.webm%2F..%2F..%2Findex.json' \
        '%2E%2E' 'index.json'; do
        recording_hostile "$id" "$name"
    done
    check "the recording is in the evidence bundle" bash -c \
        "'$CARREL_BIN' export '$id' -o '$E2E_DIR/rec-bundle.tar' >/dev/null && tar -tf '$E2E_DIR/rec-bundle.tar' | grep -q '^recording/seg-000001.webm$'"
    check "...and the bundle verifies" carrel verify "$E2E_DIR/rec-bundle.tar"
    # The session page plays it in Chromium; an event's Play button seeks to it (browser.sh).
    browser_recording_checks "$id"
    check "the session is removed" carrel rm "$id"
    check "...and its recording with it" test ! -e "$STATE_DIR/sessions/$id/recording"
}
