"""Procedures: the outcomes of one action for one trigger, counted into one memory.

Suggested only with enough evidence (DESIGN rule 8): hidden below the policy's minimum
samples or success rate.
"""

from __future__ import annotations

from sleepmem.pipelines.types import Candidate, Op
from sleepmem.pipelines.write.resolve.book import Book, Slot
from sleepmem.pipelines.write.versions import AuditDraft


class Procedures:
    """Counts procedure outcomes into one statistic per trigger and action."""

    def __init__(self, book: Book) -> None:
        self.book = book

    def record(self, cand: Candidate) -> None:
        """Count ``cand``'s outcome into its procedure (a first one adds it)."""
        success = bool(cand.details.get("success"))
        slot: Slot = (cand.subject, cand.attribute, "")
        members = self.book.slot_members(slot)
        if members:
            row = self.book.plan.touch(members[0])
            row.mention_count += 1
            row.provenance = list(dict.fromkeys([*row.provenance, *cand.provenance]))
            op, before = Op.NOOP, [row.id]
        else:
            row = self.book.add(self.book.new(cand))
            row.details = {"successes": 0, "failures": 0, "trigger": cand.subject,
                           "action": cand.attribute}
            op, before = Op.ADD, []
        details = dict(row.details)
        details["successes" if success else "failures"] = (
            int(details.get("successes" if success else "failures", 0)) + 1
        )
        n = int(details.get("successes", 0)) + int(details.get("failures", 0))
        rate = int(details.get("successes", 0)) / n if n else 0.0
        # Suggested only with enough evidence (DESIGN rule 8).
        policy = self.book.policy
        details["hidden"] = (
            n < policy.procedure_min_samples or rate < policy.procedure_min_success_rate
        )
        details["success_rate"] = round(rate, 3)
        row.details = details
        row.statement = (
            f"When handling a {row.subject}: {row.attribute} "
            f"({details['successes']} of {n} outcomes succeeded)."
        )
        row.confidence = round(rate, 3)
        self.book.plan.audits.append(
            AuditDraft(op, before, [row.id], "outcome recorded", cand.provenance)
        )

