"""The LangGraph store keeps LangGraph's ``BaseStore`` contract, against a real server: what
a graph puts under a key it gets back at once, exactly; delete, TTL, search with filters and
list_namespaces behave as ``BaseStore`` documents. The conformance table runs twice, through
the HTTP client and in the server's own process. Consolidated memories come back from
search as extras after the values, never in their place."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Callable, Iterator
from typing import Any, TypedDict

import pytest
import sqlalchemy as sa
from support import require_extra, wait_for
from test_client import SCOPE, running_server

from sleepmem.client import AsyncClient, Client
from sleepmem.core.errors import ValidationError
from sleepmem.models import StoreValue
from sleepmem.runtime import Runtime
from sleepmem.values import Values, sweep_values

# Without the [langgraph] extra every test here is skipped with that reason (an error in
# CI, where scripts/bootstrap installs it).
require_extra("langgraph", "langgraph")
from langgraph.graph import END, START, StateGraph  # noqa: E402
from langgraph.store.base import (  # noqa: E402
    BaseStore,
    GetOp,
    InvalidNamespaceError,
    ListNamespacesOp,
    PutOp,
    SearchOp,
)

from sleepmem.langgraph_store import SleepmemStore  # noqa: E402

TENANT = SCOPE["tenant"]
AWS = "AKIAQ3VX9MT2LPA8WZR5"

# Every JSON shape a value may hold, nested.
VALUE: dict[str, Any] = {
    "content": "I live in Lyon.", "count": 3, "ratio": 0.25, "ok": True, "none": None,
    "tags": ["home", "france", 7], "nested": {"deep": {"list": [{"a": 1}, []], "empty": {}}},
    "unicode": "café 北京 🚲", "empty": "",
}


class State(TypedDict, total=False):
    said: str
    answer: str
    found: dict[str, Any]


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Runtime]:
    with running_server(tmp_path_factory.mktemp("lg")) as runtime:
        yield runtime


@pytest.fixture(scope="module")
def client(server: Runtime) -> Iterator[Client]:
    with Client(data_dir=server.settings.data_dir, tenant=TENANT) as c:
        yield c


@pytest.fixture(params=["http", "in-process"])
def store(request: pytest.FixtureRequest, server: Runtime, client: Client) -> SleepmemStore:
    if request.param == "http":
        return SleepmemStore(client)
    assert server.resources is not None
    return SleepmemStore(server.resources, tenant=TENANT)


@pytest.fixture
def root() -> str:
    """A first label of this test's own: no test sees another's namespaces."""
    return f"agent-{uuid.uuid4().hex[:10]}"


# -- the conformance table ---------------------------------------------------------------


def put_then_get_returns_the_value_exactly(store: BaseStore, root: str) -> None:
    store.put((root, "ann"), "profile", VALUE)
    item = store.get((root, "ann"), "profile")
    assert item is not None and item.value == VALUE
    assert item.key == "profile" and item.namespace == (root, "ann")


def a_second_put_replaces_the_value_and_keeps_its_creation_time(store: BaseStore,
                                                                 root: str) -> None:
    store.put((root,), "k", {"v": 1})
    first = store.get((root,), "k")
    store.put((root,), "k", {"v": 2})
    second = store.get((root,), "k")
    assert first is not None and second is not None and second.value == {"v": 2}
    assert second.created_at == first.created_at and second.updated_at >= first.updated_at


def a_key_never_written_is_none_and_namespaces_do_not_share_keys(store: BaseStore,
                                                                 root: str) -> None:
    store.put((root, "ann"), "k", {"v": 1})
    assert store.get((root, "ann"), "never-written") is None
    assert store.get((root, "bo"), "k") is None
    assert store.get((root,), "k") is None


def delete_and_put_none_remove_the_value(store: BaseStore, root: str) -> None:
    store.put((root,), "a", {"v": 1})
    store.put((root,), "b", {"v": 2})
    store.delete((root,), "a")
    store.put((root,), "b", None)  # type: ignore[arg-type]
    assert store.get((root,), "a") is None and store.get((root,), "b") is None
    store.delete((root,), "never-written")  # deleting nothing is no error


def search_lists_the_values_under_a_prefix_newest_first(store: BaseStore, root: str) -> None:
    store.put((root, "ann", "notes"), "n1", {"text": "one"})
    store.put((root, "ann", "notes"), "n2", {"text": "two"})
    store.put((root, "bo"), "n3", {"text": "three"})
    found = store.search((root, "ann"))
    assert [i.key for i in found] == ["n2", "n1"]
    assert all(i.namespace == (root, "ann", "notes") for i in found)
    assert {i.key for i in store.search((root,))} == {"n1", "n2", "n3"}
    assert store.search((root, "an")) == []  # a prefix is whole labels, not characters


def search_filters_by_fields_and_operators(store: BaseStore, root: str) -> None:
    rows = [("a", {"kind": "pet", "age": 3, "meta": {"colour": "red"}}),
            ("b", {"kind": "pet", "age": 9, "meta": {"colour": "blue"}}),
            ("c", {"kind": "car", "age": 5, "meta": {"colour": "red"}})]
    for key, value in rows:
        store.put((root,), key, value)

    def keys(**spec: Any) -> set[str]:
        return {i.key for i in store.search((root,), filter=spec)}

    assert keys(kind="pet") == {"a", "b"}
    assert keys(kind="pet", age=9) == {"b"}
    assert keys(meta={"colour": "red"}) == {"a", "c"}
    assert keys(age={"$gt": 3}) == {"b", "c"}
    assert keys(age={"$gte": 3, "$lt": 9}) == {"a", "c"}
    assert keys(kind={"$ne": "pet"}) == {"c"}
    assert keys(kind={"$eq": "car"}, age={"$lte": 5}) == {"c"}
    assert keys(missing="x") == set()


def search_by_query_ranks_the_values_that_share_its_words(store: BaseStore,
                                                          root: str) -> None:
    store.put((root,), "home", {"content": "I live in Lyon, near the river."})
    store.put((root,), "pet", {"content": "I have a cat called Miso."})
    store.put((root,), "food", {"content": "Lyon is known for food; I cook at home."})
    found = store.search((root,), query="where does the user live in Lyon?")
    assert [i.key for i in found][:2] == ["home", "food"]
    assert found[0].score is not None and found[0].score > (found[1].score or 0)
    assert "pet" not in [i.key for i in found]


def values_found(store: BaseStore, root: str, query: str) -> list[str]:
    """The keys of the stored values a query finds (memories, extras, left out)."""
    return [i.key for i in store.search((root,), query=query)
            if i.value.get("memory_id") != i.key]


def an_item_put_with_index_false_is_found_by_get_and_filters_but_never_by_a_query(
    store: BaseStore, root: str
) -> None:
    store.put((root,), "hidden", {"title": "Lyon river walk", "kind": "note"}, index=False)
    store.put((root,), "shown", {"title": "Lyon food guide", "kind": "note"})
    hidden = store.get((root,), "hidden")
    assert hidden is not None and hidden.value == {"title": "Lyon river walk", "kind": "note"}
    assert values_found(store, root, "Lyon river walk") == ["shown"]
    assert {i.key for i in store.search((root,), filter={"kind": "note"})} == {"hidden", "shown"}
    assert {i.key for i in store.search((root,))} == {"hidden", "shown"}


def an_item_put_with_index_fields_is_found_only_by_words_in_those_fields(
    store: BaseStore, root: str
) -> None:
    store.put((root,), "trip", {"title": "Lyon river walk", "body": "bring the cat"},
              index=["title"])
    store.put((root,), "tags", {"title": "misc", "meta": {"tags": ["kayak", "canoe"]},
                                "body": "Lyon"}, index=["meta.tags[*]"])
    assert values_found(store, root, "Lyon") == ["trip"]
    assert values_found(store, root, "cat") == []
    assert values_found(store, root, "kayak") == ["tags"]
    assert values_found(store, root, "misc") == []
    # A later put without index indexes the whole value again.
    store.put((root,), "trip", {"title": "Lyon river walk", "body": "bring the cat"})
    assert values_found(store, root, "cat") == ["trip"]


def a_bad_index_is_refused_with_a_validation_error_naming_the_field(
    store: BaseStore, root: str
) -> None:
    for bad in (True, "title", [], [""], ["a[x]"], ["{a,}"], [3]):
        with pytest.raises(ValidationError) as refused:
            store.put((root,), "k", {"title": "t"}, index=bad)  # type: ignore[arg-type]
        assert refused.value.field.startswith("index"), (bad, refused.value.field)
    assert store.get((root,), "k") is None


def search_pages_with_limit_and_offset(store: BaseStore, root: str) -> None:
    for n in range(5):
        store.put((root,), f"k{n}", {"n": n})
    every = [i.key for i in store.search((root,), limit=10)]
    assert every == ["k4", "k3", "k2", "k1", "k0"]
    assert [i.key for i in store.search((root,), limit=2, offset=1)] == every[1:3]
    assert store.search((root,), limit=2, offset=10) == []


def list_namespaces_matches_cuts_and_pages(store: BaseStore, root: str) -> None:
    for ns in [(root, "ann"), (root, "ann", "notes"), (root, "bo", "notes"), (root, "cy")]:
        store.put(ns, "k", {"v": 1})
    mine = store.list_namespaces(prefix=(root,))
    assert mine == [(root, "ann"), (root, "ann", "notes"), (root, "bo", "notes"), (root, "cy")]
    assert store.list_namespaces(prefix=(root, "ann")) == [(root, "ann"), (root, "ann", "notes")]
    assert store.list_namespaces(prefix=(root, "*", "notes")) == [
        (root, "ann", "notes"), (root, "bo", "notes")]
    assert store.list_namespaces(prefix=(root,), suffix=("notes",)) == [
        (root, "ann", "notes"), (root, "bo", "notes")]
    assert store.list_namespaces(prefix=(root,), max_depth=2) == [
        (root, "ann"), (root, "bo"), (root, "cy")]
    assert store.list_namespaces(prefix=(root,), limit=2, offset=1) == mine[1:3]
    assert (root, "ann") in store.list_namespaces()


def a_value_with_a_ttl_is_gone_once_it_expires(store: BaseStore, root: str) -> None:
    store.put((root,), "brief", {"v": 1}, ttl=0.3 / 60)  # LangGraph TTLs are minutes
    store.put((root,), "kept", {"v": 2})
    assert store.get((root,), "brief") is not None
    assert wait_for(lambda: store.get((root,), "brief", refresh_ttl=False) is None, timeout=5)
    assert [i.key for i in store.search((root,))] == ["kept"]
    assert store.get((root,), "kept") is not None


def batch_runs_mixed_ops_in_order(store: BaseStore, root: str) -> None:
    results = store.batch([
        PutOp((root, "x"), "a", {"v": 1}),
        GetOp((root, "x"), "a"),
        SearchOp((root,), filter={"v": 1}),
        ListNamespacesOp(max_depth=2, limit=1000),
        PutOp((root, "x"), "a", None),
        GetOp((root, "x"), "a"),
    ])
    assert results[0] is None
    assert results[1] is not None and results[1].value == {"v": 1}  # type: ignore[union-attr]
    assert [i.key for i in results[2]] == ["a"]  # type: ignore[union-attr]
    assert (root, "x") in results[3]  # type: ignore[operator]
    assert results[5] is None


def abatch_and_the_async_methods_work_inside_an_event_loop(store: BaseStore,
                                                           root: str) -> None:
    async def run() -> None:
        await store.aput((root,), "pet", {"content": "I have a cat called Miso."})
        item = await store.aget((root,), "pet")
        assert item is not None and item.value == {"content": "I have a cat called Miso."}
        found = await store.asearch((root,), query="cat", limit=1)
        assert [i.key for i in found] == ["pet"]
        assert await store.alist_namespaces(prefix=(root,)) == [(root,)]
        await store.adelete((root,), "pet")
        assert (await store.abatch([GetOp((root,), "pet")])) == [None]

    asyncio.run(run())


def bad_namespaces_are_refused_with_the_rule(store: BaseStore, root: str) -> None:
    with pytest.raises(InvalidNamespaceError):
        store.put((root, "a.b"), "k", {"v": 1})
    with pytest.raises(InvalidNamespaceError):
        store.put((root, ""), "k", {"v": 1})
    with pytest.raises(InvalidNamespaceError, match="scope id"):
        store.put(("has space",), "k", {"v": 1})
    deep = (root, "u", "p", "s", "five", "six")  # past the four scope levels: labels only
    store.put(deep, "k", {"v": 1})
    assert store.list_namespaces(prefix=(root,)) == [deep]


CONFORMANCE: list[Callable[[BaseStore, str], None]] = [
    put_then_get_returns_the_value_exactly,
    a_second_put_replaces_the_value_and_keeps_its_creation_time,
    a_key_never_written_is_none_and_namespaces_do_not_share_keys,
    delete_and_put_none_remove_the_value,
    search_lists_the_values_under_a_prefix_newest_first,
    search_filters_by_fields_and_operators,
    search_by_query_ranks_the_values_that_share_its_words,
    an_item_put_with_index_false_is_found_by_get_and_filters_but_never_by_a_query,
    an_item_put_with_index_fields_is_found_only_by_words_in_those_fields,
    a_bad_index_is_refused_with_a_validation_error_naming_the_field,
    search_pages_with_limit_and_offset,
    list_namespaces_matches_cuts_and_pages,
    a_value_with_a_ttl_is_gone_once_it_expires,
    batch_runs_mixed_ops_in_order,
    abatch_and_the_async_methods_work_inside_an_event_loop,
    bad_namespaces_are_refused_with_the_rule,
]


@pytest.mark.parametrize("case", CONFORMANCE, ids=lambda c: c.__name__)
def test_the_store_keeps_the_basestore_contract(
    case: Callable[[BaseStore, str], None], store: SleepmemStore, root: str
) -> None:
    case(store, root)


# -- beyond the table ---------------------------------------------------------------------


def listen(state: State, *, store: BaseStore) -> State:
    store.put(("planner", "ann"), "home", {"content": state["said"], "source": "chat"})
    return {}


def recall(state: State, *, store: BaseStore) -> State:
    hits = store.search(("planner", "ann"), query="where does the user live?", limit=3)
    item = store.get(("planner", "ann"), "home")
    return {"answer": hits[0].value["content"] if hits else "",
            "found": item.value if item else {}}


def graph(node: object, store: BaseStore) -> Any:
    builder = StateGraph(State)
    builder.add_node("step", node)  # type: ignore[call-overload]
    builder.add_edge(START, "step")
    builder.add_edge("step", END)
    return builder.compile(store=store)


class TestLangGraphStore:
    def test_a_graph_writes_a_value_and_the_next_run_reads_it_back_at_once(
        self, client: Client
    ) -> None:
        store = SleepmemStore(client)
        graph(listen, store).invoke({"said": "I live in Lyon."})
        out = graph(recall, store).invoke({})
        assert out["found"] == {"content": "I live in Lyon.", "source": "chat"}
        assert out["answer"] == "I live in Lyon."

    def test_search_adds_consolidated_memories_after_the_values(self, client: Client) -> None:
        store = SleepmemStore(client)
        store.put(("bot", "ann"), "seat", {"content": "Ann wants a window seat."})
        found = store.search(("bot", "ann"), query="which seat does Ann prefer?", limit=5)
        assert found[0].key == "seat" and found[0].value == {
            "content": "Ann wants a window seat."}
        extras = found[1:]
        assert extras and all(i.value["memory_id"] == i.key for i in extras)
        assert any("window seat" in i.value["content"] for i in extras)
        assert store.get(("bot", "ann"), extras[0].key) is None  # a memory is no key's value
        assert all(i.key != extras[0].key
                   for i in SleepmemStore(client, memories=False).search(
                       ("bot", "ann"), query="which seat does Ann prefer?"))

    def test_a_secret_in_a_value_is_never_stored(self, server: Runtime, client: Client) -> None:
        store = SleepmemStore(client)
        store.put(("vault", "ann"), "creds", {"note": f"the deploy key is {AWS}",
                                              "dbPassword": "hunter22x", "n": 1})
        item = store.get(("vault", "ann"), "creds")
        assert item is not None and item.value["n"] == 1
        assert AWS not in str(item.value) and "hunter22x" not in str(item.value)
        assert server.resources is not None
        with server.resources.engine.connect() as conn:
            rows = repr(conn.execute(sa.select(StoreValue.__table__)).all())  # type: ignore[attr-defined]
        assert AWS not in rows and "hunter22x" not in rows
        with pytest.raises(ValidationError, match="secret"):
            client.put_value(("vault", "ann"), f"key-{AWS}", {"v": 1})

    def test_erasing_a_scope_erases_its_values_and_the_receipt_counts_them(
        self, client: Client
    ) -> None:
        store = SleepmemStore(client)
        store.put(("eraser", "cy"), "a", {"v": 1})
        store.put(("eraser", "cy", "notes"), "b", {"v": 2})
        store.put(("eraser", "dee"), "c", {"v": 3})
        receipt = client.forget(scope={"tenant": TENANT, "agent": "eraser", "user": "cy"})
        assert receipt.removed["store_values"] == 2
        assert store.get(("eraser", "cy"), "a") is None
        assert store.list_namespaces(prefix=("eraser",)) == [("eraser", "dee")]

    def test_the_sweep_deletes_expired_values_and_a_read_renews_a_ttl(
        self, server: Runtime
    ) -> None:
        assert server.resources is not None
        values = Values(server.resources)
        scope = {"tenant": TENANT, "agent": "sweeper"}
        values.put_value(("sweeper",), "gone", {"v": 1}, scope=scope, ttl_s=0.2)
        put = values.put_value(("sweeper",), "renewed", {"v": 2}, scope=scope, ttl_s=600)
        unrenewed = values.get_value(("sweeper",), "renewed", scope=scope, refresh_ttl=False)
        renewed = values.get_value(("sweeper",), "renewed", scope=scope)
        assert unrenewed is not None and unrenewed.expires_at == put.expires_at
        assert renewed is not None and put.expires_at is not None
        assert renewed.expires_at is not None and renewed.expires_at > put.expires_at
        # Read without renewing: each renewing read would keep it alive another 0.2 s.
        assert wait_for(lambda: values.get_value(("sweeper",), "gone", scope=scope,
                                                 refresh_ttl=False) is None, timeout=5)
        assert sweep_values(server.resources) >= 1
        with server.resources.engine.connect() as conn:
            keys = set(conn.execute(sa.select(StoreValue.key).where(  # type: ignore[call-overload]
                StoreValue.agent == "sweeper")).scalars())
        assert keys == {"renewed"}

    def test_the_http_routes_name_what_is_wrong(self, client: Client) -> None:
        with pytest.raises(ValidationError) as bad_label:
            client.put_value(("a.b",), "k", {"v": 1}, scope={"tenant": TENANT})
        assert "namespace" in bad_label.value.field
        with pytest.raises(ValidationError, match="tuple of string labels"):
            client.put_value("planner", "k", {"v": 1})
        with pytest.raises(ValidationError) as bad_op:
            client.search_values(("planner",), filter={"n": {"$near": 1}})
        assert bad_op.value.field == "filter.n"
        assert client.get_value(("nowhere",), "k", scope={"tenant": TENANT}) is None
        assert client.delete_value(("nowhere",), "k", scope={"tenant": TENANT}) is False

    def test_the_clients_carry_index_to_the_server(self, server: Runtime,
                                                   client: Client) -> None:
        scope = {"tenant": TENANT, "agent": "indexer"}
        client.put_value(("indexer",), "off", {"t": "Lyon"}, scope=scope, index=False)
        client.put_value(("indexer",), "title", {"title": "Paris", "body": "Lyon"},
                         scope=scope, index=["title"])
        assert [v.key for v in client.search_values(("indexer",), scope=scope,
                                                    query="Lyon")] == []
        assert [v.key for v in client.search_values(("indexer",), scope=scope,
                                                    query="Paris")] == ["title"]
        with pytest.raises(ValidationError) as refused:
            client.put_value(("indexer",), "k", {"v": 1}, scope=scope, index=["a[x]"])
        assert refused.value.field == "index" and "a[x]" in str(refused.value)

        async def run() -> None:
            async with AsyncClient(data_dir=server.settings.data_dir, tenant=TENANT) as mem:
                await mem.put_value(("indexer",), "body", {"title": "Nice", "body": "Lyon"},
                                    scope=scope, index=["body"])
                found = await mem.search_values(("indexer",), scope=scope, query="Lyon")
                assert [v.key for v in found] == ["body"]
                with pytest.raises(ValidationError) as refused:
                    await mem.put_value(("indexer",), "k", {"v": 1}, scope=scope, index=True)  # type: ignore[arg-type]
                assert refused.value.field == "index"

        asyncio.run(run())

    def test_the_async_client_has_the_same_value_calls(self, server: Runtime) -> None:
        async def run() -> None:
            async with AsyncClient(data_dir=server.settings.data_dir, tenant=TENANT) as mem:
                scope = {"tenant": TENANT, "agent": "async-bot"}
                put = await mem.put_value(("async-bot", "notes"), "k", VALUE, scope=scope)
                got = await mem.get_value(("async-bot", "notes"), "k", scope=scope)
                assert got is not None and got.value == VALUE == put.value
                found = await mem.search_values(("async-bot",), scope=scope,
                                                filter={"count": 3})
                assert [v.key for v in found] == ["k"]
                assert await mem.value_namespaces(scope=scope) == [("async-bot", "notes")]
                assert await mem.delete_value(("async-bot", "notes"), "k", scope=scope)
                assert await mem.get_value(("async-bot", "notes"), "k", scope=scope) is None

        asyncio.run(run())
