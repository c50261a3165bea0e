"""The SDK without a daemon: error mapping, endpoint and token rules, request bodies."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import httpx
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

import carrel  # noqa: E402
from carrel import _config  # noqa: E402

# Every code of manager/util/util-error.c, and the status manager/api/api-error.c gives it.
API_CODES = {
    "failed": 500,
    "invalid_argument": 400,
    "not_found": 404,
    "exists": 409,
    "wrong_state": 409,
    "policy_denied": 403,
    "unauthorized": 401,
    "forbidden": 403,
    "limit_exceeded": 413,
    "unsupported": 501,
    "timeout": 504,
    "hypervisor_error": 500,
    "disk_error": 500,
    "store_error": 500,
    "internal": 500,
    "busy": 409,
    "no_space": 507,
    "rate_limited": 429,
    "overloaded": 503,
    "gone": 410,
}

C_SOURCE = Path(__file__).resolve().parents[4] / "manager" / "util" / "util-error.c"


def test_a_class_per_code():
    for code, status in API_CODES.items():
        err = carrel.error_from_reply(status, {"error": {"code": code, "message": "m"}}, "r-1")
        assert type(err) is carrel.ERRORS_BY_CODE[code]
        assert (err.code, err.status, err.message, err.request_id) == (code, status, "m", "r-1")
        assert isinstance(err, carrel.CarrelError)
    assert carrel.ERRORS_BY_CODE["gone"] is carrel.Gone
    assert carrel.ERRORS_BY_CODE["busy"] is carrel.Busy
    assert isinstance(carrel.error_from_reply(504, {"error": {"code": "timeout", "message": ""}}),
                      TimeoutError)


def test_codes_match_carreld():
    """The table above is carreld's: a new code in C must get a class here."""
    if not C_SOURCE.exists():
        pytest.skip("not in the carrel tree")
    text = C_SOURCE.read_text()
    names = set()
    for line in text.splitlines():
        line = line.strip()
        if line.startswith("[CARREL_ERROR_") and "= \"" in line:
            names.add(line.split('"')[1])
    assert names == set(API_CODES)
    assert names <= set(carrel.ERRORS_BY_CODE)


def test_unknown_code_and_no_envelope():
    err = carrel.error_from_reply(418, {"error": {"code": "teapot", "message": "m"}})
    assert type(err) is carrel.CarrelError and err.code == "teapot"
    err = carrel.error_from_reply(404, "not json")
    assert type(err) is carrel.NotFound and "HTTP 404" in err.message
    err = carrel.error_from_reply(502, None)
    assert type(err) is carrel.InternalError
    err = carrel.error_from_reply(
        429, {"error": {"code": "limit_exceeded", "message": "slow down"}}, None,
        httpx.Headers({"Retry-After": "7"}))
    assert type(err) is carrel.LimitExceeded and err.retry_after == 7.0
    assert "limit_exceeded: slow down" == str(err)
    err = carrel.error_from_reply(
        429, {"error": {"code": "rate_limited", "message": "[limits] rate"}}, None,
        httpx.Headers({"Retry-After": "2"}))
    assert type(err) is carrel.RateLimited and err.retry_after == 2.0
    assert isinstance(err, carrel.LimitExceeded)
    err = carrel.error_from_reply(
        503, {"error": {"code": "overloaded", "message": "queue full"}}, None,
        httpx.Headers({"Retry-After": "1"}))
    assert type(err) is carrel.Overloaded and err.retry_after == 1.0


def test_endpoint_rules(monkeypatch):
    monkeypatch.delenv("CARREL_URL", raising=False)
    monkeypatch.delenv("CARREL_SOCKET", raising=False)
    assert _config.resolve_endpoint() == _config.Endpoint("/run/carrel/carreld.sock", None)
    monkeypatch.setenv("CARREL_SOCKET", "/tmp/x.sock")
    assert _config.resolve_endpoint().socket == "/tmp/x.sock"
    monkeypatch.setenv("CARREL_URL", "http://127.0.0.1:8470/")
    assert _config.resolve_endpoint() == _config.Endpoint(None, "http://127.0.0.1:8470")
    assert _config.resolve_endpoint(socket="/s").socket == "/s"
    with pytest.raises(ValueError):
        _config.resolve_endpoint(url="ftp://x")
    with pytest.raises(ValueError):
        _config.resolve_endpoint(url="http://u:p@127.0.0.1:1")
    with pytest.raises(ValueError):
        _config.resolve_endpoint(url="http://a", socket="/s")


def test_token_rules(tmp_path, monkeypatch):
    monkeypatch.delenv("CARREL_TOKEN", raising=False)
    monkeypatch.setenv("CARREL_STATE_DIR", str(tmp_path))
    assert _config.resolve_token() is None
    (tmp_path / "admin.token").write_text("from-file\n")
    assert _config.resolve_token() == "from-file"
    monkeypatch.setenv("CARREL_TOKEN", " from-env ")
    assert _config.resolve_token() == "from-env"
    other = tmp_path / "other"
    other.write_text("other-file")
    assert _config.resolve_token(token_file=other) == "other-file"
    assert _config.resolve_token(token="arg") == "arg"
    with pytest.raises(ValueError):
        _config.resolve_token(token="bad\ntoken")
    other.write_text("x" * 5000)
    with pytest.raises(ValueError):
        _config.resolve_token(token_file=other)


def _recording_client(replies):
    """A Client whose transport records requests and answers from replies."""
    seen = []

    def handler(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        status, body = replies.pop(0)
        if isinstance(body, bytes):
            return httpx.Response(status, content=body, headers={"X-Request-Id": "r-x"})
        return httpx.Response(status, json=body, headers={"X-Request-Id": "r-x"})

    c = carrel.Client(socket="/nonexistent", token="t")
    c._http = httpx.Client(base_url="http://carreld", transport=httpx.MockTransport(handler),
                           headers={"Authorization": "Bearer t"})
    return c, seen


def test_sandbox_verbs_build_the_api_requests():
    session = {"id": "s-1", "name": "n", "state": "running"}
    ok = {"results": [], "screenshot": None, "screen": {"width": 1024, "height": 768},
          "pointer": {"x": 3, "y": 4}, "duration_ms": 1}
    c, seen = _recording_client([(201, session)] + [(200, ok)] * 10 + [
        (200, {"exit_code": 3, "stdout": "o", "stderr": "e", "truncated": False,
               "timed_out": False, "duration_ms": 5}),
        (200, b"file"),
        (200, {"path": "/p", "bytes": 2}),
        (200, b"\x89PNG"),
        (404, {"error": {"code": "not_found", "message": "no snapshot 'x'"}}),
    ])
    sb = carrel.Sandbox.create(template="tiny", name="n", policy="small", ttl=60, client=c)
    sb.left_click(1, 2)
    sb.right_click()
    sb.double_click(5, 6)
    sb.move_mouse(7, 8)
    sb.drag((1, 1), (9, 9))
    sb.scroll("up", 3)
    sb.write("hi\n")
    sb.press("ctrl+c")
    sb.press(["ctrl", "shift", "t"])
    assert sb.get_screen_size() == (1024, 768)
    r = sb.commands.run("echo o; exit 3", timeout=5, cwd="/tmp", env={"A": "b"})
    assert (r.exit_code, r.stdout, r.stderr, r.ok) == (3, "o", "e", False)
    assert sb.files.read("/p") == "file"
    assert sb.files.write("/p", "hi") == {"path": "/p", "bytes": 2}
    assert sb.screenshot() == b"\x89PNG"
    with pytest.raises(carrel.NotFound) as info:
        sb.revert("x")
    assert info.value.request_id == "r-x"
    bodies = [json.loads(r.content) if r.content and r.method != "PUT" else None for r in seen]
    assert seen[0].url.path == "/v1/sessions"
    assert bodies[0] == {"template": "tiny", "name": "n", "policy": "small", "ttl_s": 60}
    actions = [b["actions"][0] for b in bodies[1:11]]
    assert all(b["observe"] == "none" for b in bodies[1:11])
    assert actions == [
        {"action": "left_click", "coordinate": [1, 2]},
        {"action": "right_click"},
        {"action": "double_click", "coordinate": [5, 6]},
        {"action": "mouse_move", "coordinate": [7, 8]},
        {"action": "left_click_drag", "start_coordinate": [1, 1], "coordinate": [9, 9]},
        {"action": "scroll", "scroll_direction": "up", "scroll_amount": 3},
        {"action": "type", "text": "hi\n"},
        {"action": "key", "combo": "ctrl+c"},
        {"action": "key", "keys": ["ctrl", "shift", "t"]},
        {"action": "screen_size"},
    ]
    assert seen[1].url.path == "/v1/sessions/s-1/computer"
    assert bodies[11] == {"argv": ["/bin/sh", "-c", "echo o; exit 3"], "timeout_s": 5,
                          "cwd": "/tmp", "env": {"A": "b"}}
    assert seen[12].url.params["path"] == "/p"
    assert seen[13].method == "PUT" and seen[13].content == b"hi"
    assert seen[14].url.path == "/v1/sessions/s-1/screenshot"
    assert bodies[15] == {"snapshot": "x"}


def test_create_with_screen_and_size():
    session = {"id": "s-2", "name": "w", "state": "running", "screen": "1280x800"}
    c, seen = _recording_client([(201, session)])
    sb = carrel.Sandbox.create(template="desktop", screen="1280x800", vcpus=2, client=c)
    assert sb.info["screen"] == "1280x800"
    assert json.loads(seen[0].content) == {"template": "desktop", "vcpus": 2,
                                           "screen": "1280x800"}


def test_files_operations_build_the_api_requests():
    entry = {"name": "a", "type": "file", "size": 1, "mode": "0644", "mtime": 5}
    c, seen = _recording_client([
        (201, {"id": "s-1", "state": "running"}),
        (200, {"path": "/d", "entries": [entry], "truncated": False}),
        (200, {"path": "/d/a", "entry": entry}),
        (200, {"path": "/d/e", "created": True}),
        (200, {"path": "/d/e", "from": "/d/a"}),
        (200, {"path": "/d/e"}),
        (409, {"error": {"code": "wrong_state", "message": "directory '/d' is not empty"}}),
    ])
    sb = carrel.Sandbox.create(template="tiny", client=c)
    assert sb.files.list("/d") == [entry]
    assert sb.files.stat("/d/a") == entry
    assert sb.files.mkdir("/d/e", parents=True) == {"path": "/d/e", "created": True}
    assert sb.files.move("/d/a", "/d/e")["from"] == "/d/a"
    assert sb.files.remove("/d/e", recursive=True) == {"path": "/d/e"}
    with pytest.raises(carrel.WrongState):
        sb.files.remove("/d")
    assert [(r.method, r.url.path) for r in seen[1:]] == [
        ("GET", "/v1/sessions/s-1/fs"),
        ("GET", "/v1/sessions/s-1/fs/stat"),
        ("POST", "/v1/sessions/s-1/fs/mkdir"),
        ("POST", "/v1/sessions/s-1/fs/move"),
        ("POST", "/v1/sessions/s-1/fs/remove"),
        ("POST", "/v1/sessions/s-1/fs/remove"),
    ]
    assert seen[1].url.params["path"] == "/d"
    assert json.loads(seen[3].content) == {"path": "/d/e", "parents": True}
    assert json.loads(seen[4].content) == {"from": "/d/a", "to": "/d/e"}
    assert json.loads(seen[6].content) == {"path": "/d", "recursive": False}


def test_write_any_text_returns_the_method():
    def typed(method):
        return (200, {"results": [{"index": 0, "action": "type", "duration_ms": 1,
                                   "output": {"method": method}}],
                      "screenshot": None, "screen": {"width": 1, "height": 1},
                      "pointer": {"x": 0, "y": 0}, "duration_ms": 1})

    c, seen = _recording_client([typed("keys"), typed("guest_keysyms"), typed("clipboard")])
    sb = carrel.Sandbox(c, {"id": "s-1", "state": "running"})
    assert sb.write("ok\n") == "keys"
    assert sb.write("na\u00efve \u4e2d\u6587 \U0001F600") == "guest_keysyms"
    assert sb.write("\u00df", method="clipboard", paste_keys="ctrl+v") == "clipboard"
    actions = [json.loads(r.content)["actions"][0] for r in seen]
    assert actions == [
        {"action": "type", "text": "ok\n"},
        {"action": "type", "text": "na\u00efve \u4e2d\u6587 \U0001F600"},
        {"action": "type", "text": "\u00df", "method": "clipboard", "paste_keys": "ctrl+v"},
    ]


def test_command_check():
    c, _ = _recording_client([
        (200, {"exit_code": 1, "stdout": "", "stderr": "boom", "truncated": False,
               "timed_out": False, "duration_ms": 1})])
    sb = carrel.Sandbox(c, {"id": "s-1", "state": "running"})
    with pytest.raises(carrel.CommandFailed) as info:
        sb.commands.run(["false"], check=True)
    assert info.value.result.exit_code == 1 and "boom" in info.value.message


def test_background_process():
    c, seen = _recording_client([
        (201, {"handle": "p1a", "pid": 42, "state": "running", "exit_code": None}),
        (200, {"handle": "p1a", "pid": 42, "state": "running", "exit_code": None,
               "stdout": "he", "stderr": "", "stdout_next": 2, "stderr_next": 0, "more": True}),
        (200, {"handle": "p1a", "pid": 42, "state": "exited", "exit_code": 0,
               "stdout": "llo", "stderr": "", "stdout_next": 5, "stderr_next": 0,
               "more": False}),
        (204, b""),
        (204, b""),
        (204, b""),
        (200, {"processes": [{"handle": "p1a", "pid": 42, "state": "exited", "exit_code": 0}]}),
    ])
    sb = carrel.Sandbox(c, {"id": "s-1", "state": "running"})
    p = sb.commands.run(["cat"], background=True)
    assert (p.handle, p.pid, p.exit_code) == ("p1a", 42, None)
    assert p.read() == ("hello", "")
    assert p.exit_code == 0
    p.write("x")
    p.close_stdin()
    p.kill("KILL")
    assert [q.handle for q in sb.commands.list()] == ["p1a"]
    bodies = [json.loads(r.content) if r.content else None for r in seen]
    assert bodies[0] == {"argv": ["cat"], "background": True}
    assert seen[1].url.path == "/v1/sessions/s-1/processes/p1a"
    assert seen[2].url.params["stdout_offset"] == "2"
    assert (seen[3].url.path, bodies[3]) == ("/v1/sessions/s-1/processes/p1a/stdin", {"data": "x"})
    assert bodies[4] == {"close": True}
    assert (seen[5].url.path, bodies[5]) == ("/v1/sessions/s-1/processes/p1a/kill",
                                            {"signal": "KILL"})


def test_streamed_run():
    events = (
        b'event: started\ndata: {"handle":"p1a"}\n\n'
        b'event: stdout\ndata: {"data":"1\\n","data_base64":"MQo="}\n\n'
        b'event: stderr\ndata: {"data":"e","data_base64":"ZQ=="}\n\n'
        b'event: stdout\ndata: {"data":"2\\n","data_base64":"Mgo="}\n\n'
        b'event: exit\ndata: {"handle":"p1a","exit_code":3,"timed_out":false,'
        b'"truncated":false,"duration_ms":7}\n\n'
    )
    c, seen = _recording_client([(200, events)])
    sb = carrel.Sandbox(c, {"id": "s-1", "state": "running"})
    got = []
    r = sb.commands.run("for i in 1 2; do echo $i; done", on_stdout=got.append)
    assert got == ["1\n", "2\n"]
    assert (r.exit_code, r.stdout, r.stderr, r.duration_ms) == (3, "1\n2\n", "e", 7)
    assert json.loads(seen[0].content)["stream"] is True


def test_streamed_error_event():
    events = (b'event: started\ndata: {"handle":"p1a"}\n\n'
              b'event: error\ndata: {"error":{"code":"timeout","message":"no answer"}}\n\n')
    c, _ = _recording_client([(200, events)])
    sb = carrel.Sandbox(c, {"id": "s-1", "state": "running"})
    with pytest.raises(carrel.Timeout):
        sb.commands.run("true", on_stdout=print)


def test_input_file():
    assert carrel.input_file("/a", "hi", 0o600) == {"path": "/a", "content_base64": "aGk=",
                                                     "mode": "0600"}


def test_package_builds_offline(tmp_path):
    """pyproject.toml builds a wheel with Debian's setuptools alone (no index, no isolation),
    holding the package and py.typed: what `pip install --no-build-isolation sdk/python` does."""
    import shutil
    import subprocess
    import zipfile

    src = Path(__file__).resolve().parents[2]
    copy = tmp_path / "src"
    shutil.copytree(src, copy, ignore=shutil.ignore_patterns("tests", "build", "*.egg-info",
                                                             "__pycache__"))
    out = tmp_path / "dist"
    out.mkdir()
    subprocess.run(
        [sys.executable, "-B", "-c",
         "import sys; from setuptools import build_meta as b; print(b.build_wheel(sys.argv[1]))",
         str(out)],
        cwd=copy, check=True, capture_output=True)
    wheel = next(out.glob("carrel-*.whl"))
    names = set(zipfile.ZipFile(wheel).namelist())
    assert {"carrel/__init__.py", "carrel/client.py", "carrel/sandbox.py", "carrel/errors.py",
            "carrel/py.typed"} <= names
    meta = zipfile.ZipFile(wheel).read(
        next(n for n in names if n.endswith("METADATA"))).decode()
    assert "Requires-Python: >=3.11" in meta and "Requires-Dist: httpx" in meta


def test_accessibility_tree_and_click_element():
    tree = {"scope": "desktop", "count": 1, "truncated": False,
            "root": {"id": "", "role": "desktop frame", "name": "main", "states": [],
                     "bounds": None, "action": None, "children": []}}
    acted = {"results": [{"index": 0, "action": "click_element",
                          "output": {"element": "0.1", "mode": "action", "done": True}}]}
    c, seen = _recording_client([
        (200, tree), (200, tree), (200, acted), (200, acted),
        (404, {"error": {"code": "not_found", "message": "a11y action: no element '0.9'"}}),
        (200, tree),
    ])
    sb = carrel.Sandbox(c, {"id": "s-1", "name": "n", "state": "running"})
    assert sb.accessibility_tree(desktop=True, depth=3) == tree
    assert c.accessibility("s-1", model_screen=(640, 480))["count"] == 1
    assert sb.click_element("0.1", mode="action") == {"element": "0.1", "mode": "action",
                                                      "done": True}
    sb.click_element("0.1")
    with pytest.raises(carrel.NotFound):
        sb.click_element("0.9")
    assert seen[0].url.path == "/v1/sessions/s-1/accessibility"
    assert dict(seen[0].url.params) == {"scope": "desktop", "depth": "3"}
    assert dict(seen[1].url.params) == {"model_width": "640", "model_height": "480"}
    assert sb.accessibility_tree(app="Fire fox") == tree
    assert dict(seen[5].url.params) == {"app": "Fire fox"}
    assert json.loads(seen[2].content) == {
        "actions": [{"action": "click_element", "element": "0.1", "mode": "action"}],
        "observe": "none"}
    assert json.loads(seen[3].content)["actions"] == [{"action": "click_element",
                                                       "element": "0.1"}]


def test_computer_settle_and_settled_ms():
    shot = {"media_type": "image/png", "width": 4, "height": 3, "data": "",
            "settled": True, "settled_ms": 140, "changed": True, "samples": 6}
    reply = {"results": [{"index": 0, "action": "key", "duration_ms": 2}], "screenshot": shot,
             "screen": {"width": 4, "height": 3}, "pointer": {"x": 0, "y": 0},
             "duration_ms": 150, "settled": True, "settled_ms": 140}
    c, seen = _recording_client([(200, reply), (200, reply)])
    r = c.computer("s-1", {"action": "key", "text": "a"}, settle={"window_ms": 400})
    assert (r["settled"], r["settled_ms"], r["screenshot"]["changed"]) == (True, 140, True)
    assert json.loads(seen[0].content) == {"actions": [{"action": "key", "text": "a"}],
                                           "settle": {"window_ms": 400}}
    c.computer("s-1", {"action": "key", "text": "a"})
    assert json.loads(seen[1].content) == {"action": "key", "text": "a"}
