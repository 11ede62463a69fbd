"""One active scheduler across replicas: leader lock, standby take-over, deduped fires."""

from __future__ import annotations

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
        a = LeaderElector(redis, keys.scheduler_leader, ttl_s=TTL)
        assert a.step()
        time.sleep(TTL * 0.92)  # no renewal in between, as when Redis is unreachable
        assert a.is_leader is False
        assert redis.pttl(keys.scheduler_leader) > 0  # a standby could not have won yet


class TestTwoSchedulers:
    def test_only_the_leader_enqueues(self, resources: Resources) -> None:
        sent_a, sent_b = Recorder(resources), Recorder(resources)
        a = scheduler(resources, sent_a).start()
        b = scheduler(resources, sent_b).start()
        try:
            time.sleep(1.0)
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
    def test_when_the_leader_dies_the_standby_takes_over_within_the_ttl(
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
            cwd=Path(__file__).resolve().parents[1],
            env={**os.environ, "PYTHONUNBUFFERED": "1"},
        )
        standby_sent = Recorder(resources)
        standby: Scheduler | None = None
        try:
            assert wait_for(
                lambda: resources.redis.llen(fires) >= 3, timeout=30, poll=0.01
            ), "no leader"
            standby = scheduler(resources, standby_sent).start()
            time.sleep(0.5)
            assert standby_sent.sent == []  # the live leader still leads
            assert not standby.elector.is_leader

            child.send_signal(signal.SIGKILL)
            child.wait(10)
            killed = time.monotonic()
            fired_by_leader = resources.redis.llen(fires)

            assert wait_for(lambda: standby.elector.is_leader, timeout=TTL * 3, poll=0.01)
            took_over = time.monotonic() - killed
            assert wait_for(lambda: names.DRAIN in standby_sent.names(), timeout=1.0, poll=0.01)
        finally:
            if child.poll() is None:
                child.kill()
                child.wait(10)
            if standby is not None:
                standby.stop()
        print(f"take-over after leader death: {took_over:.3f}s (ttl {TTL}s)")
        # Lock expiry is at most one TTL after the kill; a standby polls every TTL/6.
        assert took_over <= TTL * 1.2 + 0.1, f"take-over took {took_over:.2f}s"
        assert resources.redis.llen(fires) == fired_by_leader  # the dead one fired no more
        assert names.DRAIN in standby_sent.names()  # the new leader ticks
