"""Conflicts: two trusted statements of one thing that disagree without a change.

A trusted tool field and what the user said about the same thing
(:meth:`Conflicts.tool_counterpart`): agreeing, one memory mentioned twice; disagreeing, a
conflict set. Two trusted values of one slot with no marker of a change
(:meth:`Conflicts.disagreement`): the rule asks the user (a conflict set, DESIGN rule 2);
a judge model, when there is one, may read the pair as a change, one thing said twice, or
two things that both hold.
"""

from __future__ import annotations

from sleepmem.models import Memory, MemoryStatus, Trust
from sleepmem.pipelines import semantic
from sleepmem.pipelines.language import has_cjk
from sleepmem.pipelines.lexical import tokens
from sleepmem.pipelines.memories import memory_id, norm_text
from sleepmem.pipelines.text import as_said_by_user
from sleepmem.pipelines.types import Candidate, Op
from sleepmem.pipelines.write.resolve.book import Book
from sleepmem.pipelines.write.resolve.duplicate import Duplicates
from sleepmem.pipelines.write.resolve.pairs import Pairs
from sleepmem.pipelines.write.resolve.readings import (
    as_said,
    key_words,
    leaf_words,
    mentions,
    reading,
    tooled,
    value_of,
)
from sleepmem.pipelines.write.resolve.update import Updates
from sleepmem.pipelines.write.verdicts import Verdict
from sleepmem.pipelines.write.versions import AuditDraft


class Conflicts:
    """Conflict sets: a tool against the user, two trusted values of one slot."""

    def __init__(self, book: Book, pairs: Pairs, duplicates: Duplicates,
                 updates: Updates) -> None:
        self.book = book
        self.pairs = pairs
        self.duplicates = duplicates
        self.updates = updates

    def tool_counterpart(self, cand: Candidate) -> tuple[Memory, bool] | None:
        """A trusted tool field and what the user said about the same thing.

        Returns the other side and whether they agree. "About the same thing" needs the
        meaning to be close and either the field's key words in the user's words or a
        closer meaning still (another language), so that a tool's renewal date is never
        paired with the user's plan.
        """
        if self.book.meaning is None or cand.trust != Trust.high.value:
            return None
        # A tool's side is a field it returned, under its key path or a known attribute
        # ("email"); the user's side is anything they said, episodes included.
        is_tool = tooled(cand.attribute, cand.source)
        pool = [
            m for m in self.pairs.restatable(cand, None if is_tool else self.pairs.tool_fields)
            if m.trust == Trust.high.value and m.subject == cand.subject
            and tooled(m.attribute, m.source) != is_tool
        ]
        for rank, (mem, sim, same) in enumerate(self.pairs.near(cand, pool)):
            tool_side, user_side = (cand.attribute, as_said(mem.statement, mem.details)) if (
                is_tool) else (mem.attribute, as_said(cand.statement, cand.details))
            value = cand.value if is_tool else str(mem.details.get("value") or value_of(mem))
            said = set(tokens(user_side))
            keyed = bool(set(key_words(tool_side)) & said)
            paired = rank == 0 and sim >= semantic.RELATED and (
                keyed or sim >= semantic.SAME_MEANING_CROSS)
            if not paired:
                # The user's words name the field itself ("I'm on the Pro plan" and
                # "subscription_plan"): what they said is about that field when it is
                # close in meaning to the field named as theirs ("my subscription plan");
                # the record's container words ("account", "customer") would dilute it.
                # Without a word in common ("I am subscribed to the Pro service"), the
                # meaning alone must still say it, at a looser bar, for the nearest pair.
                leaf = " ".join(leaf_words(tool_side))
                bar = semantic.RELATED if set(tokens(leaf)) & said else (
                    semantic.LOOSELY_RELATED if rank == 0 else 2.0)
                # Both in the user's own person and language: "我的工位楼层是五楼" meets
                # "我的工位在三楼" at 0.63, "用户的工位…" against "my 工位楼层" at 0.37.
                # Clause by clause: what else the user's sentence says blurs the one
                # clause about the field ("家里宽带是300兆的，晚上看剧还老卡": 0.43 whole,
                # 0.55 its first clause, against "我的套餐速率是100M").
                parts = semantic.clauses(self.book.gist(as_said_by_user(user_side)))
                paired = bool(leaf) and float(self.book.meaning.pairwise(
                    parts, as_theirs(leaf, value)).max()) >= bar
            if not paired:
                continue
            return mem, self._agree(user_side, value, same=same)
        return None

    def _agree(self, user_side: str, value: str, *, same: bool) -> bool:
        """Whether the user's words give the tool field's value. Two statements of one
        field read close whatever their values ("I pay with Alipay by default" / "default
        payment method: PayPal"), so the sentences' meaning decides only when either side
        has no value to compare: the field's value in the user's words, or the user's value
        (the clause's value span) in the field's or meaning the same as it."""
        if not value:
            return same
        field = norm_text(value)
        if mentions(user_side, field):
            return True
        theirs = norm_text(reading(self.book.gist(user_side)).value)
        if not theirs:
            return same
        if mentions(field, theirs):
            return True
        assert self.book.meaning is not None
        [sim] = self.book.meaning.similarities(theirs, [field])
        return semantic.same_meaning(theirs, field, sim) and sim >= semantic.SAME_VALUE

    def disagreement(self, members: list[Memory], cand: Candidate) -> None:
        """Two trusted statements of one slot disagree with no marker of a change: the
        rule asks the user (a conflict set); a judge model, when there is one, may read
        the pair as a change, one thing said twice, or two things that both hold."""
        head = max(members, key=lambda m: (m.valid_from, m.version))
        verdicts = self.book.verdicts
        verdict = verdicts.of(self.pairs.pair(head, cand)) if verdicts is not None else None
        if verdict is Verdict.UPDATE:
            self.updates.supersede(members, cand, reason="the judge model read it as a change")
        elif verdict is Verdict.SAME:
            self.duplicates.noop(head, cand, "the judge model read it as the same thing")
        elif verdict is Verdict.UNRELATED:
            mem = self.book.add(self.book.new(cand))
            self.book.plan.audits.append(AuditDraft(
                Op.ADD, [], [mem.id], "the judge model found that both hold",
                cand.provenance))
        else:
            self.conflict(members, cand)

    def conflict(self, members: list[Memory], cand: Candidate) -> None:
        """``cand`` and ``members`` wait in one conflict set for a person's answer."""
        set_id = members[0].conflict_set or memory_id(
            "conflict", self.book.plan.scope_key, *sorted(m.id for m in members)
        )
        new = self.book.add(
            self.book.new(cand, status=MemoryStatus.pending_confirmation.value)
        )
        new.conflict_set = set_id
        for m in members:
            row = self.book.plan.touch(m)
            row.status = MemoryStatus.pending_confirmation.value
            row.conflict_set = set_id
        self.book.plan.audits.append(
            AuditDraft(
                Op.CONFLICT,
                [m.id for m in members],
                [new.id, *(m.id for m in members)],
                "two high-trust statements disagree without an explicit change",
                cand.provenance,
            )
        )


def as_theirs(leaf: str, value: str) -> list[str]:
    """A tool field named as the user's own, in the field's language ("my delivery
    address", "我的工位楼层是五楼"): what the user's words about that field read close to."""
    if has_cjk(leaf):
        mine = "我的" + leaf.replace(" ", "")
        return [mine, f"{mine}是{value}" if value else mine]
    return [f"my {leaf}", f"my {leaf} is {value}" if value else f"my {leaf}"]
