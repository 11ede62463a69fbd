"""`sleepmem bench consolidate`: events/s from the first emit to every memory indexed.

Embedded mode in a temporary data directory, one worker process: the SDK emits, the
drain fills the raw log, and every scope is consolidated by the consolidate task's code.
"""

from __future__ import annotations

import contextlib
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from pydantic import SecretStr
from sqlmodel import Session, col, func, select

from sleepmem.bench.corpus import conversations
from sleepmem.bench.fake_llm import CountingLLM
from sleepmem.core.settings import Settings
from sleepmem.ingest.drain import drain_once
from sleepmem.models import Memory, RawEvent
from sleepmem.pipelines.write.consolidate import consolidate_scope
from sleepmem.resources import build_resources
from sleepmem.sdk import MemoryClient
from sleepmem.services import run_consolidation


@contextlib.contextmanager
def _maybe_llm(enabled: bool) -> Iterator[CountingLLM | None]:
    if not enabled:
        yield None
        return
    with CountingLLM() as server:
        yield server


def run_consolidate_bench(
    settings: Settings | None = None, *, events: int = 5000, users: int = 50, llm: bool = False
) -> dict[str, Any]:
    base = settings or Settings(_env_file=None)
    with tempfile.TemporaryDirectory(prefix="sleepmem-bench-") as tmp, _maybe_llm(llm) as fake:
        update: dict[str, Any] = {"data_dir": Path(tmp) / "data", "database_url": None,
                                  "redis_url": None, "log_level": "WARNING"}
        if fake is not None:
            update |= {"extractor": "llm", "llm_base_url": fake.url,
                       "llm_api_key": SecretStr("bench"), "llm_model": "bench"}
        cfg = base.model_copy(update=update)
        res = build_resources(cfg)
        try:
            res.embedder.embed(["warm up"])  # the worker warms its embedder at start
            res.index.count()
            stages: dict[str, float] = {}
            batch = list(conversations(events=events, users=users))
            t0 = time.perf_counter()
            with MemoryClient(cfg, redis_url=res.redis_url) as client:
                for i in range(0, len(batch), 1000):
                    client.emit_many(batch[i : i + 1000])
            stages["emit"] = time.perf_counter() - t0
            t = time.perf_counter()
            while drain_once(redis=res.redis, keys=res.keys, engine=res.engine, settings=cfg,
                             consumer="bench").read:
                pass
            stages["drain"] = time.perf_counter() - t
            with Session(res.engine) as s:
                scopes = sorted(set(s.exec(select(RawEvent.scope_key).where(
                    col(RawEvent.consolidated).is_(False)))))
            llm_calls = 0
            for key in scopes:
                report = run_consolidation(res, scope_key=key, pipeline=consolidate_scope)
                llm_calls += report.llm_calls
                for name, sec in report.stage_seconds.items():
                    stages[name] = stages.get(name, 0.0) + sec
            seconds = time.perf_counter() - t0
            with Session(res.engine) as s:
                memories = s.exec(select(func.count()).select_from(Memory)).one()
                unindexed = s.exec(select(func.count()).select_from(Memory).where(
                    col(Memory.index_state) != "indexed")).one()
                stored = s.exec(select(func.count()).select_from(RawEvent)).one()
            out: dict[str, Any] = {
                "events": events,
                "events_stored": int(stored),
                "scopes": len(scopes),
                "memories": int(memories),
                "memories_not_indexed": int(unindexed),
                "seconds": round(seconds, 3),
                "events_per_s": round(events / seconds, 1),
                "stage_seconds": {k: round(v, 3) for k, v in stages.items()},
                "extractor": cfg.extractor,
                "embedder": res.embedder.name,
            }
            if fake is not None:
                out["llm_calls"] = llm_calls
                out["llm_calls_per_100_events"] = round(100 * llm_calls / events, 2)
            return out
        finally:
            res.shutdown()
