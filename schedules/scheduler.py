"""The scheduler: APScheduler jobs that only enqueue Celery tasks, run by the leader alone.

Every replica runs the same APScheduler; each job first asks the :class:`LeaderElector`
whether this process leads, so only one replica enqueues. A periodic job also takes a
dedup key for its slot (the day of a nightly sweep, the hour of a refresh) before sending,
so a double fire (a hand-over between leaders, a restart inside the misfire window) is
harmless. Lifecycle jobs are scheduled only when their task is registered in this
codebase, so nothing is sent that no worker could run.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any, Protocol
from zoneinfo import ZoneInfo

import redis as redis_lib
from apscheduler.executors.pool import ThreadPoolExecutor
from apscheduler.schedulers.background import BackgroundScheduler
from apscheduler.triggers.cron import CronTrigger
from apscheduler.triggers.interval import IntervalTrigger
from celery import Celery
from kombu.exceptions import OperationalError
from sqlalchemy.exc import SQLAlchemyError

from sleepmem.core.errors import SleepmemError, TransientError
from sleepmem.core.logs import get_logger
from sleepmem.core.settings import Settings
from sleepmem.resources import Resources
from sleepmem.schedules.leader import LeaderElector
from sleepmem.schedules.triggers import TickReport, tick
from sleepmem.tasks import names

log = get_logger("sleepmem.schedules.scheduler")

HOUR = 3600


class TaskSender(Protocol):
    def __call__(
        self, name: str, *, args: Sequence[Any] = (), task_id: str | None = None
    ) -> None: ...


def celery_sender(app: Celery) -> TaskSender:
    """Send by task name, so schedules work before (or without) importing the task."""

    def send(name: str, *, args: Sequence[Any] = (), task_id: str | None = None) -> None:
        try:
            app.send_task(name, args=list(args), task_id=task_id)
        except OperationalError as exc:
            raise TransientError(f"broker unavailable while sending {name} ({exc})") from exc

    return send


@dataclass(frozen=True, slots=True)
class Periodic:
    """A scheduled enqueue of one task; ``slot`` names the period a fire belongs to."""

    task: str
    trigger: Any
    slot: Callable[[datetime], str]
    misfire_grace_s: int
    dedup_ttl_s: int
    # Fired every few minutes: its enqueue is a DEBUG line, so an idle process stays quiet.
    routine: bool = False


# Interval jobs count from a fixed origin, so every replica fires on the same grid and a
# fire has the same slot whichever replica makes it.
GRID_ORIGIN = datetime(2000, 1, 1, tzinfo=UTC)


def _every(seconds: int) -> Callable[[datetime], str]:
    return lambda due: str(int(due.timestamp()) // seconds)


def last_due(job: Periodic, now: datetime) -> datetime | None:
    """The latest scheduled time of ``job`` in its misfire window ``(now - grace, now]``."""
    t = job.trigger.get_next_fire_time(None, now - timedelta(seconds=job.misfire_grace_s))
    last: datetime | None = None
    while t is not None and t <= now:
        last = t
        t = job.trigger.get_next_fire_time(t, t + timedelta(microseconds=1))
    return last


def lifecycle_jobs(settings: Settings) -> list[Periodic]:
    tz = ZoneInfo(settings.sweep_timezone)

    def day(now: datetime) -> str:
        return now.astimezone(tz).strftime("%Y-%m-%d")

    def hour(now: datetime) -> str:
        return now.astimezone(UTC).strftime("%Y-%m-%dT%H")

    return [
        # Nightly jobs may fire hours late (host asleep, deploy): still worth running.
        Periodic(
            names.SWEEP,
            CronTrigger(hour=settings.sweep_hour, minute=0, timezone=tz),
            day,
            misfire_grace_s=6 * HOUR,
            dedup_ttl_s=36 * HOUR,
        ),
        # After the sweep, when it has archived and deleted what it will tonight.
        Periodic(
            names.INDEX_MAINTENANCE,
            CronTrigger(hour=(settings.sweep_hour + 1) % 24, minute=30, timezone=tz),
            day,
            misfire_grace_s=6 * HOUR,
            dedup_ttl_s=36 * HOUR,
        ),
        Periodic(
            names.REFRESH,
            CronTrigger(minute=5, timezone=UTC),
            hour,
            misfire_grace_s=HOUR // 2,
            dedup_ttl_s=2 * HOUR,
        ),
        Periodic(
            names.RECONCILE,
            IntervalTrigger(minutes=5, start_date=GRID_ORIGIN, timezone=UTC),
            _every(300),
            misfire_grace_s=300,
            dedup_ttl_s=600,
            routine=True,
        ),
        # Session checkpoints: mirror new versions to SQL, retire ended and idle sessions.
        Periodic(
            names.CHECKPOINTS,
            IntervalTrigger(minutes=1, start_date=GRID_ORIGIN, timezone=UTC),
            _every(60),
            misfire_grace_s=60,
            dedup_ttl_s=120,
            routine=True,
        ),
    ]


class Scheduler:
    """Leader-gated APScheduler. ``drain_tasks``: also queue drain tasks on each tick
    (distributed mode; the embedded runtime drains in a thread of its own)."""

    def __init__(
        self,
        *,
        resources: Resources,
        send: TaskSender,
        elector: LeaderElector,
        available: Collection[str],
        drain_tasks: bool = True,
    ) -> None:
        self.resources = resources
        self.settings = resources.settings
        self.send = send
        self.elector = elector
        self.drain_tasks = drain_tasks
        self.periodic = [j for j in lifecycle_jobs(self.settings) if j.task in available]
        self.skipped = sorted(
            j.task for j in lifecycle_jobs(self.settings) if j.task not in available
        )
        self._caught_up = False
        # A tick longer than the interval is normal under load: the next one steps aside
        # (a DEBUG line) instead of hitting APScheduler's instance limit, whose warning
        # would print on every slow tick.
        self._ticking = threading.Lock()
        self._aps = BackgroundScheduler(
            timezone=UTC,
            executors={"default": ThreadPoolExecutor(2)},
            job_defaults={"coalesce": True, "max_instances": 1},
        )

    @property
    def redis(self) -> redis_lib.Redis:
        return self.resources.redis

    def start(self) -> Scheduler:
        self.elector.start()
        tick_s = self.settings.tick_seconds
        self._aps.add_job(
            self.run_tick,
            IntervalTrigger(seconds=tick_s, timezone=UTC),
            id="tick",
            max_instances=2,  # the second only sees the first running and returns
            misfire_grace_time=max(1, int(tick_s)),
            next_run_time=datetime.now(UTC),
        )
        for job in self.periodic:
            self._aps.add_job(
                self.fire,
                job.trigger,
                args=(job,),
                id=job.task,
                misfire_grace_time=job.misfire_grace_s,
            )
        self._aps.start()
        log.info(
            "scheduler_started",
            identity=self.elector.identity,
            tick_s=tick_s,
            jobs=["tick", *(j.task for j in self.periodic)],
            not_registered=self.skipped,
            drain_tasks=self.drain_tasks,
        )
        return self

    def stop(self, *, release: bool = True) -> None:
        if self._aps.running:
            self._aps.shutdown(wait=True)
        self.elector.stop(release=release)
        log.info("scheduler_stopped", identity=self.elector.identity)

    def run_tick(self) -> TickReport | None:
        if not self._ticking.acquire(blocking=False):
            log.debug("tick_skipped", reason="the previous tick is still running")
            return None
        try:
            return self._tick()
        finally:
            self._ticking.release()

    def _tick(self) -> TickReport | None:
        if not self.elector.is_leader:
            self._caught_up = False
            return None
        if not self._caught_up:
            # New leader (fresh start, restart, hand-over): fire what the previous one may
            # have missed within each job's misfire grace; slot dedup makes it safe.
            self.catch_up()
            self._caught_up = True
        res = self.resources
        send_drain = (lambda name: self.send(name)) if self.drain_tasks else None
        try:
            return tick(
                engine=res.engine,
                redis=res.redis,
                keys=res.keys,
                settings=self.settings,
                send_consolidate=lambda key: self.send(names.CONSOLIDATE, args=(key,)),
                send_drain=send_drain,
            )
        except (SleepmemError, redis_lib.RedisError, SQLAlchemyError) as exc:
            # The next tick retries; a scheduler that dies here would stop all triggers.
            log.error("tick_failed", error=type(exc).__name__)
            return None

    def catch_up(self, now: datetime | None = None) -> list[str]:
        """Fire every periodic job whose last scheduled time is within its misfire grace
        (and was not fired yet); returns the tasks sent."""
        now = now or datetime.now(UTC)
        return [j.task for j in self.periodic if last_due(j, now) and self.fire(j, now)]

    def fire(self, job: Periodic, now: datetime | None = None) -> bool:
        """Enqueue ``job`` once for its slot; False when not leader or already sent."""
        if not self.elector.is_leader:
            return False
        now = now or datetime.now(UTC)
        # The slot of the scheduled time, not of now: a late fire counts for its own slot.
        slot = job.slot(last_due(job, now) or now)
        started = time.perf_counter()
        once = self.resources.keys.task_once(job.task, slot)
        try:
            taken = self.redis.set(once, self.elector.identity, nx=True, ex=job.dedup_ttl_s)
        except redis_lib.RedisError as exc:
            log.error("job_failed", job=job.task, slot=slot, error=type(exc).__name__)
            return False
        if not taken:
            log.info("job_deduplicated", job=job.task, slot=slot)
            return False
        try:
            self.send(job.task, task_id=f"{job.task}:{slot}")
        except SleepmemError as exc:
            # Not sent: let a later fire in the same slot (or the standby) try again.
            self.redis.delete(once)
            log.error("job_failed", job=job.task, slot=slot, error=type(exc).__name__)
            return False
        (log.debug if job.routine else log.info)(
            "job_enqueued",
            job=job.task,
            slot=slot,
            seconds=round(time.perf_counter() - started, 4),
        )
        return True
