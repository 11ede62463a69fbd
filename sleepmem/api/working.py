"""Working memory over HTTP: session checkpoints, eviction, session end, per-turn context.

| route | body / query | answer |
|---|---|---|
| ``PUT /v1/checkpoints`` | :class:`CheckpointPut` | 200 :class:`Checkpoint`; 409 stale base |
| ``GET /v1/checkpoints?scope=KEY`` | scope key with a session | 200 :class:`Checkpoint`; 404 |
| ``GET /v1/checkpoints/history?scope=KEY&limit=N`` | | 200 :class:`CheckpointHistory` |
| ``POST /v1/sessions/evict`` | :class:`EvictRequest` | 202 :class:`EventsAccepted` |
| ``POST /v1/sessions/end`` | :class:`EndSessionRequest` | 202 :class:`EventsAccepted` |
| ``POST /v1/context`` | :class:`ContextRequest` | 200 :class:`ContextResult` |

A scope key is ``t=TENANT/a=AGENT/u=USER/p=PROJECT/s=SESSION`` (levels may be empty).
Checkpoint reads and writes are one Redis call each.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Coroutine
from typing import Any

from fastapi import APIRouter, Query, Request, Response
from fastapi.exceptions import RequestValidationError
from fastapi.routing import APIRoute
from starlette.concurrency import run_in_threadpool

from sleepmem.adapters.redis.checkpoints import AsyncCheckpointStore
from sleepmem.api.auth import CallerTenant
from sleepmem.api.errors import request_problems
from sleepmem.api.freshness import wait_fresh
from sleepmem.api.state import api_state
from sleepmem.context import ContextBuilder
from sleepmem.core.errors import ForbiddenError, ValidationError
from sleepmem.core.keys import scope_digest
from sleepmem.core.logs import get_logger
from sleepmem.freshness import checked_position
from sleepmem.models import Scope
from sleepmem.models.working import (
    Checkpoint,
    CheckpointHistory,
    CheckpointPut,
    ContextRequest,
    ContextResult,
    EndSessionRequest,
    EventsAccepted,
    EvictRequest,
)
from sleepmem.working import WorkingMemory, session_scope


class _Route(APIRoute):
    """Body errors answer like every sleepmem error: 422 ``{"error": {field, message}}``."""

    def get_route_handler(self) -> Callable[[Request], Coroutine[Any, Any, Response]]:
        handler = super().get_route_handler()

        async def run(request: Request) -> Response:
            try:
                return await handler(request)
            except RequestValidationError as exc:
                problems = request_problems(exc) or [{"field": "body",
                                                      "message": "invalid request"}]
                raise ValidationError(problems[0]["field"], problems[0]["message"]) from None

        return run


log = get_logger("sleepmem.api.working")
router = APIRouter(prefix="/v1", tags=["working memory"], route_class=_Route)

_ERROR = {
    "type": "object",
    "properties": {
        "error": {
            "type": "object",
            "properties": {
                "field": {"type": "string"},
                "message": {"type": "string"},
                "current_version": {"type": "integer"},
            },
        }
    },
}


def _err(description: str) -> dict[str, Any]:
    return {"description": description, "content": {"application/json": {"schema": _ERROR}}}


_COMMON: dict[int | str, dict[str, Any]] = {
    401: _err("No or invalid API key"),
    403: _err("The key belongs to another tenant"),
    422: _err("Invalid request; the field and its rule are named"),
}


def _working(request: Request) -> WorkingMemory:
    # One per app, built on first use: it holds the registered scripts.
    wm: WorkingMemory | None = getattr(request.app.state, "working", None)
    if wm is None:
        wm = request.app.state.working = WorkingMemory(request.app.state.resources)
    return wm


def _async_store(request: Request) -> AsyncCheckpointStore:
    # The request path awaits Redis on the loop's own client: no thread hop per request.
    store: AsyncCheckpointStore | None = getattr(request.app.state, "checkpoints", None)
    if store is None:
        state = api_state(request)
        store = request.app.state.checkpoints = AsyncCheckpointStore(
            state.redis, state.keys, history=state.resources.settings.checkpoint_history
        )
    return store


def _own(tenant: str | None, scope_tenant: str) -> None:
    if tenant is not None and scope_tenant != tenant:
        raise ForbiddenError(f"scope.tenant: this API key may only use tenant {tenant!r}")


def _scope_param(scope: str, tenant: str | None) -> Scope:
    parsed = Scope.parse_key(scope, canonical=False)
    _own(tenant, parsed.tenant)
    return parsed


@router.put(
    "/checkpoints",
    response_model=Checkpoint,
    summary="Write the next version of a session's checkpoint",
    description=(
        "Writes version base_version + 1 if and only if the current version is base_version "
        "(0 creates the checkpoint). A stale base_version is refused with 409 and the current "
        "version in error.current_version; nothing is merged. Secrets in the state are "
        "redacted before it is stored. The state is limited to SLEEPMEM_CHECKPOINT_MAX_BYTES "
        "of JSON (422 when over)."
    ),
    responses={**_COMMON, 409: _err("Stale base_version, or the session has ended")},
)
async def put_checkpoint(body: CheckpointPut, request: Request, tenant: CallerTenant) -> Response:
    started = time.perf_counter()
    _own(tenant, body.scope.tenant)
    wm = _working(request)
    prepared = wm.prepare(body.scope, body.state, base_version=body.base_version)
    outcome = await _async_store(request).put(
        prepared.digest, base=prepared.base, doc=prepared.doc, at=prepared.at
    )
    if not outcome.written:
        # Stale, ended, or lost from Redis (re-seeded from SQL): the rare path, in a thread.
        await run_in_threadpool(wm.commit, prepared, outcome)
    log.info("checkpoint.put", tenant=prepared.where.tenant, scope=prepared.digest,
             version=prepared.base + 1, bytes=len(prepared.doc),
             ms=round((time.perf_counter() - started) * 1000, 3))
    return Response(prepared.doc, media_type="application/json")


@router.get(
    "/checkpoints",
    response_model=Checkpoint,
    summary="The current version of a session's checkpoint",
    responses={**_COMMON, 404: _err("The session has no checkpoint")},
)
async def get_checkpoint(
    request: Request,
    tenant: CallerTenant,
    scope: str = Query(description="scope key with a session: 't=…/a=…/u=…/p=…/s=SESSION'"),
) -> Response:
    where = session_scope(_scope_param(scope, tenant))
    stored = await _async_store(request).get(scope_digest(where.key))
    if stored is not None and stored.ended is None:
        return Response(stored.doc, media_type="application/json")
    wm = _working(request)
    return Response(await run_in_threadpool(wm.raw, where), media_type="application/json")


@router.get(
    "/checkpoints/history",
    response_model=CheckpointHistory,
    summary="Earlier versions of a session's checkpoint, newest first",
    responses={**_COMMON, 404: _err("The session has no checkpoint")},
)
async def checkpoint_history(
    request: Request,
    tenant: CallerTenant,
    scope: str = Query(description="scope key with a session"),
    limit: int = Query(20, ge=1, le=1000),
) -> CheckpointHistory:
    where = _scope_param(scope, tenant)
    wm = _working(request)
    return await run_in_threadpool(lambda: wm.history(where, limit=limit))


@router.post(
    "/sessions/evict",
    status_code=202,
    response_model=EventsAccepted,
    summary="Hand context dropped from the prompt to sleep-time consolidation",
    description=(
        "Each message becomes a message event (meta.evicted = true) in the event log. Give "
        "a message the event_id it was emitted with, if it was: the log keeps one per id."
    ),
    responses=_COMMON,
)
async def evict(body: EvictRequest, request: Request, tenant: CallerTenant) -> EventsAccepted:
    _own(tenant, body.scope.tenant)
    wm = _working(request)
    return await run_in_threadpool(wm.evict, body)


@router.post(
    "/sessions/end",
    status_code=202,
    response_model=EventsAccepted,
    summary="End a session: freeze its checkpoint and fold it into long-term memory",
    description=(
        "Freezes the checkpoint (later writes get 409) and appends, to the event log, a "
        "summary of the task, each verified fact (as trusted tool output) and a session_end "
        "event, all carrying meta.checkpoint = {session, version}. Consolidation runs soon "
        "after. Ending twice appends nothing new. The checkpoint is kept "
        "SLEEPMEM_CHECKPOINT_KEEP_S, then archived, then deleted."
    ),
    responses=_COMMON,
)
async def end_session(
    body: EndSessionRequest, request: Request, tenant: CallerTenant
) -> EventsAccepted:
    _own(tenant, body.scope.tenant)
    wm = _working(request)
    return await run_in_threadpool(wm.end_session, body)


@router.post(
    "/context",
    response_model=ContextResult,
    summary="What to put in the prompt this turn: a stable prefix and a dynamic part",
    description=(
        "prefix: identity, standing preferences and active procedures, rendered in a fixed "
        "order and format: byte-identical from turn to turn until one of them changes (put "
        "it first in the prompt so the model's context cache hits). dynamic: the session's "
        "checkpoint (when scope.session is set), open conflict sets and the memories most "
        "relevant to the query. Both together stay within budget_tokens (cl100k). Every "
        "item carries its memory id. Returned memories count as retrieval hits."
    ),
    responses=_COMMON,
)
async def context(body: ContextRequest, request: Request, tenant: CallerTenant) -> ContextResult:
    _own(tenant, body.scope.tenant)
    builder: ContextBuilder | None = getattr(request.app.state, "context_builder", None)
    if builder is None:
        builder = request.app.state.context_builder = ContextBuilder(
            request.app.state.resources, working=_working(request)
        )
    if body.min_position is None:
        return await run_in_threadpool(builder.build, body)
    state = await wait_fresh(request, body.scope, checked_position(
        body.min_position, field="min_position"), body.wait_s)
    result = await run_in_threadpool(builder.build, body)
    return result.model_copy(update={"fresh": state.done, "reached": state.reached})
