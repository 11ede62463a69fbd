"""The drain as a use-case: stream entries into the raw-event log, batch by batch.

The drain task calls this like every other task calls its service; the task keeps only
what is Celery's (its consumer name per thread, the retry policy, the log line).
"""

from __future__ import annotations

import time

from sleepmem.adapters.redis import stream
from sleepmem.ingest.drain import DrainReport, dead_consumer_ms, drain_once
from sleepmem.resources import Resources


def drain_until_empty(resources: Resources, *, consumer: str, budget_s: float) -> DrainReport:
    """Drain batches until one comes back empty or ``budget_s`` has passed."""
    deadline = time.monotonic() + budget_s
    totals = DrainReport(consumer=consumer)
    stream.ensure_group(resources.redis, resources.keys)
    stream.prune_consumers(
        resources.redis,
        resources.keys,
        idle_ms=dead_consumer_ms(resources.settings),
        keep=consumer,
    )
    while True:
        report = drain_once(
            redis=resources.redis,
            keys=resources.keys,
            engine=resources.engine,
            settings=resources.settings,
            consumer=consumer,
        )
        totals.add(report)
        if report.entries == 0 or time.monotonic() >= deadline:
            return totals
