"""Operator jobs over HTTP: ``POST /v1/jobs/reconsolidate``, ``GET /v1/jobs/{id}``,
``POST /v1/jobs/{id}/cancel``. Jobs run on the workers' maintenance queue; the job row
holds their progress (done / total, rate, ETA) and result (the diff)."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from fastapi import APIRouter, Request, Response
from pydantic import BaseModel, ConfigDict, Field
from starlette.concurrency import run_in_threadpool

from sleepmem.api.auth import CallerTenant
from sleepmem.core.errors import ForbiddenError, NotFoundError, ValidationError
from sleepmem.models import Job, Scope
from sleepmem.resources import Resources

router = APIRouter(prefix="/v1/jobs", tags=["jobs"])


class ReconsolidateBody(BaseModel):
    model_config = ConfigDict(extra="forbid")

    scope: str | dict[str, str] = Field(
        description="consolidation scope: a key 't=…/a=…/u=…/p=…/s=' or its levels"
    )
    since: datetime | None = Field(default=None, description="replay events from this time")
    apply: bool = Field(default=False, description="swap in the new set (default: dry run)")
    job_id: str | None = Field(
        default=None, pattern=r"^[A-Za-z0-9_-]{1,64}$",
        description="idempotency key: the same id returns the same job",
    )


class JobView(BaseModel):
    id: str
    kind: str
    status: str
    tenant: str
    scope_key: str
    params: dict[str, Any]
    done: int
    total: int
    rate: float
    eta_s: float | None
    result: dict[str, Any]
    error: str
    created_at: datetime
    started_at: datetime | None = None
    finished_at: datetime | None = None


def job_view(job: Job) -> JobView:
    from sleepmem.pipelines.lifecycle.reconsolidate import eta_seconds, job_name

    return JobView(eta_s=eta_seconds(job), **(job.model_dump() | {"id": job_name(job)}))


def send_task(request: Request, name: str, job_id: str) -> None:
    """Queue ``name(job_id)`` on the workers' broker (one Celery client per app)."""
    sender = getattr(request.app.state, "lifecycle_sender", None)
    if sender is None:
        from sleepmem.schedules.scheduler import celery_sender
        from sleepmem.workers.app import create_celery

        res: Resources = request.app.state.resources
        sender = celery_sender(create_celery(res.settings, broker_url=res.broker_url))
        request.app.state.lifecycle_sender = sender
    sender(name, args=(job_id,))


def _scope_key(scope: str | dict[str, str]) -> Scope:
    if isinstance(scope, str):
        return Scope.parse_key(scope, canonical=False)
    try:
        return Scope(**scope)
    except (ValueError, TypeError) as exc:
        raise ValidationError("scope", f"not a scope ({exc})") from None


def _owned(job: Job, tenant: str | None) -> Job:
    # Another tenant's job is reported missing, not forbidden: ids do not leak.
    if tenant is not None and job.tenant != tenant:
        raise NotFoundError("no such job (job ids are per tenant; check the id)")
    return job


@router.post("/reconsolidate", status_code=202, response_model=JobView,
             summary="Queue a re-consolidation of a scope (dry run unless apply)")
async def reconsolidate(
    body: ReconsolidateBody, request: Request, response: Response, tenant: CallerTenant
) -> JobView:
    from sleepmem.pipelines.lifecycle.reconsolidate import create_job
    from sleepmem.tasks import names

    scope = _scope_key(body.scope)
    if tenant is not None and scope.tenant != tenant:
        raise ForbiddenError(f"scope.tenant: this API key may only use tenant {tenant!r}")
    res: Resources = request.app.state.resources
    job = await run_in_threadpool(
        lambda: create_job(engine=res.engine, scope_key=scope.key,
                           now=res.ports().clock(), since=body.since, apply=body.apply,
                           job_id=body.job_id)
    )
    _owned(job, tenant)
    if job.status == "queued":
        await run_in_threadpool(send_task, request, names.RECONSOLIDATE, job.id)
    view = job_view(job)
    response.headers["Location"] = f"/v1/jobs/{view.id}"
    return view


@router.get("/{job_id}", response_model=JobView, summary="A job's status, progress and result")
async def get_job(job_id: str, request: Request, tenant: CallerTenant) -> JobView:
    from sleepmem.pipelines.lifecycle.reconsolidate import get_job as load

    res: Resources = request.app.state.resources
    job = await run_in_threadpool(lambda: load(engine=res.engine, job_id=job_id, tenant=tenant))
    return job_view(_owned(job, tenant))


@router.post("/{job_id}/cancel", status_code=202, response_model=JobView,
             summary="Ask a running job to stop after its current chunk")
async def cancel(job_id: str, request: Request, tenant: CallerTenant) -> JobView:
    from sleepmem.pipelines.lifecycle.reconsolidate import get_job as load
    from sleepmem.services import cancel_job

    res: Resources = request.app.state.resources
    job = await run_in_threadpool(lambda: load(engine=res.engine, job_id=job_id, tenant=tenant))
    _owned(job, tenant)
    return job_view(await run_in_threadpool(cancel_job, res, job.id))
