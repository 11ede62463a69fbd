"""Consolidation as a use-case: one scope under its lease, counted and logged; a
requested run that waits for a running one."""

from __future__ import annotations

import time
from typing import Protocol

import redis as redis_lib
import sqlalchemy as sa
import structlog
from sqlalchemy.engine import Engine

from sleepmem.adapters.redis.locks import Lease
from sleepmem.core.errors import (
    LeaseHeldError,
    SleepmemError,
    TransientError,
    ValidationError,
)
from sleepmem.core.keys import scope_digest
from sleepmem.core.logs import get_logger
from sleepmem.core.metrics import (
    CONSOLIDATION_EVENTS,
    CONSOLIDATION_RUNS,
    MEMORY_OPS,
    OP_KINDS,
    STAGE_SECONDS,
)
from sleepmem.core.settings import Settings
from sleepmem.freshness import Send, after_release
from sleepmem.models import (
    Scope,
)
from sleepmem.pipelines.ports import Ports
from sleepmem.pipelines.write.consolidate import ConsolidationReport
from sleepmem.resources import Resources

log = get_logger("sleepmem.services")


class ConsolidatePipeline(Protocol):
    def __call__(
        self,
        *,
        engine: Engine,
        ports: Ports,
        settings: Settings,
        scope: Scope,
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
            resources, scope=scope, pipeline=pipeline, task_id=task_id,
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
    scope: Scope,
    pipeline: ConsolidatePipeline,
    task_id: str,
    worker: str,
    fields: dict[str, str],
) -> ConsolidationReport:
    scope_key = scope.key
    settings, redis, keys = resources.settings, resources.redis, resources.keys
    started = time.perf_counter()
    try:
        with Lease(redis, keys.lease(scope_key), ttl_s=settings.lease_seconds) as lease:
            # The process clock: the wall clock unless a runner installed its own. The
            # pipeline confirms the lease right before its commit: a run whose lease was
            # lost rolls back, and the next holder redoes the batch.
            ports = resources.ports(lease=lease)
            report = pipeline(
                engine=resources.engine,
                ports=ports,
                settings=settings,
                scope=scope,
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
