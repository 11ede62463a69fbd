"""Re-consolidation: rebuild a scope's memory from its raw event log with today's pipeline.

The scope's consolidated events (optionally only those since a time) are replayed, in
event-time order and in chunks, through extract → gate → resolve → compress into a
*shadow* set held in memory: nothing is written while replaying. The shadow starts from
the scope's current memories that the replayed events did not produce (rules written by
people, memories older than ``since``), so the replay resolves against them as the live
pipeline would. Each candidate is judged at the time its events were first consolidated,
so recency and expiry come out as the live pipeline made them, and what would have expired
by now does not come back.

The shadow is then compared with the current set (:mod:`.shadow`: matched on type,
subject, attribute, session and normalised statement): added, removed, changed (same slot,
new statement or status), with reasons. What a person decided (an edit, a chosen side of a
conflict: trust ``human``) or pinned is held: the replay neither changes nor removes it,
and what the replay derives from the same events or for the same slot gives way to it. A
dry run stops there.
Apply swaps in one transaction: replaced and removed memories are archived (explainable,
with RECONSOLIDATE audit rows naming their replacements), new versions are written
``index_state=pending``, then indexed.

Progress (events done / total, rate) lives in the job row (:mod:`.jobs`); a cancel flag is
checked between chunks; a finished job re-run is a no-op; an interrupted one starts its
replay again (the replay writes nothing, so restarting it is always safe).
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable, Iterator
from datetime import datetime
from functools import partial
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Engine
from sqlmodel import Session, col, select

from sleepmem.core.errors import ValidationError
from sleepmem.core.logs import get_logger
from sleepmem.core.settings import Settings
from sleepmem.models import (
    CURRENT_STATUSES,
    Audit,
    IndexState,
    Job,
    JobStatus,
    Memory,
    RawEvent,
    Scope,
)
from sleepmem.pipelines import store as repo
from sleepmem.pipelines.context import visible_scope_keys
from sleepmem.pipelines.decay import aware
from sleepmem.pipelines.entities import store as entity_store
from sleepmem.pipelines.lifecycle.jobs import get_job, job_key, update_job
from sleepmem.pipelines.lifecycle.shadow import Diff, Key, Shadow, diff, match_key
from sleepmem.pipelines.memories import copy_row, memory_id
from sleepmem.pipelines.ports import Ports
from sleepmem.pipelines.semantic import Meaning
from sleepmem.pipelines.types import Candidate, EventView, Op
from sleepmem.pipelines.write.consolidate import make_extractor, make_verdicts
from sleepmem.pipelines.write.echo import Output
from sleepmem.pipelines.write.index import apply_to_index
from sleepmem.pipelines.write.policy import Policy
from sleepmem.pipelines.write.resolve import Resolver
from sleepmem.pipelines.write.stages import judge
from sleepmem.pipelines.write.versions import AuditDraft, archive, audit_values, successor

log = get_logger("sleepmem.reconsolidate")

KIND = "reconsolidate"
CHUNK_EVENTS = 500

CancelCheck = Callable[[], bool]
ProgressHook = Callable[[Job], None]


class JobCancelled(Exception):
    """Raised between chunks when the job's cancel flag is set; the job ends cancelled."""


# -- jobs --------------------------------------------------------------------------------


def create_job(
    *,
    engine: Engine,
    scope_key: str,
    now: datetime,
    since: datetime | None = None,
    apply: bool = False,
    job_id: str | None = None,
) -> Job:
    """A queued job row; with ``job_id`` given and known, the existing job (idempotent)."""
    scope = Scope.parse_key(scope_key, owner=True)
    params: dict[str, Any] = {"since": aware(since).isoformat() if since else None, "apply": apply}
    with Session(engine, expire_on_commit=False) as session:
        if job_id is not None:
            existing = session.get(Job, job_key(scope.tenant, job_id))
            if existing is not None:
                return existing
            params["name"] = job_id
        job = Job(
            id=job_key(scope.tenant, job_id) if job_id else uuid.uuid4().hex, kind=KIND,
            tenant=scope.tenant, scope_key=scope_key, status=JobStatus.queued.value,
            created_at=aware(now), params=params,
        )
        session.add(job)
        session.commit()
        return job


# -- the run -------------------------------------------------------------------------------


def run_job(
    *,
    engine: Engine,
    ports: Ports,
    settings: Settings,
    job_id: str,
    should_cancel: CancelCheck = lambda: False,
    on_progress: ProgressHook | None = None,
    chunk: int = CHUNK_EVENTS,
    resume: bool = False,
    task_id: str = "",
    worker: str = "",
) -> Job:
    """Run (or re-run) a job to its end and return the final row.

    A job already done returns unchanged. A cancelled job stays cancelled unless
    ``resume``. The caller holds the scope's consolidation lease, so the current set
    cannot move under the diff.
    """
    job = get_job(engine=engine, job_id=job_id)
    if job.kind != KIND:
        raise ValidationError("job", f"this is a {job.kind} job, not {KIND}")
    if job.status == JobStatus.done.value or (
        job.status == JobStatus.cancelled.value and not resume
    ):
        return job
    started = time.perf_counter()
    try:
        since = _since(job)
        now = aware(ports.clock())
        job = update_job(engine, job_id, status=JobStatus.running.value, started_at=now, done=0,
                      total=_count_events(engine, job.scope_key, since), rate=0.0, error="")
    except Exception as exc:
        # A job that cannot even start (a stored `since` no clock can hold) ends failed,
        # never left queued for a worker that will fail on it again.
        _failed(engine, job_id, ports, exc)
        raise
    progress = _Progress(engine, job, started, on_progress)
    try:
        shadow = replay(
            engine=engine, ports=ports, settings=settings, scope_key=job.scope_key,
            since=since, chunk=chunk, should_cancel=should_cancel, progress=progress.step,
        )
        with Session(engine) as session:
            current = _live(
                list(session.exec(select(Memory).where(
                    col(Memory.scope_key) == job.scope_key,
                    col(Memory.status).in_(CURRENT_STATUSES),
                ))),
                now,
            )
        result_diff = diff(current, shadow)
        result = result_diff.as_result(shadow.extractor)
        apply = bool(job.params.get("apply"))
        if apply and not result_diff.empty:
            _apply(engine, ports, job, result_diff, now, task_id=task_id, worker=worker)
        result["applied"] = apply
        result["events_per_s"] = round(progress.rate(), 1)
        job = update_job(engine, job_id, status=JobStatus.done.value, result=result,
                      finished_at=aware(ports.clock()), done=progress.done,
                      rate=progress.rate())
    except JobCancelled:
        job = update_job(engine, job_id, status=JobStatus.cancelled.value,
                      finished_at=aware(ports.clock()),
                      result={"cancelled_after_events": progress.done})
    except Exception as exc:
        _failed(engine, job_id, ports, exc)
        raise
    log.info("reconsolidate", job_id=job_id, tenant=job.tenant, status=job.status,
             events=progress.done, total=job.total, events_per_s=round(progress.rate(), 1),
             seconds=round(time.perf_counter() - started, 3), applied=job.params.get("apply"),
             **(job.result.get("counts") or {}))
    return job


class _Progress:
    """Writes done/total/rate into the job row after each chunk (a short transaction)."""

    def __init__(
        self, engine: Engine, job: Job, started: float, hook: ProgressHook | None
    ) -> None:
        self.engine, self.job, self.started, self.hook = engine, job, started, hook
        self.done = 0

    def rate(self) -> float:
        elapsed = time.perf_counter() - self.started
        return self.done / elapsed if elapsed > 0 else 0.0

    def step(self, n: int) -> None:
        self.done += n
        self.job = update_job(self.engine, self.job.id, done=self.done, rate=self.rate())
        if self.hook is not None:
            self.hook(self.job)


# -- replay --------------------------------------------------------------------------------


def replay(
    *,
    engine: Engine,
    ports: Ports,
    settings: Settings,
    scope_key: str,
    since: datetime | None = None,
    chunk: int = CHUNK_EVENTS,
    should_cancel: CancelCheck = lambda: False,
    progress: Callable[[int], None] = lambda n: None,
) -> Shadow:
    """The shadow set for ``scope_key``. Reads SQL, writes nothing."""
    now = aware(ports.clock())
    extractor = make_extractor(settings, ports)
    policy = Policy.from_settings(settings, extractor=extractor.name)
    replayed = _event_ids(engine, scope_key, since)
    with Session(engine) as session:
        current = list(session.exec(select(Memory).where(
            col(Memory.scope_key) == scope_key, col(Memory.status).in_(CURRENT_STATUSES),
        )))
        # What the service may have shown when the replayed turns were made: every version
        # it ever wrote for the scope (versions are appended, never rewritten, so an old
        # turn's echo names one of them) and the broader scopes' memories, as the live
        # pipeline loads them. Versions the replay derives anew were never shown to anyone.
        shown = Output.of_memories([
            *repo.scope_memories(session, scope_key=scope_key),
            *repo.memories_in(session, scope_keys=[
                k for k in visible_scope_keys(Scope.parse_key(scope_key)) if k != scope_key]),
        ])
    # Memories the replay does not rebuild stay as they are and are resolved against.
    start = [m for m in current if not replayed & set(m.provenance)]
    resolver: Resolver | None = None
    sessions: dict[str, str] = {}
    folded: dict[str, list[str]] = {}
    reasons: dict[str, str] = {}
    events_seen = 0
    for events, judged in _event_chunks(engine, scope_key, since, chunk):
        if should_cancel():
            raise JobCancelled()
        if resolver is None:
            resolver = Resolver(
                scope_key=scope_key, existing=start, all_versions=start,
                now=judged[events[0].event_id], policy=policy.resolve,
                meaning=Meaning(ports.embedder), verdicts=make_verdicts(settings, ports),
            )
        sessions.update({e.event_id: e.scope.session for e in events})
        comp = judge(
            events, extractor=extractor, resolver=resolver, policy=policy, shown=shown,
            event_sessions=sessions,
            # Judged when the live pipeline judged it: expiry and recency as they were then.
            judged_at=partial(_judged_at, judged),
        ).compression
        folded.update(comp.archive_after_index)
        events_seen += len(events)
        progress(len(events))
    if resolver is None:
        return Shadow(current=_live(start, now), extractor=extractor.name, events=0)
    archived = {mid for members in folded.values() for mid in members}
    plan = resolver.plan
    history = {m.id: m for m in start} | plan.changed | plan.new
    fates: dict[Key, str] = {}
    for draft in resolver.plan.audits:
        for mid in draft.after:
            reasons[mid] = f"{draft.op.value.lower()}: {draft.reason}"
        if draft.op.value in ("UPDATE", "INVALIDATE"):
            for mid in draft.before:
                row = resolver.plan.changed.get(mid) or resolver.plan.new.get(mid)
                if row is not None:
                    fates[match_key(row)] = f"the replay retires it: {draft.reason}"
    shadow = [m for m in resolver.current() if m.id not in archived]
    for m in shadow:
        if m.expires_at is not None and aware(m.expires_at) <= now:
            fates[match_key(m)] = (f"under the current settings it expired on "
                                   f"{aware(m.expires_at):%Y-%m-%d}")
    for mid in archived:
        row = resolver.plan.changed.get(mid) or resolver.plan.new.get(mid)
        if row is not None:
            fates[match_key(row)] = "the replay folds it into a session summary"
    return Shadow(current=_live(shadow, now), extractor=extractor.name, events=events_seen,
                  reasons=reasons, fates=fates,
                  history=[m for mid, m in history.items() if mid not in plan.deleted],
                  audits=list(plan.audits), folded=folded)


def _judged_at(judged: dict[str, datetime], cand: Candidate) -> datetime:
    return max((judged[e] for e in cand.provenance if e in judged),
               default=aware(cand.valid_from))


def _live(memories: list[Memory], now: datetime) -> list[Memory]:
    """Past its expiry a memory is gone already, on either side of the comparison."""
    return [m for m in memories if m.expires_at is None or aware(m.expires_at) > now]


def _event_filter(scope_key: str, since: datetime | None) -> list[Any]:
    # Pending events are not part of the current set yet: consolidation will take them.
    conds: list[Any] = [col(RawEvent.scope_key) == scope_key, col(RawEvent.consolidated)]
    if since is not None:
        conds.append(col(RawEvent.at) >= since)
    return conds


def _count_events(engine: Engine, scope_key: str, since: datetime | None) -> int:
    with engine.connect() as conn:
        return int(conn.execute(
            sa.select(sa.func.count()).select_from(RawEvent)
            .where(*_event_filter(scope_key, since))
        ).scalar() or 0)


def _event_ids(engine: Engine, scope_key: str, since: datetime | None) -> set[str]:
    with engine.connect() as conn:
        return set(conn.execute(
            sa.select(col(RawEvent.event_id)).where(*_event_filter(scope_key, since))
        ).scalars())


def _event_chunks(
    engine: Engine, scope_key: str, since: datetime | None, size: int
) -> Iterator[tuple[list[EventView], dict[str, datetime]]]:
    """Events in (time, id) order, ``size`` at a time (keyset: bounded memory), with the
    time each was consolidated."""
    last: tuple[datetime, str] | None = None
    while True:
        stmt = select(RawEvent).where(*_event_filter(scope_key, since))
        if last is not None:
            stmt = stmt.where(sa.tuple_(col(RawEvent.at), col(RawEvent.event_id)) > last)
        stmt = stmt.order_by(col(RawEvent.at), col(RawEvent.event_id)).limit(size)
        with Session(engine) as session:
            rows = list(session.exec(stmt))
        if not rows:
            return
        last = (rows[-1].at, rows[-1].event_id)
        judged = {r.event_id: aware(r.consolidated_at or r.at) for r in rows}
        yield [
            EventView(
                event_id=r.event_id,
                scope=Scope(tenant=r.tenant, agent=r.agent, user=r.user, project=r.project,
                            session=r.session),
                kind=r.kind, role=r.role, content=r.content, at=aware(r.at), meta=dict(r.meta),
            )
            for r in rows
        ], judged
        if len(rows) < size:
            return


# -- apply -----------------------------------------------------------------------------


def _apply(
    engine: Engine, ports: Ports, job: Job, d: Diff, now: datetime, *, task_id: str,
    worker: str,
) -> None:
    """The swap, in one transaction; then the index (pending rows reconcile after a crash)."""
    new_rows: list[Memory] = []
    retired: list[Memory] = []
    with Session(engine, expire_on_commit=False) as session:
        taken = set(session.exec(select(Memory.id).where(
            col(Memory.id).in_([m.id for m in d.added] + [n.id for _o, n, _r in d.changed])
        )))

        def fresh(m: Memory, *, of: Memory | None) -> Memory:
            """The shadow's ``m`` as a row to write: the version after ``of``, or the
            first of its lineage (write.versions)."""
            row = copy_row(m)
            if row.id in taken:
                # Deterministic per job, so a retried apply writes the same ids.
                row.id = memory_id("reconsolidate", job.id, m.id)
            successor(row, of=of)
            row.recorded_at, row.index_state = now, IndexState.pending.value
            return row

        for m in d.added:
            new_rows.append(fresh(m, of=None))
        pairs: list[tuple[Memory, Memory, str]] = []
        for old, m, why in d.changed:
            row = fresh(m, of=old)
            # A restatement keeps the history of use: it is the same memory, reworded.
            row.access_count = old.access_count
            row.last_access = max(aware(old.last_access), aware(row.last_access))
            row.mention_count = max(old.mention_count, row.mention_count)
            row.reminded = old.reminded
            new_rows.append(row)
            pairs.append((old, row, why))
        for row in new_rows:
            session.add(row)
        replaced = {old.id: row.id for old, row, _w in pairs}
        for old in [*d.removed, *(o for o, _n, _w in pairs)]:
            live = session.get(Memory, old.id)
            if live is None or live.status not in CURRENT_STATUSES:
                continue
            archive(live, by=replaced.get(old.id), now=now)
            live.index_state = IndexState.pending.value
            session.add(live)
            retired.append(live)
        audits: list[tuple[list[str], list[str], str]] = [
            *(([o.id], [n.id], why) for o, n, why in pairs),
            *(([m.id], [], "no longer derived from its events") for m in d.removed),
            *(([], [m.id], "derived by the current pipeline") for m in new_rows[: len(d.added)]),
        ]
        # The entity stage over the swap: the new versions' names and relations, and the
        # retired versions' relations retired with them.
        entity_store.record_versions(session, scope_key=job.scope_key, new=new_rows,
                                     retired=retired, now=now)
        extractor = new_rows[0].extractor if new_rows else ""
        for before, after, why in audits:
            draft = AuditDraft(Op.RECONSOLIDATE, before, after, f"job {job.id}: {why}", [])
            session.add(Audit(**audit_values(
                draft, at=now, tenant=job.tenant, scope_key=job.scope_key,
                task_id=task_id or job.id, worker=worker, extractor=extractor,
            )))
        session.commit()
    apply_to_index(engine=engine, index=ports.index, embedder=ports.embedder,
                   upsert=new_rows, payload_only=retired, delete=[])


# -- rows ------------------------------------------------------------------------------


def _failed(engine: Engine, job_id: str, ports: Ports, exc: Exception) -> None:
    update_job(engine, job_id, status=JobStatus.failed.value, finished_at=aware(ports.clock()),
            error=f"{type(exc).__name__}: {str(exc)[:300]}")


def _since(job: Job) -> datetime | None:
    raw = job.params.get("since")
    return aware(datetime.fromisoformat(raw)) if raw else None


