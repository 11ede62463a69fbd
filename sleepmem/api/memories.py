"""Memories over HTTP: list, get, edit, pin, feedback, history, explain, and erasure
(``DELETE /v1/memories?scope=…``, ``DELETE /v1/memories/{id}``).

Routes only translate HTTP: the use-cases live in sleepmem.services. A memory of another
tenant answers 404, like one that does not exist.

Erasure runs in the request and answers with the deletion receipt: what was removed from
which store, counts and a content hash, never content.
"""

from __future__ import annotations

from datetime import UTC, datetime

from fastapi import APIRouter, Query, Request
from starlette.concurrency import run_in_threadpool

from sleepmem import services
from sleepmem.adapters.redis.hits import unapplied_hits
from sleepmem.api.auth import CallerTenant
from sleepmem.api.errors import ERROR_RESPONSES
from sleepmem.core.errors import NO_MEMORY, ForbiddenError, NotFoundError, ValidationError
from sleepmem.models import Scope
from sleepmem.models.views import FeedbackBody, MemoryEdit, MemoryPage, MemoryView
from sleepmem.pipelines.lifecycle.erase import DeletionReceipt
from sleepmem.pipelines.lifecycle.explain import Explanation, explain
from sleepmem.reader import explain_query
from sleepmem.resources import Resources
from sleepmem.services import create_erase_job, run_erasure

router = APIRouter(prefix="/v1/memories", tags=["memories"], responses=ERROR_RESPONSES)


def _res(request: Request) -> Resources:
    res: Resources = request.app.state.resources
    return res


def owned_scope(scope: str, tenant: str | None, verb: str) -> Scope:
    parsed = Scope.parse_key(scope, canonical=False)
    if tenant is not None and parsed.tenant != tenant:
        raise ForbiddenError(f"scope.tenant: this API key may only {verb} tenant {tenant!r}")
    return parsed


@router.get("", response_model=MemoryPage,
            summary="List a scope's memories (and those of scopes under it), by id")
async def list_memories(
    request: Request,
    tenant: CallerTenant,
    scope: str = Query(description="scope key 't=…/a=…/u=…/p=…/s=' (levels may be left out)"),
    type: list[str] = Query(default=[], description="keep only these memory types"),
    status: list[str] = Query(default=[], description="statuses to list (default: current)"),
    limit: int = Query(default=50, description="page size, 1..500"),
    cursor: str | None = Query(default=None, description="next_cursor of the previous page"),
) -> MemoryPage:
    parsed = owned_scope(scope, tenant, "read")
    return await run_in_threadpool(
        lambda: services.list_memories(_res(request), scope=parsed, types=type,
                                       statuses=status, limit=limit, cursor=cursor)
    )


@router.get("/{memory_id}", response_model=MemoryView, summary="One memory version")
async def get_memory(memory_id: str, request: Request, tenant: CallerTenant) -> MemoryView:
    return await run_in_threadpool(
        lambda: services.get_memory(_res(request), memory_id=memory_id, tenant=tenant)
    )


@router.patch("/{memory_id}", response_model=MemoryView,
              summary="A person's edit: closes this version, appends one with trust 'human'")
async def update_memory(
    memory_id: str, body: MemoryEdit, request: Request, tenant: CallerTenant
) -> MemoryView:
    return await run_in_threadpool(
        lambda: services.update_memory(_res(request), memory_id=memory_id, tenant=tenant,
                                       statement=body.statement, importance=body.importance,
                                       reason=body.reason)
    )


@router.post("/{memory_id}/pin", response_model=MemoryView,
             summary="Pin: never decays, never expires, never swept")
async def pin_memory(memory_id: str, request: Request, tenant: CallerTenant) -> MemoryView:
    return await run_in_threadpool(
        lambda: services.pin_memory(_res(request), memory_id=memory_id, tenant=tenant,
                                    pinned=True)
    )


@router.post("/{memory_id}/unpin", response_model=MemoryView,
             summary="Unpin: decay and expiry apply again, counted from now")
async def unpin_memory(memory_id: str, request: Request, tenant: CallerTenant) -> MemoryView:
    return await run_in_threadpool(
        lambda: services.pin_memory(_res(request), memory_id=memory_id, tenant=tenant,
                                    pinned=False)
    )


@router.post("/{memory_id}/feedback", response_model=MemoryView,
             summary="helpful: importance up; wrong: the memory is invalidated")
async def feedback(
    memory_id: str, body: FeedbackBody, request: Request, tenant: CallerTenant
) -> MemoryView:
    return await run_in_threadpool(
        lambda: services.memory_feedback(_res(request), memory_id=memory_id, tenant=tenant,
                                         verdict=body.verdict, note=body.note)
    )


@router.get("/{memory_id}/history", response_model=list[MemoryView],
            summary="Every version of this memory, oldest first")
async def history(memory_id: str, request: Request, tenant: CallerTenant) -> list[MemoryView]:
    return await run_in_threadpool(
        lambda: services.memory_history(_res(request), memory_id=memory_id, tenant=tenant)
    )



def _explain(res: Resources, memory_id: str) -> Explanation:
    # A search this process just answered may still have its hits queued for Redis; the
    # refresh applies them to SQL later: both count, so a memory just found is "retrieved".
    res.hits.flush(timeout=2.0)
    recent = [datetime.fromtimestamp(at, UTC)
              for at in unapplied_hits(res.redis, res.keys, memory_id)]
    return explain(engine=res.engine, memory_id=memory_id, settings=res.settings,
                   now=res.ports().clock(), recent_hits=recent)


def _erase(res: Resources, *, tenant: str, scope_key: str | None = None,
           memory_id: str | None = None) -> DeletionReceipt:
    job = create_erase_job(res, tenant=tenant, scope_key=scope_key, memory_id=memory_id)
    done = run_erasure(res, job.id, worker="api")
    if done.status != "done":
        raise NotFoundError(done.error or f"nothing erased for job {job.id}")
    return DeletionReceipt.model_validate(done.result)


def _owned_memory(res: Resources, memory_id: str, tenant: str | None) -> Explanation:
    ex = _explain(res, memory_id)
    if tenant is not None and ex.tenant != tenant:
        raise NotFoundError(NO_MEMORY)  # ids of other tenants do not leak
    return ex


@router.delete("", response_model=DeletionReceipt,
               summary="Erase a scope and every scope under it, from every store")
async def erase_scope(
    request: Request,
    tenant: CallerTenant,
    scope: str = Query(description="scope key 't=…/a=…/u=…/p=…/s='"),
) -> DeletionReceipt:
    parsed = owned_scope(scope, tenant, "erase")
    res: Resources = request.app.state.resources
    return await run_in_threadpool(
        lambda: _erase(res, tenant=parsed.tenant, scope_key=parsed.key)
    )


@router.delete("/{memory_id}", response_model=DeletionReceipt,
               summary="Erase one memory: its versions, raw events and vectors")
async def erase_memory(memory_id: str, request: Request, tenant: CallerTenant) -> DeletionReceipt:
    res: Resources = request.app.state.resources

    def run() -> DeletionReceipt:
        owner = _owned_memory(res, memory_id, tenant).tenant
        return _erase(res, tenant=owner, memory_id=memory_id)

    return await run_in_threadpool(run)


@router.get("/{memory_id}/explain", response_model=Explanation,
            summary="Where a memory came from and why it is (not) current; with a query, "
                    "which search routes found it and how it ranked")
async def explain_memory(
    memory_id: str,
    request: Request,
    tenant: CallerTenant,
    query: str | None = Query(default=None, description="also explain how a search for this "
                              "text, from the memory's scope, finds the memory"),
) -> Explanation:
    res: Resources = request.app.state.resources
    if query is not None and not query.strip():
        raise ValidationError("query", "query must contain some text, not only whitespace")

    def run() -> Explanation:
        ex = _owned_memory(res, memory_id, tenant)
        if query is not None:
            ex.query = explain_query(res, memory_id=memory_id, query=query)
        return ex

    return await run_in_threadpool(run)
