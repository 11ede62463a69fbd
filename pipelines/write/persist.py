"""Persist a plan in one SQL transaction: memory versions, erasures, audit rows, events."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from sqlmodel import Session

from sleepmem.models import Audit, IndexState
from sleepmem.pipelines import store as repo
from sleepmem.pipelines.entities import store as entity_store
from sleepmem.pipelines.entities.graph import GraphDelta
from sleepmem.pipelines.write.resolve import Plan
from sleepmem.pipelines.write.versions import audit_values


@dataclass(frozen=True, slots=True)
class AuditContext:
    tenant: str
    task_id: str = ""
    worker: str = ""
    extractor: str = ""
    model: str = ""
    llm_calls: int = 0
    llm_tokens: int = 0


def persist(
    session: Session,
    plan: Plan,
    *,
    ctx: AuditContext,
    consumed_events: list[str],
    now: datetime,
    graph: GraphDelta | None = None,
) -> None:
    """Everything or nothing: the caller's session commits once, after this returns.

    ``graph`` (the entity stage's rows for this plan) is written in the same transaction,
    so an entity or relation never outlives, or predates, the memory it came from."""
    for mem in plan.new.values():
        mem.index_state = IndexState.pending.value
        session.add(mem)
    for mem in plan.changed.values():
        mem.index_state = IndexState.pending.value
        session.merge(mem)
    session.flush()
    repo.delete_memories(session, ids=list(plan.deleted))
    if graph is not None:
        entity_store.write(session, delta=graph, now=now)
    repo.delete_events(session, tenant=ctx.tenant, ids=sorted(plan.deleted_events))
    first = True
    for draft in plan.audits:
        session.add(
            Audit(**audit_values(
                draft,
                at=now,
                tenant=ctx.tenant,
                scope_key=plan.scope_key,
                task_id=ctx.task_id,
                worker=ctx.worker,
                extractor=ctx.extractor,
                model=ctx.model,
                events=[e for e in draft.events if e not in plan.deleted_events]
                if draft.op.value != "DELETE"
                else draft.events,
                # The batch's LLM usage is counted once, on its first audit row.
                llm_calls=ctx.llm_calls if first else 0,
                llm_tokens=ctx.llm_tokens if first else 0,
            ))
        )
        first = False
    remaining = [e for e in consumed_events if e not in plan.deleted_events]
    repo.mark_consolidated(session, tenant=ctx.tenant, event_ids=remaining, now=now)
