"""``Sandbox``: one carrel session with the verbs of E2B Desktop's ``Sandbox``.

Screen and input verbs go through ``POST /v1/sessions/{id}/computer`` (keyboard and pointer
events sent by the hypervisor; only text the US keymap cannot type is typed by carrel-guest in
the guest); commands and files go through
the guest agent; lifecycle verbs are the session routes. :class:`AsyncSandbox` is the asyncio
twin with the same verbs as coroutines.
"""

from __future__ import annotations

from typing import Any, Callable, Iterable, List, Literal, Mapping, Sequence

from ._shell import Shell
from .client import AsyncClient, Client, CommandResult
from .errors import CommandFailed

Point = tuple[int, int]
# typing.List in annotations: inside Sandbox, "list" is the classmethod Sandbox.list (E2B's name).


def _point(action: str, x: int | None, y: int | None) -> dict[str, Any]:
    act: dict[str, Any] = {"action": action}
    if (x is None) != (y is None):
        raise ValueError("give both x and y, or neither (the pointer's current position)")
    if x is not None:
        act["coordinate"] = [int(x), int(y)]  # type: ignore[arg-type]
    return act


def _key_action(keys: str | Sequence[str]) -> dict[str, Any]:
    """``"ctrl+c"`` or ``"Return"`` is one combination; ``["ctrl", "c"]`` are keys pressed
    together (E2B's ``press(["ctrl", "c"])``)."""
    if isinstance(keys, str):
        return {"action": "key", "combo": keys}
    keys = [str(k) for k in keys]
    if not keys:
        raise ValueError("no keys to press")
    return {"action": "key", "keys": keys}


def _scroll_action(direction: str, amount: int, x: int | None, y: int | None) -> dict[str, Any]:
    act = _point("scroll", x, y)
    act["scroll_direction"] = direction
    act["scroll_amount"] = int(amount)
    return act


TypeMethod = Literal["auto", "keys", "guest_keysyms", "clipboard"]


def _type_action(
    text: str, method: TypeMethod | None, paste_keys: str | None
) -> dict[str, Any]:
    act: dict[str, Any] = {"action": "type", "text": text}
    if method is not None:
        act["method"] = method
    if paste_keys is not None:
        act["paste_keys"] = paste_keys
    return act


def _typed_method(reply: Mapping[str, Any]) -> str:
    """The method a type action's result names ("keys", "guest_keysyms", "clipboard")."""
    results = reply.get("results") or [{}]
    return str((results[0].get("output") or {}).get("method", ""))


def _drag_action(fr: Point, to: Point) -> dict[str, Any]:
    return {
        "action": "left_click_drag",
        "start_coordinate": [int(fr[0]), int(fr[1])],
        "coordinate": [int(to[0]), int(to[1])],
    }


def _check(result: CommandResult, cmd: Any) -> CommandResult:
    if not result.ok:
        why = "timed out" if result.timed_out else f"exited {result.exit_code}"
        raise CommandFailed(f"command {cmd!r} {why}: {result.stderr.strip()[:500]}", result=result)
    return result


def _open_client(kw: Mapping[str, Any]) -> Client:
    return Client(**kw)


class Commands:
    """``sandbox.commands``: commands in the guest through its agent."""

    def __init__(self, sandbox: "Sandbox") -> None:
        self._sb = sandbox

    def run(
        self,
        cmd: str | Sequence[str],
        *,
        timeout: int | None = 60,
        cwd: str | None = None,
        env: Mapping[str, str] | None = None,
        stdin: str | bytes | None = None,
        check: bool = False,
        on_stdout: Callable[[str], None] | None = None,
        on_stderr: Callable[[str], None] | None = None,
        background: bool = False,
    ) -> Any:
        """Runs ``cmd`` (a string under ``/bin/sh -c``, or an argv list) as root and waits.

        Returns a :class:`CommandResult` with ``stdout``, ``stderr``, ``exit_code``. A
        non-zero exit is not an error unless ``check=True`` (then :class:`CommandFailed`).
        ``timeout`` (seconds, at most 3600) kills the command in the guest.

        ``on_stdout``/``on_stderr``: the output is streamed, each chunk handed to them as it
        comes. ``background=True``: returns a :class:`Process` at once (no timeout; see
        :meth:`list`).
        """
        if background:
            info = self._sb.client.start_process(self._sb.id, cmd, cwd=cwd, env=env, stdin=stdin)
            return Process(self._sb, info)
        if on_stdout or on_stderr:
            result = self._sb.client.exec_stream(
                self._sb.id, cmd, timeout=timeout, cwd=cwd, env=env, stdin=stdin,
                on_stdout=on_stdout, on_stderr=on_stderr,
            )
        else:
            result = self._sb.client.exec(
                self._sb.id, cmd, timeout=timeout, cwd=cwd, env=env, stdin=stdin
            )
        return _check(result, cmd) if check else result

    def list(self) -> list["Process"]:
        """The sandbox's background processes, oldest first."""
        return [Process(self._sb, p) for p in self._sb.client.processes(self._sb.id)]


class Process:
    """A background process (``commands.run(..., background=True)``): ``handle``, ``pid``,
    and ``info`` (its last known state)."""

    def __init__(self, sandbox: "Sandbox", info: Mapping[str, Any]) -> None:
        self._sb = sandbox
        self.info: dict[str, Any] = dict(info)
        self.handle: str = self.info["handle"]
        self.pid: int = int(self.info.get("pid", -1))
        self._offsets = [0, 0]

    def read(self) -> tuple[str, str]:
        """The output since the last read (stdout, stderr); updates ``info``."""
        out, err = [], []
        while True:
            r = self._sb.client.process_output(self._sb.id, self.handle, *self._offsets)
            out.append(r.get("stdout", ""))
            err.append(r.get("stderr", ""))
            self._offsets = [int(r.get("stdout_next", 0)), int(r.get("stderr_next", 0))]
            self.info.update({k: r.get(k) for k in ("state", "exit_code", "pid")})
            if not r.get("more"):
                return "".join(out), "".join(err)

    @property
    def exit_code(self) -> int | None:
        """None while it runs."""
        code = self.info.get("exit_code")
        return None if code is None else int(code)

    def write(self, data: str | bytes) -> None:
        """Writes to its standard input."""
        self._sb.client.write_process_stdin(self._sb.id, self.handle, data)

    def close_stdin(self) -> None:
        """Ends its standard input."""
        self._sb.client.write_process_stdin(self._sb.id, self.handle, None, close=True)

    def kill(self, signal: str | int = "TERM") -> None:
        """Signals it and its process group."""
        self._sb.client.kill_process(self._sb.id, self.handle, signal)


class Files:
    """``sandbox.files``: files in the guest through its agent (binary-safe; carreld streams
    transfers up to 1 GiB) and the file operations of carrel-guest (as root)."""

    def __init__(self, sandbox: "Sandbox") -> None:
        self._sb = sandbox

    def read(self, path: str, format: Literal["text", "bytes"] = "text") -> Any:
        """The file at ``path``: text (UTF-8) by default, ``bytes`` with ``format="bytes"``."""
        data: bytes = self._sb.client.read_file(self._sb.id, path)
        return data if format == "bytes" else data.decode("utf-8")

    def write(self, path: str, data: str | bytes) -> dict[str, Any]:
        """Writes ``data`` to ``path`` (created or replaced): ``{path, bytes}``."""
        result: dict[str, Any] = self._sb.client.write_file(self._sb.id, path, data)
        return result

    def list(self, path: str) -> List[dict[str, Any]]:
        """The entries of the directory ``path``: ``{name, type, size, mode, mtime,
        target?}``, sorted by name (``mode`` octal text, ``mtime`` Unix seconds)."""
        reply: dict[str, Any] = self._sb.client.list_dir(self._sb.id, path)
        entries: List[dict[str, Any]] = reply["entries"]
        return entries

    def stat(self, path: str) -> dict[str, Any]:
        """One entry, as :meth:`list` gives them (a symlink itself, not its target)."""
        reply: dict[str, Any] = self._sb.client.stat(self._sb.id, path)
        entry: dict[str, Any] = reply["entry"]
        return entry

    def mkdir(self, path: str, parents: bool = False) -> dict[str, Any]:
        """Creates the directory ``path`` (``parents``: and its missing parents)."""
        result: dict[str, Any] = self._sb.client.mkdir(self._sb.id, path, parents)
        return result

    def remove(self, path: str, recursive: bool = False) -> dict[str, Any]:
        """Removes a file, symlink or empty directory (``recursive``: a whole tree)."""
        result: dict[str, Any] = self._sb.client.remove(self._sb.id, path, recursive)
        return result

    def move(self, src: str, dst: str) -> dict[str, Any]:
        """Renames ``src`` to ``dst``, which must not exist."""
        result: dict[str, Any] = self._sb.client.move(self._sb.id, src, dst)
        return result


class Sandbox:
    """One carrel session: a full desktop VM.

    Make one with :meth:`create` or attach to one with :meth:`connect`; ``with`` kills it
    on exit. ``info`` holds the last session JSON carreld returned (``state``, ``name``...).
    Every verb raises a :class:`carrel.CarrelError` subclass on failure (e.g.
    :class:`carrel.WrongState` for input to a paused session).
    """

    def __init__(self, client: Client, info: Mapping[str, Any], *, owns_client: bool = False):
        self.client = client
        self.info: dict[str, Any] = dict(info)
        self.id: str = self.info["id"]
        self._owns_client = owns_client
        self.commands = Commands(self)
        self.files = Files(self)

    # Lifecycle.
    @classmethod
    def create(
        cls,
        template: str = "tiny",
        *,
        name: str | None = None,
        policy: str | None = None,
        ttl: int | None = None,
        idle_timeout: int | None = None,
        on_expiry: str | None = None,
        vcpus: int | None = None,
        memory_mib: int | None = None,
        screen: str | None = None,
        cold: bool | None = None,
        artifacts: Sequence[str] | None = None,
        inputs: Sequence[Mapping[str, Any]] | None = None,
        client: Client | None = None,
        **client_options: Any,
    ) -> "Sandbox":
        """A new session of ``template``, returned once its desktop is ready.

        ``ttl``/``idle_timeout`` are seconds; ``on_expiry`` is ``destroy`` (default),
        ``stop``, ``hibernate`` or ``pause``; ``screen`` is ``"WIDTHxHEIGHT"`` (default: the
        template's). Without ``client``, one is opened from
        ``client_options`` (``url``, ``socket``, ``token``, ...) and closed by :meth:`kill`
        or :meth:`close`.
        """
        owns = client is None
        c = client or _open_client(client_options)
        try:
            info = c.create_session(
                template,
                name=name,
                policy=policy,
                ttl_s=ttl,
                idle_timeout_s=idle_timeout,
                on_expiry=on_expiry,
                vcpus=vcpus,
                memory_mib=memory_mib,
                screen=screen,
                cold=cold,
                artifacts=artifacts,
                inputs=inputs,
            )
        except BaseException:
            if owns:
                c.close()
            raise
        return cls(c, info, owns_client=owns)

    @classmethod
    def connect(
        cls, sandbox_id: str, *, client: Client | None = None, **client_options: Any
    ) -> "Sandbox":
        """The existing session ``sandbox_id`` (an id or a name)."""
        owns = client is None
        c = client or _open_client(client_options)
        try:
            info = c.session(sandbox_id)
        except BaseException:
            if owns:
                c.close()
            raise
        return cls(c, info, owns_client=owns)

    @classmethod
    def list(cls, *, client: Client | None = None, **client_options: Any) -> List[dict[str, Any]]:
        """The sessions this token sees (not destroyed), as the API's JSON."""
        if client is not None:
            return list(client.sessions())
        with _open_client(client_options) as c:
            return list(c.sessions())

    def _set(self, info: Mapping[str, Any]) -> dict[str, Any]:
        self.info = dict(info)
        return self.info

    def refresh(self) -> dict[str, Any]:
        """Reads the session again: its JSON (also kept in ``info``)."""
        return self._set(self.client.session(self.id))

    @property
    def state(self) -> str:
        """The state from the last reply (``running``, ``paused``, ...); see :meth:`refresh`."""
        return str(self.info.get("state"))

    @property
    def name(self) -> str | None:
        """The session's name."""
        return self.info.get("name")

    def kill(self) -> dict[str, Any]:
        """Destroys the session (domain, disk, files) and closes an owned client."""
        try:
            return self._set(self.client.destroy_session(self.id))
        finally:
            self.close()

    def close(self) -> None:
        """Closes the client when this sandbox opened it (the session keeps running)."""
        if self._owns_client:
            self.client.close()
            self._owns_client = False

    def __enter__(self) -> "Sandbox":
        return self

    def __exit__(self, *exc: object) -> None:
        if self.info.get("state") == "destroyed":
            self.close()
        else:
            self.kill()

    def __repr__(self) -> str:
        return f"Sandbox(id={self.id!r}, name={self.name!r}, state={self.state!r})"

    def start(self) -> dict[str, Any]:
        """Starts a stopped session."""
        return self._set(self.client.start_session(self.id))

    def stop(self, timeout: int | None = None) -> dict[str, Any]:
        """Stops the session: graceful, then forced after ``timeout`` s (default 30)."""
        return self._set(self.client.stop_session(self.id, timeout))

    def pause(self) -> dict[str, Any]:
        """Stops the vCPUs; memory is kept (screenshots still work)."""
        return self._set(self.client.pause_session(self.id))

    def resume(self) -> dict[str, Any]:
        """Runs a paused or hibernated session again."""
        return self._set(self.client.resume_session(self.id))

    def hibernate(self) -> dict[str, Any]:
        """Saves the memory to disk and ends QEMU; :meth:`resume` restores it."""
        return self._set(self.client.hibernate_session(self.id))

    def snapshot(self, name: str) -> dict[str, Any]:
        """A snapshot (with memory when running): ``{id, name, parent, memory, ...}``."""
        result: dict[str, Any] = self.client.create_snapshot(self.id, name)
        return result

    def snapshots(self) -> List[dict[str, Any]]:
        """The session's snapshots, oldest first."""
        return list(self.client.snapshots(self.id))

    def delete_snapshot(self, name: str) -> dict[str, Any]:
        """Deletes a snapshot: ``{deleted, layer_kept}``."""
        result: dict[str, Any] = self.client.delete_snapshot(self.id, name)
        return result

    def revert(self, snapshot: str) -> dict[str, Any]:
        """Back to ``snapshot`` (id or name): running if it has memory, else stopped."""
        return self._set(self.client.revert_session(self.id, snapshot))

    def fork(self, snapshot: str | None = None, count: int = 1) -> List["Sandbox"]:
        """``count`` new running sandboxes from ``snapshot`` (one taken now when None).
        They share this sandbox's client (close it last)."""
        forks = self.client.fork_session(self.id, snapshot, count)
        return [Sandbox(self.client, f) for f in forks]

    # Screen and input.
    def screenshot(
        self,
        *,
        format: Literal["png", "jpeg"] = "png",
        quality: int | None = None,
        scale: float | None = None,
        max_edge: int | None = None,
        region: tuple[int, int, int, int] | None = None,
    ) -> bytes:
        """The screen as PNG bytes (JPEG with ``format="jpeg"``), from the hypervisor."""
        data: bytes = self.client.screenshot(
            self.id,
            format=None if format == "png" else format,
            quality=quality,
            scale=scale,
            max_edge=max_edge,
            region=region,
        )
        return data

    def computer(
        self,
        actions: Mapping[str, Any] | Iterable[Mapping[str, Any]],
        *,
        observe: Literal["final", "each", "none"] | None = None,
        scale: float | None = None,
        model_screen: tuple[int, int] | None = None,
        settle: Mapping[str, int] | None = None,
    ) -> dict[str, Any]:
        """Any action or batch in carreld's formats; the API's reply (its observation says
        ``settled`` and ``settled_ms``; ``settle`` sets the windows, see Client.computer)."""
        result: dict[str, Any] = self.client.computer(
            self.id,
            actions,
            observe=observe,
            scale=scale,
            model_screen=model_screen,
            settle=settle,
        )
        return result

    def accessibility_tree(
        self,
        *,
        desktop: bool = False,
        depth: int | None = None,
        max_nodes: int | None = None,
        app: str | None = None,
    ) -> dict[str, Any]:
        """The accessibility (AT-SPI) tree of the focused window, or of every application
        with ``desktop``, or of the desktop with one application with ``app`` (its
        accessibility name, e.g. ``"Firefox"``): ``{scope, count, truncated, root}``, each
        element with an ``id`` that :meth:`click_element` takes."""
        result: dict[str, Any] = self.client.accessibility(
            self.id,
            scope="desktop" if desktop else None,
            depth=depth,
            max_nodes=max_nodes,
            app=app,
        )
        return result

    def shell(self, cols: int = 80, rows: int = 24) -> Shell:
        """An interactive terminal in the guest (a login shell on a pseudo-terminal, as the
        desktop user) over a websocket: ``send``, ``recv``, ``read_until``, ``resize``,
        ``eof``, ``close`` and ``exit_code``. Needs the control lease or an admin token;
        closing it kills the shell and what it started."""
        return self.client.shell(self.id, cols=cols, rows=rows)

    def click_element(self, element: str, *, mode: Literal["click", "action"] = "click") -> Any:
        """Clicks the element's centre (looked up again), or with ``mode="action"`` runs its
        default accessibility action; the action's output. An id the tree no longer has
        raises :class:`NotFound`."""
        action: dict[str, Any] = {"action": "click_element", "element": element}
        if mode != "click":
            action["mode"] = mode
        return self._act(action)["results"][0].get("output")

    def _act(self, action: Mapping[str, Any]) -> dict[str, Any]:
        return self.computer([action], observe="none")

    def left_click(self, x: int | None = None, y: int | None = None) -> None:
        """A left click at (x, y), or where the pointer is."""
        self._act(_point("left_click", x, y))

    def right_click(self, x: int | None = None, y: int | None = None) -> None:
        """A right click at (x, y), or where the pointer is."""
        self._act(_point("right_click", x, y))

    def middle_click(self, x: int | None = None, y: int | None = None) -> None:
        """A middle click at (x, y), or where the pointer is."""
        self._act(_point("middle_click", x, y))

    def double_click(self, x: int | None = None, y: int | None = None) -> None:
        """A double click at (x, y), or where the pointer is."""
        self._act(_point("double_click", x, y))

    def move_mouse(self, x: int, y: int) -> None:
        """Moves the pointer to (x, y)."""
        self._act(_point("mouse_move", x, y))

    def drag(self, fr: Point, to: Point) -> None:
        """Presses the left button at ``fr``, moves to ``to`` and releases it."""
        self._act(_drag_action(fr, to))

    def scroll(
        self,
        direction: Literal["up", "down", "left", "right"] = "down",
        amount: int = 1,
        x: int | None = None,
        y: int | None = None,
    ) -> None:
        """Scrolls ``amount`` wheel clicks, at (x, y) or where the pointer is."""
        self._act(_scroll_action(direction, amount, x, y))

    def write(
        self, text: str, *, method: TypeMethod | None = None, paste_keys: str | None = None
    ) -> str:
        """Types ``text``: any Unicode, newline and tab but no other control characters.

        Text the US keymap can type goes as key presses through the hypervisor (``"keys"``);
        other text is typed by carrel-guest in the guest, each character as its keysym
        (``"guest_keysyms"``), or with ``method="clipboard"`` pasted (``paste_keys``, default
        ``"shift+Insert"``). Returns the method used.
        """
        return _typed_method(self._act(_type_action(text, method, paste_keys)))

    def press(self, keys: str | Sequence[str]) -> None:
        """Presses a key or combination: ``"Return"``, ``"ctrl+c"``, ``["ctrl", "c"]``."""
        self._act(_key_action(keys))

    def wait(self, ms: int) -> None:
        """Waits ``ms`` milliseconds in carreld (between actions of an agent)."""
        self._act({"action": "wait", "duration_ms": int(ms)})

    def get_screen_size(self) -> tuple[int, int]:
        """The screen's width and height in pixels."""
        reply = self.computer([{"action": "screen_size"}], observe="none")
        return int(reply["screen"]["width"]), int(reply["screen"]["height"])

    def get_cursor_position(self) -> tuple[int, int]:
        """Where the pointer is."""
        reply = self.computer([{"action": "cursor_position"}], observe="none")
        p = reply.get("pointer") or {}
        return int(p.get("x", 0)), int(p.get("y", 0))

    def open(self, target: str) -> None:
        """Opens a file or URL in the guest's desktop (``carrel-guest open``)."""
        self._act({"action": "open", "target": target})

    def launch(self, app: str, args: Sequence[str] | None = None) -> None:
        """Starts a program in the guest's desktop (``carrel-guest launch``)."""
        act: dict[str, Any] = {"action": "launch", "app": app}
        if args:
            act["args"] = list(args)
        self._act(act)

    # Review.
    def extract(
        self, paths: Sequence[str], *, max_bytes_mib: int | None = None, max_files: int | None = None
    ) -> dict[str, Any]:
        """Extracts guest paths to the host: the extraction (its ``artifacts``, ``error``)."""
        result: dict[str, Any] = self.client.extract(
            self.id, paths, max_bytes_mib=max_bytes_mib, max_files=max_files
        )
        return result

    def download_artifact(self, artifact_id: str) -> bytes:
        """An extracted file's bytes."""
        data: bytes = self.client.artifact(artifact_id)
        return data

    def diff(self, path: str | None = None) -> dict[str, Any]:
        """Files added, changed and removed against the template (under ``path``)."""
        result: dict[str, Any] = self.client.diff(self.id, path)
        return result

    def events(self, after: int | None = None, limit: int | None = None) -> List[dict[str, Any]]:
        """The session's timeline: actions, commands, files, lifecycle, who did them."""
        return list(self.client.events(self.id, after, limit))


class AsyncCommands:
    """``sandbox.commands`` of :class:`AsyncSandbox`."""

    def __init__(self, sandbox: "AsyncSandbox") -> None:
        self._sb = sandbox

    async def run(
        self,
        cmd: str | Sequence[str],
        *,
        timeout: int | None = 60,
        cwd: str | None = None,
        env: Mapping[str, str] | None = None,
        stdin: str | bytes | None = None,
        check: bool = False,
    ) -> CommandResult:
        """See :meth:`Commands.run`."""
        result = await self._sb.client.exec(
            self._sb.id, cmd, timeout=timeout, cwd=cwd, env=env, stdin=stdin
        )
        return _check(result, cmd) if check else result


class AsyncFiles:
    """``sandbox.files`` of :class:`AsyncSandbox`."""

    def __init__(self, sandbox: "AsyncSandbox") -> None:
        self._sb = sandbox

    async def read(self, path: str, format: Literal["text", "bytes"] = "text") -> Any:
        """See :meth:`Files.read`."""
        data: bytes = await self._sb.client.read_file(self._sb.id, path)
        return data if format == "bytes" else data.decode("utf-8")

    async def write(self, path: str, data: str | bytes) -> dict[str, Any]:
        """See :meth:`Files.write`."""
        result: dict[str, Any] = await self._sb.client.write_file(self._sb.id, path, data)
        return result

    async def list(self, path: str) -> List[dict[str, Any]]:
        """See :meth:`Files.list`."""
        reply: dict[str, Any] = await self._sb.client.list_dir(self._sb.id, path)
        entries: List[dict[str, Any]] = reply["entries"]
        return entries

    async def stat(self, path: str) -> dict[str, Any]:
        """See :meth:`Files.stat`."""
        reply: dict[str, Any] = await self._sb.client.stat(self._sb.id, path)
        entry: dict[str, Any] = reply["entry"]
        return entry

    async def mkdir(self, path: str, parents: bool = False) -> dict[str, Any]:
        """See :meth:`Files.mkdir`."""
        result: dict[str, Any] = await self._sb.client.mkdir(self._sb.id, path, parents)
        return result

    async def remove(self, path: str, recursive: bool = False) -> dict[str, Any]:
        """See :meth:`Files.remove`."""
        result: dict[str, Any] = await self._sb.client.remove(self._sb.id, path, recursive)
        return result

    async def move(self, src: str, dst: str) -> dict[str, Any]:
        """See :meth:`Files.move`."""
        result: dict[str, Any] = await self._sb.client.move(self._sb.id, src, dst)
        return result


class AsyncSandbox:
    """The asyncio twin of :class:`Sandbox`: the same verbs, as coroutines."""

    def __init__(
        self, client: AsyncClient, info: Mapping[str, Any], *, owns_client: bool = False
    ) -> None:
        self.client = client
        self.info: dict[str, Any] = dict(info)
        self.id: str = self.info["id"]
        self._owns_client = owns_client
        self.commands = AsyncCommands(self)
        self.files = AsyncFiles(self)

    @classmethod
    async def create(
        cls,
        template: str = "tiny",
        *,
        name: str | None = None,
        policy: str | None = None,
        ttl: int | None = None,
        idle_timeout: int | None = None,
        on_expiry: str | None = None,
        vcpus: int | None = None,
        memory_mib: int | None = None,
        screen: str | None = None,
        cold: bool | None = None,
        artifacts: Sequence[str] | None = None,
        inputs: Sequence[Mapping[str, Any]] | None = None,
        client: AsyncClient | None = None,
        **client_options: Any,
    ) -> "AsyncSandbox":
        """See :meth:`Sandbox.create`."""
        owns = client is None
        c = client or AsyncClient(**client_options)
        try:
            info = await c.create_session(
                template,
                name=name,
                policy=policy,
                ttl_s=ttl,
                idle_timeout_s=idle_timeout,
                on_expiry=on_expiry,
                vcpus=vcpus,
                memory_mib=memory_mib,
                screen=screen,
                cold=cold,
                artifacts=artifacts,
                inputs=inputs,
            )
        except BaseException:
            if owns:
                await c.aclose()
            raise
        return cls(c, info, owns_client=owns)

    @classmethod
    async def connect(
        cls, sandbox_id: str, *, client: AsyncClient | None = None, **client_options: Any
    ) -> "AsyncSandbox":
        """See :meth:`Sandbox.connect`."""
        owns = client is None
        c = client or AsyncClient(**client_options)
        try:
            info = await c.session(sandbox_id)
        except BaseException:
            if owns:
                await c.aclose()
            raise
        return cls(c, info, owns_client=owns)

    def _set(self, info: Mapping[str, Any]) -> dict[str, Any]:
        self.info = dict(info)
        return self.info

    @property
    def state(self) -> str:
        """The state from the last reply."""
        return str(self.info.get("state"))

    @property
    def name(self) -> str | None:
        """The session's name."""
        return self.info.get("name")

    async def refresh(self) -> dict[str, Any]:
        """See :meth:`Sandbox.refresh`."""
        return self._set(await self.client.session(self.id))

    async def kill(self) -> dict[str, Any]:
        """See :meth:`Sandbox.kill`."""
        try:
            return self._set(await self.client.destroy_session(self.id))
        finally:
            await self.close()

    async def close(self) -> None:
        """See :meth:`Sandbox.close`."""
        if self._owns_client:
            await self.client.aclose()
            self._owns_client = False

    async def __aenter__(self) -> "AsyncSandbox":
        return self

    async def __aexit__(self, *exc: object) -> None:
        if self.info.get("state") == "destroyed":
            await self.close()
        else:
            await self.kill()

    def __repr__(self) -> str:
        return f"AsyncSandbox(id={self.id!r}, name={self.name!r}, state={self.state!r})"

    async def start(self) -> dict[str, Any]:
        """See :meth:`Sandbox.start`."""
        return self._set(await self.client.start_session(self.id))

    async def stop(self, timeout: int | None = None) -> dict[str, Any]:
        """See :meth:`Sandbox.stop`."""
        return self._set(await self.client.stop_session(self.id, timeout))

    async def pause(self) -> dict[str, Any]:
        """See :meth:`Sandbox.pause`."""
        return self._set(await self.client.pause_session(self.id))

    async def resume(self) -> dict[str, Any]:
        """See :meth:`Sandbox.resume`."""
        return self._set(await self.client.resume_session(self.id))

    async def hibernate(self) -> dict[str, Any]:
        """See :meth:`Sandbox.hibernate`."""
        return self._set(await self.client.hibernate_session(self.id))

    async def snapshot(self, name: str) -> dict[str, Any]:
        """See :meth:`Sandbox.snapshot`."""
        result: dict[str, Any] = await self.client.create_snapshot(self.id, name)
        return result

    async def snapshots(self) -> List[dict[str, Any]]:
        """See :meth:`Sandbox.snapshots`."""
        return list(await self.client.snapshots(self.id))

    async def delete_snapshot(self, name: str) -> dict[str, Any]:
        """See :meth:`Sandbox.delete_snapshot`."""
        result: dict[str, Any] = await self.client.delete_snapshot(self.id, name)
        return result

    async def revert(self, snapshot: str) -> dict[str, Any]:
        """See :meth:`Sandbox.revert`."""
        return self._set(await self.client.revert_session(self.id, snapshot))

    async def fork(self, snapshot: str | None = None, count: int = 1) -> List["AsyncSandbox"]:
        """See :meth:`Sandbox.fork`."""
        forks = await self.client.fork_session(self.id, snapshot, count)
        return [AsyncSandbox(self.client, f) for f in forks]

    async def screenshot(
        self,
        *,
        format: Literal["png", "jpeg"] = "png",
        quality: int | None = None,
        scale: float | None = None,
        max_edge: int | None = None,
        region: tuple[int, int, int, int] | None = None,
    ) -> bytes:
        """See :meth:`Sandbox.screenshot`."""
        data: bytes = await self.client.screenshot(
            self.id,
            format=None if format == "png" else format,
            quality=quality,
            scale=scale,
            max_edge=max_edge,
            region=region,
        )
        return data

    async def computer(
        self,
        actions: Mapping[str, Any] | Iterable[Mapping[str, Any]],
        *,
        observe: Literal["final", "each", "none"] | None = None,
        scale: float | None = None,
        model_screen: tuple[int, int] | None = None,
    ) -> dict[str, Any]:
        """See :meth:`Sandbox.computer`."""
        result: dict[str, Any] = await self.client.computer(
            self.id, actions, observe=observe, scale=scale, model_screen=model_screen
        )
        return result

    async def _act(self, action: Mapping[str, Any]) -> dict[str, Any]:
        return await self.computer([action], observe="none")

    async def left_click(self, x: int | None = None, y: int | None = None) -> None:
        """See :meth:`Sandbox.left_click`."""
        await self._act(_point("left_click", x, y))

    async def right_click(self, x: int | None = None, y: int | None = None) -> None:
        """See :meth:`Sandbox.right_click`."""
        await self._act(_point("right_click", x, y))

    async def middle_click(self, x: int | None = None, y: int | None = None) -> None:
        """See :meth:`Sandbox.middle_click`."""
        await self._act(_point("middle_click", x, y))

    async def double_click(self, x: int | None = None, y: int | None = None) -> None:
        """See :meth:`Sandbox.double_click`."""
        await self._act(_point("double_click", x, y))

    async def move_mouse(self, x: int, y: int) -> None:
        """See :meth:`Sandbox.move_mouse`."""
        await self._act(_point("mouse_move", x, y))

    async def drag(self, fr: Point, to: Point) -> None:
        """See :meth:`Sandbox.drag`."""
        await self._act(_drag_action(fr, to))

    async def scroll(
        self,
        direction: Literal["up", "down", "left", "right"] = "down",
        amount: int = 1,
        x: int | None = None,
        y: int | None = None,
    ) -> None:
        """See :meth:`Sandbox.scroll`."""
        await self._act(_scroll_action(direction, amount, x, y))

    async def write(
        self, text: str, *, method: TypeMethod | None = None, paste_keys: str | None = None
    ) -> str:
        """See :meth:`Sandbox.write`."""
        return _typed_method(await self._act(_type_action(text, method, paste_keys)))

    async def press(self, keys: str | Sequence[str]) -> None:
        """See :meth:`Sandbox.press`."""
        await self._act(_key_action(keys))

    async def wait(self, ms: int) -> None:
        """See :meth:`Sandbox.wait`."""
        await self._act({"action": "wait", "duration_ms": int(ms)})

    async def get_screen_size(self) -> tuple[int, int]:
        """See :meth:`Sandbox.get_screen_size`."""
        reply = await self.computer([{"action": "screen_size"}], observe="none")
        return int(reply["screen"]["width"]), int(reply["screen"]["height"])

    async def get_cursor_position(self) -> tuple[int, int]:
        """See :meth:`Sandbox.get_cursor_position`."""
        reply = await self.computer([{"action": "cursor_position"}], observe="none")
        p = reply.get("pointer") or {}
        return int(p.get("x", 0)), int(p.get("y", 0))

    async def open(self, target: str) -> None:
        """See :meth:`Sandbox.open`."""
        await self._act({"action": "open", "target": target})

    async def launch(self, app: str, args: Sequence[str] | None = None) -> None:
        """See :meth:`Sandbox.launch`."""
        act: dict[str, Any] = {"action": "launch", "app": app}
        if args:
            act["args"] = list(args)
        await self._act(act)

    async def extract(
        self, paths: Sequence[str], *, max_bytes_mib: int | None = None, max_files: int | None = None
    ) -> dict[str, Any]:
        """See :meth:`Sandbox.extract`."""
        result: dict[str, Any] = await self.client.extract(
            self.id, paths, max_bytes_mib=max_bytes_mib, max_files=max_files
        )
        return result

    async def download_artifact(self, artifact_id: str) -> bytes:
        """See :meth:`Sandbox.download_artifact`."""
        data: bytes = await self.client.artifact(artifact_id)
        return data

    async def diff(self, path: str | None = None) -> dict[str, Any]:
        """See :meth:`Sandbox.diff`."""
        result: dict[str, Any] = await self.client.diff(self.id, path)
        return result

    async def events(
        self, after: int | None = None, limit: int | None = None
    ) -> List[dict[str, Any]]:
        """See :meth:`Sandbox.events`."""
        return list(await self.client.events(self.id, after, limit))


__all__ = ["Sandbox", "AsyncSandbox", "Commands", "Files", "AsyncCommands", "AsyncFiles"]
