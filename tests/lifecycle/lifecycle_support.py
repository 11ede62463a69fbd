"""Helpers shared by the lifecycle tests: a clock the test moves, ports on a real embedded
index, and memory rows written the way the pipeline writes them."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import redis as redis_lib
from sqlalchemy.engine import Engine
from sqlmodel import Session, col, select

from sleepmem.adapters.embedders import HashingEmbedder
from sleepmem.adapters.vectors.edge import EdgeIndex
from sleepmem.core.keys import Keys
from sleepmem.core.settings import Settings
from sleepmem.models import Audit, Event, Memory, Scope
from sleepmem.pipelines.memories import content_hash, new_memory
from sleepmem.pipelines.ports import Ports
from sleepmem.pipelines.types import Candidate
from sleepmem.pipelines.write.index import apply_to_index

T0 = datetime(2026, 1, 1, 12, 0, tzinfo=UTC)
SCOPE = Scope(tenant="acme", agent="bot", user="ann")
DAY = timedelta(days=1)


class Clock:
    """The only time a pipeline sees in these tests."""

    def __init__(self, now: datetime = T0) -> None:
        self.now = now

    def __call__(self) -> datetime:
        return self.now

    def advance(self, delta: timedelta) -> None:
        self.now += delta


EMBEDDER = HashingEmbedder(dim=64)


def open_index(path: Path) -> EdgeIndex:
    """A real embedded index; tests share one per module (opening one costs a second)."""
    index = EdgeIndex(path)
    index.ensure(dim=EMBEDDER.dim)
    return index


def make_ports(index: EdgeIndex, clock: Clock) -> Ports:
    return Ports(embedder=EMBEDDER, index=index, clock=clock)


def memory(
    statement: str,
    *,
    type: str = "preference",
    scope: Scope = SCOPE,
    at: datetime = T0,
    importance: float = 0.5,
    attribute: str = "",
    expires_at: datetime | None = None,
    **fields: Any,
) -> Memory:
    cand = Candidate(
        type=type, statement=statement, provenance=["ev-" + content_hash(statement)[:16]],
        valid_from=at, scope=scope, attribute=attribute, importance=importance,
    )
    mem = new_memory(cand, scope_key=scope.owner.key, now=at, ttl=None, extractor="test")
    mem.expires_at = expires_at
    for name, value in fields.items():
        setattr(mem, name, value)
    return mem


def store(engine: Engine, ports: Ports, *memories: Memory) -> list[Memory]:
    """Write rows, then index them, as consolidation does."""
    with Session(engine, expire_on_commit=False) as session:
        for m in memories:
            session.add(m)
        session.commit()
    apply_to_index(engine=engine, index=ports.index, embedder=ports.embedder,
                   upsert=list(memories), payload_only=[], delete=[])
    return list(memories)


def row(engine: Engine, memory_id: str) -> Memory | None:
    with Session(engine, expire_on_commit=False) as session:
        return session.get(Memory, memory_id)


def audit_ops(engine: Engine) -> list[tuple[str, str]]:
    """(op, memory id) for every id every audit row names, sorted: batching-independent."""
    with Session(engine) as session:
        out = [
            (a.op, mid)
            for a in session.exec(select(Audit).order_by(col(Audit.id)))
            for mid in dict.fromkeys([*a.memory_ids_before, *a.memory_ids_after])
        ]
    return sorted(out)


def say(text: str, *, at: datetime, session: str = "s1", scope: Scope = SCOPE,
        **kw: Any) -> Event:
    return Event(tenant=scope.tenant, agent=scope.agent, user=scope.user,
                 project=scope.project, session=session, content=text, at=at, **kw)


def ingest(
    redis: redis_lib.Redis, keys: Keys, engine: Engine, settings: Settings, ports: Ports,
    events: list[Event],
) -> list[str]:
    """emit → drain → consolidate, as the workers would; returns the scope keys touched."""
    from sleepmem.adapters.redis.stream import append
    from sleepmem.ingest.drain import drain_once
    from sleepmem.ingest.validation import validate_events
    from sleepmem.pipelines.write.consolidate import consolidate_scope

    append(redis, keys, validate_events(events))
    while drain_once(redis=redis, keys=keys, engine=engine, settings=settings,
                     consumer="test", block_ms=1).read:
        pass
    owners = {e.scope.owner.key: e.scope.owner for e in events}
    for key in sorted(owners):
        consolidate_scope(engine=engine, ports=ports, settings=settings, scope=owners[key])
    return sorted(owners)


def current(engine: Engine, scope_key: str | None = None) -> list[Memory]:
    with Session(engine, expire_on_commit=False) as session:
        stmt = select(Memory).where(col(Memory.status).in_(("active", "pending_confirmation")))
        if scope_key is not None:
            stmt = stmt.where(col(Memory.scope_key) == scope_key)
        return list(session.exec(stmt))
