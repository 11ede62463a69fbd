"""Small helpers the integration tests share (fixtures live in conftest.py)."""

from __future__ import annotations

import time
from collections.abc import Callable


def wait_for(predicate: Callable[[], bool], timeout: float = 15.0, poll: float = 0.02) -> bool:
    """Poll ``predicate`` until it holds or ``timeout`` seconds pass; its last answer."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(poll)
    return predicate()
