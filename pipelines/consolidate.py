"""consolidate(scope): the sleep-time pipeline over one scope's pending events.

(Placeholder until the stages land: marks the scope's pending events as picked up.)
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from sqlalchemy.engine import Engine

from pipelines.ports import Ports
from sleepmem.settings import Settings


@dataclass(slots=True)
class ConsolidationReport:
    scope_key: str
    events: int = 0
    ops: dict[str, int] = field(default_factory=dict)
    stage_seconds: dict[str, float] = field(default_factory=dict)
    extra: dict[str, Any] = field(default_factory=dict)


def consolidate_scope(
    *,
    engine: Engine,
    ports: Ports,
    settings: Settings,
    scope_key: str,
    task_id: str = "",
    worker: str = "",
) -> ConsolidationReport:
    from datetime import UTC, datetime

    from sqlmodel import Session, col, update

    from models import RawEvent, ScopeState

    now = datetime.now(UTC)
    with Session(engine) as s:
        res = s.exec(  # type: ignore[call-overload]
            update(RawEvent)
            .where(col(RawEvent.scope_key) == scope_key, col(RawEvent.consolidated).is_(False))
            .values(consolidated=True, consolidated_at=now)
        )
        s.exec(  # type: ignore[call-overload]
            update(ScopeState)
            .where(col(ScopeState.scope_key) == scope_key)
            .values(pending_count=0, session_end=False, last_consolidated_at=now)
        )
        s.commit()
    return ConsolidationReport(scope_key=scope_key, events=int(res.rowcount or 0))
