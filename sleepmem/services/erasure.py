"""Erasure as a use-case: the job that names what to erase, the erasure under the
job's lease, and making the deleted bytes leave every store."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Engine
from sqlmodel import Session, SQLModel

from sleepmem.adapters.redis.erase import rewrite_persistence
from sleepmem.adapters.redis.locks import Lease
from sleepmem.core.auditkey import audit_key
from sleepmem.core.errors import (
    NotFoundError,
    TransientError,
    ValidationError,
)
from sleepmem.core.logs import get_logger
from sleepmem.models import (
    Job,
    JobStatus,
)
from sleepmem.pipelines.lifecycle import erase as erasure
from sleepmem.pipelines.lifecycle import jobs
from sleepmem.pipelines.ports import Ports
from sleepmem.resources import Resources
from sleepmem.services.job_rows import finish_job

log = get_logger("sleepmem.services")


ERASE_KIND = "erase"


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
    job = jobs.get_job(engine=res.engine, job_id=job_id)
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
        return finish_job(res, job_id, JobStatus.failed, started, error=str(exc))
    except TransientError:
        raise  # the task retries it; give_up fails it once the retries are spent
    except Exception as exc:
        # Never left queued: the row says it stopped. The error's type only, as the row
        # outlives the erased data and a message may quote it.
        finish_job(res, job_id, JobStatus.failed, started,
                error=f"{type(exc).__name__}: the erasure stopped before it finished; "
                      "run it again")
        raise
    return finish_job(res, job_id, JobStatus.done, started,
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
