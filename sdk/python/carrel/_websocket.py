"""A small RFC 6455 websocket client on the standard library, for carreld's shell route.

Debian 12 has websocket clients (python3-websocket, python3-websockets), but the SDK keeps one
runtime dependency: what the shell needs of the protocol is small (one connection, a client's
masked frames, fragmented messages, ping/pong, the close handshake), and it speaks over the same
endpoints as the HTTP client (carreld's Unix socket, TCP, TLS) with the same token rules.

Everything the server sends is untrusted: header and message sizes are bounded, a masked or
malformed frame from the server is a protocol error, and the handshake's
``Sec-WebSocket-Accept`` must match the key sent.
"""

from __future__ import annotations

import base64
import hashlib
import json
import os
import socket
import ssl
import struct
import time
from dataclasses import dataclass
from typing import Any, Mapping
from urllib.parse import urlsplit

from .errors import CarrelError, Timeout, Unreachable, error_from_reply

GUID = "258EAFA5-E914-47DA-95CA-C5AB0DC85B11"
OP_CONT, OP_TEXT, OP_BINARY, OP_CLOSE, OP_PING, OP_PONG = 0x0, 0x1, 0x2, 0x8, 0x9, 0xA
CLOSE_NORMAL = 1000
CLOSE_PROTOCOL = 1002
MAX_HEADER_BYTES = 16 * 1024
MAX_ERROR_BODY = 64 * 1024
MAX_MESSAGE = 16 * 1024 * 1024  # one message, all fragments together
READ_CHUNK = 64 * 1024
SEND_TIMEOUT = 60.0  # a write that carreld does not take in this long: the connection is lost


class ProtocolError(CarrelError):
    """The server broke the websocket protocol (a bad handshake, a masked or malformed frame)."""

    code = "protocol_error"


def accept_of(key: str) -> str:
    """The ``Sec-WebSocket-Accept`` a server must answer to ``key`` (RFC 6455, 4.2.2)."""
    return base64.b64encode(hashlib.sha1((key + GUID).encode("ascii")).digest()).decode("ascii")


def mask(data: bytes, key: bytes) -> bytes:
    """``data`` XORed with the 4-byte ``key`` repeated (masking and unmasking alike)."""
    n = len(data)
    if n == 0:
        return b""
    stream = (key * (n // 4 + 1))[:n]
    return (int.from_bytes(data, "big") ^ int.from_bytes(stream, "big")).to_bytes(n, "big")


def encode_frame(opcode: int, payload: bytes, fin: bool = True, key: bytes | None = None) -> bytes:
    """One frame as a client sends it: masked with ``key`` (4 random bytes when None)."""
    key = os.urandom(4) if key is None else key
    head = bytes([(0x80 if fin else 0) | opcode])
    n = len(payload)
    if n < 126:
        head += bytes([0x80 | n])
    elif n < 1 << 16:
        head += bytes([0x80 | 126]) + struct.pack("!H", n)
    else:
        head += bytes([0x80 | 127]) + struct.pack("!Q", n)
    return head + key + mask(payload, key)


@dataclass
class Frame:
    fin: bool
    opcode: int
    payload: bytes


def parse_frame(buf: bytearray, max_payload: int = MAX_MESSAGE) -> Frame | None:
    """Takes one whole server frame off the front of ``buf``; None while it is incomplete."""
    if len(buf) < 2:
        return None
    b0, b1 = buf[0], buf[1]
    if b0 & 0x70:
        raise ProtocolError("the server set reserved bits (no extension was agreed)")
    if b1 & 0x80:
        raise ProtocolError("the server masked a frame (RFC 6455 5.1: it must not)")
    n, at = b1 & 0x7F, 2
    if n == 126:
        if len(buf) < 4:
            return None
        n, at = struct.unpack_from("!H", buf, 2)[0], 4
    elif n == 127:
        if len(buf) < 10:
            return None
        n, at = struct.unpack_from("!Q", buf, 2)[0], 10
    opcode, fin = b0 & 0x0F, bool(b0 & 0x80)
    if opcode >= 0x8 and (n > 125 or not fin):
        raise ProtocolError("a control frame over 125 bytes or fragmented")
    if opcode not in (OP_CONT, OP_TEXT, OP_BINARY, OP_CLOSE, OP_PING, OP_PONG):
        raise ProtocolError(f"unknown opcode {opcode:#x}")
    if n > max_payload:
        raise ProtocolError(f"a frame of {n} bytes, over the {max_payload} allowed")
    if len(buf) < at + n:
        return None
    payload = bytes(buf[at : at + n])
    del buf[: at + n]
    return Frame(fin, opcode, payload)


def _open_socket(endpoint: Any, verify: bool | str, timeout: float) -> tuple[socket.socket, str]:
    """A connected stream to carreld and the Host header to send."""
    if endpoint.socket:
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        sock.settimeout(timeout)
        sock.connect(endpoint.socket)
        return sock, "carreld"
    url = urlsplit(endpoint.url)
    tls = url.scheme == "https"
    port = url.port or (443 if tls else 80)
    sock = socket.create_connection((url.hostname, port), timeout=timeout)
    if tls:
        if verify is False:
            ctx = ssl._create_unverified_context()  # the caller asked for no verification
        else:
            ctx = ssl.create_default_context(cafile=verify if isinstance(verify, str) else None)
        sock = ctx.wrap_socket(sock, server_hostname=url.hostname)
    return sock, url.netloc


def _read_head(sock: socket.socket) -> tuple[bytes, bytearray]:
    """The reply's status line and headers, and whatever came after them."""
    buf = bytearray()
    while b"\r\n\r\n" not in buf:
        if len(buf) > MAX_HEADER_BYTES:
            raise ProtocolError(f"the handshake's reply headers exceed {MAX_HEADER_BYTES} bytes")
        chunk = sock.recv(4096)
        if not chunk:
            raise ProtocolError("the connection closed during the handshake")
        buf += chunk
    end = buf.index(b"\r\n\r\n")
    return bytes(buf[:end]), bytearray(buf[end + 4 :])


def _parse_head(head: bytes) -> tuple[int, dict[str, str]]:
    lines = head.decode("latin-1").split("\r\n")
    parts = lines[0].split(" ", 2)
    if len(parts) < 2 or not parts[0].startswith("HTTP/") or not parts[1].isdigit():
        raise ProtocolError(f"not an HTTP reply: {lines[0][:80]!r}")
    headers: dict[str, str] = {}
    for line in lines[1:]:
        name, sep, value = line.partition(":")
        if sep:
            key = name.strip().lower()
            headers[key] = (headers[key] + ", " if key in headers else "") + value.strip()
    return int(parts[1]), headers


def _refusal(sock: socket.socket, status: int, headers: Mapping[str, str], rest: bytearray):
    """The typed error of a refused handshake, from the API's error envelope when it has one."""
    try:
        length = min(int(headers.get("content-length", "0")), MAX_ERROR_BODY)
    except ValueError:
        length = 0
    body = bytes(rest)
    while len(body) < length:
        chunk = sock.recv(length - len(body))
        if not chunk:
            break
        body += chunk
    try:
        parsed = json.loads(body[:length] or b"null")
    except ValueError:
        parsed = None
    return error_from_reply(status, parsed, headers.get("x-request-id"), headers)


class WebSocket:
    """One client connection: whole messages in, masked frames out. Not thread-safe."""

    def __init__(self, sock: socket.socket, leftover: bytearray) -> None:
        self._sock = sock
        self._buf = leftover
        self._parts: list[bytes] = []
        self._part_op = 0
        self._size = 0
        self.closed = False
        self.close_code: int | None = None
        self.close_reason = ""

    @classmethod
    def connect(
        cls,
        endpoint: Any,
        path: str,
        token: str | None,
        *,
        verify: bool | str = True,
        timeout: float = 30.0,
        user_agent: str = "carrel-python",
    ) -> "WebSocket":
        """Opens ``path`` on carreld as a websocket; raises the API's error when refused."""
        try:
            sock, host = _open_socket(endpoint, verify, timeout)
        except OSError as exc:
            raise Unreachable(f"cannot reach carreld at {endpoint.describe()}: {exc}") from exc
        try:
            return cls._handshake(sock, host, path, token, user_agent)
        except BaseException:
            sock.close()
            raise

    @classmethod
    def _handshake(
        cls, sock: socket.socket, host: str, path: str, token: str | None, user_agent: str
    ) -> "WebSocket":
        key = base64.b64encode(os.urandom(16)).decode("ascii")
        lines = [
            f"GET {path} HTTP/1.1",
            f"Host: {host}",
            "Upgrade: websocket",
            "Connection: Upgrade",
            f"Sec-WebSocket-Key: {key}",
            "Sec-WebSocket-Version: 13",
            f"User-Agent: {user_agent}",
        ]
        if token:
            lines.append(f"Authorization: Bearer {token}")
        try:
            sock.sendall(("\r\n".join(lines) + "\r\n\r\n").encode("latin-1"))
            head, rest = _read_head(sock)
            status, headers = _parse_head(head)
            if status != 101:
                raise _refusal(sock, status, headers, rest)
        except socket.timeout as exc:
            raise Timeout("carreld did not answer the websocket handshake in time") from exc
        except OSError as exc:
            raise Unreachable(f"the websocket handshake failed: {exc}") from exc
        if headers.get("upgrade", "").lower() != "websocket" or "upgrade" not in [
            t.strip() for t in headers.get("connection", "").lower().split(",")
        ]:
            raise ProtocolError("the reply to the handshake is not a websocket upgrade")
        if headers.get("sec-websocket-accept") != accept_of(key):
            raise ProtocolError("the server's Sec-WebSocket-Accept does not match the key sent")
        return cls(sock, rest)

    def send(self, opcode: int, payload: bytes) -> None:
        """One whole message (or a control frame), masked."""
        if self.closed:
            raise ProtocolError("the websocket is closed")
        try:
            # A recv may have left a short timeout on the socket: a write gets its own.
            self._sock.settimeout(SEND_TIMEOUT)
            self._sock.sendall(encode_frame(opcode, payload))
        except OSError as exc:
            self._drop()
            raise Unreachable(f"the websocket connection failed: {exc}") from exc

    def recv(self, timeout: float | None = None) -> tuple[int, bytes] | None:
        """The next data message as ``(OP_TEXT or OP_BINARY, payload)``; ``(OP_CLOSE, b"")``
        once the connection closed; None when ``timeout`` seconds passed without one. Pings
        are answered and the close handshake completed here."""
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            if self.closed:
                return OP_CLOSE, b""
            frame = parse_frame(self._buf)
            if frame is None:
                if not self._fill(deadline):
                    return None
                continue
            message = self._take(frame)
            if message is not None:
                return message

    def _take(self, frame: Frame) -> tuple[int, bytes] | None:
        if frame.opcode == OP_PING:
            self.send(OP_PONG, frame.payload)
            return None
        if frame.opcode == OP_PONG:
            return None
        if frame.opcode == OP_CLOSE:
            self._on_close(frame.payload)
            return OP_CLOSE, b""
        if frame.opcode == OP_CONT:
            if not self._parts:
                raise ProtocolError("a continuation frame without a message to continue")
        elif self._parts:
            raise ProtocolError("a new message before the last one's final fragment")
        else:
            self._part_op = frame.opcode
        self._size += len(frame.payload)
        if self._size > MAX_MESSAGE:
            raise ProtocolError(f"a message over {MAX_MESSAGE} bytes")
        self._parts.append(frame.payload)
        if not frame.fin:
            return None
        payload = b"".join(self._parts)
        self._parts, self._size = [], 0
        return self._part_op, payload

    def _fill(self, deadline: float | None) -> bool:
        """Reads more bytes; False when the deadline passed first."""
        left = None if deadline is None else deadline - time.monotonic()
        if left is not None and left <= 0:
            return False
        try:
            self._sock.settimeout(left)
            chunk = self._sock.recv(READ_CHUNK)
        except socket.timeout:
            return False
        except OSError as exc:
            self._drop()
            raise Unreachable(f"the websocket connection failed: {exc}") from exc
        if not chunk:
            # Gone without a close frame: 1006 (RFC 6455 7.1.5).
            self.close_code = self.close_code or 1006
            self._drop()
        self._buf += chunk
        return True

    def _on_close(self, payload: bytes) -> None:
        if len(payload) >= 2:
            self.close_code = struct.unpack("!H", payload[:2])[0]
            self.close_reason = payload[2:].decode("utf-8", "replace")
        else:
            self.close_code = 1005  # no status in the frame
        try:
            self._sock.sendall(encode_frame(OP_CLOSE, payload[:2]))
        except OSError:
            pass
        self._drop()

    def close(self, code: int = CLOSE_NORMAL, reason: str = "", wait: float = 2.0) -> None:
        """Starts the close handshake and waits up to ``wait`` seconds for the server's."""
        if self.closed:
            return
        try:
            self._sock.settimeout(wait)
            self._sock.sendall(
                encode_frame(OP_CLOSE, struct.pack("!H", code) + reason.encode()[:123])
            )
            deadline = time.monotonic() + wait
            while not self.closed and time.monotonic() < deadline:
                frame = parse_frame(self._buf)
                if frame is None:
                    if not self._fill(deadline):
                        break
                elif frame.opcode == OP_CLOSE:
                    if len(frame.payload) >= 2:
                        self.close_code = struct.unpack("!H", frame.payload[:2])[0]
                    break
        except (OSError, CarrelError):
            pass
        self._drop()

    def _drop(self) -> None:
        self.closed = True
        try:
            self._sock.close()
        except OSError:
            pass
