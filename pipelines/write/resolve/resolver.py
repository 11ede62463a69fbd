"""The resolver: applies candidates one by one, in event-time order, to a scope's current
memories, each to the decision it calls for (see the package's docstring)."""

from __future__ import annotations

from datetime import datetime

from sleepmem.models import Memory
from sleepmem.pipelines.memories import content_hash, norm_text
from sleepmem.pipelines.semantic import Meaning
from sleepmem.pipelines.types import Candidate, Op, Rejection
from sleepmem.pipelines.write.resolve.book import Book, Plan, ResolvePolicy
from sleepmem.pipelines.write.resolve.by_meaning import ByMeaning
from sleepmem.pipelines.write.resolve.conflict import Conflicts
from sleepmem.pipelines.write.resolve.duplicate import Duplicates
from sleepmem.pipelines.write.resolve.feedback import Feedback
from sleepmem.pipelines.write.resolve.forget import Forgets
from sleepmem.pipelines.write.resolve.pairs import Pairs
from sleepmem.pipelines.write.resolve.procedures import Procedures
from sleepmem.pipelines.write.resolve.slot import SlotJudgement
from sleepmem.pipelines.write.resolve.update import Updates
from sleepmem.pipelines.write.verdicts import Verdicts
from sleepmem.pipelines.write.versions import AuditDraft


class Resolver:
    """Applies candidates one by one, in event-time order, to a scope's current memories."""

    def __init__(
        self,
        *,
        scope_key: str,
        existing: list[Memory],
        now: datetime,
        policy: ResolvePolicy,
        all_versions: list[Memory] | None = None,
        meaning: Meaning | None = None,
        verdicts: Verdicts | None = None,
    ) -> None:
        self.book = Book(scope_key=scope_key, existing=existing, now=now, policy=policy,
                         all_versions=all_versions, meaning=meaning, verdicts=verdicts)
        # Each decision is told which others it defers to: the order below is the order
        # they depend on one another, none on a later one.
        book = self.book
        self.pairs = Pairs(book)
        self.duplicates = Duplicates(book, self.pairs)
        self.feedback = Feedback(book, self.pairs)
        self.updates = Updates(book, self.pairs, self.feedback)
        self.conflicts = Conflicts(book, self.pairs, self.duplicates, self.updates)
        self.by_meaning = ByMeaning(book, self.pairs, self.duplicates, self.updates,
                                    self.conflicts, self.feedback)
        self.slot = SlotJudgement(book, self.pairs, self.duplicates, self.updates,
                                  self.conflicts, self.by_meaning)
        self.forgets = Forgets(book, self.pairs)
        self.procedures = Procedures(book)

    # -- the run's state, as the stages read and set it ----------------------------------
    @property
    def now(self) -> datetime:
        """The time decisions are made at; a replay moves it to when each was made live."""
        return self.book.now

    @now.setter
    def now(self, value: datetime) -> None:
        self.book.now = value

    @property
    def plan(self) -> Plan:
        return self.book.plan

    @property
    def meaning(self) -> Meaning | None:
        return self.book.meaning

    @property
    def verdicts(self) -> Verdicts | None:
        return self.book.verdicts

    @property
    def said(self) -> dict[str, str]:
        """What each event of the batch said, in the speaker's words (set by the stages)."""
        return self.book.said

    def current(self) -> list[Memory]:
        return self.book.current()

    def probe(self) -> Resolver:
        """A resolver over this one's state as it stands, sharing its caches and verdicts:
        what it decides touches none of this one's rows (every change of an existing row
        goes through a copy, Plan.touch), so a batch can be tried on it first."""
        book = self.book
        other = Resolver(scope_key=book.plan.scope_key, existing=book.current(),
                         all_versions=list(book.versions.values()), now=book.now,
                         policy=book.policy, meaning=book.meaning, verdicts=book.verdicts)
        other.book.said = book.said
        other.book.gists, other.book.parts = book.gists, book.parts
        other.pairs.frames = self.pairs.frames
        return other

    def weighs_meaning(self, cand: Candidate) -> bool:
        """Whether ``cand`` is judged by meaning too (see ByMeaning.weighs)."""
        return self.by_meaning.weighs(cand)

    def apply_merge(
        self, cand: Candidate, *, old: Memory | None, op: Op, members: list[str] | None
    ) -> Memory:
        """Append a merged memory (a new profile version, or a session summary)."""
        return self.book.merge(cand, old=old, op=op, members=members)

    # -- the judgement -------------------------------------------------------------------
    def apply(self, cand: Candidate) -> None:
        if cand.forget_topic is not None:
            self.forgets.forget(cand)
        elif cand.type == "procedure":
            self.procedures.record(cand)
        elif cand.attribute:
            self.slot.judge(cand)
        else:
            self._episode(cand)

    def reject(self, rejection: Rejection) -> None:
        self.book.plan.audits.append(
            AuditDraft(
                Op.REJECT,
                [],
                [],
                rejection.reason,
                list(rejection.candidate.provenance),
                content_hash(rejection.candidate.statement),
            )
        )

    def _episode(self, cand: Candidate) -> None:
        same = self.book.by_text.get((cand.scope.session, norm_text(cand.statement)))
        if same is not None and same in self.book.live:
            self.duplicates.noop(self.book.row(same), cand, "repeat of an existing memory")
            return
        if self.by_meaning.decided(cand):
            return
        mem = self.book.add(self.book.new(cand))
        self.book.plan.audits.append(
            AuditDraft(Op.ADD, [], [mem.id], "new memory", cand.provenance))
