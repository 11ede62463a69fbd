"""The Celery app factory.

Apps are built by callers (the worker command, the scheduler, the embedded runtime, tests),
never at import time, and tasks are registered on the app being built, so two apps in one
process (tests, embedded mode) never share a broker or a task registry.
"""

from __future__ import annotations

from typing import Any

from celery import Celery
from kombu.entity import Queue

from sleepmem.core.keys import Keys
from sleepmem.core.settings import Settings
from sleepmem.pipelines.write.consolidate import consolidate_scope
from sleepmem.resources import redis_urls
from sleepmem.services import ConsolidatePipeline
from sleepmem.tasks import consolidate, drain, lifecycle, names
from sleepmem.workers.process import connect_process_hooks, connect_task_context

# Retries wait at most sleepmem.tasks.retry.BACKOFF_CAP_S in the worker (ETA) before running; the
# broker must not hand the message to another worker while it waits. A message a killed worker
# held comes back after this long: minutes, not an hour. A task running longer than this may
# be handed out twice; the scope and job leases make the second copy wait, never overlap.
_MIN_VISIBILITY_S = 300.0


def celery_config(settings: Settings) -> dict[str, Any]:
    keys = Keys(settings.namespace)
    visibility = max(_MIN_VISIBILITY_S, 2 * settings.lease_seconds)
    return {
        "task_queues": [Queue(q) for q in names.QUEUES],  # type: ignore[no-untyped-call]
        "task_default_queue": names.QUEUE_MAINTENANCE,
        "task_routes": {name: {"queue": queue} for name, queue in names.ROUTES.items()},
        # A task is acknowledged only once it finished, and a worker that dies mid-task
        # gives the message back: consolidation is idempotent, losing it is not.
        "task_acks_late": True,
        "task_reject_on_worker_lost": True,
        "worker_prefetch_multiplier": 1,
        "broker_transport_options": {
            "global_keyprefix": keys.celery_prefix,
            "visibility_timeout": visibility,
        },
        "broker_connection_retry_on_startup": True,
        # Outcomes live in SQL (raw_event, audit, job); nobody waits on a Celery result.
        "task_ignore_result": True,
        "result_backend": None,
        "task_serializer": "json",
        "accept_content": ["json"],
        "worker_hijack_root_logger": False,
        "worker_redirect_stdouts": False,
        "worker_send_task_events": False,
        "enable_utc": True,
    }


def create_celery(
    settings: Settings,
    *,
    broker_url: str,
    consolidate_pipeline: ConsolidatePipeline = consolidate_scope,
) -> Celery:
    """A Celery app on ``broker_url`` with every sleepmem task registered.

    ``consolidate_pipeline`` is the function the consolidate task runs under its lease;
    the real pipeline unless a caller wraps it (tracing, tests).
    """
    app = Celery(f"sleepmem-{settings.namespace}", broker=broker_url, set_as_current=False)
    app.conf.update(celery_config(settings))
    drain.register(app)
    consolidate.register(app, pipeline=consolidate_pipeline)
    lifecycle.register(app)
    connect_task_context()
    return app


def create_celery_from_env() -> Celery:
    """The app for the ``celery`` CLI and ``sleepmem worker``: URLs from ``SLEEPMEM_*``.

    Only the broker URL is derived here; clients are built per worker process by the
    hooks in :mod:`sleepmem.workers.process`.
    """
    settings = Settings()
    _, broker, _ = redis_urls(settings)
    app = create_celery(settings, broker_url=broker)
    connect_process_hooks()
    return app
