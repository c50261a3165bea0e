#!/bin/bash
# The install list, checked on a root where nothing was installed by hand: a Debian 12 minbase
# made by mmdebstrap from the host's apt sources, with exactly scripts/lib/common.sh's
# CARREL_PACKAGES. Inside it the tree is built and the tiers that need no running service
# (unit, golden, style, guest) run; this is where scripts/test runs them. A package that a tier
# needs but the list lacks fails here, not on a user's machine (a machine that had it from
# earlier work hides it).
#
# Usage: tests/packages/clean-root.sh        (root; the host's apt sources must offer bookworm)
# Debs already in the host's apt cache are reused; the rest are downloaded.
# CARREL_CLEAN_ROOT_NICE=N: mmdebstrap and the build inside run at N more niceness and idle I/O
# priority (scripts/test: 19, so they take only the CPU its other tiers leave); the tiers inside
# run at this script's own niceness again, as their waits are timed.
set -euo pipefail
root_dir="$(cd "$(dirname "$0")/../.." && pwd)"
# shellcheck source=scripts/lib/common.sh
source "$root_dir/scripts/lib/common.sh"
need_root

sources=()
for f in /etc/apt/sources.list /etc/apt/sources.list.d/*.list /etc/apt/sources.list.d/*.sources; do
    [[ -f $f ]] && grep -qv '^[[:space:]]*\(#\|$\)' "$f" && sources+=("$f")
done
((${#sources[@]})) || die "the host has no apt sources"

# The list as a fresh machine sees it: node and npm come from Debian there.
packages=("${CARREL_PACKAGES[@]}")
for p in nodejs npm; do
    printf '%s\n' "${packages[@]}" | grep -qx "$p" || packages+=("$p")
done
include=$(IFS=,; echo "${packages[*]}")

work="$(mktemp -d /var/tmp/carrel-clean-root-XXXXXX)"
chmod 0755 "$work"
cleanup() {
    # A killed mmdebstrap can leave its mounts (proc, sys, dev/pts) behind: never delete through one.
    findmnt -rn -o TARGET | grep "^$work/" | sort -r | xargs -r umount -l 2>/dev/null || true
    rm -rf --one-file-system "$work"
}
trap cleanup EXIT

# The tree as it is now (tracked and new files), without build folders.
git -C "$root_dir" ls-files -z -co --exclude-standard |
    tar -C "$root_dir" --null -T - -cf "$work/src.tar"

cat >"$work/in-root.sh" <<'INNER'
#!/bin/bash
# Runs inside the clean root (mmdebstrap's customize hook: /proc, /sys, /dev are mounted).
set -euo pipefail
export LANG=C.UTF-8 PATH=/usr/sbin:/usr/bin:/sbin:/bin HOME=/root
# Terminals (xterm) as a user other than root: mmdebstrap's own devpts makes every terminal
# uid 5's, and /dev/ptmx (if any) is the host's node, which allocates in another instance. A
# devpts instance of the chroot's own, with its own ptmx, as a booted system has.
umount -l /dev/pts
trap 'umount -l /dev/pts 2>/dev/null || true' EXIT
mount -t devpts -o newinstance,ptmxmode=0666,mode=0620,gid=5 devpts /dev/pts
rm -f /dev/ptmx
ln -s pts/ptmx /dev/ptmx
# $1: the niceness the tiers run at (the build before them may run at more).
tier_nice="${1:-0}"
mkdir -p /src && tar -C /src -xf /src.tar
cd /src
meson setup /build >/build-setup.log 2>&1 || { tail -30 /build-setup.log; exit 1; }
ninja -C /build >/build.log 2>&1 || { tail -40 /build.log; exit 1; }
# Each tier on its own, with its time (scripts/test puts them in its table); all of them run.
renice -n "$tier_nice" -p $$ >/dev/null
ionice -c 2 -n 4 -p $$
rc=0
for suite in unit golden style guest; do
    start=$SECONDS result=passed
    meson test -C /build --suite "$suite" --print-errorlogs --logbase "$suite" || { result=FAILED; rc=1; }
    echo "==> clean root: tier $suite $result in $((SECONDS - start)) s"
done
exit "$rc"
INNER
chmod 0755 "$work/in-root.sh"

log "clean root: mmdebstrap minbase + ${#packages[@]} packages"
start=$SECONDS
tier_nice="$(nice)"
lower=()
if [ "${CARREL_CLEAN_ROOT_NICE:-0}" -gt 0 ]; then
    lower=(nice -n "$CARREL_CLEAN_ROOT_NICE" ionice -c 3)
    log "clean root: mmdebstrap and the build at niceness +$CARREL_CLEAN_ROOT_NICE, idle I/O"
fi
# The host's cached debs go in before apt runs, so only what is missing there is downloaded.
# What no tier inside reads is skipped, which changes no package's installation: the kernel's
# initramfs (INITRD=No: the kernel is there for libguestfs's appliance, which builds its own),
# the man-db index, and the docs, man pages and translations.
# The hooks are mmdebstrap's shell snippets: "$1" is expanded there, not here.
# shellcheck disable=SC2016
run_step "clean root: mmdebstrap and the tiers inside it" 3600 \
    "${lower[@]}" env INITRD=No mmdebstrap --variant=minbase --mode=root --format=directory \
    --include="$include" \
    --dpkgopt='force-unsafe-io' --aptopt='Acquire::Retries "3"' \
    --dpkgopt='path-exclude=/usr/share/doc/*' --dpkgopt='path-exclude=/usr/share/man/*' \
    --dpkgopt='path-exclude=/usr/share/locale/*' \
    --essential-hook='echo "man-db man-db/auto-update boolean false" | chroot "$1" debconf-set-selections' \
    --setup-hook='mkdir -p "$1/var/cache/apt/archives"' \
    --setup-hook='find /var/cache/apt/archives -maxdepth 1 -name "*.deb" -exec cp -t "$1/var/cache/apt/archives/" {} +' \
    --customize-hook="cp $(printf '%q' "$work/src.tar") \"\$1/src.tar\"" \
    --customize-hook="cp $(printf '%q' "$work/in-root.sh") \"\$1/in-root.sh\"" \
    --customize-hook="chroot \"\$1\" /in-root.sh $tier_nice" \
    bookworm "$work/root" "${sources[@]}" </dev/null
log "clean root: passed in $((SECONDS - start)) s"
