#!/usr/bin/env python3
"""Anthropic's computer-use tool loop, driving a carrel session through the Python SDK.

    export ANTHROPIC_API_KEY=sk-ant-...
    PYTHONPATH=sdk/python python3 examples/anthropic_computer_use.py "Open a terminal and run uname -a"

The loop: send the task with the ``computer`` tool to the Messages API; for every ``tool_use``
the model answers with, do the action on the sandbox (``left_click`` becomes
``Sandbox.left_click``, ``type`` becomes ``Sandbox.write``, ...) and send back a
``tool_result`` holding a fresh screenshot as a base64 PNG; stop when the model answers without
a tool call (or after ``--max-steps``).

Environment: ``ANTHROPIC_API_KEY``; ``ANTHROPIC_BASE_URL`` (default https://api.anthropic.com,
e.g. a scripted stand-in model in tests); ``ANTHROPIC_MODEL``; ``CARREL_SANDBOX`` (an existing
session's id or name; else a new session of ``--template`` is made and killed at the end), and
the SDK's own (``CARREL_SOCKET``, ``CARREL_URL``, ``CARREL_TOKEN``, ``CARREL_STATE_DIR``).
Only httpx (python3-httpx) and the SDK are needed: no ``anthropic`` package.
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

DEFAULT_MODEL = "claude-sonnet-4-5"
TOOL_TYPE = os.environ.get("ANTHROPIC_COMPUTER_TOOL", "computer_20250124")
BETA = os.environ.get("ANTHROPIC_BETA", "computer-use-2025-01-24")
SYSTEM = (
    "You operate a Linux desktop (X11, twm, an xterm) through the computer tool. "
    "Take a screenshot first; click a window before typing into it."
)


def _xy(action: dict[str, Any], key: str = "coordinate") -> tuple[int, int] | tuple[None, None]:
    c = action.get(key)
    if not c:
        return None, None
    return int(c[0]), int(c[1])


def perform(sb: carrel.Sandbox, action: dict[str, Any]) -> str | None:
    """Does one action of Anthropic's computer tool on the sandbox; returns text for the model
    (cursor_position) or None. Unknown or rare actions go to carreld as they are: its computer
    route reads Anthropic's format itself."""
    name = action.get("action")
    x, y = _xy(action)
    simple_click = not action.get("text")  # "text" on a click holds modifier keys
    if name == "screenshot":
        return None
    if name == "left_click" and simple_click:
        sb.left_click(x, y)
    elif name == "right_click" and simple_click:
        sb.right_click(x, y)
    elif name == "middle_click" and simple_click:
        sb.middle_click(x, y)
    elif name == "double_click" and simple_click:
        sb.double_click(x, y)
    elif name == "mouse_move" and x is not None:
        sb.move_mouse(x, y)
    elif name == "left_click_drag":
        sb.drag(_xy(action, "start_coordinate"), (x, y))  # type: ignore[arg-type]
    elif name == "type":
        sb.write(str(action["text"]))
    elif name == "key":
        sb.press(str(action["text"]))
    elif name == "scroll" and simple_click:
        sb.scroll(action.get("scroll_direction", "down"), int(action.get("scroll_amount", 3)), x, y)
    elif name == "wait":
        sb.wait(int(float(action.get("duration", 1)) * 1000))
    elif name == "cursor_position":
        cx, cy = sb.get_cursor_position()
        return f"X={cx},Y={cy}"
    else:  # triple_click, hold_key, left_mouse_down/up, clicks with modifiers, zoom, ...
        sb.computer([action], observe="none")
    return None


def tool_result(sb: carrel.Sandbox, tool_use: dict[str, Any]) -> dict[str, Any]:
    """The tool_result block for one tool_use: the action's text, if any, and a screenshot."""
    try:
        text = perform(sb, dict(tool_use.get("input") or {}))
        png = sb.screenshot()
    except carrel.CarrelError as e:
        return {
            "type": "tool_result",
            "tool_use_id": tool_use["id"],
            "is_error": True,
            "content": [{"type": "text", "text": str(e)}],
        }
    content: list[dict[str, Any]] = []
    if text:
        content.append({"type": "text", "text": text})
    content.append(
        {
            "type": "image",
            "source": {
                "type": "base64",
                "media_type": "image/png",
                "data": base64.b64encode(png).decode(),
            },
        }
    )
    return {"type": "tool_result", "tool_use_id": tool_use["id"], "content": content}


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
    """Runs the loop until the model stops calling the tool: ``{"text", "steps", "actions"}``."""
    base_url = (base_url or os.environ.get("ANTHROPIC_BASE_URL") or "https://api.anthropic.com")
    api_key = api_key or os.environ.get("ANTHROPIC_API_KEY")
    if not api_key:
        raise SystemExit("ANTHROPIC_API_KEY is not set")
    width, height = sb.get_screen_size()
    tool = {
        "type": TOOL_TYPE,
        "name": "computer",
        "display_width_px": width,
        "display_height_px": height,
        "display_number": 1,
    }
    headers = {
        "x-api-key": api_key,
        "anthropic-version": "2023-06-01",
        "anthropic-beta": BETA,
        "content-type": "application/json",
    }
    messages: list[dict[str, Any]] = [{"role": "user", "content": task}]
    actions: list[dict[str, Any]] = []
    with httpx.Client(base_url=base_url.rstrip("/"), headers=headers, timeout=300) as http:
        for step in range(max_steps):
            resp = http.post(
                "/v1/messages",
                json={
                    "model": model or os.environ.get("ANTHROPIC_MODEL", DEFAULT_MODEL),
                    "max_tokens": 4096,
                    "system": SYSTEM,
                    "tools": [tool],
                    "messages": messages,
                },
            )
            if resp.status_code >= 400:
                raise RuntimeError(f"messages API: HTTP {resp.status_code}: {resp.text[:500]}")
            reply = resp.json()
            content = reply.get("content") or []
            messages.append({"role": "assistant", "content": content})
            uses = [b for b in content if b.get("type") == "tool_use"]
            for b in content:
                if b.get("type") == "text" and b.get("text"):
                    log(f"model: {b['text']}")
            if not uses:
                text = "\n".join(b.get("text", "") for b in content if b.get("type") == "text")
                return {"text": text, "steps": step + 1, "actions": actions}
            results = []
            for use in uses:
                log(f"action: {json.dumps(use.get('input'))}")
                actions.append(dict(use.get("input") or {}))
                results.append(tool_result(sb, use))
            messages.append({"role": "user", "content": results})
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
