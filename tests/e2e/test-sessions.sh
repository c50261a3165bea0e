#!/bin/bash
# e2e on real libvirt + QEMU (TCG): build or reuse `tiny`, create a session, check the domain,
# kill carreld and adopt the session, stop/start, remove, and leave nothing behind.
set -uo pipefail
# shellcheck source=tests/e2e/lib.sh
source "$(dirname "$0")/lib.sh"
trap 'finish; exit $?' EXIT

start_daemon || exit 1

# The accelerator: auto must end on a working one without hanging (TCG on this kind of host).
accel="$(carrel version --json | jq -r .accel)"
if [ -n "${E2E_EXPECT_ACCEL:-}" ]; then
    check_eq "auto accelerator resolved to $E2E_EXPECT_ACCEL" "$E2E_EXPECT_ACCEL" "$accel"
fi
check "accelerator choice is logged" grep -q "accelerator: $accel" "$DAEMON_LOG"

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
    bash -c "qemu-img info -U --output=json '$overlay' | jq -e '.\"backing-filename-format\" == \"qcow2\"'"
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
check "template rm succeeds once no session uses it" carrel template rm tiny
exit 0
