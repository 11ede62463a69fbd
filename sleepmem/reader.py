"""The read path: validate a search, run it in-process, record the hits in Redis."""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from datetime import datetime
from functools import partial
from typing import Any

from pydantic import ValidationError as PydanticValidationError
from sqlmodel import Session

from sleepmem.core.errors import NO_MEMORY, NotFoundError, ValidationError
from sleepmem.core.metrics import SEARCH_SECONDS
from sleepmem.models import Memory, Scope, SearchRequest, SearchResult
from sleepmem.pipelines.read import found
from sleepmem.pipelines.read.cards import hit_ids
from sleepmem.pipelines.read.entities import entity_route
from sleepmem.pipelines.read.found import QueryExplanation
from sleepmem.pipelines.read.rank import RankWeights
from sleepmem.pipelines.read.retrieve import RouteFn, SearchTrace, search
from sleepmem.resources import Resources


def rank_weights(resources: Resources) -> RankWeights:
    s = resources.settings
    return RankWeights(
        relevance=s.w_relevance,
        recency=s.w_recency,
        importance=s.w_importance,
        confidence=s.w_confidence,
        recency_half_life_s=s.recency_half_life_s,
        candidates=s.candidates,
        passage_events=s.passage_events,
    )


def build_request(
    query: Any,
    *,
    scope: Scope | Mapping[str, Any],
    k: Any = 5,
    types: Sequence[str] | None = None,
    as_of: datetime | str | None = None,
    max_tokens: int | None = None,
    with_provenance: bool = False,
    format: str = "cards",
) -> SearchRequest:
    """A SearchRequest, or ValidationError naming the first bad field and its rule."""
    try:
        return SearchRequest.model_validate(
            {
                "query": query,
                "scope": scope if isinstance(scope, Scope) else dict(scope),
                "k": k,
                "types": list(types) if types is not None else None,
                "as_of": as_of,
                "max_tokens": max_tokens,
                "with_provenance": with_provenance,
                "format": format,
            }
        )
    except PydanticValidationError as exc:
        err = exc.errors()[0]
        field = ".".join(str(p) for p in err["loc"]) or "request"
        raise ValidationError(field, str(err["msg"])) from None


def explain_query(
    resources: Resources, *, memory_id: str, query: Any, k: int = 5, format: str = "cards"
) -> QueryExplanation:
    """How a search for ``query`` (k memories in ``format``) from the memory's own scope
    finds the memory: the same search an agent runs (routes, fusion, rerank), traced, with
    no hit recorded. ValidationError for a bad query, NotFoundError for an unknown memory."""
    with Session(resources.engine) as session:
        memory = session.get(Memory, memory_id)
    if memory is None:
        raise NotFoundError(NO_MEMORY)
    scope = Scope.parse_key(memory.scope_key)
    request = build_request(query, scope=scope, k=k, format=format)
    _result, trace, now = Reader(resources).trace(request)
    return found.explain_query(trace, memory, query=request.query, scope_key=scope.key, k=k,
                               weights=rank_weights(resources), now=now)


class Reader:
    """``routes``: extra recall routes by name, fused with the built-in dense, lexical,
    time and part routes and the entity route (memories of the entities the query names,
    and their one-hop neighbours)."""

    def __init__(
        self, resources: Resources, *, routes: Mapping[str, RouteFn] | None = None
    ) -> None:
        self.resources = resources
        self.routes = dict(routes or {})

    def search(self, request: SearchRequest) -> SearchResult:
        started = time.perf_counter()
        res = self.resources
        # Read before any memory is: a hit is written only if no erasure began since.
        epoch = res.hits.epoch()
        now, result = self._run(request, None)
        # Every returned card counts as a hit (docs/semantics.md rule 6), written after the answer
        # and applied later by refresh.
        res.hits.record(hit_ids(result), at=now, epoch=epoch)
        SEARCH_SECONDS.observe(time.perf_counter() - started)
        return result

    def trace(self, request: SearchRequest) -> tuple[SearchResult, SearchTrace, datetime]:
        """The same search, with what it saw; records no hits (``explain`` is no retrieval)."""
        trace = SearchTrace()
        now, result = self._run(request, trace)
        return result, trace, now

    def _run(
        self, request: SearchRequest, trace: SearchTrace | None
    ) -> tuple[datetime, SearchResult]:
        res = self.resources
        ports = res.ports()
        now = ports.clock()
        # The route judges expiry at the search's time, which a controlled clock may set.
        routes: dict[str, RouteFn] = {"entity": partial(entity_route, now=now), **self.routes}
        result = search(engine=res.engine, ports=ports, request=request,
                        weights=rank_weights(res), extra=routes, rewriter=res.rewriter,
                        trace=trace)
        return now, result
