"""Retrieval hits: recorded on the request path in one XADD, applied later by refresh.

Only memory ids and a timestamp go to Redis, never statement text.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

import redis

from sleepmem.core.keys import Keys

MAX_HITS_STREAM = 1_000_000


def record_hits(client: redis.Redis, keys: Keys, ids: Sequence[str], *, at: datetime) -> None:
    if not ids:
        return
    client.xadd(
        keys.hits,
        {"ids": ",".join(ids), "at": f"{at.timestamp():.3f}"},
        maxlen=MAX_HITS_STREAM,
        approximate=True,
    )


def read_hits(
    client: redis.Redis, keys: Keys, *, count: int = 10_000, after: str = "-"
) -> list[tuple[str, list[str], float]]:
    """(entry id, memory ids, epoch seconds) in stream order, starting after ``after``."""
    start = after if after == "-" else f"({after}"
    out: list[tuple[str, list[str], float]] = []
    for entry_id, fields in client.xrange(keys.hits, min=start, max="+", count=count):
        ids = fields.get(b"ids", b"").decode()
        out.append((entry_id.decode(), [i for i in ids.split(",") if i], float(fields[b"at"])))
    return out


def trim_hits(client: redis.Redis, keys: Keys, *, upto: str) -> int:
    """Drop applied entries (ids ≤ upto)."""
    applied = client.xrange(keys.hits, min="-", max=upto)
    if not applied:
        return 0
    return int(client.xdel(keys.hits, *[e for e, _ in applied]))
