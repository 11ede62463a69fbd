"""The shared wrapper of scheduled maintenance tasks (sweep, refresh, reconcile).

:func:`maintenance_task` gives a use-case from :mod:`sleepmem.services` the behaviour every
maintenance job shares: one run at a time across all workers (a job lease), transient
failures retried with backoff, one log line with the counts the job returns. The jobs are
listed in :data:`sleepmem.tasks.lifecycle.MAINTENANCE_JOBS`; the scheduler only schedules
task names that are registered, so a job becomes scheduled by being listed there.
"""

from __future__ import annotations

import time
from typing import Any

from celery import Celery, Task

from sleepmem.adapters.redis.locks import Lease
from sleepmem.core.errors import LeaseHeldError, TransientError
from sleepmem.core.logs import get_logger
from sleepmem.core.metrics import MAINTENANCE_RUNS
from sleepmem.services import MaintenanceJob
from sleepmem.tasks import retry
from sleepmem.tasks.context import current_resources

log = get_logger("sleepmem.tasks.maintenance")



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
            MAINTENANCE_RUNS.labels(job=name, outcome="skipped").inc()
            log.info("maintenance_skipped", job=name, reason="lease_held")
            return {"skipped": "lease_held"}
        except TransientError as exc:
            MAINTENANCE_RUNS.labels(job=name, outcome="retry").inc()
            log.warning("maintenance_retry", job=name, error=type(exc).__name__)
            raise self.retry(exc=exc, countdown=retry.countdown(self.request.retries)) from exc
        MAINTENANCE_RUNS.labels(job=name, outcome="ok").inc()
        # A routine run that found nothing to do stays at DEBUG, like an empty drain.
        busy = any(v for v in counts.values() if isinstance(v, int | float))
        (log.info if busy else log.debug)(
            "maintenance", job=name, seconds=round(time.perf_counter() - started, 4), **counts
        )
        return counts

    return run
