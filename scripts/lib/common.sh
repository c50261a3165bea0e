# Shared by scripts/quickstart and scripts/test: dependencies, services, build.
# shellcheck shell=bash

CARREL_ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
export CARREL_ROOT
# shellcheck source=scripts/lib/accel.sh
source "$CARREL_ROOT/scripts/lib/accel.sh"

# Debian 12 packages: build, run, image building, tests.
CARREL_PACKAGES=(
    meson ninja-build pkg-config gcc libglib2.0-dev libjson-glib-dev libsoup-3.0-dev
    # libssl-dev: libcrypto's RSA-OAEP, with which the console proxy authenticates to SPICE
    libssl-dev
    libsqlite3-dev libvirt-dev libcmocka-dev libpng-dev libjpeg62-turbo-dev libarchive-dev
    # evidence bundles: the host key (Ed25519) and its signatures
    libgnutls28-dev
    # libguestfs through its C API: task inputs, artifacts, diffs
    libguestfs-dev
    libvirt-daemon-system libvirt-clients qemu-system-x86 qemu-utils
    # tini: libvirtd runs under it, which reaps its QEMUs when they end (start_libvirtd_reaped)
    tini
    # a kernel for --accel auto's KVM probe (and libguestfs's appliance)
    linux-image-amd64
    # libguestfs: the e2e tier makes bring-your-own images with their own bootloaders (EXTLINUX
    # for BIOS, a standalone GRUB for UEFI under OVMF)
    libguestfs-tools extlinux syslinux-common grub-efi-amd64-bin dosfstools ovmf
    mmdebstrap e2fsprogs
    # xmllint: virt-xml-validate (golden tier) runs it; libvirt-clients only suggests it
    shellcheck clang-format curl jq libxml2-utils
    # twm on the host (guest tier) needs the fonts behind its default fontset "variable"
    # (helvetica, from xfonts-75dpi) or it exits at once
    # (libxtst-dev: carrel-guest's type command sends its key events with XTest; libxrandr-dev:
    # its screen command sets a session's screen size with XRandR)
    libx11-dev libxtst-dev libxrandr-dev xvfb xauth x11-utils twm xterm xdotool xclip xfonts-base xfonts-75dpi
    # carrel-guest a11y against a real AT-SPI stack (guest tier): a session bus, the bus launcher
    # and registry, and the tiny template's carrel-demo (Python, GTK 3)
    dbus-daemon at-spi2-core python3-gi gir1.2-gtk-3.0
    # the man pages carrel(1) and carreld(8) are made with scdoc; the install test renders them
    # with man
    scdoc man-db
    # the TLS integration test makes its own self-signed certificate with openssl's CLI
    openssl
    # the e2e tier edits a copy of state.db to show that the audit chain catches it
    sqlite3
    # the web console: spice-html5 (served by carreld); browser tests in Debian's chromium and
    # firefox-esr
    spice-html5 chromium firefox-esr fonts-dejavu-core
    # controlled egress: carreld runs squid (with OpenSSL: TLS by SNI), a dnsmasq per session and
    # its nftables tables; the e2e tier's stand-in internet runs python3 web servers
    squid-openssl dnsmasq-base nftables python3
    # the slow tier reads the text of a page in a screenshot of the desktop template's Firefox
    tesseract-ocr tesseract-ocr-eng
    # the integration tier validates carreld's replies against its OpenAPI description's schemas
    python3-jsonschema
    # the Python SDK (sdk/python): httpx at run time, pytest for its unit, integration and e2e
    # tests and the example agent loops; setuptools, wheel (and venv) for `pip install sdk/python`
    # offline with --no-build-isolation
    python3-httpx python3-pytest python3-setuptools python3-wheel python3-venv
    # bench/api: requests per second over kept-alive connections; bench/chart draws a run of
    # bench/all with gnuplot (its integration test needs it)
    wrk gnuplot-nox
    # the fuzz tier: clang with libFuzzer and its sanitizer runtimes (clang-14 only recommends
    # libclang-rt-14-dev, and recommends are not installed)
    clang libclang-rt-14-dev
    # screen recording (manager/record): GStreamer's appsrc, videoconvert (base), vp8enc and
    # webmmux (good); gst-discoverer-1.0 (base-apps) checks the recordings in the e2e tier;
    # gst-launch-1.0 (tools) makes the WebM that tests/browser/recording-mock.mjs serves
    libgstreamer1.0-dev libgstreamer-plugins-base1.0-dev gstreamer1.0-plugins-base
    gstreamer1.0-plugins-good gstreamer1.0-plugins-base-apps gstreamer1.0-tools
)
# node and npm for the browser tests (playwright-core), from Debian unless a node is there already
command -v node >/dev/null 2>&1 || CARREL_PACKAGES+=(nodejs npm)

log() { printf '==> %s\n' "$*" >&2; }
die() { printf 'error: %s\n' "$*" >&2; exit 1; }

need_root() {
    [ "$(id -u)" -eq 0 ] || die "run as root: carrel manages system VMs through qemu:///system"
}

install_deps() {
    local missing=()
    for pkg in "${CARREL_PACKAGES[@]}"; do
        dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q 'install ok installed' ||
            missing+=("$pkg")
    done
    if [ "${#missing[@]}" -eq 0 ]; then
        log "dependencies already installed"
        return
    fi
    log "installing ${#missing[@]} packages: ${missing[*]}"
    local apt_log
    apt_log="$(mktemp --tmpdir carrel-apt.XXXXXX)" || die "mktemp failed"
    apt-get update -q >/dev/null
    # squid's package starts a system squid where it can: carreld runs its own, so no service
    # may start while packages go in (a policy-rc.d of our own, unless the host has one).
    local rcd=/usr/sbin/policy-rc.d ours=""
    if [ ! -e "$rcd" ]; then
        printf '#!/bin/sh\nexit 101\n' >"$rcd" && chmod 755 "$rcd" && ours=1
    fi
    DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends "${missing[@]}" \
        >"$apt_log" 2>&1 || {
        [ -z "$ours" ] || rm -f "$rcd"
        tail -30 "$apt_log" >&2
        die "apt-get install failed (log: $apt_log)"
    }
    [ -z "$ours" ] || rm -f "$rcd"
    rm -f "$apt_log"
}

# libvirtd in the foreground under tini as a subreaper (started in the background, its log in
# /var/log/carrel-libvirtd.log). Why: libvirt starts each QEMU as an orphan, and when one ends,
# virsh destroy (a revert, a stop, an rm) waits until it is reaped. That is PID 1's job, and some
# hosts' PID 1 does it late: a container's or a micro-VM's init (on this project's test machines
# every 2 s, so each destroy took 1.7 s instead of 0.3, and a revert 3.7 s instead of 2). Under
# tini -s, tini is the nearest ancestor that reaps, and does so at once.
start_libvirtd_reaped() {
    setsid tini -s -- libvirtd >>/var/log/carrel-libvirtd.log 2>&1 </dev/null &
}

# No systemd here: start virtlogd and libvirtd by hand when their sockets do not answer.
start_libvirt() {
    # libvirt keeps the state of networks with an address there (carrel-egress), dnsmasq or not.
    mkdir -p /var/lib/libvirt/dnsmasq
    if virsh -c qemu:///system version >/dev/null 2>&1; then
        return
    fi
    log "starting virtlogd and libvirtd"
    pgrep -x virtlogd >/dev/null || virtlogd -d
    pgrep -x libvirtd >/dev/null || start_libvirtd_reaped
    for _ in $(seq 1 50); do
        virsh -c qemu:///system version >/dev/null 2>&1 && return
        sleep 0.2
    done
    die "libvirtd did not come up"
}

build_tree() {
    local dir="${1:-build}"
    shift || true
    cd "$CARREL_ROOT" || die "cannot enter $CARREL_ROOT"
    if [ ! -f "$dir/build.ninja" ]; then
        log "configuring $dir"
        meson setup "$dir" "$@" >/dev/null
    fi
    log "building $dir"
    local ninja_log start=$SECONDS
    ninja_log="$(mktemp --tmpdir "carrel-ninja-$(basename "$dir").XXXXXX")" || die "mktemp failed"
    # shellcheck disable=SC2086 # BUILD_TARGETS: a list of ninja targets (empty: all of them)
    ninja -C "$dir" ${BUILD_TARGETS:-} >"$ninja_log" 2>&1 ||
        { tail -40 "$ninja_log" >&2; die "build failed (log: $ninja_log)"; }
    rm -f "$ninja_log"
    log "built $dir in $((SECONDS - start)) s"
}
