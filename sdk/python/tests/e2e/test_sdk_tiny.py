"""The SDK on a real `tiny` session (e2e tier): screen, input, commands, files, snapshots."""

from __future__ import annotations

import asyncio
import os

import pytest

import carrel
from conftest import eventually

PNG = b"\x89PNG\r\n\x1a\n"
TERMINAL = (500, 330)  # inside tiny's xterm (866x542 at +70+60 on 1024x768)


def cat(sb: carrel.Sandbox, path: str) -> str:
    return sb.commands.run(["cat", path]).stdout.strip()


def test_created_running(sandbox):
    assert sandbox.state == "running"
    assert sandbox.info["template"] == "tiny"
    assert carrel.Sandbox.connect("e2e-sdk", client=sandbox.client).id == sandbox.id


def test_screenshot_is_a_png(sandbox):
    png = sandbox.screenshot()
    assert png.startswith(PNG) and len(png) > 5000
    width, height = int.from_bytes(png[16:20], "big"), int.from_bytes(png[20:24], "big")
    assert sandbox.get_screen_size() == (width, height) == (1024, 768)
    small = sandbox.screenshot(format="jpeg", max_edge=320)
    assert small[:2] == b"\xff\xd8"


def test_click_lands_on_the_pixel(sandbox):
    sandbox.left_click(*TERMINAL)
    loc = sandbox.commands.run("DISPLAY=:0 xdotool getmouselocation").stdout
    assert loc.split()[:2] == [f"x:{TERMINAL[0]}", f"y:{TERMINAL[1]}"]
    sandbox.move_mouse(510, 340)
    assert sandbox.get_cursor_position() == (510, 340)


def test_write_into_the_terminal_then_read_back(sandbox):
    sandbox.left_click(*TERMINAL)
    sandbox.write("echo sdk-typed > /tmp/sdk-typed\n")
    assert eventually(lambda: cat(sandbox, "/tmp/sdk-typed"), "sdk-typed") == "sdk-typed"
    sandbox.write("echo sdk-pressed > /tmp/sdk-pressed")
    sandbox.press("Return")
    assert eventually(lambda: cat(sandbox, "/tmp/sdk-pressed"), "sdk-pressed") == "sdk-pressed"
    # ctrl+u (keys pressed together) kills the line typed so far.
    sandbox.write("echo WRONG")
    sandbox.press(["ctrl", "u"])
    sandbox.write("echo right > /tmp/sdk-keys\n")
    assert eventually(lambda: cat(sandbox, "/tmp/sdk-keys"), "right") == "right"
    # Any Unicode text is typed (through the guest when the US keymap cannot); control
    # characters other than newline and tab are refused.
    assert sandbox.write("echo h\u00e9llo > /tmp/sdk-utf8\n") == "guest_keysyms"
    assert eventually(lambda: cat(sandbox, "/tmp/sdk-utf8"), "h\u00e9llo") == "h\u00e9llo"
    with pytest.raises(carrel.InvalidArgument):
        sandbox.write("bell\x07")
    with pytest.raises(carrel.InvalidArgument):
        sandbox.left_click(5000, 10)


def test_commands_run(sandbox):
    r = sandbox.commands.run("echo $FOO; pwd; echo err >&2; exit 3", cwd="/tmp",
                             env={"FOO": "bar"})
    assert (r.exit_code, r.stdout, r.stderr) == (3, "bar\n/tmp\n", "err\n")
    assert not r.ok
    r = sandbox.commands.run(["uname", "-s"])
    assert r.ok and r.stdout.strip() == "Linux"
    assert sandbox.commands.run("sleep 30", timeout=2).timed_out
    with pytest.raises(carrel.CommandFailed):
        sandbox.commands.run("false", check=True)
    assert sandbox.commands.run("cat", stdin=b"in\nput").stdout == "in\nput"


def test_shell_echoes_resizes_and_exits_3(sandbox):
    """Sandbox.shell: the SDK's own websocket client on carreld's shell route (issue 20): the
    terminal echoes a typed line and runs it, follows a resize, and tells the exit code."""
    with sandbox.shell(cols=90, rows=20) as sh:
        sh.send("echo sdk-shell-$((6*7))\n")
        seen = sh.read_until("sdk-shell-42", timeout=120)
        assert b"echo sdk-shell-$((6*7))" in seen  # the typed line, echoed unexpanded
        assert sh.handle
        sh.send("stty size\n")
        assert sh.read_until("20 90", timeout=60)
        sh.resize(100, 30)
        sh.send("stty size\n")
        assert sh.read_until("30 100", timeout=60)
        sh.send("exit 3\n")
        sh.read_all(timeout=60)
        assert sh.exit_code == 3
        assert sh.recv(1) == b""
    assert sh.closed


def test_files_write_read(sandbox):
    blob = os.urandom(300_000)
    assert sandbox.files.write("/tmp/sdk-blob", blob)["bytes"] == len(blob)
    assert sandbox.files.read("/tmp/sdk-blob", format="bytes") == blob
    sandbox.files.write("/home/user/sdk.txt", "grüße\n")
    assert sandbox.files.read("/home/user/sdk.txt") == "grüße\n"
    assert cat(sandbox, "/home/user/sdk.txt") == "grüße"
    with pytest.raises(carrel.NotFound):
        sandbox.files.read("/nonexistent")
    with pytest.raises(carrel.InvalidArgument):
        sandbox.files.read("/tmp/../etc/shadow")


def test_snapshot_and_revert(sandbox):
    sandbox.files.write("/home/user/snap.txt", "before")
    snap = sandbox.snapshot("sdk-s1")
    assert snap["name"] == "sdk-s1" and snap["memory"]
    assert [s["name"] for s in sandbox.snapshots()] == ["sdk-s1"]
    sandbox.files.write("/home/user/snap.txt", "after")
    assert sandbox.revert("sdk-s1")["state"] == "running"
    assert eventually(lambda: sandbox.files.read("/home/user/snap.txt"), "before") == "before"
    with pytest.raises(carrel.NotFound):
        sandbox.revert("nope")


def test_pause_refuses_commands(sandbox):
    assert sandbox.pause()["state"] == "paused"
    assert sandbox.screenshot().startswith(PNG)
    with pytest.raises(carrel.WrongState):
        sandbox.commands.run("true")
    assert sandbox.resume()["state"] == "running"
    assert eventually(lambda: sandbox.commands.run("true").exit_code, 0) == 0


def test_async_twin(sandbox):
    async def main() -> None:
        async with carrel.AsyncClient() as c:
            sb = await carrel.AsyncSandbox.connect(sandbox.id, client=c)
            shots = await asyncio.gather(sb.screenshot(), sb.screenshot(max_edge=256))
            assert all(s.startswith(PNG) for s in shots)
            r = await sb.commands.run("echo async")
            assert r.stdout == "async\n"
            await sb.files.write("/tmp/sdk-async", b"a")
            assert await sb.files.read("/tmp/sdk-async", format="bytes") == b"a"

    asyncio.run(main())


def test_events_name_what_happened(sandbox):
    kinds = {e["kind"] for e in sandbox.events(limit=1000)}
    assert {"action", "command", "file"} <= kinds


def test_kill(sandbox):
    assert sandbox.kill()["state"] == "destroyed"
    assert sandbox.id not in [s["id"] for s in carrel.Sandbox.list(client=sandbox.client)]
