"""The README's working-memory agent loop runs as written, against the real API."""

from __future__ import annotations

import re
import types
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from fastapi.testclient import TestClient

from sleepmem.api.app import create_app
from sleepmem.resources import Resources

README = Path(__file__).resolve().parents[1] / "README.md"


def loop_source() -> str:
    text = README.read_text()
    section = text[text.index("## Working memory"):]
    match = re.search(r"```python\n(.*?)```", section, re.S)
    assert match, "the Working memory section has no python example"
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
        exec(compile(source, str(README), "exec"), namespace)
        final = client.get("/v1/checkpoints",
                           params={"scope": "t=acme/a=travel/u=ann/p=/s=trip-42"}).json()
    assert ran == Counter({s.key: 1 for s in steps})
    assert final["version"] == len(steps)  # one write per step, the first creates v1
    assert final["ended_at"] is not None
    assert "Completed, do not repeat: search:fri" in prompts[1]
