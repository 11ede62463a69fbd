"""A span per HTTP request, for FastAPI releases without built-in OpenTelemetry (newer
ones make this span themselves; :func:`sleepmem.api.app.create_app` picks one of the two).
Pure ASGI, so streaming and the ingest fast path are untouched.

The span continues the caller's ``traceparent`` header, is named after the route template
(``POST /v1/events``, never a path holding ids), and is current while the handler runs:
``POST /v1/events`` writes its context into the stream entries it appends.
"""

from __future__ import annotations

from typing import Any

from sleepmem.core import tracing

Scope = dict[str, Any]


class TracingMiddleware:
    def __init__(self, app: Any) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        carrier = {
            key.decode("latin-1"): value.decode("latin-1")
            for key, value in scope.get("headers", [])
            if key in (b"traceparent", b"tracestate")
        }
        method = scope.get("method", "")
        status = 0

        async def send_status(message: dict[str, Any]) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = int(message["status"])
            await send(message)

        with tracing.continued(carrier or None), tracing.span(
            f"HTTP {method}", kind="server", **{"http.request.method": method}
        ) as span:
            try:
                await self.app(scope, receive, send_status)
            finally:
                if span is not None:
                    route = scope.get("route")
                    template = getattr(route, "path", None)
                    if template:
                        span.update_name(f"{method} {template}")
                        span.set_attribute("http.route", template)
                    span.set_attribute("http.response.status_code", status)
