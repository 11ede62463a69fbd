"""Raw-turn baselines at sleepmem's own token count: what a plain retriever over the same
turns reads in the same number of tokens.

Two rankers over the raw turns, no consolidation:

- ``bm25``: BM25Okapi (``rank-bm25``) over sleepmem's own lexical tokens, so the baseline
  is as strong as our lexical half;
- ``hybrid``: that BM25 and cosine over the same embedder's vectors, fused by reciprocal
  rank (RRF, k = 60, the constant of Cormack et al.).

Each is read in two formats: ``turns`` (each turn whole) and ``lines`` (each turn's one
sentence sharing most words with the query, :func:`~sleepmem.pipelines.read.snippets.best_line`,
the format of sleepmem's own lines). A baseline is packed into a token budget in rank order:
an item that no longer fits is skipped and the next one tried, so the baseline fills the
budget as fully as its ranking allows (a stricter rule would flatter sleepmem).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from sleepmem.evals.extra import require
from sleepmem.pipelines.lexical import tokens
from sleepmem.pipelines.ports import Embedder
from sleepmem.pipelines.read.snippets import best_line, query_terms

RRF_K = 60
RANKERS = ("bm25", "hybrid")
FORMATS = ("turns", "lines")
NAMES = tuple(f"{r}_{f}" for r in RANKERS for f in FORMATS)
DEFAULT_BUDGETS = (500, 1000, 1500, 2000)
# A search at a token budget asks for the most entries a request may: the budget binds.
BUDGET_K = 100
SYSTEM = "sleepmem"
BASELINES = {
    "bm25_turns": "BM25 over the raw turns, each turn whole",
    "bm25_lines": "BM25 over the raw turns, each turn's best sentence (search's lines)",
    "hybrid_turns": "BM25 + dense (RRF) over the raw turns, each turn whole",
    "hybrid_lines": "BM25 + dense (RRF) over the raw turns, each turn's best sentence",
}


def rrf(*orders: Sequence[int], k: int = RRF_K) -> list[int]:
    """Reciprocal rank fusion of rankings of the same items (best first): each item scores
    the sum of 1 / (k + rank) over the rankings; ties keep the lower index first."""
    score: dict[int, float] = {}
    for order in orders:
        for rank, i in enumerate(order, start=1):
            score[i] = score.get(i, 0.0) + 1.0 / (k + rank)
    return sorted(score, key=lambda i: (-score[i], i))


def pack(ranked: Sequence[int], cost: Callable[[int], int], budget: int) -> list[int]:
    """The items of ``ranked`` that fit ``budget`` taken in rank order; one over what is
    left is skipped and the next tried."""
    out: list[int] = []
    left = budget
    for i in ranked:
        if left <= 0:
            break
        c = cost(i)
        if c <= left:
            out.append(i)
            left -= c
    return out


@dataclass(slots=True)
class RawTurns:
    """The turns of one scope, indexed for both rankers."""

    texts: list[str]
    bm25: Any
    vectors: np.ndarray

    @classmethod
    def build(cls, texts: Sequence[str], embedder: Embedder) -> RawTurns:
        if not texts:
            raise ValueError("a baseline needs at least one turn")
        corpus = [tokens(t) or ["\x00"] for t in texts]
        vectors = np.asarray(embedder.embed(list(texts), kind="document"), dtype=np.float32)
        return cls(list(texts), require("rank_bm25").BM25Okapi(corpus), vectors)

    def rankings(self, query: str, query_vector: np.ndarray) -> dict[str, list[int]]:
        """Turn indices best first, per ranker."""
        scores = self.bm25.get_scores(tokens(query))
        lexical = sorted(range(len(self.texts)), key=lambda i: (-float(scores[i]), i))
        cosine = self.vectors @ np.asarray(query_vector, dtype=np.float32)
        dense = [int(i) for i in np.argsort(-cosine, kind="stable")]
        return {"bm25": lexical, "hybrid": rrf(lexical, dense)}


@dataclass(slots=True)
class Packed:
    """What one baseline reads within a budget: turn indices in rank order, and their
    tokens."""

    turns: list[int]
    tokens: int


@dataclass(slots=True)
class Baselines:
    """Every baseline's answer to one question, packed into any budget on demand."""

    turns: RawTurns
    query: str
    cost: Callable[[str], int]
    ranked: dict[str, list[int]]
    terms: re.Pattern[str] | None
    _lines: dict[int, str] = field(default_factory=dict)
    _costs: dict[tuple[str, int], int] = field(default_factory=dict)

    @classmethod
    def of(cls, turns: RawTurns, query: str, query_vector: np.ndarray,
           cost: Callable[[str], int]) -> Baselines:
        return cls(turns, query, cost, turns.rankings(query, query_vector), query_terms(query))

    def text(self, fmt: str, i: int) -> str:
        """Turn ``i`` as format ``fmt`` shows it."""
        if fmt == "turns":
            return self.turns.texts[i]
        if i not in self._lines:
            self._lines[i] = best_line(self.turns.texts[i], self.terms)
        return self._lines[i]

    def _cost(self, fmt: str, i: int) -> int:
        key = (fmt, i)
        if key not in self._costs:
            self._costs[key] = self.cost(self.text(fmt, i))
        return self._costs[key]

    def packed(self, name: str, budget: int) -> Packed:
        ranker, fmt = name.split("_", 1)
        chosen = pack(self.ranked[ranker], lambda i: self._cost(fmt, i), budget)
        return Packed(chosen, sum(self._cost(fmt, i) for i in chosen))
