"""drain(): move accepted events from the Redis stream into the SQL raw log.

A thin loop over :func:`sleepmem.drain.drain_once` until the stream has nothing for this
consumer or the time budget is spent; the scheduler queues the next drain on its next
tick. The drain itself is idempotent (insert on event_id, XACK after commit), so a retry
or a redelivery never duplicates a row.
"""

from __future__ import annotations

import os
import threading
import time
from typing import Any

from celery import Celery, Task

from sleepmem.errors import TransientError
from sleepmem.logs import get_logger
from sleepmem.resources import Resources
from tasks import names, retry
from workers.process import current_resources

log = get_logger("sleepmem.tasks.drain")


def consumer_name(hostname: str) -> str:
    """Stable per worker thread, so entries it left pending are reclaimed under its name."""
    return f"{hostname or 'worker'}:{os.getpid()}:{threading.get_ident()}"


def drain_until_empty(resources: Resources, *, consumer: str, budget_s: float) -> dict[str, int]:
    """Drain batches until one comes back empty or ``budget_s`` has passed."""
    from sleepmem.drain import drain_once  # TEMP until sleepmem.drain lands

    deadline = time.monotonic() + budget_s
    totals: dict[str, int] = {"batches": 0}
    while True:
        report = drain_once(
            redis=resources.redis,
            keys=resources.keys,
            engine=resources.engine,
            settings=resources.settings,
            consumer=consumer,
        )
        totals["batches"] += 1
        for name, value in vars(report).items() if hasattr(report, "__dict__") else ():
            if isinstance(value, int) and not isinstance(value, bool):
                totals[name] = totals.get(name, 0) + value
        if report.read == 0 or time.monotonic() >= deadline:
            return totals


def register(app: Celery) -> None:
    @app.task(name=names.DRAIN, bind=True, max_retries=retry.MAX_RETRIES)  # type: ignore[untyped-decorator]
    def drain(self: Task) -> dict[str, Any]:
        res = current_resources()
        # From here on, the next tick may queue another drain for events that arrive now.
        res.redis.delete(res.keys.task_once(names.DRAIN, names.DRAIN_QUEUED_SLOT))
        started = time.perf_counter()
        try:
            totals = drain_until_empty(
                res,
                consumer=consumer_name(str(self.request.hostname or "")),
                budget_s=res.settings.drain_budget_seconds,
            )
        except TransientError as exc:
            log.warning("drain_retry", error=type(exc).__name__)
            raise self.retry(exc=exc, countdown=retry.countdown(self.request.retries)) from exc
        log.info("drain", seconds=round(time.perf_counter() - started, 4), **totals)
        return totals
