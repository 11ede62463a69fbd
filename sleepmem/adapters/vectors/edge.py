"""The embedded index: Qdrant's own engine in-process (``qdrant-edge-py``), one shard on disk.

Filtered search stays around a millisecond at 100k points, where qdrant-client's local
mode (a Python re-implementation) takes far longer. The shard belongs to one process (the
engine's WAL lock refuses a second opener); in embedded mode the API and the worker threads
share it, so one lock guards every call (searches are short, and the engine gives no
thread-safety promise for its handle).

By default no HNSW graph is built. Every search carries a scope filter, scopes are capped
(``scope_capacity``), and the engine then scores the few candidates its payload indexes
select exactly: ~0.3 ms at 100k points, and exact results. Building HNSW in-process costs
minutes per 100k points during which the binding holds the GIL, freezing every thread of
the embedded process; pass ``hnsw=True`` only for scopes far beyond the cap.
:meth:`EdgeIndex.maintain` merges segments and drops deleted points; it belongs to a
scheduled job, never to a request.
"""

from __future__ import annotations

import shutil
import threading
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import qdrant_edge as qe

from sleepmem.adapters.vectors import payload as pl
from sleepmem.core.errors import ConfigurationError, SleepmemError, ValidationError
from sleepmem.core.logs import get_logger
from sleepmem.pipelines.ports import Hit, IndexFilter, IndexPoint, SparseVector, Vector

log = get_logger(__name__)

_SCROLL_PAGE = 1000
_KEYWORD = qe.PayloadSchemaType.Keyword


def _schema(field: str, kind: pl.IndexKind) -> Any:
    if field == "tenant":
        # Lets the engine lay points out by tenant: every search filters on it.
        return qe.KeywordIndexParams(is_tenant=True)
    return {
        "keyword": _KEYWORD,
        "float": qe.PayloadSchemaType.Float,
        "integer": qe.PayloadSchemaType.Integer,
    }[kind]


def _condition(cond: pl.Condition) -> qe.FieldCondition:
    if isinstance(cond, pl.AnyOf):
        if len(cond.values) == 1:
            return qe.FieldCondition(cond.key, match=qe.MatchValue(cond.values[0]))
        return qe.FieldCondition(cond.key, match=qe.MatchAny(list(cond.values)))
    if isinstance(cond, pl.Flag):
        return qe.FieldCondition(cond.key, match=qe.MatchValue(cond.stored))
    return qe.FieldCondition(cond.key, range=qe.RangeFloat(gt=cond.gt, lte=cond.lte))


def edge_filter(where: IndexFilter) -> qe.Filter:
    return qe.Filter(must=[_condition(c) for c in pl.conditions(where)])


def _sparse(vec: SparseVector) -> qe.SparseVector:
    return qe.SparseVector(*pl.sparse_pairs(vec))


class EdgeIndex:
    """A :class:`~pipelines.ports.VectorIndex` on a qdrant-edge shard at ``path``."""

    backend = "edge"

    def __init__(
        self, path: Path, *, hnsw: bool = False, search_threads: int | None = None
    ) -> None:
        self.path = Path(path)
        self.hnsw = hnsw
        self.search_threads = search_threads
        self.dim: int | None = None
        self._shard: qe.EdgeShard | None = None
        self._lock = threading.RLock()

    # -- lifecycle -------------------------------------------------------------------

    def _config(self, dim: int, *, sentences: bool = True) -> qe.EdgeConfig:
        vectors = {pl.DENSE: qe.EdgeVectorParams(size=dim, distance=qe.Distance.Cosine)}
        if sentences:
            vectors[pl.SENTENCES] = qe.EdgeVectorParams(
                size=dim, distance=qe.Distance.Cosine,
                multivector_config=qe.MultiVectorConfig(qe.MultiVectorComparator.MaxSim),
            )
        return qe.EdgeConfig(
            vectors=vectors,
            sparse_vectors={pl.LEXICAL: qe.EdgeSparseVectorParams(modifier=qe.Modifier.Idf)},
            # indexing_threshold=0 turns HNSW building off (see the module docstring).
            optimizers=None if self.hnsw else qe.EdgeOptimizersConfig(indexing_threshold=0),
            max_search_threads=self.search_threads,
        )

    def ensure(self, *, dim: int) -> None:
        """Open the shard (creating it on first use) and its payload indexes. Idempotent."""
        with self._lock:
            if self._shard is not None:
                if dim != self.dim:
                    raise ConfigurationError(f"index at {self.path} is open with dim {self.dim}")
                return
            started = time.perf_counter()
            existed = (self.path / "edge_config.json").exists()
            shard = self._attach(dim, existed=existed)
            log.info(
                "index_opened",
                backend=self.backend,
                created=not existed,
                dim=dim,
                points=shard.info().points_count,
                ms=round((time.perf_counter() - started) * 1000, 1),
            )

    def _attach(self, dim: int, *, existed: bool) -> qe.EdgeShard:
        """Load or create the shard, add missing payload indexes and hold it. Logs nothing:
        the upgrade path reopens the shard through here from inside :meth:`ensure`, which
        reports the opening once."""
        try:
            if existed:
                shard = self._load(dim)
            else:
                self.path.mkdir(parents=True, exist_ok=True)
                shard = qe.EdgeShard.create(str(self.path), self._config(dim))
        except Exception as exc:
            raise ConfigurationError(
                f"cannot open the vector index at {self.path} with dim {dim}: {exc}"
            ) from exc
        have = shard.info().payload_schema
        for field, kind in pl.indexed_fields().items():
            if field not in have:
                shard.update(qe.UpdateOperation.create_field_index(field, _schema(field, kind)))
        self._shard, self.dim = shard, dim
        return shard

    def _load(self, dim: int) -> qe.EdgeShard:
        """The stored shard. Passing the config makes the engine check it against the stored
        data; a shard written before sentence vectors fails that check, opens with its old
        layout and is rewritten with the current one (:meth:`compact`), once."""
        try:
            return qe.EdgeShard.load(str(self.path), self._config(dim))
        except Exception as exc:
            if pl.SENTENCES not in str(exc):
                raise
        log.warning("index_upgrading", backend=self.backend, path=str(self.path),
                    reason="no sentence vectors", effect="memories indexed from now on get them")
        self._shard = qe.EdgeShard.load(str(self.path), self._config(dim, sentences=False))
        self.dim = dim
        self.compact()
        return self._open()

    def _open(self) -> qe.EdgeShard:
        if self._shard is None:
            raise ConfigurationError("vector index used before ensure(dim=...)")
        return self._shard

    def maintain(self) -> bool:
        """Merge segments, drop deleted points, build HNSW if enabled. Blocks the process."""
        with self._lock:
            shard = self._open()
            started = time.perf_counter()
            changed = shard.optimize()
            shard.flush()
            info = shard.info()
            log.info(
                "index_maintained",
                backend=self.backend,
                optimized=changed,
                points=info.points_count,
                segments=info.segments_count,
                ms=round((time.perf_counter() - started) * 1000, 1),
            )
            return changed

    def compact(self) -> str:
        """Rewrite the shard from its live points only, so deleted ones leave every file.

        qdrant-edge's ``optimize`` merges segments only past its thresholds and keeps its
        write-ahead log, so an erased point's payload (tenant, user and scope ids) stayed on
        disk. The live points are copied into a fresh shard that replaces the old directory,
        which is then removed. Readers and writers wait while it runs (erasure is rare).
        """
        with self._lock:
            shard = self._open()
            dim = self.dim
            if dim is None:
                raise ConfigurationError("vector index used before ensure(dim=...)")
            fresh_path = self.path.with_name(self.path.name + ".compacting")
            old_path = self.path.with_name(self.path.name + ".erased")
            for leftover in (fresh_path, old_path):
                shutil.rmtree(leftover, ignore_errors=True)
            fresh_path.mkdir(parents=True)
            fresh = qe.EdgeShard.create(str(fresh_path), self._config(dim))
            for field, kind in pl.indexed_fields().items():
                fresh.update(qe.UpdateOperation.create_field_index(field, _schema(field, kind)))
            offset: Any = None
            moved = 0
            while True:
                records, offset = shard.scroll(
                    qe.ScrollRequest(
                        offset=offset, limit=_SCROLL_PAGE, with_payload=True, with_vector=True
                    )
                )
                if records:
                    points = [qe.Point(r.id, r.vector or {}, r.payload or {}) for r in records]
                    fresh.update(qe.UpdateOperation.upsert_points(points))
                    moved += len(records)
                if offset is None:
                    break
            fresh.flush()
            fresh.close()
            shard.close()
            self._shard = None
            self.path.rename(old_path)
            fresh_path.rename(self.path)
            shutil.rmtree(old_path)
            self._attach(dim, existed=True)
            log.info("index_compacted", backend=self.backend, points=moved)
            return "compacted"

    def close(self) -> None:
        with self._lock:
            if self._shard is None:
                return
            self._shard.flush()
            self._shard.close()
            self._shard = None
            log.info("index_closed", backend=self.backend)

    # -- writes ----------------------------------------------------------------------

    def upsert(self, points: Sequence[IndexPoint]) -> None:
        if not points:
            return
        # The dimension, not the shard: a compaction swaps the shard under the lock, and a
        # writer that checked the shard outside it failed in that moment. The write itself
        # goes through the lock (_apply).
        if self.dim is None:
            raise ConfigurationError("vector index used before ensure(dim=...)")
        batch = []
        for p in points:
            vector = p.vector.tolist()
            if len(vector) != self.dim:
                raise ValidationError(
                    "vector", f"has {len(vector)} dimensions, index has {self.dim}"
                )
            vectors: dict[str, Any] = {pl.DENSE: vector, pl.LEXICAL: _sparse(p.sparse)}
            if p.sentences:
                vectors[pl.SENTENCES] = [v.tolist() for v in p.sentences]
            batch.append(qe.Point(pl.point_id(p.id), vectors, pl.encode(p.payload)))
        with self._lock:
            self._apply(qe.UpdateOperation.upsert_points(batch))

    def set_payload(self, ids: Sequence[str], payload: dict[str, Any]) -> None:
        if not ids or not payload:
            return
        op = qe.UpdateOperation.set_payload(
            [pl.point_id(i) for i in ids], pl.encode(payload, partial=True)
        )
        with self._lock:
            self._apply(op)

    def delete(self, ids: Sequence[str]) -> None:
        if not ids:
            return
        op = qe.UpdateOperation.delete_points([pl.point_id(i) for i in ids])
        with self._lock:
            self._apply(op)

    def _apply(self, op: qe.UpdateOperation) -> None:
        try:
            self._open().update(op)
        except SleepmemError:
            raise
        except Exception as exc:
            raise ValidationError("points", f"the index refused the update: {exc}") from exc

    # -- reads -----------------------------------------------------------------------

    def search_dense(self, vector: Vector, *, where: IndexFilter, limit: int) -> list[Hit]:
        return self._query(qe.Query.Nearest(vector.tolist(), using=pl.DENSE), where, limit)

    def search_sentences(self, vector: Vector, *, where: IndexFilter, limit: int) -> list[Hit]:
        return self._query(qe.Query.Nearest([vector.tolist()], using=pl.SENTENCES), where, limit)

    def search_sparse(self, sparse: SparseVector, *, where: IndexFilter, limit: int) -> list[Hit]:
        if not sparse:
            return []
        return self._query(qe.Query.Nearest(_sparse(sparse), using=pl.LEXICAL), where, limit)

    def _query(self, query: qe.Query, where: IndexFilter, limit: int) -> list[Hit]:
        if limit <= 0 or pl.matches_nothing(where):
            return []
        request = qe.QueryRequest(
            limit=limit,
            query=query,
            filter=edge_filter(where),
            with_payload=False,
            with_vector=False,
        )
        with self._lock:
            shard = self._open()
            try:
                found = shard.query(request)
            except Exception as exc:
                raise ValidationError("query", f"the index refused the search: {exc}") from exc
        return [Hit(pl.memory_id(p.id), float(p.score)) for p in found]

    def payloads(self, ids: Sequence[str]) -> dict[str, dict[str, Any]]:
        if not ids:
            return {}
        pids: list[qe.PointId] = [pl.point_id(i) for i in ids]
        with self._lock:
            records = self._open().retrieve(pids, True, False)
        return {pl.memory_id(r.id): pl.decode(r.payload or {}) for r in records}

    def all_ids(self, *, tenant: str | None = None) -> list[str]:
        where = None
        if tenant is not None:
            where = qe.Filter(must=[qe.FieldCondition("tenant", match=qe.MatchValue(tenant))])
        out: list[str] = []
        offset: Any = None
        with self._lock:
            shard = self._open()
            while True:
                records, offset = shard.scroll(
                    qe.ScrollRequest(
                        offset=offset,
                        limit=_SCROLL_PAGE,
                        filter=where,
                        with_payload=False,
                        with_vector=False,
                    )
                )
                out.extend(pl.memory_id(r.id) for r in records)
                if offset is None:
                    return out

    def count(self) -> int:
        with self._lock:
            return int(self._open().count(qe.CountRequest(exact=True)))
