"""The service never remembers its own echo (DESIGN rule 2, last bullet; issue 39, item 3).

An agent puts what sleepmem gave it (the context block, search cards, memory ids) into
the messages it emits. Those words are the service's own and are not read again; the
agent's and the user's other words in the same turn are read as before, and a user who
says again what they said before still mentions it.

Real path: emit → drain → consolidate with the rules extractor; SQLite, the machine's
Redis, the embedded index.
"""

from __future__ import annotations

import pytest
from sqlmodel import Session, col, select

from sleepmem.context import ContextBuilder
from sleepmem.evals.harness import ingest
from sleepmem.models import Memory, MemoryStatus, RawEvent, Scope, SearchRequest
from sleepmem.pipelines.context import HEADINGS, REF_CHARS
from sleepmem.pipelines.lifecycle.reconsolidate import create_job, run_job
from sleepmem.reader import Reader
from sleepmem.resources import Resources

TURN = {"tenant": "acme", "agent": "bot", "user": "ann", "session": "s1"}
SAID = ["My name is Ann.", "I'm vegetarian.", "I live in Lyon."]


def say(res: Resources, *turns: tuple[str, str]) -> None:
    ingest(res, [{**TURN, "role": role, "content": content} for role, content in turns])


def current(res: Resources) -> dict[str, Memory]:
    with Session(res.engine) as s:
        rows = s.exec(select(Memory).where(col(Memory.status).in_(
            [MemoryStatus.active.value, MemoryStatus.pending_confirmation.value])))
        return {m.id: m for m in rows}


def vegetarian(res: Resources) -> list[Memory]:
    return [m for m in current(res).values()
            if m.type == "preference" and "vegetarian" in m.statement]


def notes(res: Resources, question: str) -> str:
    """What the documented agent loop puts in its prompt: the context block's text."""
    ctx = ContextBuilder(res).build({"scope": TURN, "query": question, "budget_tokens": 300})
    return ctx.text


def new_since(res: Resources, before: dict[str, Memory]) -> list[Memory]:
    return [m for mid, m in current(res).items() if mid not in before]


@pytest.fixture
def res(resources: Resources) -> Resources:
    say(resources, *(("user", line) for line in SAID))
    (pref,) = vegetarian(resources)
    assert pref.mention_count == 1
    return resources


class TestAnEchoedContextBlockIsNotRememberedAgain:
    @pytest.mark.parametrize("role", ["system", "assistant", "user"])
    def test_a_message_that_carries_the_block_it_was_given_stores_nothing(
        self, res: Resources, role: str
    ) -> None:
        block = notes(res, "What should I cook tonight?")
        assert "The user is vegetarian." in block  # the block does show the preference
        before = current(res)
        say(res, (role, block))
        assert current(res).keys() == before.keys()
        (pref,) = vegetarian(res)
        assert pref.mention_count == 1

    def test_the_documented_agent_loop_keeps_the_turn_but_not_the_notes_it_echoes(
        self, res: Resources
    ) -> None:
        # docs/client.md: the reply carries the notes, and both messages are emitted.
        question = "What should I cook tonight?"
        block = notes(res, question)
        reply = f"(call your LLM with the notes and the question)\n{block}"
        before = current(res)
        say(res, ("user", question), ("assistant", reply))
        added = new_since(res, before)
        assert any(question in m.statement for m in added)  # the turn itself is read
        for m in added:
            assert "[#" not in m.statement
            assert not any(h in m.statement for h in HEADINGS)
            assert "vegetarian" not in m.statement and "Lyon" not in m.statement
        (pref,) = vegetarian(res)
        assert pref.mention_count == 1

    def test_a_block_the_agent_flattened_onto_one_line_is_still_recognised(
        self, res: Resources
    ) -> None:
        flat = " ".join(notes(res, "Where do I live?").split())
        before = current(res)
        say(res, ("assistant", f"Notes: {flat}"))
        added = new_since(res, before)
        assert all("[#" not in m.statement and "Lyon" not in m.statement for m in added)
        (pref,) = vegetarian(res)
        assert pref.mention_count == 1


class TestTheOtherWordsOfThatTurnAreStillRead:
    def test_a_new_fact_beside_the_echoed_block_becomes_a_memory(self, res: Resources) -> None:
        block = notes(res, "Any dinner ideas?")
        before = current(res)
        say(res, ("user", f"{block}\nBy the way, I'm allergic to peanuts."))
        added = new_since(res, before)
        assert any("allergic to peanuts" in m.statement for m in added)
        assert all("[#" not in m.statement and "vegetarian" not in m.statement for m in added)
        (pref,) = vegetarian(res)
        assert pref.mention_count == 1

    def test_the_memory_records_how_much_echo_was_cut_from_its_turn(
        self, res: Resources
    ) -> None:
        block = notes(res, "Any dinner ideas?")
        before = current(res)
        say(res, ("user", f"{block}\nI work at Airbus."))
        (job,) = [m for m in new_since(res, before) if "Airbus" in m.statement
                  and m.type != "event"]
        assert job.details["echo_chars"] >= len(block)
        with Session(res.engine) as s:  # the raw log keeps the turn as it was emitted
            raw = s.exec(select(RawEvent).where(col(RawEvent.content).contains("Airbus"))).one()
        assert block in raw.content


class TestIdsTheServiceShowedAreNotStored:
    def test_ids_and_cards_from_a_search_that_come_back_in_a_turn_are_not_stored(
        self, res: Resources
    ) -> None:
        found = Reader(res).search(SearchRequest(query="what do I eat", scope=Scope(**TURN),
                                                 k=3))
        cards = found.flat()
        assert cards
        ids = [c.id for c in cards]
        before = current(res)
        say(res,
            ("tool", found.model_dump_json()),
            ("assistant", f"I checked memory {ids[0]} and #{ids[-1][:REF_CHARS]}. "
                          "Enjoy the trip to Rome!"))
        added = new_since(res, before)
        assert any("Rome" in m.statement for m in added)  # the agent's own words are read
        for m in added:
            assert not any(i in m.statement or i[:REF_CHARS] in m.statement for i in ids)
            assert "vegetarian" not in m.statement


class TestWordsThatOnlyResembleAMemoryAreStillAMention:
    def test_a_user_restating_a_preference_beside_the_echo_mentions_it_once(
        self, res: Resources
    ) -> None:
        # The block shows "The user is vegetarian."; the user's own "I'm still vegetarian"
        # in the same message carries no ref of the service: it is a real repeat.
        block = notes(res, "Any dinner ideas?")
        before = current(res)
        say(res, ("user", f"{block}\nI'm still vegetarian, as I said."))
        (pref,) = vegetarian(res)
        assert pref.mention_count == 2
        # A repeat, and only that: the echo beside it did not become a memory of its own.
        assert current(res).keys() == before.keys()


class TestReplayReadsTheLogAsTheLivePipelineDid:
    def test_a_replay_of_a_log_that_holds_an_echo_derives_nothing_from_it(
        self, res: Resources
    ) -> None:
        say(res, ("assistant", notes(res, "What should I cook tonight?")))
        key = Scope(**{**TURN, "session": ""}).key
        job = create_job(engine=res.engine, scope_key=key, now=res.ports().clock())
        done = run_job(engine=res.engine, ports=res.ports(), settings=res.settings,
                       job_id=job.id)
        assert done.result["counts"]["added"] == 0
        assert done.result["counts"]["removed"] == 0
