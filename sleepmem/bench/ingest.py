"""The ingest benchmark: request path (SDK, HTTP) against raw redis-py, and drain throughput.

Everything runs in a namespace of its own on the configured Redis, whose keys are deleted
at the end; drain targets are a temporary SQLite file and, when a PostgreSQL URL is given,
rows of a tenant unique to the run, deleted afterwards. Raw baselines use the same payload
bytes in the same run, interleaved with the measured path so both see the same machine.

    sleepmem bench ingest --json [--pg-url postgresql+psycopg://postgres@127.0.0.1/db]
"""

from __future__ import annotations

import asyncio
import gc
import os
import socket
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx
import orjson
import redis
import sqlalchemy as sa

from sleepmem.adapters.redis.stream import FIELD, encode, ensure_group
from sleepmem.adapters.sql import make_engine
from sleepmem.bench.scratch import scratch_database
from sleepmem.client import Client
from sleepmem.core.children import spawn_owned, stop_child
from sleepmem.core.keys import Keys
from sleepmem.core.settings import Settings
from sleepmem.evals.metrics import percentile
from sleepmem.ingest.drain import drain_once
from sleepmem.ingest.validation import gc_paused, validate_event
from sleepmem.resources import redis_urls
from sleepmem.sdk import MemoryClient

CONTENT = (
    "Hi, I'd like to book a table for two at 7pm tomorrow. My wife is vegetarian and we "
    "both love Italian food; the order number from last time was 88231."
)
CHUNK = 1000
HTTP_KEY = "bench-key"
HTTP_WARMUP = 3000


def _event_fields(tenant: str, i: int) -> dict[str, Any]:
    return {
        "tenant": tenant,
        "agent": "bench-agent",
        "user": f"u{i % 500}",
        "session": f"s{i % 2000}",
        "content": CONTENT,
        "meta": {"channel": "chat", "turn": i},
    }


def run_ingest_bench(
    settings: Settings,
    *,
    n: int = 5000,
    batch_n: int = 50_000,
    http_n: int = 4000,
    http_batch_n: int = 40_000,
    http_clients: int = 16,
    drain_n: int = 100_000,
    pg_url: str | None = None,
) -> dict[str, Any]:
    """Run every part and return one flat dict (the JSON the CLI prints)."""
    # Embedded mode: the bench starts the data directory's server, so it stops it too.
    url, _broker, embedded = redis_urls(settings)
    run_id = uuid.uuid4().hex[:8]
    namespace = f"{settings.namespace}-bench-{run_id}"
    tenant = f"bench-{run_id}"
    raw = redis.Redis.from_url(url)
    out: dict[str, Any] = {"redis_url_kind": url.split(":", 1)[0], "n": n}
    try:
        with tempfile.TemporaryDirectory(prefix="sleepmem-bench-") as tmp:
            bench_settings = settings.model_copy(update={"namespace": namespace})
            out.update(_emit_latency(bench_settings, raw, url, tenant, n))
            out.update(_emit_batch(bench_settings, raw, url, tenant, batch_n))
            out.update(
                _http(bench_settings, url, Path(tmp), tenant, http_n, http_batch_n, http_clients)
            )
            servers: dict[str, str | None] = {"sqlite": None}
            if pg_url:
                servers["postgresql"] = pg_url
            for name, server in servers.items():
                with scratch_database(server, Path(tmp), name="drain") as sql_url:
                    out.update(_drain(bench_settings, raw, url, sql_url, name, tenant, drain_n))
                    # Named so a caller can check that this run's own database is gone.
                    out[f"drain_{name}_database"] = sa.engine.make_url(sql_url).database
    finally:
        for key in raw.scan_iter(match=f"{namespace}*", count=1000):
            raw.delete(key)
        raw.close()
        if embedded is not None:
            embedded.stop()
    out["floors"] = _floors(out)
    return out


# -- request path --------------------------------------------------------------------------


def _emit_latency(
    settings: Settings, raw: redis.Redis, url: str, tenant: str, n: int
) -> dict[str, Any]:
    keys = Keys(settings.namespace)
    raw_key = f"{keys.namespace}:raw-xadd"
    payload = encode(validate_event(_event_fields(tenant, 0)))
    emit_us: list[float] = []
    xadd_us: list[float] = []
    with MemoryClient(settings, redis_url=url) as client:
        for i in range(n + 500):
            fields = _event_fields(tenant, i)
            t0 = time.perf_counter_ns()
            client.emit(**fields)
            t1 = time.perf_counter_ns()
            raw.xadd(raw_key, {FIELD: payload})
            t2 = time.perf_counter_ns()
            if i >= 500:  # warm-up: connections, caches
                emit_us.append((t1 - t0) / 1000)
                xadd_us.append((t2 - t1) / 1000)
    raw.delete(raw_key, keys.events)
    return {
        "emit_p50_us": round(percentile(emit_us, 50), 1),
        "emit_p99_us": round(percentile(emit_us, 99), 1),
        "xadd_p50_us": round(percentile(xadd_us, 50), 1),
        "xadd_p99_us": round(percentile(xadd_us, 99), 1),
    }


def _emit_batch(
    settings: Settings, raw: redis.Redis, url: str, tenant: str, total: int
) -> dict[str, Any]:
    keys = Keys(settings.namespace)
    raw_key = f"{keys.namespace}:raw-xadd"
    payload = encode(validate_event(_event_fields(tenant, 0)))
    emit_s = xadd_s = 0.0
    done = 0
    with MemoryClient(settings, redis_url=url) as client:
        while done < total:
            size = min(CHUNK, total - done)
            batch = [_event_fields(tenant, done + i) for i in range(size)]
            # Both sides timed with the collector off, after a collection that is not timed:
            # emit_many defers its collections to after the batch, and they would otherwise
            # land inside the raw side's timing.
            gc.collect()
            with gc_paused():
                t0 = time.perf_counter()
                client.emit_many(batch)
                t1 = time.perf_counter()
                pipe = raw.pipeline(transaction=False)
                for _ in range(size):
                    pipe.xadd(raw_key, {FIELD: payload})
                pipe.execute()
                t2 = time.perf_counter()
            emit_s += t1 - t0
            xadd_s += t2 - t1
            done += size
            if done % (10 * CHUNK) == 0:  # keep Redis memory flat during long runs
                raw.delete(raw_key, keys.events)
    raw.delete(raw_key, keys.events)
    return {
        "emit_batch_eps": round(total / emit_s),
        "xadd_pipeline_eps": round(total / xadd_s),
        "batch_size": CHUNK,
    }


# -- HTTP ----------------------------------------------------------------------------------


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


@contextmanager
def _server(settings: Settings, url: str, data_dir: Path, tenant: str) -> Iterator[str]:
    """``sleepmem api`` in a subprocess (its own GIL, production logging) on a loopback port."""
    port = _free_port()
    env = {
        **os.environ,
        "SLEEPMEM_REDIS_URL": url,
        "SLEEPMEM_NAMESPACE": settings.namespace,
        "SLEEPMEM_DATA_DIR": str(data_dir / "api"),
        "SLEEPMEM_DATABASE_URL": f"sqlite:///{data_dir / 'api.db'}",
        "SLEEPMEM_INDEX_BACKEND": "edge",  # one host: the in-process index, said explicitly
        "SLEEPMEM_API_KEYS": orjson.dumps({tenant: HTTP_KEY}).decode(),
        "SLEEPMEM_AUTH_ENABLED": "true",
        "SLEEPMEM_HOST": "127.0.0.1",
        "SLEEPMEM_PORT": str(port),
    }
    cmd = [sys.executable, "-c", "from sleepmem.cli import app; app()", "api"]
    proc = spawn_owned(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                if httpx.get(f"{base}/healthz", timeout=1).status_code == 200:
                    break
            except httpx.TransportError:
                pass
            if proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError("bench API server did not start")
            time.sleep(0.1)
        yield base
    finally:
        stop_child(proc)


def _http(
    settings: Settings,
    url: str,
    tmp: Path,
    tenant: str,
    n: int,
    batch_total: int,
    clients: int,
) -> dict[str, Any]:
    with _server(settings, url, tmp, tenant) as base:
        # Warm-up, not timed: a fresh server's first thousands of requests include its
        # first full GC passes over the import-time heap (50-100 ms each, measured). A run
        # too small to be measured (a smoke test) gets a warm-up of its own size.
        asyncio.run(_http_single(base, tenant, min(HTTP_WARMUP, max(n, clients + 1)), clients))
        # The load generator must not time itself: this process's heap is large by now, and
        # one full collection here stalls all 16 clients at once (tens of ms, measured).
        with gc_paused():
            single_ms, single_s = asyncio.run(_http_single(base, tenant, n, clients, clients))
            batch_s, batch_ms = asyncio.run(_http_batches(base, tenant, batch_total, 4))
            documented = _client(base, tenant, n // 2, batch_total // 2)
    keys = Keys(settings.namespace)
    redis.Redis.from_url(url).delete(keys.events)
    return {
        "http_p50_ms": round(percentile(single_ms, 50), 2),
        "http_p99_ms": round(percentile(single_ms, 99), 2),
        "http_single_rps": round(len(single_ms) / single_s),
        "http_clients": clients,
        "http_eps": round(batch_total / batch_s),
        "http_batch_p50_ms": round(percentile(batch_ms, 50), 1),
        **documented,
    }


def _client(base: str, tenant: str, n: int, batch_total: int) -> dict[str, Any]:
    """The documented client (sleepmem.Client, httpx, one connection), as an agent uses it:
    one emit at a time, then emit_many in batches of 1,000."""

    with Client(base, HTTP_KEY, tenant=tenant) as client:
        for i in range(200):  # warm the connection and the server's path
            client.emit(_event_fields(tenant, i))
        samples: list[float] = []
        for i in range(n):
            event = _event_fields(tenant, i)
            t0 = time.perf_counter()
            client.emit(event)
            samples.append((time.perf_counter() - t0) * 1000)
        events = [_event_fields(tenant, i) for i in range(batch_total)]
        t0 = time.perf_counter()
        client.emit_many(events)
        batch_s = time.perf_counter() - t0
    return {
        "client_emit_p50_ms": round(percentile(samples, 50), 2),
        "client_emit_p99_ms": round(percentile(samples, 99), 2),
        "client_emit_many_eps": round(batch_total / batch_s),
    }


async def _http_single(
    base: str, tenant: str, n: int, clients: int, warmup: int = 0
) -> tuple[list[float], float]:
    """``clients`` keep-alive connections, each posting one event at a time.

    A bare HTTP/1.1 client rather than httpx here: measured on this machine, httpx's async
    pool tops out near 350 requests/s at 16 connections, so it measured itself, not the
    server (the same server answers ~1,500/s to this client under the same load).
    """
    host, port = base.removeprefix("http://").split(":")
    head = (
        f"POST /v1/events HTTP/1.1\r\nHost: {host}\r\nAuthorization: Bearer {HTTP_KEY}\r\n"
        "Content-Type: application/json\r\nContent-Length: "
    ).encode()
    requests = [
        head + b"%d\r\n\r\n" % len(body) + body
        for body in (orjson.dumps(_event_fields(tenant, i)) for i in range(n))
    ]
    latencies: list[float] = []

    async def worker(start: int) -> None:
        reader, writer = await asyncio.open_connection(host, int(port))
        try:
            for i in range(start, n, clients):
                t0 = time.perf_counter()
                writer.write(requests[i])
                status, length = _response_head(await reader.readuntil(b"\r\n\r\n"))
                await reader.readexactly(length)
                elapsed = (time.perf_counter() - t0) * 1000
                if status != 202:
                    raise RuntimeError(f"HTTP {status}")
                if i >= warmup:  # the first requests also open the connections
                    latencies.append(elapsed)
        finally:
            writer.close()

    t0 = time.perf_counter()
    await asyncio.gather(*(worker(c) for c in range(clients)))
    return latencies, time.perf_counter() - t0


def _response_head(head: bytes) -> tuple[int, int]:
    lines = head.split(b"\r\n")
    length = 0
    for line in lines[1:]:
        name, _, value = line.partition(b":")
        if name.strip().lower() == b"content-length":
            length = int(value)
    return int(lines[0].split()[1]), length


async def _http_batches(
    base: str, tenant: str, total: int, clients: int
) -> tuple[float, list[float]]:
    headers = {"Authorization": f"Bearer {HTTP_KEY}", "Content-Type": "application/json"}
    bodies = [
        orjson.dumps({"events": [_event_fields(tenant, s + i) for i in range(CHUNK)]})
        for s in range(0, total, CHUNK)
    ]
    latencies: list[float] = []
    async with httpx.AsyncClient(base_url=base, headers=headers, timeout=60) as http:

        async def worker(start: int) -> None:
            for i in range(start, len(bodies), clients):
                t0 = time.perf_counter()
                resp = await http.post("/v1/events", content=bodies[i])
                latencies.append((time.perf_counter() - t0) * 1000)
                if resp.status_code != 202:
                    raise RuntimeError(f"HTTP {resp.status_code}")

        t0 = time.perf_counter()
        await asyncio.gather(*(worker(c) for c in range(clients)))
        return time.perf_counter() - t0, latencies


# -- drain ---------------------------------------------------------------------------------


def _drain(
    settings: Settings,
    raw: redis.Redis,
    url: str,
    sql_url: str,
    name: str,
    tenant: str,
    total: int,
) -> dict[str, Any]:
    drain_settings = settings.model_copy(
        update={"namespace": f"{settings.namespace}-drain-{name}", "database_url": sql_url}
    )
    keys = Keys(drain_settings.namespace)
    engine = make_engine(sql_url)
    ids: set[str] = set()
    try:
        with MemoryClient(drain_settings, redis_url=url) as client:
            for start in range(0, total, CHUNK):
                size = min(CHUNK, total - start)
                ids.update(
                    client.emit_many([_event_fields(tenant, start + i) for i in range(size)])
                )
        ensure_group(raw, keys)
        t0 = time.perf_counter()
        batches = 0
        while True:
            report = drain_once(
                redis=raw, keys=keys, engine=engine, settings=drain_settings, consumer="bench"
            )
            if report.entries == 0:
                break
            batches += 1
        elapsed = time.perf_counter() - t0
        table = sa.table("raw_event", sa.column("event_id"), sa.column("tenant"))
        with engine.connect() as conn:
            stored = [
                r[0]
                for r in conn.execute(sa.select(table.c.event_id).where(table.c.tenant == tenant))
            ]
        return {
            f"drain_eps_{name}": round(total / elapsed),
            f"drain_{name}_lost": len(ids - set(stored)),
            f"drain_{name}_duplicated": len(stored) - len(set(stored)),
            f"drain_{name}_batches": batches,
        }
    finally:
        engine.dispose()
        for key in raw.scan_iter(match=f"{keys.namespace}*", count=1000):
            raw.delete(key)


def _floors(r: dict[str, Any]) -> dict[str, bool]:
    floors = {
        "emit_p99_le_1ms": r["emit_p99_us"] <= 1000,
        "emit_p50_le_2x_xadd": r["emit_p50_us"] <= 2 * r["xadd_p50_us"],
        "emit_batch_ge_50k": r["emit_batch_eps"] >= 50_000,
        "emit_batch_ge_half_pipeline": r["emit_batch_eps"] >= 0.5 * r["xadd_pipeline_eps"],
        "http_batch_ge_20k": r["http_eps"] >= 20_000,
        "http_p99_le_10ms": r["http_p99_ms"] <= 10,
    }
    for name in ("sqlite", "postgresql"):
        if f"drain_eps_{name}" in r:
            floors[f"drain_{name}_ge_5k"] = r[f"drain_eps_{name}"] >= 5000
            floors[f"drain_{name}_exact"] = (
                r[f"drain_{name}_lost"] == 0 and r[f"drain_{name}_duplicated"] == 0
            )
    return floors
