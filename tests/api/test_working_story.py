"""A story, told in English and in Chinese: an agent is interrupted mid-task, a new process
picks the task up from the session checkpoint, and no completed step runs twice.

The agent loop is the one docs/working-memory.md shows: checkpoint → context → model call → emit →
checkpoint. The "model" is a deterministic planner (the one part that cannot run here);
the tools are a small booking system that counts how often each side effect happened.
The interruption is a crash of the agent's process: it holds nothing afterwards, and the
new one starts from Redis and the ids it is given.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass

import pytest

from sleepmem.context import ContextBuilder
from sleepmem.core.errors import ConflictError
from sleepmem.core.settings import Settings
from sleepmem.models.working import CheckpointState
from sleepmem.resources import Resources, build_resources
from sleepmem.sdk import MemoryClient
from sleepmem.working import WorkingMemory


@dataclass(frozen=True)
class Step:
    key: str  # idempotency key: the same real-world action always has the same key
    text: str


@dataclass(frozen=True)
class Story:
    scope: dict[str, str]
    goal: str
    steps: tuple[Step, ...]
    user_says: str


EN = Story(
    scope={"tenant": "acme", "agent": "travel", "user": "ann", "session": "trip-munich-vienna"},
    goal="Get Ann to Vienna on Friday morning by train",
    steps=(
        Step("search:MUC-VIE:2026-12-04", "search the Friday trains"),
        Step("hold:RJ62:seat45", "hold seat 45 on RJ 62"),
        Step("pay:RJ62:ann:119EUR", "pay 119 EUR with Ann's saved card"),
        Step("email:ticket:RJ62", "email the ticket to Ann"),
    ),
    user_says="Please book me the 9:14 train to Vienna on Friday.",
)
ZH = Story(
    # Scope names are ASCII identifiers; everything the agent says and stores is Chinese.
    scope={"tenant": "acme", "agent": "travel", "user": "li", "session": "trip-beijing-shanghai"},
    goal="帮小李订周五上午从北京到上海的高铁",
    steps=(
        Step("查询:北京-上海:周五", "查询周五的车次"),
        Step("锁座:G1:12F", "锁定G1次12F靠窗座位"),
        Step("支付:G1:小李:553元", "用小李绑定的银行卡支付553元"),
        Step("发送:车票:G1", "把电子客票发给小李"),
    ),
    user_says="帮我订周五早上去上海的高铁，要靠窗的座位。",
)


class Crash(Exception):
    """The agent's process dies here: nothing it held in memory survives."""


class BookingSystem:
    """The outside world: each call is a real side effect, counted by its key."""

    def __init__(self) -> None:
        self.done: Counter[str] = Counter()

    def run(self, step: Step) -> dict[str, str]:
        self.done[step.key] += 1
        return {"status": "ok", "ref": f"REF-{len(self.done):03d}"}


def plan_next(state: CheckpointState, steps: tuple[Step, ...]) -> Step | None:
    """The model call: the first planned step whose idempotency key is not completed."""
    return next((s for s in steps if state.done(s.key) is None), None)


def agent(res: Resources, story: Story, world: BookingSystem, *, crash_after: int | None,
          client: MemoryClient) -> list[str]:
    """One agent process. Returns the context prefixes it saw, turn by turn."""
    wm, builder = WorkingMemory(res), ContextBuilder(res)
    try:
        current = wm.get(story.scope)
        state, version = current.state, current.version
    except Exception:
        state = CheckpointState(goal=story.goal, plan=[s.text for s in story.steps])
        version = wm.put(story.scope, state, base_version=0).version
    prefixes: list[str] = []
    ran = 0
    while True:
        ctx = builder.build({"scope": story.scope, "query": story.user_says,
                             "budget_tokens": 600})
        prefixes.append(ctx.prefix.text)
        # The dynamic part tells the model what is already done, in its own words.
        for done in state.completed:
            assert done.key in ctx.dynamic.text
        step = plan_next(state, story.steps)
        if step is None:
            return prefixes
        result = world.run(step)
        client.emit(kind="tool_result", role="tool", content=f"{step.text}: {result['status']}",
                    meta={"tool": "booking", "key": step.key})
        state = CheckpointState.model_validate({
            **state.model_dump(),
            "current_step": step.text,
            "completed": [*state.model_dump()["completed"],
                          {"key": step.key, "step": step.text, "result": result}],
        })
        version = wm.put(story.scope, state, base_version=version).version
        ran += 1
        if crash_after is not None and ran == crash_after:
            raise Crash


@pytest.mark.parametrize("story", [EN, ZH], ids=["en", "zh"])
def test_an_interrupted_task_resumes_from_its_checkpoint_without_repeating_a_step(
    story: Story, settings: Settings, resources: Resources
) -> None:
    world = BookingSystem()
    with MemoryClient(settings, **story.scope) as client:
        with pytest.raises(Crash):
            agent(resources, story, world, crash_after=2, client=client)
        assert set(world.done) == {s.key for s in story.steps[:2]}
        resources.close()  # the process is gone, and with it the index it held open

        # A new process: its own clients, nothing carried over but the session's name.
        fresh = build_resources(settings)
        try:
            resumed = WorkingMemory(fresh).get(story.scope)
            assert [c.key for c in resumed.state.completed] == [s.key for s in story.steps[:2]]
            assert resumed.state.done(story.steps[1].key) is not None  # found by its key
            agent(fresh, story, world, crash_after=None, client=client)
            final = WorkingMemory(fresh).get(story.scope)
        finally:
            fresh.close()

    # Every step ran exactly once, in order, across the two processes.
    assert world.done == Counter({s.key: 1 for s in story.steps})
    assert [c.key for c in final.state.completed] == [s.key for s in story.steps]
    assert final.version == 1 + len(story.steps)


def test_a_stale_agent_that_wakes_up_late_cannot_overwrite_the_resumed_one(
    settings: Settings, resources: Resources
) -> None:
    """The crashed process was only paused; it comes back with its old version and is told."""
    wm = WorkingMemory(resources)
    v1 = wm.put(EN.scope, {"goal": EN.goal}, base_version=0).version
    wm.put(EN.scope, {"goal": EN.goal, "completed": [{"key": EN.steps[0].key}]},
           base_version=v1)
    with pytest.raises(ConflictError) as late:
        wm.put(EN.scope, {"goal": EN.goal, "completed": []}, base_version=v1)
    assert late.value.current_version == 2
    assert wm.get(EN.scope).state.done(EN.steps[0].key) is not None
