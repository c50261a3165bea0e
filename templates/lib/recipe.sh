# shellcheck shell=bash
# What every carrel template recipe does, sourced by templates/*/build: the checks, the host's apt
# sources, mmdebstrap, the guest files, the hardening every guest gets, the kernel, the image and
# recipe.json.  Each build keeps its own packages and what only its guest needs.
#
# carreld hashes this folder into every recipe's hash: a change here rebuilds every template.
#
# A build sets, before it sources this file: here (its folder), and before it calls these
# functions: recipe (the template's name), suite, cmdline, disk_size, packages (array),
# host_tools (array of TOOL:PACKAGE it needs beyond the common ones, may be empty), forbidden
# (array, may be empty: packages that must not be in its image) and locales_kept (array of name
# patterns under /usr/share/locale that stay, may be empty).
# shellcheck disable=SC2154 # the variables above are the build's

overlay=$here/rootfs

progress() { echo "progress: $*" >&2; }
die() {
	echo "build: error: $*" >&2
	exit 1
}

# Copy the guest files into a rootfs, owned by root and writable by root only (whatever umask the
# checkout had).  tar runs inside the chroot so that paths resolve as in the guest: the rootfs has
# absolute symlinks (e.g. /usr/sbin/shutdown -> /bin/systemctl), and a copy from the host would
# write through them into the HOST's files.  tar removes an existing file or link before
# extracting, never writes through it; existing directories keep their owner and mode.
recipe_copy_overlay() {
	tar -C "$overlay" --owner=0 --group=0 --numeric-owner --mode=go-w -cf - . |
		chroot "$1" tar -C / --keep-directory-symlink --no-overwrite-dir -xf - ||
		die "copying $overlay into $1 failed"
}

# The desktop user (uid 1000, a home from /etc/skel, bash) with a locked password: nobody logs in
# with a password; the session starts it and the host reaches the guest through its agent.
recipe_add_user() {
	local rootfs=$1 name=$2 comment=$3
	chroot "$rootfs" useradd --create-home --uid 1000 --user-group --shell /bin/bash \
		--comment "$comment" "$name" || die "useradd $name failed"
	chroot "$rootfs" passwd --quiet --lock "$name" || die "locking the password of $name failed"
}

# An mmdebstrap hook that runs "build --HOOK ROOTFS ARGS...": the hooks run in a new shell, which
# has none of these functions.
recipe_hook() {
	local hook=$1
	shift
	printf '%q ' "$here/build" "--$hook"
	# shellcheck disable=SC2016 # $1 is the hook shell's: the rootfs
	printf '"$1"'
	(($# == 0)) || printf ' %q' "$@"
}

# Internal: the mmdebstrap hooks of recipe_bootstrap.  Returns if the arguments are not a hook.
recipe_run_hook() {
	case "${1:-}" in
	--copy-overlay)
		(($# == 2)) || die "usage: build --copy-overlay ROOTFS"
		recipe_copy_overlay "$2"
		exit 0
		;;
	--add-user)
		(($# == 4)) || die "usage: build --add-user ROOTFS NAME COMMENT"
		recipe_add_user "$2" "$3" "$4"
		exit 0
		;;
	esac
}

# recipe_check_args "$@": one OUTDIR argument, root, and the host's tools.
recipe_check_args() {
	local tool
	[[ $# -eq 1 && -n $1 ]] || {
		echo "usage: $0 OUTDIR" >&2
		exit 2
	}
	[[ $(id -u) -eq 0 ]] || die "must run as root (mmdebstrap root mode, chroot, file ownership)"
	for tool in mmdebstrap:mmdebstrap mke2fs:e2fsprogs qemu-img:qemu-utils chroot:coreutils \
		jq:jq "${host_tools[@]}"; do
		command -v "${tool%%:*}" >/dev/null || die "${tool%%:*} not found (package ${tool#*:})"
	done
}

# The host's apt sources, as they are (deb822 .sources or one-line .list): mmdebstrap takes an
# existing file as a MIRROR argument and keeps its format.  No mirror is named in a recipe.
recipe_apt_sources() {
	local f
	sources=()
	for f in /etc/apt/sources.list /etc/apt/sources.list.d/*.list /etc/apt/sources.list.d/*.sources; do
		[[ -f $f ]] && grep -qv '^[[:space:]]*\(#\|$\)' "$f" && sources+=("$f")
	done
	((${#sources[@]})) || die "the host has no apt sources (/etc/apt/sources.list{,.d/})"
	grep -qw "$suite" "${sources[@]}" || die "the host's apt sources do not offer $suite"
}

recipe_cleanup() {
	if [[ ${CARREL_KEEP_WORK:-} == 1 ]]; then
		echo "build: work directory kept: $work" >&2
		return
	fi
	# --one-file-system: never descend into a mount left behind by a failed mmdebstrap.
	rm -rf --one-file-system "$work"
}

# recipe_prepare OUTDIR: the apt sources, OUTDIR and a work directory in it (removed on exit).
# Sets sources, outdir, work, root (the rootfs to be) and start.
recipe_prepare() {
	recipe_apt_sources
	mkdir -p "$1"
	outdir=$(cd "$1" && pwd)
	# Work next to the output: same file system for the final renames, and a root-owned place
	# that allows device nodes and exec (needed by the chroot).
	work=$(mktemp -d "$outdir/.build-$recipe.XXXXXX")
	chmod 0755 "$work" # apt downloads as the _apt user, which must reach the rootfs
	trap recipe_cleanup EXIT
	trap 'exit 130' INT TERM
	root=$work/rootfs
	start=$SECONDS
}

# recipe_bootstrap LIMIT_S [MMDEBSTRAP_OPTION...]: Debian minbase with the packages, the overlay
# copied in by the essential hook, then the build's own hooks (the options).
# - force-unsafe-io: dpkg would fsync each of the tens of thousands of files; at ~4 ms a sync on
#   a virtual disk that is minutes of the build.  A failed build is thrown away anyway, and the
#   option is dropped from the rootfs afterwards so dpkg inside the guest stays safe.
# - The doc/man/locale excludes live in the overlay (etc/dpkg/dpkg.cfg.d/carrel-excludes), not
#   in --dpkgopt: with --dpkgopt mmdebstrap filters the essential packages through a Python
#   helper, ~0.5 s a package; those few files are deleted afterwards instead.
# - The essential hook puts the overlay in before the other packages are resolved and installed
#   (apt pins, the dpkg excludes, the initramfs settings, so the one initramfs the kernel's
#   postinst builds already has MODULES=list).
# - Under its own limit: a stalled mirror fails this step by name, not the whole build's timeout.
recipe_bootstrap() {
	local limit=$1 include
	shift
	include=$(
		IFS=,
		echo "${packages[*]}"
	)
	timeout --kill-after=10 "$limit" mmdebstrap \
		--variant=minbase \
		--mode=root \
		--format=directory \
		--include="$include" \
		--dpkgopt='force-unsafe-io' \
		--essential-hook='echo "progress: installing packages" >&2' \
		--essential-hook="$(recipe_hook copy-overlay)" \
		"$@" \
		"$suite" "$root" "${sources[@]}" </dev/null ||
		die "mmdebstrap failed or did not finish within $limit s (see the messages above)"
}

# The hardening and cleanup every guest gets, after the last overlay copy.  All of it inside the
# chroot, so that no path can resolve into the host (see recipe_copy_overlay):
# - dpkg syncs again; manuals, info pages, docs (copyright files stay) and translations other
#   than locales_kept, which the essential packages brought before the excludes were in place,
#   go;
# - sudo ignores a sudoers file others may write, and git does not keep an overlay file's 0440:
#   every file in /etc/sudoers.d gets 0440 and visudo checks them, where sudo is installed;
# - no apt lists, package caches or build logs;
# then the checks: no account has a password one could log in with (locked or none: the guest is
# reached through its agent), and no forbidden package (the build's, plus SSH servers: nothing
# listens for logins in a guest).
recipe_harden() {
	local rootfs=$1 p
	# shellcheck disable=SC2016 # the script is for the chroot's shell
	chroot "$rootfs" /bin/sh -eu -c '
		sed -i "/^force-unsafe-io\$/d" /etc/dpkg/dpkg.cfg.d/99mmdebstrap
		rm -rf /usr/share/man/* /usr/share/info/* /usr/share/lintian/*
		for d in /usr/share/locale/*; do
			[ -e "$d" ] || continue
			keep=no
			for k in "$@"; do
				case ${d##*/} in $k) keep=yes ;; esac
			done
			[ "$keep" = yes ] || rm -rf "$d"
		done
		find /usr/share/doc -type f ! -name copyright -delete
		find /usr/share/doc -depth -mindepth 1 -type d -empty -delete
		if [ -d /etc/sudoers.d ]; then
			find /etc/sudoers.d -type f -exec chmod 0440 {} +
		fi
		if command -v visudo >/dev/null; then
			visudo -cq
		fi
		rm -rf /var/lib/apt/lists/* /var/cache/apt/*.bin /var/cache/apt/archives/*.deb \
			/var/log/*.log /var/log/apt/* /var/cache/debconf/*-old
	' sh "${locales_kept[@]}" || die "hardening the rootfs failed (sudoers check?)"
	# shellcheck disable=SC2016 # the script is for the chroot's shell
	p=$(chroot "$rootfs" /bin/sh -eu -c 'while IFS=: read -r name pw rest; do
		case $pw in "!"* | "*"*) ;; *) echo "$name" ;; esac
	done </etc/shadow') || die "cannot read /etc/shadow"
	[[ -z $p ]] || die "accounts with a usable or empty password: ${p//$'\n'/ }"
	for p in openssh-server dropbear "${forbidden[@]}"; do
		# shellcheck disable=SC2016 # dpkg-query's own ${field} syntax
		if chroot "$rootfs" dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'ok installed'; then
			die "package $p must not be installed"
		fi
	done
}

# recipe_write ROOTFS PATH MODE <CONTENT: a guest file, written through the chroot's shell so
# that no link in the rootfs sends the write into the host; an existing file or link is replaced,
# never written through.
recipe_write() {
	# shellcheck disable=SC2016 # the script is for the chroot's shell
	chroot "$1" /bin/sh -eu -c 'mkdir -p "${1%/*}"; rm -f "$1"; cat >"$1"; chmod "$2" "$1"' \
		sh "$2" "$3" || die "writing $2 into the rootfs failed"
}

# recipe_install_guest_tool ROOTFS BINARY: carrel-guest as /usr/local/bin/carrel-guest, and a
# check that it runs there (its libraries are in the packages). carrel-run, built beside it,
# goes in as /usr/local/bin/carrel-run: carreld's exec runs every command under it (a template
# without it gets coreutils' timeout, slower to start under TCG).
recipe_install_guest_tool() {
	local run
	run="$(dirname "$2")/carrel-run"
	[[ -f $2 ]] || die "carrel-guest '$2' is not a file"
	[[ -f $run ]] || die "no carrel-run beside carrel-guest ('$run')"
	recipe_write "$1" /usr/local/bin/carrel-guest 0755 <"$2"
	chroot "$1" /usr/local/bin/carrel-guest version >/dev/null ||
		die "carrel-guest does not run in the guest (missing libraries?)"
	recipe_write "$1" /usr/local/bin/carrel-run 0755 <"$run"
	[[ $(chroot "$1" /usr/local/bin/carrel-run 5 echo ok) == ok ]] ||
		die "carrel-run does not run in the guest"
}

# recipe_require ROOTFS PATH...: each PATH is an executable in the guest (checked here rather
# than in a boot that hangs).
recipe_require() {
	local rootfs=$1 missing
	shift
	# shellcheck disable=SC2016 # the script is for the chroot's shell
	missing=$(chroot "$rootfs" /bin/sh -c 'for f; do [ -x "$f" ] || echo "$f"; done' sh "$@") ||
		die "cannot check the rootfs"
	[[ -z $missing ]] || die "rootfs lacks ${missing//$'\n'/ }"
}

# recipe_kernel ROOTFS MODULE...: the one kernel in /boot and its initramfs, which must hold the
# modules.  Sets kernel (its path on the host), kver and initrd.
recipe_kernel() {
	local rootfs=$1 m list
	shift
	local kernels=("$rootfs"/boot/vmlinuz-*)
	[[ ${#kernels[@]} -eq 1 && -f ${kernels[0]} ]] || die "expected exactly one kernel in /boot"
	kernel=${kernels[0]}
	kver=${kernel##*/vmlinuz-}
	initrd=$rootfs/boot/initrd.img-$kver
	[[ -f $initrd ]] || die "no initramfs for kernel $kver"
	list=$(chroot "$rootfs" lsinitramfs "/boot/initrd.img-$kver") || die "lsinitramfs failed"
	for m in "$@"; do
		grep -q "/$m\.ko" <<<"$list" || die "initramfs lacks $m"
	done
}

# The rootfs as an ext4 image, then as a zstd-compressed qcow2 ($work/disk.qcow2).
# -d copies the tree (owners, modes, xattrs, device nodes) without mounting anything.
# lazy_*_init=0: initialise inode tables and journal now (zeros, which qcow2 stores for free),
# or the guest kernel would spend its first minutes writing them into every VM's overlay.
recipe_image() {
	progress "making ext4 image ($disk_size)"
	mke2fs -q -t ext4 -L carrel-root -d "$root" \
		-E lazy_itable_init=0,lazy_journal_init=0 \
		-F "$work/root.img" "$disk_size" ||
		die "mke2fs failed (is $disk_size big enough for $(du -sh "$root" | cut -f1)?)"
	progress "converting to qcow2 (zstd)"
	qemu-img convert -c -O qcow2 -o compression_type=zstd "$work/root.img" "$work/disk.qcow2" ||
		die "qemu-img convert failed"
}

# vmlinuz, initrd.img and cmdline into $work.
recipe_boot_files() {
	progress "writing boot files"
	cp "$kernel" "$work/vmlinuz"
	cp "$initrd" "$work/initrd.img"
	echo "$cmdline" >"$work/cmdline"
}

# vmlinux: the same kernel as an uncompressed ELF.  QEMU boots it through its PVH entry point,
# skipping the in-guest xz decompression of vmlinuz, which takes ~3 s under TCG.  Debian's
# bzImage is the setup code followed by one xz stream holding this ELF.
recipe_vmlinux() {
	local offset
	offset=$(LC_ALL=C grep -abo -m 1 $'\xfd7zXZ\x00' "$kernel" | head -n 1 | cut -d: -f1) || true
	[[ -n $offset ]] || die "no xz stream in ${kernel##*/}"
	tail -c "+$((offset + 1))" "$kernel" >"$work/vmlinux.xz"
	xz -dcq --single-stream "$work/vmlinux.xz" >"$work/vmlinux" || die "cannot decompress the kernel"
	[[ $(head -c 4 "$work/vmlinux") == $'\x7fELF' ]] || die "the decompressed kernel is not an ELF file"
	if command -v readelf >/dev/null && ! LC_ALL=C readelf -n "$work/vmlinux" | grep -q 'Xen.*0x00000012'; then
		die "the kernel has no PVH entry point (Xen ELF note 18)"
	fi
}

# recipe_json [JQ_OPTION...] FIELDS: $work/recipe.json, one line: name, boot, format and cmdline,
# then the jq object FIELDS (built from the --arg/--argjson options' values).  FIELDS may hold
# "defaults": {vcpus, memory_mib, screen: "WxH"} (each optional): what carrel create gives a
# session of this template when the request does not say; carreld checks them at import.
recipe_json() {
	local fields=${!#}
	jq -n -c --arg name "$recipe" --arg cmdline "$cmdline" "${@:1:$#-1}" \
		'{name: $name, boot: "direct", format: "qcow2", cmdline: $cmdline} + '"$fields" \
		>"$work/recipe.json" || die "writing recipe.json failed"
}

# recipe_publish FILE...: replace the outputs only now, so a failed build leaves a previous good
# one in place.
recipe_publish() {
	local f
	for f in "$@"; do
		mv -f "$work/$f" "$outdir/$f"
	done
}

# recipe_done MORE: the last progress line, with sizes and MORE (e.g. ", 402 packages", or "").
recipe_done() {
	progress "done in $((SECONDS - start)) s: $outdir (rootfs $(du -sh "$root" | cut -f1)," \
		"disk.qcow2 $(du -h "$outdir/disk.qcow2" | cut -f1), initrd.img $(du -h "$outdir/initrd.img" | cut -f1)${1:-})"
}
