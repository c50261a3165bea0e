"""examples/'s agent loops against the scripted stand-in model, with a fake Sandbox that
records the verbs the loops call: the translation of each model action into SDK calls."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import carrel  # noqa: E402
from standin import StandinModel, load_example  # noqa: E402

PNG = b"\x89PNG\r\n\x1a\n" + b"\x00" * 32
COMMAND = "echo loop > /tmp/loop.txt"


class FakeSandbox:
    """The Sandbox verbs the loops use, recorded."""

    id = "s-fake"

    def __init__(self) -> None:
        self.calls: list[tuple] = []

    def __getattr__(self, name):
        def verb(*args, **kw):
            self.calls.append((name, *args))
            if name == "screenshot":
                return PNG
            if name == "get_screen_size":
                return (1024, 768)
            if name == "get_cursor_position":
                return (1, 2)
            return None
        return verb


@pytest.fixture()
def model(tmp_path):
    m = StandinModel(tmp_path, click="500,330", command=COMMAND)
    yield m
    m.stop()


def _input_calls(sb: FakeSandbox):
    return [c for c in sb.calls if c[0] not in ("screenshot", "get_screen_size")]


def test_anthropic_loop(model):
    loop = load_example("anthropic_computer_use")
    sb = FakeSandbox()
    result = loop.run(sb, "run a command", base_url=model.url, api_key="k", log=lambda s: None)
    assert result["text"].startswith("Done")
    assert result["steps"] == 6
    assert _input_calls(sb) == [("left_click", 500, 330), ("write", COMMAND), ("press", "Return")]
    # A screenshot after each of the five actions, each seen by the model as a PNG.
    assert sum(1 for c in sb.calls if c[0] == "screenshot") == 5
    seen = model.entries()
    assert [e["action"] for e in seen] == ["screenshot", "left_click", "type", "key",
                                           "screenshot", "done"]
    assert all(e["png_bytes"] == len(PNG) for e in seen[1:])


def test_openai_loop(model):
    loop = load_example("openai_computer_use")
    sb = FakeSandbox()
    result = loop.run(sb, "run a command", base_url=model.url + "/v1", api_key="k",
                      log=lambda s: None)
    assert result["text"].startswith("Done")
    assert _input_calls(sb) == [("left_click", 500, 330), ("write", COMMAND),
                                ("press", ["ENTER"])]
    seen = model.entries()
    assert [e["action"] for e in seen] == ["screenshot", "click", "type", "keypress",
                                           "screenshot", "done"]
    assert all(e["png_bytes"] == len(PNG) for e in seen[1:])


def test_anthropic_translation():
    loop = load_example("anthropic_computer_use")
    sb = FakeSandbox()
    for action in [
        {"action": "right_click", "coordinate": [1, 2]},
        {"action": "double_click", "coordinate": [3, 4]},
        {"action": "middle_click"},
        {"action": "mouse_move", "coordinate": [5, 6]},
        {"action": "left_click_drag", "start_coordinate": [1, 1], "coordinate": [9, 9]},
        {"action": "scroll", "coordinate": [7, 8], "scroll_direction": "up", "scroll_amount": 2},
        {"action": "wait", "duration": 0.5},
        {"action": "triple_click", "coordinate": [1, 1]},
        {"action": "left_click", "coordinate": [1, 1], "text": "shift"},
    ]:
        loop.perform(sb, action)
    assert loop.perform(sb, {"action": "cursor_position"}) == "X=1,Y=2"
    assert sb.calls == [
        ("right_click", 1, 2),
        ("double_click", 3, 4),
        ("middle_click", None, None),
        ("move_mouse", 5, 6),
        ("drag", (1, 1), (9, 9)),
        ("scroll", "up", 2, 7, 8),
        ("wait", 500),
        ("computer", [{"action": "triple_click", "coordinate": [1, 1]}]),
        ("computer", [{"action": "left_click", "coordinate": [1, 1], "text": "shift"}]),
        ("get_cursor_position",),
    ]


def test_anthropic_error_is_a_tool_result():
    loop = load_example("anthropic_computer_use")

    class Refusing(FakeSandbox):
        def left_click(self, *a):
            raise carrel.WrongState("session under human control", status=409)

    block = loop.tool_result(Refusing(), {"id": "toolu_1", "input": {"action": "left_click",
                                                                      "coordinate": [1, 1]}})
    assert block["is_error"] and "human control" in block["content"][0]["text"]


def test_openai_translation():
    loop = load_example("openai_computer_use")
    sb = FakeSandbox()
    for action in [
        {"type": "click", "button": "right", "x": 1, "y": 2},
        {"type": "click", "button": "wheel", "x": 1, "y": 2},
        {"type": "double_click", "x": 3, "y": 4},
        {"type": "move", "x": 5, "y": 6},
        {"type": "drag", "path": [{"x": 1, "y": 1}, {"x": 9, "y": 9}]},
        {"type": "wait"},
        {"type": "scroll", "x": 1, "y": 1, "scroll_x": 0, "scroll_y": 300},
        {"type": "click", "button": "back", "x": 1, "y": 1},
        {"type": "keypress", "keys": ["CTRL", "L"]},
    ]:
        loop.perform(sb, action)
    assert sb.calls == [
        ("right_click", 1, 2),
        ("middle_click", 1, 2),
        ("double_click", 3, 4),
        ("move_mouse", 5, 6),
        ("drag", (1, 1), (9, 9)),
        ("wait", 1000),
        ("computer", [{"type": "scroll", "x": 1, "y": 1, "scroll_x": 0, "scroll_y": 300}]),
        ("computer", [{"type": "click", "button": "back", "x": 1, "y": 1}]),
        ("press", ["CTRL", "l"]),
    ]
