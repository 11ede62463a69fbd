"""Cards that only repeat what better cards carry are left out: a memory whose every
source event a higher card already came from does not spend a slot of the top k, so the
next distinct memory gets it (English and Chinese); a memory with one new source, a
memory without provenance and a conflict set always stay.

Memories are written as rows and index points the way persist + index write them; the
index is the in-memory one (the ``index`` fixture; it passes the engines' contract
suite), SQL is SQLite and PostgreSQL (as in test_routes).
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from sqlalchemy.engine import Engine
from support import store_memory

from sleepmem.adapters.embedders import HashingEmbedder
from sleepmem.models import Memory, MemoryCard, Scope
from sleepmem.pipelines.ports import Ports, VectorIndex
from sleepmem.pipelines.read.rank import RankWeights
from sleepmem.pipelines.read.repeats import without_repeats
from sleepmem.pipelines.read.retrieve import search
from sleepmem.reader import build_request

NOW = datetime(2024, 3, 15, 10, tzinfo=UTC)
EMBEDDER = HashingEmbedder()
CAL = Scope(tenant="acme", agent="bot", user="cal")


def remember(engine: Engine, index: VectorIndex, statement: str, *, events: list[str],
             days_ago: int, type: str = "event") -> Memory:
    return store_memory(engine, index, CAL, statement, at=NOW - timedelta(days=days_ago),
                        provenance=events, type=type)


def find(engine: Engine, index: VectorIndex, query: str, *, drop: bool,
         k: int = 2) -> list[MemoryCard]:
    ports = Ports(embedder=EMBEDDER, index=index, clock=lambda: NOW)
    # Passages apart and k whole cards: joining overlapping episodes, or reading the next
    # memories as lines, would also free the slot, and these tests pin down what leaving
    # out repeats does on its own (test_passages: joining; test_formats: the lines).
    weights = RankWeights(drop_repeats=drop, speaker=0.0, context=0.0, passage_events=1)
    request = build_request(query, scope=CAL, k=k)
    return search(engine=engine, ports=ports, request=request, weights=weights).flat()


SOURCES = {"a": ["e1"], "ab": ["e1", "e2"], "b": ["e2"], "c": ["e3"], "none": []}


def kept(order: list[str], droppable: set[str] | None = None,
         extracted: frozenset[str] = frozenset()) -> list[str]:
    """``extracted``: entries that hold what was drawn from their events, not the words."""
    return without_repeats(order, sources=lambda m: SOURCES[m],
                           droppable=lambda m: droppable is None or m in droppable,
                           covers=lambda m: m not in extracted)


class TestWithoutRepeats:
    def test_drops_an_entry_whose_sources_the_entries_above_cover(self) -> None:
        assert kept(["ab", "a", "c", "b"]) == ["ab", "c"]

    def test_keeps_an_entry_that_brings_one_new_source(self) -> None:
        assert kept(["a", "ab", "b"]) == ["a", "ab"]

    def test_covers_across_several_entries_above(self) -> None:
        assert kept(["a", "b", "ab"]) == ["a", "b"]

    def test_an_entry_drawn_from_its_events_covers_nothing_below_it(self) -> None:
        # Facts one message was split into share its one event, yet each says something new.
        assert kept(["a", "a", "ab"], extracted=frozenset({"a"})) == ["a", "a", "ab"]
        assert kept(["ab", "a"], extracted=frozenset({"a"})) == ["ab"]

    def test_keeps_entries_without_sources_and_entries_it_may_not_drop(self) -> None:
        assert kept(["a", "none", "none"]) == ["a", "none", "none"]
        assert kept(["ab", "a"], droppable={"ab"}) == ["ab", "a"]


EN = ("What did Cal bake for the party?",
      "Cal baked a lemon cake for the party.",
      "Cal said the cake baked for the party was lemon.",
      "Cal went swimming yesterday.")
ZH = ("小卡为聚会烤了什么？",
      "小卡为聚会烤了柠檬蛋糕。",
      "小卡说聚会烤的蛋糕是柠檬味的。",
      "小卡昨天去游泳了。")


class TestSearchLeavesOutRepeats:
    @pytest.mark.parametrize("talk", [EN, ZH], ids=["en", "zh"])
    def test_a_card_carrying_only_turns_above_it_gives_its_slot_to_the_next_memory(
        self, engine: Engine, index: VectorIndex, talk: tuple[str, str, str, str]
    ) -> None:
        # The turn's episode and a statement extracted from the same turn.
        query, turn, restated, other = talk
        remember(engine, index, turn, events=["e1"], days_ago=5)
        remember(engine, index, restated, events=["e1"], days_ago=5)
        distinct = remember(engine, index, other, events=["e3"], days_ago=6)
        on = find(engine, index, query, drop=True)
        off = find(engine, index, query, drop=False)
        assert distinct.id not in [c.id for c in off]
        assert [c.id for c in on][-1] == distinct.id
        assert len(on) == 2

    def test_memories_from_different_turns_are_all_kept(
        self, engine: Engine, index: VectorIndex
    ) -> None:
        for i, text in enumerate(EN[1:]):
            remember(engine, index, text, events=[f"e{i}"], days_ago=5 + i)
        on = find(engine, index, EN[0], drop=True, k=3)
        off = find(engine, index, EN[0], drop=False, k=3)
        assert [c.id for c in on] == [c.id for c in off]

    @pytest.mark.parametrize("facts", [
        ("Cal's team builds the backend with Django.", "Cal's team stores data in MySQL.",
         "Cal's team queues jobs with Celery."),
        ("小卡团队的后端用Django。", "小卡团队的数据库用MySQL。", "小卡团队的任务队列用Celery。"),
    ], ids=["en", "zh"])
    def test_the_facts_one_message_was_split_into_are_all_kept(
        self, engine: Engine, index: VectorIndex, facts: tuple[str, str, str]
    ) -> None:
        for text in facts:
            remember(engine, index, text, events=["e1"], days_ago=5, type="fact")
        on = find(engine, index, "What does Cal's team build with?", drop=True, k=3)
        assert sorted(c.statement for c in on) == sorted(facts)
