"""The drain and maintenance tasks as Celery runs them, on the machine's Redis."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any

import pytest
from sqlalchemy import func
from sqlalchemy.engine import Engine
from sqlmodel import Session, select
from support import wait_for

from sleepmem.adapters.redis.hits import read_hits, record_hits
from sleepmem.adapters.redis.locks import RedisLock
from sleepmem.core.settings import Settings
from sleepmem.models import RawEvent
from sleepmem.resources import Resources
from sleepmem.sdk import MemoryClient
from sleepmem.services import refresh_job
from sleepmem.tasks import names
from sleepmem.tasks.maintenance import maintenance_task
from sleepmem.workers.app import create_celery
from sleepmem.workers.thread import ThreadWorker


@pytest.fixture
def settings(settings: Settings, sql_url: str, engine: Engine) -> Settings:
    """Every test here runs on SQLite and again on PostgreSQL (``engine`` empties the shared
    PostgreSQL database afterwards)."""
    return settings.model_copy(update={"database_url": sql_url})


def raw_rows(res: Resources) -> int:
    with Session(res.engine) as s:
        return int(s.exec(select(func.count()).select_from(RawEvent)).one())


class TestDrainTask:
    def test_a_drain_task_stores_each_emitted_event_once_and_frees_the_drain_slot(
        self, resources: Resources
    ) -> None:
        once = resources.keys.task_once(names.DRAIN, names.DRAIN_QUEUED_SLOT)
        with MemoryClient(resources.settings, client=resources.redis) as client:
            events = [
                {"event_id": f"ev-{i}", "tenant": "acme", "agent": "bot", "content": f"n{i}"}
                for i in range(50)
            ]
            client.emit_many(events)
            client.emit_many(events[:10])  # the same event ids again: still one row each
        resources.redis.set(once, "1")  # what the tick sets when it queues the task
        app = create_celery(resources.settings, broker_url=resources.broker_url)
        with ThreadWorker(app, concurrency=1, queues=(names.QUEUE_DRAIN,)):
            app.send_task(names.DRAIN)
            assert wait_for(lambda: raw_rows(resources) == 50)
            assert wait_for(
                lambda: resources.redis.xpending(resources.keys.events, "drain")["pending"] == 0
            )
        assert raw_rows(resources) == 50
        assert resources.redis.exists(once) == 0


class TestMaintenanceTask:
    def test_a_maintenance_job_runs_under_its_lease_and_returns_the_jobs_counts(
        self, resources: Resources
    ) -> None:
        lease = resources.keys.job_lease("sleepmem.test_job")
        held: list[int] = []
        ids: list[str] = []

        def job(res: Resources, task_id: str) -> Mapping[str, Any]:
            held.append(int(res.redis.exists(lease)))
            ids.append(task_id)
            return refresh_job(res, task_id)  # the real hourly job

        # Two recorded search hits, on memories this store does not hold.
        record_hits(resources.redis, resources.keys, ["gone-1", "gone-2"],
                    at=datetime.now(UTC))
        app = create_celery(resources.settings, broker_url=resources.broker_url)
        task = maintenance_task(app, "sleepmem.test_job", job)
        result = task.apply(task_id="t-1").result
        assert (result["entries"], result["hits"], result["unknown_ids"]) == (1, 2, 2)
        assert result["memories_hit"] == 0
        assert read_hits(resources.redis, resources.keys) == []  # applied, then trimmed
        assert (held, ids) == ([1], ["t-1"])
        assert resources.redis.exists(lease) == 0

    def test_a_second_run_while_one_is_running_is_skipped(self, resources: Resources) -> None:
        calls: list[str] = []

        def job(res: Resources, task_id: str) -> Mapping[str, Any]:
            calls.append(task_id)
            return {}

        app = create_celery(resources.settings, broker_url=resources.broker_url)
        task = maintenance_task(app, "sleepmem.test_job", job)
        running = RedisLock(
            resources.redis, resources.keys.job_lease("sleepmem.test_job"), ttl_s=30
        )
        assert running.acquire()
        assert task.apply().result == {"skipped": "lease_held"}
        assert calls == []

    def test_maintenance_tasks_land_on_the_maintenance_queue(self, resources: Resources) -> None:
        app = create_celery(resources.settings, broker_url=resources.broker_url)
        maintenance_task(app, "sleepmem.test_job", lambda res, task_id: {})
        route = app.amqp.router.route({}, "sleepmem.test_job")
        assert route["queue"].name == names.QUEUE_MAINTENANCE
        assert app.amqp.router.route({}, names.CONSOLIDATE)["queue"].name == "consolidate"
        assert app.amqp.router.route({}, names.DRAIN)["queue"].name == "drain"
