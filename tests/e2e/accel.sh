# One decision about the accelerator (issue 13): carreld's probe, taken by every script that
# starts QEMU or a libguestfs appliance. Sourced by test-sessions.sh after the first carreld
# start; $accel is that daemon's decision.
# shellcheck shell=bash
# shellcheck source=scripts/lib/accel.sh
source "$E2E_SRC/scripts/lib/accel.sh"

# The bash -c snippets expand their own arguments.
# shellcheck disable=SC2016
accel_checks() {
    local probe log appliance
    probe="$(CARREL_ACCEL='' CARREL_ACCEL_MODE=auto CARRELD_BIN="$CARRELD_BIN" carrel_accel 2>/dev/null)"
    check_eq "carreld --probe-accel decides as the running carreld did" "$accel" "$probe"
    check_eq "carreld --probe-accel --accel tcg answers tcg" "tcg" \
        "$("$CARRELD_BIN" --probe-accel --accel tcg 2>/dev/null)"
    check "carreld --probe-accel refuses an unknown accelerator" \
        bash -c '! "$1" --probe-accel --accel xen 2>/dev/null' _ "$CARRELD_BIN"
    check_eq "scripts take a decision already made (CARREL_ACCEL) without probing again" "tcg" \
        "$(CARREL_ACCEL=tcg CARRELD_BIN=/nonexistent carrel_accel)"
    check "scripts refuse an unknown CARREL_ACCEL" \
        bash -c 'source "$1"; ! CARREL_ACCEL=xen carrel_accel' _ "$E2E_SRC/scripts/lib/accel.sh"
    check_eq "for kvm, libguestfs is left to use it" "direct:" \
        "$(guestfs_env kvm && echo "$LIBGUESTFS_BACKEND:${LIBGUESTFS_BACKEND_SETTINGS:-}")"
    check_eq "for tcg, libguestfs is forced to tcg" "direct:force_tcg" \
        "$(guestfs_env tcg && echo "$LIBGUESTFS_BACKEND:${LIBGUESTFS_BACKEND_SETTINGS:-}")"
    # A real appliance, through the same function the BYO image scripts use, with the decision
    # forced to tcg: on a host whose /dev/kvm exists but hangs, this is what keeps it moving.
    log="$E2E_DIR/guestfs-accel.log"
    check "a libguestfs appliance starts with the decision forced to tcg" \
        env CARREL_ACCEL=tcg bash -c 'source "$1"; guestfish_step "e2e: appliance" 300 "$2" \
            -a /dev/null run' _ "$E2E_SRC/scripts/lib/accel.sh" "$log"
    appliance="$(guestfs_appliance_accel "$log")"
    check_eq "...its QEMU command line has accel=tcg" "tcg" "$appliance"
    # On a fresh machine libguestfs first probes QEMU with accel=kvm:tcg: the appliance's counts.
    printf '%s\n' 'libguestfs: command: run: -machine accel=kvm:tcg' \
        '    -machine accel=tcg,graphics=off' >"$E2E_DIR/guestfs-probe.log"
    check_eq "the appliance's accel is read past libguestfs's QEMU probes" "tcg" \
        "$(guestfs_appliance_accel "$E2E_DIR/guestfs-probe.log")"
    echo "e2e: libguestfs accelerator: accel=$appliance (carreld decided $accel)"
}

# byo_log_checks KIND IMAGE LOG: the BYO script made IMAGE; when it launched an appliance (not
# cached), that appliance ran with carreld's accelerator.
byo_log_checks() {
    local kind="$1" image="$2" log="$3" line
    if [ -z "$image" ] || [ ! -f "$image" ]; then
        fail "make-byo-$kind made no image"
        tail -20 "$log" >&2
        return
    fi
    line="$(grep 'libguestfs appliance accel=' "$log" || true)"
    if [ -z "$line" ]; then
        echo "e2e: BYO $kind image taken from the cache (no appliance launched)"
        return
    fi
    echo "e2e: $line"
    check_eq "make-byo-$kind's appliance ran with carreld's accelerator" \
        "$([ "$accel" = kvm ] && echo kvm:tcg || echo tcg)" "$(sed -n 's/.*accel=\([a-z:]*\).*/\1/p' <<<"$line")"
}
