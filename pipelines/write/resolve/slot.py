"""The slot judgement: a candidate with a slot (subject + attribute) against what the slot
holds.

An empty slot: what the candidate ends, reverses or changes in other words, else the
judgement by meaning, else a new memory. A slot that holds values: a repeat (a mention),
another value of a many-valued or open slot (both stand), a low-trust statement against
a trusted one (rejected), a negation (invalidated), a change or a newer trusted word
(superseded), or two trusted values that disagree (a conflict set).
"""

from __future__ import annotations

from sleepmem.models import Memory, Trust
from sleepmem.pipelines.memories import content_hash, norm_text
from sleepmem.pipelines.types import OPEN_SLOT_PREFIX, Candidate, Op, is_many_valued
from sleepmem.pipelines.write.resolve.book import Book, Slot
from sleepmem.pipelines.write.resolve.by_meaning import ByMeaning
from sleepmem.pipelines.write.resolve.conflict import Conflicts
from sleepmem.pipelines.write.resolve.duplicate import Duplicates
from sleepmem.pipelines.write.resolve.pairs import Pairs
from sleepmem.pipelines.write.resolve.readings import (
    ADDITIVE,
    corrective,
    corrects,
    mentions,
    named,
    restates_own_taste,
    said_words,
    shifts,
    value_of,
)
from sleepmem.pipelines.write.resolve.update import Updates
from sleepmem.pipelines.write.versions import AuditDraft


class SlotJudgement:
    """Decides what a slotted candidate does to its slot."""

    def __init__(self, book: Book, pairs: Pairs, duplicates: Duplicates, updates: Updates,
                 conflicts: Conflicts, by_meaning: ByMeaning) -> None:
        self.book = book
        self.pairs = pairs
        self.duplicates = duplicates
        self.updates = updates
        self.conflicts = conflicts
        self.by_meaning = by_meaning

    def judge(self, cand: Candidate) -> None:
        """Decide what ``cand`` does to its slot, and record it in the plan."""
        slot: Slot = (cand.subject, cand.attribute, cand.scope.session)
        members = self.book.slot_members(slot)
        value = norm_text(cand.value or cand.statement)
        if not members and (ended := self.updates.ended(cand)):
            self.updates.supersede(ended, cand, reason="an end of what these memories hold")
            return
        if not members and (reversed_ := self.updates.reversal(cand)):
            self.updates.supersede(reversed_, cand,
                            reason="a liking for what an earlier one ranked below")
            return
        if not members and shifts(cand) and cand.trust != Trust.low.value and (
                framed := self.pairs.framed(cand)):
            # A change of a frame whose own slot is empty updates what the scope said of
            # that frame in other words, an episode as much as a fact: all of it when the
            # frame holds one value, what the change names or is about when it holds many
            # ("done with coffee, it's matcha now" retires the espresso, not the tea).
            if is_many_valued(cand.attribute, cand.details):
                framed = named(framed, cand) or self.pairs.about(cand, framed)
            if framed and self.duplicates.twin_in_slot(cand, framed) is None:
                self.updates.supersede(framed, cand, reason="a change of what these memories mean")
                return
        if not members:
            if cand.negated and not cand.value:
                self.book.plan.audits.append(
                    AuditDraft(Op.NOOP, [], [], "negation of an unknown slot", cand.provenance)
                )
                return
            if self.by_meaning.decided(cand):
                return
            mem = self.book.add(self.book.new(cand))
            self.book.plan.audits.append(
                AuditDraft(Op.ADD, [], [mem.id], "new memory", cand.provenance)
            )
            return

        same = [m for m in members if value_of(m) == value and not cand.negated]
        if same:
            self.duplicates.noop(same[0], cand, "repeat of an existing memory")
            return
        twin = self.duplicates.twin_in_slot(cand, members) if not cand.negated else None
        if twin is not None:
            self.duplicates.noop(twin, cand, "says what an existing memory says")
            return
        strong = False
        if is_many_valued(cand.attribute, cand.details):
            # "I own a bike" and "I own a car" are both true: only a change (or negation)
            # retires a value, and only the values it is about. An addition marker
            # ("I'm now learning Spanish too") makes it no change.
            last = said_words(cand)
            strong = cand.negated or (
                corrects(last) and not ADDITIVE.search(last))
            if not (strong or shifts(cand)):
                mem = self.book.add(self.book.new(cand))
                self.book.plan.audits.append(
                    AuditDraft(Op.ADD, [], [mem.id], "another value of a many-valued slot",
                               cand.provenance)
                )
                return
            # A change retires the values it names, else those it is about; a strong
            # marker with neither retires them all, a time shift alone none (an addition).
            about = named(members, cand) or self._denied(cand, members) or self.pairs.about(
                cand, members)
            if not about and not strong:
                mem = self.book.add(self.book.new(cand))
                self.book.plan.audits.append(
                    AuditDraft(Op.ADD, [], [mem.id], "another value of a many-valued slot",
                               cand.provenance)
                )
                return
            members = about or members
        elif cand.attribute.startswith(OPEN_SLOT_PREFIX):
            # An open slot is named by a clause's head ("rel:have", "rel:be_home"): two
            # statements with one head need not be about one thing. Only a change or a
            # negation about what the slot holds updates it; anything else stands beside.
            # A contrast in a correction says which: the member that holds the value it
            # denies ("不对，B型，不是O型" after "血型O型").
            about = self._contrasted(cand, members) or (
                self.pairs.about(cand, members) if cand.negated or shifts(cand) else [])
            if not about:
                mem = self.book.add(self.book.new(cand))
                self.book.plan.audits.append(
                    AuditDraft(Op.ADD, [], [mem.id], "unrelated to what the open slot holds",
                               cand.provenance)
                )
                return
            members = about

        # What a person wrote or confirmed counts at least as high trust: an inference
        # never overwrites it, and a disagreeing trusted statement asks again.
        high = [m for m in members if m.trust in (Trust.high.value, Trust.human.value)]
        if cand.trust == Trust.low.value and high:
            self.book.plan.audits.append(
                AuditDraft(
                    Op.REJECT,
                    [m.id for m in high],
                    [],
                    "a low-trust statement never supersedes a high-trust one",
                    cand.provenance,
                    content_hash(cand.statement),
                )
            )
            return

        if cand.negated and not cand.value:
            for m in members:
                self.book.retire(m, at=cand.valid_from, by=None)
                self.updates.retire_episodes(m, by=None, at=cand.valid_from)
            self.book.plan.audits.append(
                AuditDraft(
                    Op.INVALIDATE,
                    [m.id for m in members],
                    [],
                    "explicit negation",
                    cand.provenance,
                )
            )
            return

        explicit = cand.change or cand.negated or strong
        if explicit or not high or cand.trust != Trust.high.value:
            self.updates.supersede(members, cand)
            return
        if restates_own_taste(members, cand):
            self.updates.supersede(members, cand,
                            reason="the same person's later word on their own preference")
            return
        self.conflicts.disagreement(members, cand)

    def _contrasted(self, cand: Candidate, members: list[Memory]) -> list[Memory]:
        """The members a corrective contrast denies: those whose words hold the value it
        denies, else the one that names it by meaning."""
        denied = norm_text(str(cand.details.get("replaces") or ""))
        if len(denied) < 2 or not corrective(cand):
            return []
        return [m for m in members if mentions(m.statement, denied)] or self._denied(
            cand, members)

    def _denied(self, cand: Candidate, members: list[Memory]) -> list[Memory]:
        """The member whose words name, by meaning, the value a contrast denies ("Mimi is
        a Persian, not a Siamese" against "是一只暹罗猫"): what it replaces when no member
        holds that value in the contrast's own words (Pairs.naming)."""
        denied = norm_text(str(cand.details.get("replaces") or ""))
        named_one = self.pairs.naming(denied, members) if (
            len(denied) >= 2 and corrective(cand)) else None
        return [named_one] if named_one is not None else []
