"""``POST /v1/flush``: wait until a scope's memory holds every event up to a position.

Also the waiting that ``min_position`` on search and context does before they answer.
"""

from __future__ import annotations

from fastapi import APIRouter, Request
from pydantic import BaseModel, ConfigDict, Field
from starlette.concurrency import run_in_threadpool

from sleepmem.api.auth import CallerTenant
from sleepmem.api.errors import ERROR_RESPONSES
from sleepmem.api.jobs import send_task
from sleepmem.core.errors import ForbiddenError, ValidationError
from sleepmem.freshness import WAIT_MAX_S, checked_position, checked_timeout, wait
from sleepmem.models import Scope
from sleepmem.models.positions import Freshness
from sleepmem.resources import Resources
from sleepmem.tasks import names

router = APIRouter(prefix="/v1", tags=["events"], responses=ERROR_RESPONSES)

DEFAULT_WAIT_S = 10.0


class FlushBody(BaseModel):
    model_config = ConfigDict(extra="forbid")

    scope: dict[str, str] = Field(description="tenant, agent, user, project (session ignored: "
                                              "memories live at the owner's scope)")
    position: str | None = Field(default=None, description=(
        "the stream position an emit answered; default: the newest append, which is at or "
        "after everything the scope appended so far"))
    timeout_s: float = Field(default=DEFAULT_WAIT_S, description=f"0..{WAIT_MAX_S:g}")


def owner_scope(levels: dict[str, str], tenant: str | None, *, field: str = "scope") -> Scope:
    try:
        scope = Scope(**levels)
    except (ValueError, TypeError) as exc:
        raise ValidationError(field, f"not a scope ({exc})") from None
    if tenant is not None and scope.tenant != tenant:
        raise ForbiddenError(f"{field}.tenant: this API key may only use tenant {tenant!r}")
    return scope.owner


async def wait_fresh(request: Request, scope: Scope, position: str | None,
                     timeout_s: float) -> Freshness:
    """Wait (off the event loop) and ask the workers for the consolidation it needs."""
    res: Resources = request.app.state.resources
    return await run_in_threadpool(
        lambda: wait(res, scope_key=scope.owner.key, position=position, timeout_s=timeout_s,
                     send=lambda key: send_task(request, names.CONSOLIDATE, key)))


@router.post("/flush", response_model=Freshness,
             summary="Wait until every event of a scope up to a position is in memory",
             description=(
                 "Asks for the consolidation the scope needs and answers when every event "
                 "of it up to `position` is consolidated and indexed (`done: true`), or when "
                 "`timeout_s` passes (`done: false`, with the position `reached`)."))
async def flush(body: FlushBody, request: Request, tenant: CallerTenant) -> Freshness:
    scope = owner_scope(body.scope, tenant)
    return await wait_fresh(request, scope, checked_position(body.position),
                            checked_timeout(body.timeout_s))
