"""Real consolidations for the failure tests: events in through the SDK and the drain, the
real pipeline out, with a hook inside the extractor to fail the world mid-batch."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from datetime import UTC, datetime
from typing import Any

from sqlalchemy.engine import Engine
from sqlmodel import Session, col, select

from sleepmem.ingest.drain import drain_once
from sleepmem.models import Audit, Memory, RawEvent, Scope
from sleepmem.pipelines.ports import Ports
from sleepmem.pipelines.types import EventView, Extraction
from sleepmem.pipelines.write.consolidate import ConsolidationReport, consolidate_scope
from sleepmem.pipelines.write.extract.rules import RulesExtractor
from sleepmem.resources import Resources
from sleepmem.sdk import MemoryClient

T0 = datetime(2026, 5, 1, 10, tzinfo=UTC)


def scope_of(user: str) -> dict[str, str]:
    return {"tenant": "acme", "agent": "assistant", "user": user}


def key_of(user: str) -> str:
    return Scope(**scope_of(user)).key


def emit_and_drain(res: Resources, user: str, contents: list[str]) -> None:
    with MemoryClient(res.settings, client=res.redis, **scope_of(user)) as client:
        client.emit_many(
            [{"content": c, "session": "s1", "at": T0.isoformat()} for c in contents]
        )
    while drain_once(redis=res.redis, keys=res.keys, engine=res.engine, settings=res.settings,
                     consumer="t").read:
        pass


class HookedExtractor:
    """The rules extractor, calling ``hook`` once, on its first batch, before it extracts."""

    def __init__(self, hook: Callable[[], None]) -> None:
        self.inner = RulesExtractor()
        self.name = self.inner.name
        self.hook: Callable[[], None] | None = hook

    def extract(self, events: list[EventView]) -> Extraction:
        if self.hook is not None:
            hook, self.hook = self.hook, None
            hook()
        return self.inner.extract(events)


def pipeline_with(extractor: HookedExtractor) -> Callable[..., ConsolidationReport]:
    """The real consolidation pipeline, extracting with ``extractor``."""

    def pipeline(*, ports: Ports, **kw: Any) -> ConsolidationReport:
        return consolidate_scope(ports=replace(ports, extractor=extractor), **kw)

    return pipeline


def memories(engine: Engine, user: str) -> list[tuple[str, str, str, str, bool]]:
    """What a scope remembers, row by row: (id, type, statement, status, still valid)."""
    with Session(engine) as s:
        rows = s.exec(select(Memory).where(Memory.scope_key == key_of(user))
                      .order_by(col(Memory.id))).all()
        return [(m.id, m.type, m.statement, m.status, m.valid_to is None) for m in rows]


def current_statements(engine: Engine, user: str) -> list[tuple[str, str]]:
    return sorted((kind, text) for _id, kind, text, status, valid in memories(engine, user)
                  if status == "active" and valid)


def pending_ids(engine: Engine, user: str) -> list[str]:
    with Session(engine) as s:
        return sorted(s.exec(select(RawEvent.event_id).where(
            RawEvent.scope_key == key_of(user), col(RawEvent.consolidated).is_(False))).all())


def audits(engine: Engine, user: str, op: str) -> list[Audit]:
    with Session(engine) as s:
        return list(s.exec(select(Audit).where(Audit.scope_key == key_of(user), Audit.op == op)
                           .order_by(col(Audit.id))).all())
