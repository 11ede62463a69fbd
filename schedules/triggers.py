"""Sleep-time triggers: which scopes are due for consolidation, and enqueuing them once.

A scope with pending events is due when it has been idle for ``idle_seconds`` (counted
from the wall time its last event was received, so a replayed backlog with old event times
does not fire at once), when ``batch_max`` events are pending, or when a session in it
ended. Each due scope is enqueued at most once until its consolidation starts: the
``queued`` key is taken with SET NX before sending, and the task clears it under its lease.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Literal

import redis as redis_lib
from sqlalchemy import or_
from sqlalchemy.engine import Engine
from sqlmodel import Session, col, select

from sleepmem.core import tracing
from sleepmem.core.errors import TransientError
from sleepmem.core.keys import Keys
from sleepmem.core.logs import get_logger
from sleepmem.core.settings import Settings
from sleepmem.models.tables import ScopeState
from sleepmem.tasks import names

Reason = Literal["idle", "batch", "session_end"]
Send = Callable[[str], None]

log = get_logger("sleepmem.schedules.tick")


def _utc(now: datetime) -> datetime:
    return now.replace(tzinfo=UTC) if now.tzinfo is None else now.astimezone(UTC)


def due_scopes(
    *, engine: Engine, now: datetime, settings: Settings, limit: int = 1000
) -> list[tuple[str, Reason]]:
    """(scope_key, reason) for every scope due at ``now``, longest-idle first."""
    cutoff = _utc(now) - timedelta(seconds=settings.idle_seconds)
    received = col(ScopeState.last_received_at)
    stmt = (
        select(ScopeState.scope_key, ScopeState.pending_count, ScopeState.session_end)
        .where(col(ScopeState.pending_count) > 0)
        .where(
            or_(
                col(ScopeState.session_end).is_(True),
                col(ScopeState.pending_count) >= settings.batch_max,
                received <= cutoff,
                received.is_(None),
            )
        )
        .order_by(received.asc(), col(ScopeState.scope_key).asc())
        .limit(limit)
    )
    with Session(engine) as session:
        rows = session.exec(stmt).all()
    due: list[tuple[str, Reason]] = []
    for scope_key, pending, ended in rows:
        reason: Reason = (
            "session_end" if ended else "batch" if pending >= settings.batch_max else "idle"
        )
        due.append((scope_key, reason))
    return due


def enqueue_due(
    *,
    engine: Engine,
    redis: redis_lib.Redis,
    keys: Keys,
    settings: Settings,
    now: datetime,
    send: Send,
) -> list[tuple[str, Reason]]:
    """Send one consolidation per due scope not already queued; returns what was sent."""
    ttl = max(1, int(settings.lease_seconds))
    sent: list[tuple[str, Reason]] = []
    for scope_key, reason in due_scopes(engine=engine, now=now, settings=settings):
        queued = keys.queued(scope_key)
        try:
            if not redis.set(queued, reason, nx=True, ex=ttl):
                continue  # already queued or running: this trigger is coalesced into it
            # Continue the trace of the scope's newest traced emit, if any: the Celery
            # message carries it on to the consolidation.
            traceparent = redis.getdel(keys.trace(scope_key)) if tracing.enabled() else None
            with tracing.continued(traceparent.decode() if traceparent else None), \
                    tracing.span("sleepmem.trigger", reason=str(reason)):
                send(scope_key)
        except redis_lib.RedisError as exc:
            raise TransientError(f"trigger tick: redis unavailable ({exc})") from exc
        except Exception:
            # Not sent: give the next tick its chance instead of waiting out the TTL.
            redis.delete(queued)
            raise
        sent.append((scope_key, reason))
    return sent


def enqueue_drain(*, redis: redis_lib.Redis, keys: Keys, settings: Settings, send: Send) -> bool:
    """Queue one drain task unless one is already waiting; the task clears the key."""
    once = keys.task_once(names.DRAIN, names.DRAIN_QUEUED_SLOT)
    ttl = max(60, int(settings.tick_seconds * 10))
    if not redis.set(once, "1", nx=True, ex=ttl):
        return False
    try:
        send(names.DRAIN)
    except Exception:
        redis.delete(once)
        raise
    return True


@dataclass(slots=True)
class TickReport:
    enqueued: list[tuple[str, Reason]] = field(default_factory=list)
    drain_enqueued: bool = False
    seconds: float = 0.0


def tick(
    *,
    engine: Engine,
    redis: redis_lib.Redis,
    keys: Keys,
    settings: Settings,
    send_consolidate: Send,
    send_drain: Send | None = None,
    now: datetime | None = None,
) -> TickReport:
    """One scheduler tick: queue a drain (when drains run as tasks) and due consolidations."""
    started = time.perf_counter()
    report = TickReport()
    if send_drain is not None:
        report.drain_enqueued = enqueue_drain(
            redis=redis, keys=keys, settings=settings, send=send_drain
        )
    report.enqueued = enqueue_due(
        engine=engine,
        redis=redis,
        keys=keys,
        settings=settings,
        now=now or datetime.now(UTC),
        send=send_consolidate,
    )
    report.seconds = round(time.perf_counter() - started, 4)
    reasons: dict[str, int] = {}
    for _, reason in report.enqueued:
        reasons[reason] = reasons.get(reason, 0) + 1
    # Ticks that found nothing to do stay at debug: one every few seconds is noise.
    emit = log.info if report.enqueued else log.debug
    emit(
        "tick",
        enqueued=len(report.enqueued),
        reasons=reasons,
        drain_enqueued=report.drain_enqueued,
        seconds=report.seconds,
    )
    return report
