"""consolidate(scope_key): one scope's pending events through the pipeline, under a lease.

The task hands the key to :func:`sleepmem.services.run_consolidation`, which validates it,
takes the per-scope lease (never two consolidations of one scope at once), runs the
pipeline and clears the coalescing key so that events which arrived meanwhile can trigger
again. Retry policy: a held lease or a transient failure backs off and retries; anything
else fails loudly and the events stay pending for the next trigger (nothing is lost).
"""

from __future__ import annotations

from typing import Any

from celery import Celery, Task

from sleepmem.core.errors import TransientError
from sleepmem.core.keys import scope_digest
from sleepmem.services import ConsolidatePipeline, run_consolidation
from sleepmem.tasks import names, retry
from sleepmem.tasks.context import current_resources


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
                # A session end that arrived during this run is consolidated next, at once.
                requeue=lambda key: self.app.send_task(names.CONSOLIDATE, args=[key]),
            )
        except TransientError as exc:
            raise self.retry(exc=exc, countdown=retry.countdown(self.request.retries)) from exc
        return {"scope": scope_digest(scope_key), "events": report.events, "ops": report.ops}
