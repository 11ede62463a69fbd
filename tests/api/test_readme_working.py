"""The docs run as written: the README's first Client example prints what it just taught,
and the agent loop of docs/working-memory.md checkpoints every step, against the real API."""

from __future__ import annotations

import re
import types
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient
from support import embedded_server

from sleepmem.api.app import create_app
from sleepmem.resources import Resources
from sleepmem.runtime import Runtime

README = Path(__file__).resolve().parents[2] / "README.md"
WORKING = Path(__file__).resolve().parents[2] / "docs" / "working-memory.md"


def first_client_example() -> str:
    text = README.read_text()
    match = re.search(r"```python\n(from sleepmem import Client\n.*?)```", text, re.S)
    assert match, "the README has no Client example"
    return match.group(1)


def loop_source() -> str:
    text = WORKING.read_text()
    match = re.search(r"```python\n(.*?)```", text, re.S)
    assert match, "docs/working-memory.md has no python example"
    return match.group(1)


@dataclass(frozen=True)
class Step:
    key: str
    text: str


@dataclass(frozen=True)
class Result:
    summary: str
    data: dict[str, Any]


def test_the_readme_agent_loop_checkpoints_every_step_and_ends_the_session(
    resources: Resources,
) -> None:
    steps = [Step("search:fri", "search trains"), Step("pay:rj62", "pay"),
             Step("mail:ticket", "email the ticket")]
    ran: Counter[str] = Counter()
    prompts: list[str] = []
    with TestClient(create_app(resources=resources)) as client:
        def run_tool(step: Step, idempotency_key: str) -> Result:
            ran[idempotency_key] += 1
            return Result(summary=f"{step.text}: ok", data={"ok": True})

        def call_model(system: str, context: str, user: str) -> str:
            prompts.append(context)
            return "On it."

        def next_step(state: dict[str, Any]) -> Step | None:
            done = {c["key"] for c in state["completed"]}
            return next((s for s in steps if s.key not in done), None)

        shim = types.SimpleNamespace(Client=lambda **_kw: client)
        namespace: dict[str, Any] = {
            "httpx": shim, "PLAN": [s.text for s in steps], "next_step": next_step,
            "call_model": call_model, "run_tool": run_tool,
            "user_message": "Book me the 9:14 to Vienna on Friday.",
        }
        source = loop_source().replace("import httpx\n", "")
        exec(compile(source, str(WORKING), "exec"), namespace)
        final = client.get("/v1/checkpoints",
                           params={"scope": "t=acme/a=travel/u=ann/p=/s=trip-42"}).json()
    assert ran == Counter({s.key: 1 for s in steps})
    assert final["version"] == len(steps)  # one write per step, the first creates v1
    assert final["ended_at"] is not None
    assert "Completed, do not repeat: search:fri" in prompts[1]


@pytest.fixture
def server(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Runtime]:
    """``sleepmem serve`` as a new user runs it: the client finds it through its data dir.
    The scheduler's tick is a minute apart, so only the client's own wait can have made
    the memory searchable in time."""
    for name in ("SLEEPMEM_API_URL", "SLEEPMEM_API_KEY", "SLEEPMEM_TENANT", "SLEEPMEM_AGENT",
                 "SLEEPMEM_USER", "SLEEPMEM_PROJECT", "SLEEPMEM_SESSION"):
        monkeypatch.delenv(name, raising=False)
    with embedded_server(tmp_path, tick_seconds=60.0) as runtime:
        monkeypatch.setenv("SLEEPMEM_DATA_DIR", str(runtime.settings.data_dir))
        yield runtime


def test_the_readme_client_example_prints_the_preference_it_just_taught(
    server: Runtime,
) -> None:
    source = first_client_example()
    assert "sleep(" not in source
    printed: list[Any] = []
    exec(compile(source, str(README), "exec"), {"print": printed.append})
    (statements,) = printed
    assert any("window seat" in s for s in statements), statements
