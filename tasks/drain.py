"""drain(): move accepted events from the Redis stream into the SQL raw log.

A thin task over :func:`sleepmem.services.drain_until_empty`, which drains until the stream
has nothing for this consumer or the time budget is spent; the scheduler queues the next
drain on its next tick. The drain itself is idempotent (insert on event_id, XACK after
commit), so a retry or a redelivery never duplicates a row.
"""

from __future__ import annotations

import threading
from typing import Any

import redis as redis_lib
from celery import Celery, Task

from sleepmem.core.errors import TransientError
from sleepmem.core.logs import get_logger
from sleepmem.ingest.drain import consumer_name
from sleepmem.services import drain_until_empty
from sleepmem.tasks import names, retry
from sleepmem.tasks.context import current_resources

log = get_logger("sleepmem.tasks.drain")

_consumers = threading.local()


def thread_consumer() -> str:
    """One consumer name per worker thread for its lifetime (not one per task run, which
    would grow the group by a consumer on every drain)."""
    name: str | None = getattr(_consumers, "name", None)
    if name is None:
        name = _consumers.name = consumer_name()
    return name


def register(app: Celery) -> None:
    @app.task(name=names.DRAIN, bind=True, max_retries=retry.MAX_RETRIES, shared=False)  # type: ignore[untyped-decorator]
    def drain(self: Task) -> dict[str, Any]:
        res = current_resources()
        try:
            # From here on, the next tick may queue another drain for events arriving now.
            # Inside the try: a Redis blip here is as transient as one in the drain itself.
            res.redis.delete(res.keys.task_once(names.DRAIN, names.DRAIN_QUEUED_SLOT))
            totals = drain_until_empty(
                res, consumer=thread_consumer(), budget_s=res.settings.drain_budget_seconds
            )
        except (TransientError, redis_lib.ConnectionError, redis_lib.TimeoutError) as exc:
            log.warning("drain_retry", error=type(exc).__name__)
            raise self.retry(exc=exc, countdown=retry.countdown(self.request.retries)) from exc
        fields = totals.log_fields()
        # A drain is queued every tick; the ones that found nothing stay at debug.
        (log.info if totals.entries else log.debug)("drain", **fields)
        return fields
