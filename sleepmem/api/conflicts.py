"""Conflict sets over HTTP: ``POST /v1/conflicts/{conflict_set}/resolve`` keeps one side.

Two high-trust statements that disagree wait as a conflict set until a person decides; the
use-case lives in sleepmem.services. Another tenant's set answers 404, like a missing one.
"""

from __future__ import annotations

from fastapi import APIRouter, Request
from starlette.concurrency import run_in_threadpool

from sleepmem import services
from sleepmem.api.auth import CallerTenant
from sleepmem.api.errors import ERROR_RESPONSES
from sleepmem.models.views import ConflictChoice, ConflictResolution
from sleepmem.resources import Resources

router = APIRouter(prefix="/v1/conflicts", tags=["memories"], responses=ERROR_RESPONSES)


@router.post("/{conflict_set}/resolve", response_model=ConflictResolution,
             summary="Keep one side of a conflict set (trust 'human'); the others are "
                     "invalidated and superseded by it")
async def resolve_conflict(
    conflict_set: str, body: ConflictChoice, request: Request, tenant: CallerTenant
) -> ConflictResolution:
    res: Resources = request.app.state.resources
    return await run_in_threadpool(
        lambda: services.resolve_conflict(res, conflict_set=conflict_set, keep=body.keep,
                                          tenant=tenant, reason=body.reason)
    )
