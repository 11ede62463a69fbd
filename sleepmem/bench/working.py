"""Working-memory benchmarks: checkpoint put/get latency, and the context of a turn.

``run_checkpoint_bench``: put/get of a realistic checkpoint (plan, completed steps with
idempotency keys, variables, tool results; ~2 KB of JSON) through
:class:`~sleepmem.working.WorkingMemory` in-process and through ``PUT/GET /v1/checkpoints``
over loopback HTTP, against a same-run baseline: one raw ``HSET`` of the same bytes.

``run_context_bench``: a tenant filled with N memories (the search bench's fill, real
embeddings), then a scripted 100-turn conversation with one user. Every few turns
something changes: a standing preference is learned (the prefix must change), a memory
shown in the prefix is retired (it must change), a plain fact is learned (it must not);
every turn writes the session checkpoint. Reported: how often the prefix was
byte-identical when no prefix memory changed and different when one did, the worst
total against the budget, and context latency against a same-run baseline: the plain
search (k=10) of the same query, which the dynamic part is built on.
"""

from __future__ import annotations

import gc
import os
import random
import secrets
import time
from datetime import UTC, datetime
from typing import Any

import orjson
from pydantic import SecretStr
from sqlalchemy import insert, update
from sqlmodel import Session, col

from sleepmem.bench.corpus import QUERIES
from sleepmem.bench.search import TENANT, fill, serve, user_scope
from sleepmem.context import ContextBuilder
from sleepmem.core.errors import SleepmemError, ValidationError
from sleepmem.core.logs import get_logger
from sleepmem.core.settings import Settings
from sleepmem.core.tokens import count_tokens
from sleepmem.evals.harness import eval_instance
from sleepmem.evals.metrics import percentile
from sleepmem.models import Memory, MemoryStatus
from sleepmem.pipelines import store as repo
from sleepmem.pipelines.memories import new_memory
from sleepmem.pipelines.types import Candidate
from sleepmem.pipelines.write.index import payload_for, upsert_memories
from sleepmem.reader import Reader, build_request
from sleepmem.resources import Resources
from sleepmem.working import WorkingMemory

log = get_logger("sleepmem.bench.working")

WARMUP = 50
CHECKPOINT_FLOORS = {"put_p99_ms": 2.0, "get_p99_ms": 2.0, "http_put_p99_ms": 10.0,
                     "http_get_p99_ms": 10.0}
CONTEXT_P95_FLOOR_MS = 25.0


def sample_state(step: int) -> dict[str, Any]:
    """A checkpoint of an agent halfway through a travel booking (about 2 KB of JSON)."""
    done = [
        {"key": f"step-{i}:{'abcdef'[i % 6]}", "step": f"completed step {i} of the booking",
         "result": {"ok": True, "ref": f"R{i:05d}"}}
        for i in range(min(step, 8))
    ]
    return {
        "goal": "Book a train from Munich to Vienna on Friday morning, seat by the window",
        "plan": ["search trains", "compare prices", "hold a seat", "pay", "email the ticket",
                 "add to calendar"],
        "current_step": f"step {step}",
        "completed": done,
        "variables": {"budget_eur": 120, "passengers": 1, "class": "second",
                      "date": "2026-12-04", "from": "München Hbf", "to": "Wien Hbf"},
        "tool_results": [
            {"tool": "rail.search", "result": {"trains": [
                {"id": f"RJ {60 + i}", "dep": f"0{7 + i}:14", "price": 39 + 10 * i}
                for i in range(5)]}},
        ],
        "verified": ["RJ 62 leaves München Hbf at 09:14 and reaches Wien Hbf at 13:14."],
    }


def _ms(seconds: list[float], prefix: str = "") -> dict[str, float]:
    ms = [s * 1000.0 for s in seconds]
    return {f"{prefix}p50_ms": round(percentile(ms, 50), 3),
            f"{prefix}p95_ms": round(percentile(ms, 95), 3),
            f"{prefix}p99_ms": round(percentile(ms, 99), 3)}


def run_checkpoint_bench(settings: Settings, *, n: int = 2000, http_n: int = 1000,
                         http: bool = True) -> dict[str, Any]:
    if n < 1 or http_n < 1:
        raise ValidationError("n", "n and http_n must be positive")
    token = secrets.token_urlsafe(24)
    cfg = settings.model_copy(update={"auth_enabled": True,
                                      "api_keys": {TENANT: SecretStr(token)}})
    with eval_instance(cfg, prefix="sleepmem-bench-ckpt-") as res:
        wm = WorkingMemory(res)
        scope = {**user_scope(1).model_dump(), "session": "bench-inproc"}
        wm.put(scope, sample_state(0), base_version=0)
        version = 1
        states = [sample_state(i % 10) for i in range(10)]
        doc_size = sum(len(orjson.dumps(s)) for s in states) // len(states)
        gc.collect()
        load = os.getloadavg()[0]
        put_s: list[float] = []
        get_s: list[float] = []
        for i in range(WARMUP + n):
            t = time.perf_counter()
            version = wm.put(scope, states[i % 10], base_version=version).version
            put_s.append(time.perf_counter() - t)
            t = time.perf_counter()
            wm.get(scope)
            get_s.append(time.perf_counter() - t)
        put_s, get_s = put_s[WARMUP:], get_s[WARMUP:]
        # Baseline: the bare Redis write of a document of the same size.
        blob = b"x" * doc_size
        raw_s: list[float] = []
        key = f"{res.keys.namespace}:bench:raw"
        for _ in range(WARMUP + n):
            t = time.perf_counter()
            res.redis.hset(key, mapping={"v": 1, "doc": blob})
            raw_s.append(time.perf_counter() - t)
        raw_s = raw_s[WARMUP:]
        report: dict[str, Any] = {
            "n": n, "state_bytes_mean": doc_size,
            **{f"put_{k}": v for k, v in _ms(put_s).items()},
            **{f"get_{k}": v for k, v in _ms(get_s).items()},
            **{f"raw_hset_{k}": v for k, v in _ms(raw_s).items()},
        }
        report["put_p50_vs_raw_hset"] = round(report["put_p50_ms"] / report["raw_hset_p50_ms"], 2)
        if http:
            report.update(_http_checkpoints(res, http_n, token))
        report["load_1m_at_start"] = round(load, 2)
        report["floors"] = CHECKPOINT_FLOORS
        report["floors_met"] = all(
            report[k] <= v for k, v in CHECKPOINT_FLOORS.items() if k in report)
    log.info("bench_checkpoint", **{k: v for k, v in report.items() if k != "floors"})
    return report


def _http_checkpoints(res: Resources, n: int, token: str) -> dict[str, float]:
    import httpx

    scope = {**user_scope(2).model_dump(), "session": "bench-http"}
    key = "/".join(f"{lvl[0]}={scope[lvl]}" for lvl in
                   ("tenant", "agent", "user", "project", "session"))
    put_s: list[float] = []
    get_s: list[float] = []
    states = [sample_state(i % 10) for i in range(10)]
    with serve(res) as base, httpx.Client(
        base_url=base, headers={"Authorization": f"Bearer {token}"}, timeout=30.0
    ) as client:
        version = 0
        for i in range(WARMUP + n):
            t = time.perf_counter()
            resp = client.put("/v1/checkpoints", json={"scope": scope, "state": states[i % 10],
                                                       "base_version": version})
            put_s.append(time.perf_counter() - t)
            if resp.status_code != 200:
                raise SleepmemError(f"PUT /v1/checkpoints answered {resp.status_code}: "
                                    f"{resp.text[:200]}")
            version = resp.json()["version"]
            t = time.perf_counter()
            got = client.get("/v1/checkpoints", params={"scope": key})
            get_s.append(time.perf_counter() - t)
            if got.status_code != 200:
                raise SleepmemError(f"GET /v1/checkpoints answered {got.status_code}")
    return {**{f"http_put_{k}": v for k, v in _ms(put_s[WARMUP:]).items()},
            **{f"http_get_{k}": v for k, v in _ms(get_s[WARMUP:]).items()}}


# -- context ------------------------------------------------------------------------------

_NEW_PREFERENCES = [
    "I prefer window seats on trains.", "I like my coffee black.",
    "我喜欢安静的酒店房间。", "I prefer answers with bullet points.",
    "I don't eat meat on Fridays.", "I prefer metric units.",
    "我更喜欢用中文回答。", "I like to travel light, one bag only.",
]
_NEW_FACTS = [
    "My passport expires in March 2028.", "The conference is in Hall B.",
    "我的航班号是CA961。", "The hotel is two blocks from the station.",
]


def _write(res: Resources, user: int, mtype: str, statement: str, attribute: str,
           now: datetime, turn: int) -> Memory:
    scope = user_scope(user)
    mem = new_memory(
        Candidate(type=mtype, statement=statement, provenance=[f"bench-ctx-{turn}"],
                  valid_from=now, scope=scope, attribute=attribute, importance=0.6),
        scope_key=scope.key, now=now, ttl=res.settings.ttl(mtype), extractor="bench",
    )
    with Session(res.engine) as session:
        session.execute(insert(Memory), [mem.model_dump()])
        session.commit()
    ids = upsert_memories([mem], index=res.index, embedder=res.embedder)
    with Session(res.engine) as session:
        repo.mark_indexed(session, ids=ids)
        session.commit()
    return mem


def _retire(res: Resources, memory_id: str, now: datetime) -> None:
    with Session(res.engine) as session:
        session.execute(update(Memory).where(col(Memory.id) == memory_id).values(
            status=MemoryStatus.superseded.value, invalidated_at=now, valid_to=now))
        session.commit()
        mem = session.get(Memory, memory_id)
        if mem is not None:
            res.index.set_payload([memory_id], payload_for(mem))


def run_context_bench(settings: Settings, *, memories: int = 100_000, users: int = 1000,
                      turns: int = 100, budget: int = 2000) -> dict[str, Any]:
    if memories < 1 or users < 1 or turns < 1:
        raise ValidationError("memories", "memories, users and turns must be positive")
    if budget < 16:
        raise ValidationError("budget", "must be at least 16 tokens")
    users = min(users, memories)
    started = time.perf_counter()
    with eval_instance(settings, prefix="sleepmem-bench-ctx-") as res:
        t0 = time.perf_counter()
        fill(res, memories=memories, users=users)
        fill_s = time.perf_counter() - t0
        user = 7 % users
        scope = {**user_scope(user).model_dump(), "session": "bench-conversation"}
        builder = ContextBuilder(res)
        wm = builder.working
        rng = random.Random(16)
        # Warm the index, the embedder and the tokenizer off the clock.
        for attr_query in QUERIES[:5]:
            builder.build({"scope": scope, "query": attr_query[1](rng), "budget_tokens": budget})
        gc.collect()
        load = os.getloadavg()[0]
        latencies: list[float] = []
        search_s: list[float] = []
        reader = Reader(res)
        version = 0
        previous: str | None = None
        same_ok = same_total = changed_ok = changed_total = 0
        over_budget = 0
        worst = 0
        prefs = iter(_NEW_PREFERENCES * 10)
        facts = iter(_NEW_FACTS * 20)
        kinds: dict[str, int] = {"preference_added": 0, "prefix_memory_retired": 0,
                                 "fact_added": 0, "none": 0}
        last_prefix_ids: list[str] = []
        for i in range(turns):
            now = datetime.now(UTC)
            change = "none"
            if i and i % 10 == 0:
                _write(res, user, "preference", next(prefs), "bench_pref", now, i)
                change = "preference_added"
            elif i % 10 == 5 and last_prefix_ids:
                _retire(res, last_prefix_ids[len(last_prefix_ids) // 2], now)
                change = "prefix_memory_retired"
            elif i % 10 == 3:
                _write(res, user, "fact", next(facts), "bench_fact", now, i)
                change = "fact_added"
            kinds[change] += 1
            version = wm.put(scope, sample_state(i), base_version=version).version
            _attr, make = QUERIES[rng.randrange(len(QUERIES))]
            query = make(rng)
            # Baseline in the same run: the plain search the dynamic part is built on.
            t = time.perf_counter()
            reader.search(build_request(query, scope=user_scope(user), k=10))
            search_s.append(time.perf_counter() - t)
            t = time.perf_counter()
            ctx = builder.build({"scope": scope, "query": query, "budget_tokens": budget})
            latencies.append(time.perf_counter() - t)
            real = count_tokens(ctx.prefix.text) + count_tokens(ctx.dynamic.text)
            worst = max(worst, real)
            over_budget += real > budget
            if previous is not None:
                if change in ("preference_added", "prefix_memory_retired"):
                    changed_total += 1
                    changed_ok += ctx.prefix.text != previous
                else:
                    same_total += 1
                    same_ok += ctx.prefix.text == previous
            previous = ctx.prefix.text
            last_prefix_ids = [it.id for it in ctx.prefix.items]
        report: dict[str, Any] = {
            "memories": memories, "users": users, "turns": turns, "budget_tokens": budget,
            "prefix_identical_when_unchanged": round(same_ok / same_total, 4)
            if same_total else None,
            "prefix_changed_when_changed": round(changed_ok / changed_total, 4)
            if changed_total else None,
            "turns_unchanged": same_total, "turns_changed": changed_total,
            "changes": kinds,
            "turns_over_budget": over_budget, "max_tokens": worst,
            **{f"context_{k}": v for k, v in _ms(latencies).items()},
            **{f"search_{k}": v for k, v in _ms(search_s).items()},
            "context_p95_floor_ms": CONTEXT_P95_FLOOR_MS,
            "load_1m_at_start": round(load, 2),
            "fill_seconds": round(fill_s, 1),
            "embedder": settings.embedder,
            "seconds": round(time.perf_counter() - started, 1),
        }
        report["context_p95_vs_search_p95"] = round(
            report["context_p95_ms"] / report["search_p95_ms"], 2)
        report["floors_met"] = bool(
            report["prefix_identical_when_unchanged"] in (None, 1.0)
            and report["prefix_changed_when_changed"] in (None, 1.0)
            and over_budget == 0
            and report["context_p95_ms"] <= CONTEXT_P95_FLOOR_MS
        )
    log.info("bench_context", **{k: v for k, v in report.items() if k != "changes"})
    return report
