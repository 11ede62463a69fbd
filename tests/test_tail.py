"""Past the first half of the k entries a search asks for, the next memories come back one
line each, in one last card: a question whose answer is spread over many conversations
(which books, which cities) reads them all in the tokens a few passages would cost. The
line is the sentence sharing most words with the query, behind its speaker; the card
names every memory it reads and each line's own turn; the budget holds; a conflict is
never cut to a line; ``tail=False`` gives k whole cards as before (English and Chinese).

Memories come from the real path (emit → drain → consolidate with the rules extractor);
the index is the embedded engine, SQL is SQLite, Redis is the machine's.
"""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from fastapi.testclient import TestClient

from sleepmem.api.app import create_app
from sleepmem.evals.harness import ingest
from sleepmem.models import Memory, MemoryCard, Scope, SearchResult
from sleepmem.pipelines.memories import new_memory
from sleepmem.pipelines.retrieve import search
from sleepmem.pipelines.snippets import best_line, lead, query_terms, tail
from sleepmem.pipelines.types import Candidate
from sleepmem.reader import build_request, explain_query, rank_weights
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


def find(res: Resources, query: str, *, k: int, tail: bool = True,
         max_tokens: int | None = None, **weights: Any) -> SearchResult:
    request = build_request(query, scope=TIM, k=k, with_provenance=True, tail=tail,
                            max_tokens=max_tokens)
    return search(engine=res.engine, ports=res.ports(), request=request,
                  weights=replace(rank_weights(res), **weights))


def read_events(result: SearchResult) -> set[str]:
    return {e for c in result.flat() for e in (c.provenance or [])}


def last(result: SearchResult) -> MemoryCard:
    card = result.cards[-1]
    assert isinstance(card, MemoryCard)
    return card


@pytest.fixture(params=[EN, ZH, CITIES], ids=["en", "zh", "en-cities"])
def talk(request: pytest.FixtureRequest, resources: Resources) -> dict[str, Any]:
    ingest(resources, conversation(request.param))
    return dict(request.param)


class TestTheTailReadsTheNextMemoriesOneLineEach:
    def test_a_spread_out_answer_is_read_whole_in_a_few_entries(
        self, resources: Resources, talk: dict[str, Any]
    ) -> None:
        result = find(resources, talk["query"], k=4)
        wanted = {f"w{i}" for i in talk["about"]}
        assert wanted <= read_events(result)
        text = "\n".join(c.statement for c in result.flat())
        assert all(word in text for word in talk["words"])
        # Four whole cards of one turn each cannot hold five answers.
        whole = find(resources, talk["query"], k=4, tail=False)
        assert not wanted <= read_events(whole)

    def test_the_first_half_of_k_are_whole_cards_and_the_tail_is_the_last(
        self, resources: Resources, talk: dict[str, Any]
    ) -> None:
        for k in (2, 4, 5):
            result = find(resources, talk["query"], k=k)
            assert len(result.cards) == lead(k) + 1
            assert [c.tail for c in result.flat()] == [False] * lead(k) + [True]
        assert not any(c.tail for c in find(resources, talk["query"], k=1).flat())

    def test_each_line_is_one_memorys_sentence_behind_its_speaker(
        self, resources: Resources, talk: dict[str, Any]
    ) -> None:
        card = last(find(resources, talk["query"], k=4))
        lines = card.statement.split("\n")
        assert len(lines) == 1 + len(card.joined)
        assert all(line.startswith(talk["speaker"]) for line in lines)
        said = [line.split(":", 1)[-1].split("：", 1)[-1].strip() for line in lines]
        assert all(any(s in turn for turn in talk["turns"]) for s in said)
        # A sentence picked out of its turn, not the turn whole.
        assert any(s not in talk["turns"] for s in said)
        # Each line its own turn: the card's provenance holds one event per line here.
        assert len(card.provenance or []) == len(lines)

    def test_each_line_keeps_the_time_of_its_own_turn(
        self, resources: Resources, talk: dict[str, Any]
    ) -> None:
        card = last(find(resources, talk["query"], k=4))
        said = [T0 + timedelta(days=7 * int(e.removeprefix("w"))) for e in card.provenance or []]
        assert len(said) == 1 + len(card.joined) > 1
        assert card.times == said
        # The lines come from weeks apart: the card's one time cannot date them all.
        assert card.valid_from == min(said) and len(set(said)) == len(said)

    def test_no_line_repeats_a_turn_the_cards_above_read(
        self, resources: Resources, talk: dict[str, Any]
    ) -> None:
        result = find(resources, talk["query"], k=4)
        above = {e for c in result.flat()[:-1] for e in (c.provenance or [])}
        assert above.isdisjoint(last(result).provenance or [])
        ids = [i for c in result.flat() for i in (c.id, *c.joined)]
        assert len(ids) == len(set(ids))


    def test_equal_inputs_give_the_same_tail(
        self, resources: Resources, talk: dict[str, Any]
    ) -> None:
        first, again = (last(find(resources, talk["query"], k=6)) for _ in range(2))
        assert (first.statement, first.joined, first.provenance) == (
            again.statement, again.joined, again.provenance)


    def test_a_line_is_explained_as_returned_in_the_last_card(
        self, resources: Resources, talk: dict[str, Any]
    ) -> None:
        card = last(find(resources, talk["query"], k=5))
        for mid in (card.id, card.joined[-1]):
            why = explain_query(resources, memory_id=mid, query=talk["query"], k=5)
            assert why.line and why.returned and why.rank == lead(5) + 1
            assert "as one line of the last card" in why.note


def memory(statement: str, events: list[str], kind: str = "fact") -> Memory:
    cand = Candidate(type=kind, statement=statement, provenance=events, valid_from=T0,
                     scope=TIM)
    return new_memory(cand, scope_key=TIM.key, now=T0, ttl=None, extractor="test")


def lines_of(ranked: list[Memory], shown: list[str], query: str) -> list[str]:
    return tail(ranked, query=query, shown=shown, budget=1000, cost=len,
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


class TestTheTailOverHttp:
    def test_the_last_card_says_it_is_the_tail_and_tail_false_asks_for_whole_cards(
        self, resources: Resources, talk: dict[str, Any]
    ) -> None:
        body = {"query": talk["query"], "scope": TIM.model_dump(), "k": 4}
        with TestClient(create_app(resources=resources)) as http:
            lined = http.post("/v1/search", json=body).json()["cards"]
            whole = http.post("/v1/search", json={**body, "tail": False}).json()["cards"]
        assert [c.get("tail", False) for c in lined] == [False] * lead(4) + [True]
        assert len(whole) == 4 and not any("tail" in c for c in whole)
        assert len(lined[-1]["times"]) == 1 + len(lined[-1]["joined"])
        assert not any("times" in c for c in whole if not c.get("joined"))


class TestTheTailKeepsToItsBudget:
    def test_a_result_costs_at_most_its_slots(
        self, resources: Resources, talk: dict[str, Any]
    ) -> None:
        for k in (2, 4, 6):
            result = find(resources, talk["query"], k=k)
            assert result.tokens <= k * rank_weights(resources).slot_tokens
        assert find(resources, talk["query"], k=4, slot_tokens=60).tokens <= 4 * 60
        # A token less than the full tail took: it ends earlier, in the same order.
        large = find(resources, talk["query"], k=4)
        small = find(resources, talk["query"], k=4, max_tokens=large.tokens - 1)
        kept = last(small).joined
        assert small.tokens < large.tokens and len(kept) < len(last(large).joined)
        assert kept == last(large).joined[: len(kept)]

    def test_max_tokens_is_the_budget_when_the_request_names_one(
        self, resources: Resources, talk: dict[str, Any]
    ) -> None:
        for budget in (80, 160, 400):
            result = find(resources, talk["query"], k=6, max_tokens=budget)
            assert result.tokens <= budget

    def test_without_the_tail_a_result_is_k_whole_cards(
        self, resources: Resources, talk: dict[str, Any]
    ) -> None:
        result = find(resources, talk["query"], k=6, tail=False)
        assert len(result.cards) == 6
        assert not any(c.tail for c in result.flat())


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
