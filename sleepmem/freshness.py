"""Read your writes: how far a scope's memory has caught up with the event log.

An append answers its stream position (``models.positions``). A scope is fresh up to a
position when every event of it up to there has left the stream (the drain deletes an
entry only after its SQL commit), is consolidated, and every memory written from it is
indexed. :func:`wait` asks for the consolidation it needs and waits, up to a bound.

Asking goes through the same coalescing key as the scheduler's triggers: one consolidation
of a scope is queued at a time, and an ask that finds one queued or running leaves the
``again`` key, which that run reads as soon as its lease frees (:func:`after_release`).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence

import redis as redis_lib
from sqlmodel import Session, col, select

from sleepmem.core.errors import ValidationError
from sleepmem.core.keys import Keys
from sleepmem.core.settings import Settings
from sleepmem.models import IndexState, Memory, RawEvent, ScopeState
from sleepmem.models.positions import ORIGIN, Freshness, just_before, position_key
from sleepmem.resources import Resources

Send = Callable[[str], None]
"""Queues ``consolidate(scope_key)`` on the workers."""

# How often a waiter asks again while events stay pending: a run that was already going
# when the first ask came may have missed the events the ask was about.
ASK_EVERY_S = 1.0
POLL_FIRST_S = 0.02
POLL_MAX_S = 0.25
WAIT_MAX_S = 120.0


def checked_position(position: str | None, *, field: str = "position") -> str | None:
    """The position as given, or ValidationError naming ``field``."""
    if position is None:
        return None
    try:
        position_key(position)
    except ValueError as exc:
        raise ValidationError(field, str(exc)) from None
    return position


def checked_timeout(timeout_s: float, *, field: str = "timeout_s") -> float:
    if not 0 <= timeout_s <= WAIT_MAX_S:
        raise ValidationError(field, f"must be between 0 and {WAIT_MAX_S:g} seconds, "
                                     f"got {timeout_s}")
    return float(timeout_s)


def last_position(redis: redis_lib.Redis, keys: Keys) -> str:
    """The position of the newest append to the event log (ORIGIN before the first one).
    It is at or after every scope's latest append, which is what a flush waits for."""
    try:
        info = redis.xinfo_stream(keys.events)
    except redis_lib.ResponseError:  # no stream yet: nothing was ever appended
        return ORIGIN
    last = info.get("last-generated-id") or ORIGIN
    return last.decode() if isinstance(last, bytes) else str(last)


def check(res: Resources, *, scope_key: str, position: str) -> Freshness:
    """Where the scope stands at ``position`` right now; never waits."""
    undrained = res.redis.xrange(res.keys.events, min="-", max=position, count=1)
    blockers: list[str] = []
    if undrained:
        first = undrained[0][0]
        blockers.append(first.decode() if isinstance(first, bytes) else str(first))
    with Session(res.engine) as session:
        waiting = _up_to(position, session.exec(
            select(RawEvent.stream_id).where(col(RawEvent.scope_key) == scope_key,
                                             col(RawEvent.consolidated).is_(False))).all())
        unindexed = _unindexed_sources(session, scope_key=scope_key, position=position)
    blockers += waiting + unindexed
    if not blockers:
        return Freshness(done=True, position=position, reached=position)
    first_missing = min(blockers, key=lambda p: position_key(p or ORIGIN))
    return Freshness(done=False, position=position, reached=just_before(first_missing or ORIGIN),
                     drained=not undrained, pending=len(waiting) + len(unindexed))


def _up_to(position: str, stream_ids: Sequence[str]) -> list[str]:
    # An event stored without a stream id (written straight to SQL) is never newer than
    # what a caller waits for: it counts as before every position.
    limit = position_key(position)
    return [s for s in stream_ids if not s or position_key(s) <= limit]


def _unindexed_sources(session: Session, *, scope_key: str, position: str) -> list[str]:
    """Stream positions of the events behind the scope's memories not indexed yet."""
    rows = session.exec(
        select(Memory.tenant, Memory.provenance).where(
            col(Memory.scope_key) == scope_key,
            col(Memory.index_state) == IndexState.pending.value)).all()
    if not rows:
        return []
    tenant = rows[0][0]  # one scope, one tenant
    ids = sorted({e for _t, provenance in rows for e in provenance})
    if not ids:
        return []
    sources = session.exec(select(RawEvent.stream_id).where(
        col(RawEvent.tenant) == tenant, col(RawEvent.event_id).in_(ids))).all()
    return _up_to(position, sources)


def request_consolidation(redis: redis_lib.Redis, keys: Keys, settings: Settings,
                          scope_key: str, send: Send, *, reason: str) -> bool:
    """Queue one consolidation of the scope; True when sent. When one is queued or running
    already, leave the ``again`` key for it to find when its lease frees."""
    ttl = max(1, int(settings.lease_seconds))
    queued = keys.queued(scope_key)
    if redis.set(queued, reason, nx=True, ex=ttl):
        try:
            send(scope_key)
        except Exception:
            redis.delete(queued)  # not sent: the next ask or tick tries again
            raise
        return True
    redis.set(keys.again(scope_key), reason, ex=ttl)
    return False


def after_release(res: Resources, *, scope_key: str, send: Send) -> bool:
    """Called by a consolidation once its lease is released: queue the next run at once
    when someone asked during this one, or a session of the scope ended meanwhile (its
    events arrived after this run loaded its batch). True when one was sent."""
    asked = res.redis.getdel(res.keys.again(scope_key)) is not None
    with Session(res.engine) as session:
        state = session.get(ScopeState, scope_key)
    if state is None or state.pending_count <= 0:
        return False
    if not (asked or state.session_end or state.pending_count >= res.settings.batch_max):
        return False
    reason = "again" if asked else "session_end" if state.session_end else "batch"
    return request_consolidation(res.redis, res.keys, res.settings, scope_key, send,
                                 reason=reason)


def wait(res: Resources, *, scope_key: str, position: str | None, timeout_s: float,
         send: Send | None = None,
         clock: Callable[[], float] = time.monotonic) -> Freshness:
    """Wait until the scope is fresh up to ``position`` (default: the newest append) or
    ``timeout_s`` passes; asks for a consolidation when events wait for one."""
    target = position or last_position(res.redis, res.keys)
    started = clock()
    asked_at: float | None = None
    pause = POLL_FIRST_S
    while True:
        state = check(res, scope_key=scope_key, position=target)
        now = clock()
        if state.done or now - started >= timeout_s:
            return state.model_copy(update={"waited_s": round(now - started, 4)})
        # Asked only once the events are in SQL: a run started earlier would find none.
        if send is not None and state.drained and state.pending and (
                asked_at is None or now - asked_at >= ASK_EVERY_S):
            request_consolidation(res.redis, res.keys, res.settings, scope_key, send,
                                  reason="flush")
            asked_at = now
        time.sleep(min(pause, max(0.0, timeout_s - (now - started))))
        pause = min(POLL_MAX_S, pause * 2)
