"""A job row's ending, written once for every kind of job."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from sqlmodel import Session

from sleepmem.core.errors import (
    NO_JOB,
    NotFoundError,
)
from sleepmem.core.metrics import (
    JOBS_FINISHED,
)
from sleepmem.models import (
    Job,
    JobStatus,
)
from sleepmem.resources import Resources


def give_up(res: Resources, job_id: str, exc: BaseException, *, attempts: int) -> Job | None:
    """An operator job whose task stops retrying ends failed, never left queued or running.
    A job that already ended (done, cancelled, failed) keeps its own ending; None when
    there is no such job."""
    with Session(res.engine) as session:
        job = session.get(Job, job_id)
        if job is None:
            return None
        if job.status not in (JobStatus.queued.value, JobStatus.running.value):
            return job
        started = job.started_at or datetime.now(UTC)
    return finish_job(res, job_id, JobStatus.failed, started,
                   error=f"{type(exc).__name__}: gave up after {attempts} attempts; run the "
                         "job again when the cause has passed")


def finish_job(
    res: Resources, job_id: str, status: JobStatus, started: datetime, **values: Any
) -> Job:
    with Session(res.engine, expire_on_commit=False) as session:
        job = session.get(Job, job_id)
        if job is None:
            raise NotFoundError(NO_JOB)
        job.status, job.started_at, job.finished_at = status.value, started, datetime.now(UTC)
        for name, value in values.items():
            setattr(job, name, value)
        session.add(job)
        session.commit()
    JOBS_FINISHED.labels(kind=job.kind, status=job.status).inc()
    return job
