"""Memories over HTTP: erasure (``DELETE /v1/memories?scope=…``, ``DELETE
/v1/memories/{id}``) and ``GET /v1/memories/{id}/explain``.

Erasure runs in the request and answers with the deletion receipt: what was removed from
which store, counts and a content hash, never content.
"""

from __future__ import annotations

from fastapi import APIRouter, Query, Request
from starlette.concurrency import run_in_threadpool

from sleepmem.api.auth import CallerTenant
from sleepmem.core.errors import ForbiddenError, NotFoundError
from sleepmem.models import Scope
from sleepmem.pipelines.lifecycle.erase import DeletionReceipt
from sleepmem.pipelines.lifecycle.explain import Explanation
from sleepmem.resources import Resources

router = APIRouter(prefix="/v1/memories", tags=["memories"])


def _explain(res: Resources, memory_id: str) -> Explanation:
    from sleepmem.pipelines.lifecycle.explain import explain

    return explain(engine=res.engine, memory_id=memory_id, settings=res.settings,
                   now=res.ports().clock())


def _erase(res: Resources, *, tenant: str, scope_key: str | None = None,
           memory_id: str | None = None) -> DeletionReceipt:
    from sleepmem.services import create_erase_job, run_erasure

    job = create_erase_job(res, tenant=tenant, scope_key=scope_key, memory_id=memory_id)
    done = run_erasure(res, job.id, worker="api")
    if done.status != "done":
        raise NotFoundError(done.error or f"nothing erased for job {job.id}")
    return DeletionReceipt.model_validate(done.result)


def _owned_memory(res: Resources, memory_id: str, tenant: str | None) -> Explanation:
    ex = _explain(res, memory_id)
    if tenant is not None and ex.tenant != tenant:
        raise NotFoundError(f"no memory {memory_id}")  # ids of other tenants do not leak
    return ex


@router.delete("", response_model=DeletionReceipt,
               summary="Erase a scope and every scope under it, from every store")
async def erase_scope(
    request: Request,
    tenant: CallerTenant,
    scope: str = Query(description="scope key 't=…/a=…/u=…/p=…/s='"),
) -> DeletionReceipt:
    parsed = Scope.parse_key(scope, canonical=False)
    if tenant is not None and parsed.tenant != tenant:
        raise ForbiddenError(f"scope.tenant: this API key may only erase tenant {tenant!r}")
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
            summary="Where a memory came from and why it is (not) current")
async def explain_memory(memory_id: str, request: Request, tenant: CallerTenant) -> Explanation:
    res: Resources = request.app.state.resources
    return await run_in_threadpool(_owned_memory, res, memory_id, tenant)
