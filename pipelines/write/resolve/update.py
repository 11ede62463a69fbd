"""Updates: a newer statement supersedes what it changes, and what told the old state goes
with it.

:meth:`Updates.supersede` appends the new version (by the one versioning rule,
write.versions) and retires every member it replaces, the episodes and summaries that
describe the superseded state in the person's own words, and the fact or episode the old
one was told beside. What a statement ends ("I've given up squash") or reverses ("coffee
is my go-to" after "tea over coffee") is found here too, whatever slot it was read into.
"""

from __future__ import annotations

from datetime import datetime

from sleepmem.models import Memory, Trust
from sleepmem.pipelines import semantic
from sleepmem.pipelines.memories import norm_text, own_words
from sleepmem.pipelines.types import TOOL_PREFIX, Candidate, Op
from sleepmem.pipelines.write.resolve.book import Book
from sleepmem.pipelines.write.resolve.feedback import Feedback
from sleepmem.pipelines.write.resolve.pairs import Pairs
from sleepmem.pipelines.write.resolve.readings import (
    CHANGEABLE,
    exclusive,
    is_open,
    last_turn,
    mentions,
    quotes_state,
    reading,
    said_words,
    unprefixed,
    value_of,
)
from sleepmem.pipelines.write.versions import AuditDraft, successor


class Updates:
    """Supersession, and what a change ends or reverses."""

    def __init__(self, book: Book, pairs: Pairs, feedback: Feedback) -> None:
        self.book = book
        self.pairs = pairs
        self.feedback = feedback

    def ended(self, cand: Candidate) -> list[Memory]:
        """The speaker's current memories whose value a statement ends ("I've given up
        squash" ends "I love playing squash with colleagues"), whatever slot or type
        each was read into: what was given up no longer holds."""
        ended = cand.details.get("ends")
        if not isinstance(ended, str) or not ended or cand.trust == Trust.low.value:
            return []
        return [m for m in self.pairs.said_before(cand, self.pairs.slotted.get(cand.subject, set()))
                if m.subject == cand.subject and m.type in CHANGEABLE
                and m.attribute != cand.attribute and not m.attribute.startswith(TOOL_PREFIX)
                and (mentions(value_of(m), ended) or mentions(m.statement, ended))]

    def reversal(self, cand: Candidate) -> list[Memory]:
        """The speaker's earlier likings that ranked below their value what ``cand`` now
        likes ("I prefer tea over coffee", then "coffee is my go-to"): a reversal of one
        taste, where two likings side by side would both stand."""
        if self.book.meaning is None or cand.type != "preference" or cand.source != "user" or (
                cand.negated or cand.trust == Trust.low.value):
            return []
        said = self.book.gist(said_words(cand))
        near = self.pairs.turn_neighbours([said], semantic.LOOSELY_RELATED)
        ranked = [(m, below) for m in self.pairs.said_before(cand, near)
                  if m.type == "preference" and m.source == "user" and m.subject == cand.subject
                  and (below := reading(self.book.gist(last_turn(m.statement))).below)]
        # Only a candidate some neighbour's comparison could be about is parsed.
        value = (reading(said).value or norm_text(cand.value)) if ranked else ""
        return [m for m, below in ranked
                if value and (mentions(value, below) or mentions(below, value))]

    def supersede(self, members: list[Memory], cand: Candidate, *, reason: str = "") -> None:
        """``cand`` becomes the new version of ``members`` (one UPDATE), and what told
        their state goes with them."""
        # The new version continues the lineage of the newest of what it replaces.
        head = max(members, key=lambda m: m.version)
        new = self.book.add(successor(self.book.new(cand), of=head))
        for m in members:
            self.book.retire(m, at=cand.valid_from, by=new.id)
            self.retire_episodes(m, by=new.id, at=cand.valid_from)
            self._retire_told_beside(m, cand, by=new.id)
        self.book.plan.audits.append(
            AuditDraft(
                Op.UPDATE,
                [m.id for m in members],
                [new.id],
                reason or (
                    "explicit change" if cand.change else "newer statement of equal or higher trust"
                ),
                cand.provenance,
            )
        )
        if cand.details.get("disputes"):
            self.feedback.retire_disputed(cand, by=new.id)

    def _retire_told_beside(self, old: Memory, cand: Candidate, *, by: str) -> None:
        """A person's history is kept twice, as their fact and in the turn's episode
        (extract.sentences.read_statements): a correction of either retires the other, when
        it is about what the correction says."""
        if not (old.type == "event" or old.details.get("history")):
            return
        told = set(old.provenance)
        beside = [m for m in self.book.current()
                  if m.id != by and told & set(m.provenance)
                  and (m.type == "event" or m.details.get("history"))
                  and m.details.get("speaker") == old.details.get("speaker")]
        for mem, sim, _same in self.pairs.near(cand, beside):
            if sim < semantic.RELATED:
                break
            self.book.retire(mem, at=cand.valid_from, by=by)
            self.book.plan.audits.append(AuditDraft(
                Op.INVALIDATE, [mem.id], [by], "told beside a corrected memory", []))

    def retire_episodes(self, old: Memory, *, by: str | None, at: datetime) -> None:
        """Episodes and summaries that describe a superseded state stop counting as current:
        when the old memory's slot holds one value at a time (a residence, an employer),
        those that name that value.

        A value of a slot that holds many at once (a hobby, a liking) is no state that
        ends for everything else: "we went hiking" stays a true record when a hobby
        changes, and such values are often common words ("making", "for fun"). Nor does
        the episode a value was taken from go for that alone: it says other things too.
        Where several people share the scope, only the person's own episodes describe their
        state: another's week in Oslo stays when they move away from it. And only in their
        own words: a reply keeps the turn it answers, and its speaker's name, in front.
        """
        # An open slot is named by a clause's head, its value a span of the clause: neither
        # names a state that other words about the value describe.
        value = value_of(old) if exclusive(old) and not is_open(old.attribute) else ""
        if len(value) < 2:
            return
        speaker = old.details.get("speaker")
        for mem in self.book.current():
            if mem.type not in ("event", "summary") or mem.attribute or mem.id == by:
                continue
            if mem.details.get("speaker") != speaker:
                continue
            if mentions(unprefixed(own_words(mem), speaker), value) or quotes_state(
                    mem, old, value):
                self.book.retire(mem, at=at, by=by)
                self.book.plan.audits.append(
                    AuditDraft(
                        Op.INVALIDATE,
                        [mem.id],
                        [by] if by else [],
                        "describes a superseded state",
                        [],
                    )
                )

