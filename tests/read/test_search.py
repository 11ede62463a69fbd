"""Search: scope before ranking, current-only by default, as_of, conflicts, budgets, order.

Memories are written as rows and index points the way persist + index write them; the
index is the in-memory one (the ``index`` fixture; it passes the engines' contract
suite), SQL is SQLite and PostgreSQL.
"""

from __future__ import annotations

import random
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from fastapi.testclient import TestClient
from sqlalchemy.engine import Engine
from support import store_memory

from sleepmem.adapters.embedders import HashingEmbedder
from sleepmem.core.errors import ValidationError
from sleepmem.core.settings import Settings
from sleepmem.core.tokens import count_tokens
from sleepmem.models import ConflictGroup, Memory, MemoryCard, Scope
from sleepmem.pipelines.ports import Ports, VectorIndex
from sleepmem.pipelines.read.rank import RankWeights
from sleepmem.pipelines.read.retrieve import search
from sleepmem.reader import build_request


@pytest.fixture
def settings(settings: Settings, sql_url: str, engine: Engine) -> Settings:
    """Every test here runs on SQLite and again on PostgreSQL (``engine`` empties the shared
    PostgreSQL database afterwards)."""
    return settings.model_copy(update={"database_url": sql_url})


NOW = datetime(2026, 6, 1, tzinfo=UTC)
EMBEDDER = HashingEmbedder()


def remember(engine: Engine, index: VectorIndex, scope: Scope, statement: str,
             **kw: Any) -> Memory:
    return store_memory(engine, index, scope, statement, at=kw.pop("valid_from", NOW),
                        type=str(kw.pop("type", "fact")), now=kw.pop("now", NOW), **kw)


def find(engine: Engine, index: VectorIndex, query: str, scope: Scope, *, now: datetime = NOW,
         **kw: Any) -> list[Any]:
    ports = Ports(embedder=EMBEDDER, index=index, clock=lambda: now)
    # Whole cards (the default format) unless a test asks otherwise: these tests pin what
    # ranks where, and test_formats pins the lines.
    request = build_request(query, scope=scope, **kw)
    return list(search(engine=engine, ports=ports, request=request,
                       weights=RankWeights()).cards)


def statements(cards: list[Any]) -> list[str]:
    out: list[str] = []
    for c in cards:
        out.extend(s.statement for s in c.sides) if isinstance(c, ConflictGroup) else out.append(
            c.statement)
    return out


ANN = Scope(tenant="acme", agent="bot", user="ann")


class TestScopes:
    def test_a_search_sees_its_scope_and_broader_ones_but_no_sibling(
        self, engine: Engine, index: VectorIndex
    ) -> None:
        remember(engine, index, Scope(tenant="acme", agent="bot"), "Bot rule: greet politely.")
        remember(engine, index, ANN, "Ann lives in Porto.")
        remember(engine, index, ANN.model_copy(update={"project": "billing"}),
                 "Billing runs on port 3990.")
        remember(engine, index, ANN.model_copy(update={"project": "search"}),
                 "Search runs on port 7700.")
        remember(engine, index, Scope(tenant="acme", agent="bot", user="bob"), "Bob is in Oslo.")
        seen = statements(find(engine, index, "port city rule", ANN.model_copy(
            update={"project": "billing"}), k=10))
        assert sorted(seen) == ["Ann lives in Porto.", "Billing runs on port 3990.",
                                "Bot rule: greet politely."]
        assert "Billing runs on port 3990." not in statements(find(engine, index, "port", ANN,
                                                                   k=10))

    def test_a_memory_row_is_judged_by_the_plain_rule_as_its_scope_would_be(self) -> None:
        # The SQL re-check hands rows, not Scopes, to Scope.sees; both must agree with the
        # rule written out: same tenant, each narrower level unset or the searcher's own.
        rng = random.Random(11)
        pick = rng.choice
        for _ in range(500):
            searcher = Scope(tenant=pick(["t1", "t2"]), agent=pick(["", "a1"]),
                             user=pick(["", "u1", "u2"]), project=pick(["", "p1"]),
                             session=pick(["", "s1"]))
            levels = {"tenant": pick(["t1", "t2"]), "agent": pick(["", "a1", "a2"]),
                      "user": pick(["", "u1", "u2"]), "project": pick(["", "p1", "p2"]),
                      "session": pick(["", "s1"])}
            row = Memory(id="m", lineage="m", scope_key=Scope(**levels).key, **levels,
                         type="fact", statement="x", valid_from=NOW)
            expected = levels["tenant"] == searcher.tenant and all(
                levels[lvl] in ("", getattr(searcher, lvl))
                for lvl in ("agent", "user", "project", "session"))
            assert searcher.sees(row) is expected, (searcher, levels)
            assert searcher.sees(Scope(**levels)) is expected, (searcher, levels)

    def test_randomised_queries_across_fifty_tenants_never_cross(
        self, engine: Engine, index: VectorIndex
    ) -> None:
        rng = random.Random(5)
        words = ["coffee", "port", "berlin", "cat", "jazz", "order", "nurse", "python"]
        for t in range(50):
            for i in range(3):
                remember(engine, index, Scope(tenant=f"t{t}", agent="a", user="u"),
                         f"t{t} says {rng.choice(words)} {rng.choice(words)} ({i})")
        for _ in range(100):
            t = rng.randrange(50)
            query = " ".join(rng.sample([*words, "t7", "t12", "says"], 3))
            for text in statements(find(engine, index, query,
                                        Scope(tenant=f"t{t}", agent="a", user="u"), k=20)):
                assert text.startswith(f"t{t} says"), (t, text)


class TestTime:
    def test_as_of_answers_with_what_was_valid_then(self, engine: Engine,
                                                    index: VectorIndex) -> None:
        switch = NOW - timedelta(days=30)
        new = remember(engine, index, ANN, "Ann lives in Shanghai.", valid_from=switch)
        remember(engine, index, ANN, "Ann lives in Beijing.", valid_from=NOW - timedelta(days=300),
                 valid_to=switch, status="superseded", superseded_by=new.id)
        assert statements(find(engine, index, "where does Ann live", ANN)) == [
            "Ann lives in Shanghai."]
        before = find(engine, index, "where does Ann live", ANN, as_of=switch - timedelta(days=1))
        assert statements(before) == ["Ann lives in Beijing."]

    def test_a_memory_past_its_expiry_is_never_returned_even_before_a_sweep(
        self, engine: Engine, index: VectorIndex
    ) -> None:
        remember(engine, index, ANN, "Order 88231 is on its way.", type="task",
                 ttl=timedelta(days=7))
        assert statements(find(engine, index, "order", ANN, now=NOW + timedelta(days=6)))
        assert find(engine, index, "order", ANN, now=NOW + timedelta(days=8)) == []


class TestResults:
    def test_a_conflict_set_comes_back_as_one_group_holding_both_sides(
        self, engine: Engine, index: VectorIndex
    ) -> None:
        for s in ("Ship to 12 Oak Street.", "Ship to 48 Pine Avenue."):
            remember(engine, index, ANN, s, status="pending_confirmation", conflict_set="c1")
        [group] = find(engine, index, "shipping address", ANN)
        assert isinstance(group, ConflictGroup)
        assert sorted(s.statement for s in group.sides) == [
            "Ship to 12 Oak Street.", "Ship to 48 Pine Avenue."]

    def test_a_conflict_among_the_lines_is_never_cut_to_a_line(
        self, engine: Engine, index: VectorIndex
    ) -> None:
        for i in range(4):
            remember(engine, index, ANN, f"Ann ships gift box number {i} to her sister.")
        for s in ("Ship to 12 Oak Street.", "Ship to 48 Pine Avenue."):
            remember(engine, index, ANN, s, status="pending_confirmation", conflict_set="c1")
        query = "Which gift boxes does Ann ship to her sister?"
        whole = find(engine, index, query, ANN, k=6)
        at = next(i for i, c in enumerate(whole) if isinstance(c, ConflictGroup))
        assert at >= 3, "the conflict ranks below the three whole cards of a search for 6"
        for fmt in ("mixed", "lines"):
            cards = find(engine, index, query, ANN, k=6, format=fmt)
            read = [c for c in cards if isinstance(c, MemoryCard) and c.line]
            assert read and all("gift box" in c.statement for c in read)
            [group] = [g for g in cards if isinstance(g, ConflictGroup)]
            assert len(group.sides) == 2 and not any(s.line for s in group.sides)

    def test_each_line_keeps_its_own_source_and_trust(
        self, engine: Engine, index: VectorIndex
    ) -> None:
        for i in range(4):
            remember(engine, index, ANN, f"Ann ships gift box number {i} to her sister.")
        remember(engine, index, ANN, "A web page says gift box delivery to her sister is slow.",
                 source="tool", trust="low")
        cards = find(engine, index, "Which gift boxes does Ann ship to her sister?", ANN,
                     k=5, format="lines")
        assert all(isinstance(c, MemoryCard) and c.line for c in cards)
        said = {c.statement: (c.source, c.trust) for c in cards}
        assert said.pop("A web page says gift box delivery to her sister is slow.") == (
            "tool", "low")
        assert set(said.values()) == {("user", "high")} and len(said) == 4

    def test_the_token_budget_trims_cards(self, engine: Engine, index: VectorIndex) -> None:
        for i in range(6):
            remember(engine, index, ANN, f"Ann visited museum number {i} in a long afternoon.")
        one = count_tokens("Ann visited museum number 0 in a long afternoon.")
        cards = find(engine, index, "museum", ANN, k=6, max_tokens=one * 2 + 1)
        assert len(cards) == 2

    def test_equal_inputs_give_the_same_order(self, engine: Engine, index: VectorIndex) -> None:
        for i in range(8):
            remember(engine, index, ANN, f"Ann likes tea variety {i % 2}.")
        first = [c.id for c in find(engine, index, "tea", ANN, k=8)]
        assert first == [c.id for c in find(engine, index, "tea", ANN, k=8)]
        assert len(first) == 8


class TestBadInput:
    @pytest.mark.parametrize(
        ("kwargs", "field"),
        [({"query": "  "}, "query"), ({"k": 0}, "k"), ({"k": 101}, "k"),
         ({"types": ["gossip"]}, "types"), ({"as_of": "yesterday-ish"}, "as_of"),
         ({"scope": {"agent": "bot"}}, "scope.tenant")],
    )
    def test_bad_requests_name_the_field(self, kwargs: dict[str, Any], field: str) -> None:
        args: dict[str, Any] = {"query": "tea", "scope": {"tenant": "acme"}} | kwargs
        with pytest.raises(ValidationError) as err:
            build_request(args.pop("query"), **args)
        assert err.value.field.startswith(field)


class TestHttpSearch:
    @pytest.fixture
    def client(self, settings: Any, index: VectorIndex) -> Iterator[TestClient]:
        from pydantic import SecretStr

        from sleepmem.api.app import create_app
        from sleepmem.resources import build_resources

        cfg = settings.model_copy(update={"auth_enabled": True,
                                          "api_keys": {"acme": SecretStr("k-acme")}})
        res = build_resources(cfg)
        res._index, res._embedder = index, EMBEDDER
        remember(res.engine, index, ANN, "Ann lives in Porto.")
        with TestClient(create_app(resources=res)) as c:
            yield c
        res._index = None
        res.close()

    def test_the_owner_reads_its_cards_and_others_are_refused(self, client: TestClient) -> None:
        body = {"query": "where does Ann live", "scope": ANN.model_dump()}
        assert client.post("/v1/search", json=body).status_code == 401
        ok = client.post("/v1/search", json=body, headers={"Authorization": "Bearer k-acme"})
        assert ok.status_code == 200
        assert ok.json()["cards"][0]["statement"] == "Ann lives in Porto."
        other = {"query": "x", "scope": {"tenant": "globex", "agent": "bot", "user": "ann"}}
        denied = client.post("/v1/search", json=other,
                             headers={"Authorization": "Bearer k-acme"})
        assert denied.status_code == 403

    def test_bad_input_is_a_422_naming_the_field(self, client: TestClient) -> None:
        r = client.post("/v1/search", json={"query": "tea", "scope": ANN.model_dump(), "k": 0},
                        headers={"Authorization": "Bearer k-acme"})
        assert r.status_code == 422
        assert r.json()["error"]["field"] == "k"
