"""The judgement by meaning, the same for every extractor: a candidate against the scope
by what it means, when its words alone (an exact repeat, its own slot) decided nothing.

In order: a restatement (a mention), the judge model's reading of the nearest related
pair, a trusted tool field against the user's words, a correction by meaning. Episodes
and slotted candidates whose slot holds nothing both come here.
"""

from __future__ import annotations

from sleepmem.pipelines.types import Candidate
from sleepmem.pipelines.write.resolve.book import Book
from sleepmem.pipelines.write.resolve.conflict import Conflicts
from sleepmem.pipelines.write.resolve.duplicate import Duplicates
from sleepmem.pipelines.write.resolve.feedback import Feedback
from sleepmem.pipelines.write.resolve.pairs import Pairs
from sleepmem.pipelines.write.resolve.update import Updates
from sleepmem.pipelines.write.verdicts import Verdict


class ByMeaning:
    """Judges a candidate by meaning; says whether that decided it."""

    def __init__(self, book: Book, pairs: Pairs, duplicates: Duplicates, updates: Updates,
                 conflicts: Conflicts, feedback: Feedback) -> None:
        self.book = book
        self.pairs = pairs
        self.duplicates = duplicates
        self.updates = updates
        self.conflicts = conflicts
        self.feedback = feedback

    def weighs(self, cand: Candidate) -> bool:
        """Whether ``cand`` is judged by meaning too. Not an assistant's or an observer's
        episode, nor small talk: their repeats cost an embedding each and a duplicate of
        them loses nothing (exact repeats are still caught by their text)."""
        return self.book.meaning is not None and not (
            cand.type == "event" and (cand.source not in ("user", "system", "tool")
                                      or cand.inferred or bool(cand.details.get("chitchat")))
        )

    def decided(self, cand: Candidate) -> bool:
        """Judge ``cand`` by meaning against the scope; True when that decided it."""
        if not self.weighs(cand):
            return False
        twin = self.duplicates.twin(cand)
        if twin is not None:
            self.duplicates.noop(twin, cand, "says what an existing memory says")
            return True
        near, verdict = self.duplicates.judged_neighbour(cand)
        if near is not None and verdict is Verdict.SAME:
            self.duplicates.noop(near, cand, "the judge model read it as the same thing")
            return True
        if near is not None and verdict is Verdict.UPDATE:
            if near.attribute and not cand.attribute:
                cand.attribute, cand.subject = near.attribute, near.subject
            self.updates.supersede([near], cand, reason="the judge model read it as a change")
            return True
        pair = self.conflicts.tool_counterpart(cand)
        if pair is not None:
            other, agrees = pair
            if agrees:
                self.duplicates.noop(other, cand, "a trusted tool agrees with what the user said")
            else:
                self.conflicts.conflict([other], cand)
            return True
        old = self.feedback.corrected(cand)
        if old is not None:
            if old.attribute and not cand.attribute:
                cand.attribute, cand.subject = old.attribute, old.subject
            self.updates.supersede([old], cand, reason="a correction of a memory close in meaning")
            return True
        return False

