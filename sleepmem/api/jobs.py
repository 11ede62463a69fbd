"""Operator jobs over HTTP: ``POST /v1/jobs/reconsolidate``, ``GET /v1/jobs/{id}``,
``POST /v1/jobs/{id}/cancel``. Jobs run on the workers' maintenance queue; the job row
holds their progress (done / total, rate, ETA) and result (the diff)."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from fastapi import APIRouter, Request, Response
from pydantic import BaseModel, ConfigDict, Field, field_validator
from starlette.concurrency import run_in_threadpool

from sleepmem.api.auth import CallerTenant, Operator
from sleepmem.api.errors import ERROR_RESPONSES
from sleepmem.core.errors import ForbiddenError, NotFoundError, ValidationError
from sleepmem.core.redaction import contains_secret
from sleepmem.models import Job, Scope
from sleepmem.models.events import aware_time
from sleepmem.models.views import JobView
from sleepmem.pipelines.lifecycle.jobs import eta_seconds, job_name
from sleepmem.pipelines.lifecycle.jobs import get_job as load
from sleepmem.pipelines.lifecycle.jobs import list_jobs as recent_jobs
from sleepmem.pipelines.lifecycle.reconsolidate import create_job
from sleepmem.pipelines.write.consolidate import consolidate_scope
from sleepmem.resources import Resources
from sleepmem.schedules.scheduler import celery_sender
from sleepmem.services import cancel_job, consolidate_now, refresh_job, run_maintenance, sweep_job
from sleepmem.tasks import names
from sleepmem.workers.app import create_celery

router = APIRouter(prefix="/v1/jobs", tags=["jobs"], responses=ERROR_RESPONSES)


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

    @field_validator("since", mode="after")
    @classmethod
    def _since(cls, v: datetime | None) -> datetime | None:
        # The rule events follow: a time UTC cannot hold is a 422 here, not a failed job.
        return None if v is None else aware_time(v)

    @field_validator("job_id", mode="after")
    @classmethod
    def _job_id(cls, v: str | None) -> str | None:
        # The key is stored and listed as it is: one that looks like a credential is refused.
        if v is not None and (kind := contains_secret(v)) is not None:
            raise ValueError(f"looks like a secret ({kind}); use an id that is not a credential")
        return v


def job_view(job: Job) -> JobView:
    return JobView(eta_s=eta_seconds(job), **(job.model_dump() | {"id": job_name(job)}))


def send_task(request: Request, name: str, job_id: str) -> None:
    """Queue ``name(job_id)`` on the workers' broker (one Celery client per app)."""
    sender = getattr(request.app.state, "lifecycle_sender", None)
    if sender is None:
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


@router.get("", response_model=list[JobView], summary="Recent jobs of the caller's tenant")
async def list_jobs(request: Request, tenant: CallerTenant, limit: int = 20) -> list[JobView]:
    res: Resources = request.app.state.resources
    rows = await run_in_threadpool(lambda: recent_jobs(engine=res.engine, tenant=tenant,
                                                limit=max(1, min(limit, 500))))
    return [job_view(j) for j in rows]


class ConsolidateBody(BaseModel):
    model_config = ConfigDict(extra="forbid")

    scope: str | dict[str, str] = Field(description="consolidation scope key or its levels")


@router.post("/consolidate", summary="Consolidate one scope now (under the scope's lease)")
async def consolidate_scope_now(
    body: ConsolidateBody, request: Request, tenant: CallerTenant
) -> dict[str, Any]:
    scope = _scope_key(body.scope)
    if tenant is not None and scope.tenant != tenant:
        raise ForbiddenError(f"scope.tenant: this API key may only use tenant {tenant!r}")
    res: Resources = request.app.state.resources
    report = await run_in_threadpool(
        lambda: consolidate_now(res, scope_key=scope.key, pipeline=consolidate_scope,
                                worker="api")
    )
    return {"events": report.events, "ops": report.ops, "stage_seconds": report.stage_seconds}


@router.post("/{name}/run", summary="Run the forgetting sweep or the importance refresh now",
             dependencies=[Operator])
async def run_now(name: str, request: Request) -> dict[str, Any]:
    """Operator maintenance over every tenant: the same job the scheduler runs nightly /
    hourly, under the same lease (idempotent, so a double run is harmless). It needs the
    operator key (``SLEEPMEM_ADMIN_KEY``), never a tenant's."""

    jobs = {"sweep": (names.SWEEP, sweep_job), "refresh": (names.REFRESH, refresh_job)}
    if name not in jobs:
        raise ValidationError("name", f"must be one of {sorted(jobs)}")  # no echo (issue 41)
    task, job = jobs[name]
    res: Resources = request.app.state.resources
    return await run_in_threadpool(lambda: run_maintenance(res, task, job, worker="api"))


@router.get("/{job_id}", response_model=JobView, summary="A job's status, progress and result")
async def get_job(job_id: str, request: Request, tenant: CallerTenant) -> JobView:
    res: Resources = request.app.state.resources
    job = await run_in_threadpool(lambda: load(engine=res.engine, job_id=job_id, tenant=tenant))
    return job_view(_owned(job, tenant))


@router.post("/{job_id}/cancel", status_code=202, response_model=JobView,
             summary="Ask a running job to stop after its current chunk")
async def cancel(job_id: str, request: Request, tenant: CallerTenant) -> JobView:
    res: Resources = request.app.state.resources
    job = await run_in_threadpool(lambda: load(engine=res.engine, job_id=job_id, tenant=tenant))
    _owned(job, tenant)
    return job_view(await run_in_threadpool(cancel_job, res, job.id))
