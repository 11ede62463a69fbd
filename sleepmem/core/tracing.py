"""Optional OpenTelemetry tracing: spans and W3C trace context, no-ops without a tracer.

sleepmem only uses the OpenTelemetry *API*. Install ``sleepmem[otel]`` (the SDK and the
OTLP exporter) and configure a tracer provider (``OTEL_*`` variables, or
:func:`configure_from_env`) to record spans; without one every call here costs a few
hundred nanoseconds and records nothing.

The trace follows an event from ``emit`` to the memories it made: the caller's context
rides in the stream entry (field ``t``), the drain links its span to the entries and keeps
the newest context per scope, the trigger that queues the scope's consolidation continues
that context and the Celery message carries it (``traceparent`` header) to the task, whose
pipeline stages are child spans.
"""

from __future__ import annotations

import os
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager, nullcontext
from typing import Any

try:
    from opentelemetry import context as otel_context
    from opentelemetry import propagate, trace
    from opentelemetry.trace import Link, SpanKind
except ImportError:  # pragma: no cover - the API ships with FastAPI; guarded all the same
    trace = None  # type: ignore[assignment]

TRACER_NAME = "sleepmem"
TRACEPARENT = "traceparent"


def enabled() -> bool:
    return trace is not None


def _tracer() -> Any:
    return trace.get_tracer(TRACER_NAME)


def span(name: str, *, kind: str = "internal", links: Sequence[Any] = (),
         **attributes: Any) -> Any:
    """A context manager: a span named ``name``, child of the current one."""
    if trace is None:
        return nullcontext()
    return _tracer().start_as_current_span(
        name,
        kind=getattr(SpanKind, kind.upper()),
        links=list(links),
        attributes={k: v for k, v in attributes.items() if v is not None},
    )


def current_traceparent() -> str:
    """The current span's W3C ``traceparent``, or "" when nothing is being traced."""
    if trace is None or not trace.get_current_span().get_span_context().is_valid:
        return ""
    carrier: dict[str, str] = {}
    propagate.inject(carrier)
    return carrier.get(TRACEPARENT, "")


def inject(carrier: dict[str, Any]) -> None:
    """Write the current context into ``carrier`` (message headers)."""
    if trace is not None and trace.get_current_span().get_span_context().is_valid:
        propagate.inject(carrier)


@contextmanager
def continued(carrier: Mapping[str, Any] | str | None) -> Iterator[None]:
    """Make the context in ``carrier`` (headers, or one traceparent string) current."""
    if trace is None or not carrier:
        yield
        return
    headers = {TRACEPARENT: carrier} if isinstance(carrier, str) else carrier
    token = otel_context.attach(propagate.extract(headers))
    try:
        yield
    finally:
        otel_context.detach(token)


def attach(carrier: Mapping[str, Any] | str | None) -> object | None:
    """Like :func:`continued`, for hooks that start and end in different calls."""
    if trace is None or not carrier:
        return None
    headers = {TRACEPARENT: carrier} if isinstance(carrier, str) else carrier
    return otel_context.attach(propagate.extract(headers))


def detach(token: object | None) -> None:
    if token is not None and trace is not None:
        otel_context.detach(token)  # type: ignore[arg-type]


def link_to(traceparent: str) -> Any | None:
    """A span link to the span named by ``traceparent`` (None if there is none)."""
    if trace is None or not traceparent:
        return None
    ctx = trace.get_current_span(propagate.extract({TRACEPARENT: traceparent}))
    span_context = ctx.get_span_context()
    return Link(span_context) if span_context.is_valid else None


def start_span(name: str, *, kind: str = "internal", **attributes: Any) -> tuple[Any, Any]:
    """Start a span and make it current until :func:`end_span` (for begin/end hooks)."""
    if trace is None:
        return None, None
    started = _tracer().start_span(
        name, kind=getattr(SpanKind, kind.upper()),
        attributes={k: v for k, v in attributes.items() if v is not None},
    )
    token = otel_context.attach(trace.set_span_in_context(started))
    return started, token


def end_span(started: Any, token: Any, *, error: BaseException | None = None) -> None:
    if started is None:
        return
    if error is not None:
        started.record_exception(error)
        started.set_status(trace.Status(trace.StatusCode.ERROR, type(error).__name__))
    started.end()
    if token is not None:
        otel_context.detach(token)


def configure_from_env(service: str) -> bool:
    """With ``OTEL_EXPORTER_OTLP_ENDPOINT`` set and ``sleepmem[otel]`` installed, export
    this process's spans over OTLP/HTTP; returns whether it did."""
    if not os.environ.get("OTEL_EXPORTER_OTLP_ENDPOINT") or trace is None:
        return False
    try:
        from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
        from opentelemetry.sdk.resources import Resource
        from opentelemetry.sdk.trace import TracerProvider
        from opentelemetry.sdk.trace.export import BatchSpanProcessor
    except ImportError:
        return False
    provider = TracerProvider(
        resource=Resource.create({"service.name": os.environ.get("OTEL_SERVICE_NAME", service)})
    )
    provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter()))
    trace.set_tracer_provider(provider)
    return True
