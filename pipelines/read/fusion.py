"""Fusing recall routes: each route is a ranked list of hits; fusion gives one relevance.

A route is anything that proposes memories for a query with a score (dense similarity,
lexical BM25, the same searches restricted to a time window, an entity lookup, a part of a
decomposed question). Fusion takes a plain list of routes, so a new route plugs in
without touching the others, and it remembers which routes proposed each memory (cards
say so; ``explain`` shows it).

Scores are min-max normalised per route over its own candidates, then added with the
route's weight: dense cosines of a small embedder live in a narrow band (USE: 0.2-0.6),
lexical BM25 scores are unbounded, so neither raw scale nor rank alone says how much
better the first hit is than the tenth. Min-max keeps that margin; every candidate stays
in, even at zero (the filter already decided it may be seen).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from sleepmem.pipelines.ports import Hit


@dataclass(frozen=True, slots=True)
class Route:
    """One route's proposals: its name (shown on cards), ranked hits and fusion weight."""

    name: str
    hits: Sequence[Hit]
    weight: float


@dataclass(slots=True)
class Fused:
    score: float = 0.0
    routes: list[str] = field(default_factory=list)


def normalised(hits: Sequence[Hit]) -> list[Hit]:
    """Min-max over the list's own scores; a single hit (or all equal) scores 1."""
    if not hits:
        return []
    hi = max(h.score for h in hits)
    lo = min(h.score for h in hits)
    return [Hit(h.id, (h.score - lo) / (hi - lo) if hi > lo else 1.0) for h in hits]


def fuse(routes: Sequence[Route]) -> dict[str, Fused]:
    """Weighted sum of each route's normalised scores; names in the order routes came."""
    out: dict[str, Fused] = {}
    for route in routes:
        fuse_into(out, route)
    return out


def fuse_into(out: dict[str, Fused], route: Route) -> None:
    """Add one route to what is already fused (a route that needs the first fusion's result,
    such as the neighbours of its best hits, joins afterwards)."""
    for h in normalised(route.hits):
        got = out.setdefault(h.id, Fused())
        got.score += route.weight * h.score
        if route.name not in got.routes:
            got.routes.append(route.name)


def mix(parts: Sequence[tuple[Sequence[Hit], float]]) -> list[Hit]:
    """Several hit lists as one ranked list (weighted min-max, best first): how one
    route made of two searches (dense and lexical within a window) reports."""
    scores: dict[str, float] = {}
    for hits, weight in parts:
        for h in normalised(hits):
            scores[h.id] = scores.get(h.id, 0.0) + weight * h.score
    return [Hit(i, s) for i, s in sorted(scores.items(), key=lambda kv: (-kv[1], kv[0]))]
