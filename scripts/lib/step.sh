# run_step: an external step that can hang (guestfish, virt-copy-*, mmdebstrap, a QEMU boot)
# runs under its own time limit and fails with its name, not at the tier's timeout.
# shellcheck shell=bash

# run_step NAME SECONDS COMMAND...: runs COMMAND, killed after SECONDS (and SIGKILLed 10 s
# later: a QEMU spinning in a broken KVM ignores SIGTERM). Returns COMMAND's status; on a
# timeout says which step hung and returns 124.
run_step() {
    local name="$1" limit="$2" status=0
    shift 2
    timeout --kill-after=10 "$limit" "$@" || status=$?
    if [ "$status" -eq 124 ] || [ "$status" -eq 137 ]; then
        printf 'error: step "%s" did not finish within %s s (killed)\n' "$name" "$limit" >&2
        return 124
    fi
    return "$status"
}
