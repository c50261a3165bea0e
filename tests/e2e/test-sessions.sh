#!/bin/bash
# e2e on real libvirt + QEMU (TCG): build or reuse `tiny`, create a session, check the domain,
# kill carreld and adopt the session, stop/start, remove, and leave nothing behind.
set -uo pipefail
# shellcheck source=tests/e2e/lib.sh
source "$(dirname "$0")/lib.sh"
# shellcheck source=tests/e2e/computer.sh
source "$(dirname "$0")/computer.sh"
# shellcheck source=tests/e2e/unicode.sh
source "$(dirname "$0")/unicode.sh"
# shellcheck source=tests/e2e/artifacts.sh
source "$(dirname "$0")/artifacts.sh"
# shellcheck source=tests/e2e/files.sh
source "$(dirname "$0")/files.sh"
# shellcheck source=tests/e2e/fsops.sh
source "$(dirname "$0")/fsops.sh"
# shellcheck source=tests/e2e/review.sh
source "$(dirname "$0")/review.sh"
# shellcheck source=tests/e2e/console.sh
source "$(dirname "$0")/console.sh"
# shellcheck source=tests/e2e/browser.sh
source "$(dirname "$0")/browser.sh"
# shellcheck source=tests/e2e/accel.sh
source "$(dirname "$0")/accel.sh"
# shellcheck source=tests/e2e/trust.sh
source "$(dirname "$0")/trust.sh"
# shellcheck source=tests/e2e/policy.sh
source "$(dirname "$0")/policy.sh"
# shellcheck source=tests/e2e/egress.sh
source "$(dirname "$0")/egress.sh"
# shellcheck source=tests/e2e/disk.sh
source "$(dirname "$0")/disk.sh"
# shellcheck source=tests/e2e/procs.sh
source "$(dirname "$0")/procs.sh"
# shellcheck source=tests/e2e/memfile.sh
source "$(dirname "$0")/memfile.sh"
# shellcheck source=tests/e2e/relay.sh
source "$(dirname "$0")/relay.sh"
# shellcheck source=tests/e2e/bundle.sh
source "$(dirname "$0")/bundle.sh"
# shellcheck source=tests/e2e/recording.sh
source "$(dirname "$0")/recording.sh"
trap 'disk_cleanup; finish; exit $?' EXIT

# This half's sessions run as carreld's default, carrel-qemu (QEMU without transparent huge
# pages); the lifecycle half's as libvirt's own QEMU (E2E_EMULATOR="").
start_daemon || exit 1

# The accelerator: auto must end on a working one without hanging (TCG on this kind of host,
# whether or not it has a /dev/kvm). E2E_EXPECT_ACCEL=tcg|kvm says what this host must give.
version_json="$(carrel version --json)"
accel="$(jq -r .server.accel <<<"$version_json")"
echo "e2e: accelerator $accel ($(jq -r .server.accel_reason <<<"$version_json"))"
if [ -n "${E2E_EXPECT_ACCEL:-}" ]; then
    check_eq "auto accelerator resolved to $E2E_EXPECT_ACCEL" "$E2E_EXPECT_ACCEL" "$accel"
fi
check "accelerator choice is logged" grep -q "accelerator: $accel" "$DAEMON_LOG"
# From here on every carreld restart, BYO image script and appliance takes that one decision.
export CARREL_ACCEL="$accel" E2E_ACCEL="$accel"
echo "$accel" >"$E2E_ACCEL_FILE"
timed accel_checks

# The template: built from the recipe, or taken from the cache keyed by the recipe hash.
check "template build tiny" carrel template build tiny
check_eq "tiny is imported as version 1" "tiny@1" "$(carrel template show tiny --json | jq -r .ref)"
check_eq "a second build reuses the import" "1" \
    "$(carrel template build tiny --json | tail -1 | jq -r '.version // .result.version')"

# Create: qcow2 overlay, domain defined and started, guest agent answering.
start=$(date +%s)
create_json="$(carrel create --template tiny --name e2e-one --json)"
echo "create took $(($(date +%s) - start)) s"
id="$(jq -r .id <<<"$create_json")"
dom="carrel-$id"
check_eq "create reports running" "running" "$(jq -r .state <<<"$create_json")"
check_eq "domain is running" "running" "$("${VIRSH[@]}" domstate "$dom" | head -1)"
check "guest agent answers" agent_ping "$dom"
xml="$("${VIRSH[@]}" dumpxml "$dom")"
check "domain carries carrel metadata with the session id" \
    grep -q "<carrel:id>$id</carrel:id>" <<<"$xml"
check "SPICE listens on 127.0.0.1 only" grep -q "listen='127.0.0.1'" <<<"$xml"
check "no SPICE listener beyond loopback" bash -c "! grep -Eq \"listen='(0.0.0.0|::)'\" <<<\"\$1\"" _ "$xml"
overlay="$STATE_DIR/sessions/$id/disk.qcow2"
check "overlay has the template as backing file with explicit format" \
    json_true '."backing-filename-format" == "qcow2"' "$(qemu-img info -U --output=json "$overlay")"
check "serial console is logged" test -s "$STATE_DIR/sessions/$id/console.log"

# SIGKILL carreld while the session runs; a new carreld adopts it.
kill -9 "$DAEMON_PID"
wait "$DAEMON_PID" 2>/dev/null
check_eq "the domain survives the daemon" "running" "$("${VIRSH[@]}" domstate "$dom" | head -1)"
start_daemon || exit 1
check "restart log reports the adoption" grep -q "1 adopted" "$DAEMON_LOG"
check_eq "session still running after restart" "running" "$(carrel show "$id" --json | jq -r .state)"
check "guest agent still answers" agent_ping "$dom"

# Stop (graceful through the agent) and start again.
check_eq "stop" "stopped" "$(carrel stop "$id" --json | jq -r .state)"
check_eq "domain is shut off" "shut off" "$("${VIRSH[@]}" domstate "$dom" | head -1)"
check "overlay is consistent after stop" qemu-img check -q "$overlay"
check_eq "start" "running" "$(carrel start "$id" --json | jq -r .state)"
check "guest agent answers after start" agent_ping "$dom"

# Wrong state and unknown ids are clear errors with their exit codes.
carrel start "$id" >/dev/null 2>&1
check_eq "start while running exits 4 (conflict)" "4" "$?"
carrel show s-000000000000 >/dev/null 2>&1
check_eq "unknown id exits 3 (not found)" "3" "$?"

# rm leaves no domain, overlay or file.
check_eq "rm" "destroyed" "$(carrel rm "$id" --json | jq -r '.state // .[0].state')"
check "no domain left" bash -c "! ${VIRSH[*]} dominfo '$dom' >/dev/null 2>&1"
check "no session files left" test ! -e "$STATE_DIR/sessions/$id"
# Warm start: boot once, save the running desktop, then restore it for each new session.
check "template warm tiny" carrel template warm tiny
check "template show reports the warm state" \
    json_true '.warm.memory_bytes > 0' "$(carrel template show tiny --json)"
a_json="$(carrel create --template tiny --name warm-a --json)"
b_json="$(carrel create --template tiny --name warm-b --json)"
a="$(jq -r .id <<<"$a_json")"
b="$(jq -r .id <<<"$b_json")"
check_eq "warm create reports origin warm" "warm warm" \
    "$(jq -r .origin <<<"$a_json") $(jq -r .origin <<<"$b_json")"
check_eq "both warm sessions run side by side" "running running" \
    "$("${VIRSH[@]}" domstate "carrel-$a" | head -1) $("${VIRSH[@]}" domstate "carrel-$b" | head -1)"
check "clones have distinct UUIDs" bash -c \
    "[ \"\$(${VIRSH[*]} domuuid carrel-$a)\" != \"\$(${VIRSH[*]} domuuid carrel-$b)\" ]"
check "each clone has a VM generation id" bash -c \
    "${VIRSH[*]} dumpxml carrel-$a | grep -q '<genid>'"
check_eq "a restore's FIFO folder goes with it (carreld's run/ is empty)" "" \
    "$(find "$STATE_DIR/run" -mindepth 1 2>/dev/null; [ -d "$STATE_DIR/run" ] || echo "no run/")"
# carrel-qemu (manager/daemon/carrel-qemu.c): QEMU without transparent huge pages where a read
# of untouched memory maps the shared zero page, so a restore allocates only the pages it writes;
# with them where a read allocates (all of guest RAM is resident there anyway), as carreld's
# probe at start said.
if grep -q "memory: a read of untouched memory allocates it here" "$DAEMON_LOG"; then
    thp_want=1 thp_says="on (reads allocate here)"
else
    thp_want=0 thp_says="off"
fi
check_eq "the clone runs as carrel-qemu: transparent huge pages $thp_says" "$thp_want" \
    "$(awk '/^THP_enabled:/ {print $2}' "/proc/$(cat "/run/libvirt/qemu/carrel-$a.pid")/status")"
check "its domain names carrel-qemu as the emulator" bash -c \
    "${VIRSH[*]} dumpxml carrel-$a | grep -q '<emulator>.*/carrel-qemu</emulator>'"
check "carreld says how reads of untouched memory behave here" \
    grep -Eq "memory: (a read of untouched memory allocates|reads of untouched memory map)" "$DAEMON_LOG"
timed memfile_checks "$a"
timed relay_checks "$a"
shot="$E2E_DIR/warm-a.png"
"${VIRSH[@]}" screenshot "carrel-$a" "$shot" >/dev/null 2>&1
check "the restored desktop is visible (screenshot not blank)" \
    /usr/bin/python3 "$(dirname "$0")/image-stats.py" --not-blank "$shot"
windows="$(carrel exec "$a" -- /usr/local/bin/carrel-guest windows 2>/dev/null)"
check "carrel-guest windows lists the terminal" \
    json_true '[.windows[] | select(.class == "XTerm")] | length >= 1' "$windows"
check "a file written in one clone..." carrel exec "$a" -- sh -c 'echo from-a > /home/user/clone.txt'
check "...is absent from the other" bash -c "! $CARREL_BIN exec $b -- test -e /home/user/clone.txt"
# Against the host's clock before and after the exec: under load the exec itself took seconds.
before=$(date +%s)
guest_now="$(carrel exec "$b" -- date +%s)"
after=$(date +%s)
if [ "${guest_now:-0}" -ge $((before - 5)) ] && [ "${guest_now:-0}" -le $((after + 5)) ]; then
    pass "clock is right after restore (within 5 s)"
else
    fail "clock is right after restore (within 5 s): guest ${guest_now:-?}, host $before-$after"
    grep "catching up" "$DAEMON_LOG" >&2
fi
cold_json="$(carrel create --template tiny --name cold-one --cold --json)"
check_eq "--cold boots even from a warm template" "cold" "$(jq -r .origin <<<"$cold_json")"
# A boot names the CPU every restore runs (hypervisor-xml.c): the relay answered this cold boot
# from the cache the warm restores of relay_checks learned (tests/e2e/relay.sh).
check "a boot's CPU questions are a restore's: the cold session's answered from the relay" \
    grep -Eq "carrel-qemu: [0-9]{3} CPU properties answered from $STATE_DIR/emulator/cpu/" \
    <<<"$(relay_log "$(jq -r .id <<<"$cold_json")")"

# A NIC per session on carrel's isolated network, each with its own MAC: the guest's address
# must be the one in its domain XML, also for warm clones (QEMU's saved device state carries
# the template's MAC; carrel-guest set-mac replaces it after the restore).
net_xml="$("${VIRSH[@]}" net-dumpxml carrel-isolated 2>/dev/null)"
check "the session network exists and is active" bash -c \
    "${VIRSH[*]} net-info carrel-isolated | grep -Eq '^Active: +yes'"
check "the session network forwards nowhere (no <forward>)" bash -c "! grep -q '<forward' <<<\"\$1\"" _ "$net_xml"
check "the session network's ports are isolated" grep -q "<port isolated='yes'/>" <<<"$net_xml"
cold="$(jq -r .id <<<"$cold_json")"
for s in "$a" "$b" "$cold"; do
    want="$(xml_mac "$s")"
    check "session $s: its domain XML has one MAC on carrel-isolated" bash -c \
        "[ \"\$(${VIRSH[*]} domiflist carrel-$s | grep -c carrel-isolated)\" = 1 ] && [ -n '$want' ]"
    check_eq "session $s: carrel show reports that MAC" "$want" "$(carrel show "$s" --json | jq -r .mac)"
    check_eq "session $s: the guest's NIC has that MAC" "$want" "$(guest_mac "$s")"
    check "session $s: QEMU's device has that MAC too" grep -q "macaddr=$want" \
        <<<"$("${VIRSH[@]}" qemu-monitor-command --hmp "carrel-$s" 'info network')"
done
check "the two warm clones have different MACs" test "$(xml_mac "$a")" != "$(xml_mac "$b")"

# exec: exit codes, stderr, timeout kill.
out="$(carrel exec "$a" -- sh -c 'echo out; echo err >&2; exit 3' 2>"$E2E_DIR/err")"
check_eq "exec exit code" "3" "$?"
check_eq "exec stdout" "out" "$out"
check_eq "exec stderr" "err" "$(cat "$E2E_DIR/err")"
check_eq "exec timeout kills the command" "true" \
    "$(carrel exec --json --timeout 2 "$a" -- sleep 30 | jq -r .timed_out)"
capped="$(carrel exec --json "$a" -- sh -c 'yes | head -c 2000000')"
check_eq "exec output is capped at 1 MiB and says so" "1048576 true" \
    "$(jq -r '"\(.stdout | length) \(.truncated)"' <<<"$capped")"
# The deadline's wrapper: the template's carrel-run, which the command replaces (so its parent
# is qemu-ga) and which kills the command's whole process group at the deadline.
# shellcheck disable=SC2016 # the scripts are for the guest's shell
check_eq "exec runs the command under carrel-run (its parent is qemu-ga)" "qemu-ga" \
    "$(carrel exec "$a" -- sh -c 'cat /proc/$PPID/comm')"
# shellcheck disable=SC2016
carrel exec --timeout 2 "$a" -- sh -c 'sleep 60 & echo $! >/tmp/e2e-bg.pid; wait' >/dev/null 2>&1
# shellcheck disable=SC2016
check "...and the deadline kills what the command started in the background" \
    carrel exec "$a" -- sh -c 's=$(cut -d" " -f3 "/proc/$(cat /tmp/e2e-bg.pid)/stat" 2>/dev/null)
        [ -z "$s" ] || [ "$s" = Z ]'
# A guest without carrel-run (a template built before it, or an imported one) gets timeout(1).
carrel exec "$cold" -- rm -f /usr/local/bin/carrel-run >/dev/null
# shellcheck disable=SC2016
check_eq "a guest without carrel-run: exec runs the command under timeout(1)" "timeout" \
    "$(carrel exec "$cold" -- sh -c 'cat /proc/$PPID/comm')"
check_eq "...whose deadline kills it too" "true 137" \
    "$(carrel exec --json --timeout 2 "$cold" -- sleep 30 | jq -r '"\(.timed_out) \(.exit_code)"')"
check_eq "...and a program it cannot find exits 127" "127" \
    "$(carrel exec --json "$cold" -- /nonexistent/program | jq -r .exit_code)"
check_eq "under carrel-run too" "127" \
    "$(carrel exec --json "$a" -- /nonexistent/program | jq -r .exit_code)"

# Computer use on the restored desktop: screenshots, keyboard, mouse, files, the timeline.
timed computer_checks "$a"
# Any Unicode text typed into the terminal: keys, carrel-guest's keysyms, the clipboard.
timed unicode_checks "$a"

# What reviewers use: the control lease against agent input, approvals, the named timeline.
timed review_checks "$a"
# The console: tickets, the websocket proxy to SPICE, view-only, .vv files.
timed console_checks "$a"
# The web console in headless Chromium on the same session (screenshots under $E2E_DIR/browser).
timed browser_checks "$a"
# Who may do what: owners, the role matrix, the lease, revocation, the audit chain; then TLS.
timed trust_checks
timed trust_tls "$a"
# Named policies: a token limited to one, a real guest within its limits.
timed policy_checks
# Controlled egress through the proxy, to a stand-in internet.
timed egress_checks
# A guest that fills the host's disk (a second carreld on a small filesystem) pauses with its
# reason; that carreld keeps answering and this one's session keeps working.
timed disk_checks "$a"

# Task inputs in, artifacts out (libguestfs and the agent), the exit path, the diff.
timed artifacts_checks
# Bounds of files: sized in the guest before any copy, downloads streamed, uploads spooled.
timed files_checks
# File operations through carrel-guest fs, hostile names, a 100 MiB round trip with sha256.
timed fsops_checks
# Streamed and background commands: stdout as it comes, ps, logs, stdin, kill, closed streams.
timed procs_checks
# Evidence bundles: export, verify pinned to the host key, tampered copies named.
timed bundle_checks
# The screen recording: this carreld again, with a policy that records (and the others).
recording_policies
restart_daemon --policy-dir "$RECORDING_POLICIES" || exit 1
timed recording_checks
memfile_unchanged

for s in "$a" "$b" "$cold"; do
    carrel rm "$s" >/dev/null
done
check "template rm succeeds once no session uses it" carrel template rm tiny
# Only this run's domains: other carrel instances may share this libvirt.
left=0
for s in "$id" "$a" "$b" "$cold"; do
    "${VIRSH[@]}" dominfo "carrel-$s" >/dev/null 2>&1 && left=$((left + 1))
done
check_eq "no domain of this run is left" "0" "$left"
exit 0
