"""The use-cases: what a task, the HTTP API, the CLI, the demo and the benches all run.

Each takes the process's :class:`~sleepmem.resources.Resources` and plain arguments, takes
the leases its work needs, and calls a pipeline with ports built from those resources.
Transport (Celery retries, HTTP status codes, CLI exit codes) stays with the callers.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable, Iterator, Mapping, Sequence
from datetime import UTC, datetime
from typing import Any, Protocol

import redis as redis_lib
import sqlalchemy as sa
import structlog
from prometheus_client.core import GaugeMetricFamily, Metric
from sqlalchemy.engine import Engine
from sqlmodel import Session, SQLModel, col, select

from sleepmem.adapters.redis.erase import rewrite_persistence
from sleepmem.adapters.redis.hits import read_hits, trim_hits
from sleepmem.adapters.redis.locks import Lease
from sleepmem.core.auditkey import audit_key
from sleepmem.core.errors import (
    NO_JOB,
    NO_MEMORY,
    LeaseHeldError,
    NotFoundError,
    SleepmemError,
    TransientError,
    ValidationError,
)
from sleepmem.core.keys import DRAIN_GROUP, scope_digest
from sleepmem.core.logs import get_logger
from sleepmem.core.metrics import (
    CONSOLIDATION_EVENTS,
    CONSOLIDATION_RUNS,
    JOBS_FINISHED,
    MEMORY_OPS,
    OP_KINDS,
    STAGE_SECONDS,
    SWEEP_RESULTS,
)
from sleepmem.core.redaction import redact_text
from sleepmem.core.settings import Settings
from sleepmem.freshness import Send, after_release
from sleepmem.models import (
    CURRENT_STATUSES,
    LEVELS,
    MEMORY_TYPES,
    Audit,
    IndexState,
    Job,
    JobStatus,
    Memory,
    MemoryStatus,
    Scope,
    ScopeState,
    Trust,
)
from sleepmem.models.views import ConflictResolution, MemoryPage, MemoryView
from sleepmem.pipelines.consolidate import ConsolidationReport
from sleepmem.pipelines.entities import store as entity_store
from sleepmem.pipelines.index import apply_to_index, reconcile
from sleepmem.pipelines.lifecycle import erase as erasure
from sleepmem.pipelines.lifecycle import reconsolidate as recon
from sleepmem.pipelines.lifecycle.forget import sweep
from sleepmem.pipelines.lifecycle.refresh import RefreshReport, refresh
from sleepmem.pipelines.memories import copy_row, expiry
from sleepmem.pipelines.ports import Ports
from sleepmem.pipelines.store import audit_row
from sleepmem.resources import Resources

log = get_logger("sleepmem.services")

ERASE_KIND = "erase"
HITS_PER_REFRESH = 10_000
SWEEP_RESULT_KINDS = ("scanned", "expired", "demoted", "archived", "evicted", "deleted")
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
    requeue: Send | None = None,
) -> ConsolidationReport:
    """Consolidate one scope now; raises LeaseHeldError if another worker is on it.

    ``requeue`` queues the next consolidation of the scope: given, it is called once the
    lease is released if a session end (or an ask) arrived during this run."""
    try:
        scope = Scope.parse_key(scope_key, field="scope_key")
    except ValidationError:
        # Garbage is not retried: a malformed key will not become valid by waiting.
        log.warning("consolidate_refused", field="scope_key", task_id=task_id)
        raise
    fields = {"tenant": scope.tenant, "scope": scope_digest(scope_key)}
    # Every line the run writes (pipeline stages, LLM calls, library lines) carries them.
    with structlog.contextvars.bound_contextvars(**fields):
        report = _consolidate(
            resources, scope_key=scope_key, pipeline=pipeline, task_id=task_id,
            worker=worker, fields=fields,
        )
        if requeue is not None:
            _next_run(resources, scope_key=scope_key, requeue=requeue, fields=fields)
        return report


def _next_run(resources: Resources, *, scope_key: str, requeue: Send,
              fields: dict[str, str]) -> None:
    """What arrived during a run runs next, as soon as its lease is free, instead of waiting
    for the idle timer: the scheduler's tick skipped the scope while the run held it."""
    try:
        sent = after_release(resources, scope_key=scope_key, send=requeue)
    except (SleepmemError, redis_lib.RedisError, sa.exc.SQLAlchemyError) as exc:
        # Not lost: the scope stays due in scope_state, and the next tick queues it.
        log.warning("consolidate_next_deferred", error=type(exc).__name__, **fields)
        return
    if sent:
        log.info("consolidate_next_queued", **fields)


def _consolidate(
    resources: Resources,
    *,
    scope_key: str,
    pipeline: ConsolidatePipeline,
    task_id: str,
    worker: str,
    fields: dict[str, str],
) -> ConsolidationReport:
    settings, redis, keys = resources.settings, resources.redis, resources.keys
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
        CONSOLIDATION_RUNS.labels(outcome="deferred").inc()
        log.info("consolidate_deferred", reason="lease_held", **fields)
        raise
    except TransientError as exc:
        CONSOLIDATION_RUNS.labels(outcome="retry").inc()
        log.warning("consolidate_retry", error=type(exc).__name__, **fields)
        raise
    except Exception as exc:
        CONSOLIDATION_RUNS.labels(outcome="failed").inc()
        # Cool down: the next tick would otherwise re-queue a scope that fails every time.
        redis.set(keys.queued(scope_key), "failed", ex=max(1, int(settings.lease_seconds)))
        log.error(
            "consolidate_failed",
            error=type(exc).__name__,
            seconds=round(time.perf_counter() - started, 4),
            **fields,
        )
        raise
    _count_consolidation(report)
    log.info(
        "consolidate",
        task_id=task_id,
        events=report.events,
        memories_written=report.memories_written,
        ops=report.ops,
        llm_calls=report.llm_calls,
        llm_tokens=report.llm_tokens,
        echo_chars=report.echo_chars,
        echo_events=report.echo_events,
        stage_seconds={k: round(v, 4) for k, v in report.stage_seconds.items()},
        lease_lost=lease.lost.is_set(),
        seconds=round(time.perf_counter() - started, 4),
        **fields,
    )
    return report


def _count_consolidation(report: ConsolidationReport) -> None:
    CONSOLIDATION_RUNS.labels(outcome="ok").inc()
    CONSOLIDATION_EVENTS.inc(report.events)
    for stage, seconds in report.stage_seconds.items():
        STAGE_SECONDS.labels(stage=stage).observe(seconds)
    for op, n in report.ops.items():
        # Op names come from the pipeline's fixed vocabulary; anything else is folded so
        # that a label can never carry something unexpected.
        MEMORY_OPS.labels(op=op if op in OP_KINDS else "OTHER").inc(n)


def consolidate_now(
    resources: Resources, *, scope_key: str, pipeline: ConsolidatePipeline, worker: str,
    wait_s: float = 30.0,
) -> ConsolidationReport:
    """Consolidate a scope on request. A consolidation of the scope already running (the
    scheduler's, after a session end) is waited for, then this one takes what is left."""
    deadline = time.monotonic() + wait_s
    while True:
        try:
            return run_consolidation(resources, scope_key=scope_key, pipeline=pipeline,
                                     worker=worker)
        except LeaseHeldError:
            if time.monotonic() >= deadline:
                raise
            time.sleep(0.2)


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
    job = recon.get_job(engine=res.engine, job_id=job_id)
    job_id = job.id  # the row id, if it was called by the name its client gave
    res.redis.set(res.keys.job_cancel(job_id), "1", ex=CANCEL_TTL_S)
    if job.status == JobStatus.queued.value or (
        job.status == JobStatus.running.value and not res.redis.exists(res.keys.job_lease(job_id))
    ):
        return _finish(res, job_id, JobStatus.cancelled, job.started_at or datetime.now(UTC),
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
            _finish(res, job.id, JobStatus.failed, job.started_at or datetime.now(UTC),
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
    job = recon.get_job(engine=res.engine, job_id=job_id)
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
        raise ValidationError("job", f"this is a {job.kind} job, not {ERASE_KIND}")
    if job.status == JobStatus.done.value:
        return job
    ports = res.ports()
    started = ports.clock()
    named: dict[str, Any] = {}
    try:
        receipt = _erase(res, job, ports, task_id=task_id, worker=worker)
        if receipt.memory_id is None and receipt.scope_key is not None:
            # The job row outlives the erasure: it names the scope as the audit does.
            # Renamed before the stores are rewritten, so its old version, which named the
            # scope, is a dead row that the rewrite leaves behind.
            named = {"scope_key": receipt.scope_key,
                     "params": {**job.params, "scope": receipt.scope_key}}
            _rename_job(res, job_id, named)
        receipt.stores = reach_every_byte(res)
    except NotFoundError as exc:
        return _finish(res, job_id, JobStatus.failed, started, error=str(exc))
    except TransientError:
        raise  # the task retries it; give_up fails it once the retries are spent
    except Exception as exc:
        # Never left queued: the row says it stopped. The error's type only, as the row
        # outlives the erased data and a message may quote it.
        _finish(res, job_id, JobStatus.failed, started,
                error=f"{type(exc).__name__}: the erasure stopped before it finished; "
                      "run it again")
        raise
    return _finish(res, job_id, JobStatus.done, started,
                   result=receipt.model_dump(mode="json"), **named)


def reach_every_byte(res: Resources) -> dict[str, str]:
    """After an erasure: make the deleted data leave the files of every store, and say how.

    SQL rows are deleted in the erasure's transactions (SQLite runs with secure_delete, so
    freed pages are zeroed); the vector index is rewritten from its live points; Redis
    rewrites its append-only file and its snapshot. The audit keeps ids, counts and a
    content hash, never content (see docs/security.md, "Erasure").
    """
    stores = {"sql": "deleted"}
    if res.engine.dialect.name == "sqlite":
        # Old page images live in the -wal file until a checkpoint: truncate it now.
        with res.engine.connect() as conn:
            conn.exec_driver_sql("PRAGMA wal_checkpoint(TRUNCATE)")
        stores["sql"] = "deleted, pages zeroed (secure_delete), WAL checkpointed"
    elif res.engine.dialect.name == "postgresql":
        stores["sql"] = purge_postgres(res.engine)
    stores |= {
        "audit": "kept: receipt id, tenant, memory ids, counts, a content hash and the scope "
                 "key with user, project and session as keyed hashes (HMAC-SHA256)",
    }
    try:
        stores["vector_index"] = res.index.compact()
    except Exception as exc:  # the erasure itself is committed: report, do not fail it
        log.warning("erase.compact_failed", error=type(exc).__name__)
        stores["vector_index"] = f"deleted; compaction failed: {type(exc).__name__}"
    stores.update(rewrite_persistence(res.redis))
    return stores


def _rename_job(res: Resources, job_id: str, values: dict[str, Any]) -> None:
    with Session(res.engine) as session:
        job = session.get(Job, job_id)
        if job is not None:
            for name, value in values.items():
                setattr(job, name, value)
            session.add(job)
            session.commit()


def purge_postgres(engine: Engine) -> str:
    """Make deleted rows leave PostgreSQL's files; the receipt's words for what was done.

    A DELETE only marks tuples dead: their bytes stay in the table's pages (even after a
    plain VACUUM) and in the WAL segments that logged them. VACUUM FULL rewrites every
    table into new files without the dead tuples; two WAL switches, each followed by a
    CHECKPOINT, move the redo point past every segment that held them, so PostgreSQL
    removes or recycles those segments. A recycled segment keeps its old bytes until it is
    overwritten: with ``wal_recycle = on`` (the default) the receipt says so, and the
    operator sets ``wal_recycle = off`` for segments to be removed instead. CHECKPOINT and
    pg_switch_wal need a superuser or the pg_checkpoint role / an EXECUTE grant; without
    them the receipt names the step that was skipped.
    """
    done = ["deleted", "tables rewritten (VACUUM FULL)"]
    tables = [t.name for t in SQLModel.metadata.sorted_tables]
    with engine.connect() as conn:
        conn = conn.execution_options(isolation_level="AUTOCOMMIT")
        for name in tables:
            conn.exec_driver_sql(f'VACUUM FULL "{name}"')
        try:
            for _ in range(2):
                conn.exec_driver_sql("SELECT pg_switch_wal()")
                conn.exec_driver_sql("CHECKPOINT")
            done.append("WAL switched and checkpointed twice")
        except sa.exc.DBAPIError as exc:
            log.warning("erase.wal_purge_refused", error=type(exc.orig).__name__)
            return ", ".join(done) + "; WAL not switched (needs superuser or pg_checkpoint)"
        recycle = conn.exec_driver_sql("SHOW wal_recycle").scalar()
    if recycle == "on":
        done.append("old segments recycled (wal_recycle=on: set it off to remove them)")
    else:
        done.append("old segments removed (wal_recycle=off)")
    return ", ".join(done)


def _erase(
    res: Resources, job: Job, ports: Ports, *, task_id: str, worker: str
) -> erasure.DeletionReceipt:
    with Lease(res.redis, res.keys.job_lease(job.id), ttl_s=res.settings.lease_seconds):
        if job.params.get("memory_id"):
            return erasure.erase_memory(
                engine=res.engine, ports=ports, memory_id=str(job.params["memory_id"]),
                task_id=task_id or job.id, worker=worker,
            )
        return erasure.erase_scope(
            engine=res.engine, ports=ports, scope=str(job.params["scope"]),
            task_id=task_id or job.id, worker=worker, keep_job=job.id,
            audit_key=audit_key(res.settings),
        )


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
    return _finish(res, job_id, JobStatus.failed, started,
                   error=f"{type(exc).__name__}: gave up after {attempts} attempts; run the "
                         "job again when the cause has passed")


def _finish(
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




# -- scrape-time state -------------------------------------------------------------------


class StateCollector:
    """Gauges of shared state, read from Redis and SQL when /metrics is scraped.

    One value for the whole service whichever process answers: the stream's length, the
    drain group's lag (entries not yet delivered) and pending entries (delivered, not yet
    acknowledged), jobs by kind and status, and the memories the index reconciler has yet
    to push. A store that does not answer is reported by ``sleepmem_state_up`` = 0 rather
    than failing the scrape.
    """

    def __init__(self, resources: Resources) -> None:
        self.resources = resources

    def collect(self) -> Iterator[Metric]:
        res = self.resources
        up = GaugeMetricFamily(
            "sleepmem_state_up", "Whether a store answered this scrape.", labels=["store"]
        )
        try:
            yield from self._stream(res)
            up.add_metric(["redis"], 1)
        except Exception:
            up.add_metric(["redis"], 0)
        try:
            yield from self._sql(res)
            up.add_metric(["sql"], 1)
        except Exception:
            up.add_metric(["sql"], 0)
        yield up

    @staticmethod
    def _stream(res: Resources) -> Iterator[Metric]:
        length = int(res.redis.xlen(res.keys.events))
        lag = pending = 0
        try:
            groups = res.redis.xinfo_groups(res.keys.events)
        except redis_lib.ResponseError:  # no stream yet: nothing is behind
            groups = []
        for group in groups:
            if str_of(group.get("name")) == DRAIN_GROUP:
                pending = int(group.get("pending") or 0)
                # None when Redis cannot tell (entries deleted mid-range): count the stream.
                raw_lag = group.get("lag")
                lag = int(raw_lag) if raw_lag is not None else length
        yield GaugeMetricFamily(
            "sleepmem_stream_length", "Entries in the event stream.", value=length
        )
        yield GaugeMetricFamily(
            "sleepmem_stream_lag", "Stream entries the drain group has not read yet.", value=lag
        )
        yield GaugeMetricFamily(
            "sleepmem_stream_pending",
            "Stream entries delivered to a drain consumer and not yet acknowledged.",
            value=pending,
        )

    @staticmethod
    def _sql(res: Resources) -> Iterator[Metric]:
        jobs = GaugeMetricFamily(
            "sleepmem_jobs", "Operator jobs by kind and status.", labels=["kind", "status"]
        )
        with Session(res.engine) as session:
            rows = session.execute(
                sa.select(col(Job.kind), col(Job.status), sa.func.count()).group_by(
                    col(Job.kind), col(Job.status)
                )
            ).all()
            backlog = session.execute(
                sa.select(sa.func.count())
                .select_from(Memory)
                .where(col(Memory.index_state) == IndexState.pending.value)
            ).scalar_one()
            dirty = session.execute(
                sa.select(sa.func.count())
                .select_from(ScopeState)
                .where(col(ScopeState.pending_count) > 0)
            ).scalar_one()
        for kind, status, n in rows:
            jobs.add_metric([str(kind), str(status)], int(n))
        yield jobs
        yield GaugeMetricFamily(
            "sleepmem_index_backlog",
            "Memories written to SQL and not yet in the vector index (reconciler backlog).",
            value=int(backlog),
        )
        yield GaugeMetricFamily(
            "sleepmem_scopes_pending",
            "Scopes with drained events waiting for consolidation.",
            value=int(dirty),
        )


def str_of(value: Any) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)
# -- memories, as a client reads and corrects them ----------------------------------------
#
# A person's actions through the API: read, list, edit (a new version with trust "human"),
# pin, feedback. Each change is one SQL transaction with its audit row; the index follows
# after the commit (rows stay index_state=pending until it has, for the reconciler).


def _visible_memory(session: Session, memory_id: str, tenant: str | None) -> Memory:
    mem = session.get(Memory, memory_id)
    # Another tenant's id is reported missing, not forbidden: ids do not leak.
    if mem is None or (tenant is not None and mem.tenant != tenant):
        raise NotFoundError(NO_MEMORY)
    return mem


def get_memory(res: Resources, *, memory_id: str, tenant: str | None) -> MemoryView:
    with Session(res.engine) as session:
        return MemoryView.of(_visible_memory(session, memory_id, tenant))


LIST_MAX = 500


def list_memories(
    res: Resources,
    *,
    scope: Scope,
    types: Sequence[str] = (),
    statuses: Sequence[str] = (),
    limit: int = 50,
    cursor: str | None = None,
) -> MemoryPage:
    """Memories of ``scope`` and every scope under it, by id; current ones unless
    ``statuses`` says otherwise. Keyset-paginated: ``cursor`` is the last id seen."""
    if not 1 <= limit <= LIST_MAX:
        raise ValidationError("limit", f"must be between 1 and {LIST_MAX}, got {limit}")
    for t in types:
        if t not in MEMORY_TYPES:
            raise ValidationError("type", f"unknown memory type {t!r}; known: "
                                          f"{', '.join(MEMORY_TYPES)}")
    known_status = [s.value for s in MemoryStatus]
    for st in statuses:
        if st not in known_status:
            raise ValidationError("status", f"unknown status {st!r}; known: "
                                            f"{', '.join(known_status)}")
    stmt = select(Memory).where(Memory.tenant == scope.tenant)
    for level in LEVELS[1:]:
        value = getattr(scope, level)
        if value:
            stmt = stmt.where(getattr(Memory, level) == value)
    stmt = stmt.where(col(Memory.status).in_(list(statuses) or list(CURRENT_STATUSES)))
    if types:
        stmt = stmt.where(col(Memory.type).in_(list(types)))
    if cursor:
        stmt = stmt.where(col(Memory.id) > cursor)
    stmt = stmt.order_by(col(Memory.id)).limit(limit + 1)
    with Session(res.engine) as session:
        rows = list(session.exec(stmt))
    more = len(rows) > limit
    rows = rows[:limit]
    return MemoryPage(items=[MemoryView.of(m) for m in rows],
                      next_cursor=rows[-1].id if more and rows else None)


def _audit_row(mem: Memory, op: str, *, before: list[str], after: list[str], reason: str,
               worker: str, now: datetime) -> Audit:
    """A person's action on ``mem``, through the one audit-row builder."""
    return Audit(**audit_row(op=op, tenant=mem.tenant, scope_key=mem.scope_key, reason=reason,
                             task_id="", worker=worker, at=now, before=before, after=after,
                             extractor="human"))


def _current(mem: Memory) -> None:
    if mem.status not in CURRENT_STATUSES:
        newer = f" {mem.superseded_by}" if mem.superseded_by else ""
        raise ValidationError(
            "memory", f"{mem.id} is {mem.status}, not current; use the current version{newer}"
        )


def _index_now(res: Resources, *, upsert: list[Memory], payload: list[Memory]) -> None:
    try:
        apply_to_index(engine=res.engine, index=res.index, embedder=res.embedder,
                       upsert=upsert, payload_only=payload, delete=[])
    except SleepmemError as exc:
        # SQL is the truth and has committed; the reconciler pushes what stayed pending.
        log.warning("memory_index_deferred", error=type(exc).__name__)


def update_memory(
    res: Resources, *, memory_id: str, tenant: str | None, statement: str,
    importance: float | None = None, reason: str = "", worker: str = "api",
) -> MemoryView:
    """A person's edit: the old version is closed, a new one (trust 'human') appended."""
    # A person's words enter SQL, the audit and the index here, as an event's do at the
    # drain: redacted once, at this boundary.
    text = redact_text(statement.strip())
    reason = redact_text(reason)
    if not text:
        raise ValidationError("statement", "must contain some text")
    now = res.ports().clock()
    with Session(res.engine, expire_on_commit=False) as session:
        old = _visible_memory(session, memory_id, tenant)
        _current(old)
        new = copy_row(old)
        new.id = uuid.uuid4().hex
        new.version = old.version + 1
        new.supersedes = old.id
        new.superseded_by = None
        new.statement = text
        new.source = Trust.human.value
        new.trust = Trust.human.value
        new.confidence = 1.0
        new.importance = old.importance if importance is None else importance
        new.status = MemoryStatus.active.value
        new.conflict_set = None
        new.valid_from = now
        new.valid_to = None
        new.recorded_at = now
        new.invalidated_at = None
        new.last_access = now
        new.demoted = False
        new.needs_verification = False
        new.expires_at = None if old.pinned else expiry(
            memory_type=old.type, base=now, ttl=res.settings.ttl(old.type))
        new.details = {**old.details, "edited_by": "human"}
        new.index_state = IndexState.pending.value
        old.status = MemoryStatus.superseded.value
        old.valid_to = now
        old.invalidated_at = now
        old.superseded_by = new.id
        old.index_state = IndexState.pending.value
        # Editing one side of a conflict set is the person's answer to it: the edited
        # version wins, the other sides are invalidated in the same transaction.
        settled = set_id = old.conflict_set
        old.conflict_set = None
        session.add(old)
        session.add(new)
        session.add(_audit_row(old, "UPDATE", before=[old.id], after=[new.id],
                               reason=f"edited by a person{': ' + reason if reason else ''}",
                               worker=worker, now=now))
        others: list[Memory] = []
        if set_id:
            others = [m for m in _conflict_sides(session, set_id, old.tenant) if m.id != old.id]
            _settle(session, set_id, kept=new, others=others, now=now, worker=worker,
                    reason="resolved by a person's edit of one side", before=[old.id])
        # The edited version's names and relations; the old one's relations retire.
        entity_store.record_versions(session, scope_key=old.scope_key, new=[new],
                                     retired=[old, *others], now=now)
        session.commit()
    _index_now(res, upsert=[new], payload=[old, *others])
    if settled:
        log.info("conflict_resolved", tenant=new.tenant, conflict_set=settled, kept=new.id,
                 invalidated=len(others), by="edit")
    log.info("memory_edit", tenant=new.tenant, memory_id=old.id, new_id=new.id)
    return MemoryView.of(new)


def pin_memory(
    res: Resources, *, memory_id: str, tenant: str | None, pinned: bool, worker: str = "api",
) -> MemoryView:
    """Pinned: no expiry, no decay, never swept. Unpinned: expiry starts again from now."""
    now = res.ports().clock()
    with Session(res.engine, expire_on_commit=False) as session:
        mem = _visible_memory(session, memory_id, tenant)
        _current(mem)
        if mem.pinned != pinned:
            mem.pinned = pinned
            mem.demoted = False if pinned else mem.demoted
            mem.expires_at = None if pinned else expiry(
                memory_type=mem.type, base=now, ttl=res.settings.ttl(mem.type))
            mem.index_state = IndexState.pending.value
            session.add(mem)
            session.add(_audit_row(mem, "PIN" if pinned else "UNPIN", before=[mem.id],
                                   after=[mem.id], reason="pinned by a person" if pinned
                                   else "unpinned by a person", worker=worker, now=now))
            session.commit()
            _index_now(res, upsert=[], payload=[mem])
    log.info("memory_pin", tenant=mem.tenant, memory_id=mem.id, pinned=pinned)
    return MemoryView.of(mem)


HELPFUL_STEP = 0.1


def memory_feedback(
    res: Resources, *, memory_id: str, tenant: str | None, verdict: str, note: str = "",
    worker: str = "api",
) -> MemoryView:
    """helpful: importance up a step and recency refreshed; wrong: invalidated (no longer
    current, still explainable; ``as_of`` before now still sees it)."""
    if verdict not in ("helpful", "wrong"):
        raise ValidationError("verdict", f"must be 'helpful' or 'wrong', got {verdict!r}")
    now = res.ports().clock()
    suffix = f": {redact_text(note)}" if note else ""  # the note is kept in the audit
    with Session(res.engine, expire_on_commit=False) as session:
        mem = _visible_memory(session, memory_id, tenant)
        _current(mem)
        if verdict == "helpful":
            mem.importance = min(1.0, round(mem.importance + HELPFUL_STEP, 6))
            mem.last_access = now
            mem.demoted = False
            op, reason = "FEEDBACK", f"marked helpful by a person: importance up{suffix}"
        else:
            mem.status = MemoryStatus.superseded.value
            mem.valid_to = now
            mem.invalidated_at = now
            mem.index_state = IndexState.pending.value
            op, reason = "INVALIDATE", f"marked wrong by a person{suffix}"
        session.add(mem)
        session.add(_audit_row(mem, op, before=[mem.id], after=[] if verdict == "wrong"
                               else [mem.id], reason=reason, worker=worker, now=now))
        if verdict == "wrong":
            entity_store.follow_memories(session, memories=[mem], now=now)
        session.commit()
    if verdict == "wrong":
        _index_now(res, upsert=[], payload=[mem])
    log.info("memory_feedback", tenant=mem.tenant, memory_id=mem.id, verdict=verdict)
    return MemoryView.of(mem)


def memory_history(res: Resources, *, memory_id: str, tenant: str | None) -> list[MemoryView]:
    """Every version of the memory's lineage, oldest first."""
    with Session(res.engine) as session:
        mem = _visible_memory(session, memory_id, tenant)
        rows = session.exec(
            select(Memory).where(Memory.lineage == mem.lineage)
            .order_by(col(Memory.version), col(Memory.recorded_at))
        ).all()
        return [MemoryView.of(m) for m in rows]


# -- conflict sets, as a person settles them ---------------------------------------------
#
# Two high-trust statements that disagree wait as a conflict set (pending_confirmation)
# until a person says which is true: that side becomes active with trust 'human', the
# others are invalidated and superseded by it, all in one transaction with one RESOLVE
# audit row naming every side.


def _conflict_sides(session: Session, conflict_set: str, tenant: str | None) -> list[Memory]:
    stmt = select(Memory).where(
        col(Memory.conflict_set) == conflict_set,
        col(Memory.status) == MemoryStatus.pending_confirmation.value,
    )
    if tenant is not None:
        stmt = stmt.where(col(Memory.tenant) == tenant)
    # Row locks (PostgreSQL): a second person deciding the same set at the same moment
    # waits, then finds it no longer open instead of overwriting the first decision.
    return list(session.exec(
        stmt.order_by(col(Memory.valid_from), col(Memory.id)).with_for_update()))


def _settle(session: Session, conflict_set: str, *, kept: Memory, others: Sequence[Memory],
            now: datetime, worker: str, reason: str, before: Sequence[str] = ()) -> None:
    for mem in others:
        mem.status = MemoryStatus.superseded.value
        mem.valid_to = now if mem.valid_to is None else mem.valid_to
        mem.invalidated_at = now
        mem.superseded_by = kept.id
        mem.conflict_set = None
        mem.details = {**mem.details, "resolved_conflict_set": conflict_set}
        mem.index_state = IndexState.pending.value
        session.add(mem)
    entity_store.follow_memories(session, memories=others, now=now)
    kept.details = {**kept.details, "resolved_conflict_set": conflict_set}
    session.add(kept)
    session.add(_audit_row(kept, "RESOLVE",
                           before=list(dict.fromkeys([*before, *(m.id for m in others)])),
                           after=[kept.id],
                           reason=f"conflict set {conflict_set} {reason}; kept {kept.id}",
                           worker=worker, now=now))


def resolve_conflict(
    res: Resources, *, conflict_set: str, keep: str, tenant: str | None, reason: str = "",
    worker: str = "api",
) -> ConflictResolution:
    """Keep one side of a conflict set: it becomes active, confirmed by a person (trust
    'human'); every other side is invalidated and superseded by it."""
    now = res.ports().clock()
    with Session(res.engine, expire_on_commit=False) as session:
        sides = _conflict_sides(session, conflict_set, tenant)
        if not sides:
            # Another tenant's set is reported missing, like one that never existed.
            # The answer repeats no id: the caller has it (issue 41).
            raise NotFoundError("no open conflict set by that id (resolved already, or never "
                                "existed)")
        chosen = next((m for m in sides if m.id == keep), None)
        if chosen is None:
            raise ValidationError("keep", "not a side of this conflict set; its sides are "
                                          f"{', '.join(m.id for m in sides)}")
        others = [m for m in sides if m.id != keep]
        chosen.status = MemoryStatus.active.value
        chosen.conflict_set = None
        chosen.trust = Trust.human.value
        chosen.confidence = 1.0
        chosen.needs_verification = False
        chosen.index_state = IndexState.pending.value
        _settle(session, conflict_set, kept=chosen, others=others, now=now, worker=worker,
                reason=f"resolved by a person{': ' + redact_text(reason) if reason else ''}")
        session.commit()
    _index_now(res, upsert=[], payload=[chosen, *others])
    log.info("conflict_resolved", tenant=chosen.tenant, conflict_set=conflict_set,
             kept=chosen.id, invalidated=len(others), by="choice")
    return ConflictResolution(conflict_set=conflict_set, kept=MemoryView.of(chosen),
                              invalidated=[MemoryView.of(m) for m in others])
