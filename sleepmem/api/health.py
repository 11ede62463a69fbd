"""Liveness and readiness: ``/healthz`` says the process answers, ``/readyz`` that it can work."""

from __future__ import annotations

from collections.abc import Callable

import orjson
import sqlalchemy as sa
from fastapi import APIRouter, Request, Response
from starlette.concurrency import run_in_threadpool

from sleepmem.api.state import api_state
from sleepmem.core.logs import get_logger
from sleepmem.core.redaction import redact
from sleepmem.resources import Resources

log = get_logger("sleepmem.api.health")
router = APIRouter(tags=["health"])


@router.get("/healthz", summary="Liveness: the process answers")
async def healthz() -> dict[str, str]:
    return {"status": "ok"}


@router.get(
    "/readyz",
    summary="Readiness: Redis, SQL and the vector index answer",
    responses={503: {"description": "A dependency failed; the body names it"}},
)
async def readyz(request: Request) -> Response:
    checks = await run_in_threadpool(check_dependencies, api_state(request).resources)
    failed = [name for name, result in checks.items() if result != "ok"]
    if failed:
        log.warning("health.not_ready", failed=failed)
    body = {"status": "unavailable" if failed else "ready", "checks": checks, "failed": failed}
    return Response(
        orjson.dumps(body), status_code=503 if failed else 200, media_type="application/json"
    )


def check_dependencies(resources: Resources) -> dict[str, str]:
    """Each dependency's state: "ok" or "failed: <error type>: <message>"."""

    def redis_ok() -> None:
        resources.redis.ping()

    def sql_ok() -> None:
        with resources.engine.connect() as conn:
            conn.execute(sa.text("select 1"))

    def index_ok() -> None:
        resources.index.count()

    probes: dict[str, Callable[[], None]] = {"redis": redis_ok, "sql": sql_ok, "index": index_ok}
    return {name: _probe(probe) for name, probe in probes.items()}


def _probe(probe: Callable[[], None]) -> str:
    try:
        probe()
    except Exception as exc:  # any failure means "not ready", reported by name
        # Driver messages can carry URLs with credentials: redacted, first line only.
        message = redact(str(exc).splitlines()[0] if str(exc) else "").text[:200]
        return f"failed: {type(exc).__name__}: {message}"
    return "ok"
