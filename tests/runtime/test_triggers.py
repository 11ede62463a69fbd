"""Sleep-time triggers: idle, batch size and session end each queue one consolidation;
repeated ticks coalesce; two consolidations of one scope never run at once."""

from __future__ import annotations

import threading
import time
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
import redis as redis_lib
from celery.signals import task_retry
from sqlalchemy.engine import Engine
from sqlmodel import Session, select
from support import wait_for

from sleepmem.adapters.redis.locks import RedisLock
from sleepmem.core.errors import LeaseHeldError, ValidationError
from sleepmem.core.keys import Keys
from sleepmem.core.settings import Settings
from sleepmem.models import RawEvent, Scope, ScopeState
from sleepmem.pipelines.ports import Ports
from sleepmem.pipelines.write.consolidate import ConsolidationReport
from sleepmem.resources import Resources
from sleepmem.schedules.triggers import due_scopes, enqueue_drain, enqueue_due, tick
from sleepmem.services import run_consolidation
from sleepmem.tasks import names
from sleepmem.workers.app import create_celery
from sleepmem.workers.thread import ThreadWorker


@pytest.fixture
def settings(settings: Settings, sql_url: str, engine: Engine) -> Settings:
    """Every test here runs on SQLite and again on PostgreSQL (``engine`` empties the shared
    PostgreSQL database afterwards)."""
    return settings.model_copy(update={"database_url": sql_url})


NOW = datetime(2025, 3, 1, 12, 0, tzinfo=UTC)


def scope_key(user: str) -> str:
    return Scope(tenant="acme", agent="bot", user=user).key


def put_scope(
    engine: Engine,
    user: str,
    *,
    pending: int,
    received_ago_s: float,
    session_end: bool = False,
    event_ago_s: float | None = None,
) -> str:
    key = scope_key(user)
    received = NOW - timedelta(seconds=received_ago_s)
    with Session(engine) as s:
        s.merge(
            ScopeState(
                scope_key=key,
                tenant="acme",
                agent="bot",
                user=user,
                pending_count=pending,
                session_end=session_end,
                last_received_at=received,
                last_event_at=NOW - timedelta(seconds=event_ago_s or received_ago_s),
            )
        )
        s.commit()
    return key


def put_raw_events(engine: Engine, user: str, n: int) -> None:
    with Session(engine) as s:
        for i in range(n):
            s.add(
                RawEvent(
                    event_id=f"{user}-{i}-{time.monotonic_ns()}",
                    scope_key=scope_key(user),
                    tenant="acme",
                    agent="bot",
                    user=user,
                    kind="message",
                    role="user",
                    content=f"note {i}",
                    at=NOW,
                    meta={},
                )
            )
        s.commit()


def mark_picked_up(*, engine: Engine, scope: Scope, **_: Any) -> ConsolidationReport:
    """The smallest real pipeline: marks the scope's pending events consolidated.

    The lease tests are about who runs when, not about what consolidation writes.
    """
    scope_key = scope.key
    with Session(engine) as s:
        rows = s.exec(
            select(RawEvent).where(
                RawEvent.scope_key == scope_key,
                RawEvent.consolidated == False,  # noqa: E712
            )
        ).all()
        for row in rows:
            row.consolidated = True
            s.add(row)
        s.commit()
    return ConsolidationReport(scope_key=scope_key, events=len(rows))


def trigger_settings(**overrides: Any) -> Settings:
    base: dict[str, Any] = {"idle_seconds": 60.0, "batch_max": 10, "_env_file": None}
    return Settings(**(base | overrides))


class TestDueScopes:
    def test_a_scope_idle_for_idle_seconds_is_due_as_idle(self, engine: Engine) -> None:
        key = put_scope(engine, "ann", pending=2, received_ago_s=61)
        assert due_scopes(engine=engine, now=NOW, settings=trigger_settings()) == [(key, "idle")]

    def test_a_scope_that_just_received_an_event_is_not_due(self, engine: Engine) -> None:
        put_scope(engine, "ann", pending=2, received_ago_s=59)
        assert due_scopes(engine=engine, now=NOW, settings=trigger_settings()) == []

    def test_idle_counts_from_when_the_event_arrived_not_its_event_time(
        self, engine: Engine
    ) -> None:
        # A replayed backlog: old event times, received a second ago.
        put_scope(engine, "ann", pending=2, received_ago_s=1, event_ago_s=86_400)
        assert due_scopes(engine=engine, now=NOW, settings=trigger_settings()) == []

    def test_batch_max_pending_events_make_a_busy_scope_due_as_batch(self, engine: Engine) -> None:
        key = put_scope(engine, "ann", pending=10, received_ago_s=0)
        put_scope(engine, "bob", pending=9, received_ago_s=0)
        assert due_scopes(engine=engine, now=NOW, settings=trigger_settings()) == [(key, "batch")]

    def test_a_session_end_makes_a_busy_scope_due_at_once(self, engine: Engine) -> None:
        key = put_scope(engine, "ann", pending=1, received_ago_s=0, session_end=True)
        due = due_scopes(engine=engine, now=NOW, settings=trigger_settings())
        assert due == [(key, "session_end")]

    def test_a_scope_with_nothing_pending_is_never_due(self, engine: Engine) -> None:
        put_scope(engine, "ann", pending=0, received_ago_s=3600, session_end=True)
        assert due_scopes(engine=engine, now=NOW, settings=trigger_settings()) == []

    def test_the_longest_idle_scope_comes_first(self, engine: Engine) -> None:
        recent = put_scope(engine, "ann", pending=1, received_ago_s=100)
        oldest = put_scope(engine, "bob", pending=1, received_ago_s=500)
        due = due_scopes(engine=engine, now=NOW, settings=trigger_settings())
        assert [k for k, _ in due] == [oldest, recent]


class TestEnqueueOnce:
    @pytest.mark.parametrize(
        ("pending", "received_ago_s", "session_end", "reason"),
        [(1, 61, False, "idle"), (10, 0, False, "batch"), (1, 0, True, "session_end")],
    )
    def test_each_trigger_enqueues_exactly_one_consolidation(
        self,
        engine: Engine,
        redis: redis_lib.Redis,
        keys: Keys,
        pending: int,
        received_ago_s: float,
        session_end: bool,
        reason: str,
    ) -> None:
        key = put_scope(
            engine, "ann", pending=pending, received_ago_s=received_ago_s, session_end=session_end
        )
        put_scope(engine, "bob", pending=1, received_ago_s=5)  # not due: must not be sent
        sent: list[str] = []
        enqueued = enqueue_due(
            engine=engine,
            redis=redis,
            keys=keys,
            settings=trigger_settings(),
            now=NOW,
            send=sent.append,
        )
        assert sent == [key]
        assert enqueued == [(key, reason)]

    def test_repeated_ticks_coalesce_into_one_enqueue(
        self, engine: Engine, redis: redis_lib.Redis, keys: Keys
    ) -> None:
        key = put_scope(engine, "ann", pending=3, received_ago_s=120, session_end=True)
        sent: list[str] = []
        for i in range(5):
            enqueue_due(
                engine=engine,
                redis=redis,
                keys=keys,
                settings=trigger_settings(),
                now=NOW + timedelta(seconds=i),
                send=sent.append,
            )
        assert sent == [key]
        assert redis.ttl(keys.queued(key)) > 0  # a lost task cannot block the scope forever

    def test_a_scope_is_queued_again_once_its_consolidation_has_finished(
        self, engine: Engine, redis: redis_lib.Redis, keys: Keys
    ) -> None:
        key = put_scope(engine, "ann", pending=3, received_ago_s=120)
        sent: list[str] = []
        args: dict[str, Any] = {
            "engine": engine,
            "redis": redis,
            "keys": keys,
            "settings": trigger_settings(),
            "now": NOW,
            "send": sent.append,
        }
        enqueue_due(**args)
        redis.delete(keys.queued(key))  # what the task does after its pipeline committed
        enqueue_due(**args)
        assert sent == [key, key]

    def test_a_failed_send_leaves_the_scope_for_the_next_tick(
        self, engine: Engine, redis: redis_lib.Redis, keys: Keys
    ) -> None:
        key = put_scope(engine, "ann", pending=3, received_ago_s=120)

        def broker_down(_: str) -> None:
            raise ConnectionError("broker down")

        with pytest.raises(ConnectionError):
            enqueue_due(
                engine=engine,
                redis=redis,
                keys=keys,
                settings=trigger_settings(),
                now=NOW,
                send=broker_down,
            )
        assert redis.exists(keys.queued(key)) == 0
        sent: list[str] = []
        enqueue_due(
            engine=engine,
            redis=redis,
            keys=keys,
            settings=trigger_settings(),
            now=NOW,
            send=sent.append,
        )
        assert sent == [key]


class TestTickQueuesDrains:
    def test_a_drain_is_queued_once_until_a_drain_task_starts(
        self, redis: redis_lib.Redis, keys: Keys
    ) -> None:
        sent: list[str] = []
        first = [
            enqueue_drain(redis=redis, keys=keys, settings=trigger_settings(), send=sent.append)
            for _ in range(3)
        ]
        redis.delete(keys.task_once(names.DRAIN, names.DRAIN_QUEUED_SLOT))  # drain started
        again = enqueue_drain(redis=redis, keys=keys, settings=trigger_settings(), send=sent.append)
        assert first == [True, False, False]
        assert again is True
        assert sent == [names.DRAIN, names.DRAIN]

    def test_a_tick_reports_the_drain_and_each_due_scope(
        self, engine: Engine, redis: redis_lib.Redis, keys: Keys
    ) -> None:
        key = put_scope(engine, "ann", pending=1, received_ago_s=0, session_end=True)
        consolidations: list[str] = []
        drains: list[str] = []
        report = tick(
            engine=engine,
            redis=redis,
            keys=keys,
            settings=trigger_settings(),
            send_consolidate=consolidations.append,
            send_drain=drains.append,
            now=NOW,
        )
        assert report.enqueued == [(key, "session_end")]
        assert report.drain_enqueued is True
        assert consolidations == [key]
        assert drains == [names.DRAIN]


class TestScopeKeyValidation:
    @pytest.mark.parametrize(
        "bad", ["", "garbage", "t=/a=bot/u=/p=/s=", "t=acme", "t=ac me/a=/u=/p=/s="]
    )
    def test_a_garbage_scope_key_is_refused_with_the_rule(self, bad: str) -> None:
        with pytest.raises(ValidationError) as err:
            Scope.parse_key(bad, field="scope_key")
        assert err.value.field == "scope_key"
        assert "scope key like" in err.value.message

    def test_a_canonical_key_names_its_scope(self) -> None:
        assert Scope.parse_key(scope_key("ann")) == Scope(tenant="acme", agent="bot", user="ann")






def pending_events(engine: Engine, user: str) -> int:
    with Session(engine) as s:
        rows = s.exec(
            select(RawEvent).where(
                RawEvent.scope_key == scope_key(user),
                RawEvent.consolidated == False,  # noqa: E712
            )
        ).all()
    return len(rows)


class TestConsolidateUnderLease:
    def test_two_consolidations_of_one_scope_never_overlap(self, resources: Resources) -> None:
        put_raw_events(resources.engine, "ann", 3)
        runs: list[tuple[float, float, str]] = []
        guard = threading.Lock()

        deferred = threading.Event()

        def on_retry(**_: Any) -> None:
            deferred.set()

        def slow_pipeline(**kw: Any) -> ConsolidationReport:
            start = time.monotonic()
            # Runs until the other task has arrived and been turned away by the lease.
            deferred.wait(30)
            report = mark_picked_up(**kw)
            with guard:
                runs.append((start, time.monotonic(), kw["task_id"]))
            return report

        app = create_celery(
            resources.settings, broker_url=resources.broker_url, consolidate_pipeline=slow_pipeline
        )
        task_retry.connect(on_retry, weak=False)
        try:
            with ThreadWorker(app, concurrency=2, queues=(names.QUEUE_CONSOLIDATE,)):
                for _ in range(2):
                    app.send_task(names.CONSOLIDATE, args=[scope_key("ann")])
                assert wait_for(lambda: len(runs) == 2, timeout=60)
        finally:
            task_retry.disconnect(on_retry)
        assert deferred.is_set(), "the second task never met the first one's lease"
        (_, end1, id1), (start2, _, id2) = sorted(runs)
        assert id1 != id2
        assert end1 <= start2, f"runs overlapped: {runs}"
        assert pending_events(resources.engine, "ann") == 0

    def test_a_held_lease_defers_the_consolidation_until_it_is_released(
        self, resources: Resources
    ) -> None:
        put_raw_events(resources.engine, "ann", 2)
        other_worker = RedisLock(resources.redis, resources.keys.lease(scope_key("ann")), ttl_s=30)
        assert other_worker.acquire()
        app = create_celery(
            resources.settings, broker_url=resources.broker_url, consolidate_pipeline=mark_picked_up
        )
        deferred: list[str] = []

        def on_retry(**_: Any) -> None:
            deferred.append("retry")

        task_retry.connect(on_retry, weak=False)
        try:
            with ThreadWorker(app, concurrency=1, queues=(names.QUEUE_CONSOLIDATE,)):
                app.send_task(names.CONSOLIDATE, args=[scope_key("ann")])
                # The task ran, met the held lease and was deferred: nothing consumed.
                assert wait_for(lambda: bool(deferred), timeout=30)
                assert pending_events(resources.engine, "ann") == 2
                assert other_worker.release()
                assert wait_for(lambda: pending_events(resources.engine, "ann") == 0,
                                timeout=60)
        finally:
            task_retry.disconnect(on_retry)

    def test_a_tick_during_a_run_queues_nothing_and_the_run_frees_the_scope_when_done(
        self, resources: Resources
    ) -> None:
        key = put_scope(resources.engine, "ann", pending=2, received_ago_s=0, session_end=True)
        sent: list[str] = []

        def tick_now() -> None:
            enqueue_due(
                engine=resources.engine,
                redis=resources.redis,
                keys=resources.keys,
                settings=trigger_settings(),
                now=NOW,
                send=sent.append,
            )

        def pipeline_with_a_tick_inside(**kw: Any) -> ConsolidationReport:
            tick_now()  # the scope still looks due: nothing is committed yet
            return ConsolidationReport(scope_key=kw["scope"].key)

        tick_now()
        run_consolidation(resources, scope_key=key, pipeline=pipeline_with_a_tick_inside)
        assert sent == [key]
        assert resources.redis.exists(resources.keys.queued(key)) == 0
        tick_now()  # still pending (this pipeline consumed nothing): queued again
        assert sent == [key, key]

    def test_a_direct_run_refuses_a_scope_whose_lease_is_held(self, resources: Resources) -> None:
        key = scope_key("ann")
        assert RedisLock(resources.redis, resources.keys.lease(key), ttl_s=30).acquire()
        resources.redis.set(resources.keys.queued(key), "idle")
        with pytest.raises(LeaseHeldError):
            run_consolidation(resources, scope_key=key, pipeline=mark_picked_up)
        # The queued run still owns the coalescing key: the tick must not send another.
        assert resources.redis.exists(resources.keys.queued(key)) == 1

    def test_a_failing_pipeline_keeps_events_pending_and_cools_the_scope_down(
        self, resources: Resources
    ) -> None:
        put_raw_events(resources.engine, "ann", 2)
        key = scope_key("ann")

        def broken(**_: Any) -> ConsolidationReport:
            raise RuntimeError("extractor bug")

        with pytest.raises(RuntimeError):
            run_consolidation(resources, scope_key=key, pipeline=broken)
        assert pending_events(resources.engine, "ann") == 2
        assert resources.redis.get(resources.keys.queued(key)) == b"failed"
        assert resources.redis.exists(resources.keys.lease(key)) == 0

    def test_the_pipeline_is_told_when_its_lease_is_lost(self, resources: Resources) -> None:
        key = scope_key("ann")
        resources.index.count()  # opened beforehand: a slow first open is not what we test
        resources.settings = resources.settings.model_copy(update={"lease_seconds": 0.6})
        seen: list[bool] = []

        def stolen(*, ports: Ports, **kw: Any) -> ConsolidationReport:
            assert ports.lease is not None
            lost = ports.lease.lost  # type: ignore[attr-defined]
            seen.append(lost.is_set())
            resources.redis.set(resources.keys.lease(key), "another-worker")
            seen.append(lost.wait(30))  # bounded; set by the next renewal (every 0.2 s)
            return ConsolidationReport(scope_key=kw["scope"].key)

        run_consolidation(resources, scope_key=key, pipeline=stolen)
        assert seen == [False, True]
        # Release is compare-and-delete: the new holder keeps its lease.
        assert resources.redis.get(resources.keys.lease(key)) == b"another-worker"
