"""The optional LLM query rewriter: off unless asked for and a chat model is configured; its
queries become the "rewrite" route; any failure of the model leaves search as it was.

A small scripted HTTP server on 127.0.0.1 stands in for the hosted chat API (the one test
double allowed); search, SQL, Redis and the index are the real ones. The opt-in ``llm``
tests run the rewriter against the real local model.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from http.server import BaseHTTPRequestHandler
from typing import Any

import pytest
import structlog
from pydantic import SecretStr
from sqlmodel import Session
from support import serving

from sleepmem.adapters.llm import OpenAIChatModel, make_rewriter
from sleepmem.core.settings import Settings
from sleepmem.models import Memory, Scope
from sleepmem.pipelines.memories import new_memory
from sleepmem.pipelines.read.rewrite import CachedRewriter, rewrite_query
from sleepmem.pipelines.types import Candidate
from sleepmem.pipelines.write.index import upsert_memories
from sleepmem.reader import Reader, build_request, explain_query
from sleepmem.resources import Resources, build_resources

SCOPE = Scope(tenant="acme", agent="bot", user="ann")
OTHER = Scope(tenant="acme", agent="bot", user="bob")
NOW = datetime(2026, 6, 1, tzinfo=UTC)
QUESTION = "What instrument does Ann play?"
# Worded nothing like the question: no shared content word for the plain routes.
ANSWER = "Ann practises the cello every evening."
REWRITE = "Ann practises the cello"


@dataclass
class Model:
    """What the stand-in model answers (``queries``, or raw ``content``) and after how long;
    every request it got."""

    queries: list[str] = field(default_factory=list)
    content: str | None = None
    delay_s: float = 0.0
    requests: list[dict[str, Any]] = field(default_factory=list)


class _Handler(BaseHTTPRequestHandler):
    model: Model

    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        self.model.requests.append(body)
        time.sleep(self.model.delay_s)
        content = self.model.content if self.model.content is not None else json.dumps(
            {"queries": self.model.queries})
        data = json.dumps({
            "id": "chatcmpl-test", "object": "chat.completion", "created": int(time.time()),
            "model": "scripted",
            "choices": [{"index": 0, "finish_reason": "stop",
                         "message": {"role": "assistant", "content": content}}],
            "usage": {"prompt_tokens": 50, "completion_tokens": 10, "total_tokens": 60},
        }).encode()
        try:
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)
        except (BrokenPipeError, ConnectionResetError):
            pass  # the client gave up waiting: that is what a timeout test wants

    def log_message(self, format: str, *args: Any) -> None:
        pass


@pytest.fixture
def model() -> Iterator[tuple[Model, str]]:
    state = Model()
    with serving(type("Handler", (_Handler,), {"model": state})) as url:
        yield state, url


def own(settings: Settings, name: str, **over: Any) -> Resources:
    """Resources on a data directory and database of their own (two processes' worth)."""
    folder = settings.data_dir.parent / name
    return build_resources(settings.model_copy(update={
        "data_dir": folder / "data", "database_url": f"sqlite:///{folder / 'db.sqlite'}",
        **over}))


@pytest.fixture
def rewriting(settings: Settings, model: tuple[Model, str], redis: Any) -> Iterator[Resources]:
    """Resources with the rewriter on, pointed at the stand-in model."""
    res = own(settings, "rewriting", query_rewrite="llm", llm_base_url=model[1],
              llm_model="scripted", query_rewrite_timeout_s=1.0, query_rewrite_cooldown_s=30.0)
    yield res
    res.close()


@pytest.fixture
def plain(settings: Settings, redis: Any) -> Iterator[Resources]:
    """The same service with the rewriter off, for comparison."""
    res = own(settings, "plain")
    yield res
    res.close()


def remember(res: Resources, scope: Scope, statement: str) -> Memory:
    cand = Candidate(type="fact", statement=statement, provenance=[f"ev-{hash(statement)}"],
                     valid_from=NOW, scope=scope)
    mem = new_memory(cand, scope_key=scope.owner.key, now=NOW, ttl=None, extractor="test")
    with Session(res.engine) as s:
        s.add(mem)
        s.commit()
        s.refresh(mem)
    upsert_memories([mem], index=res.index, embedder=res.embedder)
    return mem


def fill(res: Resources, scope: Scope = SCOPE) -> Memory:
    """The answer, among statements that share words with the question but do not answer it."""
    answer = remember(res, scope, ANSWER)
    for text in ("Ann said the instrument shop was closed on Monday.",
                 "What Ann plays on weekends is tennis with her brother.",
                 "Ann asked which play the theatre shows this week.",
                 "Ann does her shopping at the market."):
        remember(res, scope, text)
    return answer


def statements(res: Resources, query: str = QUESTION) -> list[str]:
    """The statements of five whole cards, in rank order (lines would read the answer
    wherever it ranked)."""
    request = build_request(query, scope=SCOPE)
    return [c.statement for c in Reader(res).search(request).flat()]


def routes_of(res: Resources, query: str, memory_id: str, scope: Scope = SCOPE) -> list[str]:
    cards = Reader(res).search(build_request(query, scope=scope, k=10)).flat()
    return next((c.routes for c in cards if c.id == memory_id), [])


class TestOffByDefault:
    def test_settings_leave_the_rewriter_off(self) -> None:
        assert Settings(_env_file=None).query_rewrite == "off"  # type: ignore[call-arg]

    def test_a_configured_chat_model_alone_does_not_turn_it_on(
        self, settings: Settings
    ) -> None:
        on_model = settings.model_copy(update={"llm_base_url": "http://127.0.0.1:9/v1"})
        assert make_rewriter(on_model) is None

    def test_asking_for_it_without_a_chat_model_leaves_it_off(self, settings: Settings) -> None:
        asked = settings.model_copy(update={"query_rewrite": "llm"})
        assert make_rewriter(asked) is None

    def test_asking_for_it_with_a_chat_model_builds_one_with_the_short_timeout(
        self, settings: Settings
    ) -> None:
        on = settings.model_copy(update={"query_rewrite": "llm", "query_rewrite_timeout_s": 2.0,
                                         "llm_base_url": "http://127.0.0.1:9/v1"})
        rewriter = make_rewriter(on)
        assert isinstance(rewriter, CachedRewriter)
        assert isinstance(rewriter.chat, OpenAIChatModel) and rewriter.chat.timeout_s == 2.0

    def test_an_unknown_mode_is_refused_by_the_settings(self) -> None:
        with pytest.raises(ValueError, match="query_rewrite"):
            Settings(query_rewrite="always", _env_file=None)  # type: ignore[arg-type, call-arg]

    def test_search_without_it_never_shows_a_rewrite_route(
        self, plain: Resources, model: tuple[Model, str]
    ) -> None:
        answer = fill(plain)
        assert plain.rewriter is None
        assert "rewrite" not in routes_of(plain, f"{QUESTION} {ANSWER}", answer.id)
        assert model[0].requests == []


class TestTheModelsQueries:
    @pytest.fixture
    def chat(self, model: tuple[Model, str]) -> Iterator[OpenAIChatModel]:
        chat = OpenAIChatModel(base_url=model[1], model="scripted", api_key=SecretStr(""),
                               timeout_s=5.0, max_retries=0)
        yield chat
        chat.close()

    def test_the_question_goes_to_the_model_and_its_queries_come_back_cleaned(
        self, model: tuple[Model, str], chat: OpenAIChatModel
    ) -> None:
        model[0].queries = ["  Ann   practises the cello ", "Ann's instrument lessons"]
        assert rewrite_query(chat, QUESTION) == ["Ann practises the cello",
                                                 "Ann's instrument lessons"]
        assert QUESTION in model[0].requests[0]["messages"][-1]["content"]

    def test_repeats_the_question_itself_and_blanks_are_dropped(
        self, model: tuple[Model, str], chat: OpenAIChatModel
    ) -> None:
        model[0].queries = ["what instrument does ann play", "", "cello", "Cello"]
        assert rewrite_query(chat, QUESTION) == ["cello"]

    def test_no_more_than_three_queries_are_kept(
        self, model: tuple[Model, str], chat: OpenAIChatModel
    ) -> None:
        model[0].queries = [f"query number {i}" for i in range(6)]
        assert len(rewrite_query(chat, QUESTION)) == 3

    def test_a_reply_without_a_list_of_queries_is_an_error_for_the_caller_to_catch(
        self, model: tuple[Model, str], chat: OpenAIChatModel
    ) -> None:
        model[0].content = json.dumps({"answer": "the cello"})
        with pytest.raises(ValueError, match="no list of queries"):
            rewrite_query(chat, QUESTION)


class TestTheRewriteRoute:
    def test_a_memory_worded_like_the_answer_is_found_by_the_rewrite_route(
        self, rewriting: Resources, model: tuple[Model, str]
    ) -> None:
        answer = fill(rewriting)
        model[0].queries = [REWRITE]
        assert "rewrite" in routes_of(rewriting, QUESTION, answer.id)

    def test_the_rewrite_lifts_the_answer_above_where_plain_search_put_it(
        self, rewriting: Resources, plain: Resources, model: tuple[Model, str]
    ) -> None:
        fill(rewriting)
        fill(plain)
        model[0].queries = [REWRITE]
        before = statements(plain, QUESTION)
        after = statements(rewriting, QUESTION)
        rank = {name: (got.index(ANSWER) if ANSWER in got else len(got))
                for name, got in (("before", before), ("after", after))}
        assert rank["after"] < rank["before"]

    def test_explain_with_the_query_lists_the_rewrites_and_the_rewrite_route(
        self, rewriting: Resources, model: tuple[Model, str]
    ) -> None:
        answer = fill(rewriting)
        model[0].queries = [REWRITE]
        why = explain_query(rewriting, memory_id=answer.id, query=QUESTION)
        assert why.rewrites == [REWRITE]
        assert "rewrite" in why.found_by
        assert any(r.route == "rewrite" and r.found and r.rank == 1 for r in why.routes)

    def test_one_question_in_one_scope_asks_the_model_once_while_cached(
        self, rewriting: Resources, model: tuple[Model, str]
    ) -> None:
        fill(rewriting)
        model[0].queries = [REWRITE]
        for _ in range(3):
            Reader(rewriting).search(build_request(QUESTION, scope=SCOPE))
        assert len(model[0].requests) == 1
        Reader(rewriting).search(build_request(QUESTION, scope=OTHER))
        Reader(rewriting).search(build_request("Where does Ann live?", scope=SCOPE))
        assert len(model[0].requests) == 3

    def test_a_cached_answer_expires_after_its_time(self, model: tuple[Model, str]) -> None:
        clock = [0.0]
        chat = OpenAIChatModel(base_url=model[1], model="scripted", api_key=SecretStr(""),
                               timeout_s=5.0, max_retries=0)
        rewriter = CachedRewriter(chat, ttl_s=60.0, clock=lambda: clock[0])
        model[0].queries = ["first answer"]
        assert rewriter(SCOPE.key, QUESTION) == ("first answer",)
        model[0].queries = ["second answer"]
        clock[0] = 59.0
        assert rewriter(SCOPE.key, QUESTION) == ("first answer",)
        clock[0] = 61.0
        assert rewriter(SCOPE.key, QUESTION) == ("second answer",)
        chat.close()


class TestFailuresNeverBreakSearch:
    def test_a_model_slower_than_the_timeout_leaves_the_plain_results(
        self, rewriting: Resources, plain: Resources, model: tuple[Model, str]
    ) -> None:
        fill(rewriting)
        fill(plain)
        model[0].queries, model[0].delay_s = [REWRITE], 3.0
        started = time.perf_counter()
        with structlog.testing.capture_logs() as logs:
            got = statements(rewriting)
        assert time.perf_counter() - started < 2.5  # the 1 s timeout, not the 3 s reply
        assert got == statements(plain)
        assert [e["event"] for e in logs].count("query_rewrite.failed") == 1

    def test_a_reply_that_is_not_json_leaves_the_plain_results_and_is_logged_once(
        self, rewriting: Resources, plain: Resources, model: tuple[Model, str]
    ) -> None:
        fill(rewriting)
        fill(plain)
        model[0].content = "I think the answer is the cello."
        with structlog.testing.capture_logs() as logs:
            got = statements(rewriting)
        assert got == statements(plain)
        failed = [e for e in logs if e["event"] == "query_rewrite.failed"]
        assert len(failed) == 1 and failed[0]["error"] == "ExtractionError"

    def test_after_a_failure_the_model_rests_instead_of_costing_every_search_a_timeout(
        self, rewriting: Resources, model: tuple[Model, str]
    ) -> None:
        fill(rewriting)
        model[0].delay_s = 3.0
        statements(rewriting)
        asked = len(model[0].requests)
        started = time.perf_counter()
        with structlog.testing.capture_logs() as logs:
            for _ in range(3):
                statements(rewriting)
        assert len(model[0].requests) == asked
        assert time.perf_counter() - started < 1.0
        assert not [e for e in logs if e["event"] == "query_rewrite.failed"]

    def test_an_unreachable_endpoint_leaves_the_plain_results(
        self, settings: Settings, plain: Resources, redis: Any
    ) -> None:
        dead = own(settings, "dead", query_rewrite="llm", llm_base_url="http://127.0.0.1:9/v1")
        try:
            fill(dead)
            fill(plain)
            assert statements(dead) == statements(plain)
        finally:
            dead.close()


LOCAL_URL = os.environ.get("SLEEPMEM_TEST_LLM_URL", "http://127.0.0.1:8091/v1")
LOCAL_MODEL = os.environ.get("SLEEPMEM_TEST_LLM_MODEL", "qwen2.5-coder-1.5b-instruct")


@pytest.mark.llm
class TestRealLocalModel:
    def test_a_two_part_question_becomes_one_to_three_short_queries(self) -> None:
        chat = OpenAIChatModel(base_url=LOCAL_URL, model=LOCAL_MODEL, api_key=SecretStr(""),
                               timeout_s=120.0, max_retries=0, max_tokens=200)
        question = "What does the friend who moved to Tokyo do for a living?"
        queries = rewrite_query(chat, question)
        chat.close()
        assert 1 <= len(queries) <= 3
        assert all(0 < len(q) <= 300 and q.casefold() != question.casefold() for q in queries)

    def test_search_with_the_real_models_queries_ranks_the_answer_no_lower(
        self, settings: Settings, plain: Resources, redis: Any
    ) -> None:
        res = own(settings, "local", query_rewrite="llm", llm_base_url=LOCAL_URL,
                  llm_model=LOCAL_MODEL, query_rewrite_timeout_s=120.0)
        try:
            answer = fill(res)
            fill(plain)
            why = explain_query(res, memory_id=answer.id, query=QUESTION)
            before, after = statements(plain), statements(res)
        finally:
            res.close()
        # The model was asked and answered: its queries took part in the search.
        assert why.rewrites
        assert ANSWER in after
        assert after.index(ANSWER) <= before.index(ANSWER)
