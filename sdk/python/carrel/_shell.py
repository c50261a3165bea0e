"""An interactive terminal in the guest: ``GET /v1/sessions/{id}/shell`` as a :class:`Shell`.

The protocol is carreld's (``manager/api/api-shell.c``): binary frames both ways are the
terminal's bytes; text frames are JSON control messages, ``{"type":"resize","rows":R,"cols":C}``
and ``{"type":"eof"}`` from us, ``{"type":"started","handle":H}``,
``{"type":"exit","exit_code":N}`` (then a normal close) and ``{"type":"error","error":{...}}``
(then a close) from carreld. Closing the socket kills the shell in the guest, with everything
it started.
"""

from __future__ import annotations

import json
import time
from typing import Any

from ._websocket import (
    CLOSE_NORMAL,
    CLOSE_PROTOCOL,
    OP_BINARY,
    OP_CLOSE,
    OP_TEXT,
    ProtocolError,
    WebSocket,
)
from .errors import CarrelError, Failed, Timeout, error_from_reply

SIZE_MAX = 1000  # rows and columns, as carreld's CARREL_SHELL_SIZE_MAX


def check_size(cols: int, rows: int) -> None:
    for what, n in (("cols", cols), ("rows", rows)):
        if not isinstance(n, int) or isinstance(n, bool) or not 1 <= n <= SIZE_MAX:
            raise ValueError(f"{what} must be a number from 1 to {SIZE_MAX}")


class Shell:
    """A login shell on a pseudo-terminal in the guest, as the desktop user.

    Use it as a context manager (leaving closes it), or call :meth:`close`. Not thread-safe:
    one thread reads and writes.

    Attributes:
        handle: the shell's handle in the guest (from carreld's ``started`` message), or None.
        exit_code: the shell's exit code once it ended, else None.
    """

    def __init__(self, ws: WebSocket) -> None:
        self._ws = ws
        self._pending = bytearray()  # output read past a read_until marker
        self.handle: str | None = None
        self.exit_code: int | None = None
        self._error: CarrelError | None = None
        self._ended = False

    def send(self, data: bytes | str) -> None:
        """Types ``data`` into the terminal (``str`` as UTF-8): ``"ls\\n"``, ``"\\x03"``..."""
        payload = data.encode("utf-8") if isinstance(data, str) else bytes(data)
        if payload:
            self._ws.send(OP_BINARY, payload)

    def resize(self, cols: int, rows: int) -> None:
        """Gives the terminal a new size (1..1000 each); programs in it get SIGWINCH."""
        check_size(cols, rows)
        self._control({"type": "resize", "rows": rows, "cols": cols})

    def eof(self) -> None:
        """Ends the terminal's input: what was sent is read, then end of file (like ^D)."""
        self._control({"type": "eof"})

    def _control(self, message: dict[str, Any]) -> None:
        self._ws.send(OP_TEXT, json.dumps(message).encode())

    def recv(self, timeout: float | None = None) -> bytes:
        """The terminal's next output; ``b""`` once the shell ended (see :attr:`exit_code`).

        Raises :class:`carrel.Timeout` when ``timeout`` seconds pass without output, the
        API's error when carreld reported one, and :class:`carrel.Failed` when the connection
        ended before the shell did.
        """
        if self._pending:
            out = bytes(self._pending)
            self._pending.clear()
            return out
        deadline = None if timeout is None else time.monotonic() + timeout
        while not self._ended:
            left = None if deadline is None else max(0.0, deadline - time.monotonic())
            try:
                message = self._ws.recv(left)
            except ProtocolError:
                self._ws.close(CLOSE_PROTOCOL, "protocol error")
                raise
            if message is None:
                raise Timeout(f"no output from the shell in {timeout} s")
            op, payload = message
            if op == OP_BINARY and payload:
                return payload
            if op == OP_TEXT:
                self._on_control(payload)
            elif op == OP_CLOSE:
                self._ended = True
        self._raise_end()
        return b""

    def _on_control(self, payload: bytes) -> None:
        try:
            message = json.loads(payload)
        except ValueError:
            return
        if not isinstance(message, dict):
            return
        kind = message.get("type")
        if kind == "started" and isinstance(message.get("handle"), str):
            self.handle = message["handle"]
        elif kind == "exit":
            code = message.get("exit_code")
            self.exit_code = code if isinstance(code, int) and not isinstance(code, bool) else 1
        elif kind == "error" and self._error is None:
            self._error = error_from_reply(500, message)

    def _raise_end(self) -> None:
        if self._error is not None:
            raise self._error
        if self.exit_code is None and self._ws.close_code not in (CLOSE_NORMAL, None):
            raise Failed(
                "the connection ended before the shell did (close code "
                f"{self._ws.close_code}{': ' + self._ws.close_reason if self._ws.close_reason else ''})"
            )

    def read_until(self, marker: bytes | str, timeout: float = 30.0) -> bytes:
        """The output up to and including ``marker`` (what follows stays for the next read).

        Raises :class:`carrel.Timeout` when it does not come within ``timeout`` seconds, and
        :class:`carrel.Failed` when the shell ends first."""
        want = marker.encode("utf-8") if isinstance(marker, str) else bytes(marker)
        seen = bytearray()
        deadline = time.monotonic() + timeout
        while want not in seen:
            left = deadline - time.monotonic()
            if left <= 0:
                raise Timeout(f"{want!r} did not come from the shell in {timeout} s")
            chunk = self.recv(left)
            if not chunk:
                raise Failed(f"the shell ended before {want!r} came")
            seen += chunk
        end = seen.index(want) + len(want)
        self._pending[:0] = seen[end:]
        return bytes(seen[:end])

    def read_all(self, timeout: float = 60.0) -> bytes:
        """Everything the terminal prints until the shell ends; then :attr:`exit_code` is set."""
        out = bytearray()
        deadline = time.monotonic() + timeout
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                raise Timeout(f"the shell did not end in {timeout} s")
            chunk = self.recv(left)
            if not chunk:
                return bytes(out)
            out += chunk

    @property
    def closed(self) -> bool:
        """True once the connection is closed (by either side)."""
        return self._ws.closed

    def close(self) -> None:
        """Closes the connection, which kills the shell in the guest if it still runs."""
        self._ws.close()
        self._ended = True

    def __enter__(self) -> "Shell":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"Shell(handle={self.handle!r}, exit_code={self.exit_code!r})"
