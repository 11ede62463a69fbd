"""How a search found one memory: the part of ``explain`` that takes a query.

Built from a :class:`~sleepmem.pipelines.read.retrieve.SearchTrace` of the real search (same
routes, same fusion, same rerank), so it cannot drift from what search does: for each
route that ran, whether it proposed the memory, at which rank and with which score; the
fused relevance; and the rerank's terms (relevance, recency, importance, confidence).
"""

from __future__ import annotations

from datetime import datetime
from typing import Literal

from pydantic import BaseModel

from sleepmem.models import Memory
from sleepmem.pipelines.decay import aware
from sleepmem.pipelines.read.fusion import normalised
from sleepmem.pipelines.read.rank import RankWeights, score_parts
from sleepmem.pipelines.read.retrieve import SearchTrace
from sleepmem.pipelines.when import Window


class RouteFinding(BaseModel):
    """One route's view of the memory. ``rank`` is 1-based within the route's own hits;
    ``contribution`` = ``weight`` × ``normalised`` is what the route added to relevance."""

    route: str
    ran: bool = True
    found: bool
    rank: int | None = None
    hits: int
    score: float | None = None
    normalised: float | None = None
    weight: float
    contribution: float = 0.0


class ScoreTerm(BaseModel):
    """One term of the rerank: ``value`` × ``weight`` = ``contribution``."""

    name: str
    value: float
    weight: float
    contribution: float


class TimeFinding(BaseModel):
    """The time the query named and where the memory's ``valid_from`` falls against it:
    ``inside`` the window, ``near`` it (within its margin, at the time route's lower
    weight) or ``outside`` (the time route cannot propose it)."""

    expression: str
    start: datetime
    end: datetime
    near_start: datetime
    near_end: datetime
    memory_valid_from: datetime
    memory_is: Literal["inside", "near", "outside"]


def time_finding(window: Window, valid_from: datetime) -> TimeFinding:
    near_start, near_end = window.widened()
    return TimeFinding(
        expression=window.expression, start=window.start, end=window.end,
        near_start=near_start, near_end=near_end,
        memory_valid_from=aware(valid_from),
        memory_is=window.place(valid_from),
    )


class QueryExplanation(BaseModel):
    query: str
    scope_key: str
    found: bool
    returned: bool
    rank: int | None
    candidates: int
    found_by: list[str]
    routes: list[RouteFinding]
    rewrites: list[str]
    relevance: float | None
    terms: list[ScoreTerm]
    score: float | None
    note: str
    time: TimeFinding | None = None
    # The card whose passage returned this memory, when it came back inside a better
    # episode's passage (sleepmem.pipelines.read.passages) instead of as a card of its own.
    joined_into: str | None = None
    # Returned as its one line, not whole (formats lines and mixed).
    line: bool = False


def explain_query(
    trace: SearchTrace, memory: Memory, *, query: str, scope_key: str, k: int,
    weights: RankWeights, now: datetime,
) -> QueryExplanation:
    """``memory`` as the traced search (from ``scope_key``, for ``k`` memories) saw it."""
    mid = memory.id
    findings: list[RouteFinding] = []
    for route in trace.routes:
        ranked = sorted(route.hits, key=lambda h: -h.score)
        pos = next((i for i, h in enumerate(ranked) if h.id == mid), None)
        norm = next((h.score for h in normalised(route.hits) if h.id == mid), None)
        findings.append(RouteFinding(
            route=route.name, found=pos is not None, hits=len(route.hits),
            weight=route.weight,
            rank=None if pos is None else pos + 1,
            score=None if pos is None else round(ranked[pos].score, 6),
            normalised=None if norm is None else round(norm, 6),
            contribution=0.0 if norm is None else round(route.weight * norm, 6),
        ))
    fused = trace.fused.get(mid)
    into = trace.joined.get(mid)
    key = memory.conflict_set if memory.conflict_set in trace.order else into or mid
    rank = trace.order.index(key) + 1 if key in trace.order else None
    terms: list[ScoreTerm] = []
    if fused is not None and mid in trace.scores:
        terms = [
            ScoreTerm(name=name, value=round(value, 6), weight=weight,
                      contribution=round(value * weight, 6))
            for name, value, weight in score_parts(memory, fused.score, now, weights)
        ]
    # The result's entries come first in the order: a passage reads several memories in
    # one entry, so the result may hold fewer than k entries.
    returned = rank is not None and rank <= trace.returned
    return QueryExplanation(
        query=query, scope_key=scope_key, found=fused is not None,
        returned=returned, rank=rank, candidates=len(trace.order),
        found_by=list(fused.routes) if fused is not None else [],
        routes=findings, rewrites=list(trace.rewrites),
        relevance=None if fused is None else round(fused.score, 6),
        terms=terms,
        score=round(trace.scores[mid], 6) if mid in trace.scores else None,
        note=_note(fused is not None, mid in trace.scores, rank, trace.returned, k, into,
                   mid in trace.lines),
        time=None if trace.window is None else time_finding(trace.window, memory.valid_from),
        joined_into=into,
        line=mid in trace.lines,
    )


def _note(found: bool, visible: bool, rank: int | None, returned: int, k: int,
          into: str | None, line: bool) -> str:
    if not found:
        return "no route proposed this memory for the query"
    if not visible:
        return ("proposed, then dropped: not current, expired, hidden or outside the "
                "search's scope")
    if line:
        inside = ", as its one line"
    else:
        inside = f", inside the passage of memory {into}" if into else ""
    if rank is not None and rank <= returned:
        return f"returned at rank {rank} of {returned} (k {k}){inside}"
    return f"ranked {rank}{inside}, below the {returned} returned for k {k}"


def _at(t: datetime) -> str:
    return f"{t:%Y-%m-%d}" if (t.hour, t.minute, t.second) == (0, 0, 0) else f"{t:%Y-%m-%d %H:%M}"


def found_lines(q: QueryExplanation) -> list[str]:
    """The query part of an explanation as short lines of text (CLI and MCP)."""
    lines = [f"for the query {q.query!r} from {q.scope_key}: {q.note}"]
    if q.rewrites:
        lines.append("rewritten as: " + " | ".join(q.rewrites))
    if q.time is not None:
        t = q.time
        pad = " " * 11
        lines += [f"  time     {t.expression!r}: {_at(t.start)} to {_at(t.end)}",
                  f"{pad}near it: {_at(t.near_start)} to {_at(t.near_end)}",
                  f"{pad}this memory (valid from {_at(t.memory_valid_from)}) is {t.memory_is}"]
    for r in q.routes:
        if r.found:
            lines.append(f"  {r.route:<8} rank {r.rank}/{r.hits}  score {r.score:.4f}  "
                         f"normalised {r.normalised:.3f} × weight {r.weight:g} "
                         f"= {r.contribution:.3f}")
        else:
            lines.append(f"  {r.route:<8} not found ({r.hits} hits)")
    if q.terms:
        terms = " + ".join(f"{t.name} {t.value:.3f}×{t.weight:g}" for t in q.terms)
        lines.append(f"  score {q.score:.4f} = {terms}")
    return lines
