"""Small helpers the integration tests share (fixtures live in conftest.py)."""

from __future__ import annotations

import os
import time
from collections.abc import Callable

# The Redis server the tests use; each test has its own key namespace on it.
REDIS_URL = os.environ.get("SLEEPMEM_TEST_REDIS_URL", "redis://127.0.0.1:6379/0")
# The PostgreSQL server the tests use; each test run makes its own database on it.
PG_SERVER = os.environ.get("SLEEPMEM_TEST_PG_URL", "postgresql+psycopg://postgres@127.0.0.1:5432")


def wait_for(predicate: Callable[[], bool], timeout: float = 15.0, poll: float = 0.02) -> bool:
    """Poll ``predicate`` until it holds or ``timeout`` seconds pass; its last answer."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(poll)
    return predicate()
