#!/usr/bin/python3
"""A tiny SPICE-over-websocket client for the e2e tier (standard library only).

It speaks to carreld like the web console does: log in for the cookie, ask for a console ticket,
open WS /v1/console/TICKET (subprotocol "binary", same Origin) and send SPICE messages, one per
websocket message as spice-html5 does. The viewer holds no SPICE password (carreld's proxy
authenticates in its place): it sends a ticket of an empty password, RSA-OAEP encrypted with
the server's key from the link reply, as spice-html5 does with none; tcp_channel does the same
with a real password straight to QEMU.

usage: console-client.py URL TOKEN SESSION SCENARIO
  link     main link + auth, a display channel on the same ticket, a second main link (refused),
           then the ticket after its main closed; prints key=value words
  expired  a ticket left unused for 11 s; prints the handshake status
  badpw    main link + auth with a wrong password; prints SPICE's auth result (0: the proxy
           replaced the viewer's ticket)
  direct P straight to QEMU's SPICE port P with every string of a console reply as the password
           (each refused), then with the domain's password from libvirt (accepted); prints
           secret=yes|no refused=N/M control=AUTH
  abrupt   display channels closed right after their authentication; prints auth results
  orders   all channels closed in several orders (main first, last, mixed, mid-frame)
  refusals handshakes without cookie, with a foreign origin, with an unknown ticket
  type TEXT  main + inputs channels, then TEXT typed as SPICE key events (dropped by the proxy
           unless the viewer holds the control lease); prints key=value words
  frame    main + display through the proxy until the first drawing message; prints its type and
           size in bytes (frame_type=T frame_bytes=N)
  stuck S  main + a drawing display channel whose viewer acks every message blindly and reads
           nothing for up to S seconds (a frozen or hostile page); prints key=value words
           (closed=yes once the proxy closed it)

bench/console imports it: spice_channel (through the proxy) and tcp_channel (straight to QEMU's
SPICE port) link and authenticate with the same code.
"""
import base64
import hashlib
import json
import os
import random
import re
import socket
import struct
import subprocess
import sys
import time
import urllib.error
import urllib.request

SPICE_CHANNEL_MAIN, SPICE_CHANNEL_DISPLAY, SPICE_CHANNEL_INPUTS, SPICE_CHANNEL_CURSOR = 1, 2, 3, 4
# What a viewer of carreld's console encrypts: it holds no SPICE password (the proxy does).
VIEWER_PASSWORD = ""
SPICE_MSGC_INPUTS_KEY_DOWN, SPICE_MSGC_INPUTS_KEY_UP = 101, 102
# PC/AT set 1 scancodes of what `type` can send.
SCANCODES = dict(zip("1234567890-", range(0x02, 0x0d)))
SCANCODES.update(zip("qwertyuiop", range(0x10, 0x1a)))
SCANCODES.update(zip("asdfghjkl", range(0x1e, 0x27)))
SCANCODES.update(zip("zxcvbnm", range(0x2c, 0x33)))
SCANCODES.update({" ": 0x39, "/": 0x35, ".": 0x34, "\n": 0x1c, "^": 0x2a})  # ^: left shift
CAPS = (1 << 0) | (1 << 3)  # auth selection, mini header


class Api:
    def __init__(self, url, token):
        self.url = url.rstrip("/")
        self.host = self.url.split("://", 1)[1]
        self.origin = self.url
        req = urllib.request.Request(self.url + "/v1/login", method="POST",
                                     data=json.dumps({"token": token}).encode(),
                                     headers={"Content-Type": "application/json"})
        with urllib.request.urlopen(req, timeout=30) as resp:
            cookie = resp.headers["Set-Cookie"]
        self.cookie = cookie.split(";", 1)[0]

    def post(self, path, body=None):
        req = urllib.request.Request(self.url + path, method="POST",
                                     data=json.dumps(body or {}).encode(),
                                     headers={"Content-Type": "application/json",
                                              "Cookie": self.cookie, "Origin": self.origin})
        with urllib.request.urlopen(req, timeout=60) as resp:
            return json.loads(resp.read())

    def ticket(self, session):
        return self.post("/v1/sessions/%s/console" % session)


class WebSocket:
    """Just enough RFC 6455 for a client: masked binary frames out, frames in."""

    def __init__(self, api, path, cookie=True, origin=True):
        host, port = api.host.rsplit(":", 1)
        self.sock = socket.create_connection((host, int(port)), timeout=30)
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)  # as browsers do
        key = base64.b64encode(os.urandom(16)).decode()
        lines = ["GET %s HTTP/1.1" % path, "Host: %s" % api.host, "Connection: Upgrade",
                 "Upgrade: websocket", "Sec-WebSocket-Version: 13",
                 "Sec-WebSocket-Key: " + key, "Sec-WebSocket-Protocol: binary"]
        if origin:
            lines.append("Origin: " + (api.origin if origin is True else origin))
        if cookie:
            lines.append("Cookie: " + api.cookie)
        self.sock.sendall(("\r\n".join(lines) + "\r\n\r\n").encode())
        head = b""
        while b"\r\n\r\n" not in head:
            chunk = self.sock.recv(1)
            if not chunk:
                break
            head += chunk
        self.status = int(head.split(b" ", 2)[1]) if head.startswith(b"HTTP/1.1 ") else 0
        # bytearray: a first frame is ~3 MB, and bytes would be copied once per chunk received.
        self.buf = bytearray()

    def send(self, data):
        mask = os.urandom(4)
        n = len(data)
        if n < 126:
            header = struct.pack("!BB", 0x82, 0x80 | n)
        elif n < 65536:
            header = struct.pack("!BBH", 0x82, 0x80 | 126, n)
        else:
            header = struct.pack("!BBQ", 0x82, 0x80 | 127, n)
        body = bytes(b ^ mask[i % 4] for i, b in enumerate(data))
        self.sock.sendall(header + mask + body)

    def _read(self, n):
        while len(self.buf) < n:
            chunk = self.sock.recv(1 << 18)
            if not chunk:
                raise EOFError("connection closed")
            self.buf += chunk
        out = bytes(self.buf[:n])
        del self.buf[:n]
        return out

    def frame(self):
        b0, b1 = self._read(2)
        n = b1 & 0x7F
        if n == 126:
            n = struct.unpack("!H", self._read(2))[0]
        elif n == 127:
            n = struct.unpack("!Q", self._read(8))[0]
        return b0 & 0x0F, self._read(n)

    def close(self):
        self.sock.close()


class Stream:
    """The SPICE byte stream inside the websocket's binary messages."""

    def __init__(self, ws):
        self.ws, self.buf, self.closed = ws, bytearray(), None

    def read(self, n):
        while len(self.buf) < n:
            op, data = self.ws.frame()
            if op == 8:  # close
                self.closed = struct.unpack("!H", data[:2])[0] if len(data) >= 2 else 1005
                raise EOFError("closed with %s" % self.closed)
            if op == 2:
                self.buf += data
        out = bytes(self.buf[:n])
        del self.buf[:n]
        return out


class TcpChannel:
    """One SPICE channel straight over TCP, no proxy: both the sender and the byte stream."""

    def __init__(self, host, port):
        self.sock = socket.create_connection((host, port), timeout=30)
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.buf, self.closed = bytearray(), None

    def send(self, data):
        self.sock.sendall(data)

    def read(self, n):
        while len(self.buf) < n:
            chunk = self.sock.recv(1 << 18)
            if not chunk:
                self.closed = "eof"
                raise EOFError("connection closed")
            self.buf += chunk
        out = bytes(self.buf[:n])
        del self.buf[:n]
        return out

    def close(self):
        self.sock.close()


def link_message(channel_type, connection_id=0):
    mess = struct.pack("<IBBIII", connection_id, channel_type, 0, 1, 1, 18)
    mess += struct.pack("<II", CAPS, 0)
    return b"REDQ" + struct.pack("<III", 2, 2, len(mess)) + mess


def der_read(data, at):
    """One DER element at `at`: (tag, content start, content end)."""
    tag, n = data[at], data[at + 1]
    at += 2
    if n & 0x80:
        count = n & 0x7F
        n = int.from_bytes(data[at:at + count], "big")
        at += count
    return tag, at, at + n


def rsa_key(spki):
    """Modulus and exponent of a DER SubjectPublicKeyInfo (RSA)."""
    _, start, _ = der_read(spki, 0)           # SEQUENCE
    _, _, alg_end = der_read(spki, start)     # AlgorithmIdentifier
    _, bits, _ = der_read(spki, alg_end)      # BIT STRING
    _, seq, _ = der_read(spki, bits + 1)      # RSAPublicKey SEQUENCE (after unused-bits byte)
    _, ns, ne = der_read(spki, seq)
    _, es, ee = der_read(spki, ne)
    return int.from_bytes(spki[ns:ne], "big"), int.from_bytes(spki[es:ee], "big")


def mgf1(seed, length):
    out, counter = b"", 0
    while len(out) < length:
        out += hashlib.sha1(seed + struct.pack(">I", counter)).digest()
        counter += 1
    return out[:length]


def oaep_encrypt(n, e, message):
    k = (n.bit_length() + 7) // 8
    h_len = 20
    db = hashlib.sha1(b"").digest() + b"\0" * (k - len(message) - 2 * h_len - 2) + b"\1" + message
    seed = os.urandom(h_len)
    masked_db = bytes(a ^ b for a, b in zip(db, mgf1(seed, k - h_len - 1)))
    masked_seed = bytes(a ^ b for a, b in zip(seed, mgf1(masked_db, h_len)))
    em = b"\0" + masked_seed + masked_db
    return pow(int.from_bytes(em, "big"), e, n).to_bytes(k, "big")


def spice_channel(api, ticket, password, channel_type, connection_id=0):
    """Links and authenticates a channel; returns (ws, stream, link error, auth result)."""
    ws = WebSocket(api, "/v1/console/" + ticket)
    if ws.status != 101:
        return ws, None, "http%d" % ws.status, None
    stream = Stream(ws)
    return (ws, stream) + spice_link(ws, stream, password, channel_type, connection_id)


def tcp_channel(host, port, password, channel_type, connection_id=0):
    """As spice_channel, straight to SPICE on host:port; returns (conn, conn, link error,
    auth result)."""
    conn = TcpChannel(host, port)
    return (conn, conn) + spice_link(conn, conn, password, channel_type, connection_id)


def spice_link(conn, stream, password, channel_type, connection_id):
    """SPICE link and authentication on an open transport; returns (link error, auth result)."""
    conn.send(link_message(channel_type, connection_id))
    try:
        header = stream.read(16)
    except EOFError:
        return "closed%s" % stream.closed, None
    if header[:4] != b"REDQ":
        return "badmagic", None
    reply = stream.read(struct.unpack("<I", header[12:16])[0])
    error = struct.unpack("<I", reply[:4])[0]
    if error != 0:
        return str(error), None
    n, e = rsa_key(reply[4:4 + 162])
    conn.send(struct.pack("<I", 1) + oaep_encrypt(n, e, password.encode() + b"\0"))
    return "0", struct.unpack("<I", stream.read(4))[0]


def read_message(stream):
    msg_type, size = struct.unpack("<HI", stream.read(6))
    return msg_type, stream.read(size)


def main_init_session(main, stream):
    """As spice-html5: the session id from SPICE_MSG_MAIN_INIT, then ATTACH_CHANNELS and wait
    for the channel list before any other channel links."""
    while True:
        msg_type, body = read_message(stream)
        if msg_type == 103:  # SPICE_MSG_MAIN_INIT
            session_id = struct.unpack("<I", body[:4])[0]
            main.send(struct.pack("<HI", 104, 0))  # SPICE_MSGC_MAIN_ATTACH_CHANNELS
        elif msg_type == 104:  # SPICE_MSG_MAIN_CHANNELS_LIST
            return session_id


# Display messages that draw pixels: COPY_BITS, STREAM_DATA, DRAW_FILL..DRAW_ALPHA_BLEND,
# STREAM_DATA_SIZED, DRAW_COMPOSITE.
DISPLAY_DRAWS = frozenset([104, 123, 316, 318] + list(range(302, 314)))


def display_first(disp, stream, until=(102, 314)):
    """As spice-html5: DISPLAY_INIT, acks, until the display sends a message of a type in
    `until` (by default its first mark or surface; DISPLAY_DRAWS waits for the first frame);
    returns that message's type and body."""
    disp.send(struct.pack("<HIBQBi", 101, 14, 1, 10 * 1024 * 1024, 0, 0))
    while True:
        msg_type, body = read_message(stream)
        if msg_type == 3:  # SPICE_MSG_SET_ACK: answer with ACK_SYNC(generation)
            disp.send(struct.pack("<HII", 1, 4, struct.unpack("<I", body[:4])[0]))
        elif msg_type in until:
            return msg_type, body


def display_start(disp, stream, until=(102, 314)):
    display_first(disp, stream, until)
    return "shown"


def scenario_link(api, session):
    out = {}
    t = api.ticket(session)
    out["view_only"] = str(t["view_only"]).lower()
    main, stream, out["link"], out["auth"] = spice_channel(api, t["ticket"], VIEWER_PASSWORD,
                                                           SPICE_CHANNEL_MAIN)
    if out["link"] == "0" and out["auth"] == 0:
        conn_id = main_init_session(main, stream)
        disp, disp_stream, out["display_link"], out["display_auth"] = spice_channel(
            api, t["ticket"], VIEWER_PASSWORD, SPICE_CHANNEL_DISPLAY, conn_id)
        if out["display_auth"] == 0:
            out["display"] = display_start(disp, disp_stream)
        disp.close()
        again, _, out["reuse"], _ = spice_channel(api, t["ticket"], VIEWER_PASSWORD,
                                                  SPICE_CHANNEL_MAIN)
        again.close()
    main.close()
    time.sleep(1)  # the proxy sees the close
    after = WebSocket(api, "/v1/console/" + t["ticket"])
    out["after_close"] = after.status
    after.close()
    print(" ".join("%s=%s" % kv for kv in sorted(out.items())))


def scenario_frame(api, session):
    """The desktop's first frame as a viewer receives it: uncompressed, a 1024x768 screen is one
    3 MiB message, which a slow viewer under load could not drain before spice-server gave up."""
    t = api.ticket(session)
    main, stream, _, _ = spice_channel(api, t["ticket"], VIEWER_PASSWORD, SPICE_CHANNEL_MAIN)
    conn_id = main_init_session(main, stream)
    disp, disp_stream, _, _ = spice_channel(api, t["ticket"], VIEWER_PASSWORD,
                                            SPICE_CHANNEL_DISPLAY, conn_id)
    msg_type, body = display_first(disp, disp_stream, DISPLAY_DRAWS)
    disp.close()
    main.close()
    print("frame_type=%d frame_bytes=%d" % (msg_type, len(body)))


def scenario_abrupt(api, session):
    """Display channels that leave right after authenticating, before DISPLAY_INIT (with and
    without ATTACH_CHANNELS first): without the proxy's help this crashed QEMU (spice-server
    0.15) at the first or second try."""
    results = []
    for i in range(4):
        t = api.ticket(session)
        main, stream, link, auth = spice_channel(api, t["ticket"], VIEWER_PASSWORD,
                                                 SPICE_CHANNEL_MAIN)
        if i % 2:
            conn_id = main_init_session(main, stream)
        else:
            while True:
                msg_type, body = read_message(stream)
                if msg_type == 103:
                    conn_id = struct.unpack("<I", body[:4])[0]
                    break
        disp, _, _, disp_auth = spice_channel(api, t["ticket"], VIEWER_PASSWORD,
                                              SPICE_CHANNEL_DISPLAY, conn_id)
        disp.close()
        main.close()
        results.append("%s/%s" % (auth, disp_auth))
        time.sleep(3)
    print(" ".join(results))


def scenario_orders(api, session):
    """A viewer leaving in each order: other channels then main, main first, all at once in any
    order, and a display closed while its first frame streams (main last, then main first).
    spice-server 0.15 crashed QEMU when the proxy closed a channel's connection before main's.
    Prints each order's main/others auth results."""
    results = []
    for order in ("main-last", "main-first", "shuffle", "frame-main-last", "frame-main-first"):
        t = api.ticket(session)
        main, stream, _, auth = spice_channel(api, t["ticket"], VIEWER_PASSWORD, SPICE_CHANNEL_MAIN)
        conn_id = main_init_session(main, stream)
        others = []
        for channel_type in (SPICE_CHANNEL_DISPLAY, SPICE_CHANNEL_CURSOR, SPICE_CHANNEL_INPUTS):
            ws, st, _, other_auth = spice_channel(api, t["ticket"], VIEWER_PASSWORD, channel_type,
                                                  conn_id)
            others.append((ws, st, other_auth))
        if order.startswith("frame"):
            others[0][0].send(struct.pack("<HIBQBi", 101, 14, 1, 10 * 1024 * 1024, 0, 0))
            others[0][1].read(1000)
        random.shuffle(others)
        if order == "shuffle":
            everyone = [main] + [o[0] for o in others]
            random.shuffle(everyone)
            for ws in everyone:
                ws.close()
        elif order.endswith("main-first"):
            main.close()
            time.sleep(random.random() * 0.3)
            for o in others:
                o[0].close()
        else:
            for o in others:
                o[0].close()
            time.sleep(random.random() * 0.5)
            main.close()
        results.append("%s/%s" % (auth, "".join(str(o[2]) for o in others)))
        time.sleep(3)
    print(" ".join(results))


def scenario_badpw(api, session):
    """The viewer's own ticket never reaches SPICE: the proxy sends one with the password only
    carreld holds, so whatever the viewer encrypted, SPICE accepts the link (0)."""
    t = api.ticket(session)
    ws, _, link, auth = spice_channel(api, t["ticket"], "not-the-password", SPICE_CHANNEL_MAIN)
    ws.close()
    print(auth if link == "0" else "link=" + link)


def domain_password(session):
    """The domain's SPICE password, as root reads it from libvirt (never from carreld's API)."""
    xml = subprocess.run(["virsh", "-q", "-c", "qemu:///system", "dumpxml", "--security-info",
                          "carrel-" + session], check=True, capture_output=True, text=True).stdout
    found = re.search(r"<graphics type='spice'[^>]*passwd='([^']*)'", xml)
    return found.group(1) if found else ""


def scenario_direct(api, session, port):
    """Straight to QEMU's SPICE port with what carreld's replies held (every string of a
    console reply, and no password): each must be refused. Then, as a control, the domain's own
    password (from libvirt as root) must be accepted there, so the refusals are SPICE's."""
    t = api.ticket(session)
    words = ["secret=%s" % ("yes" if any(k in t for k in ("password", "passwd")) else "no")]
    candidates = [""] + [v for v in t.values() if isinstance(v, str)]
    refused = 0
    for pw in candidates:
        conn, _, link, auth = tcp_channel("127.0.0.1", port, pw, SPICE_CHANNEL_MAIN)
        conn.close()
        refused += link == "0" and auth != 0
        time.sleep(0.3)
    words.append("refused=%d/%d" % (refused, len(candidates)))
    conn, _, link, auth = tcp_channel("127.0.0.1", port, domain_password(session),
                                      SPICE_CHANNEL_MAIN)
    conn.close()
    words.append("control=%s" % (auth if link == "0" else "link" + link))
    print(" ".join(words))


def scenario_expired(api, session):
    t = api.ticket(session)
    time.sleep(11)
    ws = WebSocket(api, "/v1/console/" + t["ticket"])
    print(ws.status)


def scenario_refusals(api, session):
    t = api.ticket(session)
    path = "/v1/console/" + t["ticket"]
    print("nocookie=%d foreign=%d noorigin=%d unknown=%d" % (
        WebSocket(api, path, cookie=False).status,
        WebSocket(api, path, origin="http://evil.example").status,
        WebSocket(api, path, origin=None).status,
        WebSocket(api, "/v1/console/" + "0" * 64).status))


def send_key(ws, code):
    for msg_type, value in ((SPICE_MSGC_INPUTS_KEY_DOWN, code), (SPICE_MSGC_INPUTS_KEY_UP, code | 0x80)):
        ws.send(struct.pack("<HII", msg_type, 4, value))
        time.sleep(0.02)


def scenario_type(api, session, text):
    out = {}
    t = api.ticket(session)
    out["view_only"] = str(t["view_only"]).lower()
    main, stream, out["link"], out["auth"] = spice_channel(api, t["ticket"], VIEWER_PASSWORD,
                                                           SPICE_CHANNEL_MAIN)
    conn_id = main_init_session(main, stream)
    inputs, _, out["inputs_link"], out["inputs_auth"] = spice_channel(
        api, t["ticket"], VIEWER_PASSWORD, SPICE_CHANNEL_INPUTS, conn_id)
    for char in text:
        send_key(inputs, SCANCODES[char])
    time.sleep(1)
    inputs.close()
    main.close()
    print(" ".join("%s=%s" % kv for kv in sorted(out.items())))


def scenario_stuck(api, session, seconds):
    """SPICE's message window stops spice-server when a viewer stops acking; a viewer that acks
    without reading does not stop it, so only the proxy's flow control bounds what waits for
    that viewer. The proxy stops reading the display's SPICE connection at its bound and closes
    the viewer once it took nothing for its stall time (30 s)."""
    out = {}
    t = api.ticket(session)
    main, stream, out["link"], out["auth"] = spice_channel(api, t["ticket"], VIEWER_PASSWORD,
                                                           SPICE_CHANNEL_MAIN)
    conn_id = main_init_session(main, stream)
    disp, disp_stream, _, out["display_auth"] = spice_channel(
        api, t["ticket"], VIEWER_PASSWORD, SPICE_CHANNEL_DISPLAY, conn_id)
    out["display"] = display_start(disp, disp_stream)
    disp.sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    out["closed"] = "no"
    deadline = time.time() + seconds
    while time.time() < deadline:
        try:
            disp.send(struct.pack("<HI", 2, 0))  # SPICE_MSGC_ACK, for messages never read
        except OSError:
            out["closed"] = "yes"
            break
        time.sleep(0.01)
    out["seconds"] = int(seconds - (deadline - time.time()))
    disp.close()
    main.close()
    print(" ".join("%s=%s" % kv for kv in sorted(out.items())))


def main():
    url, token, session, scenario = sys.argv[1:5]
    api = Api(url, token)
    if scenario == "type":
        scenario_type(api, session, sys.argv[5])
        return
    if scenario == "stuck":
        scenario_stuck(api, session, float(sys.argv[5]))
        return
    if scenario == "direct":
        scenario_direct(api, session, int(sys.argv[5]))
        return
    {"link": scenario_link, "expired": scenario_expired, "badpw": scenario_badpw, "abrupt": scenario_abrupt,
     "frame": scenario_frame, "orders": scenario_orders,
     "refusals": scenario_refusals}[scenario](api, session)


if __name__ == "__main__":
    main()
