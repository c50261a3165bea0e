# One decision about the accelerator: carreld's probe. Scripts that start QEMU or a libguestfs
# appliance take it from here; nothing keys on whether /dev/kvm exists (on some hosts it does
# and a KVM guest hangs).
# shellcheck shell=bash

_accel_lib_dir="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
# shellcheck source=scripts/lib/step.sh
source "$_accel_lib_dir/step.sh"

# carrel_accel: prints kvm or tcg. CARREL_ACCEL, when set, is a decision carreld already made
# (the e2e tier passes its daemon's `server.accel`); otherwise `carreld --probe-accel` decides
# (CARREL_ACCEL_MODE=auto|kvm|tcg is passed as --accel; CARRELD_BIN names the binary).
carrel_accel() {
    local carreld
    case "${CARREL_ACCEL:-}" in
    kvm | tcg)
        echo "$CARREL_ACCEL"
        return 0
        ;;
    "") ;;
    *)
        echo "error: CARREL_ACCEL must be kvm or tcg, not '$CARREL_ACCEL'" >&2
        return 2
        ;;
    esac
    carreld="${CARRELD_BIN:-$_accel_lib_dir/../../build/manager/daemon/carreld}"
    [ -x "$carreld" ] ||
        { echo "error: no carreld at '$carreld' to probe the accelerator (build first)" >&2; return 1; }
    # The probe has its own 15 s limit; this one is for a carreld that hangs anyway.
    run_step "carreld --probe-accel" 120 "$carreld" --probe-accel --accel "${CARREL_ACCEL_MODE:-auto}"
}

# guestfs_env ACCEL: exports libguestfs's settings for that accelerator. Its direct backend
# otherwise asks QEMU for accel=kvm:tcg, which spins forever where KVM is broken.
guestfs_env() {
    export LIBGUESTFS_BACKEND=direct
    case "$1" in
    kvm) unset LIBGUESTFS_BACKEND_SETTINGS ;;
    tcg) export LIBGUESTFS_BACKEND_SETTINGS=force_tcg ;;
    *)
        echo "error: unknown accelerator '$1'" >&2
        return 2
        ;;
    esac
}

# guestfs_appliance_accel LOG: the accel= value of the appliance's QEMU command line, read from
# a LIBGUESTFS_DEBUG=1 log (e.g. "tcg" or "kvm:tcg"); empty when none was launched. The last
# one: before the appliance, libguestfs probes QEMU (accel=kvm:tcg, whatever was forced) when its
# cache of QEMU's features in /var/tmp/.guestfs-0 is missing, as on a fresh machine.
guestfs_appliance_accel() {
    grep -o 'accel=[a-z:]*' "$1" 2>/dev/null | tail -1 | cut -d= -f2
}

# guestfish_step NAME SECONDS LOG [GUESTFISH ARGS...]: guestfish with carreld's accelerator,
# its script on stdin, under a time limit, with libguestfs's debug output in LOG (the
# appliance's QEMU command line is the proof of the accelerator used). Says which accelerator
# the appliance ran with.
guestfish_step() {
    local name="$1" limit="$2" log="$3" accel status=0
    shift 3
    accel="$(carrel_accel)" || return 1
    (
        guestfs_env "$accel"
        LIBGUESTFS_DEBUG=1 run_step "$name" "$limit" guestfish "$@" 2>"$log"
    ) || status=$?
    echo "$name: libguestfs appliance accel=$(guestfs_appliance_accel "$log") (carreld: $accel)" >&2
    if [ "$status" -ne 0 ]; then
        echo "--- last lines of $log ---" >&2
        tail -15 "$log" >&2
    fi
    return "$status"
}
