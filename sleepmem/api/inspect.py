"""Read-only views for the memory inspector (``/ui``): a scope's memories with their
status, importance, expiry and conflict sets, and its jobs. Same API keys as ``/v1``.

``GET /v1/inspect/memories`` lists every version row of an owner scope (tenant, agent,
user, project; all its sessions), newest first, filterable by status and type;
``GET /v1/inspect/jobs`` lists the scope's operator jobs.
"""

from __future__ import annotations

from datetime import datetime

from fastapi import APIRouter, Query, Request
from pydantic import BaseModel
from sqlmodel import Session, col, select
from starlette.concurrency import run_in_threadpool

from sleepmem.api.auth import CallerTenant
from sleepmem.api.jobs import job_view
from sleepmem.core.errors import ForbiddenError
from sleepmem.models import Job, Memory, Scope
from sleepmem.models.views import JobView
from sleepmem.resources import Resources

router = APIRouter(prefix="/v1/inspect", tags=["inspector"])
MAX_ROWS = 500


class MemoryRow(BaseModel):
    id: str
    lineage: str
    scope_key: str
    session: str
    type: str
    subject: str
    attribute: str
    statement: str
    status: str
    trust: str
    confidence: float
    importance: float
    version: int
    mention_count: int
    access_count: int
    recorded_at: datetime
    expires_at: datetime | None
    conflict_set: str | None
    pinned: bool


class MemoryList(BaseModel):
    scope_key: str
    memories: list[MemoryRow]
    conflicts: dict[str, list[str]]  # conflict set -> ids of its pending memories


def _owner(tenant: str, agent: str, user: str, project: str, caller: str | None) -> Scope:
    scope = Scope.parse_levels(tenant=tenant, agent=agent, user=user, project=project)
    if caller is not None and scope.tenant != caller:
        raise ForbiddenError(f"tenant: this API key may only read tenant {caller!r}")
    return scope


def _memories(res: Resources, scope: Scope, status: str | None, kind: str | None,
              limit: int) -> MemoryList:
    query = select(Memory).where(
        col(Memory.tenant) == scope.tenant, col(Memory.agent) == scope.agent,
        col(Memory.user) == scope.user, col(Memory.project) == scope.project,
    )
    if status:
        query = query.where(col(Memory.status) == status)
    if kind:
        query = query.where(col(Memory.type) == kind)
    query = query.order_by(col(Memory.recorded_at).desc(), col(Memory.id)).limit(limit)
    with Session(res.engine) as session:
        rows = [MemoryRow.model_validate(m, from_attributes=True)
                for m in session.exec(query)]
    conflicts: dict[str, list[str]] = {}
    for row in rows:
        if row.conflict_set and row.status == "pending_confirmation":
            conflicts.setdefault(row.conflict_set, []).append(row.id)
    return MemoryList(scope_key=scope.key, memories=rows, conflicts=conflicts)


def _jobs(res: Resources, scope: Scope, limit: int) -> list[JobView]:
    query = (
        select(Job).where(col(Job.tenant) == scope.tenant, col(Job.scope_key) == scope.key)
        .order_by(col(Job.created_at).desc()).limit(limit)
    )
    with Session(res.engine) as session:
        return [job_view(job) for job in session.exec(query)]


@router.get("/memories", response_model=MemoryList,
            summary="A scope's memories (all versions, all statuses) and its conflict sets")
async def list_memories(
    request: Request,
    caller: CallerTenant,
    tenant: str = Query(),
    agent: str = Query(default=""),
    user: str = Query(default=""),
    project: str = Query(default=""),
    status: str | None = Query(default=None, description="only this status"),
    type: str | None = Query(default=None, description="only this memory type"),
    limit: int = Query(default=200, ge=1, le=MAX_ROWS),
) -> MemoryList:
    scope = _owner(tenant, agent, user, project, caller)
    res: Resources = request.app.state.resources
    return await run_in_threadpool(_memories, res, scope, status, type, limit)


@router.get("/jobs", response_model=list[JobView], summary="A scope's operator jobs, newest first")
async def list_jobs(
    request: Request,
    caller: CallerTenant,
    tenant: str = Query(),
    agent: str = Query(default=""),
    user: str = Query(default=""),
    project: str = Query(default=""),
    limit: int = Query(default=50, ge=1, le=MAX_ROWS),
) -> list[JobView]:
    scope = _owner(tenant, agent, user, project, caller)
    res: Resources = request.app.state.resources
    return await run_in_threadpool(_jobs, res, scope, limit)
