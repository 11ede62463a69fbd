"""Where several people talk in one scope, a fact someone states about themself is theirs.

Both extractors read a speaker's own words as "the user" (the rules' vocabulary and the
model's prompt know only one person). In a scope one user shares with others (a group
chat, two friends, an agent relaying what people told it; ``meta.speaker`` names who said
each turn), that reading would put everyone's facts in one slot: one person's new employer
would supersede another's, and the same hobby told by two people would be one memory of
the first. Named here, after extraction and before judgement (the same code for both
extractors), each fact fills its speaker's own slots and says whose it is, so a question
naming the person finds it by the name.

Episodes are left as they are: they already carry the speaker's name in front of their
words ("Caroline: I'm keen on counselling").

The index reads a named fact as the user's again (:func:`unnamed`): the embedder weighs a
name so heavily that every fact of one person would match any question naming them,
whatever it asks, and push that person's episodes (which carry the turn around the fact)
out of the top k. On LoCoMo dev8, facts indexed under their names lost 0.013 of
multi-hop and open-domain recall@10 against the same facts indexed unnamed.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from sleepmem.models import Memory
from sleepmem.pipelines.language.words import Phrases
from sleepmem.pipelines.text import is_zh, norm_value
from sleepmem.pipelines.types import Candidate, EventView

USER = "user"
# The generic subject as the extractors write it: "the user" anywhere (their third-person
# rewrite turns every "I" and "my" into it: "Ann left Acme, the user works at Globex
# now"), a bare "User" opening a statement, and 用户 unless another noun owns it ("小美的
# 用户" are her users, not her).
_GENERIC = re.compile(r"\bthe user(?P<s>'s)?\b|^user(?P<s2>'s)?\b|(?<!的)用户", re.IGNORECASE)


# The extractors' "we" ("the user's team", 用户团队) said by a named person: they and the
# people with them, never their employer's team.
_GROUP = (("the user's team's", "{} and others'"), ("the user's team", "{} and others"),
          ("The user's team's", "{} and others'"), ("The user's team", "{} and others"),
          ("用户团队", "{}他们"))


def named(statement: str, person: str) -> str:
    """The statement with the generic subject ("the user", 用户) replaced by the person's
    name: a fact they stated about themself names only them."""
    for generic, group in _GROUP:
        statement = statement.replace(generic, group.format(person))
    return _GENERIC.sub(lambda m: person + (m.group("s") or m.group("s2") or ""), statement)


# A relative's subject as the extractors write it ("user's sister", 用户的哥哥): the
# speaker's relative, so named after the speaker.
RELATIVE = (("user's ", "{}'s "), ("用户的", "{}的"))


def own_facts(candidates: Sequence[Candidate], events: Sequence[EventView] = ()) -> None:
    """Give each fact a named user stated about themself to that person, in place; and,
    where people talk to each other, "you" to the person spoken to."""
    spoken_to = addressees(events)
    for cand in candidates:
        person = str(cand.details.get("speaker") or "").strip()
        if not person:
            continue
        listener = next((spoken_to[e] for e in cand.provenance if e in spoken_to), "")
        if listener:
            cand.statement = addressed(cand.statement, listener)
        if cand.type == "event":
            continue
        if cand.subject != USER:
            for generic, own in RELATIVE:
                if cand.subject.startswith(generic):
                    cand.subject = (norm_value(person) + own.format("")
                                    + cand.subject[len(generic):])
                    cand.statement = named(cand.statement, person)
            continue
        cand.subject = norm_value(person)
        cand.statement = named(cand.statement, person)


def addressees(events: Sequence[EventView]) -> dict[str, str]:
    """Who each named speaker's turn is spoken to: the last other person who spoke before
    it in the batch. Between people, "you" is never the assistant."""
    out: dict[str, str] = {}
    previous = current = ""
    for event in events:
        person = str(event.meta.get("speaker") or "").strip()
        if not person or event.role != "user":
            continue
        if person != current:
            previous, current = current, person
        if previous:
            out[event.event_id] = previous
    return out


def addressed(statement: str, listener: str) -> str:
    """The extractors' "the assistant" (their reading of "you") as the person spoken to."""
    for generic, name in (("the assistant's", f"{listener}'s"), ("the assistant", listener)):
        statement = statement.replace(generic, name).replace(generic.capitalize(), name)
    return statement


def _latin_letter(ch: str) -> bool:
    return ch.isascii() and ch.isalpha()


def _renamed(text: str, name: str, generic: str) -> str:
    """The text with each mention of ``name`` not inside a Latin word made ``generic``."""
    out, pos = [], 0
    at = text.find(name)
    while at >= 0:
        end = at + len(name)
        if not (_latin_letter(text[at - 1:at] or " ") or _latin_letter(text[end:end + 1] or " ")):
            out += [text[pos:at], generic]
            pos = end
            at = text.find(name, end)
        else:
            at = text.find(name, at + 1)
    return "".join(out) + text[pos:]


def unnamed(mem: Memory) -> str:
    """A named fact's statement with the person's name read as "the user" again (the index
    drops that generic subject); any other memory's statement as it is."""
    person = str(mem.details.get("speaker") or "").strip()
    if not person or mem.type == "event" or mem.subject != norm_value(person):
        return mem.statement
    # Latin letters bound a name ("Jon" is not in "Jonathan"); Chinese has no spaces to,
    # and reads its own generic subject.
    generic = "用户" if is_zh(person) else "the user"
    text = _renamed(mem.statement, person, generic)
    return "The" + text[3:] if text.startswith("the user") else text


_SUBJECT = Phrases(["the user's", "the user", "user's"], prefix=True)


def _without_yonghu(text: str) -> str:
    """The text without each 用户(的)."""
    out: list[str] = []
    pos = 0
    at = text.find("用户")
    while at >= 0:
        out.append(text[pos:at])
        pos = at + (3 if text.startswith("用户的", at) else 2)
        at = text.find("用户", pos)
    return "".join(out) + text[pos:]


def subjectless(text: str) -> str:
    """Drop the generic subject: queries and statements both name "the user", which
    would otherwise make every third-person statement look relevant to every question."""
    return _without_yonghu(_SUBJECT.replace(text, "", eat_space=True)).strip() or text
