"""The rows of operator jobs (re-consolidation, erasure): named per tenant, found by the
id their client knows, updated as they run, with an estimate of the time left."""

from __future__ import annotations

import hashlib
from typing import Any

from sqlalchemy.engine import Engine
from sqlmodel import Session, col, select

from sleepmem.core.errors import NO_JOB, NotFoundError
from sleepmem.models import Job, JobStatus


def job_key(tenant: str, name: str) -> str:
    """The row id of a job its client named: the name within its tenant.

    Names are per tenant: two tenants may both call a job "nightly", and neither can learn
    that the other did. Server-made ids are 32 hex digits; these are 33 characters.
    """
    return "n" + hashlib.blake2b(f"{tenant}\x00{name}".encode(), digest_size=16).hexdigest()


def job_name(job: Job) -> str:
    """The id a client knows the job by: its own name, or the id the server made."""
    return str(job.params.get("name") or job.id)


def get_job(*, engine: Engine, job_id: str, tenant: str | None = None) -> Job:
    """A job by the id its client knows; with ``tenant``, only that tenant's jobs."""
    with Session(engine, expire_on_commit=False) as session:
        job = session.get(Job, job_key(tenant, job_id)) if tenant is not None else None
        if job is None:
            job = session.get(Job, job_id)  # a server-made id, or a row id from a task
        if job is None and tenant is None:
            # Unauthenticated (a loopback dev server, an operator's CLI): by name, if unique.
            named = [
                j for j in session.exec(select(Job).where(col(Job.id).startswith("n")))
                if j.params.get("name") == job_id
            ]
            job = named[0] if len(named) == 1 else None
    if job is None or (tenant is not None and job.tenant != tenant):
        # The id is not repeated: a 404 says nothing about ids, whoever owns them.
        raise NotFoundError("no such job (job ids are per tenant; check the id)")
    return job


def list_jobs(*, engine: Engine, tenant: str | None = None, limit: int = 50) -> list[Job]:
    """The newest jobs first; with ``tenant``, only that tenant's."""
    stmt = select(Job).order_by(col(Job.created_at).desc()).limit(limit)
    if tenant is not None:
        stmt = stmt.where(col(Job.tenant) == tenant)
    with Session(engine, expire_on_commit=False) as session:
        return list(session.exec(stmt))


def eta_seconds(job: Job) -> float | None:
    """Seconds left at the job's rate so far; None unless it is running and measured."""
    if job.rate <= 0 or job.total <= 0 or job.status != JobStatus.running.value:
        return None
    return max(0.0, (job.total - job.done) / job.rate)


def update_job(engine: Engine, job_id: str, **values: Any) -> Job:
    """Set ``values`` on the job's row in a short transaction of its own; the row after."""
    with Session(engine, expire_on_commit=False) as session:
        job = session.get(Job, job_id)
        if job is None:
            raise NotFoundError(NO_JOB)
        for name, value in values.items():
            setattr(job, name, value)
        session.add(job)
        session.commit()
        return job
