#!/usr/bin/env python3
"""A scripted stand-in for Anthropic's Messages API and OpenAI's Responses API (stdlib only).

It answers the computer-use loops of examples/ with a recorded sequence of tool calls instead of
a model's: take a screenshot, click the terminal, type a command, press Return, take a
screenshot, finish with a text. Every request after the first must carry the previous call's
result with a PNG screenshot (base64), or it answers 400 and the loop fails. What it saw is
appended to --log as JSON lines: {"api", "step", "png_bytes", "action"}.

    standin-model.py --port-file F --log L [--click X,Y] [--command TEXT] [--port P]

Routes: POST /v1/messages (Anthropic: ANTHROPIC_BASE_URL=http://127.0.0.1:PORT) and
POST /v1/responses (OpenAI: OPENAI_BASE_URL=http://127.0.0.1:PORT/v1). Any bearer or x-api-key
is accepted. Stops on SIGTERM.
"""

from __future__ import annotations

import argparse
import base64
import json
import os
import signal
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

PNG = b"\x89PNG\r\n\x1a\n"


def script(click: tuple[int, int], command: str) -> list[dict[str, Any]]:
    """The recorded sequence, in Anthropic's action names (translated for OpenAI below)."""
    return [
        {"action": "screenshot"},
        {"action": "left_click", "coordinate": [click[0], click[1]]},
        {"action": "type", "text": command},
        {"action": "key", "text": "Return"},
        {"action": "screenshot"},
    ]


def to_openai(a: dict[str, Any]) -> dict[str, Any]:
    name = a["action"]
    if name == "screenshot":
        return {"type": "screenshot"}
    if name == "left_click":
        return {"type": "click", "button": "left", "x": a["coordinate"][0], "y": a["coordinate"][1]}
    if name == "type":
        return {"type": "type", "text": a["text"]}
    if name == "key":
        return {"type": "keypress", "keys": ["ENTER"] if a["text"] == "Return" else [a["text"]]}
    raise ValueError(name)


def png_of_b64(data: str) -> int:
    raw = base64.b64decode(data, validate=True)
    if not raw.startswith(PNG):
        raise ValueError("the screenshot is not a PNG")
    return len(raw)


class State:
    def __init__(self, args: argparse.Namespace) -> None:
        x, y = (int(v) for v in args.click.split(","))
        self.steps = script((x, y), args.command)
        self.log_path = args.log
        self.lock = threading.Lock()
        self.responses: dict[str, int] = {}  # OpenAI response id -> step it answered
        self.counter = 0

    def log(self, entry: dict[str, Any]) -> None:
        with self.lock, open(self.log_path, "a") as f:
            f.write(json.dumps(entry) + "\n")


def anthropic(state: State, body: dict[str, Any]) -> dict[str, Any]:
    msgs = body["messages"]
    if not any(t.get("name") == "computer" for t in body.get("tools", [])):
        raise ValueError("no computer tool in the request")
    step = sum(1 for m in msgs if m["role"] == "assistant")
    png = 0
    if step:
        last = msgs[-1]
        prev = msgs[-2]["content"][-1]
        results = [c for c in last["content"] if c.get("type") == "tool_result"]
        if last["role"] != "user" or not results or results[0]["tool_use_id"] != prev["id"]:
            raise ValueError("the last message must be the tool_result of the last tool_use")
        if results[0].get("is_error"):
            state.log({"api": "anthropic", "step": step, "error": results[0]["content"]})
        else:
            imgs = [c for c in results[0]["content"] if c.get("type") == "image"]
            if not imgs or imgs[0]["source"]["media_type"] != "image/png":
                raise ValueError("the tool_result holds no PNG image")
            png = png_of_b64(imgs[0]["source"]["data"])
    if step >= len(state.steps):
        state.log({"api": "anthropic", "step": step, "png_bytes": png, "action": "done"})
        return {"id": f"msg_{step}", "type": "message", "role": "assistant",
                "stop_reason": "end_turn",
                "content": [{"type": "text", "text": "Done: the command ran in the terminal."}]}
    action = state.steps[step]
    state.log({"api": "anthropic", "step": step, "png_bytes": png, "action": action["action"]})
    return {"id": f"msg_{step}", "type": "message", "role": "assistant", "stop_reason": "tool_use",
            "content": [{"type": "text", "text": f"Step {step}."},
                        {"type": "tool_use", "id": f"toolu_{step}", "name": "computer",
                         "input": action}]}


def openai(state: State, body: dict[str, Any]) -> dict[str, Any]:
    if not any(t.get("type") == "computer_use_preview" for t in body.get("tools", [])):
        raise ValueError("no computer_use_preview tool in the request")
    png = 0
    prev = body.get("previous_response_id")
    with state.lock:
        step = state.responses[prev] + 1 if prev else 0
        if prev and prev not in state.responses:
            raise ValueError("unknown previous_response_id")
        state.counter += 1
        rid = f"resp_{state.counter}"
        state.responses[rid] = step
    if step:
        outs = [i for i in body["input"] if i.get("type") == "computer_call_output"]
        if not outs or outs[0]["call_id"] != f"call_{step - 1}":
            raise ValueError("the input must be the computer_call_output of the last call")
        url = outs[0]["output"]["image_url"]
        if not url.startswith("data:image/png;base64,"):
            raise ValueError("the output is not a PNG data URL")
        png = png_of_b64(url.split(",", 1)[1])
    if step >= len(state.steps):
        state.log({"api": "openai", "step": step, "png_bytes": png, "action": "done"})
        return {"id": rid, "object": "response", "status": "completed",
                "output": [{"type": "message", "role": "assistant", "content": [
                    {"type": "output_text", "text": "Done: the command ran in the terminal."}]}]}
    action = to_openai(state.steps[step])
    state.log({"api": "openai", "step": step, "png_bytes": png, "action": action["type"]})
    return {"id": rid, "object": "response", "status": "completed",
            "output": [{"type": "reasoning", "id": f"rs_{step}", "summary": []},
                       {"type": "computer_call", "id": f"cu_{step}", "call_id": f"call_{step}",
                        "action": action, "pending_safety_checks": [], "status": "completed"}]}


def make_handler(state: State) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def log_message(self, fmt: str, *args: Any) -> None:  # quiet
            pass

        def do_POST(self) -> None:  # noqa: N802
            length = int(self.headers.get("Content-Length") or 0)
            try:
                body = json.loads(self.rfile.read(length))
                if self.path == "/v1/messages":
                    if not self.headers.get("x-api-key"):
                        raise ValueError("no x-api-key")
                    reply = anthropic(state, body)
                elif self.path == "/v1/responses":
                    if not (self.headers.get("Authorization") or "").startswith("Bearer "):
                        raise ValueError("no bearer token")
                    reply = openai(state, body)
                else:
                    self.send_error(404)
                    return
                status = 200
            except (ValueError, KeyError, IndexError, TypeError) as e:
                state.log({"api": self.path, "error": f"bad request: {e}"})
                reply = {"error": {"type": "invalid_request_error", "message": str(e)}}
                status = 400
            data = json.dumps(reply).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

    return Handler


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--port", type=int, default=0)
    p.add_argument("--port-file", required=True, help="the bound port is written here")
    p.add_argument("--log", required=True, help="JSON lines of what the model saw")
    p.add_argument("--click", default="500,330", help="where the terminal is (tiny: 500,330)")
    p.add_argument("--command", default="echo standin-model > /tmp/standin-model.txt")
    args = p.parse_args()
    server = ThreadingHTTPServer(("127.0.0.1", args.port), make_handler(State(args)))
    with open(args.port_file + ".tmp", "w") as f:
        f.write(str(server.server_address[1]))
    os.replace(args.port_file + ".tmp", args.port_file)
    signal.signal(signal.SIGTERM, lambda *a: threading.Thread(target=server.shutdown).start())
    server.serve_forever()


if __name__ == "__main__":
    main()
