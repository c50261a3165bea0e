"""The SDK against a real carreld on libvirt's test driver (integration tier)."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

import carrel

PNG = b"\x89PNG\r\n\x1a\n"


def test_health_without_token(daemon, monkeypatch):
    monkeypatch.delenv("CARREL_TOKEN", raising=False)
    with carrel.Client(socket=daemon.socket, state_dir=daemon.root / "nothing-here") as c:
        assert c.token is None
        assert c.health() == {"status": "ok"}
        with pytest.raises(carrel.Unauthorized) as info:
            c.version()
    err = info.value
    assert err.code == "unauthorized" and err.status == 401
    assert err.request_id and err.request_id.startswith("r-")
    assert err.message


def test_token_lookup_like_the_cli(daemon, monkeypatch):
    monkeypatch.delenv("CARREL_TOKEN", raising=False)
    monkeypatch.delenv("CARREL_URL", raising=False)
    # The state dir's admin.token, from CARREL_STATE_DIR, over CARREL_SOCKET.
    monkeypatch.setenv("CARREL_STATE_DIR", str(daemon.state))
    monkeypatch.setenv("CARREL_SOCKET", daemon.socket)
    with carrel.Client() as c:
        assert c.token == daemon.token
        assert c.version()["libvirt_uri"] == "test:///default"
    # CARREL_TOKEN wins over the state dir.
    monkeypatch.setenv("CARREL_TOKEN", "wrong-token")
    with carrel.Client() as c:
        with pytest.raises(carrel.Unauthorized):
            c.sessions()
    # The argument wins over both; a token file wins over the environment.
    with carrel.Client(token=daemon.token) as c:
        assert isinstance(c.sessions(), list)
    with carrel.Client(token_file=daemon.state / "admin.token") as c:
        assert isinstance(c.sessions(), list)


def test_unreachable(tmp_path):
    with carrel.Client(socket=str(tmp_path / "none.sock"), token="x") as c:
        with pytest.raises(carrel.Unreachable) as info:
            c.version()
    assert info.value.status is None and isinstance(info.value, ConnectionError)


def test_version_and_templates(client, template):
    v = client.version()
    assert v["libvirt_uri"] == "test:///default"
    assert v["accel"] == "tcg"
    refs = [t["ref"] for t in client.templates()]
    assert "tiny@1" in refs
    assert client.template("tiny")["name"] == "tiny"
    with pytest.raises(carrel.NotFound):
        client.template("nope")
    with pytest.raises(carrel.InvalidArgument):
        client.template("a@b@3")
    assert [p["name"] for p in client.policies()] == ["default", "small"]
    assert client.policy("small")["name"] == "small"
    with pytest.raises(carrel.NotFound):
        client.policy("nope")
    who = client.whoami()
    assert who["role"] == "admin"
    assert "admin" in [t["name"] for t in client.tokens()]
    assert client.pools() == []
    with pytest.raises(carrel.NotFound):
        client.job("j-000000000000")


def test_session_lifecycle(client, template):
    sb = carrel.Sandbox.create(template=template, name="sdk-one", client=client)
    assert sb.id.startswith("s-") and sb.state == "running" and sb.name == "sdk-one"
    assert sb.info["policy"] == "default"
    same = carrel.Sandbox.connect("sdk-one", client=client)
    assert same.id == sb.id
    assert sb.id in [s["id"] for s in carrel.Sandbox.list(client=client)]
    # A name is unique among live sessions.
    with pytest.raises(carrel.Exists) as info:
        carrel.Sandbox.create(template=template, name="sdk-one", client=client)
    assert info.value.status == 409
    # Wrong states are WrongState.
    with pytest.raises(carrel.WrongState):
        sb.start()
    assert sb.stop(timeout=5)["state"] == "stopped"
    with pytest.raises(carrel.WrongState):
        sb.stop(timeout=5)
    assert sb.start()["state"] == "running"
    assert sb.pause()["state"] == "paused"
    assert sb.refresh()["state"] == "paused"
    assert sb.resume()["state"] == "running"
    with pytest.raises(carrel.WrongState):
        sb.resume()
    # The template cannot go while a session uses it.
    with pytest.raises(carrel.WrongState):
        client.remove_template("tiny")
    events = sb.events()
    assert [e["action"] for e in events][:1] == ["create"]
    assert all(e["actor"] == "admin" for e in events)
    assert sb.kill()["state"] == "destroyed"
    with pytest.raises(carrel.WrongState):
        sb.kill()
    assert sb.id not in [s["id"] for s in client.sessions()]
    assert sb.id in [s["id"] for s in client.sessions(all=True)]


def test_create_options_and_refusals(client, template):
    with pytest.raises(carrel.NotFound):
        carrel.Sandbox.create(template="nope", client=client)
    with pytest.raises(carrel.PolicyDenied) as info:
        carrel.Sandbox.create(template=template, vcpus=16, client=client)
    assert info.value.status == 403
    with pytest.raises(carrel.NotFound):
        carrel.Sandbox.create(template=template, policy="nope", client=client)
    with pytest.raises(carrel.InvalidArgument):
        carrel.Sandbox.create(template=template, name="bad name!", client=client)
    with carrel.Sandbox.create(
        template=template, name="sdk-ttl", policy="small", ttl=600, client=client
    ) as sb:
        assert sb.info["policy"] == "small"
        assert sb.info["expires_at"]
    assert sb.state == "destroyed"


def test_screen_and_unsupported_verbs(client, template):
    """Screenshots work on the test driver; everything needing QEMU or a guest agent is
    501 unsupported, raised as carrel.Unsupported."""
    with carrel.Sandbox.create(template=template, name="sdk-screen", client=client) as sb:
        png = sb.screenshot()
        assert png.startswith(PNG)
        jpeg = sb.screenshot(format="jpeg", max_edge=320)
        assert jpeg[:2] == b"\xff\xd8"
        assert sb.get_screen_size()[0] > 0
        with pytest.raises(carrel.InvalidArgument):
            sb.screenshot(region=(0, 0, 99999, 10))
        reply = sb.computer({"action": "screenshot"})
        assert reply["results"][0]["output"]["media_type"] == "image/png"
        for verb in (
            lambda: sb.left_click(10, 10),
            lambda: sb.right_click(10, 10),
            lambda: sb.double_click(10, 10),
            lambda: sb.move_mouse(10, 10),
            lambda: sb.drag((10, 10), (20, 20)),
            lambda: sb.scroll("down", 2, 10, 10),
            lambda: sb.write("hello"),
            lambda: sb.press("Return"),
            lambda: sb.press(["ctrl", "c"]),
            lambda: sb.commands.run("echo hi"),
            lambda: sb.files.read("/tmp/x"),
            lambda: sb.files.write("/tmp/x", b"\x00\x01"),
            lambda: sb.hibernate(),
            lambda: sb.snapshot("s1"),
            lambda: sb.fork(),
            lambda: sb.diff(),
            lambda: sb.shell(),  # the websocket's refusal, read from the 501 reply
        ):
            with pytest.raises(carrel.Unsupported) as info:
                verb()
            assert info.value.status == 501 and info.value.code == "unsupported"
        # Checked before anything reaches the guest.
        with pytest.raises(carrel.InvalidArgument):
            sb.left_click(5000, 10)
        with pytest.raises(carrel.InvalidArgument):
            sb.press("ctrl+nosuchkey")
        with pytest.raises(carrel.InvalidArgument):
            sb.files.read("/tmp/../etc/shadow")
        with pytest.raises(carrel.InvalidArgument):
            sb.commands.run("true", cwd="relative")
        # Past the old 32 MiB cap: streamed, then refused by the test driver's missing agent.
        with pytest.raises(carrel.Unsupported) as info:
            sb.files.write("/tmp/big", b"x" * (32 * 1024 * 1024 + 1))
        assert info.value.status == 501
        with pytest.raises(carrel.NotFound):
            sb.revert("nope")
        assert sb.snapshots() == []
        # An extraction through a missing agent is recorded, with its error.
        x = sb.extract(["/out"])
        assert x["error"] and x["source"] == "agent"
        assert sb.client.extractions(sb.id)[0]["id"] == x["id"]
        with pytest.raises(carrel.NotFound):
            sb.download_artifact("a-000000000000")
        kinds = [e["action"] for e in sb.events()]
        assert "file_write" in kinds and "click" in kinds


def test_pause_refuses_input(client, template):
    with carrel.Sandbox.create(template=template, name="sdk-paused", client=client) as sb:
        sb.pause()
        with pytest.raises(carrel.WrongState):
            sb.commands.run("true")
        sb.resume()


def test_roles_map_to_typed_errors(daemon, client, template):
    agent = client.create_token("sdk-agent", "agent")
    reviewer = client.create_token("sdk-reviewer", "reviewer")
    with carrel.Sandbox.create(template=template, name="sdk-admins", client=client) as admins:
        with carrel.Client(socket=daemon.socket, token=agent["token"]) as a:
            # An agent never learns of another principal's session.
            with pytest.raises(carrel.NotFound):
                carrel.Sandbox.connect(admins.id, client=a)
            with pytest.raises(carrel.Forbidden) as info:
                a.remove_template("tiny")
            assert info.value.status == 403
            with carrel.Sandbox.create(template=template, name="sdk-agents", client=a) as mine:
                assert mine.info["owner"] == "sdk-agent"
        with carrel.Client(socket=daemon.socket, token=reviewer["token"]) as r:
            with pytest.raises(carrel.Forbidden):
                carrel.Sandbox.create(template=template, client=r)
            assert carrel.Sandbox.connect(admins.id, client=r).id == admins.id
    client.revoke_token("sdk-agent")
    with carrel.Client(socket=daemon.socket, token=agent["token"]) as a:
        with pytest.raises(carrel.Unauthorized):
            a.sessions()


def test_sandbox_opens_its_own_client(daemon, template, monkeypatch):
    monkeypatch.delenv("CARREL_TOKEN", raising=False)
    monkeypatch.delenv("CARREL_URL", raising=False)
    monkeypatch.setenv("CARREL_SOCKET", daemon.socket)
    monkeypatch.setenv("CARREL_STATE_DIR", str(daemon.state))
    sb = carrel.Sandbox.create(template=template, name="sdk-own")
    try:
        assert sb.screenshot().startswith(PNG)
    finally:
        sb.kill()
    with pytest.raises(carrel.NotFound):
        carrel.Sandbox.connect("sdk-own")


def test_async_twin(daemon, template):
    async def main() -> None:
        async with carrel.AsyncClient(socket=daemon.socket, token=daemon.token) as c:
            assert (await c.version())["libvirt_uri"] == "test:///default"
            sb = await carrel.AsyncSandbox.create(template=template, name="sdk-async", client=c)
            assert sb.state == "running"
            again = await carrel.AsyncSandbox.connect("sdk-async", client=c)
            assert again.id == sb.id
            assert (await sb.screenshot()).startswith(PNG)
            shots = await asyncio.gather(sb.screenshot(), sb.screenshot(max_edge=200))
            assert all(s.startswith(PNG) for s in shots)
            with pytest.raises(carrel.Unsupported):
                await sb.left_click(1, 1)
            with pytest.raises(carrel.Unsupported):
                await sb.commands.run(["true"])
            with pytest.raises(carrel.Unsupported):
                await sb.files.read("/etc/hostname")
            with pytest.raises(carrel.Unsupported):
                await sb.snapshot("s1")
            assert (await sb.pause())["state"] == "paused"
            assert (await sb.resume())["state"] == "running"
            assert (await sb.events())[0]["action"] == "create"
            assert (await sb.kill())["state"] == "destroyed"
            with pytest.raises(carrel.NotFound):
                await carrel.AsyncSandbox.connect("nope", client=c)

    asyncio.run(main())


def test_template_removed_last(client, template):
    # Runs last in this file: every session above is destroyed by now.
    assert client.remove_template("tiny") == ["tiny@1"]
    assert client.templates() == []


def test_daemon_exits_cleanly_and_never_logged_the_token(daemon):
    # The very last test: SIGTERM ends carreld with status 0 (under ASan: no leak on any path
    # the SDK took), and the token never reached its log.
    assert daemon.proc is not None
    daemon.proc.terminate()
    assert daemon.proc.wait(30) == 0
    assert not Path(daemon.socket).exists()
    log = daemon.log.read_text()
    assert "ready" in log
    assert daemon.token not in log
