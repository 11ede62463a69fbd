"""``GET /metrics``: the Prometheus exposition of this process (or of every process sharing
``PROMETHEUS_MULTIPROC_DIR``) plus the shared-state gauges read at scrape time.

Unauthenticated like ``/healthz``: it holds counts and fixed label values, never content,
tenants or user ids. Put it behind the network policy that guards the scrape port.
"""

from __future__ import annotations

from fastapi import APIRouter, Request, Response
from starlette.concurrency import run_in_threadpool

from sleepmem.api.state import api_state
from sleepmem.core.metrics import CONTENT_TYPE, render
from sleepmem.services import StateCollector

router = APIRouter(tags=["health"])


@router.get("/metrics", summary="Prometheus metrics", response_class=Response)
async def metrics(request: Request) -> Response:
    collector = StateCollector(api_state(request).resources)
    body = await run_in_threadpool(render, [collector])
    return Response(body, media_type=CONTENT_TYPE)
