"""The LangGraph store: a real compiled LangGraph graph writes memory through sleepmem and a
later run reads it back (by key and by meaning), against a real server."""

from __future__ import annotations

from collections.abc import Iterator
from typing import TypedDict

import langgraph  # noqa: F401  (the [langgraph] extra, installed by scripts/bootstrap)
import pytest
from langgraph.graph import END, START, StateGraph
from langgraph.store.base import BaseStore, InvalidNamespaceError
from support import wait_for
from test_client import SCOPE, running_server

from sleepmem.client import Client
from sleepmem.langgraph_store import SleepmemStore
from sleepmem.runtime import Runtime

NS = ("planner", "ann")


class State(TypedDict, total=False):
    said: str
    answer: str
    found: str


def listen(state: State, *, store: BaseStore) -> State:
    store.put(NS, "home", {"content": state["said"]})
    return {}


def recall(state: State, *, store: BaseStore) -> State:
    hits = store.search(NS, query="where does the user live?", limit=3)
    item = store.get(NS, "home")
    return {"answer": hits[0].value["content"] if hits else "",
            "found": item.value["content"] if item else ""}


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Runtime]:
    with running_server(tmp_path_factory.mktemp("lg")) as runtime:
        yield runtime


@pytest.fixture
def store(server: Runtime) -> Iterator[SleepmemStore]:
    with Client(data_dir=server.settings.data_dir, tenant=SCOPE["tenant"]) as client:
        yield SleepmemStore(client)


def graph(node: object, store: BaseStore) -> object:
    builder = StateGraph(State)
    builder.add_node("step", node)  # type: ignore[call-overload]
    builder.add_edge(START, "step")
    builder.add_edge("step", END)
    return builder.compile(store=store)


class TestLangGraphStore:
    def test_a_graph_writes_memory_and_a_later_run_reads_it_back(
        self, store: SleepmemStore
    ) -> None:
        graph(listen, store).invoke({"said": "I live in Lyon."})  # type: ignore[attr-defined]
        store.consolidate(NS)  # what going quiet would do
        assert wait_for(lambda: store.get(NS, "home") is not None, timeout=30)
        out = graph(recall, store).invoke({})  # type: ignore[attr-defined]
        assert "Lyon" in out["found"] and "Lyon" in out["answer"]

    def test_a_key_never_written_is_none_and_delete_erases_what_a_key_became(
        self, store: SleepmemStore
    ) -> None:
        assert store.get(NS, "never-written") is None
        store.put(NS, "diet", {"content": "I am vegetarian."})
        store.consolidate(NS)
        assert wait_for(lambda: store.get(NS, "diet") is not None, timeout=30)
        store.delete(NS, "diet")
        assert store.get(NS, "diet") is None

    def test_async_calls_work_inside_an_event_loop(self, store: SleepmemStore) -> None:
        import asyncio

        async def run() -> None:
            await store.aput(NS, "pet", {"content": "I have a cat called Miso."})
            found = await store.asearch(NS, query="anything", limit=1)
            assert isinstance(found, list)

        asyncio.run(run())

    def test_list_namespaces_names_the_scopes_holding_memory_matched_cut_and_paged(
        self, store: SleepmemStore
    ) -> None:
        store.put(("scout", "bo"), "camp", {"content": "I am camping in Norway."})
        store.consolidate(("scout", "bo"))
        assert wait_for(lambda: ("scout", "bo") in store.list_namespaces(), timeout=30)
        every = store.list_namespaces()
        assert ("bot", "ann") in every and every == sorted(every)
        assert store.list_namespaces(prefix=("scout",)) == [("scout", "bo")]
        assert store.list_namespaces(prefix=("*", "bo")) == [("scout", "bo")]
        assert ("bot", "ann") in store.list_namespaces(suffix=("ann",))
        assert ("scout", "bo") not in store.list_namespaces(suffix=("ann",))
        tops = store.list_namespaces(max_depth=1)
        assert {("bot",), ("scout",)} <= set(tops) and len(tops) == len(set(tops))
        assert store.list_namespaces(limit=1, offset=1) == every[1:2]

    def test_a_namespace_deeper_than_a_scope_is_refused(self, store: SleepmemStore) -> None:
        with pytest.raises(InvalidNamespaceError, match="agent, user"):
            store.put(("a", "b", "c", "d", "e"), "k", {"content": "x"})
