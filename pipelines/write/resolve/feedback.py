"""Corrections and feedback: what a correction, a change or negative feedback updates when
its own slot holds nothing.

A slotless correction ("actually …", "not … anymore") updates the memory of its subject
closest to it in meaning; feedback the extractor judged negative disputes what the agent
said from memory, in whatever words; a change of any other wording (a time shift,
"these days") updates the memory it is about (:meth:`Feedback.corrected`). The agent's
turn that such feedback disputed stops counting as current beside the fix
(:meth:`Feedback.retire_disputed`).
"""

from __future__ import annotations

from sleepmem.models import Memory, Trust
from sleepmem.pipelines import semantic
from sleepmem.pipelines.memories import norm_text
from sleepmem.pipelines.semantic import gist
from sleepmem.pipelines.types import TOOL_PREFIX, Candidate, Op
from sleepmem.pipelines.write.resolve.book import Book
from sleepmem.pipelines.write.resolve.pairs import Pairs
from sleepmem.pipelines.write.resolve.readings import (
    CHANGEABLE,
    corrective,
    corrects,
    disputes,
    last_turn,
    marks_correction,
    mentions,
    own_turn,
    shifts,
    value_of,
)
from sleepmem.pipelines.write.versions import AuditDraft


class Feedback:
    """What corrections and negative feedback are about, and what they retire."""

    def __init__(self, book: Book, pairs: Pairs) -> None:
        self.book = book
        self.pairs = pairs

    def corrected(self, cand: Candidate) -> Memory | None:
        """The memory a correction or a change updates when its own slot holds nothing.

        A slotless correction ("actually …", "not … anymore") updates the memory of the
        subject it is closest to in meaning (it inherits the slot). A change of any other
        wording (a time shift, "these days", "from now on"; feedback) updates the memory of
        the same subject and type, in a slot of a compatible kind, that it is *about*: one
        whose value it names or that is related to it in meaning (see :meth:`Pairs.about`).
        """
        if self.book.meaning is None:
            return None
        # A message never corrects itself: "That's out of date, the bus route was cut. I
        # cycle to work now." is one correction, its preamble no second one of the first.
        # A person corrects what they said, never what someone else in the scope said.
        speaker = cand.details.get("speaker")
        last = last_turn(cand.statement)
        # A contrast names what it corrects ("是湘潭，不是长沙"): the value it denies.
        denied = norm_text(str(cand.details.get("replaces") or ""))
        # Feedback the extractor judged negative ("you got that wrong") disputes what the
        # agent said from memory: a correction, whatever words it disputes it in.
        if corrects(last) or disputes(cand):
            # A slotless correction may update any memory of the subject (it inherits the
            # slot); a slotted one only a slotless memory or one of its own slot. What it
            # corrects is judged by the speakers' own turns: the turn before a reply, kept
            # for context, is someone else's words.
            # A slotless correction ("she goes to Hillcrest, not Oakwood") may be about a
            # person the speaker named before: whose fact it corrects, its meaning says.
            # A contrast names what it corrects: any slot holding that value is the one
            # it corrects.
            # Only the nearest counts, and only at RELATED (feedback aside, which may
            # raise a lower one by a sentence): the neighbours at that bar hold it.
            near = None if disputes(cand) else self.pairs.turn_neighbours(
                [gist(last)], semantic.RELATED)
            pool = [
                m for m in self.pairs.said_before(cand, near)
                if (m.subject == cand.subject or not cand.attribute) and (
                    not cand.attribute or not m.attribute or m.attribute == cand.attribute
                    or (len(denied) >= 2 and mentions(value_of(m), denied)))
            ]
            # A contrast names what it corrects in the speaker's own words: the one
            # episode of theirs that says the value it denies ("he does the lighting, not
            # the sound" after "my husband does sound for touring bands": 0.28 as a whole).
            told = [m for m in pool if not m.attribute and mentions(
                own_turn(m.statement, speaker), denied)] if len(denied) >= 2 else []
            if len(told) == 1 and told[0].trust != Trust.low.value:
                return told[0]
            for mem, sim, _same in self.pairs.near(cand, pool, own_turns=True)[:1]:
                if disputes(cand):
                    # Feedback opens with what it disputes ("Hmm, you mixed that up."),
                    # words the memory lacks: its sentences are compared one by one.
                    sim = max(sim, self.pairs.closest_sentence(last, mem))
                # An episode is corrected only by a turn that restates it with another
                # detail, not by any turn on the same theme (see semantic.shares_frame).
                if sim >= semantic.RELATED and not (
                        cand.trust == Trust.low.value and mem.trust == Trust.high.value) and (
                        mem.attribute or semantic.shares_frame(own_turn(cand.statement, speaker),
                                                               own_turn(mem.statement, speaker))):
                    return mem
        # A contrast in feedback or a correction ("no, a librarian, not a cashier") says
        # what it corrects. Said in another language than the memory it corrects (an
        # English fact, "不对，我是安检员，不是行李员"), it shares no word with that memory
        # and reads far from it as a whole: the value it denies names the memory by
        # meaning. Only there: in talk, "not just a feeling", "not for a second" deny
        # nothing anyone said (16 such on LoCoMo dev8, every one a wrong update).
        if len(denied) >= 2 and cand.trust != Trust.low.value and corrective(cand):
            own = norm_text(cand.value)
            named = self.pairs.naming(denied, [
                m for m in self.pairs.said_before(cand, self.pairs.slotted.get(cand.subject, set()))
                if m.subject == cand.subject and m.trust != Trust.low.value
                and not m.attribute.startswith(TOOL_PREFIX)
                and not (len(own) >= 2 and mentions(m.statement, own))])
            if named is not None:
                return named
        if not shifts(cand) or cand.trust == Trust.low.value:
            return None
        # A slotless episode changes a slotted memory only when it says so outright
        # (feedback, or a change the extractor or a correction marker flagged).
        if not cand.attribute and not (cand.details.get("feedback") or marks_correction(cand)):
            return None
        pool = [
            m for m in self.pairs.said_before(cand, self.pairs.slotted.get(cand.subject, set()))
            if m.subject == cand.subject and m.attribute and not m.attribute.startswith(
                TOOL_PREFIX) and m.attribute != cand.attribute
            and (m.type == cand.type or not cand.attribute)
            and m.type in CHANGEABLE
        ]
        about = self.pairs.about(cand, pool)
        return about[0] if about else None

    def retire_disputed(self, cand: Candidate, *, by: str) -> None:
        """The agent's turn that negative feedback disputes stops counting as current when
        the feedback corrects a memory: it said what was corrected ("How is Biscuit the
        golden retriever?"), and the feedback's episode keeps it, as the turn it answers,
        beside the fix."""
        disputed = cand.details["disputes"]
        for mem in self.book.current():
            if (mem.type == "event" and mem.source == "assistant" and mem.id != by
                    and mem.provenance == [disputed]):
                self.book.retire(mem, at=cand.valid_from, by=by)
                self.book.plan.audits.append(AuditDraft(
                    Op.INVALIDATE, [mem.id], [by], "the agent's turn the user's feedback disputed",
                    cand.provenance))

