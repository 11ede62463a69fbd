"""Duplicates: a candidate that says what a current memory says is a mention of it.

Said again in any wording or language, sentence by sentence (:meth:`Duplicates.twin`),
or within one slot with another value string ("nyc" / "new york city",
:meth:`Duplicates.twin_in_slot`), or so read by the judge model on a pair the rule left
open (:meth:`Duplicates.judged_neighbour`): never a second memory, but a NOOP that counts
the mention once per event, raises importance and slides expiry (:meth:`Duplicates.noop`).
"""

from __future__ import annotations

import numpy as np

from sleepmem.models import Memory
from sleepmem.pipelines import semantic
from sleepmem.pipelines.memories import norm_text
from sleepmem.pipelines.types import Candidate, Op
from sleepmem.pipelines.write.resolve.book import Book
from sleepmem.pipelines.write.resolve.pairs import Pairs
from sleepmem.pipelines.write.resolve.readings import (
    CHANGEABLE,
    content_words,
    corrects,
    marks_correction,
    mentions,
    reading,
    tooled,
    value_of,
)
from sleepmem.pipelines.write.verdicts import Verdict
from sleepmem.pipelines.write.versions import AuditDraft


class Duplicates:
    """Restatements of current memories, and the mention each one counts."""

    def __init__(self, book: Book, pairs: Pairs) -> None:
        self.book = book
        self.pairs = pairs

    def twin(self, cand: Candidate) -> Memory | None:
        """The current memory that already says everything ``cand`` says, if any.

        Compared sentence by sentence: a message that told several facts is one memory,
        and a later restatement of one of them is a mention of it. A candidate that
        carries a correction marker the memory lacks is a change, never a repeat.
        """
        if self.book.meaning is None:
            return None
        mine = self.book.sentences(cand.statement)
        # Only a memory with a sentence at the floor can cover one of the candidate's. A
        # trusted tool's field and the user's words are never weighed here: whether they
        # agree is a question of their values (Conflicts.tool_counterpart), and a field
        # that names another value in close words ("default payment method: PayPal" /
        # "我默认用支付宝付款") is a disagreement to ask about, not a mention.
        tool = tooled(cand.attribute, cand.source)
        pool = [m for m in self.pairs.said_before(
                    cand, self.pairs.sentence_neighbours(mine, semantic.FLOOR))
                if tooled(m.attribute, m.source) == tool]
        if not pool:
            return None
        owners: list[int] = []
        theirs: list[str] = []
        for i, mem in enumerate(pool):
            for part in self.book.sentences(mem.statement):
                owners.append(i)
                theirs.append(part)
        sims = self.book.meaning.pairwise(mine, theirs)
        covered: dict[int, set[int]] = {}
        best: dict[int, float] = {}
        for k, j in zip(*np.nonzero(sims >= semantic.FLOOR), strict=True):
            sim = float(sims[k, j])
            if self.book.meaning.same(mine[k], theirs[j], sim) and (
                    sim >= semantic.SAME_FRAME_SWAP or not self._other_filler(mine[k], theirs[j])):
                covered.setdefault(owners[j], set()).add(int(k))
                best[owners[j]] = max(best.get(owners[j], 0.0), sim)
        marked = marks_correction(cand)
        for i in sorted(covered, key=lambda i: -best[i]):
            if len(covered[i]) < len(mine):
                continue
            if marked and not corrects(pool[i].statement):
                continue
            return pool[i]
        return None

    def _other_filler(self, a: str, b: str) -> bool:
        """Whether two sentences close in meaning give one predicate two values ("I prefer
        coffee in the morning" / "I prefer tea over coffee in the evenings"): the clause
        analysis names each one's head and value, and values that share no word and do
        not mean the same are two statements unless the sentences are as close as a frame
        swap must be ("I live in NYC" / "I live in New York City")."""
        assert self.book.meaning is not None
        ra, rb = reading(a), reading(b)
        if not (ra.head and ra.head == rb.head and ra.value and rb.value) or (
                set(content_words(ra.value)) & set(content_words(rb.value))):
            return False
        [sim] = self.book.meaning.similarities(ra.value, [rb.value])
        return sim < semantic.SAME_VALUE

    def judged_neighbour(self, cand: Candidate) -> tuple[Memory | None, Verdict | None]:
        """The lasting memory nearest a lasting candidate when the rule found no twin but
        the two are related in meaning, and the judge model's verdict on the pair: the
        band where one thing said two ways ("my dietary restrictions include shellfish" /
        "I'm allergic to shellfish") and two things are hardest to tell apart."""
        if self.book.verdicts is None or cand.type not in CHANGEABLE:
            return None, None
        pool = [m for m in self.pairs.said_before(cand) if m.type in CHANGEABLE]
        for mem, sim, _same in self.pairs.near(cand, pool)[:1]:
            if sim < semantic.LOOSELY_RELATED:
                break
            return mem, self.book.verdicts.of(self.pairs.pair(mem, cand))
        return None, None

    def twin_in_slot(self, cand: Candidate, members: list[Memory]) -> Memory | None:
        """A slot member that says what ``cand`` says with another value string ("nyc" /
        "new york city"): the statements must mean the same *and* either the values do too
        or each wording names the other's value, since the extractor already told the
        values apart ("英文" / "中文" differ by one character)."""
        if self.book.meaning is None:
            return None
        for mem, sim, same in self.pairs.near(cand, members)[:1]:
            old, new = value_of(mem), norm_text(cand.value)
            if not new:
                return None
            # One value holds the other ("avid vegetarian" / "vegetarian", said in two
            # languages): the same value, qualified, when the statements are related.
            a, b = set(content_words(old)), set(content_words(new))
            if a and b and (a <= b or b <= a) and sim >= semantic.RELATED and not (
                    marks_correction(cand) or cand.negated):
                return mem
            if not same:
                return None
            # A correction names the value it retires ("gave up the violin"): that is a
            # change, not a misread of the same value.
            if not marks_correction(cand) and (
                (len(old) >= 2 and mentions(cand.statement, old))
                or (len(new) >= 2 and mentions(mem.statement, new))
            ):
                return mem  # each wording names the other's value: one was misread
            if marks_correction(cand) and semantic.frame_swap(new, old):
                return None  # a change between two values that differ in one span
            [sim] = self.book.meaning.similarities(new, [old])
            if semantic.same_meaning(new, old, sim) and sim >= semantic.SAME_VALUE:
                return mem
        return None

    def noop(self, mem: Memory, cand: Candidate, reason: str) -> None:
        """``cand`` says again what ``mem`` says: a mention of it, recorded as a NOOP."""
        row = self.book.plan.touch(mem)
        # A mention is an event: two facts of one message that both restate this memory
        # ("I'm a QA engineer at Initech" after "I work at Initech as a QA engineer") count once.
        if not cand.provenance or any(e not in row.provenance for e in cand.provenance):
            row.mention_count += 1
        row.provenance = list(dict.fromkeys([*row.provenance, *cand.provenance]))
        # Mentions raise importance and slide expiry (DESIGN rules 6 and 11); recency is
        # left alone: only retrieval hits refresh it.
        bump = 0.1 if cand.emphasis else 0.05
        row.importance = min(1.0, max(row.importance, cand.importance) + bump)
        row.confidence = max(row.confidence, cand.confidence)
        ttl = self.book.policy.ttl(row.type)
        if ttl is not None and row.expires_at is not None:
            row.expires_at = max(row.expires_at, self.book.now + ttl)
        self.book.plan.audits.append(
            AuditDraft(Op.NOOP, [row.id], [row.id], reason, cand.provenance))

