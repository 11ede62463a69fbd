"""The SQL store: keyword-only functions over a Session. SQL is the source of truth.

Pipelines reach SQL only through this module and :func:`session_scope`; the engine they
are given translates driver connection failures into TransientError (adapters/sql.py).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from datetime import datetime
from typing import Any

from sqlalchemy.engine import Engine
from sqlmodel import Session, col, delete, select, update

from sleepmem.models import (
    CURRENT_STATUSES,
    Audit,
    EventKind,
    IndexState,
    Memory,
    RawEvent,
    ScopeState,
)
from sleepmem.pipelines import PIPELINE_VERSION


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


def memories_in(session: Session, *, scope_keys: Sequence[str]) -> list[Memory]:
    """Every version in the given scopes, whatever its status."""
    if not scope_keys:
        return []
    return list(session.exec(select(Memory).where(col(Memory.scope_key).in_(scope_keys))))


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
    """After a consolidation: pending is what arrived meanwhile, not zero, and a session
    end among it still makes the scope due (clearing it left those events to the idle
    timer)."""
    remaining = pending_events(session, scope_key=scope_key)
    ended = any(r.kind == EventKind.session_end.value for r in remaining)
    session.exec(
        update(ScopeState)
        .where(col(ScopeState.scope_key) == scope_key)
        .values(pending_count=len(remaining), session_end=ended, last_consolidated_at=now)
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


def audit_row(
    *,
    op: str,
    tenant: str,
    scope_key: str,
    reason: str,
    task_id: str,
    worker: str,
    at: datetime | None = None,
    before: Sequence[str] = (),
    after: Sequence[str] = (),
    extractor: str = "",
    model: str = "",
    input_event_ids: Sequence[str] = (),
    content_hash: str = "",
    llm_calls: int = 0,
    llm_tokens: int = 0,
) -> dict[str, Any]:
    """The values of one audit row, every column named, stamped with PIPELINE_VERSION.

    The one builder of audit rows: ORM writers add ``Audit(**audit_row(...))``, bulk
    writers pass a list of them to ``insert(Audit)`` (every dict has the same keys). With no
    ``at`` the row takes the table's default, the time of the insert.
    """
    row: dict[str, Any] = {
        "op": op, "tenant": tenant, "scope_key": scope_key,
        "memory_ids_before": list(before), "memory_ids_after": list(after),
        "reason": reason, "task_id": task_id, "worker": worker,
        "pipeline_version": PIPELINE_VERSION, "extractor": extractor, "model": model,
        "input_event_ids": list(input_event_ids), "content_hash": content_hash,
        "llm_calls": llm_calls, "llm_tokens": llm_tokens,
    }
    if at is not None:
        row["at"] = at
    return row


def scope_audit_rows(
    *,
    at: datetime,
    op: str,
    groups: dict[tuple[str, str], list[str]],
    reason: str,
    task_id: str,
    worker: str,
    keeps_ids: bool = True,
    hashes: dict[tuple[str, str], str] | None = None,
) -> list[dict[str, Any]]:
    """One audit row per (tenant, scope) of a batch, for the bulk lifecycle passes: the ids
    stay findable by scope and by memory. ``keeps_ids``: the ids are still there after the
    operation (everything but a DELETE)."""
    return [
        audit_row(
            at=at, op=op, tenant=tenant, scope_key=scope_key, before=ids,
            after=ids if keeps_ids else [], reason=reason, task_id=task_id, worker=worker,
            content_hash=(hashes or {}).get((tenant, scope_key), ""),
        )
        for (tenant, scope_key), ids in sorted(groups.items())
    ]


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
