"""Search latency at scale: one tenant, N realistic memories over many users.

The store is filled fast but through the real write code: memory rows are built with
:func:`sleepmem.pipelines.memories.new_memory`, bulk-inserted into SQL and pushed to the index by
:func:`sleepmem.pipelines.write.index.upsert_memories` (real embeddings of real sentences), then the
index is maintained (HNSW build) as the scheduled job would. Latency is then measured
the way an agent pays it: :meth:`Reader.search` in-process (query embedding, every route's
index searches, SQL re-check, rerank, hit recording) and ``POST /v1/search`` over loopback
HTTP.

The same-run baseline is the least any vector search pays for the same query: embedding it
and one dense search in the user's scope. Each query runs both, in alternating order, so a
busy machine slows both alike; the ratio of the two carries across machines where the
milliseconds do not (on one machine, one day, the same code measured a p50 of 19 and of
38 ms).

Statements come from templates × vocabulary (home, work, pets, food, hobbies, projects,
ports, tools, dates, meetings), about one in eight in Chinese; one in a hundred is an
agent-wide rule every user's search also sees. Everything is seeded, so two runs fill
the same store.
"""

from __future__ import annotations

import gc
import os
import random
import secrets
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from pydantic import SecretStr
from sqlalchemy import insert
from sqlmodel import Session

from sleepmem.api.app import create_app
from sleepmem.bench.corpus import QUERIES, RULES, TEMPLATES, pick
from sleepmem.core.errors import SleepmemError, ValidationError
from sleepmem.core.logs import get_logger
from sleepmem.core.settings import Settings
from sleepmem.evals.harness import eval_instance
from sleepmem.evals.metrics import percentile
from sleepmem.models import Memory, Scope
from sleepmem.pipelines import store as repo
from sleepmem.pipelines.memories import new_memory
from sleepmem.pipelines.ports import IndexFilter
from sleepmem.pipelines.read.cards import hit_ids
from sleepmem.pipelines.types import Candidate
from sleepmem.pipelines.write.index import upsert_memories
from sleepmem.reader import Reader, build_request
from sleepmem.resources import Resources
from sleepmem.runtime import ApiServer

log = get_logger("sleepmem.bench.search")

TENANT = "bench"
AGENT = "assistant"
INSERT_BATCH = 5000
WARMUP = 30

@dataclass(frozen=True, slots=True)
class Filled:
    owner: dict[str, str]  # memory id -> user ('' for agent-wide rules)
    attribute: dict[str, str]
    held: set[tuple[str, str]]  # (user, attribute) pairs some memory fills


def user_scope(i: int) -> Scope:
    return Scope(tenant=TENANT, agent=AGENT, user=f"user-{i:04d}")


def _memories(n: int, users: int, now: datetime, settings: Settings) -> list[Memory]:
    rng = random.Random(20240501)
    rows: list[Memory] = []
    for i in range(n):
        if i % 100 == 99:
            scope, mtype, attr = Scope(tenant=TENANT, agent=AGENT), "procedure", "rule"
            statement = f"{pick(rng, RULES)} (rule {i})"
        else:
            scope = user_scope(i % users)
            mtype, attr, make = TEMPLATES[rng.randrange(len(TEMPLATES))]
            statement = make(rng)
        valid_from = now - timedelta(days=rng.uniform(0, 730))
        cand = Candidate(
            type=mtype,
            statement=statement,
            provenance=[f"bench-{i}"],
            valid_from=valid_from,
            scope=scope,
            attribute=attr,
            importance=round(rng.uniform(0.2, 0.9), 2),
            confidence=round(rng.uniform(0.6, 1.0), 2),
        )
        mem = new_memory(
            cand, scope_key=scope.key, now=now, ttl=settings.ttl(mtype), extractor="bench"
        )
        # Hits are spread over the past months so the recency term has something to rank.
        mem.last_access = now - timedelta(days=rng.uniform(0, 120))
        rows.append(mem)
    return rows


def fill(res: Resources, *, memories: int, users: int) -> Filled:
    """Write ``memories`` rows to SQL and the index; returns who owns what."""
    now = datetime.now(UTC)
    rows = _memories(memories, users, now, res.settings)
    t0 = time.perf_counter()
    with Session(res.engine) as session:
        for start in range(0, len(rows), INSERT_BATCH):
            chunk = rows[start : start + INSERT_BATCH]
            session.execute(insert(Memory), [m.model_dump() for m in chunk])
        session.commit()
    sql_s = time.perf_counter() - t0
    t0 = time.perf_counter()
    ids = upsert_memories(rows, index=res.index, embedder=res.embedder)
    embed_s = time.perf_counter() - t0
    with Session(res.engine) as session:
        for start in range(0, len(ids), INSERT_BATCH):
            repo.mark_indexed(session, ids=ids[start : start + INSERT_BATCH])
        session.commit()
    t0 = time.perf_counter()
    res.index.maintain()
    log.info(
        "bench_filled",
        memories=len(rows),
        users=users,
        sql_s=round(sql_s, 1),
        index_s=round(embed_s, 1),
        maintain_s=round(time.perf_counter() - t0, 1),
    )
    return Filled(
        owner={m.id: m.user for m in rows},
        attribute={m.id: m.attribute for m in rows},
        held={(m.user, m.attribute) for m in rows},
    )


def _queries(n: int, users: int) -> list[tuple[int, str, str]]:
    """(user index, attribute wanted, query text), seeded."""
    rng = random.Random(7)
    out: list[tuple[int, str, str]] = []
    for _ in range(n):
        attr, make = QUERIES[rng.randrange(len(QUERIES))]
        out.append((rng.randrange(users), attr, make(rng)))
    return out


def bare_search(res: Resources, scope: Scope, text: str, *, k: int) -> float:
    """The baseline, timed in seconds: embed the query, one dense index search in its
    scope."""
    t = time.perf_counter()
    vector = res.embedder.embed([text], kind="query")[0]
    res.index.search_dense(vector, where=IndexFilter(scope=scope, now=datetime.now(UTC)), limit=k)
    return time.perf_counter() - t


def _ms(seconds: list[float]) -> dict[str, float]:
    ms = [s * 1000.0 for s in seconds]
    return {
        "p50_ms": round(percentile(ms, 50), 2),
        "p95_ms": round(percentile(ms, 95), 2),
        "p99_ms": round(percentile(ms, 99), 2),
    }


def _vs_baseline(timed: dict[str, float], baseline: dict[str, float]) -> dict[str, float]:
    """The search's p50 and p95 as multiples of the baseline's, from the reported figures."""
    return {f"{p}_vs_baseline": round(timed[f"{p}_ms"] / max(baseline[f"{p}_ms"], 1e-6), 2)
            for p in ("p50", "p95")}


@contextmanager
def serve(res: Resources) -> Iterator[str]:
    """The HTTP API on a loopback port in a thread of this process; yields its base URL."""
    server = ApiServer(create_app(resources=res), host="127.0.0.1", port=0).start()
    try:
        yield f"http://127.0.0.1:{server.port}"
    finally:
        server.stop(timeout=10)


def run_search_bench(
    settings: Settings,
    *,
    memories: int,
    users: int = 1000,
    queries: int = 300,
    k: int = 5,
    http: bool = True,
) -> dict[str, Any]:
    """Fill, then measure in-process and HTTP search latency; also sanity-check results."""
    if memories < 1 or users < 1 or queries < 1:
        raise ValidationError("memories", "memories, users and queries must be positive")
    users = min(users, memories)
    token = secrets.token_urlsafe(24)
    bench_settings = settings.model_copy(
        update={"auth_enabled": True, "api_keys": {TENANT: SecretStr(token)}}
    )
    started = time.perf_counter()
    with eval_instance(bench_settings, prefix="sleepmem-bench-") as res:
        t0 = time.perf_counter()
        filled = fill(res, memories=memories, users=users)
        fill_s = time.perf_counter() - t0
        plan = _queries(queries, users)
        # The fill leaves ~10^6 dead ORM objects behind; a server would have collected them
        # long before, so collect now instead of timing a full GC pass inside a search.
        gc.collect()
        load_1m = os.getloadavg()[0]
        reader = Reader(res)
        for u, _attr, text in plan[:WARMUP]:
            reader.search(build_request(text, scope=user_scope(u), k=k))
        latencies: list[float] = []
        baseline: list[float] = []
        foreign = hits = answerable = 0
        for n, (u, attr, text) in enumerate(plan):
            scope = user_scope(u)
            if n % 2:
                baseline.append(bare_search(res, scope, text, k=k))
            t = time.perf_counter()
            result = reader.search(build_request(text, scope=scope, k=k))
            latencies.append(time.perf_counter() - t)
            if not n % 2:
                baseline.append(bare_search(res, scope, text, k=k))
            # Every memory returned, those read inside a passage included.
            ids = hit_ids(result)
            mine = scope.user
            foreign += sum(filled.owner.get(i) not in (mine, "") for i in ids)
            # Quality sanity check: when the user has such a memory, is one in the top k?
            if (mine, attr) in filled.held:
                answerable += 1
                hits += any(filled.attribute.get(i) == attr for i in ids)
        over_http = _http_latencies(res, plan, k=k, token=token) if http else {}
    timed, base = _ms(latencies), _ms(baseline)
    report: dict[str, Any] = {
        "memories": memories,
        "users": users,
        "queries": queries,
        "k": k,
        **timed,
        **over_http,
        **{f"baseline_{name}": v for name, v in base.items()},
        **_vs_baseline(timed, base),
        # Other work on the machine shows up in the tail latencies: say how busy it was.
        "load_1m_at_start": round(load_1m, 2),
        "foreign_cards": foreign,
        "attribute_hit_rate": round(hits / answerable, 4) if answerable else None,
        "fill_seconds": round(fill_s, 1),
        "embedder": bench_settings.embedder,
        "index_backend": "edge",
        "seconds": round(time.perf_counter() - started, 1),
    }
    log.info("bench_search", **{k_: v for k_, v in report.items() if k_ != "embedder"})
    return report


def _http_latencies(
    res: Resources, plan: list[tuple[int, str, str]], *, k: int, token: str
) -> dict[str, float]:
    import httpx

    latencies: list[float] = []
    with (
        serve(res) as base,
        httpx.Client(
            base_url=base, headers={"Authorization": f"Bearer {token}"}, timeout=30.0
        ) as client,
    ):
        for i, (u, _attr, text) in enumerate([*plan[:WARMUP], *plan]):
            body = {"query": text, "scope": user_scope(u).model_dump(), "k": k}
            t = time.perf_counter()
            response = client.post("/v1/search", json=body)
            elapsed = time.perf_counter() - t
            if response.status_code != 200:
                raise SleepmemError(
                    f"POST /v1/search answered {response.status_code}: {response.text[:200]}"
                )
            if i >= WARMUP:
                latencies.append(elapsed)
    ms = _ms(latencies)
    return {"http_p50_ms": ms["p50_ms"], "http_p95_ms": ms["p95_ms"], "http_p99_ms": ms["p99_ms"]}
