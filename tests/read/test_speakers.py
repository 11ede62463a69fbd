"""The speaker route: where several people talk in one scope, a question that names one
of them favours what that person said over the others' replies that merely name them,
in English and in Chinese; a question naming nobody, or everybody, changes nothing.

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
from sleepmem.pipelines.read.retrieve import search
from sleepmem.pipelines.speakers import names_in, speaker_hits, speaker_of, speakers
from sleepmem.reader import build_request

NOW = datetime(2024, 3, 15, 10, tzinfo=UTC)
EMBEDDER = HashingEmbedder()
CHAT = Scope(tenant="acme", agent="bot", user="chat")


def remember(engine: Engine, index: VectorIndex, statement: str, *, days_ago: int) -> Memory:
    return store_memory(engine, index, CHAT, statement, at=NOW - timedelta(days=days_ago))


def find(engine: Engine, index: VectorIndex, query: str, *, speaker: float,
         k: int = 3) -> list[MemoryCard]:
    ports = Ports(embedder=EMBEDDER, index=index, clock=lambda: NOW)
    weights = RankWeights(speaker=speaker, context=0.0)
    return search(engine=engine, ports=ports, request=build_request(query, scope=CHAT, k=k),
                  weights=weights).flat()


class TestReadingSpeakers:
    def test_a_statement_opening_with_a_name_and_a_colon_has_that_speaker(self) -> None:
        assert speakers("Caroline: I'm keen on counselling.") == {"caroline"}
        assert speakers("Mary Ann: we went hiking.") == {"mary ann"}
        assert speakers("小美：我下周去杭州。") == {"小美"}

    def test_the_speaker_a_statement_opens_with_is_read_as_written(self) -> None:
        assert speaker_of("Caroline: I'm keen on counselling.") == "Caroline"
        assert speaker_of("小美：我上周末去露营了。") == "小美"
        assert speaker_of("小美: 我上周末去露营了。") == "小美"
        assert speaker_of("I went camping: it rained.") == ""
        assert speaker_of("She said: no.") == ""

    def test_a_card_joining_turns_has_every_speaker_of_its_lines(self) -> None:
        assert speakers("Jon: Bye!\nGina: See you, Jon.") == {"jon", "gina"}

    def test_a_statement_without_a_prefix_has_no_speaker(self) -> None:
        assert speakers("The user lives in Oslo.") == frozenset()
        assert speakers("用户住在杭州。") == frozenset()

    def test_names_match_whole_words_in_english_and_substrings_in_chinese(self) -> None:
        names = frozenset({"jon", "jo", "小美"})
        assert names_in("What did Jon's team win?", names) == {"jon"}
        assert names_in("小美下周去哪里？", names) == {"小美"}


STATEMENTS = {"a": "Ann: I adopted a cat.", "b": "Mel: Wow, Ann, a cat!",
              "c": "The user likes tea."}
RELEVANCE = {"a": 0.4, "b": 0.6, "c": 0.1}


class TestSpeakerHits:

    def test_only_the_named_speakers_memories_are_proposed_with_their_relevance(
        self,
    ) -> None:
        hits = speaker_hits("What pet did Ann adopt?", STATEMENTS, RELEVANCE)
        assert [(h.id, h.score) for h in hits] == [("a", 0.4)]

    def test_a_question_naming_nobody_or_everybody_proposes_nothing(self) -> None:
        assert speaker_hits("What pet was adopted?", STATEMENTS, RELEVANCE) == []
        assert speaker_hits("Did Ann and Mel talk about cats?", STATEMENTS,
                            RELEVANCE) == []


# Two friends talk; the other one's replies repeat the name and the question's words.
EN = {
    "answer": "Ann: I finally signed up for a pottery class on Mondays.",
    "replies": ["Mel: Ann, your pottery class sounds fun, Ann!",
                "Mel: Wow Ann, a class on Mondays, Ann? Great, Ann!"],
    "query": "What class did Ann sign up for?",
}
ZH = {
    "answer": "小安：我终于报名了周一的陶艺课。",
    "replies": ["小美：小安，你的陶艺课听起来很有意思，小安！",
                "小美：哇小安，周一的课吗小安？太好了小安！"],
    "query": "小安报名了什么课？",
}


class TestTheSpeakerRoute:
    @pytest.mark.parametrize("talk", [EN, ZH], ids=["en", "zh"])
    def test_lifts_the_named_persons_own_words_above_replies_that_name_them(
        self, engine: Engine, index: VectorIndex, talk: dict[str, object]
    ) -> None:
        answer = remember(engine, index, str(talk["answer"]), days_ago=30)
        for i, text in enumerate(talk["replies"]):  # type: ignore[attr-defined]
            remember(engine, index, str(text), days_ago=29 - i)
        on = find(engine, index, str(talk["query"]), speaker=0.6)
        assert on[0].id == answer.id
        assert "speaker" in on[0].routes

    def test_changes_nothing_where_memories_have_no_speaker(
        self, engine: Engine, index: VectorIndex
    ) -> None:
        remember(engine, index, "The user signed up for a pottery class.", days_ago=3)
        remember(engine, index, "The user's sister Ann likes pottery.", days_ago=2)
        on = find(engine, index, "What class did Ann sign up for?", speaker=0.6)
        off = find(engine, index, "What class did Ann sign up for?", speaker=0.0)
        assert [c.id for c in on] == [c.id for c in off]
        assert all("speaker" not in c.routes for c in on)
