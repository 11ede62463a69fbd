"""consolidate(scope): the sleep-time pipeline over one scope's pending events.

extract → gate → resolve (dedup + judgement) → compress → persist (one SQL transaction)
→ index → archive compressed originals. A failure before the commit leaves every event
pending and nothing half-applied; a failure after it leaves rows ``index_state=pending``
for the reconciler.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from sqlalchemy.engine import Engine
from sqlmodel import Session

from models import Audit, MemoryStatus, Scope
from pipelines.compress import CompressPolicy, compress
from pipelines.gate import GatePolicy, gate
from pipelines.index import apply_to_index, payload_for
from pipelines.persist import AuditContext, persist
from pipelines.ports import Ports
from pipelines.resolve import ResolvePolicy, Resolver
from pipelines.types import EventView, Extractor
from sleepmem import PIPELINE_VERSION
from sleepmem import repository as repo
from sleepmem.db import session_scope
from sleepmem.errors import ExtractionError, ValidationError
from sleepmem.settings import Settings


@dataclass(slots=True)
class ConsolidationReport:
    scope_key: str
    events: int = 0
    memories_written: int = 0
    ops: dict[str, int] = field(default_factory=dict)
    stage_seconds: dict[str, float] = field(default_factory=dict)
    llm_calls: int = 0
    llm_tokens: int = 0
    extra: dict[str, Any] = field(default_factory=dict)

    @contextmanager
    def stage(self, name: str) -> Iterator[None]:
        t0 = time.perf_counter()
        try:
            yield
        finally:
            self.stage_seconds[name] = self.stage_seconds.get(name, 0.0) + (
                time.perf_counter() - t0
            )


def make_extractor(settings: Settings, ports: Ports) -> Extractor:
    override = ports.extras.get("extractor")
    if override is not None:
        return override  # type: ignore[no-any-return]
    if settings.extractor == "llm":
        from pipelines.extract_llm import LLMExtractor

        if ports.chat is None:
            raise ExtractionError("extractor=llm needs SLEEPMEM_LLM_BASE_URL and a model")
        return LLMExtractor(ports.chat, batch_events=settings.llm_batch_events)
    from pipelines.extract_rules import RulesExtractor

    return RulesExtractor()


def consolidate_scope(
    *,
    engine: Engine,
    ports: Ports,
    settings: Settings,
    scope_key: str,
    task_id: str = "",
    worker: str = "",
    max_events: int = 5000,
) -> ConsolidationReport:
    try:
        scope = Scope.from_key(scope_key)
    except (ValueError, TypeError) as exc:
        raise ValidationError("scope_key", f"not a scope key ({exc})") from None
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
    events = [
        EventView(
            event_id=r.event_id,
            scope=Scope(tenant=r.tenant, agent=r.agent, user=r.user, project=r.project,
                        session=r.session),
            kind=r.kind, role=r.role, content=r.content, at=r.at, meta=dict(r.meta),
        )
        for r in rows
    ]
    with report.stage("extract"):
        try:
            extraction = extractor.extract(events)
        except ExtractionError as exc:
            _audit_failure(engine, scope, scope_key, events, exc, extractor.name, task_id, worker)
            raise
    with report.stage("gate"):
        kept, rejected = gate(
            extraction.candidates,
            policy=GatePolicy(min_inference_confidence=settings.min_inference_confidence),
        )
    with report.stage("resolve"):
        resolver = Resolver(
            scope_key=scope_key,
            existing=versions,
            all_versions=versions,
            now=now,
            policy=ResolvePolicy(
                ttl=settings.ttl,
                session_ttl=_seconds(settings.session_ttl_s),
                chitchat_ttl=_seconds(settings.chitchat_ttl_s),
                procedure_min_samples=settings.procedure_min_samples,
                procedure_min_success_rate=settings.procedure_min_success_rate,
                extractor=extraction.extractor,
            ),
        )
        for rej in rejected:
            resolver.reject(rej)
        for cand in sorted(kept, key=lambda c: c.valid_from):
            resolver.apply(cand)
    with report.stage("compress"):
        ended = {e.scope.session for e in events if e.kind == "session_end"}
        comp = compress(
            resolver,
            policy=CompressPolicy(),
            ended_sessions=ended,
            # Sessions behind older episodes are only needed to summarise an ended one.
            event_sessions={e.event_id: e.scope.session for e in events}
            | (_provenance_sessions(engine, resolver) if ended else {}),
        )
    plan = resolver.plan
    before = {m.id: m for m in versions}
    with report.stage("persist"), session_scope(engine) as session:
        persist(
            session,
            plan,
            ctx=AuditContext(
                tenant=scope.tenant, task_id=task_id, worker=worker,
                extractor=extraction.extractor, model=extraction.model,
                llm_calls=extraction.llm_calls, llm_tokens=extraction.llm_tokens,
            ),
            consumed_events=[e.event_id for e in events],
            now=now,
        )
    with report.stage("index"):
        restate = [m for m in plan.changed.values()
                   if m.id in before and before[m.id].statement != m.statement]
        apply_to_index(
            engine=engine, index=ports.index, embedder=ports.embedder,
            upsert=[*plan.new.values(), *restate],
            payload_only=[m for m in plan.changed.values() if m not in restate],
            delete=list(plan.deleted),
        )
    if comp.archive_after_index:
        with report.stage("archive"):
            _archive_compressed(engine, ports, comp.archive_after_index, now, task_id, worker)
    report.events += len(events)
    report.memories_written += len(plan.new)
    report.llm_calls += extraction.llm_calls
    report.llm_tokens += extraction.llm_tokens
    for op, n in plan.counts().items():
        report.ops[op] = report.ops.get(op, 0) + n
    return len(events)


def _provenance_sessions(engine: Engine, resolver: Resolver) -> dict[str, str]:
    """Session of every event behind a current episode, to find a session's fragments."""
    ids = {e for m in resolver.current() if m.type == "event" for e in m.provenance}
    with Session(engine) as session:
        return {r.event_id: r.session for r in repo.events_by_ids(session, ids=sorted(ids))}


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
                mem.status = MemoryStatus.archived.value
                mem.archived_at = now
                session.add(mem)
            session.add(
                Audit(
                    at=now, op="ARCHIVE", tenant=summary.tenant, scope_key=summary.scope_key,
                    memory_ids_before=sorted(rows), memory_ids_after=[sid],
                    reason="compressed into a summary", task_id=task_id, worker=worker,
                    pipeline_version=PIPELINE_VERSION,
                )
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
) -> None:
    with session_scope(engine) as session:
        session.add(
            Audit(
                op="ERROR", tenant=scope.tenant, scope_key=scope_key,
                reason=f"extraction refused: {type(exc).__name__}: {str(exc)[:300]}",
                task_id=task_id, worker=worker, pipeline_version=PIPELINE_VERSION,
                extractor=extractor, input_event_ids=[e.event_id for e in events],
            )
        )


def _seconds(s: float) -> Any:
    from datetime import timedelta

    return timedelta(seconds=s)
