"""One active scheduler across replicas: leader lock, standby take-over, deduped fires."""

from __future__ import annotations

import logging
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator, Sequence
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
import redis as redis_lib
from support import wait_for

from sleepmem.core.keys import Keys
from sleepmem.core.settings import Settings
from sleepmem.resources import Resources, build_resources
from sleepmem.schedules.leader import LeaderElector
from sleepmem.schedules.scheduler import Periodic, Scheduler, lifecycle_jobs
from sleepmem.tasks import names

TTL = 1.0
ALL_TASKS = (names.SWEEP, names.REFRESH, names.RECONCILE, names.INDEX_MAINTENANCE)
NIGHT = datetime(2025, 3, 1, 3, 0, tzinfo=UTC)  # the default sweep time (03:00 UTC)


class Recorder:
    """Stands where the Celery broker would: remembers what was sent, and when.

    Clearing the drain's coalescing key is what a started drain task does; without it
    only the first tick could ever send.
    """

    def __init__(self, resources: Resources) -> None:
        self.resources = resources
        self.sent: list[tuple[float, str, str | None]] = []
        self._lock = threading.Lock()

    def __call__(self, name: str, *, args: Sequence[Any] = (), task_id: str | None = None) -> None:
        with self._lock:
            self.sent.append((time.monotonic(), name, task_id))
        if name == names.DRAIN:
            self.resources.redis.delete(
                self.resources.keys.task_once(names.DRAIN, names.DRAIN_QUEUED_SLOT)
            )

    def names(self) -> list[str]:
        with self._lock:
            return [n for _, n, _ in self.sent]




@pytest.fixture
def fast_settings(settings: Settings) -> Settings:
    return settings.model_copy(update={"tick_seconds": 0.1, "leader_ttl_seconds": TTL})


@pytest.fixture
def resources(fast_settings: Settings, redis: redis_lib.Redis) -> Iterator[Resources]:
    res = build_resources(fast_settings)
    yield res
    res.close()


def elector(res: Resources) -> LeaderElector:
    return LeaderElector(res.redis, res.keys.scheduler_leader, ttl_s=TTL)


def scheduler(res: Resources, send: Recorder) -> Scheduler:
    return Scheduler(
        resources=res, send=send, elector=elector(res), available=ALL_TASKS, drain_tasks=True
    )


def standing_by(res: Resources, send: Recorder) -> Scheduler:
    """A scheduler whose APScheduler is not started: jobs are fired by the test."""
    return Scheduler(resources=res, send=send, elector=elector(res), available=ALL_TASKS)


def sweep_job(settings: Settings) -> Periodic:
    return next(j for j in lifecycle_jobs(settings) if j.task == names.SWEEP)


class TestLeaderLock:
    def test_only_one_of_two_electors_leads(self, redis: redis_lib.Redis, keys: Keys) -> None:
        a = LeaderElector(redis, keys.scheduler_leader, ttl_s=TTL)
        b = LeaderElector(redis, keys.scheduler_leader, ttl_s=TTL)
        assert (a.step(), b.step()) == (True, False)
        assert (a.is_leader, b.is_leader) == (True, False)
        assert redis.get(keys.scheduler_leader) == a.identity.encode()

    def test_a_leader_keeps_its_lock_past_the_ttl_by_renewing_it(
        self, redis: redis_lib.Redis, keys: Keys
    ) -> None:
        a = LeaderElector(redis, keys.scheduler_leader, ttl_s=TTL).start()
        try:
            time.sleep(TTL * 2.5)
            b = LeaderElector(redis, keys.scheduler_leader, ttl_s=TTL)
            assert b.step() is False
            assert a.is_leader
        finally:
            a.stop()

    def test_a_leader_that_stops_hands_over_at_once(
        self, redis: redis_lib.Redis, keys: Keys
    ) -> None:
        a = LeaderElector(redis, keys.scheduler_leader, ttl_s=30).start()
        a.stop()
        b = LeaderElector(redis, keys.scheduler_leader, ttl_s=30)
        assert a.is_leader is False
        assert b.step() is True

    def test_a_leader_whose_lock_changed_hands_steps_down(
        self, redis: redis_lib.Redis, keys: Keys
    ) -> None:
        a = LeaderElector(redis, keys.scheduler_leader, ttl_s=30)
        assert a.step()
        redis.set(keys.scheduler_leader, "someone-else")
        assert a.step() is False
        assert a.is_leader is False
        assert redis.get(keys.scheduler_leader) == b"someone-else"

    def test_a_leader_that_cannot_renew_stops_leading_before_its_lock_expires(
        self, redis: redis_lib.Redis, keys: Keys
    ) -> None:
        ttl = 3.0  # a 0.3 s window between stepping down and expiry, for a loaded machine
        a = LeaderElector(redis, keys.scheduler_leader, ttl_s=ttl)
        assert a.step()
        # No renewal from here on, as when Redis is unreachable. Sample both orders:
        # (is_leader, then pttl) shows a step-down while the lock still lives;
        # (pttl, then is_leader) shows it never claims to lead once the lock is gone.
        stepped_down_while_locked = False
        led_after_expiry = False
        deadline = time.monotonic() + ttl * 10
        while time.monotonic() < deadline:
            leading = a.is_leader
            if not leading and redis.pttl(keys.scheduler_leader) > 0:
                stepped_down_while_locked = True
            if redis.pttl(keys.scheduler_leader) == -2:
                led_after_expiry = a.is_leader
                break
            time.sleep(0.005)
        assert stepped_down_while_locked, "still leading when the lock expired"
        assert led_after_expiry is False
        assert redis.exists(keys.scheduler_leader) == 0, "the lock never expired"

    def test_a_leader_renews_every_third_and_a_standby_tries_every_sixth_of_the_ttl(
        self, redis: redis_lib.Redis, keys: Keys
    ) -> None:
        waits: dict[str, list[float]] = {"leader": [], "standby": []}

        def recorded(e: LeaderElector, role: str) -> LeaderElector:
            real = e._stop.wait

            def wait(timeout: float | None = None) -> bool:
                waits[role].append(float(timeout or 0))
                return real(timeout)

            e._stop.wait = wait  # type: ignore[method-assign]
            return e

        ttl = 0.6
        a = recorded(LeaderElector(redis, keys.scheduler_leader, ttl_s=ttl), "leader").start()
        b = recorded(LeaderElector(redis, keys.scheduler_leader, ttl_s=ttl), "standby").start()
        try:
            assert wait_for(lambda: len(waits["leader"]) >= 3 and len(waits["standby"]) >= 3)
        finally:
            b.stop()
            a.stop()
        assert waits["leader"] == pytest.approx([ttl / 3] * len(waits["leader"]))
        assert waits["standby"] == pytest.approx([ttl / 6] * len(waits["standby"]))


class TestTwoSchedulers:
    def test_only_the_leader_enqueues(self, resources: Resources) -> None:
        sent_a, sent_b = Recorder(resources), Recorder(resources)
        a = scheduler(resources, sent_a).start()
        b = scheduler(resources, sent_b).start()
        try:
            # Ten ticks of 0.1 s; waited for, not slept, so a slow machine only takes longer.
            assert wait_for(lambda: sent_a.names().count(names.DRAIN) >= 5, timeout=30)
            job = sweep_job(resources.settings)
            standby_fired = b.fire(job)
            a.fire(job)  # sent now, unless the leader's start-up catch-up already sent it
        finally:
            b.stop()
            a.stop()
        assert standby_fired is False
        assert sent_a.names().count(names.DRAIN) >= 5  # one per tick of 0.1 s
        assert sent_a.names().count(names.SWEEP) == 1
        assert sent_b.sent == []

    def test_a_double_fire_across_a_hand_over_sends_once(self, resources: Resources) -> None:
        job = sweep_job(resources.settings)
        sent_a, sent_b = Recorder(resources), Recorder(resources)
        a = Scheduler(
            resources=resources, send=sent_a, elector=elector(resources), available=ALL_TASKS
        )
        a.elector.step()
        assert a.fire(job, NIGHT)
        a.elector.stop()  # hands over; B fires the same night again, a minute later
        b = Scheduler(
            resources=resources, send=sent_b, elector=elector(resources), available=ALL_TASKS
        )
        b.elector.step()
        assert b.fire(job, NIGHT + timedelta(minutes=1)) is False
        assert [n for _, n, _ in sent_a.sent + sent_b.sent] == [names.SWEEP]
        assert sent_a.sent[0][2] == f"{names.SWEEP}:2025-03-01"

    def test_the_hourly_refresh_is_sent_once_per_hour_whoever_fires_it(
        self, resources: Resources
    ) -> None:
        job = next(j for j in lifecycle_jobs(resources.settings) if j.task == names.REFRESH)
        sent_a, sent_b = Recorder(resources), Recorder(resources)
        a = standing_by(resources, sent_a)
        assert a.elector.step()
        ten_past = datetime(2025, 3, 1, 10, 10, tzinfo=UTC)  # the 10:05 slot
        assert a.fire(job, ten_past)
        assert a.fire(job, ten_past + timedelta(minutes=20)) is False  # same hour
        a.elector.stop()
        b = standing_by(resources, sent_b)
        assert b.elector.step()
        assert b.fire(job, ten_past + timedelta(minutes=5)) is False  # hand-over, same hour
        assert b.fire(job, ten_past + timedelta(hours=1))  # the next hour's slot
        sent = [(n, t) for _, n, t in sent_a.sent + sent_b.sent]
        assert sent == [(names.REFRESH, f"{names.REFRESH}:2025-03-01T10"),
                        (names.REFRESH, f"{names.REFRESH}:2025-03-01T11")]

    def test_a_new_leader_catches_up_a_nightly_sweep_missed_within_its_grace(
        self, resources: Resources
    ) -> None:
        sent = Recorder(resources)
        s = standing_by(resources, sent)
        assert s.elector.step()
        two_hours_late = NIGHT + timedelta(hours=2)
        assert names.SWEEP in s.catch_up(two_hours_late)
        assert names.SWEEP not in s.catch_up(two_hours_late + timedelta(minutes=30))
        assert names.SWEEP not in s.catch_up(NIGHT + timedelta(hours=7))  # past the grace
        assert names.SWEEP in s.catch_up(NIGHT + timedelta(days=1, minutes=1))
        sweeps = [task_id for _, name, task_id in sent.sent if name == names.SWEEP]
        assert sweeps == [f"{names.SWEEP}:2025-03-01", f"{names.SWEEP}:2025-03-02"]

    def test_the_nightly_sweep_follows_the_configured_time_zone(self, resources: Resources) -> None:
        resources.settings = resources.settings.model_copy(
            update={"sweep_hour": 3, "sweep_timezone": "Asia/Shanghai"}
        )
        sent = Recorder(resources)
        s = standing_by(resources, sent)
        assert s.elector.step()
        # 03:00 in Shanghai is 19:00 UTC the day before.
        assert names.SWEEP not in s.catch_up(datetime(2025, 3, 1, 18, 59, tzinfo=UTC))
        assert names.SWEEP in s.catch_up(datetime(2025, 3, 1, 19, 30, tzinfo=UTC))
        assert (names.SWEEP, f"{names.SWEEP}:2025-03-02") in [(n, t) for _, n, t in sent.sent]

    def test_a_standby_catches_up_nothing(self, resources: Resources) -> None:
        leader = Scheduler(
            resources=resources,
            send=Recorder(resources),
            elector=elector(resources),
            available=ALL_TASKS,
        )
        standby_sent = Recorder(resources)
        standby = Scheduler(
            resources=resources,
            send=standby_sent,
            elector=elector(resources),
            available=ALL_TASKS,
        )
        leader.elector.step()
        standby.elector.step()
        assert standby.catch_up(NIGHT + timedelta(hours=1)) == []
        assert standby_sent.sent == []

    def test_jobs_whose_task_is_not_registered_are_not_scheduled(
        self, resources: Resources
    ) -> None:
        s = Scheduler(
            resources=resources,
            send=Recorder(resources),
            elector=elector(resources),
            available=(names.REFRESH,),
        )
        assert [j.task for j in s.periodic] == [names.REFRESH]
        assert s.skipped == sorted((names.SWEEP, names.RECONCILE, names.INDEX_MAINTENANCE,
                                    names.CHECKPOINTS))


CHILD = """
import sys, time
from sleepmem.schedules.leader import LeaderElector
from sleepmem.schedules.scheduler import Scheduler
from sleepmem.resources import build_resources
from sleepmem.core.settings import Settings
from sleepmem.tasks import names

ns, redis_url, db_url, data_dir = sys.argv[1:5]
settings = Settings(namespace=ns, redis_url=redis_url, database_url=db_url, data_dir=data_dir,
                    tick_seconds=0.1, leader_ttl_seconds=TTL_S, embedder="hashing",
                    _env_file=None)
res = build_resources(settings)

def send(name, *, args=(), task_id=None):
    res.redis.rpush(ns + ":test:fires", name)
    res.redis.delete(res.keys.task_once(names.DRAIN, names.DRAIN_QUEUED_SLOT))

elector = LeaderElector(res.redis, res.keys.scheduler_leader, ttl_s=TTL_S)
Scheduler(resources=res, send=send, elector=elector, available=()).start()
while True:
    time.sleep(1)
""".replace("TTL_S", repr(TTL))


class TestLeaderDeath:
    def test_when_the_leader_dies_the_standby_takes_over_once_its_lock_expires(
        self, resources: Resources, tmp_path: Path
    ) -> None:
        s = resources.settings
        fires = f"{s.namespace}:test:fires"
        child = subprocess.Popen(
            [
                sys.executable,
                "-c",
                CHILD,
                s.namespace,
                str(s.redis_url),
                f"sqlite:///{tmp_path / 'child.db'}",
                str(tmp_path / "child"),
            ],
            cwd=Path(__file__).resolve().parents[2],
            env={**os.environ, "PYTHONUNBUFFERED": "1"},
        )
        standby_sent = Recorder(resources)
        standby: Scheduler | None = None
        try:
            assert wait_for(
                lambda: resources.redis.llen(fires) >= 3, timeout=30, poll=0.01
            ), "no leader"
            standby = scheduler(resources, standby_sent).start()
            # The standby runs while the leader keeps firing: it must not lead meanwhile.
            seen = resources.redis.llen(fires)
            assert wait_for(lambda: resources.redis.llen(fires) >= seen + 5, timeout=30)
            assert standby_sent.sent == []
            assert not standby.elector.is_leader

            child.send_signal(signal.SIGKILL)
            child.wait(10)
            killed = time.monotonic()
            lock_left_s = resources.redis.pttl(resources.keys.scheduler_leader) / 1000
            fired_by_leader = resources.redis.llen(fires)

            assert wait_for(lambda: standby.elector.is_leader, timeout=30, poll=0.01)
            took_over = time.monotonic() - killed
            assert wait_for(lambda: names.DRAIN in standby_sent.names(), timeout=30, poll=0.01)
        finally:
            if child.poll() is None:
                child.kill()
                child.wait(10)
            if standby is not None:
                standby.stop()
        print(f"take-over after leader death: {took_over:.3f}s (ttl {TTL}s)")
        # The order of events, not a race against the clock: the standby led only once the
        # dead leader's lock had expired (a lower bound, which load cannot break), then it
        # ticked; the dead leader sent nothing after the kill. How soon it takes over is
        # pinned by the TTL/6 retry interval above.
        assert took_over >= lock_left_s - 0.05, (took_over, lock_left_s)
        assert resources.redis.get(resources.keys.scheduler_leader) is None  # released on stop
        assert resources.redis.llen(fires) == fired_by_leader  # the dead one fired no more
        assert names.DRAIN in standby_sent.names()  # the new leader ticks


class TestASlowTick:
    def test_a_tick_longer_than_the_interval_makes_the_next_step_aside_without_a_warning(
        self, resources: Resources, caplog: pytest.LogCaptureFixture
    ) -> None:
        running: list[int] = []
        overlap: list[int] = []

        class Slow(Scheduler):
            def _tick(self) -> None:  # type: ignore[override]
                running.append(1)
                overlap.append(len(running))
                time.sleep(0.35)  # 3.5 intervals of 0.1 s
                running.pop()

        slow = Slow(resources=resources, send=Recorder(resources), elector=elector(resources),
                    available=ALL_TASKS)
        with caplog.at_level(logging.WARNING, logger="apscheduler"):
            slow.start()
            try:
                assert wait_for(lambda: len(overlap) >= 3, timeout=20)
            finally:
                slow.stop()
        assert max(overlap) == 1
        assert not [r for r in caplog.records if r.name.startswith("apscheduler")]
