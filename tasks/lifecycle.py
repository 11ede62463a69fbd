"""Lifecycle tasks, all on the maintenance queue.

- ``sleepmem.sweep``, ``sleepmem.refresh``, ``sleepmem.reconcile``: scheduled maintenance
  jobs, wrapped by :func:`tasks.maintenance.maintenance_task` (one run at a time, retries).
- ``sleepmem.reconsolidate(job_id)`` and ``sleepmem.erase(job_id)``: operator jobs whose
  row (``job`` table) holds parameters, progress and result. Under the job's own lease (a
  redelivered message never runs a job twice at once) and the scope's consolidation lease
  (no consolidation writes into a scope being rebuilt or erased).

The ``run_*`` functions are what the tasks, the CLI and the HTTP API call.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any

from celery import Celery, Task
from sqlmodel import Session

from models import Job, JobStatus
from pipelines import erase as erasure
from pipelines import reconsolidate as recon
from pipelines.forget import sweep
from pipelines.index import reconcile
from pipelines.refresh import RefreshReport, refresh
from sleepmem.errors import NotFoundError, TransientError, ValidationError
from sleepmem.hits import read_hits, trim_hits
from sleepmem.locks import Lease
from sleepmem.logs import get_logger
from sleepmem.resources import Resources
from tasks import maintenance, names, retry
from workers.process import current_resources

log = get_logger("sleepmem.tasks.lifecycle")

ERASE_KIND = "erase"
HITS_PER_REFRESH = 10_000
CANCEL_TTL_S = 7 * 86400


# -- scheduled maintenance ---------------------------------------------------------------


def sweep_job(res: Resources, task_id: str) -> Mapping[str, Any]:
    counts = dict(sweep(engine=res.engine, ports=res.ports(), settings=res.settings,
                        task_id=task_id).counts())
    # The nightly slot is also when the embedded engine compacts its segments (dropping
    # deleted points), off the hot path.
    counts["index_optimized"] = int(res.index.maintain())
    return counts


def refresh_job(res: Resources, task_id: str) -> Mapping[str, Any]:
    """Apply recorded hits page by page, trimming each page once it is in SQL."""
    total = RefreshReport()
    ports = res.ports()
    while True:
        hits = read_hits(res.redis, res.keys, count=HITS_PER_REFRESH)
        report = refresh(engine=res.engine, ports=ports, settings=res.settings, hits=hits,
                         task_id=task_id)
        for name, value in report.counts().items():
            setattr(total, name, getattr(total, name) + value)
        if not hits:
            return total.counts()
        # Entries up to here are applied; a crash before this line re-applies them once.
        trim_hits(res.redis, res.keys, upto=hits[-1][0])
        if len(hits) < HITS_PER_REFRESH:
            return total.counts()


def reconcile_job(res: Resources, task_id: str) -> Mapping[str, Any]:
    report = reconcile(engine=res.engine, index=res.index, embedder=res.embedder)
    return {"upserted": report.upserted, "deleted": report.deleted}


MAINTENANCE_JOBS: dict[str, maintenance.MaintenanceJob] = {
    names.SWEEP: sweep_job,
    names.REFRESH: refresh_job,
    names.RECONCILE: reconcile_job,
}


# -- operator jobs ---------------------------------------------------------------------


def cancel_job(res: Resources, job_id: str) -> Job:
    job = recon.get_job(engine=res.engine, job_id=job_id)
    res.redis.set(res.keys.job_cancel(job_id), "1", ex=CANCEL_TTL_S)
    return job


def run_reconsolidation(
    res: Resources,
    job_id: str,
    *,
    on_progress: recon.ProgressHook | None = None,
    resume: bool = False,
    task_id: str = "",
    worker: str = "",
) -> Job:
    job = recon.get_job(engine=res.engine, job_id=job_id)
    if resume:
        res.redis.delete(res.keys.job_cancel(job_id))
    ttl = res.settings.lease_seconds
    with Lease(res.redis, res.keys.job_lease(job_id), ttl_s=ttl), \
            Lease(res.redis, res.keys.lease(job.scope_key), ttl_s=ttl):
        return recon.run_job(
            engine=res.engine, ports=res.ports(), settings=res.settings, job_id=job_id,
            should_cancel=lambda: bool(res.redis.exists(res.keys.job_cancel(job_id))),
            on_progress=on_progress, resume=resume, task_id=task_id, worker=worker,
        )


def create_erase_job(
    res: Resources, *, tenant: str, scope_key: str | None = None,
    memory_id: str | None = None,
) -> Job:
    if (scope_key is None) == (memory_id is None):
        raise ValidationError("erase", "name exactly one of a scope or a memory id")
    if scope_key is not None:
        erasure.check_scope(scope_key)
    job = Job(
        id=uuid.uuid4().hex, kind=ERASE_KIND, tenant=tenant, scope_key=scope_key or "",
        params={"scope": scope_key, "memory_id": memory_id},
        created_at=datetime.now(UTC),
    )
    with Session(res.engine, expire_on_commit=False) as session:
        session.add(job)
        session.commit()
    return job


def run_erasure(res: Resources, job_id: str, *, task_id: str = "", worker: str = "") -> Job:
    """Erase what the job names; the receipt becomes the job's result. Done stays done."""
    job = recon.get_job(engine=res.engine, job_id=job_id)
    if job.kind != ERASE_KIND:
        raise ValidationError("job", f"{job_id} is a {job.kind} job, not {ERASE_KIND}")
    if job.status == JobStatus.done.value:
        return job
    ports = res.ports()
    started = ports.clock()
    try:
        with Lease(res.redis, res.keys.job_lease(job_id), ttl_s=res.settings.lease_seconds):
            if job.params.get("memory_id"):
                receipt = erasure.erase_memory(
                    engine=res.engine, ports=ports, redis=res.redis, keys=res.keys,
                    memory_id=str(job.params["memory_id"]), task_id=task_id or job_id,
                    worker=worker,
                )
            else:
                receipt = erasure.erase_scope(
                    engine=res.engine, ports=ports, redis=res.redis, keys=res.keys,
                    scope=str(job.params["scope"]), task_id=task_id or job_id, worker=worker,
                    keep_job=job_id,
                )
    except NotFoundError as exc:
        return _finish(res, job_id, JobStatus.failed, started, error=str(exc))
    return _finish(res, job_id, JobStatus.done, started, result=receipt.model_dump(mode="json"))


def _finish(
    res: Resources, job_id: str, status: JobStatus, started: datetime, **values: Any
) -> Job:
    with Session(res.engine, expire_on_commit=False) as session:
        job = session.get(Job, job_id)
        if job is None:
            raise NotFoundError(f"no job {job_id}")
        job.status, job.started_at, job.finished_at = status.value, started, datetime.now(UTC)
        for name, value in values.items():
            setattr(job, name, value)
        session.add(job)
        session.commit()
        return job


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
            raise self.retry(exc=exc, countdown=retry.countdown(self.request.retries)) from exc
        return {"job": job.id, "status": job.status, **(job.result.get("counts") or {})}

    @app.task(name=names.ERASE, bind=True, shared=False, max_retries=retry.MAX_RETRIES)  # type: ignore[untyped-decorator]
    def erase(self: Task, job_id: str) -> dict[str, Any]:
        try:
            job = run_erasure(current_resources(), job_id, task_id=str(self.request.id or ""),
                              worker=str(self.request.hostname or ""))
        except TransientError as exc:
            raise self.retry(exc=exc, countdown=retry.countdown(self.request.retries)) from exc
        return {"job": job.id, "status": job.status, **(job.result.get("removed") or {})}
