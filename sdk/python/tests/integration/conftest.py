"""A real carreld on libvirt's test driver, with a temporary state dir, on a Unix socket.

CARREL_DAEMON names the binary (meson passes the build's); the test driver gives running
"sessions" without QEMU: screenshots work, input, commands, files and saving memory answer
501 ``unsupported``, which the tests assert as :class:`carrel.Unsupported`.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Iterator

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

import carrel  # noqa: E402


class Daemon:
    def __init__(self, root: Path) -> None:
        self.root = root
        self.state = root / "state"
        self.socket = str(root / "carreld.sock")
        self.log = root / "carreld.log"
        self.proc: subprocess.Popen[bytes] | None = None

    @property
    def token(self) -> str:
        return (self.state / "admin.token").read_text().strip()

    def start(self) -> None:
        daemon = os.environ.get("CARREL_DAEMON")
        if not daemon:
            pytest.fail("CARREL_DAEMON must name the carreld binary (meson test sets it)")
        with open(self.log, "ab") as log:
            self.proc = subprocess.Popen(
                [
                    daemon,
                    "--state-dir",
                    str(self.state),
                    "--socket",
                    self.socket,
                    "--libvirt-uri",
                    "test:///default",
                    "--accel",
                    "auto",
                ],
                stdout=log,
                stderr=log,
            )
        for _ in range(300):
            if os.path.exists(self.socket) and (self.state / "admin.token").exists():
                return
            if self.proc.poll() is not None:
                break
            time.sleep(0.05)
        pytest.fail(f"carreld did not start:\n{self.log.read_text()[-3000:]}")

    def stop(self) -> None:
        if self.proc and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


@pytest.fixture(scope="session")
def daemon() -> Iterator[Daemon]:
    root = Path(tempfile.mkdtemp(prefix="carrel-sdk-it-"))
    d = Daemon(root)
    d.start()
    try:
        yield d
    finally:
        d.stop()
        if os.environ.get("CARREL_TEST_KEEP"):
            print(f"kept {root}", file=sys.stderr)
        else:
            shutil.rmtree(root, ignore_errors=True)


@pytest.fixture(scope="session")
def template(daemon: Daemon) -> str:
    """An imported template named tiny: a small qcow2 and a file standing in for a kernel."""
    disk = daemon.root / "disk.qcow2"
    kernel = daemon.root / "vmlinuz"
    subprocess.run(["qemu-img", "create", "-q", "-f", "qcow2", str(disk), "64M"], check=True)
    kernel.write_text("not a kernel")
    with carrel.Client(socket=daemon.socket, token=daemon.token) as c:
        t = c.import_template("tiny", str(disk), "qcow2", kernel=str(kernel), cmdline="root=/dev/vda")
    assert t["ref"] == "tiny@1"
    return "tiny"


@pytest.fixture()
def client(daemon: Daemon) -> Iterator[carrel.Client]:
    with carrel.Client(socket=daemon.socket, token=daemon.token) as c:
        yield c
