"""consolidate(scope): the sleep-time pipeline over one scope's pending events.

extract → gate → resolve (dedup + judgement) → compress → entities (names, aliases and
relations of what the batch wrote) → persist (one SQL transaction) → index → archive
compressed originals. A failure before the commit leaves every event
pending and nothing half-applied; a failure after it leaves rows ``index_state=pending``
for the reconciler.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from sqlalchemy.engine import Engine
from sqlmodel import Session

from sleepmem.core.errors import ExtractionError, LeaseLostError
from sleepmem.core.settings import Settings
from sleepmem.core.tracing import span
from sleepmem.models import Audit, Scope
from sleepmem.pipelines import store as repo
from sleepmem.pipelines.context import visible_scope_keys
from sleepmem.pipelines.entities import graph as entity_graph
from sleepmem.pipelines.entities import store as entity_store
from sleepmem.pipelines.ports import Ports
from sleepmem.pipelines.semantic import Meaning
from sleepmem.pipelines.store import session_scope
from sleepmem.pipelines.types import EventView, Extractor
from sleepmem.pipelines.write import versions
from sleepmem.pipelines.write.echo import Output
from sleepmem.pipelines.write.extract.llm import LLMExtractor
from sleepmem.pipelines.write.extract.rules import RulesExtractor
from sleepmem.pipelines.write.index import apply_to_index, payload_for
from sleepmem.pipelines.write.persist import AuditContext, persist
from sleepmem.pipelines.write.policy import Policy
from sleepmem.pipelines.write.resolve import Plan, Resolver
from sleepmem.pipelines.write.stages import judge
from sleepmem.pipelines.write.verdicts import Verdicts


@dataclass(slots=True)
class ConsolidationReport:
    scope_key: str
    events: int = 0
    memories_written: int = 0
    ops: dict[str, int] = field(default_factory=dict)
    stage_seconds: dict[str, float] = field(default_factory=dict)
    llm_calls: int = 0
    llm_tokens: int = 0
    # The service's own output that came back in turns and was not read again.
    echo_chars: int = 0
    echo_events: int = 0
    extra: dict[str, Any] = field(default_factory=dict)

    @contextmanager
    def stage(self, name: str) -> Iterator[None]:
        t0 = time.perf_counter()
        try:
            with span(f"sleepmem.stage.{name}", stage=name):
                yield
        finally:
            self.stage_seconds[name] = self.stage_seconds.get(name, 0.0) + (
                time.perf_counter() - t0
            )


def make_extractor(settings: Settings, ports: Ports) -> Extractor:
    if ports.extractor is not None:
        return ports.extractor
    if settings.extractor == "llm":
        if ports.chat is None:
            raise ExtractionError("extractor=llm needs SLEEPMEM_LLM_BASE_URL and a model")
        return LLMExtractor(ports.chat, batch_events=settings.llm_batch_events,
                            embedder=ports.embedder, route=settings.llm_route)
    return RulesExtractor(embedder=ports.embedder)


def make_verdicts(settings: Settings, ports: Ports) -> Verdicts | None:
    """The judge model's verdicts for a run, when a chat model is configured."""
    return Verdicts(ports.chat) if ports.chat is not None and settings.llm_judge else None


def consolidate_scope(
    *,
    engine: Engine,
    ports: Ports,
    settings: Settings,
    scope: Scope,
    task_id: str = "",
    worker: str = "",
    max_events: int = 5000,
) -> ConsolidationReport:
    """Consolidate every pending event of one scope, in batches of ``max_events``. The
    scope comes parsed: its key was validated once, where the request entered."""
    scope_key = scope.key
    report = ConsolidationReport(scope_key=scope_key)
    extractor = make_extractor(settings, ports)
    while True:
        n = _consolidate_batch(
            engine=engine, ports=ports, settings=settings, scope=scope, scope_key=scope_key,
            extractor=extractor, task_id=task_id, worker=worker, limit=max_events,
            report=report,
        )
        if n < max_events:
            break
    with session_scope(engine) as session:
        repo.reset_scope_state(session, scope_key=scope_key, now=ports.clock())
    return report


def _consolidate_batch(
    *,
    engine: Engine,
    ports: Ports,
    settings: Settings,
    scope: Scope,
    scope_key: str,
    extractor: Extractor,
    task_id: str,
    worker: str,
    limit: int,
    report: ConsolidationReport,
) -> int:
    now = ports.clock()
    with report.stage("load"), Session(engine) as session:
        rows = repo.pending_events(session, scope_key=scope_key, limit=limit)
        if not rows:
            return 0
        versions = repo.scope_memories(session, scope_key=scope_key)
        known = entity_store.load_known(session, scope_key=scope_key)
        # What the service may have shown this scope: its own memories, every version (an
        # agent echoes what it was given, which may have been replaced since), and those of
        # the broader scopes its searches and contexts see.
        shown = Output.of_memories([*versions, *repo.memories_in(
            session, scope_keys=[k for k in visible_scope_keys(scope) if k != scope_key])])
    events = [
        EventView(
            event_id=r.event_id,
            scope=Scope(tenant=r.tenant, agent=r.agent, user=r.user, project=r.project,
                        session=r.session),
            kind=r.kind, role=r.role, content=r.content, at=r.at, meta=dict(r.meta),
        )
        for r in rows
    ]
    policy = Policy.from_settings(settings, extractor=extractor.name)
    resolver = Resolver(
        scope_key=scope_key, existing=versions, all_versions=versions, now=now,
        policy=policy.resolve, meaning=Meaning(ports.embedder),
        verdicts=make_verdicts(settings, ports),
    )
    try:
        judged = judge(
            events, extractor=extractor, resolver=resolver, policy=policy, shown=shown,
            event_sessions={e.event_id: e.scope.session for e in events},
            # Sessions behind older episodes are only needed to summarise an ended one.
            older_sessions=lambda r: _provenance_sessions(engine, scope.tenant, r),
            stage=report.stage,
        )
    except ExtractionError as exc:
        _audit_failure(engine, scope, scope_key, events, exc, extractor.name, task_id, worker,
                       reason="extraction refused")
        raise
    extraction, comp = judged.extraction, judged.compression
    plan = resolver.plan
    before = {m.id: m for m in versions}
    # A row whose statement a forget request cut ("…; the context turn" without that turn)
    # is read again, by the entity stage as by the index: the names it lost go with it.
    restate = [m for m in plan.changed.values()
               if m.id in before and before[m.id].statement != m.statement]
    with report.stage("entities"):
        graph = entity_graph.build(known=known, new=[*plan.new.values(), *restate],
                                   retired=plan.changed.values(), deleted=plan.deleted, now=now)
    try:
        with report.stage("persist"), session_scope(engine) as session:
            _persist_checked(
                session, plan, ports=ports, scope_key=scope_key, now=now,
                ctx=AuditContext(
                    tenant=scope.tenant, task_id=task_id, worker=worker,
                    extractor=extraction.extractor, model=extraction.model,
                    llm_calls=extraction.llm_calls, llm_tokens=extraction.llm_tokens,
                ),
                consumed_events=[e.event_id for e in events], graph=graph,
            )
    except LeaseLostError as exc:
        _audit_failure(engine, scope, scope_key, events, exc, extractor.name, task_id, worker,
                       reason="rolled back, the lease was lost before the commit")
        raise
    with report.stage("index"):
        apply_to_index(
            engine=engine, index=ports.index, embedder=ports.embedder,
            upsert=[*plan.new.values(), *restate],
            payload_only=[m for m in plan.changed.values() if m not in restate],
            delete=list(plan.deleted),
        )
    if plan.deleted and ports.hot is not None:
        # A forget request reaches the Redis side too: retrieval hits naming what it erased.
        ports.hot.erase_hits(set(plan.deleted))
    if comp.archive_after_index:
        with report.stage("archive"):
            _archive_compressed(engine, ports, comp.archive_after_index, now, task_id, worker)
    report.events += len(events)
    report.memories_written += len(plan.new)
    report.llm_calls += extraction.llm_calls
    report.llm_tokens += extraction.llm_tokens
    if judged.echo:
        report.echo_chars += sum(judged.echo.values())
        report.echo_events += len(judged.echo)
    for op, n in plan.counts().items():
        report.ops[op] = report.ops.get(op, 0) + n
    return len(events)


def _persist_checked(
    session: Session,
    plan: Plan,
    *,
    ports: Ports,
    scope_key: str,
    now: datetime,
    ctx: AuditContext,
    consumed_events: list[str],
    graph: entity_graph.GraphDelta | None = None,
) -> None:
    persist(session, plan, ctx=ctx, consumed_events=consumed_events, now=now, graph=graph)
    # Last step before the commit: a run that lost its lease must not write beside the
    # lease's next holder, which is consolidating the same pending events.
    if ports.lease is not None and not ports.lease.confirm():
        raise LeaseLostError(f"the consolidation lease of {scope_key!r} was lost before commit")


def _provenance_sessions(engine: Engine, tenant: str, resolver: Resolver) -> dict[str, str]:
    """Session of every event behind a current episode, to find a session's fragments."""
    ids = {e for m in resolver.current() if m.type == "event" for e in m.provenance}
    with Session(engine) as session:
        rows = repo.events_by_ids(session, tenant=tenant, ids=sorted(ids))
        return {r.event_id: r.session for r in rows}


def _archive_compressed(
    engine: Engine,
    ports: Ports,
    groups: dict[str, list[str]],
    now: Any,
    task_id: str,
    worker: str,
) -> None:
    """Originals are archived only once their summary is searchable (indexed)."""
    with session_scope(engine) as session:
        summaries = repo.memories_by_ids(session, ids=groups)
        for sid, members in groups.items():
            summary = summaries.get(sid)
            if summary is None or summary.index_state != "indexed":
                continue
            rows = repo.memories_by_ids(session, ids=members)
            for mem in rows.values():
                # Through the one versioning rule; a fragment's words live on in the
                # summary, which is no new version of any one fragment (by=None).
                session.add(versions.archive(mem, by=None, now=now))
            entity_store.follow_memories(session, memories=list(rows.values()), now=now)
            session.add(
                Audit(**repo.audit_row(
                    at=now, op="ARCHIVE", tenant=summary.tenant, scope_key=summary.scope_key,
                    before=sorted(rows), after=[sid],
                    reason="compressed into a summary", task_id=task_id, worker=worker,
                ))
            )
            for mem in rows.values():
                ports.index.set_payload([mem.id], payload_for(mem))


def _audit_failure(
    engine: Engine,
    scope: Scope,
    scope_key: str,
    events: list[EventView],
    exc: Exception,
    extractor: str,
    task_id: str,
    worker: str,
    *,
    reason: str,
) -> None:
    with session_scope(engine) as session:
        session.add(
            Audit(**repo.audit_row(
                op="ERROR", tenant=scope.tenant, scope_key=scope_key,
                reason=f"{reason}: {type(exc).__name__}: {str(exc)[:300]}",
                task_id=task_id, worker=worker,
                extractor=extractor, input_event_ids=[e.event_id for e in events],
            ))
        )

