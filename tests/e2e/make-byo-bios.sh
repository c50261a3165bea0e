#!/bin/bash
# Makes a "bring your own" image for the e2e tier: tiny's root filesystem on an MBR-partitioned
# disk that boots with its own bootloader (SYSLINUX/EXTLINUX in the MBR and the partition), the
# kernel and initrd inside it. Nothing of carrel's direct kernel boot is involved, so it stands
# for an image made elsewhere (an Ubuntu cloud image, a desktop someone installed by hand).
# Built with libguestfs (no loop devices or mounts on the host) and cached by the hash of its
# inputs.
#
# Usage: make-byo-bios.sh TINY_DISK KERNEL INITRD OUT_DIR   -> prints the image path
set -euo pipefail
# shellcheck source=scripts/lib/accel.sh
source "$(dirname "$0")/../../scripts/lib/accel.sh"
disk="$1" kernel="$2" initrd="$3" out_dir="$4"
# A bzImage carries "HdrS" at offset 0x202; an ELF vmlinux does not.
[ "$(dd if="$kernel" bs=1 skip=514 count=4 2>/dev/null)" = "HdrS" ] ||
    { echo "'$kernel' is not a bzImage" >&2; exit 1; }
mbr=/usr/lib/syslinux/mbr/mbr.bin
[ -r "$mbr" ] || { echo "missing $mbr (package syslinux-common)" >&2; exit 1; }
key="$( (sha256sum "$disk" "$kernel" "$initrd" "$mbr" | cut -d' ' -f1; sha256sum <"$0") |
    sha256sum | cut -c1-16)"
image="$out_dir/byo-bios-$key.qcow2"
if [ -f "$image" ]; then
    echo "$image"
    exit 0
fi
mkdir -p "$out_dir"
work="$(mktemp -d "$out_dir/.byo-XXXXXX")"
trap 'rm -rf "$work"' EXIT
# KERNEL must be a bzImage: given an uncompressed vmlinux, EXTLINUX says "Loading /boot/vmlinuz
# failed: Invalid argument". The filesystem is made without the 64bit and extent features, so
# files use classic block maps, which every EXTLINUX reads.
cat >"$work/extlinux.conf" <<'EOF'
DEFAULT linux
TIMEOUT 1
LABEL linux
    LINUX /boot/vmlinuz
    INITRD /boot/initrd.img
    APPEND root=/dev/vda1 rw rootfstype=ext4 console=ttyS0 init=/sbin/carrel-init quiet
EOF
# The appliance runs with carreld's accelerator (CARREL_ACCEL, else carreld --probe-accel).
guestfish_step "make-byo-bios: guestfish" 900 "$work/guestfish.log" <<EOF >&2
disk-create $work/byo.raw raw 2048M
add $work/byo.raw format:raw
add $disk format:qcow2 readonly:true
run
part-disk /dev/sda mbr
part-set-bootable /dev/sda 1 true
mkfs ext4 /dev/sda1 features:^64bit,^extent
mount /dev/sda1 /
mkdir /src
mount-ro /dev/sdb /src
glob cp-a /src/* /
umount /src
rmdir /src
mkdir-p /boot/extlinux
upload $kernel /boot/vmlinuz
upload $initrd /boot/initrd.img
upload $work/extlinux.conf /boot/extlinux/extlinux.conf
extlinux /boot/extlinux
upload $mbr /dev/sda
umount-all
EOF
run_step "make-byo-bios: qemu-img convert" 300 qemu-img convert -f raw -O qcow2 "$work/byo.raw" "$work/byo.qcow2"
mv "$work/byo.qcow2" "$image"
echo "$image"
