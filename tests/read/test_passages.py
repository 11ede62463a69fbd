"""Episodes that share a turn come back as one passage: the conversation's words in the
order they were said, each turn once, in the best episode's slot, with every source event
in its provenance (English and Chinese); a passage never mixes sources or trust, never
takes in an extracted fact, stops at its span, and the memories read inside it count as
retrieved and are explained as such.

Memories come from the real path (emit → drain → consolidate with the rules extractor,
which pairs a reply with the turn it answers); the index is the embedded engine, SQL is
SQLite, Redis is the machine's.
"""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from sqlmodel import Session

from sleepmem.adapters.redis.hits import read_hits
from sleepmem.context import ContextBuilder
from sleepmem.core.tokens import count_tokens
from sleepmem.evals.harness import ingest
from sleepmem.models import Memory, MemoryCard, Scope
from sleepmem.pipelines.read.passages import passages
from sleepmem.pipelines.read.retrieve import search
from sleepmem.reader import Reader, build_request, explain_query, rank_weights
from sleepmem.resources import Resources

ANN = Scope(tenant="acme", agent="bot", user="ann")
T0 = datetime(2026, 5, 1, 18, tzinfo=UTC)

EN = {
    "turns": [
        ("Mel", "Did you go anywhere over the long weekend?"),
        ("Ann", "Yes, we drove up to the lake cabin for three quiet days."),
        ("Mel", "That sounds lovely. Did you two catch any fish at the cabin?"),
        ("Ann", "We caught two trout at the lake and grilled them by the water."),
    ],
    "query": "What fish did Ann catch at the lake cabin?",
    "elsewhere": ("Ann", "My dentist appointment moved to the ninth of June."),
}
ZH = {
    "turns": [
        ("小美", "你长周末去哪儿玩了？"),
        ("小安", "我和哥哥开车去了湖边的小木屋。"),
        ("小美", "听起来真不错。你们在湖边钓到鱼了吗？"),
        ("小安", "我们在湖边钓到了两条鳟鱼，还在水边烤了。"),
    ],
    "query": "小安在湖边钓到了什么鱼？",
    "elsewhere": ("小安", "我的牙医预约改到了六月九号。"),
}


def _words(text: str) -> list[str]:
    return text.replace("的", " ").replace(":", " ").split() + [text[i:i + 2]
                                                                  for i in range(len(text))]


def conversation(talk: dict[str, Any]) -> list[dict[str, Any]]:
    """The talk's turns a few seconds apart, and one unrelated turn a month later."""
    rows = [
        {"event_id": f"t{i}", "content": text, "at": T0 + timedelta(seconds=10 * i),
         "meta": {"speaker": who}}
        for i, (who, text) in enumerate(talk["turns"])
    ]
    who, text = talk["elsewhere"]
    rows.append({"event_id": "later", "content": text, "at": T0 + timedelta(days=30),
                 "meta": {"speaker": who}})
    return [{"tenant": ANN.tenant, "agent": ANN.agent, "user": ANN.user, "kind": "message",
             "role": "user", **row} for row in rows]


def members(res: Resources, ids: list[str]) -> list[Memory]:
    with Session(res.engine) as s:
        found = [s.get(Memory, i) for i in ids]
    assert all(m is not None for m in found), "every id a card names is a stored memory"
    return [m for m in found if m is not None]


def find(res: Resources, query: str, *, k: int = 5, **weights: Any) -> list[MemoryCard]:
    request = build_request(query, scope=ANN, k=k, with_provenance=True)
    return search(engine=res.engine, ports=res.ports(), request=request,
                  weights=replace(rank_weights(res), **weights)).flat()


def events(card: MemoryCard) -> list[str]:
    return list(card.provenance or [])


@pytest.fixture(params=[EN, ZH], ids=["en", "zh"])
def talk(request: pytest.FixtureRequest, resources: Resources) -> dict[str, Any]:
    ingest(resources, conversation(request.param))
    return dict(request.param)


SOURCES = {"ab": ["a", "b"], "bc": ["b", "c"], "cd": ["c", "d"], "de": ["d", "e"],
           "xy": ["x", "y"], "fact-b": ["b"]}


class TestGrouping:
    def group(self, order: list[str], most: int = 6,
              facts: frozenset[str] = frozenset({"fact-b"}),
              keys: dict[str, str] | None = None) -> list[list[str]]:
        return passages(order, sources=lambda e: SOURCES[e], most=most,
                        joins=lambda e: None if e in facts else (keys or {}).get(e, "user"))

    def test_entries_sharing_a_source_event_join_the_better_one(self) -> None:
        assert self.group(["ab", "xy", "bc"]) == [["ab", "bc"], ["xy"]]

    def test_a_chain_of_overlaps_joins_into_one_passage(self) -> None:
        assert self.group(["cd", "ab", "bc", "de"]) == [["cd", "bc", "de"], ["ab"]]

    def test_a_passage_stops_at_its_span(self) -> None:
        assert self.group(["ab", "bc", "cd"], most=3) == [["ab", "bc"], ["cd"]]
        assert self.group(["ab", "bc"], most=2) == [["ab"], ["bc"]]
        assert self.group(["ab", "bc"], most=1) == [["ab"], ["bc"]]

    def test_an_entry_that_may_not_join_stays_its_own_and_joins_nothing(self) -> None:
        assert self.group(["ab", "fact-b", "bc"]) == [["ab", "bc"], ["fact-b"]]
        assert self.group(["fact-b", "ab"]) == [["fact-b"], ["ab"]]

    def test_only_entries_of_the_same_key_join(self) -> None:
        keys = {"ab": "user", "bc": "assistant", "cd": "assistant"}
        assert self.group(["ab", "bc", "cd"], keys=keys) == [["ab"], ["bc", "cd"]]

    def test_order_and_entries_are_kept_when_nothing_overlaps(self) -> None:
        assert self.group(["xy", "ab", "cd"]) == [["xy"], ["ab"], ["cd"]]


class TestOverlappingEpisodesComeBackAsOnePassage:
    def test_the_passage_reads_each_turn_once_in_the_order_said(
        self, resources: Resources, talk: dict[str, Any]
    ) -> None:
        first = find(resources, talk["query"])[0]
        lines = first.statement.split("\n")
        said = [text for _who, text in talk["turns"]]
        assert len(lines) == len(said)
        for line, text in zip(lines, said, strict=True):
            assert line.endswith(text)
            assert first.statement.count(text) == 1
        assert events(first) == ["t0", "t1", "t2", "t3"]
        read = members(resources, [first.id, *first.joined])
        assert first.valid_from == min(m.valid_from for m in read).replace(tzinfo=UTC)
        assert first.times == [m.valid_from.replace(tzinfo=UTC) for m in read]

    def test_it_takes_one_slot_and_fewer_tokens_than_its_episodes_apart(
        self, resources: Resources, talk: dict[str, Any]
    ) -> None:
        request = build_request(talk["query"], scope=ANN, k=5)
        joined = search(engine=resources.engine, ports=resources.ports(), request=request,
                        weights=rank_weights(resources))
        apart = search(engine=resources.engine, ports=resources.ports(), request=request,
                       weights=replace(rank_weights(resources), passage_events=1))
        passage = joined.flat()[0]
        assert len(passage.joined) == 2  # the three pairs of the talk
        # Each memory read inside the passage gave back its slot, and its repeated turn.
        assert len(apart.cards) == len(joined.cards) + len(passage.joined)
        assert joined.tokens < apart.tokens
        read = [c for c in apart.flat() if c.id in {passage.id, *passage.joined}]
        assert len(read) == 3
        assert all(line in passage.statement for c in read for line in c.statement.split("\n"))
        # The unrelated turn of a month later is still its own card.
        # (Read as a fact of the speaker's now, its words are in the third person.)
        assert next(c for c in joined.flat()
                    if {"dentist", "牙医"} & set(_words(c.statement))).joined == []

    def test_a_passage_over_the_token_budget_leaves_its_best_episode_alone(
        self, resources: Resources, talk: dict[str, Any]
    ) -> None:
        passage = find(resources, talk["query"])[0]
        alone = next(c for c in find(resources, talk["query"], passage_events=1)
                     if c.id == passage.id)
        budget = count_tokens(alone.statement)
        assert count_tokens(passage.statement) > budget
        request = build_request(talk["query"], scope=ANN, k=5, max_tokens=budget)
        result = search(engine=resources.engine, ports=resources.ports(), request=request,
                        weights=rank_weights(resources))
        assert [(c.id, c.statement, c.joined) for c in result.flat()] == [
            (alone.id, alone.statement, [])]
        assert result.tokens == budget

    def test_a_span_of_one_or_two_events_keeps_the_episodes_apart(
        self, resources: Resources, talk: dict[str, Any]
    ) -> None:
        for most in (1, 2):
            cards = find(resources, talk["query"], passage_events=most)
            assert all(c.joined == [] for c in cards)
            assert all(len(c.provenance or []) <= 2 for c in cards)

    def test_a_passage_spans_at_most_its_number_of_events(
        self, resources: Resources, talk: dict[str, Any]
    ) -> None:
        cards = find(resources, talk["query"], passage_events=3)
        assert max(len(c.provenance or []) for c in cards) == 3
        seen = [e for c in cards for e in events(c) if e.startswith("t")]
        assert sorted(set(seen)) == ["t0", "t1", "t2", "t3"]


class TestWhatAPassageNeverJoins:
    def test_a_users_words_and_an_assistants_stay_apart(self, resources: Resources) -> None:
        lines = [
            ("user", "Can you recommend a trail near the lake cabin for Saturday?"),
            ("assistant", "The ridge loop above the lake cabin is a good eight-mile trail "
                          "with views of the water."),
            ("user", "Great, I will hike the ridge loop near the lake cabin with Tom."),
        ]
        ingest(resources, [
            {"tenant": ANN.tenant, "agent": ANN.agent, "user": ANN.user, "kind": "message",
             "role": role, "content": text, "event_id": f"r{i}",
             "at": T0 + timedelta(seconds=10 * i)}
            for i, (role, text) in enumerate(lines)
        ])
        # Repeats kept: the assistant's pair carries no event the two user cards lack, so it
        # would be left out, and then there would be nothing of another source to join.
        cards = find(resources, "Which trail near the lake cabin will I hike?",
                     drop_repeats=False)
        sources = {c.source for c in cards}
        assert {"user", "assistant"} <= sources
        for card in cards:
            read = members(resources, [card.id, *card.joined])
            assert {m.source for m in read} == {card.source}
            assert {m.trust for m in read} == {card.trust}

    @pytest.mark.parametrize("said", [
        ("I'm allergic to peanuts, so no satay for me please.",
         "We are going out for Thai food with friends on Friday.", "Am I allergic to peanuts?"),
        ("我对花生过敏，所以别给我点沙爹。", "我们周五和朋友去吃泰国菜。", "我对花生过敏吗？"),
    ], ids=["en", "zh"])
    def test_a_fact_drawn_from_a_turn_stays_its_own_card(
        self, resources: Resources, said: tuple[str, str, str]
    ) -> None:
        first, second, query = said
        ingest(resources, [
            {"tenant": ANN.tenant, "agent": ANN.agent, "user": ANN.user, "kind": "message",
             "role": "user", "content": text, "event_id": f"u{i}",
             "at": T0 + timedelta(seconds=10 * i)}
            for i, text in enumerate([first, second])
        ])
        cards = find(resources, query, k=10)
        facts = [c for c in cards if c.type != "event"]
        assert facts, "the rules extractor keeps the allergy as a fact of its own"
        assert all(c.joined == [] for c in facts)
        for card in cards:
            assert all(m.type == "event" for m in members(resources, card.joined))


class TestMemoriesReadInsideAPassage:
    def test_count_as_retrieved(self, resources: Resources, talk: dict[str, Any]) -> None:
        request = build_request(talk["query"], scope=ANN, k=5)
        before = {i for _e, ids, _at in read_hits(resources.redis, resources.keys) for i in ids}
        result = Reader(resources).search(request)
        passage = result.flat()[0]
        assert passage.joined
        assert resources.hits.flush()
        hit = {i for _e, ids, _at in read_hits(resources.redis, resources.keys)
               for i in ids} - before
        assert {passage.id, *passage.joined} <= hit

    def test_are_explained_as_returned_inside_the_best_ones_card(
        self, resources: Resources, talk: dict[str, Any]
    ) -> None:
        request = build_request(talk["query"], scope=ANN, k=5)
        passage = Reader(resources).trace(request)[0].flat()[0]
        inner = explain_query(resources, memory_id=passage.joined[0], query=talk["query"])
        assert inner.joined_into == passage.id
        assert inner.returned and inner.rank == 1
        assert f"inside the passage of memory {passage.id}" in inner.note
        outer = explain_query(resources, memory_id=passage.id, query=talk["query"])
        assert outer.joined_into is None and outer.rank == 1

    def test_count_as_retrieved_when_a_turns_context_shows_the_passage(
        self, resources: Resources, talk: dict[str, Any]
    ) -> None:
        before = {i for _e, ids, _at in read_hits(resources.redis, resources.keys) for i in ids}
        ctx = ContextBuilder(resources).build(
            {"scope": ANN.model_dump(), "query": talk["query"], "budget_tokens": 2000})
        passage = find(resources, talk["query"])[0]
        assert passage.joined and passage.id in {i.id for i in ctx.dynamic.items}
        assert resources.hits.flush()
        hit = {i for _e, ids, _at in read_hits(resources.redis, resources.keys)
               for i in ids} - before
        assert {passage.id, *passage.joined} <= hit
