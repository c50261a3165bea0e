"""e2e: the SDK on a real `tiny` session of the e2e tier's carreld (tests/e2e/sdk.sh runs it
with CARREL_SOCKET and CARREL_STATE_DIR exported by tests/e2e/lib.sh; the `tiny` template is
built and warm by then)."""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path
from typing import Callable, Iterator

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

import carrel  # noqa: E402


@pytest.fixture(scope="session")
def client() -> Iterator[carrel.Client]:
    if not os.environ.get("CARREL_SOCKET") and not os.environ.get("CARREL_URL"):
        pytest.fail("run from tests/e2e/sdk.sh: CARREL_SOCKET must name the e2e carreld")
    with carrel.Client() as c:
        yield c


@pytest.fixture(scope="session")
def sandbox(client: carrel.Client) -> Iterator[carrel.Sandbox]:
    sb = carrel.Sandbox.create(template=os.environ.get("SDK_E2E_TEMPLATE", "tiny"),
                               name="e2e-sdk", client=client)
    try:
        yield sb
    finally:
        try:
            if sb.refresh()["state"] != "destroyed":
                sb.kill()
        except carrel.CarrelError:
            pass


def eventually(what: Callable[[], object], want: object, seconds: float = 20) -> object:
    """what() until it returns want (guest-side effects of typing take a moment)."""
    got = None
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        try:
            got = what()
        except carrel.CarrelError as e:
            got = e
        if got == want:
            return got
        time.sleep(0.5)
    return got
