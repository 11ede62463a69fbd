"""Micro-benchmark of one index backend: filtered dense and sparse search latency.

n random unit vectors spread over ``users`` user scopes of one tenant (plus a few
tenant-wide points every user sees), each with a short Zipf-distributed sparse vector.
Every query is a real scope filter (tenant, agent, user, statuses, expiry), as retrieval
sends it. Random vectors say nothing about quality; the retrieval bench does that.

    python -m sleepmem.bench.index edge --n 100000
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
import uuid
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np

from sleepmem.evals.metrics import percentile
from sleepmem.models.scope import Scope
from sleepmem.pipelines.ports import IndexFilter, IndexPoint, SparseVector, VectorIndex

BATCH = 1000
VOCAB = 20_000


def _index(backend: str, where: Path) -> VectorIndex:
    # Deferred: a backend's client loads only when chosen (qdrant-client takes ~2.7 s).
    if backend == "edge":
        from sleepmem.adapters.vectors.edge import EdgeIndex

        return EdgeIndex(where / "index")
    if backend == "qdrant-local":
        from sleepmem.adapters.vectors.qdrant import QdrantIndex

        return QdrantIndex(path=where / "qdrant", collection="bench")
    if backend == "qdrant-memory":
        from sleepmem.adapters.vectors.qdrant import QdrantIndex

        return QdrantIndex(path=":memory:", collection="bench")
    raise ValueError(f"unknown backend {backend!r}")


def _percentiles(samples_ms: list[float]) -> dict[str, float]:
    return {f"p{q}": round(percentile(samples_ms, q), 3) for q in (50, 95, 99)}


def _sparse(rng: np.random.Generator, terms: int) -> SparseVector:
    ids = np.minimum(rng.zipf(1.3, size=terms), VOCAB)
    return {int(i): float(1.0 + rng.random()) for i in ids}


def run_index_bench(
    backend: str,
    n: int = 100_000,
    users: int = 1000,
    *,
    dim: int = 512,
    queries: int = 300,
    limit: int = 50,
    seed: int = 0,
    maintain: bool = True,
    path: Path | None = None,
) -> dict[str, Any]:
    """Build an index of ``n`` points and time ``queries`` filtered searches of each kind.

    Returns build and maintain seconds and p50/p95/p99 milliseconds for dense and sparse
    search. Uses a temporary directory unless ``path`` is given.
    """
    rng = np.random.default_rng(seed)
    now = datetime.now(UTC)
    t_now = now.timestamp()
    with tempfile.TemporaryDirectory(prefix="sleepmem-bench-") as tmp:
        index = _index(backend, path or Path(tmp))
        index.ensure(dim=dim)
        started = time.perf_counter()
        for start in range(0, n, BATCH):
            size = min(BATCH, n - start)
            vecs = rng.standard_normal((size, dim)).astype(np.float32)
            vecs /= np.linalg.norm(vecs, axis=1, keepdims=True)
            batch = []
            for j in range(size):
                i = start + j
                # 1% tenant-wide points: every user's search must also see these.
                user = "" if i % 100 == 1 else f"u{i % users}"
                batch.append(
                    IndexPoint(
                        id=f"{i + 1:032x}",
                        vector=vecs[j],
                        sparse=_sparse(rng, 8),
                        payload={
                            "tenant": "bench",
                            "agent": "agent",
                            "user": user,
                            "project": "",
                            "session": "",
                            "scope_key": f"t=bench/a=agent/u={user}",
                            "lineage": uuid.uuid4().hex,
                            "type": "fact",
                            "status": "active" if i % 10 else "superseded",
                            "hidden": False,
                            "valid_from": t_now - 86400.0,
                            "valid_to": None,
                            "expires_at": None if i % 3 else t_now + 86400.0,
                        },
                    )
                )
            index.upsert(batch)
        build_s = time.perf_counter() - started
        started = time.perf_counter()
        if maintain:
            index.maintain()
        maintain_s = time.perf_counter() - started

        qvecs = rng.standard_normal((queries, dim)).astype(np.float32)
        qvecs /= np.linalg.norm(qvecs, axis=1, keepdims=True)
        filters = [
            IndexFilter(
                scope=Scope(tenant="bench", agent="agent", user=f"u{int(u)}"),
                now=now,
            )
            for u in rng.integers(0, users, size=queries)
        ]
        sparse_queries = [_sparse(rng, 4) for _ in range(queries)]
        # Warm caches and lazy structures before timing.
        for k in range(min(10, queries)):
            index.search_dense(qvecs[k], where=filters[k], limit=limit)
            index.search_sparse(sparse_queries[k], where=filters[k], limit=limit)

        dense_ms, sparse_ms, hits = [], [], 0
        for k in range(queries):
            t0 = time.perf_counter()
            hits += len(index.search_dense(qvecs[k], where=filters[k], limit=limit))
            dense_ms.append((time.perf_counter() - t0) * 1000)
            t0 = time.perf_counter()
            index.search_sparse(sparse_queries[k], where=filters[k], limit=limit)
            sparse_ms.append((time.perf_counter() - t0) * 1000)
        count = index.count()
        index.close()
    return {
        "backend": backend,
        "n": n,
        "users": users,
        "dim": dim,
        "points": count,
        "build_s": round(build_s, 2),
        "maintain_s": round(maintain_s, 2),
        "queries": queries,
        "mean_dense_hits": round(hits / queries, 1),
        "dense_ms": _percentiles(dense_ms),
        "sparse_ms": _percentiles(sparse_ms),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("backend", choices=["edge", "qdrant-local", "qdrant-memory"])
    parser.add_argument("--n", type=int, default=100_000)
    parser.add_argument("--users", type=int, default=1000)
    parser.add_argument("--queries", type=int, default=300)
    parser.add_argument("--no-maintain", action="store_true")
    args = parser.parse_args()
    result = run_index_bench(
        args.backend,
        n=args.n,
        users=args.users,
        queries=args.queries,
        maintain=not args.no_maintain,
    )
    print(json.dumps(result))


if __name__ == "__main__":
    main()
