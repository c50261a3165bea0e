#!/usr/bin/env python3
"""OpenAI's computer-use loop (Responses API), driving a carrel session through the Python SDK.

    export OPENAI_API_KEY=sk-...
    PYTHONPATH=sdk/python python3 examples/openai_computer_use.py "Open a terminal and run uname -a"

The loop: send the task with the ``computer_use_preview`` tool to ``POST /v1/responses``; for
every ``computer_call`` item of the response, do its action on the sandbox (``click`` becomes
``Sandbox.left_click``, ``type`` becomes ``Sandbox.write``, ``keypress`` becomes
``Sandbox.press``, ...) and answer with a ``computer_call_output`` holding a fresh screenshot
(``previous_response_id`` chains the turns); stop when a response has no ``computer_call``.

Environment: ``OPENAI_API_KEY``; ``OPENAI_BASE_URL`` (default https://api.openai.com/v1, e.g.
a scripted stand-in model in tests); ``OPENAI_MODEL`` (default computer-use-preview);
``CARREL_SANDBOX`` (an existing session; else a new one of ``--template``, killed at the end),
and the SDK's own (``CARREL_SOCKET``, ``CARREL_URL``, ``CARREL_TOKEN``, ``CARREL_STATE_DIR``).
Only httpx (python3-httpx) and the SDK are needed: no ``openai`` package.
"""

from __future__ import annotations

import argparse
import base64
import json
import os
import sys
from pathlib import Path
from typing import Any

try:
    import carrel
except ImportError:  # run from the source tree without installing the SDK
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "sdk" / "python"))
    import carrel

import httpx

DEFAULT_MODEL = "computer-use-preview"
BUTTONS = {"left": "left_click", "right": "right_click", "wheel": "middle_click",
           "middle": "middle_click"}


def perform(sb: carrel.Sandbox, action: dict[str, Any]) -> None:
    """Does one OpenAI computer action on the sandbox. Actions without a Sandbox verb of their
    own (back/forward buttons, scroll by pixels, multi-point drags) go to carreld as they are:
    its computer route reads OpenAI's format itself."""
    kind = action.get("type")
    x, y = action.get("x"), action.get("y")
    if kind == "screenshot":
        return
    if kind == "click" and action.get("button", "left") in BUTTONS and not action.get("keys"):
        getattr(sb, BUTTONS[action.get("button", "left")])(int(x), int(y))
    elif kind == "double_click" and not action.get("keys"):
        sb.double_click(int(x), int(y))
    elif kind == "move" and not action.get("keys"):
        sb.move_mouse(int(x), int(y))
    elif kind == "type":
        sb.write(str(action["text"]))
    elif kind == "keypress":
        # OpenAI's letters carry no case ("CTRL", "L" is ctrl+l); carrel's "L" means shift+l.
        sb.press([str(k).lower() if len(str(k)) == 1 else str(k) for k in action["keys"]])
    elif kind == "drag" and len(action.get("path") or []) == 2 and not action.get("keys"):
        a, b = action["path"]
        sb.drag((int(a["x"]), int(a["y"])), (int(b["x"]), int(b["y"])))
    elif kind == "wait":
        sb.wait(int(action.get("ms", 1000)))
    else:  # scroll (pixels, both axes), back/forward clicks, clicks with keys, long drags
        sb.computer([action], observe="none")


def call_output(sb: carrel.Sandbox, call: dict[str, Any]) -> dict[str, Any]:
    """The computer_call_output item for one computer_call: a fresh screenshot (after an error
    too: the model sees the screen and may try another way)."""
    try:
        perform(sb, dict(call.get("action") or {}))
    except carrel.CarrelError as e:  # refused or failed: the model sees the screen and goes on
        print(f"action refused: {e}", file=sys.stderr)
    png = sb.screenshot()
    return {
        "type": "computer_call_output",
        "call_id": call["call_id"],
        "acknowledged_safety_checks": call.get("pending_safety_checks") or [],
        "output": {
            "type": "input_image",
            "image_url": "data:image/png;base64," + base64.b64encode(png).decode(),
        },
    }


def output_text(response: dict[str, Any]) -> str:
    parts = []
    for item in response.get("output") or []:
        if item.get("type") == "message":
            for c in item.get("content") or []:
                if c.get("type") == "output_text":
                    parts.append(c.get("text", ""))
    return "\n".join(parts)


def run(
    sb: carrel.Sandbox,
    task: str,
    *,
    base_url: str | None = None,
    api_key: str | None = None,
    model: str | None = None,
    max_steps: int = 30,
    log=print,
) -> dict[str, Any]:
    """Runs the loop until a response has no computer_call: ``{"text", "steps", "actions"}``."""
    base_url = base_url or os.environ.get("OPENAI_BASE_URL") or "https://api.openai.com/v1"
    api_key = api_key or os.environ.get("OPENAI_API_KEY")
    if not api_key:
        raise SystemExit("OPENAI_API_KEY is not set")
    width, height = sb.get_screen_size()
    tools = [{"type": "computer_use_preview", "display_width": width,
              "display_height": height, "environment": "linux"}]
    body: dict[str, Any] = {
        "model": model or os.environ.get("OPENAI_MODEL", DEFAULT_MODEL),
        "tools": tools,
        "input": [{"role": "user", "content": task}],
        "truncation": "auto",
    }
    actions: list[dict[str, Any]] = []
    headers = {"Authorization": f"Bearer {api_key}", "Content-Type": "application/json"}
    with httpx.Client(base_url=base_url.rstrip("/"), headers=headers, timeout=300) as http:
        for step in range(max_steps):
            resp = http.post("/responses", json=body)
            if resp.status_code >= 400:
                raise RuntimeError(f"responses API: HTTP {resp.status_code}: {resp.text[:500]}")
            response = resp.json()
            calls = [i for i in response.get("output") or [] if i.get("type") == "computer_call"]
            text = output_text(response)
            if text:
                log(f"model: {text}")
            if not calls:
                return {"text": text, "steps": step + 1, "actions": actions}
            outputs = []
            for call in calls:
                log(f"action: {json.dumps(call.get('action'))}")
                actions.append(dict(call.get("action") or {}))
                outputs.append(call_output(sb, call))
            body = {
                "model": body["model"],
                "previous_response_id": response["id"],
                "tools": tools,
                "input": outputs,
                "truncation": "auto",
            }
    return {"text": None, "steps": max_steps, "actions": actions}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("task", help="what the model should do on the desktop")
    p.add_argument("--template", default="tiny", help="template of a new session (default tiny)")
    p.add_argument("--sandbox", default=os.environ.get("CARREL_SANDBOX"),
                   help="an existing session (id or name) instead of a new one")
    p.add_argument("--max-steps", type=int, default=30)
    p.add_argument("--model", default=None)
    args = p.parse_args(argv)
    if args.sandbox:
        sb = carrel.Sandbox.connect(args.sandbox)
        owned = False
    else:
        sb = carrel.Sandbox.create(template=args.template)
        owned = True
    try:
        print(f"sandbox {sb.id}")
        result = run(sb, args.task, max_steps=args.max_steps, model=args.model)
        print(json.dumps({"text": result["text"], "steps": result["steps"],
                          "actions": len(result["actions"])}))
        return 0 if result["text"] is not None else 1
    finally:
        sb.kill() if owned else sb.close()


if __name__ == "__main__":
    sys.exit(main())
