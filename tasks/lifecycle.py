"""Lifecycle tasks, all on the maintenance queue.

- ``sleepmem.sweep``, ``sleepmem.refresh``, ``sleepmem.reconcile``, ``sleepmem.checkpoints``
  (mirror session checkpoints to SQL, retire old ones): scheduled maintenance
  jobs, wrapped by :func:`sleepmem.tasks.maintenance.maintenance_task` (one run at a time,
  retries).
- ``sleepmem.reconsolidate(job_id)`` and ``sleepmem.erase(job_id)``: operator jobs whose
  row (``job`` table) holds parameters, progress and result. Under the job's own lease (a
  redelivered message never runs a job twice at once) and the scope's consolidation lease
  (no consolidation writes into a scope being rebuilt or erased).

The work itself is in :mod:`sleepmem.services`, which the CLI and the HTTP API call too.
"""

from __future__ import annotations

from typing import Any

from celery import Celery, Task

from sleepmem.core.errors import TransientError
from sleepmem.services import (
    MaintenanceJob,
    give_up,
    reconcile_job,
    refresh_job,
    run_erasure,
    run_reconsolidation,
    sweep_job,
)
from sleepmem.tasks import maintenance, names, retry
from sleepmem.tasks.context import current_resources
from sleepmem.working import checkpoint_job

MAINTENANCE_JOBS: dict[str, MaintenanceJob] = {
    names.SWEEP: sweep_job,
    names.REFRESH: refresh_job,
    names.RECONCILE: reconcile_job,
    names.CHECKPOINTS: checkpoint_job,
}


def register(app: Celery) -> None:
    for name, job in MAINTENANCE_JOBS.items():
        maintenance.maintenance_task(app, name, job)

    @app.task(name=names.RECONSOLIDATE, bind=True, shared=False, max_retries=retry.MAX_RETRIES)  # type: ignore[untyped-decorator]
    def reconsolidate(self: Task, job_id: str) -> dict[str, Any]:
        try:
            job = run_reconsolidation(current_resources(), job_id,
                                      task_id=str(self.request.id or ""),
                                      worker=str(self.request.hostname or ""))
        except TransientError as exc:  # incl. a held lease: the scope is busy, try later
            raise _retry_or_fail(self, job_id, exc) from exc
        return {"job": job.id, "status": job.status, **(job.result.get("counts") or {})}

    @app.task(name=names.ERASE, bind=True, shared=False, max_retries=retry.MAX_RETRIES)  # type: ignore[untyped-decorator]
    def erase(self: Task, job_id: str) -> dict[str, Any]:
        try:
            job = run_erasure(current_resources(), job_id, task_id=str(self.request.id or ""),
                              worker=str(self.request.hostname or ""))
        except TransientError as exc:
            raise _retry_or_fail(self, job_id, exc) from exc
        return {"job": job.id, "status": job.status, **(job.result.get("removed") or {})}


def _retry_or_fail(task: Task, job_id: str, exc: TransientError) -> BaseException:
    """What the task raises: a retry while it has retries left; once they are spent, the
    error itself, after the job's row is marked failed (never left queued or running)."""
    if task.request.retries >= task.max_retries:
        give_up(current_resources(), job_id, exc, attempts=task.request.retries + 1)
        return exc
    retried: BaseException = task.retry(exc=exc, countdown=retry.countdown(task.request.retries))
    return retried  # retry raises its Retry itself; this keeps the callers' `raise` form
