"""An in-memory :class:`~pipelines.ports.VectorIndex`: exact numpy search over dicts.

The model is dramatiq's ``StubBroker``: a real implementation that keeps nothing on disk,
not a mock. It passes the same contract suite as the embedded engine and qdrant-client
(``tests/runtime/test_vector_index_contract.py``), so unit tests can use it where the engine's own
behaviour (persistence, locking, upgrades, compaction) is not what they check. Opening it
costs nothing, where an embedded shard costs 0.2-1.5 s per test.

Semantics come from the same place as the engines': payloads are stored in the encoded
form of :mod:`~sleepmem.adapters.vectors.payload` (through a JSON round trip, as an engine
stores them), and a filter is the list of :func:`~payload.conditions` evaluated here in
Python instead of being translated to an engine's filter classes. Scores follow Qdrant's:
cosine over normalised vectors, MaxSim over sentence vectors, and for the lexical vector
the query weights times Qdrant's IDF (``ln((N - df + 0.5) / (df + 0.5) + 1)`` over the
live points) dotted with the stored weights.

Points live for as long as the object: ``close`` only refuses further use until the next
``ensure``, so a test may close and reopen it and find its points again.
"""

from __future__ import annotations

import json
import math
import threading
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from sleepmem.adapters.vectors import payload as pl
from sleepmem.core.errors import ConfigurationError, ValidationError
from sleepmem.pipelines.ports import Hit, IndexFilter, IndexPoint, SparseVector, Vector


@dataclass(slots=True)
class _Stored:
    """One point as an engine keeps it: unit vectors, validated sparse terms, encoded
    payload."""

    vector: Vector
    sentences: Vector | None
    sparse: dict[int, float]
    payload: dict[str, Any]


def _unit(vector: Vector) -> Vector:
    """Cosine engines normalise on write; a zero vector stays zero (and scores 0)."""
    v = np.asarray(vector, dtype=np.float32)
    norm = float(np.linalg.norm(v))
    return v / norm if norm > 0 else v


def _holds(cond: pl.Condition, stored: Mapping[str, Any]) -> bool:
    """One engine-neutral condition against an encoded payload; a missing field fails it,
    as it does in the engines."""
    value = stored.get(cond.key)
    if value is None:
        return False
    if isinstance(cond, pl.AnyOf):
        if isinstance(value, list):
            return any(v in cond.values for v in value)
        return value in cond.values
    if isinstance(cond, pl.Flag):
        return bool(value == cond.stored)
    number = float(value)
    return (cond.gt is None or number > cond.gt) and (cond.lte is None or number <= cond.lte)


class MemoryIndex:
    """A :class:`~pipelines.ports.VectorIndex` held in this process's memory."""

    backend = "memory"

    def __init__(self) -> None:
        self.dim: int | None = None
        self._open = False
        # Insertion order is kept: equal scores come back in the order points were written.
        self._points: dict[str, _Stored] = {}
        # The API and worker threads of an embedded process share one index.
        self._lock = threading.RLock()

    # -- lifecycle -------------------------------------------------------------------

    def ensure(self, *, dim: int) -> None:
        """Open for use with vectors of ``dim``; idempotent. The points kept from before a
        ``close`` fix the dimension, as a stored shard does."""
        with self._lock:
            if self.dim is not None and dim != self.dim and (self._open or self._points):
                raise ConfigurationError(f"in-memory index holds dim {self.dim}, not {dim}")
            self.dim, self._open = dim, True

    def _check_open(self) -> int:
        if not self._open or self.dim is None:
            raise ConfigurationError("vector index used before ensure(dim=...)")
        return self.dim

    def maintain(self) -> bool:
        """Nothing to merge or build: search is exact over the dicts."""
        return False

    def compact(self) -> str:
        """A deleted point was dropped from the dicts when it was deleted."""
        return "deleted; nothing kept outside this process's memory"

    def close(self) -> None:
        with self._lock:
            self._open = False

    # -- writes ----------------------------------------------------------------------

    def _vector(self, vector: Vector, dim: int) -> Vector:
        if len(vector) != dim:
            raise ValidationError("vector", f"has {len(vector)} dimensions, index has {dim}")
        return _unit(vector)

    def upsert(self, points: Sequence[IndexPoint]) -> None:
        if not points:
            return
        with self._lock:
            dim = self._check_open()
            # Every point is checked before any is written: an engine refuses the batch.
            batch: list[tuple[str, _Stored]] = []
            for p in points:
                pl.point_id(p.id)
                indices, values = pl.sparse_pairs(p.sparse)
                sentences = (
                    np.stack([self._vector(v, dim) for v in p.sentences]) if p.sentences else None
                )
                batch.append((p.id, _Stored(
                    vector=self._vector(p.vector, dim),
                    sentences=sentences,
                    sparse=dict(zip(indices, values, strict=True)),
                    payload=json.loads(json.dumps(pl.encode(p.payload))),
                )))
            for pid, stored in batch:
                # A replaced point moves to the end, as a rewritten point does in an engine.
                self._points.pop(pid, None)
                self._points[pid] = stored

    def set_payload(self, ids: Sequence[str], payload: dict[str, Any]) -> None:
        if not ids or not payload:
            return
        encoded = json.loads(json.dumps(pl.encode(payload, partial=True)))
        with self._lock:
            self._check_open()
            for i in ids:
                pl.point_id(i)
                if i not in self._points:
                    raise ValidationError("points", f"the index has no point with id {i}")
            for i in ids:
                self._points[i].payload.update(encoded)

    def delete(self, ids: Sequence[str]) -> None:
        if not ids:
            return
        with self._lock:
            self._check_open()
            for i in ids:
                pl.point_id(i)
            for i in ids:
                self._points.pop(i, None)

    # -- reads -----------------------------------------------------------------------

    def _visible(self, where: IndexFilter) -> list[tuple[str, _Stored]]:
        conds = pl.conditions(where)
        return [
            (pid, s) for pid, s in self._points.items()
            if all(_holds(c, s.payload) for c in conds)
        ]

    @staticmethod
    def _best(scored: list[tuple[str, float]], limit: int) -> list[Hit]:
        # sorted() is stable: ties keep insertion order.
        ranked = sorted(scored, key=lambda pair: -pair[1])
        return [Hit(pid, score) for pid, score in ranked[:limit]]

    def search_dense(self, vector: Vector, *, where: IndexFilter, limit: int) -> list[Hit]:
        with self._lock:
            dim = self._check_open()
            if limit <= 0 or pl.matches_nothing(where):
                return []
            query = self._vector(vector, dim)
            seen = self._visible(where)
            if not seen:
                return []
            scores = np.stack([s.vector for _, s in seen]) @ query
            return self._best([(pid, float(x)) for (pid, _), x in zip(seen, scores,
                                                                      strict=True)], limit)

    def search_sentences(self, vector: Vector, *, where: IndexFilter, limit: int) -> list[Hit]:
        with self._lock:
            dim = self._check_open()
            if limit <= 0 or pl.matches_nothing(where):
                return []
            query = self._vector(vector, dim)
            # MaxSim of a one-vector query: the best-matching sentence's cosine.
            scored = [
                (pid, float(np.max(s.sentences @ query)))
                for pid, s in self._visible(where) if s.sentences is not None
            ]
            return self._best(scored, limit)

    def search_sparse(self, sparse: SparseVector, *, where: IndexFilter, limit: int) -> list[Hit]:
        if not sparse:
            return []
        with self._lock:
            self._check_open()
            if limit <= 0 or pl.matches_nothing(where):
                return []
            indices, values = pl.sparse_pairs(sparse)
            # IDF over every live point, not only the visible ones: the engines' statistics
            # are collection-wide.
            total = len(self._points)
            weights: dict[int, float] = {}
            for term, value in zip(indices, values, strict=True):
                df = sum(1 for s in self._points.values() if term in s.sparse)
                weights[term] = value * math.log((total - df + 0.5) / (df + 0.5) + 1)
            scored = []
            for pid, s in self._visible(where):
                shared = [t for t in weights if t in s.sparse]
                # Only a point sharing a term is a candidate, whatever its score.
                if shared:
                    scored.append((pid, sum(weights[t] * s.sparse[t] for t in shared)))
            return self._best(scored, limit)

    def payloads(self, ids: Sequence[str]) -> dict[str, dict[str, Any]]:
        if not ids:
            return {}
        with self._lock:
            self._check_open()
            for i in ids:
                pl.point_id(i)
            return {
                i: pl.decode(json.loads(json.dumps(self._points[i].payload)))
                for i in ids if i in self._points
            }

    def all_ids(self, *, tenant: str | None = None) -> list[str]:
        with self._lock:
            self._check_open()
            # Engines scroll in id order.
            return sorted(
                pid for pid, s in self._points.items()
                if tenant is None or s.payload.get("tenant") == tenant
            )

    def count(self) -> int:
        with self._lock:
            self._check_open()
            return len(self._points)
