"""The SQL store: keyword-only functions over a Session. SQL is the source of truth.

Pipelines reach SQL only through this module and :func:`session_scope`; the engine they
are given translates driver connection failures into TransientError (adapters/sql.py).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from datetime import datetime

from sqlalchemy.engine import Engine
from sqlmodel import Session, col, delete, select, update

from sleepmem.models import CURRENT_STATUSES, Audit, IndexState, Memory, RawEvent, ScopeState


def pending_events(session: Session, *, scope_key: str, limit: int | None = None) -> list[RawEvent]:
    stmt = (
        select(RawEvent)
        .where(col(RawEvent.scope_key) == scope_key, col(RawEvent.consolidated).is_(False))
        .order_by(col(RawEvent.at), col(RawEvent.event_id))
    )
    if limit:
        stmt = stmt.limit(limit)
    return list(session.exec(stmt))


def events_by_ids(session: Session, *, tenant: str, ids: Sequence[str]) -> list[RawEvent]:
    """The tenant's events with these ids (event ids are unique within a tenant only)."""
    if not ids:
        return []
    stmt = select(RawEvent).where(
        col(RawEvent.tenant) == tenant, col(RawEvent.event_id).in_(list(ids))
    )
    return list(session.exec(stmt))


def scope_events(
    session: Session, *, scope_key: str, since: datetime | None = None
) -> list[RawEvent]:
    stmt = select(RawEvent).where(col(RawEvent.scope_key) == scope_key)
    if since is not None:
        stmt = stmt.where(col(RawEvent.at) >= since)
    return list(session.exec(stmt.order_by(col(RawEvent.at), col(RawEvent.event_id))))


def current_memories(session: Session, *, scope_key: str) -> list[Memory]:
    return list(
        session.exec(
            select(Memory).where(
                col(Memory.scope_key) == scope_key, col(Memory.status).in_(CURRENT_STATUSES)
            )
        )
    )


def scope_memories(session: Session, *, scope_key: str) -> list[Memory]:
    """Every version in the scope, whatever its status."""
    return list(session.exec(select(Memory).where(col(Memory.scope_key) == scope_key)))


def memories_by_ids(session: Session, *, ids: Iterable[str]) -> dict[str, Memory]:
    wanted = list(dict.fromkeys(ids))
    if not wanted:
        return {}
    rows = session.exec(select(Memory).where(col(Memory.id).in_(wanted)))
    return {m.id: m for m in rows}


def lineage_versions(session: Session, *, lineage: str) -> list[Memory]:
    return list(
        session.exec(
            select(Memory).where(col(Memory.lineage) == lineage).order_by(col(Memory.version))
        )
    )


def mark_consolidated(
    session: Session, *, tenant: str, event_ids: Sequence[str], now: datetime
) -> None:
    if event_ids:
        session.exec(
            update(RawEvent)
            .where(col(RawEvent.tenant) == tenant, col(RawEvent.event_id).in_(list(event_ids)))
            .values(consolidated=True, consolidated_at=now)
        )


def reset_scope_state(session: Session, *, scope_key: str, now: datetime) -> None:
    """After a consolidation: pending is what arrived meanwhile, not zero."""
    remaining = len(pending_events(session, scope_key=scope_key))
    session.exec(
        update(ScopeState)
        .where(col(ScopeState.scope_key) == scope_key)
        .values(pending_count=remaining, session_end=False, last_consolidated_at=now)
    )


def delete_memories(session: Session, *, ids: Sequence[str]) -> int:
    if not ids:
        return 0
    res = session.exec(delete(Memory).where(col(Memory.id).in_(list(ids))))
    return int(res.rowcount or 0)


def delete_events(session: Session, *, tenant: str, ids: Sequence[str]) -> int:
    if not ids:
        return 0
    res = session.exec(
        delete(RawEvent).where(
            col(RawEvent.tenant) == tenant, col(RawEvent.event_id).in_(list(ids))
        )
    )
    return int(res.rowcount or 0)


def pending_index(session: Session, *, limit: int = 1000) -> list[Memory]:
    return list(
        session.exec(
            select(Memory)
            .where(col(Memory.index_state) == IndexState.pending.value)
            .order_by(col(Memory.recorded_at))
            .limit(limit)
        )
    )


def mark_indexed(session: Session, *, ids: Sequence[str]) -> None:
    if ids:
        session.exec(
            update(Memory)
            .where(col(Memory.id).in_(list(ids)))
            .values(index_state=IndexState.indexed.value)
        )


def audits_for(session: Session, *, memory_id: str) -> list[Audit]:
    rows = session.exec(select(Audit).order_by(col(Audit.id)))
    return [a for a in rows if memory_id in a.memory_ids_before or memory_id in a.memory_ids_after]


@contextmanager
def session_scope(engine: Engine) -> Iterator[Session]:
    """One transaction: commit on success, roll back on any error."""
    with Session(engine, expire_on_commit=False) as session:
        try:
            yield session
            session.commit()
        except BaseException:
            session.rollback()
            raise
