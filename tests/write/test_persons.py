"""Facts a named speaker states about themself are that person's, whichever extractor read
them; episodes and one user's own facts are left as they were."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from sleepmem.models import Scope
from sleepmem.pipelines.memories import new_memory
from sleepmem.pipelines.persons import addressees, named, own_facts
from sleepmem.pipelines.types import Candidate, EventView
from sleepmem.pipelines.write.index import index_text

SCOPE = Scope(tenant="acme", agent="bot", user="chat")
AT = datetime(2026, 5, 1, tzinfo=UTC)


def said(statement: str, *, type: str = "fact", speaker: str | None = "Ann",
         subject: str = "user") -> Candidate:
    details = {"speaker": speaker} if speaker else {}
    return Candidate(type=type, statement=statement, provenance=["e1"], valid_from=AT,
                     scope=SCOPE, subject=subject, attribute="employer", details=details)


def turn(event_id: str, speaker: str) -> EventView:
    return EventView(event_id=event_id, scope=SCOPE, kind="message", role="user",
                     content="…", at=AT, meta={"speaker": speaker})


class TestNamingTheSubject:
    @pytest.mark.parametrize("statement, person, expected", [
        ("The user works at City Hospital.", "Ann", "Ann works at City Hospital."),
        ("The user's email is a@b.c", "Mary Ann", "Mary Ann's email is a@b.c"),
        ("User drives a Volvo.", "Jon", "Jon drives a Volvo."),
        ("用户在学日语。", "小美", "小美在学日语。"),
        ("The user left Acme, the user works at Globex now.", "Ann",
         "Ann left Acme, Ann works at Globex now."),
        ("Her sister works at the user's bank.", "Ann", "Her sister works at Ann's bank."),
        ("用户从华星公司辞职了，现在用户在云帆公司工作。", "小美",
         "小美从华星公司辞职了，现在小美在云帆公司工作。"),
        ("用户的用户大多在上海。", "小美", "小美的用户大多在上海。"),
    ])
    def test_every_generic_subject_becomes_the_persons_name(
        self, statement: str, person: str, expected: str,
    ) -> None:
        assert named(statement, person) == expected

    @pytest.mark.parametrize("statement", [
        "Users of the app like dark mode.", "The users' forum is down again.",
        "我的用户很多。",
    ])
    def test_a_statement_without_the_generic_subject_is_left_as_written(
        self, statement: str,
    ) -> None:
        assert named(statement, "Ann") == statement


class TestOwnFacts:
    def test_a_named_speakers_fact_fills_their_own_slot_and_says_whose_it_is(self) -> None:
        ann, mei = said("The user works at City Hospital."), said("用户在市立医院上班。",
                                                               speaker="小美")
        own_facts([ann, mei])
        assert (ann.subject, ann.statement) == ("ann", "Ann works at City Hospital.")
        assert (mei.subject, mei.statement) == ("小美", "小美在市立医院上班。")

    def test_episodes_one_users_facts_and_facts_about_others_are_untouched(self) -> None:
        episode = said("Ann: The user story is done.", type="event")
        alone = said("The user works at City Hospital.", speaker=None)
        other = said("Bob works at City Hospital.", subject="bob")
        before = [(c.subject, c.statement) for c in (episode, alone, other)]
        own_facts([episode, alone, other])
        assert [(c.subject, c.statement) for c in (episode, alone, other)] == before


class TestYouBetweenPeople:
    """Where people talk to each other, "you" is the person spoken to, never the
    assistant."""

    def test_a_turn_is_spoken_to_the_last_other_person_who_spoke(self) -> None:
        turns = [turn("a1", "Gina"), turn("j1", "Jon"), turn("j2", "Jon"), turn("g2", "Gina")]
        assert addressees(turns) == {"j1": "Gina", "j2": "Gina", "g2": "Jon"}

    def test_the_extractors_assistant_becomes_the_listener(self) -> None:
        cand = said("Gina thinks the assistant's studio is great.", type="event", speaker="Gina")
        cand.provenance = ["g2"]
        own_facts([cand], [turn("j1", "Jon"), turn("g2", "Gina")])
        assert cand.statement == "Gina thinks Jon's studio is great."

    def test_a_turn_nobody_spoke_before_keeps_the_assistant(self) -> None:
        cand = said("The assistant is so talented.", type="event", speaker="Gina")
        cand.provenance = ["g1"]
        own_facts([cand], [turn("g1", "Gina")])
        assert cand.statement == "The assistant is so talented."


class TestIndexingANamedFact:
    """The index reads a named fact as the user's own (a name in the vector would make
    every fact of the person match any question naming them)."""

    @pytest.mark.parametrize("statement, person", [
        ("The user works at City Hospital.", "Ann"),
        ("The user's email is a@b.c", "Mary Ann"),
        ("用户在学日语。", "小美"),
        ("The user left Acme, the user works at Globex now.", "Ann"),
        ("用户从华星公司辞职了，现在用户在云帆公司工作。", "小美"),
        ("The user trains with Jonathan every Sunday.", "Jon"),
    ])
    def test_a_named_fact_is_indexed_as_its_unnamed_self(
        self, statement: str, person: str,
    ) -> None:
        cand = said(statement, speaker=person)
        unnamed = new_memory(cand, scope_key=SCOPE.key, now=AT, ttl=None, extractor="test")
        own_facts([cand])
        named_row = new_memory(cand, scope_key=SCOPE.key, now=AT, ttl=None, extractor="test")
        assert named_row.statement.startswith(person)
        assert index_text(named_row) == index_text(unnamed)

    def test_an_episode_keeps_its_speaker_in_the_index(self) -> None:
        episode = said("Ann: I started at City Hospital today.", type="event")
        row = new_memory(episode, scope_key=SCOPE.key, now=AT, ttl=None, extractor="test")
        assert index_text(row).startswith("Ann")
