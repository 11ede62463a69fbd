"""What a language pack gives the write path: a typed reading of every clause.

A reading says whose a clause is, its polarity, mood and time, and what it is about (the
clause's head and the span that is its value). The attribute itself is not a pack's
business: it comes from meaning (``sleepmem.pipelines.write.extract.frames``), which is the same
for every language because the embedder is multilingual.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from typing import Protocol


class Owner(StrEnum):
    SPEAKER = "speaker"  # "I ...", "my flat ...", or a subject left out ("finally unpacked")
    IMPLICIT = "implicit"  # no person at all ("Lisbon is home now"): the speaker's, if meant
    OTHER = "other"  # a named or related other person ("my sister lives in Rome")
    NOBODY = "nobody"  # a hypothetical ("if I ever move to Oslo"): nobody's fact


class Mood(StrEnum):
    STATEMENT = "statement"
    QUESTION = "question"
    INSTRUCTION = "instruction"  # an imperative, or a request asked as a question
    WISH = "wish"


class Time(StrEnum):
    LASTING = "lasting"
    HABITUAL = "habitual"
    ONE_OFF = "one-off"  # this moment only ("tired today", "in Tokyo this week")
    PAST = "past"  # a finished event ("went to a support group yesterday")
    FUTURE = "future"  # a plan ("we'll move next year")
    POSSIBLE = "possible"  # what may or should be ("we should meet", "I'd buy a boat")


@dataclass(frozen=True, slots=True)
class Reading:
    """One clause, read.

    ``change`` is True when a time word says the clause holds from now on, or no longer
    ("now", "these days", "anymore", 以后, 不再): such a clause updates what it is about.
    ``other`` names the other person an OTHER clause is about ("sister", "Anna", "哥哥").
    ``head`` is the clause's predicate as a lemma ("live_in", "have", "be_home"), the open
    attribute when no prototype fits; ``value`` is the span the clause states, lower case;
    ``replaces`` the one a contrast denies ("it's a Persian, not a Siamese", 是二中不是一中),
    the clause itself affirmed.
    """

    text: str
    owner: Owner
    mood: Mood
    time: Time
    negated: bool = False
    change: bool = False
    # The negation is an end: the clause's verb ends what its value was ("quit coffee",
    # "gave up tea", 戒了咖啡), a change of what was true, where "not" only denies.
    ends: bool = False
    other: str = ""
    head: str = ""
    value: str = ""
    replaces: str = ""  # "a Persian, not a Siamese": the value the clause denies
    # The alternative a comparison ranks below the value: "tea over coffee", "tea rather
    # than coffee", 比起咖啡更喜欢茶 (coffee). Both stand; a later liking of it reverses it.
    below: str = ""
    # The clause talks about the talk or a passing state, not the world: an opinion ("I
    # think …"), a feeling ("happy with the answer"), the conversation ("my question is"),
    # or a thing only pointed at ("I like that idea").
    about_talk: bool = False
    # A fragment with no predicate ("From Lisbon, on the early flight.") answers something
    # said before it; alone it states nothing.
    fragment: bool = False
    # The clause's own words, without the clauses joined to it: what its meaning is judged
    # on ("新家在杭州" of "新家在杭州，上周末总算把东西都搬完了").
    clause: str = ""
    # The sentence once per value when it states several joined by "and" ("I love sci-fi
    # and gardening" -> "I love sci-fi.", "I love gardening."): each is a memory with its
    # own recency. Empty when its value is one.
    each: tuple[str, ...] = ()
    # What another clause of the sentence ends, when this one states what holds now
    # ("quit the cafe, I'm doing dog walking full time now": the cafe).
    ended: str = ""
    # The name the clause gives its speaker by the copula alone (我是李明, 李明是我): who
    # they are called, where "我是老师" says what they do.
    name: str = ""

    @property
    def holds(self) -> bool:
        """Whether the clause can state a fact of someone's: it lasts or happened, it is
        owned, it names a value, and it is about the world rather than the talk."""
        return (self.lasting or self.time is Time.PAST) and self.owner is not Owner.NOBODY and (
            self.mood is not Mood.QUESTION and bool(self.value) and not self.about_talk
            and not self.fragment)

    @property
    def lasting(self) -> bool:
        """Whether the clause states something that holds beyond the moment it is said."""
        return self.time in (Time.LASTING, Time.HABITUAL) or (
            self.change and self.time not in (Time.FUTURE, Time.POSSIBLE, Time.ONE_OFF))


class LanguagePack(Protocol):
    """Everything one language knows. Adding a language means adding a pack."""

    code: str

    @property
    def prototypes(self) -> dict[str, tuple[str, ...]]:
        """Attribute -> sentences that mean it, in this language."""
        ...

    def readings(self, texts: list[str]) -> list[Reading]:
        """One reading per text (each a sentence), in order; batched for the parser."""
        ...

    def normalised(self, text: str) -> str:
        """``text`` as the pack reads it: casual spellings put back in standard form
        ("im veggie" -> "I'm veggie"), nothing else changed."""
        ...

    def main_clause(self, text: str) -> str:
        """``text`` from where its main clause starts: without the clauses and words that
        lead into it ("Before I forget, could you wipe …" -> "could you wipe …"), which
        carry none of what the main clause asks or states."""
        ...
