"""examples/'s agent loops against the scripted stand-in model and a real carreld on libvirt's
test driver: the screenshots the model gets are the daemon's; input is unsupported there, so
the loops must hand the refusal to the model (Anthropic: an is_error tool_result; OpenAI: the
screen again) and still finish."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import carrel  # noqa: E402
from standin import StandinModel, load_example  # noqa: E402


@pytest.fixture()
def model(tmp_path):
    m = StandinModel(tmp_path, click="10,10", command="echo hi")
    yield m
    m.stop()


@pytest.fixture()
def sandbox(client, template):
    with carrel.Sandbox.create(template=template, name="sdk-loop", client=client) as sb:
        yield sb


def test_anthropic_loop_on_carreld(model, sandbox):
    loop = load_example("anthropic_computer_use")
    result = loop.run(sandbox, "run a command", base_url=model.url, api_key="k",
                      log=lambda s: None)
    assert result["text"].startswith("Done")
    seen = model.entries()
    assert [e.get("action") for e in seen if "action" in e] == [
        "screenshot", "left_click", "type", "key", "screenshot", "done"]
    # The first screenshot reached the model as a real PNG of the daemon's screen.
    assert next(e for e in seen if e.get("step") == 1)["png_bytes"] > 1000
    errors = [e for e in seen if "error" in e]
    assert len(errors) == 3 and all("unsupported" in e["error"][0]["text"] for e in errors)
    assert [e["action"] for e in sandbox.events() if e["kind"] == "action"].count("click") == 1


def test_openai_loop_on_carreld(model, sandbox):
    loop = load_example("openai_computer_use")
    result = loop.run(sandbox, "run a command", base_url=model.url + "/v1", api_key="k",
                      log=lambda s: None)
    assert result["text"].startswith("Done")
    seen = model.entries()
    assert [e["action"] for e in seen] == [
        "screenshot", "click", "type", "keypress", "screenshot", "done"]
    assert all(e["png_bytes"] > 1000 for e in seen[1:])
