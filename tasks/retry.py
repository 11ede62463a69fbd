"""The one retry policy every task applies: transient failures back off, the rest fail."""

from __future__ import annotations

import random

MAX_RETRIES = 12
BACKOFF_BASE_S = 1.0
BACKOFF_CAP_S = 60.0


def countdown(retries: int, *, base: float = BACKOFF_BASE_S, cap: float = BACKOFF_CAP_S) -> float:
    """Exponential backoff with jitter, so retries of many scopes do not arrive together."""
    ceiling = min(cap, base * (2 ** max(0, retries)))
    return random.uniform(ceiling / 2, ceiling)
