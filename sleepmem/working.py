"""Working memory use-cases: session checkpoints, overflow, session end, and their upkeep.

The request path of a checkpoint write is one Redis script call (compare-version-and-set,
see :mod:`sleepmem.adapters.redis.checkpoints`). At sleep time :func:`checkpoint_job`
mirrors written versions to SQL (``session_checkpoint``), archives checkpoints of sessions
that ended ``checkpoint_keep_s`` ago (or went idle), and deletes archived ones after
``checkpoint_delete_after_s``. Evicted context and session ends go through the event
path like any emit, so consolidation folds them into memory; the events a session end
writes carry the checkpoint's final version as provenance.
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any, TypeVar

import orjson
from pydantic import BaseModel
from pydantic import ValidationError as PydanticValidationError
from sqlalchemy import and_, delete, func, or_, select, update
from sqlmodel import Session, col

from sleepmem.adapters.redis import stream
from sleepmem.adapters.redis.checkpoints import CheckpointStore, PutOutcome, Stored
from sleepmem.core.errors import ConflictError, NotFoundError, ValidationError
from sleepmem.core.keys import scope_digest
from sleepmem.core.logs import get_logger
from sleepmem.core.redaction import redact_json
from sleepmem.ingest.validation import limits_for, validate_events
from sleepmem.models import CheckpointStatus, Scope, SessionCheckpoint
from sleepmem.models.events import EventKind, Role
from sleepmem.models.positions import EventIds, latest
from sleepmem.models.working import (
    Checkpoint,
    CheckpointHistory,
    CheckpointPut,
    CheckpointState,
    EndSessionRequest,
    EventsAccepted,
    EvictRequest,
)
from sleepmem.resources import Resources
from sleepmem.values import sweep_values

log = get_logger("sleepmem.working")

M = TypeVar("M", bound=BaseModel)
MIRROR_PAGE = 1000
# Redis keeps an ended checkpoint a day past its SQL retention, as a backstop expiry: the
# job archives it first.
REDIS_GRACE_S = 86400


def parse(model: type[M], data: M | Mapping[str, Any]) -> M:
    """``data`` as ``model``, or a ValidationError naming the first bad field and its rule."""
    if isinstance(data, model):
        return data
    try:
        return model.model_validate(data)
    except PydanticValidationError as exc:
        err = exc.errors()[0]
        field = ".".join(str(p) for p in err["loc"]) or "request"
        raise ValidationError(field, str(err["msg"])) from None


def session_scope(scope: Scope | Mapping[str, Any]) -> Scope:
    parsed = parse(Scope, scope)
    if not parsed.session:
        raise ValidationError(
            "scope.session", "a checkpoint belongs to one session: set scope.session"
        )
    return parsed


@dataclass(frozen=True, slots=True)
class PreparedPut:
    """A checkpoint write ready for the store: ``doc`` is the version's JSON as returned."""

    where: Scope
    digest: str
    base: int
    doc: bytes
    at: float


def _iso(t: datetime) -> str:
    return t.astimezone(UTC).isoformat()


class WorkingMemory:
    """Checkpoint reads and writes for one process; build once, share across threads."""

    def __init__(self, resources: Resources) -> None:
        self.res = resources
        self.store = CheckpointStore(
            resources.redis, resources.keys, history=resources.settings.checkpoint_history
        )

    def _now(self) -> datetime:
        clock = self.res.clock
        return clock() if clock is not None else datetime.now(UTC)

    # -- checkpoints ---------------------------------------------------------------------

    def prepare(
        self,
        scope: Scope | Mapping[str, Any],
        state: CheckpointState | Mapping[str, Any],
        *,
        base_version: int,
        redacted: bool = False,
    ) -> PreparedPut:
        """Validate, redact, bound and encode a write; no I/O (the API awaits the store).

        ``redacted``: the in-process caller redacted every value itself before encoding it
        (the LangGraph saver stores serialised blobs, which redaction would corrupt); the
        HTTP routes never pass it."""
        request = parse(CheckpointPut, {"scope": scope, "state": state,
                                        "base_version": base_version})
        where = session_scope(request.scope)
        dumped = request.state.model_dump(mode="json")
        clean = dumped if redacted else redact_json(dumped)
        body = orjson.dumps(clean)
        limit = self.res.settings.checkpoint_max_bytes
        if len(body) > limit:
            raise ValidationError(
                "state",
                f"the checkpoint is {len(body)} bytes of JSON, over the limit of {limit}; keep "
                "large tool results out of it (store a reference) or raise "
                "SLEEPMEM_CHECKPOINT_MAX_BYTES",
            )
        now = self._now()
        doc = orjson.dumps({
            "scope": where.model_dump(),
            "version": request.base_version + 1,
            "state": orjson.Fragment(body),
            "updated_at": _iso(now),
            "size_bytes": len(body),
            "ended_at": None,
        })
        return PreparedPut(where=where, digest=scope_digest(where.key),
                           base=request.base_version, doc=doc, at=now.timestamp())

    def put(
        self,
        scope: Scope | Mapping[str, Any],
        state: CheckpointState | Mapping[str, Any],
        *,
        base_version: int,
        redacted: bool = False,
    ) -> Checkpoint:
        """Write version ``base_version + 1``; ConflictError if ``base_version`` is stale."""
        prepared = self.prepare(scope, state, base_version=base_version, redacted=redacted)
        self.commit(prepared)
        return Checkpoint.model_validate_json(prepared.doc)

    def commit(self, prepared: PreparedPut, first: PutOutcome | None = None) -> None:
        """Store a prepared write (or judge the outcome of an attempt made elsewhere)."""
        p = prepared
        outcome = first or self.store.put(p.digest, base=p.base, doc=p.doc, at=p.at)
        if not outcome.written and outcome.version == 0 and self._reseed(p.where, p.digest):
            # Redis had lost the session (no AOF, flushed): it is back from the SQL mirror.
            outcome = self.store.put(p.digest, base=p.base, doc=p.doc, at=p.at)
        log.debug("checkpoint_put", tenant=p.where.tenant, scope=p.digest, base=p.base,
                  written=outcome.written, version=outcome.version, bytes=len(p.doc))
        if outcome.written:
            return
        if outcome.ended:
            raise ConflictError(
                f"session {p.where.session!r} has ended; its checkpoint is final. Start a "
                "new session to keep working", current_version=outcome.version,
            )
        raise ConflictError(
            f"base_version {p.base} is stale: the checkpoint is at version "
            f"{outcome.version}. Read it (GET), apply your change to it and write again "
            f"with base_version {outcome.version}",
            current_version=outcome.version,
        )

    def get(self, scope: Scope | Mapping[str, Any]) -> Checkpoint:
        """The current version; NotFoundError when the session has none."""
        stored = self._current(scope)
        return _checkpoint(stored.doc, stored.ended)

    def raw(self, scope: Scope | Mapping[str, Any]) -> bytes:
        """The current version as the JSON bytes :meth:`get` would return (no re-encoding)."""
        stored = self._current(scope)
        if stored.ended is None:
            return stored.doc
        return orjson.dumps({**orjson.loads(stored.doc), "ended_at": stored.ended})

    def _current(self, scope: Scope | Mapping[str, Any]) -> Stored:
        where = session_scope(scope)
        digest = scope_digest(where.key)
        stored = self.store.get(digest)
        if stored is None and self._reseed(where, digest):
            stored = self.store.get(digest)
        if stored is None:
            raise NotFoundError("no checkpoint for this session in this scope")
        return stored

    def history(self, scope: Scope | Mapping[str, Any], *, limit: int = 20) -> CheckpointHistory:
        """Versions newest first: the recent ones from Redis, older ones from the SQL mirror."""
        where = session_scope(scope)
        if not 1 <= limit <= 1000:
            raise ValidationError("limit", "must be between 1 and 1000")
        digest = scope_digest(where.key)
        stored = self.store.get(digest)
        ended = stored.ended if stored is not None else None
        versions = [_checkpoint(d, ended) for d in self.store.history(digest, limit=limit)]
        oldest = versions[-1].version if versions else None
        if len(versions) < limit and (oldest is None or oldest > 1):
            with Session(self.res.engine) as session:
                stmt = select(SessionCheckpoint).where(
                    col(SessionCheckpoint.scope_key) == where.key,
                    col(SessionCheckpoint.status) != CheckpointStatus.archived.value,
                )
                if oldest is not None:
                    stmt = stmt.where(col(SessionCheckpoint.version) < oldest)
                stmt = stmt.order_by(col(SessionCheckpoint.version).desc()).limit(
                    limit - len(versions)
                )
                versions += [_from_row(r) for r in session.execute(stmt).scalars()]
        if not versions:
            raise NotFoundError("no checkpoint for this session in this scope")
        return CheckpointHistory(scope=where, versions=versions)

    def _reseed(self, where: Scope, digest: str) -> bool:
        with Session(self.res.engine) as session:
            row = session.execute(
                select(SessionCheckpoint)
                .where(col(SessionCheckpoint.scope_key) == where.key,
                       col(SessionCheckpoint.status) != CheckpointStatus.archived.value)
                .order_by(col(SessionCheckpoint.version).desc())
                .limit(1)
            ).scalar_one_or_none()
        if row is None:
            return False
        cp = _from_row(row)
        doc = orjson.dumps(cp.model_dump(mode="json", exclude={"ended_at"}) | {"ended_at": None})
        ended = _iso(cp.ended_at) if cp.ended_at is not None else None
        self.store.seed(digest, version=cp.version, doc=doc, ended=ended)
        log.info("checkpoint_reseeded", tenant=where.tenant, scope=digest, version=cp.version)
        return True

    # -- overflow and session end --------------------------------------------------------

    def evict(self, request: EvictRequest | Mapping[str, Any]) -> EventsAccepted:
        """Context dropped from the prompt becomes events, so sleep time still sees it."""
        req = parse(EvictRequest, request)
        where = req.scope
        events: list[dict[str, Any]] = []
        for m in req.messages:
            event: dict[str, Any] = {
                **where.levels(), "kind": EventKind.message.value, "role": m.role.value,
                "content": m.content, "meta": {"evicted": True},
            }
            if m.event_id:
                event["event_id"] = m.event_id
            if m.at is not None:
                event["at"] = m.at
            events.append(event)
        ids = self._emit(events)
        log.info("context_evicted", tenant=where.tenant, events=len(ids))
        return EventsAccepted(ids=ids, position=ids.position)

    def end_session(self, request: EndSessionRequest | Mapping[str, Any]) -> EventsAccepted:
        """Freeze the checkpoint and hand its final state to consolidation as events.

        Ending twice writes nothing new: the events have ids derived from the session and
        the final version, and the drain keeps one row per id.
        """
        req = parse(EndSessionRequest, request)
        where = session_scope(req.scope)
        digest = scope_digest(where.key)
        settings = self.res.settings
        now = self._now()
        version = self.store.end(
            digest, ended=_iso(now), ttl_s=int(settings.checkpoint_keep_s) + REDIS_GRACE_S,
            at=now.timestamp(),
        )
        final: Checkpoint | None = None
        if version == 0:
            try:
                final = self.get(where)  # Redis lost it: the mirror still has it
                version = self.store.end(
                    digest, ended=_iso(now),
                    ttl_s=int(settings.checkpoint_keep_s) + REDIS_GRACE_S, at=now.timestamp(),
                )
            except NotFoundError:
                final = None
        if version:
            final = self.get(where)
        events = _final_events(where, digest, final, req.outcome)
        ids = self._emit(events)
        log.info("session_ended", tenant=where.tenant, scope=digest,
                 checkpoint_version=version or None, events=len(ids))
        return EventsAccepted(ids=ids, position=ids.position,
                              checkpoint_version=version or None)

    def _emit(self, events: Sequence[Mapping[str, Any]]) -> EventIds:
        settings = self.res.settings
        checked = validate_events(events, limits=limits_for(settings),
                                  max_events=settings.batch_max_events)
        positions = stream.append(self.res.redis, self.res.keys, checked) if checked else []
        return EventIds([e["event_id"] for e in checked], latest(*positions))


def _checkpoint(doc: bytes, ended: str | None) -> Checkpoint:
    data = orjson.loads(doc)
    if ended is not None:
        data["ended_at"] = ended
    return Checkpoint.model_validate(data)


def _from_row(row: SessionCheckpoint) -> Checkpoint:
    return Checkpoint(
        scope=Scope(tenant=row.tenant, agent=row.agent, user=row.user, project=row.project,
                    session=row.session),
        version=row.version, state=CheckpointState.model_validate(row.state),
        updated_at=row.written_at, size_bytes=row.size_bytes, ended_at=row.ended_at,
    )


def _final_events(
    where: Scope, digest: str, final: Checkpoint | None, outcome: str
) -> list[dict[str, Any]]:
    """The session's last words to consolidation: a summary of the task as an episode, each
    verified fact as trusted tool output, then the session end. Their meta names the
    checkpoint version they come from; memories built from them list these event ids as
    provenance, so ``explain`` leads back to the checkpoint."""
    base = where.levels()
    prefix = f"ckpt-{digest}"
    events: list[dict[str, Any]] = []
    version = final.version if final is not None else 0
    provenance = {"checkpoint": {"session": where.session, "version": version}}
    if final is not None:
        state = final.state
        summary = _summary(where.session, state, outcome)
        if summary:
            events.append({
                **base, "event_id": f"{prefix}-v{version}-summary",
                "kind": EventKind.observation.value, "role": Role.assistant.value,
                "content": summary,
                # The agent reports its own work: an observation it is sure of, not a
                # guess (below 0.6 the gate would drop it as an inference).
                "meta": {**provenance, "source": "checkpoint", "confidence": 0.9},
            })
        for i, fact in enumerate(state.verified):
            if fact.strip():
                events.append({
                    **base, "event_id": f"{prefix}-v{version}-fact{i}",
                    "kind": EventKind.tool_result.value, "role": Role.tool.value,
                    "content": fact,
                    "meta": {**provenance, "source": "checkpoint", "trusted": True},
                })
    events.append({
        **base, "event_id": f"{prefix}-end", "kind": EventKind.session_end.value,
        "role": Role.system.value, "content": outcome, "meta": provenance,
    })
    return events


def _summary(session: str, state: CheckpointState, outcome: str) -> str:
    parts: list[str] = []
    if state.goal:
        parts.append(f"Worked on: {state.goal.strip().rstrip('.')}.")
    steps = [s.step or s.key for s in state.completed]
    if steps:
        parts.append("Completed: " + "; ".join(s.strip().rstrip(".") for s in steps) + ".")
    pending = [p for p in state.plan if p not in steps]
    if pending and state.current_step:
        parts.append(f"Stopped at: {state.current_step.strip().rstrip('.')}.")
    if outcome.strip():
        parts.append(f"Outcome: {outcome.strip().rstrip('.')}.")
    return " ".join(parts)[:4000]


# -- sleep time ---------------------------------------------------------------------------


def mirror_checkpoints(res: Resources, *, now: datetime | None = None) -> dict[str, int]:
    """Copy every checkpoint version written since the last run from Redis to SQL."""
    store = CheckpointStore(res.redis, res.keys, history=res.settings.checkpoint_history)
    now = now or datetime.now(UTC)
    counts = {"sessions": 0, "versions": 0}
    while True:
        dirty = store.dirty(limit=MIRROR_PAGE)
        if not dirty:
            return counts
        for digest, score in dirty:
            stored, docs = store.read(digest)
            if stored is not None:
                counts["versions"] += _mirror_one(res, stored, docs, now)
                counts["sessions"] += 1
            store.clean(digest, score)
        if len(dirty) < MIRROR_PAGE:
            return counts


def _mirror_one(res: Resources, stored: Stored, docs: list[bytes], now: datetime) -> int:
    versions = {c.version: c for c in (_checkpoint(d, None) for d in docs)}
    ended = datetime.fromisoformat(stored.ended) if stored.ended else None
    if not versions:
        return 0
    scope = next(iter(versions.values())).scope
    key = scope.key
    with Session(res.engine) as session:
        have = set(session.execute(
            select(col(SessionCheckpoint.version)).where(
                col(SessionCheckpoint.scope_key) == key,
                col(SessionCheckpoint.version).in_(list(versions)),
            )
        ).scalars())
        for v, cp in sorted(versions.items()):
            if v in have:
                continue
            session.add(SessionCheckpoint(
                tenant=scope.tenant, agent=scope.agent, user=scope.user, project=scope.project,
                session=scope.session, scope_key=key, version=v,
                state=cp.state.model_dump(mode="json"), size_bytes=cp.size_bytes,
                written_at=cp.updated_at, mirrored_at=now,
                status=CheckpointStatus.live.value,
            ))
        if ended is not None:
            session.execute(
                update(SessionCheckpoint)
                .where(col(SessionCheckpoint.scope_key) == key,
                       col(SessionCheckpoint.status) == CheckpointStatus.live.value)
                .values(status=CheckpointStatus.ended.value, ended_at=ended)
            )
        session.commit()
    return len(versions) - len(have)


def retire_checkpoints(res: Resources, *, now: datetime | None = None) -> dict[str, int]:
    """Archive checkpoints of sessions ended ``checkpoint_keep_s`` ago or idle for
    ``checkpoint_idle_s`` (their Redis keys go), delete those archived for
    ``checkpoint_delete_after_s``."""
    s = res.settings
    now = now or datetime.now(UTC)
    store = CheckpointStore(res.redis, res.keys, history=s.checkpoint_history)
    ended_before = now - timedelta(seconds=s.checkpoint_keep_s)
    idle_before = now - timedelta(seconds=s.checkpoint_idle_s)
    with Session(res.engine) as session:
        # One row per session: its latest write and its end, judged in SQL.
        written, ended = func.max(SessionCheckpoint.written_at), func.max(
            SessionCheckpoint.ended_at)
        doomed = sorted(session.execute(
            select(col(SessionCheckpoint.scope_key))
            .where(col(SessionCheckpoint.status) != CheckpointStatus.archived.value)
            .group_by(col(SessionCheckpoint.scope_key))
            .having(or_(ended <= ended_before, and_(ended.is_(None), written <= idle_before)))
        ).scalars())
        for start in range(0, len(doomed), MIRROR_PAGE):
            chunk = doomed[start:start + MIRROR_PAGE]
            session.execute(
                update(SessionCheckpoint)
                .where(col(SessionCheckpoint.scope_key).in_(chunk))
                .values(status=CheckpointStatus.archived.value, archived_at=now)
            )
        gone = session.execute(
            delete(SessionCheckpoint).where(
                col(SessionCheckpoint.status) == CheckpointStatus.archived.value,
                col(SessionCheckpoint.archived_at)
                <= now - timedelta(seconds=s.checkpoint_delete_after_s),
            )
        )
        session.commit()
    for key in doomed:
        store.delete(scope_digest(key))
    return {"archived": len(doomed), "deleted": int(getattr(gone, "rowcount", 0) or 0)}


def checkpoint_job(res: Resources, task_id: str) -> dict[str, int]:
    """The scheduled upkeep: mirror, then retire, then delete expired stored values.
    Counts only, no content."""
    started = time.perf_counter()
    now = res.clock() if res.clock is not None else datetime.now(UTC)
    counts = mirror_checkpoints(res, now=now)
    counts.update(retire_checkpoints(res, now=now))
    # Stored values expire on the same clock; their sweep rides this upkeep.
    counts["values_expired"] = sweep_values(res, now=now)
    log.debug("checkpoint_job", task_id=task_id, ms=round((time.perf_counter() - started) * 1e3))
    return counts


__all__ = [
    "WorkingMemory",
    "checkpoint_job",
    "mirror_checkpoints",
    "parse",
    "retire_checkpoints",
    "session_scope",
]
