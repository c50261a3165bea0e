#!/bin/bash
# A stand-in internet for the egress tests (this machine has no internet): network namespace
# `carrel-inet`, reached from the host through the veth `carrel-inet0`, with a DNS server and two
# web servers under a stand-in root CA. The addresses are in 198.51.100.0/24 (TEST-NET-2), since
# carrel refuses private and special ranges as destinations; not TEST-NET-3 (203.0.113.0/24),
# which hosts of this kind use for their package mirror. No default route in the namespace and
# no ip_forward: only the host (the egress proxy, the test) talks to it.
#
# Usage: standin.sh up DIR     build it (again if it is there but not healthy; left as it is when
#                              it answers), wait until it answers; the last stdout line is the
#                              upstream DNS address (198.51.100.53)
#        standin.sh down DIR   kill its servers, delete the namespace, the veth and its route
# DIR is a scratch folder for its files, made by `up` if missing. Run as root. There is one
# stand-in per host: `up` with another DIR replaces it, and `down` removes it whichever DIR made it
# (the pid files only help; everything running in carrel-inet is ours and is stopped).
#
#   host  carrel-inet0 198.51.100.1/24 (route 198.51.100.0/24 dev carrel-inet0)
#   netns carrel-inet, eth0:
#     198.51.100.53  dnsmasq: allowed.test other.test ask.test secret.test -> 198.51.100.80,
#                   evil.test -> 198.51.100.66, any other name NXDOMAIN
#     198.51.100.80  web: http :80, https :443 and :8443 (cert for the four names above)
#     198.51.100.66  evil: http :80, https :443 (cert for evil.test, same CA)
#
# Files in DIR:
#   standin-ca.crt          the stand-in root CA: what clients and the proxy trust
#   standin-ca.key, web.{crt,key}, evil.{crt,key}, ca/   kept across runs while they verify
#   web.log                 every request to either web server, one JSON line each, with all
#                           headers (see standin-server.py)
#   inet-dns.log            dnsmasq's log: a query line (name, client) and an answer line each
#   web-web.err, web-evil.err   server messages (TLS handshake failures)
#   *.pid                   the servers' pids; inet-dns.conf, openssl.cnf, openssl.log
# `up` ends with both logs emptied of its own checks. When it finds the stand-in up and answering
# it leaves it and the logs as they are, apart from its check's lookups and requests (these carry
# the header X-Standin-Check); a rebuild empties the logs. The certificates stay across rebuilds,
# so what already trusts the CA keeps working.
#
# Debian 12 packages: dnsmasq-base python3 openssl curl iproute2 (python: /usr/bin/python3 only,
# standard library only). The `resolve` probe in standin-server.py stands in for dig:
#   /usr/bin/python3 tests/e2e/standin-server.py resolve 198.51.100.53 allowed.test
set -euo pipefail
# The ERR trap names the step also when the failure is inside a function.
set -o errtrace

NS=carrel-inet
VETH=carrel-inet0
HOST_ADDR=198.51.100.1
DNS_ADDR=198.51.100.53
WEB_ADDR=198.51.100.80
EVIL_ADDR=198.51.100.66
WEB_NAMES=(allowed.test other.test ask.test secret.test)
EVIL_NAME=evil.test
PY=/usr/bin/python3
SERVER="$(cd "$(dirname "$0")" && pwd)/standin-server.py"

usage() {
    echo "usage: $0 up|down DIR" >&2
    exit 2
}

[ $# -eq 2 ] || usage
cmd="$1"
case "$cmd" in up | down) ;; *) usage ;; esac
[ "$(id -u)" = 0 ] || { echo "standin.sh: must run as root" >&2; exit 1; }
case "$2" in "" | /) usage ;; esac
[ "$cmd" = down ] || mkdir -p "$2"
# Absolute: dnsmasq chdirs to /, and the pid checks look for DIR in command lines.
if [ -d "$2" ]; then DIR="$(cd "$2" && pwd)"; else DIR="$2"; fi
# One run at a time on this host (a lock on this file): there is one carrel-inet, and a second
# run would tear down what the first is building.
exec 9<"$0"
flock -w 120 9 || { echo "standin.sh: another standin.sh run holds $0 for 120 s" >&2; exit 1; }

step="start"
changed=0
ns_exists() { ip netns list | awk '{print $1}' | grep -qx "$NS"; }
link_exists() { ip link show dev "$VETH" >/dev/null 2>&1; }

# is_ours PID NAME: PID is one of this DIR's servers: in our namespace, or (namespace already
# gone) with this DIR's files on its command line. A stale pid file never kills a stranger.
is_ours() {
    local pid="$1" name="$2" cmdline
    [ -r "/proc/$pid/cmdline" ] || return 1
    if ns_exists && ip netns pids "$NS" 2>/dev/null | grep -qx "$pid"; then
        return 0
    fi
    cmdline="$(tr '\0' ' ' <"/proc/$pid/cmdline" 2>/dev/null)" || return 1
    case "$name" in
    inet-dns) [[ "$cmdline" == *"--conf-file=$DIR/inet-dns.conf"* ]] ;;
    *) [[ "$cmdline" == *standin-server.py*"--log $DIR/web.log"* ]] ;;
    esac
}

# teardown: the servers (pid files, then whatever else still runs in the namespace: only ours
# runs there), the namespace, the veth (its route goes with it). Quiet when there is nothing.
teardown() {
    local f pid pids=() left i
    for f in "$DIR"/inet-dns.pid "$DIR"/web-web.pid "$DIR"/web-evil.pid; do
        [ -s "$f" ] || continue
        pid="$(cat "$f")"
        if is_ours "$pid" "$(basename "$f" .pid)"; then pids+=("$pid"); fi
    done
    if ns_exists; then
        mapfile -t -O "${#pids[@]}" pids < <(ip netns pids "$NS" 2>/dev/null || true)
    fi
    if [ ${#pids[@]} -gt 0 ]; then
        kill -TERM "${pids[@]}" 2>/dev/null || true
        for i in $(seq 1 50); do
            left=()
            for pid in "${pids[@]}"; do
                if kill -0 "$pid" 2>/dev/null; then left+=("$pid"); fi
            done
            [ ${#left[@]} -eq 0 ] && break
            if [ "$i" -eq 50 ]; then kill -KILL "${left[@]}" 2>/dev/null || true; fi
            sleep 0.1
        done
    fi
    # The veth first (either end takes the pair): once the namespace is gone its end, and so the
    # pair, goes away on its own, and a delete racing that fails.
    if link_exists && ! ip link delete "$VETH" 2>/dev/null && link_exists; then
        ip link delete "$VETH"
    fi
    if ns_exists; then ip netns delete "$NS"; fi
    rm -f "$DIR"/inet-dns.pid "$DIR"/web-web.pid "$DIR"/web-evil.pid
}

# curl_body NAME ADDR URL: the body of URL with NAME pinned to ADDR, never through a proxy.
curl_body() {
    local name="$1" addr="$2" url="$3" port
    port="${url##*:}"
    port="${port%%/*}"
    case "$port" in [0-9]*) ;; *) [[ "$url" == https:* ]] && port=443 || port=80 ;; esac
    curl -q -sS --noproxy '*' --max-time 2 --cacert "$DIR/standin-ca.crt" \
        -H 'X-Standin-Check: up' --resolve "$name:$port:$addr" "$url"
}

# healthy: DNS answers a name of each server and NXDOMAIN for another; every web port answers.
healthy() {
    [ "$("$PY" "$SERVER" resolve "$DNS_ADDR" allowed.test 1 2>/dev/null)" = "$WEB_ADDR" ] &&
        [ "$("$PY" "$SERVER" resolve "$DNS_ADDR" "$EVIL_NAME" 1 2>/dev/null)" = "$EVIL_ADDR" ] &&
        [ "$("$PY" "$SERVER" resolve "$DNS_ADDR" nothing.example 1 2>/dev/null)" = NXDOMAIN ] &&
        web_healthy
}
web_healthy() {
    [ "$(curl_body allowed.test "$WEB_ADDR" http://allowed.test/ 2>/dev/null)" = "allowed.test says hello" ] &&
        [ "$(curl_body allowed.test "$WEB_ADDR" https://allowed.test/ 2>/dev/null)" = "allowed.test says hello" ] &&
        [ "$(curl_body allowed.test "$WEB_ADDR" https://allowed.test:8443/ 2>/dev/null)" = "allowed.test says hello" ] &&
        [ "$(curl_body "$EVIL_NAME" "$EVIL_ADDR" "http://$EVIL_NAME/" 2>/dev/null)" = "the evil server answers for $EVIL_NAME" ] &&
        [ "$(curl_body "$EVIL_NAME" "$EVIL_ADDR" "https://$EVIL_NAME/" 2>/dev/null)" = "the evil server answers for $EVIL_NAME" ]
}

# alive NAME: the server whose pid is in DIR/NAME.pid runs, and in our namespace.
alive() {
    local pid
    [ -s "$DIR/$1.pid" ] && pid="$(cat "$DIR/$1.pid")" && ns_exists &&
        ip netns pids "$NS" 2>/dev/null | grep -qx "$pid"
}

# fail MESSAGE: says which step failed, shows the logs this run wrote, and removes what it made.
fail() {
    trap - ERR
    echo "standin.sh up: FAILED at step '$step': $*" >&2
    local f logs=()
    case "$step" in
    certificates) logs=("$DIR/openssl.log") ;;
    start* | *answer*) logs=("$DIR/inet-dns.log" "$DIR/web-web.err" "$DIR/web-evil.err") ;;
    esac
    for f in "${logs[@]}"; do
        [ -s "$f" ] || continue
        echo "--- last lines of $f" >&2
        tail -n 15 "$f" >&2
    done
    if [ "$changed" = 1 ]; then
        teardown >/dev/null 2>&1 || true
        echo "standin.sh up: removed the stand-in; logs kept in $DIR" >&2
    fi
    exit 1
}

# pki_ok: the keys are there and the certificates verify, for every name.
pki_ok() {
    local n
    [ -s "$DIR/standin-ca.key" ] && [ -s "$DIR/web.key" ] && [ -s "$DIR/evil.key" ] || return 1
    for n in "${WEB_NAMES[@]}"; do
        openssl verify -CAfile "$DIR/standin-ca.crt" -verify_hostname "$n" "$DIR/web.crt" \
            >/dev/null 2>&1 || return 1
    done
    openssl verify -CAfile "$DIR/standin-ca.crt" -verify_hostname "$EVIL_NAME" "$DIR/evil.crt" \
        >/dev/null 2>&1
}

# make_pki: a root CA and two server certificates, made with `openssl ca` because it can backdate
# notBefore (openssl 3.0's req/x509 can't): a guest whose clock lags (restored from a snapshot)
# must not see "certificate not yet valid".
make_pki() {
    if pki_ok; then
        echo "standin: certificates in $DIR kept"
        return 0
    fi
    local cnf="$DIR/openssl.cnf" start end san="" n k
    for n in "${WEB_NAMES[@]}"; do san="$san${san:+,}DNS:$n"; done
    rm -rf "$DIR/ca"
    mkdir -p "$DIR/ca/new"
    : >"$DIR/ca/index.txt"
    echo 1000 >"$DIR/ca/serial"
    cat >"$cnf" <<EOF
[ ca ]
default_ca = standin
[ standin ]
dir = $DIR/ca
database = \$dir/index.txt
new_certs_dir = \$dir/new
serial = \$dir/serial
default_md = sha256
policy = any_name
unique_subject = no
email_in_dn = no
copy_extensions = none
[ any_name ]
commonName = supplied
[ req ]
distinguished_name = req_dn
prompt = no
[ req_dn ]
CN = unused
[ v3_ca ]
basicConstraints = critical,CA:TRUE
keyUsage = critical,keyCertSign,cRLSign
subjectKeyIdentifier = hash
[ v3_web ]
basicConstraints = critical,CA:FALSE
keyUsage = critical,digitalSignature,keyEncipherment
extendedKeyUsage = serverAuth
subjectKeyIdentifier = hash
authorityKeyIdentifier = keyid
subjectAltName = $san
[ v3_evil ]
basicConstraints = critical,CA:FALSE
keyUsage = critical,digitalSignature,keyEncipherment
extendedKeyUsage = serverAuth
subjectKeyIdentifier = hash
authorityKeyIdentifier = keyid
subjectAltName = DNS:$EVIL_NAME
EOF
    start="$(date -u -d '-1 year' +%Y%m%d%H%M%SZ)"
    end="$(date -u -d '+10 years' +%Y%m%d%H%M%SZ)"
    : >"$DIR/openssl.log"
    for k in standin-ca web evil; do
        openssl genpkey -algorithm EC -pkeyopt ec_paramgen_curve:P-256 -out "$DIR/$k.key" \
            2>>"$DIR/openssl.log"
        chmod 600 "$DIR/$k.key"
    done
    openssl req -new -config "$cnf" -key "$DIR/standin-ca.key" -subj "/CN=Stand-in Internet Root CA" \
        -out "$DIR/ca/ca.csr" 2>>"$DIR/openssl.log"
    openssl ca -batch -notext -config "$cnf" -selfsign -keyfile "$DIR/standin-ca.key" \
        -extensions v3_ca -startdate "$start" -enddate "$end" -in "$DIR/ca/ca.csr" \
        -out "$DIR/standin-ca.crt" >>"$DIR/openssl.log" 2>&1
    for k in web evil; do
        openssl req -new -config "$cnf" -key "$DIR/$k.key" \
            -subj "/CN=$([ $k = web ] && echo "${WEB_NAMES[0]}" || echo "$EVIL_NAME")" \
            -out "$DIR/ca/$k.csr" 2>>"$DIR/openssl.log"
        openssl ca -batch -notext -config "$cnf" -cert "$DIR/standin-ca.crt" \
            -keyfile "$DIR/standin-ca.key" -extensions "v3_$k" -startdate "$start" -enddate "$end" \
            -in "$DIR/ca/$k.csr" -out "$DIR/$k.crt" >>"$DIR/openssl.log" 2>&1
    done
    openssl verify -CAfile "$DIR/standin-ca.crt" "$DIR/web.crt" "$DIR/evil.crt" >>"$DIR/openssl.log" 2>&1
    echo "standin: certificates made in $DIR"
}

make_net() {
    ip netns add "$NS"
    ip -n "$NS" link set lo up
    # IPv4 only: the stand-in internet has no IPv6, and the veth stays quiet (no RS, no DAD).
    ip netns exec "$NS" sh -c 'echo 1 >/proc/sys/net/ipv6/conf/default/disable_ipv6' 2>/dev/null || true
    ip link add "$VETH" type veth peer name eth0 netns "$NS"
    if [ -w "/proc/sys/net/ipv6/conf/$VETH/disable_ipv6" ]; then
        echo 1 >"/proc/sys/net/ipv6/conf/$VETH/disable_ipv6"
    fi
    # The /24 on the host side is the route 198.51.100.0/24 dev carrel-inet0.
    ip addr add "$HOST_ADDR/24" dev "$VETH"
    ip link set "$VETH" up
    local a
    for a in "$DNS_ADDR" "$WEB_ADDR" "$EVIL_ADDR"; do
        ip -n "$NS" addr add "$a/24" dev eth0
    done
    ip -n "$NS" link set eth0 up
}

start_dns() {
    local n
    {
        echo "# stand-in internet DNS, written by standin.sh"
        echo "listen-address=$DNS_ADDR"
        echo "bind-interfaces"
        echo "port=53"
        # Nothing from the host: no resolv.conf upstreams, no /etc/hosts, no default pid file.
        echo "no-resolv"
        echo "no-hosts"
        echo "pid-file="
        echo "log-queries"
        echo "log-facility=$DIR/inet-dns.log"
        # host-record: exactly these names (address=/name/ would also answer its subdomains) ...
        for n in "${WEB_NAMES[@]}"; do echo "host-record=$n,$WEB_ADDR"; done
        echo "host-record=$EVIL_NAME,$EVIL_ADDR"
        # ... and NXDOMAIN for every other name.
        echo "address=/#/"
    } >"$DIR/inet-dns.conf"
    : >"$DIR/inet-dns.log"
    # setsid: the servers outlive the caller's session; no caller's pipe stays open in them, nor
    # the lock (fd 9), which would block the next run for as long as they live.
    setsid ip netns exec "$NS" dnsmasq --keep-in-foreground --conf-file="$DIR/inet-dns.conf" \
        </dev/null >>"$DIR/inet-dns.log" 2>&1 9<&- &
    echo $! >"$DIR/inet-dns.pid"
}

# start_web TAG ADDR CERT PORTS...: one server process for ADDR.
start_web() {
    local tag="$1" addr="$2" cert="$3"
    shift 3
    : >"$DIR/web-$tag.err"
    setsid ip netns exec "$NS" "$PY" -I "$SERVER" serve --tag "$tag" --addr "$addr" \
        --log "$DIR/web.log" --cert "$DIR/$cert.crt" --key "$DIR/$cert.key" "$@" \
        </dev/null >>"$DIR/web-$tag.err" 2>&1 9<&- &
    echo $! >"$DIR/web-$tag.pid"
}

# wait_for WHAT TEST NAMES...: TEST passes within 30 s while the servers NAMES run.
wait_for() {
    local what="$1" test="$2" n i t0
    shift 2
    t0="$(date +%s%N)"
    for i in $(seq 1 150); do
        for n in "$@"; do
            alive "$n" || fail "$n ($DIR/$n.pid) exited"
        done
        if "$test"; then
            echo "standin: $what after $((($(date +%s%N) - t0) / 1000000)) ms"
            return 0
        fi
        sleep 0.2
    done
    fail "$what: no answer within 30 s"
}

dns_ready() {
    [ "$("$PY" "$SERVER" resolve "$DNS_ADDR" allowed.test 1 2>/dev/null)" = "$WEB_ADDR" ]
}

up() {
    local t
    step="check tools"
    for t in ip dnsmasq openssl curl setsid flock; do
        command -v "$t" >/dev/null || fail "missing $t (packages: dnsmasq-base python3 openssl curl iproute2)"
    done
    [ -x "$PY" ] || fail "missing $PY (package python3)"
    [ -r "$SERVER" ] || fail "missing $SERVER"

    step="check an earlier stand-in"
    if ns_exists && alive inet-dns && alive web-web && alive web-evil && healthy; then
        echo "standin: already up and answering, left as it is"
        echo "$DNS_ADDR"
        return 0
    fi
    changed=1
    teardown

    step="check 198.51.100.0/24 is free on the host"
    if [ -n "$(ip -4 -o addr show to 198.51.100.0/24)" ] || [ -n "$(ip -4 route show root 198.51.100.0/24)" ]; then
        fail "the host already has an address or route in 198.51.100.0/24:
$(ip -4 -o addr show to 198.51.100.0/24; ip -4 route show root 198.51.100.0/24)"
    fi

    step="certificates"
    make_pki

    step="network namespace $NS and veth $VETH"
    make_net

    step="start dnsmasq"
    start_dns
    step="start web servers"
    : >"$DIR/web.log"
    start_web web "$WEB_ADDR" web --http 80 --https 443 --https 8443
    start_web evil "$EVIL_ADDR" evil --http 80 --https 443

    step="DNS answers"
    wait_for "DNS answers" dns_ready inet-dns
    step="web servers answer"
    wait_for "web servers answer" web_healthy web-web web-evil
    step="whole check"
    healthy || fail "DNS or a web server answered wrongly (NXDOMAIN for other names, bodies)"
    # Started fresh: the logs hold only the test's traffic, not these checks (dnsmasq appends,
    # O_APPEND, so emptying its log under it is safe).
    : >"$DIR/web.log"
    : >"$DIR/inet-dns.log"
    echo "$DNS_ADDR"
}

if [ "$cmd" = up ]; then
    trap 'fail "command failed (line $LINENO): $BASH_COMMAND"' ERR
    up
else
    teardown
    echo "standin: down ($DIR)"
fi
