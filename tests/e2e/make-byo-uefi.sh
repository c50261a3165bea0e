#!/bin/bash
# Makes a UEFI "bring your own" image for the e2e tier: tiny's root filesystem on a GPT disk with
# an EFI system partition holding a standalone GRUB as the removable-media loader
# (EFI/BOOT/BOOTX64.EFI), which finds the kernel on the root partition. It boots under OVMF with
# no help from carrel, like a UEFI cloud or desktop image. Built with libguestfs, cached by the
# hash of its inputs.
#
# Usage: make-byo-uefi.sh TINY_DISK KERNEL INITRD OUT_DIR   -> prints the image path
set -euo pipefail
# shellcheck source=scripts/lib/accel.sh
source "$(dirname "$0")/../../scripts/lib/accel.sh"
disk="$1" kernel="$2" initrd="$3" out_dir="$4"
# GRUB's linux command needs a bzImage ("HdrS" at offset 0x202), not an ELF vmlinux.
[ "$(dd if="$kernel" bs=1 skip=514 count=4 2>/dev/null)" = "HdrS" ] ||
    { echo "'$kernel' is not a bzImage" >&2; exit 1; }
command -v grub-mkstandalone >/dev/null ||
    { echo "missing grub-mkstandalone (package grub-efi-amd64-bin)" >&2; exit 1; }
key="$( (sha256sum "$disk" "$kernel" "$initrd" | cut -d' ' -f1; sha256sum <"$0"
    dpkg-query -W -f='${Version}' grub-efi-amd64-bin) | sha256sum | cut -c1-16)"
image="$out_dir/byo-uefi-$key.qcow2"
if [ -f "$image" ]; then
    echo "$image"
    exit 0
fi
mkdir -p "$out_dir"
work="$(mktemp -d "$out_dir/.byo-XXXXXX")"
trap 'rm -rf "$work"' EXIT
# The root partition is found by a file on it, not by a device name the firmware chose.
cat >"$work/grub.cfg" <<'EOF'
set timeout=0
search --no-floppy --file --set=root /boot/vmlinuz
linux /boot/vmlinuz root=/dev/vda2 rw rootfstype=ext4 console=ttyS0 init=/sbin/carrel-init quiet
initrd /boot/initrd.img
boot
EOF
grub-mkstandalone --format=x86_64-efi --output="$work/BOOTX64.EFI" \
    --modules="part_gpt ext2 search search_fs_file linux normal" \
    "boot/grub/grub.cfg=$work/grub.cfg" >&2
# The appliance runs with carreld's accelerator (CARREL_ACCEL, else carreld --probe-accel).
guestfish_step "make-byo-uefi: guestfish" 900 "$work/guestfish.log" <<EOF >&2
disk-create $work/byo.raw raw 2048M
add $work/byo.raw format:raw
add $disk format:qcow2 readonly:true
run
part-init /dev/sda gpt
part-add /dev/sda p 2048 133119
part-add /dev/sda p 133120 -2048
part-set-gpt-type /dev/sda 1 C12A7328-F81F-11D2-BA4B-00A0C93EC93B
mkfs vfat /dev/sda1
mkfs ext4 /dev/sda2
mount /dev/sda2 /
mkdir /src
mount-ro /dev/sdb /src
glob cp-a /src/* /
umount /src
rmdir /src
upload $kernel /boot/vmlinuz
upload $initrd /boot/initrd.img
mkdir /boot/efi
mount /dev/sda1 /boot/efi
mkdir-p /boot/efi/EFI/BOOT
upload $work/BOOTX64.EFI /boot/efi/EFI/BOOT/BOOTX64.EFI
umount-all
EOF
run_step "make-byo-uefi: qemu-img convert" 300 qemu-img convert -f raw -O qcow2 "$work/byo.raw" "$work/byo.qcow2"
mv "$work/byo.qcow2" "$image"
echo "$image"
