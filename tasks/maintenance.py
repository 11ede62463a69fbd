"""Maintenance tasks (sweep, refresh, reconcile, index upkeep) on the maintenance queue.

Each is a lifecycle pipeline wrapped by :func:`maintenance_task`, which gives it the shared
behaviour: one run at a time across all workers (a job lease), transient failures retried
with backoff, one log line with the counts the job returns. To add one, write the
pipeline in ``pipelines/``, a small adapter here, and list it in :data:`JOBS`::

    def _sweep(res: Resources, task_id: str) -> Mapping[str, Any]:
        report = forget.sweep(engine=res.engine, ports=res.ports(), settings=res.settings,
                              now=datetime.now(UTC), task_id=task_id)
        return {"demoted": report.demoted, "archived": report.archived}

    JOBS = {names.SWEEP: _sweep}

The scheduler only schedules jobs whose task name is registered, so a job becomes
scheduled by being listed here.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from typing import Any

from celery import Celery, Task

from sleepmem.errors import LeaseHeldError, TransientError
from sleepmem.locks import Lease
from sleepmem.logs import get_logger
from sleepmem.resources import Resources
from tasks import retry
from workers.process import current_resources

log = get_logger("sleepmem.tasks.maintenance")

MaintenanceJob = Callable[[Resources, str], Mapping[str, Any]]
"""(process resources, task id) -> counts worth logging (no content)."""

JOBS: dict[str, MaintenanceJob] = {}


def maintenance_task(
    app: Celery, name: str, job: MaintenanceJob, *, lease_s: float | None = None
) -> Task:
    """Register ``job`` as task ``name`` with the shared lease, retry and log policy."""

    @app.task(name=name, bind=True, max_retries=retry.MAX_RETRIES, shared=False)  # type: ignore[untyped-decorator]
    def run(self: Task) -> dict[str, Any]:
        res = current_resources()
        task_id = str(self.request.id or "")
        started = time.perf_counter()
        ttl = lease_s or res.settings.lease_seconds
        try:
            with Lease(res.redis, res.keys.job_lease(name), ttl_s=ttl):
                counts = dict(job(res, task_id))
        except LeaseHeldError:
            # The run in progress does the same work; queueing another would only repeat it.
            log.info("maintenance_skipped", job=name, reason="lease_held")
            return {"skipped": "lease_held"}
        except TransientError as exc:
            log.warning("maintenance_retry", job=name, error=type(exc).__name__)
            raise self.retry(exc=exc, countdown=retry.countdown(self.request.retries)) from exc
        log.info("maintenance", job=name, seconds=round(time.perf_counter() - started, 4), **counts)
        return counts

    return run


def register(app: Celery) -> None:
    for name, job in JOBS.items():
        maintenance_task(app, name, job)
