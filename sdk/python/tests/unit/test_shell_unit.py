"""carrel.Shell and its RFC 6455 client against a tiny websocket server in this test: the
handshake and its Accept check, masking, fragments, pings, carreld's control messages, close
codes and refusals."""

from __future__ import annotations

import base64
import hashlib
import json
import socket
import struct
import sys
import threading
import time
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

import carrel  # noqa: E402
from carrel._websocket import (  # noqa: E402
    OP_BINARY,
    OP_CLOSE,
    OP_CONT,
    OP_PING,
    OP_PONG,
    OP_TEXT,
    ProtocolError,
    accept_of,
    encode_frame,
    mask,
    parse_frame,
)

GUID = b"258EAFA5-E914-47DA-95CA-C5AB0DC85B11"


def server_frame(opcode, payload=b"", fin=True, masked=False):
    """A frame as a server writes it (unmasked), or masked to break the rules."""
    head = bytes([(0x80 if fin else 0) | opcode])
    n = len(payload)
    bit = 0x80 if masked else 0
    if n < 126:
        head += bytes([bit | n])
    elif n < 65536:
        head += bytes([bit | 126]) + struct.pack("!H", n)
    else:
        head += bytes([bit | 127]) + struct.pack("!Q", n)
    if masked:
        key = b"\x01\x02\x03\x04"
        return head + key + mask(payload, key)
    return head + payload


def read_client_frame(conn, buf):
    """One client frame: (fin, opcode, masked?, unmasked payload)."""
    def need(n):
        while len(buf) < n:
            chunk = conn.recv(65536)
            if not chunk:
                raise EOFError
            buf.extend(chunk)

    need(2)
    b0, b1 = buf[0], buf[1]
    n, at = b1 & 0x7F, 2
    if n == 126:
        need(4)
        n, at = struct.unpack_from("!H", buf, 2)[0], 4
    elif n == 127:
        need(10)
        n, at = struct.unpack_from("!Q", buf, 2)[0], 10
    masked = bool(b1 & 0x80)
    need(at + (4 if masked else 0) + n)
    key = bytes(buf[at : at + 4]) if masked else b"\0\0\0\0"
    start = at + (4 if masked else 0)
    payload = mask(bytes(buf[start : start + n]), key)
    del buf[: start + n]
    return bool(b0 & 0x80), b0 & 0x0F, masked, payload


class Server:
    """One connection on a Unix socket: answers the handshake (as told), then runs script."""

    def __init__(self, tmp_path, script, accept="good", status=101, body=b""):
        self.path = str(tmp_path / "ws.sock")
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.bind(self.path)
        self.sock.listen(1)
        self.script, self.accept, self.status, self.body = script, accept, status, body
        self.request = b""
        self.received = []  # client frames: (fin, opcode, masked, payload)
        self.error = None
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self):
        try:
            conn, _ = self.sock.accept()
            conn.settimeout(10)
            with conn:
                data = b""
                while b"\r\n\r\n" not in data:
                    data += conn.recv(4096)
                self.request = data
                key = [
                    line.split(b":", 1)[1].strip()
                    for line in data.split(b"\r\n")
                    if line.lower().startswith(b"sec-websocket-key:")
                ][0]
                if self.status != 101:
                    conn.sendall(
                        b"HTTP/1.1 %d No\r\nContent-Type: application/json\r\n"
                        b"X-Request-Id: r-1\r\nContent-Length: %d\r\n\r\n%s"
                        % (self.status, len(self.body), self.body)
                    )
                    return
                good = base64.b64encode(hashlib.sha1(key + GUID).digest())
                accept = good if self.accept == "good" else base64.b64encode(b"x" * 20)
                conn.sendall(
                    b"HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\n"
                    b"Connection: Upgrade\r\nSec-WebSocket-Accept: " + accept + b"\r\n\r\n"
                )
                self.script(self, conn, bytearray())
        except Exception as exc:  # noqa: BLE001 - reported by the test
            self.error = exc

    def expect(self, conn, buf):
        frame = read_client_frame(conn, buf)
        self.received.append(frame)
        return frame

    def join(self):
        self.thread.join(10)
        self.sock.close()
        assert self.error is None, self.error


def shell_of(server, tmp_path):
    client = carrel.Client(socket=server.path, token="t0ken")
    return client.shell("s-1", cols=100, rows=30)


def test_accept_of_rfc_example():
    # RFC 6455 1.3's example key and answer.
    assert accept_of("dGhlIHNhbXBsZSBub25jZQ==") == "s3pPLMBiTxaQ9kYGzzhZRbK+xOo="


def test_client_frames_are_masked_and_sized():
    for n in (0, 5, 125, 126, 65535, 65536):
        frame = encode_frame(OP_BINARY, b"a" * n, key=b"\x10\x20\x30\x40")
        assert frame[0] == 0x80 | OP_BINARY and frame[1] & 0x80
        buf = bytearray(frame)

        class Conn:
            def recv(self, _):
                return b""

        fin, op, masked, payload = read_client_frame(Conn(), buf)
        assert (fin, op, masked, payload) == (True, OP_BINARY, True, b"a" * n)
        if n:
            assert b"a" * min(n, 4) not in frame[-n:]


def test_parse_frame_refuses_what_a_server_must_not_send():
    with pytest.raises(ProtocolError):
        parse_frame(bytearray(server_frame(OP_BINARY, b"hi", masked=True)))
    with pytest.raises(ProtocolError):
        parse_frame(bytearray(server_frame(OP_PING, b"x" * 126)))
    with pytest.raises(ProtocolError):
        parse_frame(bytearray(server_frame(OP_PING, b"x", fin=False)))
    with pytest.raises(ProtocolError):
        parse_frame(bytearray(server_frame(0x3, b"x")))
    with pytest.raises(ProtocolError):
        parse_frame(bytearray([0x82, 127]) + struct.pack("!Q", 1 << 40))
    # Incomplete: nothing taken yet.
    buf = bytearray(server_frame(OP_BINARY, b"hello")[:4])
    assert parse_frame(buf) is None and len(buf) == 4


def test_a_session_fragments_pings_exit_and_close(tmp_path):
    def script(srv, conn, buf):
        conn.sendall(server_frame(OP_TEXT, b'{"type":"started","handle":"p-7"}'))
        # One output message in three fragments, a ping between them.
        conn.sendall(server_frame(OP_BINARY, b"hel", fin=False))
        conn.sendall(server_frame(OP_PING, b"pi"))
        conn.sendall(server_frame(OP_CONT, b"lo ", fin=False))
        conn.sendall(server_frame(OP_CONT, b"$ ", fin=True))
        assert srv.expect(conn, buf)[1] == OP_PONG
        assert srv.expect(conn, buf)[1] == OP_TEXT  # resize
        assert srv.expect(conn, buf)[1] == OP_BINARY  # typed line
        conn.sendall(server_frame(OP_BINARY, b"echo hi\r\nhi\r\n"))
        assert srv.expect(conn, buf)[1] == OP_TEXT  # eof
        conn.sendall(server_frame(OP_TEXT, b'{"type":"exit","exit_code":3}'))
        conn.sendall(server_frame(OP_CLOSE, struct.pack("!H", 1000) + b"exited"))
        assert srv.expect(conn, buf)[1] == OP_CLOSE

    srv = Server(tmp_path, script)
    with shell_of(srv, tmp_path) as sh:
        assert sh.recv(5) == b"hello $ "
        assert sh.handle == "p-7"
        sh.resize(120, 40)
        sh.send("echo hi\n")
        assert sh.read_until("hi\r\n", 5) == b"echo hi\r\n"
        sh.eof()
        assert sh.read_all(5) == b"hi\r\n"
        assert sh.exit_code == 3
        assert sh.recv(1) == b""
        assert sh.closed
    srv.join()
    request = srv.request.decode()
    assert request.startswith("GET /v1/sessions/s-1/shell?rows=30&cols=100 HTTP/1.1\r\n")
    assert "Authorization: Bearer t0ken\r\n" in request
    assert "Sec-WebSocket-Version: 13\r\n" in request
    kinds = [(op, masked, payload) for _, op, masked, payload in srv.received]
    assert all(masked for _, masked, _ in kinds)
    assert kinds[0] == (OP_PONG, True, b"pi")
    assert json.loads(kinds[1][2]) == {"type": "resize", "rows": 40, "cols": 120}
    assert kinds[2] == (OP_BINARY, True, b"echo hi\n")
    assert json.loads(kinds[3][2]) == {"type": "eof"}
    assert kinds[4][1] and struct.unpack("!H", kinds[4][2][:2])[0] == 1000


def test_a_bad_accept_is_refused(tmp_path):
    srv = Server(tmp_path, lambda *a: None, accept="bad")
    with pytest.raises(ProtocolError, match="Sec-WebSocket-Accept"):
        shell_of(srv, tmp_path)
    srv.join()


def test_a_refused_handshake_raises_the_api_error(tmp_path):
    body = json.dumps({"error": {"code": "wrong_state", "message": "a person holds it"}}).encode()
    srv = Server(tmp_path, None, status=409, body=body)
    with pytest.raises(carrel.WrongState) as info:
        shell_of(srv, tmp_path)
    assert info.value.status == 409 and info.value.request_id == "r-1"
    assert "a person holds it" in info.value.message
    srv.join()


def test_an_error_message_then_close_raises_it(tmp_path):
    def script(srv, conn, buf):
        error = {"type": "error", "error": {"code": "hypervisor_error", "message": "agent gone"}}
        conn.sendall(server_frame(OP_TEXT, json.dumps(error).encode()))
        conn.sendall(server_frame(OP_CLOSE, struct.pack("!H", 1011) + b"shell error"))
        srv.expect(conn, buf)

    srv = Server(tmp_path, script)
    sh = shell_of(srv, tmp_path)
    with pytest.raises(carrel.HypervisorError, match="agent gone"):
        sh.recv(5)
    assert sh.exit_code is None
    srv.join()


def test_a_close_without_exit_is_a_failure_with_its_code(tmp_path):
    def script(srv, conn, buf):
        conn.sendall(server_frame(OP_CLOSE, struct.pack("!H", 1008) + b"too fast"))
        srv.expect(conn, buf)

    srv = Server(tmp_path, script)
    sh = shell_of(srv, tmp_path)
    with pytest.raises(carrel.Failed, match="1008: too fast"):
        sh.recv(5)
    srv.join()


def test_a_masked_server_frame_closes_with_1002(tmp_path):
    def script(srv, conn, buf):
        conn.sendall(server_frame(OP_BINARY, b"x", masked=True))
        srv.expect(conn, buf)

    srv = Server(tmp_path, script)
    sh = shell_of(srv, tmp_path)
    with pytest.raises(ProtocolError, match="masked"):
        sh.recv(5)
    srv.join()
    _, op, _, payload = srv.received[0]
    assert op == OP_CLOSE and struct.unpack("!H", payload[:2])[0] == 1002


def test_recv_times_out_and_the_stream_stays_whole(tmp_path):
    release = threading.Event()

    def script(srv, conn, buf):
        frame = server_frame(OP_BINARY, b"late output")
        conn.sendall(frame[:3])  # half a frame, then a pause
        time.sleep(1.0)  # longer than the client's last wait: its write must outlast it
        srv.expect(conn, buf)  # the large write
        release.wait(10)
        conn.sendall(frame[3:])
        srv.expect(conn, buf)  # the close

    srv = Server(tmp_path, script)
    sh = shell_of(srv, tmp_path)
    with pytest.raises(carrel.Timeout):
        sh.recv(0.3)
    # A large write after that short wait is not cut by it.
    sh.send(b"x" * (4 * 1024 * 1024))
    release.set()
    assert sh.recv(5) == b"late output"
    sh.close()
    srv.join()
    assert srv.received[0][1] == OP_BINARY and len(srv.received[0][3]) == 4 * 1024 * 1024


def test_sizes_are_checked_before_connecting():
    client = carrel.Client(socket="/nonexistent/carreld.sock", token="t")
    for cols, rows in ((0, 24), (80, 1001), (80, True)):
        with pytest.raises(ValueError):
            client.shell("s-1", cols=cols, rows=rows)
    with pytest.raises(carrel.Unreachable):
        client.shell("s-1")


def test_tcp_endpoint_host_header(tmp_path):
    lsock = socket.socket()
    lsock.bind(("127.0.0.1", 0))
    lsock.listen(1)
    port = lsock.getsockname()[1]
    seen = {}

    def serve():
        conn, _ = lsock.accept()
        with conn:
            data = b""
            while b"\r\n\r\n" not in data:
                data += conn.recv(4096)
            seen["request"] = data
            key = [
                line.split(b":", 1)[1].strip()
                for line in data.split(b"\r\n")
                if line.lower().startswith(b"sec-websocket-key:")
            ][0]
            accept = base64.b64encode(hashlib.sha1(key + GUID).digest())
            conn.sendall(
                b"HTTP/1.1 101 OK\r\nUpgrade: WebSocket\r\nConnection: keep-alive, Upgrade\r\n"
                b"Sec-WebSocket-Accept: " + accept + b"\r\n\r\n"
                + server_frame(OP_TEXT, b'{"type":"exit","exit_code":0}')
                + server_frame(OP_CLOSE, struct.pack("!H", 1000))
            )
            conn.recv(100)

    t = threading.Thread(target=serve, daemon=True)
    t.start()
    client = carrel.Client(url=f"http://127.0.0.1:{port}", token="t")
    with client.shell("demo") as sh:
        assert sh.read_all(5) == b"" and sh.exit_code == 0
    t.join(5)
    lsock.close()
    assert f"Host: 127.0.0.1:{port}\r\n".encode() in seen["request"]


def test_each_frame_has_a_fresh_mask():
    keys = {encode_frame(OP_BINARY, b"same")[2:6] for _ in range(8)}
    assert len(keys) > 1  # os.urandom: eight equal keys by chance is 2^-224
