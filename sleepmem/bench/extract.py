"""`sleepmem bench extract`: the offline rules extractor's events/s on typical chat turns.

Moved here from the unit tests, where a speed floor failed whenever the CI machine was
busy. The baseline in the same run is the lexical tokeniser over the same turns (every
event is tokenised anyway when it is indexed), so the ratio carries across machines.
"""

from __future__ import annotations

import time
from datetime import UTC, datetime
from typing import Any

from sleepmem.adapters.embedders import HashingEmbedder
from sleepmem.bench.corpus import conversations
from sleepmem.core.settings import Settings
from sleepmem.models import Scope
from sleepmem.pipelines.lexical import tokens
from sleepmem.pipelines.ports import Ports
from sleepmem.pipelines.types import EventView
from sleepmem.pipelines.write.consolidate import make_extractor

FLOOR_EVENTS_PER_S = 2000.0


class _NoIndex:
    """The rules extractor never touches the index; Ports wants one."""

    def __getattr__(self, name: str) -> Any:
        raise AssertionError(f"the extract bench does not use the index ({name})")


def run_extract_bench(*, events: int = 3000, rounds: int = 3) -> dict[str, Any]:
    settings = Settings(_env_file=None, extractor="rules", embedder="hashing")
    ports = Ports(embedder=HashingEmbedder(), index=_NoIndex(),
                  clock=lambda: datetime.now(UTC))
    extractor = make_extractor(settings, ports)
    views = [
        EventView(
            event_id=f"e{i}",
            scope=Scope(tenant=e["tenant"], agent=e["agent"], user=e["user"],
                        session=e["session"]),
            kind="message", role=e["role"], content=e["content"], at=e["at"], meta={},
        )
        for i, e in enumerate(conversations(events=events, users=20))
    ]
    extractor.extract(views[:100])  # warm up (compiled patterns, lazy tables)
    best_extract = best_tokens = float("inf")
    candidates = 0
    for _ in range(rounds):
        t0 = time.perf_counter()
        candidates = len(extractor.extract(views).candidates)
        best_extract = min(best_extract, time.perf_counter() - t0)
        t0 = time.perf_counter()
        for v in views:
            tokens(v.content)
        best_tokens = min(best_tokens, time.perf_counter() - t0)
    rate = len(views) / best_extract
    return {
        "events": len(views),
        "candidates": candidates,
        "extractor": extractor.name,
        "events_per_s": round(rate, 1),
        "tokenise_events_per_s": round(len(views) / best_tokens, 1),
        "extract_over_tokenise_time": round(best_extract / best_tokens, 2),
        "floor_events_per_s": FLOOR_EVENTS_PER_S,
        "ok": rate >= FLOOR_EVENTS_PER_S,
    }
