"""Small talk is remembered (briefly) but is never an answer to a question about
something else: "bye" does not come back for an allergy question, while a query about
the conversation itself still finds it."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from sqlmodel import Session

from sleepmem.evals.harness import ingest
from sleepmem.models import Memory
from sleepmem.reader import Reader, build_request
from sleepmem.resources import Resources

ANN = {"tenant": "acme", "agent": "bot", "user": "ann"}
TURNS = ["Hi there!", "I am allergic to peanuts.", "I live in Berlin.", "ok thanks", "bye",
         "thank you so much, bye!", "great, see you"]


def conversation(*, ended: bool) -> list[dict[str, str]]:
    events = [{**ANN, "session": "s1", "role": "user", "content": t} for t in TURNS]
    if ended:
        events.append({**ANN, "session": "s1", "kind": "session_end", "role": "system",
                       "content": ""})
    return events


@pytest.fixture(params=[False, True], ids=["session-open", "session-ended"])
def remembered(request: pytest.FixtureRequest, resources: Resources) -> Iterator[Resources]:
    """Open, small talk is kept as episodes of its own; ended, it is compressed into a
    session summary of small talk. Either way the gate marked it as such."""
    ingest(resources, conversation(ended=request.param))
    yield resources


def found(res: Resources, query: str) -> list[Memory]:
    cards = Reader(res).search(build_request(query, scope=ANN, k=5)).flat()
    with Session(res.engine) as s:
        return [m for c in cards if (m := s.get(Memory, c.id)) is not None]


class TestSmallTalkRanking:
    @pytest.mark.parametrize("query", ["What am I allergic to?", "what food should I avoid",
                                       "where do I live"])
    def test_a_question_about_something_else_never_gets_small_talk(
        self, remembered: Resources, query: str
    ) -> None:
        memories = found(remembered, query)
        assert memories, "the question should find the fact it is about"
        assert not [m.statement for m in memories if m.details.get("chitchat")]

    def test_the_small_talk_is_still_remembered_and_found_when_asked_about(
        self, remembered: Resources
    ) -> None:
        memories = found(remembered, "bye")
        assert any(m.details.get("chitchat") and "bye" in m.statement for m in memories)

    def test_the_facts_are_still_there_below_the_answer(self, remembered: Resources) -> None:
        statements = [m.statement for m in found(remembered, "What am I allergic to?")]
        assert "peanuts" in statements[0]
        assert any("Berlin" in s for s in statements)
