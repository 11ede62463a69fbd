"""The index on qdrant-client: a Qdrant server (distributed mode) or the client's local mode.

Local mode (``path=`` a directory, or ``":memory:"``) is a pure-Python re-implementation:
correct but slow past a few thousand points, single-process, and not thread-safe, so calls
are serialised here. It exists to run the server code path where no server can run.
A server needs no lock, builds its own indexes, and reports outages as
:class:`~sleepmem.core.errors.TransientError` so that tasks retry.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

from qdrant_client import QdrantClient
from qdrant_client import models as qm
from qdrant_client.http.exceptions import ResponseHandlingException, UnexpectedResponse

from sleepmem.adapters.vectors import payload as pl
from sleepmem.core.errors import ConfigurationError, TransientError, ValidationError
from sleepmem.core.logs import get_logger
from sleepmem.pipelines.ports import Hit, IndexFilter, IndexPoint, SparseVector, Vector

log = get_logger(__name__)

_SCROLL_PAGE = 1000
_UPSERT_BATCH = 256
MEMORY = ":memory:"


def _schema(field: str, kind: pl.IndexKind) -> Any:
    if field == "tenant":
        return qm.KeywordIndexParams(type=qm.KeywordIndexType.KEYWORD, is_tenant=True)
    return {
        "keyword": qm.PayloadSchemaType.KEYWORD,
        "float": qm.PayloadSchemaType.FLOAT,
        "integer": qm.PayloadSchemaType.INTEGER,
    }[kind]


def _condition(cond: pl.Condition) -> qm.FieldCondition:
    if isinstance(cond, pl.AnyOf):
        if len(cond.values) == 1:
            return qm.FieldCondition(key=cond.key, match=qm.MatchValue(value=cond.values[0]))
        return qm.FieldCondition(key=cond.key, match=qm.MatchAny(any=list(cond.values)))
    if isinstance(cond, pl.Flag):
        return qm.FieldCondition(key=cond.key, match=qm.MatchValue(value=cond.stored))
    return qm.FieldCondition(key=cond.key, range=qm.Range(gt=cond.gt, lte=cond.lte))


def qdrant_filter(where: IndexFilter) -> qm.Filter:
    return qm.Filter(must=[_condition(c) for c in pl.conditions(where)])


def _sparse(vec: SparseVector) -> qm.SparseVector:
    indices, values = pl.sparse_pairs(vec)
    return qm.SparseVector(indices=indices, values=values)


class QdrantIndex:
    """A :class:`~pipelines.ports.VectorIndex` on one qdrant-client collection.

    Give exactly one of ``url`` (a server) or ``path`` (local mode: a directory, or
    ``":memory:"``).
    """

    def __init__(
        self,
        *,
        url: str | None = None,
        path: Path | str | None = None,
        collection: str = "memories",
        timeout_s: float = 10.0,
    ) -> None:
        if (url is None) == (path is None):
            raise ConfigurationError("QdrantIndex needs exactly one of url= or path=")
        self.collection = collection
        self.local = url is None
        self.backend = "qdrant-local" if self.local else "qdrant"
        self.dim: int | None = None
        self.sentences = True
        self._lock: contextlib.AbstractContextManager[Any] = (
            threading.RLock() if self.local else contextlib.nullcontext()
        )
        try:
            if url is not None:
                self._client = QdrantClient(url=url, timeout=int(timeout_s))
            elif str(path) == MEMORY:
                self._client = QdrantClient(location=MEMORY)
            else:
                Path(str(path)).mkdir(parents=True, exist_ok=True)
                self._client = QdrantClient(path=str(path))
        except RuntimeError as exc:  # local mode: the directory is locked by another process
            raise ConfigurationError(f"cannot open the local vector index: {exc}") from exc

    @contextlib.contextmanager
    def _call(self) -> Iterator[None]:
        """Serialise local mode; translate a server's outages into retryable errors."""
        with self._lock:
            try:
                yield
            except ResponseHandlingException as exc:
                raise TransientError(f"qdrant unreachable: {type(exc.source).__name__}") from exc
            except UnexpectedResponse as exc:
                if exc.status_code is not None and (
                    exc.status_code >= 500 or exc.status_code == 429
                ):
                    raise TransientError(f"qdrant busy: HTTP {exc.status_code}") from exc
                raise ValidationError("index", f"qdrant refused the request: {exc}") from exc
            except ValueError as exc:  # local mode reports bad input (e.g. wrong dim) so
                raise ValidationError("index", f"qdrant refused the request: {exc}") from exc

    # -- lifecycle -------------------------------------------------------------------

    def ensure(self, *, dim: int) -> None:
        """Create the collection and its payload indexes if missing; check dim if present."""
        started = time.perf_counter()
        with self._call():
            created = not self._client.collection_exists(self.collection)
            if created:
                self._create(dim)
            info = self._client.get_collection(self.collection)
            vectors = info.config.params.vectors
            have = vectors.get(pl.DENSE) if isinstance(vectors, dict) else None
            # A collection created before sentence vectors keeps its layout (Qdrant cannot
            # add a named vector to a collection): the sentence route finds nothing there.
            self.sentences = isinstance(vectors, dict) and pl.SENTENCES in vectors
            if not self.sentences:
                log.warning("index_without_sentences", backend=self.backend,
                            collection=self.collection,
                            fix="index into a new collection (SLEEPMEM_COLLECTION)")
            if have is None or have.size != dim:
                size = None if have is None else have.size
                raise ConfigurationError(
                    f"collection {self.collection!r} has dense size {size}, expected {dim}"
                )
            # Local mode ignores payload indexes (and warns); a server needs them for speed.
            if not self.local:
                schema = info.payload_schema
                for field, kind in pl.indexed_fields().items():
                    if field not in schema:
                        self._client.create_payload_index(
                            self.collection, field, field_schema=_schema(field, kind), wait=True
                        )
            points = self._client.count(self.collection, exact=True).count
        self.dim = dim
        log.info(
            "index_opened",
            backend=self.backend,
            created=created,
            dim=dim,
            points=points,
            ms=round((time.perf_counter() - started) * 1000, 1),
        )

    def _create(self, dim: int) -> None:
        try:
            self._client.create_collection(
                self.collection,
                vectors_config={
                    pl.DENSE: qm.VectorParams(size=dim, distance=qm.Distance.COSINE),
                    pl.SENTENCES: qm.VectorParams(
                        size=dim, distance=qm.Distance.COSINE,
                        multivector_config=qm.MultiVectorConfig(
                            comparator=qm.MultiVectorComparator.MAX_SIM),
                    ),
                },
                sparse_vectors_config={pl.LEXICAL: qm.SparseVectorParams(modifier=qm.Modifier.IDF)},
            )
        except UnexpectedResponse as exc:
            # Two workers starting together: the other one created it first.
            if exc.status_code != 409:
                raise

    def maintain(self) -> bool:
        """Nothing to do: a server optimises itself and local mode has no indexes."""
        return False

    def compact(self) -> str:
        """A Qdrant server vacuums deleted points from its segments itself (its optimizer's
        deleted_threshold); nothing here can force it, and the receipt says so."""
        return "deleted; the server vacuums its segments itself"

    def close(self) -> None:
        with self._lock:
            self._client.close()
        log.info("index_closed", backend=self.backend)

    # -- writes ----------------------------------------------------------------------

    def upsert(self, points: Sequence[IndexPoint]) -> None:
        if not points:
            return
        structs = []
        for p in points:
            vector = p.vector.tolist()
            if self.dim is not None and len(vector) != self.dim:
                raise ValidationError(
                    "vector", f"has {len(vector)} dimensions, index has {self.dim}"
                )
            vectors: dict[str, Any] = {pl.DENSE: vector, pl.LEXICAL: _sparse(p.sparse)}
            if p.sentences and self.sentences:
                vectors[pl.SENTENCES] = [v.tolist() for v in p.sentences]
            structs.append(
                qm.PointStruct(id=str(pl.point_id(p.id)), vector=vectors,
                               payload=pl.encode(p.payload))
            )
        for start in range(0, len(structs), _UPSERT_BATCH):
            with self._call():
                self._client.upsert(
                    self.collection, points=structs[start : start + _UPSERT_BATCH], wait=True
                )

    def set_payload(self, ids: Sequence[str], payload: dict[str, Any]) -> None:
        if not ids or not payload:
            return
        encoded = pl.encode(payload, partial=True)
        with self._call():
            self._client.set_payload(
                self.collection, payload=encoded, points=self._pids(ids), wait=True
            )

    def delete(self, ids: Sequence[str]) -> None:
        if not ids:
            return
        selector = qm.PointIdsList(points=list(self._pids(ids)))
        with self._call():
            self._client.delete(self.collection, points_selector=selector, wait=True)

    @staticmethod
    def _pids(ids: Sequence[str]) -> list[qm.ExtendedPointId]:
        return [str(pl.point_id(i)) for i in ids]

    # -- reads -----------------------------------------------------------------------

    def search_dense(self, vector: Vector, *, where: IndexFilter, limit: int) -> list[Hit]:
        return self._query(vector.tolist(), pl.DENSE, where, limit)

    def search_sentences(self, vector: Vector, *, where: IndexFilter, limit: int) -> list[Hit]:
        if not self.sentences:
            return []
        return self._query([vector.tolist()], pl.SENTENCES, where, limit)

    def search_sparse(self, sparse: SparseVector, *, where: IndexFilter, limit: int) -> list[Hit]:
        if not sparse:
            return []
        return self._query(_sparse(sparse), pl.LEXICAL, where, limit)

    def _query(
        self, query: list[float] | list[list[float]] | qm.SparseVector, using: str,
        where: IndexFilter, limit: int,
    ) -> list[Hit]:
        if limit <= 0 or pl.matches_nothing(where):
            return []
        with self._call():
            found = self._client.query_points(
                self.collection,
                query=query,
                using=using,
                query_filter=qdrant_filter(where),
                limit=limit,
                with_payload=False,
                with_vectors=False,
            ).points
        return [Hit(pl.memory_id(p.id), float(p.score)) for p in found]

    def payloads(self, ids: Sequence[str]) -> dict[str, dict[str, Any]]:
        if not ids:
            return {}
        with self._call():
            records = self._client.retrieve(
                self.collection, ids=self._pids(ids), with_payload=True, with_vectors=False
            )
        return {pl.memory_id(r.id): pl.decode(r.payload or {}) for r in records}

    def all_ids(self, *, tenant: str | None = None) -> list[str]:
        where = None
        if tenant is not None:
            where = qm.Filter(
                must=[qm.FieldCondition(key="tenant", match=qm.MatchValue(value=tenant))]
            )
        out: list[str] = []
        offset: qm.ExtendedPointId | None = None
        while True:
            with self._call():
                records, offset = self._client.scroll(
                    self.collection,
                    scroll_filter=where,
                    limit=_SCROLL_PAGE,
                    offset=offset,
                    with_payload=False,
                    with_vectors=False,
                )
            out.extend(pl.memory_id(r.id) for r in records)
            if offset is None:
                return out

    def count(self) -> int:
        with self._call():
            return int(self._client.count(self.collection, exact=True).count)
