"""A search for k returns at most k memories, in the format the caller asks for:
``cards`` (each memory whole, the default), ``lines`` (each as its one sentence sharing
most words with the query, behind its speaker) or ``mixed`` (the first half of k whole,
the rest as lines). ``max_tokens`` bounds the result in cl100k tokens, and the result says
its format, the memories it reads, its tokens and the tokenizer that counted them
(English and Chinese).

Memories come from the real path (emit → drain → consolidate with the rules extractor);
the index is the embedded engine, SQL is SQLite, Redis is the machine's.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from fastapi.testclient import TestClient

from sleepmem.api.app import create_app
from sleepmem.context import ContextBuilder
from sleepmem.core.tokens import TOKENIZER, count_tokens
from sleepmem.evals.harness import ingest
from sleepmem.models import ConflictGroup, Memory, MemoryCard, Scope, SearchResult
from sleepmem.pipelines.memories import new_memory
from sleepmem.pipelines.read.cards import hit_ids
from sleepmem.pipelines.read.snippets import best_line, lead, pick_lines, query_terms
from sleepmem.pipelines.types import Candidate
from sleepmem.reader import Reader, build_request, explain_query
from sleepmem.resources import Resources

TIM = Scope(tenant="acme", agent="bot", user="tim")
T0 = datetime(2026, 1, 5, 18, tzinfo=UTC)

# One turn a week, most about something else; the books are named in five of them, each
# in a sentence of its own among others.
EN: dict[str, Any] = {
    "speaker": "Tim",
    "turns": [
        "Work was busy this week. I finally finished reading The Name of the Wind, what a book.",
        "We went hiking in the hills on Sunday and the weather held up nicely.",
        "My sister got a new puppy and it chews everything in sight.",
        "The basketball game went to overtime. I am halfway through reading The Hobbit again.",
        "I cooked a big pot of chili for the neighbours and they loved it.",
        "Our team shipped the new release on Friday after a long sprint.",
        "I started a course on pottery at the community centre downtown.",
        "Rainy weekend. I spent it reading A Dance with Dragons on the sofa.",
        "The car needed new tyres, which cost more than I expected.",
        "I visited my grandparents in the countryside and helped in their garden.",
        "The Alchemist is the book I keep reading when I need a lift.",
        "We tried the new ramen place near the station and it was excellent.",
        "I have been reading Dune in the evenings, slowly but surely.",
        "My phone screen cracked when I dropped it at the bus stop.",
    ],
    "about": [0, 3, 7, 10, 12],
    "query": "Which books has Tim been reading?",
    "words": ["Name of the Wind", "Hobbit", "Dance with Dragons", "Alchemist", "Dune"],
}
ZH: dict[str, Any] = {
    "speaker": "小田",
    "turns": [
        "这周工作很忙。我终于读完了《风之名》，真是一本好书。",
        "周日我们去山里徒步了，天气一直很好。",
        "我姐姐养了一只小狗，什么都咬。",
        "篮球赛打到了加时。我又在读《霍比特人》，读了一半。",
        "我给邻居们煮了一大锅辣椒炖肉，他们很喜欢。",
        "我们团队周五发布了新版本，冲刺了很久。",
        "我在市中心的社区中心报了一个陶艺课。",
        "下雨的周末。我在沙发上读《魔龙的狂舞》。",
        "车需要换新轮胎，比我想的贵。",
        "我去乡下看望了爷爷奶奶，帮他们打理菜园。",
        "每次需要打气的时候，我都会再读《牧羊少年奇幻之旅》这本书。",
        "我们去车站附近新开的拉面店，非常好吃。",
        "我最近晚上在读《沙丘》，读得很慢。",
        "我的手机在公交站掉了，屏幕摔裂了。",
    ],
    "about": [0, 3, 7, 10, 12],
    "query": "小田读过哪些书？",
    "words": ["风之名", "霍比特人", "魔龙的狂舞", "牧羊少年", "沙丘"],
}


# Another question of the same kind in other words: places, told in passing.
CITIES: dict[str, Any] = {
    "speaker": "Ann",
    "turns": [
        "Long week at the office. Last month I flew to Lisbon for a conference.",
        "My brother is learning to play the cello and practises every night.",
        "I repainted the kitchen a pale green over the weekend.",
        "We spent two rainy days in Edinburgh, walking up to the castle.",
        "The garden finally has tomatoes this year.",
        "I signed up for a beginners' running club on Tuesdays.",
        "Our train broke down outside Vienna, so we explored the old town instead.",
        "The dentist says I need a filling next month.",
        "I baked sourdough for the first time and it came out flat.",
        "Back from Kyoto! The temples there were beautiful in the autumn.",
        "My laptop battery barely lasts an hour now.",
        "We watched a documentary about octopuses last night.",
        "I loved visiting Montreal in the snow, even though it was freezing.",
        "The neighbours' cat keeps sleeping on our porch.",
    ],
    "about": [0, 3, 6, 9, 12],
    "query": "Which cities has Ann visited?",
    "words": ["Lisbon", "Edinburgh", "Vienna", "Kyoto", "Montreal"],
}

def conversation(talk: dict[str, Any]) -> list[dict[str, Any]]:
    return [
        {"event_id": f"w{i}", "tenant": TIM.tenant, "agent": TIM.agent, "user": TIM.user,
         "kind": "message", "role": "user", "content": text,
         "at": T0 + timedelta(days=7 * i), "meta": {"speaker": talk["speaker"]}}
        for i, text in enumerate(talk["turns"])
    ]


def find(res: Resources, query: str, *, k: int, format: str = "cards",
         max_tokens: int | None = None) -> SearchResult:
    """The search an agent runs (every route, the entity route included), with no hit
    recorded: what explain_query traces."""
    request = build_request(query, scope=TIM, k=k, with_provenance=True, format=format,
                            max_tokens=max_tokens)
    result, _trace, _now = Reader(res).trace(request)
    return result


def read_events(result: SearchResult) -> set[str]:
    return {e for c in result.flat() for e in (c.provenance or [])}


def lines(result: SearchResult) -> list[MemoryCard]:
    return [c for c in result.flat() if c.line]


def whole(result: SearchResult) -> list[MemoryCard | ConflictGroup]:
    return [c for c in result.cards if isinstance(c, ConflictGroup) or not c.line]


def counted(card: MemoryCard | ConflictGroup) -> int:
    return 1 if isinstance(card, ConflictGroup) else 1 + len(card.joined)


def cost(result: SearchResult) -> int:
    return sum(count_tokens(c.statement) for c in result.flat())


@pytest.fixture(params=[EN, ZH, CITIES], ids=["en", "zh", "en-cities"])
def talk(request: pytest.FixtureRequest, resources: Resources) -> dict[str, Any]:
    ingest(resources, conversation(request.param))
    return dict(request.param)


FORMATS = ("cards", "lines", "mixed")


class TestKIsTheNumberOfMemories:
    def test_a_search_for_k_returns_at_most_k_memories_in_every_format(
        self, resources: Resources, talk: dict[str, Any]
    ) -> None:
        for fmt in FORMATS:
            for k in (1, 2, 3, 5, 8):
                result = find(resources, talk["query"], k=k, format=fmt)
                assert 1 <= result.memories <= k
                assert result.memories == len(hit_ids(result)) == sum(
                    counted(c) for c in result.cards)

    def test_the_result_says_its_format_memories_tokens_and_tokenizer(
        self, resources: Resources, talk: dict[str, Any]
    ) -> None:
        for fmt in FORMATS:
            result = find(resources, talk["query"], k=6, format=fmt)
            assert result.format == fmt
            assert result.tokenizer == TOKENIZER == "cl100k_base"
            assert result.tokens == cost(result) > 0

    def test_cards_are_the_default_and_read_each_memory_whole(
        self, resources: Resources, talk: dict[str, Any]
    ) -> None:
        request = build_request(talk["query"], scope=TIM, k=5)
        assert request.format == "cards"
        result = find(resources, talk["query"], k=5)
        assert result.memories == 5 and not lines(result)
        said = [f"{talk['speaker']}: {turn}" for turn in talk["turns"]]
        episodes = [c for c in result.flat() if c.type == "event"]
        assert episodes and all(c.statement in said for c in episodes)

    def test_an_unknown_format_is_refused_by_name(self, resources: Resources) -> None:
        with TestClient(create_app(resources=resources)) as http:
            resp = http.post("/v1/search", json={"query": "books", "scope": TIM.model_dump(),
                                                 "format": "tail"})
        assert resp.status_code == 422
        assert resp.json()["error"]["field"] == "format"


class TestLinesReadManyMemoriesInFewTokens:
    def test_each_line_is_one_memorys_sentence_behind_its_speaker(
        self, resources: Resources, talk: dict[str, Any]
    ) -> None:
        result = find(resources, talk["query"], k=6, format="lines")
        read = lines(result)
        assert len(read) == len(result.cards) == result.memories
        events = [c for c in read if c.type == "event"]
        assert events and all(c.statement.startswith(talk["speaker"]) for c in events)
        said = [c.statement.split(":", 1)[-1].split("：", 1)[-1].strip() for c in events]
        assert all(any(s in turn for turn in talk["turns"]) for s in said)
        # A sentence picked out of its turn, not the turn whole.
        assert any(s not in talk["turns"] for s in said)

    def test_each_line_keeps_its_own_turn_and_time(
        self, resources: Resources, talk: dict[str, Any]
    ) -> None:
        for card in lines(find(resources, talk["query"], k=6, format="lines")):
            [event] = card.provenance or []
            assert card.valid_from == T0 + timedelta(days=7 * int(event.removeprefix("w")))

    def test_at_equal_tokens_a_line_costs_less_than_a_whole_card(
        self, resources: Resources, talk: dict[str, Any]
    ) -> None:
        wanted = {f"w{i}" for i in talk["about"]}
        budget = find(resources, talk["query"], k=5).tokens
        cards = find(resources, talk["query"], k=100, max_tokens=budget)
        for fmt in ("lines", "mixed"):
            shown = find(resources, talk["query"], k=100, format=fmt, max_tokens=budget)
            assert shown.tokens <= budget and shown.memories >= cards.memories
            per_memory = shown.tokens / shown.memories
            # A line is its turn's best sentence: never longer than the turn, shorter when
            # the turn says more than one thing.
            assert per_memory <= cards.tokens / cards.memories
            if fmt == "lines":
                assert per_memory < cards.tokens / cards.memories
            assert len(wanted & read_events(shown)) >= len(wanted & read_events(cards))

    def test_equal_inputs_give_the_same_lines(
        self, resources: Resources, talk: dict[str, Any]
    ) -> None:
        # Equal inputs include the moment: decay moves a score in its sixth decimal
        # between two reads a few milliseconds apart.
        moment = datetime.now(UTC)
        kept, resources.clock = resources.clock, lambda: moment
        try:
            first, again = (find(resources, talk["query"], k=6, format="mixed")
                            for _ in range(2))
        finally:
            resources.clock = kept
        assert first.model_dump() == again.model_dump()

    def test_a_line_is_explained_as_returned_as_its_one_line(
        self, resources: Resources, talk: dict[str, Any]
    ) -> None:
        result = find(resources, talk["query"], k=5, format="mixed")
        for rank, card in enumerate(result.flat(), start=1):
            if not card.line:
                continue
            why = explain_query(resources, memory_id=card.id, query=talk["query"], k=5,
                                format="mixed")
            assert why.line and why.returned and why.rank == rank
            assert "as its one line" in why.note


class TestMixedReadsTheBestWholeAndTheRestAsLines:
    def test_the_first_half_of_k_is_whole_and_the_rest_are_lines(
        self, resources: Resources, talk: dict[str, Any]
    ) -> None:
        for k in (2, 4, 5):
            result = find(resources, talk["query"], k=k, format="mixed")
            flags = [c.line for c in result.flat()]
            assert flags == sorted(flags)  # whole cards first, then lines
            assert sum(counted(c) for c in whole(result)) <= lead(k)
            assert result.memories == k and lines(result)
        assert not lines(find(resources, talk["query"], k=1, format="mixed"))

    def test_no_line_repeats_a_turn_the_cards_above_read_whole(
        self, resources: Resources, talk: dict[str, Any]
    ) -> None:
        result = find(resources, talk["query"], k=8, format="mixed")
        above = {e for c in result.flat() if not c.line and c.type == "event"
                 for e in (c.provenance or [])}
        below = {e for c in lines(result) if c.type == "event" for e in (c.provenance or [])}
        assert above and above.isdisjoint(below)
        ids = hit_ids(result)
        assert len(ids) == len(set(ids))

    def test_at_a_budget_whole_cards_take_at_most_half_of_it(
        self, resources: Resources, talk: dict[str, Any]
    ) -> None:
        for budget in (120, 240):
            result = find(resources, talk["query"], k=100, format="mixed", max_tokens=budget)
            cards = sum(count_tokens(c.statement) for c in result.flat() if not c.line)
            first = result.flat()[0]
            # The best card is read whole, even when it alone is over half the budget.
            assert cards <= budget // 2 or cards == count_tokens(first.statement)
            assert result.tokens <= budget and lines(result)


class TestMaxTokensIsCountedInCl100k:
    def test_every_format_keeps_to_the_budget(
        self, resources: Resources, talk: dict[str, Any]
    ) -> None:
        for fmt in FORMATS:
            for budget in (40, 80, 160, 400):
                result = find(resources, talk["query"], k=100, format=fmt, max_tokens=budget)
                assert result.tokens == cost(result) <= budget
                assert result.memories >= 1

    def test_a_larger_budget_reads_at_least_as_many_memories(
        self, resources: Resources, talk: dict[str, Any]
    ) -> None:
        for fmt in FORMATS:
            read = [find(resources, talk["query"], k=100, format=fmt, max_tokens=b).memories
                    for b in (60, 120, 240, 480)]
            assert read == sorted(read) and read[0] < read[-1]


class TestFormatsOverHttpAndInContext:
    def test_the_response_says_what_it_holds(
        self, resources: Resources, talk: dict[str, Any]
    ) -> None:
        body = {"query": talk["query"], "scope": TIM.model_dump(), "k": 4}
        with TestClient(create_app(resources=resources)) as http:
            got = {fmt: http.post("/v1/search", json={**body, "format": fmt}).json()
                   for fmt in FORMATS}
            budgeted = http.post("/v1/search", json={**body, "k": 100, "max_tokens": 100,
                                                     "format": "lines"}).json()
        for fmt, answer in got.items():
            assert (answer["format"], answer["memories"], answer["tokenizer"]) == (
                fmt, 4, "cl100k_base")
            assert answer["tokens"] == sum(count_tokens(c["statement"]) for c in answer["cards"])
        assert not any("line" in c for c in got["cards"]["cards"])
        assert all(c["line"] for c in got["lines"]["cards"])
        assert budgeted["tokens"] <= 100

    def test_context_reads_the_relevant_memories_in_the_format_asked(
        self, resources: Resources, talk: dict[str, Any]
    ) -> None:
        builder = ContextBuilder(resources)
        ask = {"scope": TIM, "query": talk["query"], "budget_tokens": 400, "k": 5}
        as_cards = builder.build(ask)
        as_lines = builder.build({**ask, "format": "lines"})
        assert (as_cards.format, as_lines.format) == ("cards", "lines")
        relevant = [i for i in as_lines.dynamic.items if i.section == "relevant"]
        assert 1 <= len(relevant) <= 5 and as_lines.tokens <= 400
        said = [f"{talk['speaker']}: {turn}" for turn in talk["turns"]]
        assert any(i.type == "event" and i.statement not in said for i in relevant)
        assert as_lines.dynamic.tokens < as_cards.dynamic.tokens


def memory(statement: str, events: list[str], kind: str = "fact") -> Memory:
    cand = Candidate(type=kind, statement=statement, provenance=events, valid_from=T0,
                     scope=TIM)
    return new_memory(cand, scope_key=TIM.key, now=T0, ttl=None, extractor="test")


def lines_of(ranked: list[Memory], shown: list[str], query: str) -> list[str]:
    return pick_lines(ranked, query=query, shown=shown, budget=1000, cost=len,
                      holds_turns=lambda m: m.type == "event").lines


class TestWhichMemoriesGetALine:
    """A fact card reads what was extracted from a turn, not the turn: facts of one
    message each get their line, while an episode's line stands for its turn (EN, ZH)."""

    @pytest.mark.parametrize(("facts", "query"), [
        (["Tech stack — backend: Flask.", "Tech stack — database: Postgres.",
          "Tech stack — cloud: Fly.io."], "What is the user's technology stack?"),
        (["用户的狗叫豆豆。", "用户住在成都。", "用户对花生过敏。"], "用户的情况？"),
    ], ids=["en", "zh"])
    def test_facts_of_one_message_each_get_a_line(
        self, facts: list[str], query: str
    ) -> None:
        ranked = [memory(f, ["w0"]) for f in facts]
        assert lines_of(ranked, [], query) == facts

    def test_a_turn_read_whole_above_gives_no_line(self) -> None:
        ranked = [memory("Tech stack — backend: Flask.", ["w0"]),
                  memory("Tech stack — cloud: Fly.io.", ["w1"])]
        assert lines_of(ranked, ["w0"], "stack") == ["Tech stack — cloud: Fly.io."]

    def test_an_episodes_line_stands_for_its_turn(self) -> None:
        ranked = [memory("Tim: We run Flask. It is deployed on Fly.io.", ["w0"], "event"),
                  memory("Tech stack — cloud: Fly.io.", ["w0"]),
                  memory("Tech stack — cache: Redis.", ["w1"])]
        assert lines_of(ranked, [], "Where is it deployed?") == [
            "Tim: It is deployed on Fly.io.", "Tech stack — cache: Redis."]


class TestTheLineItPicks:
    @pytest.mark.parametrize(("text", "query", "line"), [
        ("Tim: Work was busy. I finished reading Dune at last. It rained.",
         "What has Tim been reading?", "Tim: I finished reading Dune at last."),
        ("We drove to Oslo. The museum there was closed! Then we flew home.",
         "Which museum was closed?", "The museum there was closed!"),
        ("小美：这周很忙。我在读《沙丘》，很好看。周末下雨了。",
         "小美在读什么书？", "小美：我在读《沙丘》，很好看。"),
        # Nothing shared: the first sentence, which opens what was said.
        ("Ann: Lovely weather. The cat slept all day.", "What car does Ann drive?",
         "Ann: Lovely weather."),
        # A term counts at a word's start: "tim" is not in "overtime".
        ("Tim: The game went to overtime. I am reading The Hobbit.",
         "Which books has Tim been reading?", "Tim: I am reading The Hobbit."),
    ])
    def test_the_sentence_sharing_most_query_words(
        self, text: str, query: str, line: str
    ) -> None:
        assert best_line(text, query_terms(query)) == line
