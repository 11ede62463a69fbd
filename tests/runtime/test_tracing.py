"""Tracing: with an OpenTelemetry SDK installed, one emit can be followed through the
stream entry, the drain, the trigger and the Celery message to the consolidation's stages;
an HTTP request is a span continuing the caller's ``traceparent``."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from sqlmodel import Session
from support import require_extra, wait_for

from sleepmem.core.settings import Settings
from sleepmem.models import Scope, ScopeState
from sleepmem.runtime import Runtime
from sleepmem.sdk import MemoryClient

# Without the [otel] extra every test here is skipped with that reason (an error in CI,
# where scripts/bootstrap installs it).
require_extra("opentelemetry.sdk", "otel")
import opentelemetry.sdk.trace as sdk_trace  # noqa: E402
import opentelemetry.trace as trace  # noqa: E402
from opentelemetry.sdk.trace.export import SimpleSpanProcessor  # noqa: E402
from opentelemetry.sdk.trace.export.in_memory_span_exporter import (  # noqa: E402
    InMemorySpanExporter,
)

TENANT, AGENT, USER = "acme", "bot", "ann"
OWNER = Scope(tenant=TENANT, agent=AGENT, user=USER).key


@pytest.fixture(scope="module")
def exporter() -> Iterator[InMemorySpanExporter]:
    """The process's tracer provider (set once per process, as OpenTelemetry requires)."""
    provider = trace.get_tracer_provider()
    if not isinstance(provider, sdk_trace.TracerProvider):
        provider = sdk_trace.TracerProvider()
        trace.set_tracer_provider(provider)
    memory = InMemorySpanExporter()
    provider.add_span_processor(SimpleSpanProcessor(memory))
    yield memory
    memory.shutdown()


def settings_in(data_dir: Path) -> Settings:
    return Settings(
        data_dir=data_dir, redis_url=None, database_url=None, qdrant_url=None, port=0,
        auth_enabled=False, embedder="hashing", tick_seconds=0.2, log_level="WARNING",
        _env_file=None,  # type: ignore[call-arg]
    )


class TestOneEmitCanBeFollowedToItsConsolidation:
    def test_the_trace_runs_emit_drain_trigger_task_stages(
        self, tmp_path: Path, exporter: InMemorySpanExporter
    ) -> None:
        exporter.clear()
        tracer = trace.get_tracer("agent")
        settings = settings_in(tmp_path / "data")
        with Runtime(settings) as rt:
            assert rt.resources is not None
            engine = rt.resources.engine
            with tracer.start_as_current_span("agent turn") as turn, MemoryClient(
                settings, client=rt.resources.redis, tenant=TENANT, agent=AGENT, user=USER,
                session="s1",
            ) as client:
                client.emit_many([
                    {"kind": "message", "role": "user", "content": "I live in Porto."},
                    {"kind": "session_end", "role": "system", "content": ""},
                ])
            trace_id = turn.get_span_context().trace_id

            def consolidated() -> bool:
                with Session(engine) as s:
                    state = s.get(ScopeState, OWNER)
                return state is not None and state.last_consolidated_at is not None

            assert wait_for(consolidated, timeout=60)

            def task_span_done() -> bool:
                return any(s.name == "sleepmem.task sleepmem.consolidate"
                           for s in exporter.get_finished_spans())

            assert wait_for(task_span_done, timeout=30)
        spans = exporter.get_finished_spans()
        by_name: dict[str, list[object]] = {}
        for s in spans:
            by_name.setdefault(s.name, []).append(s)

        drains = by_name["sleepmem.drain"]
        assert any(link.context.trace_id == trace_id for d in drains for link in d.links)
        (trigger,) = [s for s in by_name["sleepmem.trigger"] if s.context.trace_id == trace_id]
        (task,) = [s for s in by_name["sleepmem.task sleepmem.consolidate"]
                   if s.context.trace_id == trace_id]
        assert task.parent is not None and task.parent.span_id == trigger.context.span_id
        stages = [s for s in spans if s.name.startswith("sleepmem.stage.")
                  and s.context.trace_id == trace_id]
        assert "sleepmem.stage.extract" in {s.name for s in stages}
        assert all(s.parent is not None for s in stages)
        assert {s.parent.span_id for s in stages} <= {s.context.span_id for s in spans}


class TestAnHttpRequestIsASpan:
    def test_it_continues_the_callers_traceparent_and_names_the_route(
        self, tmp_path: Path, exporter: InMemorySpanExporter
    ) -> None:
        exporter.clear()
        caller_trace = "4bf92f3577b34da6a3ce929d0e0e4736"
        caller_span = "00f067aa0ba902b7"
        with Runtime(settings_in(tmp_path / "data")) as rt:
            response = httpx.post(
                f"{rt.api_url}/v1/events",
                json={"tenant": TENANT, "agent": AGENT, "user": USER, "kind": "message",
                      "role": "user", "content": "hello"},
                headers={"traceparent": f"00-{caller_trace}-{caller_span}-01"},
                timeout=10,
            )
            assert response.status_code == 202

            def drained() -> bool:
                return any(s.name == "sleepmem.drain" for s in exporter.get_finished_spans())

            assert wait_for(drained, timeout=30)
        spans = exporter.get_finished_spans()
        (http,) = [s for s in spans if s.name == "POST /v1/events"]
        assert format(http.context.trace_id, "032x") == caller_trace
        assert http.parent is not None and format(http.parent.span_id, "016x") == caller_span
        assert http.attributes["http.response.status_code"] == 202
        # The entry it appended carried the request's context (the request's span, or the
        # handler span inside it) to the drain.
        (drain,) = [s for s in spans if s.name == "sleepmem.drain"]
        (link,) = drain.links
        assert format(link.context.trace_id, "032x") == caller_trace
        request_spans = {http.context.span_id} | {
            s.context.span_id for s in spans
            if s.parent is not None and s.parent.span_id == http.context.span_id
        }
        assert link.context.span_id in request_spans


class TestTheFallbackRequestSpan:
    def test_without_fastapis_own_telemetry_sleepmem_makes_the_server_span(
        self, tmp_path: Path, exporter: InMemorySpanExporter, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        from fastapi.testclient import TestClient

        from sleepmem.api import app as api_app

        monkeypatch.setattr(api_app, "_fastapi_traces_requests", lambda: False)
        exporter.clear()
        settings = settings_in(tmp_path / "data")
        with TestClient(api_app.create_app(settings)) as client:
            assert client.get(
                "/healthz",
                headers={"traceparent": "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"},
            ).status_code == 200
        ours = [s for s in exporter.get_finished_spans()
                if s.instrumentation_scope.name == "sleepmem" and s.name == "GET /healthz"]
        assert len(ours) == 1
        assert format(ours[0].context.trace_id, "032x") == "0af7651916cd43dd8448eb211c80319c"
        assert ours[0].attributes["http.route"] == "/healthz"
