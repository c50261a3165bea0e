"""Where carreld is and which token to send: the same rules as the ``carrel`` CLI."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

DEFAULT_SOCKET = "/run/carrel/carreld.sock"
DEFAULT_STATE_DIR = "/var/lib/carrel"
MAX_TOKEN_BYTES = 4096


@dataclass(frozen=True)
class Endpoint:
    """A resolved endpoint: exactly one of ``socket`` and ``url`` is set."""

    socket: str | None
    url: str | None

    def describe(self) -> str:
        return self.url or f"unix:{self.socket}"


def resolve_endpoint(url: str | None = None, socket: str | None = None) -> Endpoint:
    """The argument wins; then ``CARREL_URL`` (TCP), then ``CARREL_SOCKET``, then
    ``/run/carrel/carreld.sock``, like the CLI's ``--url``/``--socket``."""
    if url and socket:
        raise ValueError("give either url or socket, not both")
    if url:
        return Endpoint(None, _check_url(url))
    if socket:
        return Endpoint(socket, None)
    env_url = os.environ.get("CARREL_URL")
    if env_url:
        return Endpoint(None, _check_url(env_url))
    return Endpoint(os.environ.get("CARREL_SOCKET") or DEFAULT_SOCKET, None)


def _check_url(url: str) -> str:
    if not (url.startswith("http://") or url.startswith("https://")):
        raise ValueError(f"invalid carreld URL {url!r}: http://HOST:PORT or https://HOST:PORT")
    if "@" in url.split("//", 1)[1].split("/", 1)[0]:
        # A URL with credentials would end up in error messages; tokens go in a header.
        raise ValueError("the carreld URL must not carry credentials: pass token= instead")
    return url.rstrip("/")


def read_token_file(path: str | os.PathLike[str]) -> str:
    """One token from a file: stripped, at most 4096 bytes, no control characters."""
    data = Path(path).read_bytes()
    token = data.decode("utf-8", "replace").strip()
    if len(data) > MAX_TOKEN_BYTES + 1 or not _clean(token):
        raise ValueError(
            f"token file {str(path)!r} must hold one token: at most {MAX_TOKEN_BYTES} bytes, "
            "no control characters"
        )
    return token


def _clean(token: str) -> bool:
    return bool(token) and all(ord(c) >= 0x20 and ord(c) != 0x7F for c in token)


def resolve_token(
    token: str | None = None,
    token_file: str | os.PathLike[str] | None = None,
    state_dir: str | os.PathLike[str] | None = None,
) -> str | None:
    """The token: the argument, else ``token_file``, else ``CARREL_TOKEN``, else
    ``STATE_DIR/admin.token`` when it is readable (``state_dir``, else ``CARREL_STATE_DIR``,
    else ``/var/lib/carrel``), else None (only ``/v1/healthz`` answers without one)."""
    if token is not None:
        token = token.strip()
        if not _clean(token):
            raise ValueError("the token is empty or contains control characters")
        return token
    if token_file is not None:
        return read_token_file(token_file)
    env = os.environ.get("CARREL_TOKEN")
    if env and env.strip():
        return resolve_token(env)
    base = state_dir or os.environ.get("CARREL_STATE_DIR") or DEFAULT_STATE_DIR
    path = Path(base) / "admin.token"
    if os.access(path, os.R_OK):
        try:
            return read_token_file(path)
        except (OSError, ValueError):
            return None
    return None
