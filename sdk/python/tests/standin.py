"""Shared by the tests of examples/: the stand-in model (tests/e2e/standin-model.py) as a
subprocess, and the example loops imported from their files."""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
import time
from pathlib import Path
from types import ModuleType

ROOT = Path(__file__).resolve().parents[3]
STANDIN = ROOT / "tests" / "e2e" / "standin-model.py"


def load_example(name: str) -> ModuleType:
    path = ROOT / "examples" / f"{name}.py"
    spec = importlib.util.spec_from_file_location(f"example_{name}", path)
    assert spec and spec.loader
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


class StandinModel:
    def __init__(self, tmp: Path, click: str = "500,330", command: str = "echo hi") -> None:
        self.log = tmp / "model.log"
        port_file = tmp / "model.port"
        self.proc = subprocess.Popen(
            [sys.executable, str(STANDIN), "--port-file", str(port_file), "--log", str(self.log),
             "--click", click, "--command", command])
        for _ in range(200):
            if port_file.exists():
                break
            assert self.proc.poll() is None, "the stand-in model exited"
            time.sleep(0.02)
        self.port = int(port_file.read_text())
        self.url = f"http://127.0.0.1:{self.port}"

    def entries(self) -> list[dict]:
        if not self.log.exists():
            return []
        return [json.loads(line) for line in self.log.read_text().splitlines()]

    def stop(self) -> None:
        self.proc.terminate()
        self.proc.wait(10)
