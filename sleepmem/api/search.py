"""``POST /v1/search``: scoped, ranked memory cards. Read-only on SQL; hits go to Redis."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from fastapi import APIRouter, Request
from pydantic import BaseModel, ConfigDict, Field
from starlette.concurrency import run_in_threadpool

from sleepmem.api.auth import CallerTenant
from sleepmem.api.errors import ERROR_RESPONSES
from sleepmem.api.freshness import DEFAULT_WAIT_S, wait_fresh
from sleepmem.core.errors import ForbiddenError
from sleepmem.freshness import WAIT_MAX_S, checked_position, checked_timeout
from sleepmem.models import SearchResult
from sleepmem.reader import Reader, build_request

router = APIRouter(prefix="/v1", tags=["search"], responses=ERROR_RESPONSES)


class SearchBody(BaseModel):
    """Loose on purpose: the reader validates and names the bad field in a 422."""

    model_config = ConfigDict(extra="forbid")

    query: Any = Field(description="what to look for, in any language")
    scope: dict[str, Any] = Field(description="tenant, agent, user, project, session")
    k: Any = Field(default=5, description="how many memories, at most, 1..100")
    types: list[str] | None = Field(default=None, description="memory types to keep")
    as_of: datetime | str | None = Field(default=None, description="answer as of this time")
    max_tokens: int | None = Field(default=None, description="cl100k token budget for the cards")
    with_provenance: bool = False
    format: Any = Field(default="cards", description=(
        "cards: each memory whole; lines: each memory as its one sentence that shares most "
        "words with the query; mixed: the first half of k whole (in at most half of "
        "max_tokens), the rest as lines"))
    min_position: str | None = Field(default=None, description=(
        "answer with every event of the scope up to this stream position (what an emit "
        "answered) in memory: waits up to wait_s, then answers with fresh=false"))
    wait_s: float = Field(default=DEFAULT_WAIT_S, description=f"0..{WAIT_MAX_S:g} seconds")


@router.post("/search", response_model=SearchResult, summary="Search memory in a scope")
async def search(body: SearchBody, request: Request, tenant: CallerTenant) -> SearchResult:
    req = build_request(
        body.query,
        scope=body.scope,
        k=body.k,
        types=body.types,
        as_of=body.as_of,
        max_tokens=body.max_tokens,
        with_provenance=body.with_provenance,
        format=body.format,
    )
    if tenant is not None and req.scope.tenant != tenant:
        raise ForbiddenError(f"scope.tenant: this API key may only read tenant {tenant!r}")
    state = None
    if body.min_position is not None:
        state = await wait_fresh(request, req.scope, checked_position(
            body.min_position, field="min_position"), checked_timeout(body.wait_s, field="wait_s"))
    reader = Reader(request.app.state.resources)
    # The embedded index and the embedder are blocking calls: keep them off the loop.
    result = await run_in_threadpool(reader.search, req)
    if state is not None:
        result = result.model_copy(update={"fresh": state.done, "reached": state.reached})
    return result
