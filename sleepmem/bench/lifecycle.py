"""Lifecycle benchmarks: a sweep over N synthetic memories, a re-consolidation of N events.

The fill writes rows with the database's bulk path (executemany on SQLite, COPY on
PostgreSQL) and is not timed; the sweep runs in a fresh child process so that its peak
RSS is the sweep's own, not the fill's.
"""

from __future__ import annotations

import multiprocessing as mp
import random
import resource
import tempfile
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import numpy as np
import orjson
import sqlalchemy as sa
from sqlalchemy.engine import Engine

from sleepmem.adapters.embedders import HashingEmbedder
from sleepmem.adapters.sql import make_engine
from sleepmem.adapters.vectors.edge import EdgeIndex
from sleepmem.bench.corpus import conversations
from sleepmem.bench.scratch import scratch_database
from sleepmem.core.logs import configure_logging
from sleepmem.core.settings import DAY, Settings
from sleepmem.ingest.drain import drain_once
from sleepmem.models import Memory, Scope
from sleepmem.pipelines.lifecycle import reconsolidate as recon
from sleepmem.pipelines.lifecycle.forget import sweep
from sleepmem.pipelines.ports import IndexPoint, Ports
from sleepmem.pipelines.write.consolidate import consolidate_scope
from sleepmem.resources import build_resources
from sleepmem.sdk import MemoryClient
from sleepmem.services import run_consolidation

BENCH_NOW = datetime(2026, 6, 1, 3, 0, tzinfo=UTC)
BENCH_DIM = 8
_TYPES = ("fact", "preference", "task", "event", "summary", "identity", "procedure")
_TYPE_WEIGHTS = (0.30, 0.25, 0.15, 0.15, 0.05, 0.05, 0.05)
_FILL_CHUNK = 20_000
# One scope holds this share of rows, so the capacity rule has work to do.
_BIG_SCOPE_SHARE = 0.02


@dataclass(frozen=True, slots=True)
class FillPlan:
    memories: int
    indexed: int
    seed: int = 7

    @property
    def scopes(self) -> int:
        return max(1, self.memories // 2000)


def _scope_key(n: int) -> tuple[str, str, str, str]:
    tenant, user = f"t{n % 7}", f"u{n}"
    return tenant, "bench", user, f"t={tenant}/a=bench/u={user}/p=/s="


def _column_defaults() -> dict[str, Any]:
    """Each column's scalar default (None for a nullable one without): the fill sets only
    what the sweep reads, so a column added later (``pinned``) gets its model default
    instead of failing the bulk insert."""
    out: dict[str, Any] = {}
    for column in Memory.__table__.columns:  # type: ignore[attr-defined]
        default = column.default
        if default is not None and default.is_scalar:
            out[column.name] = default.arg
        elif column.nullable:
            out[column.name] = None
    return out


def _rows(plan: FillPlan, settings: Settings) -> Iterator[list[tuple[Any, ...]]]:
    rng = random.Random(plan.seed)
    big = int(plan.memories * _BIG_SCOPE_SHARE)
    columns = [c.name for c in Memory.__table__.columns]  # type: ignore[attr-defined]
    defaults = _column_defaults()
    for start in range(0, plan.memories, _FILL_CHUNK):
        out: list[tuple[Any, ...]] = []
        for i in range(start, min(plan.memories, start + _FILL_CHUNK)):
            scope = 0 if i < big else 1 + rng.randrange(plan.scopes)
            tenant, agent, user, key = _scope_key(scope)
            mtype = rng.choices(_TYPES, _TYPE_WEIGHTS)[0]
            # The big scope is in active use (recent rows), so it is over capacity tonight.
            age = rng.uniform(0, 20 * DAY) if scope == 0 else rng.uniform(0, 400 * DAY)
            last = BENCH_NOW - timedelta(seconds=age)
            ttl = settings.ttl_s.get(mtype)
            status, archived_at = "active", None
            if rng.random() < 0.05:
                status = rng.choice(("archived", "expired"))
                archived_at = BENCH_NOW - timedelta(seconds=rng.uniform(0, 60 * DAY))
            mid = uuid.UUID(int=rng.getrandbits(128)).hex
            values = {
                **defaults,
                "id": mid, "lineage": mid, "tenant": tenant, "agent": agent, "user": user,
                "project": "", "session": "", "scope_key": key, "type": mtype,
                "subject": "user", "attribute": f"a{i % 97}",
                "statement": f"synthetic memory {i} of type {mtype}",
                "source": "user", "trust": "high", "confidence": 1.0,
                "importance": round(rng.uniform(0.1, 1.0), 3),
                "valid_from": last - timedelta(days=1), "valid_to": None,
                "recorded_at": last - timedelta(days=1), "invalidated_at": None,
                "expires_at": None if ttl is None else last + timedelta(seconds=ttl),
                "supersedes": None, "superseded_by": None, "version": 1, "mention_count": 1,
                "access_count": 0, "last_access": last, "provenance": "[]", "status": status,
                "conflict_set": None, "demoted": False, "needs_verification": False,
                "reminded": False, "archived_at": archived_at, "details": "{}",
                "pipeline_version": "1", "extractor": "bench",
                "index_state": "indexed" if i < plan.indexed else "pending",
            }
            out.append(tuple(values[c] for c in columns))
        yield out


def fill(engine: Engine, plan: FillPlan, settings: Settings) -> None:
    """Insert ``plan.memories`` rows with the database's fastest bulk path."""
    columns = [c.name for c in Memory.__table__.columns]  # type: ignore[attr-defined]
    quoted = ", ".join(f'"{c}"' for c in columns)
    raw = engine.raw_connection()
    try:
        cur = raw.cursor()
        if engine.dialect.name == "sqlite":
            marks = ", ".join("?" for _ in columns)
            for chunk in _rows(plan, settings):
                cur.executemany(f"INSERT INTO memory ({quoted}) VALUES ({marks})",
                                [_sqlite_row(r) for r in chunk])
        else:
            for chunk in _rows(plan, settings):
                with cur.copy(f"COPY memory ({quoted}) FROM STDIN") as copy:
                    for row in chunk:
                        copy.write_row(row)
        raw.commit()
        cur.execute("ANALYZE")
        raw.commit()
    finally:
        raw.close()


def _sqlite_row(row: tuple[Any, ...]) -> tuple[Any, ...]:
    # The text form SQLAlchemy's SQLite DateTime type writes and reads.
    return tuple(
        v.strftime("%Y-%m-%d %H:%M:%S.%f") if isinstance(v, datetime) else v for v in row
    )


def fill_index(index_path: Path, engine: Engine) -> None:
    """A point for every row the fill marked indexed."""
    index = EdgeIndex(index_path)
    index.ensure(dim=BENCH_DIM)
    rng = np.random.default_rng(7)
    try:
        with engine.connect() as conn:
            result = conn.execution_options(yield_per=5000).execute(
                sa.select(Memory.id, Memory.tenant, Memory.status, Memory.type)  # type: ignore[call-overload]
                .where(Memory.index_state == "indexed")
            )
            for part in result.partitions():
                vectors = rng.standard_normal((len(part), BENCH_DIM)).astype(np.float32)
                index.upsert([
                    IndexPoint(id=r[0], vector=vectors[j], sparse={},
                               payload={"tenant": r[1], "status": r[2], "type": r[3],
                                        "valid_from": 0.0})
                    for j, r in enumerate(part)
                ])
    finally:
        index.close()


def _sweep_child(url: str, index_path: str, settings_json: str, out: Any) -> None:
    configure_logging(level="WARNING")
    settings = Settings(_env_file=None, **orjson.loads(settings_json))
    engine = make_engine(url)
    index = EdgeIndex(Path(index_path))
    index.ensure(dim=BENCH_DIM)
    ports = Ports(embedder=HashingEmbedder(dim=BENCH_DIM), index=index, clock=lambda: BENCH_NOW)
    rss_before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    t0 = time.perf_counter()
    report = sweep(engine=engine, ports=ports, settings=settings)
    seconds = time.perf_counter() - t0
    index.close()
    engine.dispose()
    out.put({
        "seconds": round(seconds, 2),
        "peak_rss_mb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1),
        "rss_before_sweep_mb": round(rss_before, 1),
        "counts": report.counts(),
    })


def bench_sweep(
    *, memories: int, database_url: str | None = None, indexed: int = 100_000,
    workdir: Path | None = None,
) -> dict[str, Any]:
    """Fill, then sweep in a child process; returns the numbers the CLI prints."""
    settings = Settings(_env_file=None, embedder="hashing")
    with tempfile.TemporaryDirectory(prefix="sleepmem-bench-", dir=workdir) as tmp, \
            scratch_database(database_url, Path(tmp)) as url:
        engine = make_engine(url)
        try:
            plan = FillPlan(memories=memories, indexed=min(indexed, memories))
            t0 = time.perf_counter()
            fill(engine, plan, settings)
            fill_index(Path(tmp) / "index", engine)
            fill_s = time.perf_counter() - t0
            ctx = mp.get_context("spawn")
            queue = ctx.Queue()
            child = ctx.Process(
                target=_sweep_child,
                args=(url, str(Path(tmp) / "index"), _dumps(_lifecycle(settings)), queue),
            )
            child.start()
            result: dict[str, Any] = queue.get()
            child.join()
        finally:
            engine.dispose()
    return {
        "memories": memories,
        "database": sa.engine.make_url(url).get_backend_name(),
        "indexed_points": plan.indexed,
        "fill_seconds": round(fill_s, 1),
        **result,
    }


def _lifecycle(settings: Settings) -> dict[str, Any]:
    return settings.model_dump(
        mode="json",
        include={"half_life_s", "ttl_s", "demote_below", "archive_below", "delete_after_s",
                 "scope_capacity", "sweep_batch", "embedder"},
    )


def _dumps(value: Any) -> str:
    return orjson.dumps(value).decode()


def bench_reconsolidate(*, events: int, settings: Settings | None = None) -> dict[str, Any]:
    """One scope of ``events`` consolidated events, then a dry run and an apply run of a
    re-consolidation job over all of them; rates are of the jobs alone."""
    base = settings or Settings(_env_file=None)
    with tempfile.TemporaryDirectory(prefix="sleepmem-bench-") as tmp:
        cfg = base.model_copy(update={"data_dir": Path(tmp) / "data", "database_url": None,
                                      "redis_url": None, "log_level": "WARNING"})
        res = build_resources(cfg)
        try:
            batch = list(conversations(events=events, users=1))
            with MemoryClient(cfg, redis_url=res.redis_url) as client:
                for i in range(0, len(batch), 1000):
                    client.emit_many(batch[i : i + 1000])
            while drain_once(redis=res.redis, keys=res.keys, engine=res.engine, settings=cfg,
                             consumer="bench").read:
                pass
            scope_key = Scope(tenant="bench", agent="assistant", user="u0").key
            run_consolidation(res, scope_key=scope_key, pipeline=consolidate_scope)
            out: dict[str, Any] = {"events": events, "extractor": cfg.extractor}
            for mode in ("dry_run", "apply"):
                job = recon.create_job(engine=res.engine, scope_key=scope_key,
                                       now=datetime.now(UTC), apply=mode == "apply")
                t0 = time.perf_counter()
                job = recon.run_job(engine=res.engine, ports=res.ports(), settings=cfg,
                                    job_id=job.id)
                seconds = time.perf_counter() - t0
                out[mode] = {"seconds": round(seconds, 3), "events_done": job.done,
                             "events_per_s": round(job.done / seconds, 1) if seconds else None,
                             "status": job.status, **(job.result.get("counts") or {})}
            return out
        finally:
            res.shutdown()
