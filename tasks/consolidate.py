"""consolidate(scope_key): one scope's pending events through the pipeline, under a lease.

The task validates the key, takes the per-scope lease (never two consolidations of one
scope at once), builds the ports from the process resources, runs the pipeline, and then
clears the coalescing key so that events which arrived meanwhile can trigger again.
Retry policy: a held lease or a transient failure backs off and retries; anything else
fails loudly and the events stay pending for the next trigger (nothing is lost).
"""

from __future__ import annotations

import time
from typing import Any, Protocol

from celery import Celery, Task
from pydantic import ValidationError as PydanticValidationError
from sqlalchemy.engine import Engine

from models.scope import Scope
from pipelines.consolidate import ConsolidationReport
from pipelines.ports import Ports
from sleepmem.errors import LeaseHeldError, TransientError, ValidationError
from sleepmem.keys import scope_digest
from sleepmem.locks import Lease
from sleepmem.logs import get_logger
from sleepmem.resources import Resources
from sleepmem.settings import Settings
from tasks import names, retry
from workers.process import current_resources

log = get_logger("sleepmem.tasks.consolidate")


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


def check_scope_key(scope_key: object) -> Scope:
    """The scope named by a canonical key, or ValidationError saying what a key looks like."""
    rule = "a canonical scope key like 't=acme/a=bot/u=ann/p=/s='"
    if not isinstance(scope_key, str) or not scope_key:
        raise ValidationError("scope_key", f"must be {rule}; got {scope_key!r}")
    try:
        scope = Scope.from_key(scope_key)
    except (ValueError, PydanticValidationError) as exc:
        raise ValidationError("scope_key", f"must be {rule}; got {scope_key!r}") from exc
    if scope.key != scope_key:
        raise ValidationError(
            "scope_key", f"must be {rule} (canonical form {scope.key!r}); got {scope_key!r}"
        )
    return scope


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
        scope = check_scope_key(scope_key)
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
            # A pipeline can check this before committing if its lease was lost.
            ports.extras["lease_lost"] = lease.lost
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


def register(app: Celery, *, pipeline: ConsolidatePipeline) -> None:
    @app.task(name=names.CONSOLIDATE, bind=True, max_retries=retry.MAX_RETRIES, shared=False)  # type: ignore[untyped-decorator]
    def consolidate(self: Task, scope_key: str) -> dict[str, Any]:
        try:
            report = run_consolidation(
                current_resources(),
                scope_key=scope_key,
                pipeline=pipeline,
                task_id=str(self.request.id or ""),
                worker=str(self.request.hostname or ""),
            )
        except TransientError as exc:
            raise self.retry(exc=exc, countdown=retry.countdown(self.request.retries)) from exc
        return {"scope": scope_digest(scope_key), "events": report.events, "ops": report.ops}
