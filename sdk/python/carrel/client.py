"""HTTP clients of carreld's API: :class:`Client` (blocking) and :class:`AsyncClient`.

Both speak to carreld on its Unix socket (default ``/run/carrel/carreld.sock``) or over TCP
(``http://127.0.0.1:PORT``, or ``https://HOST:PORT`` when carreld serves TLS), with a bearer
token found as the CLI finds it. Each method maps to one route of the API (see
``manager/api/README.md``); replies are the API's JSON as ``dict``/``list``, images and files
are ``bytes``, and every error reply raises the :mod:`carrel.errors` class of its code.
"""

from __future__ import annotations

import base64
import json
import os
from dataclasses import dataclass, field
from typing import Any, Callable, Generic, Iterable, Iterator, Mapping, Sequence, TypeVar
from urllib.parse import quote

import httpx

from . import __version__
from ._config import Endpoint, resolve_endpoint, resolve_token
from ._shell import Shell, check_size
from ._websocket import WebSocket
from .errors import CarrelError, Timeout, Unreachable, error_from_reply

DEFAULT_TIMEOUT = 900.0  # long enough for a cold create under TCG, like the CLI

T = TypeVar("T")
Json = Any


@dataclass(frozen=True)
class CommandResult:
    """What a command did in the guest (``POST /v1/sessions/{id}/exec``).

    ``stdout``/``stderr`` are text (made valid UTF-8 by carreld), capped at 1 MiB each
    (``truncated`` says so); ``timed_out`` is true when carreld killed it at its timeout.
    """

    exit_code: int
    stdout: str
    stderr: str
    truncated: bool = False
    timed_out: bool = False
    duration_ms: int = 0

    @classmethod
    def from_json(cls, obj: Mapping[str, Any]) -> "CommandResult":
        return cls(
            exit_code=int(obj.get("exit_code", -1)),
            stdout=str(obj.get("stdout", "")),
            stderr=str(obj.get("stderr", "")),
            truncated=bool(obj.get("truncated", False)),
            timed_out=bool(obj.get("timed_out", False)),
            duration_ms=int(obj.get("duration_ms", 0)),
        )

    @property
    def ok(self) -> bool:
        """True when the command exited 0 and was not killed."""
        return self.exit_code == 0 and not self.timed_out


@dataclass
class _Req(Generic[T]):
    """One API call: what to send and how to read the reply."""

    method: str
    path: str
    params: dict[str, Any] | None = None
    json: Any = None
    content: bytes | None = None
    content_type: str | None = None
    raw: bool = False  # reply as bytes
    timeout: float | None = None
    then: Callable[[Any], T] = field(default=lambda r: r)  # type: ignore[assignment]


def _seg(value: str) -> str:
    """One path segment: an id or a name, quoted."""
    if not isinstance(value, str) or not value:
        raise ValueError("an id or name must be a non-empty string")
    return quote(value, safe="")


def _drop_none(d: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in d.items() if v is not None}


def argv_of(cmd: str | Sequence[str]) -> list[str]:
    """A command as argv: a string runs under ``/bin/sh -c``, a sequence runs as given."""
    if isinstance(cmd, str):
        return ["/bin/sh", "-c", cmd]
    argv = [str(a) for a in cmd]
    if not argv:
        raise ValueError("an empty command")
    return argv


class _Api:
    """The routes, written once for both clients: each method builds a :class:`_Req` and
    hands it to ``_call``, which returns the value (sync) or an awaitable of it (async)."""

    def _call(self, req: _Req[Any]) -> Any:  # pragma: no cover - overridden
        raise NotImplementedError

    # Server.
    def health(self) -> Any:
        """``GET /v1/healthz`` (no token needed): ``{"status": "ok"}``."""
        return self._call(_Req("GET", "/v1/healthz"))

    def version(self) -> Any:
        """``GET /v1/version``: version, accelerator and its reason, libvirt URI."""
        return self._call(_Req("GET", "/v1/version"))

    def whoami(self) -> Any:
        """``GET /v1/whoami``: the principal of this token (id, name, role)."""
        return self._call(_Req("GET", "/v1/whoami"))

    def roles(self) -> Any:
        """``GET /v1/roles``: the role matrix in force."""
        return self._call(_Req("GET", "/v1/roles"))

    # Templates, pools, policies, jobs.
    def templates(self) -> Any:
        """``GET /v1/templates``: every template version, as a list."""
        return self._call(_Req("GET", "/v1/templates", then=lambda r: r["templates"]))

    def template(self, ref: str) -> Any:
        """``GET /v1/templates/{name[@version]}``: the template, with ``versions``."""
        return self._call(_Req("GET", f"/v1/templates/{_seg(ref)}"))

    def import_template(
        self,
        name: str,
        disk: str,
        format: str,
        *,
        kernel: str | None = None,
        initrd: str | None = None,
        cmdline: str | None = None,
        firmware: str | None = None,
    ) -> Any:
        """``POST /v1/templates`` (admin): import a host image as a new, read-only version."""
        body = _drop_none(
            {
                "name": name,
                "disk": disk,
                "format": format,
                "kernel": kernel,
                "initrd": initrd,
                "cmdline": cmdline,
                "firmware": firmware,
            }
        )
        return self._call(_Req("POST", "/v1/templates", json=body))

    def remove_template(self, ref: str) -> Any:
        """``DELETE /v1/templates/{name}``: the refs deleted; :class:`WrongState` while
        sessions use it."""
        return self._call(
            _Req("DELETE", f"/v1/templates/{_seg(ref)}", then=lambda r: r["deleted"])
        )

    def build_template(self, name: str) -> Any:
        """``POST /v1/templates/{name}/build`` (admin): the build job."""
        return self._call(_Req("POST", f"/v1/templates/{_seg(name)}/build", json={}))

    def warm_template(self, name: str, version: int | None = None) -> Any:
        """``POST /v1/templates/{name}/warm`` (admin): the warm job."""
        return self._call(
            _Req(
                "POST",
                f"/v1/templates/{_seg(name)}/warm",
                json=_drop_none({"version": version}),
            )
        )

    def set_pool(self, template: str, size: int) -> Any:
        """``PUT /v1/templates/{name}/pool`` (admin): keep ``size`` paused sessions ready."""
        return self._call(
            _Req(
                "PUT",
                f"/v1/templates/{_seg(template)}/pool",
                json={"size": size},
                then=lambda r: r["pools"],
            )
        )

    def pools(self) -> Any:
        """``GET /v1/pools``: every warm pool."""
        return self._call(_Req("GET", "/v1/pools", then=lambda r: r["pools"]))

    def policies(self) -> Any:
        """``GET /v1/policies``: the named policies this token may use."""
        return self._call(_Req("GET", "/v1/policies", then=lambda r: r["policies"]))

    def policy(self, name: str) -> Any:
        """``GET /v1/policies/{name}``."""
        return self._call(_Req("GET", f"/v1/policies/{_seg(name)}"))

    def job(self, job_id: str) -> Any:
        """``GET /v1/jobs/{id}``: a build, warm or memory-reclaim job."""
        return self._call(_Req("GET", f"/v1/jobs/{_seg(job_id)}"))

    # Sessions.
    def sessions(self, all: bool = False) -> Any:
        """``GET /v1/sessions``: the sessions (``all=True`` includes destroyed ones)."""
        return self._call(
            _Req(
                "GET",
                "/v1/sessions",
                params={"all": "1"} if all else None,
                then=lambda r: r["sessions"],
            )
        )

    def session(self, session: str) -> Any:
        """``GET /v1/sessions/{id}``: one session, by id or name."""
        return self._call(_Req("GET", f"/v1/sessions/{_seg(session)}"))

    def create_session(
        self,
        template: str,
        *,
        name: str | None = None,
        policy: str | None = None,
        vcpus: int | None = None,
        memory_mib: int | None = None,
        screen: str | None = None,
        cold: bool | None = None,
        ttl_s: int | None = None,
        idle_timeout_s: int | None = None,
        on_expiry: str | None = None,
        artifacts: Sequence[str] | None = None,
        inputs: Sequence[Mapping[str, Any]] | None = None,
    ) -> Any:
        """``POST /v1/sessions``: a new session, returned once its desktop is ready.

        ``inputs`` are the API's ``{path, content_base64, mode?}``/``{path, upload}`` objects;
        :func:`carrel.input_file` builds the first kind. ``screen`` is ``"WIDTHxHEIGHT"``
        (640x480 to 1920x1200, the width a multiple of 8); ``vcpus``, ``memory_mib`` and
        ``screen`` default to the template's ``defaults``.
        """
        body = _drop_none(
            {
                "template": template,
                "name": name,
                "policy": policy,
                "vcpus": vcpus,
                "memory_mib": memory_mib,
                "screen": screen,
                "cold": cold,
                "ttl_s": ttl_s,
                "idle_timeout_s": idle_timeout_s,
                "on_expiry": on_expiry,
                "artifacts": list(artifacts) if artifacts is not None else None,
                "inputs": [dict(i) for i in inputs] if inputs is not None else None,
            }
        )
        return self._call(_Req("POST", "/v1/sessions", json=body))

    def destroy_session(self, session: str) -> Any:
        """``DELETE /v1/sessions/{id}``: the session, state ``destroyed``."""
        return self._call(_Req("DELETE", f"/v1/sessions/{_seg(session)}"))

    def _verb(self, session: str, verb: str, body: Any = None) -> Any:
        return self._call(_Req("POST", f"/v1/sessions/{_seg(session)}/{verb}", json=body))

    def start_session(self, session: str) -> Any:
        """``POST .../start``: running again, guest agent answering."""
        return self._verb(session, "start")

    def stop_session(self, session: str, timeout_s: int | None = None) -> Any:
        """``POST .../stop``: graceful, then forced after ``timeout_s`` (default 30)."""
        return self._verb(session, "stop", _drop_none({"timeout_s": timeout_s}))

    def pause_session(self, session: str) -> Any:
        """``POST .../pause``: vCPUs stopped, memory kept."""
        return self._verb(session, "pause")

    def resume_session(self, session: str) -> Any:
        """``POST .../resume``: a paused or hibernated session runs again."""
        return self._verb(session, "resume")

    def hibernate_session(self, session: str) -> Any:
        """``POST .../hibernate``: memory saved to disk, no QEMU left."""
        return self._verb(session, "hibernate")

    def create_snapshot(self, session: str, name: str) -> Any:
        """``POST .../snapshots``: with memory when running, disk only when stopped."""
        return self._verb(session, "snapshots", {"name": name})

    def snapshots(self, session: str) -> Any:
        """``GET .../snapshots``: oldest first."""
        return self._call(
            _Req(
                "GET",
                f"/v1/sessions/{_seg(session)}/snapshots",
                then=lambda r: r["snapshots"],
            )
        )

    def delete_snapshot(self, session: str, name: str) -> Any:
        """``DELETE .../snapshots/{name}``: ``{deleted, layer_kept}``."""
        return self._call(
            _Req("DELETE", f"/v1/sessions/{_seg(session)}/snapshots/{_seg(name)}")
        )

    def revert_session(self, session: str, snapshot: str) -> Any:
        """``POST .../revert``: the session, back at the snapshot."""
        return self._verb(session, "revert", {"snapshot": snapshot})

    def fork_session(
        self, session: str, snapshot: str | None = None, count: int | None = None
    ) -> Any:
        """``POST .../fork``: ``count`` new running sessions (a list) from a snapshot."""
        return self._call(
            _Req(
                "POST",
                f"/v1/sessions/{_seg(session)}/fork",
                json=_drop_none({"snapshot": snapshot, "count": count}),
                then=lambda r: r["sessions"],
            )
        )

    # Commands and files.
    def exec(
        self,
        session: str,
        cmd: str | Sequence[str],
        *,
        timeout: int | None = None,
        cwd: str | None = None,
        env: Mapping[str, str] | None = None,
        stdin: str | bytes | None = None,
    ) -> Any:
        """``POST .../exec``: a :class:`CommandResult`. A string runs as ``/bin/sh -c CMD``;
        a list runs as given. ``timeout`` is carreld's (seconds, default 60, at most 3600)."""
        body: dict[str, Any] = {"argv": argv_of(cmd)}
        if timeout is not None:
            body["timeout_s"] = int(timeout)
        if cwd is not None:
            body["cwd"] = cwd
        if env is not None:
            body["env"] = dict(env)
        if isinstance(stdin, str):
            body["stdin"] = stdin
        elif stdin is not None:
            body["stdin_base64"] = base64.b64encode(stdin).decode()
        return self._call(
            _Req(
                "POST",
                f"/v1/sessions/{_seg(session)}/exec",
                json=body,
                timeout=(timeout or 60) + 60.0,
                then=CommandResult.from_json,
            )
        )

    def _exec_body(
        self,
        cmd: str | Sequence[str],
        timeout: int | None,
        cwd: str | None,
        env: Mapping[str, str] | None,
        stdin: str | bytes | None,
    ) -> dict[str, Any]:
        body: dict[str, Any] = {"argv": argv_of(cmd)}
        if timeout is not None:
            body["timeout_s"] = int(timeout)
        if cwd is not None:
            body["cwd"] = cwd
        if env is not None:
            body["env"] = dict(env)
        if isinstance(stdin, str):
            body["stdin"] = stdin
        elif stdin is not None:
            body["stdin_base64"] = base64.b64encode(stdin).decode()
        return body

    # Background processes (``exec`` with ``background``, and ``/processes``).
    def start_process(
        self,
        session: str,
        cmd: str | Sequence[str],
        *,
        cwd: str | None = None,
        env: Mapping[str, str] | None = None,
        stdin: str | bytes | None = None,
    ) -> Any:
        """``POST .../exec`` with ``background``: the process (``handle``, ``pid``, ``state``);
        it runs on, its input left open (``stdin`` is written first)."""
        body = self._exec_body(cmd, None, cwd, env, stdin)
        body["background"] = True
        return self._call(_Req("POST", f"/v1/sessions/{_seg(session)}/exec", json=body))

    def processes(self, session: str) -> Any:
        """``GET .../processes``: the session's background processes, oldest first."""
        return self._call(
            _Req(
                "GET",
                f"/v1/sessions/{_seg(session)}/processes",
                then=lambda r: r["processes"],
            )
        )

    def process_output(
        self, session: str, handle: str, stdout_offset: int = 0, stderr_offset: int = 0
    ) -> Any:
        """``GET .../processes/{handle}``: state, exit code, output from these byte offsets
        (``stdout``, ``stdout_base64``, ``stdout_next``..., ``more``)."""
        return self._call(
            _Req(
                "GET",
                f"/v1/sessions/{_seg(session)}/processes/{_seg(handle)}",
                params={"stdout_offset": stdout_offset, "stderr_offset": stderr_offset},
            )
        )

    def kill_process(self, session: str, handle: str, signal: str | int | None = None) -> Any:
        """``POST .../processes/{handle}/kill``: TERM by default, to its process group."""
        return self._call(
            _Req(
                "POST",
                f"/v1/sessions/{_seg(session)}/processes/{_seg(handle)}/kill",
                json=_drop_none({"signal": signal}),
            )
        )

    def write_process_stdin(
        self, session: str, handle: str, data: str | bytes | None = None, close: bool = False
    ) -> Any:
        """``POST .../processes/{handle}/stdin``: writes ``data``, then ends the input when
        ``close``."""
        body: dict[str, Any] = {}
        if isinstance(data, str):
            body["data"] = data
        elif data is not None:
            body["data_base64"] = base64.b64encode(data).decode()
        if close:
            body["close"] = True
        return self._call(
            _Req(
                "POST",
                f"/v1/sessions/{_seg(session)}/processes/{_seg(handle)}/stdin",
                json=body,
            )
        )

    def read_file(self, session: str, path: str) -> Any:
        """``GET .../files?path=``: the file's bytes (carreld streams up to 1 GiB; this holds
        the reply in memory)."""
        return self._call(
            _Req("GET", f"/v1/sessions/{_seg(session)}/files", params={"path": path}, raw=True)
        )

    def write_file(self, session: str, path: str, data: str | bytes) -> Any:
        """``PUT .../files?path=``: ``{path, bytes}``; a ``str`` is written as UTF-8."""
        content = data.encode() if isinstance(data, str) else bytes(data)
        return self._call(
            _Req(
                "PUT",
                f"/v1/sessions/{_seg(session)}/files",
                params={"path": path},
                content=content,
                content_type="application/octet-stream",
            )
        )

    # File operations (carrel-guest fs, as root in the guest; absolute paths).
    def list_dir(self, session: str, path: str) -> Any:
        """``GET .../fs?path=``: ``{path, entries: [{name, type, size, mode, mtime,
        target?}], truncated}``; a name that is not clean text is ``None`` with
        ``name_escaped`` and ``name_error``."""
        return self._call(
            _Req("GET", f"/v1/sessions/{_seg(session)}/fs", params={"path": path})
        )

    def stat(self, session: str, path: str) -> Any:
        """``GET .../fs/stat?path=``: ``{path, entry}`` (lstat: a symlink itself)."""
        return self._call(
            _Req("GET", f"/v1/sessions/{_seg(session)}/fs/stat", params={"path": path})
        )

    def mkdir(self, session: str, path: str, parents: bool = False) -> Any:
        """``POST .../fs/mkdir``: ``{path, created}``."""
        return self._call(
            _Req(
                "POST",
                f"/v1/sessions/{_seg(session)}/fs/mkdir",
                json={"path": path, "parents": bool(parents)},
            )
        )

    def remove(self, session: str, path: str, recursive: bool = False) -> Any:
        """``POST .../fs/remove``: ``{path}``; a non-empty directory needs ``recursive``
        (:class:`carrel.WrongState` otherwise)."""
        return self._call(
            _Req(
                "POST",
                f"/v1/sessions/{_seg(session)}/fs/remove",
                json={"path": path, "recursive": bool(recursive)},
            )
        )

    def move(self, session: str, src: str, dst: str) -> Any:
        """``POST .../fs/move``: ``{path: dst, from: src}``; :class:`carrel.Exists` when
        ``dst`` exists."""
        return self._call(
            _Req(
                "POST",
                f"/v1/sessions/{_seg(session)}/fs/move",
                json={"from": src, "to": dst},
            )
        )

    # Screen and input.
    def screenshot(
        self,
        session: str,
        *,
        format: str | None = None,
        quality: int | None = None,
        scale: float | None = None,
        max_edge: int | None = None,
        region: tuple[int, int, int, int] | None = None,
    ) -> Any:
        """``GET .../screenshot``: PNG (or JPEG) bytes taken by the hypervisor."""
        params = _drop_none(
            {
                "format": format,
                "quality": quality,
                "scale": scale,
                "max_edge": max_edge,
                "region": ",".join(str(int(v)) for v in region) if region else None,
            }
        )
        return self._call(
            _Req("GET", f"/v1/sessions/{_seg(session)}/screenshot", params=params, raw=True)
        )

    def accessibility(
        self,
        session: str,
        *,
        scope: str | None = None,
        depth: int | None = None,
        max_nodes: int | None = None,
        model_screen: tuple[int, int] | None = None,
        app: str | None = None,
    ) -> Any:
        """``GET .../accessibility``: the AT-SPI tree ``{scope, count, truncated, root}``;
        every element ``{id, role, name, states, bounds, action, children}``. ``scope`` is
        ``"focused"`` (default) or ``"desktop"``; ``app`` (an application's accessibility
        name, e.g. ``"Firefox"``) walks the desktop with that application only;
        ``model_screen`` scales the bounds."""
        params = _drop_none(
            {
                "scope": scope,
                "app": app,
                "depth": depth,
                "max_nodes": max_nodes,
                "model_width": model_screen[0] if model_screen else None,
                "model_height": model_screen[1] if model_screen else None,
            }
        )
        return self._call(
            _Req("GET", f"/v1/sessions/{_seg(session)}/accessibility", params=params or None)
        )

    def computer(
        self,
        session: str,
        actions: Mapping[str, Any] | Iterable[Mapping[str, Any]],
        *,
        observe: str | None = None,
        scale: float | None = None,
        model_screen: tuple[int, int] | None = None,
        settle: Mapping[str, int] | None = None,
    ) -> Any:
        """``POST .../computer``: one action (a mapping) or a batch (a list of them), in any
        of the formats carreld reads (Anthropic's, OpenAI's, OSWorld's, carrel's own).

        ``observe`` is ``"final"``, ``"each"`` or ``"none"``; ``settle`` sets when an
        observation after HID events is taken (``window_ms``, ``quiet_ms``, ``max_ms``, or
        ``fixed_ms`` for a fixed wait). The reply is ``{results, screenshot, screen, pointer,
        duration_ms, settled?, settled_ms?}``; screenshots carry their PNG as base64 ``data``
        and, after HID events, ``settled``, ``settled_ms`` (from the last event to the frame),
        ``changed`` and ``samples``.
        """
        simple = observe is None and scale is None and not model_screen and settle is None
        if isinstance(actions, Mapping) and simple:
            body: Any = dict(actions)
        else:
            batch = [dict(actions)] if isinstance(actions, Mapping) else [dict(a) for a in actions]
            body = _drop_none({"actions": batch, "observe": observe, "scale": scale})
            if settle is not None:
                body["settle"] = dict(settle)
            if model_screen:
                body["model_screen"] = {"width": model_screen[0], "height": model_screen[1]}
        return self._call(_Req("POST", f"/v1/sessions/{_seg(session)}/computer", json=body))

    # Review.
    def events(self, session: str, after: int | None = None, limit: int | None = None) -> Any:
        """``GET .../events``: the session's timeline (oldest first, after ``seq``)."""
        return self._call(
            _Req(
                "GET",
                f"/v1/sessions/{_seg(session)}/events",
                params=_drop_none({"after": after, "limit": limit}),
                then=lambda r: r["events"],
            )
        )

    def egress(self, session: str, after: int | None = None, limit: int | None = None) -> Any:
        """``GET .../egress``: what the session tried to reach and what was decided."""
        return self._call(
            _Req(
                "GET",
                f"/v1/sessions/{_seg(session)}/egress",
                params=_drop_none({"after": after, "limit": limit}),
                then=lambda r: r["egress"],
            )
        )

    def extract(
        self,
        session: str,
        paths: Sequence[str],
        *,
        max_bytes_mib: int | None = None,
        max_files: int | None = None,
    ) -> Any:
        """``POST .../artifacts``: an extraction (check its ``error`` and ``missing``)."""
        body = _drop_none(
            {"paths": list(paths), "max_bytes_mib": max_bytes_mib, "max_files": max_files}
        )
        return self._call(_Req("POST", f"/v1/sessions/{_seg(session)}/artifacts", json=body))

    def extractions(self, session: str) -> Any:
        """``GET .../artifacts``: every extraction, asked for or on exit."""
        return self._call(
            _Req(
                "GET",
                f"/v1/sessions/{_seg(session)}/artifacts",
                then=lambda r: r["extractions"],
            )
        )

    def artifact(self, artifact_id: str) -> Any:
        """``GET /v1/artifacts/{id}``: an extracted file's bytes."""
        return self._call(_Req("GET", f"/v1/artifacts/{_seg(artifact_id)}", raw=True))

    def diff(self, session: str, path: str | None = None) -> Any:
        """``GET .../diff``: ``{added, changed, removed}`` against the template."""
        return self._call(
            _Req(
                "GET",
                f"/v1/sessions/{_seg(session)}/diff",
                params=_drop_none({"path": path}),
            )
        )

    # Tokens (admin).
    def tokens(self) -> Any:
        """``GET /v1/tokens`` (admin)."""
        return self._call(_Req("GET", "/v1/tokens", then=lambda r: r["tokens"]))

    def create_token(
        self,
        name: str,
        role: str = "agent",
        *,
        expires: str | None = None,
        policies: Sequence[str] | None = None,
    ) -> Any:
        """``POST /v1/tokens`` (admin): the new token (its secret is shown once)."""
        body = _drop_none(
            {
                "name": name,
                "role": role,
                "expires": expires,
                "policies": list(policies) if policies is not None else None,
            }
        )
        return self._call(_Req("POST", "/v1/tokens", json=body))

    def revoke_token(self, name: str) -> Any:
        """``DELETE /v1/tokens/{name}`` (admin)."""
        return self._call(_Req("DELETE", f"/v1/tokens/{_seg(name)}"))


_STREAM_KEEP = 1024 * 1024


def _sse_events(lines: Iterable[str]) -> Iterator[tuple[str, dict[str, Any]]]:
    """(event, data) of a text/event-stream; data is JSON (an object), other lines ignored."""
    event = None
    for raw in lines:
        line = raw.rstrip("\r\n")  # some httpx versions keep the line's end
        if line.startswith("event: "):
            event = line[7:]
        elif line.startswith("data: ") and event:
            data = json.loads(line[6:])
            yield event, data if isinstance(data, dict) else {}
            event = None


def _headers(token: str | None) -> dict[str, str]:
    headers = {"User-Agent": f"carrel-python/{__version__}", "Accept": "application/json"}
    if token:
        headers["Authorization"] = f"Bearer {token}"
    return headers


def _parse(resp: httpx.Response, req: _Req[Any]) -> Any:
    rid = resp.headers.get("x-request-id")
    if resp.status_code >= 400:
        try:
            body = resp.json()
        except ValueError:
            body = None
        raise error_from_reply(resp.status_code, body, rid, resp.headers)
    if req.raw:
        return req.then(resp.content)
    if resp.status_code == 204 or not resp.content:
        return req.then(None)
    return req.then(resp.json())


def _translate(exc: Exception, endpoint: Endpoint) -> CarrelError:
    if isinstance(exc, httpx.TimeoutException):
        return Timeout(f"no answer from carreld at {endpoint.describe()} in time: {exc}")
    return Unreachable(f"cannot reach carreld at {endpoint.describe()}: {exc}")


class _Base(_Api):
    endpoint: Endpoint
    token: str | None
    timeout: float

    def _setup(
        self,
        url: str | None,
        socket: str | None,
        token: str | None,
        token_file: str | os.PathLike[str] | None,
        state_dir: str | os.PathLike[str] | None,
        timeout: float,
    ) -> tuple[str, dict[str, str]]:
        self.endpoint = resolve_endpoint(url, socket)
        self.token = resolve_token(token, token_file, state_dir)
        self.timeout = timeout
        base = self.endpoint.url or "http://carreld"
        return base, _headers(self.token)

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.endpoint.describe()!r})"


class Client(_Base):
    """A blocking client of carreld.

    Args:
        url: ``http://127.0.0.1:PORT`` or ``https://HOST:PORT`` (else env ``CARREL_URL``).
        socket: carreld's Unix socket (else env ``CARREL_SOCKET``, else
            ``/run/carrel/carreld.sock``). Give ``url`` or ``socket``, not both.
        token: the API token; else ``token_file``; else env ``CARREL_TOKEN``; else
            ``STATE_DIR/admin.token`` when readable (``state_dir``, else env
            ``CARREL_STATE_DIR``, else ``/var/lib/carrel``).
        timeout: seconds for each request (default 900: a cold create under TCG is slow).
        verify: TLS verification for ``https://`` (``True``, ``False`` or a CA bundle path).

    The connection is kept alive between requests. Use it as a context manager, or call
    :meth:`close`. Every method raises a :class:`carrel.CarrelError` subclass on failure.
    """

    def __init__(
        self,
        url: str | None = None,
        *,
        socket: str | None = None,
        token: str | None = None,
        token_file: str | os.PathLike[str] | None = None,
        state_dir: str | os.PathLike[str] | None = None,
        timeout: float = DEFAULT_TIMEOUT,
        verify: bool | str = True,
    ) -> None:
        base, headers = self._setup(url, socket, token, token_file, state_dir, timeout)
        self._verify = verify
        transport = (
            httpx.HTTPTransport(uds=self.endpoint.socket, verify=verify)
            if self.endpoint.socket
            else httpx.HTTPTransport(verify=verify)
        )
        # trust_env=False: carreld is local, a proxy from the environment must never see the token.
        self._http = httpx.Client(
            base_url=base, headers=headers, transport=transport, timeout=timeout, trust_env=False
        )

    def _call(self, req: _Req[Any]) -> Any:
        headers = {"Content-Type": req.content_type} if req.content_type else None
        try:
            resp = self._http.request(
                req.method,
                req.path,
                params=req.params,
                json=req.json,
                content=req.content,
                headers=headers,
                timeout=max(self.timeout, req.timeout or 0),
            )
        except httpx.HTTPError as exc:
            raise _translate(exc, self.endpoint) from exc
        return _parse(resp, req)

    def exec_stream(
        self,
        session: str,
        cmd: str | Sequence[str],
        *,
        timeout: int | None = None,
        cwd: str | None = None,
        env: Mapping[str, str] | None = None,
        stdin: str | bytes | None = None,
        on_stdout: Callable[[str], None] | None = None,
        on_stderr: Callable[[str], None] | None = None,
    ) -> CommandResult:
        """``POST .../exec`` with ``stream``: calls ``on_stdout``/``on_stderr`` with each chunk
        as it comes (text), and returns the :class:`CommandResult` (output kept up to 1 MiB a
        stream). Leaving early (an exception in a callback) closes the stream, which kills the
        command in the guest."""
        body = self._exec_body(cmd, timeout, cwd, env, stdin)
        body["stream"] = True
        kept = {"stdout": [], "stderr": []}  # type: dict[str, list[str]]
        sizes = {"stdout": 0, "stderr": 0}
        end: dict[str, Any] = {}
        try:
            with self._http.stream(
                "POST",
                f"/v1/sessions/{_seg(session)}/exec",
                json=body,
                timeout=max(self.timeout, (timeout or 60) + 60.0),
            ) as resp:
                if resp.status_code >= 400:
                    resp.read()
                    _parse(resp, _Req("POST", ""))
                for event, data in _sse_events(resp.iter_lines()):
                    if event in ("stdout", "stderr"):
                        text = str(data.get("data", ""))
                        if sizes[event] < _STREAM_KEEP:
                            kept[event].append(text)
                            sizes[event] += len(text)
                        callback = on_stdout if event == "stdout" else on_stderr
                        if callback:
                            callback(text)
                    elif event == "exit":
                        end = data
                        break
                    elif event == "error":
                        raise error_from_reply(500, data, resp.headers.get("x-request-id"),
                                               resp.headers)
        except httpx.HTTPError as exc:
            raise _translate(exc, self.endpoint) from exc
        return CommandResult(
            exit_code=int(end.get("exit_code", -1) if end.get("exit_code") is not None else -1),
            stdout="".join(kept["stdout"]),
            stderr="".join(kept["stderr"]),
            truncated=bool(end.get("truncated", False))
            or max(sizes.values()) > _STREAM_KEEP,
            timed_out=bool(end.get("timed_out", False)),
            duration_ms=int(end.get("duration_ms", 0)),
        )

    def shell(self, session: str, *, cols: int = 80, rows: int = 24) -> Shell:
        """``GET .../shell``: an interactive terminal in the guest (a websocket), for the
        control lease's holder or an admin. See :class:`carrel.Shell`."""
        check_size(cols, rows)
        path = f"/v1/sessions/{_seg(session)}/shell?rows={rows}&cols={cols}"
        ws = WebSocket.connect(
            self.endpoint,
            path,
            self.token,
            verify=self._verify,
            timeout=min(self.timeout, 120.0),
            user_agent=f"carrel-python/{__version__}",
        )
        return Shell(ws)

    def close(self) -> None:
        """Closes the kept-alive connections."""
        self._http.close()

    def __enter__(self) -> "Client":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class AsyncClient(_Base):
    """The asyncio twin of :class:`Client`: the same methods, each a coroutine.

    Use ``async with AsyncClient() as c:`` or ``await c.aclose()``.
    """

    def __init__(
        self,
        url: str | None = None,
        *,
        socket: str | None = None,
        token: str | None = None,
        token_file: str | os.PathLike[str] | None = None,
        state_dir: str | os.PathLike[str] | None = None,
        timeout: float = DEFAULT_TIMEOUT,
        verify: bool | str = True,
    ) -> None:
        base, headers = self._setup(url, socket, token, token_file, state_dir, timeout)
        transport = (
            httpx.AsyncHTTPTransport(uds=self.endpoint.socket, verify=verify)
            if self.endpoint.socket
            else httpx.AsyncHTTPTransport(verify=verify)
        )
        self._http = httpx.AsyncClient(
            base_url=base, headers=headers, transport=transport, timeout=timeout, trust_env=False
        )

    async def _acall(self, req: _Req[Any]) -> Any:
        headers = {"Content-Type": req.content_type} if req.content_type else None
        try:
            resp = await self._http.request(
                req.method,
                req.path,
                params=req.params,
                json=req.json,
                content=req.content,
                headers=headers,
                timeout=max(self.timeout, req.timeout or 0),
            )
        except httpx.HTTPError as exc:
            raise _translate(exc, self.endpoint) from exc
        return _parse(resp, req)

    def _call(self, req: _Req[Any]) -> Any:
        return self._acall(req)

    async def aclose(self) -> None:
        """Closes the kept-alive connections."""
        await self._http.aclose()

    async def __aenter__(self) -> "AsyncClient":
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()


def input_file(path: str, content: str | bytes, mode: int | None = None) -> dict[str, Any]:
    """A task input for :meth:`Client.create_session`: a file at ``path`` in the guest."""
    data = content.encode() if isinstance(content, str) else content
    item: dict[str, Any] = {"path": path, "content_base64": base64.b64encode(data).decode()}
    if mode is not None:
        item["mode"] = f"{mode:04o}"
    return item
