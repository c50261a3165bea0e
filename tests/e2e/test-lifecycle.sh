#!/bin/bash
# e2e on real libvirt + QEMU (TCG), second half (test-sessions.sh is the first): screen sizes,
# the accessibility tree, the shell, the lifecycle, snapshots, the crash matrix, timeouts, the
# pool, request fairness, an agentless guest, the SDK, images that boot with their own
# bootloaders, and libvirtd restarted under running sessions. Its own carreld and state; `tiny`
# from the cache. (An installed carrel is test-install.sh, a tier of its own.)
set -uo pipefail
# shellcheck source=tests/e2e/lib.sh
source "$(dirname "$0")/lib.sh"
# shellcheck source=tests/e2e/accel.sh
source "$(dirname "$0")/accel.sh"
# shellcheck source=tests/e2e/screen.sh
source "$(dirname "$0")/screen.sh"
# shellcheck source=tests/e2e/a11y.sh
source "$(dirname "$0")/a11y.sh"
# shellcheck source=tests/e2e/shell.sh
source "$(dirname "$0")/shell.sh"
# shellcheck source=tests/e2e/lifecycle.sh
source "$(dirname "$0")/lifecycle.sh"
# shellcheck source=tests/e2e/metrics.sh
source "$(dirname "$0")/metrics.sh"
# shellcheck source=tests/e2e/crash.sh
source "$(dirname "$0")/crash.sh"
# shellcheck source=tests/e2e/fairness.sh
source "$(dirname "$0")/fairness.sh"
# shellcheck source=tests/e2e/sdk.sh
source "$(dirname "$0")/sdk.sh"
trap 'finish; exit $?' EXIT

# This half runs as libvirt's own QEMU (carreld --emulator ""), every restart included: its
# restores take transparent huge pages and its clones get the memory-reclaim job; the sessions
# half runs as carreld's default, carrel-qemu.
export E2E_EMULATOR=""
# The sessions half's decision, when it ran in this boot (lib.sh); else carreld probes.
if [ -z "${E2E_ACCEL:-}" ] && [ -s "$E2E_ACCEL_FILE" ]; then
    E2E_ACCEL="$(cat "$E2E_ACCEL_FILE")"
    echo "e2e: accelerator $E2E_ACCEL, as the sessions half's carreld decided in this boot"
fi
start_daemon || exit 1
E2E_ACCEL="$(carrel version --json | jq -r .server.accel)"
export CARREL_ACCEL="$E2E_ACCEL" E2E_ACCEL
# accel.sh's checks compare with the running carreld's decision.
# shellcheck disable=SC2034 # read by byo_log_checks (accel.sh)
accel="$E2E_ACCEL"
check "template build tiny" carrel template build tiny
check "template warm tiny" carrel template warm tiny
check_eq "as libvirt's own QEMU the warm state keeps RAM in its save image" "false" \
    "$(carrel template show tiny --json | jq -r .warm.memory_in_file)"
timed reclaim_checks

# Sessions of their own screen sizes: screenshots, pointer mapping, a revert, refused sizes.
timed screen_checks

# The accessibility tree of carrel-demo, click_element in both modes, unknown elements.
timed a11y_checks
# The interactive terminal: carrel shell from a pipe, its echo and exit code, a client that leaves.
timed shell_checks

# Pause, resume, hibernate across a carreld restart; snapshots with memory and revert.
timed lifecycle_checks
# /metrics around a warm create, a snapshot and a revert (counters restart with carreld).
timed metrics_checks
timed snapshot_checks
timed crash_checks
timed timeout_checks
timed pool_checks
# Request classes: health and reads answer beside long execs and creates.
timed fairness_checks

# A guest without carrel's tools or a guest agent (here: tiny's image booted into a bare shell)
# is ready once its screen shows something and holds still.
tiny_json="$(carrel template show tiny --json)"
# shellcheck disable=SC2317 # called through timed
noagent_checks() {
    check "import an image that runs no guest agent" carrel template import noagent \
        --disk "$(jq -r .disk <<<"$tiny_json")" --format qcow2 \
        --kernel "$(jq -r .kernel <<<"$tiny_json")" --initrd "$(jq -r .initrd <<<"$tiny_json")" \
        --cmdline "root=/dev/vda ro console=tty0 init=/bin/sh"
    local na_json na_start
    # The screen is looked at once the agent was silent for --screen-grace (45 s by default,
    # which this check waited out): 10 s here, on a carreld restarted for it.
    restart_daemon --screen-grace 10 || return 1
    na_start=$(date +%s)
    na_json="$(carrel create --template noagent --json)"
    echo "agentless create took $(($(date +%s) - na_start)) s"
    na="$(jq -r .id <<<"$na_json")"
    check_eq "an agentless guest still comes up running" "running" "$(jq -r .state <<<"$na_json")"
    check "...ready by its screen, and says so" \
        grep -q "screen settled" <<<"$(jq -r .state_reason <<<"$na_json")"
    carrel rm "$na" >/dev/null
    check "template rm noagent" carrel template rm noagent
    restart_daemon || return 1
}
timed noagent_checks

# The Python SDK on its own tiny session, and the agent loops of examples/ with a stand-in model.
timed sdk_checks
# Bring your own image: tiny's files on a partitioned disk that boots with its own bootloader
# (EXTLINUX, BIOS), imported without a kernel: no direct boot involved. Bootloaders load the
# compressed bzImage (the template itself boots the faster uncompressed vmlinux), which the
# build left in its cache entry.
tiny_build="${CARREL_CACHE_DIR:-/var/cache/carrel}/templates/tiny-$(jq -r '.recipe_hash[0:16]' <<<"$tiny_json")"
# byo_start KIND NAME: tiny's disk made into a KIND (bios or uefi) image with its own bootloader
# (make-byo-KIND.sh), imported as template NAME, and a session of it started: its id in BYO_ID
# once its agent answers (under load it may answer after the screen settled: ready by screen),
# and in BYO_IDS for the last check.
BYO_IDS=()
# shellcheck disable=SC2317 # called through timed
byo_start() {
    local kind="$1" name="$2" log="$E2E_DIR/byo-$1.log" image
    image="$("$(dirname "$0")/make-byo-$kind.sh" "$(jq -r .disk <<<"$tiny_json")" \
        "$tiny_build/vmlinuz" "$(jq -r .initrd <<<"$tiny_json")" \
        "${CARREL_CACHE_DIR:-/var/cache/carrel}/byo" 2>"$log")"
    byo_log_checks "$kind" "$image" "$log"
    check "import a ${kind^^} image with its own bootloader" carrel template import "$name" \
        --disk "$image" --format qcow2 --firmware "$kind"
    BYO_ID="$(carrel create --template "$name" --json | jq -r .id)"
    BYO_IDS+=("$BYO_ID")
    for _ in $(seq 1 45); do carrel exec "$BYO_ID" -- true >/dev/null 2>&1 && break; sleep 2; done
}
# shellcheck disable=SC2317 # called through timed
byo_bios_checks() {
    check "tiny's build kept its bzImage" test -f "$tiny_build/vmlinuz"
    byo_start bios byo
    check "...its domain has no direct-boot kernel" \
        bash -c "! ${VIRSH[*]} dumpxml carrel-$BYO_ID | grep -q '<kernel'"
    check "...it booted through its own bootloader (EXTLINUX's BOOT_IMAGE)" \
        grep -q "BOOT_IMAGE=/boot/vmlinuz" <<<"$(carrel exec "$BYO_ID" -- cat /proc/cmdline)"
    check "...and its desktop runs" \
        json_true '[.windows[] | select(.class == "XTerm")] | length >= 1' \
        "$(carrel exec "$BYO_ID" -- /usr/local/bin/carrel-guest windows 2>/dev/null)"
    carrel rm "$BYO_ID" >/dev/null
    check "template rm byo" carrel template rm byo
}
timed byo_bios_checks
# The same for UEFI: GPT, an EFI system partition with GRUB as BOOTX64.EFI, booted by OVMF.
# shellcheck disable=SC2317 # called through timed
byo_uefi_checks() {
    byo_start uefi byou
    check "...it runs under UEFI firmware (/sys/firmware/efi)" \
        carrel exec "$BYO_ID" -- test -d /sys/firmware/efi
    check "...booted by its GRUB, not by carrel" \
        grep -q "BOOT_IMAGE=/boot/vmlinuz root=/dev/vda2" \
        <<<"$(carrel exec "$BYO_ID" -- cat /proc/cmdline)"
    carrel rm "$BYO_ID" >/dev/null
    check "template rm byou" carrel template rm byou
}
timed byo_uefi_checks

# libvirtd restarted under running sessions (crash.sh). Last of this half: the restart would cut
# whatever another carreld on this host is doing, and the halves run one after the other.
timed libvirtd_restart_checks

check "template rm succeeds once no session uses it" carrel template rm tiny
# Only this run's domains: other carrel instances may share this libvirt.
left=0
for s in "$na" "${BYO_IDS[@]}"; do
    "${VIRSH[@]}" dominfo "carrel-$s" >/dev/null 2>&1 && left=$((left + 1))
done
check_eq "no domain of this run is left" "0" "$left"
exit 0
