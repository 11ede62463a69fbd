"""Retrieval metrics of the public benchmarks, as their papers define them.

Pure functions over ids, so the arithmetic is pinned by hand-computed tests and shared by
the system under test and its same-run baselines.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Literal


def evidence_recall(found: Iterable[str], evidence: set[str]) -> float:
    """LoCoMo: the fraction of a question's evidence turns among ``found``."""
    if not evidence:
        raise ValueError("a question without evidence has no recall; leave it out")
    return len(evidence & set(found)) / len(evidence)


def recall_all(ranked: Sequence[str], relevant: set[str], k: int) -> float:
    """LongMemEval: 1.0 when every relevant id is in the top ``k``, else 0.0."""
    top = set(ranked[:k])
    return float(all(r in top for r in relevant))


def recall_any(ranked: Sequence[str], relevant: set[str], k: int) -> float:
    top = set(ranked[:k])
    return float(any(r in top for r in relevant))


def dcg(relevances: Sequence[float], k: int) -> float:
    """DCG as LongMemEval's eval_utils computes it: ranks 1 and 2 are both undiscounted.

    rel_1 + sum_{i>=2} rel_i / log2(i). Kept as published so our numbers sit next to the
    paper's; the textbook form divides rank i by log2(i + 1) instead.
    """
    rels = list(relevances[:k])
    if not rels:
        return 0.0
    return rels[0] + sum(r / math.log2(i) for i, r in enumerate(rels[1:], start=2))


def ndcg_any(ranked: Sequence[str], relevant: set[str], k: int) -> float:
    """LongMemEval nDCG@k with binary relevance; the ideal ranks every relevant id first."""
    ideal = dcg([1.0] * len(relevant), k)
    if ideal == 0.0:
        return 0.0
    return dcg([1.0 if r in relevant else 0.0 for r in ranked], k) / ideal


def rank_by_first_mention(groups: Iterable[Iterable[str]]) -> list[str]:
    """Flatten ranked groups of ids into one ranking, keeping each id's first position.

    Used to rank sessions by the best card whose provenance reaches them.
    """
    return list(dict.fromkeys(i for group in groups for i in group))


def routes_of_hits(
    cards: Iterable[tuple[Sequence[str], Sequence[str]]], evidence: set[str]
) -> list[tuple[str, ...]]:
    """For each evidence item the ranked ``(items, routes)`` cards reach, the routes of the
    first card that reached it: which routes a hit is owed to."""
    seen: set[str] = set()
    out: list[tuple[str, ...]] = []
    for items, routes in cards:
        for item in items:
            if item in evidence and item not in seen:
                seen.add(item)
                out.append(tuple(routes))
    return out


def route_shares(hits: Sequence[Sequence[str]]) -> dict[str, dict[str, float]]:
    """Per route, the share of hits it took part in (``found``; a hit found by two routes
    counts for both) and the share it alone found (``only``), best-represented first."""
    if not hits:
        return {}
    names = sorted({r for routes in hits for r in routes})
    found = {r: sum(r in routes for routes in hits) for r in names}
    only = {r: sum(tuple(routes) == (r,) for routes in hits) for r in names}
    return {
        r: {"found": round(found[r] / len(hits), 4), "only": round(only[r] / len(hits), 4)}
        for r in sorted(names, key=lambda r: (-found[r], r))
    }


@dataclass(frozen=True, slots=True)
class Missed:
    """Where an evidence item the top k missed sat in the search: carried by no current
    memory, carried but proposed by no route, or a candidate at ``rank`` (1 = first) among
    the search's scored candidates. Which one says what would fix it: extraction, recall or
    ranking."""

    place: Literal["no_memory", "not_candidate", "candidate"]
    rank: int | None = None


def where_missed(
    missing: Iterable[str], carriers: Mapping[str, Iterable[str]], ranked: Sequence[str]
) -> list[Missed]:
    """For each missed evidence item, where the best memory carrying it sat.
    ``carriers``: evidence item -> ids of the current memories whose provenance holds it;
    ``ranked``: the search's candidates, best first."""
    rank = {mid: i for i, mid in enumerate(ranked, start=1)}
    out: list[Missed] = []
    for item in missing:
        holders = list(carriers.get(item, ()))
        ranks = [rank[m] for m in holders if m in rank]
        if not holders:
            out.append(Missed("no_memory"))
        elif not ranks:
            out.append(Missed("not_candidate"))
        else:
            out.append(Missed("candidate", min(ranks)))
    return out


def miss_summary(misses: Sequence[Missed]) -> dict[str, float]:
    """How many misses sat where, and the quartiles of the candidates' ranks."""
    out: dict[str, float] = {
        "evidence": len(misses),
        **{p: sum(m.place == p for m in misses) for p in ("no_memory", "not_candidate",
                                                           "candidate")},
    }
    ranks = [float(m.rank) for m in misses if m.rank is not None]
    if ranks:
        for q in (25, 50, 75):
            out[f"candidate_rank_p{q}"] = round(percentile(ranks, q), 1)
    return out


def mean(values: Sequence[float]) -> float:
    return sum(values) / len(values) if values else 0.0


def percentile(values: Sequence[float], q: float) -> float:
    """Linear-interpolated percentile (numpy's default), ``q`` in [0, 100]."""
    if not values:
        raise ValueError("percentile of no values")
    ordered = sorted(values)
    pos = (len(ordered) - 1) * q / 100.0
    lo = math.floor(pos)
    hi = min(lo + 1, len(ordered) - 1)
    return ordered[lo] + (ordered[hi] - ordered[lo]) * (pos - lo)


def grouped_means(rows: Sequence[Mapping[str, float]], keys: Sequence[str]) -> dict[str, float]:
    """Mean of each metric named in ``keys`` over ``rows``, rounded for a report."""
    return {k: round(mean([r[k] for r in rows]), 4) for k in keys}
