"""The drain: stream entries become raw_event rows exactly once, whatever dies on the way."""

from __future__ import annotations

import io
import os
import select
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import orjson
import pytest
import redis as redis_lib
import sqlalchemy as sa
import structlog
from sqlalchemy.engine import Engine

from sleepmem.adapters.redis import stream
from sleepmem.core.errors import TransientError
from sleepmem.core.keys import Keys
from sleepmem.core.logs import configure_logging
from sleepmem.core.settings import Settings
from sleepmem.ingest.drain import DrainReport, drain_once, run_drain_loop
from sleepmem.models.events import Event
from sleepmem.models.scope import Scope
from sleepmem.sdk import MemoryClient


@pytest.fixture
def cfg(settings: Settings, sql_url: str) -> Settings:
    """The test's settings, pointed at the parametrised database (SQLite, then PostgreSQL)."""
    return settings.model_copy(update={"database_url": sql_url})


@pytest.fixture
def client(cfg: Settings) -> Iterator[MemoryClient]:
    with MemoryClient(cfg, tenant="acme", agent="bot", user="u1") as c:
        yield c


def drain_all(
    redis: redis_lib.Redis, keys: Keys, engine: Engine, cfg: Settings, consumer: str = "c1"
) -> DrainReport:
    totals = DrainReport(consumer=consumer)
    while True:
        report = drain_once(redis=redis, keys=keys, engine=engine, settings=cfg, consumer=consumer)
        if report.entries == 0:
            return totals
        totals.add(report)


def rows(engine: Engine, table: str = "raw_event") -> list[dict[str, Any]]:
    with engine.connect() as conn:
        return [dict(r._mapping) for r in conn.execute(sa.text(f"SELECT * FROM {table}"))]


def pending(redis: redis_lib.Redis, keys: Keys) -> int:
    return stream.backlog(redis, keys)["pending"]


class TestIdempotentDrain:
    def test_every_emitted_event_becomes_one_row_and_leaves_the_stream(
        self,
        client: MemoryClient,
        redis: redis_lib.Redis,
        keys: Keys,
        engine: Engine,
        cfg: Settings,
    ) -> None:
        ids = client.emit_many([{"content": f"m{i}"} for i in range(50)])
        report = drain_all(redis, keys, engine, cfg)
        assert report.inserted == 50
        assert sorted(r["event_id"] for r in rows(engine)) == sorted(ids)
        assert stream.backlog(redis, keys) == {"length": 0, "pending": 0}

    def test_the_same_event_emitted_twice_gives_one_row(
        self,
        client: MemoryClient,
        redis: redis_lib.Redis,
        keys: Keys,
        engine: Engine,
        cfg: Settings,
    ) -> None:
        client.emit(event_id="evt-1", content="first")
        client.emit(event_id="evt-1", content="first")  # same batch
        drain_all(redis, keys, engine, cfg)
        client.emit(event_id="evt-1", content="first")  # a later batch
        report = drain_all(redis, keys, engine, cfg)
        assert report.duplicates == 1 and report.inserted == 0
        assert [r["event_id"] for r in rows(engine)] == ["evt-1"]
        assert stream.backlog(redis, keys) == {"length": 0, "pending": 0}

    def test_a_row_carries_its_consolidation_scope_and_session(
        self,
        client: MemoryClient,
        redis: redis_lib.Redis,
        keys: Keys,
        engine: Engine,
        cfg: Settings,
    ) -> None:
        client.emit(content="hi", project="p1", session="s9", meta={"channel": "chat"})
        drain_all(redis, keys, engine, cfg)
        (row,) = rows(engine)
        owner = Scope(tenant="acme", agent="bot", user="u1", project="p1")
        assert row["scope_key"] == owner.key
        assert row["session"] == "s9"
        meta = row["meta"] if isinstance(row["meta"], dict) else orjson.loads(row["meta"])
        assert meta == {"channel": "chat"}


class TestScopeState:
    def test_pending_count_and_latest_event_time_are_kept_per_scope(
        self,
        client: MemoryClient,
        redis: redis_lib.Redis,
        keys: Keys,
        engine: Engine,
        cfg: Settings,
    ) -> None:
        t0 = datetime(2024, 5, 1, 12, tzinfo=UTC)
        client.emit_many(
            [
                {"content": "a", "at": t0 + timedelta(minutes=5), "session": "s1"},
                {"content": "b", "at": t0, "session": "s2"},  # older, arrives later
                {"content": "c", "at": t0, "user": "u2"},
            ]
        )
        drain_all(redis, keys, engine, cfg)
        client.emit(event_id="late", content="d", at=t0 - timedelta(days=1))
        drain_all(redis, keys, engine, cfg)
        states = {r["user"]: r for r in rows(engine, "scope_state")}
        assert states["u1"]["pending_count"] == 3  # sessions share their owner scope
        assert states["u2"]["pending_count"] == 1
        last = states["u1"]["last_event_at"]
        last = last if isinstance(last, datetime) else datetime.fromisoformat(last)
        assert last.replace(tzinfo=UTC) == t0 + timedelta(minutes=5)

    def test_duplicates_do_not_count_as_pending(
        self,
        client: MemoryClient,
        redis: redis_lib.Redis,
        keys: Keys,
        engine: Engine,
        cfg: Settings,
    ) -> None:
        for _ in range(3):
            client.emit(event_id="same", content="x")
            drain_all(redis, keys, engine, cfg)
        assert [r["pending_count"] for r in rows(engine, "scope_state")] == [1]

    def test_a_session_end_event_marks_the_scope(
        self,
        client: MemoryClient,
        redis: redis_lib.Redis,
        keys: Keys,
        engine: Engine,
        cfg: Settings,
    ) -> None:
        client.emit(content="bye")
        drain_all(redis, keys, engine, cfg)
        assert not rows(engine, "scope_state")[0]["session_end"]
        client.emit(kind="session_end", session="s1")
        drain_all(redis, keys, engine, cfg)
        assert rows(engine, "scope_state")[0]["session_end"]


# A drain in another process that stops dead at a chosen point, to be killed there.
CHILD = """
import sys, time
import redis
from sleepmem.ingest import drain
from sleepmem.adapters.redis import stream
from sleepmem.adapters.sql import make_engine
from sleepmem.core.keys import Keys
from sleepmem.core.settings import Settings

redis_url, namespace, sql_url, window = sys.argv[1:5]
settings = Settings(redis_url=redis_url, namespace=namespace, database_url=sql_url, _env_file=None)

def stop_here(*args, **kwargs):
    print("PAUSED", flush=True)
    time.sleep(3600)

if window == "after_commit":
    stream.ack = stop_here          # rows committed, entries not acknowledged
else:
    drain._insert = stop_here       # entries read, nothing inserted
drain.drain_once(
    redis=redis.Redis.from_url(redis_url), keys=Keys(namespace),
    engine=make_engine(sql_url), settings=settings, consumer="doomed",
)
"""


def kill_mid_batch(cfg: Settings, sql_url: str, window: str) -> None:
    proc = subprocess.Popen(
        [sys.executable, "-c", CHILD, str(cfg.redis_url), cfg.namespace, sql_url, window],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
    )
    assert proc.stdout is not None
    try:
        ready, _, _ = select.select([proc.stdout], [], [], 60)
        assert ready and proc.stdout.readline().strip() == b"PAUSED", "child never paused"
    finally:
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait()


class TestCrashRecovery:
    @pytest.mark.parametrize("window", ["after_commit", "before_commit"])
    def test_a_consumer_killed_mid_batch_leaves_exactly_one_row_per_event(
        self,
        client: MemoryClient,
        redis: redis_lib.Redis,
        keys: Keys,
        engine: Engine,
        cfg: Settings,
        sql_url: str,
        window: str,
    ) -> None:
        ids = client.emit_many([{"content": f"m{i}"} for i in range(40)])
        kill_mid_batch(cfg, sql_url, window)
        assert pending(redis, keys) == 40  # read by the dead consumer, never acknowledged

        rescuer = cfg.model_copy(update={"claim_idle_ms": 0})
        report = drain_all(redis, keys, engine, rescuer, consumer="rescuer")
        assert report.claimed == 40
        assert report.inserted == (0 if window == "after_commit" else 40)
        stored = [r["event_id"] for r in rows(engine)]
        assert sorted(stored) == sorted(ids)
        assert stream.backlog(redis, keys) == {"length": 0, "pending": 0}

    def test_entries_held_by_a_live_consumer_are_not_claimed_early(
        self,
        client: MemoryClient,
        redis: redis_lib.Redis,
        keys: Keys,
        engine: Engine,
        cfg: Settings,
    ) -> None:
        client.emit_many([{"content": "x"}] * 5)
        stream.ensure_group(redis, keys)
        stream.read_new(redis, keys, consumer="busy", count=10, block_ms=None)
        report = drain_once(redis=redis, keys=keys, engine=engine, settings=cfg, consumer="other")
        assert report.entries == 0  # claim_idle_ms (30 s) has not passed
        assert pending(redis, keys) == 5


def poison(redis: redis_lib.Redis, keys: Keys, payload: bytes) -> str:
    return str(redis.xadd(keys.events, {stream.FIELD: payload}).decode())


class TestPoisonEntries:
    def test_a_bad_entry_is_dead_lettered_after_max_deliveries_and_blocks_nothing(
        self,
        client: MemoryClient,
        redis: redis_lib.Redis,
        keys: Keys,
        engine: Engine,
        cfg: Settings,
    ) -> None:
        retry = cfg.model_copy(update={"max_deliveries": 3, "claim_idle_ms": 0})
        client.emit(content="before")
        garbage = poison(redis, keys, b"{not json")
        invalid = poison(redis, keys, orjson.dumps({"tenant": "acme", "content": "no agent"}))
        client.emit(content="after")

        first = drain_once(redis=redis, keys=keys, engine=engine, settings=retry, consumer="c1")
        assert first.inserted == 2 and first.retrying == 2  # the good ones are not held up
        assert sorted(r["content"] for r in rows(engine)) == ["after", "before"]

        second = drain_once(redis=redis, keys=keys, engine=engine, settings=retry, consumer="c1")
        assert (second.claimed, second.dead_lettered, second.retrying) == (2, 0, 2)
        third = drain_once(redis=redis, keys=keys, engine=engine, settings=retry, consumer="c1")
        assert third.dead_lettered == 2

        letters = {r["stream_id"]: r for r in rows(engine, "dead_letter")}
        assert set(letters) == {garbage, invalid}
        assert letters[garbage]["error"] == "unreadable entry: JSONDecodeError"
        assert "agent: this field is required" in letters[invalid]["error"]
        assert letters[invalid]["deliveries"] == 3
        assert stream.backlog(redis, keys) == {"length": 0, "pending": 0}

    def test_a_nul_entry_xadded_by_hand_is_isolated_from_its_batch_on_every_database(
        self,
        client: MemoryClient,
        redis: redis_lib.Redis,
        keys: Keys,
        engine: Engine,
        cfg: Settings,
    ) -> None:
        once = cfg.model_copy(update={"max_deliveries": 1})
        # The edges refuse a NUL (PostgreSQL text cannot hold one); a client that XADDs by
        # itself can still send one, and the drain holds it to the same rule on SQLite too.
        client.emit(content="ok-1")
        poison = {"event_id": "nul-1", "tenant": "acme", "agent": "bot", "content": "nul\x00byte"}
        redis.xadd(keys.events, {stream.FIELD: orjson.dumps(poison)})
        client.emit(content="ok-2")
        report = drain_all(redis, keys, engine, once)
        stored = sorted(r["content"] for r in rows(engine))
        assert stored == ["ok-1", "ok-2"]
        assert report.dead_lettered == 1
        (letter,) = rows(engine, "dead_letter")
        assert "\\u0000" in letter["payload"] and "NUL" in letter["error"]
        assert stream.backlog(redis, keys) == {"length": 0, "pending": 0}


SECRETS = ("sk-proj-Q3vX9mT2LpA8wZr5Kd7YbN1c", "4111 1111 1111 1111", "hunter2-Prod!", "482913")


@pytest.fixture
def captured_logs() -> Iterator[io.StringIO]:
    buffer = io.StringIO()
    configure_logging(level="DEBUG", stream=buffer)
    yield buffer
    structlog.reset_defaults()


def redis_dump(redis: redis_lib.Redis, keys: Keys) -> str:
    """Every value under the namespace, whatever its type."""
    parts: list[Any] = []
    for key in redis.scan_iter(match=keys.pattern()):
        kind = redis.type(key)
        if kind == b"stream":
            parts.append(redis.xrange(key))
        elif kind == b"string":
            parts.append(redis.get(key))
        elif kind == b"hash":
            parts.append(redis.hgetall(key))
        elif kind == b"list":
            parts.append(redis.lrange(key, 0, -1))
        elif kind in (b"set", b"zset"):
            parts.append(redis.smembers(key) if kind == b"set" else redis.zrange(key, 0, -1))
    return repr(parts)


class TestSecrets:
    def test_no_secret_survives_in_sql_redis_or_logs(
        self,
        client: MemoryClient,
        redis: redis_lib.Redis,
        keys: Keys,
        engine: Engine,
        cfg: Settings,
        captured_logs: io.StringIO,
    ) -> None:
        api_key, card, password, otp = SECRETS
        text = (
            f"my key is {api_key}, card {card}, password: {password}, "
            f"and the verification code is {otp}"
        )
        client.emit(content=text, meta={"password": password, "note": f"card {card}"})
        # A client that bypasses the SDK and XADDs raw content: the drain redacts again.
        bypass = Event(tenant="acme", agent="bot", content=text, meta={"otp": otp})
        poison(redis, keys, orjson.dumps(bypass.model_dump(mode="json")))
        # A broken entry full of secrets: its dead letter is redacted too.
        poison(redis, keys, orjson.dumps({"tenant": "acme", "content": text}))

        drain_all(redis, keys, engine, cfg.model_copy(update={"max_deliveries": 1}))

        sql = repr([rows(engine, t) for t in ("raw_event", "dead_letter", "scope_state")])
        logs = captured_logs.getvalue()
        kept = redis_dump(redis, keys)
        assert "drain.batch" in logs
        assert len(rows(engine)) == 2 and len(rows(engine, "dead_letter")) == 1
        for secret in SECRETS:
            assert secret not in sql
            assert secret not in logs
            assert secret not in kept
        assert "[REDACTED:password]" in sql


class TestTransientFailures:
    def test_an_unreachable_database_leaves_entries_pending_not_dead(
        self, client: MemoryClient, redis: redis_lib.Redis, keys: Keys, settings: Settings
    ) -> None:
        down = sa.create_engine("postgresql+psycopg://postgres@127.0.0.1:1/none")
        client.emit_many([{"content": "x"}] * 3)
        once = settings.model_copy(update={"max_deliveries": 1})
        with pytest.raises(TransientError, match="database unavailable"):
            drain_once(redis=redis, keys=keys, engine=down, settings=once, consumer="c1")
        assert pending(redis, keys) == 3
        down.dispose()


class TestDrainLoop:
    def test_the_loop_drains_what_arrives_and_stops_when_told(
        self,
        client: MemoryClient,
        redis: redis_lib.Redis,
        keys: Keys,
        engine: Engine,
        cfg: Settings,
    ) -> None:
        stop = threading.Event()
        result: list[DrainReport] = []
        fast = cfg.model_copy(update={"drain_block_ms": 50})
        worker = threading.Thread(
            target=lambda: result.append(
                run_drain_loop(redis=redis, keys=keys, engine=engine, settings=fast, stop=stop)
            )
        )
        worker.start()
        try:
            client.emit_many([{"content": f"m{i}"} for i in range(20)])
            deadline = time.monotonic() + 10
            while len(rows(engine)) < 20 and time.monotonic() < deadline:
                time.sleep(0.05)
        finally:
            stop.set()
            worker.join(timeout=5)
        assert not worker.is_alive()
        assert result[0].inserted == 20
