"""Scheduled maintenance (sweep, refresh, reconcile) and the operator's jobs
(re-consolidation, cancel, recovery at start-up)."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from datetime import UTC, datetime
from typing import Any

from sqlmodel import Session, col, select

from sleepmem.adapters.redis.hits import read_hits, trim_hits
from sleepmem.adapters.redis.locks import Lease
from sleepmem.core.errors import (
    TransientError,
)
from sleepmem.core.logs import get_logger
from sleepmem.core.metrics import (
    JOBS_FINISHED,
    SWEEP_RESULTS,
)
from sleepmem.models import (
    Job,
    JobStatus,
)
from sleepmem.pipelines.lifecycle import jobs
from sleepmem.pipelines.lifecycle import reconsolidate as recon
from sleepmem.pipelines.lifecycle.forget import sweep
from sleepmem.pipelines.lifecycle.refresh import RefreshReport, refresh
from sleepmem.pipelines.write.index import reconcile
from sleepmem.resources import Resources
from sleepmem.services.erasure import ERASE_KIND, run_erasure
from sleepmem.services.job_rows import finish_job

log = get_logger("sleepmem.services")


HITS_PER_REFRESH = 10_000
SWEEP_RESULT_KINDS = ("scanned", "expired", "demoted", "archived", "evicted", "deleted")
CANCEL_TTL_S = 7 * 86400

MaintenanceJob = Callable[[Resources, str], Mapping[str, Any]]
"""(process resources, task id) -> counts worth logging (no content)."""


# -- scheduled maintenance ---------------------------------------------------------------


def sweep_job(res: Resources, task_id: str) -> Mapping[str, Any]:
    counts = dict(sweep(engine=res.engine, ports=res.ports(), settings=res.settings,
                        task_id=task_id).counts())
    for result in SWEEP_RESULT_KINDS:
        SWEEP_RESULTS.labels(result=result).inc(int(counts.get(result, 0)))
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



# -- operator jobs ---------------------------------------------------------------------


def cancel_job(res: Resources, job_id: str) -> Job:
    """A running job stops after its chunk; a job not running (queued, perhaps stale from a
    process that died) is cancelled now, so it never sits in 'queued' forever."""
    job = jobs.get_job(engine=res.engine, job_id=job_id)
    job_id = job.id  # the row id, if it was called by the name its client gave
    res.redis.set(res.keys.job_cancel(job_id), "1", ex=CANCEL_TTL_S)
    if job.status == JobStatus.queued.value or (
        job.status == JobStatus.running.value and not res.redis.exists(res.keys.job_lease(job_id))
    ):
        return finish_job(res, job_id, JobStatus.cancelled, job.started_at or datetime.now(UTC),
                       error="cancelled before it ran" if job.status == "queued"
                       else "cancelled: the process running it had stopped")
    return job


def recover_jobs(res: Resources, requeue: Callable[[str], None]) -> dict[str, int]:
    """At start-up: jobs a dead process left behind. Queued re-consolidations are sent
    again (a job runs once: it is idempotent and holds its lease); 'running' jobs whose
    lease nobody holds are failed with how to resume them; queued erasures run again."""
    counts = {"requeued": 0, "failed": 0}
    with Session(res.engine) as session:
        stale = list(session.exec(select(Job).where(
            col(Job.status).in_([JobStatus.queued.value, JobStatus.running.value]))))
    for job in stale:
        if res.redis.exists(res.keys.job_lease(job.id)):
            continue  # someone is on it
        if job.status == JobStatus.queued.value and job.kind == recon.KIND:
            requeue(job.id)
            counts["requeued"] += 1
        elif job.status == JobStatus.queued.value and job.kind == ERASE_KIND:
            try:
                run_erasure(res, job.id, worker="recovery")
            except TransientError:
                continue  # busy now: it stays queued for the next start
            except Exception as exc:  # the job row says it failed; the process still starts
                log.warning("jobs_recovery_failed", job_id=job.id, error=type(exc).__name__)
                counts["failed"] += 1
                continue
            counts["requeued"] += 1
        else:
            finish_job(res, job.id, JobStatus.failed, job.started_at or datetime.now(UTC),
                    error="interrupted: the process running it stopped; resume with "
                          f"`sleepmem reconsolidate --scope {job.scope_key} --job {job.id} "
                          "--resume`")
            counts["failed"] += 1
    if stale:
        log.info("jobs_recovered", **counts)
    return counts


def run_maintenance(
    res: Resources, name: str, job: MaintenanceJob, *, worker: str
) -> dict[str, Any]:
    """Sweep or refresh now, under the same job lease the scheduled task takes."""
    with Lease(res.redis, res.keys.job_lease(name), ttl_s=res.settings.lease_seconds):
        return dict(job(res, worker))


def run_reconsolidation(
    res: Resources,
    job_id: str,
    *,
    on_progress: recon.ProgressHook | None = None,
    resume: bool = False,
    task_id: str = "",
    worker: str = "",
) -> Job:
    job = jobs.get_job(engine=res.engine, job_id=job_id)
    job_id = job.id  # the row id, if it was called by the name its client gave
    if resume:
        res.redis.delete(res.keys.job_cancel(job_id))
    ttl = res.settings.lease_seconds
    with Lease(res.redis, res.keys.job_lease(job_id), ttl_s=ttl), \
            Lease(res.redis, res.keys.lease(job.scope_key), ttl_s=ttl):
        try:
            finished = recon.run_job(
                engine=res.engine, ports=res.ports(), settings=res.settings, job_id=job_id,
                should_cancel=lambda: bool(res.redis.exists(res.keys.job_cancel(job_id))),
                on_progress=on_progress, resume=resume, task_id=task_id, worker=worker,
            )
        except Exception:
            JOBS_FINISHED.labels(kind=job.kind, status=JobStatus.failed.value).inc()
            raise
    JOBS_FINISHED.labels(kind=finished.kind, status=finished.status).inc()
    return finished
