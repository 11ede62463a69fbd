"""Per-process resources and logging for workers.

Prefork children build their clients in ``worker_process_init`` (after the fork, so no
socket is shared between processes); thread and solo pools build them once in
``worker_init``. The embedded runtime and tests install resources they built themselves.
Tasks reach them through :func:`sleepmem.tasks.context.current_resources`.
"""

from __future__ import annotations

import os
from typing import Any

import structlog
from celery import signals

from sleepmem.core import tracing
from sleepmem.core.logs import configure_logging, get_logger
from sleepmem.core.settings import Settings
from sleepmem.resources import Resources, build_resources
from sleepmem.tasks.context import install_resources, installed_resources, uninstall_resources
from sleepmem.workers.metrics import mark_process_dead


def warm(resources: Resources) -> None:
    """Load the embedder now, so the first consolidation does not pay for it."""
    resources.embedder.embed(["warm-up"], kind="document")


def open_process_resources(settings: Settings | None = None) -> Resources:
    settings = settings or Settings()
    configure_logging(level=settings.log_level, json=settings.log_json)
    # After the fork: the span exporter's thread must belong to this process.
    tracing.configure_from_env("sleepmem-worker")
    resources = build_resources(settings)
    warm(resources)
    install_resources(resources)
    get_logger("sleepmem.worker").info(
        "worker_process_ready",
        pid=os.getpid(),
        namespace=settings.namespace,
        embedded=settings.embedded,
        embedder=resources.embedder.name,
    )
    return resources


def close_process_resources() -> None:
    res = uninstall_resources()
    if res is not None:
        res.close()


def _on_worker_init(sender: Any = None, **_: Any) -> None:
    # Prefork parents must not open clients that their children would inherit.
    pool = getattr(sender, "pool_cls", "prefork")
    pool_name = pool if isinstance(pool, str) else getattr(pool, "__module__", "")
    if pool_name.rsplit(".", 1)[-1] != "prefork" and installed_resources() is None:
        open_process_resources()


def _on_process_init(**_: Any) -> None:
    open_process_resources()


def _on_process_shutdown(**_: Any) -> None:
    close_process_resources()
    mark_process_dead(os.getpid())


def _on_worker_shutdown(**_: Any) -> None:
    close_process_resources()


def connect_process_hooks() -> None:
    """Build resources per worker process; only the worker command calls this."""
    signals.worker_init.connect(_on_worker_init, weak=False, dispatch_uid="sleepmem.init")
    signals.worker_process_init.connect(
        _on_process_init, weak=False, dispatch_uid="sleepmem.process_init"
    )
    signals.worker_process_shutdown.connect(
        _on_process_shutdown, weak=False, dispatch_uid="sleepmem.process_shutdown"
    )
    signals.worker_shutdown.connect(
        _on_worker_shutdown, weak=False, dispatch_uid="sleepmem.worker_shutdown"
    )


# Open task spans by task id: prerun starts one, postrun ends it (same thread).
_task_spans: dict[str, tuple[Any, Any, Any]] = {}


def _bind_task(task_id: str | None = None, task: Any = None, **_: Any) -> None:
    name = getattr(task, "name", "")
    structlog.contextvars.bind_contextvars(task_id=task_id or "", task_name=name)
    if tracing.enabled() and task_id:
        request = getattr(task, "request", None)
        parent = tracing.attach(
            getattr(request, tracing.TRACEPARENT, None) if request is not None else None
        )
        started, token = tracing.start_span(
            f"sleepmem.task {name}", kind="consumer", task_id=task_id
        )
        _task_spans[task_id] = (started, token, parent)


def _unbind_task(task_id: str | None = None, state: str | None = None, **_: Any) -> None:
    structlog.contextvars.unbind_contextvars("task_id", "task_name")
    opened = _task_spans.pop(task_id or "", None)
    if opened is not None:
        started, token, parent = opened
        if started is not None and state:
            started.set_attribute("celery.state", state)
        tracing.end_span(started, token)
        tracing.detach(parent)


def _inject_trace(headers: dict[str, Any] | None = None, **_: Any) -> None:
    # The sender's span (a trigger continuing an emit's trace) rides in the message.
    if headers is not None:
        tracing.inject(headers)


def connect_task_context() -> None:
    """Bind task id and name to every log line a task writes, and run each task in a span
    that continues the trace its message carries (idempotent)."""
    signals.task_prerun.connect(_bind_task, weak=False, dispatch_uid="sleepmem.bind_task")
    signals.task_postrun.connect(_unbind_task, weak=False, dispatch_uid="sleepmem.unbind_task")
    signals.before_task_publish.connect(
        _inject_trace, weak=False, dispatch_uid="sleepmem.inject_trace"
    )
