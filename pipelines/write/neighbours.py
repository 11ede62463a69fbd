"""The sentence vectors of a scope's memories, kept as one matrix for a consolidation run.

The resolver compares each candidate with the memories it may restate. Gathering their
vectors one candidate at a time (a Python pass over the scope, then a copy of every
vector) made a batch cost grow with the square of the scope. Here each memory's sentences
are embedded once, appended to one matrix as the memory arrives, and a candidate's
neighbours are the memories with a sentence at or above a bar: one matrix product, and
the resolver's own judgement then runs on those few memories only.

The bar is a pre-filter, never the judgement: it is set a little below the resolver's own
(:data:`MARGIN`), so every memory the judgement could accept is among the neighbours.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence

import numpy as np

from sleepmem.pipelines.semantic import Meaning

# Below the judgement's own bar: float rounding of one product against another never
# drops a memory the judgement would have taken.
MARGIN = 1e-3
_GROWTH = 2


class SentenceIndex:
    """Sentence vectors of memories, by memory id, searched by a similarity bar."""

    def __init__(self, meaning: Meaning, sentences: Callable[[str], list[str]]) -> None:
        self._meaning = meaning
        self._sentences = sentences
        self._pending: dict[str, str] = {}
        self._owners: list[str] = []
        self._matrix = np.zeros((0, meaning.embedder.dim), dtype=np.float32)
        self._rows = 0
        self._indexed: set[str] = set()

    def __len__(self) -> int:
        return len(self._indexed) + len(self._pending)

    def add(self, mid: str, statement: str) -> None:
        """A memory to search, embedded at the next search (all pending ones in one call)."""
        if mid not in self._indexed:
            self._pending[mid] = statement

    def within(self, texts: Sequence[str], bar: float) -> set[str]:
        """Ids of the memories with a sentence at or above ``bar`` (less :data:`MARGIN`)
        against any of ``texts``, in the calibrated units of :class:`Meaning`."""
        self._flush()
        if not texts or not self._rows:
            return set()
        sims = self._meaning.calibrate(self._matrix[: self._rows] @ self._meaning.matrix(texts).T)
        hit = np.nonzero((np.asarray(sims) >= bar - MARGIN).any(axis=1))[0]
        return {self._owners[int(i)] for i in hit}

    def _flush(self) -> None:
        if not self._pending:
            return
        items = list(self._pending.items())
        self._pending = {}
        parts = [(mid, part) for mid, statement in items for part in self._sentences(statement)]
        self._indexed.update(mid for mid, _s in items)
        if not parts:
            return
        vectors = self._meaning.matrix([p for _m, p in parts])
        need = self._rows + len(parts)
        if need > self._matrix.shape[0]:
            grown = np.zeros((max(need, _GROWTH * self._matrix.shape[0]), self._matrix.shape[1]),
                             dtype=np.float32)
            grown[: self._rows] = self._matrix[: self._rows]
            self._matrix = grown
        self._matrix[self._rows: need] = vectors
        self._rows = need
        self._owners.extend(mid for mid, _p in parts)


def in_order(ids: Iterable[str], order: dict[str, int]) -> list[str]:
    """``ids`` that ``order`` knows, in its order."""
    return sorted((i for i in ids if i in order), key=order.__getitem__)
