"""The use-cases: what a task, the HTTP API, the CLI, the demo and the benches all run.

Each takes the process's :class:`~sleepmem.resources.Resources` and plain arguments, takes
the leases its work needs, and calls a pipeline with ports built from those resources.
Transport (Celery retries, HTTP status codes, CLI exit codes) stays with the callers.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable, Mapping
from datetime import UTC, datetime
from typing import Any, Protocol

from sqlalchemy.engine import Engine
from sqlmodel import Session

from sleepmem.adapters.redis.erase import rewrite_persistence
from sleepmem.adapters.redis.hits import read_hits, trim_hits
from sleepmem.adapters.redis.locks import Lease
from sleepmem.core.errors import LeaseHeldError, NotFoundError, TransientError, ValidationError
from sleepmem.core.keys import scope_digest
from sleepmem.core.logs import get_logger
from sleepmem.core.settings import Settings
from sleepmem.models import Job, JobStatus, Scope
from sleepmem.pipelines.consolidate import ConsolidationReport
from sleepmem.pipelines.index import reconcile
from sleepmem.pipelines.lifecycle import erase as erasure
from sleepmem.pipelines.lifecycle import reconsolidate as recon
from sleepmem.pipelines.lifecycle.forget import sweep
from sleepmem.pipelines.lifecycle.refresh import RefreshReport, refresh
from sleepmem.pipelines.ports import Ports
from sleepmem.resources import Resources

log = get_logger("sleepmem.services")

ERASE_KIND = "erase"
HITS_PER_REFRESH = 10_000
CANCEL_TTL_S = 7 * 86400

MaintenanceJob = Callable[[Resources, str], Mapping[str, Any]]
"""(process resources, task id) -> counts worth logging (no content)."""


# -- consolidation -----------------------------------------------------------------------


class ConsolidatePipeline(Protocol):
    def __call__(
        self,
        *,
        engine: Engine,
        ports: Ports,
        settings: Settings,
        scope_key: str,
        task_id: str = "",
        worker: str = "",
    ) -> ConsolidationReport: ...


def run_consolidation(
    resources: Resources,
    *,
    scope_key: str,
    pipeline: ConsolidatePipeline,
    task_id: str = "",
    worker: str = "",
) -> ConsolidationReport:
    """Consolidate one scope now; raises LeaseHeldError if another worker is on it."""
    try:
        scope = Scope.parse_key(scope_key, field="scope_key")
    except ValidationError:
        # Garbage is not retried: a malformed key will not become valid by waiting.
        log.warning("consolidate_refused", field="scope_key", task_id=task_id)
        raise
    settings, redis, keys = resources.settings, resources.redis, resources.keys
    fields = {"tenant": scope.tenant, "scope": scope_digest(scope_key)}
    started = time.perf_counter()
    try:
        with Lease(redis, keys.lease(scope_key), ttl_s=settings.lease_seconds) as lease:
            # The process clock: the wall clock unless a runner installed its own.
            ports = resources.ports()
            # The pipeline checks this right before its commit: a run whose lease was lost
            # rolls back, and the next holder redoes the batch.
            ports.lease = lease
            report = pipeline(
                engine=resources.engine,
                ports=ports,
                settings=settings,
                scope_key=scope_key,
                task_id=task_id,
                worker=worker,
            )
            # Cleared only now, still under the lease: until this run has committed, the
            # scope still looks due, and a tick would queue a second run for nothing.
            # Events that arrived meanwhile are still pending and trigger the next run.
            redis.delete(keys.queued(scope_key))
    except LeaseHeldError:
        log.info("consolidate_deferred", reason="lease_held", **fields)
        raise
    except TransientError as exc:
        log.warning("consolidate_retry", error=type(exc).__name__, **fields)
        raise
    except Exception as exc:
        # Cool down: the next tick would otherwise re-queue a scope that fails every time.
        redis.set(keys.queued(scope_key), "failed", ex=max(1, int(settings.lease_seconds)))
        log.error(
            "consolidate_failed",
            error=type(exc).__name__,
            seconds=round(time.perf_counter() - started, 4),
            **fields,
        )
        raise
    log.info(
        "consolidate",
        task_id=task_id,
        events=report.events,
        memories_written=report.memories_written,
        ops=report.ops,
        llm_calls=report.llm_calls,
        llm_tokens=report.llm_tokens,
        stage_seconds={k: round(v, 4) for k, v in report.stage_seconds.items()},
        lease_lost=lease.lost.is_set(),
        seconds=round(time.perf_counter() - started, 4),
        **fields,
    )
    return report


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



# -- operator jobs ---------------------------------------------------------------------


def cancel_job(res: Resources, job_id: str) -> Job:
    job = recon.get_job(engine=res.engine, job_id=job_id)
    job_id = job.id  # the row id, if it was called by the name its client gave
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
    job_id = job.id  # the row id, if it was called by the name its client gave
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
    job_id = job.id  # the row id, if it was called by the name its client gave
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
                    engine=res.engine, ports=ports,
                    memory_id=str(job.params["memory_id"]), task_id=task_id or job_id,
                    worker=worker,
                )
            else:
                receipt = erasure.erase_scope(
                    engine=res.engine, ports=ports,
                    scope=str(job.params["scope"]), task_id=task_id or job_id, worker=worker,
                    keep_job=job_id,
                )
    except NotFoundError as exc:
        return _finish(res, job_id, JobStatus.failed, started, error=str(exc))
    receipt.stores = reach_every_byte(res)
    return _finish(res, job_id, JobStatus.done, started, result=receipt.model_dump(mode="json"))


def reach_every_byte(res: Resources) -> dict[str, str]:
    """After an erasure: make the deleted data leave the files of every store, and say how.

    SQL rows are deleted in the erasure's transactions (SQLite runs with secure_delete, so
    freed pages are zeroed); the vector index is rewritten from its live points; Redis
    rewrites its append-only file and its snapshot. The audit keeps ids, counts and a
    content hash, never content (see README, "Erasure").
    """
    stores = {"sql": "deleted"}
    if res.engine.dialect.name == "sqlite":
        # Old page images live in the -wal file until a checkpoint: truncate it now.
        with res.engine.connect() as conn:
            conn.exec_driver_sql("PRAGMA wal_checkpoint(TRUNCATE)")
        stores["sql"] = "deleted, pages zeroed (secure_delete), WAL checkpointed"
    stores |= {
        "audit": "kept: receipt id, tenant, scope key, memory ids, counts and a content hash",
    }
    try:
        stores["vector_index"] = res.index.compact()
    except Exception as exc:  # the erasure itself is committed: report, do not fail it
        log.warning("erase.compact_failed", error=type(exc).__name__)
        stores["vector_index"] = f"deleted; compaction failed: {type(exc).__name__}"
    stores.update(rewrite_persistence(res.redis))
    return stores


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


