"""explain with a query: which recall routes found a memory for that query, its rank and
score in each, and the rerank's terms. Through a real server (the embedded runtime with its
API on a free port) via the SDK, raw HTTP, the CLI and MCP."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator

import httpx
import pytest
from support import mcp_over_stdio, require_extra
from test_client import SCOPE, cli, running_server

from sleepmem.client import AsyncClient, Client
from sleepmem.core.errors import NotFoundError, ValidationError
from sleepmem.models import MemoryCard
from sleepmem.runtime import Runtime

QUESTION = "where does Ann live?"


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Runtime]:
    with running_server(tmp_path_factory.mktemp("explainq")) as runtime:
        yield runtime


@pytest.fixture
def mem(server: Runtime) -> Iterator[Client]:
    with Client(data_dir=server.settings.data_dir, **SCOPE) as client:
        yield client


def best(mem: Client, query: str = QUESTION) -> MemoryCard:
    card = mem.search(query, k=3).flat()[0]
    assert "Berlin" in card.statement
    return card


class TestExplainingHowASearchFoundAMemory:
    def test_explain_names_the_same_routes_the_search_card_shows(self, mem: Client) -> None:
        card = best(mem)
        why = mem.explain(card.id, query=QUESTION).query
        assert why is not None and why.found
        assert why.found_by == card.routes

    def test_the_best_card_is_ranked_first_with_the_score_search_gave_it(
        self, mem: Client
    ) -> None:
        card = best(mem)
        why = mem.explain(card.id, query=QUESTION).query
        assert why is not None and why.rank == 1 and why.returned
        assert why.score == pytest.approx(card.score, abs=1e-3)

    def test_each_route_that_found_it_gives_a_rank_a_score_and_its_share_of_relevance(
        self, mem: Client
    ) -> None:
        why = mem.explain(best(mem).id, query=QUESTION).query
        assert why is not None and why.relevance is not None
        found = [r for r in why.routes if r.found]
        assert {r.route for r in found} == set(why.found_by)
        for r in found:
            assert r.rank is not None and 1 <= r.rank <= r.hits
            assert r.score is not None and r.normalised is not None
            assert r.contribution == pytest.approx(r.weight * r.normalised, abs=1e-5)
        assert sum(r.contribution for r in found) == pytest.approx(why.relevance, abs=1e-4)

    def test_the_score_is_the_sum_of_relevance_recency_importance_and_confidence(
        self, mem: Client
    ) -> None:
        why = mem.explain(best(mem).id, query=QUESTION).query
        assert why is not None and why.score is not None
        terms = {t.name: t for t in why.terms}
        assert {"relevance", "recency", "importance", "confidence"} <= set(terms)
        assert terms["relevance"].value == pytest.approx(why.relevance, abs=1e-5)
        assert sum(t.contribution for t in why.terms) == pytest.approx(why.score, abs=1e-4)

    def test_a_route_that_ran_without_finding_the_memory_says_so(self, mem: Client) -> None:
        berlin = best(mem)
        why = mem.explain(berlin.id, query="window seat").query
        assert why is not None
        lexical = [r for r in why.routes if r.route == "lexical"]
        assert lexical and not lexical[0].found and lexical[0].rank is None
        assert "lexical" not in why.found_by

    def test_without_a_query_the_explanation_is_as_before(self, mem: Client) -> None:
        ex = mem.explain(best(mem).id)
        assert ex.query is None and ex.versions

    def test_the_async_client_explains_with_a_query_too(
        self, server: Runtime, mem: Client
    ) -> None:
        card = best(mem)

        async def run() -> list[str]:
            async with AsyncClient(data_dir=server.settings.data_dir, **SCOPE) as amem:
                why = (await amem.explain(card.id, query=QUESTION)).query
                assert why is not None
                return why.found_by

        assert asyncio.run(run()) == card.routes


class TestBadInputIsRefusedClearly:
    def test_a_blank_query_is_refused_by_the_client_before_any_request(
        self, mem: Client
    ) -> None:
        with pytest.raises(ValidationError, match="query"):
            mem.explain(best(mem).id, query="   ")

    def test_a_blank_query_over_http_is_a_422_naming_the_query(
        self, server: Runtime, mem: Client
    ) -> None:
        assert server.local_key is not None
        resp = httpx.get(f"{server.api_url}/v1/memories/{best(mem).id}/explain",
                         params={"query": " "},
                         headers={"Authorization": f"Bearer {server.local_key.key}"})
        assert resp.status_code == 422
        assert "query" in resp.text

    def test_a_query_longer_than_search_allows_is_refused_naming_the_query(
        self, mem: Client
    ) -> None:
        with pytest.raises(ValidationError, match="query"):
            mem.explain(best(mem).id, query="Berlin " * 1000)

    def test_an_unknown_memory_with_a_query_is_not_found(self, mem: Client) -> None:
        with pytest.raises(NotFoundError):
            mem.explain("no-such-memory", query=QUESTION)


class TestTheCli:
    def test_explain_with_query_prints_the_routes_as_json(
        self, server: Runtime, mem: Client
    ) -> None:
        card = best(mem)
        done = cli(server, "explain", card.id, "--query", QUESTION, "--json")
        assert done.returncode == 0, done.stderr
        assert json.loads(done.stdout)["query"]["found_by"] == card.routes

    def test_explain_with_query_prints_a_line_per_route_for_people(
        self, server: Runtime, mem: Client
    ) -> None:
        card = best(mem)
        done = cli(server, "explain", card.id, "--query", QUESTION)
        assert done.returncode == 0, done.stderr
        assert f"for the query {QUESTION!r}" in done.stdout
        for route in card.routes:
            assert any(line.split()[:2] == [route, "rank"] for line in done.stdout.splitlines())

    def test_a_query_that_names_a_time_shows_the_window_and_where_the_memory_falls(
        self, server: Runtime, mem: Client
    ) -> None:
        # The memory was stated moments ago, so it is inside "this year" (the test would
        # only misread a run straddling midnight on New Year's Eve).
        card = best(mem)
        timed = "where does Ann live this year?"
        why = mem.explain(card.id, query=timed).query
        assert why is not None and why.time is not None
        assert why.time.expression == "this year" and why.time.memory_is == "inside"
        assert why.time.near_start < why.time.start < why.time.end < why.time.near_end
        assert mem.explain(card.id, query=QUESTION).query.time is None  # type: ignore[union-attr]
        done = cli(server, "explain", card.id, "--query", timed)
        assert done.returncode == 0, done.stderr
        lines = [x.strip() for x in done.stdout.splitlines()]
        at = next(i for i, x in enumerate(lines) if x.startswith("time"))
        assert "'this year'" in lines[at]
        assert lines[at + 1].startswith("near it:")
        assert lines[at + 2].startswith("this memory") and lines[at + 2].endswith("is inside")

    def test_a_blank_query_exits_2_with_the_reason(self, server: Runtime, mem: Client) -> None:
        done = cli(server, "explain", best(mem).id, "--query", "  ")
        assert done.returncode == 2
        assert "query" in done.stderr


class TestTheMcpTool:
    def test_explain_with_a_query_says_which_routes_found_the_memory(
        self, server: Runtime, mem: Client
    ) -> None:
        # Only this test needs the [mcp] extra: without it, it alone is skipped.
        mcp_sdk = require_extra("mcp", "mcp")
        card = best(mem)
        params = mcp_over_stdio(server.settings.data_dir)

        async def run() -> str:
            async with mcp_sdk.Client(params) as mcp:
                result = await mcp.call_tool("explain", {"memory_id": card.id,
                                                         "query": QUESTION})
                assert not result.is_error, result
                return "\n".join(block.text for block in result.content)  # type: ignore[union-attr]

        said = asyncio.run(run())
        assert f"for the query {QUESTION!r}" in said
        for route in card.routes:
            assert f"{route}" in said and "rank" in said
