"""The FastAPI application: ``create_app(settings)``; routers come from ``ROUTERS``."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import orjson
import redis.asyncio as aioredis
from fastapi import APIRouter, FastAPI, Request, Response
from fastapi.dependencies.models import Dependant
from fastapi.exceptions import RequestValidationError
from fastapi.openapi.utils import get_openapi
from fastapi.routing import APIRoute
from starlette.concurrency import run_in_threadpool
from starlette.exceptions import HTTPException as StarletteHTTPException

from sleepmem import __version__
from sleepmem.adapters.redis.appender import GroupAppender
from sleepmem.api import (
    conflicts,
    freshness,
    health,
    ingest,
    inspect,
    jobs,
    memories,
    metrics,
    search,
    ui,
    values,
    working,
)
from sleepmem.api.auth import KeyRing, caller_tenant, operator
from sleepmem.api.errors import request_problems
from sleepmem.api.limits import BodyLimit
from sleepmem.api.state import ApiState
from sleepmem.api.tracing import TracingMiddleware
from sleepmem.core import tracing
from sleepmem.core.errors import (
    AuthError,
    ConflictError,
    ForbiddenError,
    NotFoundError,
    SleepmemError,
    TransientError,
    ValidationError,
)
from sleepmem.core.logs import get_logger
from sleepmem.core.metrics import EVENTS_REJECTED
from sleepmem.core.settings import Settings
from sleepmem.ingest.validation import EventValidationError, limits_for
from sleepmem.resources import Resources, build_resources

log = get_logger("sleepmem.api")

# Later issues append their routers here (search, admin) before create_app is called.
ROUTERS: list[APIRouter] = [
    health.router, ingest.router, search.router, jobs.router, memories.router, metrics.router,
    inspect.router, ui.router, working.router, conflicts.router, freshness.router, values.router,
]

_STATUS: tuple[tuple[type[SleepmemError], int], ...] = (
    (ValidationError, 422),
    (AuthError, 401),
    (ForbiddenError, 403),
    (NotFoundError, 404),
    (ConflictError, 409),
    (TransientError, 503),
)


# Why /v1/events refused a request, as a metric label (a fixed vocabulary, never content).
_REJECT_REASONS = {422: "invalid", 401: "unauthorized", 403: "forbidden", 503: "unavailable"}


def create_app(settings: Settings | None = None, *, resources: Resources | None = None) -> FastAPI:
    """Build the app. Without ``resources`` the lifespan builds them (and closes them)."""
    cfg = settings or (resources.settings if resources is not None else Settings())

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        res: Resources = (
            resources if resources is not None else await run_in_threadpool(build_resources, cfg)
        )
        app.state.resources = res
        client = aioredis.Redis.from_url(res.redis_url)
        app.state.api = ApiState(
            resources=res,
            redis=client,
            appender=GroupAppender(client, res.keys),
            keys=res.keys,
            limits=limits_for(cfg),
            max_batch=cfg.batch_max_events,
        )
        log.info("api.started", namespace=res.keys.namespace, auth=cfg.auth_enabled)
        # A session manager runs once: each start of the app (tests start one app many
        # times) mounts a fresh one.
        mcp_sessions = _mount_mcp(app)
        try:
            if mcp_sessions is not None:
                async with mcp_sessions.run():
                    yield
            else:
                yield
        finally:
            await app.state.api.redis.aclose()
            if resources is None:
                res.close()
            log.info("api.stopped")

    app = FastAPI(
        title="sleepmem",
        version=__version__,
        description="Long-term memory for LLM agents: append events now, think at sleep time.",
        lifespan=lifespan,
    )
    if tracing.enabled() and not _fastapi_traces_requests():
        app.add_middleware(TracingMiddleware)
    app.state.keyring = KeyRing.from_settings(cfg)
    app.state.settings = cfg
    for router in ROUTERS:
        app.include_router(router)
    app.add_exception_handler(SleepmemError, _sleepmem_error)  # type: ignore[arg-type]
    # FastAPI's own errors in the project's shape too, and never with the input echoed.
    app.add_exception_handler(RequestValidationError, _request_error)  # type: ignore[arg-type]
    app.add_exception_handler(StarletteHTTPException, _http_error)  # type: ignore[arg-type]
    app.add_middleware(BodyLimit, max_bytes=cfg.body_max_bytes)
    app.openapi = lambda: _openapi(app)  # type: ignore[method-assign]
    return app


def _fastapi_traces_requests() -> bool:
    """FastAPI releases with built-in OpenTelemetry make the server span themselves
    (continuing ``traceparent``, current during the handler); ours would be a second one."""
    import importlib.util

    return importlib.util.find_spec("fastapi.telemetry") is not None
def _mount_mcp(app: FastAPI) -> Any:
    """MCP over streamable HTTP at ``/mcp`` when the ``mcp`` extra is installed."""
    try:
        from sleepmem.mcpserver import http_mount
    except ImportError:
        return None
    try:
        route, sessions = http_mount(app)
    except ImportError:
        log.info("api.mcp_unavailable", reason="install sleepmem[mcp]")
        return None
    app.router.routes[:] = [r for r in app.router.routes if getattr(r, "path", "") != "/mcp"]
    app.router.routes.append(route)
    return sessions


async def _sleepmem_error(request: Request, exc: SleepmemError) -> Response:
    """One place that turns the error hierarchy into HTTP."""
    status = next((code for kind, code in _STATUS if isinstance(exc, kind)), 500)
    if request.url.path == ingest.EVENTS_PATH:
        EVENTS_REJECTED.labels(reason=_REJECT_REASONS.get(status, "error")).inc()
    body: dict[str, Any]
    if status in (401, 403):
        # Every refusal says what to set: header, env var, where the local key lives.
        hint = request.app.state.keyring.hint
        body = {"error": {"message": f"{exc}; {hint}" if hint else str(exc)}}
    elif isinstance(exc, EventValidationError):
        body = {"error": exc.problems[0].as_dict(), "errors": [p.as_dict() for p in exc.problems]}
    elif isinstance(exc, ValidationError):
        body = {"error": {"field": exc.field, "message": exc.message}}
    else:
        message = str(exc) if status < 500 or status == 503 else "internal error"
        body = {"error": {"message": message}}
        if isinstance(exc, ConflictError):
            body["error"]["current_version"] = exc.current_version
    headers = {}
    if status == 401:
        headers["WWW-Authenticate"] = "Bearer"
    elif status == 503:
        headers["Retry-After"] = "1"
    if status >= 500:
        log.error("api.error", status=status, error=type(exc).__name__)
    return Response(
        orjson.dumps(body), status_code=status, headers=headers, media_type="application/json"
    )


async def _request_error(_request: Request, exc: RequestValidationError) -> Response:
    problems = request_problems(exc)
    body = {"error": problems[0], "errors": problems} if problems else {
        "error": {"field": "body", "message": "invalid request"}
    }
    return Response(orjson.dumps(body), status_code=422, media_type="application/json")


# FastAPI's answer to a body it cannot decode (bytes that are not UTF-8, say): a 400 that no
# operation documents, where a body that is not JSON is a 422 naming the body.
_UNPARSABLE_BODY = "There was an error parsing the body"


async def _http_error(_request: Request, exc: StarletteHTTPException) -> Response:
    if exc.status_code == 400 and exc.detail == _UNPARSABLE_BODY:
        problem = {"field": "body", "message": "must be JSON in UTF-8"}
        return Response(orjson.dumps({"error": problem, "errors": [problem]}),
                        status_code=422, media_type="application/json")
    message = exc.detail if isinstance(exc.detail, str) else "request refused"
    return Response(
        orjson.dumps({"error": {"message": message}}),
        status_code=exc.status_code,
        headers=exc.headers,
        media_type="application/json",
    )


def _openapi(app: FastAPI) -> dict[str, Any]:
    if app.openapi_schema is None:
        schema = get_openapi(
            title=app.title, version=app.version, description=app.description, routes=app.routes
        )
        components = schema.setdefault("components", {})
        components.setdefault("schemas", {}).update(ingest.EVENT_SCHEMAS)
        components.setdefault("securitySchemes", {})["bearer"] = {
            "type": "http",
            "scheme": "bearer",
            "description": "A per-tenant API key from SLEEPMEM_API_KEYS, or the local key "
            "`sleepmem serve` writes to <data dir>/local-key.json on a loopback bind",
        }
        _declare_keys(app, schema)
        app.openapi_schema = schema
    return app.openapi_schema


def _declare_keys(app: FastAPI, schema: dict[str, Any]) -> None:
    """Each operation says whether this server wants a key, as it answers: the routes that
    check one require the bearer key while auth is on; with auth off no route does, and the
    document says so (a client sending none is answered, not refused)."""
    keyring: KeyRing = app.state.keyring
    # The routers' own routes: each is included without a further prefix, and their paths
    # are the document's (app.routes wraps included routers in newer FastAPI releases).
    for route in (r for router in ROUTERS for r in router.routes):
        if not isinstance(route, APIRoute):
            continue
        ops = schema["paths"].get(route.path_format, {})
        for method in route.methods or ():
            op = ops.get(method.lower())
            if op is None:
                continue
            if keyring.enabled and _checks_key(route.dependant):
                op["security"] = [{"bearer": []}]
            else:
                op.pop("security", None)


def _checks_key(dependant: Dependant) -> bool:
    return any(d.call in (caller_tenant, operator) or _checks_key(d)
               for d in dependant.dependencies)
