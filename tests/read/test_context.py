"""Context for a turn: a byte-stable prefix, a dynamic part, one budget, real tokens.

Memories come from the real path (emit → drain → consolidate with the rules extractor);
the index is the embedded engine, SQL is SQLite, Redis is the machine's.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
import redis as redis_lib
from fastapi.testclient import TestClient
from sqlmodel import Session, col, select

from sleepmem.adapters.redis.hits import read_hits
from sleepmem.api.app import create_app
from sleepmem.context import ContextBuilder
from sleepmem.core.errors import ValidationError
from sleepmem.core.keys import Keys
from sleepmem.core.tokens import count_tokens
from sleepmem.evals.harness import ingest
from sleepmem.models import Memory
from sleepmem.models.working import ContextResult
from sleepmem.pipelines.context import ref
from sleepmem.resources import Resources
from sleepmem.services import create_erase_job, run_erasure
from sleepmem.working import WorkingMemory

ANN = {"tenant": "acme", "agent": "bot", "user": "ann"}
TURN = {**ANN, "session": "s1"}
FACTS = [
    "My name is Ann.",
    "I'm allergic to peanuts.",
    "I prefer short answers without emojis.",
    "I love hiking in the Alps.",
    "I live in Berlin.",
    "My sister's birthday is on May 3.",
    "我的猫叫小白。",
]


def say(res: Resources, *lines: str, who: dict[str, str] = ANN) -> None:
    ingest(res, [{**who, "content": line} for line in lines])


@pytest.fixture
def res(resources: Resources) -> Resources:
    say(resources, *FACTS)
    return resources


@pytest.fixture
def builder(res: Resources) -> ContextBuilder:
    return ContextBuilder(res)


def turn(builder: ContextBuilder, query: str, budget: int = 400, **kw: Any) -> ContextResult:
    return builder.build({"scope": TURN, "query": query, "budget_tokens": budget, **kw})


class TestStablePrefix:
    def test_the_prefix_holds_identity_preferences_and_procedures_in_a_fixed_order(
        self, builder: ContextBuilder
    ) -> None:
        ctx = turn(builder, "Where do I live?")
        text = ctx.prefix.text
        assert text.index("## About the user") < text.index("## Standing preferences")
        assert "allergic to peanuts" in text and "short answers" in text
        assert "lives in Berlin" not in text  # a fact is not standing context
        assert {i.section for i in ctx.prefix.items} == {"identity", "preference"}
        for item in ctx.prefix.items:
            assert ref(item.id) in text and item.id.startswith(ref(item.id)[2:-1])

    def test_the_prefix_is_byte_identical_across_turns_while_its_memories_stay(
        self, res: Resources, builder: ContextBuilder
    ) -> None:
        wm = WorkingMemory(res)
        first = turn(builder, "Where do I live?")
        v = 0
        for query in ("When is my sister's birthday?", "我的猫叫什么？", "What should I cook?"):
            v = wm.put(TURN, {"goal": "plan dinner", "current_step": query}, base_version=v).version
            again = turn(builder, query)
            assert again.prefix.text == first.prefix.text
            assert again.prefix_digest == first.prefix_digest
            assert again.dynamic.text != first.dynamic.text
        # Retrieval hits and a fact learned in between do not move it either.
        say(res, "I work as a nurse at Umbrella Health.")
        assert turn(builder, "What is my job?").prefix.text == first.prefix.text

    def test_the_prefix_changes_when_a_standing_memory_is_added_or_erased(
        self, res: Resources, builder: ContextBuilder
    ) -> None:
        before = turn(builder, "hello")
        say(res, "I prefer metric units.")
        added = turn(builder, "hello")
        assert added.prefix_digest != before.prefix_digest
        assert "metric units" in added.prefix.text
        with Session(res.engine) as s:
            allergy = s.exec(select(Memory).where(
                col(Memory.statement).contains("peanuts"))).one()
        job = create_erase_job(res, tenant="acme", memory_id=allergy.id)
        run_erasure(res, job.id)
        erased = turn(builder, "hello")
        assert "peanuts" not in erased.prefix.text
        assert erased.prefix_digest not in (before.prefix_digest, added.prefix_digest)

    def test_a_just_this_time_instruction_stays_out_of_the_prefix(
        self, res: Resources, builder: ContextBuilder
    ) -> None:
        before = turn(builder, "hello")
        say(res, "Just this time, answer in French.", who=TURN)
        with Session(res.engine) as s:
            scoped = s.exec(select(Memory).where(col(Memory.session) == "s1")).all()
        assert scoped, "the extractor kept the instruction at session scope"
        after = turn(builder, "How should you answer?")
        assert after.prefix.text == before.prefix.text
        assert any("French" in i.statement for i in after.dynamic.items)

    def test_another_users_standing_memories_never_appear(
        self, res: Resources, builder: ContextBuilder
    ) -> None:
        say(res, "I prefer long detailed answers.", who={**ANN, "user": "bob"})
        ctx = turn(builder, "How should you answer me?")
        assert "long detailed" not in ctx.prefix.text + ctx.dynamic.text


class TestDynamicPart:
    def test_relevant_memories_follow_the_query_each_with_its_id(
        self, res: Resources, builder: ContextBuilder
    ) -> None:
        ctx = turn(builder, "Where does Ann live?")
        relevant = [i for i in ctx.dynamic.items if i.section == "relevant"]
        assert relevant and "Berlin" in relevant[0].statement
        with Session(res.engine) as s:
            ids = set(s.exec(select(Memory.id)).all())
        assert all(i.id in ids for i in relevant)
        assert not {i.id for i in relevant} & {i.id for i in ctx.prefix.items}

    def test_the_session_checkpoint_comes_first_with_the_steps_not_to_repeat(
        self, res: Resources, builder: ContextBuilder
    ) -> None:
        WorkingMemory(res).put(TURN, {
            "goal": "Book a table for two", "current_step": "confirm by email",
            "completed": [{"key": "reserve:luigi:fri-19h", "step": "reserved at Luigi's"}],
        }, base_version=0)
        ctx = turn(builder, "Is the table booked?")
        lines = ctx.dynamic.text.splitlines()
        assert lines[0] == "## Session checkpoint (version 1)"
        assert "reserve:luigi:fri-19h" in ctx.dynamic.text
        assert ctx.checkpoint_version == 1

    def test_an_open_conflict_is_shown_with_both_sides(
        self, res: Resources, builder: ContextBuilder
    ) -> None:
        # A fact said again with another value and no word of a change asks which holds (a
        # preference would be the person's later word, replacing the first).
        say(res, "I work at Acme Robotics.")
        say(res, "I work at Initech.")
        with Session(res.engine) as s:
            pending = s.exec(select(Memory).where(
                col(Memory.status) == "pending_confirmation")).all()
        assert len(pending) == 2
        ctx = turn(builder, "hello")
        assert ctx.conflicts and len(ctx.conflicts[0].sides) == 2
        assert "## Unresolved" in ctx.dynamic.text
        assert "Acme" in ctx.dynamic.text and "Initech" in ctx.dynamic.text

    def test_every_returned_memory_is_recorded_as_a_retrieval_hit(
        self, res: Resources, builder: ContextBuilder, redis: redis_lib.Redis, keys: Keys
    ) -> None:
        ctx = turn(builder, "Where do I live?")
        assert res.hits.flush()
        recorded = {i for _e, ids, _at in read_hits(redis, keys) for i in ids}
        shown = {i.id for i in (*ctx.prefix.items, *ctx.dynamic.items) if i.id}
        assert shown and shown <= recorded


class TestBudget:
    @pytest.mark.parametrize("budget", [16, 40, 90, 200, 2000])
    def test_both_parts_together_stay_within_the_budget_in_real_tokens(
        self, res: Resources, builder: ContextBuilder, budget: int
    ) -> None:
        WorkingMemory(res).put(TURN, {
            "goal": "Summarise the quarterly report " * 20,
            "variables": {f"v{i}": "x" * 50 for i in range(20)},
        }, base_version=0)
        ctx = turn(builder, "What do you know about me?", budget=budget)
        real = count_tokens(ctx.prefix.text) + count_tokens(ctx.dynamic.text)
        assert ctx.tokens == real <= budget
        if budget >= 2000:
            assert ctx.dropped == 0
        if budget <= 40:
            assert ctx.dropped > 0

    def test_a_budget_below_sixteen_tokens_is_refused(self, builder: ContextBuilder) -> None:
        with pytest.raises(ValidationError) as bad:
            turn(builder, "hi", budget=5)
        assert bad.value.field == "budget_tokens"


class TestHttp:
    @pytest.fixture
    def http(self, res: Resources) -> Iterator[TestClient]:
        with TestClient(create_app(resources=res)) as client:
            yield client

    def test_post_context_answers_both_parts(self, http: TestClient) -> None:
        resp = http.post("/v1/context", json={"scope": TURN, "query": "Where do I live?",
                                              "budget_tokens": 300})
        assert resp.status_code == 200, resp.text
        body = resp.json()
        assert body["tokens"] <= 300 and body["tokenizer"] == "cl100k_base"
        assert "peanuts" in body["prefix"]["text"]
        assert any("Berlin" in i["statement"] for i in body["dynamic"]["items"])

    def test_a_missing_query_answers_422_naming_it(self, http: TestClient) -> None:
        resp = http.post("/v1/context", json={"scope": TURN, "budget_tokens": 300})
        assert resp.status_code == 422
        assert resp.json()["error"]["field"] == "query"


class TestProcedures:
    def test_a_procedure_seen_too_few_times_stays_out_and_a_proven_one_is_in(
        self, res: Resources, builder: ContextBuilder
    ) -> None:
        outcome = "deploying the api: run the migrations first -> success"
        ingest(res, [{**ANN, "kind": "outcome", "content": outcome}])
        assert "migrations" not in turn(builder, "hello").prefix.text  # 1 of 3 samples
        ingest(res, [{**ANN, "kind": "outcome", "content": outcome} for _ in range(2)])
        ctx = turn(builder, "hello")
        assert "## Procedures to follow" in ctx.prefix.text and "migrations" in ctx.prefix.text


def test_the_prefix_query_filters_hidden_procedures_on_postgresql(pg_database: str) -> None:
    from datetime import UTC, datetime

    from sleepmem.adapters.sql import make_engine
    from sleepmem.models import Scope
    from sleepmem.pipelines.context import prefix_memories
    from sleepmem.pipelines.memories import new_memory
    from sleepmem.pipelines.types import Candidate

    engine = make_engine(pg_database)
    owner = Scope(tenant="pgctx", agent="bot", user="ann")
    now = datetime.now(UTC)
    rows = []
    for i, hidden in enumerate((True, False, None)):
        details = {} if hidden is None else {"hidden": hidden}
        rows.append(new_memory(Candidate(
            type="procedure", statement=f"rule {i}", provenance=[f"pg-{i}"], valid_from=now,
            scope=owner, attribute=f"r{i}", details=details,
        ), scope_key=owner.key, now=now, ttl=None, extractor="test"))
    try:
        with Session(engine) as s:
            s.add_all(rows)
            s.commit()
        shown = {line.statement for line in
                 prefix_memories(engine=engine, scope=owner, now=now, limit=10)}
        assert shown == {"rule 1", "rule 2"}
    finally:
        with Session(engine) as s:
            for m in s.exec(select(Memory).where(col(Memory.tenant) == "pgctx")):
                s.delete(m)
            s.commit()
        engine.dispose()
