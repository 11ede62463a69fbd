"""Logs: a real ``sleepmem serve`` writes JSON only (its own lines and uvicorn's, Celery's,
APScheduler's), binds task id, tenant and scope digest to a consolidation's lines, and
says nothing while idle at INFO."""

from __future__ import annotations

import io
import logging
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import orjson
import pytest
import structlog
from support import stop, wait_for

from sleepmem.core.keys import scope_digest
from sleepmem.core.logs import configure_logging
from sleepmem.models import Scope

TENANT, AGENT, USER = "acme", "concierge", "ann"
OWNER = Scope(tenant=TENANT, agent=AGENT, user=USER).key


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def lines_of(path: Path) -> list[dict[str, Any]]:
    """Every complete line, parsed. While the process runs, the last line may be half
    written when we read (seen in CI under load); it is left for the next read. Once the
    process has exited every line is complete, so a broken line still fails the test."""
    text = path.read_text(encoding="utf-8")
    complete = text[: text.rfind("\n") + 1]
    return [orjson.loads(line) for line in complete.splitlines() if line.strip()]


def events_named(path: Path, name: str) -> list[dict[str, Any]]:
    return [line for line in lines_of(path) if line.get("event") == name]


class TestAServeProcessLogsJsonOnly:
    def test_idle_quiet_consolidation_bound_every_line_json(self, tmp_path: Path) -> None:
        port = free_port()
        out = tmp_path / "serve.log"
        said = tmp_path / "serve.out"
        env = {
            **os.environ,
            "PYTHONPATH": os.pathsep.join(sys.path),
            "SLEEPMEM_DATA_DIR": str(tmp_path / "data"),
            "SLEEPMEM_PORT": str(port),
            "SLEEPMEM_HOST": "127.0.0.1",
            "SLEEPMEM_EMBEDDER": "hashing",
            "SLEEPMEM_AUTH_ENABLED": "false",
            "SLEEPMEM_TICK_SECONDS": "0.25",
            "SLEEPMEM_LOG_LEVEL": "INFO",
            "SLEEPMEM_LOG_JSON": "true",
        }
        for name in ("SLEEPMEM_REDIS_URL", "SLEEPMEM_DATABASE_URL", "SLEEPMEM_QDRANT_URL"):
            env.pop(name, None)
        # Logs go to stderr; stdout carries only what serve says to the person who ran it.
        with out.open("wb") as sink, said.open("wb") as told:
            proc = subprocess.Popen(
                [sys.executable, "-c", "from sleepmem.cli import main; main()", "serve"],
                env=env, stdout=told, stderr=sink, cwd=tmp_path,
            )
            try:
                assert wait_for(lambda: bool(events_named(out, "runtime_started")), timeout=90)
                settled = len(lines_of(out))
                # 4 s idle = 16 scheduler ticks, each one a drain/trigger check.
                time.sleep(4)
                idle = lines_of(out)[settled:]
                # A scheduled job whose hour came round in these seconds is work, not
                # chatter: its enqueue line and its run's line (task id = job:slot) may show.
                due = {f"{x['job']}:{x['slot']}" for x in idle if x["event"] == "job_enqueued"}
                chatter = [
                    line for line in idle
                    if line["level"] != "debug" and line["event"] != "job_enqueued"
                    and line.get("task_id") not in due
                ]
                assert chatter == []

                scope = {"tenant": TENANT, "agent": AGENT, "user": USER, "session": "s1"}
                events = [
                    {**scope, "kind": "message", "role": "user",
                     "content": "I live in Lisbon and I prefer green tea."},
                    {**scope, "kind": "session_end", "role": "system", "content": ""},
                ]
                posted = httpx.post(f"http://127.0.0.1:{port}/v1/events", json=events, timeout=10)
                assert posted.status_code == 202
                assert wait_for(lambda: bool(events_named(out, "consolidate")), timeout=60)
            finally:
                stop(proc, signal.SIGINT)
        assert proc.returncode == 0

        assert said.read_text(encoding="utf-8").startswith("sleepmem is serving on http://")
        assert out.read_text(encoding="utf-8").endswith("\n"), "the last line was cut short"
        every = lines_of(out)  # parses every line as JSON, or fails here
        loggers = {line.get("logger", "") for line in every}
        assert "uvicorn.error" in loggers, "uvicorn's lines must come through the same handler"
        assert all({"event", "level", "timestamp"} <= set(line) for line in every)

        (run,) = events_named(out, "consolidate")
        assert run["tenant"] == TENANT and run["scope"] == scope_digest(OWNER)
        assert run["task_id"] and run["task_name"] == "sleepmem.consolidate"
        # Lines the pipeline wrote during that task carry the same bound context.
        during = [line for line in every if line.get("task_id") == run["task_id"]]
        assert len(during) >= 2
        assert all(line.get("scope") == run["scope"] for line in during)
        # The content never reaches a log line.
        assert "Lisbon" not in out.read_text(encoding="utf-8")


class TestLibraryLoggersAreQuietUnlessDebug:
    @pytest.fixture(autouse=True)
    def logging_as_it_was(self) -> Iterator[None]:
        saved = structlog.get_config()
        root = logging.getLogger()
        handlers, level = list(root.handlers), root.level
        yield
        structlog.configure(**saved)
        root.handlers[:] = handlers
        root.setLevel(level)

    @pytest.mark.parametrize("library", ["httpx", "httpcore.http11", "openai"])
    def test_a_request_line_is_dropped_at_info_and_shown_at_debug(self, library: str) -> None:
        for level, shown in (("INFO", False), ("DEBUG", True)):
            out = io.StringIO()
            configure_logging(level=level, json=True, stream=out)
            logging.getLogger(library).info("HTTP Request: POST /v1/search")
            logging.getLogger("sleepmem.search").info("search_done")
            assert ("HTTP Request" in out.getvalue()) is shown
            assert "search_done" in out.getvalue()
