"""The LangGraph checkpointer: a real graph, interrupted, resumed in a new process's saver."""

from __future__ import annotations

import operator
from collections import Counter
from collections.abc import Iterator
from typing import Annotated, Any, TypedDict

import orjson
import pytest
import redis as redis_lib
from support import require_extra
from test_client import running_server

from sleepmem.client import Client
from sleepmem.core.keys import Keys
from sleepmem.core.settings import Settings
from sleepmem.models import Scope
from sleepmem.resources import Resources, build_resources
from sleepmem.runtime import Runtime
from sleepmem.working import WorkingMemory

# Without the [langgraph] extra every test here is skipped with that reason (an error in
# CI, where scripts/bootstrap installs it).
require_extra("langgraph", "langgraph")
from langchain_core.messages import AIMessage, AnyMessage, HumanMessage  # noqa: E402
from langgraph.graph import END, START, StateGraph  # noqa: E402
from langgraph.graph.message import add_messages  # noqa: E402
from langgraph.types import Command, interrupt  # noqa: E402

from sleepmem.checkpointer import SleepmemSaver  # noqa: E402

OWNER = {"tenant": "acme", "agent": "travel", "user": "ann"}
THREAD = {"configurable": {"thread_id": "lg-trip-1"}}


class Trip(TypedDict):
    messages: Annotated[list[AnyMessage], add_messages]
    done: Annotated[list[str], operator.add]


def build_graph(saver: SleepmemSaver, ran: Counter[str], *, fail_pay: bool = False) -> Any:
    def search(state: Trip) -> dict[str, Any]:
        ran["search"] += 1
        return {"done": ["search"], "messages": [AIMessage("Found RJ 62 at 9:14 for 119 EUR.")]}

    def approve(state: Trip) -> dict[str, Any]:
        answer = interrupt("Pay 119 EUR for RJ 62?")
        ran["approve"] += 1
        return {"done": [f"approved:{answer}"], "messages": [HumanMessage(str(answer))]}

    def pay(state: Trip) -> dict[str, Any]:
        if fail_pay:
            raise RuntimeError("the process dies while paying")
        ran["pay"] += 1
        return {"done": ["pay"], "messages": [AIMessage("Paid. Card password is hunter2x9!")]}

    g = StateGraph(Trip)
    g.add_node("search", search)
    g.add_node("approve", approve)
    g.add_node("pay", pay)
    g.add_edge(START, "search")
    g.add_edge("search", "approve")
    g.add_edge("approve", "pay")
    g.add_edge("pay", END)
    return g.compile(checkpointer=saver)


def test_a_graph_interrupted_for_approval_resumes_in_a_new_saver_without_rerunning_steps(
    settings: Settings, resources: Resources
) -> None:
    ran: Counter[str] = Counter()
    first = build_graph(SleepmemSaver(resources, scope=OWNER), ran)
    out = first.invoke({"messages": [HumanMessage("Book me the 9:14 to Vienna")]}, THREAD)
    assert "__interrupt__" in out
    assert ran == Counter({"search": 1})

    # A new process: new resources, a new saver, the graph compiled again.
    fresh = build_resources(settings)
    try:
        second = build_graph(SleepmemSaver(fresh, scope=OWNER), ran)
        assert second.get_state(THREAD).next == ("approve",)
        out = second.invoke(Command(resume="yes"), THREAD)
        assert out["done"] == ["search", "approved:yes", "pay"]
        assert ran == Counter({"search": 1, "approve": 1, "pay": 1})
        history = list(second.get_state_history(THREAD))
        assert len(history) >= 4
    finally:
        fresh.close()

    # The thread is a sleepmem session: versioned, and redacted before it was stored.
    session = Scope(**OWNER, session="lg-trip-1")
    cp = WorkingMemory(resources).get(session)
    assert cp.version >= 4 and cp.state.current_step
    stored = SleepmemSaver(resources, scope=OWNER).get_tuple(THREAD)
    assert stored is not None
    said = [m.content for m in stored.checkpoint["channel_values"]["messages"]]
    assert "Paid. Card password is [REDACTED:password]" in said[-1]
    assert not any("hunter2x9" in str(t) for t in said)


def test_a_crash_inside_a_node_resumes_from_the_last_super_step(
    settings: Settings, resources: Resources
) -> None:
    ran: Counter[str] = Counter()
    crashing = build_graph(SleepmemSaver(resources, scope=OWNER), ran, fail_pay=True)
    crashing.invoke({"messages": [HumanMessage("Book it")]}, THREAD)
    with pytest.raises(RuntimeError):
        crashing.invoke(Command(resume="yes"), THREAD)
    assert ran == Counter({"search": 1, "approve": 1})

    fresh = build_resources(settings)
    try:
        again = build_graph(SleepmemSaver(fresh, scope=OWNER), ran)
        assert again.get_state(THREAD).next == ("pay",)
        out = again.invoke(None, THREAD)
    finally:
        fresh.close()
    assert out["done"][-1] == "pay"
    assert ran == Counter({"search": 1, "approve": 1, "pay": 1})


def test_ending_a_thread_hands_its_messages_to_consolidation(
    resources: Resources, redis: redis_lib.Redis, keys: Keys
) -> None:
    ran: Counter[str] = Counter()
    saver = SleepmemSaver(resources, scope=OWNER)
    graph = build_graph(saver, ran)
    graph.invoke({"messages": [HumanMessage("I prefer window seats. Book the 9:14.")]}, THREAD)
    graph.invoke(Command(resume="yes"), THREAD)
    ended = saver.end_thread("lg-trip-1", outcome="booked")
    events = [orjson.loads(f[b"e"]) for _i, f in redis.xrange(keys.events)]
    contents = [e["content"] for e in events]
    assert "I prefer window seats. Book the 9:14." in contents
    assert events[-1]["kind"] == "session_end"
    assert ended.checkpoint_version is not None
    assert not any("hunter2x9" in c for c in contents)


@pytest.fixture(scope="module")
def remote(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Runtime]:
    with running_server(tmp_path_factory.mktemp("lg-saver")) as runtime:
        yield runtime


def test_a_saver_over_the_http_client_resumes_a_thread_in_another_saver(remote: Runtime) -> None:
    """Nothing server-side in this process: each saver only holds a Client to the server."""
    ran: Counter[str] = Counter()
    owner = {"agent": "travel", "user": "ann"}
    thread = {"configurable": {"thread_id": "lg-remote-1"}}
    with Client(remote.api_url, data_dir=remote.settings.data_dir) as first_client:
        first = build_graph(SleepmemSaver(first_client, scope=owner), ran)
        out = first.invoke({"messages": [HumanMessage("Book me the 9:14 to Vienna")]}, thread)
        assert "__interrupt__" in out
    with Client(remote.api_url, data_dir=remote.settings.data_dir) as second_client:
        saver = SleepmemSaver(second_client, scope=owner)
        second = build_graph(saver, ran)
        assert second.get_state(thread).next == ("approve",)
        out = second.invoke(Command(resume="yes"), thread)
        assert out["done"] == ["search", "approved:yes", "pay"]
        assert ran == Counter({"search": 1, "approve": 1, "pay": 1})
        stored = second_client.get_checkpoint({**owner, "session": "lg-remote-1"})
        assert stored.version >= 4
        assert "hunter2x9" not in stored.model_dump_json()
        ended = saver.end_thread("lg-remote-1", outcome="booked")
        assert ended.ids and ended.checkpoint_version == stored.version
