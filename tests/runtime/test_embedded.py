"""Embedded mode: the whole service in one process, from an empty directory, stopped cleanly."""

from __future__ import annotations

import signal
import threading
from datetime import datetime
from pathlib import Path

import httpx
import psutil
import pytest
from sqlalchemy import func
from sqlmodel import Session, col, select
from support import embedded_settings, wait_for

from sleepmem.core.errors import ConfigurationError
from sleepmem.demo import CONVERSATION, FAKE_KEY, demo_settings, render, run_demo
from sleepmem.models import RawEvent, Scope, ScopeState
from sleepmem.runtime import Runtime
from sleepmem.sdk import MemoryClient
from sleepmem.tasks.context import current_resources

OWNER = Scope(tenant="acme", agent="bot", user="ann").key






def count_rows(rt: Runtime, *, consolidated: bool | None = None) -> int:
    assert rt.resources is not None
    stmt = select(func.count()).select_from(RawEvent).where(RawEvent.tenant == "acme")
    if consolidated is not None:
        stmt = stmt.where(col(RawEvent.consolidated).is_(consolidated))
    with Session(rt.resources.engine) as s:
        return int(s.exec(stmt).one())


def consolidated_at(rt: Runtime) -> datetime | None:
    assert rt.resources is not None
    with Session(rt.resources.engine) as s:
        state = s.get(ScopeState, OWNER)
    return None if state is None else state.last_consolidated_at


def sleepmem_threads() -> list[str]:
    """The service's threads still running, but for the process's one forker: children are
    forked from it so that they die with the process (sleepmem.core.children), so it lives
    as long as the process by design, whichever earlier test in this process started it."""
    return [t.name for t in threading.enumerate()
            if t.name.startswith("sleepmem-") and t.name != "sleepmem-spawner"]


class TestEmbeddedRuntime:
    def test_it_starts_from_nothing_serves_and_shuts_down_cleanly(self, tmp_path: Path) -> None:
        data_dir = tmp_path / "data"
        assert not data_dir.exists()
        settings = embedded_settings(data_dir)

        with Runtime(settings) as rt:
            assert rt.resources is not None and rt.resources.embedded_redis is not None
            socket = rt.resources.embedded_redis.socket
            pid = rt.resources.embedded_redis._server.pid
            assert socket.exists() and psutil.pid_exists(pid)
            assert (data_dir / "sleepmem.db").exists()
            assert current_resources() is rt.resources  # tasks see the API's resources

            url = rt.api_url
            health = httpx.get(f"{url}/healthz", timeout=5)
            ready = httpx.get(f"{url}/readyz", timeout=10)
            accepted = httpx.post(
                f"{url}/v1/events",
                json={
                    "tenant": "acme",
                    "agent": "bot",
                    "user": "ann",
                    "content": "I live in Oslo.",
                },
                timeout=5,
            )
            with MemoryClient(settings, tenant="acme", agent="bot", user="ann") as client:
                client.emit(content="I prefer tea over coffee.", session="s1")
                client.emit(kind="session_end", role="system", session="s1")

            assert wait_for(lambda: count_rows(rt) == 3, timeout=30), (
                "events did not reach the raw log"
            )
            assert wait_for(lambda: consolidated_at(rt) is not None, timeout=30), (
                "no consolidation ran"
            )
            assert count_rows(rt, consolidated=False) == 0

        assert health.status_code == 200
        assert ready.status_code == 200, ready.text
        assert accepted.status_code == 202 and len(accepted.json()["ids"]) == 1
        # Everything this runtime started is gone: server, socket, threads, resources.
        assert wait_for(lambda: not psutil.pid_exists(pid), timeout=10)
        assert not socket.exists()
        assert sleepmem_threads() == []
        with pytest.raises(ConfigurationError):
            current_resources()
        with pytest.raises(httpx.TransportError):
            httpx.get(f"{url}/healthz", timeout=2)

    def test_a_restart_on_the_same_directory_keeps_the_raw_log(self, tmp_path: Path) -> None:
        settings = embedded_settings(tmp_path / "data")
        with Runtime(settings, api=False) as rt:
            with MemoryClient(settings, tenant="acme", agent="bot", user="ann") as client:
                client.emit_many([{"content": f"note {i}"} for i in range(5)])
            assert wait_for(lambda: count_rows(rt) == 5, timeout=30)
        with Runtime(settings, api=False) as again:
            assert count_rows(again) == 5
            assert again.resources is not None and again.resources.redis.ping()

    def test_events_accepted_but_not_yet_drained_survive_a_restart(
        self, tmp_path: Path
    ) -> None:
        """Only the embedded Redis runs (no drain), and it dies by SIGKILL (no save at
        shutdown): the events exist in its append-only file alone, and the next start
        drains them into SQL."""
        from sleepmem.resources import build_resources

        settings = embedded_settings(tmp_path / "data")
        res = build_resources(settings)
        try:
            assert res.embedded_redis is not None
            with MemoryClient(settings, redis_url=res.redis_url, tenant="acme", agent="bot",
                              user="ann") as client:
                client.emit_many([{"content": f"kept {i}"} for i in range(5)])
            with Session(res.engine) as s:
                assert s.exec(select(func.count()).select_from(RawEvent)).one() == 0
            server = psutil.Process(res.embedded_redis._server.pid)
            server.send_signal(signal.SIGKILL)
            server.wait(10)
        finally:
            res.shutdown()
        with Runtime(settings, api=False) as again:
            assert wait_for(lambda: count_rows(again) == 5, timeout=60)


class TestQuickStartDemo:
    def test_the_demo_drains_redacts_consolidates_and_stops(self, tmp_path: Path) -> None:
        settings = demo_settings(tmp_path / "data").model_copy(update={"embedder": "hashing"})
        report = run_demo(settings, timeout=30)
        lines = render(report)
        assert report.raw_rows == report.emitted == len(CONVERSATION)
        assert report.drain_s is not None and report.consolidated_s is not None
        assert report.secret_in_raw_log is False
        assert report.consolidated_events == report.emitted
        assert report.memories, "consolidation produced no memory"
        # One message, two facts: a preference (never identity) and an allergy.
        assert ("preference", "The user always prefers a window seat.") in report.memories
        assert ("identity", "The user is allergic to peanuts.") in report.memories
        # The move retires Berlin everywhere: the fact and the reply that carries it as
        # the turn it answers; no stale state reaches the answers.
        assert not [s for _t, s in report.memories if "Berlin" in s], report.memories
        assert report.answers and not [a for a in report.answers[:3] if "Berlin" in a]
        assert not any(FAKE_KEY in line for line in lines)
        assert lines[-1].startswith("stopped cleanly")
